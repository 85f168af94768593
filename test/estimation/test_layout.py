"""Issue 24: a tick's readings evaluated with their layout's constants
(:mod:`mbfg_ros.estimation.layout`) give exactly the generic evaluation's residuals and
Jacobians, and the innovation gate with the layout decides and learns as without it."""
import math

import numpy as np
import pytest
from conftest import CONFIG

from mbfg_ros.core.observation import Observation
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.estimation.intake import _Pending
from mbfg_ros.estimation.layout import ReadingLayout, layout_rows
from mbfg_ros.estimation.observations import residuals
from mbfg_ros.spatial.sensor_model import quaternion_matrix
from mbfg_ros.spatial.system import build_spatial_system

URDF = CONFIG / 'urdf'


@pytest.fixture(scope='module')
def ur5():
    return build_spatial_system(URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml')


def _readings(rng, n: int, order: str) -> list[Observation]:
    """Encoder angles and rates, a gyroscope, an accelerometer (and an orientation), in
    the sequence ``order`` (e = encoders, v = rates, g, a, o), far enough from the state
    for the angles to wrap."""
    one = np.ones(1)
    out = []
    for c in order:
        if c == 'e':
            out += [Observation('joint_pos', j, rng.uniform(-4, 4, 1), 0.01 * one)
                    for j in range(n)]
        elif c == 'v':
            out += [Observation('joint_vel', j, rng.standard_normal(1), 0.1 * one)
                    for j in (0, 3)]
        elif c == 'o':
            q = rng.standard_normal(4)
            out.append(Observation('orient', 0, quaternion_matrix(q / np.linalg.norm(q)),
                                   np.full(3, 0.01)))
        else:
            out.append(Observation('gyro' if c == 'g' else 'accel', 0,
                                   rng.standard_normal(3), np.full(3, 0.05)))
    return out


def _layout(est: Estimator, obs: list[Observation]) -> ReadingLayout:
    cfg = est.config
    return ReadingLayout(obs, est.sm, est._slot_base, est._slot_wrap, est._slot_joint,
                         cfg.joint_rejection_threshold, cfg.imu_rejection_threshold)


@pytest.mark.parametrize('order', ['ega', 'gae', 'eag', 'evgao', 'gveae', 'e', 'ga'])
def test_layout_rows_are_the_generic_residuals(ur5, order):
    """Every reading sequence (encoders first or last, rates between, the IMU's parts in
    either order, an orientation, a sensor twice): the same residuals and Jacobians, bit
    for bit, as observations.residuals (which groups the readings one by one)."""
    rng = np.random.default_rng(len(order))
    est = Estimator(ur5)
    for _ in range(3):
        obs = _readings(rng, ur5.n, order)
        X = rng.standard_normal((3, ur5.n))
        layout = _layout(est, obs)
        e, H = layout_rows(est.sm, obs, X, layout)
        e0, H0 = residuals(est.sm, obs, X, True)
        np.testing.assert_array_equal(e, e0)
        np.testing.assert_array_equal(H, H0.reshape(len(e0), -1))
        if 'e' in order:            # the encoder angles' residuals are wrapped
            assert layout.wrap_any and np.abs(e[layout.wrap_rows]).max() <= math.pi


def test_the_gate_with_the_layout_decides_and_learns_as_without(ur5):
    """The gate on readings at one stamp with their layout (τ one float, the residuals'
    angles wrapped already) keeps the same readings and moves each sensor's model error
    as the per-reading gate does, rejections included."""
    rng = np.random.default_rng(3)
    n = ur5.n
    ests = [Estimator(ur5, EstimatorConfig(joint_rejection_threshold=3.0)) for _ in '01']
    for est in ests:
        est._x_last = np.zeros(3 * n)
        est._var_last = np.full(3 * n, 1e-6)
    t_prev = 1.0
    for k in range(1, 40):
        t = t_prev + 1e-3 * k
        obs = _readings(rng, n, 'ega')
        X = rng.standard_normal((3, n)) * 0.01
        items = [_Pending(t, ob) for ob in obs]
        layout = _layout(ests[0], obs)
        e, H = layout_rows(ests[0].sm, obs, X, layout)
        sig = np.concatenate([ob.sigma for ob in obs])
        keep = ests[0]._gate(items, e, H, t - t_prev, layout.row_of, sig, layout=layout)
        keep0 = ests[1]._gate(items, e, H, np.full(e.size, t - t_prev), layout.row_of, sig)
        np.testing.assert_array_equal(keep, keep0)
        np.testing.assert_allclose(ests[0]._model_var, ests[1]._model_var, rtol=1e-12,
                                   atol=0)
        np.testing.assert_array_equal(ests[0]._model_t, ests[1]._model_t)
    assert ests[0].counters['rejected_outlier'] == ests[1].counters['rejected_outlier'] > 0


def _planar_readings(rng, joints: list[int], order: str) -> list[Observation]:
    """Planar readings in the sequence ``order`` (e = angles of ``joints``, v = their
    rates, g = gyroscope, a = in-plane specific force, o = yaw), far enough from the state
    for the angles to wrap."""
    one = np.ones(1)
    out = []
    for c in order:
        if c == 'e':
            out += [Observation('joint_pos', j, rng.uniform(-4, 4, 1), 0.01 * one)
                    for j in joints]
        elif c == 'v':
            out += [Observation('joint_vel', j, rng.standard_normal(1), 0.1 * one)
                    for j in joints]
        elif c == 'o':
            out.append(Observation('orient', 0, rng.uniform(-4, 4, 1), 0.01 * one))
        elif c == 'g':
            out.append(Observation('gyro', 0, rng.standard_normal(1), 0.05 * one))
        else:
            out.append(Observation('accel', 0, rng.standard_normal(2), np.full(2, 0.05)))
    return out


@pytest.mark.parametrize('mechanism, joints, order, plan', [
    ('fourbar', [0], 'ega', True), ('fourbar', [0, 1], 'gae', True),
    ('fourbar', [1, 0], 'evgao', True), ('fourbar', [0], 'vgee', True),
    ('fourbar', [0, 1], 'ev', True), ('slider_crank', [0], 'ev', True),
    ('slider_crank', [0, 1], 'ev', False)])
def test_planar_layout_rows_are_the_generic_residuals(mechanism, joints, order, plan):
    """Natural coordinates (encoders are functions of q, seed 000 §2): revolute encoders
    take the layout's plan (one joint_batch per encoder), a prismatic one does not; either
    way the residuals and Jacobians are observations.residuals' bit for bit, in every
    reading sequence (an encoder's angle and rate, a sensor twice, the IMU's parts in
    either order, a yaw), and every angle residual is wrapped."""
    from mbfg_ros.planar.dynamics import load_system
    system = load_system(CONFIG / f'{mechanism}.yaml')
    rng = np.random.default_rng(len(order) + len(joints))
    est = Estimator(system)
    for _ in range(3):
        obs = _planar_readings(rng, joints, order)
        X = rng.standard_normal((3, system.n))
        layout = _layout(est, obs)
        assert layout.plan is plan
        e, H = layout_rows(est.sm, obs, X, layout)
        e0, H0 = residuals(est.sm, obs, X, True)
        np.testing.assert_array_equal(e, e0)
        np.testing.assert_array_equal(H, H0.reshape(len(e0), -1))
        assert np.abs(e[layout.wrap_rows]).max() <= math.pi
