#!/usr/bin/env python3
"""How fast this machine runs right now: a fixed piece of Python and small-array numpy work
timed on the thread CPU clock (issue 24).

The estimator's tick is a few hundred Python-level calls around small numpy, Pinocchio and
GTSAM calls; on a shared virtual machine their thread CPU time moves by 15-50 % within the
hour (another guest on the host, caches, the clock's rate), while the code does not change.
A benchmark that reports absolute times against a target therefore prints this probe
measured in the same run beside them: the same work, the same interpreter, so a slower row
taken while the probe was slower is the machine, not the code.

:func:`reference_work` is the unit (~1 ms here when the machine is quick). As a process,
``python bench/probe.py OUT`` times it every ``--every`` seconds until stopped (SIGTERM or
SIGINT), one line per sample (wall ns, thread CPU µs) appended to OUT: started beside a
live benchmark row, it tells how fast the machine was during that row, for ~0.5 % of a
core.

    .venv/bin/python bench/probe.py [--calibrate N]   # print N samples' median (µs)
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ['reference_work', 'calibrate', 'before_after', 'spread', 'read_samples']


def reference_work(rounds: int = 150) -> float:
    """Thread CPU µs of ``rounds`` rounds of what a tick is made of: a 27-element state
    split and stacked, a 9x9 product, a small solve, a dict and a few Python floats."""
    x = np.linspace(0.0, 1.0, 27)
    M = np.eye(9) + 0.01 * np.arange(81.0).reshape(9, 9) / 81.0
    c0 = time.thread_time_ns()
    acc = 0.0
    for k in range(rounds):
        q, qd, qdd = x[:9], x[9:18], x[18:]
        g = np.concatenate((q + 0.001 * qd, qd + 0.001 * qdd, qdd))
        r = np.dot(M, g[:9])
        s = np.linalg.solve(M, r)
        d = {'ticks': k, 'late': 0}
        acc += float(s[0]) * 1e-9 + d['ticks'] * 0.0 + max(r[1], 0.0) * 1e-12
    if acc != acc:                          # keep the work observable
        raise FloatingPointError
    return (time.thread_time_ns() - c0) / 1e3


def calibrate(n: int = 30) -> float:
    """The median of ``n`` samples of :func:`reference_work` (µs), after one warm-up."""
    reference_work()
    return float(np.median([reference_work() for _ in range(n)]))


def before_after(before: float, after: float) -> str:
    """The line a benchmark prints under its timings: the probe (:func:`calibrate`, µs)
    taken before and after its rows."""
    return ('Machine probe (bench/probe.py, the same fixed work timed before and after the '
            f'rows): {before:.0f} / {after:.0f} µs; the ticks scale with it (BENCHMARKS.md: '
            'its value when this machine runs quick)')


def spread(samples: list[float]) -> tuple[float, float]:
    """(median, worst 1-in-10) of ``samples`` (µs; NaN, NaN for none): how fast the
    machine ran during a benchmark row (``bench/node_throughput.py``'s column)."""
    if not samples:
        return float('nan'), float('nan')
    return float(np.median(samples)), float(np.percentile(samples, 90))


def read_samples(path: Path) -> list[float]:
    """The µs column of a probe process's file (empty if it wrote none). The file is read
    while the probe still runs: a line it has not finished is skipped, not the file."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(float(line.split()[1]))
        except (IndexError, ValueError):
            continue
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out', type=Path, nargs='?', help='append samples here until stopped')
    ap.add_argument('--every', type=float, default=0.25, help='seconds between samples')
    ap.add_argument('--calibrate', type=int, default=0, metavar='N',
                    help='print the median of N samples (µs) and exit')
    args = ap.parse_args(argv)
    if args.calibrate or args.out is None:
        print(f'{calibrate(args.calibrate or 30):.1f}')
        return 0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    reference_work()
    with open(args.out, 'a') as f:
        while not stop:
            f.write(f'{time.time_ns()} {reference_work():.1f}\n')
            f.flush()
            time.sleep(args.every)
    return 0


if __name__ == '__main__':
    sys.exit(main())
