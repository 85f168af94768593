"""``bench/node_throughput.py --issue24``: the verdict it prints is issue 24's targets, each
one able to miss (a row just inside and just outside every threshold the issue names)."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / 'bench' / 'node_throughput.py'


@pytest.fixture(scope='module')
def bench():
    spec = importlib.util.spec_from_file_location('node_throughput_under_test', BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(robot: str = 'ur5', busy: bool = False, **kw) -> dict:
    """A row as the bench's row functions return it (the fields the verdict reads), one
    that meets every target of its load."""
    row = {'robot': robot, 'busy': busy, 'est_hz': 990.0, 'cmd_per_estimate': 0.998, 'cpu': 58.0,
           'lat99': 2.4, 'too_old': 0, 'dropped': {'dropped_before_init': 16},
           'crank_mrad': 0.113, 'rate_rms': 0.0023,
           'tau_pct': 0.5 if robot == 'ur5' else math.nan, 'machine': [1000.0]}
    if busy:
        row.update(est_hz=900.0, lat99=12.0, cpu=53.0)
    row.update(kw)
    return row


def _missed(bench, rows, reference) -> set[tuple[str, str, str]]:
    return {(r, ld, t.split(' ')[0]) for r, ld, t, _, met in
            bench.issue24_verdicts(rows, reference) if not met}


def test_rows_inside_every_target_pass_and_name_each_target_once_per_row(bench):
    rows = [_row(), _row(busy=True), _row('fourbar'), _row('fourbar', busy=True)]
    reference = [_row(r['robot'], r['busy'], est_hz=500.0,
                      crank_mrad=r['crank_mrad'] / 1.09) for r in rows]
    verdicts = bench.issue24_verdicts(rows, reference)
    assert all(v[-1] for v in verdicts), [v for v in verdicts if not v[-1]]
    # rate, p99, CPU, lost, commands, angle, rate RMSE (+ τ̂ where the robot has efforts)
    assert len(verdicts) == 2 * 8 + 2 * 7


@pytest.mark.parametrize('busy, change, target', [
    (False, {'est_hz': 949.0}, 'estimates/s'),          # quiet: >= 950 per second
    (True, {'est_hz': 499.0}, 'estimates/s'),           # busy: >= 500
    (False, {'lat99': 3.05}, 'latency'),                # quiet p99 <= 3 ms
    (True, {'lat99': 20.5}, 'latency'),                 # busy p99 <= 20 ms
    (False, {'cpu': 60.6}, 'node'),                     # <= 60 % of a core
    (True, {'too_old': 1}, 'no'),                       # no reading lost
    (False, {'dropped': {'dropped_before_init': 3, 'dropped.length_mismatch': 1}}, 'no'),
    (False, {'cmd_per_estimate': 0.965}, 'torque'),     # 3.5 % fewer commands
    (True, {'cmd_per_estimate': 1.035}, 'torque'),      # 3.5 % more
    (False, {'crank_mrad': 0.113 * 1.11}, 'angle'),     # 11 % worse than the default mode
    (True, {'rate_rms': 0.0023 * 1.11}, 'rate'),
    (False, {'tau_pct': 0.5 * 1.11}, 'τ̂'),
])
def test_each_target_misses_just_outside_its_threshold(bench, busy, change, target):
    reference = [_row(busy=busy)]
    assert not _missed(bench, [_row(busy=busy)], reference)
    missed = _missed(bench, [_row(busy=busy, **change)], reference)
    assert missed == {('ur5', 'busy' if busy else 'quiet', target)}, missed


def test_a_robot_without_efforts_has_no_torque_verdict_and_no_reference_no_accuracy(bench):
    four = bench.issue24_verdicts([_row('fourbar')], [_row('fourbar')])
    assert not any(t.startswith('τ̂') for _, _, t, _, _ in four)
    alone = bench.issue24_verdicts([_row()], [])
    assert not any('default mode' in t for _, _, t, _, _ in alone)
    assert len(alone) == 5 and all(v[-1] for v in alone)


def test_several_default_rows_are_one_reference_their_mean(bench):
    """``--runs N``: the accuracy reference is the mean of the N default-mode rows."""
    reference = [_row(crank_mrad=0.100), _row(crank_mrad=0.120)]        # mean 0.110
    assert not _missed(bench, [_row(crank_mrad=0.1205)], reference)      # 1.095x
    assert _missed(bench, [_row(crank_mrad=0.1215)], reference) == {('ur5', 'quiet', 'angle')}
