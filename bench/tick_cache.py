#!/usr/bin/env python3
"""Memory traffic between ticks: why a live smoother tick may cost ~1.7x the offline one
(issue 24).

Live (``bench/node_throughput.py --trace``), the four-bar's smoother tick with its
publishing costs ~580 µs of thread CPU in a calm 0.5 s window at spacing ~1.7, against
~240 µs offline for the tick at spacing 2 (``bench/predicted_estimates.py``) and ~110 for
its publishing and command: between two
ticks the node's loop takes and converts messages, predicts and publishes, rclpy and the
middleware run, and the other processes share the machine's last-level cache. This script
ticks the estimator offline as ``bench/estimator_ab.py`` does (the four-bar of
config/fourbar.yaml and the UR5 + wrist IMU, 1 kHz readings 0.3 ms off the grid, a tick
every ``--every`` grid periods) and, between two ticks, reads ``MB`` megabytes of memory
(a numpy sum: another program's traffic through the caches, nothing the tick needs), at
lag 0.1 s (the live four-bar's) and 0.05 s (the UR5's). Thread CPU µs per tick, median and
p90 (``time.thread_time_ns``: the traffic itself is not counted).

    .venv/bin/python bench/tick_cache.py [--every 3] [--mb 0 4 16] [--duration 3]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / 'bench'
for p in (REPO, BENCH):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import estimator_ab as ab  # noqa: E402  (bench/estimator_ab.py: the rows' set-up)
from mbfg_ros.estimation.estimator import Estimator  # noqa: E402


def row(robot: str, every: int, mb: int, lag: float, duration: float) -> tuple[float, float]:
    """(median, p90) thread CPU µs per tick of ``robot`` with ``mb`` MB read between ticks."""
    if robot == 'fourbar':
        est, grid, recs = ab.setup_fourbar('mbfg_ros', 1000.0, duration)
    else:
        est, grid, recs = ab.setup('mbfg_ros', 'ur5.urdf', 'ur5_sensors.yaml', 1000.0,
                                   duration, True, 0.0)
    est = Estimator(est.sys, dataclasses.replace(est.config, lag_duration=lag))
    ticks, recs = ab.regrid(grid, recs, every, 0.0003)
    traffic = np.ones(mb * 131072) if mb else None      # 8-byte floats
    cpu = []
    for i, t in enumerate(ticks):
        for r in recs[i]:
            est.add(r)
        if traffic is not None:
            traffic.sum()
        c0 = time.thread_time_ns()
        est.tick(t)
        cpu.append(time.thread_time_ns() - c0)
    a = np.array(cpu[100:]) / 1e3
    return float(np.median(a)), float(np.percentile(a, 90))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--every', type=int, default=3, help='a tick every N grid periods')
    ap.add_argument('--mb', type=int, nargs='+', default=[0, 4, 16],
                    help='megabytes read between two ticks')
    ap.add_argument('--duration', type=float, default=3.0, help='simulated seconds per row')
    a = ap.parse_args(argv)
    print(f'A tick every {a.every} grid periods, 1 kHz readings 0.3 ms off the grid; '
          'thread CPU µs per tick, median / p90')
    print('| robot | lag s | ' + ' | '.join(f'{m} MB between ticks' for m in a.mb) + ' |')
    print('|---|---|' + '---|' * len(a.mb))
    for robot, lags in (('fourbar', (0.1, 0.05)), ('ur5', (0.05,))):
        for lag in lags:
            cells = [row(robot, a.every, m, lag, a.duration) for m in a.mb]
            print(f'| {robot} | {lag} | ' + ' | '.join(f'{m:.0f} / {p:.0f}' for m, p in cells)
                  + ' |', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
