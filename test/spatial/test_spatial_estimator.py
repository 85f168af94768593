"""The estimator on a URDF robot (issue 13 item 1): the same Estimator, fixed-lag smoother
and factors as the planar one, over joint coordinates, with 3-axis IMUs on any link.

Jacobians of every spatial factor are checked by finite differences; the estimate is
checked against a simulated UR5 (forward dynamics of the package, sensors from the IMU
model with Gaussian noise) and a spatial four-bar with its loop."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.core import factors as F
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.core.measurements import JointMeasurement
from mbfg_ros.estimation.observations import (Observation, interpolation_weights, interval_error,
                                   observation_error)
from mbfg_ros.spatial.sensor_model import quaternion_matrix, so3_log
from mbfg_ros.spatial.simulate import simulate_spatial
from mbfg_ros.spatial.system import build_spatial_system
from support.ur5 import readings as _readings
from support.ur5 import simulate_ur5 as _simulate_ur5

URDF = Path(__file__).resolve().parents[2] / 'config' / 'urdf'


@pytest.fixture(scope='module')
def ur5():
    return build_spatial_system(URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml')


@pytest.fixture(scope='module')
def fourbar():
    return build_spatial_system(URDF / 'fourbar.urdf', URDF / 'fourbar_loops.yaml')


def _fd(fn, xs, k, h=1e-6):
    J = []
    for i in range(xs[k].size):
        d = np.zeros(xs[k].size)
        d[i] = h
        up = list(xs)
        dn = list(xs)
        up[k], dn[k] = xs[k] + d, xs[k] - d
        J.append((fn(up, False)[0] - fn(dn, False)[0]) / (2 * h))
    return np.array(J).T


def _random_x(sys_, rng):
    n = sys_.n
    return np.concatenate((sys_.q0 + rng.normal(0, 0.4, n), rng.normal(0, 1, n),
                           rng.normal(0, 2, n)))


@pytest.mark.parametrize('which', ['ur5', 'fourbar'])
def test_state_factor_jacobian_matches_finite_differences(which, ur5, fourbar):
    sys_ = ur5 if which == 'ur5' else fourbar
    rng = np.random.default_rng(3)
    tau = rng.normal(size=len(sys_.actuator_joints))
    for _ in range(5):
        x = _random_x(sys_, rng)          # off the constraint manifold for the four-bar
        fn = lambda xs, w: F.stacked_state_error(sys_, tau, xs, w)   # noqa: E731
        e, J = fn([x], True)
        assert e.shape == (2 * sys_.m + sys_.n,)
        np.testing.assert_allclose(J[0], _fd(fn, [x], 0), atol=2e-5 * max(1, np.abs(J[0]).max()))


def _imu_obs(rng):
    R = quaternion_matrix(rng.normal(size=4))
    return [Observation('gyro', 0, rng.normal(size=3), np.full(3, 0.01)),
            Observation('accel', 0, rng.normal(size=3), np.full(3, 0.1)),
            Observation('orient', 0, R, np.full(3, 0.02)),
            Observation('joint_pos', 1, np.array([0.2]), np.array([1e-3])),
            Observation('joint_vel', 4, np.array([-0.3]), np.array([1e-2]))]


def test_observation_factors_jacobians_match_finite_differences(ur5):
    sm = ur5.sensor_model()
    rng = np.random.default_rng(4)
    for _ in range(5):
        obs = _imu_obs(rng)
        x0, x1 = _random_x(ur5, rng), _random_x(ur5, rng)
        fn = lambda xs, w: observation_error(sm, obs, xs, w)   # noqa: E731
        e, J = fn([x1], True)
        assert e.shape == (3 + 3 + 3 + 1 + 1,)
        np.testing.assert_allclose(J[0], _fd(fn, [x1], 0), atol=1e-6 * max(1, np.abs(J[0]).max()))
        obs_s = [o._replace(s=s) for o, s in zip(obs, (0.2, 0.2, 0.5, 0.7, 1.0))]
        a, b = interpolation_weights([o.s for o in obs_s], 0.004)
        fi = lambda xs, w: interval_error(sm, obs_s, a, b, xs, w)   # noqa: E731
        _, Ji = fi([x0, x1], True)
        for k in (0, 1):
            np.testing.assert_allclose(Ji[k], _fd(fi, [x0, x1], k),
                                       atol=1e-6 * max(1, np.abs(Ji[k]).max()))


def test_orientation_residual_is_the_rotation_between_reading_and_model(ur5):
    sm = ur5.sensor_model()
    rng = np.random.default_rng(5)
    q = ur5.q0 + rng.normal(0, 0.3, ur5.n)
    R = sm.imu(0, q, np.zeros(ur5.n), np.zeros(ur5.n))[2].h
    delta = np.array([0.01, -0.02, 0.03])
    w, _ = so3_log(np.eye(3))
    # a reading rotated by Exp(-δ) in the sensor frame gives the residual +δ
    from scipy.spatial.transform import Rotation
    Rz = R @ Rotation.from_rotvec(-delta).as_matrix()
    ob = Observation('orient', 0, Rz, np.ones(3))
    x = np.concatenate((q, np.zeros(2 * ur5.n)))
    e, _ = observation_error(sm, [ob], [x], False)
    np.testing.assert_allclose(e, delta, atol=1e-12)
    np.testing.assert_allclose(w, 0, atol=0)


def _run(sys_, tr, readings, **cfg):
    est = Estimator(sys_, EstimatorConfig(frequency=500, lag_duration=0.05, **cfg))
    got = []
    it = iter(readings)
    per_tick = len(readings) // len(tr.t)
    for k, t in enumerate(tr.t):
        for _ in range(per_tick):
            est.add(next(it))
        e = est.tick(t)
        if e is not None:
            got.append((k, e))
    return est, got


@pytest.mark.parametrize('orientation', [False, True], ids=['gyro+accel', 'with-orientation'])
def test_ur5_estimate_beats_raw_encoders_and_finite_differences(ur5, orientation):
    tr, taus = _simulate_ur5(ur5)
    rng = np.random.default_rng(7)
    readings = _readings(ur5, tr, taus, rng, orientation=orientation)
    est, got = _run(ur5, tr, readings)
    c = est.counters
    assert c['resets'] == 0 and c['rejected_outlier'] == 0, c
    assert c['used_gyro'] == c['used_accel'] == len(tr.t)
    assert c['used_orient'] == (len(tr.t) if orientation else 0)
    ks = np.array([k for k, _ in got])
    assert len(ks) == len(tr.t)
    q_err = np.array([e.q for _, e in got]) - tr.q[ks]
    qd_err = np.array([e.qd for _, e in got]) - tr.qd[ks]
    enc = np.array([r.position for r in readings[::2]])
    fd_err = np.diff(enc, axis=0) / np.diff(tr.t)[:, None] - tr.qd[1:]
    rms = lambda a: np.sqrt(np.mean(a ** 2, axis=0))   # noqa: E731
    assert np.all(rms(q_err) < 0.6e-3), rms(q_err)            # raw encoder: 1e-3 rad
    assert np.all(rms(qd_err) < rms(fd_err) / 5), (rms(qd_err), rms(fd_err))
    tau_err = np.array([e.tau for _, e in got]) - taus[ks]
    assert np.sqrt(np.mean(tau_err ** 2)) < 0.02 * np.sqrt(np.mean(taus ** 2))
    # uncertainty reported, in the right range (a fraction of the encoder's σ)
    std = np.array([e.q_std for _, e in got[50:]])
    assert np.all(np.isfinite(std)) and np.all(std < 1e-3) and np.all(std > 1e-5)


def test_ur5_bad_imu_readings_are_rejected_not_fatal(ur5):
    tr, taus = _simulate_ur5(ur5, duration=1.0)
    rng = np.random.default_rng(9)
    readings = _readings(ur5, tr, taus, rng)
    for i in range(201, len(readings), 50):     # every 25th IMU reading: a 30 m/s² spike
        readings[i] = dataclasses.replace(readings[i], accel=readings[i].accel + 30.0)
    est, got = _run(ur5, tr, readings)
    c = est.counters
    assert c['rejected_outlier'] >= 8 and c['resets'] == 0, c
    ks = np.array([k for k, _ in got])
    q_err = np.array([e.q for _, e in got]) - tr.q[ks]
    assert np.sqrt(np.mean(q_err ** 2)) < 0.6e-3


def test_spatial_fourbar_with_its_loop(fourbar):
    """A closed loop in 3-D: the spatial four-bar falling under gravity, crank encoder only;
    the estimate stays on the loop and follows the truth."""
    tr = simulate_spatial(fourbar, 1.0, 2e-3)
    rng = np.random.default_rng(11)
    crank = fourbar.names[0]
    readings = [JointMeasurement(t, (crank,), q[:1] + rng.normal(0, 1e-3, 1), np.zeros(0),
                                 np.zeros(0)) for t, q in zip(tr.t, tr.q)]
    est, got = _run(fourbar, tr, readings)
    assert est.counters['resets'] == 0, est.counters
    ks = np.array([k for k, _ in got])
    Q = np.array([e.q for _, e in got])
    assert np.max([np.abs(fourbar.loops.phi(q)).max() for q in Q]) < 1e-5
    assert np.sqrt(np.mean((Q - tr.q[ks]) ** 2)) < 2e-3


def test_ur5_without_effort_keeps_the_state_with_unknown_effort_sigma(ur5):
    """No effort in JointState: with unknown_effort_sigma the motors' torques are unknown
    (not zero), the dynamics factor widens by ∂q̈/∂τ σ, and the state stays better than the
    encoders with no reset; assuming zero torque instead pulls the arm down with gravity."""
    tr, taus = _simulate_ur5(ur5, duration=1.0)
    rng = np.random.default_rng(13)
    readings = [dataclasses.replace(r, effort=np.zeros(0)) if hasattr(r, 'names') else r
                for r in _readings(ur5, tr, taus, rng)]
    est, got = _run(ur5, tr, readings, unknown_effort_sigma=20.0, dynamics_sigma=2.0)
    assert est.counters['resets'] == 0 and est.counters['used_effort'] == 0, est.counters
    ks = np.array([k for k, _ in got])
    q_err = np.array([e.q for _, e in got]) - tr.q[ks]
    assert np.sqrt(np.mean(q_err ** 2)) < 0.6e-3
    zero, got0 = _run(ur5, tr, readings, dynamics_sigma=2.0)      # the old assumption
    q0_err = np.array([e.q for _, e in got0]) - tr.q[np.array([k for k, _ in got0])]
    assert (zero.counters['resets'] > 0 or zero.counters['rejected_outlier'] > 0
            or np.sqrt(np.mean(q0_err ** 2)) > np.sqrt(np.mean(q_err ** 2)))


def test_trapezoidal_jerk_factor_jacobians_and_rows():
    rng = np.random.default_rng(17)
    n, dt = 4, 0.002
    x0, x1 = rng.normal(size=3 * n), rng.normal(size=3 * n)
    fn = lambda xs, w: F.stacked_trapezoidal_jerk_error(n, dt, xs, w)   # noqa: E731
    e, J = fn([x0, x1], True)
    np.testing.assert_allclose(e[2 * n:], x1[2 * n:] - x0[2 * n:])
    np.testing.assert_allclose(e[:2 * n], F.stacked_trapezoidal_error(n, dt, [x0, x1], False)[0])
    for k in (0, 1):
        np.testing.assert_allclose(J[k], _fd(fn, [x0, x1], k), atol=1e-8)


def test_ur5_torque_from_motion_alone_without_effort(ur5):
    """Without effort the estimated τ̂ comes from the motion (q̈ smoothed by the jerk rows):
    within 5 % of the RMS torque on the simulated UR5."""
    tr, taus = _simulate_ur5(ur5, duration=1.0)
    rng = np.random.default_rng(19)
    readings = [dataclasses.replace(r, effort=np.zeros(0)) if hasattr(r, 'names') else r
                for r in _readings(ur5, tr, taus, rng)]
    est, got = _run(ur5, tr, readings, unknown_effort_sigma=20.0, dynamics_sigma=2.0)
    got = got[50:]
    ks = np.array([k for k, _ in got])
    tau_err = np.array([e.tau for _, e in got]) - taus[ks]
    assert np.sqrt(np.mean(tau_err ** 2)) < 0.05 * np.sqrt(np.mean(taus[ks] ** 2))


def test_command_law_on_the_arm_is_computed_torque_in_controller_order(ur5):
    """~/torque_commands for a URDF robot: τ = ID(q, q̇, q̈_ref + kp e + kd ė) in the order
    of a forward_command_controller's joints, checked against Pinocchio's rnea on the same
    URDF (built independently by pinocchio's own parser)."""
    import pinocchio as pin

    from mbfg_ros.estimation.control import CommandLaw
    order = ['wrist_3_joint', 'shoulder_pan_joint', 'elbow_joint', 'wrist_1_joint',
             'shoulder_lift_joint', 'wrist_2_joint']
    law = CommandLaw(ur5, order, kp=100.0, kd=20.0)
    pm = pin.buildModelFromUrdf(str(URDF / 'ur5.urdf'))
    pm.gravity = pin.Motion(np.array([0, 0, -9.81, 0, 0, 0]))
    pd = pm.createData()
    idx = [pm.getJointId(nm) - 1 for nm in ur5.names]        # pinocchio's order -> ours
    rng = np.random.default_rng(23)
    for _ in range(5):
        q, qd = ur5.q0 + rng.normal(0, 0.3, 6), rng.normal(0, 1, 6)
        s_ref, sd_ref, sdd_ref = q + rng.normal(0, 0.05, 6), rng.normal(0, 1, 6), \
            rng.normal(0, 2, 6)
        tau = law.track(q, qd, s_ref, sd_ref, sdd_ref)
        qdd = sdd_ref + 100.0 * (s_ref - q) + 20.0 * (sd_ref - qd)
        qp, vp, ap = (np.zeros(6) for _ in range(3))
        for k, j in enumerate(idx):
            qp[j], vp[j], ap[j] = q[k], qd[k], qdd[k]
        ref = np.array(pin.rnea(pm, pd, qp, vp, ap))
        expect = {nm: ref[j] for nm, j in zip(ur5.names, idx)}
        np.testing.assert_allclose(tau, [expect[nm] for nm in order], rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="'gripper' is not an actuator"):
        CommandLaw(ur5, ['gripper'], 1.0, 1.0)


CART_POLE = """<robot name="cart_pole">
  <link name="rail"/>
  <joint name="slide" type="prismatic">
    <parent link="rail"/><child link="cart"/><axis xyz="1 0 0"/>
    <limit lower="-5" upper="5" effort="100" velocity="10"/>
  </joint>
  <link name="cart"><inertial><mass value="2.0"/><origin xyz="0 0 0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="hinge" type="continuous">
    <parent link="cart"/><child link="pole"/><axis xyz="0 1 0"/>
  </joint>
  <link name="pole"><inertial><mass value="0.5"/><origin xyz="0 0 0.4"/>
    <inertia ixx="0.02" iyy="0.02" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
</robot>"""


def test_prismatic_and_continuous_joints_cart_pole():
    """A prismatic encoder (m, not wrapped) and a continuous joint's wrapped encoder: the
    cart-pole falling from near upright, estimated better than both encoders."""
    from mbfg_ros.core.angles import wrap_angle
    sys_ = build_spatial_system(CART_POLE, {'q0': {'hinge': 0.3}})
    tr = simulate_spatial(sys_, 1.5, 2e-3)
    assert np.ptp(tr.q[:, 1]) > 2.0                  # the pole swings through half a turn
    rng = np.random.default_rng(29)
    noise = rng.normal(0, 1e-3, tr.q.shape)
    readings = [JointMeasurement(t, sys_.names, np.array([q[0] + e[0],
                                                          float(wrap_angle(q[1] + e[1]))]),
                                 np.zeros(0), np.zeros(0))
                for t, q, e in zip(tr.t, tr.q, noise)]
    est, got = _run(sys_, tr, readings)
    assert est.counters['resets'] == 0 and est.counters['rejected_outlier'] == 0
    ks = np.array([k for k, _ in got])
    err = np.array([e.q for _, e in got]) - tr.q[ks]
    rms = np.sqrt(np.mean(err ** 2, axis=0))
    assert np.all(rms < 0.7e-3), rms                  # the encoders: 1e-3 m and 1e-3 rad
