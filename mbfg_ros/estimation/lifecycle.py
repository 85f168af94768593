"""Life cycle of the estimator: start-up, each tick's step, recovery and resets.

The :class:`LifecycleMixin` part of :class:`~mbfg_ros.estimation.estimator.Estimator`.
Start-up waits for a position reading (encoder or orientation; at most
``sensor_timeout``) and puts the first key at its stamp, seeded by
:mod:`mbfg_ros.estimation.start` (seed 000 §5: Φ(q) = 0 and Φq q̇ = 0 solved for the
readings); only readings at the first tick enter the graph (those before it only seed
the state: ``dropped_before_init``). Each later tick inserts the Taylor prediction
(:mod:`mbfg_ros.estimation.graph`), gates and attaches the readings due, and updates
the smoother. A GTSAM failure restarts from the last good estimate (``failure``); a
sensor rejected for ``outlier_reset_time`` re-initialises from the readings
(``diverged``); every reset is counted under one of :data:`RESET_REASONS`.
"""
from __future__ import annotations

import math
from collections import deque

import gtsam
import numpy as np

from ..core import factors as F
from ..core.measurements import Estimate
from ..core.observation import Observation
from .graph import _X0
from .innovation_gate import _Diverged
from .intake import _Pending
from .observations import observation_factor
from .start import seed_position, seed_velocity


RESET_REASONS = ('backwards', 'clock_jump', 'tick_gap', 'failure', 'init_failure',
                 'recover_failure', 'diverged', 'error', 'manual')
"""The fixed set of reset categories (``reset:<category>`` counters); details such as
the exception go to :attr:`Estimator.last_reset_reason` for the log."""


class LifecycleMixin:
    """Initialisation, steps, recovery and resets (module docstring)."""

    def reset(self, reason: str = 'manual', detail: str = '') -> None:
        """Forget the state, buffered readings and known torques; the next tick
        re-initialises. ``reason`` is one of :data:`RESET_REASONS` (others count as
        ``manual``); ``detail`` is kept in :attr:`last_reset_reason` for the log."""
        self._count_reset(reason, detail)
        if reason != 'diverged':
            self._model_var[:] = 0.0
            self._model_t[:] = math.nan
        self._clear()

    def _reset_keep_pending(self, reason: str, detail: str = '') -> None:
        pending = self._pending
        self.reset(reason, detail)
        self._pending = pending
        self._max_stamp = max((p.t for p in pending), default=None)

    # -- state -------------------------------------------------------------------
    def _clear(self) -> None:
        self._smoother: gtsam.IncrementalFixedLagSmoother | None = None
        self._pending: list[_Pending] = []
        self._t_last: float | None = None
        self._t_init = -math.inf                             # first tick of this smoother
        self._wait_since: float | None = None      # first tick that waited for a position
        self._max_stamp: float | None = None
        self._k = -1
        self._window: deque[tuple[float, int]] = deque()   # (time, index) inside the smoother
        self._times: list[float] = []                        # same times, for bisect
        self._x_hist: deque[tuple[float, np.ndarray]] = deque()  # (time, x at its tick)
        self._theta: dict[int, np.ndarray] = {}     # key index -> its linearisation point
        self._last: Estimate | None = None
        self._x_last: np.ndarray | None = None
        self._std_last: np.ndarray | None = None
        self._var_last: np.ndarray | None = None    # σ² of _std_last, NaN as 0 (the gate's P)
        self._cov_last: np.ndarray | None = None
        self._last_reading = -math.inf
        self._since_cov = 0
        self._tau = np.zeros(self._n_act)
        self._tau_t = np.full(self._n_act, -math.inf)
        self._tau_live = np.zeros(self._n_act, dtype=bool)
        self._tau_every = np.ones(self._n_act, dtype=bool)   # _tau_live when every one is
        self._tau_every.flags.writeable = False
        self._tau_given = False                      # an effort given since the reset
        self._tau_all = not self._n_act              # _tau_live.all(), kept as a bool
        self._tau_prev = np.zeros(self._n_act)       # the previous tick's state-factor τ
        self._contact_var: np.ndarray | None = None  # the gate's contact term, held
        self._contact_k = -1                         # tick index it was computed at
        self._gate_qc: tuple | None = None          # (that term, {τ²: its Q_c(τ)}), kept
        # per gate sensor (slot): the stamp of the first reading of a rejected run, or NaN
        self._reject_since = np.full(len(self._slot_key), math.nan)

    def _count_reset(self, reason: str, detail: str = '') -> None:
        if reason not in RESET_REASONS:
            reason, detail = 'manual', f'{reason} {detail}'.strip()
        self._counters['resets'] += 1
        self._counters[f'reset:{reason}'] += 1
        self._last_reset_reason = f'{reason}: {detail}' if detail else reason

    # -- start-up ------------------------------------------------------------------
    _POSITION_KINDS = ('joint_pos', 'orient')

    def _initialise(self, t: float, start: float) -> Estimate | None:
        """The first key, at the newest position reading (encoder or orientation) up to
        ``t``, seeded from the latest reading of each kind; then one step on to ``t``
        with the readings between.

        Live, the Imu message of an instant often reaches a tick before its JointState,
        and readings can arrive a few ticks after their stamps. A start from the YAML pose
        (no position reading), or a position read at t_r < t put on the key at ``t``,
        would have the encoder's next readings rejected by the innovation gate. So the
        start waits for a position reading (at most ``sensor_timeout`` of ticks: an
        IMU-only robot starts then, from the YAML pose) and puts it on a key at its own stamp.
        """
        ready = [p for p in self._pending if p.t <= t + self._eps]
        if not ready:
            return None
        pos = [p.t for p in ready if p.ob.kind in self._POSITION_KINDS]
        if not pos:
            # waited in tick time, not by stamps: a late burst of old IMU readings must not
            # end the wait before the encoder's (another topic) arrive
            if self._wait_since is None:
                self._wait_since = t
            if t - self._wait_since < self.config.sensor_timeout:
                return None
        self._wait_since = None
        t0 = max(pos) if pos and t - max(pos) <= self.config.lag_duration else t
        est = self._initialise_at(t0, start)
        if est is None or t0 >= t - self._eps:
            return est
        return self._step(t, start)

    def _initialise_at(self, t: float, start: float) -> Estimate | None:
        limit = t + self._eps
        ready = [p for p in self._pending if p.t <= limit]
        self._pending = [p for p in self._pending if p.t > limit]
        fresh = [p for p in ready if p.t >= t - self._eps]     # at the tick: on its key
        self._counters['dropped_before_init'] += len(ready) - len(fresh)
        # the latest reading of each kind seeds the position and velocity problems
        latest: dict[tuple[str, int], Observation] = {}
        for p in sorted(ready, key=lambda p: p.t):
            latest[(p.ob.kind, p.ob.index)] = p.ob
        try:
            q = seed_position(self.sys, self.sm, [o for o in latest.values()
                                     if o.kind in ('joint_pos', 'orient')])
            qd, measured = seed_velocity(self.sys, self.sm, q, [o for o in latest.values()
                                                   if o.kind in ('joint_vel', 'gyro')])
            qdd = self.sys.accelerations(q, qd, self.applied_torque(t))
        except Exception:
            self._counters['dropped_before_init'] += len(fresh)
            return None
        cfg = self.config
        n = self.n
        x0 = np.concatenate((q, qd, qdd))
        prior = F.sigmas((n, cfg.init_sigma_q),
                         (n, cfg.encoder_rate_sigma if measured else cfg.init_sigma_qd),
                         (n, cfg.init_sigma_qdd))
        self._smoother = self._new_smoother()
        self._k = 0
        key = _X0
        graph = gtsam.NonlinearFactorGraph()
        graph.add(F.prior_factor(key, x0, prior))
        self._theta = {0: x0}
        graph.add(self._state_factor(key, t, x0))
        obs = [p.ob for p in fresh]
        if obs:
            graph.add(observation_factor(key, self.sm, obs, self._at(0)))
        values = gtsam.Values()
        values.insert(key, x0)
        try:
            x = self._update(graph, values, key, t)
        except Exception as exc:          # noqa: BLE001 - any GTSAM failure
            self.reset('init_failure', repr(exc))   # the readings it used are discarded
            return None
        self._counters['initialisations'] += 1
        self._count_used(obs)
        self._last_reading = max(p.t for p in ready)
        self._push_window(t, 0, x)
        self._t_init = t
        self._t_last = t
        return self._finish(t, key, x, start)

    # -- per tick ---------------------------------------------------------------------
    def _step(self, t: float, start: float) -> Estimate | None:
        n = self.n
        k = self._k + 1
        dt = t - self._t_last
        key = _X0 + k
        # the Taylor prediction [q + dt q̇ + ½dt² q̈, q̇ + dt q̈, q̈] (module :mod:`.graph`):
        # the same two-term sums in the same order as written out, in place in a copy
        guess = self._x_last.copy()
        G = guess.reshape(3, n)
        X = self._x_last.reshape(3, n)
        G[:2] += dt * X[1:]
        G[0] += 0.5 * dt * dt * X[2]
        # the gate's process noise and the state factor's dynamics σ, the latter spanned
        # over the periods dt covers (one evaluation per tick: with unknown efforts one
        # factorisation, ∂q̈/∂τ = M⁻¹B)
        tau = self.applied_torque(t)
        self._tick_dyn_sigma, state_sigma = self._dynamics_noise(guess, tau, dt)
        try:
            single, pairs, current, newest = self._attach(t, k, guess)
        except _Diverged as exc:        # the estimate is lost: start again from the readings
            self._pending = exc.ready + self._pending
            self._reset_keep_pending('diverged', str(exc))
            return None
        self._theta[k] = guess
        graph, used, kinds = self._graph(k, dt, guess, tau, state_sigma, single, pairs,
                                         current)
        values = gtsam.Values()
        values.insert(key, guess)
        try:
            x = self._update(graph, values, key, t)
        except Exception as exc:          # noqa: BLE001 - any GTSAM failure
            self._counters['dropped_reset'] += len(used)
            return self._recover(t, k, guess, repr(exc), start)
        self._count_used(used, kinds)
        self._last_reading = max(self._last_reading, newest)
        return self._advance(t, k, key, x, start)

    def _recover(self, t: float, k: int, guess: np.ndarray, detail: str,
                 start: float) -> Estimate | None:
        """Restart the smoother at tick ``k`` from the last good estimate."""
        self._count_reset('failure', detail)
        cfg = self.config
        n = self.n
        std = self._std_last if self._std_last is not None else np.zeros(3 * n)
        floor = np.concatenate((np.full(n, cfg.init_sigma_q), np.full(n, cfg.init_sigma_qd),
                                np.full(n, cfg.init_sigma_qdd)))
        prior = gtsam.noiseModel.Diagonal.Sigmas(np.maximum(10.0 * std, 0.1 * floor))
        key = _X0 + k
        graph = gtsam.NonlinearFactorGraph()
        graph.add(F.prior_factor(key, guess, prior))
        graph.add(self._state_factor(key, t, guess))
        values = gtsam.Values()
        values.insert(key, guess)
        self._smoother = self._new_smoother()
        self._theta = {k: guess}
        self._window.clear()
        self._times.clear()
        self._x_hist.clear()
        try:
            x = self._update(graph, values, key, t)
        except Exception as exc:          # noqa: BLE001
            self.reset('recover_failure', repr(exc))
            return None
        return self._advance(t, k, key, x, start)

    def _advance(self, t: float, k: int, key: int, x: np.ndarray, start: float) -> Estimate:
        """Tick ``k`` at ``t`` is solved: move the window on and publish ``x``."""
        self._k = k
        self._t_last = t
        self._push_window(t, k, x)
        return self._finish(t, key, x, start)
