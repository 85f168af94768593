"""Start-up and restarts of the floating-base estimator.

The :class:`StartupMixin` part of :class:`~.estimator.FloatingEstimator`:
the first ``init_time`` s of IMU readings with the robot standing give roll and pitch from
the mean specific force, the gyro bias from the mean gyro, accelerometer bias 0 (σ
``accel_bias_sigma``), velocity 0; yaw 0 and the base above the odometry origin with the
stance feet's lowest points on z = 0 (the ground plane of the flat-ground rows,
:mod:`.stance`), unless :meth:`StartupMixin.set_initial_pose` gave a pose (then the ground
plane is where the stance feet are). A start (or a restart after a failed solve,
:mod:`.keyframes`) is a new smoother with priors on the first keyframe.
"""
from __future__ import annotations

import math
from typing import Sequence

import gtsam
import numpy as np

from .keyframes import sym

__all__ = ['StartupMixin', 'align']


class StartupMixin:
    """The start-up state and the smoother's first keyframe (module docstring)."""

    def set_initial_pose(self, position: Sequence[float], quaternion_xyzw: Sequence[float],
                         linear_velocity: Sequence[float] = (0.0, 0.0, 0.0)) -> None:
        """Start at this base pose (odometry frame) and world-frame velocity instead of the
        start-up's yaw 0 above the origin; used at the next start-up."""
        p = np.asarray(position, float).reshape(3)
        qx = np.asarray(quaternion_xyzw, float).reshape(4)
        qx = qx / np.linalg.norm(qx)
        self._initial_pose = (p, qx, np.asarray(linear_velocity, float).reshape(3))

    def _try_start(self) -> bool:
        buf = self._init_buf
        if not buf or buf[-1][0] - buf[0][0] < self.config.init_time \
                or not np.isfinite(self._q).all():
            return False
        W = np.array([b[1] for b in buf])
        A = np.array([b[2] for b in buf])
        bg = W.mean(axis=0)
        stance = self._stance if self._contact_seen.any() and self._stance.any() \
            else np.ones(self.k, bool)
        if self._initial_pose is not None:
            p0, qx, v0 = self._initial_pose
            R0 = gtsam.Rot3.Quaternion(qx[3], qx[0], qx[1], qx[2])
        else:
            up = A.mean(axis=0)
            up = up / np.linalg.norm(up)            # Rᵀ e_z (at rest f = Rᵀ g_up)
            R0 = gtsam.Rot3(align(up))
            v0 = np.zeros(3)
            p0 = np.zeros(3)
        pf = self._legs(np.zeros(self.n), np.zeros(3), stance)[0]
        low = (R0.matrix() @ pf.T)[2] - self.config.foot_radius  # lowest points re. base
        ground = float(low.mean()) if low.size else 0.0           # (no contacts: 0)
        if self._initial_pose is None:
            p0[2] = -ground
        self._z_ground = float(p0[2] + ground)
        self._bias = gtsam.imuBias.ConstantBias(np.zeros(3), bg)
        self._start(gtsam.NavState(R0, p0, v0), self._bias, buf[-1][0],
                    np.eye(6) * 1e-8, 1e-3, fresh=True)
        self._init_buf = []
        self.counters['initialisations'] += 1
        return True

    def _start(self, nav: gtsam.NavState, bias: gtsam.imuBias.ConstantBias, t: float,
               pose_cov: np.ndarray, v_sigma: float, fresh: bool = False) -> None:
        """A new smoother with priors on the first keyframe (start-up or restart)."""
        c = self.config
        self._smoother = gtsam.IncrementalFixedLagSmoother(c.lag, self._isam_params)
        self._key = 0
        X, V, B = sym('x', 0), sym('v', 0), sym('b', 0)
        g = gtsam.NonlinearFactorGraph()
        g.add(gtsam.PriorFactorPose3(X, nav.pose(), gtsam.noiseModel.Gaussian.Covariance(
            pose_cov)))
        g.add(gtsam.PriorFactorPoint3(V, nav.velocity(),
                                      gtsam.noiseModel.Isotropic.Sigma(3, v_sigma)))
        bs = np.r_[[c.accel_bias_sigma] * 3, [c.gyro_bias_sigma] * 3]
        g.add(gtsam.PriorFactorConstantBias(B, bias, gtsam.noiseModel.Diagonal.Sigmas(bs)))
        vals = gtsam.Values()
        vals.insert(X, nav.pose())
        vals.insert(V, nav.velocity())
        vals.insert(B, bias)
        ts = gtsam.FixedLagSmootherKeyTimestampMap()
        for k in (X, V, B):
            ts.insert((k, t))
        self._smoother.update(g, vals, ts)
        self._nav, self._bias, self._t_key = nav, bias, t
        self._pim = gtsam.PreintegratedCombinedMeasurements(self._pim_params, bias)
        self._gap_open = False


def align(up_b: np.ndarray) -> np.ndarray:
    """The rotation with yaw 0 whose Rᵀ e_z is ``up_b`` (roll and pitch from gravity)."""
    roll = math.atan2(up_b[1], up_b[2])
    pitch = math.atan2(-up_b[0], math.hypot(up_b[1], up_b[2]))
    return gtsam.Rot3.RzRyRx(roll, pitch, 0.0).matrix()
