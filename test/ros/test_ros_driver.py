"""The tick driver shared by node and replay: schedule, determinism, torque commands."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.ros_data import fourbar_data, fourbar_path, fourbar_system, replay_driver, stamp_of

from mbfg_ros.estimation.control import CommandLaw
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.planar.problems.inverse_direct import inverse_dynamics_direct
from mbfg_ros.core.measurements import JointMeasurement
from mbfg_ros.planar.dynamics import forward_accel
from mbfg_ros.planar.sensors import SensorModel
from mbfg_ros.ros.conversions import Reference
from mbfg_ros.ros.driver import INPUT_KEYS, EstimatorDriver, period_ns, tick_times
from mbfg_ros.ros.params import ParameterError, parse_estimator

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
    """Replay-style feeding (in ``order``): the estimates by stamp."""
    outs = replay_driver(driver, recs if order is None else [recs[i] for i in order])
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
    assert d.estimator.counters['resets'] == 0
    d.advance(stamp_of(recs[0]) - 2_000 * MS)
    assert d.estimator.counters['resets'] == d.estimator.counters['reset:clock_jump'] == 1
    assert any(c == 'reset:clock_jump' and 'clock jumped back' in e for c, e in d.events)


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
    with pytest.raises(ValueError, match="'wheel' is not an actuator"):
        CommandLaw(system, ['wheel'], 0, 0)
    with pytest.raises(ParameterError, match="parameter 'command_joints': 'wheel'"):
        EstimatorDriver(system, settings(command_joints=['wheel']))


def test_a_reference_switches_commands_from_holding_to_tracking():
    """Holding (issue 25 changed it: a PD hold around the pose latched at the first command,
    not the static torque at the estimated pose), then tracking."""
    system, _, recs = fourbar_data()
    d = EstimatorDriver(system, settings(kp=16.0, kd=8.0))
    ref = Reference(('crank',), np.array([0.0, 1e6]), np.array([[0.5], [0.5]]),
                    np.zeros((2, 1)), np.zeros((2, 1)))
    outs = list(run(d, recs[:80]).values())
    first = next(o for o in outs if o.command is not None)
    s_hold = first.estimate.joint_position[0]             # latched when holding began
    before = outs[-1]
    assert d.set_reference(ref)
    after = list(run(d, recs[80:120]).values())[-1]
    sm = SensorModel(system)
    # holding: under the command the crank accelerates as s̈ = Kp (s_hold − s) − Kd ṡ
    q, qd = before.estimate.q, before.estimate.qd
    qdd = forward_accel(system, q, qd, before.command).qdd
    p, v = sm.joint(0, q, qd, want=True)
    sdd = p.Hq[0] @ qdd + v.Hq[0] @ qd
    assert sdd == pytest.approx(16.0 * (s_hold - p.h[0]) - 8.0 * v.h[0], rel=1e-6, abs=1e-6)
    # tracking: under the command the crank accelerates as s̈ = Kp (0.5 − s) − Kd ṡ
    q, qd = after.estimate.q, after.estimate.qd
    qdd = forward_accel(system, q, qd, after.command).qdd
    p, v = sm.joint(0, q, qd, want=True)
    sdd = p.Hq[0] @ qdd + v.Hq[0] @ qd
    assert sdd == pytest.approx(16.0 * (0.5 - p.h[0]) - 8.0 * v.h[0], rel=1e-6, abs=1e-6)
    assert abs(sdd) > 1.0                                 # not the holding torque
    bad = Reference(('wheel',), np.array([0.0]), np.ones((1, 1)), np.zeros((1, 1)),
                    np.zeros((1, 1)))
    assert not d.set_reference(bad) and d.counters['dropped.bad_reference'] == 1


# ------------------------------------------------------------------ live input path


def live(**kw):
    system = fourbar_system()
    return system, EstimatorDriver(system, settings(frequency=500.0, **kw), live=True)


def joint_msg(t_ns, names=('crank',), position=(0.0,), velocity=(), effort=()):
    from mbfg_ros.ros.conversions import joint_state_msg, rclpy_kit
    return joint_state_msg(rclpy_kit(), t_ns, names, position, velocity, effort)


def crank_error(system, outs, traj):
    """RMS crank-angle error of the estimates against the simulated truth."""
    from mbfg_ros.core.angles import wrap_angle
    from mbfg_ros.planar.sensors import joint_positions
    errs = []
    for o in outs:
        if o.estimate is None:
            continue
        k = int(round((o.t_ns / 1e9 - 1.0) * 1000))
        if 0 <= k < len(traj.t):
            errs.append(wrap_angle(o.estimate.joint_position[0]
                                   - joint_positions(system, traj.q[k])[0]))
    return float(np.sqrt(np.mean(np.square(errs)))), len(errs)


def raw_encoder_error(system, recs):
    from mbfg_ros.core.angles import wrap_angle
    from mbfg_ros.planar.sensors import joint_positions
    traj = fourbar_data(duration=1.0, rate=1000.0)[1]
    errs = [wrap_angle(r.position[0] - joint_positions(system, traj.q[int(round(
        (r.t - 1.0) * 1000))])[0]) for r in recs if isinstance(r, JointMeasurement)]
    return float(np.sqrt(np.mean(np.square(errs))))


def test_an_overloaded_live_driver_merges_ticks_and_never_drops_readings():
    """The clock jumps 10 ms at a time (the node ran late): 5 grid ticks are due each time,
    only the newest runs, every reading is still used and the estimate beats the encoder."""
    system, traj, recs = fourbar_data(duration=1.0, rate=1000.0)
    _, d = live()
    outs, i = [], 0
    now = stamp_of(recs[0])
    while i < len(recs):
        now += 10 * MS
        while i < len(recs) and stamp_of(recs[i]) <= now - 3 * MS:   # 3 ms in flight
            d.push(stamp_of(recs[i]), recs[i], now)
            i += 1
        outs += d.advance(now)
    c = d.estimator.counters
    assert d.ticks['overruns'] > 50 and d.ticks['merged'] >= 3 * d.ticks['overruns']
    assert d.counters['dropped.too_old'] == 0 and c['dropped_too_old'] == 0
    assert c['used_joint_pos'] >= sum(isinstance(r, JointMeasurement) for r in recs) - 15
    assert c['resets'] == 0
    err, count = crank_error(system, outs, traj)
    assert count > 80
    assert err < raw_encoder_error(system, recs)


def test_ticks_wait_for_a_stalled_sensor_stream_instead_of_running_past_its_readings():
    """The IMU topic stalls for 20 ms every 200 ms while the encoder flows (its readings
    then come in a burst; a stream not seen yet cannot hold the ticks, so not at the
    start). Ticks never run more than a period past what every flowing stream has
    delivered, so no reading lands deep in the window (where one factor makes
    ISAM2 relinearise the whole window), none is dropped, and the estimate stays good."""
    system, traj, recs = fourbar_data(duration=1.0, rate=1000.0)
    _, d = live()
    t0 = stamp_of(recs[0]) + 100 * MS              # stalls at 100-120 ms, 300-320 ms, ...
    arrival = [stamp_of(r) + (20 * MS - (stamp_of(r) - t0) % (200 * MS)
                              if hasattr(r, 'sensor') and stamp_of(r) >= t0
                              and (stamp_of(r) - t0) % (200 * MS) < 20 * MS else 0)
               for r in recs]
    order = sorted(range(len(recs)), key=lambda i: (arrival[i], i))
    behind, outs = [], []
    for i in order:
        t, now = stamp_of(recs[i]), arrival[i]
        if d.last_tick is not None:
            behind.append(d.last_tick - t)          # > 0: the reading arrives after its tick
        d.push(t, recs[i], now)
        outs += d.advance(now)
    c = d.estimator.counters
    assert max(behind) <= d.period                  # at most one tick back
    assert d.counters['dropped.too_old'] == 0 and c['dropped_too_old'] == 0
    assert c['resets'] == 0
    err, count = crank_error(system, outs, traj)
    assert count > 300 and err < raw_encoder_error(system, recs)


def test_a_tick_waits_for_the_readings_at_its_stamp_of_streams_at_the_tick_rate():
    """Encoders and IMU at 1 kHz on the tick grid under a simulator's clock, which comes
    before the readings of its stamp (``/clock`` first, a simulator's order): each
    ``/clock`` 0.5 ms after its time, the readings 0.1 ms after that, the loop looking every
    0.1 ms. Once each stream's spacing is known (its first readings), a tick waits for its
    own readings, so none arrives after its tick and lands on an older key (a "late"
    reading: a two-key factor, a longer re-elimination). A horizon of
    1.5 spacings ran tick k as soon as the clock reached its stamp with reading k − 1 in."""
    system, traj, recs = fourbar_data(duration=0.3, rate=1000.0)
    d = EstimatorDriver(system, settings(frequency=1000.0), live=True)
    arrivals = sorted((stamp_of(r) + 600_000, i) for i, r in enumerate(recs))
    start = stamp_of(recs[0])
    wall, j, outs, settled = start, 0, [], None
    while j < len(arrivals):
        wall += 100_000
        clock = start + (wall - 500_000 - start) // MS * MS     # the newest /clock
        while j < len(arrivals) and arrivals[j][0] <= wall:
            r = recs[arrivals[j][1]]
            d.push(stamp_of(r), r, clock)
            j += 1
        outs += d.advance(clock)
        if settled is None and clock >= start + 10 * MS:   # each stream's spacing known
            settled = d.estimator.counters['late']
    c = d.estimator.counters
    assert c['late'] == settled and c['dropped_too_old'] == 0, (settled, c)
    assert d.ticks['run'] > 250, d.ticks
    err, count = crank_error(system, outs, traj)
    assert count > 250 and err < raw_encoder_error(system, recs)


def test_a_silent_stream_stops_holding_the_ticks_back_after_the_sensor_timeout():
    """The IMU stops at 50 ms; encoders go on to 80 ms: ticks wait at the IMU's last
    reading. Once the IMU has been silent for ``sensor_timeout`` (wall time), the
    encoders alone move them on."""
    import time
    system, traj, recs = fourbar_data(duration=0.2, rate=1000.0)
    _, d = live(sensor_timeout=0.05)
    t0 = stamp_of(recs[0])
    imu_until = t0 + 50 * MS
    encs = [r for r in recs if not hasattr(r, 'sensor')]
    for r in recs:
        t = stamp_of(r)
        if t <= t0 + 80 * MS and (not hasattr(r, 'sensor') or t <= imu_until):
            d.push(t, r, t)
            d.advance(t)
    assert d.last_tick <= imu_until + d.period      # held back by the IMU
    time.sleep(0.06)                                # the IMU silent for its timeout
    for r in encs:
        t = stamp_of(r)
        if t0 + 80 * MS < t <= t0 + 100 * MS:
            d.push(t, r, t)
            d.advance(t)
    assert d.last_tick >= t0 + 98 * MS              # the encoder alone moves them on
    assert d.counters['dropped.too_old'] == 0


def test_a_constant_input_latency_shifts_the_ticks_instead_of_dropping_or_resetting():
    """A sensor 1 s late (or a simulator behind real time) is a latency, not a bag loop."""
    system, traj, recs = fourbar_data(duration=1.0, rate=1000.0)
    _, d = live()
    outs = []
    for r in recs:
        t = stamp_of(r)
        now = t + 1_000 * MS                       # arrives 1 s after its stamp
        d.push(t, r, now)
        outs += d.advance(now)
    c = d.estimator.counters
    assert c['resets'] == 0
    assert abs(d.delay_ns - 1_000 * MS) < 10 * MS
    assert d.counters['dropped.too_old'] == 0
    err, count = crank_error(system, outs, traj)
    assert count > 300 and err < raw_encoder_error(system, recs)
    assert any(cat == 'latency' for cat, _ in d.events)


def test_future_stamps_and_isolated_backward_stamps_are_dropped_without_a_reset():
    system, _, recs = fourbar_data()
    _, d = live()
    now = stamp_of(recs[50])
    for r in recs[:50]:
        d.push(stamp_of(r), r, now)
    d.advance(now)
    assert d.push(now + 5_000 * MS, recs[50], now) is False              # 5 s ahead
    assert d.counters['dropped.future'] == 1
    for k in range(5):                                                   # 5 garbage stamps
        assert d.push(stamp_of(recs[0]) - 100_000 * MS, recs[k], now) is False
    assert d.counters['dropped.backwards'] == 5
    assert d.estimator.counters['resets'] == 0


def test_a_record_the_driver_validated_is_checked_once():
    """Issue 23 item 3: the driver checks the stamps for the estimator (``add_validated``).
    A late reading inside the driver's window is used, not read again as a bag loop by an
    estimator whose ``backwards_tolerance`` (20 ms) is shorter than the window (100 ms) —
    both paths checking counted it ``estimator.backwards`` and reset; a reading older than
    the window is counted by the driver alone."""
    system, _, recs = fourbar_data()
    s = settings()
    est = Estimator(system, replace(s.config, backwards_tolerance=0.02))
    d = EstimatorDriver(system, s, estimator=est)
    fed = recs[:160]
    late = max((i for i, r in enumerate(fed) if isinstance(r, JointMeasurement)
                and fed[-1].t - r.t > 0.05), default=None)
    assert late is not None and fed[-1].t - fed[late].t < 0.06
    outs = run(d, fed[:late] + fed[late + 1:])
    assert len(outs) > 50 and est.counters['resets'] == 0
    used, n_late = est.counters['used_joint_pos'], est.counters['late']
    assert d.push(stamp_of(fed[late]), fed[late])                         # 50-60 ms late
    d.advance(d.last_tick + d.period)
    c = est.counters
    assert c['backwards'] == 0 and c['resets'] == 0 and c['reset:backwards'] == 0, c
    assert c['used_joint_pos'] == used + 2 and c['late'] == n_late + 2    # both joints used
    assert d.counters['dropped.backwards'] == 0 and d.counters['rejected_by_estimator'] == 0
    assert d.push(stamp_of(fed[0]), fed[0]) is False                      # older than 0.1 s
    d.advance(d.last_tick + d.period)
    assert d.counters['dropped.too_old'] == 1
    assert est.counters['dropped_too_old'] == 0 and est.counters['backwards'] == 0


def test_joint_limits_gate_values_before_the_estimator():
    system, d = live()
    now = stamp_of(fourbar_data()[2][0])
    rec = d.joint_state(joint_msg(now, position=(0.1,), effort=(1e300,)), now)
    assert rec is not None and np.isnan(rec.effort[0]) and rec.position[0] == 0.1
    assert d.joint_state(joint_msg(now, position=(1e300,)), now) is None
    assert d.counters['out_of_limits'] == 2 and d.counters['dropped.out_of_limits'] == 1
    d.advance(now)
    assert d.estimator.counters['used_effort'] == 0
    np.testing.assert_array_equal(d.estimator.applied_torque(now / 1e9), [0.0])


def test_the_limit_note_names_the_limits_for_planar_and_urdf_robots_alike():
    """Issue 30 item 2: a URDF robot's limits are not "the YAML limits"."""
    from support.ros_data import REPO

    from mbfg_ros.loader import load_mechanism
    ur5 = load_mechanism(str(REPO / 'config' / 'urdf' / 'ur5.urdf'),
                         str(REPO / 'config' / 'urdf' / 'ur5_sensors.yaml'))
    d = EstimatorDriver(ur5, parse_estimator({'mechanism': 'ur5.urdf'}), live=True)
    now = 10 ** 9
    assert d.joint_state(joint_msg(now, ('elbow_joint',), (1e300,)), now) is None
    notes = [text for _, text in d.events]
    assert any("limits of ur5" in n and "URDF's <limit>" in n for n in notes), notes
    assert not any('YAML limits' in n for n in notes), notes
    assert 'limits of ur5' in d.set_state(joint_msg(now, ('elbow_joint',), (1e300,)), now)


def test_a_clean_position_only_joint_state_counts_nothing_as_bad():
    _, d = live()
    t0 = stamp_of(fourbar_data()[2][0])
    for k in range(5):
        assert d.joint_state(joint_msg(t0 + k * MS, position=(0.001 * k,)), t0 + k * MS)
        d.advance(t0 + k * MS)
    d.advance(t0 + 6 * MS)
    assert d.estimator.counters['used_joint_pos'] == 5
    v = d.diagnostics()[2]
    bad = {k: x for k, x in v.items() if ('dropped' in k or 'nonfinite' in k
                                          or 'rejected' in k or 'nan' in k) and x}
    assert bad == {}
    assert v['input.received'] == v['input.queued'] == 5


def test_the_diagnostics_key_set_is_fixed_after_a_thousand_resets(monkeypatch):
    system, traj, recs = fourbar_data()
    _, d = live()
    run(d, recs[:40])
    encs = [r for r in recs if not hasattr(r, 'sensor')]
    keys = set(d.diagnostics()[2])
    assert {f'input.{k}' for k in INPUT_KEYS} <= keys
    t = stamp_of(recs[40])
    for k in range(1000):
        kind = k % 4
        if kind == 0:                                   # a bag loop: 10 stamps back
            for j in range(10):
                d.push(t - 50_000 * MS + j * MS, recs[j])
        elif kind == 1:                                 # the clock jumps back
            d.advance(t - (10_000 + k) * MS)
        elif kind == 2:                                 # an exception inside the estimator
            monkeypatch.setattr(d.estimator, '_attach', lambda *a: 1 / 0)
            d.push(t, recs[0])
            d.advance(t + 4 * MS)
            monkeypatch.undo()
        else:
            d.reset(f'weird reason {k}', f'detail {k}')  # an unknown category: manual
        t += 10 * MS
        d.push(t, encs[20 + k % 60])         # a position reading: the estimator can start
        d.advance(t)
    v = d.diagnostics()[2]
    assert set(v) - {'tick_time'} == keys - {'tick_time'}
    assert v['estimator.resets'] >= 1000
    assert v['estimator.reset:backwards'] >= 250 and v['estimator.reset:clock_jump'] >= 250
    assert v['estimator.reset:manual'] >= 250


def test_the_due_clock_is_what_working_it_out_anew_gives_at_every_wall_time(monkeypatch):
    """``_due`` keeps the data horizon's hold between readings (a loop pass asks up to four
    times): at every wall time, those where a stream or all of them fall silent and the
    nanoseconds either side included, it returns what the formula worked out anew from the
    driver's state gives (the module docstring's hold: half a window past the newest
    reading and the data horizon, while a reading came within ``sensor_timeout``)."""
    import time
    system, _, recs = fourbar_data(duration=0.3, rate=1000.0)
    _, d = live(sensor_timeout=0.02)
    clock = {'wall': 0}
    monkeypatch.setattr(time, 'monotonic_ns', lambda: clock['wall'])

    def anew(now: int) -> int:
        T = now - d.delay_ns
        if d._max_stamp is not None and clock['wall'] - d._push_wall < d.silence_ns:
            T = min(T, d._max_stamp + d.lag_ns // 2, d.data_horizon(clock['wall']))
        return T

    rng = np.random.default_rng(7)
    t0, asked, held = stamp_of(recs[0]), 0, 0
    for r in recs:
        t = stamp_of(r)
        if hasattr(r, 'sensor') and t0 + 100 * MS < t < t0 + 150 * MS:
            continue                                     # the IMU falls silent a while
        if t0 + 200 * MS < t < t0 + 260 * MS:
            continue                                     # every stream does
        wall = t - t0 + int(rng.integers(0, 300_000))
        clock['wall'] = max(clock['wall'], wall)
        assert d.push(t, r, t + 100_000)                 # (drops the hold)
        edges = sorted({x + e for x in [d._push_wall + d.silence_ns]
                        + [s[2] + d.silence_ns for s in d._streams.values()]
                        for e in (-1, 0, 1, 2)})
        walls = sorted(set([clock['wall']] + [w for w in edges if w >= clock['wall']]
                           + (clock['wall'] + rng.integers(0, 30 * MS, 3)).tolist()))
        for w in walls:
            clock['wall'] = w
            for now in (t, t + 700_000, t + 40 * MS):
                assert d._due(now) == anew(now), (t, w, now)
                asked += 1
                held += d._due(now) < now - d.delay_ns
        # the probes were the wall times this pass might have had (in order); the next
        # reading arrives after the reading's own
        clock['wall'] = walls[0]
    assert asked > 3000 and 0.2 < held / asked < 0.9, (asked, held)
