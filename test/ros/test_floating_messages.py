"""The floating-base node's output messages (mbfg_ros/ros/floating_messages.py), no DDS.

The odom → base transform is built and filled from each estimate even where tf2_msgs (the
/tf message) is not installed (the PyPI wheels here), so what the node puts on /tf on a ROS
install is checked here too: the same pose as ``~/odom``, REP-105 frames, the estimate's
stamp.
"""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.estimation.floating import FloatingEstimate
from mbfg_ros.ros.floating_messages import FloatingMessages, tf_message_class

NS = 1_000_000_000
JOINTS = ('j1', 'j2')
FEET = ('LF', 'RF')


def _estimate(rng: np.random.Generator) -> FloatingEstimate:
    quat = rng.normal(size=4)
    return FloatingEstimate(
        t=12.5, status='ok', position=rng.normal(size=3),
        quaternion_xyzw=quat / np.linalg.norm(quat),
        linear_velocity=rng.normal(size=3), angular_velocity=rng.normal(size=3),
        pose_covariance=np.diag(rng.uniform(0.1, 1.0, 6)),
        twist_covariance=np.diag(rng.uniform(0.1, 1.0, 6)),
        q=rng.normal(size=2), qd=rng.normal(size=2), tau=np.array([0.5, np.nan]),
        contacts=(True, False), contact_forces=np.array([[1.0, 2.0, 30.0], [np.nan] * 3]))


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_the_transform_is_the_odometry_pose_in_rep105_frames(seed):
    est = _estimate(np.random.default_rng(seed))
    msgs = FloatingMessages(JOINTS, FEET, FEET, 'odom', 'base_link', with_tf=True)
    t_ns = 12 * NS + 500_000_000
    msgs.fill_odometry(t_ns, est)
    tr, odom = msgs.transform, msgs.odom
    assert tr is not None
    assert (tr.header.frame_id, tr.child_frame_id) == ('odom', 'base_link')
    assert (odom.header.frame_id, odom.child_frame_id) == ('odom', 'base_link')
    assert (tr.header.stamp.sec, tr.header.stamp.nanosec) == (12, 500_000_000)
    assert (odom.header.stamp.sec, odom.header.stamp.nanosec) == (12, 500_000_000)
    t, r = tr.transform.translation, tr.transform.rotation
    np.testing.assert_array_equal([t.x, t.y, t.z], est.position)
    np.testing.assert_array_equal([r.x, r.y, r.z, r.w], est.quaternion_xyzw)
    p = odom.pose.pose.position
    np.testing.assert_array_equal([p.x, p.y, p.z], est.position)
    v = odom.twist.twist.linear
    np.testing.assert_array_equal([v.x, v.y, v.z], est.linear_velocity)
    np.testing.assert_array_equal(np.reshape(odom.pose.covariance, (6, 6)), est.pose_covariance)
    if tf_message_class() is not None:       # a ROS install: /tf carries that transform
        assert msgs.tf.transforms[0] is tr


def test_without_publish_tf_no_transform_is_built():
    msgs = FloatingMessages(JOINTS, FEET, FEET, 'odom', 'base_link', with_tf=False)
    msgs.fill_odometry(NS, _estimate(np.random.default_rng(3)))
    assert msgs.transform is None and msgs.tf is None
