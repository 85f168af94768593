"""Seed 002 Tables I-II for this implementation: numerical inverse and forward dynamics of
a PUMA 560 and a UR5 by eliminating the linear dynamics graph under different orderings.

For each robot, at random configurations, it times (median µs per solve):
* ``solve``: GTSAM's ``eliminateSequential(ordering)`` + back-substitution, one call into
  C++ (what the seed's tables time), by QR (the package's choice) and by GTSAM's default
  Cholesky;
* ``build``: making the graph's ``JacobianFactor``s in Python from the factors' Jacobians;
* the ordering's own cost (COLAMD/METIS run on every solve, as in the seed);
and prints them next to Pinocchio's ``rnea`` / ``aba`` / ``crba`` measured in the same run,
as ratios, with the seed's C++ figures beside them (RNEA 26.6, RBDL 20.2, COLAMD 11.0,
ND 11.7 µs; CRBA 51.8, ABA 25.5, COLAMD 11.2, ND 12.1 µs).
Run: .venv/bin/python bench/spatial_graph_orderings.py
"""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import gtsam
import numpy as np
import pinocchio as pin

from mbfg_ros.spatial.dynamics_graph import DynamicsGraph
from mbfg_ros.spatial.urdf import load_spatial

URDF = Path(__file__).resolve().parents[1] / 'config' / 'urdf'
SEED_ID = {'rnea': 26.6, 'RBDL rnea': 20.2, 'colamd': 11.0, 'metis': 11.7}
SEED_FD = {'crba': 51.8, 'aba': 25.5, 'colamd': 11.2, 'metis': 12.1}
STATES, REPEAT = 20, 50


def _median_us(fn, repeat: int = REPEAT) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts) * 1e6)


def _table(robot: str) -> None:
    path = URDF / f'{robot}.urdf'
    model = load_spatial(path)
    dg = DynamicsGraph(model)
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    rng = np.random.default_rng(0)
    rows: dict[str, list] = {}
    for _ in range(STATES):
        q, qd, qdd = rng.normal(size=(3, model.n))
        tau = pin.rnea(pm, pd, q, qd, qdd).copy()
        rows.setdefault('pin rnea', []).append(_median_us(lambda: pin.rnea(pm, pd, q, qd, qdd)))
        rows.setdefault('pin aba', []).append(_median_us(lambda: pin.aba(pm, pd, q, qd, tau)))
        rows.setdefault('pin crba', []).append(_median_us(lambda: pin.crba(pm, pd, q)))
        id_known = {j: float(x) for j, x in enumerate(qdd)}
        fd_known = {j: float(x) for j, x in enumerate(tau)}
        gid = dg.linear_graph(q, qd, id_known, {})
        gfd = dg.linear_graph(q, qd, {}, fd_known)
        rows.setdefault('build ID graph', []).append(
            _median_us(lambda: dg.linear_graph(q, qd, id_known, {}), 10))
        rows.setdefault('build FD graph', []).append(
            _median_us(lambda: dg.linear_graph(q, qd, {}, fd_known), 10))
        for prob, g, names in (('ID', gid, ('rnea', 'colamd', 'metis')),
                               ('FD', gfd, ('crba', 'aba', 'colamd', 'metis'))):
            for name in names:
                fixed = dg.ordering(g, name)
                for elim, fn in (('QR', gtsam.EliminateQR), ('Chol', None)):
                    def solve(g=g, name=name, fixed=fixed, fn=fn):
                        o = fixed if name in ('rnea', 'crba', 'aba') else dg.ordering(g, name)
                        bn = g.eliminateSequential(o, fn) if fn else g.eliminateSequential(o)
                        return bn.optimize()
                    rows.setdefault(f'{prob} {name} {elim}', []).append(_median_us(solve))
    med = {k: float(np.median(v)) for k, v in rows.items()}
    print(f'\n{robot}: {model.n} joints, {STATES} random states, median µs per call')
    print(f'  {"":<12}{"QR µs":>8}{"Chol µs":>9}{"QR ÷ pin":>10}{"Chol ÷ pin":>11}'
          f'   seed C++ µs (PUMA 560)')
    for prob, names, peer, seed in (('ID', ('rnea', 'colamd', 'metis'), 'pin rnea', SEED_ID),
                                    ('FD', ('crba', 'aba', 'colamd', 'metis'), 'pin aba',
                                     SEED_FD)):
        for name in names:
            qr, ch = med[f'{prob} {name} QR'], med[f'{prob} {name} Chol']
            print(f'  {prob + " " + name:<12}{qr:8.1f}{ch:9.1f}{qr / med[peer]:9.0f}x'
                  f'{ch / med[peer]:10.0f}x   {seed[name]:6.1f}')
        print(f'  {peer:<12}{med[peer]:8.2f}' + (f'{"":>30}RBDL {SEED_ID["RBDL rnea"]}'
                                                  if prob == 'ID' else ''))
    print(f'  {"pin crba":<12}{med["pin crba"]:8.2f}')
    print(f'  build the ID graph in Python {med["build ID graph"]:6.0f} µs, '
          f'the FD graph {med["build FD graph"]:6.0f} µs')


def main() -> None:
    print(f'Seed 002 Tables I-II (python {platform.python_version()}, {os.cpu_count()} CPUs, '
          f'gtsam {gtsam.__version__ if hasattr(gtsam, "__version__") else "4.3"}, '
          f'pinocchio {pin.__version__}); seed: C++ GTSAM on the authors\' machine')
    for robot in ('puma560', 'ur5'):
        _table(robot)
    print('\nsolve = GTSAM eliminateSequential(ordering, QR or its default Cholesky) + optimize,')
    print('one call from Python into C++; COLAMD/METIS orderings are computed inside each timed')
    print('solve, the custom RNEA/CRBA/ABA orders once. The package solves with QR: Cholesky')
    print('squares the condition number and loses ~1e-7 of q̈ on a light wrist. Building the')
    print('graph in Python (per-factor Jacobians, GTSAM objects) costs 5-10x the solve: there')
    print('Python dominates. Pinocchio is the dedicated recursion, as the seed says of RBDL.')


if __name__ == '__main__':
    main()
