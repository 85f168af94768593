"""Measurement models and observation factors: Jacobians vs finite differences, GTSAM binding."""
import dataclasses
import math
import types

import gtsam
import numpy as np
import pytest

from conftest import DATA, numerical_jacobian
from mbfg_ros import sensors
from mbfg_ros.dynamics import load_system
from mbfg_ros.model import Slider
from mbfg_ros.observations import Observation, observation_error, observation_factor
from mbfg_ros.sensors import SensorModel

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


def all_observations(sm: SensorModel, rng, delta: float):
    obs = []
    for j in range(len(sm.joint_names)):
        obs.append(Observation('joint_pos', j, rng.standard_normal(1), np.ones(1), delta))
        obs.append(Observation('joint_vel', j, rng.standard_normal(1), np.ones(1), delta))
    for k in range(len(sm.imu_names)):
        obs.append(Observation('gyro', k, rng.standard_normal(1), np.ones(1), delta))
        obs.append(Observation('accel', k, rng.standard_normal(2), np.ones(2), delta))
        obs.append(Observation('orient', k, rng.standard_normal(1), np.ones(1), delta))
    return obs


MODELS = {'fourbar': (SensorModel(FOURBAR), FOURBAR.q0),
          'extensions (fixed slider line)': (SensorModel(EXT), EXT.q0),
          'mobile slider line': (mobile_slider_model(), EXT.q0)}


@pytest.mark.parametrize('name', list(MODELS))
@pytest.mark.parametrize('delta', [0.0, 0.0013, -0.0021])
def test_observation_jacobians_match_finite_differences_at_several_states(name, delta):
    sm, q0 = MODELS[name]
    rng = np.random.default_rng(7)
    n = sm.n
    for _ in range(4):
        x = np.concatenate((q0 + 0.1 * rng.standard_normal(n), rng.standard_normal(n),
                            rng.standard_normal(n)))
        obs = all_observations(sm, rng, delta)
        # angle readings near the model's value, so the wrapped residual is smooth there
        obs = [o._replace(z=observation_error(sm, [o._replace(z=0 * o.z)], [x], False)[0]
                          + 0.3 * rng.standard_normal(o.z.size))
               if o.kind in ('joint_pos', 'orient') else o for o in obs]
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
    obs = all_observations(sm, rng, 0.001)
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
