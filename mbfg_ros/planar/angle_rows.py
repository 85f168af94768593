"""The angle constraint row in one place (seed 000 Eqs. 44-45, written as one smooth equation):

    Φ = (a × b) cos θ − (a · b) sin θ

over ``u = (ax, ay, bx, by, θ)``, the two vectors and the angle coordinate. Every user of
the row takes its formulas from here, each form for its job:

* :func:`angle_derivatives` and :func:`angle_third`: Φ, gradient, Hessian and third
  derivatives as full tensors, batched over rows (``planar.constraints.Constraints``);
* :func:`angle_local`, :func:`angle_hess`, :func:`angle_hess_matrix`: the same quantities
  contracted with the rates (Φ̇q row, q̇ᵀΦqq q̇ and its gradient), for one row with floats
  (the per-tick path) or for arrays of rows and samples (``inverse_models.BatchModel``);
* :func:`angle_row_rate`: gradient and q̇ᵀΦqq q̇ only, the cheapest per-tick form.

``test/planar/test_angle_rows.py`` checks the contracted forms against the full tensors and the
tensors against finite differences.
"""
from __future__ import annotations

import itertools
import math
from typing import Callable

import numpy as np

__all__ = ['ANGLE_U_MAP', 'angle_derivatives', 'angle_third', 'angle_local', 'angle_hess',
           'angle_hess_matrix', 'angle_row_rate']

# u = E w_loc: (ax, ay, bx, by, theta) from (a1x, a1y, a2x, a2y, b1x, b1y, b2x, b2y, theta).
ANGLE_U_MAP = np.zeros((5, 9))
ANGLE_U_MAP[0, 0], ANGLE_U_MAP[0, 2] = -1, 1
ANGLE_U_MAP[1, 1], ANGLE_U_MAP[1, 3] = -1, 1
ANGLE_U_MAP[2, 4], ANGLE_U_MAP[2, 6] = -1, 1
ANGLE_U_MAP[3, 5], ANGLE_U_MAP[3, 7] = -1, 1
ANGLE_U_MAP[4, 8] = 1


def angle_derivatives(ax, ay, bx, by, c, s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Φ (K,), gradient (K, 5) and Hessian (K, 5, 5) in u = (ax, ay, bx, by, θ)
    (``c``, ``s``: cos θ, sin θ)."""
    C = ax * by - ay * bx
    D = ax * bx + ay * by
    phi = C * c - D * s
    g = np.stack([by * c - bx * s, -bx * c - by * s, -ay * c - ax * s, ax * c - ay * s,
                  -C * s - D * c], axis=1)
    K = len(phi)
    H = np.zeros((K, 5, 5))
    H[:, 0, 2] = H[:, 2, 0] = -s
    H[:, 0, 3] = H[:, 3, 0] = c
    H[:, 1, 2] = H[:, 2, 1] = -c
    H[:, 1, 3] = H[:, 3, 1] = -s
    H[:, 0, 4] = H[:, 4, 0] = -by * s - bx * c
    H[:, 1, 4] = H[:, 4, 1] = bx * s - by * c
    H[:, 2, 4] = H[:, 4, 2] = ay * s - ax * c
    H[:, 3, 4] = H[:, 4, 3] = -ax * s - ay * c
    H[:, 4, 4] = -C * c + D * s
    return phi, g, H


def angle_third(ax, ay, bx, by, c, s) -> np.ndarray:
    """Third derivatives (K, 5, 5, 5) of Φ in u-space (symmetric)."""
    C = ax * by - ay * bx
    D = ax * bx + ay * by
    K = len(c)
    T = np.zeros((K, 5, 5, 5))

    def put(i: int, j: int, k: int, val: np.ndarray) -> None:
        for p in set(itertools.permutations((i, j, k))):
            T[(slice(None),) + p] = val
    put(0, 2, 4, -c)
    put(0, 3, 4, -s)
    put(1, 2, 4, s)
    put(1, 3, 4, -c)
    put(0, 4, 4, -by * c + bx * s)
    put(1, 4, 4, bx * c + by * s)
    put(2, 4, 4, ay * c + ax * s)
    put(3, 4, 4, -ax * c + ay * s)
    put(4, 4, 4, C * s + D * c)
    return T


def angle_local(u: np.ndarray, ud: np.ndarray, cos: Callable = math.cos,
                 sin: Callable = math.sin):
    """Φ, gradient g_u (5,), q̇ᵀΦqq q̇ and its u-gradient for one angle row.

    ``u``, ``ud`` unpack into (ax, ay, bx, by, θ) and their rates: floats for
    one row (the per-tick path, with ``math.cos``/``math.sin``), or arrays of
    any common shape for many rows and samples at once (pass ``np.cos``,
    ``np.sin``; :class:`mbfg_ros.planar.problems.inverse.BatchModel` does).
    """
    ax, ay, bx, by, th = u
    dax, day, dbx, dby, dth = ud
    c, s = cos(th), sin(th)
    # C b, Cᵀ a, C' b, C'ᵀ a with C = [[-s, c], [-c, -s]], C' = [[-c, -s], [s, -c]].
    cb0, cb1 = -s * bx + c * by, -c * bx - s * by
    ca0, ca1 = -s * ax - c * ay, c * ax - s * ay
    db0, db1 = -c * bx - s * by, s * bx - c * by
    da0, da1 = -c * ax + s * ay, -s * ax - c * ay
    phi = ax * cb0 + ay * cb1
    dphi_th = ax * db0 + ay * db1
    g = (cb0, cb1, ca0, ca1, dphi_th)
    # Rates contracted with C, C'.
    cdb0, cdb1 = -s * dbx + c * dby, -c * dbx - s * dby      # C ḃ
    ddb0, ddb1 = -c * dbx - s * dby, s * dbx - c * dby       # C' ḃ
    dda0, dda1 = -c * dax + s * day, -s * dax - c * day      # C'ᵀ ȧ
    cda0, cda1 = -s * dax - c * day, c * dax - s * day       # Cᵀ ȧ
    # Φ̇q row in u: H_u u̇.
    hd = (cdb0 + dth * db0, cdb1 + dth * db1, cda0 + dth * da0, cda1 + dth * da1,
          dax * db0 + day * db1 + dbx * da0 + dby * da1 - dth * phi)
    # q̇ᵀ Φqq q̇ = u̇ᵀ H_u u̇.
    quad = dax * hd[0] + day * hd[1] + dbx * hd[2] + dby * hd[3] + dth * hd[4]
    # ∂(u̇ᵀ H_u u̇)/∂u (third derivatives; C'' = −C).
    t2 = dth * dth
    gam = (2 * dth * ddb0 - t2 * cb0, 2 * dth * ddb1 - t2 * cb1,
           2 * dth * dda0 - t2 * ca0, 2 * dth * dda1 - t2 * ca1,
           2 * (dax * ddb0 + day * ddb1)
           - 2 * dth * (dax * cb0 + day * cb1 + ax * cdb0 + ay * cdb1) - t2 * dphi_th)
    return phi, g, hd, quad, gam, (c, s, db0, db1, da0, da1, phi)


def angle_hess(cache, v: np.ndarray) -> tuple[float, ...]:
    """H_u v for one angle row, or many (arrays), from :func:`angle_local`'s cache."""
    c, s, db0, db1, da0, da1, phi = cache
    va0, va1, vb0, vb1, vth = v
    return (-s * vb0 + c * vb1 + vth * db0, -c * vb0 - s * vb1 + vth * db1,
            -s * va0 - c * va1 + vth * da0, c * va0 - s * va1 + vth * da1,
            va0 * db0 + va1 * db1 + vb0 * da0 + vb1 * da1 - vth * phi)


def angle_hess_matrix(cache) -> np.ndarray:
    """The 5x5 u-space Hessian H_u of one angle row, or (..., 5, 5) for arrays."""
    c, s, db0, db1, da0, da1, phi = cache
    H = np.zeros(np.shape(c) + (5, 5))
    H[..., 0, 2], H[..., 0, 3], H[..., 1, 2], H[..., 1, 3] = -s, c, -c, -s
    H[..., 2, 0], H[..., 3, 0], H[..., 2, 1], H[..., 3, 1] = -s, c, -c, -s
    H[..., 0, 4] = H[..., 4, 0] = db0
    H[..., 1, 4] = H[..., 4, 1] = db1
    H[..., 2, 4] = H[..., 4, 2] = da0
    H[..., 3, 4] = H[..., 4, 3] = da1
    H[..., 4, 4] = -phi
    return H


def angle_row_rate(uu: list) -> tuple[tuple[float, ...], float]:
    """Gradient g_u and q̇ᵀΦqq q̇ of one angle row from [[u_i, u̇_i], ...] (floats)."""
    (ax, dax), (ay, day), (bx, dbx), (by, dby), (th, dth) = uu
    c, s = math.cos(th), math.sin(th)
    cb0, cb1 = -s * bx + c * by, -c * bx - s * by
    db0, db1 = -c * bx - s * by, s * bx - c * by
    da0, da1 = -c * ax + s * ay, -s * ax - c * ay
    g = (cb0, cb1, -s * ax - c * ay, c * ax - s * ay, ax * db0 + ay * db1)
    phi = ax * cb0 + ay * cb1
    quad = (2 * (dax * (-s * dbx + c * dby) + day * (-c * dbx - s * dby))
            + 2 * dth * (dax * db0 + day * db1 + dbx * da0 + dby * da1) - dth * dth * phi)
    return g, quad
