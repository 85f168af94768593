"""Fast constraint terms at one state (the per-tick path of the estimator and the inverse).

:class:`LeanKinematics` evaluates Φ, Φq, Φ̇q and the second-order terms faster than the
general :class:`~mbfg_ros.planar.constraints.Constraints` (which it reproduces;
``test/planar/test_inverse_dynamics.py`` compares them): distance and slider rows are
quadratic in q (seed 000 Eqs. 41-43), so Φq is an affine function of q stored as one
constant tensor (probed from ``Constraints`` once); angle rows (Eqs. 44-45 as one smooth
equation, :mod:`mbfg_ros.planar.angle_rows`) are evaluated in their local variables
u = (a, b, θ) with ``u = P q + p0`` and Φ = aᵀ C(θ) b, ``C = [[−sin θ, cos θ], [−cos θ,
−sin θ]]``.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np

from .angle_rows import ANGLE_U_MAP, angle_hess, angle_local, angle_row_rate
from .constraints import Constraints

__all__ = ['LeanKinematics', 'KinTerms', 'RowSelection']


class KinTerms(NamedTuple):
    """Constraint terms at one state (all rows of Φ)."""

    phi: np.ndarray         # (m,)
    phi_q: np.ndarray       # (m, n)
    phi_q_dot: np.ndarray   # (m, n) Φ̇q
    gamma_q: np.ndarray     # (m, n) (Φ̇q q̇)_q
    hess_v: np.ndarray | None   # (m, n) (Φq v)_q for the given v (q̈)
    angle_cache: list | None = None
    """The angle rows' :func:`~mbfg_ros.planar.angle_rows.angle_local` caches (one tuple of
    floats per row): :meth:`LeanKinematics.hess_vec` and
    :meth:`LeanKinematics.hess_weighted` reuse them at the same q."""


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
        self._zero_mn = np.zeros((mq, n))
        self._zero_mn.flags.writeable = False      # (Φ̇q q̇)_q of quadratic rows (read only)
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
        self.PT = self.P.T.copy()

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
        n, mq = self.n, self.mq
        if not self.K:
            return np.dot(self.Tm, q).reshape(mq, n) + self.J0
        J = np.empty((self.m, n))
        J[:mq] = (self.Tm @ q).reshape(mq, n) + self.J0
        U = (self.P @ q + self.p0).reshape(self.K, 5).tolist()
        g = [angle_row_rate([[x, 0.0] for x in u])[0] for u in U]
        J[mq:] = np.einsum('kj,kjn->kn', g, self.P3)
        return J

    def rates(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Φq, Φ̇q) at (q, q̇): :meth:`terms`' two arrays (the same bits), without Φ when
        every row is quadratic (q̈ alone, seed 000 Eq. 5: ~2 µs less, issue 24)."""
        if self.K:
            t = self.terms(q, qd)
            return t.phi_q, t.phi_q_dot
        n, mq = self.n, self.mq
        # (np.dot: the same BLAS product as @ without matmul's ufunc dispatch)
        return (np.dot(self.Tm, q).reshape(mq, n) + self.J0,
                np.dot(self.Tm, qd).reshape(mq, n))

    def terms(self, q: np.ndarray, qd: np.ndarray, v: np.ndarray | None = None) -> KinTerms:
        """Φ, Φq, Φ̇q, (Φ̇q q̇)_q and, given v, (Φq v)_q at (q, q̇)."""
        n, m, mq, K = self.n, self.m, self.mq, self.K
        if not K and v is None:            # distance and slider rows only: no buffers
            J, Jd = self.rates(q, qd)      # Φq and Φ̇q, affine in q and q̇
            return KinTerms(0.5 * np.dot(J + self.J0, q) + self.phi0, J, Jd, self._zero_mn,
                            None, None)
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
        cache = None
        if K:
            U = (self.P @ q + self.p0).reshape(K, 5).tolist()     # floats: the fast path
            Ud = (self.P @ qd).reshape(K, 5).tolist()
            Vu = (self.P @ v).reshape(K, 5).tolist() if v is not None else None
            gu, hu, cu, vu, caches = [], [], [], [], []
            for k in range(K):
                p, g, hd, _, gam, ck = angle_local(U[k], Ud[k])
                phi[mq + k] = p
                gu.append(g)
                hu.append(hd)
                cu.append(gam)
                caches.append(ck)
                if Vu is not None:
                    vu.append(angle_hess(ck, Vu[k]))
            # the rows in u scattered onto q, u = P q + p0: one product for all of them
            rows3 = np.einsum('tkj,kjn->tkn', (gu, hu, cu, vu) if v is not None
                              else (gu, hu, cu), self.P3)
            J[mq:], Jd[mq:], G[mq:] = rows3[0], rows3[1], rows3[2]
            if v is not None:
                Hv[mq:] = rows3[3]
            cache = caches
        return KinTerms(phi, J, Jd, G, Hv, cache)

    def hess_vec(self, q: np.ndarray, v: np.ndarray, at: KinTerms | None = None
                 ) -> np.ndarray:
        """(Φq v)_q = Φqq v (m, n); ``at``: :meth:`terms` at this q (its angle caches)."""
        n, mq, K = self.n, self.mq, self.K
        H = np.empty((self.m, n))
        if mq:
            H[:mq] = (self.Tm @ v).reshape(mq, n)
        if K:
            Vu = (self.P @ v).reshape(K, 5).tolist()
            hv = [angle_hess(c, u) for c, u in zip(self._cache(q, at), Vu)]
            H[mq:] = np.einsum('kj,kjn->kn', hv, self.P3)
        return H

    def hess_weighted(self, q: np.ndarray, lam: np.ndarray, at: KinTerms | None = None
                      ) -> np.ndarray:
        """Σ_k λ_k Φqq^k (n, n); ``at``: :meth:`terms` at this q (its angle caches)."""
        n, mq, K = self.n, self.mq, self.K
        H = np.dot(lam[:mq], self.Tl).reshape(n, n) if mq else np.zeros((n, n))
        if K:
            # Pᵀ blockdiag(λ_k H_u^k) P, the blocks written as floats (angle_hess_matrix's
            # entries: −s, c, −c, −s off the diagonal, db, da against θ, −Φ on θθ)
            Hw = [0.0] * (25 * K * K)
            w5 = 5 * K
            for k, ((c, s, db0, db1, da0, da1, phi), lk) in enumerate(
                    zip(self._cache(q, at), lam[mq:].tolist())):
                o = 5 * k * w5 + 5 * k                 # the block's (0, 0) in the flat list
                Hw[o + 2], Hw[o + 3] = -s * lk, c * lk
                Hw[o + w5 + 2], Hw[o + w5 + 3] = -c * lk, -s * lk
                Hw[o + 2 * w5], Hw[o + 2 * w5 + 1] = -s * lk, -c * lk
                Hw[o + 3 * w5], Hw[o + 3 * w5 + 1] = c * lk, -s * lk
                e0, e1, e2, e3 = db0 * lk, db1 * lk, da0 * lk, da1 * lk
                Hw[o + 4], Hw[o + w5 + 4], Hw[o + 2 * w5 + 4], Hw[o + 3 * w5 + 4] = e0, e1, e2, e3
                Hw[o + 4 * w5:o + 4 * w5 + 5] = (e0, e1, e2, e3, -phi * lk)
            P = self.P
            H = H + np.dot(self.PT, np.dot(np.array(Hw).reshape(w5, w5), P))
        return H

    def _cache(self, q: np.ndarray, at: KinTerms | None) -> list:
        """The angle rows' caches at q (a tuple of floats per row): from ``at``, else
        evaluated."""
        if at is not None and at.angle_cache is not None:
            return at.angle_cache
        U = (self.P @ q + self.p0).reshape(self.K, 5).tolist()
        zero = [0.0] * 5
        return [angle_local(u, zero)[5] for u in U]

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
