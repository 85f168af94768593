"""``mbfg-inverse``: inverse dynamics of a prescribed motion (staged factor graph).

    mbfg-inverse CONFIG --trajectory FILE [--coordinates I,J,...] [--actuators I,J,...]
                 --output FILE.csv [--plot FILE.png] [--reactions] [--staged|--batch]

The trajectory file has a time column and one column per prescribed
coordinate (default: the YAML actuators' coordinates, else the default
independent coordinates). CSV columns: ``t,tau_<actuator>...`` (generalized
force on each actuated coordinate, positive when it pushes the coordinate
to increase), then with ``--reactions`` the reaction force at every joint.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..dynamics import load_system
from ..errors import MbfgError
from ..inverse import InverseConfig, inverse_dynamics
from ..trajectory import load_trajectory
from .common import Progress, run_cli

__all__ = ['main']


def _indices(mech, text: str, what: str) -> list[int]:
    items = [s.strip() for s in text.split(',') if s.strip()]
    if not items:
        raise MbfgError(f'--{what}: empty list')
    return [mech.coordinate(s, path=f'--{what}') for s in items]


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog='mbfg-inverse', description=__doc__.split('\n')[0])
    p.add_argument('config', help='mechanism YAML')
    p.add_argument('--trajectory', required=True, help='time + one column per coordinate')
    p.add_argument('--coordinates', help='prescribed coordinates (indices or names, comma '
                   'separated); default: actuated coordinates')
    p.add_argument('--actuators', help='actuated coordinates (indices or names); default: '
                   'the YAML actuators, else the prescribed coordinates')
    p.add_argument('--output', required=True, help='CSV file to write')
    p.add_argument('--plot', help='PNG file with the torques')
    p.add_argument('--reactions', action='store_true', help='add joint reaction columns')
    p.add_argument('--batch', action='store_true', help='solve only the final graph '
                   '(same answer, faster) instead of the four stages')
    args = p.parse_args(argv)
    sys_ = load_system(args.config)
    mech = sys_.mech
    if args.coordinates:
        z_idx = _indices(mech, args.coordinates, 'coordinates')
    elif mech.actuators and all(a.coordinate is not None for a in mech.actuators):
        z_idx = [a.coordinate for a in mech.actuators]
    else:
        z_idx = list(sys_.z_idx)
    act = _indices(mech, args.actuators, 'actuators') if args.actuators else None
    traj = load_trajectory(args.trajectory, columns=len(z_idx))
    bar = Progress(1.0, 'inverse dynamics')
    res = inverse_dynamics(sys_, traj.t, traj.z, z_idx, act,
                           InverseConfig(staged=not args.batch), progress=bar.update)
    bar.close()
    names = _actuator_names(mech, res.actuators)
    cols = [res.t[:, None], res.tau]
    header = ['t'] + [f'tau_{n}' for n in names]
    if args.reactions:
        from ..reactions import joint_reactions
        rx = [joint_reactions(sys_, res.q[k], res.qd[k], res.qdd[k], res.Q[k])
              for k in range(len(res.t))]
        header += [f'{lab}_{c}' for lab in rx[0].labels for c in ('fx', 'fy')]
        cols.append(np.array([r.forces.ravel() for r in rx]))
    out = Path(args.output)
    np.savetxt(out, np.hstack(cols), delimiter=',', header=','.join(header), comments='',
               fmt='%.10g')
    if args.plot:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4))
        for j, n in enumerate(names):
            ax.plot(res.t, res.tau[:, j], label=n)
        ax.set_xlabel('t [s]')
        ax.set_ylabel('generalized force [N·m or N]')
        ax.legend()
        ax.grid(True)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
    print(f'wrote {out} ({len(res.t)} rows)', file=sys.stderr)
    return 0


def _actuator_names(mech, act: tuple[int, ...]) -> list[str]:
    by_coord = {a.coordinate: a.name for a in mech.actuators if a.coordinate is not None}
    return [by_coord.get(i, mech.coordinate_names[i]) for i in act]


def main(argv: list[str] | None = None) -> int:
    return run_cli(_main, argv, prog='mbfg-inverse')


if __name__ == '__main__':
    raise SystemExit(main())
