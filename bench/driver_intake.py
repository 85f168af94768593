#!/usr/bin/env python3
"""The driver's intake cost per message, offline and hot (issue 24).

``EstimatorDriver.joint_state`` and ``EstimatorDriver.imu`` on the serialised bytes the live
node takes (``take_message(raw=True)``): parse, conversion, checks, limit gate and queue,
timed by this thread's CPU clock (``time.thread_time_ns``: immune to the other processes of
a shared machine).

For each mechanism (config/fourbar.yaml, config/five_bar.yaml, the UR5 URDF with its overlay) a
stream of ``--count`` messages stamped 1 ms apart, values within the limits: JointStates with
positions (``p``), positions and velocities (``pv``) or all three (``pve``); Imus without and
with an orientation. Each row: the best of ``--repeats`` passes, each on a new driver (``live``
as the node's, so the per-stream bookkeeping is included), µs per message; and the share of the
JointStates the fast path (``JointStateReader.fast``) queued.

    .venv/bin/python bench/driver_intake.py [--count 3000] [--repeats 5]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

T0 = 1_000_000_000
MECHANISMS = (('fourbar', 'config/fourbar.yaml', ''), ('five_bar', 'config/five_bar.yaml', ''),
              ('ur5', 'config/urdf/ur5.urdf', 'config/urdf/ur5_sensors.yaml'))


def _driver(source: str, overlay: str):
    from mbfg_ros.loader import load_mechanism
    from mbfg_ros.ros.driver import EstimatorDriver
    from mbfg_ros.ros.params import parse_estimator
    source, overlay = str(REPO / source), str(REPO / overlay) if overlay else ''
    settings = parse_estimator({'mechanism': source, 'overlay': overlay, 'frequency': 1000.0,
                                'lag_duration': 0.1})
    return EstimatorDriver(load_mechanism(source, overlay), settings, live=True)


def _stamp(msg, k: int) -> None:
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(T0 + k * 1_000_000, 10**9)


def joint_states(names: tuple[str, ...], count: int, given: str, rng) -> list[bytes]:
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState
    out = []
    for k in range(count):
        msg = JointState(name=list(names))
        n = len(names)
        msg.position = (0.01 * rng.standard_normal(n)).tolist()
        if 'v' in given:
            msg.velocity = (0.01 * rng.standard_normal(n)).tolist()
        if 'e' in given:
            msg.effort = (0.01 * rng.standard_normal(n)).tolist()
        _stamp(msg, k)
        out.append(serialize_message(msg))
    return out


def imus(count: int, orientation: bool, rng) -> list[bytes]:
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Imu
    out = []
    for k in range(count):
        msg = Imu()
        g, f = msg.angular_velocity, msg.linear_acceleration
        g.x, g.y, g.z = (0.1 * rng.standard_normal(3)).tolist()
        f.x, f.y, f.z = (rng.standard_normal(3) + [0.0, 0.0, 9.8]).tolist()
        if orientation:
            q = rng.standard_normal(4)
            o = msg.orientation
            o.x, o.y, o.z, o.w = (q / np.linalg.norm(q)).tolist()
        else:
            msg.orientation_covariance[0] = -1.0
        _stamp(msg, k)
        out.append(serialize_message(msg))
    return out


def per_message(make, feed, msgs: list[bytes], repeats: int) -> tuple[float, object]:
    """(best µs per message over ``repeats`` passes, the last pass's driver)."""
    best, driver = float('inf'), None
    for _ in range(repeats):
        driver = make()
        c0 = time.thread_time_ns()
        for k, buf in enumerate(msgs):
            feed(driver, buf, T0 + k * 1_000_000 + 100_000)
        best = min(best, (time.thread_time_ns() - c0) / len(msgs) / 1e3)
    return best, driver


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--count', type=int, default=3000)
    ap.add_argument('--repeats', type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(24)
    print(f'{"mechanism":10s} {"message":16s} {"µs/msg":>7s}  fast path')
    for name, source, overlay in MECHANISMS:
        def make(source=source, overlay=overlay):
            return _driver(source, overlay)
        probe = make()
        for given in ('p', 'pv', 'pve'):
            msgs = joint_states(probe.joint_names, args.count, given, rng)
            us, _ = per_message(make, lambda d, b, t: d.joint_state(b, t), msgs, args.repeats)
            d, fast = make(), 0                       # an untimed pass: which took the fast path
            for k, buf in enumerate(msgs):
                now = T0 + k * 1_000_000 + 100_000
                fast += d._joint_reader.fast(buf, d._joint_parser) is not None
                d.joint_state(buf, now)
            share = fast / len(msgs)
            print(f'{name:10s} {"JointState " + given:16s} {us:7.2f}  {100 * share:.0f} %')
        for sensor in probe.imu_names[:1]:
            for orientation in (False, True):
                msgs = imus(args.count, orientation, rng)
                us, driver = per_message(make, lambda d, b, t, s=sensor: d.imu(b, s, t), msgs,
                                         args.repeats)
                assert driver.counters['queued'] == len(msgs), driver.counters
                label = 'Imu + orient.' if orientation else 'Imu'
                print(f'{name:10s} {label:16s} {us:7.2f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
