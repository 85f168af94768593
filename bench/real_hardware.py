"""Torques on DFKI's real double pendulum (issue 11): the package's models against measurement.

Every run is differentiated once (mbfg_ros.planar.problems.measured: measured velocities,
Savitzky-Golay window 101 / order 3, 50 samples dropped at each end) and regressed once
(mbfg_ros.planar.problems.identify.regress);
each fit below reuses those. Torque RMSE and correlation r against tau_meas, shoulder / elbow,
and the ratio to DFKI's identified model 2.0 (the YAML) on the same run:

1. The issue's runs (default 01 and 04): rigid (config/dfki_double_pendulum.yaml without friction
   and rotor inertia); +friction+rotor (the YAML as it is: DFKI's model 2.0); identified on
   01+04 (in-sample); cross-validated on one run each way (fitted on the other run only); and
   held out (fitted on every other run given, none of the issue's runs among them).
   "plain" is ``mbfg-identify`` as it comes; "on-axis" is ``--fix link1.my,link2.my
   --weights auto`` (centres of mass on the link axes, Gautier-Khalil weights). Rows marked
   "smoother" use ``--derivatives smoother`` (defaults) for the fit and the test, and their
   ratios are to DFKI's model with the same derivatives.
2. Every run: DFKI's model, the on-axis fit on the issue's runs, and the on-axis fit on all
   the other runs (leave one run out), as ratios to DFKI's model.
Then DFKI's model with each derivative option of ``mbfg-inverse --derivatives`` on the issue's
runs (Savitzky-Golay of the measured velocities, of the positions, the zero-lag smoother), and
the one-run cross-validation with the smoother at other jerk densities.

3. Fits on one run alone (on-axis): the friction and rotor values and how they carry to the
   other runs; why one run is too little to identify this robot's friction.

Run: .venv/bin/python bench/real_hardware.py [--mechanism YAML] [--named 01,04] [RUN.csv ...]
(default: every DFKI run in test/data/dfki; at least two runs).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mbfg_ros.planar.problems.identify import (
    IdentifyConfig,
    Identified,
    Regressed,
    identify_regressed,
    regress,
)
from mbfg_ros.planar.problems.measured import (
    DerivativeOptions,
    MeasuredInverse,
    load_joint_csv,
    measured_inverse,
    measured_states,
    torque_fit,
    torques,
)
from mbfg_ros.planar.dynamics import System, build_system, load_system
from mbfg_ros.planar.friction import rigid_mechanism

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / 'test' / 'data' / 'dfki'
RUNS = sorted(DATA.glob('design_A.0_20220815_sys_id_trajectory_*.csv'))
OPTIONS = DerivativeOptions('velocity', 101, 3)
SKIP = OPTIONS.window // 2
SMOOTHER = DerivativeOptions('smoother')     # jerk 0.5, sigma 2e-4 rad / 0.1 rad/s
PLAIN = IdentifyConfig()
# mbfg-identify --fix link1.my,link2.my --weights auto
ON_AXIS = IdentifyConfig(fixed=('link1.my', 'link2.my'), weights='auto')
CONFIGS = {'plain': PLAIN, 'on-axis': ON_AXIS}


class Run(NamedTuple):
    name: str
    states: MeasuredInverse      # differentiated over the whole run
    data: Regressed              # the regressor of the samples between the dropped ends
    dfki: np.ndarray             # RMSE of DFKI's model (the YAML), shoulder / elbow


def load_run(path: Path):
    return load_joint_csv(path, ['shoulder', 'elbow'], ['pos_meas1', 'pos_meas2'],
                          ['vel_meas1', 'vel_meas2'], ['tau_meas1', 'tau_meas2'])


def prepare(full: System, path: Path, options: DerivativeOptions = OPTIONS) -> Run:
    st = measured_states(full, load_run(path), options)
    s = slice(SKIP, len(st.t) - SKIP)
    data = regress(full, [(st.q[s], st.qd[s], st.qdd[s], st.effort[s])], PLAIN)
    dfki, _ = torque_fit(torques(full, st.q, st.qd, st.qdd), st.effort, SKIP)
    return Run(path.stem.split('_')[-1], st, data, dfki)


def fit_of(system: System, run: Run) -> tuple[np.ndarray, np.ndarray]:
    """RMSE and r per actuator of ``system``'s torques along ``run``'s measured motion."""
    st = run.states
    return torque_fit(torques(system, st.q, st.qd, st.qdd), st.effort, SKIP)


def fit(full: System, runs: list[Run], config: IdentifyConfig) -> Identified:
    return identify_regressed(full, [r.data for r in runs], config)


def cells(system: System, run: Run) -> str:
    rmse, r = fit_of(system, run)
    ratio = rmse / run.dfki
    return (f'{rmse[0]:.3f} (r {r[0]:.2f}) | {rmse[1]:.3f} (r {r[1]:.2f}) | '
            f'{ratio[0]:.2f} / {ratio[1]:.2f}')


def named_table(full: System, runs: dict[str, Run], named: list[str],
                smoothed: dict[str, Run]) -> list[str]:
    rigid = build_system(rigid_mechanism(full.mech))
    others = [r for k, r in runs.items() if k not in named]
    both = [runs[k] for k in named]
    fits = {(c, 'both'): fit(full, both, cfg) for c, cfg in CONFIGS.items()}
    if others:
        fits[('on-axis', 'others')] = fit(full, others, ON_AXIS)
    lines = ['| run | model | shoulder RMSE N·m | elbow RMSE N·m | / DFKI shoulder / elbow |',
             '|---|---|---|---|---|']
    for k in named:
        run = runs[k]
        rest = [runs[j] for j in named if j != k]
        rows = [('rigid', rigid), ('+friction+rotor (YAML: DFKI model 2.0)', full)]
        rows += [(f'identified on {"+".join(named)}, {c} (in-sample)', fits[(c, 'both')].system)
                 for c in CONFIGS]
        if rest:
            rows += [(f'identified on {"+".join(r.name for r in rest)} only, {c} '
                      f'(cross-validation)', fit(full, rest, cfg).system)
                     for c, cfg in CONFIGS.items()]
        if others:
            rows.append((f'identified on the {len(others)} other runs '
                         f'({"+".join(r.name for r in others)}), on-axis (held out)',
                         fits[('on-axis', 'others')].system))
        lines += [f'| {k} | {label} | {cells(system, run)} |' for label, system in rows]
        # The same with the zero-lag smoother's derivatives (ratios to DFKI's model with them).
        sm_rows = [('smoother: +friction+rotor (YAML: DFKI model 2.0)', full),
                   (f'smoother: identified on {"+".join(named)}, on-axis (in-sample)',
                    fit(full, [smoothed[j] for j in named], ON_AXIS).system)]
        if rest:
            sm_rows.append((f'smoother: identified on {"+".join(r.name for r in rest)} only, '
                            'on-axis (cross-validation)',
                            fit(full, [smoothed[r.name] for r in rest], ON_AXIS).system))
        lines += [f'| {k} | {label} | {cells(system, smoothed[k])} |'
                  for label, system in sm_rows]
        print(f'  table 1: run {k} done', file=sys.stderr, flush=True)
    return lines


def every_run_table(full: System, runs: dict[str, Run], named: list[str]) -> list[str]:
    on_named = fit(full, [runs[k] for k in named], ON_AXIS)
    lines = ['| run | DFKI model RMSE N·m | fit on ' + '+'.join(named) + ' / DFKI | fit on the '
             'other runs / DFKI (leave one out) |', '|---|---|---|---|']
    within = 0
    for k, run in runs.items():
        loo = fit(full, [r for j, r in runs.items() if j != k], ON_AXIS)
        a = fit_of(on_named.system, run)[0] / run.dfki
        b = fit_of(loo.system, run)[0] / run.dfki
        within += bool((b <= 1.1).all())
        mark = '' if k not in named else ' (in-sample)'
        lines.append(f'| {k} | {run.dfki[0]:.3f} / {run.dfki[1]:.3f} | '
                     f'{a[0]:.2f} / {a[1]:.2f}{mark} | {b[0]:.2f} / {b[1]:.2f} |')
        print(f'  table 2: run {k} done', file=sys.stderr, flush=True)
    lines.append(f'\nleft out, the fit on the other runs is within 10 % of DFKI\'s model on both '
                 f'joints for {within} of {len(runs)} runs')
    return lines


def single_run_table(full: System, runs: dict[str, Run]) -> list[str]:
    lines = ['| fitted on | elbow fc N·m | elbow b N·m·s | elbow Ir kg·m² | shoulder fc | '
             'shoulder b | elbow / DFKI on the other runs, median (max) | shoulder, median '
             '(max) |', '|---|---|---|---|---|---|---|---|']
    for k, run in runs.items():
        res = fit(full, [run], ON_AXIS)
        v = {p.name: x for p, x in zip(res.params, res.values)}
        ratios = np.array([fit_of(res.system, r)[0] / r.dfki
                           for j, r in runs.items() if j != k])
        lines.append(f'| {k} | {v["elbow.fc"]:.3f} | {v["elbow.b"]:.4f} | '
                     f'{v["elbow_motor.Ir"]:.2e} | {v["shoulder.fc"]:.3f} | '
                     f'{v["shoulder.b"]:.4f} | {np.median(ratios[:, 1]):.2f} '
                     f'({ratios[:, 1].max():.2f}) | {np.median(ratios[:, 0]):.2f} '
                     f'({ratios[:, 0].max():.2f}) |')
    return lines


DERIVATIVES = (('velocity (Savitzky-Golay 101/3 of the measured velocities; the default)',
                OPTIONS),
               ('savgol (positions only, 101/3)', DerivativeOptions('savgol', 101, 3)),
               ('smoother (zero-lag GTSAM smoother, jerk 0.5, sigma 2e-4 rad / 0.1 rad/s)',
                SMOOTHER))


def jerk_table(full: System, paths: dict[str, Path]) -> list[str]:
    """The one-run cross-validation (on-axis) with the smoother at other jerk densities."""
    names = list(paths)
    lines = ['| jerk | ' + ' | '.join(f'fit on {names[1 - i]}, test on {k}: / DFKI shoulder '
                                     '/ elbow' for i, k in enumerate(names[:2])) + ' |',
             '|---|---|---|']
    for jerk in (0.3, 0.4, 0.5, 0.7, 1.0):
        opts = DerivativeOptions('smoother', jerk=jerk)
        runs = {k: prepare(full, paths[k], opts) for k in names[:2]}
        cols = []
        for i, k in enumerate(names[:2]):
            res = fit(full, [runs[names[1 - i]]], ON_AXIS)
            ratio = fit_of(res.system, runs[k])[0] / runs[k].dfki
            cols.append(f'{ratio[0]:.2f} / {ratio[1]:.2f}')
        lines.append(f'| {jerk:g} | ' + ' | '.join(cols) + ' |')
        print(f'  jerk {jerk:g} done', file=sys.stderr, flush=True)
    return lines


def derivatives_table(full: System, paths: dict[str, Path]) -> list[str]:
    """DFKI's model with each derivative option of mbfg-inverse (--derivatives)."""
    lines = ['| run | derivatives | shoulder RMSE N·m | elbow RMSE N·m | time s |',
             '|---|---|---|---|---|']
    for k, path in paths.items():
        log = load_run(path)
        for label, opts in DERIVATIVES:
            t0 = time.perf_counter()
            res = measured_inverse(full, log, opts)
            dt = time.perf_counter() - t0
            rmse, r = torque_fit(res.tau, res.effort, SKIP)
            lines.append(f'| {k} | {label} | {rmse[0]:.3f} (r {r[0]:.2f}) | '
                         f'{rmse[1]:.3f} (r {r[1]:.2f}) | {dt:.1f} |')
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('runs', nargs='*', type=Path, default=RUNS, help='DFKI CSV runs')
    p.add_argument('--mechanism', type=Path, default=ROOT / 'config' / 'dfki_double_pendulum.yaml')
    p.add_argument('--named', default='01,04', help='the runs of table 1 (comma-separated)')
    args = p.parse_args()
    t0 = time.perf_counter()
    full = load_system(args.mechanism)
    runs: dict[str, Run] = {}
    for path in args.runs:
        print(f'  differentiating and regressing {path.name}', file=sys.stderr, flush=True)
        run = prepare(full, path)
        runs[run.name] = run
    named = [k for k in args.named.split(',') if k in runs] or list(runs)[:2]
    print(f'load average {os.getloadavg()[0]:.2f} (2 shared cores); {len(runs)} runs '
          f'({", ".join(runs)}); derivatives: measured velocities, Savitzky-Golay window '
          f'{OPTIONS.window}, order {OPTIONS.order}; {SKIP} samples dropped at each end\n')
    smoothed = {}
    for path in args.runs:
        if path.stem.split('_')[-1] in named:
            print(f'  smoother derivatives for {path.name}', file=sys.stderr, flush=True)
            run = prepare(full, path, SMOOTHER)
            smoothed[run.name] = run
    print('\n'.join(named_table(full, runs, named, smoothed)))
    named_paths = {k: p for p in args.runs if (k := p.stem.split('_')[-1]) in named}
    print('\nDFKI\'s model (the YAML) with each derivative option:\n')
    print('\n'.join(derivatives_table(full, named_paths)))
    if len(named_paths) == 2:
        print('\nThe one-run cross-validation (on-axis) with the smoother at other jerk '
              'densities (ratios to DFKI\'s model with the same derivatives):\n')
        print('\n'.join(jerk_table(full, named_paths)))
    if len(runs) > 2:
        print()
        print('\n'.join(every_run_table(full, runs, named)))
        print()
        print('\n'.join(single_run_table(full, runs)))
    print('\nissue 11 (measured outside the package, trajectory_01): rigid 0.203 / 0.187 N·m, '
          'DFKI full model 0.157 / 0.077 N·m')
    print(f'\n({time.perf_counter() - t0:.1f} s)')


if __name__ == '__main__':
    main()
