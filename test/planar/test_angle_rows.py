"""The angle row's formulas, all in planar/angle_rows.py: the full tensors against finite
differences, and every contracted per-tick form against the full tensors."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbfg_ros.planar.angle_rows import (angle_derivatives, angle_hess, angle_hess_matrix,
                                        angle_local, angle_row_rate, angle_third)


def _phi(u: np.ndarray) -> float:
    ax, ay, bx, by, th = u
    return (ax * by - ay * bx) * math.cos(th) - (ax * bx + ay * by) * math.sin(th)


def _full(u: np.ndarray):
    ax, ay, bx, by, th = (np.array([x]) for x in u)
    phi, g, H = angle_derivatives(ax, ay, bx, by, np.cos(th), np.sin(th))
    T = angle_third(ax, ay, bx, by, np.cos(th), np.sin(th))
    return phi[0], g[0], H[0], T[0]


@pytest.mark.parametrize('seed', range(5))
def test_full_tensors_match_finite_differences(seed):
    u = np.random.default_rng(seed).normal(size=5)
    phi, g, H, T = _full(u)
    h = 1e-5
    E = np.eye(5) * h
    assert phi == pytest.approx(_phi(u), abs=1e-14)
    assert g == pytest.approx([(_phi(u + e) - _phi(u - e)) / (2 * h) for e in E], abs=1e-8)
    num_H = np.array([(_full(u + e)[1] - _full(u - e)[1]) / (2 * h) for e in E])
    assert np.abs(num_H - H).max() < 1e-8
    num_T = np.array([(_full(u + e)[2] - _full(u - e)[2]) / (2 * h) for e in E])
    assert np.abs(num_T - T).max() < 1e-8


@pytest.mark.parametrize('seed', range(5))
def test_contracted_forms_equal_the_full_tensors(seed):
    rng = np.random.default_rng(100 + seed)
    u, ud, v = rng.normal(size=(3, 5))
    phi, g, H, T = _full(u)
    p1, g1, hd, quad, gam, cache = angle_local(tuple(u), tuple(ud))     # floats: per tick
    assert p1 == pytest.approx(phi, abs=1e-13)
    assert np.array(g1) == pytest.approx(g, abs=1e-13)
    assert np.array(hd) == pytest.approx(H @ ud, abs=1e-12)
    assert quad == pytest.approx(ud @ H @ ud, abs=1e-12)
    assert np.array(gam) == pytest.approx(np.einsum('ijk,j,k->i', T, ud, ud), abs=1e-12)
    assert np.array(angle_hess(cache, v)) == pytest.approx(H @ v, abs=1e-12)
    assert angle_hess_matrix(cache) == pytest.approx(H, abs=1e-13)
    g2, quad2 = angle_row_rate([[a, b] for a, b in zip(u, ud)])
    assert np.array(g2) == pytest.approx(g, abs=1e-13) and quad2 == pytest.approx(quad)
    # the batched (array) form gives the same numbers
    U = np.stack([u, u + 0.1])[:, :, None].transpose(1, 0, 2)
    Ud = np.stack([ud, ud])[:, :, None].transpose(1, 0, 2)
    pb, gb, *_ = angle_local(tuple(U), tuple(Ud), np.cos, np.sin)
    assert pb[0, 0] == pytest.approx(phi, abs=1e-13)
    assert np.array([x[0, 0] for x in gb]) == pytest.approx(g, abs=1e-13)
