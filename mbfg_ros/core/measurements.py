"""Plain measurement and estimate records shared by the estimator core and the ROS edge.

No ROS types here: the node converts messages into these records (and back),
the replay tool and the benchmarks build them directly. Times are seconds
(the message's ``header.stamp``), never wall time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ['JointMeasurement', 'ImuMeasurement', 'Estimate', 'quaternion_yaw',
           'quaternion_from_yaw']


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
    """One Imu message for the sensor ``sensor``, in ``sensor_msgs/Imu``'s own terms: a
    3-axis IMU and a quaternion, whatever the mechanism's dimension.

    ``gyro`` (3,) angular velocity (rad/s) and ``accel`` (3,) specific force (m/s²,
    gravity included), both in the sensor frame; ``orientation`` (4,) the sensor frame's
    quaternion ``(x, y, z, w)`` in the world, or None when the message says it has none
    (orientation_covariance[0] == -1). Variances (3,) are the covariance diagonals, or
    None for the configured defaults. A planar mechanism reads ``gyro[2]``, ``accel[:2]``
    and the quaternion's yaw (:func:`quaternion_yaw`).
    """

    t: float
    sensor: str
    gyro: np.ndarray | None
    accel: np.ndarray | None
    orientation: np.ndarray | None = None
    gyro_var: np.ndarray | None = None
    accel_var: np.ndarray | None = None
    orientation_var: np.ndarray | None = None


def quaternion_yaw(quat: np.ndarray) -> float:
    """Planar angle (rotation about z) of a quaternion ``(x, y, z, w)``."""
    x, y, z, w = (float(v) for v in quat)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def quaternion_from_yaw(angle: float) -> np.ndarray:
    """The quaternion ``(x, y, z, w)`` of a rotation by ``angle`` about z."""
    return np.array([0.0, 0.0, math.sin(angle / 2.0), math.cos(angle / 2.0)])


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
    covariance: np.ndarray | None = None   # (3n, 3n) marginal of [q, q̇, q̈]; refreshed every
    #                                        covariance_every ticks (the same array between)
    predicted: bool = False         # True: the newest smoothed estimate carried to t by the
    #                                 model (Estimator.predict), not a smoother tick

    @classmethod
    def of_tick(cls, t: float, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                q_std: np.ndarray, qd_std: np.ndarray, tau: np.ndarray,
                joint_position: np.ndarray, joint_velocity: np.ndarray, tick_seconds: float,
                status: str, counters: dict, covariance: np.ndarray | None) -> Estimate:
        """A smoother tick's estimate (``predicted`` False): every field as ``__init__``
        sets it, without a frozen dataclass's ``object.__setattr__`` per field (~1 µs of
        every tick, issue 24)."""
        est = object.__new__(cls)
        est.__dict__.update(t=t, q=q, qd=qd, qdd=qdd, q_std=q_std, qd_std=qd_std, tau=tau,
                            joint_position=joint_position, joint_velocity=joint_velocity,
                            tick_seconds=tick_seconds, status=status, counters=counters,
                            covariance=covariance, predicted=False)
        return est

    def replaced(self, **changes) -> Estimate:
        """``dataclasses.replace(self, **changes)`` (``changes`` name fields only) without
        ``__init__``'s ``object.__setattr__`` per field, as :meth:`of_tick` builds a record
        (~2 µs of every predicted estimate, issue 24)."""
        est = object.__new__(type(self))
        est.__dict__.update(self.__dict__)
        est.__dict__.update(changes)
        return est
