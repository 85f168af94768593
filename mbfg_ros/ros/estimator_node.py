"""ROS 2 estimator node: encoders + IMUs in, estimated state and torque commands out.

A thin wrapper (robot_localization's pattern) around
:class:`~mbfg_ros.ros.driver.EstimatorDriver`: callbacks hand the message to
the driver's one input path and return; a timer at ``frequency`` on the node
clock (``use_sim_time`` respected) runs the due tick and publishes it;
``/diagnostics`` comes at ``diagnostics_period`` (1 Hz) on the steady clock,
aggregated as ``diagnostic_updater`` does. Topics (defaults; all remappable):

==========================  ====================================  ==========================
``joint_states``            sensor_msgs/JointState (in)           encoders, rates, efforts
``imu/<name>`` (YAML topic) sensor_msgs/Imu (in)                   gyro, accelerometer, yaw
``~/reference``             trajectory_msgs/JointTrajectory (in)  desired actuated motion
``~/joint_states``          sensor_msgs/JointState (out)          YAML joints, effort = τ̂
``~/state``                 sensor_msgs/JointState (out)          q, q̇ by coordinate name
``~/state_stddev``          sensor_msgs/JointState (out)          standard deviations
``~/torque_commands``       std_msgs/Float64MultiArray (out)      command_joints order
``/diagnostics``            diagnostic_msgs/DiagnosticArray       status and counters, 1 Hz
``~/set_state``             sensor_msgs/JointState (in)           re-initialise at a pose
``~/reset``                 std_srvs/Trigger (service)            forget the state
``~/markers``               visualization_msgs/MarkerArray (out)  the estimate, 30 Hz
``~/external_torques``      sensor_msgs/JointState (out)          effort = τ_ext (efforts in)
``~/external_torques_sigma`` sensor_msgs/JointState (out)         effort = σ of τ_ext
``~/contact``               std_msgs/Bool (out)                   |τ_ext| > k σ, sustained
``~/external_wrench``       geometry_msgs/WrenchStamped (out)     at external_wrench_link
==========================  ====================================  ==========================

The external-torque topics (docs/external-torques.md) are published on the ticks where
every actuated joint's effort is measured.

Load: the ticks may use ``max_tick_load`` of a core (wall time); a slower
tick (a busy computer) defers the next one, and the driver merges the missed
grid ticks into one longer step, so readings are never dropped for being
slow (``ticks.merged``, ``ticks.overruns``, ``ticks.rate_hz``). With
``predict_between_ticks`` a CPU governor (:mod:`.governor`: the node process's whole CPU
against ``max_tick_load``) gives each grid tick its turn: a smoother tick (at least every
``predict_max_spacing`` grid periods), else a predicted estimate
(:meth:`EstimatorDriver.predict_newest`, ``ticks.predicted``), else none
(``ticks.thinned``). With no input
the tick timer stops (idle costs nothing) and the first reading restarts it.
How it runs (parameter ``executor``, :func:`run_loop`): by default (``auto`` = ``loop``)
the main thread runs the tick loop itself. Once per tick period (wall clock) it takes the
newest ``/clock`` (under ``use_sim_time``) and every message waiting on the sensor topics
(``take_message``, no callback and no wait set per message; their serialised bytes, read
by :mod:`.cdr`), runs the due tick and publishes it (bytes patched in place,
:class:`~.conversions.SerialisedEstimateMessages`); rclpy's ``SingleThreadedExecutor``
serves everything else (services, parameters, references, ``~/set_state``, diagnostics,
markers), one callback per turn every :data:`SPIN_EVERY_S` (rclpy's QoS event handlers in
one turn every :data:`EVENTS_EVERY_S`). The sensor subscriptions and rclpy's own
``/clock`` subscription sit in a :class:`PolledGroup`, a callback group the executor
leaves out of its wait set while the loop ticks; with no input (idle) the loop blocks in
the executor with them back in, and the first reading wakes it. ``single`` and ``events``
are the callback design (a callback per message, a tick timer) under the
``SingleThreadedExecutor`` or rclpy's ``EventsExecutor`` (Kilted, recent Jazzy; not
Humble).

Run: ``ros2 run mbfg_ros estimator_node --ros-args -p mechanism:=fourbar.yaml``
or ``python -m mbfg_ros.ros.estimator_node --ros-args ...``. A bad parameter or
mechanism prints one error line and exits with status 2.
"""
from __future__ import annotations

import functools
import gc
import sys
import threading
import time
from collections import deque
from typing import Any

import numpy as np
import rclpy
import rclpy.executors
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.time_source import TimeSource
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message

from ..loader import load_mechanism, mechanism_warning
from . import cdr
from . import conversions as cv
from .driver import EstimatorDriver, TickOutput
from .governor import PREDICT, SMOOTH, THIN, TickGovernor
from .markers import ESTIMATE_STYLE, MarkerPublisher
from .params import ESTIMATOR_PARAMS, ParameterError, check_live, declare, parse_estimator, read
from .polling import OUTPUT_QOS, SENSOR_QOS, SPIN_EVERY_S, GcPauses, PolledGroup, drain, \
    event_handler_types, events_executor_class, make_executor, newest_raw, take_raw
from .runner import run_node, stop_on_signals

__all__ = ['EstimatorNode', 'main', 'REFERENCE_QOS', 'REFERENCE_LIVE_QOS', 'LOG_EVERY',
           'REQUEST_KEYS', 'run_loop', 'EVENTS_EVERY_S', 'LOOP_KINDS']

REFERENCE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                           reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)
"""The latched reference subscription (issue 25): reliable, transient local, the newest
one kept, so a reference published transient local before the node's subscription matched
is delivered on matching instead of lost. DDS does not match it with a volatile publisher,
so a second, volatile subscription (:data:`REFERENCE_LIVE_QOS`) on the same topic takes
those; a message both deliver is used once (:meth:`EstimatorNode._on_reference`)."""

REFERENCE_LIVE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                                reliability=ReliabilityPolicy.RELIABLE,
                                durability=DurabilityPolicy.VOLATILE)

DUPLICATE_CHECK_S = 2.0
"""Seconds after start-up when the node looks for another node of its fully qualified
name (discovery needs a moment), issue 25."""

LOG_EVERY = 10.0
"""Seconds between two log lines of one category (resets, dropped input...)."""


SUMMARY = ('Estimates q, q-dot, q-ddot and the joint torques of a planar mechanism (YAML) or a '
           'URDF robot from joint_states and imu/<name>, publishes them on ~/joint_states, '
           '~/state, ~/state_stddev and computed-torque commands on ~/torque_commands.')
"""What ``estimator_node --help`` says the node does."""

REQUEST_KEYS = ('reset', 'set_state', 'set_state_refused', 'params_set', 'params_refused')
"""Service and request counters (``requests.<key>`` in /diagnostics), a fixed set."""


EVENTS_EVERY_S = 1.0
"""Loop mode: seconds between two executor turns that include the QoS event handlers
(rclpy's incompatible-QoS and -type warnings, two per publisher and subscription: 32 of
the wait set's entities, ~60 % of a turn's cost); the other turns leave them out."""

PARK_AFTER_S = 0.1
"""Loop mode: a clock that has not moved for this long (a simulated clock that stopped:
bag or simulator paused or ended), with no message and no tick run, parks the loop in the
executor's wait (sensors and ``/clock`` included) until a message comes; it looks again
every 0.1 s (readings queued ahead of the clock may become due when a silent stream stops
holding the ticks, ``sensor_timeout`` of wall time later)."""

LOOP_KINDS = ('auto', 'loop')
"""Values of the parameter ``executor`` that run the tick loop (:func:`run_loop`)."""

LOOP_DRAIN_MAX = 1024
"""Loop mode: most sensor messages taken before one tick (a backlog is worked off over
several ticks)."""

POLL_BATCH = 64
"""Loop mode: sensor messages taken per reading of the clock (the callback design's
``_drain_max``): under sim time the clock stays fresh while a backlog is taken."""


def _trigger_type() -> Any:
    from std_srvs.srv import Trigger
    return Trigger


def v_overlay(settings: Any) -> str:
    """The overlay path of a URDF robot ('' for none)."""
    return str(settings.values.get('overlay', '') or '')


class EstimatorNode(Node):
    """The estimator node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('estimator_node', **kwargs)
        self.stop_requested = threading.Event()     # set by run_node on SIGINT/SIGTERM
        declare(self, ESTIMATOR_PARAMS)
        settings = parse_estimator(read(self, ESTIMATOR_PARAMS), where=self.get_name())
        system = load_mechanism(settings.mechanism, v_overlay(settings))
        if mechanism_warning(system):
            self.get_logger().warning(mechanism_warning(system))
        v = settings.values
        self.driver = EstimatorDriver(system, settings, live=True)
        self._clock_handle = self.get_clock().handle       # read by _now_ns
        self.executor_kind = v['executor']
        if self.executor_kind == 'events':
            events_executor_class()      # at start-up: one error line, exit 2, not a traceback
        self.looping = self.executor_kind in LOOP_KINDS
        # loop mode: sensors and /clock polled by the loop, the tick timers never run by the
        # executor (the loop ticks); callback mode: rclpy's default group for all
        self.polled = PolledGroup() if self.looping else None
        self._loop_only = PolledGroup(polling=True) if self.looping else None
        self.mech_name = system.description.name
        self._load = float(v['max_tick_load'])
        self._predict = bool(v['predict_between_ticks'])
        # predict_between_ticks: the CPU governor spends the budget (issue 24)
        self._governor = TickGovernor(self._load, 1.0 / self.driver.frequency,
                                      int(v['predict_max_spacing'])) if self._predict else None
        self._idle_ns = int(1e9 * settings.config.max_tick_gap)
        self._msgs = cv.EstimateMessages(cv.rclpy_kit(), self.driver.joint_names,
                                         self.driver.coordinate_names)
        try:      # the same messages as their serialised bytes, patched per tick
            self._raw_msgs: cv.SerialisedEstimateMessages | None = \
                cv.SerialisedEstimateMessages(self.driver.joint_names,
                                              self.driver.coordinate_names,
                                              len(self.driver.law.names))
        except ValueError:
            self._raw_msgs = None
        ext = self.driver.external
        self._ext_msgs = cv.ExternalMessages(cv.rclpy_kit(), ext.names, ext.config.wrench_link)
        self._logged: dict[str, list] = {}            # category -> [last wall time, suppressed]
        self._next_tick_wall = 0.0
        self._deferred = 0
        self._tick_ms: deque[float] = deque(maxlen=4096)
        self._latency_ms: deque[float] = deque(maxlen=4096)
        self._ticks_in_period = 0
        self._period_start = time.monotonic()
        self.gc_pauses = GcPauses()
        self.sub_joints = self.create_subscription(
            cv.message_class('JointState'), v['joint_states_topic'], self._on_joints,
            SENSOR_QOS, callback_group=self.polled)
        self.sub_imus = [
            self.create_subscription(cv.message_class('Imu'), s.topic,
                                     functools.partial(self._on_imu, s.name), SENSOR_QOS,
                                     callback_group=self.polled)
            for s in system.description.sensors]
        self._imu_subs = dict(zip((s.name for s in system.description.sensors), self.sub_imus))
        self._imu_handlers = {s.name: functools.partial(self._imu_in, s.name)
                              for s in system.description.sensors}
        self._sensor_inputs = [(self.sub_joints, self._joints_in)] + [
            (self._imu_subs[n], h) for n, h in self._imu_handlers.items()]
        # the loop's input path: the same driver calls, the clock read once per batch
        self._polled_inputs = [(self.sub_joints, self.driver.joint_state)] + [
            (self._imu_subs[n], functools.partial(_imu_at, self.driver, n))
            for n in self._imu_handlers]
        self._sim_time = bool(self.get_parameter('use_sim_time').value)
        self._drain_max = 64          # messages per callback: the sim clock stays fresh
        self._last_reference: tuple | None = None
        self.sub_ref = self.create_subscription(cv.message_class('JointTrajectory'),
                                                v['reference_topic'], self._on_reference,
                                                REFERENCE_QOS)
        self.sub_ref_live = self.create_subscription(cv.message_class('JointTrajectory'),
                                                     v['reference_topic'], self._on_reference,
                                                     REFERENCE_LIVE_QOS)
        self.pub_joints = self.create_publisher(cv.message_class('JointState'),
                                                '~/joint_states', OUTPUT_QOS)
        self.pub_state = self.create_publisher(cv.message_class('JointState'), '~/state',
                                               OUTPUT_QOS)
        self.pub_stddev = self.create_publisher(cv.message_class('JointState'),
                                                '~/state_stddev', OUTPUT_QOS)
        self.pub_command = self.create_publisher(cv.message_class('Float64MultiArray'),
                                                 v['command_topic'], OUTPUT_QOS)
        self.pub_diag = self.create_publisher(cv.message_class('DiagnosticArray'),
                                              '/diagnostics', OUTPUT_QOS)
        self.pub_external = {k: self.create_publisher(cv.message_class(t), k, OUTPUT_QOS)
                             for k, t in cv.EXTERNAL_TOPICS.items()
                             if k != '~/external_wrench' or v['external_wrench_link']}
        # robot_localization's habits: a reset service, and set_pose as a topic
        self.requests = dict.fromkeys(REQUEST_KEYS, 0)
        self.srv_reset = self.create_service(_trigger_type(), '~/reset', self._on_reset)
        self.sub_set_state = self.create_subscription(
            cv.message_class('JointState'), '~/set_state', self._on_set_state, 10)
        self._started = False                 # use_sim_time may be set until the end of init
        self.add_on_set_parameters_callback(self._on_set_parameters)
        # loop mode: the timer only says ticking (running) or idle (cancelled); the loop ticks
        self.timer = self.create_timer(1.0 / self.driver.frequency, self._on_timer,
                                       callback_group=self._loop_only)
        self.timer.cancel()                           # idle until the first reading
        # a tick deferred by the budget runs on this steady-clock one-shot, so a clock that
        # only moves when told (sim time, lockstep) never leaves it waiting
        self.retry_timer = self.create_timer(1.0 / self.driver.frequency, self._on_retry,
                                             clock=Clock(clock_type=ClockType.STEADY_TIME),
                                             callback_group=self._loop_only)
        self.retry_timer.cancel()
        self.diag_timer = self.create_timer(float(v['diagnostics_period']), self._on_diag,
                                            clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._published_at_diag = 0           # ticks.published at the last diagnostics
        self._queued_at_diag = 0              # input.queued at the last diagnostics
        self.duplicates = 0                   # other nodes with this fully qualified name
        self.dup_timer = self.create_timer(DUPLICATE_CHECK_S, self._check_duplicate_name,
                                           clock=Clock(clock_type=ClockType.STEADY_TIME))
        # markers at their own (steady) rate, never per tick; prebuilt, refilled in place
        # a URDF robot is drawn by robot_state_publisher from ~/joint_states instead
        drawing = system.drawing()
        self.markers = MarkerPublisher(drawing, v['frame_id'],
                                       ESTIMATE_STYLE, v['marker_ellipses'],
                                       v['ellipse_scale']) if drawing is not None else None
        self.pub_markers = self.create_publisher(
            cv.message_class('MarkerArray'), '~/markers', OUTPUT_QOS)
        self._marker_t: int | None = None
        self.marker_timer = None
        if v['markers_rate'] > 0 and self.markers is not None:
            self.marker_timer = self.create_timer(
                1.0 / float(v['markers_rate']), self._on_markers,
                clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._started = True
        self.clock_sub = self._poll_clock_subscription() if self.looping else None
        self._clock_msg = cv.message_class('Clock')()     # the /clock read from its bytes
        self.rare_events = self._rare_event_group() if self.looping else None
        self.get_logger().info(
            f'{system.description.source}: {len(self.driver.joint_names)} joints, '
            f'{len(self.driver.imu_names)} IMUs, {system.n} coordinates, '
            f'{self.driver.frequency:g} Hz, commands for {list(self.driver.law.names)}')

    # ------------------------------------------------------------------ input
    def _rare_event_group(self) -> PolledGroup:
        """Loop mode: the QoS event handlers of every publisher and subscription (rclpy's
        waitables of this node) moved into one :class:`PolledGroup`, left out of the
        executor's turns but one every :data:`EVENTS_EVERY_S` and the idle wait."""
        group = PolledGroup(polling=True)
        kinds = event_handler_types()
        for waitable in self.waitables:
            if isinstance(waitable, kinds):
                waitable.callback_group = group
                group.add_entity(waitable)
        return group

    def _poll_clock_subscription(self) -> Any:
        """Loop mode under ``use_sim_time``: rclpy's own ``/clock`` subscription (its
        TimeSource's, found by its callback) moved into the polled group, so the loop takes
        the newest ``/clock`` once per tick instead of a callback per message; None without
        sim time."""
        if not self._sim_time:
            return None
        for sub in self.subscriptions:
            if isinstance(getattr(sub.callback, '__self__', None), TimeSource):
                sub.callback_group = self.polled
                self.polled.add_entity(sub)
                return sub
        return None

    def poll(self) -> int:
        """Loop mode: the newest ``/clock`` (sim time: handed to rclpy's TimeSource, which
        sets the node clock), then the messages waiting on the sensor topics, taken
        round-robin (:func:`drain`) as their serialised bytes (:func:`take_raw`: the
        driver reads them with :mod:`.cdr`, no Python message built) through the driver's
        input path with the clock read once per batch of :data:`POLL_BATCH`; a backlog is
        taken batch by batch with the clock polled again between them (a reading stamped
        after the clock read is not "future"), at most :data:`LOOP_DRAIN_MAX` in all. The
        number of messages taken."""
        taken = 0
        queued = False
        while True:
            self._take_clock()
            now = self._now_ns()
            batch = 0
            for handler, msg in drain(self._polled_inputs, POLL_BATCH, take_raw):
                batch += 1
                queued |= handler(msg, now) is not None
            taken += batch
            if batch < POLL_BATCH or taken >= LOOP_DRAIN_MAX:
                break
        if queued:
            self._wake()
        return taken

    def _take_clock(self) -> None:
        """Loop mode under ``use_sim_time``: the newest ``/clock`` waiting, if any, sets the
        node clock (:meth:`_set_clock`); nothing without sim time."""
        clock_sub = self.clock_sub
        if clock_sub is not None:
            buf = newest_raw(clock_sub)
            if buf is not None:
                self._set_clock(clock_sub, buf)

    def _set_clock(self, clock_sub: Any, buf: bytes) -> None:
        """The ``/clock`` message in ``buf`` (its bytes) to rclpy's TimeSource (the
        callback of ``clock_sub``): read by :func:`.cdr.read_clock` into one reused
        message, or deserialised by rclpy (another encapsulation); bytes neither reads
        are skipped (the next /clock sets the time)."""
        msg = self._clock_msg
        try:
            t = cdr.read_clock(buf)
            msg.clock.sec, msg.clock.nanosec = divmod(t, cv.NS)
        except (cdr.Unsupported, cdr.Malformed, ValueError, AssertionError):
            try:
                msg = deserialize_message(buf, clock_sub.msg_type)
            except Exception:  # noqa: BLE001 - rclpy's RMWError: not a Clock
                return
        clock_sub.callback(msg)

    def _now_ns(self) -> int:
        """The node clock in integer nanoseconds (``use_sim_time``: the ``/clock`` time):
        what ``get_clock().now().nanoseconds`` gives, read from the clock's handle as
        ``Clock.now`` does but without building a ``Time`` (issue 24: ~1.5 µs of the ~2.3
        per read, and the loop reads it several times per estimate)."""
        handle = self._clock_handle
        with handle:
            return handle.get_now().nanoseconds

    def _wake(self) -> None:
        if self.timer.is_canceled():
            self.timer.reset()
            if self.marker_timer is not None and self.marker_timer.is_canceled():
                self.marker_timer.reset()

    def _joints_in(self, msg: Any) -> bool:
        return self.driver.joint_state(msg, self._now_ns()) is not None

    def _imu_in(self, sensor: str, msg: Any) -> bool:
        return self.driver.imu(msg, sensor, self._now_ns()) is not None

    def _on_joints(self, msg: Any) -> None:
        self._on_sensor(self._joints_in, msg)

    def _on_imu(self, sensor: str, msg: Any) -> None:
        self._on_sensor(self._imu_handlers[sensor], msg)

    def _on_sensor(self, handler: Any, msg: Any) -> None:
        """One sensor message, then everything waiting on all sensor topics."""
        queued = handler(msg)
        for h, m in drain(self._sensor_inputs, self._drain_max):
            queued |= h(m)
        if queued:
            self._wake()
            if self._sim_time and self.retry_timer.is_canceled():
                # a simulated clock may have stopped (a bag or simulator ended or paused)
                # after its last tick: the steady one-shot runs the readings just queued
                self.retry_timer.reset()

    def _on_reference(self, msg: Any) -> None:
        """A reference from either subscription; the copy the other one delivers of the
        same message (same stamp, names and point times) is skipped."""
        try:
            key = (cv.stamp_ns(msg.header.stamp), tuple(msg.joint_names),
                   tuple(cv.stamp_ns(p.time_from_start) for p in msg.points),
                   tuple(tuple(p.positions) for p in msg.points))
        except Exception:  # noqa: BLE001 - the driver counts and reports a bad message
            key = None
        if key is not None and key == self._last_reference and key[0] != 0:
            return
        self._last_reference = key
        self.driver.reference_message(msg, self._now_ns())

    # ------------------------------------------------------------------ requests
    def _on_reset(self, request: Any, response: Any) -> Any:
        """``~/reset`` (std_srvs/Trigger): forget the state; the next readings
        re-initialise it (counted as ``requests.reset`` and ``estimator.reset:manual``)."""
        self.requests['reset'] += 1
        self.driver.reset('manual', 'reset service')
        self._log_events()
        response.success = True
        response.message = 'estimator reset: the next readings re-initialise it'
        return response

    def _on_set_state(self, msg: Any) -> None:
        """``~/set_state`` (sensor_msgs/JointState): re-initialise at the given joint
        positions (velocities too if given); bad input is refused, counted and logged."""
        why = self.driver.set_state(msg, self._now_ns())
        if why:
            self.requests['set_state_refused'] += 1
            self.driver.note('set_state', f'set_state refused: {why}')
        else:
            self.requests['set_state'] += 1
            self._wake()
        self._log_events()

    def _on_set_parameters(self, params: list) -> Any:
        """``ros2 param set``: the σ's and ``kp``/``kd`` change while running (validated;
        anything else, or a bad value, is refused with the reason and counted)."""
        from rcl_interfaces.msg import SetParametersResult

        if any(p.name == 'use_sim_time' for p in params) and self._started:
            # issue 25: switching the clock under running ticks froze the estimate while
            # /diagnostics said ok; the clock is chosen at start-up only
            why = (f"{self.get_name()}: parameter 'use_sim_time' is fixed at start-up "
                   '(--ros-args -p use_sim_time:=true)')
            self.requests['params_refused'] += 1
            self.driver.note('parameters', f'parameter change refused: {why}')
            self._log_events()
            return SetParametersResult(successful=False, reason=why)
        try:
            values = check_live(ESTIMATOR_PARAMS, {p.name: p.value for p in params},
                                self.get_name())
            self.driver.reconfigure(values)
        except (ParameterError, ValueError) as exc:
            self.requests['params_refused'] += 1
            self.driver.note('parameters', f'parameter change refused: {exc}')
            self._log_events()
            return SetParametersResult(successful=False, reason=str(exc))
        if values:
            self.requests['params_set'] += len(values)
            self.get_logger().info('parameters changed: ' + ', '.join(
                f'{k}={x:g}' for k, x in values.items()))
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ ticks
    def _on_timer(self) -> None:
        now = self._now_ns()
        if now <= 0 or not self.context.ok():     # no /clock yet (use_sim_time) / shutting down
            return
        d = self.driver
        if d.idle(now, self._idle_ns):
            self.timer.cancel()                   # no input: idle until the next reading
            return
        if self._governor is not None:
            self._governed(now)
        elif not self._budgeted(now):
            return
        if (d.behind or (d.pending and self._sim_time)) and self.retry_timer.is_canceled():
            self.retry_timer.reset()      # catch up, or tick readings queued ahead, on the
            #                               steady clock: a sim clock may have stopped (on
            #                               the wall clock the tick timer runs on; readings
            #                               beyond the data horizon wait there)
        self._log_events()

    def _budgeted(self, now: int) -> bool:
        """The default mode: the due tick (merged if several are due) and its estimate, unless
        the ``max_tick_load`` pause after the last one still runs (False: deferred, retried
        on the retry timer)."""
        wall = time.perf_counter()
        if wall < self._next_tick_wall:           # over the tick budget: merge into a later one
            self._deferred += 1
            if self.retry_timer.is_canceled():
                self.retry_timer.reset()
            return False
        outs = self.driver.advance(now)
        if outs:
            self._publish(outs[-1], now)
            took = time.perf_counter() - wall
            self._tick_ms.append(1e3 * took)
            self._ticks_in_period += 1
            # idle for took·(1/load − 1) after a tick, at most 4 periods (no cascade of ever
            # longer merged ticks after one slow tick)
            self._next_tick_wall = wall + took + min(took * (1.0 / self._load - 1.0),
                                                     4.0 / self.driver.frequency)
        return True

    def _governed(self, now: int) -> None:
        """``predict_between_ticks`` (issue 24): each grid tick due gets its turn from the
        CPU governor (:class:`~.governor.TickGovernor`, the node process's CPU against
        ``max_tick_load``): a smoother tick (at least every ``predict_max_spacing`` grid
        periods, its estimate published at once), else a predicted estimate, else none
        (``ticks.thinned``); a grid tick the loop came too late for is thinned, never
        published late."""
        d, gov = self.driver, self._governor
        clock = time.thread_time                  # the costs of its own turns
        gov.charge(time.perf_counter(), time.process_time())    # the budget: the whole node
        if d.last_tick is None:                   # the first tick: no spacing yet
            spacing, fresh, kind = 1, 1, SMOOTH
        else:
            spacing, fresh = d.due_grid(now)
            kind = gov.decide(spacing) if fresh > 0 else THIN
        if fresh > 0:
            c0 = clock()
            n = 0
            if kind == SMOOTH:
                # the loop came late (a smoother tick spans about a period): the grid ticks
                # before the one the smoother takes predicted first, if affordable
                k = gov.affordable(spacing, fresh - 1, True) if fresh > 1 else 0
                if k:
                    for pred in d.predict_newest(now, k, before_tick=True):
                        self._publish(pred, now)
                        n += 1
                    gov.spent(PREDICT, clock() - c0, n)
                    c0, n = clock(), 0
                outs = d.smooth(now)
                if outs:
                    if outs[-1].t_ns <= d.predicted_ns:
                        d.ticks['unpublished'] += 1   # its stamp went out predicted
                    else:
                        self._publish(outs[-1], now)
                    self._ticks_in_period += 1
                    self._tick_ms.append(1e3 * (clock() - c0))
            if kind == PREDICT:
                for pred in d.predict_newest(now, gov.affordable(spacing, fresh)):
                    self._publish(pred, now)
                    n += 1
            elif kind == THIN:
                d.thin(now)
            gov.spent(kind, clock() - c0, n)

    def grid_wait(self) -> float | None:
        """``predict_between_ticks``: wall seconds until the loop should look again for the
        next grid tick to give its turn (:meth:`_governed`): 0 when one is due, else the
        time to its stamp on the node clock (at least an eighth, at most half a period: the
        clock read may be a while old, and the readings may come a little late); None before
        the first tick."""
        d = self.driver
        if d.last_tick is None:
            return None
        # sim time: the node clock is the /clock the pass began with, a smoother pass
        # (~0.5 ms) ago; aimed from it, the wait overshoots the next grid tick by that
        # much, every pass after the smoother's, until the loop is a period late
        self._take_clock()
        now = self._now_ns()
        if d.due_grid(now)[1]:
            return 0.0
        period = 1.0 / d.frequency
        ahead = (d.handled_ns + d.period - (now - d.delay_ns)) / 1e9
        return min(max(ahead, period / 8), period / 2)

    def _on_retry(self) -> None:
        self.retry_timer.cancel()
        self._on_timer()

    def _publish(self, out: TickOutput, now: int) -> None:
        if out.estimate is None:
            return
        # a topic nobody subscribes to is not published: ~20 µs of rmw per message saved
        # (get_subscription_count is ~1 µs, asked every tick: a new subscriber gets the next)
        # a predicted estimate carries the smoothed key's σ's: ~/state_stddev comes with the
        # smoother's ticks only (issue 24: one rmw publish less per prediction)
        sigma = not out.estimate.predicted
        raw = self._raw_msgs
        if raw is not None and raw.fill(out.t_ns, out.estimate, out.joint_effort, out.command,
                                        sigma):
            # the serialised bytes, patched in place: no message converted or serialised
            joints, state, stddev, command = (raw.joints.buf, raw.state.buf, raw.stddev.buf,
                                              raw.command.buf)
        else:
            m = self._msgs
            m.fill(out.t_ns, out.estimate, out.joint_effort, out.command, sigma)
            joints, state, stddev, command = m.joints, m.state, m.stddev, m.command
        _publish_wanted(self.pub_joints, joints)
        _publish_wanted(self.pub_state, state)
        if sigma:
            _publish_wanted(self.pub_stddev, stddev)
        if out.command is not None:
            _publish_wanted(self.pub_command, command)
        if out.external is not None and out.external.valid:
            wanted = [(self.pub_external[key], msg)
                      for key, msg in self._ext_msgs.by_topic.items()
                      if self.pub_external[key].get_subscription_count()]
            if wanted:                    # filled only when someone listens
                self._ext_msgs.fill(out.t_ns, out.external)
                for pub, msg in wanted:
                    pub.publish(msg)
        self.driver.ticks['published'] += 1
        self._latency_ms.append((self._now_ns() - out.t_ns) / 1e6)

    def _on_markers(self) -> None:
        """``~/markers``: the newest estimate, once, if anyone subscribes; the timer stops
        with the ticks (idle costs nothing) and the first reading restarts it."""
        out = self.driver.last_output
        if (out is not None and out.estimate is not None and out.t_ns != self._marker_t
                and self.context.ok() and self.pub_markers.get_subscription_count() > 0):
            self._marker_t = out.t_ns
            est = out.estimate
            self.pub_markers.publish(self.markers.fill(out.t_ns, est.q, est.q_std))
        if self.timer.is_canceled():
            self.marker_timer.cancel()

    # ------------------------------------------------------------------ diagnostics
    def _on_diag(self) -> None:
        if not self.context.ok():
            return
        self._log_events()
        level, message, values = self.driver.diagnostics()
        wall = time.monotonic()
        span = max(wall - self._period_start, 1e-9)
        values['ticks.rate_hz'] = f'{self._ticks_in_period / span:.1f}'
        values['ticks.deferred'] = self._deferred
        if self._governor is not None:            # predict_between_ticks (issue 24)
            gov = self._governor
            values['governor.forced'] = gov.counts['forced']
            values['governor.thin'] = gov.counts[THIN]      # turns thinned for the budget
            values['governor.credit_ms'] = f'{1e3 * gov.credit:.3f}'
            values['governor.smoother_us'] = f'{1e6 * gov.smoother_cost:.0f}'
            values['governor.prediction_us'] = f'{1e6 * gov.prediction_cost:.0f}'
            values['governor.other_load'] = f'{gov.other_rate:.3f}'
            values['governor.load'] = f'{gov.share():.3f}'
        tick_ms, lat = np.array(self._tick_ms), np.array(self._latency_ms)
        values['ticks.ms_p50'] = f'{np.median(tick_ms):.3f}' if tick_ms.size else '-'
        values['ticks.ms_max'] = f'{tick_ms.max():.3f}' if tick_ms.size else '-'
        values['latency.ms_p50'] = f'{np.median(lat):.2f}' if lat.size else '-'
        values['latency.ms_p99'] = f'{np.percentile(lat, 99):.2f}' if lat.size else '-'
        values['executor'] = self.executor_kind
        values['gc.collections'], gc_ms = self.gc_pauses.take()
        values['gc.ms_max'] = f'{gc_ms:.2f}'
        values.update({f'requests.{k}': n for k, n in self.requests.items()})
        values['node.duplicate_names'] = self.duplicates
        published, queued = self.driver.ticks['published'], self.driver.counters['queued']
        silent = published == self._published_at_diag
        if self.timer.is_canceled():
            message = 'idle: no input' if self.driver.last_output is None else \
                f'idle: no input for more than {self._idle_ns / 1e9:g} s; no torque command'
            level = 1 if self.driver.last_output is None else 2
        elif silent and queued != self._queued_at_diag:
            # readings arrive but no estimate went out since the last report (issue 25: a
            # clock that stopped, ticks that fail): never "ok" then
            level = 2
            message = (f'no estimate published in the last {span:.2f} s although readings '
                       f'arrive ({message})')
        self._published_at_diag, self._queued_at_diag = published, queued
        self._tick_ms.clear()
        self._latency_ms.clear()
        self._ticks_in_period = 0
        self._period_start = wall
        stamp = self._now_ns()
        self.pub_diag.publish(cv.diagnostics_msg(
            cv.rclpy_kit(), max(stamp, 0), f'{self.get_name()}: estimator', self.mech_name,
            level, message, values))

    def _check_duplicate_name(self) -> None:
        """Once, :data:`DUPLICATE_CHECK_S` after start-up: warn when another node has this
        node's fully qualified name (its topics, services and parameters would be shared
        ambiguously: a second launch, a stale process), issue 25."""
        self.dup_timer.cancel()
        if not self.context.ok():
            return
        me = (self.get_name(), self.get_namespace())
        try:
            found = sum(1 for nm, ns in self.get_node_names_and_namespaces()
                        if (nm, ns) == me)
        except Exception:  # noqa: BLE001 - graph query failed: nothing to report
            return
        self.duplicates = max(0, found - 1)
        if self.duplicates:
            fqn = self.get_fully_qualified_name()
            self.get_logger().warning(
                f'{self.duplicates} other node(s) named {fqn} are running: topics, services '
                'and parameters of that name now reach both; give each a unique name or '
                'namespace (--ros-args -r __node:=... or -r __ns:=...)')

    def _log_events(self) -> None:
        """Log the driver's notes, at most one line per category every LOG_EVERY s."""
        events = self.driver.events
        if not events:
            return
        wall = time.monotonic()
        for category, text in events:
            entry = self._logged.get(category)
            if entry is not None and wall - entry[0] < LOG_EVERY:
                entry[1] += 1
                continue
            more = f' (+{entry[1]} more like it in the last {LOG_EVERY:g} s)' \
                if entry is not None and entry[1] else ''
            if len(self._logged) < 256 or entry is not None:
                self._logged[category] = [wall, 0]
            self.get_logger().warning(text + more)
        events.clear()

    def close(self) -> None:
        """Stop the timers (called by run_node before destroy_node)."""
        for timer in (self.timer, self.diag_timer, self.retry_timer, self.marker_timer,
                      self.dup_timer):
            if timer is None:
                continue
            try:
                timer.cancel()
            except Exception:  # noqa: BLE001 - already destroyed by the shutdown
                pass


def _publish_wanted(pub: Any, msg: Any) -> None:
    """``pub.publish(msg)`` if anyone subscribes to ``pub``'s topic (a ``bytearray``: its
    serialised bytes, copied)."""
    if pub.get_subscription_count():
        pub.publish(bytes(msg) if isinstance(msg, bytearray) else msg)


def _imu_at(driver: EstimatorDriver, sensor: str, msg: Any, now_ns: int) -> Any:
    """``driver.imu`` with the loop's argument order (message, clock)."""
    return driver.imu(msg, sensor, now_ns)


def run_loop(node: EstimatorNode, executor: rclpy.executors.Executor) -> None:
    """The tick loop (``executor`` auto/loop, module docstring) until ROS shuts down or
    ``node.stop_requested`` is set (SIGINT/SIGTERM: within one tick period, or 0.1 s idle).

    Per tick period of the wall clock: :meth:`EstimatorNode.poll` (``/clock``, sensors),
    the due tick and its publishing (``EstimatorNode._on_timer``: idle detection,
    ``max_tick_load`` budget, merging and catch-up as in the callback design), then a
    sleep to the next period (none while the driver is ``behind``, a quarter period when
    no tick was due yet); while the ``max_tick_load`` budget holds the next tick back
    (``ticks.deferred``) the loop still polls every period and ticks when it ends. Every
    :data:`SPIN_EVERY_S` one turn of the executor (sensors and ``/clock`` left out of its
    wait set, and the QoS event handlers but every :data:`EVENTS_EVERY_S`) runs one ready
    callback. Idle (the tick timer cancelled: no input yet, or
    none for ``max_tick_gap``), or parked (a simulated clock that stood still for
    :data:`PARK_AFTER_S` with nothing taken or ticked): the executor waits on everything,
    sensors and ``/clock`` included, and a message wakes the loop.
    """
    period = 1.0 / node.driver.frequency
    park_after = max(1, int(PARK_AFTER_S / period))
    group, rare = node.polled, node.rare_events
    clock = time.perf_counter
    next_wake = next_spin = next_events = clock()
    stop = node.stop_requested
    ok = node.context.ok
    governed = node._governor is not None
    still, last_now, last_tick = 0, None, None
    while ok() and not stop.is_set():
        if node.timer.is_canceled() or still >= park_after:
            # idle, or parked (a sim clock that stopped with nothing queued): the executor
            # waits on everything, sensors and /clock included; a message wakes the loop
            group.polling = rare.polling = False
            try:
                executor.spin_once(timeout_sec=0.1)
            except OSError:      # a signal interrupted the wait: look at the context again
                pass
            group.polling = rare.polling = True
            next_wake = next_spin = clock()
            if still:
                still = park_after - 1          # look again once (the wait may have run
                #                                a /clock or sensor callback)
            continue
        taken = node.poll()
        node._on_timer()
        now_ns, tick = node._now_ns(), node.driver.handled_ns     # a grid tick had its turn
        ticked = tick != last_tick
        still = still + 1 if (not taken and now_ns == last_now and not ticked) else 0
        last_now, last_tick = now_ns, tick
        now = clock()
        if now >= next_wake:                    # the next period's wake-up
            next_wake += period
            if next_wake <= now:                # fell behind: no burst of catch-up turns
                next_wake = now + period
        # behind (more grid ticks due than one tick merges): the next one at once, as the
        # callback design's retry timer did; no tick due yet (its readings on their way):
        # look again within a quarter period, so a tick is not merged into the next one for
        # want of a poll
        wake = now if node.driver.behind else \
            next_wake if ticked else min(next_wake, now + period / 4)
        if governed:                            # predict_between_ticks: every grid tick
            #                                     has its turn as it falls due (issue 24)
            wait = node.grid_wait()
            if wait is not None:
                wake = now + wait
        if node._next_tick_wall > wake:         # over the tick budget: the next tick waits
            #                                     (a turn in the pause counts ticks.deferred),
            #                                     the intake not (a burst fills the queues);
            #                                     predicting, the governor decides per grid
            #                                     tick and this pause is not used (issue 24)
            wake = min(node._next_tick_wall, now + period)
        if now >= next_spin:
            # one turn, no waiting: rclpy's wait costs ~0.13 ms per call here (its wait set
            # rebuilt in Python, ~30 QoS event waitables), and a timeout may wait again
            next_spin = now + SPIN_EVERY_S
            if now >= next_events:              # the QoS event handlers too, once a second
                next_events = now + EVENTS_EVERY_S
                rare.polling = False
            try:
                executor.spin_once(timeout_sec=0.0)
            except OSError:
                pass
            rare.polling = True
            now = clock()
        if wake > now:
            time.sleep(wake - now)


def _spin(node: EstimatorNode) -> None:
    executor = make_executor(node.executor_kind)
    executor.add_node(node)
    stop_on_signals(node)
    gc.callbacks.append(node.gc_pauses)     # ~/diagnostics gc.*: pauses stay below 0.2 ms
    try:
        if node.looping:
            run_loop(node, executor)
            return
        # spin_once with a timeout, not spin(): rclpy 9's EventsExecutor.spin() does not
        # return when the context shuts down; run_node's signal handler sets stop_requested
        while node.context.ok() and not node.stop_requested.is_set():
            try:
                executor.spin_once(timeout_sec=0.1)   # a signal is handled within 0.1 s;
                #                                   shorter wakes an idle node 50x a second
            except OSError:     # a signal interrupted the wait: look at the context again
                continue
    finally:
        gc.callbacks.remove(node.gc_pauses)
        executor.shutdown()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``estimator_node --ros-args -p mechanism:=<yaml> ...``."""
    return run_node('estimator_node', EstimatorNode, _spin, args, ESTIMATOR_PARAMS, SUMMARY)


if __name__ == '__main__':
    sys.exit(main())
