"""mbfg-inverse: inverse dynamics of a prescribed motion (staged factor graph) or a measured one.

    mbfg-inverse CONFIG --trajectory FILE [--coordinates I,J,...] [--actuators I,J,...]
                 --output FILE.csv [--plot FILE.png] [--reactions] [--staged|--batch]
                 [--window 31] [--order 5]
    mbfg-inverse CONFIG (--measured FILE.csv | --bag BAG [--topic T]) --joints A,B
                 [--position-columns ..] [--velocity-columns ..] [--effort-columns ..]
                 [--derivatives velocity|savgol|smoother] [--window N] [--order P]
                 [--jerk J] [--position-sigma S] [--velocity-sigma S] --output FILE.csv
    mbfg-inverse ROBOT.urdf [--overlay O.yaml] (--measured FILE.csv | --bag BAG) ...

A URDF robot takes the same measured-motion options (mbfg_ros.spatial.measured; its
--bag: sensor_msgs/JointState on --topic, or a trajectory_msgs/JointTrajectory as a
prescribed motion when --topic names one or the bag has no /joint_states); the overlay's
friction and rotors are in its torques (docs/real-arms.md).

Measured motion (mbfg_ros.planar.problems.measured): joint positions (and velocities, efforts)
from a CSV with a header row or from a rosbag2's sensor_msgs/JointState; the
derivatives are zero-phase Savitzky-Golay fits (``--derivatives velocity``:
measured velocities and their derivative; ``savgol``: positions only) or a
zero-lag GTSAM smoother over the whole log (``smoother``: constant-jerk model,
``--jerk``, ``--position-sigma``, ``--velocity-sigma``); the
torques are the direct inverse dynamics of the YAML model (friction and rotor
terms included) at every sample. With measured efforts it prints the torque
RMSE and correlation r per actuator, and the CSV gets ``effort_<actuator>``.

--window/--order set the Savitzky-Golay fit that starts the staged graph's
rates (default 31/5).

The trajectory file has a time column and one column per prescribed
coordinate (default: the YAML actuators' coordinates, else the default
independent coordinates). CSV columns: t,<actuator>.effort... (generalized
force on each actuated coordinate, positive when it pushes the coordinate
to increase), then with --reactions the joint reactions of
mbfg_ros.planar.problems.reactions: <joint>_on_<body>.fx/.fy for pins and sliders,
<joint>_on_<body>_m for the couples of angle constraints, rotational springs
and joint motors.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..core.columns import TIME, columns
from ..core.errors import MbfgError
from ..planar.problems.inverse import InverseConfig, InverseResult, inverse_dynamics
from ..planar.problems.measured import measured_inverse, torque_fit
from ..planar.model import Mechanism
from ..planar.problems.reactions import Reactions
from ..core.trajectory import load_trajectory
from ..core.output import atomic_path
from ..loader import is_urdf
from .common import (Progress, add_force_argument, check_writable, load_checked, plain,
                     run_cli, save_figure)
from .measured_options import add_measured_arguments, derivative_options, measured_logs
from .spatial import add_urdf_arguments, inverse_urdf, urdf_measured, urdf_system

__all__ = ['main', 'plot_inverse']


def _indices(mech, text: str, what: str) -> list[int]:
    items = [s.strip() for s in text.split(',') if s.strip()]
    if not items:
        raise MbfgError(f'--{what}: empty list')
    return [mech.coordinate(s, path=f'--{what}') for s in items]


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog='mbfg-inverse', description=plain(__doc__.split('\n')[0]))
    p.add_argument('config', help='mechanism YAML, or a URDF robot (.urdf; --overlay for loops, '
                   'actuators, friction and rotors)')
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument('--trajectory',
                     help='prescribed motion: a text file, one sample per line: time [s], '
                          'then one value per prescribed coordinate (rad or m), separated by '
                          'spaces or commas; lines starting with # or %% are comments; time '
                          'strictly increasing, at least 3 samples')
    src.add_argument('--measured', help='measured joint motion: CSV with a header row')
    src.add_argument('--bag', help='measured joint motion: rosbag2 with sensor_msgs/JointState; '
                     'for a URDF robot: a rosbag2 with a trajectory_msgs/JointTrajectory on '
                     '--topic (default /joint_trajectory), its velocities and accelerations '
                     'used when every point has them')
    p.add_argument('--coordinates', help='prescribed coordinates (indices or names, comma '
                   'separated); default: actuated coordinates')
    p.add_argument('--actuators', help='actuated coordinates (indices or names); default: '
                   'the YAML actuators, else the prescribed coordinates')
    add_measured_arguments(p)
    p.add_argument('--output', required=True, help='CSV file to write')
    p.add_argument('--plot', help='PNG file with the torques (and the reactions with '
                   '--reactions)')
    p.add_argument('--reactions', action='store_true', help='add joint reaction columns')
    p.add_argument('--batch', action='store_true', help='solve only the final graph '
                   '(same answer, faster) instead of the four stages')
    add_force_argument(p)
    add_urdf_arguments(p)
    args = p.parse_args(argv)
    inputs = (args.config, args.overlay, args.trajectory, args.measured, args.bag)
    check_writable(args.output, 'CSV', args.force, inputs)
    check_writable(args.plot, 'plot', args.force, inputs)
    if is_urdf(args.config):
        if urdf_measured(args):
            from ..spatial.measured import measured_inverse as spatial_measured_inverse
            system = urdf_system(args)
            return _measured(args, system, system.description, spatial_measured_inverse)
        return inverse_urdf(args, 'mbfg-inverse')
    if args.overlay:
        raise MbfgError('--overlay is for URDF robots (CONFIG ending in .urdf)')
    sys_ = load_checked(args.config, 'mbfg-inverse')
    mech = sys_.mech
    if args.trajectory is None:
        return _measured(args, sys_, mech, measured_inverse)
    if args.coordinates:
        z_idx = _indices(mech, args.coordinates, 'coordinates')
    elif mech.actuators and all(a.coordinate is not None for a in mech.actuators):
        z_idx = [a.coordinate for a in mech.actuators]
    else:
        z_idx = list(sys_.z_idx)
    act = _indices(mech, args.actuators, 'actuators') if args.actuators else None
    traj = load_trajectory(args.trajectory, columns=len(z_idx))
    bar = Progress(1.0, 'inverse dynamics')
    if args.window is not None and (args.window < 3 or args.window % 2 == 0):
        raise MbfgError(f'--window: the Savitzky-Golay window must be odd and >= 3, got '
                        f'{args.window}')
    if args.order is not None and not 2 <= args.order < (args.window or 31):
        raise MbfgError(f'--order: must be >= 2 and below the window, got {args.order}')
    sg = {k: v for k, v in (('sg_window', args.window), ('sg_order', args.order))
          if v is not None}
    res = inverse_dynamics(sys_, traj.t, traj.z, z_idx, act,
                           InverseConfig(staged=not args.batch, **sg), progress=bar.update)
    bar.close()
    names = _actuator_names(mech, res.actuators)
    cols = [res.t[:, None], res.tau]
    header = [TIME] + columns(names, 'effort')
    rx = None
    if args.reactions:
        from ..planar.problems.reactions import JointReactions
        jr = JointReactions(sys_)
        rx = [jr(res.q[k], res.qd[k], res.qdd[k], res.Q[k]) for k in range(len(res.t))]
        force = [k for k, kind in enumerate(rx[0].kinds) if kind in ('pin', 'slider')]
        couple = [k for k, kind in enumerate(rx[0].kinds) if kind not in ('pin', 'slider')]
        header += [f'{rx[0].labels[k]}.{c}' for k in force for c in ('fx', 'fy')]
        header += [f'{rx[0].labels[k]}.m' for k in couple]
        cols.append(np.array([np.concatenate((r.forces[force].ravel(), r.moments[couple]))
                              for r in rx]).reshape(len(res.t), -1))
    out = Path(args.output)
    with atomic_path(out, 'CSV') as tmp:        # issue 26: renamed into place on success
        np.savetxt(tmp, np.hstack(cols), delimiter=',', header=','.join(header), comments='',
                   fmt='%.10g')
    if args.plot:
        plot_inverse(Path(args.plot), mech, res, names, rx)
        print(f'wrote {args.plot}', file=sys.stderr)
    print(f'wrote {out} ({len(res.t)} rows)', file=sys.stderr)
    return 0


def plot_inverse(path: Path, mech: Mechanism, res: InverseResult, names: list[str],
                 rx: list[Reactions] | None) -> list[str]:
    """Actuator efforts against t; with reactions, a second panel of the reaction force
    magnitude at every joint on every body. Returns the panel titles."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    panels = 2 if rx else 1
    fig, axes = plt.subplots(panels, 1, figsize=(8, 4 * panels), sharex=True, squeeze=False)
    ax = axes[0][0]
    angles = {mech.coordinate_names[i] for i in range(mech.n - len(mech.relative), mech.n)}
    units = ['N·m' if mech.coordinate_names[i] in angles else 'N' for i in res.actuators]
    for j, n in enumerate(names):
        ax.plot(res.t, res.tau[:, j], label=f'{n} [{units[j]}]')
    titles = [f'{mech.name}: inverse dynamics, actuator efforts (generalized force on '
              'each actuated coordinate)']
    ax.set_ylabel('effort [N·m or N]')
    if rx:
        axr = axes[1][0]
        for k, kind in enumerate(rx[0].kinds):
            if kind in ('pin', 'slider') and rx[0].bodies[k] >= 0:
                axr.plot(res.t, [np.linalg.norm(r.forces[k]) for r in rx], label=rx[0].labels[k])
        axr.set_ylabel('|reaction force| [N]')
        titles.append('joint reactions: force on each body at each joint '
                      '(mbfg_ros.planar.problems.reactions)')
        axr.set_title(titles[1], fontsize=9)
        axr.legend(fontsize=7, ncol=3)
        axr.grid(True)
    for a, title in zip(axes[:, 0], titles[:1]):
        a.set_title(title, fontsize=9)
        a.legend()
        a.grid(True)
    axes[-1][0].set_xlabel('t [s]')
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    return titles


def _measured(args: argparse.Namespace, sys_, description, solve) -> int:
    """Inverse dynamics on a measured motion (CSV or bag), with the fit to measured efforts.
    ``description``: the system's edge description (its actuators name the joints);
    ``solve(sys_, log, options)``: the formulation's measured inverse dynamics."""
    log = measured_logs(args, description, [args.measured] if args.measured else [],
                        [args.bag] if args.bag else [])[0]
    opts = derivative_options(args, log)
    res = solve(sys_, log, opts)
    names = [a.name for a in description.actuators]
    cols = [res.t[:, None], res.tau]
    header = [TIME] + columns(names, 'effort')
    if res.effort is not None:
        cols.append(res.effort)
        header += columns(names, 'effort', 'measured')
    out = Path(args.output)
    with atomic_path(out, 'CSV') as tmp:
        np.savetxt(tmp, np.hstack(cols), delimiter=',', header=','.join(header), comments='',
                   fmt='%.10g')
    how = (f'jerk {opts.jerk:g}, position sigma {opts.position_sigma:g}, velocity sigma '
           f'{opts.velocity_sigma:g}') if opts.method == 'smoother' else \
        f'window {opts.window}, order {opts.order}'
    print(f'{log.source}: {len(res.t)} samples, derivatives {opts.method} ({how})')
    if res.effort is not None:
        have = [k for k in range(len(names)) if np.isfinite(res.effort[:, k]).all()]
        rmse, r = torque_fit(res.tau[:, have], res.effort[:, have], skip=opts.window // 2)
        for k, e, c in zip(have, rmse, r):
            print(f'  {names[k]}: torque RMSE {e:.4f} N m, r {c:.3f} (vs measured effort, '
                  f'{opts.window // 2} samples dropped at each end)')
    print(f'wrote {out} ({len(res.t)} rows)', file=sys.stderr)
    return 0


def _actuator_names(mech, act: tuple[int, ...]) -> list[str]:
    by_coord = {a.coordinate: a.name for a in mech.actuators if a.coordinate is not None}
    return [by_coord.get(i, mech.coordinate_names[i]) for i in act]


def main(argv: list[str] | None = None) -> int:
    return run_cli(_main, argv, prog='mbfg-inverse')


if __name__ == '__main__':
    raise SystemExit(main())
