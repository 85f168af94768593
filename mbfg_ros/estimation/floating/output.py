"""Output of the floating-base estimator: the :class:`~.estimate.FloatingEstimate` of a tick.

The :class:`OutputMixin` part of :class:`~.estimator.FloatingEstimator`:
the published covariances (ROS order: odometry-frame pose, base-frame twist) from the
newest keyframe's marginals (every 1/``covariance_rate`` s, :mod:`.keyframes`) and the
estimate's assembly: the newest keyframe's state predicted to the last IMU reading
(``PreintegratedCombinedMeasurements.predict``), the joints, the contacts and forces.
"""
from __future__ import annotations

import gtsam
import numpy as np

from .estimate import FloatingEstimate

__all__ = ['OutputMixin']


class OutputMixin:
    """Covariances and the FloatingEstimate (module docstring)."""

    def _covariances(self, R: np.ndarray) -> None:
        """The published covariances (ROS order, odometry-frame pose, base-frame twist) of
        the newest keyframe's marginals, held until the next keyframe."""
        T = np.zeros((6, 6))
        T[:3, 3:] = R                               # world position ← body δt
        T[3:, :3] = R                               # world rotation ← body δθ (GTSAM [δθ; δt])
        self._pose_cov = T @ self._cov_pose @ T.T
        tw = np.zeros((6, 6))
        tw[:3, :3] = self.config.velocity_covariance_scale * (R.T @ self._cov_v @ R)
        tw[3:, 3:] = self._cov_bg + self.config.gyro_noise ** 2 / self._imu_dt * np.eye(3)
        self._twist_cov = tw

    def _estimate(self, t: float, status: str, nav: gtsam.NavState) -> FloatingEstimate:
        rot = nav.attitude()
        qx = rot.toQuaternion()
        return FloatingEstimate(
            t=t, status=status, position=np.array(nav.position()),
            quaternion_xyzw=np.array([qx.x(), qx.y(), qx.z(), qx.w()]),
            linear_velocity=np.array(nav.bodyVelocity()),
            angular_velocity=self._gyro - self._bias.gyroscope(),
            pose_covariance=self._pose_cov.copy(), twist_covariance=self._twist_cov.copy(),
            q=self._q.copy(), qd=self._qd.copy(), tau=self._tau_hat.copy(),
            contacts=tuple(bool(s) for s in self._stance),
            contact_forces=self._forces.copy())
