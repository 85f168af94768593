"""Output of the estimator: the :class:`~mbfg_ros.core.measurements.Estimate` of a tick.

The :class:`OutputMixin` part of :class:`~mbfg_ros.estimation.estimator.Estimator`: the
counters of the readings used, the covariance, the joint readings the estimate
implies and the actuator torques.

Torques: the actuator efforts consistent with the estimate solve the
equations of motion in dependent coordinates, ``B_act τ + Φqᵀ λ = M q̈ − Q``,
in least squares for (τ, λ). This equals the virtual-power result of
:func:`inverse_direct.inverse_dynamics_direct` (Rᵀ of the same equation)
without choosing independent coordinates, so it has no singularity where a
fixed z choice degenerates (e.g. the crank's x at ±90°).

Covariance: ``marginalCovariance`` of the newest key every
``covariance_every`` ticks (default 10: it costs ~0.05 ms, a tenth of a tick).
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from ..core.measurements import Estimate
from ..core.observation import Observation


_DBL_MAX = float(np.finfo(float).max)


class OutputMixin:
    """Counting the readings used, the covariance, the Estimate (module docstring)."""

    def _count_used(self, obs: Sequence[Observation],
                    kinds: list[tuple[str, int]] | None = None) -> None:
        """Count the readings used, ``obs``, per kind (``used_<kind>``); ``kinds``: their
        (counter, count) pairs when the caller has them (a layout's,
        :attr:`~.layout.ReadingLayout.used`): one addition per kind, not per reading."""
        counters = self._counters
        if kinds is not None:
            for name, c in kinds:
                counters[name] += c
            return
        key = self._used_key
        for o in obs:
            counters[key[o.kind]] += 1

    def _covariance(self, key: int) -> None:
        """σ of the newest key's marginal (published as q_std, qd_std; the gate's σ_x)."""
        try:
            cov = self._smoother.marginalCovariance(key)
            var = np.maximum(np.diag(cov), 0.0)
            self._std_last = np.sqrt(var)
            # the gate's P (diagonal): NaN as 0, +inf as the largest double (np.nan_to_num's
            # result without its ~10 µs of Python)
            self._var_last = np.where(var == var, np.minimum(var, _DBL_MAX), 0.0)
            self._cov_last = cov
        except Exception:             # noqa: BLE001 - keep the last one
            if self._std_last is None:
                self._std_last = np.full(3 * self.n, np.nan)
                self._var_last = np.zeros(3 * self.n)

    def _finish(self, t: float, key: int, x: np.ndarray, start: float) -> Estimate:
        n = self.n
        self._counters['ticks'] += 1
        cfg = self.config
        if self._std_last is None or self._since_cov + 1 >= cfg.covariance_every:
            self._covariance(key)
            self._since_cov = 0
        else:
            self._since_cov += 1
        self._x_last = x
        q, qd, qdd = x[:n], x[n:2 * n], x[2 * n:]
        status = 'ok'
        if t - self._last_reading > cfg.sensor_timeout:
            status = 'stale'
            self._counters['stale_ticks'] += 1
        jp, jv = self.sm.joint_values(q, qd)     # every encoder's reading of (q, q̇)
        # the Estimate's own arrays: one copy of x and the σ's, split (views of it)
        c = np.concatenate((x, self._std_last[:2 * n]))
        est = Estimate.of_tick(t, c[:n], c[n:2 * n], c[2 * n:3 * n], c[3 * n:4 * n], c[4 * n:],
                               self.sys.torques(q, qd, qdd), jp, jv,
                               time.perf_counter() - start, status, dict(self._counters),
                               self._cov_last)
        self._last = est
        return est
