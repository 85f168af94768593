"""JointState readings land on the joint they name, whatever the message's order (issue 29).

``joint_state_broadcaster`` publishes its joints in its own order, often not the YAML's or
the URDF's; a message may carry only some joints, or joints the model does not have. Each
reading must reach the joint of its name. The mutant this guards against took the value at
the model's index instead of the message's: the crank's angle then lands on the coupler.
The expectation is the simulated truth of each joint, not a second run of the estimator.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.ros_data import fourbar_data
from support.ur5 import readings as ur5_readings
from support.ur5 import simulate_ur5

from mbfg_ros.core.measurements import JointMeasurement
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.planar.sensors import joint_positions, wrap_angle
from mbfg_ros.spatial.system import build_spatial_system

URDF = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
UNKNOWN = ('gripper_finger_joint', 'conveyor_joint')


def _take(m: JointMeasurement, idx: list[int], names: tuple[str, ...],
          extra: dict[int, str] | None = None) -> JointMeasurement:
    """``m`` with the joints ``idx`` (model indices) in that order; ``extra``: unknown names
    inserted at those message positions with those values."""
    def pick(a: np.ndarray, fill: float) -> np.ndarray:
        if a.size == 0:
            return a
        vals = [float(a[i]) for i in idx]
        for pos, _ in sorted((extra or {}).items()):
            vals.insert(pos, fill)
        return np.array(vals)

    out = [names[i] for i in idx]
    for pos, nm in sorted((extra or {}).items()):
        out.insert(pos, nm)
    # an unknown joint's values are plausible but wrong for every model joint
    return replace(m, names=tuple(out), position=pick(m.position, 2.5),
                   velocity=pick(m.velocity, -3.0), effort=pick(m.effort, 40.0))


def reorder(recs: list, names: tuple[str, ...], case: str) -> list:
    """The records with each JointMeasurement rewritten as ``case`` says."""
    n = len(names)
    out = []
    for m in recs:
        if not isinstance(m, JointMeasurement):
            out.append(m)
        elif case == 'reversed':
            out.append(_take(m, list(range(n))[::-1], names))
        elif case == 'subsets':               # one message per joint, last joint first
            out.extend(_take(m, [i], names) for i in reversed(range(n)))
        elif case == 'unknown':               # reversed, with two unknown names among them
            out.append(_take(m, list(range(n))[::-1], names, {0: UNKNOWN[0], 2: UNKNOWN[1]}))
        else:
            raise AssertionError(case)
    return out


def run(est: Estimator, recs: list) -> dict[float, object]:
    """Add every record of a stamp, then tick at it; estimates by stamp."""
    out = {}
    k = 0
    while k < len(recs):
        t = recs[k].t
        while k < len(recs) and recs[k].t == t:
            est.add(recs[k])
            k += 1
        e = est.tick(t)
        if e is not None:
            out[t] = e
    return out


CASES = ['reversed', 'subsets', 'unknown']


@pytest.fixture(scope='module')
def fourbar():
    """config/fourbar.yaml (joints crank, coupler_joint) in free fall, 0.4 s of readings."""
    system, traj, recs = fourbar_data(0.4)
    truth = np.array([joint_positions(system, q) for q in traj.q])   # (t, joint)
    return system, traj, recs, truth


@pytest.mark.parametrize('case', CASES)
def test_planar_readings_in_any_order_land_on_their_joints(fourbar, case):
    system, traj, recs, truth = fourbar
    names = tuple(j.name for j in system.mech.joints)
    assert names == ('crank', 'coupler_joint')
    # the two joints read very differently, so a swap cannot hide
    assert np.all(np.abs(truth[:, 1] - truth[:, 0]) > 1.0)
    sent = reorder(recs, names, case)
    assert [m.names for m in sent if isinstance(m, JointMeasurement)][0] != names
    est = Estimator(system, EstimatorConfig(frequency=200.0, lag_duration=0.1,
                                            encoder_sigma=0.002))
    out = run(est, sent)
    n_enc = sum(isinstance(m, JointMeasurement) for m in recs)
    c = est.counters
    assert c['used_joint_pos'] == 2 * n_enc, c           # every reading used, none rejected
    assert c['rejected_outlier'] == 0 and c['resets'] == 0, c
    assert c['dropped_unknown_joint'] == (2 if case == 'unknown' else 0)
    assert len(out) > 70
    t0 = recs[0].t
    for t, e in out.items():
        k = int(round((t - t0) / traj.t[1]))
        err = wrap_angle(e.joint_position - truth[k])
        assert np.all(np.abs(err) < 0.01), (case, t, e.joint_position, truth[k])


@pytest.fixture(scope='module')
def ur5():
    """config/urdf/ur5.urdf driven by sinusoidal torques, 0.3 s of encoder + wrist-IMU readings."""
    sys_ = build_spatial_system(URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml')
    # a pose with six distinct joint angles (the URDF's q0 has pairs of equal ones)
    tr, taus = simulate_ur5(sys_, duration=0.3, q0=[0.5, -1.2, 1.2, -1.57, -2.2, -0.6])
    recs = ur5_readings(sys_, tr, taus, np.random.default_rng(11))
    return sys_, tr, recs


@pytest.mark.parametrize('case', CASES)
def test_urdf_readings_in_any_order_land_on_their_joints(ur5, case):
    sys_, tr, recs = ur5
    names = tuple(sys_.names)
    # joint j and joint 5 - j (swapped by a reversed message read at the model's index)
    # never read alike
    assert np.abs(tr.q - tr.q[:, ::-1]).min() > 0.5
    sent = reorder(recs, names, case)
    est = Estimator(sys_, EstimatorConfig(frequency=500.0, lag_duration=0.05))
    out = run(est, sent)
    c = est.counters
    n_enc = sum(isinstance(m, JointMeasurement) for m in recs)
    assert c['used_joint_pos'] == 6 * n_enc, c
    # the efforts reached their joints' actuators too (a misplaced one would drive the arm
    # with another joint's torque): the estimate follows the truth
    assert c['used_effort'] == 6 * n_enc, c
    assert c['rejected_outlier'] == 0 and c['resets'] == 0, c
    assert c['dropped_unknown_joint'] == (2 if case == 'unknown' else 0)
    assert len(out) == len(tr.t)
    for k, t in enumerate(tr.t):
        err = out[t].joint_position - tr.q[k]
        assert np.all(np.abs(err) < 5e-3), (case, k, err)
