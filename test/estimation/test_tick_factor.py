"""Issue 24, branch tick8e: the tick's linear factor written into buffers kept from tick to
tick (:meth:`GraphMixin._tick_factor`) against the general path that builds it afresh
(:func:`factors.stacked_linear_factor`; the estimator's ``_kept_tick_factor`` switched
off): every estimate bit for bit and the same counters, while the readings' rows come and
go (a sensor missing some ticks), ticks merge, the unknown efforts' σ moves every tick (the
state rows' q̈ diagonal rewritten) and readings fall between ticks; and the queue's
shortcut when every reading is due keeps those stamped after the tick for later."""
from __future__ import annotations

import numpy as np
import pytest
from support.feeding import add_due
from support.ros_data import fourbar_data
from support.ur5 import readings, simulate_ur5

from mbfg_ros.core.measurements import ImuMeasurement, JointMeasurement
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.estimation.layout import SIGMA_MISSES, ReadingLayout
from mbfg_ros.core.observation import Observation
from mbfg_ros.estimation.observations import observation_sigmas


def _run(est: Estimator, recs: list, ticks: np.ndarray, events: dict | None = None) -> list:
    """Each tick's estimate (its q, q̇, q̈, σ_q and τ) after the records due; with
    ``events``, ``events[j](est)`` called before tick ``j``."""
    out, i = [], 0
    for j, t in enumerate(ticks):
        if events and j in events:
            events[j](est)
        i = add_due(recs, i, t, est)
        e = est.tick(float(t))
        out.append(None if e is None else np.concatenate((e.q, e.qd, e.qdd, e.q_std, e.tau)))
    return out


def _assert_same_runs(a: list, b: list, ticks: np.ndarray) -> None:
    """Runs ``a`` and ``b`` (:func:`_run`) give the same estimates bit for bit, and more
    than 80 % of ``a``'s ticks give one."""
    assert sum(x is not None for x in a) > 0.8 * len(ticks)
    for x, y in zip(a, b):
        assert (x is None) == (y is None)
        if x is not None:
            assert np.array_equal(x, y, equal_nan=True)


def _ab(system, cfg: EstimatorConfig, recs: list, ticks: np.ndarray) -> None:
    fast = Estimator(system, cfg)
    general = Estimator(system, cfg)
    general._kept_tick_factor = False                   # the general stacked factor
    a, b = _run(fast, recs, ticks), _run(general, recs, ticks)
    _assert_same_runs(a, b, ticks)
    assert fast.counters == general.counters
    assert len(fast._factor_bufs) >= 2                  # several row counts met
    assert not general._factor_bufs                     # the switch took the general path


def _thinned(recs: list, every: int, kind) -> list:
    """Every ``every``-th record of type ``kind`` left out (its rows missing that tick)."""
    out, seen = [], 0
    for r in recs:
        if isinstance(r, kind):
            seen += 1
            if seen % every == 0:
                continue
        out.append(r)
    return out


@pytest.mark.parametrize('merge, offset', [(1, 0.0), (2, 0.0), (1, 1e-3)])
def test_the_fourbars_tick_factor_on_kept_buffers_is_the_general_one(merge, offset):
    from dataclasses import replace
    system, _, recs = fourbar_data(1.0, 200.0)
    recs = _thinned(recs, 7, ImuMeasurement)
    if offset:
        recs = [replace(r, t=r.t + offset) if isinstance(r, ImuMeasurement) else r
                for r in recs]
    t0 = recs[0].t
    ticks = t0 + np.arange(0, 1.0, merge / 200.0)
    _ab(system, EstimatorConfig(frequency=200.0 / merge, lag_duration=0.05), recs, ticks)


@pytest.mark.parametrize('effort', [True, False])
def test_the_ur5s_tick_factor_on_kept_buffers_is_the_general_one(effort):
    """Without efforts (unknown_effort_sigma > 0) the state factor's σ moves every tick:
    only its q̈ diagonal is rewritten in the kept buffer."""
    from mbfg_ros.spatial.system import build_spatial_system
    from conftest import CONFIG
    system = build_spatial_system(CONFIG / 'urdf' / 'ur5.urdf',
                                  CONFIG / 'urdf' / 'ur5_sensors.yaml')
    tr, taus = simulate_ur5(system, 0.6, 2e-3)
    recs = readings(system, tr, taus, np.random.default_rng(4))
    if not effort:
        recs = [JointMeasurement(r.t, r.names, r.position, r.velocity, np.zeros(0))
                if isinstance(r, JointMeasurement) else r for r in recs]
    recs = _thinned(recs, 5, ImuMeasurement)
    cfg = EstimatorConfig(frequency=500.0, lag_duration=0.05,
                          unknown_effort_sigma=0.0 if effort else 5.0)
    _ab(system, cfg, recs, tr.t[1:])


def test_readings_stamped_after_the_tick_wait_for_a_later_one():
    """The queue's shortcut (every reading due when the newest stamp is) must not take
    readings stamped after the tick: they are used by the tick at their stamp."""
    system, _, recs = fourbar_data(0.2, 200.0)
    est = Estimator(system, EstimatorConfig(frequency=200.0, lag_duration=0.05))
    t = sorted({r.t for r in recs})
    for r in recs:
        if r.t <= t[3]:
            est.add(r)
    for tk in t[:3]:
        est.tick(tk)
    used = sum(v for k, v in est.counters.items() if k.startswith('used_'))
    for r in recs:                  # the readings of the next two stamps, at once
        if t[3] < r.t <= t[5]:
            est.add(r)
    est.tick(t[3])                  # the readings at t[4], t[5] are not due yet
    due = list(est._pending)
    assert due and all(p.t > t[3] for p in due)
    at_t3 = sum(v for k, v in est.counters.items() if k.startswith('used_')) - used
    assert at_t3 > 0
    est.tick(t[4])
    assert all(p.t > t[4] for p in est._pending) and est._pending


def test_a_layouts_sigmas_are_kept_only_while_the_same_read_only_arrays():
    """ReadingLayout.sigmas: the stacked σ's of its readings, kept while every reading's σ
    is the same read-only array; new arrays (other values) are stacked again; writable ones
    are never kept (they could change in place); after SIGMA_MISSES misses it stops
    keeping, still right."""
    system, _, _ = fourbar_data(0.2, 200.0)
    est = Estimator(system)

    def ro(v):
        a = np.array(v, dtype=float)
        a.flags.writeable = False
        return a
    obs = [Observation('joint_pos', 0, np.zeros(1), ro([0.1])),
           Observation('gyro', 0, np.zeros(1), ro([0.2]))]
    layout = ReadingLayout(obs, est.sm, est._slot_base, est._slot_wrap, est._slot_joint,
                           3.0, 3.0)
    first = layout.sigmas(obs)
    assert np.array_equal(first, observation_sigmas(obs)) and layout.sigmas(obs) is first
    other = [obs[0], obs[1]._replace(sigma=ro([0.3]))]
    assert np.array_equal(layout.sigmas(other), [0.1, 0.3])
    writable = [obs[0], obs[1]._replace(sigma=np.array([0.4]))]
    got = layout.sigmas(writable)
    writable[1].sigma[0] = 0.5                          # changed in place
    assert np.array_equal(got, [0.1, 0.4])
    assert np.array_equal(layout.sigmas(writable), [0.1, 0.5])
    for i in range(SIGMA_MISSES + 1):
        new = [obs[0], obs[1]._replace(sigma=ro([1.0 + i]))]
        assert np.array_equal(layout.sigmas(new), [0.1, 1.0 + i])
    assert layout._sig is False


@pytest.mark.parametrize('which', ['fourbar', 'ur5'])
def test_the_kept_buffers_follow_a_sigma_change_and_a_reset_mid_run(which):
    """What the per-tick path keeps from tick to tick (the tick factor's buffers, the state's
    and the readings' 1/σ, a layout's σ's, the gate's kept Q(τ)) follows
    Estimator.reconfigure (new dynamics and sensor σ's) and a reset in the middle of a run:
    every estimate bit for bit the general path's, which builds each factor afresh from
    σ's stacked every tick; and
    the σ change does move the estimates (else the comparison would prove nothing)."""
    if which == 'fourbar':
        system, _, recs = fourbar_data(1.0, 200.0)
        ticks = recs[0].t + np.arange(0, 1.0, 1 / 200.0)
        cfg = EstimatorConfig(frequency=200.0, lag_duration=0.05)
    else:
        from mbfg_ros.spatial.system import build_spatial_system
        from conftest import CONFIG
        system = build_spatial_system(CONFIG / 'urdf' / 'ur5.urdf',
                                      CONFIG / 'urdf' / 'ur5_sensors.yaml')
        tr, taus = simulate_ur5(system, 0.6, 2e-3)
        recs = readings(system, tr, taus, np.random.default_rng(4))
        ticks = tr.t[1:]
        cfg = EstimatorConfig(frequency=500.0, lag_duration=0.05)
    third = len(ticks) // 3
    events = {third: lambda e: e.reconfigure(dynamics_sigma=2.0, encoder_sigma=3e-3,
                                             gyro_sigma=0.03, accel_sigma=0.1),
              2 * third: lambda e: e.reset()}
    fast, general, plain = Estimator(system, cfg), Estimator(system, cfg), Estimator(system, cfg)
    general._kept_tick_factor = False                   # the general stacked factor
    layout_of = general._layout_of

    def unkept(obs, key=None):                          # its layouts stack σ's every tick
        layout = layout_of(obs, key)
        layout._sig = False
        return layout
    general._layout_of = unkept
    a = _run(fast, recs, ticks, events)
    b = _run(general, recs, ticks, events)
    c = _run(plain, recs, ticks, {})
    _assert_same_runs(a, b, ticks)
    assert fast.counters == general.counters and fast.counters['resets'] == 1
    assert fast._factor_bufs and not general._factor_bufs
    moved = [not np.array_equal(x, y) for x, y in zip(a[third:2 * third], c[third:2 * third])
             if x is not None and y is not None]
    assert moved and all(moved)
