"""Factor assembly of the estimator: the new factors of each tick and the smoother's
window.

The :class:`GraphMixin` part of :class:`~mbfg_ros.estimation.estimator.Estimator`
(graph per tick: :mod:`mbfg_ros.estimation.estimator`; seed 000 Eqs. 23-26).

Why stacked: with separate q, q̇, q̈ variables a tick costs 3 variables,
2 trapezoidal + 3 constraint/dynamics factors, i.e. 5 Python callbacks and
3x the keys ISAM2 orders and eliminates; the stacked variable gives 2-3
callbacks and one 3n-block per tick — 3-5x cheaper per tick for the same
equations (each CustomFactor callback costs tens of microseconds).

Readings between ticks: tick k takes every pending reading stamped ≤ t_k
(the ROS driver feeds those before calling tick k); later ones wait for the
next tick. A reading at t_m = t_{k−1} + s·dt, s ∈ (0, 1), is evaluated at the
state interpolated between x_{k−1} and x_k under the trapezoidal model (q̈
piecewise linear; cubic Hermite in q and q̇, exact for it and continuous at
both keys), linear in the two keys, so its factor's Jacobians are exact; all
readings of one interval share one two-key factor; when every reading of an interval
is at its tick (sensors on the tick grid) they form a one-key factor on that tick (the
same equations, half the Jacobian). A reading within 1e-9·dt of a tick is at the tick.
A reading arriving late (stamp ≤ t_{k−1}) goes to the key or pair of keys bracketing its stamp if
they are still inside the window (counted ``late``); older ones are dropped
(``dropped_too_old``). Start-up waits for a position reading (encoder or
orientation; at most ``sensor_timeout``); only readings at the first tick enter
the graph (those before it only seed the state: ``dropped_before_init``).

An unknown torque is zero (a passive mechanism) unless
``unknown_effort_sigma`` > 0: then it is a torque of that size whose effect on q̈
(∂q̈/∂τ σ at the tick's prediction) widens the state factor's dynamics σ and the
gate's, and the integrator adds q̈_k − q̈_{k−1} rows (σ = ``integrator_jerk``·dt),
because with the dynamics saying little the trapezoidal rule alone leaves q̈ free to
alternate from tick to tick (:func:`factors.stacked_trapezoidal_jerk_error`).
``jerk_process`` adds those rows with known efforts too; ``disturbance_process`` makes them
bound the change of the mismatch q̈ − q̈(q, q̇, τ) instead, each side at its tick's torques
(:func:`mbfg_ros.estimation.disturbance.stacked_trapezoidal_disturbance_error`, issue 27
item 4): a step of the known torques then moves q̈ with the model at once.

Linearisation: each new state is inserted at the Taylor prediction from the
last estimate (q + dt q̇ + ½dt² q̈, …), within O(dt²) of its final value, so
by default ISAM2 linearises every factor once (``relinearize_threshold=0``):
the benchmark shows the same RMSE with relinearisation on, while one
relinearisation re-evaluates ~30 Python factors (~3 ms) and breaks p99.
Set ``relinearize_threshold > 0`` to let ISAM2 relinearise large changes.

Factors as linear factors (issue 24): relinearisation off (the default), every
factor is linearised once, at the values the smoother keeps as the linearisation point
of its keys (each key's inserted prediction), in numpy here and handed to GTSAM as a
built-in ``JacobianFactor`` in a ``LinearContainerFactor``
(:func:`factors.linear_factor`): the same numbers ISAM2 got from a CustomFactor, but no
Python callback inside ISAM2's update. With ``relinearize_threshold > 0`` they stay
CustomFactors, which ISAM2 can relinearise. Relinearisation off, nothing but the newest
key's estimate is ever read from the solution, so ISAM2's back-substitution stops at the
cliques it re-eliminated (the new key's path to the root, where the estimate is exact):
its wildfire threshold is infinite, instead of re-solving every clique whose parent moved.

Marginalisation in batches (issue 24): the smoother marginalises the keys that left the
window :data:`MARGINALISE_EVERY` ticks at a time, not one per tick (each marginalisation
re-eliminates the Bayes tree's path to the root: a quarter of the update's cost). Its
keys are stamped at their tick's time rounded down to that batch, and its own lag is
one batch longer, so a key leaves it at most two batches after ``lag_duration`` and never
before: the window of readings (``lag_duration``, late readings, ``dropped_too_old``) is
unchanged. Everything in the smoother is linear (relinearisation off), so marginalising
later gives the same estimate up to rounding.
"""
from __future__ import annotations

import bisect
import functools
import math

from typing import Sequence

import gtsam
import numpy as np

from ..core import factors as F
from ..core.bounded import remember
from ..core.observation import Observation
from .config import EstimatorConfig, coordinate_sigmas
from .disturbance import stacked_trapezoidal_disturbance_error
from .innovation_gate import _Diverged
from .intake import _Pending
from .layout import (ReadingLayout, layout_rows, layout_rows_at_stamps, reading_slots,
                     stamp_plan)
from .observations import (interpolation_weights, interval_factor, interval_rows,
                           observation_factor, observation_sigmas, residuals)


_X0 = gtsam.symbol('x', 0)
"""The key of tick 0; tick k's is ``_X0 + k`` (``gtsam.symbol('x', k)``: the character in
the top byte, the index below it), without a call into GTSAM per key and tick."""

MARGINALISE_EVERY = 5
"""Ticks per marginalisation batch (module docstring)."""

MAX_SPAN = 10
"""A merged tick's state factor weighs its dynamics as at most this many grid periods'
(:meth:`GraphMixin._dynamics_noise`), and its jerk rows are white up to it
(:meth:`GraphMixin._step_sigmas`): the node's default ``max_merge_ticks``, the longest
merge it makes under overload."""

INTERVAL_STAMPS = 24
"""At most this many distinct stamps between two ticks take the layouts' path
(:meth:`GraphMixin._interval_layout_rows`); more go reading by reading. Enough for a merge
of ``max_merge_ticks`` (10) grid periods with encoders and IMU at two stamps each (the live
node's merged ticks: with 4, a 5-period merge went reading by reading, its tick ~1.4x
dearer; ``bench/estimator_ab.py --every 5``: 20-31 % less CPU per tick with 24)."""


def _interval_weights(span: Sequence[float], dt: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~.observations.interpolation_weights` of a few fractions ``span`` (Python
    floats), element by element: the same operations in the same order on the same doubles
    (s², s³ = s·s·s, the Hermite weights, dt·h, 1 − s), without a dozen array calls on a
    few elements (up to :data:`INTERVAL_STAMPS`; a miss only: the weights are kept per
    fractions and dt, :meth:`GraphMixin._interval_layout_rows`); (a, b) each
    (len(span), 3, 3)."""
    A, B = [], []
    for s in span:
        s2, s3 = s * s, s * s * s
        h00, h10, h01, h11 = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, 3 * s2 - 2 * s3, s3 - s2
        d10, d11 = dt * h10, dt * h11
        A.append(((h00, d10, 0.0), (0.0, h00, d10), (0.0, 0.0, 1.0 - s)))
        B.append(((h01, d11, 0.0), (0.0, h01, d11), (0.0, 0.0, s)))
    return np.array(A), np.array(B)


def _inverses(held: tuple | None, sigma: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(σ, 1/σ, 1/σ as a column, −1/σ) of ``sigma`` (the tick factor's whitening): ``held``
    (this function's previous answer) again while ``sigma`` is the same object (σ's kept
    read-only by their owner), else computed anew."""
    if held is None or held[0] is not sigma:
        inv = 1.0 / sigma
        held = (sigma, inv, inv[:, None], -inv)
    return held


class _Current:
    """The new interval's readings evaluated once (:meth:`GraphMixin._current_rows`):
    pending ``items`` and their observations ``obs`` (factor order), the factor's key
    indices and linearisation points ``xs``, residual ``e``, Jacobians ``J`` per key; for
    the gate, the model Jacobian ``H`` (rows, 3n), ``gate_e`` (the residual carried to the
    last estimate), ``tau`` (how far from it: per row, or one float when every reading
    has one stamp at the tick) and ``row_of`` (the reading of each row); ``sig`` the σ of
    each row (the factor's and the gate's); ``layout`` the readings'
    :class:`~.layout.ReadingLayout` when they were evaluated with layouts (one stamp:
    ``tau`` one float; or a few stamps between the ticks:
    :meth:`GraphMixin._interval_layout_rows`), else None; ``span`` the fraction of the
    interval of each reading on two keys (on the layouts' path their observations keep the
    intake's ``s``: the factor is built from ``e`` and ``J``, the gate from ``tau``), or
    None."""

    __slots__ = ('items', 'obs', 'keys', 'xs', 'e', 'H', 'J', 'gate_e', 'tau', 'row_of', 'sig',
                 'layout', 'span')

    def __init__(self, items: list[_Pending], obs: list[Observation], keys: tuple[int, ...],
                 xs: tuple[np.ndarray, ...], e: np.ndarray, H: np.ndarray | None,
                 J: tuple[np.ndarray, ...], gate_e: np.ndarray | None,
                 tau: np.ndarray | float | None, row_of: np.ndarray, sig: np.ndarray,
                 layout: ReadingLayout | None = None, span: list[float] | None = None) -> None:
        self.items, self.obs, self.keys, self.xs = items, obs, keys, xs
        self.e, self.H, self.J = e, H, J
        self.gate_e, self.tau, self.row_of, self.sig = gate_e, tau, row_of, sig
        self.layout, self.span = layout, span

    def at_tick(self) -> bool:
        """Every reading at the new tick (s = 1 to within 1e-9)."""
        if self.span is None:
            return all(o.s > 1.0 - 1e-9 for o in self.obs)
        return all(s > 1.0 - 1e-9 for s in self.span)

    def gate_tau(self) -> np.ndarray:
        """``tau`` per row (an array even when it is one float)."""
        tau = self.tau
        return np.full(self.row_of.size, tau) if isinstance(tau, float) else tau

    def kept(self, keep: np.ndarray) -> _Current:
        """Only the readings flagged in ``keep`` (and their rows); itself when every one is
        (the gate's verdict on a layout's readings that all passed is the layout's own
        ``passed``: no test of each flag)."""
        if (self.layout is not None and keep is self.layout.passed) or keep.all():
            return self
        rows = keep[self.row_of]
        ids = np.flatnonzero(keep).tolist()
        return _Current([self.items[i] for i in ids], [self.obs[i] for i in ids], self.keys,
                        self.xs, self.e[rows], None, tuple(Ji[rows] for Ji in self.J), None,
                        None, np.repeat(np.arange(len(ids)), np.bincount(
                            self.row_of, minlength=len(keep))[keep]), self.sig[rows], None,
                        None if self.span is None else [self.span[i] for i in ids])


class GraphMixin:
    """State, integrator and observation factors, the window (module docstring)."""

    def _integrator_sigma(self, dt: float) -> np.ndarray:
        """σ of the trapezoidal factor over a step dt.

        The trapezoidal rule (seed 000 Eq. 23) has a local truncation error of
        dt³/12 times the third derivative; a fixed tiny σ makes the smoother
        trust a wrong integrator at slow tick rates (100 Hz: 40σ per step),
        which biased the estimate by several mrad. σ grows with dt³. One σ per row
        of the factor (q rows, then q̇ rows), with the jerk of each coordinate's kind.
        The q rows keep it with their end correction
        (:func:`factors.stacked_trapezoidal_error`), whose own truncation error is
        dt⁵/720 q⁽⁵⁾ (Euler–Maclaurin's next term): a conservative bound there. (The q̇
        rows' error is dt³/12 q⁗: the same σ there takes ``integrator_jerk``'s number as a
        bound on |q⁗|.)
        """
        return np.tile(self.config.integrator_sigma + self._jerk * dt ** 3 / 12.0, 2)

    def _step_sigmas(self, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`_integrator_sigma` of ``dt``, with the jerk rows' σ after it), kept per
        dt (merged ticks and stamps off the grid repeat a few; at most 64; cleared when the
        σ's change); read-only.

        The jerk rows' σ is ``integrator_jerk``·dt for a tick at most one grid period T
        after the last. A merged tick spanning r = dt/T periods (1 < r ≤ :data:`MAX_SPAN`)
        gets ``integrator_jerk``·T·√r: the change of q̈ over r periods of a jerk white
        at one key per period (the same reasoning as the dynamics rows'
        :meth:`_dynamics_noise`), so ticks merged by the CPU budget smooth q̈ as a
        tick every period does (on the UR5 without efforts, a tick every 3 periods: joint
        rate of the smoothed estimates 1.08x → 0.99x that of every period,
        ``test/estimation/test_merged_ticks.py``'s 2 s case). Longer (more than
        :data:`MAX_SPAN` periods: a merge beyond a raised ``max_merge_ticks``, the first
        step after start-up from an older position reading, a caller ticking slower than
        ``frequency``): ``integrator_jerk``·dt/√MAX_SPAN, growing with dt as the bound
        ``integrator_jerk``·dt does and continuous with ``integrator_jerk``·T·√MAX_SPAN."""
        sig = self._step_sigma.get(dt)
        if sig is None:
            integ = self._integrator_sigma(dt)
            r = self._periods(dt)
            # (a tick MAX_SPAN periods on comes out a hair either side of it: the two
            # branches agree there)
            h = (dt if r == 1.0 else self._dt * math.sqrt(r) if r <= MAX_SPAN + 1e-6
                 else dt / math.sqrt(MAX_SPAN))
            sig = remember(self._step_sigma, dt, (integ, np.concatenate((integ, self._jerk * h))))
            for s in sig:
                s.flags.writeable = False
        return sig

    def _set_dynamics_noise(self, cfg: EstimatorConfig) -> None:
        self._dyn_sigma, self._jerk = coordinate_sigmas(self.sys, cfg)
        self._dyn_sigma2 = self._dyn_sigma ** 2
        self._jerk2 = self._jerk ** 2
        self._gate_jerk: dict[float, tuple] = {}      # the gate's jerk terms of Q(τ) per τ²
        self._gate_q: tuple | None = None             # (σ_d, {τ²: Q(τ)}) of the gates
        self._step_sigma: dict[float, tuple] = {}     # the integrator's σ's per dt
        self._gate_rows: dict[bytes, tuple] = {}      # the gate's Q(τ) constants per τ rows
        self._factor_bufs: dict[tuple, list] = {}     # the tick factor's A and b, kept
        self._state_invs: tuple | None = None         # _inverses of the state factor's σ
        self._reading_invs: tuple | None = None       # _inverses of the tick's readings' σ
        self._tick_dyn_sigma = self._dyn_sigma
        self._state_sigma = np.concatenate((np.full(2 * self.sys.m, cfg.constraint_sigma),
                                            self._dyn_sigma))
        self._state_sigma.flags.writeable = False
        self._spanned: dict[float, np.ndarray] = {}   # _state_sigma per merged tick's dt
        self._state_noise = gtsam.noiseModel.Diagonal.Sigmas(self._state_sigma)

    def _periods(self, dt: float) -> float:
        """The grid periods r = dt/T a tick ``dt`` after the last key spans: 1.0 for a tick
        within 1e-6 of one period or sooner (on the grid: the σ's as configured; dt is a
        difference of rounded stamps), else dt/T (:meth:`_dynamics_noise`,
        :meth:`_step_sigmas`)."""
        r = dt / self._dt
        return r if r > 1.0 + 1e-6 else 1.0

    def _oldest_usable_time(self) -> float:
        """Stamps older than this are not bracketed by keys still inside the smoother."""
        if not self._window:
            return -math.inf
        return self._window[0][0] - self._eps

    def _new_smoother(self) -> gtsam.IncrementalFixedLagSmoother:
        return gtsam.IncrementalFixedLagSmoother(self.config.lag_duration + self._batch,
                                                 self._params)

    def _state_factor(self, key: int, t: float, x: np.ndarray) -> gtsam.NonlinearFactor:
        """The state factor of tick ``t`` (known torques in force then; its noise widened
        for actuators of unknown effort at the state ``x`` it is inserted at, which is
        also its linearisation point)."""
        tau = self._tau_prev = self.applied_torque(t)
        # no previous key: nothing spanned (one grid period)
        return self._factor([key], self._dynamics_noise(x, tau, self._dt)[1],
                            functools.partial(F.stacked_state_error, self.sys, tau), [x])

    def _linear(self) -> bool:
        """Factors linearised here once (module docstring): relinearisation off."""
        return self.config.relinearize_threshold <= 0

    def _at(self, *ks: int) -> list[np.ndarray] | np.ndarray | None:
        """The linearisation points of key indices ``ks`` (None: CustomFactors)."""
        if not self._linear():
            return None
        return self._theta[ks[0]] if len(ks) == 1 else [self._theta[k] for k in ks]

    def _factor(self, keys: list[int], sigma: np.ndarray, fn: F.ErrorFn,
                at: list[np.ndarray]) -> gtsam.NonlinearFactor:
        """``fn`` on ``keys`` with diagonal σ ``sigma``: as a linear factor at ``at`` (no
        noise model built), or a CustomFactor."""
        if self._linear():
            return F.linear_factor(keys, sigma, fn, at)
        return F.custom_factor(keys, gtsam.noiseModel.Diagonal.Sigmas(sigma), fn)

    def _dynamics_noise(self, x: np.ndarray, tau: np.ndarray, dt: float
                        ) -> tuple[np.ndarray, np.ndarray]:
        """(the gate's σ of q̈ per coordinate, the state factor's σ) for the torques ``tau``
        on a tick ``dt`` after the previous key.

        Unknown efforts: with ``unknown_effort_sigma`` > 0, each actuator whose effort is
        not known (never given, or expired) applies an unknown torque of that size σ_u: its
        effect on q̈, ``∂q̈/∂τ_a`` at ``x`` (q̈ is affine in τ: the columns G of
        :meth:`~mbfg_ros.core.interface.MultibodySystem.acceleration_gain`, one
        factorisation for all of them), u² = σ_u²·|G|² per coordinate, adds in quadrature
        to ``dynamics_sigma`` σ_d. Without it, the zero torque assumed would pull the
        estimate of a powered arm down with gravity.

        Merged ticks: σ_d is the σ of the model error q̈ − q̈(q, q̇, τ) (seed 000 Eq. 26)
        at one key per grid period T = 1/``frequency``: white, so one key standing for
        r = dt/T periods (:meth:`_periods`; a merged tick: the live node's tick budget, or
        ``predict_between_ticks``, ticks the smoother every few periods) carries r keys'
        information, σ_d²/r, and the estimates do not depend on how the ticks were
        merged (``bench/predicted_estimates.py``: the UR5's joint rate at a tick every 3
        periods 1.14x that of every period with σ_d as at one period, 1.00x with it
        scaled). The state factor's dynamics rows are therefore √(σ_d²/r + u²): the
        unknown torque's u² is a torque, not white, and is not spanned; nor are the 2m
        constraint rows (Φ and Φq q̇, which hold at every instant). r is capped at
        :data:`MAX_SPAN` (a longer step: :meth:`_step_sigmas`). The gate keeps
        √(σ_d² + u²) (its own model, over the time it carries a prediction).

        r ≤ 1 (a tick on the grid, or sooner) keeps σ as configured: known efforts (or no
        σ_u), :attr:`_state_sigma` itself; on a merged tick the spanned σ is kept per dt
        (read-only, the same object every tick for the same dt: its inverses are kept,
        :meth:`_tick_factor`)."""
        r = self._periods(dt)
        su = self.config.unknown_effort_sigma
        if su <= 0 or not self._n_act or self._tau_all:
            if r == 1.0:
                return self._dyn_sigma, self._state_sigma
            out = self._spanned.get(dt)
            if out is None:
                out = self._state_rows(np.sqrt(self._dyn_sigma2 / min(r, MAX_SPAN)))
                out.flags.writeable = False
                remember(self._spanned, dt, out)
            return self._dyn_sigma, out
        G = self.sys.acceleration_gain(x[:self.n])[:, ~self._tau_live]
        u2 = su * su * np.einsum('ij,ij->i', G, G)
        sigma = np.sqrt(self._dyn_sigma2 + u2)
        rows = sigma if r == 1.0 else np.sqrt(self._dyn_sigma2 / min(r, MAX_SPAN) + u2)
        return sigma, self._state_rows(rows)

    def _state_rows(self, dynamics: np.ndarray) -> np.ndarray:
        """The state factor's σ with the dynamics rows ``dynamics`` (n): the 2m constraint
        rows' σ (Eqs. 24-25) before them; a tree has none (``dynamics`` itself)."""
        if not self.sys.m:
            return dynamics
        return np.concatenate((self._state_sigma[:2 * self.sys.m], dynamics))

    def _push_window(self, t: float, k: int, x: np.ndarray) -> None:
        self._window.append((t, k))
        self._times.append(t)
        self._x_hist.append((t, x))
        horizon = t - self.config.lag_duration
        while self._window and self._window[0][0] < horizon:
            self._theta.pop(self._window.popleft()[1], None)
            self._x_hist.popleft()
            self._times.pop(0)

    def _attach(self, t: float, k: int, guess: np.ndarray | None = None
                ) -> tuple[dict, dict, _Current | None, float]:
        """Readings due by tick ``k`` at ``t`` (stamped ≤ t), gated and grouped per factor.

        Returns (single, pairs, current, newest stamp): ``single[i]`` the readings at the
        time of key i; ``pairs[(i, dt)]`` those between keys i−1 and i (dt apart), with
        ``s`` filled; ``current``: with relinearisation off and the new key inserted at
        ``guess``, the readings of the new interval (t_{k−1}, t_k] already evaluated at
        their factor's linearisation point (one evaluation shared by the gate and the
        factor: :mod:`.innovation_gate`), else None and they are in ``single``/``pairs``.
        """
        single: dict[int, list[Observation]] = {}
        pairs: dict[tuple[int, float], list[Observation]] = {}
        limit = t + self._eps
        pending = self._pending
        if pending and self._max_stamp <= limit:
            # every reading queued is due (the common case: none is stamped after the tick;
            # the newest stamp queued bounds them all)
            ready = pending
            self._pending = []
        else:
            ready = [p for p in pending if p.t <= limit]
            if not ready:
                return single, pairs, None, -math.inf
            self._pending = [p for p in pending if p.t > limit] if len(ready) < len(pending) \
                else []
        eps, t_prev, times = self._eps, self._t_last, self._times
        fast = guess is not None and self._linear()
        edge = t_prev + eps
        cur = [p for p in ready if p.t > edge] if fast else []
        late = ready if not cur else [] if len(cur) == len(ready) else \
            [p for p in ready if p.t <= edge]
        current = self._current_rows(k, t - t_prev, guess, cur) if cur else None
        if not self._gate_off():
            parts = []
            layout = None
            if current is not None:
                if late:
                    parts.append((current.items, current.gate_e, current.H,
                                  current.gate_tau(), current.row_of, current.sig))
                else:
                    parts.append((current.items, current.gate_e, current.H, current.tau,
                                  current.row_of, current.sig))
                    layout = current.layout
            if late:
                parts.append((late, *self._carried_rows(late)))
            if len(parts) == 1:
                items, *rows = parts[0]
            else:
                items = current.items + late
                rows = [np.concatenate((parts[0][j], parts[1][j])) for j in (1, 2, 3)]
                rows.append(np.concatenate((parts[0][4], parts[1][4] + len(cur))))
                rows.append(np.concatenate((parts[0][5], parts[1][5])))
            try:
                keep = self._gate(items, *rows, layout=layout)
            except _Diverged as exc:
                raise _Diverged(ready, str(exc)) from None
            if current is not None:
                current = current.kept(keep[:len(cur)] if late else keep)
                keep = keep[len(cur):]
            if late:
                late = [p for p, ok in zip(late, keep.tolist()) if ok]
        if current is None or not current.items:
            newest = -math.inf
        elif isinstance(current.tau, float):            # one stamp
            newest = current.items[0].t
        else:
            newest = max([p.t for p in current.items])
        horizon = t - self.config.lag_duration          # keys at or before: marginalised now
        for p in late:
            if p.t > t_prev + eps:                      # the current interval (t_{k-1}, t_k]
                t0, t1, k1 = t_prev, t, k
            else:                                       # late: bracket it in the window
                j = bisect.bisect_left(times, p.t - eps)
                if j >= len(times) or (times[j] - p.t > eps and j == 0):
                    self._counters['dropped_before_init' if p.t < self._t_init
                                   else 'dropped_too_old'] += 1
                    continue
                t1, k1 = self._window[j]
                t0 = t1 if times[j] - p.t <= eps else times[j - 1]
                if min(t0, t1) <= horizon:
                    self._counters['dropped_too_old'] += 1
                    continue
                self._counters['late'] += 1
            newest = max(newest, p.t)
            if t0 == t1:                                # late, at a key's own time
                single.setdefault(k1, []).append(p.ob)
            else:       # inside (t0, t1], at the tick too: one factor per interval, s = 1 exact
                dt = t1 - t0
                pairs.setdefault((k1, dt), []).append(
                    p.ob._replace(s=min(1.0, (p.t - t0) / dt)))
        for key in [kk for kk, obs in pairs.items() if all(o.s > 1.0 - 1e-9 for o in obs)]:
            # every reading at the tick itself (sensors on the tick grid): the state at
            # s = 1 is x_k, so a one-key factor is the same equation at half the Jacobian
            single.setdefault(key[0], []).extend(pairs.pop(key))
        if current is not None and current.keys == (k - 1, k) and current.items \
                and current.at_tick():
            # the readings between the ticks were rejected, those at the tick remain: the
            # one-key factor at the tick, as above
            single.setdefault(k, []).extend(current.obs)
            current = None
        if current is not None and not current.items:
            current = None
        return single, pairs, current, newest

    def _current_rows(self, k: int, dt: float, guess: np.ndarray, items: list[_Pending]
                      ) -> _Current:
        """The readings ``items`` of the new interval evaluated once at their factor's
        linearisation point: on the new key alone at ``guess`` when every one is at the
        tick, else on (x_{k−1}, x_k) at the state interpolated between the keys' points
        (ordered by ``s`` as :func:`~.observations.interval_factor` orders them). The
        gate's residual carries the factor's to the estimate of t_{k−1} by its own
        Jacobian (:mod:`.innovation_gate`)."""
        n = self.n
        t_prev = self._t_last
        stamps = [p.t for p in items]
        t0 = stamps[0]
        if stamps.count(t0) == len(stamps) and (t0 - t_prev) / dt > 1.0 - 1e-9:
            # one stamp, at the tick (sensors on the tick grid, the common case): the
            # readings' layout gives their rows' constants (:mod:`.layout`)
            obs = [p.ob for p in items]
            layout = self._layout_of(obs)
            sig = layout.sigmas(obs)
            if sig.size == layout.rows:
                e, H = layout_rows(self.sm, obs, guess.reshape(3, n), layout)
                return _Current(items, obs, (k,), (guess,), e, H, (H,), e, t0 - t_prev,
                                layout.row_of, sig, layout)
        after = np.array(stamps) - t_prev
        span = np.minimum(after / dt, 1.0)                   # one array op, not per reading
        obs = [p.ob for p in items]
        if span.min() > 1.0 - 1e-9:
            sig = observation_sigmas(obs)
            e, H = residuals(self.sm, obs, guess.reshape(3, n), True)
            H = H.reshape(len(e), 3 * n)
            keys, xs, J, gate_e = (k,), (guess,), (H,), e
            fractions = None
        else:
            # in stamp order, and at one stamp in sensor order (gate slot): the readings'
            # sequence is then the same whatever order they arrived in (live, the Imu of an
            # instant often comes before its JointState), so a merged tick's layouts plan is
            # found again (:meth:`_interval_layout_rows`; in arrival order an 8-stamp interval
            # had up to 2⁸ sequences for a cache of 64, and cost as reading by reading)
            order = np.lexsort((reading_slots(obs, self._slot_base), span))
            if (order[1:] < order[:-1]).any():
                span, after = span[order], after[order]
                idx = order.tolist()
                items, obs = [items[i] for i in idx], [obs[i] for i in idx]
            fractions = span.tolist()
            x0 = self._theta[self._k]
            sig = observation_sigmas(obs)
            rows = self._interval_layout_rows(obs, fractions, dt, x0, guess, sig.size)
            if rows is not None:        # a few stamps: each one's readings by its layout
                e, H, J0, J1, layout = rows
                keys, xs, J = (k - 1, k), (x0, guess), (J0, J1)
                gate_e = e + J0 @ (self._x_last - x0)
                return _Current(items, obs, keys, xs, e, H, J, gate_e, after[layout.row_of],
                                layout.row_of, sig, layout, fractions)
            obs = [Observation(ob.kind, ob.index, ob.z, ob.sigma, s)    # not _replace: µs each
                   for ob, s in zip(obs, fractions)]
            a, b = interpolation_weights(span, dt)
            e, H, J0, J1 = interval_rows(self.sm, obs, a, b, [x0, guess])
            keys, xs, J = (k - 1, k), (x0, guess), (J0, J1)
            gate_e = e + J0 @ (self._x_last - x0)
        row_of = np.repeat(np.arange(len(obs)), [ob.sigma.size for ob in obs])
        tau = after[row_of]
        return _Current(items, obs, keys, xs, e, H, J, gate_e, tau, row_of, sig, None,
                        fractions)

    def _interval_layout_rows(self, obs: list[Observation], span: list[float], dt: float,
                              x0: np.ndarray, x1: np.ndarray, rows: int
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                         ReadingLayout] | None:
        """:func:`~.observations.interval_rows` of readings ``obs`` (ordered by their
        fractions ``span`` of the interval, ``rows`` rows in all) when they come at a few
        stamps (sensors off the tick grid: at most :data:`INTERVAL_STAMPS`): the state at
        each stamp interpolated once (seed 000 Eq. 23, cubic Hermite:
        :func:`~.observations.interpolation_weights`), each stamp's readings evaluated
        there with their :class:`~.layout.ReadingLayout` (:func:`~.layout.layout_rows`),
        the keys' Jacobians by the chain rule ``H (a ⊗ I_n)``, ``H (b ⊗ I_n)``: (e, H, J0,
        J1, the layout of all of ``obs``, for the gate's constants); None for more stamps
        or rows that do not match the layouts (the general path then)."""
        cuts = [i for i in range(1, len(span)) if span[i] != span[i - 1]]
        if len(cuts) >= INTERVAL_STAMPS:
            return None
        seq = tuple([(ob.kind, ob.index) for ob in obs])
        plan = self._interval_plans.get((seq, *cuts))
        if plan is None:
            plan = self._interval_plan(obs, seq, cuts)
        full, runs, at, weights, stamps = plan
        if full.rows != rows:
            return None
        fractions = tuple([span[i] for i in [0] + cuts])
        w = weights.get((fractions, dt))
        if w is None:           # (on the tick grid, a few fractions and dt's repeat)
            a, b = _interval_weights(fractions, dt)                     # (R, 3, 3)
            w = remember(weights, (fractions, dt), (a, b, np.concatenate((a[at], b[at]), axis=2)),
                     16)
        a, b, ab = w
        n = self.n
        Xm = a @ x0.reshape(3, n) + b @ x1.reshape(3, n)    # (R, 3, n): each stamp's state
        if len(runs) == 1:
            e, H = layout_rows(self.sm, obs, Xm[0], runs[0][2])
        elif stamps is not None:    # direct encoders: every stamp's rows in one pass
            e, H = layout_rows_at_stamps(self.sm, obs, Xm, full, stamps)
        else:
            es, Hs = [], []
            for j, (i0, i1, layout) in enumerate(runs):
                e, H = layout_rows(self.sm, obs[i0:i1], Xm[j], layout)
                es.append(e)
                Hs.append(H)
            e = np.concatenate(es)
            H = np.concatenate(Hs)
        if e.size != rows:
            return None
        # both keys' chain rule in one contraction: [a | b] per row (R, 3, 6), the same
        # three-term sums per entry as one contraction each
        J = np.einsum('rin,rij->rjn', H.reshape(rows, 3, n), ab)
        return e, H, J[:, :3].reshape(rows, 3 * n), J[:, 3:].reshape(rows, 3 * n), full

    def _interval_plan(self, obs: list[Observation], seq: tuple, cuts: list[int]
                       ) -> tuple[ReadingLayout, list[tuple[int, int, ReadingLayout]],
                                  np.ndarray, dict, tuple | None]:
        """What :meth:`_interval_layout_rows` takes from the readings' sequence ``seq`` of
        (kind, index) and where its stamps change (``cuts``) alone: the layout of all of
        ``obs``, each stamp's readings (first, end, layout), the stamp of each row, a
        dict of the Hermite weights (a, b, and [a | b] per row) per (fractions, dt) met, and
        with direct encoders at several stamps :func:`~.layout.stamp_plan`'s (else None); kept per
        (sequence, cuts), at most 64 (a tick loop repeats a few)."""
        full = self._layout_of(obs, seq)
        bounds = [0] + cuts + [len(obs)]
        runs = [(i0, i1, self._layout_of(obs[i0:i1])) for i0, i1 in zip(bounds[:-1], bounds[1:])]
        at = np.repeat(np.arange(len(runs)), [layout.rows for _, _, layout in runs])
        merged = stamp_plan(full, runs, self.n) if len(runs) > 1 else None
        return remember(self._interval_plans, (seq, *cuts), (full, runs, at, {}, merged))

    def _layout_of(self, obs: list[Observation], key: tuple | None = None) -> ReadingLayout:
        """The :class:`~.layout.ReadingLayout` of readings ``obs`` (kept per sequence of
        (kind, index), ``key`` if the caller has it; at most 64, so a changing sequence
        stays bounded)."""
        if key is None:
            key = tuple([(ob.kind, ob.index) for ob in obs])
        layout = self._reading_layouts.get(key)
        if layout is None:
            cfg = self.config
            layout = remember(self._reading_layouts, key, ReadingLayout(
                obs, self.sm, self._slot_base, self._slot_wrap, self._slot_joint,
                cfg.joint_rejection_threshold, cfg.imu_rejection_threshold))
        return layout

    def _factor_buffers(self, fn: F.ErrorFn, dt: float, sigma: np.ndarray, reading_rows: int,
                        on: tuple[int, ...]) -> list:
        """The tick factor's A matrices and b, kept and written in place per tick
        (:meth:`_tick_factor`): [A_{k−1}, A_k (column-major, rows: state, integrator,
        readings), b, the state rows' Jacobian (:func:`factors.whitened_state_rows`'s
        ``J``; None until the first tick writes it whole), the state's rows, the
        integrator's 1/σ (its b's whitening)], the integrator's whitened rows
        (Σ^-½ J_{k−1}, Σ^-½ J_k of ``fn`` over ``dt`` with σ ``sigma``: constants of dt for
        the trapezoidal rows, Eq. 23, and their jerk rows) in place and zeros elsewhere;
        kept per (integrator, dt, readings' rows and keys), at most 64, cleared when the
        σ's change. ``fn``: the trapezoidal rows or their jerk rows (an integrator whose rows
        move with the state, the disturbance rows, is stacked afresh: :meth:`_graph`).
        GTSAM copies A and b into each factor, and nothing else holds them, so the next
        tick may write them again."""
        key = (fn, dt, reading_rows, on)
        buf = self._factor_bufs.get(key)
        if buf is None:
            n = self.n
            J = fn(n, dt, [np.zeros(3 * n)] * 2, True)[1]
            inv_i = 1.0 / sigma
            state_rows = 2 * self.sys.m + n
            total = state_rows + inv_i.size + reading_rows
            mats = [np.zeros((total, Ji.shape[1]), order='F') for Ji in J]
            for Ab, Ji in zip(mats, J):
                Ab[state_rows:state_rows + inv_i.size] = (Ji.T * inv_i).T
            buf = remember(self._factor_bufs, key,
                           [*mats, np.empty(total), None, state_rows, inv_i])
        return buf

    def _tick_factor(self, prev: int, key: int, fn: F.ErrorFn, dt: float, sigma: np.ndarray,
                     theta_prev: np.ndarray, guess: np.ndarray, tau: np.ndarray,
                     state_sigma: np.ndarray, current: _Current | None
                     ) -> gtsam.LinearContainerFactor:
        """The tick's state, integrator (``fn`` with σ ``sigma``, whose whitened rows are
        constants of dt) and new-interval readings as one linear factor on (x_{k−1}, x_k):
        the rows :func:`factors.stacked_linear_factor` stacks from them (A = Σ^-½ J,
        b = −Σ^-½ e), written into buffers kept per dt and row count
        (:meth:`_factor_buffers`): the state's (:func:`factors.whitened_state_rows`: its
        Jacobian's constant blocks only when new), the integrator's b (its A is constant) and the
        readings' rows, nothing else. Only where :attr:`_kept_tick_factor` says so, and for
        an integrator whose whitened rows are constants of dt (not the disturbance rows:
        :meth:`_graph` decides)."""
        on = () if current is None else (1,) if len(current.keys) == 1 else (0, 1)
        buf = self._factor_buffers(fn, dt, sigma, current.e.size if on else 0, on)
        A0, A1, b, J_s, rs, inv_i = buf
        new = J_s is None                   # its constant blocks written on the first tick
        if new:
            J_s = buf[3] = np.empty((rs, 3 * self.n))
        # 1/σ and −1/σ kept while σ is the same object (known efforts: ``_state_sigma``,
        # or on merged ticks its spanned σ kept per dt, :meth:`_dynamics_noise`; the
        # readings: a layout's kept σ's, ReadingLayout.sigmas)
        _, inv_s, _, ninv_s = self._state_invs = _inverses(self._state_invs, state_sigma)
        F.whitened_state_rows(self.sys, tau, guess, inv_s, ninv_s, J_s, A1[:rs], b[:rs], new)
        n = self.n
        r = rs + inv_i.size
        if fn is F.stacked_trapezoidal_error:
            F.whitened_trapezoidal_b(n, dt, theta_prev, guess, inv_i, b[rs:r])
        else:
            b[rs:r] = -fn(n, dt, [theta_prev, guess], False)[0] * inv_i
        if on:
            _, _, col, ninv = self._reading_invs = _inverses(self._reading_invs, current.sig)
            np.multiply(current.e, ninv, out=b[r:])
            for pos, Ji in zip(on, current.J):
                np.multiply(Ji, col, out=(A0, A1)[pos][r:])
        return F.linear_container((prev, key), (A0, A1), b)

    def _update(self, graph: gtsam.NonlinearFactorGraph, values: gtsam.Values, key: int,
                t: float) -> np.ndarray:
        """One smoother update; the new state's estimate, or an exception if not finite."""
        batch = self._batch
        self._smoother.update(graph, values, {key: math.floor(t / batch) * batch})
        x = self._smoother.calculateEstimateVector(key)
        if not math.isfinite(x.sum()):      # a NaN or ±inf in x (or |x| near overflow)
            raise FloatingPointError('non-finite estimate')
        return x

    def _graph(self, k: int, dt: float, guess: np.ndarray, tau: np.ndarray,
               state_sigma: np.ndarray, single: dict, pairs: dict,
               current: _Current | None = None
               ) -> tuple[gtsam.NonlinearFactorGraph, list[Observation],
                          list[tuple[str, int]] | None]:
        """The new factors of tick ``k`` (``dt`` after the previous one, inserted at
        ``guess``): state, integrator, and the readings of :meth:`_attach`; with the
        readings used and, when they are one layout's sequence, its (counter, count) per
        kind (:attr:`~.layout.ReadingLayout.used`, for :meth:`_count_used`), else None.

        The new interval's readings (``current``) were evaluated once by :meth:`_attach`
        at this factor's linearisation point, for the gate too (issue 24). Relinearisation
        off, the state, integrator and those readings' rows go to GTSAM as one linear
        factor on (x_{k−1}, x_k) (the same rows as three factors, one JacobianFactor to
        build and for ISAM2 to index): written into kept buffers (:meth:`_tick_factor`,
        where :attr:`_kept_tick_factor` says so), or for the disturbance rows, whose
        Jacobians move with the state, stacked afresh
        (:func:`factors.stacked_linear_factor`)."""
        n = self.n
        key, prev = _X0 + k, _X0 + self._k
        graph = gtsam.NonlinearFactorGraph()
        theta_prev = self._theta[self._k]
        cfg = self.config
        unknown = cfg.unknown_effort_sigma > 0 and not self._tau_all
        args: tuple = (n, dt)           # the integrator's fixed parameters
        kept = self._kept_tick_factor
        if cfg.disturbance_process and not unknown:
            # known efforts: bound the change of q̈ − q̈(q, q̇, τ), not of q̈ (issue 27 item 4)
            sigma = self._step_sigmas(dt)[1]
            fn = stacked_trapezoidal_disturbance_error
            args = (self.sys, dt, self._tau_prev, tau)
            kept = False                # its rows' Jacobians move with the state
        elif cfg.jerk_process or cfg.disturbance_process or unknown:
            # torques unknown: the dynamics barely fix q̈; bound its change by the jerk
            sigma = self._step_sigmas(dt)[1]
            fn = F.stacked_trapezoidal_jerk_error
        else:
            sigma = self._integ_sigma if self._periods(dt) == 1.0 else self._step_sigmas(dt)[0]
            fn = F.stacked_trapezoidal_error
        self._tau_prev = tau
        used = []
        if kept:
            # the tick's own factors (state, integrator, the new interval's readings) as
            # ONE linear factor on (x_{k−1}, x_k), written into kept buffers; at the
            # smoother's own linearisation point of both keys (x_{k−1}'s inserted value,
            # x_k's now), which never moves (relinearisation off): no point kept
            graph.add(self._tick_factor(prev, key, fn, dt, sigma, theta_prev, guess, tau,
                                        state_sigma, current))
            if current is not None:
                if not single and not pairs and current.layout is not None:
                    # the readings used are the layout's sequence: its counts (one
                    # addition per kind, not one look-up per reading)
                    return graph, current.obs, current.layout.used
                used += current.obs
        elif self._linear():            # the disturbance rows: their Jacobians move
            e_s, J_s = F.stacked_state_error(self.sys, tau, [guess], True)
            e_i, J_i = fn(*args, [theta_prev, guess], True)
            blocks = [((1,), state_sigma, e_s, J_s), ((0, 1), sigma, e_i, J_i)]
            if current is not None:
                on = (1,) if len(current.keys) == 1 else (0, 1)
                blocks.append((on, current.sig, current.e, current.J))
                used += current.obs
            graph.add(F.stacked_linear_factor([prev, key], [theta_prev, guess], blocks))
        else:
            state = functools.partial(F.stacked_state_error, self.sys, tau)
            graph.add(self._factor([key], state_sigma, state, [guess]))
            graph.add(self._factor([prev, key], sigma, functools.partial(fn, *args),
                                   [theta_prev, guess]))
        for kk, obs in single.items():
            graph.add(observation_factor(_X0 + kk, self.sm, obs, self._at(kk)))
            used += obs
        for (kk, span), obs in pairs.items():
            graph.add(interval_factor(_X0 + kk - 1, _X0 + kk, span,
                                      self.sm, obs, self._at(kk - 1, kk)))
            used += obs
        return graph, used, None
