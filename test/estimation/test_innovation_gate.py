"""The estimator's innovation gate with known σ (issue 29): a reading just inside the threshold
is used, one just outside is rejected, and the gyroscope's σ is told from the accelerometer's.

Both used to be caught only on thin margins: d² compared with the threshold instead of its
square was seen through an exact count of used readings (749 against 751), and gyro σ swapped
with accelerometer σ through an angle error 2 % over a bound. Here the four-bar runs on
noise-free readings, so the state is known far better than the test readings' own σ; the
gate's distance is then the offset in units of that σ, and which reading is rejected follows
from the threshold alone.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.ros_data import fourbar_system

from mbfg_ros.core.measurements import ImuMeasurement, JointMeasurement
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.planar.sensors import SensorConfig, simulate_measurements
from mbfg_ros.simulation.forward import ForwardConfig, simulate

THRESHOLD = 3.0
SIGMA = 0.1          # rad: σ of the test encoder readings (given in the message)
GYRO_SIGMA = 0.5     # rad/s and m/s²: the defaults of messages without a variance,
ACCEL_SIGMA = 5.0    # ten times apart so a swap cannot go unseen
RATE = 500.0


@pytest.fixture(scope='module')
def readings():
    """Noise-free crank and coupler encoders and coupler IMU of config/fourbar.yaml in free
    fall, 0.4 s at 500 Hz."""
    system = fourbar_system()
    traj = simulate(system, 0.4, ForwardConfig(dt=1e-3))
    cfg = SensorConfig(encoder_rate=RATE, encoder_counts=0, encoder_sigma=0.0,
                       imu_rate=RATE, gyro_sigma=0.0, accel_sigma=0.0)
    recs = simulate_measurements(system, traj.t, traj.q, traj.qd, traj.qdd, cfg,
                                 np.random.default_rng(0))
    return system, recs


def start(system, recs, until: float) -> tuple[Estimator, dict[float, list]]:
    """An estimator fed the readings up to ``until``; the readings after it, by stamp."""
    est = Estimator(system, EstimatorConfig(
        frequency=RATE, lag_duration=0.1, encoder_sigma=1e-3, gyro_sigma=GYRO_SIGMA,
        accel_sigma=ACCEL_SIGMA, joint_rejection_threshold=THRESHOLD,
        imu_rejection_threshold=THRESHOLD, outlier_reset_time=10.0))
    later: dict[float, list] = {}
    for r in recs:
        later.setdefault(round(r.t, 9), []).append(r)
    for t in sorted(later):
        if t > until:
            break
        for r in later.pop(t):
            est.add(r)
        est.tick(t)
    assert est.initialised and est.counters['rejected_outlier'] == 0
    return est, later


def tick_with(est: Estimator, regular: list, extra) -> dict[str, int]:
    """One tick with the regular readings of its stamp and ``extra``; the counter changes."""
    before = dict(est.counters)
    for r in regular:
        est.add(r)
    est.add(extra)
    assert est.tick(extra.t) is not None
    return {k: v - before.get(k, 0) for k, v in est.counters.items() if v != before.get(k, 0)}


@pytest.mark.parametrize('sign', [1.0, -1.0])
def test_a_reading_just_inside_the_threshold_is_used_and_one_just_outside_rejected(
        readings, sign):
    system, recs = readings
    est, later = start(system, recs, 0.2)
    stamps = sorted(later)
    results = {}
    for t, units in zip(stamps[:4], (2.9, 3.1, 2.95, 3.05)):
        enc = next(r for r in later[t] if isinstance(r, JointMeasurement))
        assert enc.names[0] == 'crank'
        z = enc.position[0] + sign * units * SIGMA      # the noise-free crank angle + offset
        extra = JointMeasurement(t, ('crank',), np.array([z]), np.zeros(0), np.zeros(0),
                                 position_var=np.array([SIGMA ** 2]))
        d = tick_with(est, later[t], extra)
        results[units] = (d.get('rejected_outlier', 0), d.get('used_joint_pos', 0))
    # inside: the extra reading is used with the two regular ones; outside: rejected
    assert results == {2.9: (0, 3), 3.1: (1, 2), 2.95: (0, 3), 3.05: (1, 2)}


def test_the_gyro_and_the_accelerometer_each_have_their_own_sigma(readings):
    system, recs = readings
    est, later = start(system, recs, 0.2)
    t1, t2, t3 = sorted(later)[:3]
    imu1 = next(r for r in later[t1] if isinstance(r, ImuMeasurement))
    imu2 = next(r for r in later[t2] if isinstance(r, ImuMeasurement))
    imu3 = next(r for r in later[t3] if isinstance(r, ImuMeasurement))
    assert imu1.gyro_var is None and imu1.accel_var is None   # the defaults apply
    # gyro 5 σ_gyro off (0.5 σ_accel): rejected
    gyro_off = replace(imu1, gyro=imu1.gyro + [0.0, 0.0, 5 * GYRO_SIGMA], accel=None)
    d = tick_with(est, later[t1], gyro_off)
    assert (d.get('rejected_outlier', 0), d.get('used_gyro', 0)) == (1, 1)
    # accelerometer 2 σ_accel off (20 σ_gyro): used
    accel_off = replace(imu2, gyro=None, accel=imu2.accel + [2 * ACCEL_SIGMA, 0.0, 0.0])
    d = tick_with(est, later[t2], accel_off)
    assert (d.get('rejected_outlier', 0), d.get('used_accel', 0)) == (0, 2)
    # gyro 2 σ_gyro off: used; accelerometer 5 σ_accel off: rejected
    d = tick_with(est, later[t3], replace(imu3, gyro=imu3.gyro + [0, 0, 2 * GYRO_SIGMA],
                                          accel=imu3.accel + [0, -5 * ACCEL_SIGMA, 0]))
    assert (d.get('rejected_outlier', 0), d.get('used_gyro', 0),
            d.get('used_accel', 0)) == (1, 2, 1)


def test_a_tick_whose_every_new_reading_is_rejected_is_a_tick_without_readings(readings):
    """Every reading of a tick an outlier (a glitch of the only sensor): the tick runs on
    the dynamics alone, each reading counted ``rejected_outlier``, no reset. (The shared
    evaluation of issue 24 took the newest stamp of an empty set: a ValueError that reset
    the live node, reset:error, on the DDS bad-input test about one run in six.)"""
    system, recs = readings
    est, later = start(system, recs, 0.2)
    t = sorted(later)[0]
    enc = next(r for r in later[t] if isinstance(r, JointMeasurement))
    glitch = JointMeasurement(t, enc.names, enc.position + 50 * SIGMA, np.zeros(0),
                              np.zeros(0), position_var=np.full(len(enc.names), SIGMA ** 2))
    before = dict(est.counters)
    est.add(glitch)
    assert est.tick(t) is not None
    d = {k: v - before.get(k, 0) for k, v in est.counters.items() if v != before.get(k, 0)}
    assert d.get('rejected_outlier', 0) == len(enc.names), d
    assert not any(k.startswith('reset') for k in d), d
    assert est.counters['resets'] == 0


def test_late_readings_of_different_ticks_are_gated_each_with_its_own_sigma(readings):
    """Late readings (stamped at earlier ticks) are predicted from the estimate of their own
    tick, grouped by that tick: an encoder reading 3.1 σ off, added between a gyro reading of
    another tick and a good encoder reading, is rejected on its own σ. (Issue 24: the gate
    took the σ's in the readings' order but the rows in the groups' order, so this reading
    was weighed with the gyro's σ, five times its own, and used.)"""
    system, recs = readings
    est, later = start(system, recs, 0.2)
    stamps = sorted(later)
    for t in stamps[:3]:                        # three ticks on; then readings of two of them
        for r in later[t]:
            est.add(r)
        assert est.tick(t) is not None
    t_a, t_b, t_now = stamps[0], stamps[1], stamps[3]
    enc_a = next(r for r in later[t_a] if isinstance(r, JointMeasurement))
    imu_b = next(r for r in later[t_b] if isinstance(r, ImuMeasurement))
    names = enc_a.names
    assert len(names) == 2
    var = np.array([SIGMA ** 2])
    good = JointMeasurement(t_a, names[:1], enc_a.position[:1], np.zeros(0), np.zeros(0),
                            position_var=var)
    off = JointMeasurement(t_a, names[1:], enc_a.position[1:] + 3.1 * SIGMA, np.zeros(0),
                           np.zeros(0), position_var=var)
    before = dict(est.counters)
    for r in later[t_now]:
        est.add(r)
    for r in (good, replace(imu_b, accel=None), off):   # the gyro's tick between the two
        assert est.add(r)
    assert est.tick(t_now) is not None
    d = {k: v - before.get(k, 0) for k, v in est.counters.items() if v != before.get(k, 0)}
    assert d.get('late', 0) == 2 and d.get('rejected_outlier', 0) == 1, d
