"""Play a quadruped bag's sensor topics over DDS in real time (its own process).

    python -m bench.quadruped.player BAG [--sim-time] [--wrenches] [--no-contacts]
                                         [--bad-every K] [--rate R] [--match-timeout S]

For the floating-base node's DDS tests (test/ros/test_floating_node.py) and its live bench
(bench/floating_node_throughput.py): reads the bag (:func:`bench.quadruped.bag.read_bag`)
and publishes, per 1 kHz sample, ``/joint_states`` (positions, velocities, efforts),
``/imu/base`` (frame ``base_link``), ``/feet/<FOOT>/contact`` (Bool) and, with
``--wrenches``, ``/feet/<FOOT>/wrench``; with ``--sim-time`` also ``/clock`` at each
sample's stamp. It waits until every topic has a subscriber (discovery, never a fixed
sleep), prints ``START <ns>`` (the stamp of sample 0: the wall clock 0.2 s later; sample k
is stamped ``START + (t_k − t_0)``) and publishes each sample when the wall clock reaches
its stamp (``--rate`` scales the pace, not the stamps), then prints ``DONE <late_ms_p99> <flow %>``
(its own lateness, p99; and the share of 2 ms slots in which it published anything: a
stall sends no data) and exits 0.

``--bad-every K`` adds, every K samples, three malformed messages: a JointState with a
wrong joint name, one with a NaN position, an Imu in a frame that is not on the robot
(``BAD <n>`` on stdout: the count of each kind published).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.quadruped.bag import FOOT_LINKS, read_bag  # noqa: E402
from mbfg_ros.ros import conversions as cv  # noqa: E402

NS = 1_000_000_000
SLOT_NS = 2_000_000
"""The slot of ``DONE``'s data-flow share: a 500 Hz consumer's period."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('bag')
    ap.add_argument('--sim-time', action='store_true', help='also publish /clock')
    ap.add_argument('--wrenches', action='store_true', help='publish /feet/<FOOT>/wrench')
    ap.add_argument('--no-contacts', action='store_true', help='no /feet/<FOOT>/contact')
    ap.add_argument('--bad-every', type=int, default=0, help='malformed messages every K')
    ap.add_argument('--rate', type=float, default=1.0, help='pace (1: real time)')
    ap.add_argument('--repeat', type=int, default=1, help='play the bag this many times '
                    '(stamps keep increasing; the base pose jumps back each time)')
    ap.add_argument('--match-timeout', type=float, default=60.0)
    a = ap.parse_args(argv)
    d = read_bag(a.bag)

    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    rclpy.init()
    node = rclpy.create_node('quadruped_player')
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    kit = cv.rclpy_kit()
    mk = cv.message_class
    pub_js = node.create_publisher(mk('JointState'), '/joint_states', qos)
    pub_imu = node.create_publisher(mk('Imu'), '/imu/base', qos)
    pubs = [pub_js, pub_imu]
    pub_c = [] if a.no_contacts else [
        node.create_publisher(mk('Bool'), f'/feet/{f}/contact', qos) for f in FOOT_LINKS]
    pub_w = [node.create_publisher(mk('WrenchStamped'), f'/feet/{f}/wrench', qos)
             for f in FOOT_LINKS] if a.wrenches else []
    pubs += pub_c + pub_w
    pub_clock = node.create_publisher(mk('Clock'), '/clock', qos) if a.sim_time else None
    clock = node.get_clock()

    deadline = time.monotonic() + a.match_timeout
    while not all(p.get_subscription_count() > 0 for p in pubs):
        if time.monotonic() > deadline:
            print('NO MATCH', flush=True)
            return 1
        time.sleep(0.02)
    names = list(d['joint_names'])
    bad_names = names[:-1] + ['not_a_joint']
    zero3 = np.zeros(3)
    n = len(d['t'])
    offsets = np.round((d['t'] - d['t'][0]) * NS).astype(np.int64)
    period = int(round(float(np.median(np.diff(d['t']))) * NS))
    span = int(offsets[-1]) + period
    start = clock.now().nanoseconds + NS // 5
    wall0 = time.monotonic_ns() + NS // 5          # sample 0 goes out at its stamp
    print(f'START {start}', flush=True)
    late: list[float] = []
    sent_ns: list[int] = []
    bad = 0
    Bool = mk('Bool')
    for rep in range(a.repeat):
        for k in range(n):
            t_ns = start + rep * span + int(offsets[k])
            due = wall0 + int((rep * span + int(offsets[k])) / a.rate)
            while (wait := due - time.monotonic_ns()) > 0:
                time.sleep(min(wait, 500_000) / NS)
            now_ns = time.monotonic_ns()
            late.append((now_ns - due) / 1e6)
            sent_ns.append(now_ns)
            if pub_clock is not None:
                pub_clock.publish(cv.clock_msg(kit, t_ns))
            pub_js.publish(cv.joint_state_msg(kit, t_ns, names, d['q'][k], d['qd'][k],
                                              d['tau'][k]))
            pub_imu.publish(cv.imu_msg(kit, t_ns, 'base_link', d['gyro'][k], d['acc'][k]))
            for i, p in enumerate(pub_c):
                p.publish(Bool(data=bool(d['contact'][k, i] > 0.5)))
            for i, p in enumerate(pub_w):
                p.publish(cv.wrench_msg(kit, t_ns, FOOT_LINKS[i], np.r_[zero3, d['force'][k, i]]))
            if a.bad_every and k % a.bad_every == a.bad_every // 2:
                pub_js.publish(cv.joint_state_msg(kit, t_ns, bad_names, d['q'][k]))
                q = d['q'][k].copy()
                q[0] = np.nan
                pub_js.publish(cv.joint_state_msg(kit, t_ns, names, q))
                pub_imu.publish(cv.imu_msg(kit, t_ns, 'not_a_frame', d['gyro'][k],
                                           d['acc'][k]))
                bad += 1
    if a.bad_every:
        print(f'BAD {bad}', flush=True)
    # the share of 2 ms slots (its wall clock, from sample 0's) in which it published: a
    # stalled player sends nothing meanwhile, a late but steady one still sends every slot
    sent = (np.asarray(sent_ns) - wall0) // SLOT_NS
    slots = max(1, -(-(int(sent_ns[-1]) - wall0) // SLOT_NS)) if sent_ns else 1
    flow = 100.0 * min(1.0, len(np.unique(sent)) / slots)
    print(f'DONE {np.percentile(late, 99):.3f} {flow:.1f}', flush=True)
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
