"""What ``mbfg-simulate`` prints and writes of a run, planar or URDF: the summary (time per
step, max |Φ|, energy drift), the CSV and the plot (issue 23: shared by ``cli.simulate`` and
``cli.spatial``, so their imports go one way)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import numpy as np

from ..core.columns import TIME, columns
from ..core.output import atomic_path
from ..simulation.forward import Trajectory
from .common import save_figure

__all__ = ['write_csv', 'plot_trajectory', 'energy_drift', 'coordinate_units', 'report']


def write_csv(path: Path, traj: Trajectory, names: Sequence[str] | None = None) -> None:
    """One row per step: t, q, q̇, q̈, ‖Φ(q)‖; columns named after the coordinates as every
    CSV is (:mod:`mbfg_ros.core.columns`: ``x1.position``, ``x1.velocity``,
    ``x1.acceleration``...; ``q0``... when no names are given; issue 30 item 1)."""
    n = traj.q.shape[1]
    names = list(names) if names is not None else [f'q{i}' for i in range(n)]
    header = ','.join([TIME] + columns(names, 'position') + columns(names, 'velocity')
                      + columns(names, 'acceleration') + ['phi_norm'])
    data = np.column_stack((traj.t, traj.q, traj.qd, traj.qdd, traj.phi_norm))
    with atomic_path(path, 'CSV') as tmp:        # issue 26: renamed into place on success
        np.savetxt(tmp, data, delimiter=',', header=header, comments='', fmt='%.12g')


def coordinate_units(names: tuple[str, ...], angles: set[str]) -> list[str]:
    """Unit of each coordinate: ``rad`` for relative angles, ``m`` for point coordinates."""
    return ['rad' if name in angles else 'm' for name in names]


def energy_drift(E: np.ndarray, kinetic: np.ndarray) -> tuple[float, float, float]:
    """(absolute drift E[-1] − E[0] [J], drift relative to the motion's energy scale, scale).

    The scale is the largest kinetic energy of the run (what the motion
    exchanges with the potential), not E itself, whose zero is arbitrary: a
    pendulum released from the horizontal has E ≈ 0.
    """
    scale = float(np.max(kinetic)) if len(kinetic) else 0.0
    drift = float(E[-1] - E[0]) if len(E) else 0.0
    return drift, (drift / scale if scale > 0 else float('nan')), scale


def plot_trajectory(path: Path, traj: Trajectory, names: tuple[str, ...], title: str,
                    units: list[str] | None = None) -> list[str]:
    """q and q̇ against t (units in the legend, beside the panels so it never covers a
    curve), and ‖Φ‖ on a log axis when the mechanism has constraints (an open URDF chain has
    none: no panel; issue 30 item 5); writes exactly ``path``. Returns the y-axis labels."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    units = units or ['m'] * len(names)
    constrained = bool(np.any(traj.phi_norm > 0))
    rows = 3 if constrained else 2
    ncol = 1 if len(names) <= 12 else 2
    fig, axes = plt.subplots(rows, 1, figsize=(9 + 1.6 * ncol, 3 * rows), sharex=True)
    for i, name in enumerate(names):
        axes[0].plot(traj.t, traj.q[:, i], label=f'{name} [{units[i]}]')
        axes[1].plot(traj.t, traj.qd[:, i], label=f'{name} [{units[i]}/s]')
    kinds = sorted(set(units), key=lambda u: u != 'm')
    labels = [f'q [{" or ".join(kinds)}]', f'q̇ [{" or ".join(u + "/s" for u in kinds)}]',
              '‖Φ(q)‖ [m² or m]'][:rows]
    for ax, label in zip(axes, labels):
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    for ax in axes[:2]:
        ax.legend(fontsize='small', ncol=ncol, loc='upper left', bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0)
    if constrained:
        axes[2].semilogy(traj.t, np.maximum(traj.phi_norm, 1e-18))
    axes[-1].set_xlabel('t [s]')
    axes[0].set_title(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    return labels


def report(args: argparse.Namespace, traj: Trajectory, names: Sequence[str], units: list[str],
           headline: str, title: str, elapsed: float, E: np.ndarray, kinetic: np.ndarray
           ) -> int:
    """The run's summary on the terminal (time per step, max |Φ|, energy drift), then the
    CSV and plot asked for; shared by the planar and the URDF paths."""
    steps = len(traj.t) - 1
    drift, rel, scale = energy_drift(E, kinetic)
    print(headline)
    print(f'  time per step   {1e3 * elapsed / max(steps, 1):.3f} ms')
    print(f'  max |Phi(q)|    {traj.phi_norm.max():.3e}' if np.any(traj.phi_norm > 0) else
          '  max |Phi(q)|    none (an open chain: no loop constraints)')
    print(f'  energy drift    {drift:+.3e} J ({rel:+.2e} of the largest kinetic energy, '
          f'{scale:.4g} J; meaningful for conservative mechanisms)')
    if args.output:
        write_csv(args.output, traj, names)
        print(f'  wrote {args.output}')
    if args.plot:
        plot_trajectory(args.plot, traj, tuple(names), title, units)
        print(f'  wrote {args.plot}')
    return 0
