"""The input path's shortcuts of issue 24 (EDGE2) agree with the long way, message by message:
the driver skips the limit gate when :meth:`JointStateReader.checked` (one comparison of the
(3, n) values with the joint limits) or the three floats of each IMU vector say every value
lies within the limits; the records it queues and the counters must be the gate's own.

Random values straddle the limits of ``support/limits.py``'s four-bar (crank limits, the
coupler IMU's ranges), with NaN and infinite ones among them.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from support.limits import T_NS, limited_fourbar

from mbfg_ros.core.bag import typestore
from mbfg_ros.estimation.gate import LimitGate
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.ros import conversions as cv
from mbfg_ros.ros.driver import EstimatorDriver
from mbfg_ros.ros.params import parse_estimator

NAMES = ('crank', 'coupler_joint')


@pytest.fixture(scope='module')
def limited(tmp_path_factory):
    path = limited_fourbar(tmp_path_factory.mktemp('fast'))
    return path, load_system(path)


def _value(rng, edge: float) -> float:
    """A value near ±``edge`` (inside or out), sometimes NaN or infinite."""
    u = rng.random()
    if u < 0.05:
        return math.nan
    if u < 0.08:
        return math.inf if rng.random() < 0.5 else -math.inf
    return float(rng.choice((-1.0, 1.0)) * edge * rng.uniform(0.9, 1.1))


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def test_the_joint_gate_shortcut_queues_what_the_gate_would(limited):
    path, system = limited
    driver = EstimatorDriver(system, parse_estimator({'mechanism': str(path)}))
    reader = cv.JointStateReader(frozenset(driver.joint_names))      # no limits: the long way
    gate = LimitGate(system.description)
    kit = cv.rosbags_kit(typestore())
    rng = np.random.default_rng(24)
    seen = {'within': 0, 'gated': 0, 'dropped': 0}
    for k in range(600):
        # crank: position range [-1, 2] (edges 1 and 2), |velocity| 5, |effort| 3
        pos = [_value(rng, rng.choice((1.0, 2.0))), _value(rng, 3.0)]
        vel = [_value(rng, 5.0), _value(rng, 1e3)] if rng.random() < 0.7 else []
        eff = [_value(rng, 3.0), _value(rng, 1e4)] if rng.random() < 0.7 else []
        if rng.random() < 0.5:          # mostly inside: the shortcut's case
            pos = [0.5 if not math.isfinite(p) or abs(p) > 0.9 else p for p in pos]
            vel = [0.1 for _ in vel]
            eff = [0.2 for _ in eff]
        msg = cv.joint_state_msg(kit, T_NS + k * 1_000_000, NAMES, pos, vel, eff)
        before = dict(driver.counters)
        got = driver.joint_state(msg)
        try:
            _, rec, _, _ = reader(msg)
        except cv.InputRejected:
            assert got is None
            continue
        want, bad = gate.joint(rec)
        assert driver.counters['out_of_limits'] - before['out_of_limits'] == bad
        if want is None:
            assert got is None
            assert driver.counters['dropped.out_of_limits'] == before['dropped.out_of_limits'] + 1
            seen['dropped'] += 1
            continue
        seen['gated' if bad else 'within'] += 1
        for a, b in ((got.position, want.position), (got.velocity, want.velocity),
                     (got.effort, want.effort)):
            assert _same(a, b), (pos, vel, eff, got, want)
        assert got.names == want.names and got.t == want.t
    assert seen['within'] > 100 and seen['gated'] > 100 and seen['dropped'], seen


def test_the_imu_gate_shortcut_queues_what_the_gate_would(limited):
    path, system = limited
    driver = EstimatorDriver(system, parse_estimator({'mechanism': str(path)}))
    gate = LimitGate(system.description)
    sensor = driver.imu_names[0]
    kit = cv.rosbags_kit(typestore())
    rng = np.random.default_rng(25)
    seen = {'within': 0, 'gated': 0}
    for k in range(600):
        gyro = [_value(rng, 20.0) for _ in range(3)]         # gyro_range 20
        accel = [_value(rng, 100.0) for _ in range(3)]       # accel_range 100
        if rng.random() < 0.5:
            gyro = [0.3 * g if math.isfinite(g) else 1.0 for g in gyro]
            accel = [0.3 * a if math.isfinite(a) else 9.8 for a in accel]
        msg = cv.imu_msg(kit, T_NS + k * 1_000_000, 'coupler', gyro, accel)
        before = driver.counters['out_of_limits']
        got = driver.imu(msg, sensor)
        try:
            _, rec = cv.imu_to_record(msg, sensor)
        except cv.InputRejected:
            assert got is None
            continue
        want, bad = gate.imu(rec)
        assert driver.counters['out_of_limits'] - before == bad
        if want is None:
            assert got is None
            continue
        seen['gated' if bad else 'within'] += 1
        for f in ('gyro', 'accel', 'orientation', 'gyro_var', 'accel_var'):
            assert _same(getattr(got, f), getattr(want, f)), (f, gyro, accel)
    assert min(seen.values()) > 10, seen


def test_imu_within_says_exactly_when_the_gate_leaves_a_reading_as_it_is(limited):
    """``LimitGate.imu_within`` (the driver's shortcut) is True only where ``imu`` changes
    nothing, and for every 3-vector reading the gate passes whole; a sensor without
    ranges is always within."""
    from mbfg_ros.core.measurements import ImuMeasurement
    _, system = limited
    gate = LimitGate(system.description)
    sensor = system.description.sensors[0].name
    rng = np.random.default_rng(31)
    seen = [0, 0]
    for _ in range(400):
        gyro = np.array([_value(rng, 20.0) for _ in range(3)])
        accel = None if rng.random() < 0.1 else np.array([_value(rng, 100.0) for _ in range(3)])
        if rng.random() < 0.5:                   # well inside (NaN kept: never beyond)
            gyro = np.where(np.isinf(gyro), 1.0, 0.3 * gyro)
            accel = accel if accel is None else np.where(np.isinf(accel), 9.8, 0.3 * accel)
        rec = ImuMeasurement(0.0, sensor, gyro, accel, None)
        within = gate.imu_within(rec)
        kept, bad = gate.imu(rec)
        assert within == (bad == 0 and kept is rec)
        seen[within] += 1
    assert min(seen) > 20, seen
    assert gate.imu_within(ImuMeasurement(0.0, 'no_such_imu', np.full(3, 1e9), None, None))
    short = ImuMeasurement(0.0, sensor, np.zeros(2), None, None)
    assert not gate.imu_within(short)            # another length: the gate decides


@pytest.mark.parametrize('robot', ['fourbar', 'ur5'])
def test_each_joints_effort_is_its_actuators_torque(limited, robot):
    """``~/joint_states`` effort: the τ̂ of the joint's actuator, NaN for a joint without one
    (the four-bar's coupler joint); an arm whose every joint is actuated takes one gather."""
    from pathlib import Path

    from mbfg_ros.core.measurements import Estimate
    from mbfg_ros.loader import load_mechanism

    repo = Path(__file__).resolve().parents[2]
    if robot == 'fourbar':
        path, system = limited
        settings = parse_estimator({'mechanism': str(path)})
    else:
        urdf, overlay = repo / 'config/urdf/ur5.urdf', repo / 'config/urdf/ur5_sensors.yaml'
        settings = parse_estimator({'mechanism': str(urdf), 'overlay': str(overlay)})
        system = load_mechanism(str(urdf), str(overlay))
    driver = EstimatorDriver(system, settings)
    mech = system.description
    tau = np.arange(1.0, len(mech.actuators) + 1.0) * 1.5
    z = np.zeros(system.n)
    est = Estimate(0.0, z, z, z, z, z, tau, z, z, 0.0)
    got = driver._joint_effort(est)
    for joint, value in zip(mech.joints, got):
        act = [k for k, a in enumerate(mech.actuators) if a.joint == joint.name]
        if act:
            assert value == tau[act[0]], joint.name
        else:
            assert np.isnan(value), joint.name
    assert (robot == 'ur5') == driver._effort_every
