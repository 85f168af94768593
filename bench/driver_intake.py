#!/usr/bin/env python3
"""The driver's intake cost per message, offline and hot (issue 24).

``EstimatorDriver.joint_state`` and ``EstimatorDriver.imu`` on the serialised bytes the live
node takes (``take_message(raw=True)``): parse, conversion, checks, limit gate and queue,
timed by this thread's CPU clock (``time.thread_time_ns``: immune to the other processes of
a shared machine).

For each mechanism (config/fourbar.yaml, config/five_bar.yaml, the UR5 URDF with its overlay,
and the UR5 with a gripper's two finger joints in its JointStates, which the model does not
know: ``joint_state_broadcaster`` of an arm with a gripper) a stream of ``--count`` messages
stamped 1 ms apart, values within the limits: JointStates with positions (``p``), positions
and velocities (``pv``) or all three (``pve``); Imus without and with an orientation. Each
row: the best of ``--repeats`` passes, each on a new driver (``live`` as the node's, so the
per-stream bookkeeping is included), µs per message; and the share of the JointStates the
fast path (``JointStateReader.fast``) queued.

``--base DIR``: the same rows for a baseline package too (another tree's ``mbfg_ros``
exported under another name, as for ``bench/estimator_ab.py``), in the same process, its
passes alternating with this tree's; each row's records, counters and notes are compared
between the two (a difference stops the script).

    .venv/bin/python bench/driver_intake.py [--count 3000] [--repeats 5] [--base DIR]
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from estimator_ab import load_package  # noqa: E402

T0 = 1_000_000_000
FINGERS = ('gripper_left_finger_joint', 'gripper_right_finger_joint')
# (row name, mechanism, overlay, names the model does not know appended to its joints)
MECHANISMS = (('fourbar', 'config/fourbar.yaml', '', ()),
              ('five_bar', 'config/five_bar.yaml', '', ()),
              ('ur5', 'config/urdf/ur5.urdf', 'config/urdf/ur5_sensors.yaml', ()),
              ('ur5+grip', 'config/urdf/ur5.urdf', 'config/urdf/ur5_sensors.yaml', FINGERS))


def _driver(pkg: str, source: str, overlay: str):
    """A live driver of package ``pkg`` (``mbfg_ros`` or the baseline's name)."""
    load_mechanism = importlib.import_module(f'{pkg}.loader').load_mechanism
    EstimatorDriver = importlib.import_module(f'{pkg}.ros.driver').EstimatorDriver
    parse_estimator = importlib.import_module(f'{pkg}.ros.params').parse_estimator
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


def per_message(makes: list, feed, msgs: list[bytes], repeats: int) -> list[float]:
    """Best µs per message over ``repeats`` passes of each driver factory in ``makes``, their
    passes alternating (a machine's slow moment hits both)."""
    best = [float('inf')] * len(makes)
    for _ in range(repeats):
        for i, make in enumerate(makes):
            driver = make()
            c0 = time.thread_time_ns()
            for k, buf in enumerate(msgs):
                feed(driver, buf, T0 + k * 1_000_000 + 100_000)
            best[i] = min(best[i], (time.thread_time_ns() - c0) / len(msgs) / 1e3)
    return best


def outcome(driver, feed, msgs: list[bytes]) -> tuple:
    """What a driver made of ``msgs`` (fed as timed): its queue (stamp, names, values as
    bytes), counters and notes."""
    for k, buf in enumerate(msgs):
        feed(driver, buf, T0 + k * 1_000_000 + 100_000)
    queue = [(key[0], rec.t, getattr(rec, 'names', getattr(rec, 'sensor', None)),
              b''.join(np.asarray(getattr(rec, f)).tobytes() for f in
                       ('position', 'velocity', 'effort', 'position_var', 'velocity_var',
                        'gyro', 'accel', 'orientation', 'gyro_var', 'accel_var',
                        'orientation_var') if getattr(rec, f, None) is not None))
             for key, rec, _ in sorted(driver._queue, key=lambda e: e[0])]
    return queue, driver.counters, driver.events


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--count', type=int, default=3000)
    ap.add_argument('--repeats', type=int, default=5)
    ap.add_argument('--base', type=Path, default=None,
                    help='a baseline package directory (exported under another name)')
    args = ap.parse_args(argv)
    pkgs = ['mbfg_ros']
    if args.base is not None:
        pkgs.append(load_package(args.base.resolve(), args.base.name))
    rng = np.random.default_rng(24)
    base_cols = f' {"base µs":>7s} {"change":>7s}' if len(pkgs) > 1 else ''
    print(f'{"mechanism":10s} {"message":16s} {"µs/msg":>7s}{base_cols}  fast path')

    def row(name: str, label: str, feed, msgs: list[bytes], makes: list
            ) -> tuple[str, dict]:
        """The row's line and this tree's counters after an untimed pass (with a baseline:
        its records, counters and notes compared with the baseline's)."""
        us = per_message(makes, feed, msgs, args.repeats)
        mine = outcome(makes[0](), feed, msgs)
        if len(makes) > 1 and outcome(makes[1](), feed, msgs) != mine:
            raise SystemExit(f'{name} {label}: records, counters or notes differ from '
                             'the baseline')
        cols = f' {us[1]:7.2f} {100 * (us[0] / us[1] - 1):+6.0f}%' if len(us) > 1 else ''
        return f'{name:10s} {label:16s} {us[0]:7.2f}{cols}', mine[1]

    for name, source, overlay, extra in MECHANISMS:
        makes = [lambda pkg=pkg, source=source, overlay=overlay: _driver(pkg, source, overlay)
                 for pkg in pkgs]
        probe = makes[0]()
        for given in ('p', 'pv', 'pve'):
            msgs = joint_states(probe.joint_names + extra, args.count, given, rng)
            line, _ = row(name, 'JointState ' + given,
                          lambda d, b, t: d.joint_state(b, t), msgs, makes)
            d, fast = makes[0](), 0                   # an untimed pass: which took the fast path
            for k, buf in enumerate(msgs):
                now = T0 + k * 1_000_000 + 100_000
                fast += d._joint_reader.fast(buf, d._joint_parser) is not None
                d.joint_state(buf, now)
            print(f'{line}  {100 * fast / len(msgs):.0f} %')
        if extra:
            continue                                  # the Imu rows are the UR5's
        for sensor in probe.imu_names[:1]:
            for orientation in (False, True):
                msgs = imus(args.count, orientation, rng)
                feed = lambda d, b, t, s=sensor: d.imu(b, s, t)      # noqa: E731
                line, counters = row(name, 'Imu + orient.' if orientation else 'Imu', feed,
                                     msgs, makes)
                assert counters['queued'] == len(msgs), counters      # every Imu timed queued
                print(line)
    return 0


if __name__ == '__main__':
    sys.exit(main())
