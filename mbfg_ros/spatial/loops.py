"""Loop-closure constraints of a spatial tree (seed 002 §VII; seed 003's closed chains).

Each loop joint ties frame ``A = T[parent] T_parent`` to frame ``B = T[child] T_child``.
Rows of ``φ(q) = 0`` per joint type (``u_i = R_A e_i`` with ``e_1, e_2 ⟂ a``, ``w = R_B a``):

* revolute about ``a``: ``p_B − p_A`` (3) and ``u_i · w`` (2);
* prismatic along ``a``: ``u_i · (p_B − p_A)`` (2) and the relative rotation (3:
  ``½ vee(R_Aᵀ R_B − R_Bᵀ R_A)``);
* spherical: ``p_B − p_A`` (3); fixed: ``p_B − p_A`` (3) and the relative rotation (3).

``φ_q`` is built from the world joint screws ``s_j`` and the ancestor matrix ``K`` of
``dynamics.SpatialDynamics`` (a point ``p`` on link ``b`` moves by ``K[b,j](v_j + ω_j × p)``,
a direction ``u`` by ``K[b,j] ω_j × u``), and ``γ = φ̇_q q̇`` (so that ``φ̈ = φ_q q̈ + γ``) from
the links' bias accelerations. Planar loops written in 3-D give dependent rows (a four-bar
has 5 rows and rank 2): the users of these rows (``system.SpatialSystem``) work in the
null space of ``φ_q`` by SVD, so they need no hand-picked row subset.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dynamics import SpatialDynamics, cross3
from .model import SpatialModel

__all__ = ['LoopConstraints', 'ROWS']

ROWS = {'revolute': 5, 'prismatic': 5, 'spherical': 3, 'fixed': 6}


def _complement(a: np.ndarray) -> np.ndarray:
    """(2, 3) orthonormal directions perpendicular to the unit vector ``a``."""
    e = np.eye(3)[int(np.argmin(np.abs(a)))]
    e1 = np.cross(a, e)
    e1 /= np.linalg.norm(e1)
    return np.stack([e1, np.cross(a, e1)])


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b for the rows of ``a`` (k, 3) and one 3-vector ``b``: ``a @ [b]×`` (one matmul;
    np.cross costs ~15 µs of axis handling per call, and the per-tick path calls it often)."""
    return a @ np.array([[0.0, -b[2], b[1]], [b[2], 0.0, -b[0]], [-b[1], b[0], 0.0]])


@dataclass(frozen=True)
class _Loop:
    kind: str
    parent: int
    child: int
    T_parent: np.ndarray
    T_child: np.ndarray
    axis: np.ndarray
    perp: np.ndarray      # (2, 3) in the joint frame


class LoopConstraints:
    """``φ(q)``, ``φ_q(q)`` and ``γ(q, q̇)`` of every loop joint of ``model`` (stacked)."""

    def __init__(self, model: SpatialModel, dyn: SpatialDynamics | None = None) -> None:
        self.model = model
        self.dyn = dyn if dyn is not None else SpatialDynamics(model)
        self.loops = tuple(_Loop(lp.type, lp.parent, lp.child, np.asarray(lp.T_parent, float),
                                 np.asarray(lp.T_child, float), np.asarray(lp.axis, float),
                                 _complement(np.asarray(lp.axis, float)))
                           for lp in model.loops)
        self.m = sum(ROWS[lp.kind] for lp in self.loops)
        self.row_names = tuple(f'{lp.name}.{i}' for lp in model.loops
                               for i in range(ROWS[lp.type]))

    def _frames(self, T: np.ndarray, lp: _Loop) -> tuple[np.ndarray, np.ndarray]:
        return T[lp.parent] @ lp.T_parent, T[lp.child] @ lp.T_child

    def phi(self, q: np.ndarray) -> np.ndarray:
        """φ(q): stacked loop-closure residuals (m,)."""
        T = self.dyn.poses(q)
        out = []
        for lp in self.loops:
            A, B = self._frames(T, lp)
            d = B[:3, 3] - A[:3, 3]
            if lp.kind in ('revolute', 'spherical', 'fixed'):
                out.append(d)
            if lp.kind == 'revolute':
                out.append((A[:3, :3] @ lp.perp.T).T @ (B[:3, :3] @ lp.axis))
            elif lp.kind == 'prismatic':
                out.append((A[:3, :3] @ lp.perp.T).T @ d)
            if lp.kind in ('prismatic', 'fixed'):
                Rr = A[:3, :3].T @ B[:3, :3]
                S = 0.5 * (Rr - Rr.T)
                out.append(A[:3, :3] @ np.array([S[2, 1], S[0, 2], S[1, 0]]))
        return np.concatenate(out) if out else np.zeros(0)

    def jacobian(self, q: np.ndarray, qd: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """(φ_q (m, n), γ (m,)) with ``φ̈ = φ_q q̈ + γ``; γ = 0 when ``qd`` is None."""
        n = self.model.n
        qd = np.zeros(n) if qd is None else np.asarray(qd, float)
        st = self.dyn.state(q, qd)
        K, s, v = self.dyn.K, st.s, st.v
        # bias accelerations (q̈ = 0, no gravity): Σ K ṡ q̇
        abias = K @ (st.sdot * qd[:, None])
        Jw, Jv = s[:, :3], s[:, 3:]
        rows_q, rows_g = [], []
        for lp in self.loops:
            A, B = self._frames(st.T, lp)
            kp, kc = K[lp.parent], K[lp.child]
            wp, vp, wc, vc = v[lp.parent, :3], v[lp.parent, 3:], v[lp.child, :3], v[lp.child, 3:]
            ap, aap, ac, aac = (abias[lp.parent, :3], abias[lp.parent, 3:],
                                abias[lp.child, :3], abias[lp.child, 3:])
            pA, pB = A[:3, 3], B[:3, 3]

            def point(p, k, w, vv, al, av):
                # dp/dq_j, ṗ and p̈ at q̈ = 0 of a point p fixed to a link
                J = (Jv + _cross(Jw, p)).T * k
                pd = vv + cross3(w, p)
                return J, pd, av + cross3(al, p) + cross3(w, pd)

            JA, pdA, pddA = point(pA, kp, wp, vp, ap, aap)
            JB, pdB, pddB = point(pB, kc, wc, vc, ac, aac)
            if lp.kind in ('revolute', 'spherical', 'fixed'):
                rows_q.append(JB - JA)
                rows_g.append(pddB - pddA)
            if lp.kind == 'revolute':
                w = B[:3, :3] @ lp.axis
                for e in lp.perp:
                    u = A[:3, :3] @ e
                    rows_q.append((kp - kc) * (Jw @ cross3(u, w)))
                    ud, wd = cross3(wp, u), cross3(wc, w)
                    udd = cross3(ap, u) + cross3(wp, ud)
                    wdd = cross3(ac, w) + cross3(wc, wd)
                    rows_g.append(np.array([udd @ w + 2.0 * ud @ wd + u @ wdd]))
            elif lp.kind == 'prismatic':
                d, dd, ddd = pB - pA, pdB - pdA, pddB - pddA
                for e in lp.perp:
                    u = A[:3, :3] @ e
                    Ju = _cross(Jw, u).T * kp                       # (3, n)
                    rows_q.append((u @ (JB - JA) + d @ Ju)[None, :])
                    ud = cross3(wp, u)
                    udd = cross3(ap, u) + cross3(wp, ud)
                    rows_g.append(np.array([udd @ d + 2.0 * ud @ dd + u @ ddd]))
            if lp.kind in ('prismatic', 'fixed'):
                # relative angular velocity ω_c − ω_p (world); its derivative at q̈ = 0
                rows_q.append(Jw.T * (kc - kp))
                rows_g.append(ac - ap)
        if not rows_q:
            return np.zeros((0, n)), np.zeros(0)
        return (np.vstack([r if r.ndim == 2 else r[None] for r in rows_q]),
                np.concatenate([np.atleast_1d(g) for g in rows_g]))
