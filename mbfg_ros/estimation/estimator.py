"""Online state estimation: a fixed-lag smoother over the mechanism's factor graph.

No ROS imports: the node, the bag replay and the benchmarks all drive the
same :class:`Estimator` (``add`` measurements, ``tick`` at the output rate).

Graph per tick k at time t_k (seed 000 §5-6), ONE stacked variable
x_k = [q, q̇, q̈] (key ``x<k>``):

* state factor (:func:`factors.stacked_state_error`): Φ(q) = 0, Φq q̇ = 0
  (Eqs. 24-25, tight) and q̈(q, q̇, τ) − q̈ (Eq. 26) with the known applied
  torques τ; its σ (``dynamics_sigma``) covers the unmodelled forces;
* integrator (:func:`factors.stacked_trapezoidal_error`, Eq. 23, its q rows with the
  trapezoidal rule's end correction + dt²/12 (q̈_k − q̈_{k−1})) to x_{k−1};
* one observation factor on x_k holding the readings stamped at t_k, and one
  on (x_{k−1}, x_k) holding those stamped inside (t_{k−1}, t_k), evaluated at
  the state interpolated between the two keys (:mod:`mbfg_ros.estimation.observations`).

Planar or spatial: ``q`` is the planar mechanism's natural coordinates (seed 000) or a
URDF robot's joint coordinates of its spanning tree (seed 002/004, with loop-closure
rows where it has loops). The estimator only talks to the formulation seam
(:class:`~mbfg_ros.core.interface.MultibodySystem`: ``state_terms``, ``sensor_model``,
``torques``, ``actuator_joints``); each formulation's sensor model owns its residuals
(a planar IMU reads z rate, in-plane force and yaw; a spatial one 3 axes and SO(3)).

Robustness (never raises from ``add``/``tick``): see :class:`Estimator`.

Modules, one concern each (issue 23): :class:`Estimator` is this file's public API
over the mixins of :mod:`mbfg_ros.estimation.intake` (validation and queueing of
readings and known torques), :mod:`mbfg_ros.estimation.innovation_gate` (the
innovation gate and its model-error term), :mod:`mbfg_ros.estimation.graph` (factor
assembly, the window, linearisation and marginalisation),
:mod:`mbfg_ros.estimation.lifecycle` (start-up, steps, recovery, resets) and
:mod:`mbfg_ros.estimation.output` (covariance and the Estimate),
:mod:`mbfg_ros.estimation.prediction` (predicted estimates between ticks); the parameters and
per-coordinate noise are in :mod:`mbfg_ros.estimation.config`, the start-up state
from the first readings in :mod:`mbfg_ros.estimation.start`.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import gtsam
import numpy as np

from ..core.interface import MultibodySystem as System
from ..core.measurements import Estimate, ImuMeasurement, JointMeasurement
from .config import LIVE_FIELDS, EstimatorConfig, coordinate_sigmas
from .graph import MARGINALISE_EVERY, GraphMixin
from .innovation_gate import GateMixin, contact_sigmas
from .intake import IntakeMixin
from .layout import ReadingLayout
from .lifecycle import RESET_REASONS, LifecycleMixin
from .output import OutputMixin
from .prediction import PredictionMixin

__all__ = ['EstimatorConfig', 'Estimator', 'LIVE_FIELDS', 'coordinate_sigmas',
           'RESET_REASONS', 'MARGINALISE_EVERY']

_KINDS = ('joint_pos', 'joint_vel', 'gyro', 'accel', 'orient')

_COUNTERS = ('ticks', 'initialisations', 'resets', 'late', 'dropped_nonfinite',
             'dropped_bad_length', 'dropped_unknown_joint', 'dropped_unknown_sensor',
             'dropped_too_old', 'dropped_empty', 'dropped_overflow', 'dropped_before_init',
             'dropped_reset', 'dropped_bad_torque', 'backwards', 'tick_not_advancing',
             'stale_ticks', 'rejected_outlier', 'used_effort', 'effort_expired'
             ) + tuple(f'used_{k}' for k in _KINDS) + tuple(f'reset:{r}' for r in RESET_REASONS)


class Estimator(IntakeMixin, GateMixin, GraphMixin, LifecycleMixin, OutputMixin,
                PredictionMixin):
    """Fixed-lag smoother (GTSAM IncrementalFixedLagSmoother, ISAM2 with QR).

    Defined outcomes of bad input (all counted in :attr:`counters`, never raised;
    the key set is fixed, whatever the input): NaN = value not given (skipped, not
    counted: the records define it so); ±inf → ``dropped_nonfinite``; a reading
    far from the prediction → ``rejected_outlier`` (:mod:`.innovation_gate`); arrays
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
        self._contact_sigma = contact_sigmas(sys, cfg.contact_effort_fraction)
        self._contact_any = bool(self._contact_sigma.any())
        self._set_dynamics_noise(cfg)
        self._set_gate_switches(cfg)
        self._integ_sigma = self._integrator_sigma(self._dt)
        self._angular_pos = np.array([self.sm.joint_is_angular(j)
                                      for j in range(len(self.sm.joint_names))], dtype=bool)
        self._params = gtsam.ISAM2Params()
        self._params.setFactorization('QR')
        self._params.findUnusedFactorSlots = True
        self._params.relinearizeSkip = max(1, cfg.relinearize_skip)
        if cfg.relinearize_threshold <= 0:
            # only the newest key's estimate is read, and with relinearisation off nothing
            # else uses the solution: back-substitute the re-eliminated cliques (the new key
            # and its path to the root: exact) and not the untouched subtrees (:mod:`.graph`)
            gn = gtsam.ISAM2GaussNewtonParams()
            gn.setWildfireThreshold(math.inf)
            self._params.setOptimizationParams(gn)
        if cfg.relinearize_threshold > 0:
            self._params.setRelinearizeThreshold(cfg.relinearize_threshold)
        else:
            self._params.enableRelinearization = False
        # the tick's state, integrator and new readings written into buffers kept from tick
        # to tick (GraphMixin._tick_factor; the disturbance rows aside): relinearisation off
        # (not a live field, so set once here); False stacks them afresh every tick
        # (factors.stacked_linear_factor), the general path its tests compare it with
        self._kept_tick_factor = self._linear()
        self._counters = {k: 0 for k in _COUNTERS}
        self._used_key = {k: f'used_{k}' for k in _KINDS}    # kind -> its counter
        self._unknown: set[str] = set()
        self._layouts: dict[tuple, tuple[list, list, bool]] = {}   # JointState names -> indices
        # (σ array, its one-element rows) per (variances' bytes or None, count, default σ)
        # (IntakeMixin._sigmas_kept); read-only, bounded
        self._sigma_cache: dict[tuple, tuple[np.ndarray, list]] = {}
        self._last_reset_reason = ''
        # the gate's sensors (kind, index), one slot each: the arrays of its state
        nj, ni = len(self.sm.joint_names), len(self.sm.imu_names)
        counts = {'joint_pos': nj, 'joint_vel': nj, 'gyro': ni, 'accel': ni, 'orient': ni}
        self._slot_key = [(kind, i) for kind, c in counts.items() for i in range(c)]
        self._slot_base = dict(zip(counts, np.cumsum([0] + list(counts.values())).tolist()))
        # per sensor: is its residual an angle (wrapped)? is it an encoder? (fixed)
        self._slot_wrap = np.array([self.sm.angle_residual(*kk) for kk in self._slot_key],
                                   dtype=bool)
        self._slot_joint = np.array([kk[0] in ('joint_pos', 'joint_vel')
                                     for kk in self._slot_key], dtype=bool)
        self._reading_layouts: dict[tuple, ReadingLayout] = {}    # per (kind, index) sequence
        self._interval_plans: dict[tuple, tuple] = {}   # per (sequence, stamp cuts): layouts
        # per sensor: model-error variance s_m and the stamp of its last update (NaN:
        # none yet); a property of model and plant, so it outlives a 'diverged' reset
        self._model_var = np.zeros(len(self._slot_key))
        self._model_t = np.full(len(self._slot_key), math.nan)
        self._clear()

    # -- public ------------------------------------------------------------
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

    def add(self, meas: JointMeasurement | ImuMeasurement) -> bool:
        """Queue one measurement record; False if nothing in it was usable (counted)."""
        try:
            return self._add(meas)
        except Exception:                       # never raise on a message
            self._counters['dropped_empty'] += 1
            return False

    def add_validated(self, meas: JointMeasurement | ImuMeasurement) -> bool:
        """Queue a record whose stamp the ROS driver checked (issue 23 item 3, one
        validation path): :class:`~mbfg_ros.ros.driver.EstimatorDriver` already dropped
        stamps gone back (its bag-loop streak) or older than its window and counted them
        (``input.dropped.*``), so they are not checked, nor counted, again here. Names,
        lengths and values are taken as :meth:`add` takes them; a record older than the
        smoother's own window (shorter than the driver's just after a recovery) is dropped
        once, when its tick brackets it (``dropped_too_old``). False if nothing in it was
        usable (counted)."""
        try:
            return self._queue(meas, float(meas.t))
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
