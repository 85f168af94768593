"""Keyframes of the floating-base estimator: the fixed-lag smoother's IMU chain.

The :class:`KeyframeMixin` part of :class:`~.estimator.FloatingEstimator`
(graph in :mod:`.estimator`'s docstring): keyframe k every 1/``keyframe_rate`` s holds
X_k (Pose3), V_k (world velocity), B_k (IMU bias), tied to the previous one by a
``CombinedImuFactor`` (IMU preintegration and bias random walks, C++), with the leg rows
of the keyframes old enough (:mod:`.stance`, seed 002 §VII) in the same ISAM2 update
(GTSAM's ``IncrementalFixedLagSmoother``, QR). A non-finite or indeterminate solve restarts
the smoother from the prediction (:mod:`.startup`).

IMU gaps longer than ``max_imu_gap`` are bridged (:meth:`KeyframeMixin._bridge`): a keyframe
at each end, one loose IMU factor across (``gap_accel_sigma``/``gap_gyro_sigma``), loose leg
rows of the keyframe after it at once. The base's angular and the joints' accelerations for
the contact forces (seed 003 §3, :mod:`.forces`) are finite differences between keyframes.
"""
from __future__ import annotations

import gtsam
import numpy as np

__all__ = ['KeyframeMixin', 'sym', 'GAP_STEPS', 'GAP_LOOSE']

GAP_STEPS = 20
"""Most integration steps of an IMU gap's bridge (:meth:`KeyframeMixin._bridge`)."""
GAP_LOOSE = 3.0
"""σ factor of the immediate velocity rows of the keyframe after an IMU gap (measured on
the 3 s trot with 40-200 ms holes: better than 1 at once or the usual rows only)."""


def sym(c: str, k: int) -> int:
    """The GTSAM key ``c<k>`` (``x``: pose, ``v``: velocity, ``b``: bias of keyframe k)."""
    return gtsam.symbol(c, k)


class KeyframeMixin:
    """The smoother's keyframes, IMU factors and gaps (module docstring)."""

    def _bridge(self, dt: float, w: np.ndarray, a: np.ndarray) -> None:
        """An IMU gap of ``dt`` > ``max_imu_gap`` (readings lost): integrated as measured,
        one held reading would be wrong by ~½ ȧ dt² and its factor would claim the
        sensor's accuracy (the error then goes into the bias and takes seconds to leave).
        Instead a keyframe closes the chain at the last reading before the gap (if it has
        IMU data since the last keyframe), and the gap is one reading (the mean of its two
        ends) in a preintegration whose noise is ``gap_accel_sigma``/``gap_gyro_sigma``
        over the gap: the keyframe after it (made at the next :meth:`tick`) gets its
        velocity from the stance legs at once (σ × ``GAP_LOOSE``, then the usual rows) and
        its attitude from the gyro, the bias kept."""
        c = self.config
        self.counters['imu_gaps'] += 1
        assert self._pim is not None
        if self._pim.deltaTij() > 0 and np.isfinite(self._q).all():
            self._keyframe()
        p = gtsam.PreintegrationCombinedParams.MakeSharedU(self._g)
        p.setGyroscopeCovariance((c.gyro_noise ** 2 / dt + c.gap_gyro_sigma ** 2) * dt
                                 * np.eye(3))
        p.setAccelerometerCovariance((c.accel_noise ** 2 / dt + c.gap_accel_sigma ** 2) * dt
                                     * np.eye(3))
        p.setIntegrationCovariance((1e-8 + (0.5 * c.gap_accel_sigma * dt * dt) ** 2 / dt)
                                   * np.eye(3))
        p.setBiasAccCovariance(c.accel_bias_walk ** 2 * np.eye(3))
        p.setBiasOmegaCovariance(c.gyro_bias_walk ** 2 * np.eye(3))
        self._pim = gtsam.PreintegratedCombinedMeasurements(p, self._bias)
        a_mid, w_mid = 0.5 * (a + self._acc), 0.5 * (w + self._gyro)
        steps = max(1, min(GAP_STEPS, round(dt / self._imu_dt)))
        for _ in range(steps):           # white noise over the gap, not one held step
            self._pim.integrateMeasurement(a_mid, w_mid, dt / steps)
        self._gap_open = True


    def _keyframe(self) -> None:
        pim = self._pim
        assert pim is not None and self._smoother is not None and self._nav is not None
        k0, k1 = self._key, self._key + 1
        X0, V0, B0 = sym('x', k0), sym('v', k0), sym('b', k0)
        X1, V1, B1 = sym('x', k1), sym('v', k1), sym('b', k1)
        pred = pim.predict(self._nav, self._bias)
        w = self._gyro - self._bias.gyroscope()
        g = gtsam.NonlinearFactorGraph()
        g.add(gtsam.CombinedImuFactor(X0, V0, X1, V1, B0, B1, pim))
        t = self._t_imu
        kf = self._record(k1, t, pred, w)
        if t - self._t_joints > self.config.stale_after:
            self.counters['keyframes_without_joints'] += 1  # old joint states: IMU only
        else:
            if self._gap_open:
                # across a gap the legs give the velocity at once: every foot in stance now
                # (one that touched down in the gap has had it to settle), σ × GAP_LOOSE
                # (one may be lifting off); the usual rows follow after liftoff_guard
                legs = self._leg_factor(kf, t, 0.0, GAP_LOOSE)
                if legs is not None:
                    g.add(legs)
            self._pending.append(kf)
        guard = self.config.liftoff_guard - 1e-9
        while self._pending and t - self._pending[0].t >= guard:
            legs = self._leg_factor(self._pending.popleft(), t)
            if legs is not None:
                g.add(legs)
        vals = gtsam.Values()
        vals.insert(X1, pred.pose())
        vals.insert(V1, pred.velocity())
        vals.insert(B1, self._bias)
        ts = gtsam.FixedLagSmootherKeyTimestampMap()
        for key in (X1, V1, B1):
            ts.insert((key, t))
        try:
            self._smoother.update(g, vals, ts)
            pose = self._smoother.calculateEstimatePose3(X1)
            vel = self._smoother.calculateEstimatePoint3(V1)
            bias = self._smoother.calculateEstimateConstantBias(B1)
            if not (np.isfinite(pose.matrix()).all() and np.isfinite(vel).all()
                    and np.isfinite(bias.vector()).all()):
                raise RuntimeError('non-finite estimate')
            if t - self._t_cov >= self._cov_period:
                self._t_cov = t
                self._cov_pose = self._smoother.marginalCovariance(X1)
                self._cov_v = self._smoother.marginalCovariance(V1)
                self._cov_bg = self._smoother.marginalCovariance(B1)[3:, 3:]
                self._covariances(pose.rotation().matrix())
        except RuntimeError:
            # an indeterminate system or a diverged estimate (should not happen with the
            # priors): start again from the prediction (or the last keyframe) rather than
            # stop publishing
            self.counters['restarts'] += 1
            self._pending.clear()
            ok = np.isfinite(pred.pose().matrix()).all() and np.isfinite(pred.velocity()).all()
            self._start(pred if ok else self._nav, self._bias, t,
                        self._cov_pose + np.eye(6) * 1e-6, 0.05)
            return
        self._key = k1
        kf.pose, kf.velocity = pose, vel            # later leg rows linearise here
        self._nav = gtsam.NavState(pose, vel)
        self._bias = bias
        dt_key = t - self._t_key
        self._t_key = t
        if self._gap_open:                  # the gap is bridged: the sensor's noise again
            self._pim = gtsam.PreintegratedCombinedMeasurements(self._pim_params, bias)
            self._gap_open = False
        else:
            pim.resetIntegrationAndSetBias(bias)
        self.counters['keyframes'] += 1
        self._accelerations(w, dt_key)

    def _accelerations(self, w: np.ndarray, dt: float) -> None:
        """ω̇ and q̈ by finite differences over the last keyframe interval ``dt`` (held
        until the next keyframe: over 1 ms the gyro's noise would be ~10 rad/s²)."""
        if self._prev_w is not None:
            np.divide(w - self._prev_w, dt, out=self._vdot[3:6])
            np.divide(self._qd - self._prev_qd, dt, out=self._vdot[6:])
        self._prev_w, self._prev_qd = w.copy(), self._qd.copy()
