"""The floating-base node's output messages, built once and refilled per estimate.

* ``~/odom`` nav_msgs/Odometry: ``header.frame_id`` = ``odom_frame``, ``child_frame_id`` =
  ``base_frame``; pose (position, orientation) in ``odom_frame``, twist (linear, angular)
  in the child frame (REP-105), both with the estimator's 6×6 covariances (ROS order
  x y z rx ry rz);
* ``/tf`` tf2_msgs/TFMessage with ``odom_frame`` → ``base_frame`` (when tf2_msgs imports);
* ``~/joint_states`` sensor_msgs/JointState: the estimated q, q̇ and τ̂ (URDF names);
* ``~/feet/<FOOT>/contact`` std_msgs/Bool: the contact state the estimator used;
* ``~/feet/<FOOT>/force`` geometry_msgs/WrenchStamped: the estimated force of the ground on
  the foot, **in odom_frame's axes** (``header.frame_id`` = ``odom_frame``), torque zero
  (a point foot; the force acts at the foot, not at odom's origin); zero for a swing foot.

Messages are refilled in place (no per-estimate allocation of message objects, names or
covariance arrays); the node publishes only those someone subscribes to.
"""
from __future__ import annotations

import array
import importlib
from typing import Any, Sequence

import numpy as np

__all__ = ['FloatingMessages', 'tf_message_class', 'message']

NS = 1_000_000_000


def message(type_name: str) -> Any:
    """The rclpy message class of ``pkg/msg/Name``."""
    pkg, _, name = type_name.split('/')
    return getattr(importlib.import_module(f'{pkg}.msg'), name)


def tf_message_class() -> Any:
    """tf2_msgs/TFMessage, or None where tf2_msgs is not installed (the PyPI wheels of
    Kilted and Jazzy have none; a ROS install has it)."""
    try:
        return message('tf2_msgs/msg/TFMessage')
    except ImportError:
        return None


def _doubles(values: np.ndarray) -> array.array:
    a = array.array('d')
    a.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return a


def _set_stamp(header: Any, t_ns: int) -> None:
    sec, nanosec = divmod(int(t_ns), NS)
    header.stamp.sec, header.stamp.nanosec = int(sec), int(nanosec)


class FloatingMessages:
    """The per-estimate messages of the floating-base node (module docstring)."""

    def __init__(self, joint_names: Sequence[str], feet: Sequence[str],
                 contact_names: Sequence[str], odom_frame: str, base_frame: str,
                 with_tf: bool) -> None:
        Odometry = message('nav_msgs/msg/Odometry')
        JointState = message('sensor_msgs/msg/JointState')
        Bool = message('std_msgs/msg/Bool')
        WrenchStamped = message('geometry_msgs/msg/WrenchStamped')
        self.odom = Odometry()
        self.odom.header.frame_id = odom_frame
        self.odom.child_frame_id = base_frame
        self.joints = JointState()
        self.joints.name = list(joint_names)
        self.feet = tuple(feet)
        index = {c: k for k, c in enumerate(contact_names)}
        self._foot_index = np.array([index[f] for f in self.feet], dtype=np.intp)
        self.contact = {f: Bool() for f in self.feet}
        self.force = {}
        for f in self.feet:
            w = WrenchStamped()
            w.header.frame_id = odom_frame
            self.force[f] = w
        # the odom -> base transform is kept and filled with ``with_tf`` whether or not
        # tf2_msgs is installed (geometry_msgs always is); ``tf`` wraps it for /tf where
        # tf2_msgs exists (a ROS install; the PyPI wheels have none)
        self.tf = None
        self.transform = None
        if with_tf:
            tr = message('geometry_msgs/msg/TransformStamped')()
            tr.header.frame_id = odom_frame
            tr.child_frame_id = base_frame
            self.transform = tr
            TF = tf_message_class()
            if TF is not None:
                self.tf = TF(transforms=[tr])
                self.transform = self.tf.transforms[0]

    def fill_odometry(self, t_ns: int, est: Any) -> None:
        """``~/odom`` (and the TF) from a FloatingEstimate."""
        o = self.odom
        _set_stamp(o.header, t_ns)
        p, qt = est.position, est.quaternion_xyzw
        pos, ori = o.pose.pose.position, o.pose.pose.orientation
        pos.x, pos.y, pos.z = float(p[0]), float(p[1]), float(p[2])
        ori.x, ori.y, ori.z, ori.w = float(qt[0]), float(qt[1]), float(qt[2]), float(qt[3])
        o.pose.covariance[:] = np.asarray(est.pose_covariance, float).reshape(36)
        v, w = est.linear_velocity, est.angular_velocity
        lin, ang = o.twist.twist.linear, o.twist.twist.angular
        lin.x, lin.y, lin.z = float(v[0]), float(v[1]), float(v[2])
        ang.x, ang.y, ang.z = float(w[0]), float(w[1]), float(w[2])
        o.twist.covariance[:] = np.asarray(est.twist_covariance, float).reshape(36)
        tr = self.transform
        if tr is not None:
            _set_stamp(tr.header, t_ns)
            tt, rr = tr.transform.translation, tr.transform.rotation
            tt.x, tt.y, tt.z = pos.x, pos.y, pos.z
            rr.x, rr.y, rr.z, rr.w = ori.x, ori.y, ori.z, ori.w

    def fill_joints(self, t_ns: int, est: Any) -> None:
        """``~/joint_states``: q, q̇, τ̂ (NaN where the estimator has none)."""
        j = self.joints
        _set_stamp(j.header, t_ns)
        j.position = _doubles(est.q)
        j.velocity = _doubles(est.qd)
        j.effort = _doubles(est.tau)

    def fill_foot(self, t_ns: int, est: Any, k: int) -> None:
        """The contact flag and force of foot ``k`` (of ``feet``)."""
        foot = self.feet[k]
        i = int(self._foot_index[k])
        self.contact[foot].data = bool(est.contacts[i])
        w = self.force[foot]
        _set_stamp(w.header, t_ns)
        f = est.contact_forces[i]
        fx, fy, fz = (float(x) if np.isfinite(x) else 0.0 for x in f)
        w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = fx, fy, fz
