"""Seed 000 Table 3 for this implementation, plus the direct per-tick call.

Prints CPU seconds of the factor-graph inverse dynamics (four-bar, 2000
samples of the seed's trajectory; pick-and-place, 1000 samples of a smooth
motion of both motors) beside the seed's C++ figures, for the single batch
and for the seed's four stages, and the median / p99 of one direct
virtual-power call (DirectInverseDynamics) on the four-bar.
Run: .venv/bin/python bench/inverse_dynamics.py
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from mbfg_ros.planar.problems.inverse import InverseConfig, inverse_dynamics
from mbfg_ros.planar.problems.inverse_direct import DirectInverseDynamics
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.core.trajectory import load_trajectory

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[1] / 'config'


def _cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def _direct_tau(sys_, res, z_idx) -> np.ndarray:
    """The direct per-tick torques at the factor graph's states."""
    direct = DirectInverseDynamics(sys_, z_idx)
    return np.array([direct(res.q[k], res.qd[k], res.qdd[k][z_idx]) for k in range(len(res.t))])


def main() -> None:
    four = load_system(ROOT / 'config' / 'fourbar_inverse.yaml')
    tr = load_trajectory(DATA / 'fourbars1-with-rel-angle-trajectory.txt', columns=1)
    pp = load_system(ROOT / 'config' / 'pick_and_place.yaml')
    t = np.arange(1000) * 0.005
    z = pp.q0[[20, 21]] + np.column_stack((0.3 * (1 - np.cos(2 * t)), -0.2 * np.sin(1.5 * t)))
    rows = []
    for staged in (False, True):
        cfg = InverseConfig(staged=staged)
        c4 = _cpu(lambda: inverse_dynamics(four, tr.t, tr.z, [4], config=cfg))
        cp = _cpu(lambda: inverse_dynamics(pp, t, z, [20, 21], config=cfg))
        rows.append(('four stages' if staged else 'one batch', c4, cp))
    try:
        import threadpoolctl  # noqa: F401
        blas = 'BLAS limited to 1 thread during the solve (threadpoolctl)'
    except ImportError:
        blas = 'threadpoolctl not installed: BLAS uses its default threads (slower)'
    print('Seed 000 Table 3: inverse dynamics CPU time (this machine, Python + GTSAM 4.3; '
          f'{blas})')
    print(f'{"mechanism":<18}{"n":>4}{"points":>8}{"seed (C++)":>12}'
          + ''.join(f'{r[0]:>14}' for r in rows) + f'{"target":>9}')
    print(f'{"Four bar linkage":<18}{four.n:>4}{2000:>8}{"5.3 s":>12}'
          + ''.join(f'{r[1]:>12.2f} s' for r in rows) + f'{"1.0 s":>9}')
    print(f'{"Parallel robot":<18}{pp.n:>4}{1000:>8}{"15.9 s":>12}'
          + ''.join(f'{r[2]:>12.2f} s' for r in rows) + f'{"3.0 s":>9}')

    # accuracy: against MSC Adams (opposite sign) and against the direct per-tick method
    adams = np.loadtxt(ROOT / 'test' / 'data' / 'InverseDynamics_4bars_MSC.tab', comments='%')
    print('\nAccuracy (one batch / four stages):')
    for staged in (False, True):
        cfg = InverseConfig(staged=staged)
        r4 = inverse_dynamics(four, tr.t, tr.z, [4], config=cfg)
        rp = inverse_dynamics(pp, t, z, [20, 21], config=cfg)
        d4 = _direct_tau(four, r4, [4])
        dp = _direct_tau(pp, rp, [20, 21])
        print(f'  {"four stages" if staged else "one batch":<12} four-bar vs Adams (2000 rows) '
              f'max {np.max(np.abs(r4.tau[:, 0] + adams[:, 1])):.4f} N m (target <= 0.05); '
              f'vs direct max {np.max(np.abs(r4.tau - d4)):.1e} N m (target <= 1e-6); '
              'pick-and-place vs direct max rel '
              f'{np.max(np.abs(rp.tau - dp)) / np.max(np.abs(dp)):.1e}')

    direct = DirectInverseDynamics(four)
    q, zdd = four.q0, np.array([1.0])
    qd = 0.7 * np.linalg.svd(four.constraints.phi_q(q))[2][-1]
    for _ in range(2000):
        direct(q, qd, zdd)
    ts = np.empty(20000)
    for k in range(len(ts)):
        t0 = time.perf_counter()
        direct(q, qd, zdd)
        ts[k] = time.perf_counter() - t0
    print(f'\nDirect inverse dynamics, one call (four-bar): median {1e6 * np.median(ts):.1f} µs,'
          f' p99 {1e6 * np.percentile(ts, 99):.1f} µs (target median <= 20 µs)')


if __name__ == '__main__':
    main()
