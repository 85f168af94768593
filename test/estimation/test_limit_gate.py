"""The physical-limit gate on negative values (issue 29): below the position range, and
velocity, effort, gyro and accelerometer readings beyond their limits in the negative
direction are set aside and counted, just like positive ones.

A mutant comparing the velocity without ``abs`` let a velocity of -2000 through a limit of
1000; only large positive values were tested. The same cases through the EstimatorDriver:
test/ros/test_driver_limits.py."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.limits import CASES, joint, limited_fourbar

from mbfg_ros.core.measurements import ImuMeasurement, JointMeasurement
from mbfg_ros.estimation.gate import LimitGate
from mbfg_ros.planar.dynamics import load_system

@pytest.fixture(scope='module')
def limited(tmp_path_factory):
    path = limited_fourbar(tmp_path_factory.mktemp('limits'))
    return path, load_system(path)


@pytest.mark.parametrize('case', list(CASES))
def test_negative_values_beyond_the_limits_are_set_aside(limited, case):
    _, system = limited
    sent, kept, bad = CASES[case]
    rec, n_bad = LimitGate(system.mech).joint(joint(*sent))
    assert n_bad == bad
    for got, want in zip((rec.position, rec.velocity, rec.effort), kept):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize('gyro, accel, kept', [
    ((0.0, 0.0, -19.9), (-99.0, -99.0, 0.0), 'both'),
    ((0.0, 0.0, -20.1), (-99.0, -99.0, 0.0), 'accel'),
    ((0.0, 0.0, -19.9), (-100.5, 0.0, 0.0), 'gyro'),
    ((0.0, 0.0, 1.0), (0.0, -100.5, 0.0), 'gyro'),
])
def test_negative_imu_readings_beyond_their_range_are_set_aside(limited, gyro, accel, kept):
    _, system = limited
    rec, bad = LimitGate(system.mech).imu(ImuMeasurement(2.0, 'coupler_imu', np.array(gyro),
                                                         np.array(accel), None))
    assert bad == (0 if kept == 'both' else 1)
    assert (rec.gyro is not None) == (kept in ('both', 'gyro'))
    assert (rec.accel is not None) == (kept in ('both', 'accel'))


def test_a_record_with_every_value_beyond_the_limits_is_dropped(limited):
    _, system = limited
    rec, bad = LimitGate(system.mech).joint(joint([-1.5, 0.0], [-6.0, -2000.0],
                                                  [-4.0, -2e4]))
    # the coupler's position is within its (default) range: the record stays
    assert bad == 5 and rec is not None and np.isnan(rec.position[0])
    rec, bad = LimitGate(system.mech).joint(joint([-1.5, -2e6], [-6.0, -2000.0],
                                                  [-4.0, -2e4]))
    assert bad == 6 and rec is None


def test_values_exactly_at_the_limits_are_kept(limited):
    _, system = limited
    gate = LimitGate(system.mech)
    for pos, vel, eff in (([-1.0, 0.0], [-5.0, -1e3], [-3.0, -1e4]),
                          ([2.0, 0.0], [5.0, 1e3], [3.0, 1e4])):
        rec, bad = gate.joint(joint(pos, vel, eff))
        assert bad == 0
        np.testing.assert_array_equal(rec.position, pos)
        np.testing.assert_array_equal(rec.velocity, vel)
        np.testing.assert_array_equal(rec.effort, eff)
    for g, a in ((-20.0, -100.0), (20.0, 100.0)):
        rec, bad = gate.imu(ImuMeasurement(2.0, 'coupler_imu', np.array([0.0, 0.0, g]),
                                           np.array([a, a, 0.0]), None))
        assert bad == 0 and rec.gyro is not None and rec.accel is not None


def test_a_record_keeps_its_empty_fields(limited):
    """The estimator's own records (simulation, tests) leave fields they lack empty."""
    _, system = limited
    m = JointMeasurement(2.0, ('crank', 'coupler_joint'), np.array([-1.5, 0.3]),
                         np.zeros(0), np.zeros(0))
    rec, bad = LimitGate(system.mech).joint(m)
    assert bad == 1
    np.testing.assert_array_equal(rec.position, [np.nan, 0.3])
    assert rec.velocity.size == 0 and rec.effort.size == 0
    ok = replace(m, position=np.array([0.5, 0.3]))
    assert LimitGate(system.mech).joint(ok) == (ok, 0)
    # and a rate-only record keeps its empty position
    rec, bad = LimitGate(system.mech).joint(replace(m, position=np.zeros(0),
                                                    velocity=np.array([-6.0, 1.0])))
    assert bad == 1 and rec.position.size == 0 and rec.effort.size == 0
    np.testing.assert_array_equal(rec.velocity, [np.nan, 1.0])


def test_a_joint_without_limits_in_the_model_passes_unchanged(limited):
    _, system = limited
    m = JointMeasurement(2.0, ('crank', 'wheel'), np.array([-1.5, -1e9]),
                         np.array([0.0, -1e9]), np.array([0.0, 1e9]))
    rec, bad = LimitGate(system.mech).joint(m)
    assert bad == 1           # the crank's position; 'wheel' has no limits to break
    np.testing.assert_array_equal(rec.position, [np.nan, -1e9])
    np.testing.assert_array_equal(rec.velocity, [0.0, -1e9])
    np.testing.assert_array_equal(rec.effort, [0.0, 1e9])


def test_imu_parts_out_of_range_go_with_their_variance(limited):
    _, system = limited
    gate = LimitGate(system.mech)
    imu = ImuMeasurement(2.0, 'coupler_imu', np.array([0.0, 0.0, -25.0]),
                         np.array([1.0, -2.0, 0.0]), None, gyro_var=np.full(3, 1e-4),
                         accel_var=np.full(3, 4e-2))
    rec, bad = gate.imu(imu)
    assert bad == 1 and rec.gyro is None and rec.gyro_var is None
    np.testing.assert_array_equal(rec.accel, imu.accel)
    np.testing.assert_array_equal(rec.accel_var, imu.accel_var)
    rec, bad = gate.imu(replace(imu, gyro=np.zeros(3), accel=np.array([0.0, -101.0, 0.0])))
    assert bad == 1 and rec.accel is None and rec.accel_var is None
    np.testing.assert_array_equal(rec.gyro_var, imu.gyro_var)
    # both out: nothing left without an orientation; the orientation alone with one
    both = replace(imu, accel=np.array([0.0, -101.0, 0.0]))
    assert gate.imu(both) == (None, 2)
    quat = np.array([0.0, 0.0, 0.0, 1.0])
    rec, bad = gate.imu(replace(both, orientation=quat))
    assert bad == 2 and rec.gyro is None and rec.accel is None
    np.testing.assert_array_equal(rec.orientation, quat)
    # an IMU the model does not have: no ranges to apply
    other = replace(imu, sensor='base_imu')
    assert gate.imu(other) == (other, 0)
