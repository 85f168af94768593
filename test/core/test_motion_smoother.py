"""The zero-lag motion smoother (issue 11, item 2: the derivative option that smooths the
whole log): the GTSAM graph against the same least-squares problem solved densely, derivatives
of a known motion, no lag, and torques on DFKI's real run."""
from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import CONFIG, DATA

from mbfg_ros.cli.inverse import main as inverse_main
from mbfg_ros.core.errors import MbfgError
from mbfg_ros.planar.problems.measured import (
    DerivativeOptions, load_joint_csv, measured_inverse, torque_fit,
)
from mbfg_ros.core.motion_smoother import smooth_motion
from mbfg_ros.planar.dynamics import load_system

YAML = CONFIG / 'dfki_double_pendulum.yaml'
RUN01 = DATA / 'dfki' / 'design_A.0_20220815_sys_id_trajectory_01.csv'


def dense_smoother(t, z, zd, jerk, s_q, s_v):
    """The same estimate written out in seconds as one dense weighted least-squares problem
    (states z, ż, z̈ per sample; the constant-jerk process covariance from its definition,
    integrated numerically, not from the module's closed form)."""
    N, h = len(t), t[1] - t[0]
    F = np.array([[1, h, h * h / 2], [0, 1, h], [0, 0, 1]])
    s = np.linspace(0, h, 2001)
    G = np.stack([(h - s) ** 2 / 2, h - s, np.ones_like(s)])   # state response to a jerk impulse
    Q = jerk ** 2 * np.trapezoid(G[:, None, :] * G[None, :, :], s, axis=2)
    L = np.linalg.inv(np.linalg.cholesky(Q))
    rows, rhs = [], []
    for k in range(N):
        r = np.zeros(3 * N)
        r[3 * k] = 1 / s_q
        rows.append(r)
        rhs.append(z[k] / s_q)
        if zd is not None:
            r = np.zeros(3 * N)
            r[3 * k + 1] = 1 / s_v
            rows.append(r)
            rhs.append(zd[k] / s_v)
        if k:
            block = np.zeros((3, 3 * N))
            block[:, 3 * (k - 1):3 * k] = -L @ F
            block[:, 3 * k:3 * k + 3] = L
            rows.extend(block)
            rhs.extend(np.zeros(3))
    x = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0].reshape(N, 3)
    return x[:, 0], x[:, 1], x[:, 2]


@pytest.mark.parametrize('with_velocity', [True, False])
def test_graph_equals_the_dense_least_squares_problem(with_velocity):
    rng = np.random.default_rng(3)
    t = np.arange(60) * 0.01
    z = np.sin(2 * t) + 1e-3 * rng.standard_normal(60)
    zd = 2 * np.cos(2 * t) + 0.05 * rng.standard_normal(60) if with_velocity else None
    got = smooth_motion(t, z[:, None], None if zd is None else zd[:, None], 3.0, 1e-3, 0.05)
    ref = dense_smoother(t, z, zd, 3.0, 1e-3, 0.05)
    for a, b, scale in zip(got, ref, (1, 2, 4)):
        np.testing.assert_allclose(a[:, 0], b, atol=1e-6 * scale)


def test_known_motion_derivatives_without_lag():
    """Noisy positions of a two-joint motion at 500 Hz: ż and z̈ follow the true ones, and
    cross-correlation of the z̈ error with z̈ shows no delay (a causal filter would lag)."""
    rng = np.random.default_rng(4)
    t = np.arange(3000) / 500.0
    w = np.array([2.0, 5.0])
    z = np.sin(w * t[:, None])
    zd, zdd = w * np.cos(w * t[:, None]), -w ** 2 * np.sin(w * t[:, None])
    noisy = z + 2e-4 * rng.standard_normal(z.shape)
    zs, zds, zdds = smooth_motion(t, noisy, None, 0.5, 2e-4, 0.1)
    s = slice(100, -100)
    assert np.abs(zds[s] - zd[s]).max() < 0.01 * np.abs(zd).max()
    assert np.abs(zdds[s] - zdd[s]).max() < 0.05 * np.abs(zdd).max()
    for j in range(2):
        lags = np.arange(-20, 21)
        corr = [np.dot(np.roll(zdds[s, j], k), zdd[s, j]) for k in lags]
        assert lags[int(np.argmax(corr))] == 0


def test_smoother_on_dfki_trajectory_01_matches_savitzky_golay():
    """On the real run the smoother's torques are as close to the measured ones as the
    default Savitzky-Golay fit of the measured velocities (within 5 %; both joints)."""
    log = load_joint_csv(RUN01, ['shoulder', 'elbow'], ['pos_meas1', 'pos_meas2'],
                         ['vel_meas1', 'vel_meas2'], ['tau_meas1', 'tau_meas2'])
    sys_ = load_system(YAML)
    sg = measured_inverse(sys_, log)
    sm = measured_inverse(sys_, log, DerivativeOptions('smoother'))
    e_sg, _ = torque_fit(sg.tau, sg.effort, 50)
    e_sm, _ = torque_fit(sm.tau, sm.effort, 50)
    assert (e_sm <= 1.05 * e_sg).all(), (e_sm, e_sg)


def test_cli_smoother_option_and_bad_values(tmp_path, capsys):
    cols = ['--position-columns', 'pos_meas1,pos_meas2', '--velocity-columns',
            'vel_meas1,vel_meas2', '--effort-columns', 'tau_meas1,tau_meas2']
    assert inverse_main([str(YAML), '--measured', str(RUN01), *cols, '--derivatives',
                         'smoother', '--jerk', '0.3', '--output', str(tmp_path / 't.csv')]) == 0
    out = capsys.readouterr().out
    assert 'derivatives smoother (jerk 0.3, position sigma 0.0002' in out
    assert len(re.findall(r'torque RMSE [0-9.]+ N m', out)) == 2
    assert inverse_main([str(YAML), '--measured', str(RUN01), *cols, '--derivatives',
                         'smoother', '--position-sigma', '-1', '--output',
                         str(tmp_path / 'bad.csv')]) == 2
    assert 'position_sigma must be a positive number, got -1.0' in capsys.readouterr().err
    with pytest.raises(MbfgError, match='at least 3'):
        smooth_motion(np.zeros(2), np.zeros((2, 1)), None, 1.0, 1.0, 1.0)
