"""Seed 002's dynamics graph on a floating base with stance feet (issue 28 item 1).

Given the configuration ``q`` (base pose + joints) and velocity ``v`` (base twist + joint
rates), in :mod:`.floating`'s layout, the poses and twists follow from the kinematics
(pose factors and Eq. 4); what is left is the seed's *linear* graph over the link
accelerations ``A_i`` (the base's ``A_0`` among them: a variable now, not the fixed root's
zero), the joint wrenches ``F_j``, per joint ``θ̈_j`` or ``τ_j``, and the ground force ``f_c``
of every stance foot:

* Eq. 5 per joint (the base's ``A_0`` on the parent side of its children);
* Eq. 6 per link with its feet's forces (:func:`.contact_factors.contact_wrench_error`);
  the base's has no parent wrench;
* Eq. 7 per joint;
* per stance foot, zero contact acceleration (:func:`.contact_factors.contact_acceleration_error`),
  the loop closed on the ground (seed 002 §VII).

Forward dynamics (τ known) makes the graph square: it is the KKT system of
:meth:`.floating.FloatingBaseDynamics.constrained_forward` written as factors, and gives
the same ``v̇`` and ``f_c``. Inverse dynamics takes ``v̇`` and either the measured forces or
none: then the forces are unknowns the base's Eq. 6 cannot fix alone (four feet: 12
unknowns, 6 equations), and a unit-weight prior ``f_c = 0`` picks the minimum-norm forces
while the dynamics factors hold exactly (GTSAM's constrained noise), seed 002 §VII's
minimum-torque prior applied to the ground's forces.

Each factor is a ``gtsam.JacobianFactor`` built from the error functions and their
Jacobians at zero unknowns (the graph is exactly linear in them), as
:class:`.dynamics_graph.DynamicsGraph` does for a fixed root.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import gtsam
import numpy as np

from . import contact_factors as cf
from . import graph_factors as gf
from .dynamics_graph import _hard_noise, _jf, key, tree_constants
from .floating import _check_floating
from .model import SpatialModel

__all__ = ['FloatingDynamicsGraph', 'FloatingSolution']

_A, _F, _QDD, _TAU, _FC = 'A', 'F', 'a', 't', 'c'


@dataclass(frozen=True)
class FloatingSolution:
    """Solved graph: v̇ in :mod:`.floating`'s layout, τ, the stance feet's forces."""

    vdot: np.ndarray          # (n + 6,) base [v̇; ω̇] (body frame), then θ̈
    tau: np.ndarray           # (n,)
    f_c: np.ndarray           # (k, 3) ground force on each stance foot, world axes
    A: np.ndarray             # (nb, 6) link accelerations [ω̇; v̇] (body frames)
    F: np.ndarray             # (n, 6) joint wrenches on the child links


class FloatingDynamicsGraph:
    """Builds and solves seed 002's graph for a floating ``SpatialModel`` (constants only)."""

    def __init__(self, model: SpatialModel) -> None:
        _check_floating(model, 'FloatingDynamicsGraph')
        tree_constants(self, model)
        self.contact = {c.name: (i, c.link, np.asarray(c.position, float))
                        for i, c in enumerate(model.contacts)}

    def kinematics(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(T (nb, 4, 4) world poses, V (nb, 6) body twists ``[ω; v]``): the pose factors and
        Eq. 4 solved from the base's pose and twist."""
        T = np.zeros((self.nb, 4, 4))
        V = np.zeros((self.nb, 6))
        x, y, z, w = q[3:7]
        T[0] = gtsam.Pose3(gtsam.Rot3.Quaternion(w, x, y, z), np.asarray(q[:3], float)).matrix()
        V[0] = np.concatenate([v[3:6], v[:3]])
        qj, qdj = q[7:], v[6:]
        for j, p in enumerate(self.model.parent):
            c = j + 1
            Tj = gf.joint_transform(self.T_home[j], self.S[j], qj[j])
            T[c] = T[p] @ Tj
            V[c] = gf.Ad(np.linalg.inv(Tj)) @ V[p] + self.S[j] * qdj[j]
        return T, V

    def linear_graph(self, q: np.ndarray, v: np.ndarray, stance: Sequence[str],
                     tau: np.ndarray | None = None, vdot: np.ndarray | None = None,
                     f_c: np.ndarray | None = None) -> gtsam.GaussianFactorGraph:
        """Forward (``tau`` given) or inverse (``vdot`` given; ``f_c`` given, or unknown with
        the minimum-norm prior) dynamics graph with the feet ``stance`` on the ground."""
        q, v = np.asarray(q, float), np.asarray(v, float)
        if (tau is None) == (vdot is None):
            raise ValueError('give exactly one of tau (forward) or vdot (inverse)')
        inverse = vdot is not None
        feet = [self.contact[name] for name in stance]
        min_norm = inverse and f_c is None and bool(feet)
        hard = _hard_noise(min_norm)
        T, V = self.kinematics(q, v)
        qj, qdj = q[7:], v[6:]
        qdd = np.asarray(vdot, float)[6:] if inverse else np.zeros(self.n)
        zero6 = np.zeros(6)
        gfg = gtsam.GaussianFactorGraph()
        for j in range(self.n):
            p, c = int(self.model.parent[j]), j + 1
            H: list = [None] * 6       # Eq. 5 over (A_p, A_c, V_c, θ, θ̇, θ̈)
            e = gf.accel_error(zero6, zero6, V[c], qj[j], qdj[j], qdd[j], self.T_home_inv[j],
                               self.S[j], H)
            keys, blocks = [key(_A, c), key(_A, p)], [H[1], H[0]]
            if not inverse:
                keys.append(key(_QDD, j))
                blocks.append(H[5])
            gfg.add(_jf(keys, blocks, -e, hard(6)))
            H = [None] * 2             # Eq. 7 over (F_j, τ_j)
            e = gf.torque_error(zero6, 0.0 if inverse else float(tau[j]), self.S[j], H)
            keys, blocks = [key(_F, j)], [H[0]]
            if inverse:
                keys.append(key(_TAU, j))
                blocks.append(H[1])
            gfg.add(_jf(keys, blocks, -e, hard(1)))
        for c in range(self.nb):       # Eq. 6 with the feet on link c
            kids = [(zero6, qj[k], self.T_home_inv[k], self.S[k]) for k in self.children[c]]
            mine = [(i, r) for i, (_, b, r) in enumerate(feet) if b == c]
            known_f = f_c is not None
            forces = [(np.asarray(f_c, float).reshape(-1, 3)[i] if known_f else np.zeros(3), r)
                      for i, r in mine]
            base = c == 0
            nH = (3 if base else 4) + 2 * len(kids) + len(forces)
            H = [None] * nH
            e = cf.contact_wrench_error(zero6, V[c], None if base else zero6,
                                        gtsam.Pose3(T[c]), kids, forces, self.G[c], self.g, H)
            head = 3 if base else 4
            keys, blocks = [key(_A, c)], [H[0]]
            if not base:
                keys.append(key(_F, c - 1))
                blocks.append(H[2])
            for i, k in enumerate(self.children[c]):
                keys.append(key(_F, k))
                blocks.append(H[head + 2 * i])
            if not known_f:
                for m, (i, _) in enumerate(mine):
                    keys.append(key(_FC, i))
                    blocks.append(H[head + 2 * len(kids) + m])
            gfg.add(_jf(keys, blocks, -e, hard(6)))
        if inverse:                    # the base's acceleration is given
            b0 = np.asarray(vdot, float)
            gfg.add(_jf([key(_A, 0)], [np.eye(6)], np.concatenate([b0[3:6], b0[:3]]), hard(6)))
            if min_norm:               # seed 002 §VII: unit-weight prior f_c = 0
                unit = gtsam.noiseModel.Unit.Create(3)
                for i in range(len(feet)):
                    gfg.add(gtsam.JacobianFactor(key(_FC, i), np.eye(3), np.zeros(3), unit))
        else:                          # stance feet do not accelerate
            for i, (_, b, r) in enumerate(feet):
                H = [None] * 3
                e = cf.contact_acceleration_error(gtsam.Pose3(T[b]), V[b], zero6, r, H)
                gfg.add(_jf([key(_A, b)], [H[2]], -e, hard(3)))
        return gfg

    def solve(self, q: np.ndarray, v: np.ndarray, stance: Sequence[str],
              tau: np.ndarray | None = None, vdot: np.ndarray | None = None,
              f_c: np.ndarray | None = None) -> FloatingSolution:
        """Eliminate :meth:`linear_graph` (GTSAM, COLAMD ordering) by QR and read the
        solution (GTSAM's default, Cholesky on the normal equations, squares the condition
        number: Solo's light shanks made that 3e-8 of v̇, as on a fixed arm's wrist)."""
        gfg = self.linear_graph(q, v, stance, tau, vdot, f_c)
        sol = gfg.eliminateSequential(gtsam.Ordering.ColamdGaussianFactorGraph(gfg),
                                      gtsam.EliminateQR).optimize()
        A = np.array([sol.at(key(_A, c)) for c in range(self.nb)])
        if vdot is None:
            qdd = np.array([sol.at(key(_QDD, j))[0] for j in range(self.n)])
            vd = np.concatenate([A[0, 3:], A[0, :3], qdd])
            tau_out = np.asarray(tau, float).copy()
        else:
            vd = np.asarray(vdot, float).copy()
            tau_out = np.array([sol.at(key(_TAU, j))[0] for j in range(self.n)])
        k = len(stance)
        if f_c is not None:
            f = np.asarray(f_c, float).reshape(-1, 3).copy()
        else:
            f = np.array([sol.at(key(_FC, i)) for i in range(k)]).reshape(k, 3)
        F = np.array([sol.at(key(_F, j)) for j in range(self.n)])
        return FloatingSolution(vdot=vd, tau=tau_out, f_c=f, A=A, F=F)

    def forward(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                stance: Sequence[str]) -> FloatingSolution:
        """v̇ and the ground forces under joint torques ``tau`` (seed 002 §V)."""
        return self.solve(q, v, stance, tau=tau)

    def inverse(self, q: np.ndarray, v: np.ndarray, vdot: np.ndarray, stance: Sequence[str],
                f_c: np.ndarray | None = None) -> FloatingSolution:
        """τ for ``v̇`` (seed 002 §IV), with the measured forces ``f_c`` or, without them, the
        minimum-norm forces that balance the base."""
        return self.solve(q, v, stance, vdot=vdot, f_c=f_c)
