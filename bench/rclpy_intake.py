#!/usr/bin/env python3
"""rclpy's own cost per received message (issue 24): executor dispatch against a take loop.

One process, two nodes on a private ROS_DOMAIN_ID (loopback DDS): a publisher sends ``N``
messages of a kind (a 6-joint ``JointState`` with positions and efforts, an ``Imu``, a
``Clock``) into a RELIABLE, KEEP_LAST(N) subscription; once they have arrived, the receiving
side takes them in one of these ways, timed by this thread's CPU clock per message:

* ``executor``: ``spin_once`` until every message went through a callback, under the
  ``SingleThreadedExecutor`` and (where rclpy has it) the ``EventsExecutor``: what a
  subscription callback per message costs (wait set, dispatch, take, deserialise);
* ``take``: ``Subscription.handle.take_message`` in a loop (what the node's drain does):
  take and deserialise, no dispatch;
* ``take raw``: the same with ``raw=True`` (the serialised bytes, no Python message);
* ``deserialise``: ``rclpy.serialization.deserialize_message`` of those bytes alone.

    .venv/bin/python bench/rclpy_intake.py [--count 2000]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _message(kind: str):
    """(type, one filled message) of ``kind``."""
    if kind == 'JointState':
        from sensor_msgs.msg import JointState
        return JointState, JointState(name=[f'j{i}' for i in range(6)], position=[0.1] * 6,
                                      effort=[1.0] * 6)
    if kind == 'Imu':
        from sensor_msgs.msg import Imu
        return Imu, Imu()
    from rosgraph_msgs.msg import Clock
    return Clock, Clock()


def _wait(ex, pub, sub_count: int, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while pub.get_subscription_count() < sub_count and time.monotonic() < end:
        ex.spin_once(timeout_sec=0.01)


def measure(kind: str, count: int, domain: int) -> dict[str, float]:
    """µs per message of each way of taking ``count`` messages of ``kind``."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    out: dict[str, float] = {}
    try:
        msg_type, msg = _message(kind)
        qos = QoSProfile(depth=count, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE)
        tx = rclpy.create_node('intake_tx', context=ctx)
        rx = rclpy.create_node('intake_rx', context=ctx)
        pub = tx.create_publisher(msg_type, 'intake', qos)
        got = [0]
        sub = rx.create_subscription(msg_type, 'intake',
                                     lambda m: got.__setitem__(0, got[0] + 1), qos)
        executors = [('SingleThreadedExecutor', SingleThreadedExecutor)]
        try:
            from rclpy.experimental import EventsExecutor
            executors.append(('EventsExecutor', EventsExecutor))
        except ImportError:
            pass

        def burst() -> None:
            for _ in range(count):
                pub.publish(msg)
            time.sleep(0.5 + count * 2e-5)         # let DDS deliver them all

        for name, cls in executors:
            ex = cls(context=ctx)
            ex.add_node(rx)
            _wait(ex, pub, 1)
            burst()
            got[0] = 0
            c0 = time.thread_time()
            end = time.monotonic() + 30
            while got[0] < count and time.monotonic() < end:
                ex.spin_once(timeout_sec=0.1)
            out[f'executor ({name})'] = 1e6 * (time.thread_time() - c0) / max(1, got[0])
            ex.remove_node(rx)
            ex.shutdown()
        for raw in (False, True):
            burst()
            taken, blobs = 0, []
            c0 = time.thread_time()
            while True:
                with sub.handle:
                    info = sub.handle.take_message(msg_type, raw)
                if info is None:
                    break
                taken += 1
                if raw:
                    blobs.append(info[0])
            out['take raw' if raw else 'take + deserialise'] = \
                1e6 * (time.thread_time() - c0) / max(1, taken)
        c0 = time.thread_time()
        for b in blobs:
            deserialize_message(b, msg_type)
        out['deserialise alone'] = 1e6 * (time.thread_time() - c0) / max(1, len(blobs))
        tx.destroy_node()
        rx.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--count', type=int, default=2000, help='messages per measurement')
    a = ap.parse_args(argv)
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    domain = 100 + os.getpid() % 100
    rows = {kind: measure(kind, a.count, domain) for kind in ('JointState', 'Imu', 'Clock')}
    ways = list(next(iter(rows.values())))
    print(f'rclpy intake, {a.count} messages each, thread CPU µs per message '
          f'(RMW {os.environ.get("RMW_IMPLEMENTATION", "default")})\n')
    print('| way | ' + ' | '.join(rows) + ' |')
    print('|---|' + '---|' * len(rows))
    for w in ways:
        print(f'| {w} | ' + ' | '.join(f'{rows[k].get(w, float("nan")):.1f}' for k in rows)
              + ' |')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
