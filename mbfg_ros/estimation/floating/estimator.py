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
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Sequence

import gtsam
import numpy as np

from ...core.interface import FloatingBase
from .config import FloatingEstimatorConfig
from .estimate import FloatingEstimate

__all__ = ['FloatingEstimator', 'COUNTERS']

COUNTERS = ('ticks', 'keyframes', 'initialisations', 'resets', 'restarts', 'used_imu',
            'used_joints', 'used_contact', 'used_force', 'dropped_nonfinite',
            'dropped_bad_length', 'dropped_unknown_foot', 'dropped_backwards',
            'ignored_contact', 'imu_gaps', 'stale_ticks', 'tick_backwards',
            'keyframes_without_joints')
"""The fixed key set of :attr:`FloatingEstimator.counters`."""

_EZ = np.array([0.0, 0.0, 1.0])
_GAP_STEPS = 20
"""Most integration steps of an IMU gap's bridge (:meth:`FloatingEstimator._bridge`)."""
_GAP_LOOSE = 3.0
"""σ factor of the immediate velocity rows of the keyframe after an IMU gap (measured on
the 3 s trot with 40-200 ms holes: better than 1 at once or the usual rows only)."""


def _sym(c: str, k: int) -> int:
    return gtsam.symbol(c, k)


class FloatingEstimator:
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

    def _legs_of_feet(self) -> list[np.ndarray] | None:
        """Per contact, the joints that move it (its leg), if no two contacts share one
        (then each stance foot's force comes from its own leg's joint rows)."""
        rng = np.random.default_rng(0)
        q = np.zeros(7 + self.n)
        q[6] = 1.0
        q[7:] = rng.uniform(-0.5, 0.5, self.n)
        J = self.system.contact_jacobian(q, self.contact_names)[:, 6:]
        cols = [np.flatnonzero(np.abs(J[3 * i:3 * i + 3]).max(axis=0) > 1e-12)
                for i in range(self.k)]
        used = np.concatenate(cols) if cols else np.zeros(0, int)
        return cols if len(used) == len(set(used.tolist())) else None

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
        self._pending: deque[_Keyframe] = deque()     # keyframes waiting for their leg rows
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

    def set_initial_pose(self, position: Sequence[float], quaternion_xyzw: Sequence[float],
                         linear_velocity: Sequence[float] = (0.0, 0.0, 0.0)) -> None:
        """Start at this base pose (odometry frame) and world-frame velocity instead of the
        start-up's yaw 0 above the origin; used at the next start-up."""
        p = np.asarray(position, float).reshape(3)
        qx = np.asarray(quaternion_xyzw, float).reshape(4)
        qx = qx / np.linalg.norm(qx)
        self._initial_pose = (p, qx, np.asarray(linear_velocity, float).reshape(3))

    # -- inputs -----------------------------------------------------------------------------
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

    def _bridge(self, dt: float, w: np.ndarray, a: np.ndarray) -> None:
        """An IMU gap of ``dt`` > ``max_imu_gap`` (readings lost): integrated as measured,
        one held reading would be wrong by ~½ ȧ dt² and its factor would claim the
        sensor's accuracy (the error then goes into the bias and takes seconds to leave).
        Instead a keyframe closes the chain at the last reading before the gap (if it has
        IMU data since the last keyframe), and the gap is one reading (the mean of its two
        ends) in a preintegration whose noise is ``gap_accel_sigma``/``gap_gyro_sigma``
        over the gap: the keyframe after it (made at the next :meth:`tick`) gets its
        velocity from the stance legs at once (σ × ``_GAP_LOOSE``, then the usual rows) and
        its attitude from the gyro, the bias kept."""
        c = self.config
        self.counters['imu_gaps'] += 1
        assert self._pim is not None
        if self._pim.deltaTij() > 0 and np.isfinite(self._q).all():
            self._keyframe()
        p = gtsam.PreintegrationCombinedParams.MakeSharedU(self._g)
        p.setGyroscopeCovariance((c.gyro_noise ** 2 / dt + c.gap_gyro_sigma ** 2) * dt
                                 * np.eye(3))
        p.setAccelerometerCovariance((c.accel_noise ** 2 / dt + c.gap_accel_sigma ** 2) * dt
                                     * np.eye(3))
        p.setIntegrationCovariance((1e-8 + (0.5 * c.gap_accel_sigma * dt * dt) ** 2 / dt)
                                   * np.eye(3))
        p.setBiasAccCovariance(c.accel_bias_walk ** 2 * np.eye(3))
        p.setBiasOmegaCovariance(c.gyro_bias_walk ** 2 * np.eye(3))
        self._pim = gtsam.PreintegratedCombinedMeasurements(p, self._bias)
        a_mid, w_mid = 0.5 * (a + self._acc), 0.5 * (w + self._gyro)
        steps = max(1, min(_GAP_STEPS, round(dt / self._imu_dt)))
        for _ in range(steps):           # white noise over the gap, not one held step
            self._pim.integrateMeasurement(a_mid, w_mid, dt / steps)
        self._gap_open = True

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

    # -- start-up ---------------------------------------------------------------------------
    def _try_start(self) -> bool:
        buf = self._init_buf
        if not buf or buf[-1][0] - buf[0][0] < self.config.init_time \
                or not np.isfinite(self._q).all():
            return False
        W = np.array([b[1] for b in buf])
        A = np.array([b[2] for b in buf])
        bg = W.mean(axis=0)
        stance = self._stance if self._contact_seen.any() and self._stance.any() \
            else np.ones(self.k, bool)
        if self._initial_pose is not None:
            p0, qx, v0 = self._initial_pose
            R0 = gtsam.Rot3.Quaternion(qx[3], qx[0], qx[1], qx[2])
        else:
            up = A.mean(axis=0)
            up = up / np.linalg.norm(up)            # Rᵀ e_z (at rest f = Rᵀ g_up)
            R0 = gtsam.Rot3(_align(up))
            v0 = np.zeros(3)
            p0 = np.zeros(3)
        pf = self._legs(np.zeros(self.n), np.zeros(3), stance)[0]
        low = (R0.matrix() @ pf.T)[2] - self.config.foot_radius  # lowest points re. base
        ground = float(low.mean()) if low.size else 0.0           # (no contacts: 0)
        if self._initial_pose is None:
            p0[2] = -ground
        self._z_ground = float(p0[2] + ground)
        self._bias = gtsam.imuBias.ConstantBias(np.zeros(3), bg)
        self._start(gtsam.NavState(R0, p0, v0), self._bias, buf[-1][0],
                    np.eye(6) * 1e-8, 1e-3, fresh=True)
        self._init_buf = []
        self.counters['initialisations'] += 1
        return True

    def _start(self, nav: gtsam.NavState, bias: gtsam.imuBias.ConstantBias, t: float,
               pose_cov: np.ndarray, v_sigma: float, fresh: bool = False) -> None:
        """A new smoother with priors on the first keyframe (start-up or restart)."""
        c = self.config
        self._smoother = gtsam.IncrementalFixedLagSmoother(c.lag, self._isam_params)
        self._key = 0
        X, V, B = _sym('x', 0), _sym('v', 0), _sym('b', 0)
        g = gtsam.NonlinearFactorGraph()
        g.add(gtsam.PriorFactorPose3(X, nav.pose(), gtsam.noiseModel.Gaussian.Covariance(
            pose_cov)))
        g.add(gtsam.PriorFactorPoint3(V, nav.velocity(),
                                      gtsam.noiseModel.Isotropic.Sigma(3, v_sigma)))
        bs = np.r_[[c.accel_bias_sigma] * 3, [c.gyro_bias_sigma] * 3]
        g.add(gtsam.PriorFactorConstantBias(B, bias, gtsam.noiseModel.Diagonal.Sigmas(bs)))
        vals = gtsam.Values()
        vals.insert(X, nav.pose())
        vals.insert(V, nav.velocity())
        vals.insert(B, bias)
        ts = gtsam.FixedLagSmootherKeyTimestampMap()
        for k in (X, V, B):
            ts.insert((k, t))
        self._smoother.update(g, vals, ts)
        self._nav, self._bias, self._t_key = nav, bias, t
        self._pim = gtsam.PreintegratedCombinedMeasurements(self._pim_params, bias)
        self._gap_open = False

    # -- leg kinematics -----------------------------------------------------------------------
    def _legs(self, qd: np.ndarray, w: np.ndarray, stance: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p, ṗ, ω_foot) of the stance feet in the base frame (base at rest at identity,
        turning at ``w``), from the latest joint positions and ``qd``."""
        self._q_id[7:] = self._q
        self._v_id[3:6] = w
        self._v_id[6:] = qd
        names = [self.contact_names[i] for i in np.flatnonzero(stance)]
        return self.system.contact_motion(self._q_id, self._v_id, names)

    def _record(self, key: int, t: float, nav: gtsam.NavState, w: np.ndarray
                ) -> '_Keyframe':
        """A keyframe's leg kinematics (every foot), for its leg rows now or later."""
        p, pdot, wf = self._legs(self._qd, w, np.ones(self.k, bool))
        R = nav.attitude().matrix()
        u = pdot - self.config.foot_radius * _cross(wf, R[2])   # base frame (k, 3)
        return _Keyframe(key, t, nav.pose(), nav.velocity(), p, u)

    def _leg_factor(self, kf: '_Keyframe', t_now: float, touchdown_guard: float | None = None,
                    loose: float = 1.0) -> gtsam.LinearContainerFactor | None:
        """The velocity and flat-ground rows (module docstring) of keyframe ``kf`` for the
        feet in stance from ``touchdown_guard`` (default the config's) before it until now,
        at its estimate; the velocity rows' σ times ``loose``."""
        c = self.config
        guard = c.touchdown_guard if touchdown_guard is None else touchdown_guard
        feet = np.flatnonzero(self._stance & (self._t_down <= kf.t - guard + 1e-9))
        m = len(feet)
        if m == 0 or t_now - kf.t >= c.lag:
            return None
        X, V = _sym('x', kf.key), _sym('v', kf.key)
        pose, v = kf.pose, kf.velocity
        R = pose.rotation().matrix()
        r = c.foot_radius
        p, u = kf.p[feet], kf.u[feet]
        flat = c.ground_flatness_sigma > 0
        rows = 3 * m + (m if flat else 0)
        AX = np.zeros((rows, 6), order='F')
        AV = np.zeros((rows, 3), order='F')
        b = np.empty(rows)
        # σ of a foot's velocity: slip, plus the joint-rate and gyro noise through the leg
        gyro_s = c.gyro_noise / math.sqrt(self._imu_dt)     # σ of one gyro reading
        slip = np.array([c.contact_slip_sigma, c.contact_slip_sigma,
                         c.vertical_slip_sigma or c.contact_slip_sigma]) ** 2
        L2 = np.einsum('ij,ij->i', p, p)
        inv = 1.0 / (loose * np.sqrt(slip + (2 * self._qd_sigma ** 2 + gyro_s ** 2)
                                     * L2[:, None]))
        n3 = 3 * m
        b[:n3] = -((v + u @ R.T) * inv).ravel()           # e = v + R u (world axes)
        S = np.zeros((m, 3, 3))                           # [u]×
        S[:, 0, 1], S[:, 0, 2], S[:, 1, 2] = -u[:, 2], u[:, 1], -u[:, 0]
        S[:, 1, 0], S[:, 2, 0], S[:, 2, 1] = u[:, 2], -u[:, 1], u[:, 0]
        AX[:n3, :3] = -(np.matmul(R, S) * inv[:, :, None]).reshape(n3, 3)  # ∂e/∂δθ (right)
        AV[:n3] = (np.eye(3) * inv[:, :, None]).reshape(n3, 3)
        if flat:                                          # e = t_z + e_zᵀ R p − r − z_g
            inv = 1.0 / np.sqrt(c.ground_flatness_sigma ** 2 + c.encoder_sigma ** 2 * L2)
            up = R[2]
            b[n3:] = -(pose.translation()[2] + p @ up - r - self._z_ground) * inv
            AX[n3:, :3] = -_cross(up, p) * inv[:, None]   # e_zᵀ R [p]× = (Rᵀe_z × p)ᵀ
            AX[n3:, 3:] = up * inv[:, None]               # t ← t + R δt
        jf = gtsam.JacobianFactor(X, AX, V, AV, b, None)
        point = gtsam.Values()
        point.insert(X, pose)
        point.insert(V, v)
        return gtsam.LinearContainerFactor(jf, point)

    # -- keyframes --------------------------------------------------------------------------
    def _keyframe(self) -> None:
        pim = self._pim
        assert pim is not None and self._smoother is not None and self._nav is not None
        k0, k1 = self._key, self._key + 1
        X0, V0, B0 = _sym('x', k0), _sym('v', k0), _sym('b', k0)
        X1, V1, B1 = _sym('x', k1), _sym('v', k1), _sym('b', k1)
        pred = pim.predict(self._nav, self._bias)
        w = self._gyro - self._bias.gyroscope()
        g = gtsam.NonlinearFactorGraph()
        g.add(gtsam.CombinedImuFactor(X0, V0, X1, V1, B0, B1, pim))
        t = self._t_imu
        kf = self._record(k1, t, pred, w)
        if t - self._t_joints > self.config.stale_after:
            self.counters['keyframes_without_joints'] += 1  # old joint states: IMU only
        else:
            if self._gap_open:
                # across a gap the legs give the velocity at once: every foot in stance now
                # (one that touched down in the gap has had it to settle), σ × GAP_LOOSE
                # (one may be lifting off); the usual rows follow after liftoff_guard
                legs = self._leg_factor(kf, t, 0.0, _GAP_LOOSE)
                if legs is not None:
                    g.add(legs)
            self._pending.append(kf)
        guard = self.config.liftoff_guard - 1e-9
        while self._pending and t - self._pending[0].t >= guard:
            legs = self._leg_factor(self._pending.popleft(), t)
            if legs is not None:
                g.add(legs)
        vals = gtsam.Values()
        vals.insert(X1, pred.pose())
        vals.insert(V1, pred.velocity())
        vals.insert(B1, self._bias)
        ts = gtsam.FixedLagSmootherKeyTimestampMap()
        for key in (X1, V1, B1):
            ts.insert((key, t))
        try:
            self._smoother.update(g, vals, ts)
            pose = self._smoother.calculateEstimatePose3(X1)
            vel = self._smoother.calculateEstimatePoint3(V1)
            bias = self._smoother.calculateEstimateConstantBias(B1)
            if not (np.isfinite(pose.matrix()).all() and np.isfinite(vel).all()
                    and np.isfinite(bias.vector()).all()):
                raise RuntimeError('non-finite estimate')
            if t - self._t_cov >= self._cov_period:
                self._t_cov = t
                self._cov_pose = self._smoother.marginalCovariance(X1)
                self._cov_v = self._smoother.marginalCovariance(V1)
                self._cov_bg = self._smoother.marginalCovariance(B1)[3:, 3:]
                self._covariances(pose.rotation().matrix())
        except RuntimeError:
            # an indeterminate system or a diverged estimate (should not happen with the
            # priors): start again from the prediction (or the last keyframe) rather than
            # stop publishing
            self.counters['restarts'] += 1
            self._pending.clear()
            ok = np.isfinite(pred.pose().matrix()).all() and np.isfinite(pred.velocity()).all()
            self._start(pred if ok else self._nav, self._bias, t,
                        self._cov_pose + np.eye(6) * 1e-6, 0.05)
            return
        self._key = k1
        kf.pose, kf.velocity = pose, vel            # later leg rows linearise here
        self._nav = gtsam.NavState(pose, vel)
        self._bias = bias
        dt_key = t - self._t_key
        self._t_key = t
        if self._gap_open:                  # the gap is bridged: the sensor's noise again
            self._pim = gtsam.PreintegratedCombinedMeasurements(self._pim_params, bias)
            self._gap_open = False
        else:
            pim.resetIntegrationAndSetBias(bias)
        self.counters['keyframes'] += 1
        self._accelerations(w, dt_key)

    def _accelerations(self, w: np.ndarray, dt: float) -> None:
        """ω̇ and q̈ by finite differences over the last keyframe interval ``dt`` (held
        until the next keyframe: over 1 ms the gyro's noise would be ~10 rad/s²)."""
        if self._prev_w is not None:
            np.divide(w - self._prev_w, dt, out=self._vdot[3:6])
            np.divide(self._qd - self._prev_qd, dt, out=self._vdot[6:])
        self._prev_w, self._prev_qd = w.copy(), self._qd.copy()

    def _effort_contacts(self, t: float, q: np.ndarray, v: np.ndarray, vdot: np.ndarray
                         ) -> None:
        """``contact_source: effort``: every foot's force from its leg's joint rows and
        efforts; in stance while its vertical (world) component is above
        ``contact_force_threshold``, back in swing below half of it (hysteresis)."""
        rhs = self.system.inverse(q, v, vdot)[6:] - self._tau
        J = self.system.contact_jacobian(q, self.contact_names)
        f = np.empty((self.k, 3))
        self._leg_forces(J, rhs, self._all_feet, f)
        thr = self.config.contact_force_threshold
        for i in range(self.k):
            fz = f[i, 2]
            if fz > thr or (self._stance[i] and fz > 0.5 * thr):
                self._set_stance(i, t, True)
            else:
                self._set_stance(i, t, False)
        self._forces[self._stance] = f[self._stance]
        self._tau_hat = self._tau

    def _contact_forces(self, t: float, nav: gtsam.NavState, w: np.ndarray) -> None:
        """Stance forces and τ̂ from the equations of motion (module docstring) at ``nav``
        and the latest readings."""
        R = nav.attitude().matrix()
        vb = R.T @ nav.velocity()
        qx = nav.attitude().toQuaternion()
        q, v, vdot = self._qfull, self._vfull, self._vdot
        q[:3] = nav.position()
        q[3:7] = (qx.x(), qx.y(), qx.z(), qx.w())
        q[7:] = self._q
        v[:3], v[3:6], v[6:] = vb, w, self._qd
        vdot[:3] = self._acc - self._bias.accelerometer() - self._g * R[2] - _cross(w, vb)
        self._forces[:] = np.nan
        if self._from_effort:
            if np.isfinite(self._tau).all():
                self._effort_contacts(t, q, v, vdot)
            return
        stance = np.flatnonzero(self._stance)
        if not len(stance):
            self._tau_hat = self.system.inverse(q, v, vdot)[6:]
            return
        names = [self.contact_names[i] for i in stance]
        if np.isfinite(self._tau).all():
            # the joint rows: τ = (M v̇ + h)_joints − J_jointsᵀ f; a foot's force from its own
            # leg's joints when the legs share none (the base rows need the base's angular
            # acceleration, whose finite difference is the noisiest term)
            rhs = self.system.inverse(q, v, vdot)[6:] - self._tau
            J = self.system.contact_jacobian(q, names)
            f = np.empty((len(stance), 3))
            if self._leg_cols is None:
                f[:] = np.linalg.lstsq(J[:, 6:].T, rhs, rcond=None)[0].reshape(-1, 3)
            else:
                self._leg_forces(J, rhs, stance, f)
            self._tau_hat = self._tau
        else:
            self._tau_hat, f = self.system.contact_inverse(q, v, vdot, names)
        self._forces[stance] = f

    def _leg_forces(self, J: np.ndarray, rhs: np.ndarray, stance: np.ndarray,
                    f: np.ndarray) -> None:
        """Each stance foot's force from its own leg's joint rows ``J_legᵀ f = rhs_leg``
        (3-joint legs: one batched solve; a singular leg, stretched straight: least squares)."""
        if self._leg3 is not None:
            cols = self._leg3[stance]                      # (m, 3)
            Jr = J.reshape(len(stance), 3, -1)
            A = np.take_along_axis(Jr, 6 + cols[:, None, :].repeat(3, axis=1), axis=2)
            try:
                f[:] = np.linalg.solve(A.transpose(0, 2, 1), rhs[cols][..., None])[..., 0]
                return
            except np.linalg.LinAlgError:
                pass
        for row, i in enumerate(stance):
            cols = self._leg_cols[i]
            A = J[3 * row:3 * row + 3, 6 + cols].T
            f[row] = np.linalg.lstsq(A, rhs[cols], rcond=None)[0]

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

    def _covariances(self, R: np.ndarray) -> None:
        """The published covariances (ROS order, odometry-frame pose, base-frame twist) of
        the newest keyframe's marginals, held until the next keyframe."""
        T = np.zeros((6, 6))
        T[:3, 3:] = R                               # world position ← body δt
        T[3:, :3] = R                               # world rotation ← body δθ (GTSAM [δθ; δt])
        self._pose_cov = T @ self._cov_pose @ T.T
        tw = np.zeros((6, 6))
        tw[:3, :3] = self.config.velocity_covariance_scale * (R.T @ self._cov_v @ R)
        tw[3:, 3:] = self._cov_bg + self.config.gyro_noise ** 2 / self._imu_dt * np.eye(3)
        self._twist_cov = tw

    def _estimate(self, t: float, status: str, nav: gtsam.NavState) -> FloatingEstimate:
        rot = nav.attitude()
        qx = rot.toQuaternion()
        return FloatingEstimate(
            t=t, status=status, position=np.array(nav.position()),
            quaternion_xyzw=np.array([qx.x(), qx.y(), qx.z(), qx.w()]),
            linear_velocity=np.array(nav.bodyVelocity()),
            angular_velocity=self._gyro - self._bias.gyroscope(),
            pose_covariance=self._pose_cov.copy(), twist_covariance=self._twist_cov.copy(),
            q=self._q.copy(), qd=self._qd.copy(), tau=self._tau_hat.copy(),
            contacts=tuple(bool(s) for s in self._stance),
            contact_forces=self._forces.copy())


@dataclass
class _Keyframe:
    """A keyframe's estimate and leg kinematics (base frame: feet ``p``, velocities ``u``
    relative to their contact points), kept until its leg rows are added."""

    key: int
    t: float
    pose: gtsam.Pose3
    velocity: np.ndarray
    p: np.ndarray
    u: np.ndarray


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b over the last axis, broadcast (``np.cross`` costs ~15 µs of Python per call)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def _align(up_b: np.ndarray) -> np.ndarray:
    """The rotation with yaw 0 whose Rᵀ e_z is ``up_b`` (roll and pitch from gravity)."""
    roll = math.atan2(up_b[1], up_b[2])
    pitch = math.atan2(-up_b[0], math.hypot(up_b[1], up_b[2]))
    return gtsam.Rot3.RzRyRx(roll, pitch, 0.0).matrix()
