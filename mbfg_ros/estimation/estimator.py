"""Online state estimation: a fixed-lag smoother over the mechanism's factor graph.

No ROS imports: the node, the bag replay and the benchmarks all drive the
same :class:`Estimator` (``add`` measurements, ``tick`` at the output rate).

Graph per tick k at time t_k (seed 000 §5-6), ONE stacked variable
x_k = [q, q̇, q̈] (key ``x<k>``):

* state factor (:func:`factors.stacked_state_error`): Φ(q) = 0, Φq q̇ = 0
  (Eqs. 24-25, tight) and q̈(q, q̇, τ) − q̈ (Eq. 26) with the known applied
  torques τ; its σ (``dynamics_sigma``) covers the unmodelled forces;
* integrator (:func:`factors.stacked_trapezoidal_error`, Eq. 23) to x_{k−1};
* one observation factor on x_k holding the readings stamped at t_k, and one
  on (x_{k−1}, x_k) holding those stamped inside (t_{k−1}, t_k), evaluated at
  the state interpolated between the two keys (:mod:`mbfg_ros.estimation.observations`).

Planar or spatial: ``q`` is the planar mechanism's natural coordinates (seed 000) or a
URDF robot's joint coordinates of its spanning tree (seed 002/004, with loop-closure
rows where it has loops). The estimator only talks to the formulation seam
(:class:`~mbfg_ros.core.interface.MultibodySystem`: ``state_terms``, ``sensor_model``,
``torques``, ``actuator_joints``); each formulation's sensor model owns its residuals
(a planar IMU reads z rate, in-plane force and yaw; a spatial one 3 axes and SO(3)).

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

Torques: the actuator efforts consistent with the estimate solve the
equations of motion in dependent coordinates, ``B_act τ + Φqᵀ λ = M q̈ − Q``,
in least squares for (τ, λ). This equals the virtual-power result of
:func:`inverse_direct.inverse_dynamics_direct` (Rᵀ of the same equation)
without choosing independent coordinates, so it has no singularity where a
fixed z choice degenerates (e.g. the crank's x at ±90°).

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

Covariance: ``marginalCovariance`` of the newest key every
``covariance_every`` ticks (default 10: it costs ~0.05 ms, a tenth of a tick).

Input contract: records arrive validated (the ROS edge and
:mod:`mbfg_ros.estimation.gate` check lengths, finiteness and physical limits once);
NaN means "not given". Here each reading passes an innovation gate
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
A sensor whose readings are all rejected for ``outlier_reset_time`` (the gate widened
by ``s_m`` meanwhile, up to ~55x in σ) means the estimate, not the sensor, is lost:
the smoother re-initialises from the newest readings (reset ``diverged``, the sensor
and its distance in :attr:`Estimator.last_reset_reason`), so a poisoned estimate never
latches.

Known applied torques (JointState ``effort`` of actuated joints) are a stamped
control input, as robot_localization's control stream: each value holds until
``sensor_timeout`` after its stamp, then the torque is taken as unknown; a reset
forgets them. An unknown torque is zero (a passive mechanism) unless
``unknown_effort_sigma`` > 0: then it is a torque of that size whose effect on q̈
(∂q̈/∂τ σ at the tick's prediction) widens the state factor's dynamics σ and the
gate's, and the integrator adds q̈_k − q̈_{k−1} rows (σ = ``integrator_jerk``·dt),
because with the dynamics saying little the trapezoidal rule alone leaves q̈ free to
alternate from tick to tick (:func:`factors.stacked_trapezoidal_jerk_error`).
``jerk_process`` adds those rows with known efforts too; ``disturbance_process`` makes them
bound the change of the mismatch q̈ − q̈(q, q̇, τ) instead, each side at its tick's torques
(:func:`mbfg_ros.estimation.disturbance.stacked_trapezoidal_disturbance_error`, issue 27
item 4): a step of the known torques then moves q̈ with the model at once.

Robustness (never raises from ``add``/``tick``): see :class:`Estimator`.

Modules: the parameters and per-coordinate noise are in :mod:`mbfg_ros.estimation.config`,
the start-up state from the first readings in :mod:`mbfg_ros.estimation.start`.
"""
from __future__ import annotations

import bisect
import functools
import math
import time
from collections import deque
from dataclasses import replace
from typing import Sequence

import gtsam
import numpy as np

from ..core import factors as F
from ..core.angles import wrap_angle
from .config import LIVE_FIELDS, EstimatorConfig, coordinate_sigmas
from .disturbance import stacked_trapezoidal_disturbance_error
from .start import seed_position, seed_velocity
from ..core.interface import MultibodySystem as System
from ..core.measurements import Estimate, ImuMeasurement, JointMeasurement
from ..core.observation import Observation
from .observations import interval_factor, observation_factor, residuals

__all__ = ['EstimatorConfig', 'Estimator', 'LIVE_FIELDS', 'coordinate_sigmas']


_KINDS = ('joint_pos', 'joint_vel', 'gyro', 'accel', 'orient')
RESET_REASONS = ('backwards', 'clock_jump', 'tick_gap', 'failure', 'init_failure',
                 'recover_failure', 'diverged', 'error', 'manual')
"""The fixed set of reset categories (``reset:<category>`` counters); details such as
the exception go to :attr:`Estimator.last_reset_reason` for the log."""

MARGINALISE_EVERY = 5
"""Ticks per marginalisation batch (module docstring)."""

_COUNTERS = ('ticks', 'initialisations', 'resets', 'late', 'dropped_nonfinite',
             'dropped_bad_length', 'dropped_unknown_joint', 'dropped_unknown_sensor',
             'dropped_too_old', 'dropped_empty', 'dropped_overflow', 'dropped_before_init',
             'dropped_reset', 'dropped_bad_torque', 'backwards', 'tick_not_advancing',
             'stale_ticks', 'rejected_outlier', 'used_effort', 'effort_expired'
             ) + tuple(f'used_{k}' for k in _KINDS) + tuple(f'reset:{r}' for r in RESET_REASONS)


class _Diverged(Exception):
    """Every reading of a sensor was rejected for ``outlier_reset_time``."""

    def __init__(self, ready: list, detail: str = '') -> None:
        super().__init__(detail or 'readings rejected for outlier_reset_time')
        self.ready = ready


class _Pending:
    """A validated reading waiting for its tick: stamp and observation (s filled later)."""

    __slots__ = ('t', 'ob')

    def __init__(self, t: float, ob: Observation) -> None:
        self.t, self.ob = t, ob


class Estimator:
    """Fixed-lag smoother (GTSAM IncrementalFixedLagSmoother, ISAM2 with QR).

    Defined outcomes of bad input (all counted in :attr:`counters`, never raised;
    the key set is fixed, whatever the input): NaN = value not given (skipped, not
    counted: the records define it so); ±inf → ``dropped_nonfinite``; a reading
    far from the prediction → ``rejected_outlier`` (module docstring); arrays
    whose length differs from ``names`` (empty = not given) → ``dropped_bad_length``;
    unknown joint/IMU names → ``dropped_unknown_joint``/``_sensor`` once per name
    (the other joints are used); a stamp more than ``backwards_tolerance`` before the newest one →
    reset to uninitialised (``backwards``, bag loop); stamps older than the
    window → ``dropped_too_old``; bursts → all used, oldest dropped beyond
    ``max_pending`` (``dropped_overflow``); silence → dynamics-only prediction
    with status ``stale`` (``stale_ticks``) and the readings used again when
    they resume, or after more than ``max_tick_gap`` a re-initialisation from
    them (``tick_gap``); an exception or non-finite result in GTSAM → restart from the
    last good estimate (``resets``, ``reset:<category>`` of :data:`RESET_REASONS`).
    """

    def __init__(self, sys: System, config: EstimatorConfig | None = None) -> None:
        self.sys = sys
        self.config = cfg = config or EstimatorConfig()
        self.sm = sys.sensor_model()
        self.n = sys.n
        self._dt = 1.0 / cfg.frequency
        self._eps = 1e-9 * self._dt          # a stamp this close to a tick is at the tick
        self._batch = MARGINALISE_EVERY * self._dt    # s: the smoother's stamps, rounded
        self._joint_index = {nm: i for i, nm in enumerate(self.sm.joint_names)}
        self._imu_index = {nm: i for i, nm in enumerate(self.sm.imu_names)}
        self._act_of_joint = {j: k for k, j in enumerate(sys.actuator_joints)
                              if j is not None}
        self._n_act = len(sys.actuator_joints)
        self._set_dynamics_noise(cfg)
        self._integ_noise = gtsam.noiseModel.Diagonal.Sigmas(self._integrator_sigma(self._dt))
        self._angular_pos = np.array([self.sm.joint_is_angular(j)
                                      for j in range(len(self.sm.joint_names))], dtype=bool)
        self._params = gtsam.ISAM2Params()
        self._params.setFactorization('QR')
        self._params.findUnusedFactorSlots = True
        self._params.relinearizeSkip = max(1, cfg.relinearize_skip)
        if cfg.relinearize_threshold <= 0:
            # only the newest key's estimate is read, and with relinearisation off nothing
            # else uses the solution: back-substitute the re-eliminated cliques (the new key
            # and its path to the root: exact) and not the untouched subtrees (module doc)
            gn = gtsam.ISAM2GaussNewtonParams()
            gn.setWildfireThreshold(math.inf)
            self._params.setOptimizationParams(gn)
        if cfg.relinearize_threshold > 0:
            self._params.setRelinearizeThreshold(cfg.relinearize_threshold)
        else:
            self._params.enableRelinearization = False
        self._counters = {k: 0 for k in _COUNTERS}
        self._unknown: set[str] = set()
        self._last_reset_reason = ''
        # per sensor (kind, index): [model-error variance s_m, stamp of its last update];
        # a property of model and plant, so it outlives a 'diverged' reset (_gate)
        self._model_var: dict[tuple[str, int], list[float]] = {}
        self._clear()

    # -- public ------------------------------------------------------------
    def _integrator_sigma(self, dt: float) -> np.ndarray:
        """σ of the trapezoidal factor over a step dt.

        The trapezoidal rule (seed 000 Eq. 23) has a local truncation error of
        dt³/12 times the third derivative; a fixed tiny σ makes the smoother
        trust a wrong integrator at slow tick rates (100 Hz: 40σ per step),
        which biased the estimate by several mrad. σ grows with dt³. One σ per row
        of the factor (q rows, then q̇ rows), with the jerk of each coordinate's kind.
        """
        return np.tile(self.config.integrator_sigma + self._jerk * dt ** 3 / 12.0, 2)

    @property
    def counters(self) -> dict:
        """A copy of the counters (used/dropped per reason, resets, ticks…)."""
        return dict(self._counters)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.sm.joint_names

    @property
    def coordinate_names(self) -> tuple[str, ...]:
        return self.sys.names

    @property
    def last_reset_reason(self) -> str:
        return self._last_reset_reason

    @property
    def initialised(self) -> bool:
        return self._smoother is not None

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
        return True

    def applied_torque(self, t: float) -> np.ndarray:
        """The known actuator efforts in force at ``t`` (0 where none or expired)."""
        live = (t - self._tau_t) <= self.config.sensor_timeout
        expired = self._tau_live & ~live
        if expired.any():
            self._counters['effort_expired'] += int(expired.sum())
        self._tau_live = live
        return np.where(live, self._tau, 0.0)

    def known_torque(self, t: float, out: np.ndarray) -> np.ndarray:
        """The measured actuator efforts in force at ``t`` into ``out`` (order of
        ``sys.actuator_joints``), NaN where none was given or it expired; no side effects
        (the external torques of :mod:`mbfg_ros.estimation.external` read it)."""
        np.copyto(out, self._tau)
        out[(t - self._tau_t) > self.config.sensor_timeout] = np.nan
        return out

    def reconfigure(self, **changes: float) -> EstimatorConfig:
        """Change noise σ's (:data:`LIVE_FIELDS`) while running, keeping the state.

        The readings added from now on get their factors with the new σ's (those
        already queued keep theirs), the next ticks' dynamics factor and innovation
        gate use the new ``dynamics_sigma``. Validated as the constructor does.

        :raises ValueError: a field outside :data:`LIVE_FIELDS`, or an invalid value
            (nothing is changed then).
        """
        other = sorted(set(changes) - set(LIVE_FIELDS))
        if other:
            raise ValueError(f'{other[0]!r} cannot change while running (live: '
                             f'{", ".join(LIVE_FIELDS)})')
        cfg = replace(self.config, **changes)        # __post_init__ validates
        self.config = cfg
        self._set_dynamics_noise(cfg)
        return cfg

    def _set_dynamics_noise(self, cfg: EstimatorConfig) -> None:
        self._dyn_sigma, self._jerk = coordinate_sigmas(self.sys, cfg)
        self._tick_dyn_sigma = self._dyn_sigma
        self._state_noise = gtsam.noiseModel.Diagonal.Sigmas(np.concatenate((
            np.full(2 * self.sys.m, cfg.constraint_sigma), self._dyn_sigma)))

    def reset(self, reason: str = 'manual', detail: str = '') -> None:
        """Forget the state, buffered readings and known torques; the next tick
        re-initialises. ``reason`` is one of :data:`RESET_REASONS` (others count as
        ``manual``); ``detail`` is kept in :attr:`last_reset_reason` for the log."""
        self._count_reset(reason, detail)
        if reason != 'diverged':
            self._model_var.clear()
        self._clear()

    def _reset_keep_pending(self, reason: str, detail: str = '') -> None:
        pending = self._pending
        self.reset(reason, detail)
        self._pending = pending
        self._max_stamp = max((p.t for p in pending), default=None)

    def add(self, meas: JointMeasurement | ImuMeasurement) -> bool:
        """Queue one measurement record; False if nothing in it was usable (counted)."""
        try:
            return self._add(meas)
        except Exception:                       # never raise on a message
            self._counters['dropped_empty'] += 1
            return False

    def tick(self, t: float) -> Estimate | None:
        """Add the variables of time ``t``, update the smoother, return the estimate at ``t``."""
        start = time.perf_counter()
        try:
            t = float(t)
        except (TypeError, ValueError):
            return None
        if not math.isfinite(t):
            return None
        if self._t_last is not None:
            if t < self._t_last - self.config.backwards_tolerance:
                self._counters['backwards'] += 1
                self._reset_keep_pending('backwards')
            elif t <= self._t_last + 1e-9:
                self._counters['tick_not_advancing'] += 1
                return self._last
            elif t - self._t_last > self.config.max_tick_gap:
                self._reset_keep_pending('tick_gap')
            elif (self._smoother is not None
                  and t - self._last_reading > self.config.max_tick_gap):
                # ticks went on through a silence: the dynamics-only prediction of more than
                # max_tick_gap is no prior for the readings that resume; start from them
                self._reset_keep_pending('tick_gap', 'no reading for max_tick_gap')
        try:
            if self._smoother is None:
                return self._initialise(t, start)
            return self._step(t, start)
        except Exception as exc:          # noqa: BLE001 - never raise from a tick
            self.reset('error', repr(exc))
            return None

    # -- input ---------------------------------------------------------------
    def _add(self, meas) -> bool:
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

    def _values(self, arr, size: int, what: str) -> np.ndarray | None:
        """Array of ``size`` or None (empty = not given; wrong length counted)."""
        if arr is None:
            return None
        a = np.asarray(arr, dtype=float).reshape(-1)
        if a.size == 0:
            return None
        if a.size != size:
            self._counters['dropped_bad_length'] += 1
            return None
        bad = np.isinf(a)
        if bad.any():
            self._counters['dropped_nonfinite'] += int(bad.sum())
            a = np.where(bad, np.nan, a)
        return a

    @staticmethod
    def _sigmas(var: np.ndarray | None, k: int, default: float) -> np.ndarray:
        """σ per reading: sqrt of a finite positive variance, else ``default``
        (:meth:`_sigma` for ``k`` readings at once)."""
        if var is None:
            return np.full(k, default)
        ok = np.isfinite(var) & (var > 0)
        return np.where(ok, np.sqrt(np.where(ok, var, 1.0)), default)

    @staticmethod
    def _sigma(var, default: float) -> float:
        if var is not None and np.isfinite(var) and var > 0:
            return float(np.sqrt(var))
        return default

    def _joint_obs(self, m: JointMeasurement) -> list[Observation]:
        cfg = self.config
        names = tuple(m.names) if m.names is not None else ()
        k = len(names)
        pos = self._values(m.position, k, 'position')
        vel = self._values(m.velocity, k, 'velocity')
        eff = self._values(m.effort, k, 'effort')
        pvar = self._values(m.position_var, k, 'position_var')
        vvar = self._values(m.velocity_var, k, 'velocity_var')
        # finiteness and σ of every reading at once (the per-joint loop only builds them)
        p_ok = np.isfinite(pos).tolist() if pos is not None else [False] * k
        v_ok = np.isfinite(vel).tolist() if vel is not None else [False] * k
        sp = self._sigmas(pvar, k, cfg.encoder_sigma) if any(p_ok) else None
        sv = self._sigmas(vvar, k, cfg.encoder_rate_sigma) if any(v_ok) else None
        out = []
        for i, nm in enumerate(names):
            j = self._joint_index.get(nm)
            if j is None:
                if nm not in self._unknown:
                    self._unknown.add(nm)
                    self._counters['dropped_unknown_joint'] += 1
                continue
            if p_ok[i]:
                out.append(Observation('joint_pos', j, pos[i:i + 1].copy(), sp[i:i + 1]))
            if v_ok[i]:
                out.append(Observation('joint_vel', j, vel[i:i + 1].copy(), sv[i:i + 1]))
            a = self._act_of_joint.get(nm)
            if a is not None and eff is not None and np.isfinite(eff[i]):
                self._tau[a] = eff[i]
                self._tau_t[a] = m.t
                self._counters['used_effort'] += 1
        return out

    def _imu_obs(self, m: ImuMeasurement) -> list[Observation]:
        cfg = self.config
        k = self._imu_index.get(m.sensor)
        if k is None:
            if ('imu:' + str(m.sensor)) not in self._unknown:
                self._unknown.add('imu:' + str(m.sensor))
                self._counters['dropped_unknown_sensor'] += 1
            return []
        g = self._values(m.gyro, 3, 'gyro')
        a = self._values(m.accel, 3, 'accel')
        quat = self._values(m.orientation, 4, 'orientation')
        sg, sa, so = (np.array([self._sigma(self._var(var, i), default) for i in range(3)])
                      for var, default in ((m.gyro_var, cfg.gyro_sigma),
                                           (m.accel_var, cfg.accel_sigma),
                                           (m.orientation_var, cfg.orientation_sigma)))
        return self.sm.imu_observations(k, g, a, quat, sg, sa, so)

    @staticmethod
    def _var(var, i: int) -> float | None:
        """Component ``i`` of a variance vector, or None (not given, or of another length)."""
        if var is None:
            return None
        v = np.asarray(var, float).reshape(-1)
        return float(v[i]) if v.size == 3 else None

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
        self._cov_last: np.ndarray | None = None
        self._last_reading = -math.inf
        self._since_cov = 0
        self._tau = np.zeros(self._n_act)
        self._tau_t = np.full(self._n_act, -math.inf)
        self._tau_live = np.zeros(self._n_act, dtype=bool)
        self._tau_prev = np.zeros(self._n_act)       # the previous tick's state-factor τ
        self._reject_since: dict[tuple[str, int], float] = {}   # first of a rejected run

    def _count_reset(self, reason: str, detail: str = '') -> None:
        if reason not in RESET_REASONS:
            reason, detail = 'manual', f'{reason} {detail}'.strip()
        self._counters['resets'] += 1
        self._counters[f'reset:{reason}'] += 1
        self._last_reset_reason = f'{reason}: {detail}' if detail else reason

    def _oldest_usable_time(self) -> float:
        """Stamps older than this are not bracketed by keys still inside the smoother."""
        if not self._window:
            return -math.inf
        return self._window[0][0] - self._eps

    def _new_smoother(self) -> gtsam.IncrementalFixedLagSmoother:
        return gtsam.IncrementalFixedLagSmoother(self.config.lag_duration + self._batch,
                                                 self._params)

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
        key = gtsam.symbol('x', 0)
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
    def _state_factor(self, key: int, t: float, x: np.ndarray) -> gtsam.NonlinearFactor:
        """The state factor of tick ``t`` (known torques in force then; its noise widened
        for actuators of unknown effort at the state ``x`` it is inserted at, which is
        also its linearisation point)."""
        tau = self._tau_prev = self.applied_torque(t)
        return self._factor([key], self._dynamics_noise(x, tau)[1],
                            functools.partial(F.stacked_state_error, self.sys, tau), [x])

    def _linear(self) -> bool:
        """Factors linearised here once (module docstring): relinearisation off."""
        return self.config.relinearize_threshold <= 0

    def _at(self, *ks: int) -> list[np.ndarray] | np.ndarray | None:
        """The linearisation points of key indices ``ks`` (None: CustomFactors)."""
        if not self._linear():
            return None
        return self._theta[ks[0]] if len(ks) == 1 else [self._theta[k] for k in ks]

    def _factor(self, keys: list[int], noise: gtsam.noiseModel.Base, fn: F.ErrorFn,
                at: list[np.ndarray]) -> gtsam.NonlinearFactor:
        """``fn`` on ``keys`` as a linear factor at ``at``, or a CustomFactor."""
        if self._linear():
            return F.linear_factor(keys, noise, fn, at)
        return F.custom_factor(keys, noise, fn)

    def _dynamics_noise(self, x: np.ndarray, tau: np.ndarray
                        ) -> tuple[np.ndarray, gtsam.noiseModel.Base]:
        """(σ of q̈ per coordinate, the state factor's noise) for the torques ``tau``.

        With ``unknown_effort_sigma`` > 0, each actuator whose effort is not known
        (never given, or expired) applies an unknown torque of that size: its effect on
        q̈, ``∂q̈/∂τ_a`` at ``x`` (q̈ is linear in τ, so one extra forward dynamics per such
        actuator), adds in quadrature to ``dynamics_sigma``. Without it, the zero torque
        assumed would pull the estimate of a powered arm down with gravity."""
        su = self.config.unknown_effort_sigma
        if su <= 0 or not self._n_act or self._tau_live.all():
            return self._dyn_sigma, self._state_noise
        n = self.n
        q, qd = x[:n], x[n:2 * n]
        base = self.sys.accelerations(q, qd, tau)
        var = self._dyn_sigma ** 2
        for a in np.flatnonzero(~self._tau_live):
            pushed = tau.copy()
            pushed[a] += su
            var = var + (self.sys.accelerations(q, qd, pushed) - base) ** 2
        sigma = np.sqrt(var)
        return sigma, gtsam.noiseModel.Diagonal.Sigmas(np.concatenate((
            np.full(2 * self.sys.m, self.config.constraint_sigma), sigma)))

    def _push_window(self, t: float, k: int, x: np.ndarray) -> None:
        self._window.append((t, k))
        self._times.append(t)
        self._x_hist.append((t, x))
        horizon = t - self.config.lag_duration
        while self._window and self._window[0][0] < horizon:
            self._theta.pop(self._window.popleft()[1], None)
            self._x_hist.popleft()
            self._times.pop(0)

    def _attach(self, t: float, k: int) -> tuple[dict, dict, float]:
        """Readings due by tick ``k`` at ``t`` (stamped ≤ t), grouped per factor.

        Returns (single, pairs, newest stamp): ``single[i]`` the readings at the
        time of key i; ``pairs[(i, dt)]`` those between keys i−1 and i (dt
        apart), with ``s`` filled.
        """
        single: dict[int, list[Observation]] = {}
        pairs: dict[tuple[int, float], list[Observation]] = {}
        limit = t + self._eps
        if not self._pending or min(p.t for p in self._pending) > limit:
            return single, pairs, -math.inf
        ready = [p for p in self._pending if p.t <= limit]
        self._pending = [p for p in self._pending if p.t > limit]
        ready = self._gate(ready)
        eps, t_prev, times = self._eps, self._t_last, self._times
        horizon = t - self.config.lag_duration          # keys at or before: marginalised now
        newest = -math.inf
        for p in ready:
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
        return single, pairs, newest

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
        sd2, sj2 = self._tick_dyn_sigma ** 2, self._jerk ** 2
        var_s = std * std
        for (_, base), ids in groups.items():
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
            s2d, s2j = HH @ sd2, HH @ sj2                   # (R, 3): q, q̇, q̈
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

    def _linear_model(self, obs: list[Observation], x: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(E (rows,), H (rows, 3n)): the observation factors' own residuals ``h(x) ⊖ z``
        (wrapped angles, SO(3) orientation) and Jacobians of readings ``obs`` at the
        stacked state ``x``, stacked in order."""
        n = self.n
        state = (x[:n], x[n:2 * n], x[2 * n:])
        e, H = residuals(self.sm, obs, [state] * len(obs), True)
        return e, H.reshape(len(e), 3 * n)

    def _update(self, graph: gtsam.NonlinearFactorGraph, values: gtsam.Values, key: int,
                t: float) -> np.ndarray:
        """One smoother update; the new state's estimate, or an exception if not finite."""
        batch = self._batch
        self._smoother.update(graph, values, {key: math.floor(t / batch) * batch})
        x = self._smoother.calculateEstimateVector(key)
        if not np.all(np.isfinite(x)):
            raise FloatingPointError('non-finite estimate')
        return x

    def _step(self, t: float, start: float) -> Estimate | None:
        n = self.n
        k = self._k + 1
        dt = t - self._t_last
        key = gtsam.symbol('x', k)
        q, qd, qdd = self._x_last[:n], self._x_last[n:2 * n], self._x_last[2 * n:]
        guess = np.concatenate((q + dt * qd + 0.5 * dt * dt * qdd, qd + dt * qdd, qdd))
        # the gate's process noise and the state factor use the same dynamics σ (one
        # evaluation per tick: with unknown efforts it costs a forward dynamics per actuator)
        tau = self.applied_torque(t)
        self._tick_dyn_sigma, state_noise = self._dynamics_noise(guess, tau)
        try:
            single, pairs, newest = self._attach(t, k)
        except _Diverged as exc:        # the estimate is lost: start again from the readings
            self._pending = exc.ready + self._pending
            self._reset_keep_pending('diverged', str(exc))
            return None
        self._theta[k] = guess
        graph, used = self._graph(k, dt, guess, tau, state_noise, single, pairs)
        values = gtsam.Values()
        values.insert(key, guess)
        try:
            x = self._update(graph, values, key, t)
        except Exception as exc:          # noqa: BLE001 - any GTSAM failure
            self._counters['dropped_reset'] += len(used)
            return self._recover(t, k, guess, repr(exc), start)
        self._count_used(used)
        self._last_reading = max(self._last_reading, newest)
        return self._advance(t, k, key, x, start)

    def _graph(self, k: int, dt: float, guess: np.ndarray, tau: np.ndarray,
               state_noise: gtsam.noiseModel.Base, single: dict, pairs: dict
               ) -> tuple[gtsam.NonlinearFactorGraph, list[Observation]]:
        """The new factors of tick ``k`` (``dt`` after the previous one, inserted at
        ``guess``): state, integrator, and the readings of :meth:`_attach`; with the
        readings used.

        Hook for the innovation gate (issue 25): the readings' model is evaluated twice
        per tick, by :meth:`_gate` at the last estimate and here at the keys'
        linearisation points (~65 µs each for the UR5's six encoders and IMU, a quarter
        of the tick). A gate that predicts at ``guess`` (the smoother's prediction, this
        factor's point) can keep its ``(e, J)`` per factor and pass it as
        :func:`factors.linear_factor`'s ``evaluated``: one evaluation per tick."""
        n = self.n
        key, prev = gtsam.symbol('x', k), gtsam.symbol('x', self._k)
        graph = gtsam.NonlinearFactorGraph()
        graph.add(self._factor([key], state_noise,
                               functools.partial(F.stacked_state_error, self.sys, tau), [guess]))
        at = [self._theta[self._k], guess]
        noise = self._integ_noise if dt <= self._dt * (1 + 1e-6) else \
            gtsam.noiseModel.Diagonal.Sigmas(self._integrator_sigma(dt))
        cfg = self.config
        unknown = cfg.unknown_effort_sigma > 0 and not self._tau_live.all()
        if cfg.disturbance_process and not unknown:
            # known efforts: bound the change of q̈ − q̈(q, q̇, τ), not of q̈ (issue 27 item 4)
            noise = gtsam.noiseModel.Diagonal.Sigmas(np.concatenate((
                self._integrator_sigma(dt), self._jerk * dt)))
            graph.add(self._factor([prev, key], noise, functools.partial(
                stacked_trapezoidal_disturbance_error, self.sys, dt, self._tau_prev, tau), at))
        elif cfg.jerk_process or cfg.disturbance_process or unknown:
            # torques unknown: the dynamics barely fix q̈; bound its change by the jerk
            noise = gtsam.noiseModel.Diagonal.Sigmas(np.concatenate((
                self._integrator_sigma(dt), self._jerk * dt)))
            graph.add(self._factor([prev, key], noise, functools.partial(
                F.stacked_trapezoidal_jerk_error, n, dt), at))
        else:
            graph.add(self._factor([prev, key], noise,
                                   functools.partial(F.stacked_trapezoidal_error, n, dt), at))
        self._tau_prev = tau
        used = []
        for kk, obs in single.items():
            graph.add(observation_factor(gtsam.symbol('x', kk), self.sm, obs, self._at(kk)))
            used += obs
        for (kk, span), obs in pairs.items():
            graph.add(interval_factor(gtsam.symbol('x', kk - 1), gtsam.symbol('x', kk), span,
                                      self.sm, obs, self._at(kk - 1, kk)))
            used += obs
        return graph, used

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
        key = gtsam.symbol('x', k)
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

    def _count_used(self, obs: Sequence[Observation]) -> None:
        for o in obs:
            self._counters['used_' + o.kind] += 1

    def _covariance(self, key: int) -> None:
        """σ of the newest key's marginal (published as q_std, qd_std; the gate's σ_x)."""
        try:
            cov = self._smoother.marginalCovariance(key)
            self._std_last = np.sqrt(np.maximum(np.diag(cov), 0.0))
            self._cov_last = cov
        except Exception:             # noqa: BLE001 - keep the last one
            if self._std_last is None:
                self._std_last = np.full(3 * self.n, np.nan)

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
        if self.sm.direct_encoders is not None:     # encoder j reads coordinate j
            nj = len(self.joint_names)
            jp, jv = q[:nj].copy(), qd[:nj].copy()
        else:
            models = [self.sm.joint(j, q, qd) for j in range(len(self.joint_names))]
            jp = np.array([p.h[0] for p, _ in models])
            jv = np.array([v.h[0] for _, v in models])
        est = Estimate(t=t, q=q.copy(), qd=qd.copy(), qdd=qdd.copy(),
                       q_std=self._std_last[:n].copy(), qd_std=self._std_last[n:2 * n].copy(),
                       tau=self.sys.torques(q, qd, qdd), joint_position=jp,
                       joint_velocity=jv,
                       tick_seconds=time.perf_counter() - start, status=status,
                       counters=dict(self._counters), covariance=self._cov_last)
        self._last = est
        return est
