"""The innovation gate and resets for precise sensors and imperfect models (issue 25 item 6).

On DFKI's real double pendulum the estimator told the encoders' true noise used to reject
the readings as outliers (a cap tied to the sensor's σ, a model a little off), run on the
model alone and reset again and again (44 resets in 20 s, estimate 240-377 mrad off).
The gate now takes the innovation's variance from the smoother's prediction plus the model
error the innovations show (``Estimator._gate``); a reset comes only when the estimate is
truly lost, and is counted with its reason.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import CONFIG, DATA
from scipy.integrate import solve_ivp
from scipy.signal import savgol_filter
from support.dfki_reference import DFKI, dfki_terms

from mbfg_ros.core.measurements import JointMeasurement
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.planar.problems.measured import load_joint_csv, measured_inverse, torque_fit

YAML = CONFIG / 'dfki_double_pendulum.yaml'
DP = load_system(YAML)
RUNS = sorted((DATA / 'dfki').glob('design_A.0_20220815_sys_id_trajectory_*.csv'))
JOINTS = ('shoulder', 'elbow')


def encoder_noise(pos: np.ndarray, window: int = 15, order: int = 4) -> float:
    """The encoders' noise σ estimated from the log itself: the standard deviation of the
    residual of local polynomials (``order`` 4 over ``window`` 15 samples = 30 ms at
    500 Hz, non-overlapping windows, both joints), corrected for the fit's degrees of
    freedom (× sqrt(w / (w − order − 1))). Over 30 ms the pendulum's motion is a quartic
    to far below the noise, so what the fit leaves is the noise (quantisation at 3.8e-4
    rad steps included)."""
    x = np.arange(window) - window // 2
    res = []
    for s in range(0, len(pos) - window, window):
        seg = pos[s:s + window]
        coef = np.polyfit(x, seg, order)
        res.append(seg - np.vander(x, order + 1) @ coef)
    r = np.concatenate(res).reshape(-1)
    return float(np.std(r) * math.sqrt(window / (window - order - 1)))


def wrapped(e) -> np.ndarray:
    """Angle differences in (−π, π] (the estimate's joint angles are wrapped, the log's are
    not: the elbow turns past ±π)."""
    return np.angle(np.exp(1j * np.asarray(e, dtype=float)))


def run_estimator(path, seconds: float, **cfg):
    """The estimator on the first ``seconds`` of a DFKI run (positions and measured torques,
    as the node gets them from a JointState), one tick per sample. Returns (estimator,
    estimates, positions, measured torques, encoder σ)."""
    d = np.genfromtxt(path, delimiter=',', names=True)
    n = int(seconds * 500)
    t = d['time'][:n]
    pos = np.column_stack((d['pos_meas1'], d['pos_meas2']))[:n]
    tau = np.column_stack((d['tau_meas1'], d['tau_meas2']))[:n]
    sigma = encoder_noise(pos)
    est = Estimator(DP, EstimatorConfig(frequency=500.0, lag_duration=0.05,
                                        encoder_sigma=sigma, **cfg))
    outs = []
    for k in range(n):
        est.add(JointMeasurement(t[k], JOINTS, pos[k], np.array([]), tau[k]))
        outs.append(est.tick(t[k]))
    return est, outs, pos, tau, sigma


def test_the_encoder_noise_estimate_recovers_a_known_noise():
    """The estimator of the encoders' σ on a smooth swing plus white noise of known σ."""
    t = np.arange(5000) * 0.002
    clean = np.column_stack((0.8 * np.sin(2.1 * t), 1.2 * np.sin(3.3 * t + 0.4)))
    for sigma in (3e-5, 2e-4):
        noisy = clean + np.random.default_rng(1).normal(0.0, sigma, clean.shape)
        assert encoder_noise(noisy) == pytest.approx(sigma, rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize('path', RUNS, ids=[p.stem[-2:] for p in RUNS])
def test_dfki_runs_with_the_measured_encoder_noise_never_reset(path):
    """The issue's case: ``encoder_sigma`` set to the encoders' measured noise, every other
    parameter at its default (``dynamics_sigma`` 0.5 where DFKI's model misses q̈ by a few
    rad/s²). Before: 17 resets in the first 6 s of run 01, the estimate hundreds of mrad
    off. Now: no reset, few readings rejected, the estimate within 20 mrad of
    the encoders throughout (before: hundreds)."""
    est, outs, pos, _, sigma = run_estimator(path, 4.0)
    assert 1e-4 < sigma < 4e-4, sigma                # measured: 1.7e-4 to 2.5e-4 rad
    c = est.counters
    assert c['resets'] == 0 and c['reset:diverged'] == 0, est.last_reset_reason
    assert c['rejected_outlier'] < 0.01 * len(outs), c['rejected_outlier']
    err = wrapped([o.joint_position - p for o, p in zip(outs, pos) if o is not None])
    assert len(err) > 0.99 * len(outs)
    assert np.abs(err).max() < 0.02, np.abs(err).max(axis=0)     # run 00: 6 mrad


@pytest.mark.slow
@pytest.mark.parametrize('path', RUNS, ids=[p.stem[-2:] for p in RUNS])
def test_dfki_runs_beat_the_raw_encoder_and_match_the_offline_inverse_torques(path):
    """``encoder_sigma`` the measured noise and ``dynamics_sigma`` the model's own error:
    DFKI's model misses the measured torques by 0.16 / 0.08 N·m RMS on these runs
    (mbfg-inverse), 1-3 rad/s² of q̈ RMS through M⁻¹ and several times that at the
    velocity reversals (stiction): 10 rad/s² on the angles, 3 m/s² (10 rad/s² at 0.3 m) on
    the points. Then, with no reset, the estimated angles are compared with the zero-lag
    local quartic of the encoder log (31 samples: a truth proxy with ~0.4 σ of noise of its
    own, which favours the raw encoder it is made of). Measured (RMS, estimate / raw):
    below 1 on most runs and joints, 1.15 on the shoulder of runs 04 and 05 (the fastest,
    where this model's q̈ misses most): asserted is < 1.2 per joint and < 1.1 on average,
    not "better everywhere" (issue 25 asked for better; not reached on 04/05 with a
    σ justified by the model's error). τ̂ (with the measured torques as the known input,
    as the node gets them from JointState.effort) is as close to the measured torque as
    mbfg-inverse's offline torques on the same samples."""
    est, outs, pos, tau, _ = run_estimator(path, 4.0, dynamics_sigma_angle=10.0,
                                           dynamics_sigma_length=3.0)
    assert est.counters['resets'] == 0, est.last_reset_reason
    n = len(outs)
    proxy = savgol_filter(pos, 31, 4, axis=0)
    ok = [k for k in range(50, n - 20) if outs[k] is not None]
    est_rms = np.sqrt(np.mean(wrapped([outs[k].joint_position - proxy[k] for k in ok]) ** 2,
                              0))
    raw_rms = np.sqrt(np.mean((pos[ok] - proxy[ok]) ** 2, 0))
    assert np.all(est_rms < 1.2 * raw_rms), (est_rms, raw_rms)
    assert np.mean(est_rms / raw_rms) < 1.1, (est_rms, raw_rms)
    tau_rms = np.sqrt(np.mean([(outs[k].tau - tau[k]) ** 2 for k in ok], 0))
    log = load_joint_csv(path, list(JOINTS), ['pos_meas1', 'pos_meas2'],
                         ['vel_meas1', 'vel_meas2'], ['tau_meas1', 'tau_meas2'])
    inv = measured_inverse(DP, log)
    inv_rms, _ = torque_fit(inv.tau[:n], inv.effort[:n], 50)
    assert np.all(tau_rms <= inv_rms), (tau_rms, inv_rms)


def test_a_model_20_percent_off_in_mass_with_a_precise_encoder_does_not_reset():
    """DFKI's plant (their equations, scipy) with both links 20 % heavier than the model the
    estimator has (masses and inertias), 2e-5 rad encoders at 500 Hz, known torques:
    the model's q̈ is off by up to several rad/s², the encoder 200x more precise than the
    default. Before: 5 resets (reset:diverged), errors of 0.7 rad. Now: none, and the
    estimate stays within 20 encoder σ of the truth (measured: 5 σ)."""
    plant = dict(DFKI, m1=1.2 * DFKI['m1'], m2=1.2 * DFKI['m2'], I1=1.2 * DFKI['I1'],
                 I2=1.2 * DFKI['I2'])
    rate, T = 500.0, 3.0
    t = np.arange(int(T * rate) + 1) / rate

    def u(tk):
        return np.array([0.6 * math.sin(3 * tk), 0.3 * math.cos(5 * tk)])

    def rhs(tk, x):
        M, C, G, F = dfki_terms(plant, x[:2], x[2:])
        return np.concatenate((x[2:], np.linalg.solve(M, u(tk) - C @ x[2:] + G - F)))
    sol = solve_ivp(rhs, (0, T), [1.5, -0.8, 0.0, 0.0], method='DOP853', rtol=1e-10,
                    atol=1e-12, t_eval=t, max_step=1e-3)
    sigma = 2e-5
    rng = np.random.default_rng(5)
    est = Estimator(DP, EstimatorConfig(frequency=rate, lag_duration=0.05,
                                        encoder_sigma=sigma))
    err = []
    for k, tk in enumerate(t):
        est.add(JointMeasurement(tk, JOINTS, sol.y[:2, k] + sigma * rng.standard_normal(2),
                                 np.array([]), u(tk)))
        e = est.tick(tk)
        if e is not None and tk > 0.2:
            err.append(np.angle(np.exp(1j * (e.joint_position - sol.y[:2, k]))))
    assert est.counters['resets'] == 0, est.last_reset_reason
    assert len(err) > 0.9 * len(t)
    assert np.abs(err).max() < 20 * sigma, np.abs(err).max(axis=0)
