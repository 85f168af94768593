"""ROS 2 estimator node: encoders + IMUs in, estimated state and torque commands out.

A thin wrapper (robot_localization's pattern) around
:class:`~mbfg_ros.ros.driver.EstimatorDriver`: callbacks convert a message to
a record and queue it; a timer at ``frequency`` on the node clock
(``use_sim_time`` respected) runs every due tick of the shared tick grid and
publishes its outputs. Topics (defaults; all remappable):

==========================  ====================================  ==========================
``joint_states``            sensor_msgs/JointState (in)           encoders, rates, efforts
``imu/<name>`` (YAML topic) sensor_msgs/Imu (in)                   gyro, accelerometer, yaw
``~/reference``             trajectory_msgs/JointTrajectory (in)  desired actuated motion
``~/joint_states``          sensor_msgs/JointState (out)          YAML joints, effort = τ̂
``~/state``                 sensor_msgs/JointState (out)          q, q̇ by coordinate name
``~/state_stddev``          sensor_msgs/JointState (out)          standard deviations
``~/torque_commands``       std_msgs/Float64MultiArray (out)      command_joints order
``/diagnostics``            diagnostic_msgs/DiagnosticArray       status and counters
==========================  ====================================  ==========================

Run: ``ros2 run mbfg_ros estimator_node --ros-args -p mechanism:=fourbar.yaml``
or ``python -m mbfg_ros.ros.estimator_node --ros-args ...``. A bad parameter or
mechanism prints one error line and exits with status 2.
"""
from __future__ import annotations

import functools
import sys
from typing import Any

import rclpy
import rclpy.executors
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from ..dynamics import load_system
from . import conversions as cv
from .runner import run_node
from .driver import EstimatorDriver, TickOutput
from .params import ESTIMATOR_PARAMS, declare, parse_estimator, read

__all__ = ['EstimatorNode', 'main', 'SENSOR_QOS', 'OUTPUT_QOS']

SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=200,
                        reliability=ReliabilityPolicy.BEST_EFFORT,
                        durability=DurabilityPolicy.VOLATILE)
"""Sensor-data QoS (best effort, volatile) with a deeper history than
``qos_profile_sensor_data``'s 5, so 1 kHz streams survive a slow tick.
Matches reliable and best-effort publishers alike."""

OUTPUT_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                        reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.VOLATILE)


class EstimatorNode(Node):
    """The estimator node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('estimator_node', **kwargs)
        declare(self, ESTIMATOR_PARAMS)
        settings = parse_estimator(read(self, ESTIMATOR_PARAMS), where=self.get_name())
        system = load_system(settings.mechanism)
        self.driver = EstimatorDriver(system, settings)
        self.kit = cv.rclpy_kit()
        self.mech_name = system.mech.name
        self._warned: set[str] = set()
        v = settings.values
        self.sub_joints = self.create_subscription(
            _msg('JointState'), v['joint_states_topic'], self._on_joints,
            SENSOR_QOS)
        self.sub_imus = [
            self.create_subscription(_msg('Imu'), s.topic,
                                     functools.partial(self._on_imu, s.name), SENSOR_QOS)
            for s in system.mech.sensors]
        self.sub_ref = self.create_subscription(_msg('JointTrajectory'), v['reference_topic'],
                                                self._on_reference, 10)
        self.pubs = {
            '~/joint_states': self.create_publisher(_msg('JointState'), '~/joint_states',
                                                    OUTPUT_QOS),
            '~/state': self.create_publisher(_msg('JointState'), '~/state', OUTPUT_QOS),
            '~/state_stddev': self.create_publisher(_msg('JointState'), '~/state_stddev',
                                                    OUTPUT_QOS),
            '~/torque_commands': self.create_publisher(_msg('Float64MultiArray'),
                                                       v['command_topic'], OUTPUT_QOS),
        }
        self.pub_diag = self.create_publisher(_msg('DiagnosticArray'), '/diagnostics',
                                              OUTPUT_QOS)
        self.timer = self.create_timer(1.0 / self.driver.frequency, self._on_timer)
        self.get_logger().info(
            f'{system.mech.source}: {len(self.driver.joint_names)} joints, '
            f'{len(self.driver.imu_names)} IMUs, {system.n} coordinates, '
            f'{self.driver.frequency:g} Hz, commands for {list(self.driver.law.names)}')

    # ------------------------------------------------------------------ input
    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _rejected(self, topic: str, exc: cv.InputRejected) -> None:
        self.driver.count(f'dropped.{exc.reason}')
        key = f'{topic}:{exc.reason}'
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warning(f'{topic}: message dropped ({exc}); counted in '
                                      '/diagnostics, not repeated')

    def _on_joints(self, msg: Any) -> None:
        try:
            t, rec, unknown, nonfinite = cv.joint_state_to_record(
                msg, self.driver.joint_names, self._now_ns())
        except cv.InputRejected as exc:
            self._rejected('joint_states', exc)
            return
        if nonfinite:
            self.driver.count('nonfinite_values', nonfinite)
        for name in unknown:
            self.driver.count('unknown_joint')
            if name not in self._warned:
                self._warned.add(name)
                self.get_logger().warning(f'joint_states: unknown joint {name!r} ignored '
                                          f'(mechanism joints: {list(self.driver.joint_names)})')
        self.driver.push(t, rec)
        self._log_events()

    def _on_imu(self, sensor: str, msg: Any) -> None:
        try:
            t, rec = cv.imu_to_record(msg, sensor, self._now_ns())
        except cv.InputRejected as exc:
            self._rejected(f'imu {sensor}', exc)
            return
        self.driver.push(t, rec)
        self._log_events()

    def _on_reference(self, msg: Any) -> None:
        try:
            ref = cv.trajectory_to_reference(msg, self._now_ns())
        except cv.InputRejected as exc:
            self._rejected('reference', exc)
            return
        self.driver.set_reference(ref)
        self._log_events()

    # ------------------------------------------------------------------ ticks
    def _on_timer(self) -> None:
        now = self._now_ns()
        if now <= 0 or not self.context.ok():     # no /clock yet (use_sim_time) / shutting down
            return
        for out in self.driver.advance(now):
            self._publish(out)
        self._log_events()

    def _publish(self, out: TickOutput) -> None:
        d = self.driver
        if out.estimate is not None:
            msgs = cv.estimate_messages(self.kit, out.t_ns, out.estimate, d.joint_names,
                                        out.joint_effort, d.coordinate_names,
                                        out.command if out.command is not None else [])
            for key, msg in msgs.items():
                if key == '~/torque_commands' and out.command is None:
                    continue
                self.pubs[key].publish(msg)
        self.pub_diag.publish(cv.diagnostics_msg(
            self.kit, out.t_ns, f'{self.get_name()}: estimator', self.mech_name, out.level,
            out.message, out.values))

    def _log_events(self) -> None:
        if self.driver.events:
            for text in self.driver.events:
                self.get_logger().warning(text)
            self.driver.events.clear()


_msg = cv.message_class


def main(args: list[str] | None = None) -> int:
    """Entry point: ``estimator_node --ros-args -p mechanism:=<yaml> ...``."""
    return run_node('estimator_node', EstimatorNode, rclpy.spin, args)


if __name__ == '__main__':
    sys.exit(main())
