"""Direct inverse dynamics for one state by the virtual power method (the per-tick path).

Seed 003 Eq. 6.110: with q̈ = S c + R z̈ (seed 000 Eq. 12) the actuator
efforts τ satisfy ``Rᵀ B_act τ = Rᵀ (M q̈ − Q)`` (Q: gravity, springs,
external forces). Implementation, for the independent constraint rows Φr and
the selector B of the independent coordinates z, with one LU factorisation of

    A = [Φr_q; B]    (n x n, square when the rows and z are independent)

* ``A [q̈, R] = [[c, 0], [z̈, I]]``, c = −Φ̇q q̇ (Eqs. 3, 12): q̈ and R;
* ``Aᵀ u = M q̈ − Q``: then ``Rᵀ(M q̈ − Q) = u[r:]`` and the Lagrange
  multipliers are ``λ = −u[:r]`` (seed 003 Eq. 6.102), for free.

Then τ = u[r:] when the actuators are the z coordinates, else
``(Rᵀ B_act) τ = u[r:]``, minimum-norm when there are more actuators than
degrees of freedom (redundant actuation, seed 003 §6.2.3).

:class:`~mbfg_ros.planar.lean_kinematics.LeanKinematics` (re-exported here) evaluates
the constraint rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.linalg.lapack as lapack

from ...core.errors import MbfgError
from ..dynamics import System
from ..lean_kinematics import KinTerms, LeanKinematics, RowSelection

__all__ = ['LeanKinematics', 'KinTerms', 'RowSelection', 'DirectInverseDynamics',
           'DirectWorkspace', 'inverse_dynamics_direct']


@dataclass
class DirectWorkspace:
    """Per-run buffers of :class:`DirectInverseDynamics` (Pinocchio's Data): one per thread.

    ``lam`` holds, after a call, the multipliers of the rows ``DirectInverseDynamics.rows``
    (seed 003 Eq. 6.102).
    """

    A: np.ndarray          # (n, n) [Φq rows; selector of z], Fortran order for LAPACK
    rhs: np.ndarray        # (n, d + 1)
    c: np.ndarray          # (r,)
    X: np.ndarray          # (n, 2) scratch of the kinematics
    lam: np.ndarray        # (r,)


class DirectInverseDynamics:
    """τ(q, q̇, z̈) for one mechanism, everything precomputed (seed 003 Eq. 6.110).

    ``z_idx``: coordinates whose accelerations are prescribed (default: the
    actuated coordinates when they are independent, else ``sys.z_idx``).
    Actuators are ``sys.mech.actuators`` unless ``actuators`` (coordinate
    indices) is given. ``__call__(q, qd, zdd, ws=None) -> tau``.

    The instance holds only what is fixed for the mechanism (Pinocchio's Model); the
    buffers and the multipliers live in a :class:`DirectWorkspace` (its Data): pass one
    per thread (``workspace()``), or use the instance's own ``.ws``.
    """

    def __init__(self, sys: System, z_idx: Sequence[int] | None = None,
                 actuators: Sequence[int] | None = None) -> None:
        mech = sys.mech
        n = sys.n
        self.sys = sys
        self.lean = LeanKinematics(sys.constraints)
        if actuators is not None:
            self.act = np.array([int(a) for a in actuators], dtype=int)
            self.joint_act = False
        else:
            self.joint_act = sys.forces.joint_actuated
            self.act = np.array([a.coordinate if a.coordinate is not None else -1
                                 for a in mech.actuators], dtype=int)
        if len(self.act) == 0:
            raise MbfgError(f'{mech.source}: actuators: the mechanism has no actuators; add an '
                            '`actuators` list or name the actuated coordinates')
        if len(self.act) < sys.dof:
            raise MbfgError(f'{mech.source}: actuators: {len(self.act)} actuator(s) cannot '
                            f'drive {sys.dof} degrees of freedom (use hybrid dynamics)')
        if z_idx is None:
            z_idx = sys.z_idx
            if not self.joint_act and len(self.act) == sys.dof and _independent(sys, self.act):
                z_idx = tuple(sorted(int(a) for a in self.act))
        self.z_idx = np.array([int(i) for i in z_idx], dtype=int)
        d = self.d = len(self.z_idx)
        if d != sys.dof:
            raise MbfgError(f'{mech.source}: {d} prescribed coordinates given, the mechanism '
                            f'has {sys.dof} degrees of freedom')
        rows = np.asarray(sys.rows, dtype=int)
        mq = self.lean.mq
        self.sel = self.lean.selection(rows)
        # Order of the multipliers in ws.lam: distance/slider rows, then angle rows.
        self.rows = np.concatenate((rows[rows < mq], rows[rows >= mq]))
        r = self.r = len(rows)
        if r + d != n:
            raise MbfgError(f'{mech.source}: {r} independent constraints + {d} coordinates '
                            f'!= {n} coordinates')
        self.Q0 = sys.forces.Q0.copy()
        self.state_forces = sys.forces.state_dependent
        # How τ follows from u_z = Rᵀ(M q̈ − Q).
        pos = {int(z): k for k, z in enumerate(self.z_idx)}
        self.direct = (not self.joint_act and len(self.act) == d
                       and all(int(a) in pos for a in self.act))
        self._perm = np.array([pos[int(a)] for a in self.act]) if self.direct else None
        self.ws = self.workspace()

    def workspace(self) -> DirectWorkspace:
        """Fresh buffers for one thread or run."""
        n, r, d = self.sys.n, self.r, self.d
        A = np.zeros((n, n), order='F')
        A[np.arange(r, n), self.z_idx] = 1.0
        rhs = np.zeros((n, d + 1), order='F')
        rhs[r:, 1:] = np.eye(d)
        return DirectWorkspace(A=A, rhs=rhs, c=np.zeros(r), X=np.zeros((n, 2)),
                               lam=np.zeros(r))

    def _fill(self, q: np.ndarray, qd: np.ndarray, zdd: np.ndarray,
              ws: DirectWorkspace | None) -> DirectWorkspace:
        """[Φq; B] and [c; z̈] of the acceleration problem (seed 000 Eq. 12) into ``ws``."""
        ws = self.ws if ws is None else ws
        self.lean.jac_and_c(q, qd, self.sel, ws.A, ws.c, ws.X)
        ws.rhs[:self.r, 0] = ws.c
        ws.rhs[self.r:, 0] = zdd
        return ws

    def __call__(self, q: np.ndarray, qd: np.ndarray, zdd: np.ndarray,
                 ws: DirectWorkspace | None = None) -> np.ndarray:
        ws = self._fill(q, qd, zdd, ws)
        r = self.r
        lu, piv, X, info = lapack.dgesv(ws.A, ws.rhs)
        if info != 0:
            raise MbfgError('direct inverse dynamics: [Phi_q; B] is singular at this '
                            'state (the prescribed coordinates are not independent here)')
        qdd = X[:, 0]
        Q = self.Q0 if not self.state_forces else \
            self.sys.forces.evaluate(q, qd, None, jacobians=False).Q
        y = self.sys.mass_matrix(q) @ qdd - Q
        u, info = lapack.dgetrs(lu, piv, y, trans=1)
        ws.lam[:] = -u[:r]
        uz = u[r:]
        if self.direct:
            return uz[self._perm]
        R = X[:, 1:]
        if self.joint_act:
            Bact = self.sys.forces.actuator_matrix(q)
            W = R.T @ Bact
        else:
            W = R[self.act].T
        if W.shape[1] == W.shape[0]:
            return np.linalg.solve(W, uz)
        return W.T @ np.linalg.solve(W @ W.T, uz)   # minimum norm (redundant actuation)

    def accelerations(self, q: np.ndarray, qd: np.ndarray, zdd: np.ndarray,
                      ws: DirectWorkspace | None = None) -> np.ndarray:
        """q̈ of the acceleration problem (seed 000 Eq. 12) at this state."""
        ws = self._fill(q, qd, zdd, ws)
        return np.linalg.solve(ws.A, ws.rhs[:, 0])


def _independent(sys: System, idx: Sequence[int]) -> bool:
    Jq = sys.constraints.phi_q(sys.q0)[np.asarray(sys.rows, dtype=int)]
    B = np.zeros((len(idx), sys.n))
    B[np.arange(len(idx)), list(idx)] = 1.0
    return bool(np.linalg.matrix_rank(np.vstack((Jq, B))) == sys.n)


def inverse_dynamics_direct(sys: System, q: np.ndarray, qd: np.ndarray, zdd: np.ndarray,
                            z_idx: Sequence[int] | None = None) -> np.ndarray:
    """Actuator efforts τ (order of ``mech.actuators``) for accelerations ``zdd`` of ``q[z_idx]``.

    One-shot convenience: builds a :class:`DirectInverseDynamics` each call
    (a few hundred µs); per-tick code should keep an instance.
    ``z_idx`` defaults to ``sys.z_idx``.
    """
    z_idx = sys.z_idx if z_idx is None else z_idx
    return DirectInverseDynamics(sys, z_idx)(np.asarray(q, float), np.asarray(qd, float),
                                             np.asarray(zdd, float))
