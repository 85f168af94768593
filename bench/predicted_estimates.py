#!/usr/bin/env python3
"""Accuracy and cost of predicted estimates between smoother ticks (issue 24).

The live node at 1 kHz cannot afford a smoother tick at every grid period: its tick budget
(``max_tick_load``) merges them, one smoother tick every N periods. With
``predict_between_ticks`` it publishes :meth:`Estimator.predict` at the grid times between
(``mbfg_ros/estimation/prediction.py``). This script replays that offline: the UR5 of
config/urdf with its wrist IMU (computed-torque tracking, encoders 4096 counts + 0.05°,
efforts, gyro 0.005 rad/s, accelerometer 0.05 m/s², all at 1 kHz) and the four-bar released
from rest (fourbar.yaml: crank encoder, coupler gyro + accelerometer at 1 kHz); estimator at
``frequency`` 1000, lag 0.05 s; the smoother ``tick`` at every N-th grid time (N = 1 to 6),
``predict`` at the others. Rows: RMSE against the truth of ALL published estimates
(smoothed + predicted, one per grid period), of the smoothed ones alone, and the ratio to
the N = 1 row (go: ≤ 1.10 for angle, rate and τ̂); thread CPU (``time.thread_time``,
immune to the other processes) per tick and per prediction, median and p99. Then per robot
N_max: the largest spacing whose row and every closer one stay within 10 % of the N = 1 row
(angle, rate, τ̂), and the same against ``--reference`` N (the live default mode's smoother
spacing: its budget merges ~2-3 grid periods per tick at 1 kHz), the value for the node's
``predict_max_spacing`` (the governor, docs/running-on-a-robot.md).

    .venv/bin/python bench/predicted_estimates.py [--duration 5] [--quick]
                                                  [--robots ur5 fourbar ur5-no-effort]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

from mbfg_ros.core.angles import wrap_angle  # noqa: E402
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig  # noqa: E402

RATE = 1000.0
SKIP = 0.5            # s of start-up left out of the errors
COUNTS = 4096
ENC_SIGMA = math.radians(0.05)
ENC_EFFECTIVE = math.sqrt((2 * math.pi / COUNTS) ** 2 / 12 + ENC_SIGMA ** 2)


def ur5_case(duration: float, seed: int):
    """(system, config, truth t, q, qd, tau, records, angle/rate readers) of the UR5."""
    from mbfg_ros.ros.params import load_params_file
    from mbfg_ros.spatial.sensor_sim import (SpatialSensorConfig, reference_motion,
                                             simulate_spatial_measurements, track_reference)
    from mbfg_ros.spatial.system import build_spatial_system
    system = build_spatial_system(REPO / 'config' / 'urdf' / 'ur5.urdf',
                                  REPO / 'config' / 'urdf' / 'ur5_sensors.yaml')
    params = load_params_file(REPO / 'config' / 'estimator_urdf.yaml')
    ref = reference_motion(system, duration, 1e-3, seed=seed)
    tr = track_reference(system, ref)
    scfg = SpatialSensorConfig(encoder_rate=RATE, encoder_counts=COUNTS, encoder_sigma=ENC_SIGMA,
                               effort_sigma=0.0, imu_rate=RATE, gyro_sigma=0.005,
                               accel_sigma=0.05)
    recs = simulate_spatial_measurements(system, tr.t, tr.q, tr.qd, tr.qdd, tr.tau, scfg,
                                         np.random.default_rng(seed))
    cfg = EstimatorConfig(frequency=RATE, lag_duration=0.05, encoder_sigma=ENC_EFFECTIVE,
                          gyro_sigma=0.005, accel_sigma=0.05,
                          dynamics_sigma=float(params.get('dynamics_sigma',
                                                          EstimatorConfig.dynamics_sigma)),
                          unknown_effort_sigma=float(params.get(
                              'unknown_effort_sigma', EstimatorConfig.unknown_effort_sigma)))
    return system, cfg, tr.t, tr.q, tr.qd, tr.tau, recs, (lambda q, qd: (q, qd))


def ur5_no_effort_case(duration: float, seed: int):
    """:func:`ur5_case` without the motors' efforts in its JointStates (an arm whose
    ``joint_states`` carry none): ``unknown_effort_sigma`` 20 N·m, the jerk rows carry q̈."""
    system, cfg, t, q, qd, tau, recs, reader = ur5_case(duration, seed)
    recs = [replace(r, effort=np.zeros(0)) if getattr(r, 'effort', None) is not None else r
            for r in recs]
    return (system, replace(cfg, unknown_effort_sigma=20.0), t, q, qd, tau, recs, reader)


def fourbar_case(duration: float, seed: int):
    from common import truth

    from mbfg_ros.planar.dynamics import load_system
    from mbfg_ros.planar.sensors import SensorConfig, SensorModel, simulate_measurements
    system = load_system(REPO / 'config' / 'fourbar.yaml')
    t, q, qd, qdd = truth(system, duration, RATE)
    recs = simulate_measurements(system, t, q, qd, qdd,
                                 SensorConfig(joints=('crank',), encoder_rate=RATE,
                                              imu_rate=RATE),
                                 np.random.default_rng(seed))
    cfg = EstimatorConfig(frequency=RATE, lag_duration=0.05, encoder_sigma=ENC_EFFECTIVE)
    sm = SensorModel(system)

    def crank(qs, qds):      # the crank's angle and rate (the encoder's joint)
        m = [sm.joint(0, a, b) for a, b in zip(qs, qds)]
        return (np.array([[p.h[0]] for p, _ in m]), np.array([[v.h[0]] for _, v in m]))
    tau = np.zeros((len(t), len(system.actuator_joints)))   # released: no applied torque
    return system, cfg, t, q, qd, tau, recs, crank


def run(system, cfg, recs, t_end: float, every: int) -> tuple[list, np.ndarray, np.ndarray]:
    """Tick at every ``every``-th grid time, predict at the others; (estimates, CPU ms of
    the ticks, CPU ms of the predictions)."""
    est = Estimator(system, cfg)
    out, tick_ms, pred_ms = [], [], []
    i = 0
    for k in range(int(round(t_end * RATE)) + 1):
        tk = k / RATE
        while i < len(recs) and recs[i].t <= tk + 1e-9:
            est.add(recs[i])
            i += 1
        smooth = k % every == 0 or not est.initialised
        c0 = time.thread_time()
        e = est.tick(tk) if smooth else est.predict(tk)
        c1 = time.thread_time()
        if e is None:
            continue
        (tick_ms if smooth else pred_ms).append(1e3 * (c1 - c0))
        out.append(e)
    return out, np.array(tick_ms), np.array(pred_ms)


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x)))) if x.size else math.nan


def errors(estimates: list, t, q, qd, tau, reader) -> dict:
    E = [e for e in estimates if e.t >= SKIP]
    k = np.rint(np.array([e.t for e in E]) * RATE).astype(int)
    aq, aqd = reader(np.array([e.q for e in E]), np.array([e.qd for e in E]))
    tq, tqd = reader(q[k], qd[k])
    tau_e = np.array([e.tau for e in E])
    return {'angle': 1e3 * rms(wrap_angle(aq - tq)), 'rate': rms(aqd - tqd),
            'tau': rms(tau_e - tau[k]) if tau.size else math.nan}


def hold(estimates: list, t, q, qd, tau, reader) -> dict:
    """The errors had each predicted estimate been the last smoothed one, held (what a
    consumer of the node without ``predict_between_ticks`` has between ticks)."""
    last, out = None, []
    for e in estimates:
        last = e if not e.predicted or last is None else last
        out.append(replace(last, t=e.t))
    return errors(out, t, q, qd, tau, reader)


def spacing_within(rows: dict[int, dict], ref: int, tol: float = 1.10) -> int:
    """The largest N ≥ ``ref`` such that the rows of ``ref`` .. N (all there) have every
    figure within ``tol`` of row ``ref``'s; 0 without row ``ref``."""
    if ref not in rows:
        return 0
    best = ref
    for n in sorted(k for k in rows if k > ref):
        if n != best + 1 or any(rows[n][k] > tol * rows[ref][k] for k in ('angle', 'rate', 'tau')
                                if rows[ref][k] > 0):
            break
        best = n
    return best


CASES = {'ur5': ur5_case, 'fourbar': fourbar_case, 'ur5-no-effort': ur5_no_effort_case}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--duration', type=float, default=5.0, help='simulated seconds')
    ap.add_argument('--quick', action='store_true', help='2 s smoke run')
    ap.add_argument('--robots', nargs='+', default=['ur5', 'fourbar'],
                    choices=list(CASES),
                    help='ur5-no-effort: the UR5 without its efforts (unknown_effort_sigma 20)')
    ap.add_argument('--every', nargs='+', type=int, default=[1, 2, 3, 4, 5, 6],
                    help='smoother tick every N grid periods (1 is the reference row)')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--reference', type=int, default=2,
                    help='also N_max against this spacing (the live default mode merges 2-3)')
    a = ap.parse_args(argv)
    duration = 2.0 if a.quick else a.duration
    every = sorted(set([1] + a.every))
    print(f'Predicted estimates between smoother ticks: sensors and grid at {RATE:g} Hz, lag '
          f'0.05 s, {duration:g} s simulated, errors after {SKIP:g} s; CPU = thread time')
    print('| robot | tick every N | estimates (smoothed + predicted) | angle RMSE mrad all / '
          'smoothed only | rate RMSE rad/s all / smoothed only | τ̂ RMSE N·m all / smoothed '
          'only | ratio to N = 1 (angle, rate, τ̂) | tick CPU ms p50 / p99 | predict CPU µs '
          'p50 / p99 | instead holding the last smoothed one: angle mrad / rate rad/s |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    go = True
    nmax: dict[str, tuple[int, int]] = {}
    for robot in a.robots:
        system, cfg, t, q, qd, tau, recs, reader = CASES[robot](duration, a.seed)
        base = None
        rows: dict[int, dict] = {}
        for n in every:
            out, tick_ms, pred_ms = run(system, cfg, recs, float(t[-1]), n)
            allr = errors(out, t, q, qd, tau, reader)
            smo = errors([e for e in out if not e.predicted], t, q, qd, tau, reader)
            held = hold(out, t, q, qd, tau, reader) if n > 1 else None
            base = base or allr
            rows[n] = allr
            ratio = [allr[k] / base[k] if base[k] > 0 else math.nan
                     for k in ('angle', 'rate', 'tau')]
            ok = all(not r > 1.10 for r in ratio)
            go &= ok
            npred = sum(e.predicted for e in out)
            p = (f'{1e3 * np.median(pred_ms):.0f} / {1e3 * np.percentile(pred_ms, 99):.0f}'
                 if pred_ms.size else '-')
            print(f'| {robot} | {n} | {len(out)} ({len(out) - npred} + {npred}) | '
                  f'{allr["angle"]:.3f} / {smo["angle"]:.3f} | {allr["rate"]:.4f} / '
                  f'{smo["rate"]:.4f} | {allr["tau"]:.3f} / {smo["tau"]:.3f} | '
                  + ', '.join(f'{r:.3f}' for r in ratio) + (' go' if ok else ' NO-GO')
                  + f' | {np.median(tick_ms):.3f} / {np.percentile(tick_ms, 99):.3f} | {p} | '
                  + (f'{held["angle"]:.3f} / {held["rate"]:.4f} |' if held else '- |'),
                  flush=True)
        nmax[robot] = (spacing_within(rows, 1), spacing_within(rows, a.reference))
    for robot, (n1, nref) in nmax.items():
        print(f'{robot}: N_max {n1} against N = 1, {nref or "- (no row)"} against N = '
              f'{a.reference} (every figure within 10 %; the rows N_max .. must all be run)')
    print(f'\noverall: {"go" if go else "no-go"} (every row within 10 % of ticking every period)')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
