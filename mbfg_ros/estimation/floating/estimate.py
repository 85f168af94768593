"""One published estimate of a floating-base robot (issue 28 item 3)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ['FloatingEstimate', 'STATUSES']

STATUSES = ('ok', 'stale')
"""``ok``: predicted from IMU readings up to the tick; ``stale``: no IMU reading for
``stale_after`` s (the last state, held)."""


@dataclass(frozen=True)
class FloatingEstimate:
    """The base state, joints and contacts at time ``t`` (REP-105 conventions: pose in the
    odometry frame, twist in the base frame)."""

    t: float
    status: str
    position: np.ndarray          # (3,) base origin, odometry frame
    quaternion_xyzw: np.ndarray   # (4,) base attitude
    linear_velocity: np.ndarray   # (3,) base frame
    angular_velocity: np.ndarray  # (3,) base frame (gyro − estimated bias)
    pose_covariance: np.ndarray   # (6, 6) x y z rx ry rz, odometry-frame axes
    twist_covariance: np.ndarray  # (6, 6) vx vy vz wx wy wz, base frame
    q: np.ndarray                 # (n,) joints, ``joint_names`` order
    qd: np.ndarray                # (n,)
    tau: np.ndarray               # (n,) measured efforts, else inverse dynamics; NaN unknown
    contacts: tuple[bool, ...]    # per ``contact_names``
    contact_forces: np.ndarray    # (k, 3) ground on foot, odometry-frame axes; NaN in swing
