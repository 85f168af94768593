"""GTSAM 4.3's Legged* estimators and the leg-odometry baseline (bench/floating_base.py)
run on the short quadruped bag (test/data/solo12/trot_3s) and track its base velocity.

The bound: an estimator that does not track (it holds the initial zero velocity) has an
RMSE equal to the RMS of the true velocity over the run (≈ 0.2 m/s on this bag); a
tracking one must stay below half of that. The peers reach 0.05-0.08 m/s here
(docs/floating-base.md), the leg kinematics from the *true* joint states already 0.05 m/s
(point feet on rolling spheres, contact flags raised at the first touch), so the bound is
loose on purpose: it catches an estimator fed wrong frames, signs or units, not a tuning.
"""
from __future__ import annotations

import numpy as np
import pytest


from conftest import DATA

from bench.floating_base import PEERS, quat_to_rot, run_peers
from bench.quadruped.bag import read_bag


@pytest.fixture(scope='module')
def bag() -> dict:
    return read_bag(DATA / 'solo12' / 'trot_3s')


def _rms_true_speed(bag: dict) -> float:
    R = np.array([quat_to_rot(q) for q in bag['quat']])
    v = np.einsum('kij,kj->ki', R, bag['v'])
    return float(np.sqrt(np.mean(np.sum(v ** 2, axis=1))))


def test_every_peer_tracks_the_base_velocity(bag):
    # contacts at 200 Hz (IMU at 1 kHz): the smoothers' cost at 1 kHz is the bench's business
    rows = run_peers(bag, PEERS, contact_every=5)
    bound = 0.5 * _rms_true_speed(bag)
    assert 0.1 < bound < 0.2
    for name, m in rows.items():
        assert np.isfinite(m['v_rmse']) and m['v_rmse'] < bound, (name, m)
        assert m['drift_m'] < 0.5 * m['walked'], (name, m)
        assert m['yaw_deg'] < 2.0, (name, m)
        assert m['tick_us'] > 0


def test_a_peer_fed_a_wrong_frame_fails_the_bound(bag):
    """The bound can fail: the accelerometer in the wrong frame (x and y swapped)."""
    wrong = dict(bag)
    wrong['acc'] = bag['acc'][:, [1, 0, 2]]
    wrong['gyro'] = bag['gyro'][:, [1, 0, 2]]
    rows = run_peers(wrong, ('LeggedInvariantEKF',), contact_every=5)
    assert not rows['LeggedInvariantEKF']['v_rmse'] < 0.5 * _rms_true_speed(bag)


def test_rolling_feet_explain_the_point_foot_drift(bag):
    """Solo's feet are 16 mm balls: a point-foot leg odometry takes their rolling for the
    base's motion (r Δθ per step, forward); modelling them as rolling balls must cut the
    xy drift (4.1 % → 2.1 % of the distance on this bag)."""
    rows = run_peers(bag, ('leg odometry + IMU', 'leg odometry (rolling feet) + IMU'))
    point, rolling = rows['leg odometry + IMU'], rows['leg odometry (rolling feet) + IMU']
    assert rolling['drift_m'] < 0.75 * point['drift_m'], (point, rolling)
