"""Inputs of the floating-base estimator: the readings pushed with ``add_*``.

The :class:`IntakeMixin` part of :class:`~.estimator.FloatingEstimator`:
validation (never raising: bad input is counted in :data:`COUNTERS`), the latest IMU,
joint and contact states, and the IMU preintegration of each reading (GTSAM's
``PreintegratedCombinedMeasurements``, seed 003's IMU model); a gap longer than
``max_imu_gap`` goes to :meth:`~.keyframes.KeyframeMixin._bridge`. Contact states come from
the contact topic (``contact_source: topic``), the foot forces (``force``) or the efforts
(``effort``, :mod:`.forces`); a stance phase's start is kept for the touchdown guard of the
leg rows (:mod:`.stance`).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ['IntakeMixin', 'COUNTERS']

COUNTERS = ('ticks', 'keyframes', 'initialisations', 'resets', 'restarts', 'used_imu',
            'used_joints', 'used_contact', 'used_force', 'dropped_nonfinite',
            'dropped_bad_length', 'dropped_unknown_foot', 'dropped_backwards',
            'ignored_contact', 'imu_gaps', 'stale_ticks', 'tick_backwards',
            'keyframes_without_joints')
"""The fixed key set of :attr:`FloatingEstimator.counters`."""


class IntakeMixin:
    """Validation and the latest state of the readings (module docstring)."""

    def _finite_vec(self, x: object, size: int) -> np.ndarray | None:
        try:
            a = np.asarray(x, float).reshape(-1)
        except (TypeError, ValueError):
            self.counters['dropped_bad_length'] += 1
            return None
        if a.size != size:
            self.counters['dropped_bad_length'] += 1
            return None
        return a

    def add_imu(self, t: float, gyro: np.ndarray, accel: np.ndarray) -> None:
        """One base IMU reading (base frame: angular velocity rad/s, specific force m/s²)."""
        w = self._finite_vec(gyro, 3)
        a = None if w is None else self._finite_vec(accel, 3)
        if w is None or a is None:
            return
        if not (math.isfinite(t) and np.isfinite(w).all() and np.isfinite(a).all()):
            self.counters['dropped_nonfinite'] += 1
            return
        if t <= self._t_imu:
            self.counters['dropped_backwards'] += 1
            return
        dt = t - self._t_imu
        if self._pim is not None and dt > self.config.max_imu_gap and not self._gap_open:
            self._bridge(dt, w, a)
            dt = 0.0
        if dt < 1.0:
            self._imu_dt = dt or self._imu_dt
        self._t_imu = t
        self._gyro, self._acc = w, a
        self.counters['used_imu'] += 1
        if self._pim is None:
            self._init_buf.append((t, w, a))
            return
        if dt > 0.0:
            self._pim.integrateMeasurement(a, w, dt)


    def add_joints(self, t: float, q: np.ndarray, qd: np.ndarray | None,
                   tau: np.ndarray | None) -> None:
        """Joint positions, velocities and efforts in :attr:`joint_names` order; NaN (or
        None) = not given: a missing position keeps its last value, a missing velocity is
        the positions' finite difference, a missing effort is estimated."""
        qa = self._finite_vec(q, self.n)
        if qa is None:
            return
        qda = np.full(self.n, np.nan) if qd is None else self._finite_vec(qd, self.n)
        if qda is None:
            return
        ta = np.full(self.n, np.nan) if tau is None else self._finite_vec(tau, self.n)
        if ta is None:
            return
        if not math.isfinite(t) or np.isinf(qa).any() or np.isinf(qda).any() \
                or np.isinf(ta).any():
            self.counters['dropped_nonfinite'] += 1
            return
        if t <= self._t_joints:
            self.counters['dropped_backwards'] += 1
            return
        known = np.isfinite(qa)
        if not known.any() or (not known.all() and not np.isfinite(self._q).all()):
            self.counters['dropped_nonfinite'] += 1
            return
        q_new = np.where(known, qa, self._q)
        dt = t - self._t_joints
        fd = (q_new - self._q) / dt if np.isfinite(self._q).all() and dt < 0.05 \
            else np.zeros(self.n)
        self._qd_given = np.isfinite(qda)
        self._qd = np.where(self._qd_given, qda, fd)
        # σ of q̇: measured, or the finite difference of two encoder readings
        self._qd_sigma = self.config.joint_velocity_sigma if self._qd_given.all() else max(
            self.config.joint_velocity_sigma, math.sqrt(2.0) * self.config.encoder_sigma / dt)
        self._q = q_new
        self._tau = ta
        self._t_joints = t
        self.counters['used_joints'] += 1

    def _foot(self, foot: str) -> int | None:
        i = self._foot_index.get(foot)
        if i is None:
            self.counters['dropped_unknown_foot'] += 1
        return i

    def _set_stance(self, i: int, t: float, stance: bool) -> None:
        if stance and not self._stance[i]:
            self._t_down[i] = t
        elif not stance:
            self._t_down[i] = math.inf
        self._stance[i] = stance
        self._contact_seen[i] = True

    def add_contact(self, t: float, foot: str, in_contact: bool) -> None:
        """A foot's contact flag (``contact_source: topic``)."""
        i = self._foot(foot)
        if i is None:
            return
        if not math.isfinite(t):
            self.counters['dropped_nonfinite'] += 1
            return
        if self.config.contact_source != 'topic':
            self.counters['ignored_contact'] += 1
            return
        self._set_stance(i, t, bool(in_contact))
        self.counters['used_contact'] += 1

    def add_foot_force(self, t: float, foot: str, force: np.ndarray) -> None:
        """The ground's force on a foot (its link frame, N): the contact state with
        ``contact_source: force`` (norm above ``contact_force_threshold``)."""
        i = self._foot(foot)
        if i is None:
            return
        f = self._finite_vec(force, 3)
        if f is None:
            return
        if not (math.isfinite(t) and np.isfinite(f).all()):
            self.counters['dropped_nonfinite'] += 1
            return
        self.counters['used_force'] += 1
        if self.config.contact_source == 'force':
            self._set_stance(
                i, t, float(np.linalg.norm(f)) > self.config.contact_force_threshold)
