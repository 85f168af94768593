"""Forward dynamics (seed 000 §5.1-5.2, §7.1) against an independent reference.

The reference (test/support/reference_fourbar.py) integrates the four-bar's crank
angle ODE from Lagrange's equations with DOP853 at rtol 1e-12 and shares no
code with the package.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from support import reference_fourbar as ref  # noqa: E402

from mbfg_ros.core.errors import MbfgError  # noqa: E402
from mbfg_ros.simulation.forward import ForwardConfig, ForwardSimulator, energy, simulate  # noqa: E402
from mbfg_ros.planar.dynamics import load_system  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / 'config'


@pytest.fixture(scope='module')
def fourbar():
    return load_system(CONFIG / 'fourbars1.yaml')


@pytest.fixture(scope='module')
def fourbar_run(fourbar):
    """5 s, dt 1 ms, Nw 2, trapezoidal, dependent coordinates (seed 000 §7.1)."""
    traj = simulate(fourbar, 5.0, ForwardConfig())
    return traj, ref.simulate(traj.t)


def test_reference_is_converged_and_conserves_energy():
    t = np.linspace(0.0, 2.0, 201)
    a = ref.simulate(t)
    b = ref.simulate(t, rtol=1e-10, atol=1e-10)
    assert np.abs(a.q - b.q).max() < 1e-7
    E = [ref.energy(th, thd) for th, thd in zip(a.theta, a.theta_d)]
    assert np.ptp(E) < 1e-8 * abs(E[0])


def test_dependent_four_bar_matches_reference_over_five_seconds(fourbar_run):
    traj, r = fourbar_run
    assert ref.rmse(traj.q, r.q) < 0.05e-3
    assert traj.phi_norm.max() < 1e-6


def test_dependent_four_bar_energy_drift_is_small(fourbar, fourbar_run):
    traj, _ = fourbar_run
    E = energy(fourbar, traj.q, traj.qd)
    assert abs(E[-1] - E[0]) / abs(E[0]) < 1e-5
    # the package's energy is the reference's up to a constant (V's zero)
    Er = np.array([ref.energy(th, thd) for th, thd in zip(*fourbar_run[1][1:3])])
    assert np.ptp((E - E[0]) - (Er - Er[0])) < 1e-3 * abs(Er[0])


def test_independent_four_bar_with_crank_angle_matches_reference():
    sys_rel = load_system(CONFIG / 'fourbars1-with-rel-angle.yaml')
    traj = simulate(sys_rel, 2.0, ForwardConfig(coordinates='independent'))
    r = ref.simulate(traj.t)
    assert ref.rmse(traj.q[:, :4], r.q) < 0.05e-3
    assert traj.phi_norm.max() < 1e-6


def test_independent_four_bar_in_natural_coordinates_matches_reference(fourbar):
    # ic_basis 'auto' -> 'tangent' here: z = Nᵀq, N the null space of Φq at the newest state
    sim = ForwardSimulator(fourbar, ForwardConfig(coordinates='independent'))
    q = [sim.q]
    for _ in range(5000):
        q.append(sim.step()[1])
    r = ref.simulate(np.arange(5001) * 1e-3)
    assert ref.rmse(np.array(q), r.q) < 0.05e-3
    assert max(np.linalg.norm(fourbar.constraints.phi(x)) for x in q) < 1e-6


def test_independent_four_bar_with_z_a_subset_of_q_tracks_reference(fourbar):
    # the seed's z ⊂ q: every natural coordinate of this four-bar turns back during the
    # swing, so z is re-chosen on the way; the trapezoidal rule in those curved
    # coordinates is less accurate than in the tangent basis (README: 0.07 mm over 5 s)
    sim = ForwardSimulator(fourbar, ForwardConfig(coordinates='independent',
                                                  ic_basis='coordinates'))
    q = [sim.q]
    for _ in range(1500):
        q.append(sim.step()[1])
    r = ref.simulate(np.arange(1501) * 1e-3)
    assert sim.switches >= 1
    assert ref.rmse(np.array(q), r.q) < 0.1e-3
    assert max(np.linalg.norm(fourbar.constraints.phi(x)) for x in q) < 1e-6


def test_independent_bases_agree_with_dependent_coordinates_on_the_five_bar():
    # 2 DOF: a (2, n) tangent basis, re-chosen every step, and the seed's z ⊂ q
    s = load_system(CONFIG / 'five_bar.yaml')
    dc = simulate(s, 0.5, ForwardConfig())
    for basis in ('tangent', 'coordinates'):
        ic = simulate(s, 0.5, ForwardConfig(coordinates='independent', ic_basis=basis))
        assert np.abs(ic.q - dc.q).max() < 1e-3
        assert ic.phi_norm.max() < 1e-6


@pytest.mark.parametrize('solver', ['anchored-lm', 'incremental', 'batch'])
def test_other_solvers_agree_with_reference_on_a_short_run(fourbar, solver):
    traj = simulate(fourbar, 0.3, ForwardConfig(solver=solver))
    r = ref.simulate(traj.t)
    assert ref.rmse(traj.q, r.q) < 0.05e-3
    assert traj.phi_norm.max() < 1e-6


def test_euler_integrator_runs_and_is_first_order(fourbar):
    traj = simulate(fourbar, 0.3, ForwardConfig(integrator='euler'))
    err = ref.rmse(traj.q, ref.simulate(traj.t).q)
    traj2 = simulate(fourbar, 0.3, ForwardConfig(integrator='euler', dt=5e-4))
    err2 = ref.rmse(traj2.q, ref.simulate(traj2.t).q)
    assert 1.6 < err / err2 < 2.4


def test_larger_windows_give_the_same_answer(fourbar):
    a = simulate(fourbar, 0.2, ForwardConfig(window=2))
    b = simulate(fourbar, 0.2, ForwardConfig(window=5))
    assert np.abs(a.q - b.q).max() < 1e-6


@pytest.mark.parametrize('name', ['pendulum1', 'pendulum2', 'pendulum3'])
def test_pendulum_energy_drift_over_five_seconds_is_bounded(name):
    s = load_system(CONFIG / f'{name}.yaml')
    traj = simulate(s, 5.0, ForwardConfig())
    E = energy(s, traj.q, traj.qd)
    scale = np.abs(E).max()
    assert np.abs(E - E[0]).max() / scale < 1e-4
    assert traj.phi_norm.max() < 1e-6


@pytest.mark.parametrize('name', ['slider_crank', 'five_bar'])
@pytest.mark.parametrize('coordinates', ['dependent', 'independent'])
def test_slider_crank_and_five_bar_run_on_the_constraint_manifold(name, coordinates):
    s = load_system(CONFIG / f'{name}.yaml')
    traj = simulate(s, 0.5, ForwardConfig(coordinates=coordinates))
    assert np.all(np.isfinite(traj.q))
    assert traj.phi_norm.max() < 1e-6
    E = energy(s, traj.q, traj.qd)
    assert np.abs(E - E[0]).max() / np.abs(E).max() < 1e-4
    # it actually moves (gravity does work)
    assert np.abs(traj.q[-1] - traj.q[0]).max() > 1e-2


def test_slider_stays_on_its_line():
    s = load_system(CONFIG / 'slider_crank.yaml')
    traj = simulate(s, 0.5, ForwardConfig())
    a, b = np.array([-3.0, -2.0]), np.array([8.0, 2.0])
    u = (b - a) / np.linalg.norm(b - a)
    p = traj.q[:, 2:4] - a
    assert np.abs(p[:, 0] * u[1] - p[:, 1] * u[0]).max() < 1e-8


def test_pick_and_place_with_redundant_constraints_runs():
    s = load_system(CONFIG / 'pick-and-place-robot.yaml')
    traj = simulate(s, 0.3, ForwardConfig())
    assert np.all(np.isfinite(traj.q))
    assert traj.phi_norm.max() < 1e-6


def test_actuator_torque_moves_the_crank_the_right_way():
    s = load_system(CONFIG / 'fourbar.yaml')
    free = simulate(s, 0.2, ForwardConfig())
    pushed = simulate(s, 0.2, ForwardConfig(), tau_fn=lambda t, q, qd: np.array([50.0]))
    # counter-clockwise torque on the crank: point 1 rises relative to free fall
    assert pushed.q[-1, 1] > free.q[-1, 1] + 1e-2


def test_step_returns_the_new_state_and_time(fourbar):
    sim = ForwardSimulator(fourbar, ForwardConfig(dt=2e-3))
    t, q, qd, qdd = sim.step()
    assert t == pytest.approx(2e-3)
    assert np.allclose(q, sim.q) and np.allclose(qd, sim.qd) and np.allclose(qdd, sim.qdd)
    assert qd[1] < 0.0       # point 1 starts falling


@pytest.mark.parametrize('kwargs, match', [
    (dict(dt=0.0), 'dt'), (dict(window=1), 'window'), (dict(solver='magic'), 'solver'),
    (dict(coordinates='polar'), 'coordinates'), (dict(integrator='rk4'), 'integrator'),
    (dict(sigma_dynamics=-1.0), 'sigma_dynamics')])
def test_bad_configuration_is_a_user_error(kwargs, match):
    with pytest.raises(MbfgError, match=match):
        ForwardConfig(**kwargs)


def test_wrong_tau_length_is_a_user_error():
    s = load_system(CONFIG / 'fourbar.yaml')
    sim = ForwardSimulator(s)
    with pytest.raises(MbfgError, match='1 actuators'):
        sim.step(np.zeros(2))


# -- CLI -----------------------------------------------------------------------------
def test_cli_writes_csv_with_header_and_one_row_per_step(tmp_path, capsys):
    from mbfg_ros.cli.simulate import main
    out = tmp_path / 'run.csv'
    png = tmp_path / 'run.png'
    rc = main([str(CONFIG / 'fourbars1.yaml'), '--duration', '0.05', '--output', str(out),
               '--plot', str(png), '--quiet'])
    assert rc == 0
    with open(out) as fh:
        rows = list(csv.reader(fh))
    names = ['x1', 'y1', 'x2', 'y2']              # the coordinates by name (issue 12)
    assert rows[0] == (['t'] + [f'{c}.position' for c in names]     # issue 30: one convention
                       + [f'{c}.velocity' for c in names]
                       + [f'{c}.acceleration' for c in names] + ['phi_norm'])
    assert len(rows) == 1 + 51
    assert float(rows[1][0]) == 0.0 and float(rows[-1][0]) == pytest.approx(0.05)
    assert png.stat().st_size > 1000
    text = capsys.readouterr().out
    assert '50 steps' in text and 'max |Phi(q)|' in text and 'energy drift' in text


def test_cli_bad_config_is_one_line_and_exit_2(tmp_path, capsys):
    from mbfg_ros.cli.simulate import main
    bad = tmp_path / 'bad.yaml'
    bad.write_text('points: []\nplanar_bodies: []\nfoo: 1\n')
    rc = main([str(bad), '--duration', '0.01'])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count('\n') == 1 and 'bad.yaml' in err and "'foo'" in err
    assert 'Traceback' not in err


def test_cli_missing_file_and_bad_step_are_one_line_errors(tmp_path, capsys):
    from mbfg_ros.cli.simulate import main
    assert main([str(tmp_path / 'none.yaml')]) == 2
    assert 'none.yaml' in capsys.readouterr().err
    assert main([str(CONFIG / 'fourbars1.yaml'), '--window', '1']) == 2
    assert 'window' in capsys.readouterr().err


@pytest.mark.parametrize('basis', ['tangent', 'coordinates'])
def test_cli_independent_coordinates_with_either_basis(tmp_path, basis):
    from mbfg_ros.cli.simulate import main
    out = tmp_path / 'ic.csv'
    rc = main([str(CONFIG / 'fourbars1.yaml'), '--duration', '0.3', '--coordinates',
               'independent', '--ic-basis', basis, '--output', str(out), '--quiet'])
    assert rc == 0
    data = np.loadtxt(out, delimiter=',', skiprows=1)
    r = ref.simulate(data[:, 0])
    assert ref.rmse(data[:, 1:5], r.q) < 0.05e-3
    assert data[:, -1].max() < 1e-6


def test_auto_basis_keeps_relative_angles_and_uses_the_tangent_for_points(fourbar):
    rel = load_system(CONFIG / 'fourbars1-with-rel-angle.yaml')
    cfg = ForwardConfig(coordinates='independent')
    assert ForwardSimulator(rel, cfg).ic_basis == 'coordinates'
    assert ForwardSimulator(fourbar, cfg).ic_basis == 'tangent'
    with pytest.raises(MbfgError, match='ic_basis'):
        ForwardConfig(ic_basis='nullspace')
