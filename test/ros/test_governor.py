"""The tick loop's CPU governor (issue 24, :mod:`mbfg_ros.ros.governor`), on synthetic
clocks: a loop with given costs per smoother tick, per prediction and per period of intake,
one decision per grid tick. The DDS behaviour is in test_predict_between_ticks.py."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.ros.governor import (BANK_PERIODS, PREDICT, SMOOTH, THIN, TickGovernor,
                                   dry_run)

PERIOD = 1e-3


def simulate(load: float, smoother: float, prediction: float, other: float, spacing: int,
             periods: int = 3000, slow: np.ndarray | None = None,
             gov: TickGovernor | None = None) -> tuple[list[str], float]:
    """Decisions of a governor over ``periods`` grid ticks of a loop whose smoother tick costs
    ``smoother`` s of CPU, a prediction ``prediction`` s and the rest ``other`` s per period,
    each times ``slow[k]`` in period k (a machine whose speed varies; default 1); (the
    decisions, CPU used per wall second)."""
    gov = gov or TickGovernor(load, PERIOD, spacing)
    return dry_run(gov, smoother, prediction, other,
                   np.ones(periods) if slow is None else slow[:periods])


def spacings(kinds: list[str]) -> np.ndarray:
    at = np.flatnonzero(np.array(kinds) == SMOOTH)
    return np.diff(at)


def test_the_budget_is_held_and_every_grid_tick_gets_an_estimate_when_it_stretches():
    # the UR5 at 1 kHz (bench/node_throughput.py --profile): tick ~0.9 ms, prediction with
    # its publishing ~0.2 ms, intake and loop ~0.1 ms per period; 60 % of a core
    kinds, share = simulate(0.6, 0.9e-3, 0.2e-3, 0.1e-3, 3)
    assert share <= 0.6 + 1e-3
    assert kinds.count(THIN) <= 0.02 * len(kinds), kinds.count(THIN)
    assert kinds.count(PREDICT) > 0.3 * len(kinds)
    assert spacings(kinds).max() <= 3


def test_the_smoother_keeps_its_spacing_and_the_predictions_are_thinned_when_it_does_not():
    # a budget that the smoother every 3rd period and the intake use up
    kinds, share = simulate(0.3, 0.7e-3, 0.2e-3, 0.05e-3, 3)
    assert spacings(kinds).max() <= 3
    assert kinds.count(THIN) > 0.1 * len(kinds)
    assert kinds.count(PREDICT) > 0           # what is left goes to predictions
    assert share <= 0.3 + 0.02


def test_below_the_intake_the_smoother_still_ticks_every_max_spacing_periods():
    kinds, _ = simulate(0.05, 0.9e-3, 0.2e-3, 0.1e-3, 4)
    assert set(spacings(kinds)) == {4}
    assert kinds.count(PREDICT) <= 1           # the first, before its cost is known
    assert kinds.count(THIN) == pytest.approx(0.75 * len(kinds), abs=2)


def test_a_budget_that_fits_a_smoother_tick_every_period_gets_no_prediction():
    kinds, share = simulate(0.9, 0.5e-3, 0.2e-3, 0.1e-3, 3)
    assert kinds.count(SMOOTH) > 0.99 * len(kinds)
    assert share <= 0.9 + 1e-3


def test_one_slow_tick_does_not_hold_the_smoother_back_beyond_its_spacing():
    gov = TickGovernor(0.6, PERIOD, 3)
    gov.charge(0.0, 0.0)
    gov.charge(PERIOD, 0.05)                  # 50 ms of CPU (a GC pause, GTSAM's batch)
    assert gov.credit == pytest.approx(-3 * 0.6 * PERIOD)      # the rest forgiven
    assert gov.decide(1) in (PREDICT, THIN) and gov.decide(3) == SMOOTH
    assert gov.counts['forced'] == 1


def test_the_credit_banked_after_a_quiet_spell_is_capped():
    gov = TickGovernor(0.5, PERIOD, 3)
    gov.charge(0.0, 0.0)
    gov.charge(10.0, 0.0)                     # ten idle seconds
    assert gov.credit == pytest.approx(BANK_PERIODS * 0.5 * PERIOD)


def bursts(periods: int, share: float, factor: float, length: int) -> np.ndarray:
    """A machine that runs ``factor`` times slower in stretches of ``length`` periods,
    ``share`` of them at random (seeded)."""
    rng = np.random.default_rng(7)
    slow = np.ones(periods)
    for k in range(0, periods, length):
        if rng.random() < share:
            slow[k:k + length] = factor
    return slow


@pytest.mark.parametrize('smoother, prediction, other', [(0.5e-3, 0.12e-3, 0.19e-3),
                                                         (0.42e-3, 0.17e-3, 0.18e-3)])
def test_the_reserve_pays_a_slow_stretchs_predictions_instead_of_thinning_them(
        smoother, prediction, other):
    # the UR5's and the four-bar's live costs; 40 % of 20 ms stretches 1.5x slower
    slow = bursts(20000, 0.4, 1.5, 20)
    args = (0.6, smoother, prediction, other, 3, 20000, slow)
    kinds, share = simulate(*args)
    old, old_share = simulate(*args, gov=TickGovernor(0.6, PERIOD, 3, 4, 0))
    given = 1.0 - kinds.count(THIN) / len(kinds)
    given_old = 1.0 - old.count(THIN) / len(old)
    assert given > given_old + 0.02, (given, given_old)
    assert given > 0.98
    assert share <= 0.6 + 2e-3 and old_share <= 0.6 + 6e-3
    assert spacings(kinds).max() <= 3


def test_in_steady_running_the_reserve_changes_nothing():
    for costs in ((0.5e-3, 0.12e-3, 0.19e-3), (0.42e-3, 0.17e-3, 0.18e-3)):
        kinds, share = simulate(0.6, *costs, 3, 20000)
        old, old_share = simulate(0.6, *costs, 3, 20000, gov=TickGovernor(0.6, PERIOD, 3, 4, 0))
        assert abs(kinds.count(SMOOTH) - old.count(SMOOTH)) <= 0.01 * len(kinds)
        assert kinds.count(THIN) == old.count(THIN) == 0
        assert share == pytest.approx(old_share, abs=2e-3)


@pytest.mark.parametrize('args', [(0.0, 1e-3, 3), (1.5, 1e-3, 3), (0.5, 0.0, 3),
                                  (0.5, 1e-3, 0), (0.5, 1e-3, 3, 4, 4), (0.5, 1e-3, 3, 4, -1)])
def test_bad_settings_are_refused(args):
    with pytest.raises(ValueError):
        TickGovernor(*args)


def test_the_drivers_turns_give_every_grid_tick_one_estimate_or_count_it_thinned():
    """The live driver's side of the governed loop (``smooth``, ``predict_newest``, ``thin``),
    with the loop coming 1-3 periods late and the turns in a fixed rotation: every grid tick
    after the first estimate gets exactly one estimate (smoothed or predicted, in order, on
    the grid) or is counted in ``ticks.thinned``."""
    from support.ros_data import fourbar_data, fourbar_path, fourbar_system, stamp_of

    from mbfg_ros.ros.driver import EstimatorDriver
    from mbfg_ros.ros.params import parse_estimator

    system = fourbar_system()
    d = EstimatorDriver(system, parse_estimator({'mechanism': str(fourbar_path()),
                                                 'frequency': 500.0, 'lag_duration': 0.1}),
                        live=True)
    _, _, recs = fourbar_data(duration=1.0, rate=1000.0)
    rng = np.random.default_rng(0)
    p = d.period
    clock, i, turn = stamp_of(recs[0]), 0, 0
    stamps: list[int] = []
    thinned0, commands = None, 0
    while clock < stamp_of(recs[-1]):
        clock += int(rng.integers(1, 4)) * p
        while i < len(recs) and stamp_of(recs[i]) <= clock:
            d.push(stamp_of(recs[i]), recs[i], clock)
            i += 1
        if thinned0 is None:                  # until the first estimate
            outs = [o for o in d.smooth(clock) if o.estimate is not None]
            if outs:
                stamps, thinned0 = [outs[-1].t_ns], d.ticks['thinned']
            continue
        spacing, fresh = d.due_grid(clock)
        if not fresh:
            continue
        assert spacing >= fresh
        turn += 1
        if turn % 3 == 0:
            k = int(rng.integers(0, fresh))    # of the fresh - 1 before the tick's
            outs = d.predict_newest(clock, k, before_tick=True) if k else []
            assert len(outs) <= k
            outs += d.smooth(clock)
        elif turn % 3 == 1:
            n = int(rng.integers(1, fresh + 1))
            outs = d.predict_newest(clock, n)         # the n newest, the older ones thinned
            assert len(outs) <= n and all(o.estimate.predicted for o in outs)
        else:
            outs = []
            d.thin(clock)
        # every estimate carries its own command (or says why not), a late loop's older
        # ones too: ~/command keeps step with ~/state
        assert all((o.command is None) == bool(o.withheld) for o in outs), outs
        commands += sum(o.command is not None for o in outs if o.estimate is not None)
        stamps += [o.t_ns for o in outs if o.estimate is not None]
    stamps = np.array(stamps)
    assert np.all(np.diff(stamps) > 0) and np.all(stamps % p == 0)
    grid = (d.handled_ns - stamps[0]) // p + 1
    thinned = d.ticks['thinned'] - thinned0
    assert len(stamps) + thinned == grid, (len(stamps), thinned, grid)
    assert thinned > 0.1 * grid and d.ticks['predicted'] > 0.1 * grid
    withheld = sum(v for k, v in d.command_counters.items() if k.startswith('withheld.'))
    assert commands >= len(stamps) - 1 - withheld, (commands, len(stamps), withheld)
