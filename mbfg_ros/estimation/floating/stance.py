"""Stance-foot rows of the floating-base estimator: leg velocity and flat ground.

The :class:`StanceMixin` part of :class:`~.estimator.FloatingEstimator`.
Per stance foot c at keyframe k (graph in :mod:`.estimator`'s docstring)::

    contact velocity   v + R u_c = 0                 σ slip
    flat ground        t_z + e_zᵀ R p_c − r = z_g    σ flatness

with ``p_c`` the foot's centre in the base frame and ``u_c = ω × p_c + J_c q̇ − r ω_c × Rᵀe_z``
its velocity relative to the ground contact point (a ball foot of radius ``r`` rolling
without slipping; ``r = 0``: point feet): seed 002 §VII's loop closure of a stance foot
with the ground at the velocity level
(:func:`mbfg_ros.spatial.contact_factors.contact_velocity_error` with the roll added); the
flat-ground prior ties the base height to the start-up ground plane (:mod:`.startup`).
Both are linearised here in numpy at the keyframe's estimate and handed to GTSAM as one
whitened ``JacobianFactor`` in a ``LinearContainerFactor`` (as
:func:`mbfg_ros.core.factors.stacked_linear_factor` does for vector keys): no Python
callback inside ISAM2.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import gtsam
import numpy as np

from .keyframes import sym

__all__ = ['StanceMixin', 'Keyframe', 'cross']


class StanceMixin:
    """The leg kinematics of a keyframe and its stance feet's rows (module docstring)."""

    def _legs(self, qd: np.ndarray, w: np.ndarray, stance: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p, ṗ, ω_foot) of the stance feet in the base frame (base at rest at identity,
        turning at ``w``), from the latest joint positions and ``qd``."""
        self._q_id[7:] = self._q
        self._v_id[3:6] = w
        self._v_id[6:] = qd
        names = [self.contact_names[i] for i in np.flatnonzero(stance)]
        return self.system.contact_motion(self._q_id, self._v_id, names)

    def _record(self, key: int, t: float, nav: gtsam.NavState, w: np.ndarray
                ) -> Keyframe:
        """A keyframe's leg kinematics (every foot), for its leg rows now or later."""
        p, pdot, wf = self._legs(self._qd, w, np.ones(self.k, bool))
        R = nav.attitude().matrix()
        u = pdot - self.config.foot_radius * cross(wf, R[2])   # base frame (k, 3)
        return Keyframe(key, t, nav.pose(), nav.velocity(), p, u)

    def _leg_factor(self, kf: Keyframe, t_now: float, touchdown_guard: float | None = None,
                    loose: float = 1.0) -> gtsam.LinearContainerFactor | None:
        """The velocity and flat-ground rows (module docstring) of keyframe ``kf`` for the
        feet in stance from ``touchdown_guard`` (default the config's) before it until now,
        at its estimate; the velocity rows' σ times ``loose``."""
        c = self.config
        guard = c.touchdown_guard if touchdown_guard is None else touchdown_guard
        feet = np.flatnonzero(self._stance & (self._t_down <= kf.t - guard + 1e-9))
        m = len(feet)
        if m == 0 or t_now - kf.t >= c.lag:
            return None
        X, V = sym('x', kf.key), sym('v', kf.key)
        pose, v = kf.pose, kf.velocity
        R = pose.rotation().matrix()
        r = c.foot_radius
        p, u = kf.p[feet], kf.u[feet]
        flat = c.ground_flatness_sigma > 0
        rows = 3 * m + (m if flat else 0)
        AX = np.zeros((rows, 6), order='F')
        AV = np.zeros((rows, 3), order='F')
        b = np.empty(rows)
        # σ of a foot's velocity: slip, plus the joint-rate and gyro noise through the leg
        gyro_s = c.gyro_noise / math.sqrt(self._imu_dt)     # σ of one gyro reading
        slip = np.array([c.contact_slip_sigma, c.contact_slip_sigma,
                         c.vertical_slip_sigma or c.contact_slip_sigma]) ** 2
        L2 = np.einsum('ij,ij->i', p, p)
        inv = 1.0 / (loose * np.sqrt(slip + (2 * self._qd_sigma ** 2 + gyro_s ** 2)
                                     * L2[:, None]))
        n3 = 3 * m
        b[:n3] = -((v + u @ R.T) * inv).ravel()           # e = v + R u (world axes)
        S = np.zeros((m, 3, 3))                           # [u]×
        S[:, 0, 1], S[:, 0, 2], S[:, 1, 2] = -u[:, 2], u[:, 1], -u[:, 0]
        S[:, 1, 0], S[:, 2, 0], S[:, 2, 1] = u[:, 2], -u[:, 1], u[:, 0]
        AX[:n3, :3] = -(np.matmul(R, S) * inv[:, :, None]).reshape(n3, 3)  # ∂e/∂δθ (right)
        AV[:n3] = (np.eye(3) * inv[:, :, None]).reshape(n3, 3)
        if flat:                                          # e = t_z + e_zᵀ R p − r − z_g
            inv = 1.0 / np.sqrt(c.ground_flatness_sigma ** 2 + c.encoder_sigma ** 2 * L2)
            up = R[2]
            b[n3:] = -(pose.translation()[2] + p @ up - r - self._z_ground) * inv
            AX[n3:, :3] = -cross(up, p) * inv[:, None]   # e_zᵀ R [p]× = (Rᵀe_z × p)ᵀ
            AX[n3:, 3:] = up * inv[:, None]               # t ← t + R δt
        jf = gtsam.JacobianFactor(X, AX, V, AV, b, None)
        point = gtsam.Values()
        point.insert(X, pose)
        point.insert(V, v)
        return gtsam.LinearContainerFactor(jf, point)


@dataclass
class Keyframe:
    """A keyframe's estimate and leg kinematics (base frame: feet ``p``, velocities ``u``
    relative to their contact points), kept until its leg rows are added."""

    key: int
    t: float
    pose: gtsam.Pose3
    velocity: np.ndarray
    p: np.ndarray
    u: np.ndarray


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b over the last axis, broadcast (``np.cross`` costs ~15 µs of Python per call)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
