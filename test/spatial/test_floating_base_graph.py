"""Seed 002's graph on a floating base with stance feet (issue 28 items 1-2): the contact
factors' Jacobians against central differences, and the graph's forward and inverse dynamics
of the Solo-12 quadruped against Pinocchio's own model of the URDF (1e-9)."""
from __future__ import annotations

import gtsam
import numpy as np
import pytest
from conftest import DATA

from mbfg_ros.spatial import contact_factors as cf
from mbfg_ros.spatial.floating import FloatingBaseDynamics
from mbfg_ros.spatial.floating_graph import FloatingDynamicsGraph
from mbfg_ros.spatial.urdf import load_spatial

pin = pytest.importorskip('pinocchio')

SOLO = DATA / 'urdf' / 'solo12.urdf'
FEET = ('FL_FOOT', 'FR_FOOT', 'HL_FOOT', 'HR_FOOT')
TROT = ('FR_FOOT', 'HL_FOOT')
H_STEP = 1e-6


def _numeric(f, args, kinds, i):
    """Central differences of f w.r.t. argument i ('v' vector, 's' scalar, 'p' Pose3, right
    perturbation as GTSAM's tangent)."""
    x = args[i]
    dim = 6 if kinds[i] == 'p' else (1 if kinds[i] == 's' else len(x))
    cols = []
    for k in range(dim):
        hi, lo = list(args), list(args)
        d = np.zeros(dim)
        d[k] = H_STEP
        if kinds[i] == 'p':
            hi[i], lo[i] = x.compose(gtsam.Pose3.Expmap(d)), x.compose(gtsam.Pose3.Expmap(-d))
        elif kinds[i] == 's':
            hi[i], lo[i] = x + H_STEP, x - H_STEP
        else:
            hi[i], lo[i] = x + d, x - d
        cols.append((np.atleast_1d(f(*hi)) - np.atleast_1d(f(*lo))) / (2 * H_STEP))
    return np.array(cols).T


def _check(f, args, kinds, H):
    for i, kind in enumerate(kinds):
        if kind == 'c':                 # a constant, not a key
            continue
        num = _numeric(f, args, kinds, i)
        got = H[i]
        assert got.shape == num.shape, (i, got.shape, num.shape)
        assert np.abs(got - num).max() < 1e-6 * max(1.0, np.abs(num).max()), f'argument {i}'


@pytest.mark.parametrize('seed', range(4))
def test_contact_point_factors_jacobians(seed):
    rng = np.random.default_rng(seed)
    T, V, A = gtsam.Pose3.Expmap(rng.normal(size=6)), rng.normal(size=6), rng.normal(size=6)
    r, p = rng.normal(size=3), rng.normal(size=3)
    H = [None] * 2
    e = cf.contact_velocity_error(T, V, r, H)
    _check(lambda T_, V_: cf.contact_velocity_error(T_, V_, r), [T, V], 'pv', H)
    R = T.rotation().matrix()
    np.testing.assert_allclose(e, R @ (V[3:] + np.cross(V[:3], r)), atol=1e-14)
    H = [None] * 2
    e = cf.contact_position_error(T, p, r, H)
    _check(lambda T_, p_: cf.contact_position_error(T_, p_, r), [T, p], 'pv', H)
    np.testing.assert_allclose(e, T.transformFrom(r) - p, atol=1e-14)
    H = [None] * 3
    cf.contact_acceleration_error(T, V, A, r, H)
    _check(lambda T_, V_, A_: cf.contact_acceleration_error(T_, V_, A_, r), [T, V, A], 'pvv', H)


def test_contact_acceleration_is_the_second_derivative_of_the_foot_position():
    """Move a link along a constant body twist V with body acceleration A for a short time:
    the foot's world acceleration equals the factor's residual (an independent check)."""
    rng = np.random.default_rng(7)
    T0, V, A, r = gtsam.Pose3.Expmap(rng.normal(size=6)), rng.normal(size=6), \
        rng.normal(size=6), rng.normal(size=3)

    def foot(t):   # T(t) = T0 exp(V t + A t²/2) to second order in t (A the body accel)
        return T0.compose(gtsam.Pose3.Expmap(V * t + 0.5 * A * t * t)).transformFrom(r)
    h = 1e-4
    acc = (foot(h) - 2 * foot(0.0) + foot(-h)) / h ** 2
    np.testing.assert_allclose(cf.contact_acceleration_error(T0, V, A, r), acc, atol=1e-5)


@pytest.mark.parametrize('base,nkids,nfeet', [(True, 4, 0), (True, 1, 2), (False, 1, 1),
                                              (False, 0, 2)])
def test_contact_wrench_jacobians(base, nkids, nfeet):
    rng = np.random.default_rng(nkids * 10 + nfeet)
    G = np.zeros((6, 6))
    m, c = 1.3, rng.normal(size=3)
    C = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
    B = rng.normal(size=(3, 3))
    G[:3, :3] = B @ B.T + np.eye(3) + m * C.T @ C
    G[:3, 3:], G[3:, :3], G[3:, 3:] = m * C, m * C.T, m * np.eye(3)
    g = np.array([0.0, 0.0, -9.81])
    consts = []
    for _ in range(nkids):
        S = np.zeros(6)
        S[:3] = rng.normal(size=3)
        S /= np.linalg.norm(S)
        consts.append((np.linalg.inv(gtsam.Pose3.Expmap(rng.normal(size=6)).matrix()), S))
    rs = [rng.normal(size=3) for _ in range(nfeet)]
    args = [rng.normal(size=6), rng.normal(size=6)] + ([] if base else [rng.normal(size=6)]) \
        + [gtsam.Pose3.Expmap(rng.normal(size=6))]
    kinds = 'vv' + ('' if base else 'v') + 'p'
    for _ in range(nkids):
        args += [rng.normal(size=6), float(rng.normal())]
        kinds += 'vs'
    args += [rng.normal(size=3) for _ in range(nfeet)]
    kinds += 'v' * nfeet
    head = 3 if base else 4

    def f(*a, H=None):
        kids = [(a[head + 2 * i], a[head + 2 * i + 1], Ti, S) for i, (Ti, S) in enumerate(consts)]
        forces = [(a[head + 2 * nkids + i], r) for i, r in enumerate(rs)]
        return cf.contact_wrench_error(a[0], a[1], None if base else a[2], a[head - 1], kids,
                                       forces, G, g, H)
    H = [None] * len(args)
    e = f(*args, H=H)
    H = [h.reshape(6, -1) for h in H]
    _check(f, args, kinds, H)
    # and the factor binds the same error and Jacobians to its keys, in that order
    keys = list(range(1, len(args) + 1))
    kA, kV = keys[0], keys[1]
    kF = None if base else keys[2]
    kT = keys[head - 1]
    ch = [(keys[head + 2 * i], keys[head + 2 * i + 1], Ti, S) for i, (Ti, S) in enumerate(consts)]
    ft = [(keys[head + 2 * nkids + i], r) for i, r in enumerate(rs)]
    fac = cf.contact_wrench_factor(kA, kV, kF, kT, ch, ft, G, g, gtsam.noiseModel.Unit.Create(6))
    vals = gtsam.Values()
    for k, a, kind in zip(keys, args, kinds):
        vals.insert(k, a if kind == 'p' else np.atleast_1d(np.asarray(a, float)))
    np.testing.assert_allclose(fac.unwhitenedError(vals), e, atol=1e-12)
    lin = fac.linearize(vals)                      # unit noise: A = J, block per key
    A = lin.jacobian()[0]
    np.testing.assert_allclose(A, np.hstack(H), atol=1e-12)
    assert list(lin.keys()) == keys


def test_contact_point_factors_bind_their_keys():
    rng = np.random.default_rng(1)
    T, V, A, p, r = gtsam.Pose3.Expmap(rng.normal(size=6)), rng.normal(size=6), \
        rng.normal(size=6), rng.normal(size=3), rng.normal(size=3)
    vals = gtsam.Values()
    vals.insert(1, T)
    vals.insert(2, V)
    vals.insert(3, A)
    vals.insert(4, p)
    slip = gtsam.noiseModel.Isotropic.Sigma(3, 0.01)
    cases = [(cf.contact_velocity_factor(1, 2, r, slip), cf.contact_velocity_error(T, V, r)),
             (cf.contact_position_factor(1, 4, r, slip), cf.contact_position_error(T, p, r)),
             (cf.contact_acceleration_factor(1, 2, 3, r, slip),
              cf.contact_acceleration_error(T, V, A, r))]
    for fac, err in cases:
        np.testing.assert_allclose(fac.unwhitenedError(vals), err, atol=1e-14)
        # the slip σ weights the residual: error = ½ |e / σ|²
        assert fac.error(vals) == pytest.approx(0.5 * np.sum((err / 0.01) ** 2), rel=1e-12)


@pytest.fixture(scope='module')
def solo():
    m = load_spatial(SOLO, {'floating_base': True, 'contacts': list(FEET)})
    return FloatingDynamicsGraph(m), FloatingBaseDynamics(m)


def _states(n, count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        quat = rng.normal(size=4)
        q = np.concatenate([rng.normal(size=3), quat / np.linalg.norm(quat),
                            rng.uniform(-1.5, 1.5, n)])
        yield q, rng.normal(size=n + 6), rng.normal(size=n + 6), rng.normal(size=n)


def _pin_constrained(pm, pd, q, v, tau, feet):
    models = pin.StdVec_RigidConstraintModel()
    lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    for name in feet:
        f = pm.frames[pm.getFrameId(name)]
        models.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, f.parentJoint,
                                               f.placement, lwa))
    datas = pin.StdVec_RigidConstraintData()
    for c in models:
        datas.append(c.createData())
    pin.initConstraintDynamics(pm, pd, models, datas)
    a = pin.constraintDynamics(pm, pd, q, v, np.r_[np.zeros(6), tau], models, datas,
                               pin.ProximalSettings(1e-14, 1e-14, 0.0, 1))
    return np.array(a), np.array(pd.lambda_c).reshape(-1, 3)


def _close(a, b, tol=1e-9):
    assert np.abs(np.asarray(a) - np.asarray(b)).max() <= tol * max(1.0, np.abs(b).max())


@pytest.mark.parametrize('feet', [(), FEET, TROT], ids=['flight', 'four_feet', 'trot_pair'])
def test_graph_forward_dynamics_equal_pinocchio(solo, feet):
    graph, _ = solo
    pm = pin.buildModelFromUrdf(str(SOLO), pin.JointModelFreeFlyer())
    pd = pm.createData()
    for q, v, _, tau in _states(graph.n, 3, seed=4):
        sol = graph.forward(q, v, tau, feet)
        if feet:
            a_ref, f_ref = _pin_constrained(pm, pd, q, v, tau, feet)
            _close(sol.f_c, f_ref)
        else:
            a_ref = pin.aba(pm, pd, q, v, np.r_[np.zeros(6), tau])
            assert sol.f_c.shape == (0, 3)
        _close(sol.vdot, a_ref)


@pytest.mark.parametrize('feet', [FEET, TROT], ids=['four_feet', 'trot_pair'])
def test_graph_inverse_dynamics_with_and_without_measured_forces(solo, feet):
    graph, dyn = solo
    pm = pin.buildModelFromUrdf(str(SOLO), pin.JointModelFreeFlyer())
    pd = pm.createData()
    for q, v, _, tau in _states(graph.n, 3, seed=9):
        a_ref, f_ref = _pin_constrained(pm, pd, q, v, tau, feet)
        sol = graph.inverse(q, v, a_ref, feet, f_c=f_ref)      # forces measured
        _close(sol.tau, tau)
        sol = graph.inverse(q, v, a_ref, feet)                  # forces unknown: min-norm
        tau_mn, f_mn = dyn.contact_inverse(q, v, a_ref, feet)
        _close(sol.f_c, f_mn)
        _close(sol.tau, tau_mn)


def test_stance_factors_recover_a_body_pose_and_twist_from_its_feet():
    """An optimisation recovers a known truth: a body standing on four feet at known
    footholds (position factors, footholds held by tight priors) gets its pose back from a
    wrong guess, and stance velocity factors stop it (twist zero, within the slip σ)."""
    rng = np.random.default_rng(12)
    truth = gtsam.Pose3(gtsam.Rot3.RzRyRx(0.1, -0.05, 0.7), np.array([0.3, -0.2, 0.25]))
    feet = [np.array([sx * 0.2, sy * 0.14, -0.25]) for sx in (1, -1) for sy in (1, -1)]
    kT, kV = gtsam.symbol('T', 0), gtsam.symbol('V', 0)
    graph = gtsam.NonlinearFactorGraph()
    init = gtsam.Values()
    init.insert(kT, truth.compose(gtsam.Pose3.Expmap(0.3 * rng.normal(size=6))))
    init.insert(kV, rng.normal(size=6))
    tight = gtsam.noiseModel.Isotropic.Sigma(3, 1e-6)
    slip = gtsam.noiseModel.Isotropic.Sigma(3, 0.01)
    for i, r in enumerate(feet):
        kp = gtsam.symbol('p', i)
        graph.add(gtsam.PriorFactorVector(kp, truth.transformFrom(r), tight))
        init.insert(kp, truth.transformFrom(r) + 0.05 * rng.normal(size=3))
        graph.add(cf.contact_position_factor(kT, kp, r, slip))
        graph.add(cf.contact_velocity_factor(kT, kV, r, slip))
    params = gtsam.LevenbergMarquardtParams()
    params.setRelativeErrorTol(1e-14)
    params.setAbsoluteErrorTol(1e-20)
    vals = gtsam.LevenbergMarquardtOptimizer(graph, init, params).optimize()
    assert vals.atPose3(kT).equals(truth, 1e-8)
    assert np.abs(vals.atVector(kV)).max() < 1e-8
