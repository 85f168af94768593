#!/usr/bin/env python3
"""Benchmark of the online estimator on the four-bar released from rest (fourbars1.yaml).

Truth: scipy ``solve_ivp`` DOP853 (rtol 1e-10) on the dependent-coordinate
ODE q̈ = q̈(q, q̇) of :func:`mbfg_ros.planar.dynamics.forward_accel` (seed 000 Eq. 5)
with Baumgarte stabilisation (α = β = 10 /s), sampled at the sensor times.
Sensors (standard scenario): crank encoder at 500 Hz quantised to 4096
counts per turn plus 0.05° noise; gyroscope (0.01 rad/s) and accelerometer
(0.05 m/s²) on the coupler at 500 Hz. Ticks at 500 Hz, lag 0.05 s, 10 s.

Prints RMSE of crank angle, crank rate, coupler angle and points P1, P2
against the truth, beside the raw encoder and a finite-difference rate, and
median / p99 milliseconds per tick. Timings on a shared machine are
pessimistic.

    .venv/bin/python bench/estimator.py [--quick] [--duration S] [--mechanism YAML]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from common import truth  # noqa: E402
from probe import before_after, calibrate  # noqa: E402  bench/probe.py: how fast the machine runs now

from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig  # noqa: E402
from mbfg_ros.planar.dynamics import System, build_system, load_system  # noqa: E402
from mbfg_ros.core.angles import wrap_angle  # noqa: E402
from mbfg_ros.planar.sensors import SensorConfig, SensorModel, simulate_measurements  # noqa: E402

DEFAULT_YAML = REPO / 'config' / 'fourbar.yaml'
FALLBACK_YAML = REPO / 'test' / 'data' / 'fourbar_estimator.yaml'


def body_angle(q: np.ndarray, sm: SensorModel, imu: int = 0) -> np.ndarray:
    return np.array([sm.imu(imu, a, np.zeros_like(a), np.zeros_like(a))[2].h[0] for a in q])


def rmse(e: np.ndarray) -> float:
    e = np.asarray(e)
    return float(np.sqrt(np.mean(e ** 2))) if e.size else float('nan')


class Run(NamedTuple):
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    wall_ms: np.ndarray     # Estimate.tick_seconds (wall clock, includes preemption)
    cpu_ms: np.ndarray      # this thread's CPU time per tick (immune to other processes)
    meas: list
    counters: dict
    factors: int            # smoother factor slots at the end


def run(sys: System, t, q, qd, qdd, sensor_cfg: SensorConfig, est_cfg: EstimatorConfig,
        seed: int = 0, start: float = 0.0, est_sys: System | None = None) -> Run:
    """Feed simulated readings in stamp order, tick at the configured rate from ``start``."""
    rng = np.random.default_rng(seed)
    meas = simulate_measurements(sys, t, q, qd, qdd, sensor_cfg, rng)
    meas = [m for m in meas if m.t >= start - 1e-9]
    est = Estimator(est_sys or sys, est_cfg)
    ticks = np.arange(start, t[-1] + 1e-9, 1.0 / est_cfg.frequency)
    out_t, out_q, out_qd, ms, cpu = [], [], [], [], []
    i = 0
    for tk in ticks:
        while i < len(meas) and meas[i].t <= tk + 1e-9:
            est.add(meas[i])
            i += 1
        c0 = time.thread_time()
        e = est.tick(tk)
        c1 = time.thread_time()
        if e is None:
            continue
        out_t.append(tk)
        out_q.append(e.q)
        out_qd.append(e.qd)
        ms.append(1e3 * e.tick_seconds)
        cpu.append(1e3 * (c1 - c0))
    size = est._smoother.getFactors().size() if est.initialised else 0
    return Run(np.array(out_t), np.array(out_q), np.array(out_qd), np.array(ms), np.array(cpu),
               meas, est.counters, size)


def metrics(sys, sm, t, q, qd, rt, rq, rqd, window=None):
    """Errors of the estimate rows (rt, rq, rqd) against the truth (t, q, qd)."""
    idx = np.searchsorted(t, rt - 1e-9)
    ok = np.abs(t[np.clip(idx, 0, len(t) - 1)] - rt) < 1e-6
    if window is not None:
        ok &= (rt >= window[0]) & (rt < window[1])
    idx, rq, rqd = idx[ok], rq[ok], rqd[ok]
    crank = 0
    th_true = np.array([sm.joint(crank, a, b)[0].h[0] for a, b in zip(q[idx], qd[idx])])
    th_est = np.array([sm.joint(crank, a, b)[0].h[0] for a, b in zip(rq, rqd)])
    w_true = np.array([sm.joint(crank, a, b)[1].h[0] for a, b in zip(q[idx], qd[idx])])
    w_est = np.array([sm.joint(crank, a, b)[1].h[0] for a, b in zip(rq, rqd)])
    cp_true, cp_est = body_angle(q[idx], sm), body_angle(rq, sm)
    p1 = np.linalg.norm(rq[:, 0:2] - q[idx, 0:2], axis=1)
    p2 = np.linalg.norm(rq[:, 2:4] - q[idx, 2:4], axis=1)
    return {'crank angle [mrad]': 1e3 * rmse(wrap_angle(th_est - th_true)),
            'crank rate [rad/s]': rmse(w_est - w_true),
            'coupler angle [mrad]': 1e3 * rmse(wrap_angle(cp_est - cp_true)),
            'P1 [mm]': 1e3 * rmse(p1), 'P2 [mm]': 1e3 * rmse(p2)}


def raw_encoder(sm, t, q, qd, meas, window=None):
    """RMSE of the raw encoder angle and of its backward finite-difference rate."""
    tm = np.array([m.t for m in meas if hasattr(m, 'names')])
    z = np.array([m.position[0] for m in meas if hasattr(m, 'names')])
    if tm.size < 2:
        return float('nan'), float('nan')
    idx = np.searchsorted(t, tm - 1e-9)
    th = np.array([sm.joint(0, q[i], qd[i])[0].h[0] for i in idx])
    w = np.array([sm.joint(0, q[i], qd[i])[1].h[0] for i in idx])
    fd = wrap_angle(np.diff(z)) / np.diff(tm)
    sel = np.ones(tm.size, bool)
    if window is not None:
        sel = (tm >= window[0]) & (tm < window[1])
    return rmse(wrap_angle(z - th)[sel]), rmse((fd - w[1:])[sel[1:]])


def table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = '  '.join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print('-' * len(line))
    for r in rows:
        print('  '.join(str(c).ljust(w) for c, w in zip(r, widths)))
    print()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--quick', action='store_true', help='2 s smoke run, standard scenario only')
    ap.add_argument('--duration', type=float, default=None)
    ap.add_argument('--mechanism', type=Path, default=None)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--truth', choices=('dop853', 'forward'), default='dop853',
                    help='truth generator: scipy DOP853 (default) or the package\'s '
                    'factor-graph forward dynamics '
                    '(mbfg_ros.simulation.forward.simulate, dt 1 ms)')
    args = ap.parse_args(argv)
    path = args.mechanism or (DEFAULT_YAML if DEFAULT_YAML.exists() else FALLBACK_YAML)
    sys_ = load_system(path)
    sm = SensorModel(sys_)
    duration = args.duration or (2.0 if args.quick else 10.0)
    print(f'mechanism {path.name}, {duration:g} s, truth {args.truth} sampled at 1 kHz')
    t0 = time.perf_counter()
    if args.truth == 'forward':
        from mbfg_ros.simulation.forward import ForwardConfig, simulate
        tr = simulate(sys_, duration, ForwardConfig(dt=1e-3))
        t, q, qd, qdd = tr.t, tr.q, tr.qd, tr.qdd
    else:
        t, q, qd, qdd = truth(sys_, duration, 1000.0)
    cons = sys_.constraints
    print(f'truth: {time.perf_counter() - t0:.1f} s, max |Phi| '
          f'{max(np.max(np.abs(cons.phi(a))) for a in q):.1e}\n')

    quant = 2 * math.pi / 4096
    enc_sigma = math.sqrt(quant ** 2 / 12 + math.radians(0.05) ** 2)
    base = EstimatorConfig(frequency=500.0, lag_duration=0.05, encoder_sigma=enc_sigma)
    std = SensorConfig(joints=('crank',))
    # (name, sensors, estimator config, error window, start time, truth)
    scenarios = [('standard (enc + gyro + accel), 500 Hz, lag 0.05', std, base, None, 0.0,
                  'exact')]
    if not args.quick:
        scenarios += [
            ('encoder only', replace(std, imu_rate=0.0), base, None, 0.0, 'exact'),
            ('IMU only (gyro + accel)', replace(std, encoder_rate=0.0), base, None, 0.0,
             'exact'),
            ('IMU only, started at t=2 s from the YAML pose', replace(std, encoder_rate=0.0),
             base, None, 2.0, 'exact'),
            ('encoder dropout 0.5 s at t=3', replace(std, dropouts=((3.0, 3.5),)), base,
             (3.0, 3.5), 0.0, 'exact'),
            ('ticks 1 kHz', std, replace(base, frequency=1000.0), None, 0.0, 'exact'),
            ('lag 0.2 s', std, replace(base, lag_duration=0.2), None, 0.0, 'exact'),
            ('model mismatch (truth: coupler +20 % mass)', std, base, None, 0.0, 'mismatch'),
            ('model mismatch, encoder only', replace(std, imu_rate=0.0), base, None, 0.0,
             'mismatch'),
        ]
    truths = {'exact': (t, q, qd, qdd)}
    if any(sc[5] == 'mismatch' for sc in scenarios):
        mech = sys_.mech
        bodies = list(mech.bodies)
        bodies[1] = replace(bodies[1], mass=1.2 * bodies[1].mass, I0=1.2 * bodies[1].I0)
        truths['mismatch'] = truth(build_system(replace(mech, bodies=tuple(bodies))),
                                   duration, 1000.0)
    rows, trows = [], []
    before = calibrate()
    for name, scfg, ecfg, window, start, which in scenarios:
        tt, tq, tqd, tqdd = truths[which]
        r = run(sys_, tt, tq, tqd, tqdd, scfg, ecfg, args.seed, start)
        m = metrics(sys_, sm, tt, tq, tqd, r.t, r.q, r.qd)
        enc, fd = raw_encoder(sm, tt, tq, tqd, r.meas)
        rows.append([name] + [f'{v:.3f}' for v in m.values()] +
                    [f'{1e3 * enc:.3f}', f'{fd:.3f}'])
        trows.append([name, f'{np.median(r.wall_ms):.3f}', f'{np.percentile(r.wall_ms, 99):.2f}',
                      f'{np.median(r.cpu_ms):.3f}', f'{np.percentile(r.cpu_ms, 99):.2f}',
                      f'{r.wall_ms.max():.1f}', str(len(r.t)), str(r.counters['resets']),
                      str(r.counters['dropped_too_old']), str(r.factors)])
        if window is not None:
            for label, w in (('  during dropout', window),
                             ('  0.5 s after', (window[1], window[1] + 0.5))):
                v = metrics(sys_, sm, tt, tq, tqd, r.t, r.q, r.qd, w)
                rows.append([label] + [f'{x:.3f}' for x in v.values()] + ['-', '-'])
        if start > 0:
            for label, w in (('  first 0.2 s', (start, start + 0.2)),
                             ('  after 1 s', (start + 1.0, duration + 1))):
                v = metrics(sys_, sm, tt, tq, tqd, r.t, r.q, r.qd, w)
                rows.append([label] + [f'{x:.3f}' for x in v.values()] + ['-', '-'])
    table(rows, ['scenario', 'crank angle mrad', 'crank rate rad/s', 'coupler angle mrad',
                 'P1 mm', 'P2 mm', 'raw encoder mrad', 'finite-diff rate rad/s'])
    table(trows, ['scenario', 'median ms', 'p99 ms', 'median CPU ms', 'p99 CPU ms',
                  'max ms', 'ticks', 'resets', 'dropped too old', 'factor slots'])
    print('Targets: crank-rate RMSE <= 1/5 of the finite-difference rate; crank-angle RMSE '
          'below the raw encoder; median <= 1 ms, p99 <= 2 ms per tick.\n'
          'ms = wall clock per tick (Estimate.tick_seconds; on a shared machine it includes '
          'time the process was preempted); CPU ms = this thread\'s CPU time per tick.')
    print(before_after(before, calibrate()))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
