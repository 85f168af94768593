"""The per-tick spatial dynamics: τ(q, q̇, q̈), M(q), q̈(q, q̇, τ) and their exact Jacobians.

This is seed 004's recursive Newton-Euler inverse dynamics (§6, Eqs. 6.1-6.4: velocity,
acceleration and force recursions, then τ = Sᵀ f) and the composite-body mass matrix
(§7), written in the root ("spatial", world-fixed) frame so that the recursions become
sums over the tree's ancestor matrix ``K`` (``K[i, j] = 1`` when joint ``j`` is on the
path from the root to link ``i``). Every step is then a batched numpy product over all
links at once, with no Python loop over links except the pose chain. This matters in
Python: a per-link recursion costs one interpreter round trip per 6x6 product, and those
round trips, not the flops, set the time for a 6-DOF arm.

With the world-frame joint screws ``s_j = Ad(T_parent T_home_j) S_j`` (``[angular;
linear]``, GTSAM's order):

* ``v_i = Σ_j K[i,j] s_j q̇_j`` (link spatial velocity; seed 004 Eq. 6.1);
* ``a_i = a_0 + Σ_j K[i,j] (s_j q̈_j + ad(v_{c(j)}) s_j q̇_j)`` with the gravity as base
  acceleration ``a_0 = [0; -g]`` (Eq. 6.2);
* ``f_i = I_i a_i − ad(v_i)ᵀ I_i v_i`` (Newton-Euler in the world frame, seed 002 Eq. 6);
* ``f̂_j = Σ_i K[i,j] f_i`` and ``τ_j = s_jᵀ f̂_j`` (Eqs. 6.3-6.4, seed 002 Eq. 7).

The derivatives are exact (forward-mode, not finite differences): moving ``q_k`` turns
the subtree of joint ``k`` about ``s_k``, so ``∂s_j/∂q_k = ad(s_k) s_j`` and
``∂I_i/∂q_k = −ad(s_k)ᵀ I_i − I_i ad(s_k)`` for the joints and links below ``k``; the
rest follows by the product rule, batched over all (link, direction) pairs.
Forward dynamics is ``q̈ = M⁻¹(τ − h)`` with ``∂q̈/∂x = −M⁻¹ ∂τ_ID/∂x`` at that q̈.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import SpatialModel

__all__ = ['SpatialDynamics', 'TreeState', 'IDResult', 'FDResult', 'ad_matrix', 'cross3']


def _ad_basis() -> np.ndarray:
    """(6, 36): ``ad(x).ravel() = x @ basis`` for ``x = [w; v]``: ``[[w×, 0], [v×, w×]]``."""
    E = np.zeros((6, 6, 6))
    for c in range(3):
        e = np.zeros(3)
        e[c] = 1.0
        W = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
        E[c, :3, :3] = W
        E[c, 3:, 3:] = W
        E[c + 3, 3:, :3] = W
    return E.reshape(6, 36)


def _coad_basis() -> np.ndarray:
    """(6, 36): ``B(h).ravel() = h @ basis`` with ``B(h) x = ad(x)ᵀ h`` (a wrench h)."""
    A = _ad_basis().reshape(6, 6, 6)            # A[c] = ad(e_c)
    out = np.zeros((6, 6, 6))
    for k in range(6):                          # B(e_k)[:, c] = ad(e_c)ᵀ e_k
        out[k] = A[:, k, :].T
    return out.reshape(6, 36)


_AD = _ad_basis()
_COAD = _coad_basis()
_SKEW = np.array([[0, 0, 0, 0, 0, -1, 0, 1, 0],
                  [0, 0, 1, 0, 0, 0, -1, 0, 0],
                  [0, -1, 0, 1, 0, 0, 0, 0, 0]], float)   # skew(p).ravel() = p @ _SKEW


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b of two 3-vectors (np.cross costs ~15 µs of axis handling per call; the per-tick
    sensor and loop code calls this often)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])


def ad_matrix(x: np.ndarray) -> np.ndarray:
    """Batched ``ad(x)`` (..., 6, 6) of twists x (..., 6) ``[w; v]`` (seed 002's ``ad``)."""
    return (x @ _AD).reshape(x.shape[:-1] + (6, 6))


@dataclass(frozen=True)
class IDResult:
    """Inverse dynamics at one state. Jacobians are None unless asked for."""

    tau: np.ndarray                      # (n,)
    dtau_dq: np.ndarray | None = None    # (n, n)
    dtau_dqd: np.ndarray | None = None   # (n, n)
    M: np.ndarray | None = None          # (n, n) = ∂τ/∂q̈


@dataclass(frozen=True)
class FDResult:
    """Forward dynamics at one state. Jacobians are None unless asked for."""

    qdd: np.ndarray                      # (n,)
    dqdd_dq: np.ndarray | None = None    # (n, n)
    dqdd_dqd: np.ndarray | None = None   # (n, n)
    dqdd_dtau: np.ndarray | None = None  # (n, n) = M⁻¹


@dataclass(frozen=True)
class TreeState:
    """Kinematics of one (q, q̇), shared by ID, M and FD at that state (a per-call workspace)."""

    T: np.ndarray       # (nb, 4, 4) link poses in the root frame
    s: np.ndarray       # (n, 6) world joint screws
    Iw: np.ndarray       # (nb, 6, 6) world spatial inertias
    v: np.ndarray       # (nb, 6) link spatial velocities
    adV: np.ndarray     # (nb, 6, 6) ad(v_i)
    sdot: np.ndarray    # (n, 6) ṡ_j = ad(v_c(j)) s_j
    Iv: np.ndarray      # (nb, 6) I_i v_i
    qd: np.ndarray      # (n,)


class SpatialDynamics:
    """Tree dynamics of one ``SpatialModel``; holds only constants derived once from it.

    The root is fixed: on a floating model (:mod:`.floating`) the poses are relative to
    the base (leg kinematics in the base frame) and the dynamics those of the base held.

    Nothing is cached between calls: each call makes its own ``TreeState``
    (Pinocchio's Model/Data split, with the Data made per call).
    """

    def __init__(self, model: SpatialModel) -> None:
        self.model = model
        n, nb = model.n, model.nb
        self.n, self.nb = n, nb
        rev = np.array([t == 'revolute' for t in model.joint_type], float)
        self._rev, self._pri = rev, 1.0 - rev
        K = np.zeros((nb, n))                                 # K[i, j]: joint j above link i
        for j, p in enumerate(model.parent):
            K[j + 1] = K[p]
            K[j + 1, j] = 1.0
        self.K = K
        self.D = K[1:] - np.eye(n)                            # D[j, k]: k strictly above j
        self._KT = np.ascontiguousarray(K.T)
        self._Kcol = K[:, None, :]                            # (nb, 1, n) column masks
        self._Dcol = self.D[:, None, :]
        # local transform T_home_j exp(S_j q_j) = Σ_m c_m(q_j) basis[j, m] (Rodrigues)
        W = (model.axis @ _SKEW).reshape(n, 3, 3)
        E = np.zeros((n, 4, 4, 4))
        E[:, 0, :3, :3] = np.eye(3)
        E[:, 0, 3, 3] = 1.0
        E[:, 1, :3, :3] = W * rev[:, None, None]
        E[:, 2, :3, :3] = (W @ W) * rev[:, None, None]
        E[:, 3, :3, 3] = model.axis * (1.0 - rev)[:, None]
        self._basis = (model.T_home[:, None] @ E).reshape(n, 4, 16)
        # [ω | p] of the child frame: T[:3, :] @ [[a, 0], [0, 1]]
        Bap = np.zeros((n, 4, 2))
        Bap[:, :3, 0] = model.axis
        Bap[:, 3, 1] = 1.0
        self._Bap = Bap
        self.mass = np.asarray(model.mass, float)
        self._Icom = np.asarray(model.inertia, float)
        self._com4 = np.concatenate([model.com, np.ones((nb, 1))], axis=1)[:, :, None]
        self._m3 = self.mass[:, None, None] * np.eye(3)
        self.a0 = np.concatenate([np.zeros(3), -np.asarray(model.gravity, float)])
        self._eye = np.arange(n)
        self._I4 = np.eye(4)
        self._parents = [int(p) for p in model.parent]

    # -- kinematics -------------------------------------------------------------------------
    def poses(self, q: np.ndarray) -> np.ndarray:
        """(nb, 4, 4) link poses in the root frame (seed 002's pose factor chain)."""
        q = np.asarray(q, float)
        c = np.empty((self.n, 1, 4))
        th = q * self._rev
        c[:, 0, 0] = 1.0
        c[:, 0, 1] = np.sin(th)
        c[:, 0, 2] = 1.0 - np.cos(th)
        c[:, 0, 3] = q * self._pri
        local = (c @ self._basis).reshape(self.n, 4, 4)
        T = np.empty((self.nb, 4, 4))
        T[0] = self._I4
        for j, p in enumerate(self._parents):
            np.matmul(T[p], local[j], out=T[j + 1])
        return T

    def state(self, q: np.ndarray, qd: np.ndarray) -> TreeState:
        """Poses, screws, inertias and velocities at (q, q̇) (seed 004 Eq. 6.1)."""
        T = self.poses(q)
        qd = np.asarray(qd, float)
        wp = T[1:, :3, :] @ self._Bap                         # (n, 3, 2): [R a | p]
        Ra = wp[:, :, 0]
        s = np.empty((self.n, 6))
        s[:, :3] = Ra * self._rev[:, None]
        pxw = (wp[:, :, 1] @ _SKEW).reshape(-1, 3, 3) @ Ra[:, :, None]
        s[:, 3:] = pxw[:, :, 0] * self._rev[:, None] + Ra * self._pri[:, None]
        # world inertia about the origin: [[Ic + m[c]ᵀ[c], m[c]], [m[c]ᵀ, m]]
        R = T[:, :3, :3]
        c = (T[:, :3, :] @ self._com4)[:, :, 0]
        mC = self.mass[:, None, None] * (c @ _SKEW).reshape(-1, 3, 3)
        Iw = np.empty((self.nb, 6, 6))
        Iw[:, :3, :3] = R @ self._Icom @ R.transpose(0, 2, 1) - mC @ (mC / np.maximum(
            self.mass, 1e-300)[:, None, None])
        Iw[:, :3, 3:] = mC
        Iw[:, 3:, :3] = -mC
        Iw[:, 3:, 3:] = self._m3
        v = self.K @ (s * qd[:, None])
        adV = ad_matrix(v)
        sdot = (adV[1:] @ s[:, :, None])[:, :, 0]
        Iv = (Iw @ v[:, :, None])[:, :, 0]
        return TreeState(T=T, s=s, Iw=Iw, v=v, adV=adV, sdot=sdot, Iv=Iv, qd=qd)

    def point_motion(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, link: int,
                     r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World position, velocity and acceleration of point ``r`` (link frame) of ``link``.

        ``ṗ = v + ω × p`` and ``p̈ = a_v + α × p + ω × ṗ`` from the link's spatial velocity
        and acceleration (seed 004 §5; gravity not included: add it for an accelerometer).
        """
        st = self.state(q, qd)
        a = self.K[link] @ (st.s * np.asarray(qdd, float)[:, None] + st.sdot * st.qd[:, None])
        p = st.T[link, :3, :3] @ np.asarray(r, float) + st.T[link, :3, 3]
        w, v = st.v[link, :3], st.v[link, 3:]
        pd = v + cross3(w, p)
        return p, pd, a[3:] + cross3(a[:3], p) + cross3(w, pd)

    # -- inverse dynamics ---------------------------------------------------------------------
    def _forces(self, st: TreeState, qdd: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                              np.ndarray]:
        """(a, Iw a, f̂): accelerations, momenta rates and joint wrenches (Eqs. 6.2-6.3)."""
        a = self.a0 + self.K @ (st.s * qdd[:, None] + st.sdot * st.qd[:, None])
        Ia = (st.Iw @ a[:, :, None])[:, :, 0]
        f = Ia - (st.Iv[:, None, :] @ st.adV)[:, 0, :]        # ad(v)ᵀ Iw v, as a row product
        return a, Ia, self._KT @ f

    def inverse(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                derivatives: bool = False) -> IDResult:
        """τ = ID(q, q̇, q̈) (seed 004 §6 RNEA), optionally with ∂τ/∂q, ∂τ/∂q̇ and M."""
        st = self.state(q, qd)
        qdd = np.asarray(qdd, float)
        a, Ia, fhat = self._forces(st, qdd)
        tau = (st.s[:, None, :] @ fhat[:, :, None])[:, 0, 0]
        if not derivatives:
            return IDResult(tau=tau)
        J = self._jacobians(st, qdd, a, Ia, fhat)
        n = self.n
        return IDResult(tau=tau, dtau_dq=J[:, :n], dtau_dqd=J[:, n:2 * n], M=J[:, 2 * n:])

    def motion_derivatives(self, st: TreeState, qdd: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(U, ∂v, ∂a): derivatives of every link's spatial velocity and acceleration.

        ``dv[i, :, c]`` and ``da[i, :, c]`` (nb, 6, 3n) are ∂v_i and ∂a_i along direction
        ``c`` of ``[q | q̇ | q̈]`` (seed 004 Eqs. 6.1-6.2 differentiated); ``U[j, :, k] =
        ∂s_j/∂q_k``. Moving q_k turns everything below joint k about s_k, so
        ``∂s_j/∂q_k = ad(s_k) s_j`` for the joints j below k.
        """
        n, nb = self.n, self.nb
        s, adV, sdot, qd = st.s, st.adV, st.sdot, st.qd
        sT = s.T                                               # (6, n)
        adS = ad_matrix(s)                                     # (n, 6, 6)
        U = -(adS @ sT) * self._Dcol                           # (n, 6, n)
        dv = np.zeros((nb, 6, 3 * n))
        # ∂v_i/∂q_k = K[i,k] ad(s_k)(v_i − v_c(k)) = K[i,k] (ṡ_k − ad(v_i) s_k)
        dv_q = (sdot.T - adV @ sT) * self._Kcol                # (nb, 6, n)
        dv[:, :, :n] = dv_q
        dv[:, :, n:2 * n] = sT * self._Kcol
        # w_j = s_j q̈_j + ṡ_j q̇_j and its derivatives; ∂v_c(j) = dv_q[j + 1]
        dw = np.zeros((n, 6, 3 * n))
        dw[:, :, :n] = U * qdd[:, None, None] + qd[:, None, None] * (
            adV[1:] @ U - adS @ dv_q[1:])
        dw[:, :, n:2 * n] = U * qd[:, None, None]
        dw[self._eye, :, n + self._eye] += sdot
        dw[self._eye, :, 2 * n + self._eye] = s
        da = (self.K @ dw.reshape(n, -1)).reshape(nb, 6, 3 * n)
        return U, dv, da

    def _jacobians(self, st: TreeState, qdd: np.ndarray, a: np.ndarray, Ia: np.ndarray,
                   fhat: np.ndarray) -> np.ndarray:
        """(n, 3n) [∂τ/∂q | ∂τ/∂q̇ | ∂τ/∂q̈] by forward-mode differentiation of the sums.

        Columns are directions; ∂I_i/∂q_k = −ad(s_k)ᵀ I_i − I_i ad(s_k) below joint k.
        """
        n, nb = self.n, self.nb
        s, Iw, adV = st.s, st.Iw, st.adV
        sT = s.T
        U, dv, da = self.motion_derivatives(st, qdd)
        # f_i = I_i a_i − ad(v_i)ᵀ I_i v_i
        C = (st.Iv @ _COAD).reshape(nb, 6, 6) + adV.transpose(0, 2, 1) @ Iw
        df = Iw @ da - C @ dv
        # ∂Iw terms: −K[i,k] (B(Iw a) − Iw ad(a) − ad(v)ᵀ (B(Iw v) − Iw ad(v))) s_k
        Q = ((Ia @ _COAD).reshape(nb, 6, 6) - Iw @ ad_matrix(a)
             - adV.transpose(0, 2, 1) @ ((st.Iv @ _COAD).reshape(nb, 6, 6) - Iw @ adV))
        df[:, :, :n] -= (Q @ sT) * self._Kcol
        dfhat = (self._KT @ df.reshape(nb, -1)).reshape(n, 6, 3 * n)
        J = (s[:, None, :] @ dfhat)[:, 0, :]
        J[:, :n] += (fhat[:, None, :] @ U)[:, 0, :]
        return J

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q) (seed 004 §7): ``M[j,k] = s_jᵀ (Σ_i K[i,j] K[i,k] I_i) s_k``."""
        return self._mass(self.state(q, np.zeros(self.n)))

    def mass_matrix_inverse(self, q: np.ndarray) -> np.ndarray:
        """M(q)⁻¹ (Pinocchio's backend has it from one ABA pass; here by inversion)."""
        return np.linalg.inv(self.mass_matrix(q))

    def _mass(self, st: TreeState) -> np.ndarray:
        Is = (st.Iw @ st.s.T) * self._Kcol                     # (nb, 6, n)
        F = (self._KT @ Is.reshape(self.nb, -1)).reshape(self.n, 6, self.n)
        return (st.s[:, None, :] @ F)[:, 0, :]

    def bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """h(q, q̇) = C(q, q̇) q̇ + g(q) = ID(q, q̇, 0)."""
        return self.inverse(q, qd, np.zeros(self.n)).tau

    # -- forward dynamics ---------------------------------------------------------------------
    def accelerations(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """q̈ of :meth:`forward` (the interface of
        :meth:`.pin_backend.PinocchioDynamics.accelerations`)."""
        return self.forward(q, qd, tau).qdd

    def acceleration_jacobians(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray
                               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q̈, ∂q̈/∂q, ∂q̈/∂q̇) of :meth:`forward` with derivatives."""
        r = self.forward(q, qd, tau, derivatives=True)
        return r.qdd, r.dqdd_dq, r.dqdd_dqd

    def torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """τ of :meth:`inverse`."""
        return self.inverse(q, qd, qdd).tau

    def forward(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray,
                derivatives: bool = False, minv: bool = True) -> FDResult:
        """q̈ = M(q)⁻¹ (τ − h(q, q̇)), optionally with ∂q̈/∂q, ∂q̈/∂q̇ and ∂q̈/∂τ = M⁻¹
        (always: the Jacobians need it; ``minv`` is :class:`.pin_backend.PinocchioDynamics`'s
        option to skip it).

        M is n×n and symmetric positive definite: its explicit inverse (LAPACK) is the
        cheapest way here, and the Jacobians reuse it, ``∂q̈/∂x = −M⁻¹ ∂ID/∂x`` at the
        q̈ just found (ID(q, q̇, q̈(q, q̇, τ)) = τ holds identically).
        """
        st = self.state(q, qd)
        zero = np.zeros(self.n)
        _, _, fhat0 = self._forces(st, zero)
        h = (st.s[:, None, :] @ fhat0[:, :, None])[:, 0, 0]
        Minv = np.linalg.inv(self._mass(st))
        qdd = Minv @ (np.asarray(tau, float) - h)
        if not derivatives:
            return FDResult(qdd=qdd)
        a, Ia, fhat = self._forces(st, qdd)
        J = Minv @ self._jacobians(st, qdd, a, Ia, fhat)[:, :2 * self.n]
        return FDResult(qdd=qdd, dqdd_dq=-J[:, :self.n], dqdd_dqd=-J[:, self.n:],
                        dqdd_dtau=Minv)
