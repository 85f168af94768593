"""Holonomic constraints Φ(q) = 0 of a planar mechanism and their derivatives.

Implements seed 000 Appendix III, vectorised over all instances of a kind:

* constant distance between two points of a body (Eq. 41),
* a point on a line through two points, fixed or mobile (Eqs. 42-43; the
  mobile slider's second derivatives are complete here: ``Φqq`` is the
  constant matrix of Eq. 43d, so ``(Φq v)_q`` follows Eq. 43f for any v),
* angle coordinates (Eqs. 44-45), written as one smooth equation per angle.

Angle constraint. Seed 000 switches between ``xj - xi - L cos θ`` and
``yj - yi - L sin θ`` depending on θ (Eqs. 44/45), which makes Φ a piecewise
function whose answer changes with the branch. We use instead, for the angle
θ from vector ``a`` to vector ``b`` (``a = (1, 0)`` for an absolute angle),

    Φ = (a × b) cos θ − (a · b) sin θ  =  |a||b| sin(angle(a, b) − θ),

which is smooth, has ``∂Φ/∂θ = −|a||b|`` on the manifold (never singular) and
covers both the absolute angle (RelativeAngleAbsoluteDOF) and the relative
angle between two bodies with one formula.

All points live in an *extended* vector ``w = [q, constants, 0]``: fixed
point coordinates, fixed line points and the ground frame's two points are
constants; the last entry is a dump column for padded indices. Jacobians are
built with respect to ``w`` and the first ``n`` columns kept.

Quantities provided (names from seed 000):
``phi`` Φ (Eq. 1), ``phi_q`` Φq, ``phi_q_dot`` Φ̇q = Φqq q̇ (Eq. 40a),
``hess_vec(q, v)`` = (Φq v)_q = Φqq v (Eqs. 40c, 41f, 43f, 44f),
``phidot_q_qd_q`` = (Φ̇q q̇)_q (Eqs. 41e, 43e, 44g), and
``hess_weighted(q, lam)`` = Σ_k λ_k Φqq^k = ∂(Φqᵀ λ)/∂q.
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from .extended import Extended
from .angle_rows import ANGLE_U_MAP, angle_derivatives, angle_third
from .model import GROUND, Mechanism

__all__ = ['Constraints', 'ConstraintTerms']

_H_DIST = 2.0 * np.array([[1, 0, -1, 0, 0, 0],
                          [0, 1, 0, -1, 0, 0],
                          [-1, 0, 1, 0, 0, 0],
                          [0, -1, 0, 1, 0, 0],
                          [0, 0, 0, 0, 0, 0],
                          [0, 0, 0, 0, 0, 0]], dtype=float)
# Seed 000 Eq. 43d, local order (x, y, xi, yi, xj, yj).
_H_SLIDER = np.array([[0, 0, 0, 1, 0, -1],
                      [0, 0, -1, 0, 1, 0],
                      [0, -1, 0, 0, 0, 1],
                      [1, 0, 0, 0, -1, 0],
                      [0, 1, 0, -1, 0, 0],
                      [-1, 0, 1, 0, 0, 0]], dtype=float)

class ConstraintTerms(NamedTuple):
    """Everything a dynamics factor needs at one (q, q̇), computed together."""

    phi: np.ndarray        # (m,)  Φ
    phi_q: np.ndarray      # (m, n) Φq
    phi_q_dot: np.ndarray  # (m, n) Φ̇q = Φqq q̇
    gamma_q: np.ndarray    # (m, n) (Φ̇q q̇)_q


class Constraints:
    """All constraints of a mechanism, evaluated with numpy (immutable after build)."""

    def __init__(self, mech: Mechanism) -> None:
        self.n = mech.n
        pidx = mech.point_index
        consts: list[float] = []

        def const(value: float) -> int:
            consts.append(float(value))
            return self.n + len(consts) - 1

        point_w = np.zeros((len(mech.points), 2), dtype=int)
        for i, p in enumerate(mech.points):
            point_w[i] = pidx[i] if not p.fixed else (const(p.x), const(p.y))
        ground = (np.array([const(0.0), const(0.0)]), np.array([const(1.0), const(0.0)]))

        quad_idx, quad_H, quad_c = [], [], []
        labels = []
        kinds: list[tuple[str, int]] = []
        pairs: dict[int, tuple[int, int]] = {}
        for b, body in enumerate(mech.bodies):
            for i, j in itertools.combinations(body.points, 2):
                if (i, j) == body.points[:2]:
                    length = body.length
                else:
                    pi, pj = mech.points[i], mech.points[j]
                    length = math.hypot(pj.x - pi.x, pj.y - pi.y)
                quad_idx.append(list(point_w[i]) + list(point_w[j]) + [-1, -1])
                quad_H.append(_H_DIST)
                quad_c.append(length ** 2)
                labels.append(f'distance body{b} ({i},{j})')
                kinds.append(('distance', b))
                pairs[len(labels) - 1] = (i, j)
        for k, s in enumerate(mech.sliders):
            if s.line is not None:
                ends = [point_w[s.line[0]], point_w[s.line[1]]]
            else:
                assert s.through is not None
                ends = [np.array([const(s.through[0][0]), const(s.through[0][1])]),
                        np.array([const(s.through[1][0]), const(s.through[1][1])])]
            quad_idx.append(list(point_w[s.point]) + list(ends[0]) + list(ends[1]))
            quad_H.append(_H_SLIDER)
            quad_c.append(0.0)
            labels.append(f'slider {s.name}')
            kinds.append(('slider', k))

        def body_vec(b: int) -> list[int]:
            if b == GROUND:
                return list(ground[0]) + list(ground[1])
            i, j = mech.bodies[b].points[:2]
            return list(point_w[i]) + list(point_w[j])

        ang_idx = []
        n_pts = 2 * sum(not p.fixed for p in mech.points)
        for k, r in enumerate(mech.relative):
            if r.points is not None:
                a = body_vec(GROUND)
                b = list(point_w[r.points[0]]) + list(point_w[r.points[1]])
            else:
                assert r.bodies is not None
                a, b = body_vec(r.bodies[0]), body_vec(r.bodies[1])
            ang_idx.append(a + b + [n_pts + k])
            labels.append(f'angle {r.name}')
            kinds.append(('angle', k))

        self.dump = self.n + len(consts)
        consts.append(0.0)
        self.ext = Extended(self.n, consts)     # w = [q, constants, 0]
        self.W = self.ext.W
        fix = lambda a: np.where(np.asarray(a) < 0, self.dump, a)  # noqa: E731
        self._qi = fix(np.array(quad_idx, dtype=int).reshape(-1, 6))
        self._qH = np.array(quad_H, dtype=float).reshape(-1, 6, 6)
        self._qc = np.array(quad_c, dtype=float)
        self._ai = np.array(ang_idx, dtype=int).reshape(-1, 9)
        self.m_quad = len(self._qc)
        self.m = self.m_quad + len(self._ai)
        self.labels = tuple(labels)
        self.kinds = tuple(kinds)       # per row: ('distance', body), ('slider', k), ('angle', k)
        self.point_w = point_w          # (P, 2) index of each point's x, y in w
        self.distance_pairs = pairs     # distance row -> its two points
        self._rq = np.arange(self.m_quad)
        self._ra = np.arange(self.m_quad, self.m)
        # Flat indices for scattering local Hessians into a W x W matrix.
        self._qflat = (self._qi[:, :, None] * self.W + self._qi[:, None, :]).ravel()
        self._aflat = (self._ai[:, :, None] * self.W + self._ai[:, None, :]).ravel()

    # -- helpers ----------------------------------------------------------------
    def _angle_local(self, w: np.ndarray) -> tuple[np.ndarray, ...]:
        u = w[self._ai] @ ANGLE_U_MAP.T  # (K, 5): ax, ay, bx, by, theta
        ax, ay, bx, by, th = u.T
        return ax, ay, bx, by, np.cos(th), np.sin(th)

    def _angle_grad_hess(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Φ (K,), gradient (K,5) and Hessian (K,5,5) in u (:func:`angle_derivatives`)."""
        return angle_derivatives(*self._angle_local(w))

    def _angle_third(self, w: np.ndarray) -> np.ndarray:
        """Third derivatives (K,5,5,5) in u-space (:func:`angle_third`)."""
        return angle_third(*self._angle_local(w))

    def _scatter_rows(self, gq: np.ndarray, ga: np.ndarray, full: bool = False) -> np.ndarray:
        """Place local row vectors (quad: (Kq,6), angle: (Ka,9)) into an (m, n) matrix.

        ``full``: keep every column of w (m, W), constants included.
        """
        J = np.zeros((self.m, self.W))
        if self.m_quad:
            J[self._rq[:, None], self._qi] = gq
        if len(self._ra):
            np.add.at(J, (self._ra[:, None], self._ai), ga)
        if full:
            J[:, self.dump] = 0.0
            return J
        return J[:, :self.n]

    # -- public API -------------------------------------------------------------
    def phi(self, q: np.ndarray) -> np.ndarray:
        """Φ(q), seed 000 Eq. 1 (rows: Eqs. 41a, 42a/43a, angle)."""
        w = self.ext.of(q)
        out = np.empty(self.m)
        if self.m_quad:
            wl = w[self._qi]
            out[:self.m_quad] = 0.5 * np.einsum('ki,kij,kj->k', wl, self._qH, wl) - self._qc
        if len(self._ra):
            ax, ay, bx, by, c, s = self._angle_local(w)
            out[self.m_quad:] = (ax * by - ay * bx) * c - (ax * bx + ay * by) * s
        return out

    def phi_q(self, q: np.ndarray) -> np.ndarray:
        """Φq(q), seed 000 Eqs. 41b, 42b, 43b and the angle row."""
        w = self.ext.of(q)
        gq = np.einsum('kij,kj->ki', self._qH, w[self._qi]) if self.m_quad else None
        ga = self._angle_grad_hess(w)[1] @ ANGLE_U_MAP if len(self._ra) else None
        return self._scatter_rows(gq, ga)

    def phi_w(self, q: np.ndarray) -> np.ndarray:
        """∂Φ/∂w (m, W) over w = [q, constants]: Φq plus the columns of fixed points.

        Row k times −λ_k is the force that constraint k applies at every point it
        involves, fixed points included (seed 003 Eqs. 6.57-6.63, 6.80).
        """
        w = self.ext.of(q)
        gq = np.einsum('kij,kj->ki', self._qH, w[self._qi]) if self.m_quad else None
        ga = self._angle_grad_hess(w)[1] @ ANGLE_U_MAP if len(self._ra) else None
        return self._scatter_rows(gq, ga, full=True)

    def angle_vector_gradients(self, q: np.ndarray) -> np.ndarray:
        """(K, 2, 2): per angle row, ∂Φ/∂a and ∂Φ/∂b for its two vectors a, b.

        A vector's end point gets ``+∂Φ/∂a``, its start point ``−∂Φ/∂a``; kept
        apart because the two vectors may share a point (seed 003 Eqs. 6.71-6.78).
        """
        if not len(self._ra):
            return np.zeros((0, 2, 2))
        g = self._angle_grad_hess(self.ext.of(q))[1]
        return g[:, :4].reshape(-1, 2, 2)

    def hess_vec(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """(Φq v)_q = Φqq v, an (m, n) matrix (Eqs. 40c, 41f, 43f, 44f).

        With ``v = q̇`` this is Φ̇q (Eq. 40a); with ``v = q̈`` it is (Φq q̈)_q.
        """
        w = self.ext.of(q)
        ve = self.ext.rate(v)
        gq = np.einsum('kij,kj->ki', self._qH, ve[self._qi]) if self.m_quad else None
        ga = None
        if len(self._ra):
            H = self._angle_grad_hess(w)[2]
            ga = np.einsum('kij,kj->ki', H, ve[self._ai] @ ANGLE_U_MAP.T) @ ANGLE_U_MAP
        return self._scatter_rows(gq, ga)

    def phi_q_dot(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """Φ̇q = d(Φq)/dt = Φqq q̇ (seed 000 Eq. 40a)."""
        return self.hess_vec(q, qd)

    def rates(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Φq, Φ̇q) at one state: :meth:`phi_q` and :meth:`phi_q_dot`'s numbers (the same
        operations) with the angle rows' local derivatives evaluated once (the command
        law's acceleration problem, issue 24)."""
        w = self.ext.of(q)
        ve = self.ext.rate(qd)
        gq = hq = ga = ha = None
        if self.m_quad:
            gq = np.einsum('kij,kj->ki', self._qH, w[self._qi])
            hq = np.einsum('kij,kj->ki', self._qH, ve[self._qi])
        if len(self._ra):
            _, g, H = self._angle_grad_hess(w)
            ga = g @ ANGLE_U_MAP
            ha = np.einsum('kij,kj->ki', H, ve[self._ai] @ ANGLE_U_MAP.T) @ ANGLE_U_MAP
        return self._scatter_rows(gq, ga), self._scatter_rows(hq, ha)

    def phidot_q_qd_q(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """(Φ̇q q̇)_q = ∂(q̇ᵀ Φqq q̇)/∂q: zero for distances and sliders (41e, 43e)."""
        J = np.zeros((self.m, self.n))
        if len(self._ra):
            T = self._angle_third(self.ext.of(q))
            vu = self.ext.rate(qd)[self._ai] @ ANGLE_U_MAP.T
            ga = np.einsum('kijl,kj,kl->ki', T, vu, vu) @ ANGLE_U_MAP
            J = self._scatter_rows(np.zeros((self.m_quad, 6)), ga)
        return J

    def hess_weighted(self, q: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """Σ_k λ_k Φqq^k = ∂(Φqᵀ λ)/∂q, an (n, n) symmetric matrix."""
        acc = np.zeros(self.W * self.W)
        if self.m_quad:
            acc += np.bincount(self._qflat, weights=(lam[:self.m_quad, None, None]
                                                     * self._qH).ravel(),
                               minlength=self.W * self.W)
        if len(self._ra):
            H = self._angle_grad_hess(self.ext.of(q))[2]
            E = ANGLE_U_MAP
            Hw = np.einsum('ai,kab,bj->kij', E, H, E) * lam[self.m_quad:, None, None]
            acc += np.bincount(self._aflat, weights=Hw.ravel(), minlength=self.W * self.W)
        return acc.reshape(self.W, self.W)[:self.n, :self.n]

    def terms(self, q: np.ndarray, qd: np.ndarray) -> ConstraintTerms:
        """Φ, Φq, Φ̇q and (Φ̇q q̇)_q at one state, sharing the local computations."""
        w = self.ext.of(q)
        ve = self.ext.rate(qd)
        phi = np.empty(self.m)
        gq = hq = ga = ha = None
        if self.m_quad:
            wl = w[self._qi]
            gq = np.einsum('kij,kj->ki', self._qH, wl)
            phi[:self.m_quad] = 0.5 * np.einsum('ki,ki->k', wl, gq) - self._qc
            hq = np.einsum('kij,kj->ki', self._qH, ve[self._qi])
        gamma_q = np.zeros((self.m, self.n))
        if len(self._ra):
            pa, g, H = self._angle_grad_hess(w)
            phi[self.m_quad:] = pa
            ga = g @ ANGLE_U_MAP
            vu = ve[self._ai] @ ANGLE_U_MAP.T
            ha = np.einsum('kij,kj->ki', H, vu) @ ANGLE_U_MAP
            T = self._angle_third(w)
            gamma_q = self._scatter_rows(np.zeros((self.m_quad, 6)),
                                         np.einsum('kijl,kj,kl->ki', T, vu, vu) @ ANGLE_U_MAP)
        return ConstraintTerms(phi, self._scatter_rows(gq, ga), self._scatter_rows(hq, ha),
                               gamma_q)
