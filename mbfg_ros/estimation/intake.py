"""Intake of the estimator: validation and queueing of readings and known torques.

The :class:`IntakeMixin` part of :class:`~mbfg_ros.estimation.estimator.Estimator`: a
measurement record becomes observations (seed 000 §6: encoder and IMU readings of
the stacked state), each queued with its stamp until the tick that takes it
(:mod:`mbfg_ros.estimation.graph`).

Input contract: records arrive validated (the ROS edge and
:mod:`mbfg_ros.estimation.gate` check lengths, finiteness and physical limits once);
NaN means "not given".

Two ways in (issue 23 item 3, one validation path): :meth:`Estimator.add` for direct
Python callers checks the stamp (finite, not back by more than ``backwards_tolerance``
(reset ``backwards``), not older than the window: ``dropped_too_old``), then names,
lengths and finiteness of the values; :meth:`Estimator.add_validated` takes the
records of :class:`~mbfg_ros.ros.driver.EstimatorDriver`, whose input path already
checked stamps, names and lengths and counted the drops (``input.*``): those checks
are not made, nor counted, twice.

Known applied torques (JointState ``effort`` of actuated joints) are a stamped
control input, as robot_localization's control stream: each value holds until
``sensor_timeout`` after its stamp, then the torque is taken as unknown; a reset
forgets them.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..core.bounded import remember
from ..core.measurements import ImuMeasurement, JointMeasurement
from ..core.observation import Observation


_F8 = np.dtype(np.float64)
_INF, _NINF = math.inf, -math.inf

class _Pending:
    """A validated reading waiting for its tick: stamp and observation (s filled later)."""

    __slots__ = ('t', 'ob')

    def __init__(self, t: float, ob: Observation) -> None:
        self.t, self.ob = t, ob


class IntakeMixin:
    """Readings and known torques into the queue (module docstring)."""

    def set_applied_torque(self, tau: Sequence[float], t: float) -> bool:
        """Known actuator efforts (order of ``sys.actuator_joints``) stamped ``t``.

        They hold until ``sensor_timeout`` after ``t`` (then: unknown, 0).
        """
        try:
            tau = np.asarray(tau, dtype=float).reshape(-1)
            t = float(t)
        except (TypeError, ValueError):
            tau, t = np.zeros(0), math.nan
        if tau.shape != (self._n_act,) or not np.all(np.isfinite(tau)) or not math.isfinite(t):
            self._counters['dropped_bad_torque'] += 1
            return False
        self._tau[:] = tau
        self._tau_t[:] = t
        self._tau_given = True
        return True

    def applied_torque(self, t: float) -> np.ndarray:
        """The known actuator efforts in force at ``t`` (0 where none or expired)."""
        if not self._tau_given and self._n_act and \
                self.config.sensor_timeout < math.inf:
            # no effort given since the reset (a passive mechanism): none in force, none
            # expired (every stamp −∞), zero torques
            return np.zeros(self._n_act)
        timeout = self.config.sensor_timeout
        # every effort known (the common case): the oldest is live (t − t_a falls as t_a
        # grows, rounding included: the largest difference is the oldest's)
        every = not self._n_act or t - self._tau_t.min().item() <= timeout
        if every:
            live = self._tau_every
        else:
            live = (t - self._tau_t) <= timeout
            expired = self._tau_live & ~live
            if expired.any():
                self._counters['effort_expired'] += int(expired.sum())
        # the one place both are set (after a reset): _tau_all is _tau_live.all(), kept as a
        # bool for the tick's tests
        self._tau_live, self._tau_all = live, every
        return self._tau.copy() if every else np.where(live, self._tau, 0.0)

    def known_torque(self, t: float, out: np.ndarray) -> np.ndarray:
        """The measured actuator efforts in force at ``t`` into ``out`` (order of
        ``sys.actuator_joints``), NaN where none was given or it expired; no side effects
        (the external torques of :mod:`mbfg_ros.estimation.external` read it)."""
        np.copyto(out, self._tau)
        out[(t - self._tau_t) > self.config.sensor_timeout] = np.nan
        return out

    # -- input ---------------------------------------------------------------
    def _add(self, meas) -> bool:
        """A direct caller's record: its stamp checked (finite, not back by more than
        ``backwards_tolerance``: reset; not older than the window), then queued."""
        t = float(meas.t)
        if not math.isfinite(t):
            self._counters['dropped_nonfinite'] += 1
            return False
        if self._max_stamp is not None and t < self._max_stamp - self.config.backwards_tolerance:
            self._counters['backwards'] += 1
            self.reset('backwards')
        if self._t_last is not None and t < self._oldest_usable_time():
            self._counters['dropped_before_init' if t < self._t_init
                           else 'dropped_too_old'] += 1
            return False
        return self._queue(meas, t)

    def _queue(self, meas, t: float) -> bool:
        """The observations of record ``meas`` stamped ``t`` into the queue (the part of
        the intake both ways in share: names, lengths, finiteness of the values)."""
        if isinstance(meas, JointMeasurement):
            obs = self._joint_obs(meas)
        elif isinstance(meas, ImuMeasurement):
            obs = self._imu_obs(meas)
        else:
            obs = []
        if not obs:
            self._counters['dropped_empty'] += 1
            return False
        self._max_stamp = t if self._max_stamp is None else max(self._max_stamp, t)
        for ob in obs:
            self._pending.append(_Pending(t, ob))
        over = len(self._pending) - self.config.max_pending
        if over > 0:
            self._pending.sort(key=lambda p: p.t)
            del self._pending[:over]
            self._counters['dropped_overflow'] += over
        return True

    def _values(self, arr, size: int) -> np.ndarray | None:
        """Array of ``size`` or None (empty = not given; wrong length counted); infinite
        values counted (``dropped_nonfinite``) and NaN in a new array. A float64 vector
        (what the ROS edge hands) is used as it is, checked by one ``isfinite``."""
        if arr is None:
            return None
        if type(arr) is np.ndarray and arr.ndim == 1 and arr.dtype == _F8:
            a = arr
        else:
            a = np.asarray(arr, dtype=float).reshape(-1)
        if a.size == 0:
            return None
        if a.size != size:
            self._counters['dropped_bad_length'] += 1
            return None
        if np.isfinite(a).all():          # the common case: nothing to count or replace
            return a
        bad = np.isinf(a)
        if bad.any():
            self._counters['dropped_nonfinite'] += int(bad.sum())
            a = np.where(bad, np.nan, a)
        return a

    @staticmethod
    def _sigmas(var: np.ndarray | None, k: int, default: float) -> np.ndarray:
        """σ per reading: sqrt of a finite positive variance, else ``default``
        (``k`` readings at once)."""
        if var is None:
            return np.full(k, default)
        ok = np.isfinite(var) & (var > 0)
        return np.where(ok, np.sqrt(np.where(ok, var, 1.0)), default)

    def _sigmas_kept(self, var: np.ndarray | None, k: int, default: float
                     ) -> tuple[np.ndarray, list]:
        """(:meth:`_sigmas`, its ``k`` one-element rows ``s[i:i + 1]``: each joint
        reading's σ), kept per distinct (variances, count, default): a sensor sends the
        same covariance (or none) in every message, so its σ's are computed once
        (read-only: observations share them). At most :data:`~mbfg_ros.core.bounded.KEPT`
        kept (variances come from the wire)."""
        key = (None if var is None else var.tobytes(), k, default)
        entry = self._sigma_cache.get(key)
        if entry is None:
            s = self._sigmas(var, k, default)
            s.setflags(write=False)
            entry = remember(self._sigma_cache, key, (s, [s[i:i + 1] for i in range(k)]))
        return entry

    def _joint_layout(self, names: tuple
                      ) -> tuple[list[tuple[int, int]], list[tuple[int, int]], bool]:
        """(message index, joint index) of the known names and (message index, actuator)
        of the actuated ones, for one ``names`` tuple, and whether the latter are every
        actuator in order (message index = actuator: the efforts copy as one array); unknown
        names counted once each (``dropped_unknown_joint``). Kept per names tuple (a driver
        sends the same one every message; at most 64 kept, so a stream of malformed ones
        stays bounded)."""
        layout = self._layouts.get(names)
        if layout is not None:
            return layout
        known, act = [], []
        for i, nm in enumerate(names):
            j = self._joint_index.get(nm)
            if j is None:
                if nm not in self._unknown:
                    self._unknown.add(nm)
                    self._counters['dropped_unknown_joint'] += 1
                continue
            known.append((i, j))
            a = self._act_of_joint.get(nm)
            if a is not None:
                act.append((i, a))
        every = len(act) == self._n_act == len(names) and all(i == a for i, a in act)
        return remember(self._layouts, names, (known, act, every))

    def _listed(self, arr, size: int) -> tuple[np.ndarray | None, list | None]:
        """:meth:`_values` and the values as a list (None, None: not given). A few joints'
        values are checked faster as Python floats than by numpy calls of ~0.5 µs each
        (issue 24: the intake per reading); the array is a new one only where an infinite
        value became NaN, as in :meth:`_values`."""
        if arr is None:
            return None, None
        if type(arr) is np.ndarray and arr.ndim == 1 and arr.dtype == _F8:
            if arr.size != size:
                a = self._values(arr, size)
                return (a, a.tolist()) if a is not None else (None, None)
            values = arr.tolist()
            if _INF in values or _NINF in values:
                a = self._values(arr, size)          # counts them, NaN in their place
                return a, a.tolist()
            return arr, values
        a = self._values(arr, size)
        return (a, a.tolist()) if a is not None else (None, None)

    def _joint_obs(self, m: JointMeasurement) -> list[Observation]:
        cfg = self.config
        names = tuple(m.names) if m.names is not None else ()
        k = len(names)
        pos, p_list = self._listed(m.position, k)
        vel, v_list = self._listed(m.velocity, k)
        eff, e_list = self._listed(m.effort, k)
        pvar = self._values(m.position_var, k)
        vvar = self._values(m.velocity_var, k)
        known, act, every = self._joint_layout(names)
        # finiteness of every reading (x == x: not NaN; infinite ones are NaN by now), σ's
        # kept per variances; the values copied once (a caller may reuse its arrays), each
        # reading a view of the copy
        p_ok = [x == x for x in p_list] if p_list is not None else None
        v_ok = [x == x for x in v_list] if v_list is not None else None
        sp = self._sigmas_kept(pvar, k, cfg.encoder_sigma)[1] \
            if p_ok is not None and any(p_ok) else None
        if v_ok is None or not any(v_ok):               # angles only (the common case)
            if sp is None:
                out = []
            else:
                z = pos.copy()
                out = [Observation('joint_pos', j, z[i:i + 1], sp[i])
                       for i, j in known if p_ok[i]]
        else:
            sv = self._sigmas_kept(vvar, k, cfg.encoder_rate_sigma)[1]
            zp = pos.copy() if sp is not None else None
            zv = vel.copy()
            out = []
            for i, j in known:
                if sp is not None and p_ok[i]:
                    out.append(Observation('joint_pos', j, zp[i:i + 1], sp[i]))
                if v_ok[i]:
                    out.append(Observation('joint_vel', j, zv[i:i + 1], sv[i]))
        if e_list is not None and act:
            t, tau, tau_t = m.t, self._tau, self._tau_t
            e_ok = [x == x for x in e_list]
            if every and all(e_ok):          # an arm's every effort (the common case)
                tau[:] = eff
                tau_t[:] = t
                used = len(e_ok)
            else:
                used = 0
                for i, a in act:
                    if e_ok[i]:
                        tau[a] = e_list[i]
                        tau_t[a] = t
                        used += 1
            if used:
                self._tau_given = True
                self._counters['used_effort'] += used
        return out

    def _imu_obs(self, m: ImuMeasurement) -> list[Observation]:
        cfg = self.config
        k = self._imu_index.get(m.sensor)
        if k is None:
            if ('imu:' + str(m.sensor)) not in self._unknown:
                self._unknown.add('imu:' + str(m.sensor))
                self._counters['dropped_unknown_sensor'] += 1
            return []
        g = self._listed(m.gyro, 3)[0]
        a = self._listed(m.accel, 3)[0]
        quat = self._listed(m.orientation, 4)[0]
        kept, var3 = self._sigmas_kept, self._var3
        return self.sm.imu_observations(
            k, g, a, quat, kept(var3(m.gyro_var), 3, cfg.gyro_sigma)[0],
            kept(var3(m.accel_var), 3, cfg.accel_sigma)[0],
            kept(var3(m.orientation_var), 3, cfg.orientation_sigma)[0])

    @staticmethod
    def _var3(var) -> np.ndarray | None:
        """A variance 3-vector, or None (not given, or of another length: the defaults)."""
        if var is None:
            return None
        v = np.asarray(var, float).reshape(-1)
        return v if v.size == 3 else None

    @staticmethod
    def _var(var, i: int) -> float | None:
        """Component ``i`` of a variance vector, or None (not given, or of another length)."""
        if var is None:
            return None
        v = np.asarray(var, float).reshape(-1)
        return float(v[i]) if v.size == 3 else None
