"""The package's floating-base estimator (issue 28 item 3, mbfg_ros/estimation/floating) on
the simulated solo12's short trot (test/data/solo12/trot_3s, SOURCE.md there), fed as
bench/floating_base.py feeds it, against GTSAM 4.3's LeggedInvariantEKF and the leg-odometry
baseline run in the same test on the same bag (no hard-coded peer numbers); plus its API's
robustness to bad input.

Bounds: issue 28's targets scaled to this bag (xy drift ≤ 2 % of the 0.58 m walked; z
drift ≤ 5 mm, where the leg odometry drifts 14 mm and the InvariantEKF 48 mm); contact forces
better than splitting the robot's weight equally among the stance feet.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from bench.floating_base import (floating_config, metrics, quat_to_rot,
                                 run_floating, run_peers)
from bench.quadruped.bag import FOOT_LINKS, read_bag
from mbfg_ros.estimation.floating import (COUNTERS, FloatingEstimate, FloatingEstimator,
                                          FloatingEstimatorConfig)
from support.floating_data import TROT_BAG, solo_system, trot_bag

EKF = 'LeggedInvariantEKF'
ODOMETRY = 'leg odometry + IMU'


_bag = pytest.fixture(scope='module', name='bag')(trot_bag)
_system = pytest.fixture(scope='module', name='system')(solo_system)

@pytest.fixture(scope='module')
def ours(bag, system) -> dict:
    return metrics(bag, run_floating(bag, floating_config(), system=system))


@pytest.fixture(scope='module')
def peers(bag) -> dict:
    return run_peers(bag, (EKF, ODOMETRY))


# -- accuracy on the bag --------------------------------------------------------------------
def test_velocity_rmse_below_the_invariant_ekf_on_the_same_bag(ours, peers):
    assert ours['v_rmse'] < 0.5 * peers[EKF]['v_rmse'], (ours, peers[EKF])


def test_drift_within_the_targets_that_the_peers_miss(ours, peers):
    xy, z = 2.0, 0.5          # % of the distance walked; cm
    assert ours['drift_pct'] <= xy and ours['z_cm'] <= z, ours
    for name in (EKF, ODOMETRY):          # the bounds can fail: the peers fail them
        assert peers[name]['drift_pct'] > xy and peers[name]['z_cm'] > z, (name, peers[name])
    assert ours['yaw_deg'] < 1.0


def test_flat_ground_prior_holds_the_height(bag, system, ours):
    off = metrics(bag, run_floating(bag, floating_config(ground_flatness_sigma=0.0),
                                    system=system))
    assert off['z_cm'] > 1.0, off                  # without it z drifts by centimetres
    assert ours['z_cm'] < 0.2 * off['z_cm'], (ours, off)


def test_contact_switches_without_reset(bag, system):
    """Every touchdown and lift-off of the trot goes by without a restart, and the
    velocity just after a touchdown is as good as elsewhere (within 2x the run's RMSE)."""
    cfg = floating_config()
    est = FloatingEstimator(system, cfg)
    tr = run_floating(bag, cfg, system=system)
    R = np.array([quat_to_rot(q) for q in bag['quat']])
    v_true = np.einsum('kij,kj->ki', R, bag['v'])
    err = np.linalg.norm(tr.v - v_true, axis=1)
    c = bag['contact'] > 0.5
    touch = np.flatnonzero((c[1:] & ~c[:-1]).any(axis=1)) + 1
    touch = touch[bag['t'][touch] > 0.6]
    assert len(touch) >= 10                        # the trot switches contacts
    near = np.unique(np.concatenate([np.arange(k, min(k + 20, len(err))) for k in touch]))
    rmse = math.sqrt(float(np.mean(err ** 2)))
    assert math.sqrt(float(np.mean(err[near] ** 2))) < 2.0 * rmse
    # the same run through the public API: counters say no reset, no restart
    order = [list(bag['joint_names']).index(n) for n in est.joint_names]
    for k in range(len(bag['t'])):
        t = float(bag['t'][k])
        est.add_imu(t, bag['gyro'][k], bag['acc'][k])
        est.add_joints(t, bag['q'][k, order], bag['qd'][k, order], bag['tau'][k, order])
        for i, foot in enumerate(FOOT_LINKS):
            est.add_contact(t, foot, bool(c[k, i]))
        est.tick(t)
    assert est.counters['restarts'] == 0 and est.counters['resets'] == 0
    assert est.counters['initialisations'] == 1
    assert est.counters['keyframes'] > 200


def test_contact_forces_against_the_truth(bag, system):
    """Better than the robot's weight shared equally by the stance feet, by 2x once a
    foot has been down for 10 ms (the impact's first milliseconds are impulsive)."""
    tr = run_floating(bag, floating_config(), system=system)
    truth = bag['force_true']
    stance = np.isfinite(tr.forces[:, :, 0]) & (np.linalg.norm(truth, axis=2) > 0)
    assert stance.sum() > 3000
    weight = truth.sum(axis=1)[bag['t'] < 0.4, 2].mean()
    split = np.zeros_like(truth)
    count = stance.sum(axis=1)
    split[..., 2] = np.where(stance, weight / np.maximum(count, 1)[:, None], 0.0)
    since = np.zeros(stance.shape, int)            # samples since touchdown
    for k in range(1, len(stance)):
        since[k] = np.where(stance[k], since[k - 1] + 1, 0)

    def rmse(f, mask):
        return np.sqrt(np.mean(np.linalg.norm(f - truth, axis=2)[mask] ** 2))

    ours, naive = rmse(tr.forces, stance), rmse(split, stance)
    assert ours < 0.7 * naive and ours < 0.25 * weight / 2, (ours, naive, weight)
    settled = stance & (since > 10)
    assert rmse(tr.forces, settled) < 0.5 * rmse(split, settled)
    swing = ~(bag['contact'] > 0.5)
    assert np.isnan(tr.forces[swing]).all()        # NaN for swing feet


def test_contacts_from_the_foot_forces(bag, system, peers):
    m = metrics(bag, run_floating(bag, floating_config(threshold=3.0), system=system))
    assert m['v_rmse'] < 0.5 * peers[EKF]['v_rmse'] and m['drift_pct'] <= 2.0, m


def test_start_up_from_the_readings_alone(bag, system):
    """No initial pose: roll and pitch from gravity, yaw 0, the feet on z = 0: the truth's
    floor is at z = 0, so the base height matches it."""
    est = FloatingEstimator(system, FloatingEstimatorConfig(foot_radius=0.016))
    order = [list(bag['joint_names']).index(n) for n in est.joint_names]
    out = None
    for k in range(500):
        t = float(bag['t'][k])
        est.add_imu(t, bag['gyro'][k], bag['acc'][k])
        est.add_joints(t, bag['q'][k, order], bag['qd'][k, order], bag['tau'][k, order])
        for i, foot in enumerate(FOOT_LINKS):
            est.add_contact(t, foot, bool(bag['contact'][k, i] > 0.5))
        e = est.tick(t)
        if k < 300:
            assert e is None                       # init_time 0.4 s of standing first
        out = e or out
    assert isinstance(out, FloatingEstimate) and out.status == 'ok'
    R_true = quat_to_rot(bag['quat'][499])
    x, y, z, w = out.quaternion_xyzw
    R = quat_to_rot(np.array([w, x, y, z]))
    assert abs(out.position[2] - bag['p'][499, 2]) < 3e-3
    assert np.degrees(np.arccos(np.clip(R[:, 2] @ R_true[:, 2], -1, 1))) < 0.5  # gravity
    assert np.linalg.norm(out.position[:2]) < 5e-3
    assert np.linalg.norm(out.linear_velocity) < 0.02
    # the output's shapes and conventions
    assert out.pose_covariance.shape == (6, 6) and out.twist_covariance.shape == (6, 6)
    assert np.allclose(out.pose_covariance, out.pose_covariance.T)
    assert np.linalg.eigvalsh(out.pose_covariance).min() > 0
    assert abs(np.linalg.norm(out.quaternion_xyzw) - 1) < 1e-9
    assert out.q.shape == (12,) and out.contacts == tuple(bag['contact'][499] > 0.5)
    np.testing.assert_array_equal(out.tau, bag['tau'][499, order])   # measured efforts


def test_without_efforts_the_torques_are_estimated(bag, system):
    est = FloatingEstimator(system, floating_config())
    order = [list(bag['joint_names']).index(n) for n in est.joint_names]
    errs = []
    for k in range(800):
        t = float(bag['t'][k])
        est.add_imu(t, bag['gyro'][k], bag['acc'][k])
        est.add_joints(t, bag['q'][k, order], bag['qd'][k, order], None)
        for i, foot in enumerate(FOOT_LINKS):
            est.add_contact(t, foot, bool(bag['contact'][k, i] > 0.5))
        e = est.tick(t)
        if e is not None:
            stance = np.array(e.contacts)
            assert np.isfinite(e.tau).all() and np.isfinite(e.contact_forces[stance]).all()
            errs.append(e.tau - bag['tau'][k, order])
    # standing (all four feet): the minimum-norm split is close to the motors' torques
    assert np.sqrt(np.mean(np.square(errs))) < 0.3


# -- robustness -------------------------------------------------------------------------------
def _fed(system, n: int = 450) -> FloatingEstimator:
    """An estimator started on a still robot (the bag's first samples)."""
    bag = read_bag(TROT_BAG)
    est = FloatingEstimator(system, floating_config())
    order = [list(bag['joint_names']).index(nm) for nm in est.joint_names]
    for k in range(n):
        t = float(bag['t'][k])
        est.add_imu(t, bag['gyro'][k], bag['acc'][k])
        est.add_joints(t, bag['q'][k, order], bag['qd'][k, order], bag['tau'][k, order])
        for foot in FOOT_LINKS:
            est.add_contact(t, foot, True)
        est.tick(t)
    return est


def test_bad_input_is_counted_never_raised(system):
    est = _fed(system)
    assert set(est.counters) == set(COUNTERS)
    before = est.tick(0.45)
    assert before is not None
    c0 = dict(est.counters)
    est.add_imu(0.5, [0.0, 0.0], [0.0, 0.0, 9.81])                     # bad length
    est.add_imu(0.5, [np.nan, 0.0, 0.0], [0.0, 0.0, 9.81])             # NaN
    est.add_imu(0.1, [0.0, 0.0, 0.0], [0.0, 0.0, 9.81])                # backwards
    est.add_imu(0.5, 'abc', None)                                      # not numbers
    est.add_joints(0.5, np.zeros(11), None, None)                      # bad length
    est.add_joints(0.1, np.zeros(12), None, None)                      # backwards
    est.add_joints(0.5, np.full(12, np.inf), None, None)               # inf
    est.add_contact(0.5, 'TAIL', True)                                 # unknown foot
    est.add_foot_force(0.5, 'FL_FOOT', [1.0, np.nan, 0.0])             # NaN force
    est.add_foot_force(0.5, 'NOSE', [1.0, 0.0, 0.0])                   # unknown foot
    c = est.counters
    assert c['dropped_bad_length'] - c0['dropped_bad_length'] == 3
    assert c['dropped_nonfinite'] - c0['dropped_nonfinite'] == 3
    assert c['dropped_backwards'] - c0['dropped_backwards'] == 2
    assert c['dropped_unknown_foot'] - c0['dropped_unknown_foot'] == 2
    assert c['used_imu'] == c0['used_imu'] and c['used_joints'] == c0['used_joints']
    after = est.tick(0.4)                                              # tick backwards
    assert est.counters['tick_backwards'] == 1 and after is est.tick(0.3)
    e = est.tick(0.46)
    assert e is not None and np.isfinite(e.position).all()
    assert np.linalg.norm(e.position - before.position) < 1e-3         # nothing moved it
    late = est.tick(0.46 + 0.5)                                        # no IMU for 0.5 s
    assert late.status == 'stale' and est.counters['stale_ticks'] == 1


def test_nan_joint_entries_keep_their_last_value(system):
    est = _fed(system)
    q_before = est.tick(0.45).q.copy()
    q = q_before.copy()
    q[0] = np.nan
    est.add_joints(0.451, q, np.full(12, np.nan), np.full(12, np.nan))
    est.add_imu(0.451, [0.0, 0.0, 0.0], [0.0, 0.0, 9.81])
    e = est.tick(0.451)
    assert e.q[0] == q_before[0] and np.isfinite(e.qd).all() and np.isfinite(e.tau).all()


def test_reset_starts_again(system):
    est = _fed(system)
    est.reset()
    assert est.counters['resets'] == 1 and est.tick(0.5) is None


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match=r'where: unknown key .lagg.'):
        FloatingEstimatorConfig.from_mapping({'lagg': 0.1}, 'where')
    with pytest.raises(ValueError, match=r'where: keyframe_rate: must be > 0'):
        FloatingEstimatorConfig.from_mapping({'keyframe_rate': 0}, 'where')
    with pytest.raises(ValueError, match=r'where: foot_radius: expected a number'):
        FloatingEstimatorConfig.from_mapping({'foot_radius': 'big'}, 'where')
    with pytest.raises(ValueError, match=r'contact_source: .bool. is not one of topic, for'):
        FloatingEstimatorConfig.from_mapping({'contact_source': 'bool'}, 'where')
    with pytest.raises(ValueError, match=r'liftoff_guard: must be below lag'):
        FloatingEstimatorConfig.from_mapping({'liftoff_guard': 0.2, 'lag': 0.1})
    cfg = FloatingEstimatorConfig.from_mapping({'lag': 0.2, 'foot_radius': 0.02,
                                                'contact_source': 'force'})
    assert (cfg.lag, cfg.foot_radius, cfg.contact_source) == (0.2, 0.02, 'force')


def test_old_joint_states_give_no_leg_rows(system):
    """The joint states stop (a driver died) while the IMU goes on: keyframes go on from
    the IMU alone, counted, instead of reading the last leg velocities forever."""
    est = _fed(system)
    for k in range(300):
        t = 0.45 + 0.001 * (k + 1)
        est.add_imu(t, [0.0, 0.0, 0.0], [0.0, 0.0, 9.81])
        e = est.tick(t)
    assert est.counters['keyframes_without_joints'] > 15
    assert e.status == 'ok' and np.isfinite(e.position).all()


def test_without_joint_velocities(bag, system, peers):
    """JointState without velocities: q̇ from the encoders' finite differences (weighted
    by their noise) still beats the InvariantEKF fed the velocities' bag."""
    no_qd = dict(bag)
    no_qd['qd'] = np.full_like(bag['qd'], np.nan)
    m = metrics(no_qd, run_floating(no_qd, floating_config(), system=system))
    assert m['v_rmse'] < 0.5 * peers[EKF]['v_rmse'] and m['drift_pct'] <= 2.0, m


def test_contacts_estimated_from_the_efforts(bag, system, peers):
    """``contact_source: effort``: no contact topic nor foot force read (the bag's are
    zeroed here); each foot's vertical force from its leg's efforts decides its stance."""
    blind = dict(bag)
    blind['contact'] = np.zeros_like(bag['contact'])
    blind['force'] = np.zeros_like(bag['force'])
    tr = run_floating(blind, floating_config(contact_source='effort'), system=system)
    m = metrics(bag, tr)
    assert m['v_rmse'] < 0.5 * peers[EKF]['v_rmse'], m
    assert m['drift_pct'] <= 2.0 and m['z_cm'] <= 0.5, m
    stance = np.isfinite(tr.forces[:, :, 0])
    started = bag['t'] > 0.45
    agree = (stance == (bag['contact'] > 0.5))[started].mean()
    assert agree > 0.9, agree
    # the flags it ignored: a foot down, a foot in the air
    assert stance[started].any(axis=0).all() and (~stance[started]).any(axis=0).all()
