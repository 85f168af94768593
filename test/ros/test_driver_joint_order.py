"""JointState messages in another order than the model's, through the EstimatorDriver the
node and ``mbfg-replay`` use (issue 29): names reversed, one message per joint, unknown names
among them; for the planar four-bar and the UR5 URDF. Each reading must land on the joint of
its name, wherever the input path validates and reorders (conversions, driver, estimator):
the expectation is the simulated truth of each joint."""
from __future__ import annotations

import numpy as np
import pytest
from support.joint_order import CASES, fourbar_case, reorder, ur5_case
from support.ros_data import replay_driver

from mbfg_ros.core.bag import typestore
from mbfg_ros.core.measurements import JointMeasurement
from mbfg_ros.planar.sensors import wrap_angle
from mbfg_ros.ros import conversions as cv
from mbfg_ros.ros.driver import EstimatorDriver
from mbfg_ros.ros.params import parse_estimator

KIT = cv.rosbags_kit(typestore())


def replay(driver: EstimatorDriver, recs: list) -> dict[int, object]:
    """Each record as its ROS message into the driver, ticks as the replay runs them;
    estimates by stamp (ns)."""
    def feed(t: int, r) -> None:
        if isinstance(r, JointMeasurement):
            msg = cv.joint_state_msg(KIT, t, r.names, r.position, r.velocity, r.effort)
            assert driver.joint_state(msg) is not None
        else:
            msg = cv.imu_msg(KIT, t, r.sensor, r.gyro, r.accel)
            assert driver.imu(msg, r.sensor) is not None
    outs = replay_driver(driver, recs, feed)
    return {o.t_ns: o.estimate for o in outs if o.estimate is not None}


def check_counts(driver: EstimatorDriver, recs: list, n_joints: int, case: str) -> None:
    n_enc = sum(isinstance(m, JointMeasurement) for m in recs)
    c, e = driver.counters, driver.estimator.counters
    assert c['unknown_joint'] == (2 * n_enc if case == 'unknown' else 0), c
    assert c['out_of_limits'] == 0 and c['dropped.other'] == 0, c
    assert e['used_joint_pos'] == n_joints * n_enc, e
    assert e['rejected_outlier'] == 0 and e['resets'] == 0, e


@pytest.mark.parametrize('case', CASES)
def test_planar_joint_states_in_any_order_land_on_their_joints(case):
    path, system, truth, recs = fourbar_case()
    names = tuple(j.name for j in system.mech.joints)
    sent = reorder(recs, names, case)
    driver = EstimatorDriver(system, parse_estimator({
        'mechanism': str(path), 'frequency': 200.0, 'lag_duration': 0.1,
        'encoder_sigma': 0.002}))
    out = replay(driver, sent)
    check_counts(driver, recs, 2, case)
    assert len(out) > 70
    for t, e in out.items():
        err = wrap_angle(e.joint_position - truth[t])
        assert np.all(np.abs(err) < 0.01), (case, t, e.joint_position, truth[t])


@pytest.mark.parametrize('case', CASES)
def test_urdf_joint_states_in_any_order_land_on_their_joints(case):
    urdf, overlay, system, truth, recs = ur5_case()
    sent = reorder(recs, tuple(system.names), case)
    driver = EstimatorDriver(system, parse_estimator({
        'mechanism': str(urdf), 'overlay': str(overlay), 'frequency': 500.0,
        'lag_duration': 0.05}))
    out = replay(driver, sent)
    check_counts(driver, recs, 6, case)
    assert driver.estimator.counters['used_effort'] == 6 * len(truth)
    assert out.keys() == truth.keys()
    for t, e in out.items():
        err = e.joint_position - truth[t]
        assert np.all(np.abs(err) < 5e-3), (case, t, err)
