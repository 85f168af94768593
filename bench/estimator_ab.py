#!/usr/bin/env python3
"""The estimator of this tree against a baseline's, in one process (issue 24): the same
readings, ticked alternately, estimates compared sample by sample and thread CPU per tick.

The baseline is another tree's package, e.g. main's, exported under another name so that
both import side by side (its imports are relative)::

    git archive main mbfg_ros | tar -x -C /tmp/base
    mv /tmp/base/mbfg_ros /tmp/base/mbfg_ros_base
    .venv/bin/python bench/estimator_ab.py --base /tmp/base/mbfg_ros_base [--duration 3]

Rows: the UR5 + wrist IMU with and without ``effort`` (config/urdf, the parameters of
config/estimator_urdf.yaml), the 7-DOF arm (panda_like.urdf, encoders), each at 1 kHz with
every sensor on the tick grid, and the UR5 with the IMU half a tick off the grid (readings
between ticks: the two-key interval factors) and at 500 Hz (``bench/estimator_spatial.py``'s
rate); the four-bar of config/fourbar.yaml (crank encoder + coupler IMU, natural
coordinates, ``bench/estimator.py``'s truth) at 1 kHz. Each estimator simulates its own
readings from the same seed (its own record classes); the readings are checked equal first.
Per row: the largest difference of q, q̇, q̈, τ̂ and their σ's over every estimate, relative
to the quantity's RMS (``≤ 1e-9`` is the issue's bar; 0 is bit-identical), the counters that
differ, and both estimators' tick median / p99 (µs, ``time.thread_time_ns``: immune to other
processes; alternate ticks see the same load). Exit status 1 if a row differs by more than
``--tol``. ``--every N`` ticks at every N-th grid time only (the live node's merged ticks:
each interval then carries readings at N stamps, the between-ticks path); ``--offset S``
stamps every reading S seconds later (off the tick grid, as a real robot's stamps).
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

QUANT = 2 * math.pi / 4096
ENC_SIGMA = math.sqrt(QUANT ** 2 / 12 + math.radians(0.05) ** 2)
FIELDS = ('q', 'qd', 'qdd', 'tau', 'q_std', 'qd_std')


def load_package(root: Path, name: str):
    """Import the package at ``root`` under ``name`` (its imports are relative)."""
    spec = importlib.util.spec_from_file_location(name, root / '__init__.py',
                                                  submodule_search_locations=[str(root)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return name


def setup(pkg: str, urdf: str, overlay: str | None, rate: float, duration: float,
          effort: bool, imu_offset: float):
    """(estimator, readings by stamp) of one row, built with package ``pkg``."""
    imp = importlib.import_module
    sim = imp(f'{pkg}.spatial.sensor_sim')
    system = imp(f'{pkg}.spatial.system').build_spatial_system(
        REPO / 'config' / 'urdf' / urdf, REPO / 'config' / 'urdf' / overlay if overlay else None)
    params = imp(f'{pkg}.ros.params').load_params_file(REPO / 'config' / 'estimator_urdf.yaml')
    est_mod = imp(f'{pkg}.estimation.estimator')
    ref = sim.reference_motion(system, duration, 1e-3, seed=0)
    tr = sim.track_reference(system, ref, controller=system)
    cfg = sim.SpatialSensorConfig(encoder_rate=rate, encoder_counts=4096,
                                  encoder_sigma=math.radians(0.05),
                                  effort_sigma=0.0 if effort else None,
                                  imu_rate=rate if overlay else 0.0,
                                  gyro_sigma=0.005, accel_sigma=0.05)
    recs = sim.simulate_spatial_measurements(system, tr.t, tr.q, tr.qd, tr.qdd, tr.tau, cfg,
                                             np.random.default_rng(0))
    if imu_offset:
        from dataclasses import replace
        recs = [replace(r, t=r.t + imu_offset) if hasattr(r, 'sensor') else r for r in recs]
    est = est_mod.Estimator(system, est_mod.EstimatorConfig(
        frequency=rate, lag_duration=0.05, encoder_sigma=ENC_SIGMA, gyro_sigma=0.005,
        accel_sigma=0.05, dynamics_sigma=float(params['dynamics_sigma']),
        unknown_effort_sigma=float(params['unknown_effort_sigma'])))
    ticks = np.arange(1, int(duration * rate)) / rate
    by_tick: list[list] = [[] for _ in ticks]
    for r in sorted(recs, key=lambda r: r.t):
        i = int(np.searchsorted(ticks, r.t - 1e-12))
        if i < len(ticks):
            by_tick[i].append(r)
    return est, ticks, by_tick


def setup_fourbar(pkg: str, rate: float, duration: float):
    """(estimator, ticks, readings by tick) of the four-bar row, built with package ``pkg``."""
    if str(REPO / 'bench') not in sys.path:
        sys.path.insert(0, str(REPO / 'bench'))
    from common import truth
    imp = importlib.import_module
    system = imp(f'{pkg}.planar.dynamics').load_system(REPO / 'config' / 'fourbar.yaml')
    sensors = imp(f'{pkg}.planar.sensors')
    est_mod = imp(f'{pkg}.estimation.estimator')
    t, q, qd, qdd = truth(imp('mbfg_ros.planar.dynamics').load_system(
        REPO / 'config' / 'fourbar.yaml'), duration, 1000.0)
    recs = sensors.simulate_measurements(
        system, t, q, qd, qdd, sensors.SensorConfig(joints=('crank',), encoder_rate=rate,
                                                    imu_rate=rate), np.random.default_rng(0))
    est = est_mod.Estimator(system, est_mod.EstimatorConfig(
        frequency=rate, lag_duration=0.05, encoder_sigma=ENC_SIGMA))
    ticks = np.arange(1, int(duration * rate)) / rate
    by_tick: list[list] = [[] for _ in ticks]
    for r in sorted(recs, key=lambda r: r.t):
        i = int(np.searchsorted(ticks, r.t - 1e-12))
        if i < len(ticks):
            by_tick[i].append(r)
    return est, ticks, by_tick


def same_readings(a: list[list], b: list[list]) -> bool:
    for ra, rb in zip(a, b):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb):
            if x.t != y.t:
                return False
            for f in ('position', 'velocity', 'effort', 'gyro', 'accel'):
                u, v = getattr(x, f, None), getattr(y, f, None)
                if (u is None) != (v is None) or (u is not None
                                                  and not np.array_equal(u, v, equal_nan=True)):
                    return False
    return len(a) == len(b)


def regrid(ticks: np.ndarray, by_tick: list[list], every: int, offset: float
           ) -> tuple[np.ndarray, list[list]]:
    """The readings ``by_tick`` stamped ``offset`` s later (off the tick grid) and the
    ticks thinned to every ``every``-th grid time (merged ticks, as the live node's tick
    budget merges them: readings at 1-``every`` stamps per interval), each reading at the
    first tick at or after its stamp."""
    if every == 1 and not offset:
        return ticks, by_tick
    from dataclasses import replace
    recs = [replace(r, t=r.t + offset) if offset else r for rs in by_tick for r in rs]
    kept = ticks[every - 1::every]
    out: list[list] = [[] for _ in kept]
    for r in sorted(recs, key=lambda r: r.t):
        i = int(np.searchsorted(kept, r.t - 1e-12))
        if i < len(kept):
            out[i].append(r)
    return kept, out


def run_row(base: str, label: str, args: tuple, tol: float, every: int = 1,
            offset: float = 0.0) -> bool:
    build = setup_fourbar if args[0] == 'fourbar' else setup
    args = args[1:] if args[0] == 'fourbar' else args
    (ea, grid, ra), (eb, _, rb) = build('mbfg_ros', *args), build(base, *args)
    (ticks, ra), rb = regrid(grid, ra, every, offset), regrid(grid, rb, every, offset)[1]
    if not same_readings(ra, rb):
        print(f'| {label} | readings differ between the two trees: not compared |')
        return False
    out: dict[str, list] = {'a': [], 'b': []}
    cpu: dict[str, list] = {'a': [], 'b': []}
    for i, t in enumerate(ticks):
        order = (('a', ea, ra), ('b', eb, rb)) if i % 2 == 0 else (('b', eb, rb), ('a', ea, ra))
        for who, est, recs in order:
            for r in recs[i]:
                est.add(r)
            c0 = time.thread_time_ns()
            e = est.tick(t)
            cpu[who].append(time.thread_time_ns() - c0)
            out[who].append(e)
    worst, where = 0.0, ''
    for f in FIELDS:
        A = np.array([getattr(e, f) if e is not None else np.full_like(
            getattr(next(x for x in out['a'] if x is not None), f), np.nan) for e in out['a']])
        B = np.array([getattr(e, f) if e is not None else np.full_like(A[0], np.nan)
                      for e in out['b']])
        if not np.array_equal(np.isnan(A), np.isnan(B)):
            worst, where = math.inf, f'{f}: estimates missing in one'
            continue
        scale = np.sqrt(np.nanmean(B * B, axis=0)) + 1e-300
        d = np.nanmax(np.abs(A - B) / scale) if A.size else 0.0
        if d > worst:
            worst, where = float(d), f
    ca, cb = ea.counters, eb.counters
    diff = {k: (ca[k], cb.get(k)) for k in ca if ca[k] != cb.get(k)}
    a, b = np.array(cpu['a'][50:]) / 1e3, np.array(cpu['b'][50:]) / 1e3
    ok = worst <= tol and not diff
    print(f'| {label} | {worst:.2g} ({where or "-"}) | {diff or "-"} | '
          f'{np.median(a):.0f} / {np.percentile(a, 99):.0f} | '
          f'{np.median(b):.0f} / {np.percentile(b, 99):.0f} | '
          f'{100 * (np.median(a) / np.median(b) - 1):+.0f} % | {"ok" if ok else "DIFFERS"} |',
          flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--base', type=Path, required=True,
                    help='the baseline package directory (exported under another name)')
    ap.add_argument('--duration', type=float, default=3.0, help='simulated seconds per row')
    ap.add_argument('--tol', type=float, default=1e-9,
                    help='largest difference allowed, relative to the RMS of the quantity')
    ap.add_argument('--rows', nargs='*', default=None, help='labels (prefixes) to run')
    ap.add_argument('--every', type=int, default=1,
                    help='tick at every N-th grid time only (merged ticks: readings at N '
                         'stamps between two ticks)')
    ap.add_argument('--offset', type=float, default=0.0,
                    help='every reading stamped this many seconds later (off the tick grid)')
    a = ap.parse_args(argv)
    base = load_package(a.base.resolve(), a.base.name)
    rows = [('UR5 + IMU 1 kHz', ('ur5.urdf', 'ur5_sensors.yaml', 1000.0, a.duration, True, 0.0)),
            ('UR5 + IMU 1 kHz, no effort',
             ('ur5.urdf', 'ur5_sensors.yaml', 1000.0, a.duration, False, 0.0)),
            ('UR5 + IMU 500 Hz', ('ur5.urdf', 'ur5_sensors.yaml', 500.0, a.duration, True, 0.0)),
            ('UR5 + IMU off the grid (+0.5 ms)',
             ('ur5.urdf', 'ur5_sensors.yaml', 1000.0, a.duration, True, 0.5e-3)),
            ('7-DOF arm 1 kHz', ('panda_like.urdf', None, 1000.0, a.duration, True, 0.0)),
            ('four-bar 1 kHz', ('fourbar', 1000.0, a.duration))]
    if a.rows:
        rows = [r for r in rows if any(r[0].startswith(p) for p in a.rows)]
    print(f'This tree against {a.base} ({a.duration:g} s per row; ticks every {a.every} grid '
          f'period(s), readings {1e3 * a.offset:g} ms off the grid; thread CPU µs per tick, '
          f'alternate ticks)\n')
    print('| row | largest difference / RMS (field) | counters differing | this tree tick '
          'median / p99 µs | baseline median / p99 µs | change | |')
    print('|---|---|---|---|---|---|---|')
    ok = all([run_row(base, label, args, a.tol, a.every, a.offset) for label, args in rows])
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
