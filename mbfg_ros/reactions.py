"""Constraint forces and joint reactions (seed 003 §6.2.2-6.2.3).

Multipliers: ``Φqᵀ λ = Q + Q_x − M q̈`` (Eq. 6.102/6.103) over *all*
constraint rows, solved with minimum norm (Eqs. 6.104-6.105, via ``lstsq``)
so that redundant constraints (the pick-and-place robot's) get a unique,
well-defined answer.

Joint reactions in natural coordinates (Eq. 6.101): for a body e the
equilibrium of its own coordinates gives the force that the rest of the
mechanism applies to it at each of its points,

    F_{p,e} = [M_e q̈ − Q_e + Φq_eᵀ λ_e]_p,

with M_e, Q_e the body's own mass matrix and loads (gravity, forces and
torques given on that body) and Φ_e its own rows (its distances, plus the
angle row of a ``RelativeAngleAbsoluteDOF`` coordinate defined by two of
its points, which carries a motor torque on that coordinate). At a fixed
point the body has no coordinates: the reaction follows from the body's
linear momentum balance ``Σ_p F_{p,e} + F_ext,e = m_e a_G``. A *joint* is
every point shared by two or more bodies and every fixed point of a body;
each (point, body) pair is reported (a pin's two entries are equal and
opposite when no load acts on the pin itself). Loads that act between
points (springs, rotational springs) and point masses belong to the pins,
not to a body.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from .dynamics import System
from .forces import Forces, body_matrix_A, mass_matrix

__all__ = ['constraint_multipliers', 'Reactions', 'JointReactions', 'joint_reactions']


def constraint_multipliers(sys: System, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                           Q_extra: np.ndarray | None = None) -> np.ndarray:
    """Minimum-norm λ (m,) with ``Φqᵀ λ = Q + Q_extra − M q̈`` (seed 003 Eqs. 6.103-6.105)."""
    Q = sys.forces.evaluate(q, qd, None, jacobians=False).Q
    if Q_extra is not None:
        Q = Q + Q_extra
    Jq = sys.constraints.phi_q(q)
    return np.linalg.lstsq(Jq.T, Q - sys.M @ qdd, rcond=None)[0]


class Reactions(NamedTuple):
    """Joint reactions at one state."""

    lam: np.ndarray              # (m,) constraint multipliers (minimum norm)
    labels: tuple[str, ...]      # '<point>_on_<body>'
    forces: np.ndarray           # (J, 2) force on the body at the point [N]


class JointReactions:
    """Joint reaction forces of one mechanism, precomputed per body (immutable)."""

    def __init__(self, sys: System) -> None:
        mech = sys.mech
        self.sys = sys
        pidx = mech.point_index
        self.pidx = pidx
        cons_labels = sys.constraints.labels
        self.bodies = []
        for e, body in enumerate(mech.bodies):
            only = tuple(b if i == e else dataclasses.replace(b, mass=0.0, I0=0.0)
                         for i, b in enumerate(mech.bodies))
            sub = dataclasses.replace(
                mech, bodies=only, point_masses=(), springs=(), rotational_springs=(),
                actuators=(), forces=tuple(f for f in mech.forces if f.body == e),
                torques=tuple(t for t in mech.torques if t.body == e))
            rows = [k for k, lab in enumerate(cons_labels)
                    if lab.startswith(f'distance body{e} ')]
            for r_i, rel in enumerate(mech.relative):
                if rel.points is not None and set(rel.points) <= set(body.points):
                    rows.append(cons_labels.index(f'angle {rel.name}'))
            ext = np.array([0.0, 0.0])
            for f in mech.forces:
                if f.body == e:
                    ext += (f.fx, f.fy)
            self.bodies.append((e, body, mass_matrix(sub), Forces(sub), np.array(rows, int),
                                ext))
        count: dict[int, int] = {}
        for body in mech.bodies:
            for p in body.points:
                count[p] = count.get(p, 0) + 1
        self.joints = [(p, e) for e, body in enumerate(mech.bodies) for p in body.points
                       if count[p] >= 2 or mech.points[p].fixed]
        self.labels = tuple(f'{mech.points[p].name}_on_{mech.bodies[e].name}'
                            for p, e in self.joints)
        self.g = np.array(mech.gravity, dtype=float)

    def __call__(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                 Q_extra: np.ndarray | None = None) -> Reactions:
        sys, mech, pidx = self.sys, self.sys.mech, self.pidx
        lam = constraint_multipliers(sys, q, qd, qdd, Q_extra)
        Jq = sys.constraints.phi_q(q)
        per: dict[tuple[int, int], np.ndarray] = {}
        for e, body, Me, Fe, rows, ext in self.bodies:
            Qe = Fe.evaluate(q, qd, None, jacobians=False).Q
            if len(rows):
                Qe = Qe - Jq[rows].T @ lam[rows]
            gen = Me @ qdd - Qe
            free_sum = np.zeros(2)
            fixed = []
            for p in body.points:
                if mech.points[p].fixed:
                    fixed.append(p)
                else:
                    f = gen[pidx[p]]
                    per[(p, e)] = f
                    free_sum += f
            if fixed:
                # Linear momentum of the body: Σ F + F_ext + m g = m a_G.
                i, j = body.points[:2]
                acc = np.concatenate([qdd[pidx[k]] if pidx[k, 0] >= 0 else np.zeros(2)
                                      for k in (i, j)])
                aG = body_matrix_A(body.cog[0], body.cog[1], body.length) @ acc
                rest = body.mass * (aG - self.g) - ext - free_sum
                for p in fixed:
                    per[(p, e)] = rest / len(fixed)
        forces = np.array([per[j] for j in self.joints]).reshape(-1, 2)
        return Reactions(lam, self.labels, forces)


def joint_reactions(sys: System, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                    Q_extra: np.ndarray | None = None) -> Reactions:
    """Joint reactions at one state (builds a :class:`JointReactions`; keep one for loops)."""
    return JointReactions(sys)(q, qd, qdd, Q_extra)
