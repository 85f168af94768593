"""Merged ticks (issue 24): a smoother tick every few grid periods weighs its dynamics
and jerk rows as the periods it spans (:meth:`GraphMixin._dynamics_noise`,
:meth:`GraphMixin._step_sigmas`).

``dynamics_sigma`` is the σ of q̈ − q̈(q, q̇, τ) at one key per grid period. The live node
merges grid ticks when its CPU budget is short (and ``predict_between_ticks`` ticks the
smoother every few periods), so the estimate must not depend on how many were merged: a
simulated UR5 (sensor_sim: encoders with the motor efforts and the wrist IMU at 1 kHz)
ticked at every 3rd grid time must be about as accurate as ticked at every one.
"""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA
from support import reference_fourbar as ref
from support.feeding import add_due

from mbfg_ros.core.angles import wrap_angle

from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.estimation.graph import MAX_SPAN
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.planar.sensors import SensorConfig, SensorModel, simulate_measurements
from mbfg_ros.spatial.sensor_sim import (SpatialSensorConfig, reference_motion,
                                         simulate_spatial_measurements, track_reference)
from mbfg_ros.spatial.system import build_spatial_system

CONFIG = Path(__file__).resolve().parents[2] / 'config'
URDF = CONFIG / 'urdf'
RATE = 1000.0
SKIP = 0.5            # s of start-up left out of the errors
ENC = math.sqrt((2 * math.pi / 4096) ** 2 / 12 + math.radians(0.05) ** 2)


@pytest.fixture(scope='module')
def ur5_case():
    """The UR5 + wrist IMU tracking a reference under computed torque (2 s), read at 1 kHz:
    encoders of 4096 counts + 0.05° noise with the motor efforts, gyro and accelerometer
    (``bench/predicted_estimates.py``'s case)."""
    ur5 = build_spatial_system(URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml')
    tr = track_reference(ur5, reference_motion(ur5, 2.0, 1.0 / RATE, seed=0))
    cfg = SpatialSensorConfig(encoder_rate=RATE, encoder_counts=4096,
                              encoder_sigma=math.radians(0.05), effort_sigma=0.0,
                              imu_rate=RATE, gyro_sigma=0.005, accel_sigma=0.05)
    recs = simulate_spatial_measurements(ur5, tr.t, tr.q, tr.qd, tr.qdd, tr.tau, cfg,
                                         np.random.default_rng(0))
    return ur5, tr, recs


def _config(**kw) -> EstimatorConfig:
    return EstimatorConfig(frequency=RATE, lag_duration=0.05, encoder_sigma=ENC,
                           gyro_sigma=0.005, accel_sigma=0.05, dynamics_sigma=2.0, **kw)


def _smoothed(est: Estimator, t: np.ndarray, recs, every: int) -> list:
    """(grid index, estimate) of the smoothed estimates after :data:`SKIP`, ``est`` ticked at
    every ``every``-th grid time of ``t`` (each tick takes the readings stamped since the
    last)."""
    out, i = [], 0
    for k, tk in enumerate(t):
        if k % every and est.initialised:
            continue
        i = add_due(recs, i, tk, est)
        e = est.tick(tk)
        if e is not None and tk >= SKIP:
            out.append((k, e))
    return out


def _rate_rms(sys_, tr, recs, every: int, **kw) -> float:
    """The joint-rate RMSE of the smoothed estimates, the smoother ticked at every
    ``every``-th grid time."""
    err = [e.qd - tr.qd[k] for k, e in _smoothed(Estimator(sys_, _config(**kw)), tr.t, recs,
                                                 every)]
    return float(np.sqrt(np.mean(np.square(err))))


@pytest.mark.parametrize('efforts', ['measured', 'unknown'])
def test_a_tick_every_third_period_estimates_the_rates_as_well_as_every_period(ur5_case,
                                                                                efforts):
    """Measured efforts: the dynamics rows carry the periods (σ_d as at one period on a
    3-period key: 1.16x). Unknown efforts (``unknown_effort_sigma`` as
    config/estimator_urdf.yaml's): q̈ rests on the jerk rows, which carry them too
    (σ ``integrator_jerk``·dt on a 3-period key: 1.08x; the spanned dynamics rows alone
    change nothing here, the unknown torque's σ dominates them)."""
    ur5, tr, recs = ur5_case
    kw = {}
    if efforts == 'unknown':
        recs = [replace(r, effort=None) if getattr(r, 'effort', None) is not None else r
                for r in recs]
        kw = {'unknown_effort_sigma': 20.0}
    every = _rate_rms(ur5, tr, recs, 1, **kw)
    merged = _rate_rms(ur5, tr, recs, 3, **kw)
    assert merged < 1.05 * every, (merged, every)


def test_the_four_bars_angle_at_a_tick_every_fourth_period_has_no_integrator_bias():
    """Noise-free readings (crank encoder, coupler gyro and accelerometer at 1 kHz) of the
    four-bar released from rest, the independent reference's truth
    (test/support/reference_fourbar.py): what is left of the crank angle's error is the
    model's own. The integrator's q rows carry the trapezoidal rule's end correction
    (:func:`~mbfg_ros.core.factors.stacked_trapezoidal_error`), so they hold for q̈ linear
    over a step, as the readings between keys are interpolated: the smoother ticked at every
    4th grid time is about as accurate as at every one: 1.07x (1.5 s, 0.5 s left out).
    Seed 000 Eq. 23's q rows alone (missing by dt³/12 q⃛ over a 4-period key) gave 6.2x."""
    t = np.arange(0.0, 1.5 + 0.5 / RATE, 1.0 / RATE)
    r = ref.simulate(t)
    q, qd, qdd, theta = r.q, r.qd, ref.accelerations(r), r.theta
    sys_ = load_system(DATA / 'fourbar_estimator.yaml')
    sm = SensorModel(sys_)
    recs = simulate_measurements(
        sys_, t, q, qd, qdd,
        SensorConfig(joints=('crank',), encoder_rate=RATE, encoder_counts=0, encoder_sigma=0.0,
                     imu_rate=RATE, gyro_sigma=0.0, accel_sigma=0.0),
        np.random.default_rng(0))

    def angle_rms(every: int) -> float:
        est = Estimator(sys_, EstimatorConfig(frequency=RATE, lag_duration=0.05,
                                              encoder_sigma=ENC))
        err = [wrap_angle(sm.joint(0, e.q, e.qd)[0].h[0] - theta[k])
               for k, e in _smoothed(est, t, recs, every)]
        return float(np.sqrt(np.mean(np.square(err))))
    every, merged = angle_rms(1), angle_rms(4)
    assert every < 2e-5                         # the model's error, well below the encoder's
    assert merged < 1.5 * every, (merged, every)


def test_the_jerk_rows_carry_the_periods_the_tick_spans(ur5_case):
    """The jerk rows' σ (q̈_k − q̈_{k−1} beside the trapezoidal rows, seed 000 Eq. 23):
    ``integrator_jerk``·dt up to one grid period T, ``integrator_jerk``·T·√r on a tick
    spanning 1 < r ≤ MAX_SPAN periods, ``integrator_jerk``·dt/√MAX_SPAN beyond
    (continuous at MAX_SPAN); the trapezoidal rows' σ whatever r."""
    est = Estimator(ur5_case[0], _config(unknown_effort_sigma=20.0))
    T, n = 1.0 / RATE, ur5_case[0].n
    jerk = est.config.integrator_jerk
    for r, want in ((0.5, 0.5), (1.0, 1.0), (2.0, 2 ** 0.5), (3.0, 3 ** 0.5),
                    (MAX_SPAN, MAX_SPAN ** 0.5),
                    (MAX_SPAN + 1.0, (MAX_SPAN + 1.0) / MAX_SPAN ** 0.5),
                    (4 * MAX_SPAN, 4 * MAX_SPAN ** 0.5)):
        integ, rows = est._step_sigmas(r * T)
        np.testing.assert_allclose(rows[-n:], jerk * T * want, rtol=1e-12, err_msg=str(r))
        np.testing.assert_array_equal(rows[:-n], integ)


def _ur5_state(tr, k: int = 500) -> np.ndarray:
    """The stacked state [q, q̇, q̈] of the UR5's track at sample ``k``."""
    return np.concatenate((tr.q[k], tr.qd[k], tr.qdd[k]))


def test_the_state_factors_dynamics_rows_carry_the_periods_the_tick_spans(ur5_case):
    """Known efforts: the state factor's dynamics rows (seed 000 Eq. 26) on a tick
    spanning r periods are σ_d/√r (r capped at MAX_SPAN); on the grid, or sooner, the
    configured σ itself (the same object: its inverses are kept); kept per dt and
    read-only; the gate's σ is ``dynamics_sigma`` whatever r."""
    ur5, tr, _ = ur5_case
    est = Estimator(ur5, _config())
    n, T = ur5.n, 1.0 / RATE
    x, tau = _ur5_state(tr), tr.tau[500]
    base = est._state_sigma
    for dt in (T, 0.5 * T):
        gate, state = est._dynamics_noise(x, tau, dt)
        assert state is base and gate is est._dyn_sigma
    for r in (2, 3, 5, MAX_SPAN, 3 * MAX_SPAN):
        gate, got = est._dynamics_noise(x, tau, r * T)
        np.testing.assert_allclose(got[-n:], 2.0 / np.sqrt(min(r, MAX_SPAN)), rtol=1e-12)
        np.testing.assert_array_equal(gate, np.full(n, 2.0))
        assert not got.flags.writeable
        assert est._dynamics_noise(x, tau, r * T)[1] is got           # kept per dt
    assert not base.flags.writeable


def test_with_unknown_efforts_only_the_dynamics_share_is_spanned(ur5_case):
    """Unknown efforts (``unknown_effort_sigma`` σ_u, no effort given): the unknown torque
    adds u² = σ_u²·|∂q̈/∂τ|² per coordinate (∂q̈/∂τ from ``acceleration_gain`` at the
    state's q). It is a torque, not white: on a tick spanning r periods the state factor's
    dynamics rows are √(σ_d²/r + u²) (r capped at MAX_SPAN), the gate's σ √(σ_d² + u²)
    whatever r; on the grid both the same. σ_u is chosen so that u² is of σ_d²'s size:
    spanning nothing, or the gate, or u² too, misses by far more than 1e-12."""
    ur5, tr, _ = ur5_case
    n, T = ur5.n, 1.0 / RATE
    x, tau = _ur5_state(tr), np.zeros(len(ur5.actuator_joints))
    G = ur5.acceleration_gain(x[:n])
    g2 = np.sum(G * G, axis=1)
    su = 2.0 / math.sqrt(float(np.mean(g2)))            # mean u² = σ_d² = 4
    u2 = su * su * g2
    assert np.all(u2 > 0.0)                             # every coordinate feels the torque
    est = Estimator(ur5, _config(unknown_effort_sigma=su))
    for dt in (T, 0.5 * T):
        gate, state = est._dynamics_noise(x, tau, dt)
        np.testing.assert_allclose(gate, np.sqrt(4.0 + u2), rtol=1e-12)
        np.testing.assert_array_equal(state[-n:], gate)
    for r in (2, 3, 5, MAX_SPAN, 3 * MAX_SPAN):
        gate, state = est._dynamics_noise(x, tau, r * T)
        np.testing.assert_allclose(gate, np.sqrt(4.0 + u2), rtol=1e-12, err_msg=str(r))
        np.testing.assert_allclose(state[-n:], np.sqrt(4.0 / min(r, MAX_SPAN) + u2),
                                   rtol=1e-12, err_msg=str(r))
        assert state.shape == (n,)                       # a tree: no constraint rows


@pytest.mark.parametrize('unknown', [False, True])
def test_the_merged_tick_spans_only_the_state_factor_not_the_gate(ur5_case, unknown):
    """The innovation gate's process noise stays ``dynamics_sigma`` held over the carried
    time (the gate's own model, conservative for a merged tick), with known efforts and
    with unknown ones (no efforts read; σ_u tiny, so that a spanned σ_d would show:
    √(σ_d²/3 + u²) < σ_d)."""
    ur5, tr, recs = ur5_case
    if unknown:
        recs = [replace(r, effort=None) if getattr(r, 'effort', None) is not None else r
                for r in recs]
    est = Estimator(ur5, _config(unknown_effort_sigma=1e-6 if unknown else 0.0))
    _smoothed(est, tr.t[:30], recs, 3)
    if unknown:
        # the last tick spanned 3 periods, its efforts unknown (the gate's σ its own)
        assert est._t_last == tr.t[27] and est._k >= 2 and not est._tau_all
        assert est._tick_dyn_sigma is not est._dyn_sigma
        assert np.all(est._tick_dyn_sigma >= est._dyn_sigma)
        assert np.all(est._tick_dyn_sigma < 1.01 * est._dyn_sigma)     # u² ≪ σ_d²
    else:
        assert est._tick_dyn_sigma is est._dyn_sigma


@pytest.mark.parametrize('unknown', [False, True])
def test_a_closed_chains_constraint_rows_keep_their_sigma_on_a_merged_tick(unknown):
    """The four-bar (2m constraint rows Φ, Φ̇ before its n dynamics rows, seed 000 Eq. 26):
    a merged tick spans the dynamics rows alone; the constraints hold at every instant,
    so their σ (``constraint_sigma``) is not a rate and stays, with known or unknown
    efforts (the crank motor's unknown torque, u² = σ_u²·|∂q̈/∂τ|², not spanned either)."""
    fourbar = load_system(CONFIG / 'fourbar.yaml')
    n, m, T = fourbar.n, fourbar.m, 1.0 / RATE
    assert m > 0
    rf = ref.simulate(np.arange(11) / RATE)             # poses on the constraints
    x = np.concatenate((rf.q[5], rf.qd[5], ref.accelerations(rf)[5]))
    g2 = np.sum(np.square(fourbar.acceleration_gain(rf.q[5])), axis=1)
    su = 0.5 / math.sqrt(float(np.mean(g2))) if unknown else 0.0   # mean u² = σ_d²
    u2 = su * su * g2
    est = Estimator(fourbar, EstimatorConfig(frequency=RATE, dynamics_sigma=0.5,
                                             constraint_sigma=1e-6, unknown_effort_sigma=su))
    for r in (2.0, 3.0, MAX_SPAN):
        got = est._dynamics_noise(x, np.zeros(1), r * T)[1]
        np.testing.assert_array_equal(got[:2 * m], np.full(2 * m, 1e-6))
        np.testing.assert_allclose(got[-n:], np.sqrt(0.25 / r + u2), rtol=1e-12)


def test_a_reconfigured_dynamics_sigma_reaches_the_merged_ticks(ur5_case):
    """``reconfigure(dynamics_sigma=…)`` while running: the σ's kept per merged tick's dt
    are the new σ_d/√r, not the old ones (:meth:`GraphMixin._set_dynamics_noise` drops
    them)."""
    ur5, tr, _ = ur5_case
    est = Estimator(ur5, _config())
    n, T = ur5.n, 1.0 / RATE
    x, tau = _ur5_state(tr), tr.tau[500]
    before = est._dynamics_noise(x, tau, 3 * T)[1]
    np.testing.assert_allclose(before[-n:], 2.0 / math.sqrt(3.0), rtol=1e-12)
    est.reconfigure(dynamics_sigma=0.5)
    after = est._dynamics_noise(x, tau, 3 * T)[1]
    np.testing.assert_allclose(after[-n:], 0.5 / math.sqrt(3.0), rtol=1e-12)


def test_a_tick_max_span_periods_on_gets_the_spanned_jerk_sigma_whatever_the_rounding(ur5_case):
    """dt is a difference of stamps: a tick MAX_SPAN grid periods after the last comes out
    a few ulps either side of MAX_SPAN·T (on a 1 kHz grid of k·1e-3 s, most such steps are
    a few 1e-15 periods over); every one gets ``integrator_jerk``·T·√MAX_SPAN (the review
    found an 8-period step taking the 2.8x wider ``integrator_jerk``·dt of a longer step,
    before the σ beyond MAX_SPAN became continuous)."""
    est = Estimator(ur5_case[0], _config(unknown_effort_sigma=20.0))
    T, n = 1.0 / RATE, ur5_case[0].n
    jerk = est.config.integrator_jerk
    t = np.arange(40) * T
    dts = set((t[MAX_SPAN:] - t[:-MAX_SPAN]).tolist())
    assert any(dt / T > MAX_SPAN for dt in dts)           # the case this test is about
    for dt in dts:
        np.testing.assert_allclose(est._step_sigmas(dt)[1][-n:], jerk * T * MAX_SPAN ** 0.5,
                                   rtol=1e-9, err_msg=repr(dt))
