#!/usr/bin/env python3
"""Live floating_estimator_node throughput over real DDS: the simulated Solo-12 at 1 kHz.

    python bench/floating_node_throughput.py [BAG] [--duration 10] [--frequency 500]
        [--busy] [--sim-time] [--contact-source topic|force]

Three processes talk over DDS on loopback (a private ROS_DOMAIN_ID):

* ``floating_estimator_node`` on the bundled config/urdf/solo12.urdf,
  config/urdf/solo12_floating.yaml and config/solo12_estimator.yaml (ticks at
  ``--frequency``, default 500 Hz: issue 28's live target);
* the player (``python -m bench.quadruped.player``) streaming the bag's 1 kHz joint_states
  (12 joints with efforts), base IMU and the four feet's contact Bools (``--contact-source
  force``: their WrenchStamped instead) in real time, stamped with the wall clock (and
  ``/clock`` with ``--sim-time``, the node then on ``use_sim_time``);
* this process, listening to ``~/odom`` and ``/diagnostics``.

Without BAG a ``--duration`` s trot is simulated first (bench/quadruped/sim.py) into a
temporary directory. ``--busy`` adds a process spinning on one of the two cores.

Printed per row: estimates received per second of data (in brackets: from the first
estimate on, the start-up's ``init_time`` left out), the node's CPU (% of one core,
from /proc over the play: all its threads, DDS's included) and its own thread CPU per
estimate (``ticks.cpu_ms_mean_all`` of /diagnostics: tick + publishing), the latency from an
estimate's stamp to its arrival here (p50 / p99, ms), the base velocity RMSE (base frame)
and the xy drift against the bag's truth beside leg odometry's on the same bag, readings
used and rejected, and the machine's load average; below it the player's own lateness and
the share of 2 ms slots in which it sent anything (a stalled player sends no data meanwhile:
the node has nothing to tick on) and the node's loop counters
(``loop.turns``, ``loop.behind``: turns a whole period late, ``loop.no_new_data``).
Issue 28's target: 500 estimates/s for the 12-joint quadruped within the controller-rate
budget scaled to the joints (DESIGN.md §8: 60 % of a core for a 6-joint arm at 1 kHz).
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench.floating_base import BIAS_WINDOW, LegKinematics, leg_odometry, quat_to_rot, yaw_of  # noqa: E402
from bench.quadruped.bag import read_bag, write_bag  # noqa: E402
from node_throughput import cpu_seconds, ros_env  # noqa: E402

NS = 1_000_000_000
URDF = REPO / 'config' / 'urdf' / 'solo12.urdf'
OVERLAY = REPO / 'config' / 'urdf' / 'solo12_floating.yaml'
PARAMS = REPO / 'config' / 'solo12_estimator.yaml'
NODE = '/floating_estimator_node'
SETTLE = 0.5


def _bag(args: argparse.Namespace, tmp: Path) -> Path:
    if args.bag:
        return Path(args.bag)
    from bench.quadruped.sim import simulate
    path = tmp / 'trot'
    print(f'simulating a {args.duration:g} s trot ...', file=sys.stderr)
    write_bag(simulate('trot', args.duration, seed=args.seed), path)
    return path


def _lines(proc: subprocess.Popen, out: list[str]) -> None:
    for line in proc.stdout:
        out.append(line.strip())


def run(args: argparse.Namespace, bag: Path, tmp: Path) -> dict:
    """One live row (module docstring)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from mbfg_ros.ros import conversions as cv
    from mbfg_ros.ros.floating_messages import message

    domain = 20 + os.getpid() % 70
    env = ros_env(domain)
    params = ['-p', f'urdf:={URDF}', '-p', f'overlay:={OVERLAY}', '-p',
              f'frequency:={args.frequency}', '-p', f'contact_source:={args.contact_source}']
    if args.sim_time:
        params += ['-p', 'use_sim_time:=true']
    log = tmp / 'node.log'
    procs = []
    node = subprocess.Popen([sys.executable, '-m', 'mbfg_ros.ros.floating_node', '--ros-args',
                             '--params-file', str(PARAMS), *params], env=env,
                            stdout=open(log, 'w'), stderr=subprocess.STDOUT, cwd=REPO)
    procs.append(node)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    mon = rclpy.create_node('mbfg_floating_bench', context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(mon)
    odom: list = []
    diags: list = []
    qos = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
    mon.create_subscription(message('nav_msgs/msg/Odometry'), f'{NODE}/odom',
                            lambda m: odom.append((time.time_ns(), m)), qos)
    mon.create_subscription(cv.message_class('DiagnosticArray'), '/diagnostics',
                            diags.append, qos)

    def spin_until(pred, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > end:
                raise SystemExit(f'timed out waiting for {what} (node log: {log})')
            ex.spin_once(timeout_sec=0.01)
    try:
        spin_until(lambda: mon.count_publishers(f'{NODE}/odom') > 0 and diags, 60,
                   'the node')
        if args.busy:
            procs.append(subprocess.Popen([sys.executable, '-c', 'while True: pass']))
        pargs = [sys.executable, '-m', 'bench.quadruped.player', str(bag)]
        if args.sim_time:
            pargs.append('--sim-time')
        if args.contact_source == 'force':
            pargs += ['--wrenches', '--no-contacts']
        player = subprocess.Popen(pargs, env=env, cwd=REPO, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        procs.append(player)
        lines: list[str] = []
        threading.Thread(target=_lines, args=(player, lines), daemon=True).start()
        spin_until(lambda: any(ln.startswith('START') for ln in lines), 60, 'the player')
        cpu0, wall0 = cpu_seconds(node.pid), time.monotonic()
        spin_until(lambda: player.poll() is not None, 3600, 'the player to finish')
        cpu1, wall1 = cpu_seconds(node.pid), time.monotonic()
        start = int(next(ln for ln in lines if ln.startswith('START')).split()[1])
        n_diag = len(diags)
        spin_until(lambda: len(diags) > n_diag + 1, 30, 'diagnostics after the run')
        load = os.getloadavg()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(2) if p is node else p.kill()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        ex.shutdown()
        mon.destroy_node()
        rclpy.shutdown(context=ctx)
    return score(bag, odom, diags, start, cpu1 - cpu0, wall1 - wall0, load, lines)


def score(bag: Path, odom: list, diags: list, start: int, cpu_s: float, wall_s: float,
          load: tuple, lines: list[str]) -> dict:
    d = read_bag(bag)
    n = len(d['t'])
    span = d['t'][-1] - d['t'][0]
    v_est, ks, lat, pos = [], [], [], []
    for arrival, m in odom:
        stamp = cv_stamp(m)
        k = int(round((stamp - start) / 1e6))
        lat.append((arrival - stamp) / 1e6)
        if 0 <= k < n and d['t'][k] - d['t'][0] >= SETTLE:
            ks.append(k)
            tw = m.twist.twist.linear
            v_est.append((tw.x, tw.y, tw.z))
            pp = m.pose.pose
            pos.append((pp.position.x, pp.position.y, pp.position.z,
                        pp.orientation.w, pp.orientation.x, pp.orientation.y,
                        pp.orientation.z))
    ks_a, v_a = np.array(ks), np.array(v_est)
    rmse = float(np.sqrt(np.mean(np.sum((v_a - d['v'][ks_a]) ** 2, axis=1))))
    kin = LegKinematics(joint_names=d['joint_names'])
    tr = leg_odometry(d, kin, d['gyro'][d['t'] <= BIAS_WINDOW].mean(axis=0))
    v_leg = np.einsum('kji,kj->ki', tr.R, tr.v)
    rmse_leg = float(np.sqrt(np.mean(np.sum((v_leg[ks_a] - d['v'][ks_a]) ** 2, axis=1))))
    k0, k1 = ks[0], ks[-1]
    walked = float(np.linalg.norm(np.diff(d['p'][k0:k1 + 1, :2], axis=0), axis=1).sum())
    p0, p1 = np.array(pos[0]), np.array(pos[-1])
    drift = _drift(p0[:3], p1[:3], yaw_of(quat_to_rot(p0[3:])), k0, k1, d)
    drift_leg = _drift(tr.p[k0], tr.p[k1], yaw_of(tr.R[k0]), k0, k1, d)
    v = {kv.key: kv.value for kv in diags[-1].status[0].values}
    done = next((ln.split() for ln in lines if ln.startswith('DONE')), ['DONE', 'nan'])
    late, flow = done[1], (done[2] if len(done) > 2 else 'nan')
    first = min(cv_stamp(m) for _, m in odom)
    flowing = span - (first - start) / 1e9          # from the first estimate (start-up over)
    return {'estimates_per_s': len(odom) / span, 'estimates_per_s_up': len(odom) / flowing,
            'player_flow_pct': flow, 'cpu_pct': 100.0 * cpu_s / wall_s,
            'tick_cpu_ms': v.get('ticks.cpu_ms_mean_all', '-'),
            'lat_p50': float(np.median(lat)), 'lat_p99': float(np.percentile(lat, 99)),
            'v_rmse': rmse, 'v_rmse_leg': rmse_leg, 'walked': walked,
            'drift_pct': 100 * drift / walked, 'drift_leg_pct': 100 * drift_leg / walked,
            'used': int(v['input.joint_states.used']) + int(v['input.imu.used']),
            'rejected': sum(int(x) for k, x in v.items() if k.startswith('input.rejected.')),
            'load': load, 'player_late_p99': late, 'status': v.get('estimate.status'),
            'loop': {k[5:]: v[k] for k in v if k.startswith('loop.')}}


def cv_stamp(m) -> int:
    return int(m.header.stamp.sec) * NS + int(m.header.stamp.nanosec)


def _drift(p0, p1, yaw_est0: float, k0: int, k1: int, d) -> float:
    yaw_true0 = yaw_of(quat_to_rot(d['quat'][k0]))
    c, s = math.cos(yaw_true0 - yaw_est0), math.sin(yaw_true0 - yaw_est0)
    dp = np.asarray(p1[:2]) - np.asarray(p0[:2])
    dp = np.array([c * dp[0] - s * dp[1], s * dp[0] + c * dp[1]])
    return float(np.linalg.norm(dp - (d['p'][k1, :2] - d['p'][k0, :2])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('bag', nargs='?', help='a quadruped bag (scripts/simulate_quadruped.py)')
    ap.add_argument('--duration', type=float, default=10.0, help='simulated trot, s')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--frequency', type=float, default=500.0, help='node ticks, Hz')
    ap.add_argument('--busy', action='store_true', help='one core kept busy')
    ap.add_argument('--sim-time', action='store_true', help='/clock and use_sim_time')
    ap.add_argument('--contact-source', choices=('topic', 'force'), default='topic')
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix='mbfg_floating_bench_') as tmp:
        bag = _bag(args, Path(tmp))
        r = run(args, bag, Path(tmp))
    print('| robot | inputs | ticks | load | estimates/s (after the start-up) | '
          'node CPU (% core) | '
          'tick+publish CPU (ms) | latency p50 / p99 (ms) | v RMSE (m/s) | leg odometry '
          'v RMSE | xy drift (%) | leg odometry xy drift (%) | used / rejected |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|---|')
    inputs = ('1 kHz JointState + Imu + 4 ' +
              ('Bool' if args.contact_source == 'topic' else 'WrenchStamped') +
              (' + /clock' if args.sim_time else ''))
    busy = 'busy core' if args.busy else 'quiet'
    la = '/'.join(f'{x:.2f}' for x in r['load'])
    print(f'| solo12 (12 joints) | {inputs} | {args.frequency:g} Hz | {busy}, load {la} | '
          f'{r["estimates_per_s"]:.0f} ({r["estimates_per_s_up"]:.0f}) | {r["cpu_pct"]:.0f} | '
          f'{r["tick_cpu_ms"]} | '
          f'{r["lat_p50"]:.2f} / {r["lat_p99"]:.2f} | {r["v_rmse"]:.4f} | '
          f'{r["v_rmse_leg"]:.4f} | {r["drift_pct"]:.2f} | {r["drift_leg_pct"]:.2f} | '
          f'{r["used"]} / {r["rejected"]} |')
    print(f'({r["walked"]:.2f} m walked in xy; the player\'s own lateness p99 '
          f'{r["player_late_p99"]} ms, it sent data in {r["player_flow_pct"]} % of the 2 ms '
          f'slots; final status {r["status"]}; the node\'s loop turns '
          f'{r["loop"]})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
