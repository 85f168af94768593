#!/usr/bin/env python3
"""The live loop's CPU governor on a machine whose speed comes and goes (issue 24).

A shared VM runs the node's work 1.5-2x slower for tens of milliseconds at a time (the
machine probe's 90th percentile 30-80 % over its median, ``bench/probe.py``). This script
runs :class:`mbfg_ros.ros.governor.TickGovernor` as the live loop runs it (one decision per
1 kHz grid tick, its charge from the process clock) on synthetic cost traces: a smoother
tick, a prediction and the loop's other work per period at the UR5's and the four-bar's
live costs (``bench/node_throughput.py --profile``), each times the machine's slowness in
that period. Beside the governor as it is (a reserve of ``RESERVE_PERIODS`` periods' budget
kept for predictions, ``BANK_PERIODS`` banked), the same class with the fifth and sixth
sessions' setting (bank 4 periods, no reserve) in the same run: the share of grid ticks
that get an estimate, of smoother ticks, the CPU per wall second against the 0.6 budget,
and the widest smoother spacing (≤ ``predict_max_spacing``: ``--spacing``, by default the
node's, 5).

    .venv/bin/python bench/governor_bursts.py [--periods 20000] [--spacing N]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mbfg_ros.ros.governor import (BANK_PERIODS, RESERVE_PERIODS, SMOOTH,  # noqa: E402
                                   THIN, TickGovernor, dry_run)
from mbfg_ros.ros.params import ESTIMATOR_PARAMS, defaults  # noqa: E402

PERIOD = 1e-3
LOAD = 0.6
SPACING = int(defaults(ESTIMATOR_PARAMS)['predict_max_spacing'])   # the node's default
COSTS = {'ur5': (0.50e-3, 0.12e-3, 0.19e-3),          # smoother, prediction, other (s)
         'fourbar': (0.42e-3, 0.17e-3, 0.18e-3)}


def run(gov: TickGovernor, costs: tuple[float, float, float], slow: np.ndarray
        ) -> tuple[float, float, float, int]:
    """(share of grid ticks with an estimate, share smoothed, CPU per wall second, widest
    smoother spacing) of ``gov`` over the periods of ``slow`` (:func:`dry_run`)."""
    kinds, share = dry_run(gov, *costs, slow.tolist())
    k = np.array(kinds)
    at = np.flatnonzero(k == SMOOTH)
    return (float((k != THIN).mean()), float((k == SMOOTH).mean()), share,
            int(np.diff(at).max()) if at.size > 1 else 0)


def traces(periods: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The machines: steady, steady 20 % slower, three kinds of slow stretches, noise."""
    rng = np.random.default_rng(seed)

    def stretches(share: float, factor: float, length: int) -> np.ndarray:
        slow = np.ones(periods)
        for k in range(0, periods, length):
            if rng.random() < share:
                slow[k:k + length] = factor
        return slow
    return {'steady': np.ones(periods), 'steady, 1.2x slower': np.full(periods, 1.2),
            '1.4x in 50 % of 100 ms stretches': stretches(0.5, 1.4, 100),
            '1.5x in 40 % of 20 ms stretches': stretches(0.4, 1.5, 20),
            '1.8x in 30 % of 50 ms stretches': stretches(0.3, 1.8, 50),
            'log-normal per period, σ 0.3': np.exp(rng.normal(0.0, 0.3, periods))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--periods', type=int, default=20000, help='1 kHz grid ticks per row')
    ap.add_argument('--spacing', type=int, default=SPACING, metavar='N',
                    help=f'the governor\'s predict_max_spacing (default: the node\'s, {SPACING})')
    args = ap.parse_args(argv)
    if args.spacing < 1:
        ap.error(f'--spacing {args.spacing}: must be >= 1')
    print(f'TickGovernor, load {LOAD}, predict_max_spacing {args.spacing}, {args.periods} grid '
          f'ticks at 1 kHz; now: bank {BANK_PERIODS} / reserve {RESERVE_PERIODS} periods; '
          'before: bank 4 / reserve 0')
    print('| machine | robot | estimates (share of grid ticks) before → now | smoothed '
          'before → now | CPU per s before → now | widest spacing before / now |')
    print('|---|---|---|---|---|---|')
    for name, slow in traces(args.periods).items():
        for robot, costs in COSTS.items():
            b = run(TickGovernor(LOAD, PERIOD, args.spacing, 4, 0), costs, slow)
            n = run(TickGovernor(LOAD, PERIOD, args.spacing), costs, slow)
            print(f'| {name} | {robot} | {b[0]:.3f} → {n[0]:.3f} | {b[1]:.2f} → {n[1]:.2f} | '
                  f'{b[2]:.3f} → {n[2]:.3f} | {b[3]} / {n[3]} |')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
