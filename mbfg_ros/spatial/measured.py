"""Inverse dynamics on a URDF robot's measured motion (issue 27 item 2).

The planar measured path's machinery, not a copy of it (:mod:`mbfg_ros.planar.problems.measured`):
the same :class:`JointLog` from a CSV or a rosbag2's ``sensor_msgs/JointState``, the same
resampling of jittered stamps onto a uniform grid (:func:`resample_uniform`), the same
derivative options (``velocity``, ``savgol``, ``smoother``: :func:`motion_derivatives`) and the
same effort comparison (:func:`torque_fit`). What differs is only how the joints map to q: a
URDF joint's position *is* its tree coordinate, and with loops the free joints follow from
the loop equations (:func:`.inverse_trajectory.inverse_trajectory`). τ is the system's
inverse dynamics with the overlay's friction and rotors (:mod:`.drives`).
"""
from __future__ import annotations

import numpy as np

from ..core.errors import MbfgError
from ..planar.problems.measured import (
    DerivativeOptions,
    JointLog,
    MeasuredInverse,
    motion_derivatives,
    resample_uniform,
)
from .inverse_trajectory import inverse_trajectory
from .system import SpatialSystem

__all__ = ['measured_inverse', 'joint_indices']


def joint_indices(system: SpatialSystem, joints: tuple[str, ...] | list[str]) -> list[int]:
    """The tree coordinate of each measured joint (errors name the URDF)."""
    idx = []
    for name in joints:
        if name not in system.names:
            raise MbfgError(f'{system.model.source}: no tree joint {name!r} (joints: '
                            f'{", ".join(system.names)})')
        idx.append(system.names.index(name))
    return idx


def measured_inverse(system: SpatialSystem, log: JointLog,
                     options: DerivativeOptions = DerivativeOptions()) -> MeasuredInverse:
    """q, q̇, q̈ and actuator torques (``system.actuator_names`` order) along a measured motion,
    with the measured efforts in the same columns (NaN for an actuator the log lacks).

    ``log.joints``: every tree joint of an open tree; with loops, one joint per degree of
    freedom (default prescription: the actuated joints). Stamps that are not uniform are
    resampled at their median step first (Savitzky-Golay fits and the smoother need it).
    """
    log = resample_uniform(log)
    idx = joint_indices(system, log.joints)
    z, zd, zdd = motion_derivatives(log.t, np.unwrap(log.position, axis=0), log.velocity,
                                    options)
    res = inverse_trajectory(system, log.t, z, idx, zd=zd, zdd=zdd)
    effort = None
    if log.effort is not None:
        cols = [log.effort[:, log.joints.index(a)] if a in log.joints
                else np.full(len(log.t), np.nan) for a in system.actuator_names]
        effort = np.stack(cols, axis=1)
    return MeasuredInverse(res.t, res.q, res.qd, res.qdd, res.tau, effort)
