"""The test side of the node tests over DDS: a peer rclpy node, node processes, diagnostics.

Imported by test/ros/*.py (never by a test outside the ROS tests: it imports rclpy)."""
from __future__ import annotations

import importlib
import signal
import subprocess
import sys
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy

from mbfg_ros.ros import conversions as cv
from support.ros_data import fourbar_data, ros_env, stamp_of

NS = 1_000_000_000


RELIABLE = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)


SENSORS = {'/joint_states': 'JointState', '/imu/coupler_imu': 'Imu'}


STATE_AND_DIAGNOSTICS = {'/estimator_node/state': 'JointState',
                         '/diagnostics': 'DiagnosticArray'}


def _msg(short):
    pkg, _, name = cv.TYPES[short].split('/')
    return getattr(importlib.import_module(f'{pkg}.msg'), name)


class Peer:
    """The test's own rclpy node in its own context and domain."""

    def __init__(self, domain: int) -> None:
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=domain)
        self.node = rclpy.create_node('mbfg_test_peer', context=self.ctx)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.kit = cv.rclpy_kit()
        self.inbox: dict[str, list] = {}

    def listen(self, topic: str, short: str) -> None:
        self.inbox[topic] = []
        self.node.create_subscription(_msg(short), topic, self.inbox[topic].append, RELIABLE)

    def publisher(self, topic: str, short: str):
        return self.node.create_publisher(_msg(short), topic, RELIABLE)

    def connect(self, publish: dict, listen: dict) -> dict:
        """Publishers of ``publish`` ({topic: type}), inboxes of ``listen``; returns the
        publishers by topic once the estimator node has matched them all and publishes."""
        pubs = {topic: self.publisher(topic, short) for topic, short in publish.items()}
        for topic, short in listen.items():
            self.listen(topic, short)
        _wait_for_node(self, tuple(pubs.values()))
        return pubs

    def spin_until(self, pred, timeout: float, what: str, retry=None) -> None:
        """Spin until ``pred()``; ``retry()`` is called every 0.5 s meanwhile."""
        start = time.monotonic()
        last = start
        while not pred():
            now = time.monotonic()
            if now - start > timeout:
                raise AssertionError(f'timed out after {timeout:g} s waiting for {what}')
            if retry is not None and now - last > 0.5:
                last = now
                retry()
            self.ex.spin_once(timeout_sec=0.01)

    def close(self) -> None:
        self.ex.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.ctx)


def start(module: str, params: dict, domain: int, tmp_path, extra=()):
    args = [sys.executable, '-m', f'mbfg_ros.ros.{module}', '--ros-args', *extra]
    for k, v in params.items():
        args += ['-p', f'{k}:={v}']
    out = open(tmp_path / f'{module}.log', 'w')
    return subprocess.Popen(args, env=ros_env(domain), stdout=out, stderr=subprocess.STDOUT,
                            cwd=tmp_path)


def stop(proc) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


def diag_values(msg) -> dict:
    return {kv.key: kv.value for kv in msg.status[0].values}


def _valid_messages(peer, system, t_start, duration=1.0, rate=500.0):
    """(stamp, message, kind) of a free-fall four-bar stamped from ``t_start`` on, plus the
    trajectory (its sample k is at t_start + k ms)."""
    _, traj, recs = fourbar_data(duration=duration, rate=rate)
    out = []
    for r in recs:
        t = t_start + stamp_of(r) - stamp_of(recs[0])
        if hasattr(r, 'sensor'):
            out.append((t, cv.imu_msg(peer.kit, t, 'coupler_imu', r.gyro, r.accel), 'imu'))
        else:
            out.append((t, cv.joint_state_msg(peer.kit, t, r.names, r.position), 'js'))
    return out, traj


def _publish_in_real_time(peer, pubs, msgs):
    """Publish each message when the wall clock reaches its stamp (the node's clock)."""
    for t, msg, kind in msgs:
        while (wait := t - peer.node.get_clock().now().nanoseconds) > 0:
            time.sleep(min(wait, 500_000) / 1e9)
        pubs[kind].publish(msg)


def _feed_valid_and_settle(peer, pubs, system, proc, t_start, duration):
    """Valid readings from ``t_start`` for ``duration`` s in real time; waits for the
    estimates up to their end and the diagnostics after it; the node must be alive.
    Returns the trajectory, the last stamp and the diagnostics' values."""
    states, diags = peer.inbox['/estimator_node/state'], peer.inbox['/diagnostics']
    good, traj = _valid_messages(peer, system, t_start, duration=duration)
    _publish_in_real_time(peer, pubs, good)
    t_end = good[-1][0]
    peer.spin_until(lambda: states and cv.stamp_ns(states[-1].header.stamp) >= t_end - 8e6,
                    30, 'estimates of the valid readings')
    peer.spin_until(lambda: cv.stamp_ns(diags[-1].header.stamp) > t_end, 20,
                    'diagnostics after the valid readings')
    assert proc.poll() is None, 'the node died'
    return traj, t_end, diag_values(diags[-1])


def _wait_for_node(peer, pubs):
    peer.spin_until(lambda: all(p.get_subscription_count() > 0 for p in pubs)
                    and peer.node.count_publishers('/estimator_node/state') > 0
                    and peer.inbox['/diagnostics'], 60, 'discovery of estimator_node')
