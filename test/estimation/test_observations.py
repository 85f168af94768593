"""Measurement models and observation factors: Jacobians vs finite differences, GTSAM binding."""
import dataclasses
import math
import types

import gtsam
import numpy as np
import pytest
from conftest import DATA, numerical_jacobian

from mbfg_ros.estimation.observations import (
    Observation,
    interpolation_weights,
    interval_error,
    interval_factor,
    observation_error,
    observation_factor,
)
from mbfg_ros.core.angles import wrap_angle
from mbfg_ros.planar import sensors
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.planar.model import Slider
from mbfg_ros.planar.sensors import SensorModel

FOURBAR = load_system(DATA / 'fourbar_estimator.yaml')
EXT = load_system(DATA / 'extensions.yaml')


def mobile_slider_model():
    """extensions.yaml with its slider on a line through two mobile points (models only)."""
    mech = EXT.mech
    moving = [i for i, p in enumerate(mech.points) if not p.fixed]
    s = mech.sliders[0]
    mech = dataclasses.replace(mech, sliders=(Slider(s.name, s.point, (moving[0], moving[1]),
                                                     None),))
    return SensorModel(types.SimpleNamespace(mech=mech))


def all_observations(sm: SensorModel, rng, s: float = 1.0):
    obs = []
    for j in range(len(sm.joint_names)):
        obs.append(Observation('joint_pos', j, rng.standard_normal(1), np.ones(1), s))
        obs.append(Observation('joint_vel', j, rng.standard_normal(1), np.ones(1), s))
    for k in range(len(sm.imu_names)):
        obs.append(Observation('gyro', k, rng.standard_normal(1), np.ones(1), s))
        obs.append(Observation('accel', k, rng.standard_normal(2), np.ones(2), s))
        obs.append(Observation('orient', k, rng.standard_normal(1), np.ones(1), s))
    return obs


def near_model(sm, obs, x, rng):
    """Angle readings 0.3 rad (1σ) from the model's value at ``x``, so the wrapped
    residual is smooth there; other readings as given."""
    return [o._replace(z=observation_error(sm, [o._replace(z=0 * o.z)], [x], False)[0]
                       + 0.3 * rng.standard_normal(o.z.size))
            if o.kind in ('joint_pos', 'orient') else o for o in obs]


def random_state(q0, rng):
    n = q0.size
    return np.concatenate((q0 + 0.1 * rng.standard_normal(n), rng.standard_normal(n),
                           rng.standard_normal(n)))


MODELS = {'fourbar': (SensorModel(FOURBAR), FOURBAR.q0),
          'extensions (fixed slider line)': (SensorModel(EXT), EXT.q0),
          'mobile slider line': (mobile_slider_model(), EXT.q0)}


@pytest.mark.parametrize('name', list(MODELS))
def test_observation_jacobians_match_finite_differences_at_several_states(name):
    sm, q0 = MODELS[name]
    rng = np.random.default_rng(7)
    for _ in range(4):
        x = random_state(q0, rng)
        obs = near_model(sm, all_observations(sm, rng), x, rng)
        e, (J,) = observation_error(sm, obs, [x], True)
        e_plain, none = observation_error(sm, obs, [x], False)
        assert none is None
        np.testing.assert_allclose(e, e_plain)
        Jn = numerical_jacobian(lambda v: observation_error(sm, obs, [v], False)[0], x)
        np.testing.assert_allclose(J, Jn, atol=1e-6, rtol=1e-6)


def test_encoder_angle_error_is_wrap_safe_across_pi():
    sm = SensorModel(FOURBAR)
    th = math.pi - 0.001      # crank just below +pi, reading just above -pi
    q = FOURBAR.q0.copy()
    q[:2] = [math.cos(th), math.sin(th)]
    x = np.concatenate((q, np.zeros(8)))
    ob = Observation('joint_pos', 0, np.array([-math.pi + 0.001]), np.ones(1))
    e, _ = observation_error(sm, [ob], [x], False)
    assert e[0] == pytest.approx(-0.002, abs=1e-9)


def test_accelerometer_at_rest_reads_minus_gravity_in_the_sensor_frame():
    # coupler at the YAML pose points straight up (angle pi/2): sensor x is world +y
    g, f, angle = sensors.imu_reading(FOURBAR, 'coupler_imu', FOURBAR.q0, np.zeros(4),
                                      np.zeros(4))
    np.testing.assert_allclose(f, [9.81, 0.0], atol=1e-12)
    assert g == 0.0 and angle == pytest.approx(math.pi / 2)


def test_gyro_and_joint_rates_are_time_derivatives_of_angles():
    rng = np.random.default_rng(3)
    sm = SensorModel(EXT)
    q, qd = EXT.q0, rng.standard_normal(EXT.n)
    h = 1e-6
    pos = lambda s: sm.joint_positions(q + s * qd)  # noqa: E731
    np.testing.assert_allclose(sm.joint_velocities(q, qd), (pos(h) - pos(-h)) / (2 * h),
                               atol=1e-6)
    ang = lambda s: sm.imu(0, q + s * qd, qd, qd)[2].h[0]  # noqa: E731
    assert sm.imu(0, q, qd, qd)[0].h[0] == pytest.approx((ang(h) - ang(-h)) / (2 * h), abs=1e-6)


def test_custom_factor_linearises_with_the_same_jacobian_through_gtsam():
    sm = SensorModel(FOURBAR)
    rng = np.random.default_rng(1)
    obs = all_observations(sm, rng)
    x = np.concatenate((FOURBAR.q0, rng.standard_normal(4), rng.standard_normal(4)))
    key = gtsam.symbol('x', 3)
    f = observation_factor(key, sm, obs)
    values = gtsam.Values()
    values.insert(key, x)
    e, (J,) = observation_error(sm, obs, [x], True)
    assert f.error(values) == pytest.approx(0.5 * float(e @ e))   # unit sigmas
    A, b = f.linearize(values).jacobian()
    np.testing.assert_allclose(A, J, atol=1e-12)
    np.testing.assert_allclose(b, -e, atol=1e-12)


DT = 0.01


def interval_readings(sm, rng, x0, x1, fractions=(0.13, 0.5, 0.87)):
    """Every kind of reading at each fraction s, angles near the interpolated model."""
    obs = []
    for s in fractions:
        a, b = interpolation_weights(s, DT)
        xm = (a[0] @ x0.reshape(3, -1) + b[0] @ x1.reshape(3, -1)).ravel()
        obs += near_model(sm, all_observations(sm, rng, s), xm, rng)
    rng.shuffle(obs)                 # the factor must not rely on the callers' order
    return obs


@pytest.mark.parametrize('name', list(MODELS))
def test_interval_factor_jacobians_match_finite_differences_on_both_keys(name):
    sm, q0 = MODELS[name]
    rng = np.random.default_rng(11)
    n = sm.n
    for _ in range(3):
        x0, x1 = random_state(q0, rng), random_state(q0, rng)
        obs = sorted(interval_readings(sm, rng, x0, x1), key=lambda o: o.s)
        a, b = interpolation_weights([o.s for o in obs], DT)
        e, (J0, J1) = interval_error(sm, obs, a, b, [x0, x1], True)
        e_plain, none = interval_error(sm, obs, a, b, [x0, x1], False)
        assert none is None
        np.testing.assert_allclose(e, e_plain)
        both = lambda v: interval_error(sm, obs, a, b, [v[:3 * n], v[3 * n:]],  # noqa: E731
                                        False)[0]
        Jn = numerical_jacobian(both, np.concatenate((x0, x1)))
        np.testing.assert_allclose(np.hstack((J0, J1)), Jn, atol=1e-6, rtol=1e-6)


def test_interval_factor_linearises_with_the_same_jacobians_through_gtsam():
    sm = SensorModel(FOURBAR)
    rng = np.random.default_rng(5)
    x0, x1 = random_state(FOURBAR.q0, rng), random_state(FOURBAR.q0, rng)
    obs = interval_readings(sm, rng, x0, x1, (0.25, 0.6, 0.999))
    k0, k1 = gtsam.symbol('x', 4), gtsam.symbol('x', 5)
    f = interval_factor(k0, k1, DT, sm, obs)
    values = gtsam.Values()
    values.insert(k0, x0)
    values.insert(k1, x1)
    ordered = sorted(obs, key=lambda o: o.s)       # the factor's row order
    a, b = interpolation_weights([o.s for o in ordered], DT)
    e, (J0, J1) = interval_error(sm, ordered, a, b, [x0, x1], True)
    Jn = numerical_jacobian(lambda v: interval_error(sm, ordered, a, b, [v[:12], v[12:]],
                                                     False)[0], np.concatenate((x0, x1)))
    A, rhs = f.linearize(values).jacobian()        # unit sigmas: whitening is the identity
    assert f.error(values) == pytest.approx(0.5 * float(e @ e))
    np.testing.assert_allclose(A, Jn, atol=1e-6, rtol=1e-6)
    np.testing.assert_allclose(A, np.hstack((J0, J1)), atol=1e-12)
    np.testing.assert_allclose(rhs, -e, atol=1e-12)


def test_interpolation_is_exact_for_a_piecewise_linear_acceleration():
    """q̈ linear over the interval: q̇, q are its exact integrals (polynomials in τ)."""
    rng = np.random.default_rng(2)
    n, dt = 4, 0.02
    q0 = FOURBAR.q0 + 0.05 * rng.standard_normal(n)
    qd0, qdd0, qdd1 = rng.standard_normal((3, n))
    jerk = (qdd1 - qdd0) / dt

    def exact(tau):
        return np.concatenate((q0 + tau * qd0 + tau ** 2 / 2 * qdd0 + tau ** 3 / 6 * jerk,
                               qd0 + tau * qdd0 + tau ** 2 / 2 * jerk,
                               qdd0 + tau * jerk))

    x0, x1 = exact(0.0), exact(dt)
    s = np.array([0.0, 1e-3, 0.2, 0.5, 0.77, 0.999, 1.0])
    a, b = interpolation_weights(s, dt)
    for i, si in enumerate(s):
        xm = (a[i] @ x0.reshape(3, n) + b[i] @ x1.reshape(3, n)).ravel()
        np.testing.assert_allclose(xm, exact(si * dt), atol=1e-12)
    # and the two-key factor evaluates its readings at exactly that state
    sm = SensorModel(FOURBAR)
    for si in (0.3, 0.8):
        obs = all_observations(sm, rng, si)
        a, b = interpolation_weights([o.s for o in obs], dt)
        e, _ = interval_error(sm, obs, a, b, [x0, x1], False)
        e_at, _ = observation_error(sm, obs, [exact(si * dt)], False)
        np.testing.assert_allclose(e, e_at, atol=1e-9)


@pytest.mark.parametrize('name', list(MODELS))
def test_readings_between_keys_evaluated_together_equal_the_scalar_models_one_by_one(name):
    """The vectorised evaluation of many readings (several per sensor, at different states)
    equals the scalar SensorModel called reading by reading, values and Jacobians."""
    sm, q0 = MODELS[name]
    n = q0.size
    rng = np.random.default_rng(5)
    x0, x1 = random_state(q0, rng), random_state(q0, rng)
    obs = [o._replace(s=float(s)) for s in rng.uniform(0.05, 1.0, 6)
           for o in all_observations(sm, rng)]
    a, b = interpolation_weights([o.s for o in obs], 0.01)
    e, (J0, J1) = interval_error(sm, obs, a, b, [x0, x1], True)
    rows = 0
    for i, o in enumerate(obs):
        x = (a[i] @ x0.reshape(3, n) + b[i] @ x1.reshape(3, n)).reshape(-1)
        q, qd, qdd = x[:n], x[n:2 * n], x[2 * n:]
        if o.kind.startswith('joint'):
            m = sm.joint(o.index, q, qd, True)[0 if o.kind == 'joint_pos' else 1]
            angular = o.kind == 'joint_pos' and sm.joint_is_angular(o.index)
        else:
            m = dict(zip(('gyro', 'accel', 'orient'), sm.imu(o.index, q, qd, qdd, True)))[o.kind]
            angular = o.kind == 'orient'
        r = m.h - o.z
        want = wrap_angle(r) if angular else r
        k = o.z.size
        np.testing.assert_allclose(e[rows:rows + k], want, atol=1e-12)
        H = np.hstack((np.atleast_2d(m.Hq), np.atleast_2d(m.Hqd), np.atleast_2d(m.Hqdd)))
        np.testing.assert_allclose(J0[rows:rows + k], H @ np.kron(a[i], np.eye(n)), atol=1e-10)
        np.testing.assert_allclose(J1[rows:rows + k], H @ np.kron(b[i], np.eye(n)), atol=1e-10)
        rows += k
    assert rows == e.size
