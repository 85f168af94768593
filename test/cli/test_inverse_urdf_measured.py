"""mbfg-inverse on a URDF robot's measured motion (issue 27 item 2): --measured CSV and --bag
JointState with efforts, the effort comparison per joint, and jittered stamps resampled (never
an unsmoothed spline) for --trajectory too. Reference torques: DFKI's documented equations
(test/support/dfki_reference.py) on a known motion."""
from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import CONFIG
from support.dfki_reference import DFKI, dfki_tau
from support.ros_data import write_joint_state_bag

from mbfg_ros.cli.inverse import main as inverse_main
from mbfg_ros.core.trajectory import derivatives

URDF = CONFIG / 'urdf' / 'double_pendulum.urdf'
OVERLAY = CONFIG / 'urdf' / 'double_pendulum_dfki.yaml'


def motion(t):
    """A smooth motion of both joints (DFKI angles): q, q̇, q̈ at the times t."""
    q = np.stack((0.8 * np.sin(2 * t), 0.5 * np.sin(3 * t + 0.3)), 1)
    qd = np.stack((1.6 * np.cos(2 * t), 1.5 * np.cos(3 * t + 0.3)), 1)
    qdd = np.stack((-3.2 * np.sin(2 * t), -4.5 * np.sin(3 * t + 0.3)), 1)
    return q, qd, qdd


def ref_tau(t):
    return np.array([dfki_tau(DFKI, *x) for x in zip(*motion(t))])


def jittered(rate=500.0, duration=4.0, seed=0):
    rng = np.random.default_rng(seed)
    h = 1.0 / rate
    return np.arange(int(duration * rate)) * h + rng.uniform(-0.3, 0.3, int(duration * rate)) * h


def write_csv(path, t):
    q, qd, _ = motion(t)
    np.savetxt(path, np.column_stack((t, q, qd, ref_tau(t))), delimiter=',', comments='',
               header='time,position_shoulder,position_elbow,velocity_shoulder,velocity_elbow,'
                      'effort_shoulder,effort_elbow', fmt='%.17g')


def _fit(out: str) -> dict[str, tuple[float, float]]:
    return {m[0]: (float(m[1]), float(m[2]))
            for m in re.findall(r'(\w+): torque RMSE ([0-9.]+) N m, r ([0-9.-]+)', out)}


def test_measured_csv_with_jitter_gives_dfki_torques_and_the_fit_per_joint(tmp_path, capsys):
    t = jittered()
    write_csv(tmp_path / 'm.csv', t)
    assert inverse_main([str(URDF), '--overlay', str(OVERLAY), '--measured',
                         str(tmp_path / 'm.csv'), '--window', '51', '--order', '4',
                         '--output', str(tmp_path / 'tau.csv')]) == 0
    out = capsys.readouterr().out
    header = (tmp_path / 'tau.csv').read_text().splitlines()[0].split(',')
    assert header == ['t', 'shoulder.effort', 'elbow.effort', 'shoulder.effort_measured',
                      'elbow.effort_measured']        # docs/cli.md, CSV columns
    rows = np.loadtxt(tmp_path / 'tau.csv', delimiter=',', skiprows=1)
    data = {name: rows[:, k] for k, name in enumerate(('t', 'tau_shoulder', 'tau_elbow'))}
    np.testing.assert_allclose(np.diff(data['t']), np.median(np.diff(t)), atol=1e-8)
    ref = ref_tau(data['t'])
    tau = np.column_stack((data['tau_shoulder'], data['tau_elbow']))
    s = slice(30, -30)
    assert np.abs(tau[s] - ref[s]).max() < 1e-2 * np.abs(ref).max()
    fit = _fit(out)
    assert set(fit) == {'shoulder', 'elbow'}
    for e, r in fit.values():
        assert e < 0.01 and r > 0.999


def test_bag_joint_states_with_efforts_equal_the_csv(tmp_path, capsys):
    t = np.arange(1000) / 500.0
    q, qd, _ = motion(t)
    tau = ref_tau(t)
    write_joint_state_bag(tmp_path / 'bag', t, ['elbow', 'shoulder'],
                          *(x[:, ::-1] for x in (q, qd, tau)))
    write_csv(tmp_path / 'm.csv', t)
    common = [str(URDF), '--overlay', str(OVERLAY)]
    assert inverse_main([*common, '--bag', str(tmp_path / 'bag'),
                         '--output', str(tmp_path / 'a.csv')]) == 0
    fit_bag = _fit(capsys.readouterr().out)
    assert inverse_main([*common, '--measured', str(tmp_path / 'm.csv'),
                         '--output', str(tmp_path / 'b.csv')]) == 0
    fit_csv = _fit(capsys.readouterr().out)
    a = np.loadtxt(tmp_path / 'a.csv', delimiter=',', skiprows=1)
    b = np.loadtxt(tmp_path / 'b.csv', delimiter=',', skiprows=1)
    np.testing.assert_allclose(a[:, 1:], b[:, 1:], atol=1e-6)
    assert fit_bag.keys() == fit_csv.keys() == {'shoulder', 'elbow'}
    assert all(e < 0.01 for e, _ in fit_bag.values())


def noisy_log_trajectory(path, seed=1):
    """The issue's case: a log's own stamps (steps 0.7-8.8 ms) and encoder noise as a
    --trajectory file."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(np.concatenate(([0.0], rng.uniform(0.7e-3, 8.8e-3, 1500))))
    q = motion(t)[0] + rng.normal(0, 2e-5, (len(t), 2))
    np.savetxt(path, np.column_stack((t, q)), fmt='%.9f')
    return t


def test_trajectory_on_jittered_stamps_is_resampled_and_honours_the_window(tmp_path):
    t = noisy_log_trajectory(tmp_path / 'traj.txt')
    rmse = {}
    for w in (31, 61):
        out = tmp_path / f'tau{w}.csv'
        assert inverse_main([str(URDF), '--overlay', str(OVERLAY), '--trajectory',
                             str(tmp_path / 'traj.txt'), '--window', str(w), '--order', '3',
                             '--output', str(out)]) == 0
        data = np.loadtxt(out, delimiter=',', skiprows=1)
        np.testing.assert_array_equal(data[:, 0], np.round(t, 9))
        s = slice(60, -60)
        rmse[w] = float(np.sqrt(np.mean((data[s, 1:] - ref_tau(data[s, 0])) ** 2)))
    assert (tmp_path / 'tau31.csv').read_bytes() != (tmp_path / 'tau61.csv').read_bytes()
    assert max(rmse.values()) < 0.02, rmse
    # what an interpolating spline does with the same samples (the failure)
    from scipy.interpolate import CubicSpline
    data = np.loadtxt(tmp_path / 'traj.txt')
    zdd = CubicSpline(data[:, 0], data[:, 1:], axis=0)(data[:, 0], 2)
    assert np.sqrt(np.mean((zdd - motion(data[:, 0])[2]) ** 2)) > 20 * max(rmse.values())


def test_derivatives_refuse_non_uniform_stamps_too_short_to_smooth():
    from mbfg_ros.core.errors import TrajectoryError
    with pytest.raises(TrajectoryError, match='non-uniform time stamps'):
        derivatives(np.array([0.0, 0.1, 0.15, 0.4]), np.zeros((4, 1)))
    zd, zdd = derivatives(np.array([0.0, 1.0, 2.0, 3.0]), np.array([[0.0], [1], [8], [27]]))
    np.testing.assert_allclose(zdd[:, 0], 6 * np.arange(4), atol=1e-9)    # uniform: exact cubic


def test_measured_is_no_longer_refused_for_urdf_and_bad_joints_are_named(tmp_path, capsys):
    write_csv(tmp_path / 'm.csv', np.arange(200) / 500.0)
    assert inverse_main([str(URDF), '--measured', str(tmp_path / 'm.csv'), '--joints',
                         'shoulder,knee', '--position-columns', 'position_shoulder,position_elbow',
                         '--output', str(tmp_path / 'x.csv')]) == 2
    assert "no tree joint 'knee'" in capsys.readouterr().err
