"""Identification of a URDF arm (issue 27 item 3): the regressor against the inverse dynamics,
the log-Cholesky links always consistent, a simulated 7-DOF arm with known friction and
armature identified back within its noise, and mbfg-identify on DFKI's runs writing a URDF and
overlay that the other tools load."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from conftest import CONFIG, DATA

from mbfg_ros.cli.identify import main as identify_main
from mbfg_ros.cli.inverse import main as inverse_main
from mbfg_ros.core.friction import Friction
from mbfg_ros.spatial.drives import JointDrive
from mbfg_ros.spatial.identify import (
    Samples,
    identify_urdf,
    link_parameters,
    log_cholesky,
    prior,
    pseudo_inertia,
    regressor,
    to_log_cholesky,
)
from mbfg_ros.spatial.system import build_spatial_system

URDF = CONFIG / 'urdf'
RUN = str(DATA / 'dfki' / 'design_A.0_20220815_sys_id_trajectory')
COLS = ['--joints', 'shoulder,elbow', '--position-columns', 'pos_meas1,pos_meas2',
        '--velocity-columns', 'vel_meas1,vel_meas2', '--effort-columns', 'tau_meas1,tau_meas2']


@pytest.mark.parametrize('urdf,overlay', [
    ('ur5.urdf', {'joints': {
        'shoulder_lift_joint': {'friction': {'b': 0.5, 'fc': 1.0, 'fs': 1.5, 'v_st': 0.2,
                                             'offset': 0.3}, 'Ir': 3e-5, 'gr': -100},
        'wrist_2_joint': {'friction': {'fc': 0.4, 'smooth': 'atan', 'v_s': 0.05}}}}),
    ('double_pendulum.urdf', URDF / 'double_pendulum_dfki.yaml'),
])
def test_the_regressor_times_the_prior_is_the_inverse_dynamics(urdf, overlay):
    S = build_spatial_system(URDF / urdf, overlay)
    rng = np.random.default_rng(2)
    q, qd, qdd = (rng.uniform(-2, 2, (6, S.n)) for _ in range(3))
    qd[0] = 0.002                                  # inside the smooth sign's band
    tau = np.array([S.inverse(a, b, c) for a, b, c in zip(q, qd, qdd)])
    np.testing.assert_allclose(regressor(S, q, qd, qdd) @ prior(S), tau.ravel(), atol=1e-10)


def test_every_log_cholesky_point_is_a_physical_link_and_the_map_inverts():
    rng = np.random.default_rng(4)
    for _ in range(200):
        theta = rng.normal(0, 1.5, 10)
        pi = log_cholesky(theta)
        m, c = pi[0], pi[1:4] / pi[0]
        Io = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
        Ic = Io - m * (c @ c * np.eye(3) - np.outer(c, c))
        p = np.linalg.eigvalsh(Ic)
        assert m > 0 and p.min() > 0
        assert p[0] + p[1] >= p[2] * (1 - 1e-9)                  # triangle inequality
        assert np.linalg.eigvalsh(pseudo_inertia(pi)).min() > 0
        np.testing.assert_allclose(to_log_cholesky(pi), theta, atol=1e-6)


def _simulated_panda(rng):
    """panda_like with its links moved in log-Cholesky space and known drives."""
    S0 = build_spatial_system(URDF / 'panda_like.urdf', {'joints': {
        f'panda_joint{k}': {'friction': {'b': 0.1, 'fc': 0.2}, 'Ir': 1e-5, 'gr': 100}
        for k in range(1, 8)}})
    m0 = S0.model
    mass, com, inertia = m0.mass.copy(), m0.com.copy(), m0.inertia.copy()
    for j, pi0 in enumerate(link_parameters(m0)):
        pi = log_cholesky(to_log_cholesky(pi0) + rng.normal(0, 0.1, 10))
        m, c = pi[0], pi[1:4] / pi[0]
        Io = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
        mass[j + 1], com[j + 1] = m, c
        inertia[j + 1] = Io - m * (c @ c * np.eye(3) - np.outer(c, c))
    drives = tuple(JointDrive(friction=Friction(b=0.3 + 0.1 * j, fc=0.5 + 0.2 * j,
                                                fs=0.5 + 0.2 * j),
                              offset=0.05 * (j - 3), Ir=2e-5 * (1 + j % 3), gr=100.0)
                   if j < 7 else JointDrive(friction=Friction(b=2.0, fc=1.0, fs=1.0))
                   for j in range(m0.n))
    true = build_spatial_system(dataclasses.replace(m0, mass=mass, com=com, inertia=inertia,
                                                    drives=drives))
    return S0, true, drives


def test_a_simulated_7dof_arm_is_identified_back_within_its_noise():
    rng = np.random.default_rng(1)
    S0, true, drives = _simulated_panda(rng)
    n = S0.n
    t = np.arange(0, 20, 0.02)
    w = np.array([0.3, 0.7, 1.1, 1.9])
    A = rng.uniform(0.1, 0.4, (n, 4))
    A[7:] *= 0.04                                           # the fingers: centimetres
    ph = rng.uniform(0, 2 * np.pi, (n, 4))
    lo, hi = S0.model.lower, S0.model.upper
    mid = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (np.nan_to_num(lo) +
                                                          np.nan_to_num(hi)), 0.0)
    arg = w[None, None, :] * t[:, None, None] + ph[None]
    q = mid + np.einsum('jk,tjk->tj', A, np.sin(arg))
    qd = np.einsum('jk,tjk->tj', A * w, np.cos(arg))
    qdd = -np.einsum('jk,tjk->tj', A * w ** 2, np.sin(arg))
    noise = 0.05
    tau = np.array([true.inverse(a, b, c) for a, b, c in zip(q, qd, qdd)])
    res = identify_urdf(S0, [Samples(q, qd, qdd, tau + rng.normal(0, noise, tau.shape))])
    assert (res.min_eigenvalue > 0).all()
    assert res.cv_rmse.max() < 1.25 * noise                 # the noise, nothing left
    assert res.cv_rmse.mean() <= 1.1 * res.cv_rmse_ls.mean()
    assert res.cv_rmse_prior.mean() > 20 * noise            # the URDF alone is far off
    got = np.array([res.drive(j) for j in range(n)])
    b = np.array([d.friction.b for d in drives])
    fc = np.array([d.friction.fc for d in drives])
    Ir = np.array([d.Ir for d in drives])
    arm = slice(0, 7)
    assert np.abs(got[arm, 0] - b[arm]).max() < 0.03
    assert np.abs(got[arm, 1] - fc[arm]).max() < 0.02
    # joints 1 and 2: the armature adds to the link's own axis inertia alone (not base)
    np.testing.assert_allclose(got[2:7, 3], Ir[2:7], rtol=0.15)
    assert 'panda_joint1.Ir' not in res.base


def test_cli_on_dfki_runs_writes_a_consistent_urdf_and_overlay_the_tools_load(tmp_path,
                                                                              capsys):
    out = tmp_path / 'dp.urdf'
    assert identify_main([str(URDF / 'double_pendulum.urdf'), '--overlay',
                          str(URDF / 'double_pendulum_dfki.yaml'), '--measured', f'{RUN}_01.csv',
                          '--measured', f'{RUN}_04.csv', *COLS, '--output', str(out)]) == 0
    text = capsys.readouterr().out
    assert 'every identified link is physically consistent' in text
    # DFKI's runs pin the fit down: Levenberg-Marquardt converges (13-16 evaluations)
    assert re.search(r'the constrained fit converged in [0-9]+ evaluations', text), text
    assert re.search(r'condition number of the normalised base regressor [0-9.]+', text)
    mean = re.search(r'mean: identified ([0-9.]+), least squares ([0-9.]+), URDF ([0-9.]+)',
                     text)
    ident, ls, urdf = (float(x) for x in mean.groups())
    assert ident <= 1.1 * ls and ident < urdf                # issue 27's target
    S = build_spatial_system(out, tmp_path / 'dp.yaml')
    assert S.drives is not None and S.drives.M[0, 1] != 0     # the carried rotor kept
    for j in range(S.n):
        assert np.linalg.eigvalsh(pseudo_inertia(link_parameters(S.model)[j])).min() > 0
    assert inverse_main([str(out), '--overlay', str(tmp_path / 'dp.yaml'), '--measured',
                         f'{RUN}_12.csv', *COLS, '--output', str(tmp_path / 'tau.csv')]) == 0
    assert 'torque RMSE' in capsys.readouterr().out


def test_a_fit_stopped_at_its_evaluation_cap_is_reported_not_passed_off(tmp_path, capsys):
    """--max-evaluations 2: the constrained fit cannot converge in two evaluations; the
    report says so (the values where it stopped are still written, and consistent)."""
    out = tmp_path / 'dp.urdf'
    assert identify_main([str(URDF / 'double_pendulum.urdf'), '--overlay',
                          str(URDF / 'double_pendulum_dfki.yaml'), '--measured', f'{RUN}_01.csv',
                          *COLS, '--max-evaluations', '2', '--output', str(out)]) == 0
    text = capsys.readouterr().out
    assert 'NOT CONVERGED' in text and 'cap of 2 evaluations' in text, text
    assert 'converged in' not in text
    assert identify_main([str(URDF / 'double_pendulum.urdf'), '--measured', f'{RUN}_01.csv',
                          *COLS, '--max-evaluations', '0', '--output', str(out)]) == 2
    assert '--max-evaluations must be >= 1' in capsys.readouterr().err
