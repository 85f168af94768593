"""The floating-base estimator's settings (issue 28 item 3): one frozen dataclass, every
field with a documented default; :meth:`FloatingEstimatorConfig.from_mapping` reads them
from a YAML/ROS-parameter mapping with one-line errors naming the key.

The IMU defaults are the simulated quadruped's sensor models (docs/floating-base.md,
``SensorNoise``): a BMI088-class MEMS IMU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Mapping

__all__ = ['FloatingEstimatorConfig', 'CONTACT_SOURCES']

CONTACT_SOURCES = ('topic', 'force', 'effort')
"""Where a foot's stance comes from: ``topic`` (a Bool per foot, :meth:`add_contact`),
``force`` (the foot force's norm above ``contact_force_threshold``, :meth:`add_foot_force`)
or ``effort`` (estimated: the foot's vertical force from its leg's joint efforts above
``contact_force_threshold``, below half of it to lift off; no contact sensor needed)."""


@dataclass(frozen=True)
class FloatingEstimatorConfig:
    """Settings of :class:`~mbfg_ros.estimation.floating.FloatingEstimator` (SI units)."""

    lag: float = 0.1
    """s of keyframes the fixed-lag smoother keeps before marginalising them."""
    keyframe_rate: float = 100.0
    """Hz: keyframes (NavState + IMU bias keys, leg factors) per second; estimates are
    published at every :meth:`tick` whatever this is (predicted by the IMU preintegration)."""
    force_rate: float = 1000.0
    """Hz: contact forces and τ̂ recomputed at most this often (at a :meth:`tick`; held
    in between)."""
    covariance_rate: float = 20.0
    """Hz: the published covariances (the smoother's marginals, ~70 µs per key) are
    recomputed at most this often (at a keyframe; held in between)."""
    init_time: float = 0.4
    """s of IMU readings, the robot standing still, before the start-up: gravity direction
    (roll, pitch) from their mean specific force, the gyro bias from their mean."""
    gyro_noise: float = 2.4e-4
    """rad/s/√Hz: gyroscope white-noise density."""
    accel_noise: float = 1.6e-3
    """m/s²/√Hz: accelerometer white-noise density."""
    gyro_bias_walk: float = 2e-5
    """rad/s²/√Hz: gyroscope bias random walk."""
    accel_bias_walk: float = 3e-4
    """m/s³/√Hz: accelerometer bias random walk."""
    gyro_bias_sigma: float = 1e-3
    """rad/s: σ of the start-up gyro bias (the mean gyro over ``init_time``)."""
    accel_bias_sigma: float = 0.05
    """m/s²: σ of the accelerometer bias prior (mean 0) at the start-up."""
    encoder_sigma: float = 1e-4
    """rad: σ of the joint encoders (kinematics of the stance legs)."""
    joint_velocity_sigma: float = 0.01
    """rad/s: σ of the measured joint velocities."""
    contact_slip_sigma: float = 0.01
    """m/s: σ of a stance foot's contact-point velocity (slip allowed)."""
    vertical_slip_sigma: float = 0.03
    """m/s: σ of a stance foot's vertical velocity (0: ``contact_slip_sigma``). Looser than
    the horizontal one: a loaded foot sinks into a soft ground or foot pad (the simulated
    solo's stance feet read 1.2 cm/s downwards on average), so the IMU and the flat-ground
    rows decide the vertical velocity."""
    foot_radius: float = 0.0
    """m: feet as balls of this radius rolling without slipping (0: point feet)."""
    ground_flatness_sigma: float = 0.005
    """m: σ of every stance foot's lowest point on the start-up ground plane (flat ground;
    0 switches the prior off, for rough terrain)."""
    touchdown_guard: float = 0.01
    """s: a foot's leg rows are used only once it has been in stance this long (the ball
    still slides and bounces just after the contact flag rises)."""
    liftoff_guard: float = 0.01
    """s: a keyframe's leg rows are added this late, only for the feet still in stance then
    (the foot already moves before the flag drops): the smoother's lag keeps the keyframe
    (must be below ``lag``; 0: at once)."""
    contact_source: str = 'topic'
    """``topic`` (Bool per foot), ``force`` (foot force norm above the threshold) or
    ``effort`` (the vertical force estimated from the leg's efforts above the threshold)."""
    contact_force_threshold: float = 3.0
    """N: with ``contact_source: force`` or ``effort``, a foot is in stance above it."""
    velocity_covariance_scale: float = 2.5
    """The velocity's smoother marginal is published times this: its leg rows take the
    kinematic errors as white (NEES 8.2 and 6.7 on the simulated 3 s and 12 s trots, 3.3
    and 2.7 with 2.5; 3 is consistent). 1: the marginal as it is."""
    stale_after: float = 0.1
    """s without an IMU reading after which estimates are published as ``stale``."""
    max_imu_gap: float = 0.01
    """s: a longer gap between IMU readings is bridged, not integrated as measured: a
    keyframe at each end, the IMU factor across it loosened by the two below (counted)."""
    gap_accel_sigma: float = 3.0
    """m/s²: σ of the mean acceleration across an IMU gap about its end readings' mean."""
    gap_gyro_sigma: float = 0.5
    """rad/s: σ of the mean angular velocity across an IMU gap about its end readings' mean."""

    def __post_init__(self) -> None:
        if isinstance(self.liftoff_guard, (int, float)) and isinstance(self.lag, (int, float)) \
                and self.liftoff_guard >= self.lag:
            raise ValueError(f'liftoff_guard: must be below lag ({self.lag!r}), '
                             f'got {self.liftoff_guard!r}')
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == 'contact_source':
                if v not in CONTACT_SOURCES:
                    raise ValueError(f'contact_source: {v!r} is not one of '
                                     f'{", ".join(CONTACT_SOURCES)}')
                continue
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f'{f.name}: expected a finite number, got {v!r}')
            positive = f.name not in ('foot_radius', 'ground_flatness_sigma',
                                      'vertical_slip_sigma',
                                      'contact_force_threshold', 'touchdown_guard',
                                      'liftoff_guard')
            if v < 0 or (positive and v == 0):
                raise ValueError(f'{f.name}: must be {"> 0" if positive else ">= 0"}, got {v!r}')

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any] | None, where: str = 'config'
                     ) -> 'FloatingEstimatorConfig':
        """The config of a mapping (YAML or ROS parameters); unknown keys and bad values
        raise ``ValueError`` with one line naming ``where`` and the key."""
        d = dict(d or {})
        known = {f.name: f for f in fields(cls)}
        for k in d:
            if k not in known:
                raise ValueError(f'{where}: unknown key {k!r} (known: {", ".join(known)})')
        kw: dict[str, Any] = {}
        for k, v in d.items():
            if k == 'contact_source':
                kw[k] = v
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f'{where}: {k}: expected a number, got {v!r}')
            kw[k] = float(v)
        try:
            return cls(**kw)
        except ValueError as exc:
            raise ValueError(f'{where}: {exc}') from None
