"""mbfg-statics: static equilibrium pose, its stability and the joint reactions.

    mbfg-statics CONFIG --output FILE.csv [--start NAME=VALUE,...] [--no-stable]
                 [--plot FILE.png]

Starts from the YAML pose (or the pose with the coordinates given by
--start assembled, e.g. --start crank=20deg), finds the nearest equilibrium by
Newton's method (seed 003 §6.1.2) and classifies it from the eigenvalues of
the reduced stiffness: stable, unstable, saddle or neutral. By default an
unstable equilibrium is left downhill along its negative-curvature direction
until a stable one is found (--no-stable keeps the first equilibrium).

The CSV has name,value rows: every coordinate of q, stability (the
verdict), stiffness_eig0.. (ascending), potential_energy, then the joint
reactions (see mbfg_ros.planar.problems.reactions): <joint>_on_<body>_fx/_fy for pins and
sliders, <slider>_normal, <joint>_on_<body>_m for the couples of angle
constraints and rotational springs, distance_<body>_<point>_<point>_tension
for the force each distance constraint carries. Exit status: 0 for an
equilibrium (any verdict with --no-stable), 1 when no stable equilibrium was
found, 2 for bad input or no convergence.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from ..core.errors import MbfgError
from ..planar.dynamics import System
from ..planar.problems.reactions import JointReactions, Reactions
from ..planar.problems.statics import Equilibrium, StaticsError, start_pose, static_equilibrium
from ..core.output import write_text_atomic
from .common import add_force_argument, check_writable, load_checked, run_cli, save_figure

__all__ = ['main', 'parse_start', 'plot_equilibrium']

PROG = 'mbfg-statics'


def parse_start(text: str) -> dict[str, float]:
    """``NAME=VALUE,...`` with VALUE in rad or m, or degrees with a ``deg`` suffix."""
    out: dict[str, float] = {}
    for item in (s.strip() for s in text.split(',')):
        if not item:
            continue
        name, sep, value = item.partition('=')
        if not sep or not name.strip():
            raise MbfgError(f'--start: expected NAME=VALUE, got {item!r}')
        value = value.strip()
        scale = 1.0
        if value.endswith('deg'):
            value, scale = value[:-3], math.pi / 180.0
        try:
            out[name.strip()] = float(value) * scale
        except ValueError:
            raise MbfgError(f'--start: {name.strip()}: not a number: {value!r}') from None
    if not out:
        raise MbfgError('--start: empty list')
    return out


def _csv_rows(sys_: System, eq: Equilibrium, rx: Reactions) -> list[str]:
    lines = ['name,value']
    lines += [f'{name},{v:.12g}' for name, v in zip(sys_.names, eq.q)]
    lines.append(f'stability,{eq.verdict}')
    lines += [f'stiffness_eig{k},{ev:.12g}' for k, ev in enumerate(eq.eigenvalues)]
    lines.append(f'potential_energy,{eq.energy:.12g}')
    for k, lab in enumerate(rx.labels):
        if rx.kinds[k] in ('pin', 'slider'):
            f = rx.forces[k]
            lines += [f'{lab}_fx,{f[0]:.12g}', f'{lab}_fy,{f[1]:.12g}']
        else:
            lines.append(f'{lab}_m,{rx.moments[k]:.12g}')
    lines += [f'{name}_normal,{v:.12g}' for name, v in rx.normal.items()]
    lines += [f'distance_{name}_tension,{v:.12g}' for name, v in rx.tension.items()]
    return lines


def plot_equilibrium(path: Path, sys_: System, eq: Equilibrium, rx: Reactions) -> list[str]:
    """The mechanism at equilibrium with the reaction forces on the ground and the pins
    (arrows), the verdict and the stiffness eigenvalues in the title. Returns the titles."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    mech = sys_.mech
    cons = sys_.constraints
    pos = cons.ext.of(eq.q)[cons.point_w]
    fig, ax = plt.subplots(figsize=(7, 6))
    for body in mech.bodies:
        pts = pos[list(body.points) + [body.points[0]]] if len(body.points) > 2 \
            else pos[list(body.points)]
        ax.plot(pts[:, 0], pts[:, 1], '-o', lw=3, ms=5, label=body.name)
    for s in mech.springs:
        pts = pos[list(s.points)]
        ax.plot(pts[:, 0], pts[:, 1], ':', color='0.4', lw=1.5)
    for i, p in enumerate(mech.points):
        if p.fixed:
            ax.plot(*pos[i], 'k^', ms=10)
    span = float(np.ptp(pos, axis=0).max()) or 1.0
    shown = [k for k, kind in enumerate(rx.kinds)
             if kind in ('pin', 'slider') and rx.bodies[k] >= 0]
    fmax = max([float(np.linalg.norm(rx.forces[k])) for k in shown] + [1e-12])
    for k in shown:
        f = rx.forces[k] / fmax * 0.25 * span
        ax.annotate('', xy=rx.at[k] + f, xytext=rx.at[k],
                    arrowprops=dict(arrowstyle='->', color='C3', lw=1.2))
        ax.text(*(rx.at[k] + f), f'{np.linalg.norm(rx.forces[k]):.3g} N', fontsize=7,
                color='C3')
    ax.set_aspect('equal', adjustable='datalim')
    ax.set_xlabel('x [m]')
    ax.set_ylabel('y [m]')
    eigs = ', '.join(f'{v:.4g}' for v in eq.eigenvalues)
    title = (f'{mech.name}: {eq.verdict} equilibrium (stiffness eigenvalues {eigs})\n'
             'red: reaction force on each body at its joints (scaled to the largest)')
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc='best')
    ax.grid(True, alpha=0.3)
    save_figure(fig, path)
    return [title]


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split('\n\n')[0].split(': ', 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split('\n\n', 2)[2])
    p.add_argument('config', help='mechanism YAML')
    p.add_argument('--output', required=True, help='CSV file to write')
    p.add_argument('--start', help='start pose: NAME=VALUE,... for coordinates (rad or m; '
                   '20deg for degrees); the others are assembled')
    p.add_argument('--stable', action=argparse.BooleanOptionalAction, default=True,
                   help='continue downhill from an unstable equilibrium (default: on)')
    p.add_argument('--plot', help='PNG of the mechanism at equilibrium with the reactions')
    add_force_argument(p)
    args = p.parse_args(argv)
    check_writable(args.output, 'CSV', args.force, (args.config,))
    check_writable(args.plot, 'plot', args.force, (args.config,))
    sys_ = load_checked(args.config, PROG)
    q0 = start_pose(sys_, parse_start(args.start)) if args.start else None
    try:
        eq = static_equilibrium(sys_, q0, stable=args.stable)
    except StaticsError as exc:
        if 'no stable equilibrium' not in str(exc):
            raise
        print(f'{PROG}: {exc}', file=sys.stderr)
        return 1
    zero = np.zeros(sys_.n)
    rx = JointReactions(sys_)(eq.q, zero, zero)
    out = Path(args.output)
    write_text_atomic(out, '\n'.join(_csv_rows(sys_, eq, rx)) + '\n', 'CSV')
    for q_seen, verdict in eq.visited:
        article = 'an' if verdict[0] in 'aeiou' else 'a'
        print(f'passed {article} {verdict} equilibrium at {_short(sys_, q_seen)}; '
              'went on downhill')
    eigs = ', '.join(f'{v:.6g}' for v in eq.eigenvalues)
    print(f'{eq.verdict} equilibrium at {_short(sys_, eq.q)} '
          f'({eq.iterations} iterations, max |residual| {eq.residual:.1e})')
    print(f'  reduced stiffness eigenvalues: {eigs}')
    if eq.verdict == 'neutral':
        print('  note: this equilibrium is neutral: the stiffness is zero along some direction, '
              'so nearby poses may be equilibria too (higher-order terms decide)')
    elif eq.verdict != 'stable':
        what = 'a saddle point' if eq.verdict == 'saddle' else eq.verdict
        print(f'  warning: this equilibrium is {what}; a small disturbance moves the '
              'mechanism away from it' + (' (run without --no-stable to go on downhill)'
                                          if not args.stable else ''))
    print(f'  wrote {out}')
    if args.plot:
        plot_equilibrium(Path(args.plot), sys_, eq, rx)
        print(f'  wrote {args.plot}')
    return 0


def _short(sys_: System, q: np.ndarray) -> str:
    return ', '.join(f'{sys_.names[i]}={q[i]:.6g}' for i in sys_.z_idx)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mbfg-statics`` (user errors: one line, exit 2)."""
    return run_cli(_main, argv, prog=PROG)


if __name__ == '__main__':
    raise SystemExit(main())
