"""The estimator's innovation gate (issue 25): a reading far from the prediction is
rejected.

The :class:`GateMixin` part of :class:`~mbfg_ros.estimation.estimator.Estimator`; the
physical limits are checked before, once, by :class:`mbfg_ros.estimation.gate.LimitGate`.

Each reading passes an innovation gate
(robot_localization's ``*_rejection_threshold``): its Mahalanobis distance to
the prediction from the last estimate, ``|z − h(x̂(t))| / sqrt(S)``, above
``joint_rejection_threshold`` (encoders) or ``imu_rejection_threshold`` is rejected
(``rejected_outlier``). The innovation variance (issue 25) is the smoother's own
prediction, ``S = σ² + H P H ᵀ + H Q(τ) Hᵀ + s_m``: P the marginal covariance of the
estimate it is carried from (no cap tied to the sensor's σ), Q(τ) the process noise of
``dynamics_sigma`` and ``integrator_jerk`` over the τ it is carried, and ``s_m`` the
model error the innovations themselves show: a per-sensor running mean (time constant
``outlier_reset_time``/2) of the innovation power beyond the rest of S, each reading's
contribution clipped to 4 S so one outlier moves it little. A model a few percent off
facing a precise encoder leaves the estimate a steady few σ from the readings; ``s_m``
takes that in and the readings keep being used, where a fixed gate rejected them, let
the estimate run on the model alone, and reset again and again.
With the motor efforts measured (issue 27 item 4), the dynamics' σ in Q(τ) gains the
external torques' share, so a contact is a disturbance, not an outlier: the mismatch
``d = q̈ − q̈(q, q̇, τ_m)`` the last estimate shows (``M d = B τ_ext``: a contact under way,
which may stop or grow by as much again) and the effect ``∂q̈/∂τ σ_c`` of a contact not yet
seen, ``σ_c`` = ``contact_effort_fraction`` of each actuated joint's effort limit
(:func:`contact_sigmas`). Without it, the model with the measured efforts predicts none
of a push, the encoders' first readings of it are 10-80 σ off and a contact reset the
estimate (``diverged``) unless the gate was opened for every reading. The room for a
contact not yet seen widens the encoders' gate only: there a contact's first sign is a
small deviation (½ dt² ∂q̈/∂τ σ_c per tick, ~1e-4 rad on a UR5 at 500 Hz), far below an
encoder glitch, while an accelerometer sees the whole q̈ step of a contact at once, so room
for one there would be room for any spike of that size; an IMU's gate widens by the
contact the estimate shows (d²), once the encoders have shown it.
A sensor whose readings are all rejected for ``outlier_reset_time`` (the gate widened
by ``s_m`` meanwhile, up to ~55x in σ) means the estimate, not the sensor, is lost:
the smoother re-initialises from the newest readings (reset ``diverged``, the sensor
and its distance in :attr:`Estimator.last_reset_reason`), so a poisoned estimate never
latches.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from ..core.angles import wrap_angle
from ..core.interface import MultibodySystem
from ..core.observation import Observation
from .intake import _Pending
from .observations import residuals


def contact_sigmas(sys: MultibodySystem, fraction: float) -> np.ndarray:
    """σ_c per actuator (N·m or N): ``fraction`` of the effort limit of the joint it
    drives; 0 for an actuator without a joint or without a finite effort limit."""
    limits = {j.name: j.limits for j in sys.description.joints}
    out = np.zeros(len(sys.actuator_joints))
    for a, name in enumerate(sys.actuator_joints):
        lim = limits.get(name) if name is not None else None
        effort = abs(float(lim.effort)) if lim is not None else math.inf
        if fraction > 0 and math.isfinite(effort):
            out[a] = fraction * effort
    return out


class _Diverged(Exception):
    """Every reading of a sensor was rejected for ``outlier_reset_time``."""

    def __init__(self, ready: list, detail: str = '') -> None:
        super().__init__(detail or 'readings rejected for outlier_reset_time')
        self.ready = ready


class GateMixin:
    """The innovation gate and its model-error term (module docstring)."""

    def _gate(self, ready: list[_Pending]) -> list[_Pending]:
        """The readings that pass the innovation gate (module docstring).

        The prediction at a reading's stamp is the estimate of the newest tick at
        or before it (the first in the window for older ones) carried forward by
        τ (q + τq̇ + ½τ²q̈, q̇ + τq̈), through the sensor model linearised once per
        sensor and base tick. Its variance adds the dynamics' σ on the new q̈,
        the change of q̈ over τ (``integrator_jerk`` · τ), and their effect on q̇
        and q. A run of rejections of one sensor longer than
        ``outlier_reset_time`` raises :class:`_Diverged` with the readings put back.
        """
        cfg = self.config
        if self._x_last is None or not ready or (cfg.joint_rejection_threshold <= 0
                                                 and cfg.imu_rejection_threshold <= 0):
            return ready
        n = self.n
        std = np.nan_to_num(self._std_last, nan=0.0) if self._std_last is not None \
            else np.zeros(3 * n)
        hist, times = self._x_hist, self._times
        last = len(hist) - 1
        # readings per (sensor, base tick): all encoders are one sensor, each IMU another;
        # one model evaluation each, then the gate's arithmetic on all rows at once
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(ready):
            joint = p.ob.kind in ('joint_pos', 'joint_vel')
            if (cfg.joint_rejection_threshold if joint else cfg.imu_rejection_threshold) <= 0:
                continue
            base = last if p.t >= self._t_last else \
                max(0, bisect.bisect_right(times, p.t + self._eps) - 1)
            groups.setdefault(('j' if joint else p.ob.index, base), []).append(i)
        d2 = np.zeros(len(ready))
        power, base_var = np.zeros(len(ready)), np.ones(len(ready))
        shown, unseen = self._external_var()
        sd2, sj2 = self._tick_dyn_sigma ** 2 + shown, self._jerk ** 2
        sd2_enc = sd2 + unseen          # a contact not yet seen: encoders only (docstring)
        var_s = std * std
        for (sensor, base), ids in groups.items():
            t_b, x = hist[base]
            obs = [ready[i].ob for i in ids]
            E, H = self._linear_model(obs, x)                 # (R,), (R, 3n)
            sizes = [np.size(ob.sigma) for ob in obs]
            row_of = np.repeat(np.arange(len(ids)), sizes)   # reading of each row
            sig = np.concatenate([np.atleast_1d(ob.sigma) for ob in obs])
            tau = (np.array([ready[i].t for i in ids]) - t_b)[row_of]
            a = np.abs(tau)
            qd, qdd = x[n:2 * n], x[2 * n:]
            Hq, Hqd = H[:, :n], H[:, n:2 * n]
            c1, c2 = Hq @ qd + Hqd @ qdd, Hq @ qdd
            HH = (H * H)
            var_x = HH @ var_s
            HH = HH.reshape(len(E), 3, n)
            s2d, s2j = HH @ (sd2_enc if sensor == 'j' else sd2), HH @ sj2   # (R, 3): q, q̇, q̈
            # the residual z − h carried to each stamp (E = h(x) ⊖ z at the base tick)
            r = -(E + tau * c1 + 0.5 * tau * tau * c2)
            wrap = np.array([self.sm.angle_residual(ob.kind, ob.index)
                             for ob in obs])[row_of]
            if wrap.any():
                r = np.where(wrap, wrap_angle(r), r)
            # process noise: the new q̈ is only known to the dynamics' σ and changes by
            # up to integrator_jerk·τ; both drive q̇ and q over τ
            var_p = (0.25 * a ** 4 * s2d[:, 0] + a ** 6 / 36.0 * s2j[:, 0]
                     + a * a * s2d[:, 1] + 0.25 * a ** 4 * s2j[:, 1]
                     + s2d[:, 2] + a * a * s2j[:, 2])
            s2r = sig * sig
            s0 = s2r + var_x + var_p                        # the smoother's prediction
            sm = np.array([self._model_var.get((ob.kind, ob.index), (0.0,))[0]
                           for ob in obs])[row_of]
            d2[ids] = np.bincount(row_of, r * r / (s0 + sm), minlength=len(ids))
            cnt = np.bincount(row_of, minlength=len(ids))
            power[ids] = np.bincount(row_of, r * r, minlength=len(ids)) / cnt
            base_var[ids] = np.bincount(row_of, s0, minlength=len(ids)) / cnt
        out = []
        diverged = ''
        tau_m = 0.5 * cfg.outlier_reset_time
        for i, p in enumerate(ready):
            key = (p.ob.kind, p.ob.index)
            joint = key[0] in ('joint_pos', 'joint_vel')
            thr = cfg.joint_rejection_threshold if joint else cfg.imu_rejection_threshold
            if thr <= 0:
                out.append(p)
                continue
            # the model error the innovations show (module docstring): clipped, so an
            # outlier moves it by at most 4·α·S
            entry = self._model_var.setdefault(key, [0.0, p.t])
            alpha = min(1.0, max(p.t - entry[1], 0.0) / tau_m)
            S = base_var[i] + entry[0]
            entry[0] = (1.0 - alpha) * entry[0] + alpha * max(
                0.0, min(power[i], 4.0 * S) - base_var[i])
            entry[1] = max(entry[1], p.t)
            if d2[i] <= thr * thr:
                out.append(p)
                self._reject_since.pop(key, None)
                continue
            self._counters['rejected_outlier'] += 1
            since = self._reject_since.setdefault(key, p.t)
            if p.t - since >= cfg.outlier_reset_time:
                diverged = (f'{key[0]} {key[1]}: every reading rejected for '
                            f'{p.t - since:.3f} s, {math.sqrt(d2[i]):.3g} σ off')
        if diverged:
            raise _Diverged(ready, diverged)
        return out

    def _external_var(self) -> tuple[np.ndarray | float, np.ndarray | float]:
        """The external torques' share of the gate's q̈ variance (module docstring): with
        every effort known, ``(d², Σ_a (∂q̈/∂τ_a σ_c,a)²)`` at the last estimate (the contact
        the estimate shows, one not yet seen), else ``(0, 0)``.

        q̈ is linear in τ, so ``∂q̈/∂τ_a σ_c,a`` is one forward dynamics per actuator; it
        moves with the pose only, and is refreshed every ``covariance_every`` ticks (held
        in between, as the estimate's covariance). ``d``: one forward dynamics per call.
        """
        if not self._n_act or not self._tau_live.all():
            return 0.0, 0.0
        n, x, tau = self.n, self._x_last, self._tau_prev
        q, qd = x[:n], x[n:2 * n]
        base = self.sys.accelerations(q, qd, tau)
        d = x[2 * n:] - base
        sc = self._contact_sigma
        if not sc.any():
            return d * d, 0.0
        if self._contact_var is None or self._k - self._contact_k >= self.config.covariance_every:
            var = np.zeros(n)
            pushed = tau.copy()
            for a in np.flatnonzero(sc):
                pushed[a] += sc[a]
                var += (self.sys.accelerations(q, qd, pushed) - base) ** 2
                pushed[a] = tau[a]
            self._contact_var, self._contact_k = var, self._k
        return d * d, self._contact_var

    def _linear_model(self, obs: list[Observation], x: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(E (rows,), H (rows, 3n)): the observation factors' own residuals ``h(x) ⊖ z``
        (wrapped angles, SO(3) orientation) and Jacobians of readings ``obs`` at the
        stacked state ``x``, stacked in order."""
        n = self.n
        state = (x[:n], x[n:2 * n], x[2 * n:])
        e, H = residuals(self.sm, obs, [state] * len(obs), True)
        return e, H.reshape(len(e), 3 * n)
