"""Simulated sensors and reference tracking of a URDF robot (spatial/sensor_sim.py): the
readings equal the sensor models at the samples plus noise of the configured size, the
gyroscope agrees with the orientation's rate, the accelerometer reads gravity at rest, and
computed-torque tracking follows the reference (and misses it with a wrong payload)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.spatial.sensor_model import so3_log
from mbfg_ros.spatial.sensor_sim import (SpatialSensorConfig, reference_motion,
                                         simulate_spatial_measurements, track_reference,
                                         with_payload)
from mbfg_ros.spatial.sensors import ImuModel
from mbfg_ros.spatial.system import build_spatial_system

URDF = Path(__file__).resolve().parents[2] / 'config' / 'urdf'


@pytest.fixture(scope='module')
def ur5():
    return build_spatial_system(URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml')


@pytest.fixture(scope='module')
def tracked(ur5):
    return track_reference(ur5, reference_motion(ur5, 3.0, 1e-3, seed=2))


def test_encoder_noise_and_efforts_are_as_configured(ur5, tracked):
    cfg = SpatialSensorConfig(encoder_rate=1000.0, encoder_sigma=2e-3, imu_rate=0,
                              effort_sigma=0.0)
    recs = simulate_spatial_measurements(ur5, tracked.t, tracked.q, tracked.qd, tracked.qdd,
                                         tracked.tau, cfg, np.random.default_rng(1))
    assert len(recs) == len(tracked.t)
    err = np.array([r.position for r in recs]) - tracked.q
    assert np.all(np.abs(err.std(axis=0) / 2e-3 - 1) < 0.1), err.std(axis=0)
    assert np.all(np.abs(err.mean(axis=0)) < 3 * 2e-3 / np.sqrt(len(recs)) * 3)
    np.testing.assert_array_equal(np.array([r.effort for r in recs]), tracked.tau)


def test_noiseless_imu_equals_the_imu_model_and_its_gyro_the_orientation_rate(ur5, tracked):
    cfg = SpatialSensorConfig(encoder_rate=0, imu_rate=1000.0, gyro_sigma=0.0,
                              accel_sigma=0.0, orientation_sigma=0.0)
    recs = simulate_spatial_measurements(ur5, tracked.t, tracked.q, tracked.qd, tracked.qdd,
                                         tracked.tau, cfg, np.random.default_rng(1))
    imu = ur5.model.imus[0]
    ref = ImuModel(ur5.loops.dyn, imu.link, imu.T_mount)       # the numpy model
    for k in (0, 700, 2100):
        r = ref.measure(tracked.q[k], tracked.qd[k], tracked.qdd[k])
        np.testing.assert_allclose(recs[k].gyro, r.gyro, atol=1e-12)
        np.testing.assert_allclose(recs[k].accel, r.accel, atol=1e-10)
    # R_kᵀ R_{k+1} = Exp(ω dt): the gyroscope is the orientation's rate (sensor frame)
    from scipy.spatial.transform import Rotation
    Rs = Rotation.from_quat([r.orientation for r in recs]).as_matrix()
    dt = tracked.t[1] - tracked.t[0]
    for k in range(500, 2500, 250):
        w_fd = so3_log(Rs[k].T @ Rs[k + 1])[0] / dt
        w_mid = 0.5 * (recs[k].gyro + recs[k + 1].gyro)
        assert np.linalg.norm(w_fd - w_mid) < 2e-3 * max(1.0, np.linalg.norm(w_mid))


def test_accelerometer_at_rest_reads_gravity_upward(ur5):
    n = ur5.n
    q = ur5.q0[None]
    cfg = SpatialSensorConfig(encoder_rate=0, imu_rate=1.0, gyro_sigma=0, accel_sigma=0,
                              orientation_sigma=0.0)
    (rec,) = simulate_spatial_measurements(ur5, np.zeros(1), q, np.zeros((1, n)),
                                           np.zeros((1, n)), None, cfg,
                                           np.random.default_rng(0))
    from scipy.spatial.transform import Rotation
    R = Rotation.from_quat(rec.orientation).as_matrix()
    np.testing.assert_allclose(R @ rec.accel, [0, 0, 9.81], atol=1e-9)   # +g upward, world
    np.testing.assert_allclose(rec.gyro, 0, atol=1e-12)


def test_tracking_follows_the_reference_and_a_heavier_payload_pulls_it_off(ur5):
    ref = reference_motion(ur5, 3.0, 1e-3, seed=4)
    assert np.allclose(ref.qd[0], 0) and np.allclose(ref.qdd[0], 0)
    assert np.all(ref.q >= ur5.model.lower) and np.all(ref.q <= ur5.model.upper)
    same = track_reference(ur5, ref)
    heavy = build_spatial_system(with_payload(ur5.model, 1.2))
    assert heavy.model.mass[-1] == pytest.approx(1.2 * ur5.model.mass[-1])
    off = track_reference(heavy, ref, controller=ur5)
    e_same = np.abs(same.q - ref.q).max()
    e_off = np.abs(off.q - ref.q).max()
    assert e_same < 1e-4, e_same
    assert e_off > 10 * e_same, (e_same, e_off)
    # the applied torques are what the controller's model asks for, under the limits
    assert np.all(np.abs(same.tau) <= ur5.model.effort_limit[ur5.model.actuated])


def test_bad_configuration_is_an_error_naming_the_field(ur5):
    with pytest.raises(ValueError, match='encoder_sigma'):
        SpatialSensorConfig(encoder_sigma=-1.0)
    with pytest.raises(ValueError, match='unknown IMU'):
        simulate_spatial_measurements(ur5, np.zeros(1), ur5.q0[None], np.zeros((1, 6)),
                                      np.zeros((1, 6)), None,
                                      SpatialSensorConfig(imus=('nope',)),
                                      np.random.default_rng(0))
