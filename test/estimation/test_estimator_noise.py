"""Estimator noise in physical units (issue 11, item 4): dynamics σ and integrator jerk per
coordinate kind (length: point coordinates, angle: relative coordinates), per joint."""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import CONFIG, DATA
from support.dfki_reference import DFKI, simulate_dfki

from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig, coordinate_sigmas
from mbfg_ros.core.measurements import JointMeasurement
from mbfg_ros.planar.dynamics import load_system

DP = load_system(CONFIG / 'dfki_double_pendulum.yaml')       # x1 y1 x2 y2 | 2 angles


def test_default_is_the_old_single_sigma_on_every_coordinate():
    for path in (CONFIG / 'dfki_double_pendulum.yaml', DATA / 'fourbar_estimator.yaml'):
        sys_ = load_system(path)
        sd, jerk = coordinate_sigmas(sys_, EstimatorConfig(dynamics_sigma=0.7,
                                                            integrator_jerk=300.0))
        np.testing.assert_array_equal(sd, np.full(sys_.n, 0.7))
        np.testing.assert_array_equal(jerk, np.full(sys_.n, 300.0))
        est = Estimator(sys_, EstimatorConfig(integrator_jerk=300.0, integrator_sigma=1e-6))
        dt = 1.0 / est.config.frequency
        np.testing.assert_allclose(est._integrator_sigma(dt), 1e-6 + 300.0 * dt ** 3 / 12)


def test_kinds_and_joints_get_their_own_sigma():
    cfg = EstimatorConfig(dynamics_sigma=0.5, dynamics_sigma_length=0.02,
                          dynamics_sigma_angle=0.1, integrator_jerk_angle=50.0,
                          joint_dynamics_sigma=(('elbow', 0.3),))
    sd, jerk = coordinate_sigmas(DP, cfg)
    np.testing.assert_array_equal(sd, [0.02] * 4 + [0.1, 0.3])
    np.testing.assert_array_equal(jerk, [1000.0] * 4 + [50.0] * 2)
    est = Estimator(DP, cfg)
    dt = 1.0 / cfg.frequency
    np.testing.assert_allclose(est._integrator_sigma(dt),
                               np.tile(1e-6 + np.array([1000.0] * 4 + [50.0] * 2) * dt ** 3 / 12,
                                       2))
    np.testing.assert_allclose(est._state_noise.sigmas()[-DP.n:], sd)
    # a merged tick of 3 periods: each coordinate's own σ_d/√3 in the state factor (the
    # 2m constraint rows as configured), the gate's σ_d as configured
    n, m = DP.n, DP.m
    gate, state = est._dynamics_noise(np.zeros(3 * n), np.zeros(len(DP.actuator_joints)),
                                      3.0 / cfg.frequency)
    np.testing.assert_allclose(state[-n:], sd / math.sqrt(3.0), rtol=1e-12)
    np.testing.assert_array_equal(state[:2 * m], np.full(2 * m, cfg.constraint_sigma))
    np.testing.assert_array_equal(gate, sd)


@pytest.mark.parametrize('cfg, message', [
    (dict(dynamics_sigma_angle=-1.0), 'dynamics_sigma_angle must be >= 0'),
    (dict(joint_dynamics_sigma=(('elbow', 0.0),)), 'joint_dynamics_sigma: expected'),
])
def test_bad_values_are_rejected(cfg, message):
    with pytest.raises(ValueError, match=message):
        EstimatorConfig(**cfg)


def test_unknown_joint_is_named():
    with pytest.raises(ValueError, match="'knee' is not a revolute joint.*elbow, shoulder"):
        Estimator(DP, EstimatorConfig(joint_dynamics_sigma=(('knee', 0.1),)))


def test_fine_encoders_with_physical_sigmas_beat_finite_differences_on_the_full_model():
    """DFKI's plant (their equations, scipy) with 3e-5 rad encoders at 500 Hz and known
    torques: the estimator with the friction+rotor model and σ in physical units (angle rows
    0.05 rad/s², point rows 0.015 m/s² = 0.05 rad/s² at 0.3 m) gives a joint-rate error below the
    finite difference of the raw encoders."""
    rate, T = 500.0, 1.0
    t = np.arange(int(T * rate) + 1) / rate

    def u(tk):
        return np.array([0.3 * math.sin(3 * tk), 0.2 * math.cos(5 * tk)])

    sol = simulate_dfki(DFKI, u, t, [0.0, 0.0, 0.0, 0.0], rtol=1e-11, max_step=1e-3)
    rng = np.random.default_rng(0)
    sigma = 3e-5
    meas = [JointMeasurement(tk, ('shoulder', 'elbow'),
                             sol.y[:2, k] + sigma * rng.standard_normal(2),
                             np.array([]), u(tk)) for k, tk in enumerate(t)]
    cfg = EstimatorConfig(frequency=rate, lag_duration=0.05, encoder_sigma=sigma,
                          dynamics_sigma_angle=0.05, dynamics_sigma_length=0.015,
                          joint_rejection_threshold=0.0)
    est = Estimator(DP, cfg)
    err = []
    for k, m in enumerate(meas):
        est.add(m)
        e = est.tick(m.t)
        if e is not None and m.t > 0.2:
            err.append(e.joint_velocity - sol.y[2:, k])
    est_rms = float(np.sqrt(np.mean(np.square(err))))
    pos = np.array([m.position for m in meas])
    fd = np.diff(pos, axis=0) * rate
    fd_rms = float(np.sqrt(np.mean(np.square(fd - 0.5 * (sol.y[2:, 1:] + sol.y[2:, :-1]).T))))
    assert est_rms < 0.1 * fd_rms, (est_rms, fd_rms)     # measured: 1e-4 vs 2e-2 rad/s


def test_the_integrators_sigmas_kept_per_dt_are_the_computed_ones():
    """The integrator's σ per step dt (and with its jerk rows), kept per dt for merged ticks
    (issue 24, branch tick7), are :meth:`_integrator_sigma`'s and ``integrator_jerk``·dt
    (a merged tick of r grid periods: ``integrator_jerk``·T·√r,
    test/estimation/test_merged_ticks.py) at every dt met, again on a second look-up, and
    read-only."""
    system = load_system(CONFIG / 'fourbar.yaml')
    est = Estimator(system, EstimatorConfig(frequency=500.0, unknown_effort_sigma=1.0,
                                            integrator_jerk=50.0))
    T = 2e-3
    for dt in (2e-3, 4e-3, 4.000000000000001e-3, 6e-3, 2e-3, 4e-3):
        integ, jerk = est._step_sigmas(dt)
        assert np.array_equal(integ, est._integrator_sigma(dt))
        h = dt if dt <= T else T * math.sqrt(dt / T)
        assert np.array_equal(jerk, np.concatenate((est._integrator_sigma(dt),
                                                    est._jerk * h)))
        assert not integ.flags.writeable and not jerk.flags.writeable
    assert len(est._step_sigma) == 4
