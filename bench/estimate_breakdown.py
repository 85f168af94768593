#!/usr/bin/env python3
"""Where one estimate's CPU time goes, offline (issue 24): intake per message, gate, grouping,
factor build, ISAM2 update (with the fixed-lag marginalisation), covariance, output.

The estimator is driven as ``bench/estimator_spatial.py`` and ``bench/estimator.py`` drive
it (readings fed in stamp order, one tick per sensor instant, sensors and ticks at
``--rate``), with each phase's method of the :class:`~mbfg_ros.estimation.estimator.Estimator`
instance wrapped by a timer of this thread's CPU time (``time.thread_time_ns``: immune to
the other processes of a shared machine; the wrappers add ~1 µs per call). Phases (nested
ones are subtracted from their callers):

* ``intake``: ``Estimator.add`` per message (validation, observations, queue);
* ``evaluate``: ``Estimator._current_rows`` (the new interval's readings evaluated once, at
  their factor's linearisation point: the sensor models; issue 24) and
  ``Estimator._carried_rows`` (late readings' prediction for the gate);
* ``gate``: ``Estimator._gate`` (the innovation gate's arithmetic on those rows);
* ``attach``: ``Estimator._attach`` without the above (readings to keys);
* ``factor build``: ``Estimator._graph`` (every factor linearised, JacobianFactors);
* ``ISAM2 update``: ``Estimator._update`` (``IncrementalFixedLagSmoother.update``: ISAM2's
  update; the new estimate read) on the ticks that marginalise nothing: their mean (median);
* ``marginalisation``: what the ticks that also marginalise the keys leaving the window
  (every ``MARGINALISE_EVERY`` ticks: :mod:`mbfg_ros.estimation.graph`) spend in
  ``Estimator._update`` beyond the others' mean, spread over every tick (their extra times
  their share of the ticks; ``ISAM2 update`` + ``marginalisation`` is ``_update``'s mean
  over all ticks). A tick marginalises when the smoother holds no more keys after its
  update than before it (the new key in, at least one out): its ``timestamps()`` counted
  around the call, outside every phase's time and taken off the tick's;
* ``covariance``: ``Estimator._covariance`` (every ``covariance_every`` ticks);
* ``output``: ``Estimator._finish`` without the covariance (joint readings, τ̂, Estimate);
* ``other``: the rest of ``tick`` (prediction, dynamics σ, bookkeeping).

Rows: the UR5 + wrist IMU (``config/urdf``, encoders with effort, 3-axis gyro and accelerometer),
a 7-DOF arm (``panda_like.urdf``, encoders with effort) and the four-bar
(``config/fourbar.yaml``, crank encoder + coupler IMU); lag 0.05 s. Live costs (rclpy's take,
deserialisation, callbacks, executor and publishing) are in ``bench/node_throughput.py
--breakdown``.

    .venv/bin/python bench/estimate_breakdown.py [--duration 3] [--rate 1000]
"""
from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig  # noqa: E402

PHASES = ('intake', 'evaluate', 'gate', 'attach', 'factor build', 'ISAM2 update', 'covariance',
          'output', 'other')
COLUMNS = PHASES[1:6] + ('marginalisation',) + PHASES[6:]
_METHODS = (('add', 'intake'), ('_current_rows', 'evaluate'), ('_carried_rows', 'evaluate'),
            ('_gate', 'gate'), ('_attach', 'attach'),
            ('_graph', 'factor build'), ('_update', 'ISAM2 update'),
            ('_covariance', 'covariance'), ('_finish', 'output'), ('tick', 'tick'))
QUANT = 2 * math.pi / 4096
ENC_SIGMA = math.sqrt(QUANT ** 2 / 12 + math.radians(0.05) ** 2)


class PhaseTimer:
    """Exclusive thread-CPU time per phase, accumulated per tick (nested calls subtracted)."""

    def __init__(self) -> None:
        self.now = self._zero()
        self.stack: list[list[int]] = []          # [child time] of each open call
        self.ticks: list[dict[str, int]] = []

    @staticmethod
    def _zero() -> dict[str, int]:
        return {k: 0 for k in PHASES + ('tick', 'messages', 'probe', 'marginalised')}

    def wrap(self, est: Estimator) -> None:
        for method, phase in _METHODS:       # an older Estimator lacks some: 'other' then
            if hasattr(est, method):
                setattr(est, method, self._timed(getattr(est, method), phase))
        est._update = self._probed(est, est._update)

    def _keys(self, est: Estimator) -> int:
        """The smoother's key count, its cost kept apart (``probe``: off the tick)."""
        c0 = time.thread_time_ns()
        count = len(est._smoother.timestamps())
        self.now['probe'] += time.thread_time_ns() - c0
        return count

    def _probed(self, est: Estimator, fn: Callable) -> Callable:
        """``fn`` (the timed ``_update``) with the smoother's keys counted around it: the
        tick marginalised when it holds no more after the update than before."""
        def call(*args, **kw):
            before = self._keys(est)
            out = fn(*args, **kw)
            self.now['marginalised'] = int(self._keys(est) <= before)
            return out
        return call

    def _timed(self, fn: Callable, phase: str) -> Callable:
        def call(*args, **kw):
            self.stack.append([0])
            c0 = time.thread_time_ns()
            try:
                return fn(*args, **kw)
            finally:
                spent = time.thread_time_ns() - c0
                child = self.stack.pop()[0]
                self.now[phase] += spent - (0 if phase == 'tick' else child)
                if self.stack:
                    self.stack[-1][0] += spent
                if phase == 'intake':
                    self.now['messages'] += 1
        return call

    def end_tick(self) -> None:
        """Close one estimate: 'other' is the tick's time left after its phases."""
        now = self.now
        now['tick'] -= now['probe']
        inner = sum(now[p] for p in PHASES if p not in ('intake', 'other'))
        now['other'] = now['tick'] - inner
        self.ticks.append(dict(now))
        self.now = self._zero()


def drive(est: Estimator, recs: list, timer: PhaseTimer, skip: int = 50) -> dict:
    """Feed ``recs`` by stamp, one tick per stamp; the per-tick phase times (µs) after
    ``skip``, and ``messages`` per tick."""
    by_t: dict[float, list] = {}
    for r in recs:
        by_t.setdefault(r.t, []).append(r)
    for t in sorted(by_t):
        for r in by_t[t]:
            est.add(r)
        e = est.tick(t)
        if e is not None:
            timer.end_tick()
        else:
            timer.now = timer._zero()
    rows = timer.ticks[skip:]
    out = {k: np.array([r[k] for r in rows]) / 1e3 for k in PHASES + ('tick',)}
    out['messages'] = np.array([r['messages'] for r in rows])
    out['marginalised'] = np.array([r['marginalised'] for r in rows], dtype=bool)
    return out


def split_update(res: dict) -> tuple[str, str, float]:
    """The ``ISAM2 update`` cell (mean (median) of the ticks that marginalise nothing),
    the ``marginalisation`` cell (the marginalising ticks' extra, spread per tick) and the
    share of ticks that marginalise (module docstring)."""
    upd, marg = res['ISAM2 update'], res['marginalised']
    plain = upd[~marg] if (~marg).any() else upd
    share = float(marg.mean())
    extra = (upd[marg].mean() - plain.mean()) * share if marg.any() else 0.0
    return f'{plain.mean():.0f} ({np.median(plain):.0f})', f'{extra:.0f}', share


def spatial_row(urdf: Path, overlay: Path | None, rate: float, duration: float,
                effort: bool = True) -> dict:
    from mbfg_ros.ros.params import load_params_file
    from mbfg_ros.spatial.sensor_sim import (SpatialSensorConfig, reference_motion,
                                             simulate_spatial_measurements, track_reference)
    from mbfg_ros.spatial.system import build_spatial_system
    system = build_spatial_system(urdf, overlay)
    ref = reference_motion(system, duration, 1e-3, seed=0)
    tr = track_reference(system, ref, controller=system)
    imu = 1 if overlay is not None else 0
    cfg = SpatialSensorConfig(encoder_rate=rate, encoder_counts=4096,
                              encoder_sigma=math.radians(0.05),
                              effort_sigma=0.0 if effort else None, imu_rate=rate * imu,
                              gyro_sigma=0.005, accel_sigma=0.05)
    recs = simulate_spatial_measurements(system, tr.t, tr.q, tr.qd, tr.qdd, tr.tau, cfg,
                                         np.random.default_rng(0))
    params = load_params_file(REPO / 'config' / 'estimator_urdf.yaml')
    est = Estimator(system, EstimatorConfig(
        frequency=rate, lag_duration=0.05, encoder_sigma=ENC_SIGMA, gyro_sigma=0.005,
        accel_sigma=0.05, dynamics_sigma=float(params['dynamics_sigma']),
        unknown_effort_sigma=float(params['unknown_effort_sigma'])))
    timer = PhaseTimer()
    timer.wrap(est)
    return drive(est, recs, timer)


def fourbar_row(rate: float, duration: float) -> dict:
    from common import truth

    from mbfg_ros.planar.dynamics import load_system
    from mbfg_ros.planar.sensors import SensorConfig, simulate_measurements
    sys_ = load_system(REPO / 'config' / 'fourbar.yaml')
    t, q, qd, qdd = truth(sys_, duration, 1000.0)
    recs = simulate_measurements(sys_, t, q, qd, qdd,
                                 SensorConfig(joints=('crank',), encoder_rate=rate,
                                              imu_rate=rate), np.random.default_rng(0))
    est = Estimator(sys_, EstimatorConfig(frequency=rate, lag_duration=0.05,
                                          encoder_sigma=ENC_SIGMA))
    timer = PhaseTimer()
    timer.wrap(est)
    return drive(est, recs, timer)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--duration', type=float, default=3.0, help='simulated seconds per row')
    ap.add_argument('--rate', type=float, default=1000.0, help='sensor and tick rate, Hz')
    a = ap.parse_args(argv)
    urdf = REPO / 'config' / 'urdf'
    rows = [('UR5 + wrist IMU', lambda: spatial_row(urdf / 'ur5.urdf', urdf / 'ur5_sensors.yaml',
                                                    a.rate, a.duration)),
            ('UR5 + wrist IMU, no effort',
             lambda: spatial_row(urdf / 'ur5.urdf', urdf / 'ur5_sensors.yaml', a.rate,
                                 a.duration, effort=False)),
            ('7-DOF arm (panda_like), encoders',
             lambda: spatial_row(urdf / 'panda_like.urdf', None, a.rate, a.duration)),
            ('four-bar, crank encoder + coupler IMU', lambda: fourbar_row(a.rate, a.duration))]
    print(f'Per-estimate breakdown, offline: sensors and ticks at {a.rate:g} Hz, lag 0.05 s, '
          f'{a.duration:g} s per row; thread CPU µs, mean (median) per estimate; '
          f'python {platform.python_version()}')
    print()
    print('| row | ' + ' | '.join(COLUMNS) + ' | tick median / p99 | intake µs/message |')
    print('|---|' + '---|' * (len(COLUMNS) + 3))
    shares = []
    for label, fn in rows:
        res = fn()
        update, marg, share = split_update(res)
        shares.append(f'{label} {100 * share:.0f} %')
        cells = [update if p == 'ISAM2 update' else marg if p == 'marginalisation' else
                 f'{res[p].mean():.0f} ({np.median(res[p]):.0f})' for p in COLUMNS]
        per_msg = res['intake'].sum() / max(1, res['messages'].sum())
        print(f'| {label} | ' + ' | '.join(cells) +
              f' | {np.median(res["tick"]):.0f} / {np.percentile(res["tick"], 99):.0f} | '
              f'{per_msg:.1f} |', flush=True)
    print('\n(thread CPU time; ISAM2 update: the ticks that marginalise nothing; '
          'marginalisation: the marginalising ticks\' extra in IncrementalFixedLagSmoother.'
          'update, spread per tick; ticks that marginalise: ' + ', '.join(shares) + ')')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
