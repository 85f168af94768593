"""The tick grid's phase (``align_ticks``, issue 24): ticks on the encoders' own stamps."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from support.ros_data import fourbar_data, fourbar_path, replay_driver, stamp_of

from mbfg_ros.core.measurements import JointMeasurement
from mbfg_ros.ros.driver import EstimatorDriver, period_ns, tick_times
from mbfg_ros.ros.params import parse_estimator

MS = 1_000_000
SHIFT = 3_300_000 - 1       # ns: the readings' stamps sit this far off the 5 ms grid


def settings(**kw):
    return parse_estimator({'mechanism': str(fourbar_path()), 'frequency': 200.0,
                            'lag_duration': 0.1, **kw})


def shifted(recs, ns: int = SHIFT):
    return [replace(r, t=(stamp_of(r) + ns) / 1e9) for r in recs]


def run(driver, recs):
    """Replay-style feeding: the estimates by stamp."""
    return {o.t_ns: o for o in replay_driver(driver, recs) if o.estimate is not None}


def test_tick_times_with_a_phase_are_the_shifted_grid_points():
    p = period_ns(100.0)
    assert tick_times(None, 1_234 * MS, p, phase=3 * MS) == ([1_233 * MS], 0)
    assert tick_times(1_233 * MS, 1_263 * MS, p, phase=3 * MS) == (
        [1_243 * MS, 1_253 * MS, 1_263 * MS], 0)
    assert tick_times(1_233 * MS, 1_263 * MS, p, inclusive=False, phase=3 * MS) == (
        [1_243 * MS, 1_253 * MS], 0)
    assert tick_times(None, 1 * MS, p, phase=3 * MS) == ([], 0)   # before the first point


def test_aligned_ticks_fall_on_the_readings_stamps_and_unaligned_ones_do_not():
    system, _, recs = fourbar_data()
    recs = shifted(recs[:200])
    stamps = {stamp_of(r) for r in recs}
    d = EstimatorDriver(system, settings())
    on = run(d, recs)
    assert d.phase == (stamp_of(recs[0]) % d.period) == SHIFT % d.period
    assert len(on) > 80 and set(on) <= stamps
    off = run(EstimatorDriver(system, settings(align_ticks=False)), recs)
    assert len(off) > 80 and not set(off) & stamps
    assert all(t % period_ns(200.0) == 0 for t in off)


def test_aligned_estimates_equal_those_of_the_same_readings_on_the_grid():
    """Shifting every stamp by a fraction of a period shifts the aligned ticks with them:
    the same estimates (to rounding of the shifted stamps), where the unaligned grid
    puts every reading between two ticks and gives other estimates."""
    system, _, recs = fourbar_data()
    recs = recs[:300]
    assert all(stamp_of(r) % period_ns(200.0) == 0 for r in recs)      # on the grid
    base = run(EstimatorDriver(system, settings(align_ticks=False)), recs)
    on = run(EstimatorDriver(system, settings()), shifted(recs))
    off = run(EstimatorDriver(system, settings(align_ticks=False)), shifted(recs))
    ts = sorted(base)[20:]
    assert len(ts) > 100
    q = np.array([base[t].estimate.q for t in ts])
    q_on = np.array([on[t + SHIFT].estimate.q for t in ts])
    np.testing.assert_allclose(q_on, q, rtol=0, atol=1e-9)
    assert not set(off) & {t + SHIFT for t in ts}      # unaligned: no tick at a reading
    qd = np.array([base[t].estimate.qd for t in ts])
    qd_on = np.array([on[t + SHIFT].estimate.qd for t in ts])
    np.testing.assert_allclose(qd_on, qd, rtol=0, atol=1e-7)


def test_the_phase_is_taken_again_after_a_reset_and_kept_once_readings_flow():
    system, _, recs = fourbar_data()
    d = EstimatorDriver(system, settings())
    run(d, shifted(recs[:100]))
    first = d.phase
    assert first == SHIFT % d.period
    # a JointState with another phase while the estimator runs: the grid stays
    late = next(r for r in shifted(recs[100:110], 1 * MS) if isinstance(r, JointMeasurement))
    d.push(stamp_of(late), late)
    assert d.phase == first
    d.reset('manual')
    again = shifted(recs[120:200], SHIFT + 1 * MS)
    out = run(d, again)
    assert d.phase == (SHIFT + 1 * MS) % d.period != first
    assert out and set(out) <= {stamp_of(r) for r in again}


def test_an_imu_reading_first_does_not_set_the_phase():
    system, _, recs = fourbar_data()
    recs = shifted(recs[:60])
    imu_first = sorted(recs, key=lambda r: (stamp_of(r), isinstance(r, JointMeasurement)))
    assert not isinstance(imu_first[0], JointMeasurement)
    imu = replace(imu_first[0], t=(stamp_of(imu_first[0]) + 1 * MS) / 1e9)   # a ms later
    d = EstimatorDriver(system, settings())
    d.push(stamp_of(imu), imu)
    assert d.phase == 0
    run(d, imu_first[1:])
    assert d.phase == SHIFT % d.period


def test_ticks_on_imu_readings_before_the_first_joint_state_do_not_fix_the_phase():
    """The IMU's stream starts first (live: its messages came first and the loop ticked on
    them while the estimator waited for its encoders): the first JointState still sets
    the grid, the phase replay takes from the same first JointState whether or not its
    ticks ran before it."""
    system, _, recs = fourbar_data()
    recs = shifted(recs[:200])
    imu_lead = [replace(r, t=(stamp_of(r) - 7 * MS) / 1e9) for r in recs[:40]
                if not isinstance(r, JointMeasurement)]     # 7 ms off the encoders' grid
    live = EstimatorDriver(system, settings())
    for r in imu_lead:                     # ticked as they come, IMU alone
        live.push(stamp_of(r), r)
        live.advance(stamp_of(r))
    assert live.ticks['run'] > 0 and live.phase == 0
    out = run(live, recs[20:])
    assert live.phase == SHIFT % live.period
    assert out and set(out) <= {stamp_of(r) for r in recs}
    bag = EstimatorDriver(system, settings())      # replay: no tick before the JointState
    for r in imu_lead:
        bag.push(stamp_of(r), r)
    run(bag, recs[20:])
    assert bag.phase == live.phase
