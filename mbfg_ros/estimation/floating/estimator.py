"""The package's floating-base estimator (issue 28 item 3): a legged robot's base pose and
twist from its base IMU, joint encoders (and efforts) and the feet's contact states.

Graph (a fixed-lag smoother, GTSAM's ``IncrementalFixedLagSmoother`` over ISAM2, C++)::

    keyframe k (every 1/keyframe_rate s):  X_k (Pose3), V_k (world velocity), B_k (IMU bias)
    X_{k-1} V_{k-1} B_{k-1} — CombinedImuFactor — X_k V_k B_k     (IMU preintegration,
                                                                   bias random walks; C++)
    per stance foot c at k:  contact velocity   v + R u_c = 0                 σ slip
                             flat ground        t_z + e_zᵀ R p_c − r = z_g    σ flatness

with ``p_c`` the foot's centre in the base frame and ``u_c = ω × p_c + J_c q̇ − r ω_c × Rᵀe_z``
its velocity relative to the ground contact point: a ball foot of radius ``r`` rolling
without slipping has its contact point at rest while its centre moves at ``ω_c × r e_z``
(``ω_c = ω + J_ω,c q̇`` the foot's angular velocity; ``r = 0``: point feet). This is seed
002 §VII's loop closure of a stance foot with the ground at the velocity level
(:func:`mbfg_ros.spatial.contact_factors.contact_velocity_error` with the roll added), and
the flat-ground prior ties the base height to the start-up ground plane so z does not drift
(documented assumption; ``ground_flatness_sigma: 0`` switches it off for rough terrain).

Both leg factors are linearised here in numpy at the keyframe's predicted state and handed
to GTSAM as one whitened ``JacobianFactor`` in a ``LinearContainerFactor``
(as :func:`mbfg_ros.core.factors.stacked_linear_factor` does for vector keys; here on a
Pose3 and a velocity): no Python callback inside ISAM2.

Every :meth:`FloatingEstimator.tick` publishes the newest keyframe's state predicted to the
last IMU reading by the running preintegration (``PreintegratedCombinedMeasurements.predict``,
a few µs), so the output rate is the caller's, not the smoother's.

Contact forces (at each keyframe): the floating-base equations of motion (seed 003 §3)
``J_cᵀ f = M v̇ + h − Sᵀ τ`` on the stance feet, solved in least squares over all nv rows
with the measured efforts (without efforts: the base rows only, the minimum-norm forces of
``contact_inverse``, whose joint rows then give τ̂). ``v̇``: the base's linear acceleration
from the accelerometer (``Rᵀ a = f_imu + Rᵀ g``, minus ``ω × v_b`` for the body-frame
derivative), its angular acceleration and the joint accelerations by finite differences of
the bias-corrected gyro and of q̇ between keyframes.

A gap in the IMU readings longer than ``max_imu_gap`` is bridged (:meth:`_bridge`): a
keyframe at each end, one IMU factor across it with the end readings' mean and the loose σ
``gap_accel_sigma``/``gap_gyro_sigma``, loose leg rows of the keyframe after it at once: the
velocity from the legs, never a held reading integrated as if measured. ISAM2 factorises by
QR: the loose keyframes after a gap (or a restart's wide prior) are too ill-conditioned for
its Cholesky ("indeterminate system" at every update).

Start-up: the first ``init_time`` s of IMU readings with the robot standing: roll and
pitch from the mean specific force, the gyro bias from the mean gyro, accelerometer bias 0
(σ ``accel_bias_sigma``), velocity 0; yaw 0 and the base above the odometry origin with the
stance feet's lowest points on z = 0 (the ground plane), unless :meth:`set_initial_pose`
gave a pose (then the ground plane is where the stance feet are).

Modules, one concern each (as :mod:`mbfg_ros.estimation.estimator`): :class:`FloatingEstimator`
is this file's public API (construction, :meth:`~FloatingEstimator.reset`,
:meth:`~FloatingEstimator.tick`) over the mixins of :mod:`.intake` (``add_*``: validation,
counters, the latest readings), :mod:`.startup` (start-up and restarts), :mod:`.keyframes`
(the smoother, IMU factors, gaps), :mod:`.stance` (the stance feet's velocity and
flat-ground rows), :mod:`.forces` (contact forces, τ̂, contacts from efforts) and
:mod:`.output` (covariances and the :class:`~.estimate.FloatingEstimate`); the parameters are
in :mod:`.config`.
"""
from __future__ import annotations

import math
from collections import deque

import gtsam
import numpy as np

from ...core.interface import FloatingBase
from .config import FloatingEstimatorConfig
from .estimate import FloatingEstimate
from .forces import ForcesMixin
from .intake import COUNTERS, IntakeMixin
from .keyframes import KeyframeMixin
from .output import OutputMixin
from .stance import Keyframe, StanceMixin
from .startup import StartupMixin

__all__ = ['FloatingEstimator', 'COUNTERS']


class FloatingEstimator(IntakeMixin, StartupMixin, KeyframeMixin, StanceMixin, ForcesMixin,
                        OutputMixin):
    """Base pose, twist and IMU biases of a floating-base robot (module docstring).

    Inputs are pushed with ``add_*`` (never raising on bad input: counted in
    :attr:`counters`), estimates pulled with :meth:`tick`.
    """

    def __init__(self, system: FloatingBase, config: FloatingEstimatorConfig) -> None:
        self.system = system
        self.config = config
        self.joint_names: tuple[str, ...] = tuple(system.joint_names)
        self.contact_names: tuple[str, ...] = tuple(system.contact_names)
        self.n = len(self.joint_names)
        self.k = len(self.contact_names)
        self._foot_index = {c: i for i, c in enumerate(self.contact_names)}
        self.counters: dict[str, int] = {c: 0 for c in COUNTERS}
        c = config
        self._g = 9.81
        p = gtsam.PreintegrationCombinedParams.MakeSharedU(self._g)
        p.setGyroscopeCovariance(c.gyro_noise ** 2 * np.eye(3))
        p.setAccelerometerCovariance(c.accel_noise ** 2 * np.eye(3))
        p.setIntegrationCovariance(1e-8 * np.eye(3))
        p.setBiasAccCovariance(c.accel_bias_walk ** 2 * np.eye(3))
        p.setBiasOmegaCovariance(c.gyro_bias_walk ** 2 * np.eye(3))
        self._pim_params = p
        self._isam_params = gtsam.ISAM2Params()
        self._isam_params.setFactorization('QR')
        self._force_period = 1.0 / c.force_rate - 1e-9
        self._cov_period = 1.0 / c.covariance_rate - 1e-9
        # buffers reused on every keyframe (the per-tick path allocates little)
        self._q_id = np.zeros(7 + self.n)
        self._q_id[6] = 1.0
        self._v_id = np.zeros(6 + self.n)
        self._initial_pose: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._leg_cols = self._legs_of_feet()
        self._leg3 = (np.array(self._leg_cols) if self._leg_cols is not None
                      and all(len(c) == 3 for c in self._leg_cols) else None)
        self._from_effort = c.contact_source == 'effort'
        self._all_feet = np.arange(self.k)
        if self._from_effort and self._leg_cols is None:
            raise ValueError('contact_source: effort needs legs that share no joint (each '
                             "foot's force from its own leg's efforts)")
        self.reset()
        self.counters['resets'] = 0


    # -- lifecycle --------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every reading and the state: the next readings start it up again
        (:meth:`set_initial_pose` is kept)."""
        self.counters['resets'] += 1
        self._t_imu = -math.inf
        self._imu_dt = 1e-3                           # s between IMU readings (the last)
        self._gyro = np.zeros(3)
        self._acc = np.zeros(3)
        self._init_buf: list[tuple[float, np.ndarray, np.ndarray]] = []
        self._t_joints = -math.inf
        self._q = np.full(self.n, np.nan)
        self._qd = np.full(self.n, np.nan)
        self._qd_given = np.zeros(self.n, bool)
        self._qd_sigma = self.config.joint_velocity_sigma
        self._tau = np.full(self.n, np.nan)
        self._stance = np.zeros(self.k, bool)
        self._t_down = np.full(self.k, math.inf)      # start of each foot's stance phase
        self._pending: deque[Keyframe] = deque()     # keyframes waiting for their leg rows
        self._contact_seen = np.zeros(self.k, bool)
        self._smoother: gtsam.IncrementalFixedLagSmoother | None = None
        self._pim: gtsam.PreintegratedCombinedMeasurements | None = None
        self._gap_open = False                        # the pim bridges an IMU gap
        self._key = 0
        self._t_key = -math.inf
        self._nav: gtsam.NavState | None = None
        self._bias = gtsam.imuBias.ConstantBias()
        self._z_ground = 0.0
        self._last_tick = -math.inf
        self._t_forces = -math.inf
        self._t_cov = -math.inf
        self._last: FloatingEstimate | None = None
        self._cov_pose = np.eye(6) * 1e-6
        self._cov_v = np.eye(3) * 1e-6
        self._cov_bg = np.eye(3) * self.config.gyro_bias_sigma ** 2
        self._forces = np.full((self.k, 3), np.nan)
        self._tau_hat = np.full(self.n, np.nan)
        self._prev_w: np.ndarray | None = None
        self._prev_qd = np.zeros(self.n)
        self._qfull = np.zeros(7 + self.n)
        self._vfull = np.zeros(6 + self.n)
        self._vdot = np.zeros(6 + self.n)
        self._pose_cov = np.eye(6) * 1e-6
        self._twist_cov = np.eye(6) * 1e-6


    # -- output -----------------------------------------------------------------------------
    def tick(self, t: float) -> FloatingEstimate | None:
        """The estimate at the newest IMU reading (published at ``t``); None until the
        start-up. Makes a keyframe when one is due."""
        self.counters['ticks'] += 1
        if not math.isfinite(t):
            self.counters['dropped_nonfinite'] += 1
            return self._last
        if t < self._last_tick:
            self.counters['tick_backwards'] += 1
            return self._last
        self._last_tick = t
        if self._pim is None and not self._try_start():
            return None
        assert self._pim is not None and self._nav is not None
        status = 'ok'
        if t - self._t_imu > self.config.stale_after:
            self.counters['stale_ticks'] += 1
            status = 'stale'
        elif (self._gap_open or self._t_imu - self._t_key >= 1.0 / self.config.keyframe_rate
              - 1e-9) and np.isfinite(self._q).all():
            self._keyframe()
        nav = self._pim.predict(self._nav, self._bias) if self._pim.deltaTij() > 0 \
            else self._nav
        if np.isfinite(self._q).all() and t - self._t_forces >= self._force_period:
            self._t_forces = t
            self._contact_forces(t, nav, self._gyro - self._bias.gyroscope())
        self._last = self._estimate(t, status, nav)
        return self._last
