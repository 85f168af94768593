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

:class:`LeanKinematics` evaluates Φ, Φq, Φ̇q and the second-order terms
faster than the general :class:`~mbfg_ros.planar.constraints.Constraints` (which it
reproduces; the tests compare them): distance and slider rows are quadratic
in q, so Φq is an affine function of q stored as one constant tensor
(probed from ``Constraints`` once); angle rows are evaluated in their local
variables u = (a, b, θ) with ``u = P q + p0`` and Φ = aᵀ C(θ) b,
``C = [[−sin θ, cos θ], [−cos θ, −sin θ]]``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
import scipy.linalg.lapack as lapack

from ...core.errors import MbfgError
from ..angle_rows import (
    ANGLE_U_MAP,
    angle_hess,
    angle_hess_matrix,
    angle_local,
    angle_row_rate,
)
from ..constraints import Constraints
from ..dynamics import System

__all__ = ['LeanKinematics', 'KinTerms', 'RowSelection', 'DirectInverseDynamics',
           'DirectWorkspace', 'inverse_dynamics_direct']


class KinTerms(NamedTuple):
    """Constraint terms at one state (all rows of Φ)."""

    phi: np.ndarray         # (m,)
    phi_q: np.ndarray       # (m, n)
    phi_q_dot: np.ndarray   # (m, n) Φ̇q
    gamma_q: np.ndarray     # (m, n) (Φ̇q q̇)_q
    hess_v: np.ndarray | None   # (m, n) (Φq v)_q for the given v (q̈)


class LeanKinematics:
    """Fast Φ, Φq, Φ̇q, (Φ̇q q̇)_q, (Φq v)_q and Σλ Φqq for one mechanism (immutable)."""

    def __init__(self, cons: Constraints) -> None:
        n, mq = cons.n, cons.m_quad
        self.n, self.m, self.mq = n, cons.m, mq
        zero = np.zeros(n)
        J0 = cons.phi_q(zero)
        self.J0 = J0[:mq].copy()
        self.phi0 = cons.phi(zero)[:mq].copy()
        T = np.zeros((mq, n, n))
        for i in range(n):
            e = np.zeros(n)
            e[i] = 1.0
            T[:, :, i] = cons.phi_q(e)[:mq] - self.J0
        self.T = T
        self.Tm = T.reshape(mq * n, n).copy()      # (T·v) = (Tm @ v).reshape(mq, n)
        self.Tl = T.reshape(mq, n * n).copy()      # Σλ_k T_k = (λ @ Tl).reshape(n, n)
        # Angle rows: u = P q + p0 per row (u = ax, ay, bx, by, theta).
        ai = cons._ai  # noqa: SLF001  (index map of the angle rows into w = [q, consts])
        E = ANGLE_U_MAP
        K = len(ai)
        self.K = K
        W = cons.W
        P = np.zeros((K, 5, W))
        for k in range(K):
            for loc in range(9):
                P[k, :, ai[k, loc]] += E[:, loc]
        wconst = cons.ext.of(zero)
        self.p0 = (P @ wconst).reshape(K * 5)
        self.P3 = P[:, :, :n].copy()
        self.P = self.P3.reshape(K * 5, n).copy()

    def phi(self, q: np.ndarray) -> np.ndarray:
        """Φ(q) (m,)."""
        out = np.empty(self.m)
        mq = self.mq
        if mq:
            Jq = (self.Tm @ q).reshape(mq, self.n) + self.J0
            out[:mq] = 0.5 * ((Jq + self.J0) @ q) + self.phi0
        if self.K:
            U = (self.P @ q + self.p0).reshape(self.K, 5)
            for k in range(self.K):
                ax, ay, bx, by, th = U[k]
                c, s = math.cos(th), math.sin(th)
                out[mq + k] = (ax * by - ay * bx) * c - (ax * bx + ay * by) * s
        return out

    def phi_q(self, q: np.ndarray) -> np.ndarray:
        """Φq(q) (m, n)."""
        return self.terms(q, np.zeros(self.n)).phi_q

    def terms(self, q: np.ndarray, qd: np.ndarray, v: np.ndarray | None = None) -> KinTerms:
        """Φ, Φq, Φ̇q, (Φ̇q q̇)_q and, given v, (Φq v)_q at (q, q̇)."""
        n, m, mq, K = self.n, self.m, self.mq, self.K
        phi = np.empty(m)
        J = np.empty((m, n))
        Jd = np.empty((m, n))
        G = np.zeros((m, n))
        Hv = np.empty((m, n)) if v is not None else None
        if mq:
            J[:mq] = (self.Tm @ q).reshape(mq, n) + self.J0
            phi[:mq] = 0.5 * ((J[:mq] + self.J0) @ q) + self.phi0
            Jd[:mq] = (self.Tm @ qd).reshape(mq, n)
            if v is not None:
                Hv[:mq] = (self.Tm @ v).reshape(mq, n)
        if K:
            U = (self.P @ q + self.p0).reshape(K, 5)
            Ud = (self.P @ qd).reshape(K, 5)
            Vu = (self.P @ v).reshape(K, 5) if v is not None else None
            gu = np.empty((K, 5))
            hu = np.empty((K, 5))
            cu = np.empty((K, 5))
            vu = np.empty((K, 5))
            for k in range(K):
                p, g, hd, _, gam, cache = angle_local(U[k], Ud[k])
                phi[mq + k] = p
                gu[k] = g
                hu[k] = hd
                cu[k] = gam
                if Vu is not None:
                    vu[k] = angle_hess(cache, Vu[k])
            P3 = self.P3
            J[mq:] = np.einsum('kj,kjn->kn', gu, P3)
            Jd[mq:] = np.einsum('kj,kjn->kn', hu, P3)
            G[mq:] = np.einsum('kj,kjn->kn', cu, P3)
            if v is not None:
                Hv[mq:] = np.einsum('kj,kjn->kn', vu, P3)
        return KinTerms(phi, J, Jd, G, Hv)

    def hess_vec(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """(Φq v)_q = Φqq v (m, n)."""
        n, mq = self.n, self.mq
        H = np.empty((self.m, n))
        if mq:
            H[:mq] = (self.Tm @ v).reshape(mq, n)
        if self.K:
            U = (self.P @ q + self.p0).reshape(self.K, 5)
            Vu = (self.P @ v).reshape(self.K, 5)
            for k in range(self.K):
                cache = angle_local(U[k], np.zeros(5))[5]
                H[mq + k] = np.dot(angle_hess(cache, Vu[k]), self.P3[k])
        return H

    def hess_weighted(self, q: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """Σ_k λ_k Φqq^k (n, n)."""
        n, mq = self.n, self.mq
        H = (lam[:mq] @ self.Tl).reshape(n, n) if mq else np.zeros((n, n))
        if self.K:
            U = (self.P @ q + self.p0).reshape(self.K, 5)
            for k in range(self.K):
                if lam[mq + k] == 0.0:
                    continue
                cache = angle_local(U[k], np.zeros(5))[5]
                Pk = self.P3[k]
                H = H + lam[mq + k] * (Pk.T @ angle_hess_matrix(cache) @ Pk)
        return H

    def selection(self, rows: Sequence[int]) -> 'RowSelection':
        """Precomputed data for :meth:`jac_and_c` on the constraint rows ``rows``."""
        rows = np.asarray(rows, dtype=int)
        rq = rows[rows < self.mq]
        ra = tuple(int(k) for k in rows[rows >= self.mq] - self.mq)
        Tm = self.T[rq].reshape(len(rq) * self.n, self.n)
        Pa = [self.P3[k] for k in ra]
        big = np.vstack([Tm] + Pa) if (len(rq) or ra) else np.zeros((0, self.n))
        p0 = np.concatenate([np.zeros(Tm.shape[0])] + [self.p0[5 * k:5 * k + 5] for k in ra])
        return RowSelection(np.ascontiguousarray(big), self.J0[rq].copy(), len(rq), ra,
                            p0[:, None] * np.array([[1.0, 0.0]]),
                            [np.ascontiguousarray(P) for P in Pa])

    def jac_and_c(self, q: np.ndarray, qd: np.ndarray, sel: 'RowSelection',
                  J_out: np.ndarray, c_out: np.ndarray, X: np.ndarray) -> None:
        """Per-tick path: write Φq and c = −Φ̇q q̇ of the selected rows into buffers.

        Rows come in the order of ``sel``: distance/slider rows, then angle
        rows. ``X`` is an (n, 2) work buffer.
        """
        n, nq = self.n, sel.nq
        X[:, 0] = q
        X[:, 1] = qd
        Y = sel.big @ X
        if nq:
            Yq = Y[:nq * n]
            J_out[:nq] = Yq[:, 0].reshape(nq, n) + sel.J0
            c_out[:nq] = -(Yq[:, 1].reshape(nq, n) @ qd)
        if sel.angles:
            Ya = (Y[nq * n:] + sel.p0[nq * n:]).tolist()
            for r, Pk in enumerate(sel.P, start=nq):
                o = 5 * (r - nq)
                g, quad = angle_row_rate(Ya[o:o + 5])
                J_out[r] = np.dot(g, Pk)
                c_out[r] = -quad


class RowSelection(NamedTuple):
    """Constraint rows picked for the per-tick path (see :meth:`LeanKinematics.selection`)."""

    big: np.ndarray                 # [T rows of distance/slider rows; P of angle rows]
    J0: np.ndarray
    nq: int
    angles: tuple[int, ...]
    p0: np.ndarray                  # offsets of u (column 0 only)
    P: list                         # P_k (5, n) of each selected angle row


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
