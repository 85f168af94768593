"""The physical-limit gate on negative values (issue 29): below the position range, and
velocity, effort, gyro and accelerometer readings beyond their limits in the negative
direction are set aside and counted, just like positive ones.

A mutant comparing the velocity without ``abs`` let a velocity of -2000 through a limit of
1000; only large positive values were tested. The same cases through the EstimatorDriver:
test/ros/test_driver_limits.py."""
from __future__ import annotations

import numpy as np
import pytest
from support.limits import CASES, joint, limited_fourbar

from mbfg_ros.core.measurements import ImuMeasurement
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
