"""The innovation gate and resets for precise sensors and imperfect models (issue 25 item 6).

On DFKI's real double pendulum the estimator told the encoders' true noise used to reject
the readings as outliers (a cap tied to the sensor's σ, a model a little off), run on the
model alone and reset again and again (44 resets in 20 s, estimate 240-377 mrad off).
The gate now takes the innovation's variance from the smoother's prediction plus the model
error the innovations show (``Estimator._gate``); a reset comes only when the estimate is
truly lost, and is counted with its reason.

Then the recipe for precise encoders (docs/estimator.md): the dynamics σ from the model's
measured q̈ error (its 99th percentile) makes the angles better than the raw encoder on
every run and joint; τ̂ on encoders only is as good as a causal peer can be, and its gap
to the offline inverse is measured and explained.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import CONFIG, DATA
from scipy.signal import savgol_coeffs, savgol_filter
from support.dfki_reference import DFKI, dfki_tau, dfki_terms, simulate_dfki

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


def load_run(path, seconds: float) -> tuple[np.ndarray, ...]:
    """(t, positions, velocities, measured torques) of the first ``seconds`` of a DFKI run."""
    d = np.genfromtxt(path, delimiter=',', names=True)
    n = int(seconds * 500)
    return (d['time'][:n], np.column_stack((d['pos_meas1'], d['pos_meas2']))[:n],
            np.column_stack((d['vel_meas1'], d['vel_meas2']))[:n],
            np.column_stack((d['tau_meas1'], d['tau_meas2']))[:n])


def local_quartic(pos: np.ndarray, deriv: int = 0) -> np.ndarray:
    """The zero-lag local quartic of the encoder log (31 samples, 62 ms at 500 Hz): the
    tests' truth proxy of q (``deriv`` 0) and its derivatives at the nominal 2 ms step."""
    return savgol_filter(pos, 31, 4, deriv=deriv, delta=0.002, axis=0)


def model_qdd_error(path, seconds: float = 4.0) -> np.ndarray:
    """|q̈ − q̈(q, q̇, τ)| per sample and joint of DFKI's documented model (their equations,
    ``support.dfki_reference``, not the package's) on a run: q, q̇, q̈ from the zero-lag
    local quartic of the encoders (its q̈ noise ~2 rad/s² at these encoders' σ, small
    beside the model's error), τ the measured torques."""
    _, pos, _, tau = load_run(path, seconds)
    q, qd, qdd = (local_quartic(pos, d) for d in range(3))
    err = []
    for k in range(50, len(pos) - 50):
        M, C, G, F = dfki_terms(DFKI, q[k], qd[k])
        err.append(qdd[k] - np.linalg.solve(M, tau[k] - C @ qd[k] + G - F))
    return np.abs(np.array(err))


@pytest.fixture(scope='module')
def precise_dynamics_sigma() -> dict:
    """``dynamics_sigma_angle`` / ``_length`` from the model's measured error (the recipe
    of docs/estimator.md, "Precise encoders"): the model's q̈ error on these runs is
    4.9 / 7.8 rad/s² RMS (shoulder / elbow) but heavy-tailed (stiction at the velocity
    reversals: 99th percentile 17.8 / 25.1, up to 57), and a Gaussian σ at the RMS makes
    the smoother trust the model exactly where it fails. So σ_angle = 1.2 × the worst
    joint's 99th percentile (30 rad/s²) and σ_length = that × l1 (9 m/s² at the 0.3 m
    link). Run 11 is left out: sampled irregularly (1.2-3.8 ms), where a fixed-step
    quartic's q̈ is wrong."""
    err = np.concatenate([model_qdd_error(p) for p in RUNS if not p.stem.endswith('11')])
    p99 = np.percentile(err, 99, axis=0)
    assert 20.0 < p99.max() < 30.0, p99                 # measured 17.8 / 25.1 rad/s²
    angle = 1.2 * float(p99.max())
    return {'dynamics_sigma_angle': angle, 'dynamics_sigma_length': DFKI['l1'] * angle}


@pytest.fixture(scope='module')
def velocity_sigma() -> float:
    """The motor-reported velocities' noise (``vel_meas``, what a ros2_control driver of
    these motors puts in JointState.velocity): RMS about the local quartic's q̇, both
    joints, the runs sampled at a steady 2 ms (not 11). Measured 0.09 rad/s, at lag 0
    (shifting ``vel_meas`` by ±1-6 samples only makes it worse)."""
    res = []
    for p in RUNS:
        if not p.stem.endswith('11'):
            _, pos, vel, _ = load_run(p, 4.0)
            res.append((vel - local_quartic(pos, 1))[50:-50])
    sigma = float(np.sqrt(np.mean(np.concatenate(res) ** 2)))
    assert 0.05 < sigma < 0.15, sigma
    return sigma


def run_estimator(path, seconds: float, velocity: bool = False, effort: bool = True, **cfg):
    """The estimator on the first ``seconds`` of a DFKI run (positions and measured torques,
    as the node gets them from a JointState; with ``velocity`` the motors' velocities too,
    as JointState.velocity (give ``encoder_rate_sigma``); without ``effort`` no torques:
    the node on encoders only), one tick per sample. Returns (estimator, estimates,
    positions, measured torques, encoder σ)."""
    t, pos, vel, tau = load_run(path, seconds)
    sigma = encoder_noise(pos)
    est = Estimator(DP, EstimatorConfig(frequency=500.0, lag_duration=0.05,
                                        encoder_sigma=sigma, **cfg))
    outs = []
    empty = np.array([])
    for k in range(len(t)):
        est.add(JointMeasurement(t[k], JOINTS, pos[k], vel[k] if velocity else empty,
                                 tau[k] if effort else empty))
        outs.append(est.tick(t[k]))
    return est, outs, pos, tau, sigma


def angle_rms_vs_raw(outs: list, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """(estimate RMS, raw encoder RMS, ticks compared) about the truth proxy, per joint.

    The proxy is the zero-lag local quartic of the encoder log (``local_quartic``). It is
    not independent of the raw encoder: its centre weight s₀ = 0.114 on the reading itself
    makes the raw error look sqrt(1 − s₀) = 0.94 of what it is, so it favours the raw
    encoder (the comparison is conservative). Its 29 Hz bandwidth also leaves out real
    motion at 30-60 Hz that the encoders show (the residual is correlated, lag-1
    autocorrelation +0.3 to +0.4 where white noise gives −0.05), which counts against both
    alike. With the recommended settings a 21-sample proxy gives ratios of 0.68-0.93; a
    15-sample one, whose centre weight (0.24) favours the raw encoder more, 0.63-1.03
    (1.03: run 04's shoulder). A one-sided proxy from later samples only (independent of
    both) is too biased to use: its raw-encoder RMS is 1.2-2.6 σ."""
    n = len(outs)
    proxy = local_quartic(pos)
    ok = [k for k in range(50, n - 20) if outs[k] is not None]
    est = np.sqrt(np.mean(wrapped([outs[k].joint_position - proxy[k] for k in ok]) ** 2, 0))
    raw = np.sqrt(np.mean((pos[ok] - proxy[ok]) ** 2, 0))
    return est, raw, ok


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
def test_dfki_runs_beat_the_raw_encoder_and_match_the_offline_inverse_torques(
        path, precise_dynamics_sigma):
    """``encoder_sigma`` the measured noise and ``dynamics_sigma_angle`` / ``_length`` from
    the model's measured q̈ error (``precise_dynamics_sigma``: 30 rad/s², 9 m/s²), positions
    and measured torques only: no reset, and the estimated angles closer to the truth
    proxy than the raw encoder on every run and joint (``angle_rms_vs_raw``; a proxy that
    favours the raw encoder). Measured (RMS, estimate / raw, shoulder / elbow): 0.73-0.98
    / 0.80-0.92, the worst the shoulder of run 04 (0.98), the fastest run. Before (σ 10
    rad/s², 3 m/s², from the model's RMS error): 1.14 and 1.19 on the shoulder of runs 04
    and 05, the smoother trusting the model through the stiction at the reversals. τ̂
    (with the measured torques as the known input, as the node gets them from
    JointState.effort) is about as close to the measured torque as mbfg-inverse's offline
    torques on the same samples: 0.48-1.03x (run 13's shoulder 1.03), asserted < 1.1x;
    without the torques as input see the encoders-only test below."""
    est, outs, pos, tau, _ = run_estimator(path, 4.0, **precise_dynamics_sigma)
    assert est.counters['resets'] == 0, est.last_reset_reason
    est_rms, raw_rms, ok = angle_rms_vs_raw(outs, pos)
    assert np.all(est_rms < raw_rms), (est_rms / raw_rms, est_rms, raw_rms)
    n = len(outs)
    tau_rms = np.sqrt(np.mean([(outs[k].tau - tau[k]) ** 2 for k in ok], 0))
    log = load_joint_csv(path, list(JOINTS), ['pos_meas1', 'pos_meas2'],
                         ['vel_meas1', 'vel_meas2'], ['tau_meas1', 'tau_meas2'])
    inv = measured_inverse(DP, log)
    inv_rms, _ = torque_fit(inv.tau[:n], inv.effort[:n], 50)
    assert np.all(tau_rms < 1.1 * inv_rms), (tau_rms, inv_rms)


@pytest.mark.slow
@pytest.mark.parametrize('path', [p for p in RUNS if p.stem[-2:] in ('04', '05')],
                         ids=['04', '05'])
def test_dfki_motor_velocities_widen_the_margin_over_the_raw_encoder(
        path, precise_dynamics_sigma, velocity_sigma):
    """The motors' own velocities (``vel_meas``: DFKI's AK80-6 report position, velocity
    and current in every CAN reply, so a ros2_control driver of them fills
    JointState.velocity) given to the estimator with their measured noise as
    ``encoder_rate_sigma`` (0.09 rad/s, not the default 0.05): on the two fastest runs,
    the hardest, the angles' RMS / raw goes from 0.98 / 0.91 (run 04) to 0.93 / 0.81;
    asserted < 0.96 per joint, i.e. better than positions alone on the worst case."""
    est, outs, pos, _, _ = run_estimator(path, 4.0, velocity=True,
                                         encoder_rate_sigma=velocity_sigma,
                                         **precise_dynamics_sigma)
    assert est.counters['resets'] == 0, est.last_reset_reason
    est_rms, raw_rms, _ = angle_rms_vs_raw(outs, pos)
    assert np.all(est_rms < 0.96 * raw_rms), (est_rms / raw_rms, est_rms, raw_rms)


def causal_local_quadratic_torques(pos: np.ndarray, window: int = 31) -> np.ndarray:
    """The live peer of τ̂ on encoders only: a local quadratic over the newest ``window``
    samples (62 ms), evaluated at the newest (no future samples: it could run live), its
    q, q̇, q̈ through DFKI's documented inverse dynamics (``support.dfki_reference``). Rows
    before the first full window are NaN."""
    c = [savgol_coeffs(window, 2, deriv=d, delta=0.002, pos=window - 1, use='dot')
         for d in range(3)]
    out = np.full(pos.shape, np.nan)
    for k in range(window - 1, len(pos)):
        seg = pos[k - window + 1:k + 1]
        out[k] = dfki_tau(DFKI, c[0] @ seg, c[1] @ seg, c[2] @ seg)
    return out


@pytest.mark.slow
@pytest.mark.parametrize('path', RUNS, ids=[p.stem[-2:] for p in RUNS])
def test_dfki_torques_from_encoders_only_are_as_good_as_a_causal_peer(path):
    """τ̂ on encoders only (JointState without effort: the motors' torques unknown,
    ``unknown_effort_sigma`` 5 N·m, then τ̂ is inverse dynamics on the estimated q̈) against
    the measured torques. Settings: ``integrator_jerk`` 100 (the jerk rows' bound on the
    change of q̈; measured on these runs, shoulder / elbow mean RMS N·m: 1000 (default)
    0.92 / 0.29, 300 0.60 / 0.20, 100 0.45 / 0.17, 30 0.45 / 0.21, 10 0.64 / 0.32);
    ``dynamics_sigma_*`` as for the angles (no effect here: the unknown torques dominate).

    Measured: 0.24-0.68 / 0.11-0.23 N·m, 1.7-3.7x / 1.4-2.5x mbfg-inverse's (0.13-0.22 /
    0.06-0.12; mean ratio 2.6 / 1.9). The offline inverse is zero-lag: its q̈ is a
    local polynomial centred on the sample, using 30 ms of future samples. A causal
    estimate must either average the same number of past samples, centred 30 ms back
    (the same local quadratic over 31 samples evaluated at the newest: 0.30-0.88 /
    0.11-0.26 N·m; over 61: 0.44-1.47 / 0.12-0.45, where its zero-lag twin gives the
    offline 0.14-0.24 / 0.07-0.17), or fewer samples and more noise: that trade, not the
    model, bounds τ̂ here. Asserted: within 1.1x of that causal peer per joint (measured
    0.66-1.03, above 1 only on run 13's shoulder and runs 03 and 13's elbows) and within
    4x of mbfg-inverse's."""
    est, outs, pos, tau, _ = run_estimator(path, 4.0, effort=False, unknown_effort_sigma=5.0,
                                           integrator_jerk=100.0)
    assert est.counters['resets'] == 0, est.last_reset_reason
    n = len(outs)
    ok = [k for k in range(50, n - 20) if outs[k] is not None]
    assert len(ok) > 0.99 * (n - 70)
    tau_rms = np.sqrt(np.mean([(outs[k].tau - tau[k]) ** 2 for k in ok], 0))
    peer = causal_local_quadratic_torques(pos)
    peer_rms = np.sqrt(np.mean((peer[ok] - tau[ok]) ** 2, 0))
    assert np.all(tau_rms < 1.1 * peer_rms), (tau_rms, peer_rms)
    log = load_joint_csv(path, list(JOINTS), ['pos_meas1', 'pos_meas2'],
                         ['vel_meas1', 'vel_meas2'], ['tau_meas1', 'tau_meas2'])
    inv = measured_inverse(DP, log)
    inv_rms, _ = torque_fit(inv.tau[:n], inv.effort[:n], 50)
    assert np.all(tau_rms < 4.0 * inv_rms), (tau_rms / inv_rms, tau_rms, inv_rms)


def _simulated_heavier_plant(seconds: float = 3.0, rate: float = 500.0):
    """DFKI's plant (their equations, scipy) with both links 20 % heavier than the model
    the estimator has (masses and inertias), under known torques u(t): (t, solution, u)."""
    plant = dict(DFKI, m1=1.2 * DFKI['m1'], m2=1.2 * DFKI['m2'], I1=1.2 * DFKI['I1'],
                 I2=1.2 * DFKI['I2'])
    t = np.arange(int(seconds * rate) + 1) / rate

    def u(tk):
        return np.array([0.6 * math.sin(3 * tk), 0.3 * math.cos(5 * tk)])

    sol = simulate_dfki(plant, u, t, [1.5, -0.8, 0.0, 0.0], max_step=1e-3)
    return t, sol, u


def _estimate_against_truth(t, sol, u, sigma: float, **cfg) -> tuple[Estimator, np.ndarray]:
    """The estimator on the simulated plant's noisy encoders (σ ``sigma``, seed 5) and
    known torques: (estimator, wrapped angle errors against the simulated truth after
    0.2 s)."""
    rng = np.random.default_rng(5)
    est = Estimator(DP, EstimatorConfig(frequency=500.0, lag_duration=0.05,
                                        encoder_sigma=sigma, **cfg))
    err = []
    for k, tk in enumerate(t):
        est.add(JointMeasurement(tk, JOINTS, sol.y[:2, k] + sigma * rng.standard_normal(2),
                                 np.array([]), u(tk)))
        e = est.tick(tk)
        if e is not None and tk > 0.2:
            err.append(wrapped(e.joint_position - sol.y[:2, k]))
    return est, np.array(err)


def test_a_model_20_percent_off_in_mass_with_a_precise_encoder_does_not_reset():
    """A model 20 % light in mass and inertia, 2e-5 rad encoders at 500 Hz, known torques:
    the model's q̈ is off by 1.0 / 2.6 rad/s² RMS (99th percentile 2.2 / 7.2), the encoder
    50x more precise than the default. Before: 5 resets (reset:diverged), errors of
    0.7 rad. Now, every setting at its default but ``encoder_sigma`` (``dynamics_sigma``
    0.5, far below the model's error): no reset, and the estimate within 20 encoder σ of
    the truth (measured: max 4.8 / 11.8 σ, RMS 1.7 / 3.9 σ: worse than the raw encoder,
    the smoother trusting a model it should not)."""
    t, sol, u = _simulated_heavier_plant()
    sigma = 2e-5
    est, err = _estimate_against_truth(t, sol, u, sigma)
    assert est.counters['resets'] == 0, est.last_reset_reason
    assert len(err) > 0.9 * len(t)
    assert np.abs(err).max() < 20 * sigma, np.abs(err).max(axis=0)


def test_a_model_20_percent_off_in_mass_is_better_than_its_encoder_with_the_recipe():
    """The same plant with ``dynamics_sigma_angle`` / ``_length`` from the recipe for
    precise encoders (docs/estimator.md): about 1.2 x the 99th percentile of the model's
    q̈ error (7.2 rad/s² here: 10 rad/s², 3 m/s² at the 0.3 m link). The estimated angles
    against the simulated truth: RMS 0.84 / 0.85 σ (the raw encoder: 1.0 σ), max 2.9 /
    3.1 σ. Asserted: RMS below the encoder's σ on both joints, max below 5 σ."""
    t, sol, u = _simulated_heavier_plant()
    sigma = 2e-5
    est, err = _estimate_against_truth(t, sol, u, sigma, dynamics_sigma_angle=10.0,
                                       dynamics_sigma_length=3.0)
    assert est.counters['resets'] == 0, est.last_reset_reason
    assert len(err) > 0.9 * len(t)
    rms = np.sqrt(np.mean(err ** 2, axis=0))
    assert np.all(rms < sigma), rms / sigma
    assert np.abs(err).max() < 5 * sigma, np.abs(err).max(axis=0) / sigma
