"""Torques on DFKI's real double pendulum (issue 11): the package's models against measurement.

For each run, inverse dynamics on the measured motion (mbfg_ros.measured: measured
velocities, Savitzky-Golay window 101 / order 3, 50 samples dropped at each end) with
- rigid: config/dfki_double_pendulum.yaml without friction and rotor inertia,
- +friction+rotor (YAML): the same file as it is (DFKI's identified model 2.0),
- identified: parameters fitted by mbfg_ros.identify on trajectory_01 + _04 (in-sample), and
  cross-validated (fitted on the other run only; plainly, and with the lateral first moments
  held at 0 and Gautier-Khalil weights: ``--fix link1.my,link2.my --weights auto``),
and prints RMSE and correlation r of shoulder / elbow torque against tau_meas.
Run: .venv/bin/python bench/real_hardware.py [--mechanism YAML] [RUN.csv ...]
(default: the repository's copies in test/data/dfki).
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from mbfg_ros.identify import IdentifyConfig, identify
from mbfg_ros.measured import DerivativeOptions, load_joint_csv, measured_inverse, torque_fit
from mbfg_ros.planar.dynamics import build_system, load_system
from mbfg_ros.planar.friction import rigid_mechanism

ROOT = Path(__file__).resolve().parents[1]
RUNS = [ROOT / 'test' / 'data' / 'dfki' / f'design_A.0_20220815_sys_id_trajectory_{k}.csv'
        for k in ('01', '04')]
OPTIONS = DerivativeOptions('velocity', 101, 3)
# mbfg-identify --fix link1.my,link2.my --weights auto
ON_AXIS = IdentifyConfig(fixed=('link1.my', 'link2.my'), weights='auto')
ON_AXIS_LABEL = 'centres on the link axes, weights auto'
SKIP = OPTIONS.window // 2


def load_run(path: Path):
    return load_joint_csv(path, ['shoulder', 'elbow'], ['pos_meas1', 'pos_meas2'],
                          ['vel_meas1', 'vel_meas2'], ['tau_meas1', 'tau_meas2'])


def row(label: str, run: str, tau: np.ndarray, effort: np.ndarray) -> str:
    rmse, r = torque_fit(tau, effort, SKIP)
    return (f'| {run} | {label} | {rmse[0]:.3f} N·m (r {r[0]:.2f}) | '
            f'{rmse[1]:.3f} N·m (r {r[1]:.2f}) |')


def identified_rows(mech_path: Path, logs: dict) -> dict[str, list[str]]:
    """Rows per run: the fit on all runs, and (several runs) the fit on the others only."""
    names = list(logs)
    out: dict[str, list[str]] = {name: [] for name in names}
    fit_all = identify(load_system(mech_path), list(logs.values()), IdentifyConfig())
    for name in names:
        res = fit_all.predict(logs[name])
        out[name].append(row(f'identified on {"+".join(names)} (mbfg-identify)', name, res.tau,
                             res.effort))
        if len(names) > 1:
            others = [k for k in names if k != name]
            for label, cfg in (('', IdentifyConfig()), (', ' + ON_AXIS_LABEL, ON_AXIS)):
                fit = identify(load_system(mech_path), [logs[k] for k in others], cfg)
                res = fit.predict(logs[name])
                out[name].append(row(f'identified on {"+".join(others)} only '
                                     f'(cross-validation{label})', name, res.tau, res.effort))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('runs', nargs='*', type=Path, default=RUNS, help='DFKI CSV runs')
    p.add_argument('--mechanism', type=Path, default=ROOT / 'config' / 'dfki_double_pendulum.yaml')
    args = p.parse_args()
    t0 = time.perf_counter()
    full = load_system(args.mechanism)
    rigid = build_system(rigid_mechanism(full.mech))
    logs = {path.stem.split('_')[-1]: load_run(path) for path in args.runs}
    print(f'load average {os.getloadavg()[0]:.2f} (2 shared cores); derivatives: measured '
          f'velocities, Savitzky-Golay window {OPTIONS.window}, order {OPTIONS.order}\n')
    print('| run | model | shoulder RMSE | elbow RMSE |')
    print('|---|---|---|---|')
    ident = identified_rows(args.mechanism, logs)
    for name, log in logs.items():
        for label, s in (('rigid', rigid), ('+friction+rotor (YAML, DFKI model 2.0)', full)):
            res = measured_inverse(s, log, OPTIONS)
            print(row(label, name, res.tau, res.effort))
        for line in ident[name]:
            print(line)
    print('\nissue 11 (measured outside the package, trajectory_01): rigid 0.203 / 0.187 N·m, '
          'DFKI full model 0.157 / 0.077 N·m')
    print(f'\n({time.perf_counter() - t0:.1f} s)')


if __name__ == '__main__':
    main()
