"""The floating-base node's input path and ticks (mbfg_ros/ros/floating_intake.py), no DDS.

A recording stand-in for the estimator shows what the driver hands it (the estimator
itself is tested in test/estimation/floating, and live in test_floating_node.py); the
messages are rclpy's own classes.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbfg_ros.ros import conversions as cv
from mbfg_ros.ros.floating_intake import COUNTER_KEYS, FloatingDriver
from mbfg_ros.ros.floating_messages import message

NS = 1_000_000_000
JOINTS = ('j1', 'j2', 'j3')
FEET = ('LF', 'RF')
T0 = 100 * NS


class Recorder:
    """Records every call; ``tick`` returns a token once a joint reading came."""

    def __init__(self, fail: bool = False) -> None:
        self.joint_names, self.contact_names = JOINTS, FEET
        self.calls: list[tuple] = []
        self.counters = {'dropped': 0}
        self.fail = fail

    def add_joints(self, t, q, qd, tau):
        self.calls.append(('joints', t, np.array(q), qd, tau))

    def add_imu(self, t, gyro, accel):
        self.calls.append(('imu', t, np.array(gyro), np.array(accel)))

    def add_contact(self, t, foot, c):
        self.calls.append(('contact', t, foot, c))

    def add_foot_force(self, t, foot, f):
        self.calls.append(('force', t, foot, np.array(f)))

    def tick(self, t):
        if self.fail:
            raise RuntimeError('indeterminant system')
        self.calls.append(('tick', t))
        return ('estimate', t) if any(c[0] == 'joints' for c in self.calls) else None

    def reset(self):
        self.calls.append(('reset',))


def _driver(est=None, frames=None) -> FloatingDriver:
    return FloatingDriver(est or Recorder(), frames or {'base': np.eye(4)}, FEET,
                          sensor_timeout=0.1, future_tolerance=0.25)


def _js(t_ns, names=JOINTS, q=(0.1, 0.2, 0.3), qd=(), tau=()):
    return cv.joint_state_msg(cv.rclpy_kit(), t_ns, names, q, qd, tau)


def _imu(t_ns, frame='base', gyro=(0.0, 0.0, 0.0), acc=(0.0, 0.0, 9.81)):
    return cv.imu_msg(cv.rclpy_kit(), t_ns, frame, gyro, acc)


def test_joint_states_in_any_order_reach_the_estimator_in_its_order():
    est = Recorder()
    d = _driver(est)
    assert d.joint_state(_js(T0, ('j3', 'j1', 'j2'), (3.0, 1.0, 2.0), (30.0, 10.0, 20.0)), T0)
    assert d.imu(_imu(T0), T0)
    assert d.advance(T0) == ('estimate', 1.0)       # seconds since 1 s before the first
    joints = next(c for c in est.calls if c[0] == 'joints')
    np.testing.assert_array_equal(joints[2], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(joints[3], [10.0, 20.0, 30.0])
    assert joints[4] is None                          # no efforts: not given


@pytest.mark.parametrize('msg, reason', [
    (lambda: _js(T0, ('j1', 'j2', 'other')), 'joint_names'),
    (lambda: _js(T0, ('j1', 'j2'), (0.1, 0.2)), 'joint_names'),
    (lambda: _js(T0, JOINTS, (0.1, math.nan, 0.3)), 'nonfinite'),
    (lambda: _js(T0, JOINTS, (0.1, 0.2, 0.3), (1.0, 2.0)), 'lengths'),
    (lambda: _js(T0 + NS), 'future'),
    (lambda: _js(0), 'stamp'),
    (lambda: _imu(T0, 'camera'), 'frame'),
    (lambda: _imu(T0, 'base', (math.inf, 0.0, 0.0)), 'nonfinite'),
])
def test_bad_messages_are_counted_by_reason_and_never_reach_the_estimator(msg, reason):
    est = Recorder()
    d = _driver(est)
    m = msg()
    handler = d.imu if hasattr(m, 'angular_velocity') else d.joint_state
    assert handler(m, T0) is False
    assert d.counters[f'input.rejected.{reason}'] == 1
    assert sum(d.counters.values()) == 1 and set(d.counters) == set(COUNTER_KEYS)
    assert d.advance(T0) is None and est.calls == []


def test_an_imu_in_a_frame_fixed_to_the_base_is_turned_into_base_axes():
    """Mounted rotated 90° about z, 0.1 m along x: the gyro is rotated, the specific force
    loses the centripetal term of the offset."""
    T = np.eye(4)
    T[:3, :3] = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    T[:3, 3] = [0.1, 0.0, 0.0]
    est = Recorder()
    d = _driver(est, {'base': np.eye(4), 'imu_link': T})
    d.joint_state(_js(T0), T0)
    d.imu(_imu(T0, 'imu_link', (0.0, 0.0, 2.0), (1.0, 0.0, 9.81)), T0)
    d.advance(T0)
    imu = next(c for c in est.calls if c[0] == 'imu')
    np.testing.assert_allclose(imu[2], [0.0, 0.0, 2.0])
    # R a = (0, 1, 9.81); ω × (ω × r) = (−0.4, 0, 0) is removed
    np.testing.assert_allclose(imu[3], [0.4, 1.0, 9.81], atol=1e-12)


def test_ticks_stop_at_the_slowest_stream_and_feed_readings_in_stamp_order():
    est = Recorder()
    d = _driver(est)
    ms = NS // 1000
    for k in range(5):
        d.joint_state(_js(T0 + k * ms), T0 + 5 * ms)
    d.imu(_imu(T0 + 2 * ms), T0 + 5 * ms)
    d.imu(_imu(T0 + 1 * ms), T0 + 5 * ms)
    assert d.advance(T0 + 5 * ms) is not None
    fed = [(c[0], round(c[1] * 1000)) for c in est.calls]
    # up to the IMU's newest stamp (2 ms), in order; the joints at 3-4 ms wait
    assert fed == [('joints', 1000), ('joints', 1001), ('imu', 1001), ('joints', 1002),
                   ('imu', 1002), ('tick', 1002)]
    assert len(d.queue) == 2
    # the IMU silent for sensor_timeout while the joints go on: it stops holding the ticks
    later = T0 + 5 * ms + NS // 5
    d.joint_state(_js(T0 + 5 * ms), later)
    assert d.advance(later) is not None
    assert est.calls[-1] == ('tick', pytest.approx(1.005))


def test_contacts_take_the_newest_sensor_stamp_and_unknown_feet_are_counted():
    est = Recorder()
    d = _driver(est)
    Bool = message('std_msgs/msg/Bool')
    assert d.contact('LF', Bool(data=True), T0) is False     # nothing to stamp it with yet
    d.joint_state(_js(T0), T0)
    d.imu(_imu(T0), T0)
    assert d.contact('LF', Bool(data=True), T0 + NS // 100)
    assert d.contact('XX', Bool(data=True), T0) is False
    assert d.counters['input.rejected.foot'] == 1
    d.advance(T0)
    assert ('contact', 1.0, 'LF', True) in est.calls


def test_a_bag_loop_restarts_the_estimator_and_a_failing_one_is_reset_not_raised():
    est = Recorder()
    d = _driver(est)
    for k in range(3):
        d.joint_state(_js(T0 + k * NS // 100), T0 + NS)
        d.imu(_imu(T0 + k * NS // 100), T0 + NS)
    d.advance(T0 + NS)
    for k in range(10):           # the bag starts again, 2 s back
        d.joint_state(_js(T0 - 2 * NS + k), T0 + NS)
    assert d.counters['resets.backwards'] == 1 and ('reset',) in est.calls
    assert d.counters['input.rejected.late'] == 9
    failing = _driver(Recorder(fail=True))
    failing.joint_state(_js(T0), T0)
    failing.imu(_imu(T0), T0)
    assert failing.advance(T0) is None
    assert failing.counters['estimator.errors'] == 1
    assert failing.counters['resets.error'] == 1
    level, text, values = failing.diagnostics(T0)
    assert values['resets.last'].startswith('error: RuntimeError')


def test_joint_states_with_other_joints_too_are_used_and_a_repeated_name_is_not():
    est = Recorder()
    d = _driver(est)
    assert d.joint_state(_js(T0, ('gripper',) + JOINTS, (9.0, 1.0, 2.0, 3.0)), T0)
    assert not d.joint_state(_js(T0, ('j1', 'j1', 'j2', 'j3'), (1.0, 1.0, 2.0, 3.0)), T0)
    assert d.counters['input.rejected.joint_names'] == 1
    d.imu(_imu(T0), T0)
    d.advance(T0)
    np.testing.assert_array_equal(next(c for c in est.calls if c[0] == 'joints')[2],
                                  [1.0, 2.0, 3.0])
