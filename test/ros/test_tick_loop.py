"""The estimator node's tick loop (``executor`` auto/loop, issue 24) over real DDS, in-process:
the sensor messages and ``/clock`` are taken by the loop, not by a callback each; a simulated
clock that stops parks the loop in the executor's wait and the next message wakes it;
``stop_requested`` ends it.

The node and a peer publishing the four-bar's readings share one rclpy context on a private
domain; the loop (:func:`mbfg_ros.ros.estimator_node.run_loop`) runs in a thread of this
process so the test can count what the node did (callbacks, polls, ticks).
"""
from __future__ import annotations

import threading
import time

import pytest
from support.ros_data import (fourbar_data, fourbar_path, fourbar_publishers, publish_record,
                              stamp_of, unique_domain)

pytestmark = pytest.mark.ros

NS = 1_000_000_000


class Running:
    """The estimator node (use_sim_time, ticks at 500 Hz) with its loop in a thread, and a
    peer node publishing /clock, joint_states and the IMU, in one context."""

    def __init__(self, offset: int) -> None:
        import rclpy
        from rclpy.parameter import Parameter

        from mbfg_ros.ros import conversions as cv
        from mbfg_ros.ros import estimator_node as N
        from mbfg_ros.ros import polling as P

        self.cv, self.N, self.P = cv, N, P
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=unique_domain(offset))
        self.node = N.EstimatorNode(context=self.ctx, parameter_overrides=[
            Parameter('mechanism', value=str(fourbar_path())),
            Parameter('frequency', value=500.0), Parameter('use_sim_time', value=True)])
        assert self.node.looping and self.node.clock_sub is not None
        self.callbacks = self.polls = 0
        self.left_out = self.events_left_out = False
        on_sensor, poll = self.node._on_sensor, self.node.poll

        def counted_callback(*args):
            self.callbacks += 1
            return on_sensor(*args)

        def counted_poll():
            self.polls += 1
            return poll()

        self.node._on_sensor = counted_callback
        self.node.poll = counted_poll
        self.executor = self.P.make_executor('auto', context=self.ctx)
        self.executor.add_node(self.node)
        self.event_turns = 0          # ticking turns (no wait) with the QoS event handlers in
        spin_once, rare = self.executor.spin_once, self.node.rare_events

        def counted_spin(*args, **kwargs):
            self.event_turns += not rare.polling and kwargs.get('timeout_sec') == 0.0
            return spin_once(*args, **kwargs)

        self.executor.spin_once = counted_spin
        self.peer = rclpy.create_node('mbfg_test_loop_peer', context=self.ctx)
        self.kit = cv.rclpy_kit()
        self.pub_clock, self.pub_js, self.pub_imu = fourbar_publishers(self.peer, cv)
        self.thread = threading.Thread(target=N.run_loop, args=(self.node, self.executor),
                                       daemon=True)
        self.thread.start()
        end = time.monotonic() + 30
        while min(p.get_subscription_count() for p in (self.pub_clock, self.pub_js,
                                                      self.pub_imu)) == 0:
            assert time.monotonic() < end, 'the node did not match the peer in 30 s'
            time.sleep(0.05)

    def publish(self, recs: list) -> None:
        """Each reading after the /clock of its stamp, ~1 ms of wall time apart; notes
        whether the executor would leave the sensors and /clock out of its wait set."""
        cv = self.cv
        subs = (self.node.sub_joints, *self.node.sub_imus, self.node.clock_sub)
        events = [w for w in self.node.waitables
                  if isinstance(w, self.P.event_handler_types())]
        assert events and all(w.callback_group is self.node.rare_events for w in events)
        for r in recs:
            self.left_out |= not any(self.executor.can_execute(s) for s in subs)
            self.events_left_out |= not any(self.executor.can_execute(w) for w in events)
            publish_record(cv, self.kit, self.pub_clock, self.pub_js, self.pub_imu, r)
            time.sleep(0.001)

    def wait_for(self, pred, what: str, timeout: float = 20.0) -> None:
        end = time.monotonic() + timeout
        while not pred():
            assert self.thread.is_alive(), 'the loop ended'
            assert time.monotonic() < end, f'timed out waiting for {what}'
            time.sleep(0.01)

    def close(self) -> None:
        import rclpy
        self.node.stop_requested.set()
        self.thread.join(5.0)
        self.executor.shutdown()
        self.peer.destroy_node()
        self.node.destroy_node()
        rclpy.shutdown(context=self.ctx)


def test_the_loop_takes_every_sensor_message_without_a_callback_each():
    """~400 readings (1 s at 200 Hz): all received and queued, at most a few through a
    callback (the first one wakes the idle node; the loop takes the rest), ticks published
    on the sim clock."""
    _, _, recs = fourbar_data()
    n = len(recs)
    assert n > 300
    run = Running(1)
    try:
        run.publish(recs)
        d = run.node.driver
        run.wait_for(lambda: d.counters['received'] >= n, 'every reading')
        run.wait_for(lambda: d.ticks['published'] > 0, 'an estimate')
        assert d.counters['received'] == d.counters['queued'] == n, d.counters
        assert run.callbacks <= 5, run.callbacks
        assert run.polls > 10
        # while it ticks, the executor's wait set leaves the sensors and /clock to the loop
        assert run.left_out, 'the executor kept the sensor subscriptions in its wait set'
        # rclpy's QoS event handlers: out of the turns, but in one turn a second (and idle)
        assert run.events_left_out, 'the QoS event handlers were in every executor turn'
        assert run.event_turns >= 1
        # the ticks follow the polled /clock: none beyond the newest stamp published
        assert d.last_tick <= stamp_of(recs[-1])
        # the node's clock read (its handle, no Time built) is rclpy's Clock.now: the
        # newest /clock, which stands still after the stream
        run.wait_for(lambda: run.node._now_ns() == stamp_of(recs[-1]), 'the last /clock')
        assert run.node.get_clock().now().nanoseconds == run.node._now_ns()
    finally:
        run.close()
    assert not run.thread.is_alive(), 'stop_requested did not end the loop'


def test_a_stopped_sim_clock_parks_the_loop_and_the_next_message_wakes_it():
    """After the stream (and /clock) stop, the loop waits in the executor instead of polling
    at the tick rate (500 per second); new readings bring the ticks back."""
    _, _, recs = fourbar_data()
    run = Running(2)
    try:
        run.publish(recs[:200])
        d = run.node.driver
        run.wait_for(lambda: d.counters['received'] >= 200, 'the readings')
        time.sleep(1.0)          # PARK_AFTER_S, sensor_timeout (the last ticks), and then some
        polls, ran = run.polls, d.ticks['run']
        time.sleep(0.5)
        assert run.polls - polls <= 20, run.polls - polls     # awake it would be ~250
        assert d.ticks['run'] == ran
        run.publish(recs[200:260])
        run.wait_for(lambda: d.ticks['run'] > ran and d.counters['received'] >= 260,
                     'ticks after the clock moved again')
        assert d.last_tick > stamp_of(recs[199])
    finally:
        run.close()
