"""Every factor of seed 000 §6: Jacobians vs finite differences, through GTSAM too (the
single-variable ones from test/support/seed_factors.py, the stacked ones the package uses)."""
import functools

import gtsam
import numpy as np
import pytest
from conftest import CONFIG, DATA
from support import seed_factors as S

from mbfg_ros.core import factors as F
from mbfg_ros.planar import factors as PF
from mbfg_ros.planar.dynamics import load_system

SYSTEMS = [load_system(CONFIG / 'fourbars1-with-rel-angle.yaml'),
           load_system(CONFIG / 'pick-and-place-robot.yaml'),
           load_system(DATA / 'extensions.yaml'),
           load_system(DATA / 'quick_return.yaml')]


def cases(sys, rng):
    n, d = sys.n, sys.dof
    idx = list(sys.z_idx)
    r = rng.standard_normal
    q = sys.q0 + 0.2 * r(n)
    tau = np.linspace(-1, 1, sys.forces.n_act)
    c = sys.constraints
    return {
        'euler (22)': (functools.partial(S.euler_error, 0.01), [r(n), r(n), r(n)]),
        'trapezoidal (23)': (functools.partial(S.trapezoidal_error, 0.01),
                             [r(n), r(n), r(n), r(n)]),
        'f_dpc (24)': (functools.partial(S.position_constraint_error, c), [q]),
        'f_dvc (25)': (functools.partial(S.velocity_constraint_error, c), [q, r(n)]),
        'f_ddyn (26)': (functools.partial(S.forward_dynamics_error, sys, tau), [q, r(n), r(n)]),
        'f_idyn (27)': (functools.partial(S.forward_dynamics_indep_error, sys, idx, tau),
                        [q, r(n), r(d)]),
        'f_didyn (28)': (functools.partial(S.inverse_dynamics_error, sys, tau),
                         [q, r(n), r(n), r(n)]),
        'f_iidyn (29)': (functools.partial(S.inverse_dynamics_indep_error, sys, idx, tau),
                         [q, r(n), r(d), r(n)]),
        'f_ipc (30)': (functools.partial(S.ipc_error, c, idx), [q, r(d)]),
        'f_ivc (31)': (functools.partial(S.ivc_error, c, idx), [q, r(n), r(d)]),
        'f_iac (32)': (functools.partial(S.iac_error, c, idx), [q, r(n), r(n), r(d)]),
        'stacked state': (functools.partial(F.stacked_state_error, sys, tau),
                          [np.concatenate((q, r(n), r(n)))]),
        'stacked trapezoidal': (functools.partial(F.stacked_trapezoidal_error, n, 0.01),
                                [r(3 * n), r(3 * n)]),
        'stacked euler': (functools.partial(F.stacked_euler_error, n, 0.01),
                          [r(3 * n), r(3 * n)]),
        'stacked independent': (functools.partial(F.stacked_indep_state_error, sys, idx, tau),
                                [np.concatenate((q, r(n), r(n))), r(3 * d)]),
        'stacked independent, planar': (
            functools.partial(PF.stacked_indep_state_error, sys, idx, tau),
            [np.concatenate((q, r(n), r(n))), r(3 * d)]),
        'stacked independent, tangent basis': (
            functools.partial(F.stacked_indep_state_error, sys,
                              np.linalg.svd(c.phi_q(q))[2][n - d:], tau),
            [np.concatenate((q, r(n), r(n))), r(3 * d)]),
    }


def numeric(fn, xs, i, h=1e-6):
    x = xs[i]
    J = np.zeros((len(fn(xs, False)[0]), len(x)))
    for k in range(len(x)):
        xp = [v.copy() for v in xs]
        xm = [v.copy() for v in xs]
        xp[i][k] += h
        xm[i][k] -= h
        J[:, k] = (fn(xp, False)[0] - fn(xm, False)[0]) / (2 * h)
    return J


@pytest.mark.parametrize('sys', SYSTEMS, ids=lambda s: s.mech.name)
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_factor_jacobians_match_finite_differences(sys, seed):
    for name, (fn, xs) in cases(sys, np.random.default_rng(seed)).items():
        e, J = fn(xs, True)
        e_only, none = fn(xs, False)
        assert none is None
        np.testing.assert_array_equal(e, e_only)
        assert len(J) == len(xs)
        for i, Ji in enumerate(J):
            assert Ji.shape == (len(e), len(xs[i])), name
            scale = 1.0 + np.abs(Ji).max()
            np.testing.assert_allclose(Ji / scale, numeric(fn, xs, i) / scale, atol=1e-6,
                                       err_msg=f'{name}, variable {i}')


@pytest.mark.parametrize('sys', SYSTEMS, ids=lambda s: s.mech.name)
def test_custom_factors_linearise_and_evaluate_in_gtsam(sys):
    for name, (fn, xs) in cases(sys, np.random.default_rng(7)).items():
        e, J = fn(xs, True)
        keys = [gtsam.symbol('x', i) for i in range(len(xs))]
        factor = F.custom_factor(keys, gtsam.noiseModel.Unit.Create(len(e)), fn)
        values = gtsam.Values()
        for k, x in zip(keys, xs):
            values.insert(k, x)
        assert factor.error(values) == pytest.approx(0.5 * e @ e), name   # no Jacobians asked
        A, b = factor.linearize(values).jacobian()
        np.testing.assert_allclose(A, np.hstack(J), atol=1e-12, err_msg=name)
        np.testing.assert_allclose(b, -e, atol=1e-12, err_msg=name)


def test_optimising_the_position_factor_recovers_an_assembled_pose():
    sys = SYSTEMS[0]
    key = gtsam.symbol('q', 0)
    graph = gtsam.NonlinearFactorGraph()
    graph.add(F.custom_factor([key], gtsam.noiseModel.Isotropic.Sigma(sys.m, 1e-3),
                              functools.partial(S.position_constraint_error, sys.constraints)))
    theta = 0.7
    prior = np.full(sys.n, 1e3)
    prior[4] = 1e-6
    target = sys.q0.copy()
    target[4] = theta
    graph.add(F.prior_factor(key, target, gtsam.noiseModel.Diagonal.Sigmas(prior)))
    init = gtsam.Values()
    init.insert(key, sys.q0)
    q = gtsam.LevenbergMarquardtOptimizer(graph, init).optimize().atVector(key)
    # Independent truth: the crank tip is on the unit circle at angle theta.
    np.testing.assert_allclose(q[:2], [np.cos(theta), np.sin(theta)], atol=1e-6)
    assert np.abs(sys.constraints.phi(q)).max() < 1e-6


def test_a_custom_factor_at_the_same_values_is_not_evaluated_again():
    """ISAM2's batch step relinearises every factor at its unchanged linearisation
    point; the kept evaluation answers it without running Python again, with the same
    numbers, and any other point is evaluated afresh."""
    calls = []

    def fn(xs, jac):
        calls.append(xs[0].copy())
        e = np.array([xs[0][0] ** 2 - xs[1][0], xs[0][1]])
        return e, ([np.array([[2 * xs[0][0], 0.0], [0.0, 1.0]]),
                    np.array([[-1.0], [0.0]])] if jac else None)

    f = F.custom_factor([1, 2], gtsam.noiseModel.Unit.Create(2), fn)
    v = gtsam.Values()
    v.insert(1, np.array([3.0, 4.0]))
    v.insert(2, np.array([5.0]))
    first = f.linearize(v)
    again = f.linearize(v)
    assert len(calls) == 1
    np.testing.assert_array_equal(first.jacobian()[0], again.jacobian()[0])
    np.testing.assert_allclose(first.jacobian()[0], [[6.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    assert f.error(v) == pytest.approx(0.5 * (4.0 ** 2 + 4.0 ** 2))
    assert len(calls) == 1                   # the residual was kept too
    w = gtsam.Values()
    w.insert(1, np.array([1.0, 0.0]))
    w.insert(2, np.array([5.0]))
    np.testing.assert_allclose(f.linearize(w).jacobian()[0],
                               [[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    assert len(calls) == 2
    assert f.error(w) == pytest.approx(0.5 * 16.0)


@pytest.mark.parametrize('sys', SYSTEMS[:2], ids=['fourbar', 'pick-and-place'])
def test_a_linear_factor_is_gtsams_own_linearisation_of_the_custom_factor(sys):
    """Issue 24: linear_factor (whitened in numpy) is what GTSAM's NoiseModelFactor::linearize
    gives for the same CustomFactor at the same values, bit for bit, and away from them it
    moves b by −A δ (a linear factor); ``evaluated`` gives the same factor."""
    rng = np.random.default_rng(3)
    for name, (fn, xs) in cases(sys, rng).items():
        e, J = fn(xs, True)
        keys = [gtsam.symbol('x', i) for i in range(len(xs))]
        if len(keys) > 2:
            continue
        noise = gtsam.noiseModel.Diagonal.Sigmas(rng.uniform(0.01, 2.0, len(e)))
        values = gtsam.Values()
        for k, x in zip(keys, xs):
            values.insert(k, x)
        A0, b0 = F.custom_factor(keys, noise, fn).linearize(values).jacobian()
        for factor in (F.linear_factor(keys, noise, fn, xs),
                       F.linear_factor(keys, noise, None, xs, evaluated=(e, J))):
            A, b = factor.linearize(values).jacobian()
            assert np.array_equal(A, A0) and np.array_equal(b, b0), name
            moved = gtsam.Values()
            delta = [0.01 * rng.standard_normal(len(x)) for x in xs]
            for k, x, d in zip(keys, xs, delta):
                moved.insert(k, x + d)
            A1, b1 = factor.linearize(moved).jacobian()
            np.testing.assert_allclose(A1, A0, err_msg=name)
            np.testing.assert_allclose(b1, b0 - A0 @ np.concatenate(delta), rtol=1e-9,
                                       atol=1e-9, err_msg=name)


@pytest.mark.parametrize('sys', SYSTEMS[:2], ids=['fourbar', 'pick-and-place'])
def test_a_stacked_linear_factor_is_the_custom_factors_rows_stacked(sys):
    """Issue 24: stacked_linear_factor (the estimator's state, integrator and observation
    rows of a tick as one JacobianFactor on (x_{k−1}, x_k)) holds exactly the rows GTSAM's
    own linearisation of each CustomFactor gives, zero columns on the variable a factor
    does not have, so the linear system is the same. (Built as the estimator builds it,
    without a linearisation point: its rows as they are, which ISAM2 takes at its own
    point ``xs``.)"""
    rng = np.random.default_rng(5)
    n = sys.n
    xs = [rng.standard_normal(3 * n), rng.standard_normal(3 * n)]
    keys = [gtsam.symbol('x', 0), gtsam.symbol('x', 1)]
    values = gtsam.Values()
    for k, x in zip(keys, xs):
        values.insert(k, x)
    tau = rng.standard_normal(len(sys.mech.actuators))
    parts = [([1], functools.partial(F.stacked_state_error, sys, tau)),
             ([0, 1], functools.partial(F.stacked_trapezoidal_jerk_error, n, 1e-3)),
             ([0], functools.partial(F.stacked_state_error, sys, None))]
    blocks, rows = [], []
    for on, fn in parts:
        e, J = fn([xs[i] for i in on], True)
        sigma = rng.uniform(0.01, 2.0, len(e))
        blocks.append((on, sigma, e, J))
        A, b = F.custom_factor([keys[i] for i in on], gtsam.noiseModel.Diagonal.Sigmas(sigma),
                               fn).linearize(values).jacobian()
        full = np.zeros((len(e), 6 * n))
        for j, i in enumerate(on):
            full[:, 3 * n * i:3 * n * (i + 1)] = A[:, 3 * n * j:3 * n * (j + 1)]
        rows.append((full, b))
    A, b = F.stacked_linear_factor(keys, xs, blocks).linearize(values).jacobian()
    np.testing.assert_array_equal(A, np.vstack([r[0] for r in rows]))
    np.testing.assert_array_equal(b, np.concatenate([r[1] for r in rows]))


def _ur5():
    from mbfg_ros.spatial.system import build_spatial_system
    return build_spatial_system(CONFIG / 'urdf' / 'ur5.urdf', CONFIG / 'urdf' / 'ur5_sensors.yaml')


@pytest.mark.parametrize('which', ['fourbar', 'pick-and-place', 'ur5'])
def test_whitened_state_rows_are_the_state_factors_rows_whitened_bit_for_bit(which):
    """Issue 24: whitened_state_rows writes, into buffers kept from call to call, exactly
    the rows stacked_linear_factor makes of stacked_state_error's (A = Σ^-½ J, b = −Σ^-½ e):
    on new buffers (``full``: every block of the kept Jacobian), at new states (only its
    moving blocks: the constant ones left from before must still be right) and with a new
    σ. Loops (Φ rows: the planar mechanisms) and a tree (the UR5)."""
    sys = {'fourbar': SYSTEMS[0], 'pick-and-place': SYSTEMS[1]}.get(which) or _ur5()
    rng = np.random.default_rng(11)
    n, m = sys.n, sys.m
    rows = 2 * m + n
    n_act = len(sys.actuator_joints)
    big = np.full((rows + 4, 3 * n), np.nan, order='F')     # rows of a larger kept buffer
    A, b, Jk = big[2:2 + rows], np.full(rows, np.nan), np.full((rows, 3 * n), np.nan)
    sigma = rng.uniform(0.01, 2.0, rows)
    for i in range(5):
        if i == 3:
            sigma = rng.uniform(0.01, 2.0, rows)
        x = rng.standard_normal(3 * n)
        x[:n] += sys.q0
        tau = rng.standard_normal(n_act)
        inv = 1.0 / sigma
        F.whitened_state_rows(sys, tau, x, inv, -inv, Jk, A, b, i == 0)
        e, J = F.stacked_state_error(sys, tau, [x], True)
        want_A = np.zeros((rows, 3 * n), order='F')
        np.multiply(J[0], inv[:, None], out=want_A)
        assert np.array_equal(A, want_A), i
        assert np.array_equal(b, e * -inv), i
        assert np.array_equal(Jk, J[0]), i
    assert np.isnan(big[:2]).all() and np.isnan(big[2 + rows:]).all()   # only its rows


def test_whitened_trapezoidal_b_is_the_trapezoidal_error_whitened_bit_for_bit():
    """Issue 24: −Σ^-½ e of the trapezoidal rows (Eq. 23) written in place equals
    ``-stacked_trapezoidal_error(...) * inv`` for random states, steps and σ's."""
    rng = np.random.default_rng(12)
    for n in (1, 4, 6, 7):
        for dt in (1e-3, 2e-3 + 1e-12, 0.01):
            x0, x1 = rng.standard_normal(3 * n) * 10, rng.standard_normal(3 * n) * 10
            inv = 1.0 / rng.uniform(1e-9, 1e-3, 2 * n)
            out = np.full(2 * n + 3, np.nan)
            F.whitened_trapezoidal_b(n, dt, x0, x1, inv, out[1:1 + 2 * n])
            want = -F.stacked_trapezoidal_error(n, dt, [x0, x1], False)[0] * inv
            assert np.array_equal(out[1:1 + 2 * n], want)
            assert np.isnan(out[0]) and np.isnan(out[1 + 2 * n:]).all()


@pytest.mark.parametrize('dt', [1e-3, 4e-3, 0.01, 0.05])
def test_the_integrator_rows_vanish_on_a_cubic_trajectory(dt):
    """Issue 24 (merged ticks): the estimator's integrator rows hold exactly for q̈ linear
    over the step (q a cubic), the model its readings between keys are interpolated under
    (cubic Hermite, :func:`~mbfg_ros.estimation.observations.interpolation_weights`): the
    q rows carry the trapezoidal rule's end correction + dt²/12 (q̈_k − q̈_{k−1}), and the
    rows are their Jacobians times the states. Eq. 23's q rows alone miss by dt³/12 q⃛."""
    rng = np.random.default_rng(3)
    n = 4
    c0, c1, c2, c3 = rng.standard_normal((4, n)) * [[1.0], [5.0], [50.0], [2000.0]]

    def x(t: float) -> np.ndarray:        # [q; q̇; q̈] of q = c0 + c1 t + c2 t² + c3 t³
        return np.concatenate((c0 + c1 * t + c2 * t * t + c3 * t ** 3,
                               c1 + 2 * c2 * t + 3 * c3 * t * t, 2 * c2 + 6 * c3 * t))
    t0 = 0.3
    x0, x1 = x(t0), x(t0 + dt)
    e, J = F.stacked_trapezoidal_error(n, dt, [x0, x1], True)
    scale = np.abs(x1).max()
    assert np.abs(e).max() < 1e-12 * scale
    np.testing.assert_allclose(J[0] @ x0 + J[1] @ x1, e, atol=1e-12 * scale)
    plain = x1[:n] - x0[:n] - 0.5 * dt * (x0[n:2 * n] + x1[n:2 * n])     # Eq. 23's q rows
    np.testing.assert_allclose(plain, -dt ** 3 / 12 * 6 * c3, rtol=1e-6)
    assert np.abs(plain).max() > 1e6 * np.abs(e[:n]).max() + 1e-15


def test_the_end_correction_is_the_estimators_alone():
    """Issue 24: :func:`F.stacked_integrator_jacobians` by default (the simulator's call,
    ``simulation/forward.py``, seed 000 Table 1) gives Eq. 23's rows, no q̈ on the q rows,
    whichever of the two was asked for first (separate cache entries); ``corrected``
    adds ∓dt²/12 there and nothing else, and those are the estimator's rows
    (:func:`F.stacked_trapezoidal_error`: e = A0 x_{k−1} + A1 x_k)."""
    n, dt = 3, 0.0037                 # a dt no other test asks for: the cache starts empty
    eye = np.eye(n)
    corrected = F.stacked_integrator_jacobians(n, dt, True, True)
    for plain in (F.stacked_integrator_jacobians(n, dt, True),
                  F.stacked_integrator_jacobians(n, dt, True, False)):
        for Jp, Jc, sign in zip(plain, corrected, (-1.0, 1.0)):
            assert not Jp[:n, 2 * n:].any()
            np.testing.assert_array_equal(Jc[:n, 2 * n:], sign * dt * dt / 12.0 * eye)
            rest = np.ones(Jp.shape, bool)
            rest[:n, 2 * n:] = False
            assert np.array_equal(Jp[rest], Jc[rest])
    rng = np.random.default_rng(24)
    x0, x1 = rng.standard_normal(3 * n), rng.standard_normal(3 * n)
    e, J = F.stacked_trapezoidal_error(n, dt, [x0, x1], True)
    assert all(Ji is Jc for Ji, Jc in zip(J, corrected))
    np.testing.assert_allclose(corrected[0] @ x0 + corrected[1] @ x1, e, rtol=0, atol=1e-14)
