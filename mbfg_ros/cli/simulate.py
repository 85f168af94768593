"""mbfg-simulate: forward dynamics of a mechanism YAML with the factor graph, or of a URDF robot.

Writes t, the coordinates by name with their rates and accelerations (x1.position...,
x1.velocity..., x1.acceleration...; docs/cli.md, CSV columns), phi_norm as CSV (one row
per step, t = 0 included), prints a summary (steps, ms per step, max |Φ|, energy drift) and
optionally plots q, q̇ and |Φ|. A URDF robot (CONFIG.urdf, optional --overlay) is
simulated on its joint coordinates (mbfg_ros.spatial.simulate) with the same outputs,
columns named after the URDF joints.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..core.columns import TIME, columns
from ..core.errors import MbfgError
from ..simulation.forward import (
    COORDINATES,
    IC_BASES,
    INTEGRATORS,
    SOLVERS,
    ForwardConfig,
    Trajectory,
    energy,
    simulate,
)
from ..core.output import atomic_path
from .common import (Progress, add_force_argument, check_writable, load_checked, plain,
                     run_cli, save_figure)
from .spatial import add_urdf_arguments, is_urdf, simulate_urdf

__all__ = ['main', 'write_csv', 'plot_trajectory', 'energy_drift', 'coordinate_units',
           'report']

PROG = 'mbfg-simulate'


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=plain(__doc__.splitlines()[0]))
    p.add_argument('config', help='mechanism YAML file (README: "Mechanism YAML"), or a URDF '
                   'robot (.urdf; with --overlay for loops and actuators)')
    p.add_argument('--duration', type=float, default=5.0, help='simulated time [s] (5)')
    p.add_argument('--dt', type=float, default=1e-3, help='time step [s] (0.001)')
    p.add_argument('--window', type=int, default=2, help='states in the window Nw (2)')
    p.add_argument('--coordinates', choices=COORDINATES, default='dependent',
                   help='dependent: integrate all of q and hold the constraints by factors '
                        '(default); independent: integrate only the degrees of freedom z and '
                        'solve q from them every step (seed 000 Fig. 3)')
    p.add_argument('--ic-basis', choices=IC_BASES, default=ForwardConfig.ic_basis,
                   help='with --coordinates independent: tangent (z = Nᵀq, re-chosen each '
                        'step), coordinates (z ⊂ q as in seed 000, switched near singular '
                        'poses) or auto (default: the library picks)')
    p.add_argument('--integrator', choices=INTEGRATORS, default='trapezoidal',
                   help='trapezoidal: second order, keeps energy (default); euler: first '
                        'order, loses energy, for comparison')
    p.add_argument('--solver', choices=SOLVERS, default=ForwardConfig.solver,
                   help='anchored: a window whose oldest state is held, re-solved by '
                        'Gauss-Newton each step (default, fastest); anchored-lm: the same '
                        'with Levenberg-Marquardt (slower); incremental: ISAM2 fixed-lag '
                        'smoother (fast, long runs gain energy); batch: batch fixed-lag '
                        'smoother')
    p.add_argument('--output', '-o', type=Path, help='CSV file to write: t, per coordinate '
                   'or joint <name>.position, <name>.velocity, <name>.acceleration (x1.position, '
                   'x1.velocity...), then phi_norm')
    p.add_argument('--plot', type=Path, help='PNG file with q, q̇ and |Φ| against t')
    p.add_argument('--quiet', action='store_true', help='no progress bar')
    add_force_argument(p)
    add_urdf_arguments(p)
    p.add_argument('--torque', help='URDF robots: constant actuator torques, '
                   'joint=value[,joint=value...] [N·m or N] (default: none, a passive fall)')
    p.add_argument('--no-limits', action='store_true', help='URDF robots: ignore the joint '
                   'position limits (default: a joint reaching its <limit lower/upper> or the '
                   'overlay\'s limits stops there, an inelastic end stop; velocity limits are '
                   'reported when exceeded, never enforced)')
    return p


def write_csv(path: Path, traj: Trajectory, names: Sequence[str] | None = None) -> None:
    """One row per step: t, q, q̇, q̈, ‖Φ(q)‖; columns named after the coordinates as every
    CSV is (:mod:`mbfg_ros.core.columns`: ``x1.position``, ``x1.velocity``,
    ``x1.acceleration``...; ``q0``... when no names are given)."""
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


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if not (args.duration > 0):
        raise MbfgError(f'--duration must be > 0, got {args.duration}')
    if not (args.dt > 0):
        raise MbfgError(f'--dt must be > 0, got {args.dt}')
    if args.dt > args.duration:
        raise MbfgError(f'--dt {args.dt:g} s is longer than --duration {args.duration:g} s: '
                        'there would be no step to take; use a smaller --dt or a longer '
                        '--duration')
    inputs = (args.config, args.overlay)
    check_writable(args.output, 'CSV', args.force, inputs)
    check_writable(args.plot, 'plot', args.force, inputs)
    if is_urdf(args.config):
        return simulate_urdf(args, PROG)
    if args.overlay or args.torque or args.no_limits:
        raise MbfgError('--overlay, --torque and --no-limits are for URDF robots (CONFIG ending '
                        'in .urdf)')
    config = ForwardConfig(dt=args.dt, window=args.window, coordinates=args.coordinates,
                           ic_basis=args.ic_basis,
                           integrator=args.integrator, solver=args.solver)
    system = load_checked(args.config, PROG)
    progress = Progress(args.duration, 'simulating', enabled=not args.quiet)
    start = time.perf_counter()
    try:
        traj = simulate(system, args.duration, config, progress=progress)
    finally:
        progress.close()
    elapsed = time.perf_counter() - start
    steps = len(traj.t) - 1
    E = energy(system, traj.q, traj.qd)
    kinetic = np.array([0.5 * qd @ system.mass_matrix(q) @ qd for q, qd in zip(traj.q, traj.qd)])
    angles = {system.names[i] for i in system.angle_coordinates}
    return report(args, traj, system.names, coordinate_units(system.names, angles),
                  f'{system.mech.name}: {steps} steps of {config.dt:g} s ({config.coordinates} '
                  f'coordinates, {config.integrator}, window {config.window}, solver '
                  f'{config.solver})', f'{system.mech.name}: forward dynamics', elapsed, E,
                  kinetic)


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


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mbfg-simulate`` (user errors: one line, exit 2)."""
    return run_cli(_main, argv, PROG)


if __name__ == '__main__':
    raise SystemExit(main())
