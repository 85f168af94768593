"""Seed 002's factors: every analytic Jacobian against central finite differences at random
states that do not satisfy the factor (off the manifold) and at states that do (on it)."""
from __future__ import annotations

import gtsam
import numpy as np
import pytest

from mbfg_ros.spatial import graph_factors as gf

H_STEP = 1e-6


def _rand_pose(rng) -> gtsam.Pose3:
    return gtsam.Pose3.Expmap(rng.normal(size=6))


def _numeric(f, args, kinds, i):
    """Central differences of f w.r.t. argument i (kind 'v' vector, 's' scalar, 'p' Pose3)."""
    x = args[i]
    dim = 6 if kinds[i] == 'p' else (1 if kinds[i] == 's' else len(x))
    cols = []
    for k in range(dim):
        hi, lo = list(args), list(args)
        if kinds[i] == 'p':
            d = np.zeros(6)
            d[k] = H_STEP
            hi[i] = x.compose(gtsam.Pose3.Expmap(d))
            lo[i] = x.compose(gtsam.Pose3.Expmap(-d))
        elif kinds[i] == 's':
            hi[i], lo[i] = x + H_STEP, x - H_STEP
        else:
            e = np.zeros(dim)
            e[k] = H_STEP
            hi[i], lo[i] = x + e, x - e
        cols.append((np.atleast_1d(f(*hi)) - np.atleast_1d(f(*lo))) / (2 * H_STEP))
    return np.array(cols).T


def _check(f, args, kinds):
    H = [None] * len(args)
    f(*args, H=H)
    for i in range(len(args)):
        num = _numeric(lambda *a: f(*a), args, kinds, i)
        assert H[i].shape == num.shape, (i, H[i].shape, num.shape)
        assert np.abs(H[i] - num).max() < 1e-6 * max(1.0, np.abs(num).max()), f'key {i}'


def _joint(rng):
    S = np.zeros(6)
    if rng.random() < 0.7:
        a = rng.normal(size=3)
        S[:3] = a / np.linalg.norm(a)
    else:
        a = rng.normal(size=3)
        S[3:] = a / np.linalg.norm(a)
    T_home = _rand_pose(rng).matrix()
    return np.linalg.inv(T_home), S, T_home


def _spd(rng):
    A = rng.normal(size=(6, 6))
    return A @ A.T + np.eye(6)


@pytest.mark.parametrize('seed', range(5))
def test_jacobians_off_the_manifold(seed):
    rng = np.random.default_rng(seed)
    Ti, S, T_home = _joint(rng)
    v = lambda: rng.normal(size=6)                       # noqa: E731
    _check(lambda a, b, c, d, H=None: gf.twist_error(a, b, c, d, Ti, S, H),
           [v(), v(), rng.normal(), rng.normal()], 'vvss')
    _check(lambda a, b, c, d, e, f, H=None: gf.accel_error(a, b, c, d, e, f, Ti, S, H),
           [v(), v(), v(), rng.normal(), rng.normal(), rng.normal()], 'vvvsss')
    G, g = _spd(rng), np.array([0.1, -0.3, -9.81])
    kids = [_joint(rng) for _ in range(2)]

    def wrench(A, V, F, T, F1, t1, F2, t2, H=None):
        ch = [(F1, t1, kids[0][0], kids[0][1]), (F2, t2, kids[1][0], kids[1][1])]
        return gf.wrench_error(A, V, F, T.rotation().matrix(), ch, G, g, H)
    _check(wrench, [v(), v(), v(), _rand_pose(rng), v(), rng.normal(), v(), rng.normal()],
           'vvvpvsvs')
    _check(lambda a, b, H=None: gf.torque_error(a, b, S, H), [v(), rng.normal()], 'vs')
    _check(lambda a, b, c, H=None: gf.pose_error(a, b, c, gtsam.Pose3(T_home), S, H),
           [_rand_pose(rng), _rand_pose(rng), rng.normal()], 'pps')
    _check(gf.wrench_equivalence_error, [_rand_pose(rng), _rand_pose(rng), v(), v()], 'ppvv')
    P = np.eye(6)[[0, 1, 5]]
    _check(lambda w, H=None: gf.planar_wrench_error(w, P, H), [v()], 'v')


def test_jacobians_on_the_manifold_and_zero_error():
    rng = np.random.default_rng(9)
    Ti, S, T_home = _joint(rng)
    T_p, theta = _rand_pose(rng), rng.normal()
    T_c = T_p.compose(gtsam.Pose3(gf.joint_transform(T_home, S, theta)))
    assert np.abs(gf.pose_error(T_p, T_c, theta, gtsam.Pose3(T_home), S)).max() < 1e-12
    _check(lambda a, b, c, H=None: gf.pose_error(a, b, c, gtsam.Pose3(T_home), S, H),
           [T_p, T_c, theta], 'pps')
    V_p, thd = rng.normal(size=6), rng.normal()
    V_c = gf.Ad(np.linalg.inv(gf.joint_transform(T_home, S, theta))) @ V_p + S * thd
    assert np.abs(gf.twist_error(V_p, V_c, theta, thd, Ti, S)).max() < 1e-12
    _check(lambda a, b, c, d, H=None: gf.twist_error(a, b, c, d, Ti, S, H),
           [V_p, V_c, theta, thd], 'vvss')
    W_c = rng.normal(size=6)
    W_p = -T_c.between(T_p).AdjointMap().T @ W_c
    assert np.abs(gf.wrench_equivalence_error(T_p, T_c, W_p, W_c)).max() < 1e-12
    _check(gf.wrench_equivalence_error, [T_p, T_c, W_p, W_c], 'ppvv')
