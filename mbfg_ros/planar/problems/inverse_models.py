"""The equations of the staged inverse-dynamics graph (seed 000 §5.3, §7.2), per sample
(:class:`StepModel`, :func:`step_error`) and batched over all samples at once
(:class:`BatchModel`, the same equations over a sample axis; the tests compare the two).
:mod:`mbfg_ros.planar.problems.inverse` assembles and solves the graph from them.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .inverse_direct import LeanKinematics
from ..angle_rows import angle_hess, angle_hess_matrix, angle_local
from ..dynamics import System, forward_accel
from ..kinematics import selector

__all__ = ['StepModel', 'step_error', 'BatchModel']


class StepModel:
    """What the per-sample factor needs, built once (immutable)."""

    def __init__(self, sys: System, z_idx: Sequence[int]) -> None:
        self.sys = sys
        self.n, self.m = sys.n, sys.m
        self.lean = LeanKinematics(sys.constraints)
        self.z_idx = np.array([int(i) for i in z_idx], dtype=int)
        self.B = selector(self.z_idx, self.n)


def step_error(model: StepModel, stage: int, zk: np.ndarray, zdk: np.ndarray,
               zddk: np.ndarray, xs: Sequence[np.ndarray], want: bool):
    """Errors of one sample for ``stage`` (1-4); variables [x] (stages 1-3) or [x, Q].

    x = [q, q̇, q̈].

    Rows: Φ(q) (f_dpc, Eq. 24); q[z] − z_k (prior); from stage 3 Φq q̇
    (f_dvc, Eq. 25);
    stage 4 q̈(q, q̇, Q) − q̈ (f_didyn, Eq. 28).
    """
    n, m = model.n, model.m
    d = len(model.z_idx)
    z = model.z_idx
    x = xs[0]
    q = x[:n]
    if stage == 1:
        phi = model.lean.phi(q)
        e = np.concatenate((phi, q[z] - zk))
        if not want:
            return e, None
        J1 = np.zeros((m + d, 3 * n))
        J1[:m, :n] = model.lean.phi_q(q)
        J1[m:, :n] = model.B
        return e, [J1]
    qd, qdd = x[n:2 * n], x[2 * n:]
    kt = model.lean.terms(q, qd)
    parts = [kt.phi, q[z] - zk]
    if stage >= 3:
        parts.append(kt.phi_q @ qd)
    if stage >= 4:
        a = forward_accel(model.sys, q, qd, Q_extra=xs[1], jacobians=want, jac_Q=want,
                          terms=kt)
        parts.append(a.qdd - qdd)
    e = np.concatenate(parts)
    if not want:
        return e, None
    rows = len(e)
    Jq = np.zeros((rows, n))
    Jv = np.zeros((rows, 2 * n))
    Jq[:m] = kt.phi_q
    Jq[m:m + d] = model.B
    r = m + d
    if stage >= 3:
        Jq[r:r + m] = kt.phi_q_dot
        Jv[r:r + m, :n] = kt.phi_q
        r += m
    if stage < 4:
        return e, [np.hstack((Jq, Jv))]
    Jq[r:] = a.qdd_q
    Jv[r:, :n] = a.qdd_qd
    Jv[r:, n:] = -np.eye(n)
    JQ = np.zeros((rows, n))
    JQ[r:] = a.qdd_Q
    return e, [np.hstack((Jq, Jv)), JQ]


class BatchModel:
    """Stage errors and Jacobians of *all* samples in one numpy pass (immutable).

    The same equations as :func:`step_error` (which stays the per-sample
    reference; the tests compare the two), written over a leading sample
    axis: distance and slider rows through the constant tensor of
    :class:`LeanKinematics`, angle rows through its u = P q + p0 map with the
    formulas of ``angle_local`` on arrays, and q̈(q, q̇, Q) by batched
    inverses of the augmented matrices. This replaces one Python callback per
    sample and linearisation (the cost of the CustomFactor graph).
    """

    def __init__(self, sys: System, z_idx: Sequence[int]) -> None:
        self.sys = sys
        lean = LeanKinematics(sys.constraints)
        self.n, self.m, self.mq, self.K = sys.n, sys.m, lean.mq, lean.K
        self.Tm, self.Tl, self.J0, self.phi0 = lean.Tm, lean.Tl, lean.J0, lean.phi0
        self.P, self.P3, self.p0 = lean.P, lean.P3, lean.p0
        self.rows = np.asarray(sys.rows, dtype=int)
        self.z_idx = np.array([int(i) for i in z_idx], dtype=int)
        self.B = selector(self.z_idx, self.n)

    def _angles(self, q: np.ndarray, qd: np.ndarray):
        """Angle-row quantities (N, K) of ``angle_local``, for all samples at once."""
        N, K = len(q), self.K
        U = np.moveaxis((q @ self.P.T + self.p0).reshape(N, K, 5), 2, 0)
        Ud = np.moveaxis((qd @ self.P.T).reshape(N, K, 5), 2, 0)
        phi, g, hd, _, gam, cache = angle_local(U, Ud, np.cos, np.sin)
        return phi, np.stack(g, axis=2), np.stack(hd, axis=2), np.stack(gam, axis=2), cache

    def terms(self, q: np.ndarray, qd: np.ndarray):
        """Φ (N, m), Φq, Φ̇q, (Φ̇q q̇)_q (N, m, n) and the angle-row cache."""
        N, n, m, mq, K = len(q), self.n, self.m, self.mq, self.K
        phi = np.empty((N, m))
        J = np.empty((N, m, n))
        Jd = np.empty((N, m, n))
        G = np.zeros((N, m, n))
        cache = None
        if mq:
            J[:, :mq] = (q @ self.Tm.T).reshape(N, mq, n) + self.J0
            phi[:, :mq] = 0.5 * np.einsum('kij,kj->ki', J[:, :mq] + self.J0, q) + self.phi0
            Jd[:, :mq] = (qd @ self.Tm.T).reshape(N, mq, n)
        if K:
            p, g, hd, gam, cache = self._angles(q, qd)
            phi[:, mq:] = p
            J[:, mq:] = np.einsum('nkj,kjm->nkm', g, self.P3)
            Jd[:, mq:] = np.einsum('nkj,kjm->nkm', hd, self.P3)
            G[:, mq:] = np.einsum('nkj,kjm->nkm', gam, self.P3)
        return phi, J, Jd, G, cache

    def hess_vec(self, cache, v: np.ndarray) -> np.ndarray:
        """(Φq v)_q (N, m, n) for one v per sample."""
        N, n, mq = len(v), self.n, self.mq
        H = np.empty((N, self.m, n))
        if mq:
            H[:, :mq] = (v @ self.Tm.T).reshape(N, mq, n)
        if self.K:
            Vu = np.moveaxis((v @ self.P.T).reshape(N, self.K, 5), 2, 0)
            hu = np.stack(angle_hess(cache, Vu), axis=2)
            H[:, mq:] = np.einsum('nkj,kjm->nkm', hu, self.P3)
        return H

    def hess_weighted(self, cache, lam: np.ndarray) -> np.ndarray:
        """Σ_k λ_k Φqq^k (N, n, n) for one λ (N, m) per sample."""
        N, n, mq, K = len(lam), self.n, self.mq, self.K
        H = (lam[:, :mq] @ self.Tl).reshape(N, n, n) if mq else np.zeros((N, n, n))
        if K:
            Hu = angle_hess_matrix(cache)          # (N, K, 5, 5)
            HP = np.einsum('nkab,kbj->nkaj', Hu * lam[:, mq:, None, None], self.P3)
            H = H + np.einsum('kai,nkaj->nij', self.P3, HP)
        return H

    def forces(self, q: np.ndarray, qd: np.ndarray):
        """Q (N, n), Q_q, Q_qd (N, n, n) of the modelled forces."""
        N, n, f = len(q), self.n, self.sys.forces
        if not f.state_dependent:
            return np.broadcast_to(f.Q0, (N, n)), np.zeros((N, n, n)), np.zeros((N, n, n))
        out = [f.evaluate(q[k], qd[k], None, jacobians=True) for k in range(N)]
        return (np.array([o.Q for o in out]), np.array([o.Q_q for o in out]),
                np.array([o.Q_qd for o in out]))

    def errors(self, stage: int, X: np.ndarray, Qx: np.ndarray | None, z: np.ndarray):
        """Stacked errors (N, rows) and Jacobians wrt x (N, rows, 3n) and Q (stage 4)."""
        n, m = self.n, self.m
        N, d = len(X), len(self.z_idx)
        q, qd, qdd = X[:, :n], X[:, n:2 * n], X[:, 2 * n:]
        phi, J, Jd, G, cache = self.terms(q, qd)
        rows = m + d + (m if stage >= 3 else 0) + (n if stage >= 4 else 0)
        e = np.empty((N, rows))
        Jx = np.zeros((N, rows, 3 * n))
        e[:, :m] = phi
        e[:, m:m + d] = q[:, self.z_idx] - z
        Jx[:, :m, :n] = J
        Jx[:, m:m + d, :n] = self.B
        r = m + d
        if stage >= 3:
            e[:, r:r + m] = np.einsum('kij,kj->ki', J, qd)
            Jx[:, r:r + m, :n] = Jd
            Jx[:, r:r + m, n:2 * n] = J
            r += m
        if stage < 4:
            return e, Jx, None
        ir = self.rows
        nr = len(ir)
        F, Fq, Fqd = self.forces(q, qd)
        A = np.zeros((N, n + nr, n + nr))
        A[:, :n, :n] = self.sys.mass_matrix(q)
        A[:, :n, n:] = np.swapaxes(J[:, ir], 1, 2)
        A[:, n:, :n] = J[:, ir]
        Ainv = np.linalg.inv(A)
        Jdr = Jd[:, ir]
        c = -np.einsum('kij,kj->ki', Jdr, qd)
        rhs = np.concatenate((F + Qx, c), axis=1)
        sol = np.einsum('kij,kj->ki', Ainv, rhs)
        acc, lam = sol[:, :n], sol[:, n:]
        lam_full = np.zeros((N, m))
        lam_full[:, ir] = lam
        top_q = Fq - self.hess_weighted(cache, lam_full)
        bot_q = -(G[:, ir] + self.hess_vec(cache, acc)[:, ir])
        Ann, Anr = Ainv[:, :n, :n], Ainv[:, :n, n:]
        e[:, r:] = acc - qdd
        Jx[:, r:, :n] = Ann @ top_q + Anr @ bot_q
        Jx[:, r:, n:2 * n] = Ann @ Fqd - 2.0 * (Anr @ Jdr)
        Jx[:, r:, 2 * n:] = -np.eye(n)
        JQ = np.zeros((N, rows, n))
        JQ[:, r:] = Ann
        return e, Jx, JQ
