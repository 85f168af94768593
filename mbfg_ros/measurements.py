"""Plain measurement and estimate records shared by the estimator core and the ROS edge.

No ROS types here: the node converts messages into these records (and back),
the replay tool and the benchmarks build them directly. Times are seconds
(the message's ``header.stamp``), never wall time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ['JointMeasurement', 'ImuMeasurement', 'Estimate']


@dataclass(frozen=True)
class JointMeasurement:
    """One JointState message: values per named joint; NaN where not given.

    ``position_var`` / ``velocity_var``: variances per joint, or None to use
    the configured noise (JointState carries no covariance).
    """

    t: float
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    position_var: np.ndarray | None = None
    velocity_var: np.ndarray | None = None


@dataclass(frozen=True)
class ImuMeasurement:
    """One Imu message for the YAML sensor ``sensor``.

    ``gyro_z`` angular rate about the plane normal (rad/s), ``accel`` the
    specific force (x, y) in the sensor frame (m/s², gravity included),
    ``angle`` the body's planar orientation from the quaternion or None when
    the message says it has none (orientation_covariance[0] == -1).
    Variances come from the message covariances, or None for the defaults.
    """

    t: float
    sensor: str
    gyro_z: float | None
    accel: np.ndarray | None
    angle: float | None = None
    gyro_var: float | None = None
    accel_var: np.ndarray | None = None
    angle_var: float | None = None


@dataclass(frozen=True)
class Estimate:
    """The estimator's answer at time ``t``."""

    t: float
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    q_std: np.ndarray
    qd_std: np.ndarray
    tau: np.ndarray                 # actuator torques consistent with the estimate
    joint_position: np.ndarray      # per YAML joint
    joint_velocity: np.ndarray
    tick_seconds: float
    status: str = 'ok'
    counters: dict = field(default_factory=dict)
