"""``mbfg-simulate``: forward dynamics of a mechanism YAML with the factor graph.

Writes ``t, q0.., qd0.., qdd0.., phi_norm`` as CSV (one row per step,
t = 0 included), prints a summary (steps, ms per step, max |Φ|, energy drift)
and optionally plots q, q̇ and |Φ|.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ..dynamics import load_system
from ..errors import MbfgError
from ..forward import (COORDINATES, IC_BASES, INTEGRATORS, SOLVERS, ForwardConfig,
                       Trajectory, energy, simulate)
from .common import Progress, run_cli

__all__ = ['main', 'write_csv', 'plot_trajectory']

PROG = 'mbfg-simulate'


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument('config', help='mechanism YAML file')
    p.add_argument('--duration', type=float, default=5.0, help='simulated time [s] (5)')
    p.add_argument('--dt', type=float, default=1e-3, help='time step [s] (0.001)')
    p.add_argument('--window', type=int, default=2, help='states in the window Nw (2)')
    p.add_argument('--coordinates', choices=COORDINATES, default='dependent')
    p.add_argument('--ic-basis', choices=IC_BASES, default=ForwardConfig.ic_basis,
                   help='independent coordinates: tangent (z = Nᵀq, re-chosen each step; '
                        'default) or coordinates (z ⊂ q as in seed 000, switched near '
                        'singular poses)')
    p.add_argument('--integrator', choices=INTEGRATORS, default='trapezoidal')
    p.add_argument('--solver', choices=SOLVERS, default=ForwardConfig.solver)
    p.add_argument('--output', '-o', type=Path, help='CSV file to write')
    p.add_argument('--plot', type=Path, help='PNG file with q, q̇ and |Φ| against t')
    p.add_argument('--quiet', action='store_true', help='no progress bar')
    return p


def write_csv(path: Path, traj: Trajectory) -> None:
    """One row per step: t, q, q̇, q̈, ‖Φ(q)‖."""
    n = traj.q.shape[1]
    header = ','.join(['t'] + [f'{v}{i}' for v in ('q', 'qd', 'qdd') for i in range(n)]
                      + ['phi_norm'])
    data = np.column_stack((traj.t, traj.q, traj.qd, traj.qdd, traj.phi_norm))
    try:
        np.savetxt(path, data, delimiter=',', header=header, comments='', fmt='%.12g')
    except OSError as exc:
        raise MbfgError(f'{path}: cannot write: {exc.strerror}') from None


def plot_trajectory(path: Path, traj: Trajectory, names: tuple[str, ...], title: str) -> None:
    """q and q̇ against t, and ‖Φ‖ on a log axis (matplotlib, Agg backend)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for i, name in enumerate(names):
        axes[0].plot(traj.t, traj.q[:, i], label=name)
        axes[1].plot(traj.t, traj.qd[:, i], label=name)
    axes[0].set_ylabel('q')
    axes[1].set_ylabel('q̇')
    axes[0].legend(fontsize='small', ncol=4)
    axes[2].semilogy(traj.t, np.maximum(traj.phi_norm, 1e-18))
    axes[2].set_ylabel('‖Φ(q)‖')
    axes[2].set_xlabel('t [s]')
    axes[0].set_title(title)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise MbfgError(f'{path}: cannot write: {exc.strerror}') from None
    finally:
        plt.close(fig)


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if not (args.duration > 0):
        raise MbfgError(f'--duration must be > 0, got {args.duration}')
    config = ForwardConfig(dt=args.dt, window=args.window, coordinates=args.coordinates,
                           ic_basis=args.ic_basis,
                           integrator=args.integrator, solver=args.solver)
    system = load_system(args.config)
    progress = Progress(args.duration, 'simulating', enabled=not args.quiet)
    start = time.perf_counter()
    try:
        traj = simulate(system, args.duration, config, progress=progress)
    finally:
        progress.close()
    elapsed = time.perf_counter() - start
    steps = len(traj.t) - 1
    E = energy(system, traj.q, traj.qd)
    scale = max(np.abs(E).max(), 1e-12)
    print(f'{system.mech.name}: {steps} steps of {config.dt:g} s ({config.coordinates} '
          f'coordinates, {config.integrator}, window {config.window}, solver {config.solver})')
    print(f'  time per step   {1e3 * elapsed / max(steps, 1):.3f} ms')
    print(f'  max |Phi(q)|    {traj.phi_norm.max():.3e}')
    print(f'  energy drift    {(E[-1] - E[0]) / scale:+.3e} (relative; meaningful for '
          'gravity-only mechanisms)')
    if args.output:
        write_csv(args.output, traj)
        print(f'  wrote {args.output}')
    if args.plot:
        plot_trajectory(args.plot, traj, system.names, f'{system.mech.name}: forward dynamics')
        print(f'  wrote {args.plot}')
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mbfg-simulate`` (user errors: one line, exit 2)."""
    return run_cli(_main, argv, PROG)


if __name__ == '__main__':
    raise SystemExit(main())
