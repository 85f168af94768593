"""Predicted estimates between smoother ticks (issue 24): the newest smoothed state
carried to a later grid time by the model, with no change to the graph or the state.

The :class:`PredictionMixin` part of :class:`~mbfg_ros.estimation.estimator.Estimator`.
When the node cannot afford a smoother tick at every grid time (its tick budget merges
them), it publishes :meth:`PredictionMixin.predict` at the grid times in between: the
newest smoothed x_k = [q, q̇, q̈] at t_k, stepped to t > t_k as the integrator factor
relates two keys (seed 000 Eq. 23, trapezoidal):

    q̈' = q̈(q + Δt q̇ + ½Δt² q̈, q̇ + Δt q̈, τ)     (Eq. 26, forward dynamics)
    q̇' = q̇ + ½Δt (q̈ + q̈'),   q' = q + ½Δt (q̇ + q̇') − Δt²/12 (q̈' − q̈)

(the q step with the trapezoidal rule's end correction, exact for q̈ linear over Δt as
the integrator factor's, :func:`~mbfg_ros.core.factors.stacked_trapezoidal_error`)

with τ the newest known actuator efforts (those in force at t); where an effort is
unknown or expired, the smoothed estimate's τ̂ held (a zero torque would let an arm fall
through its prediction; a held q̈ breaks the dynamics and so τ̂). τ̂ is the inverse
dynamics of the predicted state, as for a smoothed estimate. q_std, qd_std and the
covariance are the smoothed key's (the prediction's own uncertainty grows by O(Δt) over
it; Δt is a few grid periods). The readings stamped in (t_k, t] are not used: they enter
the smoother at its next tick, at their own stamps (:mod:`mbfg_ros.estimation.observations`).

Side-effect free: no counter, queue, torque state or smoother changes, so calling it any
number of times changes no later estimate (tested bit-identical). Cost: one forward and
one inverse dynamics (``bench/predicted_estimates.py`` prints it).
"""
from __future__ import annotations

import time

import numpy as np

from ..core.measurements import Estimate


class PredictionMixin:
    """The predicted estimate at a time after the newest smoothed tick (module docstring)."""

    def predict(self, t: float) -> Estimate | None:
        """The newest smoothed estimate carried to ``t`` (seed 000 Eq. 23 and 26), flagged
        ``predicted``; the newest smoothed estimate itself at ``t`` ≤ its time; None
        before the first estimate or for a non-finite ``t``. Changes no state."""
        start = time.perf_counter()
        last = self._last
        if last is None or self._x_last is None:
            return None
        try:
            t = float(t)
        except (TypeError, ValueError):
            return None
        dt = t - last.t
        if not dt > 0.0:                 # NaN or not after the newest tick
            return last if dt == dt else None
        n = self.n
        x = self._x_last
        q, qd, qdd = x[:n], x[n:2 * n], x[2 * n:]
        # the newest known efforts where in force, else the smoothed estimate's τ̂ held
        # (as floats: t − t_τ is the same IEEE difference as numpy's, without its ufuncs;
        # every effort or none in force, the common cases, take no np.where)
        timeout = self.config.sensor_timeout
        live = [t - s <= timeout for s in self._tau_t.tolist()]
        if all(live):
            tau = self._tau
        elif not any(live):
            tau = last.tau
        else:
            tau = np.where(live, self._tau, last.tau)
        try:
            qdd1 = np.asarray(self.sys.accelerations(q + dt * qd + 0.5 * dt * dt * qdd,
                                                     qd + dt * qdd, tau), dtype=float)
        except Exception:                 # noqa: BLE001 - a singular pose: hold q̈
            qdd1 = qdd
        if not np.isfinite(qdd1).all():
            qdd1 = qdd
        qd1 = qd + 0.5 * dt * (qdd + qdd1)
        q1 = q + 0.5 * dt * (qd + qd1) - dt * dt / 12.0 * (qdd1 - qdd)
        jp, jv = self.sm.joint_values(q1, qd1)
        status = 'stale' if t - self._last_reading > self.config.sensor_timeout else 'ok'
        return last.replaced(t=t, q=q1, qd=qd1, qdd=qdd1.copy() if qdd1 is qdd else qdd1,
                             tau=self.sys.torques(q1, qd1, qdd1), joint_position=jp,
                             joint_velocity=jv, tick_seconds=time.perf_counter() - start,
                             status=status, predicted=True)
