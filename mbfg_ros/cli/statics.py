"""``mbfg-statics``: static equilibrium pose and joint reactions.

    mbfg-statics CONFIG --output FILE.csv

Starts from the YAML pose; writes one CSV row per quantity:
``name,value`` for every coordinate of q, then the reaction force
components at every joint (``<point>_on_<body>_fx``/``_fy``), then the
reduced stiffness eigenvalues (positive: stable).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..dynamics import load_system
from ..reactions import joint_reactions
from ..statics import static_equilibrium
from .common import run_cli

__all__ = ['main']


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog='mbfg-statics', description=__doc__.split('\n')[0])
    p.add_argument('config', help='mechanism YAML')
    p.add_argument('--output', required=True, help='CSV file to write')
    args = p.parse_args(argv)
    sys_ = load_system(args.config)
    eq = static_equilibrium(sys_)
    zero = np.zeros(sys_.n)
    rx = joint_reactions(sys_, eq.q, zero, zero)
    lines = ['name,value']
    lines += [f'{name},{v:.12g}' for name, v in zip(sys_.names, eq.q)]
    for lab, f in zip(rx.labels, rx.forces):
        lines += [f'{lab}_fx,{f[0]:.12g}', f'{lab}_fy,{f[1]:.12g}']
    for k, ev in enumerate(np.linalg.eigvalsh(0.5 * (eq.stiffness + eq.stiffness.T))):
        lines.append(f'stiffness_eig{k},{ev:.12g}')
    Path(args.output).write_text('\n'.join(lines) + '\n')
    print(f'wrote {args.output} (equilibrium in {eq.iterations} Newton iterations)',
          file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(_main, argv, prog='mbfg-statics')


if __name__ == '__main__':
    raise SystemExit(main())
