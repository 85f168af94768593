"""Constraint forces and joint reactions (seed 003 §6.2.2-6.2.3).

Multipliers: ``Φqᵀ λ = Q + Q_x − M q̈`` (Eq. 6.102/6.103) over *all*
constraint rows, solved with minimum norm (Eqs. 6.104-6.105, via ``lstsq``)
so that redundant constraints (the pick-and-place robot's) get a unique,
well-defined answer. ``−λ_k ∂Φ_k/∂w`` is the force system of constraint k at
the points it involves (Eqs. 6.57-6.63 distance and slider, 6.71-6.81 angle).

Joint reactions in natural coordinates (Eq. 6.101): cut every joint; for a
body e the equilibrium of its own points gives the force that the rest of the
mechanism applies to it at each of its points,

    F_{p,e} = [M_e q̈ − Q_e + Φ_eᵀ λ_e]_p,

with M_e the body's mass matrix (its point masses included), Q_e the loads
that act on e (:meth:`~mbfg_ros.planar.forces.Forces.element_loads`: gravity,
forces and torques on e, its share of every rotational spring, damper and
joint motor as a pure couple, and the loads that act at its points) and
Φ_eᵀ λ_e the forces of the constraints that act on e: its own distance rows,
the sliders at its points and the angle rows of its vectors. A load applied
at a point that several bodies share (a pin) goes to the first body through
it (lowest index). Fixed points enter with their real coordinates, so a
body's ground reaction comes from the same formula.

What is reported, on *each* body of each joint (ground included), as a
force at a point and/or a pure couple (the moment of a force about any point
plus the couple gives the joint's moment on that body):

* ``pin`` at every point shared by two or more bodies, and at every fixed
  point of a body: the force F_{p,e} (no moment: a pin transmits none);
* ``slider``: the normal force (Eqs. 6.62-6.70) on the body of the sliding
  point, and the opposite force at the same contact point on the guide
  (ground for a fixed guide); ``normal`` gives its signed magnitude along the
  left normal of the guide line;
* ``angle`` (a relative coordinate's constraint, Eqs. 6.71-6.81): the couple
  it transmits between its two bodies, equal to the generalized force on that
  coordinate (a motor torque, or zero);
* ``rotational_spring`` and ``actuator`` (joint motors): the couples they
  apply, ``∓`` on their two bodies. They are loads, not reactions, and are
  listed so the moment at each joint can be read off.

Distance constraints hold a body's points at their distances; their forces
act inside one body, so they are not joint entries: ``tension`` gives, per
distance row, the force it carries between its two points (Eq. 6.61,
positive pulling them together). For a massless two-point body (a link) that
is the force of the link on its pins; for a body with mass or with 3+ points
it is the natural-coordinate model's internal force (minimum norm where rows
are redundant).

``Reactions.residual`` is ``max |Φqᵀ λ − (Q + Q_x − M q̈)|``: zero (to
rounding) when the state and loads are consistent; it is the force that no
reaction can balance otherwise (a pose off the constraints, or an
acceleration that the loads do not produce).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..dynamics import System
from ..forces import body_mass_matrix
from ..model import GROUND, Slider

__all__ = ['constraint_multipliers', 'Reactions', 'JointReactions',
           'KINDS']

KINDS = ('pin', 'slider', 'angle', 'rotational_spring', 'actuator', 'friction')
"""The kinds of entry a :class:`Reactions` lists, in the order they are listed."""


def constraint_multipliers(sys: System, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                           Q_extra: np.ndarray | None = None,
                           tau: np.ndarray | None = None) -> np.ndarray:
    """Minimum-norm λ (m,) with ``Φqᵀ λ = Q + Q_extra − M q̈`` (seed 003 Eqs. 6.103-6.105)."""
    Q = sys.forces.evaluate(q, qd, tau, jacobians=False).Q
    if Q_extra is not None:
        Q = Q + Q_extra
    Jq = sys.constraints.phi_q(q)
    return np.linalg.lstsq(Jq.T, Q - sys.mass_matrix(q) @ qdd, rcond=None)[0]


class Reactions(NamedTuple):
    """Joint reactions at one state: one entry per joint and body (see the module doc).

    Entry k acts on body ``bodies[k]`` (``GROUND`` = −1 for the ground): the
    force ``forces[k]`` at ``at[k]`` (the point ``points[k]``; −1 and NaN for
    a pure couple) plus the couple ``moments[k]`` (counter-clockwise positive).
    """

    lam: np.ndarray              # (m,) constraint multipliers (minimum norm)
    labels: tuple[str, ...]      # '<joint>_on_<body>'
    kinds: tuple[str, ...]       # one of KINDS
    joints: tuple[str, ...]      # the joint (point, slider, coordinate, spring, motor) name
    bodies: np.ndarray           # (J,) body index, GROUND for the ground
    points: np.ndarray           # (J,) point index of the force, −1 for a pure couple
    at: np.ndarray               # (J, 2) where the force acts [m]
    forces: np.ndarray           # (J, 2) force on the body [N]
    moments: np.ndarray          # (J,) couple on the body [N m]
    normal: dict                 # slider name -> signed normal force [N]
    tension: dict                # '<body>_<point>_<point>' -> distance-row force [N]
    residual: float              # max |Φqᵀλ − (Q + Q_x − M q̈)|: unbalanced force [N]

    def of_kind(self, kind: str) -> list[int]:
        """Indices of the entries of one kind."""
        return [k for k, c in enumerate(self.kinds) if c == kind]


class _Entry(NamedTuple):
    kind: str
    joint: str
    body: int
    point: int
    at: np.ndarray
    force: np.ndarray
    moment: float


def _cross(r: np.ndarray, f: np.ndarray) -> float:
    return float(r[0] * f[1] - r[1] * f[0])


class JointReactions:
    """Joint reactions of one mechanism (what depends only on the model is built once)."""

    def __init__(self, sys: System) -> None:
        mech = sys.mech
        self.sys = sys
        P, B = len(mech.points), len(mech.bodies)
        self.owners: list[list[int]] = [[] for _ in range(P)]
        for e, body in enumerate(mech.bodies):
            for p in body.points:
                self.owners[p].append(e)
        self.Mb = [body_mass_matrix(body) for body in mech.bodies]
        self.pmass = [(p, m, self.owner(p)) for p, m in mech.point_masses]
        self.pins = [p for p in range(P) if len(self.owners[p]) >= 2
                     or (mech.points[p].fixed and self.owners[p])]
        # Which body each constraint row acts on at each of its points.
        cons = sys.constraints
        self.row_body: list[dict] = []
        for kind, ref in cons.kinds:
            if kind == 'distance':
                self.row_body.append({p: ref for p in mech.bodies[ref].points})
            elif kind == 'slider':
                s = mech.sliders[ref]
                side = {s.point: self.owner(s.point)}
                if s.line is not None:           # the guide: one body through both, if any
                    guide = self.common_body(s.line)
                    side.update({p: self.owner(p) if guide is None else guide
                                 for p in s.line})
                self.row_body.append(side)
            else:
                r = mech.relative[ref]
                if r.points is not None:
                    vecs = [(GROUND, None), (self.common_body(r.points), r.points)]
                else:
                    vecs = [(b, None if b == GROUND else mech.bodies[b].points[:2])
                            for b in r.bodies]
                self.row_body.append({'vectors': vecs})
        self.B = B

    def owner(self, p: int) -> int:
        """The body a load applied at point ``p`` acts on: the first through it, else ground."""
        return self.owners[p][0] if self.owners[p] else GROUND

    def common_body(self, points: tuple[int, ...]) -> int | None:
        """The first body through all ``points``, if any."""
        for e in self.owners[points[0]]:
            if all(e in self.owners[p] for p in points):
                return e
        return None

    def _name(self, b: int) -> str:
        return 'ground' if b == GROUND else self.sys.mech.bodies[b].name

    def __call__(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                 Q_extra: np.ndarray | None = None,
                 tau: np.ndarray | None = None) -> Reactions:
        """Reactions at (q, q̇, q̈) with the actuator efforts ``tau`` and the generalized
        force ``Q_extra`` (e.g. inverse dynamics' Q) added to the modelled loads."""
        sys, mech = self.sys, self.sys.mech
        cons = sys.constraints
        P = len(mech.points)
        pidx = mech.point_index
        wc = cons.ext.of(q)
        pos = wc[cons.point_w]                                   # (P, 2)
        acc = np.zeros((P, 2))
        free = pidx[:, 0] >= 0
        acc[free] = qdd[pidx[free]]
        # Generalized right-hand side and multipliers (Eq. 6.102).
        Q = sys.forces.evaluate(q, qd, tau, jacobians=False).Q
        if Q_extra is not None:
            Q = Q + Q_extra
        Jq = cons.phi_q(q)
        rhs = Q - sys.mass_matrix(q) @ qdd
        lam = np.linalg.lstsq(Jq.T, rhs, rcond=None)[0]
        residual = float(np.max(np.abs(Jq.T @ lam - rhs))) if rhs.size else 0.0

        # need[e, p]: the force the joints must apply to body e at point p (Eq. 6.101).
        need = np.zeros((self.B, P, 2))
        for e, body in enumerate(mech.bodies):
            i, j = body.points[:2]
            f = self.Mb[e] @ np.concatenate((acc[i], acc[j]))
            need[e, i] += f[:2]
            need[e, j] += f[2:]
        for p, m, e in self.pmass:
            if e != GROUND:
                need[e, p] += m * acc[p]
        entries: list[_Entry] = []
        for load in sys.forces.element_loads(q, qd, tau, Q_extra):
            for p, F in zip(load.points, load.forces):
                e = load.body if load.body is not None else self.owner(p)
                if e != GROUND:
                    need[e, p] -= F
            if load.kind in ('rotational_spring', 'actuator', 'friction') \
                    and load.body is not None:
                entries.append(_Entry(load.kind, load.label, load.body, -1,
                                      np.full(2, np.nan), np.zeros(2), load.couple))
        # Constraint forces −λ_k ∂Φ_k/∂w at each point (Eqs. 6.57-6.81).
        Jw = cons.phi_w(q)
        pw = cons.point_w
        normal, tension = {}, {}
        Ga = cons.angle_vector_gradients(q)
        for k, (kind, ref) in enumerate(cons.kinds):
            sides = self.row_body[k]
            if kind != 'angle':
                Fk = {p: -lam[k] * Jw[k, pw[p]] for p in sides}
                for p, e in sides.items():
                    if e != GROUND:
                        need[e, p] -= Fk[p]
            if kind == 'distance':
                i, j = cons.distance_pairs[k]
                d = pos[j] - pos[i]
                # force on i is T (rj − ri)/|rj − ri|
                tension[f'{mech.bodies[ref].name}_{mech.points[i].name}_'
                        f'{mech.points[j].name}'] = float(Fk[i] @ d / np.linalg.norm(d))
            elif kind == 'slider':
                s = mech.sliders[ref]
                Fp = Fk[s.point]
                a, b = self._line(s, wc)
                n = np.array([-(b - a)[1], (b - a)[0]]) / np.linalg.norm(b - a)
                normal[s.name] = float(Fp @ n)
                contact = pos[s.point]
                entries.append(_Entry('slider', s.name, sides[s.point], s.point, contact, Fp,
                                      0.0))
                guides = sorted({sides[p] for p in s.line} if s.line is not None
                                else {GROUND})
                if len(guides) == 1:
                    entries.append(_Entry('slider', s.name, guides[0], s.point, contact, -Fp,
                                          0.0))
                else:
                    for p in s.line:
                        entries.append(_Entry('slider', s.name, sides[p], p, pos[p], Fk[p],
                                              0.0))
            elif kind == 'angle':
                r = mech.relative[ref]
                ga = Ga[ref]
                moments: dict[int, float] = {}
                for (b, pts), grad in zip(sides['vectors'], ga):
                    if pts is None:
                        continue
                    for p, sign in zip(pts, (1.0, -1.0)):    # start −∂Φ/∂v, end +∂Φ/∂v
                        F = sign * lam[k] * grad
                        e = b if b is not None else self.owner(p)
                        if e != GROUND:
                            need[e, p] -= F
                        moments[e] = moments.get(e, 0.0) + _cross(pos[p], F)
                for b, _ in sides['vectors']:
                    if b == GROUND:
                        moments[GROUND] = moments.get(GROUND, 0.0) - sum(
                            v for e, v in moments.items() if e != GROUND)
                for e in sorted(moments, key=lambda e: (e == GROUND, e)):
                    entries.append(_Entry('angle', r.name, e, -1, np.full(2, np.nan),
                                          np.zeros(2), moments[e]))
        # Pins: what is left at each shared or fixed point; the ground takes the rest.
        for p in self.pins:
            name = mech.points[p].name
            total = np.zeros(2)
            for e in self.owners[p]:
                entries.append(_Entry('pin', name, e, p, pos[p], need[e, p].copy(), 0.0))
                total += need[e, p]
            if mech.points[p].fixed:
                entries.append(_Entry('pin', name, GROUND, p, pos[p], -total, 0.0))
        entries.sort(key=lambda x: KINDS.index(x.kind))
        return Reactions(
            lam=lam,
            labels=tuple(f'{x.joint}_on_{self._name(x.body)}' for x in entries),
            kinds=tuple(x.kind for x in entries),
            joints=tuple(x.joint for x in entries),
            bodies=np.array([x.body for x in entries], dtype=int),
            points=np.array([x.point for x in entries], dtype=int),
            at=np.array([x.at for x in entries], dtype=float).reshape(-1, 2),
            forces=np.array([x.force for x in entries], dtype=float).reshape(-1, 2),
            moments=np.array([x.moment for x in entries], dtype=float),
            normal=normal, tension=tension, residual=residual)

    def _line(self, s: Slider, wc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cons = self.sys.constraints
        if s.line is not None:
            return wc[cons.point_w[s.line[0]]], wc[cons.point_w[s.line[1]]]
        return np.array(s.through[0], float), np.array(s.through[1], float)
