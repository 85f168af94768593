"""ROS 2 node of the floating-base estimator: joints, base IMU and feet in; odometry out.

A thin wrapper around :class:`~mbfg_ros.ros.floating_intake.FloatingDriver` (the input
path, the ticks) and :class:`~mbfg_ros.estimation.floating.FloatingEstimator` (issue 28
item 3), built like the fixed-base ``estimator_node``: parameters with defaults and
one-line errors (:mod:`.floating_params`), a tick loop on the main thread that takes the
waiting sensor messages itself (the fixed-base node's :class:`PolledGroup` and drain),
rclpy's SingleThreadedExecutor for the rest, sim time respected. Topics (defaults; the
input names are parameters, ``<FOOT>`` each of ``feet``):

=============================  ==================================  ===========================
``joint_states``               sensor_msgs/JointState (in)         q, q̇, efforts (URDF names)
``imu``                        sensor_msgs/Imu (in)                base IMU (base frame or a
                                                                   frame fixed to it)
``feet/<FOOT>/contact``        std_msgs/Bool (in)                  contact_source topic
``feet/<FOOT>/wrench``         geometry_msgs/WrenchStamped (in)    contact_source force (or
                                                                   foot_forces): foot frame
                                                                   (contact_source effort:
                                                                   neither, the stance from
                                                                   the joint efforts)
``~/odom``                     nav_msgs/Odometry (out)             odom → base_frame, twist in
                                                                   base_frame (REP-105)
``/tf``                        tf2_msgs/TFMessage (out)            odom → base_frame
                                                                   (publish_tf)
``~/joint_states``             sensor_msgs/JointState (out)        q, q̇, τ̂
``~/feet/<FOOT>/contact``      std_msgs/Bool (out)                 contact state used
``~/feet/<FOOT>/force``        geometry_msgs/WrenchStamped (out)   ground on foot, odom axes
``/diagnostics``               diagnostic_msgs/DiagnosticArray     counters, status, 1 Hz
``~/reset``                    std_srvs/Trigger (service)          forget the state
=============================  ==================================  ===========================

Each loop turn (``frequency`` per second, wall clock): the newest ``/clock`` (sim time),
every message waiting on the sensor topics, one tick at the data horizon
(:meth:`FloatingDriver.advance`), its messages (only to topics with subscribers), then a
sleep to the next period. A turn that found no new data (the sensors late) looks again after
a quarter period instead of a whole one; a turn that ends less than a period late runs the
next at once (the slot is kept, not dropped); only a whole period behind are slots given up
(``loop.behind``). With no input for ``sensor_timeout`` the loop blocks in the
executor (sensors back in its wait set): an idle node costs nothing.

Run: ``ros2 launch mbfg_ros floating_estimator.launch.py`` or ``ros2 run mbfg_ros
floating_estimator_node --ros-args -p urdf:=solo12.urdf -p overlay:=solo12.yaml``. A bad
parameter or robot prints one error line and exits with status 2.
"""
from __future__ import annotations

import functools
import gc
import sys
import threading
import time
from collections import deque
from typing import Any, Callable

import numpy as np
import rclpy
import rclpy.executors
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time_source import TimeSource

from ..estimation.floating import FloatingEstimator
from ..loader import load_floating
from . import conversions as cv
from .polling import OUTPUT_QOS, SENSOR_QOS, SPIN_EVERY_S, GcPauses, PolledGroup, drain, newest
from .floating_intake import FloatingDriver
from .floating_messages import FloatingMessages, message
from .floating_params import NODE_NAME, ParameterError, floating_params, foot_topic, \
    parse_floating
from .params import declare, read
from .runner import run_node, stop_on_signals

__all__ = ['FloatingEstimatorNode', 'main', 'run_floating_loop', 'TF_QOS']

TF_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                    reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.VOLATILE)
"""tf2_ros' TransformBroadcaster QoS."""

SUMMARY = ('Estimates the floating base (pose, twist), joint states, contacts and contact '
           'forces of a legged robot from joint_states, its base IMU and the feet\'s contact '
           'or force topics; publishes ~/odom, /tf, ~/joint_states, ~/feet/<FOOT>/contact '
           'and ~/feet/<FOOT>/force.')

POLL_MAX = 2048
"""Most sensor messages taken per loop turn (a backlog is worked off over several)."""
POLL_BATCH = 64
"""Messages taken per reading of the clock."""
IDLE_WAIT_S = 0.1
RETRY_DIVISOR = 4
"""A turn that found no new data looks again after period / this (not a whole period)."""


class FloatingEstimatorNode(Node):
    """The floating-base estimator node (module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.stop_requested = threading.Event()
        specs = floating_params()
        declare(self, specs)
        where = self.get_name()
        settings = parse_floating(read(self, specs), where=where)
        v = settings.values
        robot = load_floating(settings.source, v['overlay'])
        feet = tuple(v['feet']) or robot.contact_names
        for foot in feet:
            if foot not in robot.contact_names:
                raise ParameterError(f"{where}: parameter 'feet': {foot!r} is not a contact "
                                     f'of the overlay ({", ".join(robot.contact_names)})')
        self.estimator = FloatingEstimator(robot.system, settings.config)
        self.driver = FloatingDriver(self.estimator, dict(robot.base_frames), feet,
                                     v['sensor_timeout'], v['future_tolerance'],
                                     v['max_queue'])
        self.frequency = float(v['frequency'])
        base_frame = v['base_frame'] or robot.base_link
        self.robot_name = robot.name
        self.msgs = FloatingMessages(self.driver.joint_names, feet,
                                     self.driver.contact_names, v['odom_frame'], base_frame,
                                     bool(v['publish_tf']))
        if v['publish_tf'] and self.msgs.tf is None:
            self.get_logger().warning('publish_tf: tf2_msgs is not installed, no /tf (the '
                                      'odometry is on ~/odom)')
        self.polled = PolledGroup()
        contact_source = getattr(settings.config, 'contact_source', 'topic')
        inputs: list[tuple[Any, Callable[[Any, int], bool]]] = []
        d = self.driver

        def sub(type_name: str, topic: str, handler: Callable[[Any, int], bool]) -> None:
            s = self.create_subscription(message(type_name), topic,
                                         functools.partial(self._on_message, handler),
                                         SENSOR_QOS, callback_group=self.polled)
            inputs.append((s, handler))

        sub('sensor_msgs/msg/JointState', v['joint_states_topic'], d.joint_state)
        sub('sensor_msgs/msg/Imu', v['imu_topic'], d.imu)
        self.input_topics = [v['joint_states_topic'], v['imu_topic']]
        for foot in feet:
            if contact_source == 'topic':
                topic = foot_topic(v['contact_topic'], foot)
                sub('std_msgs/msg/Bool', topic, functools.partial(_foot_input, d.contact, foot))
                self.input_topics.append(topic)
            if contact_source == 'force' or v['foot_forces']:
                topic = foot_topic(v['wrench_topic'], foot)
                sub('geometry_msgs/msg/WrenchStamped', topic,
                    functools.partial(_foot_input, d.wrench, foot))
                self.input_topics.append(topic)
        self._inputs = inputs
        self.pub_odom = self.create_publisher(message('nav_msgs/msg/Odometry'), '~/odom',
                                              OUTPUT_QOS)
        self.pub_tf = (self.create_publisher(type(self.msgs.tf), '/tf', TF_QOS)
                       if self.msgs.tf is not None else None)
        self.pub_joints = self.create_publisher(message('sensor_msgs/msg/JointState'),
                                                '~/joint_states', OUTPUT_QOS)
        self.pub_contact = [self.create_publisher(message('std_msgs/msg/Bool'),
                                                  f'~/feet/{f}/contact', OUTPUT_QOS)
                            for f in feet]
        self.pub_force = [self.create_publisher(message('geometry_msgs/msg/WrenchStamped'),
                                                f'~/feet/{f}/force', OUTPUT_QOS)
                          for f in feet]
        self.pub_diag = self.create_publisher(cv.message_class('DiagnosticArray'),
                                              '/diagnostics', OUTPUT_QOS)
        from std_srvs.srv import Trigger
        self.requests = {'reset': 0}
        self.srv_reset = self.create_service(Trigger, '~/reset', self._on_reset)
        self._sim_time = bool(self.get_parameter('use_sim_time').value)
        self.clock_sub = self._poll_clock_subscription()
        self.published = 0
        self.loop = {'turns': 0, 'behind': 0, 'no_new_data': 0}
        """Loop turns (awake), those that started a period late, those with nothing new."""
        self._cpu_total_ns = 0                # thread CPU of every published tick
        self._published_at_diag = 0
        self._cpu_ns: deque[int] = deque(maxlen=8192)
        self._latency_ms: deque[float] = deque(maxlen=8192)
        self._period_start = time.monotonic()
        self.gc_pauses = GcPauses()
        self.diag_timer = self.create_timer(float(v['diagnostics_period']), self._on_diag,
                                            clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(
            f'{robot.source}: {len(self.driver.joint_names)} joints, feet {list(feet)}, '
            f'contacts from {contact_source}, {self.frequency:g} Hz, odom '
            f'{v["odom_frame"]} -> {base_frame}')

    # ------------------------------------------------------------------ input
    def _poll_clock_subscription(self) -> Any:
        """Sim time: rclpy's own ``/clock`` subscription moved into the polled group, so
        the loop takes the newest ``/clock`` once per turn (as the fixed-base node)."""
        if not self._sim_time:
            return None
        for s in self.subscriptions:
            if isinstance(getattr(s.callback, '__self__', None), TimeSource):
                s.callback_group = self.polled
                self.polled.add_entity(s)
                return s
        return None

    def now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _on_message(self, handler: Callable[[Any, int], bool], msg: Any) -> None:
        """Idle: a message woke the executor; it and everything waiting go in."""
        now = self.now_ns()
        handler(msg, now)
        for h, m in drain(self._inputs, POLL_MAX):
            h(m, now)

    def poll(self) -> int:
        """The newest ``/clock``, then the waiting sensor messages (round-robin, the clock
        read again every :data:`POLL_BATCH`); the number taken."""
        taken = 0
        clock_sub = self.clock_sub
        while True:
            if clock_sub is not None:
                tick = newest(clock_sub)
                if tick is not None:
                    clock_sub.callback(tick)
            now = self.now_ns()
            batch = 0
            for handler, msg in drain(self._inputs, POLL_BATCH):
                batch += 1
                handler(msg, now)
            taken += batch
            if batch < POLL_BATCH or taken >= POLL_MAX:
                return taken

    # ------------------------------------------------------------------ ticks
    def tick(self) -> bool:
        """One tick and its messages; True when an estimate was published."""
        c0 = time.thread_time_ns()
        est = self.driver.advance(self.now_ns())
        if est is None:
            return False
        t_ns = self.driver.last_t_ns
        m = self.msgs
        if self.pub_odom.get_subscription_count() or self.pub_tf is not None:
            m.fill_odometry(t_ns, est)
            if self.pub_odom.get_subscription_count():
                self.pub_odom.publish(m.odom)
            if self.pub_tf is not None and self.pub_tf.get_subscription_count():
                self.pub_tf.publish(m.tf)
        if self.pub_joints.get_subscription_count():
            m.fill_joints(t_ns, est)
            self.pub_joints.publish(m.joints)
        for k, (pc, pf) in enumerate(zip(self.pub_contact, self.pub_force)):
            wc, wf = pc.get_subscription_count(), pf.get_subscription_count()
            if wc or wf:
                m.fill_foot(t_ns, est, k)
                if wc:
                    pc.publish(m.contact[m.feet[k]])
                if wf:
                    pf.publish(m.force[m.feet[k]])
        self.published += 1
        cpu = time.thread_time_ns() - c0
        self._cpu_ns.append(cpu)
        self._cpu_total_ns += cpu
        self._latency_ms.append((self.now_ns() - t_ns) / 1e6)
        return True

    def _on_reset(self, request: Any, response: Any) -> Any:
        """``~/reset`` (std_srvs/Trigger): forget the state; the next readings start again
        (``requests.reset``, ``resets.manual``)."""
        self.requests['reset'] += 1
        self.driver.reset('manual', 'reset service')
        response.success = True
        response.message = 'floating-base estimator reset: the next readings start it again'
        return response

    # ------------------------------------------------------------------ diagnostics
    def _on_diag(self) -> None:
        if not self.context.ok():
            return
        now = self.now_ns()
        level, text, values = self.driver.diagnostics(now)
        wall = time.monotonic()
        span = max(wall - self._period_start, 1e-9)
        values['ticks.published'] = self.published
        values['ticks.rate_hz'] = f'{(self.published - self._published_at_diag) / span:.1f}'
        cpu, lat = np.array(self._cpu_ns) / 1e6, np.array(self._latency_ms)
        values['ticks.cpu_ms_mean'] = f'{cpu.mean():.3f}' if cpu.size else '-'
        values['ticks.cpu_ms_mean_all'] = (f'{self._cpu_total_ns / self.published / 1e6:.3f}'
                                           if self.published else '-')
        values['latency.ms_p50'] = f'{np.median(lat):.2f}' if lat.size else '-'
        values['latency.ms_p99'] = f'{np.percentile(lat, 99):.2f}' if lat.size else '-'
        values['tf.published'] = self.pub_tf is not None
        for k, n in self.loop.items():
            values[f'loop.{k}'] = n
        values['requests.reset'] = self.requests['reset']
        values['gc.collections'], gc_ms = self.gc_pauses.take()
        values['gc.ms_max'] = f'{gc_ms:.2f}'
        self._cpu_ns.clear()
        self._latency_ms.clear()
        self._published_at_diag = self.published
        self._period_start = wall
        self.pub_diag.publish(cv.diagnostics_msg(
            cv.rclpy_kit(), max(now, 0), f'{self.get_name()}: floating-base estimator',
            self.robot_name, level, text, values))

    def close(self) -> None:
        """Stop the timers (called by run_node before destroy_node)."""
        try:
            self.diag_timer.cancel()
        except Exception:  # noqa: BLE001 - already destroyed by the shutdown
            pass


def _foot_input(handler: Callable[[str, Any, int], bool], foot: str, msg: Any, now_ns: int
                ) -> bool:
    """``handler(foot, msg, now_ns)`` with the poll's argument order (message, clock)."""
    return handler(foot, msg, now_ns)


def run_floating_loop(node: FloatingEstimatorNode, executor: rclpy.executors.Executor
                      ) -> None:
    """The tick loop (module docstring) until ROS shuts down or ``node.stop_requested``.

    Idle (no joint_states or IMU within ``sensor_timeout`` and nothing taken): the executor
    waits on everything, sensors included, and the first message wakes the loop.
    """
    period = 1.0 / node.frequency
    group = node.polled
    clock = time.perf_counter
    next_wake = next_spin = clock()
    stop, ok = node.stop_requested, node.context.ok
    driver = node.driver
    group.polling = True
    counts = node.loop
    retry = period / RETRY_DIVISOR
    while ok() and not stop.is_set():
        taken = node.poll()
        counts['turns'] += 1
        horizon = driver.last_tick_ns
        published = node.tick()
        waiting = not published and driver.last_tick_ns == horizon   # no new data
        if waiting:
            counts['no_new_data'] += 1
        if not taken and driver.idle(node.now_ns()):
            group.polling = False
            try:
                executor.spin_once(timeout_sec=IDLE_WAIT_S)
            except OSError:       # a signal interrupted the wait
                pass
            group.polling = True
            next_wake = next_spin = clock()
            continue
        now = clock()
        if waiting:                           # the data is late: look again soon
            next_wake = min(next_wake + period, now + retry)
        else:
            next_wake += period
        if next_wake <= now - period:         # a period behind: no burst of catch-up turns
            next_wake = now + period
            counts['behind'] += 1
        # less than a period late: the next turn at once (the slot is kept, not dropped)
        if now >= next_spin:
            next_spin = now + SPIN_EVERY_S
            try:
                executor.spin_once(timeout_sec=0.0)
            except OSError:
                pass
            now = clock()
        if next_wake > now:
            time.sleep(next_wake - now)


def _spin(node: FloatingEstimatorNode) -> None:
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)
    stop_on_signals(node)
    gc.callbacks.append(node.gc_pauses)
    try:
        run_floating_loop(node, executor)
    finally:
        gc.callbacks.remove(node.gc_pauses)
        executor.shutdown()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``floating_estimator_node --ros-args -p urdf:=... -p overlay:=...``."""
    return run_node(NODE_NAME, FloatingEstimatorNode, _spin, args, floating_params(), SUMMARY)


if __name__ == '__main__':
    sys.exit(main())
