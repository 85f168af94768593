"""JointState readings land on the joint they name, whatever the message's order (issue 29).

``joint_state_broadcaster`` publishes its joints in its own order, often not the YAML's or
the URDF's; a message may carry only some joints, or joints the model does not have. Each
reading must reach the joint of its name. The mutant this guards against took the value at
the model's index instead of the message's: the crank's angle then lands on the coupler.
The expectation is the simulated truth of each joint, not a second run of the estimator.
The same cases through the EstimatorDriver: test/ros/test_driver_joint_order.py.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.joint_order import CASES, fourbar_case, reorder, ur5_case

from mbfg_ros.core.measurements import JointMeasurement
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.planar.sensors import wrap_angle


def run(est: Estimator, recs: list) -> dict[int, object]:
    """Add every record of a stamp, then tick at it; estimates by stamp (ns)."""
    out = {}
    k = 0
    while k < len(recs):
        t = recs[k].t
        while k < len(recs) and recs[k].t == t:
            est.add(recs[k])
            k += 1
        e = est.tick(t)
        if e is not None:
            out[int(round(t * 1e9))] = e
    return out


@pytest.mark.parametrize('case', CASES)
def test_planar_readings_in_any_order_land_on_their_joints(case):
    _, system, truth, recs = fourbar_case()
    names = tuple(j.name for j in system.mech.joints)
    assert names == ('crank', 'coupler_joint')
    # the two joints read very differently, so a swap cannot hide
    assert all(abs(jp[1] - jp[0]) > 1.0 for jp in truth.values())
    sent = reorder(recs, names, case)
    est = Estimator(system, EstimatorConfig(frequency=200.0, lag_duration=0.1,
                                            encoder_sigma=0.002))
    out = run(est, sent)
    n_enc = sum(isinstance(m, JointMeasurement) for m in recs)
    c = est.counters
    assert c['used_joint_pos'] == 2 * n_enc, c           # every reading used, none rejected
    assert c['rejected_outlier'] == 0 and c['resets'] == 0, c
    assert c['dropped_unknown_joint'] == (2 if case == 'unknown' else 0)
    assert len(out) > 70
    for t, e in out.items():
        err = wrap_angle(e.joint_position - truth[t])
        assert np.all(np.abs(err) < 0.01), (case, t, e.joint_position, truth[t])


@pytest.mark.parametrize('case', CASES)
def test_urdf_readings_in_any_order_land_on_their_joints(case):
    _, _, system, truth, recs = ur5_case()
    names = tuple(system.names)
    # joint j and joint 5 - j (swapped by a reversed message read at the model's index)
    # never read alike
    assert min(np.abs(q - q[::-1]).min() for q in truth.values()) > 0.5
    sent = reorder(recs, names, case)
    est = Estimator(system, EstimatorConfig(frequency=500.0, lag_duration=0.05))
    out = run(est, sent)
    c = est.counters
    n_enc = sum(isinstance(m, JointMeasurement) for m in recs)
    assert c['used_joint_pos'] == 6 * n_enc, c
    # the efforts reached their joints' actuators too (a misplaced one would drive the arm
    # with another joint's torque and the estimate would leave the truth)
    assert c['used_effort'] == 6 * n_enc, c
    assert c['rejected_outlier'] == 0 and c['resets'] == 0, c
    assert c['dropped_unknown_joint'] == (2 if case == 'unknown' else 0)
    assert out.keys() == truth.keys()
    for t, e in out.items():
        err = e.joint_position - truth[t]
        assert np.all(np.abs(err) < 5e-3), (case, t, err)


def test_an_imu_the_model_does_not_have_is_counted_once_and_never_used():
    _, system, _, recs = fourbar_case()
    imus = [r for r in recs if not isinstance(r, JointMeasurement)][:5]
    est = Estimator(system, EstimatorConfig(frequency=200.0))
    for r in imus:
        assert not est.add(replace(r, sensor='base_imu'))
    assert est.add(imus[0])                 # the model's own IMU is taken
    c = est.counters
    assert c['dropped_unknown_sensor'] == 1 and c['dropped_empty'] == 5, c
