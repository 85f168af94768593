"""The floating-base estimator after a hole in all its inputs (issue 28: a stalled DDS link
loses every joint and IMU reading for tens of ms). On the simulated solo12's trot
(test/data/solo12/trot_3s) every reading of 40, 100 or 200 ms from t = 1.5 s is removed, as
the live bench lost them, and the run is scored against the same run without the hole
(computed here, no hard-coded numbers).

Measured (bench/floating_base.py's feed, this bag): v RMSE without a hole 0.0050 m/s; with a
40 ms hole 0.0107 (the gap integrated as one held reading before the bridge: 0.0372); the
base-frame velocity error from 0.5 s after the hole 0.008 m/s with the bridge, 0.035-0.098
without (the no-gap run's: 0.0055 after the start-up). The yaw turned during a hole is not
observable afterwards (the gyro is all there is), so recovery is scored in the base frame,
as the node publishes the twist.
"""
from __future__ import annotations

import numpy as np
import pytest

from bench.floating_base import floating_config, metrics, run_floating
from support.floating_data import solo_system, trot_bag

SETTLE = 0.5
"""s of the bag left out of the scores (the start-up while standing)."""
START = 1500
"""Sample (1 kHz) where the hole starts: mid-trot."""
RECOVERY = 0.5
"""s after the hole's end from which the error must be back near the no-gap run's."""

_bag = pytest.fixture(scope='module', name='bag')(trot_bag)
_system = pytest.fixture(scope='module', name='system')(solo_system)


def _without(d: dict, a: int, b: int) -> dict:
    """The bag's arrays with every reading of samples a..b-1 removed (all streams)."""
    keep = np.ones(len(d['t']), bool)
    keep[a:b] = False
    return {k: (v[keep] if isinstance(v, np.ndarray) and v.shape[:1] == keep.shape else v)
            for k, v in d.items()}


def _base_error(d: dict, tr) -> np.ndarray:
    """‖v̂_b − v_b‖ per sample: the base-frame velocity (the published twist)."""
    v_b = np.einsum('kji,kj->ki', tr.R, tr.v)
    return np.linalg.norm(v_b - d['v'], axis=1)



@pytest.fixture(scope='module')
def no_gap(bag, system) -> dict:
    tr = run_floating(bag, floating_config(), system=system)
    t = bag['t'] - bag['t'][0]
    err = _base_error(bag, tr)
    return {'metrics': metrics(bag, tr),
            'base_rmse': float(np.sqrt(np.mean(err[t >= SETTLE] ** 2)))}


@pytest.mark.parametrize('gap_ms', [40, 100, 200])
def test_the_estimate_recovers_after_a_hole_in_every_input(bag, system, no_gap, gap_ms):
    d = _without(bag, START, START + gap_ms)
    tr = run_floating(d, floating_config(), system=system)
    t = d['t'] - d['t'][0]
    after = t >= (START + gap_ms) / 1000.0 + RECOVERY
    err = _base_error(d, tr)
    late = float(np.sqrt(np.mean(err[after] ** 2)))
    # measured 1.5x the no-gap run's error; integrating the hole as measured: 6-18x
    assert late < 2.5 * no_gap['base_rmse'], (late, no_gap['base_rmse'])
    assert np.isfinite(tr.v).all() and np.isfinite(tr.p).all()
    assert tr.counters['imu_gaps'] == 1 and tr.counters['restarts'] == 0, tr.counters


def test_a_40_ms_hole_costs_the_run_little(bag, system, no_gap):
    d = _without(bag, START, START + 40)
    m = metrics(d, run_floating(d, floating_config(), system=system))
    # measured 2.1x (the transient right after the hole); the old integration: 7.4x
    assert m['v_rmse'] < 3.0 * no_gap['metrics']['v_rmse'], (m['v_rmse'],
                                                             no_gap['metrics']['v_rmse'])
    assert m['drift_pct'] < 2.0, m        # issue 28's target holds through the hole
