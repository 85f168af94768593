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

import numpy as np

from ..core.end_stops import EndStopLog
from ..core.errors import MbfgError
from ..simulation.forward import (
    COORDINATES,
    IC_BASES,
    INTEGRATORS,
    SOLVERS,
    ForwardConfig,
    energy,
    simulate,
)
from ..loader import is_urdf
from .common import Progress, add_force_argument, check_writable, load_checked, plain, run_cli
from .sim_report import coordinate_units, energy_drift, plot_trajectory, report, write_csv
from .spatial import add_urdf_arguments, simulate_urdf

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
    p.add_argument('--no-limits', action='store_true', help='ignore the joint position '
                   'limits (default: a joint reaching its <limit lower/upper>, the overlay\'s '
                   'or the YAML\'s limits: position stops there: an inelastic end stop for a '
                   'URDF robot, a stiff one-sided spring-damper for a planar revolute joint; '
                   'velocity limits are reported when exceeded, never enforced)')
    return p


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
    if args.overlay or args.torque:
        raise MbfgError('--overlay and --torque are for URDF robots (CONFIG ending in .urdf)')
    config = ForwardConfig(dt=args.dt, window=args.window, coordinates=args.coordinates,
                           ic_basis=args.ic_basis,
                           integrator=args.integrator, solver=args.solver)
    system = load_checked(args.config, PROG)
    stops = None if args.no_limits else system.end_stop_model(config.dt)
    log = None if stops is None else EndStopLog(stops.stops.names)
    progress = Progress(args.duration, 'simulating', enabled=not args.quiet)
    start = time.perf_counter()
    try:
        traj = simulate(system, args.duration, config, progress=progress, end_stops=stops,
                        log=log)
    finally:
        progress.close()
    elapsed = time.perf_counter() - start
    steps = len(traj.t) - 1
    E = energy(system, traj.q, traj.qd)
    kinetic = np.array([0.5 * qd @ system.mass_matrix(q) @ qd for q, qd in zip(traj.q, traj.qd)])
    angles = {system.names[i] for i in system.angle_coordinates}
    name = system.description.name
    limits = ('joint limits ignored (--no-limits)' if stops is None else
              'joint position limits as end stops' if stops.stops.limited else
              'no joint limits')
    rc = report(args, traj, system.names, coordinate_units(system.names, angles),
                f'{name}: {steps} steps of {config.dt:g} s ({config.coordinates} '
                f'coordinates, {config.integrator}, window {config.window}, solver '
                f'{config.solver}; {limits})', f'{name}: forward dynamics', elapsed, E, kinetic)
    for line in log.lines(stops.stops, config.dt) if log is not None else ():
        print(f'  {line}')
    return rc


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mbfg-simulate`` (user errors: one line, exit 2)."""
    return run_cli(_main, argv, PROG)


if __name__ == '__main__':
    raise SystemExit(main())
