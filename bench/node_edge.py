#!/usr/bin/env python3
"""The estimator node's edge, per message and per estimate (issue 24): what the tick loop
spends outside the estimator, the way it did before and the way it does now, on this
process's thread CPU clock (no timed test; noisy on a shared machine, the ratios are the
point).

One process, loopback DDS on a private domain, the UR5 of ``config/urdf/ur5.urdf`` (six
joints with positions and efforts, the wrist IMU):

* **intake**: ``N`` JointStates and Imus arrive; taken (``take_message``) and handed to the
  node's driver (``EstimatorDriver.joint_state`` / ``imu``: conversion, limit gate, queue)
  as rclpy deserialises them (``message``), or as their serialised bytes read by
  ``mbfg_ros/ros/cdr.py`` (``bytes``, the loop's way now); ``/clock`` as the loop takes it
  (newest, to rclpy's TimeSource);
* **publishing**: one estimate's ``~/joint_states``, ``~/state``, ``~/state_stddev`` and
  torque command, each with a subscriber in another context: filled message objects
  (``EstimateMessages``, rclpy converts and serialises each) or bytes patched in place
  (``SerialisedEstimateMessages``);
* **executor turn**: the loop's ``spin_once(timeout_sec=0)`` on the real node, with rclpy's
  QoS event handlers in its wait set (before) and without (now, one turn a second);
* **the loop's steps without DDS** (:func:`per_reading`): the driver's intake of the bytes
  alone, a record into the estimator (``Estimator.add_validated``), and per estimate the joint
  efforts, the torque command, the external torques, the bytes' fill and the node's clock
  read.

    .venv/bin/python bench/node_edge.py [--count 3000]
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

URDF = REPO / 'config' / 'urdf' / 'ur5.urdf'
OVERLAY = REPO / 'config' / 'urdf' / 'ur5_sensors.yaml'


def _params() -> dict:
    from mbfg_ros.ros.params import load_params_file

    params = {k: v for k, v in load_params_file(REPO / 'config' / 'estimator_urdf.yaml').items()
              if isinstance(v, (int, float)) and not isinstance(v, bool)}
    params.update(mechanism=str(URDF), overlay=str(OVERLAY), frequency=1000.0)
    return params


def _cpu_us(fn, count: int) -> float:
    c0 = time.thread_time_ns()
    fn()
    return (time.thread_time_ns() - c0) / 1e3 / max(1, count)


def _wait(pubs: list, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while min(p.get_subscription_count() for p in pubs) == 0 and time.monotonic() < end:
        time.sleep(0.02)


def intake(count: int, domain: int) -> dict[str, tuple[float, float]]:
    """µs per message (message way, bytes way) of the driver's input path with the take."""
    import numpy as np
    import rclpy
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message

    from mbfg_ros.loader import load_mechanism
    from mbfg_ros.ros import cdr
    from mbfg_ros.ros import conversions as cv
    from mbfg_ros.ros.driver import EstimatorDriver
    from mbfg_ros.ros.params import parse_estimator

    settings = parse_estimator(_params())
    driver = EstimatorDriver(load_mechanism(settings.mechanism, str(OVERLAY)), settings,
                             live=True)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    out: dict[str, tuple[float, float]] = {}
    try:
        qos = QoSProfile(depth=count, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE)
        tx = rclpy.create_node('edge_tx', context=ctx)
        rx = rclpy.create_node('edge_rx', context=ctx)
        kit = cv.rclpy_kit()
        rng = np.random.default_rng(0)
        base = 1_700_000_000 * 10**9
        stamps = [base + k * 10**6 for k in range(count)]
        names = driver.joint_names
        js = [cv.joint_state_msg(kit, t, names, rng.normal(size=6) * 0.1, (),
                                 rng.normal(size=6)) for t in stamps]
        imus = [cv.imu_msg(kit, t, 'wrist', rng.normal(size=3), rng.normal(size=3) + 9.8)
                for t in stamps]
        sensor = driver.imu_names[0]
        for kind, msgs, call in (
                ('JointState', js, lambda m, now: driver.joint_state(m, now)),
                ('Imu', imus, lambda m, now: driver.imu(m, sensor, now))):
            msg_type = type(msgs[0])
            pub = tx.create_publisher(msg_type, kind, qos)
            sub = rx.create_subscription(msg_type, kind, lambda m: None, qos)
            _wait([pub])
            row = []
            for raw in (False, True):
                for m in msgs:
                    pub.publish(m)
                time.sleep(0.5 + count * 2e-5)
                driver.reset('manual')
                now = stamps[-1]

                def take_all() -> None:
                    while True:
                        with sub.handle:
                            info = sub.handle.take_message(msg_type, raw)
                        if info is None:
                            return
                        call(info[0], now)
                        if len(driver._queue) > 500:      # the ticks would drain it
                            driver._queue.clear()
                row.append(_cpu_us(take_all, count))
            out[f'{kind}: take + conversion + gate + queue'] = (row[0], row[1])
            if kind == 'Imu':      # the reading alone, to split the path
                blobs = []
                for m in msgs[:count]:
                    pub.publish(m)
                time.sleep(0.5 + count * 2e-5)
                while (info := sub.handle.take_message(msg_type, True)) is not None:
                    blobs.append(info[0])
                out['Imu: deserialise / read bytes alone'] = (
                    _cpu_us(lambda: [deserialize_message(b, msg_type) for b in blobs],
                            len(blobs)),
                    _cpu_us(lambda: [cdr.read_imu(b) for b in blobs], len(blobs)))
        tx.destroy_node()
        rx.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
    return out


def publishing(count: int, domain: int) -> tuple[float, float]:
    """µs per estimate (objects, bytes) of filling and publishing the four outputs."""
    import numpy as np
    import rclpy

    from mbfg_ros.core.measurements import Estimate
    from mbfg_ros.ros import conversions as cv
    from mbfg_ros.ros.polling import OUTPUT_QOS

    ctx_tx, ctx_rx = rclpy.Context(), rclpy.Context()
    rclpy.init(context=ctx_tx, domain_id=domain)
    rclpy.init(context=ctx_rx, domain_id=domain)
    try:
        tx = rclpy.create_node('edge_out', context=ctx_tx)
        rx = rclpy.create_node('edge_listener', context=ctx_rx)
        names = [f'joint_{i}' for i in range(6)]
        topics = (('js', 'JointState'), ('state', 'JointState'), ('stddev', 'JointState'),
                  ('cmd', 'Float64MultiArray'))
        pubs = [tx.create_publisher(cv.message_class(t), n, OUTPUT_QOS) for n, t in topics]
        subs = [rx.create_subscription(cv.message_class(t), n, lambda m: None, OUTPUT_QOS)
                for n, t in topics]
        _wait(pubs)
        objects = cv.EstimateMessages(cv.rclpy_kit(), names, names)
        raw = cv.SerialisedEstimateMessages(names, names, 6)
        rng = np.random.default_rng(1)
        v = [rng.normal(size=6) for _ in range(9)]
        est = Estimate(0.0, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], 0.0)

        def with_objects() -> None:
            for k in range(count):
                objects.fill(10**9 + k, est, v[8], v[5])
                for pub, msg in zip(pubs, (objects.joints, objects.state, objects.stddev,
                                           objects.command)):
                    if pub.get_subscription_count():
                        pub.publish(msg)

        def with_bytes() -> None:
            for k in range(count):
                raw.fill(10**9 + k, est, v[8], v[5])
                for pub, msg in zip(pubs, (raw.joints, raw.state, raw.stddev, raw.command)):
                    if pub.get_subscription_count():
                        pub.publish(bytes(msg.buf))

        result = (_cpu_us(with_objects, count), _cpu_us(with_bytes, count))
        del subs
        tx.destroy_node()
        rx.destroy_node()
    finally:
        rclpy.shutdown(context=ctx_tx)
        rclpy.shutdown(context=ctx_rx)
    return result


def executor_turn(count: int, domain: int) -> tuple[float, float]:
    """µs per ``spin_once(0)`` of the loop on the real node (event handlers in, out)."""
    import rclpy
    from rclpy.parameter import Parameter

    from mbfg_ros.ros import estimator_node as N
    from mbfg_ros.ros.polling import make_executor

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    try:
        node = N.EstimatorNode(context=ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in _params().items()] + [
            Parameter('use_sim_time', value=True)])
        ex = make_executor('auto', context=ctx)
        ex.add_node(node)
        node.polled.polling = True
        out = []
        for rare in (False, True):
            node.rare_events.polling = rare
            for _ in range(20):
                ex.spin_once(timeout_sec=0.0)
            out.append(_cpu_us(lambda: [ex.spin_once(timeout_sec=0.0) for _ in range(count)],
                               count))
        ex.shutdown()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
    return out[0], out[1]


def per_reading(count: int, domain: int) -> dict[str, float]:
    """µs per reading / estimate of the loop's steps without DDS (issue 24, fifth session):
    a UR5 driver fed 1.5 s of 1 kHz JointState + Imu bytes (ticks run, commands flowing),
    then the intake of ``count`` more of each, their records into the estimator
    (``Estimator.add_validated``), and per estimate the joint efforts, the torque command, the
    external torques, the serialised bytes' fill and the node's clock read."""
    import numpy as np
    import rclpy
    from rclpy.serialization import serialize_message

    from mbfg_ros.loader import load_mechanism
    from mbfg_ros.ros import conversions as cv
    from mbfg_ros.ros.driver import EstimatorDriver
    from mbfg_ros.ros.params import parse_estimator

    settings = parse_estimator(_params())
    d = EstimatorDriver(load_mechanism(settings.mechanism, str(OVERLAY)), settings, live=True)
    kit = cv.rclpy_kit()
    rng = np.random.default_rng(0)
    base, warm = 1_700_000_000 * 10**9, 1500
    total = warm + 2 * count + 200
    js = [serialize_message(cv.joint_state_msg(kit, base + k * 10**6, d.joint_names,
                                               rng.normal(size=6) * 0.1, (),
                                               rng.normal(size=6))) for k in range(total)]
    imus = [serialize_message(cv.imu_msg(kit, base + k * 10**6, 'wrist',
                                         rng.normal(size=3) * 0.1,
                                         rng.normal(size=3) + [0.0, 0.0, 9.8]))
            for k in range(total)]
    sensor = d.imu_names[0]
    for k in range(warm):
        now = base + k * 10**6
        d.joint_state(js[k], now)
        d.imu(imus[k], sensor, now)
        d.advance(now)
    out = d.last_output
    est = d.estimator

    def intake(msgs: list, call, first: int) -> None:
        for k in range(first, first + count):
            call(msgs[k], base + k * 10**6)
            if len(d._queue) > 200:      # the ticks would drain it
                d._queue.clear()

    rows = {'JointState bytes -> queued (driver.joint_state, no take)': _cpu_us(
        lambda: intake(js, d.joint_state, warm), count),
        'Imu bytes -> queued (driver.imu, no take)': _cpu_us(
        lambda: intake(imus, lambda m, now: d.imu(m, sensor, now), warm + count), count)}
    last = warm + 2 * count
    for label, recs in (
            ('a JointState record into the estimator (Estimator.add_validated)',
             [d.joint_state(js[k], base + k * 10**6) for k in range(last, last + 200)]),
            ('an Imu record into the estimator (Estimator.add_validated)',
             [d.imu(imus[k], sensor, base + k * 10**6) for k in range(last, last + 200)])):
        d._queue.clear()
        rounds = max(1, count // 200)

        def add(recs: list = recs) -> None:
            for _ in range(rounds):
                for r in recs:
                    est.add_validated(r)
                est._pending = []
        rows[label] = _cpu_us(add, rounds * len(recs))
    e, t_ns = out.estimate, out.t_ns
    d._newest_used, d._newest_wall = t_ns, time.monotonic_ns() + 10**12   # commands go out
    raw = cv.SerialisedEstimateMessages(d.joint_names, d.coordinate_names, len(d.law.names))
    rows['per estimate: joint efforts (driver._joint_effort)'] = _cpu_us(
        lambda: [d._joint_effort(e) for _ in range(count)], count)
    rows['per estimate: torque command (driver._command)'] = _cpu_us(
        lambda: [d._command(e, t_ns) for _ in range(count)], count)
    rows['per estimate: external torques (ExternalTorques.update)'] = _cpu_us(
        lambda: [d.external.update(e, est.known_torque(e.t, d._tau_motor))
                 for _ in range(count)], count)
    rows['per estimate: serialised bytes filled (4 messages)'] = _cpu_us(
        lambda: [raw.fill(t_ns, e, out.joint_effort, out.command) for _ in range(count)], count)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    try:
        from mbfg_ros.ros import estimator_node as N
        from rclpy.parameter import Parameter

        node = N.EstimatorNode(context=ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in _params().items()])
        rows['the node clock read (EstimatorNode._now_ns)'] = _cpu_us(
            lambda: [node._now_ns() for _ in range(count)], count)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--count', type=int, default=3000, help='messages / estimates each')
    a = ap.parse_args(argv)
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    domain = 100 + os.getpid() % 100
    rows = intake(a.count, domain)
    rows['one estimate published (4 topics, each subscribed)'] = publishing(a.count, domain)
    rows['an executor turn of the loop, spin_once(0)'] = executor_turn(300, domain)
    print(f'the node\'s edge, UR5, {a.count} each, thread CPU µs per item '
          f'(load average {os.getloadavg()[0]:.1f}; RMW '
          f'{os.environ.get("RMW_IMPLEMENTATION", "default")})\n')
    print('| item | rclpy messages (callback designs; event handlers in every turn) | '
          'bytes (the loop now; event handlers once a second) |')
    print('|---|---|---|')
    for label, (old, new) in rows.items():
        print(f'| {label} | {old:.1f} | {new:.1f} |')
    print('\nthe loop\'s steps without DDS, thread CPU µs per reading / estimate '
          '(per_reading)\n')
    print('| step | µs |\n|---|---|')
    for label, us in per_reading(a.count, domain).items():
        print(f'| {label} | {us:.2f} |')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
