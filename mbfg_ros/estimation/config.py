"""The estimator's parameters (:class:`EstimatorConfig`, robot_localization's names where they
exist) and the per-coordinate noise they give (:func:`coordinate_sigmas`)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.interface import MultibodySystem as System

__all__ = ['EstimatorConfig', 'LIVE_FIELDS', 'coordinate_sigmas']


@dataclass(frozen=True)
class EstimatorConfig:
    """Estimator parameters (robot_localization's names where they exist).

    Noise σ's are used when a message carries no variance. ``encoder_sigma``
    is in rad for revolute joints and m for prismatic ones. ``command_joints``,
    ``kp``, ``kd`` are read by the ROS node's torque controller, not here.
    """

    frequency: float = 500.0            # tick rate, Hz (nominal dt)
    lag_duration: float = 0.05          # smoother window, s
    sensor_timeout: float = 0.1         # s without readings -> status 'stale'
    encoder_sigma: float = 1.0e-3       # rad (revolute) or m (prismatic); a coarse encoder:
    #                                     quantisation alone is resolution/√12 = 4.4e-4 rad at
    #                                     12 bit, 1.1e-4 at 14 bit, 2.8e-5 at 16 bit: set yours
    encoder_rate_sigma: float = 0.05    # rad/s or m/s
    gyro_sigma: float = 0.01            # rad/s
    accel_sigma: float = 0.05           # m/s²
    orientation_sigma: float = 0.01     # rad
    dynamics_sigma: float = 0.5         # q̈ − q̈(q, q̇, τ), units of q̈ (default of the two below)
    dynamics_sigma_length: float = 0.0  # m/s² on point coordinates; 0: dynamics_sigma
    dynamics_sigma_angle: float = 0.0   # rad/s² on angle coordinates; 0: dynamics_sigma
    joint_dynamics_sigma: tuple[tuple[str, float], ...] = ()   # (joint, rad/s²) on its angle
    unknown_effort_sigma: float = 0.0   # N·m or N: an actuator whose effort is not given (or
    #                                     expired) applies an unknown torque of this size, its
    #                                     effect M⁻¹Bσ added to the dynamics σ; 0: it applies
    #                                     zero torque (a passive or unpowered mechanism)
    jerk_process: bool = False          # always add the integrator's q̈_k − q̈_{k−1} rows
    #                                     (σ = integrator_jerk·dt), not only for unknown
    #                                     efforts: q̈ then follows the encoders, not only the
    #                                     dynamics (external torques, issue 27 item 4)
    disturbance_process: bool = False   # with known efforts, those rows bound the change of
    #                                     the mismatch q̈ − q̈(q, q̇, τ) instead of q̈ (implies
    #                                     jerk_process): a motor torque step moves q̈ with the
    #                                     model, only contacts show (estimation.disturbance)
    contact_effort_fraction: float = 0.2   # the innovation gate's room for a contact when
    #                                     efforts are measured: an external torque of this
    #                                     fraction of each actuated joint's effort limit (σ),
    #                                     its effect on q̈ in the gate's variance; 0: none
    #                                     (innovation_gate.contact_sigmas)
    constraint_sigma: float = 1.0e-6    # Φ (m) and Φq q̇ (m/s)
    integrator_sigma: float = 1.0e-6    # trapezoidal residuals at dt -> 0
    integrator_jerk: float = 1000.0     # bound on |q⃛| for the truncation error dt³/12·|q⃛|
    integrator_jerk_length: float = 0.0  # m/s³ on point coordinates; 0: integrator_jerk
    integrator_jerk_angle: float = 0.0   # rad/s³ on angle coordinates; 0: integrator_jerk
    init_sigma_q: float = 0.01          # prior at start-up
    init_sigma_qd: float = 1.0          # prior on q̇ when no rate reading seeds it
    init_sigma_qdd: float = 100.0
    command_joints: tuple[str, ...] = ()
    kp: float = 0.0
    kd: float = 0.0
    covariance_every: int = 10          # marginal covariance every k ticks
    joint_rejection_threshold: float = 10.0  # Mahalanobis distance of an outlier; 0: no gate
    imu_rejection_threshold: float = 10.0    # the same for gyroscope/accelerometer/orientation
    outlier_reset_time: float = 0.2     # s of one sensor's readings all rejected -> re-init
    backwards_tolerance: float = 0.5    # s a stamp may go back before a reset (bag loop)
    max_tick_gap: float = 0.5           # s between ticks before a re-initialisation
    max_pending: int = 10000            # buffered readings (bursts) before dropping oldest
    relinearize_threshold: float = 0.0  # ISAM2; 0: linearise once (see class docstring)
    relinearize_skip: int = 10

    def __post_init__(self) -> None:
        positive = ('frequency', 'lag_duration', 'sensor_timeout', 'encoder_sigma',
                    'encoder_rate_sigma', 'gyro_sigma', 'accel_sigma', 'orientation_sigma',
                    'dynamics_sigma', 'constraint_sigma', 'integrator_sigma', 'integrator_jerk',
                    'init_sigma_q',
                    'init_sigma_qd', 'init_sigma_qdd', 'backwards_tolerance', 'max_tick_gap',
                    'outlier_reset_time')
        for name in positive:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f'EstimatorConfig.{name} must be a positive number, '
                                 f'got {value!r}')
        if self.lag_duration < 2.0 / self.frequency:
            raise ValueError(f'EstimatorConfig.lag_duration ({self.lag_duration} s) must '
                             f'cover at least two ticks (2/frequency = '
                             f'{2.0 / self.frequency} s)')
        for name in ('joint_rejection_threshold', 'imu_rejection_threshold'):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f'EstimatorConfig.{name} must be >= 0 (0: no gate), '
                                 f'got {value!r}')
        for name in ('dynamics_sigma_length', 'dynamics_sigma_angle', 'integrator_jerk_length',
                     'integrator_jerk_angle', 'unknown_effort_sigma',
                     'contact_effort_fraction'):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f'EstimatorConfig.{name} must be >= 0 (0: the common value), '
                                 f'got {value!r}')
        for item in self.joint_dynamics_sigma:
            if not (len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], (int, float)) and math.isfinite(item[1])
                    and item[1] > 0):
                raise ValueError('EstimatorConfig.joint_dynamics_sigma: expected (joint name, '
                                 f'positive sigma) pairs, got {item!r}')
        if int(self.covariance_every) < 1 or int(self.max_pending) < 1:
            raise ValueError('EstimatorConfig.covariance_every and max_pending must be >= 1')


LIVE_FIELDS = ('encoder_sigma', 'encoder_rate_sigma', 'gyro_sigma', 'accel_sigma',
               'orientation_sigma', 'dynamics_sigma', 'dynamics_sigma_length',
               'dynamics_sigma_angle', 'unknown_effort_sigma')
"""The :class:`EstimatorConfig` fields :meth:`Estimator.reconfigure` changes while running."""


def coordinate_sigmas(sys: System, cfg: EstimatorConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per coordinate of q: the dynamics σ (units of q̈) and the integrator's jerk bound.

    Point coordinates are lengths (m/s², m/s³), relative coordinates angles
    (rad/s², rad/s³); each kind takes its own value when given (> 0), else the
    common ``dynamics_sigma`` / ``integrator_jerk``. ``joint_dynamics_sigma``
    overrides the angle coordinate equal to a named joint's angle.

    :raises ValueError: a joint that is unknown or has no angle coordinate.
    """
    n = sys.n
    angle = np.zeros(n, bool)
    angle[list(sys.angle_coordinates)] = True
    sd = np.where(angle, cfg.dynamics_sigma_angle or cfg.dynamics_sigma,
                  cfg.dynamics_sigma_length or cfg.dynamics_sigma).astype(float)
    jerk = np.where(angle, cfg.integrator_jerk_angle or cfg.integrator_jerk,
                    cfg.integrator_jerk_length or cfg.integrator_jerk).astype(float)
    for name, sigma in cfg.joint_dynamics_sigma:
        c = sys.joint_coordinate(name)
        if c is None:
            raise ValueError(f'EstimatorConfig.joint_dynamics_sigma: {name!r} is not a revolute '
                             'joint whose angle is a coordinate of q (joints: '
                             f'{", ".join(sorted(sys.joint_names)) or "none"})')
        sd[c] = sigma
    return sd, jerk
