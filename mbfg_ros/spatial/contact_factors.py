"""Seed 002's factors for a floating base with feet on the ground: the link wrench balance
with contact forces, and the stance-foot contact factors (issue 28 items 1-2).

A stance foot is a loop closed on the ground (seed 002 §VII): its point ``r`` (in the frame
of link ``b``, pose ``T_b = (R_b, t_b)``, body twist ``V_b = [ω; v]``, body acceleration
``A_b = [ω̇; v̇]`` as in Eqs. 4-5) is held by a 3-D force ``f`` from the ground, in world
axes. With ``u = v + ω × r`` (the foot's velocity in the link frame)::

    wrench   Eq. 6 of link b − Σ_feet [r × R_bᵀ f; R_bᵀ f] = 0         (contact wrench)
    velocity R_b (v + ω × r) = 0                    (no slip; σ: the slip allowed)
    position R_b r + t_b − p* = 0                   (the foot stays on its foothold p*)
    accel    R_b (v̇ + ω̇ × r + ω × u) = 0          (zero contact acceleration: the
                                                    constraint that makes f determinate)

The base link has no parent joint: its wrench factor has no ``F_j`` (nothing but the
children's wrenches, gravity and the feet hold it), and in Eqs. 4-5 its twist and
acceleration are variables instead of the fixed root's zeros. Every function returns the
error and, when ``H`` is given, fills the Jacobians in key order (Pose3 tangent ``[rotation;
translation]``, right perturbation), like :mod:`.graph_factors`; the constructors bind them
with the package's one binder, :func:`mbfg_ros.core.factors.custom_factor`.
"""
from __future__ import annotations

from typing import Sequence

import gtsam
import numpy as np

from ..core.angles import skew
from ..core.factors import custom_factor
from . import graph_factors as gf

__all__ = ['contact_wrench_error', 'contact_velocity_error', 'contact_position_error',
           'contact_acceleration_error', 'contact_wrench_factor', 'contact_velocity_factor',
           'contact_position_factor', 'contact_acceleration_factor']


def contact_wrench_error(A_c: np.ndarray, V_c: np.ndarray, F_j: np.ndarray | None,
                         T_c: gtsam.Pose3,
                         children: Sequence[tuple[np.ndarray, float, np.ndarray, np.ndarray]],
                         forces: Sequence[tuple[np.ndarray, np.ndarray]], G: np.ndarray,
                         g: np.ndarray, H: list | None = None) -> np.ndarray:
    """Eq. 6 of link c with ground forces, over keys (A_c, V_c, [F_j], T_c, F_k, θ_k for each
    child k, f for each foot). ``F_j`` None: the floating base (no parent joint, no key).
    ``children``: (F_k, θ_k, T_home_inv_k, S_k) as in :func:`.graph_factors.wrench_error`;
    ``forces``: (f (3,) world axes, r (3,) the foot point in link c's frame)."""
    R = T_c.rotation().matrix()
    nk = len(children)
    Hw = [None] * (4 + 2 * nk) if H is not None else None
    err = gf.wrench_error(A_c, V_c, np.zeros(6) if F_j is None else F_j, R, children, G, g,
                          Hw)
    rows = []
    H_rot = np.zeros((6, 3))
    for f, r in forces:
        fb = R.T @ f
        err[:3] -= np.cross(r, fb)
        err[3:] -= fb
        if H is not None:
            Sr, Sf = skew(r), skew(fb)
            # R exp(δ×): R_bᵀ f → (1 − δ×) R_bᵀ f = fb + [fb]× δ
            H_rot[:3] -= Sr @ Sf
            H_rot[3:] -= Sf
            rows.append(-np.vstack([Sr @ R.T, R.T]))
    if H is None:
        return err
    i = 0
    H[i], H[i + 1] = Hw[0], Hw[1]
    i = 2
    if F_j is not None:
        H[i] = Hw[2]
        i += 1
    Hp = Hw[3].copy()
    Hp[:, :3] += H_rot
    H[i] = Hp
    i += 1
    for k in range(nk):
        H[i], H[i + 1] = Hw[4 + 2 * k], Hw[5 + 2 * k]
        i += 2
    for Hf in rows:
        H[i] = Hf
        i += 1
    return err


def contact_velocity_error(T_b: gtsam.Pose3, V_b: np.ndarray, r: np.ndarray,
                           H: list | None = None) -> np.ndarray:
    """Stance foot velocity ``R_b (v + ω × r)`` (world axes) over keys (T_b, V_b)."""
    R = T_b.rotation().matrix()
    w, v = V_b[:3], V_b[3:]
    u = v + np.cross(w, r)
    if H is not None:
        H[0] = np.hstack([-R @ skew(u), np.zeros((3, 3))])
        H[1] = R @ np.hstack([-skew(r), np.eye(3)])
    return R @ u


def contact_position_error(T_b: gtsam.Pose3, p_star: np.ndarray, r: np.ndarray,
                           H: list | None = None) -> np.ndarray:
    """Stance foot position ``R_b r + t_b − p*`` over keys (T_b, p*) (the foothold p* a
    variable: held while the foot is in stance, estimated from every tick it touches)."""
    R = T_b.rotation().matrix()
    if H is not None:
        H[0] = np.hstack([-R @ skew(r), R])
        H[1] = -np.eye(3)
    return R @ r + T_b.translation() - p_star


def contact_acceleration_error(T_b: gtsam.Pose3, V_b: np.ndarray, A_b: np.ndarray,
                               r: np.ndarray, H: list | None = None) -> np.ndarray:
    """Stance foot classical acceleration ``R_b (v̇ + ω̇ × r + ω × u)`` (world axes) over keys
    (T_b, V_b, A_b); zero in stance (what makes the contact forces determinate)."""
    R = T_b.rotation().matrix()
    w, v = V_b[:3], V_b[3:]
    u = v + np.cross(w, r)
    inner = A_b[3:] + np.cross(A_b[:3], r) + np.cross(w, u)
    if H is not None:
        Sw = skew(w)
        H[0] = np.hstack([-R @ skew(inner), np.zeros((3, 3))])
        H[1] = R @ np.hstack([-skew(u) - Sw @ skew(r), Sw])
        H[2] = R @ np.hstack([-skew(r), np.eye(3)])
    return R @ inner


def contact_wrench_factor(key_A: int, key_V: int, key_F: int | None, key_T: int,
                          children: Sequence[tuple[int, int, np.ndarray, np.ndarray]],
                          feet: Sequence[tuple[int, np.ndarray]], G: np.ndarray, g: np.ndarray,
                          noise: gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    """:func:`contact_wrench_error` as a factor: ``key_F`` None for the floating base;
    ``children``: (key of F_k, key of θ_k (a 1-vector), T_home_inv_k, S_k); ``feet``: (key
    of f, r) per foot on this link in stance."""
    keys = [key_A, key_V] + ([] if key_F is None else [key_F]) + [key_T]
    for kF, kth, _, _ in children:
        keys += [kF, kth]
    keys += [kf for kf, _ in feet]
    consts = [(Ti, np.asarray(S, float)) for _, _, Ti, S in children]
    rs = [np.asarray(r, float) for _, r in feet]
    head = 3 if key_F is None else 4
    G, g = np.asarray(G, float), np.asarray(g, float)

    def fn(xs, want):
        kids = [(xs[head + 2 * i], xs[head + 2 * i + 1][0], Ti, S)
                for i, (Ti, S) in enumerate(consts)]
        forces = [(xs[head + 2 * len(kids) + i], r) for i, r in enumerate(rs)]
        return _filled(want, len(keys), lambda H: contact_wrench_error(
            xs[0], xs[1], None if key_F is None else xs[2], xs[head - 1], kids, forces, G, g,
            H))
    return custom_factor(keys, noise, fn, poses=[i == head - 1 for i in range(len(keys))])


def contact_velocity_factor(key_T: int, key_V: int, r: np.ndarray,
                            noise: gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    """:func:`contact_velocity_error` as a factor; ``noise``: the slip σ (m/s)."""
    r = np.asarray(r, float)
    return custom_factor([key_T, key_V], noise,
                         lambda xs, want: _filled(want, 2, lambda H: contact_velocity_error(
                             xs[0], xs[1], r, H)), poses=(True, False))


def contact_position_factor(key_T: int, key_p: int, r: np.ndarray,
                            noise: gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    """:func:`contact_position_error` as a factor; ``noise``: how far a stance foot may
    creep (m)."""
    r = np.asarray(r, float)
    return custom_factor([key_T, key_p], noise,
                         lambda xs, want: _filled(want, 2, lambda H: contact_position_error(
                             xs[0], xs[1], r, H)), poses=(True, False))


def contact_acceleration_factor(key_T: int, key_V: int, key_A: int, r: np.ndarray,
                                noise: gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    """:func:`contact_acceleration_error` as a factor."""
    r = np.asarray(r, float)
    return custom_factor([key_T, key_V, key_A], noise,
                         lambda xs, want: _filled(want, 3, lambda H: contact_acceleration_error(
                             xs[0], xs[1], xs[2], r, H)), poses=(True, False, False))


def _filled(want: bool, k: int, error) -> tuple[np.ndarray, list | None]:
    H = [None] * k if want else None
    return error(H), H
