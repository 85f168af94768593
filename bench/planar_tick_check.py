#!/usr/bin/env python3
"""Sample-by-sample check of the planar estimator against a saved run (issue 24).

Runs the online estimator offline (readings fed in stamp order, one tick per sensor
instant, sensors and ticks at ``--rate``, lag 0.05 s) on planar mechanisms that between
them use every per-tick branch of the planar formulation: the four-bar with a crank
encoder and a coupler IMU (the benchmark row), the five-bar (angle constraint rows of
relative coordinates, coordinate actuators, four encoders), the slider-crank (a slider row
and a prismatic encoder), the spring pendulum (translational and rotational springs; an
encoder, a motor and a tilted IMU added here) and DFKI's double pendulum (friction,
relative coordinates, two joint motors). Each estimate's q, q̇, q̈, τ̂ and joint
readings are saved (``--save``, with the true motion the readings were simulated from) or
compared with a saved file (``--compare``: the saved motion is read again, so that only the
estimator differs; DOP853 on a changed q̈(q, q̇) drifts apart over seconds): the largest
difference and each quantity's scale (its largest magnitude) are printed, and the exit
status is 1 when a difference exceeds ``--tol`` (default 1e-9) times the scale, or times 1
(SI units: rad, m, N m) for quantities smaller than that (the slider-crank's τ̂ is ~0.02 N m;
a start-up tick's q̈ moves by 1e-10 under a change of summation order). Save on the old
code, compare on the new one.

Without ``--save`` or ``--compare`` it prints each mechanism's tick cost (thread CPU,
``time.thread_time_ns``: immune to the other processes of a shared machine; median and p99
after the first 50 ticks). ``--base PKG`` runs a baseline's package too (another tree's
``mbfg_ros`` exported under another name, as for ``bench/estimator_ab.py``) in the same
process, both estimators fed the same readings and ticked alternately so that both see the
same load, and prints both costs with the largest difference of the estimates' fields
(relative to the field's largest magnitude, or to 1 where smaller); with ``--every N`` a
tick at every N-th sensor instant only (merged ticks: readings at N stamps between two
ticks) and ``--offset S`` every reading stamped S seconds later (off the tick grid).

    .venv/bin/python bench/planar_tick_check.py --save /tmp/planar_ref.npz
    .venv/bin/python bench/planar_tick_check.py --compare /tmp/planar_ref.npz
    .venv/bin/python bench/planar_tick_check.py
    git archive main mbfg_ros | tar -x -C /tmp/base
    mv /tmp/base/mbfg_ros /tmp/base/mbfg_ros_base
    .venv/bin/python bench/planar_tick_check.py --base /tmp/base/mbfg_ros_base [--duration 3]
"""
from __future__ import annotations

import argparse
import importlib
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from common import truth  # noqa: E402
from estimator_ab import load_package  # noqa: E402

from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig  # noqa: E402
from mbfg_ros.planar.dynamics import load_system  # noqa: E402
from mbfg_ros.planar.sensors import SensorConfig, simulate_measurements  # noqa: E402

QUANT = 2 * math.pi / 4096
ENC_SIGMA = math.sqrt(QUANT ** 2 / 12 + math.radians(0.05) ** 2)
SPRING_SENSORS = '''
joints:
  - {name: pivot, type: revolute, bodies: [ground, 0], offset: 0.2}
actuators:
  - {name: pivot_motor, joint: pivot}
sensors:
  - {name: bar_imu, type: imu, body: 0, point: [0.6, 0.1], angle: 0.3}
'''
ROWS = (('fourbar', 'fourbar.yaml', ('crank',), ''),
        ('five_bar', 'five_bar.yaml', None, ''),
        ('slider_crank', 'slider_crank.yaml', None, ''),
        ('spring_pendulum', 'spring_pendulum.yaml', None, SPRING_SENSORS),
        ('dfki', 'dfki_double_pendulum.yaml', None, ''))
FIELDS = ('q', 'qd', 'qdd', 'tau', 'joint_position', 'joint_velocity')


def run(yaml: str, joints: tuple[str, ...] | None, extra: str, rate: float, duration: float,
        motion: tuple[np.ndarray, ...] | None = None) -> dict[str, np.ndarray]:
    """Every estimate's fields (ticks, len) of one mechanism (``extra``: YAML appended) and
    the true motion read (``motion``: (t, q, q̇, q̈) given, else integrated)."""
    sys_ = load_system(_mechanism_path(yaml, extra))
    t, q, qd, qdd = truth(sys_, duration, rate) if motion is None else motion
    recs = simulate_measurements(sys_, t, q, qd, qdd,
                                 SensorConfig(joints=joints, encoder_rate=rate, imu_rate=rate),
                                 np.random.default_rng(0))
    est = Estimator(sys_, EstimatorConfig(frequency=rate, lag_duration=0.05,
                                          encoder_sigma=ENC_SIGMA))
    by_t: dict[float, list] = {}
    for r in recs:
        by_t.setdefault(r.t, []).append(r)
    out: dict[str, list] = {f: [] for f in FIELDS + ('tick_us',)}
    for tk in sorted(by_t):
        for r in by_t[tk]:
            est.add(r)
        c0 = time.thread_time_ns()
        e = est.tick(tk)
        spent = (time.thread_time_ns() - c0) / 1e3
        if e is not None:
            for f in FIELDS:
                out[f].append(np.asarray(getattr(e, f), dtype=float))
            out['tick_us'].append(spent)
    res = {f: np.array(v) for f, v in out.items()}
    res.update(truth_t=t, truth_q=q, truth_qd=qd, truth_qdd=qdd)
    return res


def _mechanism_path(yaml: str, extra: str) -> Path:
    path = REPO / 'config' / yaml
    if extra:
        with tempfile.NamedTemporaryFile('w', suffix='.yaml', delete=False) as f:
            f.write(path.read_text() + extra)
        path = Path(f.name)
    return path


def run_ab(yaml: str, joints: tuple[str, ...] | None, extra: str, rate: float,
           duration: float, base: str, every: int = 1, offset: float = 0.0
           ) -> tuple[np.ndarray, np.ndarray, float, str]:
    """(this tree's ticks µs, the baseline's, largest relative difference, its field) of one
    mechanism: both packages' estimators on the same readings, ticked alternately; at every
    ``every``-th sensor instant only (merged ticks), the readings stamped ``offset`` s later
    (off the grid: each tick then one period after its readings' instant)."""
    path = _mechanism_path(yaml, extra)
    t, q, qd, qdd = truth(load_system(path), duration, rate)
    runs = []
    for pkg in ('mbfg_ros', base):
        sys_ = importlib.import_module(f'{pkg}.planar.dynamics').load_system(path)
        sensors = importlib.import_module(f'{pkg}.planar.sensors')
        est_mod = importlib.import_module(f'{pkg}.estimation.estimator')
        recs = sensors.simulate_measurements(
            sys_, t, q, qd, qdd, sensors.SensorConfig(joints=joints, encoder_rate=rate,
                                                      imu_rate=rate), np.random.default_rng(0))
        est = est_mod.Estimator(sys_, est_mod.EstimatorConfig(
            frequency=rate, lag_duration=0.05, encoder_sigma=ENC_SIGMA))
        by_t: dict[float, list] = {}
        for r in recs:
            by_t.setdefault(r.t, []).append(replace(r, t=r.t + offset) if offset else r)
        runs.append((est, by_t, [], {f: [] for f in FIELDS}))
    if sorted(runs[0][1]) != sorted(runs[1][1]):
        raise SystemExit(f'{yaml}: the two packages simulated different reading stamps')
    late = 1.0 / rate if offset > 0 else 0.0
    for i, tk in enumerate(sorted(runs[0][1])):
        for est, by_t, ticks, fields in runs:
            for r in by_t[tk]:
                est.add(r)
        if i % every != every - 1:
            continue
        for est, by_t, ticks, fields in (runs if (i // every) % 2 == 0 else runs[::-1]):
            # (each tree first every other tick: neither gains from the other's warm caches)
            c0 = time.thread_time_ns()
            e = est.tick(tk + late)
            spent = (time.thread_time_ns() - c0) / 1e3
            if e is not None:
                ticks.append(spent)
                for f in FIELDS:
                    fields[f].append(np.asarray(getattr(e, f), dtype=float))
    worst, where = 0.0, '-'
    for f in FIELDS:
        new, old = np.array(runs[0][3][f]), np.array(runs[1][3][f])
        if new.shape != old.shape:
            return np.array(runs[0][2]), np.array(runs[1][2]), math.inf, f
        rel = float(np.max(np.abs(new - old), initial=0.0)) / max(
            float(np.max(np.abs(old), initial=0.0)), 1.0)
        if rel > worst:
            worst, where = rel, f
    return np.array(runs[0][2][50:]), np.array(runs[1][2][50:]), worst, where


def main_ab(base: Path, rate: float, duration: float, every: int = 1,
            offset: float = 0.0) -> int:
    """``--base``: both packages per mechanism, one table."""
    load_package(base, base.name)
    print(f'Planar estimator tick, this tree against {base} in one process, ticked '
          f'alternately (thread CPU µs; sensors and ticks at {rate:g} Hz, lag 0.05 s, '
          f'{duration:g} s; a tick every {every} sensor instant(s), readings '
          f'{1e3 * offset:g} ms off the grid)\n')
    print('| mechanism | estimates | this tree median / p99 | baseline median / p99 | change '
          '| largest difference / scale (field) |\n|---|---|---|---|---|---|')
    for name, yaml, joints, extra in ROWS:
        new, old, worst, where = run_ab(yaml, joints, extra, rate, duration, base.name,
                                        every, offset)
        print(f'| {name} | {len(new) + 50} | {np.median(new):.0f} / '
              f'{np.percentile(new, 99):.0f} | {np.median(old):.0f} / '
              f'{np.percentile(old, 99):.0f} | '
              f'{100 * (np.median(new) / np.median(old) - 1):+.0f} % | {worst:.1e} ({where}) |',
              flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument('--save', type=Path, help='write the estimates to this .npz')
    group.add_argument('--compare', type=Path, help='compare with this .npz')
    ap.add_argument('--rate', type=float, default=1000.0, help='sensor and tick rate, Hz')
    ap.add_argument('--duration', type=float, default=1.0, help='simulated seconds per row')
    group.add_argument('--base', type=Path,
                       help='a baseline package (another tree\'s mbfg_ros under another '
                       'name) run alongside, ticked alternately')
    ap.add_argument('--tol', type=float, default=1e-9, help='largest relative difference')
    ap.add_argument('--every', type=int, default=1,
                    help='with --base: a tick at every N-th sensor instant only (merged ticks)')
    ap.add_argument('--offset', type=float, default=0.0,
                    help='with --base: every reading stamped this many seconds later (off '
                    'the tick grid)')
    a = ap.parse_args(argv)
    if a.base:
        return main_ab(a.base.resolve(), a.rate, a.duration, a.every, a.offset)
    res = {}
    cost = {}
    ref = np.load(a.compare) if a.compare else None
    for name, yaml, joints, extra in ROWS:
        motion = None
        if ref is not None:        # the saved motion: the truth's integration uses q̈(q, q̇)
            motion = tuple(ref[f'{name}/truth_{f}'] for f in ('t', 'q', 'qd', 'qdd'))
        for f, v in run(yaml, joints, extra, a.rate, a.duration, motion).items():
            if f == 'tick_us':
                cost[name] = v[50:]
            else:
                res[f'{name}/{f}'] = v
    if not (a.save or a.compare):
        print(f'Planar estimator tick, thread CPU µs (sensors and ticks at {a.rate:g} Hz, '
              f'lag 0.05 s, {a.duration:g} s)\n')
        print('| mechanism | estimates | tick median | p99 |\n|---|---|---|---|')
        for name, v in cost.items():
            print(f'| {name} | {len(v) + 50} | {np.median(v):.0f} | '
                  f'{np.percentile(v, 99):.0f} |')
        return 0
    if a.save:
        np.savez(a.save, **res)
        print(f'saved {len(res)} arrays to {a.save}')
        return 0
    worst = 0.0
    for key in sorted(res):
        new, old = res[key], ref[key]
        if new.shape != old.shape:
            print(f'{key}: shape {new.shape} != {old.shape}')
            return 1
        diff = float(np.max(np.abs(new - old), initial=0.0))
        scale = float(np.max(np.abs(old), initial=0.0))
        rel = diff / max(scale, 1.0)
        worst = max(worst, rel)
        print(f'{key:34s} {new.shape[0]:5d} estimates, max |Δ| {diff:.2e}, max |ref| '
              f'{scale:.3g}: {rel:.2e}')
    print(f'worst {worst:.2e} (tolerance {a.tol:g})')
    return 0 if worst <= a.tol else 1


if __name__ == '__main__':
    raise SystemExit(main())
