"""The tick driver shared by node and replay: schedule, determinism, torque commands."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.dynamics import forward_accel
from mbfg_ros.inverse_direct import inverse_dynamics_direct
from mbfg_ros.ros.conversions import Reference
from mbfg_ros.ros.driver import CommandLaw, EstimatorDriver, period_ns, tick_times
from mbfg_ros.ros.params import ParameterError, parse_estimator
from mbfg_ros.sensors import SensorModel

from test_ros_support import fourbar_data, fourbar_path, fourbar_system, stamp_of

MS = 1_000_000


def settings(**kw):
    return parse_estimator({'mechanism': str(fourbar_path()), 'frequency': 200.0,
                            'lag_duration': 0.1, **kw})


# ------------------------------------------------------------------ schedule

def test_tick_times_are_the_grid_points_since_the_last_tick():
    p = period_ns(100.0)
    assert p == 10 * MS
    assert tick_times(None, 1_234 * MS, p) == ([1_230 * MS], 0)
    assert tick_times(1_230 * MS, 1_265 * MS, p) == ([1_240 * MS, 1_250 * MS, 1_260 * MS], 0)
    assert tick_times(1_230 * MS, 1_260 * MS, p, inclusive=False) == ([1_240 * MS,
                                                                        1_250 * MS], 0)
    assert tick_times(1_260 * MS, 1_262 * MS, p) == ([], 0)


def test_a_long_clock_jump_runs_only_the_latest_ticks_and_counts_the_rest():
    p = period_ns(100.0)
    ticks, skipped = tick_times(0, 1_000 * MS, p, max_ticks=5)
    assert ticks == [960 * MS, 970 * MS, 980 * MS, 990 * MS, 1_000 * MS] and skipped == 95


def run(driver, recs, order=None):
    """Replay-style feeding: ticks before each stamp, then queue; returns estimates by stamp."""
    outs = []
    clock = None
    for r in (recs if order is None else [recs[i] for i in order]):
        t = stamp_of(r)
        clock = t if clock is None else max(clock, t)
        outs += driver.advance(clock, inclusive=False)
        driver.push(t, r)
    outs += driver.advance(clock)
    return {o.t_ns: o for o in outs if o.estimate is not None}


def test_arrival_order_within_a_tick_does_not_change_the_estimates():
    system, _, recs = fourbar_data()
    recs = recs[:120]
    a = run(EstimatorDriver(system, settings()), recs)
    # swap joint and IMU records that share a stamp (different topics arrive in any order)
    order = list(range(len(recs)))
    for i in range(0, len(order) - 1, 2):
        if recs[i].t == recs[i + 1].t:
            order[i], order[i + 1] = order[i + 1], order[i]
    assert order != list(range(len(recs)))
    b = run(EstimatorDriver(system, settings()), recs, order)
    assert a.keys() == b.keys() and len(a) > 50
    for t in a:
        np.testing.assert_array_equal(a[t].estimate.q, b[t].estimate.q)


def test_polling_the_clock_at_any_rate_gives_the_same_ticks_and_estimates():
    """The node's timer may fire late or twice per period: only the grid matters."""
    system, _, recs = fourbar_data()
    recs = recs[:120]
    a = run(EstimatorDriver(system, settings()), recs)
    d = EstimatorDriver(system, settings())
    outs = []
    i = 0
    rng = np.random.default_rng(0)
    now = stamp_of(recs[0]) - 7 * MS
    outs += d.advance(now)                  # the node runs before the first message
    while i < len(recs):
        now += int(rng.integers(1, 23 * MS))          # irregular wall-clock polling
        while i < len(recs) and stamp_of(recs[i]) <= now:
            d.push(stamp_of(recs[i]), recs[i])
            i += 1
        outs += d.advance(now)
    b = {o.t_ns: o for o in outs if o.estimate is not None}
    common = sorted(set(a) & set(b))
    assert len(common) == len(a)
    assert all(t > stamp_of(recs[-1]) for t in set(b) - set(a))   # ticks after the data
    for t in common:
        np.testing.assert_array_equal(a[t].estimate.q, b[t].estimate.q)


def test_a_clock_gone_back_resets_and_says_so():
    system, _, recs = fourbar_data()
    d = EstimatorDriver(system, settings())
    run(d, recs[:60])
    assert d.counters.get('resets', 0) == 0
    d.advance(stamp_of(recs[0]) - 2_000 * MS)
    assert d.counters['resets'] == 1
    assert any('clock jumped back' in e for e in d.events)


def test_records_older_than_the_window_are_dropped_and_counted():
    system, _, recs = fourbar_data()
    d = EstimatorDriver(system, settings())
    run(d, recs[:100])
    assert d.push(stamp_of(recs[0]), recs[0]) is False
    assert d.counters['dropped.too_old'] == 1


def test_a_burst_beyond_the_queue_drops_the_oldest():
    system, _, recs = fourbar_data()
    d = EstimatorDriver(system, settings(max_queue=10))
    for r in recs[:30]:
        d.push(stamp_of(r), r)
    assert d.counters['dropped.queue_full'] == 20


# ------------------------------------------------------------------ torque commands

def test_holding_torque_equals_the_virtual_power_inverse_dynamics_at_rest():
    system = fourbar_system()
    law = CommandLaw(system, [], 0.0, 0.0)
    for q in (system.q0, fourbar_data()[1].q[400]):
        expected = inverse_dynamics_direct(system, q, np.zeros(system.n),
                                           np.zeros(system.dof))
        np.testing.assert_allclose(law.hold(q), expected, rtol=1e-9, atol=1e-9)


def test_computed_torque_produces_the_commanded_joint_acceleration():
    """Forward dynamics under the computed torque gives s̈* = s̈_ref + Kp e + Kd ė."""
    system = fourbar_system()
    traj = fourbar_data()[1]
    kp, kd = 25.0, 10.0
    law = CommandLaw(system, ['crank'], kp, kd)
    sm = SensorModel(system)
    j = sm.joint_names.index('crank')
    for k in (100, 500, 900):
        q, qd = traj.q[k], traj.qd[k]
        s_ref, sd_ref, sdd_ref = np.array([0.3]), np.array([-1.0]), np.array([2.0])
        tau = law.track(q, qd, s_ref, sd_ref, sdd_ref)
        qdd = forward_accel(system, q, qd, tau).qdd
        p, v = sm.joint(j, q, qd, want=True)
        sdd = p.Hq[0] @ qdd + v.Hq[0] @ qd               # s̈ = J q̈ + J̇ q̇
        e = np.angle(np.exp(1j * (s_ref[0] - p.h[0])))
        target = sdd_ref[0] + kp * e + kd * (sd_ref[0] - v.h[0])
        assert sdd == pytest.approx(target, rel=1e-6, abs=1e-6)


def test_command_joints_accept_actuator_or_joint_names_and_reject_others():
    system = fourbar_system()
    assert list(CommandLaw(system, ['crank'], 0, 0).order) == [0]
    assert list(CommandLaw(system, ['crank_motor'], 0, 0).order) == [0]
    with pytest.raises(ParameterError, match="'wheel' is not an actuator"):
        CommandLaw(system, ['wheel'], 0, 0)


def test_a_reference_switches_commands_from_holding_to_tracking():
    system, _, recs = fourbar_data()
    d = EstimatorDriver(system, settings(kp=16.0, kd=8.0))
    ref = Reference(('crank',), np.array([0.0]), np.array([[0.5]]), np.zeros((1, 1)),
                    np.zeros((1, 1)))
    before = list(run(d, recs[:40]).values())[-1]
    assert d.set_reference(ref)
    after = list(run(d, recs[40:80]).values())[-1]
    np.testing.assert_allclose(before.command, d.law.hold(before.estimate.q))
    assert not np.allclose(after.command, d.law.hold(after.estimate.q))
    bad = Reference(('wheel',), np.array([0.0]), np.ones((1, 1)), np.zeros((1, 1)),
                    np.zeros((1, 1)))
    assert not d.set_reference(bad) and d.counters['dropped.bad_reference'] == 1
