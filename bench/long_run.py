"""A one-minute run of the four-bar (60,000 steps of 1 ms) with the default solver.

Checks what a long simulation must keep: accuracy against the independent
DOP853 reference (q RMSE over the whole minute, target <= 0.5 mm), the
constraints, the energy, and flat memory (resident set size at 60 s within
10 % of that at 10 s, read from /proc/self/statm). Prints a table every 10 s.
Run: ``python bench/long_run.py [--duration 60] [--solver anchored]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / 'test')]

import reference_fourbar as ref  # noqa: E402

from mbfg_ros.simulation.forward import SOLVERS, ForwardConfig, ForwardSimulator, energy  # noqa: E402
from mbfg_ros.planar.dynamics import load_system  # noqa: E402


def rss_mb() -> float:
    """Resident set size from /proc/self/statm (pages -> MB)."""
    with open('/proc/self/statm') as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf('SC_PAGE_SIZE') / 2 ** 20


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--duration', type=float, default=60.0)
    p.add_argument('--solver', choices=SOLVERS, default=ForwardConfig.solver)
    p.add_argument('--coordinates', choices=('dependent', 'independent'), default='dependent')
    args = p.parse_args(argv)
    dt = 1e-3
    steps = int(round(args.duration / dt))
    t = np.arange(steps + 1) * dt
    print(f'reference: DOP853 rtol 1e-12 over {args.duration:g} s ...', flush=True)
    r = ref.simulate(t)
    system = load_system(ROOT / 'config' / 'fourbars1.yaml')
    config = ForwardConfig(solver=args.solver, coordinates=args.coordinates)
    sim = ForwardSimulator(system, config)
    q = np.full((steps + 1, 4), np.nan)     # touched now: RSS then measures the solver
    qd = np.full((steps + 1, 4), np.nan)
    q[0], qd[0] = sim.q, sim.qd
    E0 = energy(system, sim.q, sim.qd)
    print(f'four-bar, {steps} steps, dt 1 ms, solver {config.solver}, '
          f'{config.coordinates} coordinates')
    head = (f'{"t [s]":>6} | {"RMSE so far mm":>14} | {"max err mm":>10} | {"max |Phi|":>9} | '
            f'{"energy drift":>12} | {"ms/step":>7} | {"RSS MB":>7}')
    print(head)
    print('-' * len(head))
    rss = {}
    start = time.perf_counter()
    block = time.perf_counter()
    phi_max = 0.0
    ok = True
    for k in range(1, steps + 1):
        try:
            _, q[k], qd[k], _ = sim.step()
        except Exception as exc:           # report, do not hide: the bench must not crash
            print(f'FAILED at t = {k * dt:.3f} s: {exc}')
            ok = False
            break
        if k % 1000 == 0:
            phi_max = max(phi_max, float(np.linalg.norm(system.constraints.phi(q[k]))))
        if k % 10000 == 0 or k == steps:
            now = time.perf_counter()
            n_block = 10000 if k % 10000 == 0 else k % 10000
            rss[k] = rss_mb()
            drift = (energy(system, q[k], qd[k]) - E0) / abs(E0)
            err = np.abs(q[:k + 1] - r.q[:k + 1])
            print(f'{k * dt:6.1f} | {1e3 * ref.rmse(q[:k + 1], r.q[:k + 1]):14.5f} | '
                  f'{1e3 * err.max():10.4f} | {phi_max:9.1e} | {drift:+12.2e} | '
                  f'{1e3 * (now - block) / n_block:7.3f} | {rss[k]:7.1f}', flush=True)
            block = now
    total = time.perf_counter() - start
    if not ok:
        return 1
    rmse = 1e3 * ref.rmse(q, r.q)
    print(f'total {total:.1f} s wall for {args.duration:g} s simulated '
          f'({1e3 * total / steps:.3f} ms/step)')
    verdict = [f'RMSE {rmse:.4f} mm (target <= 0.5): {"ok" if rmse <= 0.5 else "MISSED"}']
    if 10000 in rss and steps in rss:
        growth = rss[steps] / rss[10000] - 1.0
        verdict.append(f'RSS growth 10 s -> end {100 * growth:+.1f} % (target <= 10 %): '
                       f'{"ok" if growth <= 0.10 else "MISSED"}')
    print('; '.join(verdict))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
