"""Simulate the solo12 quadruped in MuJoCo and record a rosbag2 of standard messages.

    python scripts/simulate_quadruped.py --scenario stand|sway|push|trot --duration S --out BAG
        [--seed N] [--storage mcap|sqlite3] [--compress none|file|message] [--force]

The simulation, controller and sensor models are bench/quadruped/sim.py's; the topics are
bench/quadruped/bag.py's (docs/floating-base.md lists them). Physics and every output at
1 kHz. An existing BAG is refused unless --force (then replaced only if it is a rosbag2
bag, atomically: an interrupted run leaves the old bag). Progress goes to stderr once per
simulated second on runs longer than 5 s.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.quadruped.sim import SCENARIOS, simulate  # noqa: E402
from bench.quadruped.bag import write_bag  # noqa: E402
from mbfg_ros.cli.common import run_cli  # noqa: E402
from mbfg_ros.core.output import check_output  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog='simulate_quadruped.py',
                                 description=__doc__.split('\n\n')[0])
    ap.add_argument('--scenario', choices=SCENARIOS, default='trot')
    ap.add_argument('--duration', type=float, default=10.0, help='simulated seconds (10)')
    ap.add_argument('--out', required=True, help='rosbag2 directory to write')
    ap.add_argument('--seed', type=int, default=0, help='sensor noise seed (0)')
    ap.add_argument('--storage', choices=('mcap', 'sqlite3'), default='mcap')
    ap.add_argument('--compress', choices=('none', 'file', 'message'), default='none',
                    help="rosbag2 zstd compression ('message': sqlite3 only)")
    ap.add_argument('--force', action='store_true', help='replace an existing bag')
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    a = ap.parse_args(argv)
    if not 0.0 < a.duration <= 3600.0:
        ap.error(f'--duration {a.duration}: must be in (0, 3600] s')
    if a.compress == 'message' and a.storage != 'sqlite3':
        ap.error('--compress message needs --storage sqlite3 (MCAP has file compression)')
    check_output(a.out, 'bag', force=a.force, directory=True)
    report = None
    if a.duration > 5.0:
        def report(t: float) -> None:
            print(f'simulated {t:.0f}/{a.duration:.0f} s', file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    run = simulate(a.scenario, a.duration, seed=a.seed, progress=report)
    t_sim = time.perf_counter() - t0
    n = write_bag(run, a.out, a.storage, '' if a.compress == 'none' else a.compress)
    walked = float(((run.p[1:, :2] - run.p[:-1, :2]) ** 2).sum(axis=1).__pow__(0.5).sum())
    print(f'{a.out}: {a.scenario}, {a.duration:g} s, {n} messages; base moved {walked:.2f} m, '
          f'ends at x {run.p[-1, 0]:+.2f} y {run.p[-1, 1]:+.2f} z {run.p[-1, 2]:.3f} m'
          f'{" (FELL: the trunk touched the floor)" if run.fell else ""}; '
          f'simulated in {t_sim:.1f} s')
    return 1 if run.fell else 0


if __name__ == '__main__':
    sys.exit(run_cli(main, prog='simulate_quadruped.py'))
