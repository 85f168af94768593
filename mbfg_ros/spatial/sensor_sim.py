"""Simulated sensors and reference motions of a URDF robot (demo, simulator node, benches).

* :func:`simulate_spatial_measurements`: the readings a real arm's drivers publish, from a
  sampled trajectory: ``JointState`` (encoder angle, quantised and noisy; optional rate;
  effort = the applied motor torque where a motor drives the joint) and one ``Imu`` per
  overlay IMU (3-axis gyroscope and specific force with noise, optional orientation with a
  random rotation ``Exp(δ)`` as its error), from the estimator's own sensor model
  (:class:`~mbfg_ros.spatial.sensor_model.SpatialSensorModel`).
* :func:`reference_motion`: a smooth joint-space reference (sums of sines, at rest at t = 0).
* :func:`track_reference`: the robot following it under computed torque (seed 003 §6)
  with a controller model that may differ from the simulated truth (:func:`with_payload`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

import numpy as np

from ..core.measurements import ImuMeasurement, JointMeasurement
from ..core.angles import wrap_angle
from ..planar.sensors import sample_indices
from .model import SpatialModel
from .sensor_model import SpatialSensorModel
from .sensors import quaternion_from_matrix
from .simulate import Simulable, SpatialStepper

__all__ = ['SpatialSensorConfig', 'simulate_spatial_measurements', 'Reference',
           'reference_motion', 'Tracked', 'track_reference', 'with_payload', 'Sensed']


class Sensed(Simulable, Protocol):
    """What the sensor simulation and the tracking controller take of a URDF robot
    (:class:`.system.SpatialSystem` is one; it builds its ``simulate_measurements`` on this
    module): the integrators' :class:`~.simulate.Simulable` whose measurement models are
    the spatial ones (their IMU names and link frames)."""

    def sensor_model(self) -> SpatialSensorModel: ...


@dataclass(frozen=True)
class SpatialSensorConfig:
    """What :func:`simulate_spatial_measurements` produces (a rate of 0 disables a sensor).

    Encoders: ``encoder_rate`` Hz, ``encoder_counts`` per turn (0: no quantisation;
    revolute joints), Gaussian ``encoder_sigma`` (rad or m), rates with
    ``encoder_velocity_sigma`` (None: empty velocity), efforts of the actuated joints with
    ``effort_sigma`` (None: empty effort; NaN for joints no motor drives). IMUs: ``imu_rate``
    Hz, ``gyro_sigma`` rad/s and ``accel_sigma`` m/s² per axis, ``orientation_sigma`` rad
    (None: no orientation, as most IMUs without a filter).
    """

    encoder_rate: float = 500.0
    encoder_counts: int = 0
    encoder_sigma: float = 1e-4
    encoder_velocity_sigma: float | None = None
    effort_sigma: float | None = 0.0
    joints: tuple[str, ...] | None = None
    imu_rate: float = 500.0
    gyro_sigma: float = 0.005
    accel_sigma: float = 0.05
    orientation_sigma: float | None = None
    imus: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ('encoder_rate', 'encoder_sigma', 'imu_rate', 'gyro_sigma', 'accel_sigma'):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f'SpatialSensorConfig.{name}: expected a number >= 0, got {v!r}')
        for name in ('encoder_velocity_sigma', 'effort_sigma', 'orientation_sigma'):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ValueError(f'SpatialSensorConfig.{name}: expected None or a number >= 0, '
                                 f'got {v!r}')
        if self.encoder_counts < 0:
            raise ValueError('SpatialSensorConfig.encoder_counts: expected >= 0')


def _exp_so3(w: np.ndarray) -> np.ndarray:
    th = float(np.linalg.norm(w))
    W = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    if th < 1e-12:
        return np.eye(3) + W
    return np.eye(3) + math.sin(th) / th * W + (1 - math.cos(th)) / th ** 2 * W @ W


def simulate_spatial_measurements(system: Sensed, t: np.ndarray, q: np.ndarray,
                                  qd: np.ndarray, qdd: np.ndarray, tau: np.ndarray | None,
                                  config: SpatialSensorConfig, rng: np.random.Generator
                                  ) -> list[JointMeasurement | ImuMeasurement]:
    """Noisy encoder and IMU records of the samples (t, q, q̇, q̈) with applied actuator
    torques ``tau`` (rows per sample, ``system.actuator_names`` order; None: no effort),
    sorted by stamp (encoders first at equal stamps). Each record is stamped with the time
    of the sample it reads, so the truth is exact there."""
    t = np.asarray(t, float)
    model = system.model
    sm = system.sensor_model()
    names = config.joints if config.joints is not None else model.joint_names
    unknown = [nm for nm in names if nm not in model.joint_names]
    if unknown:
        raise ValueError(f'SpatialSensorConfig.joints: unknown {unknown} (joints: '
                         f'{", ".join(model.joint_names)})')
    jidx = np.array([model.joint_names.index(nm) for nm in names], int)
    revolute = np.array([model.joint_type[j] == 'revolute' for j in jidx])
    unbounded = ~(np.isfinite(model.lower[jidx]) & np.isfinite(model.upper[jidx]))
    act = {nm: k for k, nm in enumerate(system.actuator_names)}
    eff_col = np.array([act.get(nm, -1) for nm in names])
    step = 2.0 * math.pi / config.encoder_counts if config.encoder_counts else 0.0
    out: list[tuple[float, int, JointMeasurement | ImuMeasurement]] = []
    for i in sample_indices(t, config.encoder_rate) if len(names) else []:
        z = q[i, jidx].copy()
        if step:
            z = np.where(revolute, np.round(z / step) * step, z)
        z = z + rng.normal(0.0, config.encoder_sigma, len(z)) if config.encoder_sigma else z
        # a continuous joint's encoder wraps; a joint with limits reports its angle
        z = np.where(revolute & unbounded, wrap_angle(z), z)
        vel = np.zeros(0)
        if config.encoder_velocity_sigma is not None:
            vel = qd[i, jidx] + rng.normal(0.0, config.encoder_velocity_sigma, len(jidx))
        eff = np.zeros(0)
        if config.effort_sigma is not None and tau is not None:
            eff = np.where(eff_col >= 0, np.asarray(tau[i])[np.maximum(eff_col, 0)], np.nan)
            eff = eff + rng.normal(0.0, config.effort_sigma, len(eff)) \
                if config.effort_sigma else eff
        out.append((float(t[i]), 0, JointMeasurement(float(t[i]), tuple(names), z, vel, eff)))
    imus = config.imus if config.imus is not None else sm.imu_names
    for nm in imus:
        if nm not in sm.imu_names:
            raise ValueError(f'SpatialSensorConfig.imus: unknown IMU {nm!r} (overlay imus: '
                             f'{", ".join(sm.imu_names) or "none"})')
        k = sm.imu_names.index(nm)
        for i in sample_indices(t, config.imu_rate):
            g, f, o = sm.imu(k, q[i], qd[i], qdd[i])
            quat = None
            if config.orientation_sigma is not None:
                quat = quaternion_from_matrix(
                    o.h @ _exp_so3(rng.normal(0.0, config.orientation_sigma, 3)))
            out.append((float(t[i]), 1, ImuMeasurement(
                float(t[i]), nm, g.h + rng.normal(0.0, config.gyro_sigma, 3),
                f.h + rng.normal(0.0, config.accel_sigma, 3), quat)))
    out.sort(key=lambda r: (r[0], r[1]))
    return [m for _, _, m in out]


class Reference(NamedTuple):
    """A joint-space reference sampled at ``t``: q_r, q̇_r, q̈_r (rows per sample)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray


def reference_motion(system: Sensed, duration: float, dt: float,
                     amplitude: float = 0.4, seed: int = 0) -> Reference:
    """A smooth reference from ``system.q0``: per joint a sum of two sines of random
    phase, each multiplied by (1 − cos)-ramp over the first second so that the motion starts
    at rest (q̇ = q̈ = 0 at t = 0). Amplitudes are clipped to stay inside the joint limits."""
    rng = np.random.default_rng(seed)
    n = system.n
    t = np.arange(int(round(duration / dt)) + 1) * dt
    freq = rng.uniform(0.2, 0.6, (2, n))
    phase = rng.uniform(0, 2 * np.pi, (2, n))
    room = np.minimum(system.q0 - system.model.lower, system.model.upper - system.q0)
    amp = np.minimum(amplitude, 0.45 * np.where(np.isfinite(room), room, np.inf))
    w = 2 * np.pi * freq
    T = t[:, None, None]
    s = np.sin(w * T + phase) - np.sin(phase)                        # 0 at t = 0
    sd = w * np.cos(w * T + phase)
    sdd = -w * w * np.sin(w * T + phase)
    ramp_t = np.minimum(t, 1.0)[:, None]
    r = 0.5 * (1 - np.cos(np.pi * ramp_t))                         # 0 → 1 over 1 s
    rd = np.where(t[:, None] < 1.0, 0.5 * np.pi * np.sin(np.pi * ramp_t), 0.0)
    rdd = np.where(t[:, None] < 1.0, 0.5 * np.pi ** 2 * np.cos(np.pi * ramp_t), 0.0)
    a = 0.5 * amp
    S, SD, SDD = a * s.sum(1), a * sd.sum(1), a * sdd.sum(1)
    q = system.q0 + r * S
    qd = rd * S + r * SD
    qdd = rdd * S + 2 * rd * SD + r * SDD
    return Reference(t, q, qd, qdd)


class Tracked(NamedTuple):
    """The truth of a tracking run: states at the reference's samples and the applied τ."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray


def track_reference(truth: Sensed, ref: Reference, controller: Sensed | None = None,
                    wn: float = 2 * np.pi * 5.0, zeta: float = 1.0,
                    external: np.ndarray | None = None) -> Tracked:
    """Simulate ``truth`` following ``ref`` under computed torque (seed 003 §6)
    ``τ = ID_c(q, q̇, q̈_r + 2ζω_n (q̇_r − q̇) + ω_n² (q_r − q))`` with the controller's model
    ``controller`` (default: the truth itself), clipped to the URDF effort limits; τ is held
    over each step of ``ref``'s spacing (a 1 kHz-style control loop).

    ``external`` (N, n_act): joint torques of a contact added on the actuated joints over
    each step (issue 27 item 4's pushes), not in the returned τ (the motors' efforts)."""
    ctrl = controller or truth
    dt = float(ref.t[1] - ref.t[0])
    sim = SpatialStepper(truth, dt, q0=ref.q[0], qd0=ref.qd[0])
    lim = np.where(np.isfinite(truth.model.effort_limit), truth.model.effort_limit, np.inf)
    lim = lim[np.asarray(truth.model.actuated, bool)]
    kp, kd = wn * wn, 2 * zeta * wn
    N = len(ref.t)
    Q, QD, QDD = (np.zeros((N, truth.n)) for _ in range(3))
    TAU = np.zeros((N, truth.B.shape[1]))
    for k in range(N):
        a = ref.qdd[k] + kd * (ref.qd[k] - sim.qd) + kp * (ref.q[k] - sim.q)
        tau = np.clip(ctrl.torques(sim.q, sim.qd, a), -lim, lim)
        applied = tau if external is None else tau + external[k]
        sim.qdd = truth.forward(sim.q, sim.qd, applied)     # q̈ under the torque now applied
        Q[k], QD[k], QDD[k], TAU[k] = sim.q, sim.qd, sim.qdd, tau
        if k + 1 < N:
            sim.step(applied)
    return Tracked(ref.t, Q, QD, QDD, TAU)


def with_payload(model: SpatialModel, factor: float, link: int | None = None) -> SpatialModel:
    """``model`` with the mass and inertia of ``link`` (default: the last link, the tool)
    scaled by ``factor`` (e.g. 1.2: a payload 20 % heavier than the controller believes)."""
    b = model.nb - 1 if link is None else int(link)
    mass = np.array(model.mass, float)
    inertia = np.array(model.inertia, float)
    mass[b] *= factor
    inertia[b] *= factor
    mass.setflags(write=False)
    inertia.setflags(write=False)
    return replace(model, mass=mass, inertia=inertia)
