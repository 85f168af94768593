"""Seed 002's dynamics factors (Xie & Dellaert, Eqs. 4-7 and §VII) as error functions with
analytic Jacobians, and the GTSAM ``CustomFactor`` constructors that wrap them.

Per tree joint ``j`` (parent link ``p``, child link ``c``; ``S`` its unit screw in the child
frame, ``X(θ) = T_{c,p}(θ) = (T_home exp(S θ))⁻¹`` and ``Ad = Ad_X``)::

    pose     (T_p T_home exp(S θ))⁻¹ T_c = 1                         (forward kinematics)
    twist    V_c − Ad V_p − S θ̇ = 0                                  (Eq. 4)
    accel    A_c − Ad A_p − S θ̈ − ad(V_c) S θ̇ = 0                    (Eq. 5)
    wrench   Σ_k Ad_kᵀ F_k − F_j + G A_c − ad(V_c)ᵀ G V_c − G [0; R_cᵀ g] = 0   (Eq. 6)
    torque   Sᵀ F_j − τ = 0                                            (Eq. 7)

Twists, accelerations and wrenches are ``[angular; linear]`` 6-vectors in the link frame;
``F_j`` is the wrench the parent applies to link ``c`` through joint ``j``. Gravity is
explicit (the seed's choice, end of §III): the wrench factor holds the link's pose and adds
``G [0; R_cᵀ g]``. Every function returns the error and, when ``H`` is given, fills the
Jacobian list in key order (``H[i]`` has one column per tangent dimension of key ``i``;
Pose3 tangent = ``[rotation; translation]``, right perturbation). ``dynamics_graph`` binds
them with the package's one binder, :func:`mbfg_ros.core.factors.custom_factor`.

Closed loops (§VII): a loop joint ``ℓ`` between frames ``A = T_p T_pA`` and ``B = T_c T_cB``
carries two wrench variables, ``W_c`` applied to ``c`` (in ``c``'s frame) and ``W_p`` applied
to ``p`` (in ``p``'s frame): *wrench equivalence* ``W_p + Ad(T_c⁻¹ T_p)ᵀ W_c = 0``; the
*planar-loop wrench* factor zeroes the out-of-plane components of ``W_c`` that a planar
loop cannot determine; the *min-torque* factor is a unit-weight prior ``τ = 0`` that
picks the minimum-norm torques when motors are redundant.
"""
from __future__ import annotations

from typing import Sequence

import gtsam
import numpy as np

from ..core.angles import skew

__all__ = ['ad', 'Ad', 'coad', 'joint_transform', 'twist_error', 'accel_error', 'wrench_error',
           'torque_error', 'pose_error', 'wrench_equivalence_error', 'planar_wrench_error']


def ad(x: np.ndarray) -> np.ndarray:
    """``ad(x)`` of a twist ``x = [w; v]``: ``[[w×, 0], [v×, w×]]`` (seed 002 §III)."""
    out = np.zeros((6, 6))
    W = skew(x[:3])
    out[:3, :3] = W
    out[3:, 3:] = W
    out[3:, :3] = skew(x[3:])
    return out


def coad(h: np.ndarray) -> np.ndarray:
    """``B(h)`` with ``B(h) x = ad(x)ᵀ h`` for a wrench ``h = [m; f]``."""
    out = np.zeros((6, 6))
    out[:3, :3] = skew(h[:3])
    out[:3, 3:] = skew(h[3:])
    out[3:, :3] = skew(h[3:])
    return out


def Ad(T: np.ndarray) -> np.ndarray:
    """Adjoint of a 4x4 transform for ``[w; v]`` twists: ``[[R, 0], [p× R, R]]``."""
    R, p = T[:3, :3], T[:3, 3]
    out = np.zeros((6, 6))
    out[:3, :3] = R
    out[3:, 3:] = R
    out[3:, :3] = skew(p) @ R
    return out


def joint_transform(T_home: np.ndarray, S: np.ndarray, theta: float) -> np.ndarray:
    """``T_home exp(S θ)`` (4x4): the child frame in the parent frame."""
    return T_home @ gtsam.Pose3.Expmap(S * theta).matrix()


def _X(T_home_inv: np.ndarray, S: np.ndarray, theta: float) -> np.ndarray:
    """``X(θ) = exp(−S θ) T_home⁻¹``: the parent frame in the child frame."""
    return gtsam.Pose3.Expmap(-S * theta).matrix() @ T_home_inv


def twist_error(V_p: np.ndarray, V_c: np.ndarray, theta: float, thetad: float,
                T_home_inv: np.ndarray, S: np.ndarray, H: list | None = None) -> np.ndarray:
    """Eq. 4 over keys (V_p, V_c, θ, θ̇)."""
    AdX = Ad(_X(T_home_inv, S, theta))
    AV = AdX @ V_p
    if H is not None:
        H[0] = -AdX
        H[1] = np.eye(6)
        H[2] = (ad(S) @ AV)[:, None]
        H[3] = -S[:, None]
    return V_c - AV - S * thetad


def accel_error(A_p: np.ndarray, A_c: np.ndarray, V_c: np.ndarray, theta: float,
                thetad: float, thetadd: float, T_home_inv: np.ndarray, S: np.ndarray,
                H: list | None = None) -> np.ndarray:
    """Eq. 5 over keys (A_p, A_c, V_c, θ, θ̇, θ̈)."""
    AdX = Ad(_X(T_home_inv, S, theta))
    AA = AdX @ A_p
    adS = ad(S)
    if H is not None:
        H[0] = -AdX
        H[1] = np.eye(6)
        H[2] = adS * thetad
        H[3] = (adS @ AA)[:, None]
        H[4] = (adS @ V_c)[:, None]            # −ad(V_c) S = ad(S) V_c
        H[5] = -S[:, None]
    return A_c - AA - S * thetadd + adS @ V_c * thetad


def wrench_error(A_c: np.ndarray, V_c: np.ndarray, F_j: np.ndarray, R_c: np.ndarray | None,
                 children: Sequence[tuple[np.ndarray, float, np.ndarray, np.ndarray]],
                 G: np.ndarray, g: np.ndarray, H: list | None = None) -> np.ndarray:
    """Eq. 6 over keys (A_c, V_c, F_j, [T_c], F_k, θ_k for each child k).

    ``children``: (F_k, θ_k, T_home_inv_k, S_k). ``R_c`` None: no gravity term (and no
    pose key).
    """
    GV = G @ V_c
    err = G @ A_c - ad(V_c).T @ GV - F_j
    Rg = None
    if R_c is not None:
        Rg = R_c.T @ g
        err -= G[:, 3:] @ Rg
    child_H = []
    for F_k, th_k, Ti_k, S_k in children:
        AdXk = Ad(_X(Ti_k, S_k, th_k))
        err += AdXk.T @ F_k
        if H is not None:
            child_H.append((AdXk.T, (-(AdXk.T @ ad(S_k).T) @ F_k)[:, None]))
    if H is not None:
        H[0] = G.copy()
        H[1] = -(ad(V_c).T @ G + coad(GV))
        H[2] = -np.eye(6)
        i = 3
        if R_c is not None:
            Hp = np.zeros((6, 6))
            Hp[:, :3] = -G[:, 3:] @ skew(Rg)
            H[3] = Hp
            i = 4
        for HF, Hth in child_H:
            H[i], H[i + 1] = HF, Hth
            i += 2
    return err


def torque_error(F_j: np.ndarray, tau: float, S: np.ndarray,
                 H: list | None = None) -> np.ndarray:
    """Eq. 7 over keys (F_j, τ)."""
    if H is not None:
        H[0] = S[None, :].copy()
        H[1] = -np.ones((1, 1))
    return np.array([S @ F_j - tau])


def pose_error(T_p: gtsam.Pose3, T_c: gtsam.Pose3, theta: float, T_home: gtsam.Pose3,
               S: np.ndarray, H: list | None = None) -> np.ndarray:
    """Forward kinematics over keys (T_p, T_c, θ): ``Log((T_p T_home exp(Sθ))⁻¹ T_c)``."""
    M = T_home.compose(gtsam.Pose3.Expmap(S * theta))
    if H is None:
        return gtsam.Pose3.Logmap(T_p.compose(M).between(T_c))
    Hp, Hm = np.zeros((6, 6), order='F'), np.zeros((6, 6), order='F')
    That = T_p.compose(M, Hp, Hm)
    Hb1, Hb2 = np.zeros((6, 6), order='F'), np.zeros((6, 6), order='F')
    B = That.between(T_c, Hb1, Hb2)
    HL = np.zeros((6, 6), order='F')
    e = gtsam.Pose3.Logmap(B, HL)
    H[0] = HL @ Hb1 @ Hp
    H[1] = HL @ Hb2
    H[2] = (HL @ Hb1 @ S)[:, None]            # T̂(θ + δ) = T̂ exp(S δ)
    return e


def wrench_equivalence_error(T_p: gtsam.Pose3, T_c: gtsam.Pose3, W_p: np.ndarray,
                             W_c: np.ndarray, H: list | None = None) -> np.ndarray:
    """§VII over keys (T_p, T_c, W_p, W_c): ``W_p + Ad(T_c⁻¹ T_p)ᵀ W_c = 0``."""
    if H is None:
        return W_p + T_c.between(T_p).AdjointMap().T @ W_c
    H1, H2 = np.zeros((6, 6), order='F'), np.zeros((6, 6), order='F')
    Tcp = T_c.between(T_p, H1, H2)              # H1: ∂/∂T_c, H2: ∂/∂T_p
    AdT = Tcp.AdjointMap()
    # ∂(Ad(X)ᵀ w)/∂X (right perturbation ξ): Ad(X exp ξ)ᵀ w = Ad(exp ξ)ᵀ Ad(X)ᵀ w
    # ≈ (1 + ad(ξ))ᵀ Ad(X)ᵀ w → + ad(ξ)ᵀ h = B(h) ξ with h = Ad(X)ᵀ w
    Bh = coad(AdT.T @ W_c)
    H[0] = Bh @ H2
    H[1] = Bh @ H1
    H[2] = np.eye(6)
    H[3] = AdT.T.copy()
    return W_p + AdT.T @ W_c


def planar_wrench_error(W: np.ndarray, P: np.ndarray, H: list | None = None) -> np.ndarray:
    """§VII's planar loop over key (W): ``P W = 0`` zeroes the components a planar loop
    cannot determine (``P``: rows selecting the out-of-plane moment and force)."""
    if H is not None:
        H[0] = P.copy()
    return P @ W
