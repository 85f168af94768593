"""Issue 25 item 7, "the status never 'ok' while no estimate goes out", over real DDS:
the sensors stop, the estimates stop, and /diagnostics says so at ERROR level.

The estimator node on the four-bar gets half a second of valid readings in real time
(its diagnostics then "ok", level OK: the check below can tell the levels apart), then
nothing. For ``max_tick_gap`` the ticks carry on with the clock (stale predictions; the
torque commands stop after ``command_timeout`` and the level is ERROR from then on), then
the tick timer stops and no estimate goes out at all: every /diagnostics message from
then on must be level ERROR, and say why.
"""
from __future__ import annotations

import time

import pytest
from support.ros_nodes import (
    SENSORS,
    STATE_AND_DIAGNOSTICS,
    Peer,
    _publish_in_real_time,
    _valid_messages,
    start,
    stop,
)
from support.ros_data import fourbar_data, fourbar_path, unique_domain

pytestmark = pytest.mark.ros

OK, ERROR = 0, 2          # diagnostic_msgs/DiagnosticStatus levels


def _level(msg) -> int:
    """The level of a DiagnosticArray's status (a ``byte`` field: bytes in rclpy)."""
    level = msg.status[0].level
    return level[0] if isinstance(level, (bytes, bytearray)) else int(level)


def test_diagnostics_are_error_while_no_estimate_goes_out_after_the_sensors_stop(tmp_path):
    system = fourbar_data()[0]
    domain = unique_domain(71)
    period = 0.1
    proc = start('estimator_node', {'mechanism': fourbar_path(), 'frequency': 200.0,
                                    'lag_duration': 0.1, 'diagnostics_period': period,
                                    'markers_rate': 0.0}, domain, tmp_path)
    peer = Peer(domain)
    try:
        pubs = peer.connect(SENSORS, STATE_AND_DIAGNOSTICS)
        diags, states = peer.inbox['/diagnostics'], peer.inbox['/estimator_node/state']
        first = len(diags)
        for _ in range(5):      # half a second of readings, again if the node was not ready
            t0 = peer.node.get_clock().now().nanoseconds + 50_000_000
            msgs, _ = _valid_messages(peer, system, t0, duration=0.5)
            _publish_in_real_time(peer, {'js': pubs['/joint_states'],
                                         'imu': pubs['/imu/coupler_imu']}, msgs)
            try:
                peer.spin_until(lambda: len(states) > 20, 10, 'estimates of the readings')
                break
            except AssertionError:
                continue
        assert len(states) > 20, [(_level(m), m.status[0].message) for m in diags[-5:]]
        # while the readings flowed, the node said "ok" (level OK) at least once
        peer.spin_until(lambda: len(diags) > first, 10, 'diagnostics during the readings')
        assert any(_level(m) == OK and m.status[0].message == 'ok' for m in diags[first:]), \
            [(_level(m), m.status[0].message) for m in diags[first:]]

        # the sensors stopped: wait until the estimates have stopped too (no state for
        # 2 x max_tick_gap), then every report must be ERROR while none goes out
        count, since = len(states), time.monotonic()
        deadline = since + 20.0
        while time.monotonic() - since < 1.0:
            assert time.monotonic() < deadline, 'the estimates never stopped'
            peer.ex.spin_once(timeout_sec=0.01)
            if len(states) != count:
                count, since = len(states), time.monotonic()
        silent_from = len(diags)
        peer.spin_until(lambda: len(diags) >= silent_from + 8, 10,
                        'diagnostics while no estimate goes out')
        assert len(states) == count, 'estimates went out again without readings'
        silent = [(_level(m), m.status[0].message) for m in diags[silent_from:]]
        assert all(level == ERROR for level, _ in silent), silent
        assert all('no input' in text and 'no torque command' in text
                   for _, text in silent), silent
    finally:
        peer.close()
        assert stop(proc) == 0, (tmp_path / 'estimator_node.log').read_text()
