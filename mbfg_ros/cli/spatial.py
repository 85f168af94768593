"""The URDF branch of ``mbfg-simulate`` and ``mbfg-inverse`` (README: "Spatial robots")."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from ..core.columns import TIME, columns
from ..core.errors import MbfgError
from ..core.trajectory import load_trajectory
from ..core.output import atomic_path
from .common import Progress, save_figure
from .sim_report import report

__all__ = ['add_urdf_arguments', 'simulate_urdf', 'inverse_urdf', 'urdf_system', 'urdf_measured']


def add_urdf_arguments(p: argparse.ArgumentParser) -> None:
    """--overlay and --backend, shared by both commands."""
    g = p.add_argument_group('URDF robots (CONFIG ending in .urdf)')
    g.add_argument('--overlay', help='YAML overlay for a URDF: loops, actuators, gravity, q0, '
                   'limits, joints (friction, rotors: docs/real-arms.md)')
    g.add_argument('--backend', choices=('auto', 'numpy', 'pinocchio'), default='auto',
                   help='tree dynamics: Pinocchio when installed (auto), or the package\'s '
                        'own numpy recursion')


def urdf_system(args: argparse.Namespace):
    """The ``SpatialSystem`` of CONFIG (a URDF) with --overlay and --backend
    (:func:`mbfg_ros.loader.load_mechanism`)."""
    from ..loader import load_mechanism
    return load_mechanism(args.config, args.overlay or '', args.backend)


_system = urdf_system


def urdf_measured(args: argparse.Namespace) -> bool:
    """True when a URDF's inverse dynamics is on measured motion: --measured CSV, or a --bag
    whose --topic carries sensor_msgs/JointState (a trajectory_msgs/JointTrajectory topic,
    or a bag without the default /joint_states, is a prescribed motion)."""
    if getattr(args, 'measured', None):
        return True
    if getattr(args, 'bag', None) is None:
        return False
    from ..core.bag import bag_topics
    topic = args.topic if args.topic.startswith('/') else '/' + args.topic
    return bag_topics(args.bag).get(topic) == 'sensor_msgs/msg/JointState'


def _units(system) -> list[str]:
    return ['rad' if k == 'revolute' else 'm' for k in system.model.joint_type]


def _torques(system, text: str | None) -> np.ndarray:
    """``--torque joint=value,...`` → actuator torques (0 for the others)."""
    tau = np.zeros(system.B.shape[1])
    if not text:
        return tau
    names = list(system.actuator_names)
    for item in text.split(','):
        name, sep, value = item.partition('=')
        name = name.strip()
        if not sep:
            raise MbfgError(f'--torque: expected joint=value, got {item!r}')
        if name not in names:
            raise MbfgError(f'--torque: {name!r} is not an actuated joint (actuators: '
                            f'{", ".join(names)})')
        try:
            tau[names.index(name)] = float(value)
        except ValueError:
            raise MbfgError(f'--torque: {name}: not a number: {value!r}') from None
    return tau


def simulate_urdf(args: argparse.Namespace, prog: str) -> int:
    """Forward dynamics of a URDF robot (``spatial.simulate``); same outputs as the planar."""
    from ..core.end_stops import EndStopLog
    from ..spatial.simulate import end_stops_of, simulate_spatial
    system = _system(args)
    tau = _torques(system, args.torque)
    stops = None if args.no_limits else end_stops_of(system)
    log = EndStopLog(tuple(system.names))
    progress = Progress(args.duration, 'simulating', enabled=not args.quiet)
    start = time.perf_counter()
    try:
        traj = simulate_spatial(system, args.duration, args.dt, args.integrator, tau,
                                progress=progress.update, end_stops=stops, log=log)
    finally:
        progress.close()
    elapsed = time.perf_counter() - start
    steps = len(traj.t) - 1
    E = np.array([system.energy(q, qd) for q, qd in zip(traj.q, traj.qd)])
    kinetic = np.array([0.5 * qd @ system.mass_matrix(q) @ qd
                        for q, qd in zip(traj.q, traj.qd)])
    limits = ('joint limits ignored (--no-limits)' if stops is None else
              'joint position limits as end stops' if stops.limited else 'no joint limits')
    rc = report(args, traj, system.names, _units(system),
                f'{Path(args.config).name}: {steps} steps of {args.dt:g} s ({system.n} joints, '
                f'{len(system.model.loops)} loop joints, {args.integrator}, backend '
                f'{type(system.dyn).__name__}; {limits})',
                f'{Path(args.config).stem}: forward dynamics', elapsed, E, kinetic)
    for line in log.lines(stops, args.dt) if stops is not None else ():
        print(f'  {line}')
    return rc


def inverse_urdf(args: argparse.Namespace, prog: str) -> int:
    """Inverse dynamics of a prescribed motion of a URDF robot (``spatial.inverse_trajectory``)."""
    from ..spatial.inverse_trajectory import inverse_trajectory
    if args.trajectory is None and args.bag is None:
        raise MbfgError('a URDF robot takes --trajectory FILE, --measured FILE.csv or --bag '
                        'BAG (sensor_msgs/JointState or trajectory_msgs/JointTrajectory)')
    system = _system(args)
    if args.coordinates:
        names = [s.strip() for s in args.coordinates.split(',') if s.strip()]
        bad = [s for s in names if s not in system.names]
        if bad:
            raise MbfgError(f'--coordinates: unknown joint {bad[0]!r} (joints: '
                            f'{", ".join(system.names)})')
        pres = [system.names.index(s) for s in names]
    else:
        pres = list(np.flatnonzero(system.model.actuated)) if system.model.loops \
            else list(range(system.n))
    sg = {k: v for k, v in (('window', args.window), ('order', args.order)) if v is not None}
    if args.bag is not None:
        from ..spatial.inverse_trajectory import load_joint_trajectory
        topic = args.topic if args.topic != '/joint_states' else '/joint_trajectory'
        t, z, zd, zdd = load_joint_trajectory(args.bag, topic, [system.names[i] for i in pres])
        sg.update(zd=zd, zdd=zdd)
    else:
        traj = load_trajectory(args.trajectory, columns=len(pres))
        t, z = traj.t, traj.z
    bar = Progress(1.0, 'inverse dynamics')
    try:
        res = inverse_trajectory(system, t, z, pres, progress=bar.update, **sg)
    finally:
        bar.close()
    names = list(system.actuator_names)
    out = Path(args.output)
    header = [TIME] + columns(names, 'effort')
    with atomic_path(out, 'CSV') as tmp:        # issue 26: renamed into place on success
        np.savetxt(tmp, np.column_stack([res.t, res.tau]), delimiter=',',
                   header=','.join(header), comments='', fmt='%.10g')
    if args.plot:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4))
        units = {j: u for j, u in zip(system.names, _units(system))}
        for k, n in enumerate(names):
            ax.plot(res.t, res.tau[:, k], label=f'{n} [{"N·m" if units[n] == "rad" else "N"}]')
        ax.set_title(f'{Path(args.config).stem}: inverse dynamics, joint torques', fontsize=9)
        ax.set_xlabel('t [s]')
        ax.set_ylabel('torque [N·m or N]')
        ax.legend(fontsize=8)
        ax.grid(True)
        fig.tight_layout()
        save_figure(fig, args.plot, dpi=120)
        print(f'wrote {args.plot}', file=sys.stderr)
    print(f'wrote {out} ({len(res.t)} rows)', file=sys.stderr)
    return 0
