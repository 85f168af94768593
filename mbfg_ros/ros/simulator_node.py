"""ROS 2 simulator node: factor-graph forward dynamics publishing what the sensors read.

Integrates the system :func:`~mbfg_ros.loader.load_mechanism` gives (a YAML mechanism, or
a URDF robot: ``mechanism`` a ``.urdf`` file, or ``robot_description``, plus ``overlay``)
with :func:`~mbfg_ros.simulation.forward.stepper` (the factor-graph forward dynamics of
seed 000 §5.1/5.2, or the formulation's own integrator: a URDF robot's joint-space
trapezoidal rule), under the actuator efforts last received on
``~/torque_commands`` (Float64MultiArray, actuator order; none: gravity and
springs only) and publishes at ``publish_rate``:

====================  ===========================  ==========================================
``joint_states``      sensor_msgs/JointState       YAML joints: encoder (quantised, noisy),
                                                   rate, effort = applied actuator torque
``imu/<name>``        sensor_msgs/Imu              one per YAML IMU (gyro, accelerometer)
``~/ground_truth``    sensor_msgs/JointState       true q, q̇ by coordinate name
``/clock``            rosgraph_msgs/Clock          only when ``realtime`` is false
``~/markers``         visualization_msgs/          the true mechanism (red, ``truth/...``
                      MarkerArray                  namespaces) at ``markers_rate``, 30 Hz
====================  ===========================  ==========================================

``joint_limits`` (default true, issue 30 item 3) makes the joints stop at their position
limits (``integrator(dt, limits=True)`` of a URDF robot, the stop forces of
``end_stop_model(dt)`` of a planar mechanism); what the stops did and any velocity-limit
excess are logged (once per joint as it happens, in full at the end) and counted in
``/diagnostics`` (``end_stop_impacts``, ``velocity_limit_exceeded_s``,
``peak_velocity_ratio``).

Sensor values come from the system's ``simulate_measurements``
(:class:`~mbfg_ros.core.interface.SimulatedSystem`) evaluated on each published sample.
``realtime`` true paces the simulation on the node clock (times ``rate_scale``); false
runs as fast as possible and publishes ``/clock`` (stamps start at 1 s). ``duration`` > 0
ends the node with exit status 0; ``record`` writes everything published to a rosbag2
(``output``, MCAP or sqlite3) through rosbags.
"""
from __future__ import annotations

import functools
import math
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
import rclpy.executors
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from ..core.interface import SimulatedSystem
from ..core.measurements import ImuMeasurement
from ..loader import load_mechanism, mechanism_warning
from . import conversions as cv
from .markers import TRUTH_STYLE, MarkerPublisher
from .params import SIMULATOR_PARAMS, declare, noise_note, parse_simulator, read
from .runner import run_node, stop_on_signals

__all__ = ['SimulatorNode', 'main', 'sensor_config', 'START_NS']

START_NS = 1_000_000_000
"""Stamp of simulation time 0 when running as fast as possible (a zero stamp means 'unset')."""

SUMMARY = ('Simulates a planar mechanism (YAML) or a URDF robot under the efforts received on '
           '~/torque_commands and publishes what its sensors read (joint_states, imu/<name>), '
           'the truth on ~/ground_truth and, when not realtime, /clock. Sensor noise is off by '
           'default: pass --params-file config/simulator_noise.yaml for realistic readings.')
"""What ``simulator_node --help`` says the node does."""

PUB_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)


def sensor_config(system: SimulatedSystem, values: dict) -> Any:
    """The system's sensor configuration for one sample per call from the simulator
    parameters (``SensorConfig`` of a planar mechanism, ``SpatialSensorConfig`` of a URDF
    robot: ``system.sensor_config``)."""
    res = float(values['encoder_resolution'])
    return system.sensor_config(
        encoder_rate=1.0, imu_rate=1.0,
        encoder_counts=int(round(2 * math.pi / res)) if res > 0 else 0,
        encoder_sigma=float(values['encoder_sigma']),
        encoder_velocity_sigma=float(values['encoder_rate_sigma']),
        gyro_sigma=float(values['gyro_sigma']), accel_sigma=float(values['accel_sigma']))


class SimulatorNode(Node):
    """The simulator node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('simulator_node', **kwargs)
        self.stop_requested = threading.Event()     # set by run_node on SIGINT/SIGTERM
        from ..simulation.forward import ForwardConfig, stepper

        declare(self, SIMULATOR_PARAMS)
        self.settings = s = parse_simulator(read(self, SIMULATOR_PARAMS), self.get_name())
        self.system = load_mechanism(s.mechanism or s.robot_description, s.overlay)
        if mechanism_warning(self.system):
            self.get_logger().warning(mechanism_warning(self.system))
        mech = self.system.description
        self.sim = stepper(self.system, ForwardConfig(dt=s.dt, window=s.window),
                           limits=s.joint_limits)
        self._stop_lines: set[str] = set()       # end-stop report lines already logged
        self.sensors = sensor_config(self.system, s.values)
        self.rng = np.random.default_rng(s.seed)
        self.kit = cv.rclpy_kit()
        self.n_act = len(mech.actuators)
        self.tau = np.zeros(self.n_act)
        self._joint_act = np.array([next((i for i, a in enumerate(mech.actuators)
                                          if a.joint == j.name), -1) for j in mech.joints])
        self.frames = {imu.name: imu.frame_id for imu in mech.sensors}
        self.pub_joints = self.create_publisher(_msg('JointState'), 'joint_states', PUB_QOS)
        self.pub_imus = {imu.name: self.create_publisher(_msg('Imu'), imu.topic, PUB_QOS)
                         for imu in mech.sensors}
        self.pub_truth = self.create_publisher(_msg('JointState'), '~/ground_truth', PUB_QOS)
        self.pub_clock = (None if s.realtime else
                          self.create_publisher(_msg('Clock'), '/clock', PUB_QOS))
        self.sub_cmd = self.create_subscription(_msg('Float64MultiArray'), '~/torque_commands',
                                                self._on_command, 10)
        self.period_steps = max(1, int(round(1.0 / (s.publish_rate * s.dt))))
        self.bag = None
        self.bag_kit = None
        if s.record:
            from ..core.bag import typestore
            store = typestore()
            self.bag, self._bag_dir = _open_bag(s.output, s.storage, store)
            self.bag_kit = cv.rosbags_kit(store)
        self.done = False
        self.warned = False
        self.start_ns: int | None = None
        self.get_logger().info(
            f'{mech.source}: dt {s.dt:g} s, publishing at {s.publish_rate:g} Hz, '
            f'{"real time x" + format(s.rate_scale, "g") if s.realtime else "as fast as possible"}'
            + (f', recording to {s.output}' if s.record else ''))
        if noise_note(s.values):
            self.get_logger().info(noise_note(s.values))
        self.pub_diag = self.create_publisher(_msg('DiagnosticArray'), '/diagnostics', PUB_QOS)
        self._rtf = (time.monotonic(), 0.0)          # (wall, sim time) at the last report
        self._rtf_value = float('nan')
        self._warned_at = -math.inf
        self.diag_timer = self.create_timer(1.0, self._on_diag,
                                            clock=Clock(clock_type=ClockType.STEADY_TIME))
        # the truth drawn like the estimator's ~/markers, in another colour (truth/...)
        # (none for a system without a drawing: a URDF robot is drawn by
        # robot_state_publisher from ~/ground_truth)
        drawing = self.system.drawing()
        self.markers = (None if drawing is None else
                        MarkerPublisher(drawing, s.frame_id, TRUTH_STYLE))
        self.pub_markers = self.create_publisher(_msg('MarkerArray'), '~/markers',
                                                 PUB_QOS)
        self.marker_timer = (self.create_timer(1.0 / s.markers_rate, self._on_markers,
                                               clock=Clock(clock_type=ClockType.STEADY_TIME))
                             if s.markers_rate > 0 and self.markers is not None else None)
        if s.realtime:
            self.timer = self.create_timer(1.0 / s.publish_rate, self._on_timer)
        else:
            self._publish_sample()

    # ------------------------------------------------------------------ input
    def _on_command(self, msg: Any) -> None:
        tau = np.asarray(msg.data, dtype=float)
        if tau.shape != (self.n_act,) or not np.all(np.isfinite(tau)):
            if not self.warned:
                self.warned = True
                self.get_logger().warning(f'~/torque_commands: expected {self.n_act} finite '
                                          f'values, got {tau.tolist()}; ignored')
            return
        self.tau = tau

    # ------------------------------------------------------------------ stepping
    def _stamp(self) -> int:
        base = self.start_ns if self.start_ns is not None else START_NS
        return base + int(round(self.sim.t * 1e9))

    def step_block(self) -> None:
        """Advance one publishing period and publish; sets ``done`` at ``duration``."""
        for _ in range(self.period_steps):
            self.sim.step(self.tau if self.n_act else None)
        self._publish_sample()
        d = self.settings.duration
        if d > 0 and self.sim.t >= d - 1e-12:
            self.done = True

    def _on_timer(self) -> None:
        now = self.get_clock().now().nanoseconds
        if now <= 0:
            return
        if self.start_ns is None:
            self.start_ns = now - int(round(self.sim.t * 1e9))
            self._publish_sample()
        target = (now - self.start_ns) * 1e-9 * self.settings.rate_scale
        blocks = 0
        deadline = time.monotonic() + 0.1        # stay responsive (commands, diagnostics)
        while (not self.done and self.sim.t + 0.5 * self.settings.dt < target and blocks < 20
               and time.monotonic() < deadline):
            self.step_block()
            blocks += 1
        self.lag = max(0.0, target - self.sim.t)

    def _on_markers(self) -> None:
        if not self.context.ok() or self.pub_markers.get_subscription_count() == 0:
            return
        self.pub_markers.publish(self.markers.fill(max(self._stamp(), 0), self.sim.q))

    def _on_diag(self) -> None:
        """Real-time factor over the last second (sim seconds per wall second, relative to
        ``rate_scale``) in /diagnostics; a throttled warning when behind real time."""
        if not self.context.ok():
            return
        wall, sim_t = time.monotonic(), self.sim.t
        w0, s0 = self._rtf
        self._rtf = (wall, sim_t)
        s = self.settings
        rtf = (sim_t - s0) / max(wall - w0, 1e-9) / (s.rate_scale if s.realtime else 1.0)
        self._rtf_value = rtf
        lag = getattr(self, 'lag', 0.0)
        behind = s.realtime and not self.done and (rtf < 0.95 or lag > 0.1)
        if behind and wall - self._warned_at >= 10.0:
            self._warned_at = wall
            self.get_logger().warning(
                f'behind real time: real-time factor {rtf:.2f}, {lag:.2f} s of simulation '
                'late (a smaller publish_rate, a larger dt or rate_scale < 1 helps); '
                'warned at most every 10 s')
        values = {'real_time_factor': f'{rtf:.3f}', 'sim_time': f'{sim_t:.3f}',
                  'lag_s': f'{lag:.3f}', 'realtime': str(bool(s.realtime))}
        values.update(self._end_stop_values())
        self.pub_diag.publish(cv.diagnostics_msg(
            self.kit, max(self.get_clock().now().nanoseconds, 0),
            f'{self.get_name()}: simulator', self.system.description.name, 1 if behind else 0,
            'behind real time' if behind else 'ok', values))

    def _end_stop_values(self) -> dict[str, str]:
        """Issue 30 item 3: end-stop impacts and velocity-limit excess for /diagnostics; a
        joint newly over its velocity limit or newly stopped is logged once."""
        log, stops = self.sim.log, self.sim.stops
        if log is None or stops is None:
            return {'joint_limits': 'off' if not self.settings.joint_limits else 'none'}
        self.report_end_stops(only_new=True)
        return {'joint_limits': 'on', 'end_stop_impacts': str(log.total_impacts),
                'velocity_limit_exceeded_s': f'{log.total_over_velocity * self.settings.dt:.3f}',
                'peak_velocity_ratio': f'{float(log.peak_velocity_ratio.max(initial=0.0)):.3f}'}

    def report_end_stops(self, only_new: bool = False) -> None:
        """Log what the end stops did (:meth:`EndStopLog.lines`); ``only_new``: a joint's
        first stop or velocity excess only (the counts then go to /diagnostics)."""
        log, stops = self.sim.log, self.sim.stops
        if log is None or stops is None:
            return
        for line in log.lines(stops, self.settings.dt):
            key = line.split(':', 1)[0] + (' velocity' if 'velocity' in line else ' stop')
            if only_new and key in self._stop_lines:
                continue
            self._stop_lines.add(key)
            if 'velocity' in line:
                self.get_logger().warning(line)
            else:
                self.get_logger().info(line)

    def _emit(self, topic_pub: Any, msgtype: str, t_ns: int, build: Any) -> None:
        topic_pub.publish(build(self.kit))
        if self.bag is not None:
            self.bag.write(topic_pub.topic_name, msgtype, t_ns, build(self.bag_kit))

    def _publish_sample(self) -> None:
        sim, t_ns = self.sim, self._stamp()
        if self.pub_clock is not None:
            self._emit(self.pub_clock, cv.TYPES['Clock'], t_ns,
                       lambda kit: cv.clock_msg(kit, t_ns))
        recs = self.system.simulate_measurements(
            np.array([sim.t]), sim.q[None], sim.qd[None], sim.qdd[None], self.tau[None],
            self.sensors, self.rng)
        effort = np.where(self._joint_act >= 0, self.tau[np.maximum(self._joint_act, 0)]
                          if self.n_act else np.nan, np.nan)
        for rec in recs:
            if isinstance(rec, ImuMeasurement):
                frame = self.frames[rec.sensor]
                self._emit(self.pub_imus[rec.sensor], cv.TYPES['Imu'], t_ns,
                           functools.partial(_imu, t_ns=t_ns, frame=frame, rec=rec,
                                             cfg=self.sensors))
            else:
                self._emit(self.pub_joints, cv.TYPES['JointState'], t_ns,
                           lambda kit, r=rec: cv.joint_state_msg(kit, t_ns, r.names, r.position,
                                                                 r.velocity, effort))
        names = self.system.description.coordinate_names
        q, qd = sim.q.copy(), sim.qd.copy()
        self._emit(self.pub_truth, cv.TYPES['JointState'], t_ns,
                   lambda kit: cv.joint_state_msg(kit, t_ns, names, q, qd))

    def close(self) -> None:
        self.report_end_stops()
        if self.bag is not None:
            bag, self.bag = self.bag, None
            _close_bag(bag, self._bag_dir, Path(self.settings.output), self.get_logger())


def _open_bag(output: str, storage: str, store: Any) -> tuple[Any, ExitStack]:
    """Issue 26: the bag is written in a temporary directory beside ``output``
    (:func:`~mbfg_ros.core.output.atomic_dir`) and renamed into place by
    :func:`_close_bag`, so a kill or a crash never leaves a half-written bag under
    ``output``; an existing ``output`` is refused (the node never replaces one)."""
    from ..core.bag import BagWriter
    from ..core.output import OutputError, atomic_dir, check_output
    if Path(output).exists() or Path(output).is_symlink():
        raise OutputError(f'{output}: the output bag exists (the node never replaces one: '
                          'remove it or set another output)')
    check_output(output, 'output bag', directory=True)
    with ExitStack() as stack:      # the temporary is removed if the bag cannot be opened
        bag = BagWriter(stack.enter_context(atomic_dir(output, 'bag')), storage, store)
        bag.open()
        return bag, stack.pop_all()


def _close_bag(bag: Any, bag_dir: ExitStack, output: Path, log: Any) -> None:
    """Close the bag and rename it to ``output`` (a clean stop: duration reached, SIGINT,
    SIGTERM, shutdown); if ``output`` appeared meanwhile it is left alone and the bag
    stays in its temporary directory, said in the log."""
    if output.exists() or output.is_symlink():
        bag.close()
        bag_dir.pop_all()
        log.error(f'{output} appeared while recording: not replaced; the bag '
                  f'({bag.count} messages) is at {bag.path}')
        return
    with bag_dir:                   # renamed on success, removed if closing failed
        bag.close()
    log.info(f'recorded {bag.count} messages to {output}')


def _imu(kit: Any, t_ns: int, frame: str, rec: Any, cfg: Any) -> Any:
    return cv.imu_msg(kit, t_ns, frame, rec.gyro, rec.accel, rec.orientation,
                      gyro_var=cfg.gyro_sigma ** 2, accel_var=cfg.accel_sigma ** 2)


_msg = cv.message_class


def _spin(node: SimulatorNode) -> None:
    """Real time: the timer steps the simulation; else step as fast as possible."""
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)
    stop_on_signals(node)
    if node.settings.realtime:
        while rclpy.ok() and not node.done and not node.stop_requested.is_set():
            try:
                executor.spin_once(timeout_sec=0.1)
            except OSError:     # a signal interrupted the wait: look at the flags again
                continue
    else:
        start = time.perf_counter()
        while rclpy.ok() and not node.done and not node.stop_requested.is_set():
            node.step_block()
            executor.spin_once(timeout_sec=0.0)
        node.get_logger().info(f'simulated {node.sim.t:.3f} s in '
                               f'{time.perf_counter() - start:.1f} s')


def main(args: list[str] | None = None) -> int:
    """Entry point: ``simulator_node --ros-args -p mechanism:=<yaml> ...``."""
    return run_node('simulator_node', SimulatorNode, _spin, args, SIMULATOR_PARAMS, SUMMARY)


if __name__ == '__main__':
    sys.exit(main())
