"""Inverse dynamics: factor graph vs MSC Adams, vs the direct virtual-power method."""
from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.cli.inverse import main as inverse_main
from mbfg_ros.core.errors import AssemblyError, MbfgError
from mbfg_ros.planar.problems.inverse import (
    BatchModel,
    InverseConfig,
    StepModel,
    direct_kinematics,
    inverse_dynamics,
    step_error,
)
from mbfg_ros.planar.problems.inverse_direct import (
    DirectInverseDynamics, LeanKinematics, inverse_dynamics_direct,
)
from mbfg_ros.planar.problems.inverse_kinematics import _direct_kinematics_sequential
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.planar.kinematics import r_s_matrices
from mbfg_ros.core.trajectory import load_trajectory

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / 'config'             # upstream files, copied unchanged (config/SOURCE.md)
ADAMS = REPO / 'test' / 'data' / 'InverseDynamics_4bars_MSC.tab'
CONFIG = Path(__file__).resolve().parents[2] / 'config'


@pytest.fixture(scope='module')
def fourbar():
    return load_system(CONFIG / 'fourbar_inverse.yaml')


@pytest.fixture(scope='module')
def fourbar_run(fourbar):
    tr = load_trajectory(DATA / 'fourbars1-with-rel-angle-trajectory.txt', columns=1)
    return inverse_dynamics(fourbar, tr.t, tr.z, [4], config=InverseConfig(staged=False))


def _reference_tau(sys, q, qd, zdd, z_idx):
    """Seed 003 Eq. 6.110 written out with the core's R, S (SVD based) and lstsq."""
    cons = sys.constraints
    R, S = r_s_matrices(cons.phi_q(q), z_idx)
    qdd = S @ (-(cons.phi_q_dot(q, qd) @ qd)) + R @ zdd
    Q = sys.forces.evaluate(q, qd, None, jacobians=False).Q
    return np.linalg.lstsq(R.T @ sys.forces.actuator_matrix(q), R.T @ (sys.M @ qdd - Q),
                           rcond=None)[0]


def test_factor_graph_crank_torque_matches_msc_adams_on_all_rows(fourbar_run):
    adams = np.loadtxt(ADAMS, comments='%')
    np.testing.assert_allclose(fourbar_run.t, adams[:, 0], atol=1e-9)
    # Adams reports the torque with the opposite sign.
    assert np.max(np.abs(fourbar_run.tau[:, 0] + adams[:, 1])) <= 0.05


def test_factor_graph_follows_the_prescribed_angle(fourbar_run):
    tr = load_trajectory(DATA / 'fourbars1-with-rel-angle-trajectory.txt', columns=1)
    assert np.max(np.abs(fourbar_run.q[:, 4] - tr.z[:, 0])) < 1e-6
    assert np.max(np.abs(fourbar_run.Q[:, :4])) < 1e-6   # unactuated components stay zero


def test_factor_graph_equals_direct_per_tick_result_along_the_trajectory(fourbar, fourbar_run):
    direct = DirectInverseDynamics(fourbar)
    r = fourbar_run
    tau = np.array([direct(r.q[k], r.qd[k], r.qdd[k, [4]]) for k in range(len(r.t))])
    assert np.max(np.abs(tau - r.tau)) <= 1e-6


def test_direct_class_equals_the_textbook_formula_on_random_states(fourbar):
    rng = np.random.default_rng(1)
    direct = DirectInverseDynamics(fourbar)
    cons = fourbar.constraints
    for _ in range(5):
        q = fourbar.q0 + 0.0
        N = np.linalg.svd(cons.phi_q(q))[2][-1]
        qd = rng.normal() * N
        zdd = rng.normal(size=1)
        want = _reference_tau(fourbar, q, qd, zdd, [4])
        np.testing.assert_allclose(direct(q, qd, zdd), want, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(inverse_dynamics_direct(fourbar, q, qd, zdd), want,
                                   rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('name', ['fourbar_inverse.yaml', 'pick_and_place.yaml'])
def test_lean_kinematics_equal_the_core_constraints(name):
    sys = load_system(CONFIG / name)
    lean = LeanKinematics(sys.constraints)
    rng = np.random.default_rng(2)
    q, qd, v = (sys.q0 + 0.1 * rng.normal(size=sys.n), rng.normal(size=sys.n),
                rng.normal(size=sys.n))
    lam = rng.normal(size=sys.m)
    ref = sys.constraints.terms(q, qd)
    got = lean.terms(q, qd)
    for a, b in zip(got[:4], ref):
        np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_allclose(lean.hess_vec(q, v), sys.constraints.hess_vec(q, v), atol=1e-12)
    np.testing.assert_allclose(lean.hess_weighted(q, lam),
                               sys.constraints.hess_weighted(q, lam), atol=1e-12)
    # the per-tick forms: Φq alone, and the second-order terms from terms()'s angle caches
    np.testing.assert_allclose(lean.phi_q(q), sys.constraints.phi_q(q), atol=1e-12)
    np.testing.assert_allclose(lean.hess_vec(q, v, got), sys.constraints.hess_vec(q, v),
                               atol=1e-12)
    np.testing.assert_allclose(lean.hess_weighted(q, lam, got),
                               sys.constraints.hess_weighted(q, lam), atol=1e-12)


def _pick_and_place_motion(sys, N):
    t = np.arange(N) * 0.005
    z = sys.q0[[20, 21]] + np.column_stack((0.3 * (1 - np.cos(2 * t)), -0.2 * np.sin(1.5 * t)))
    return t, z


def test_pick_and_place_inverse_dynamics_agrees_with_the_direct_method():
    sys = load_system(CONFIG / 'pick_and_place.yaml')
    assert len(sys.rows) < sys.m   # rank-deficient constraints
    t, z = _pick_and_place_motion(sys, 200)
    r = inverse_dynamics(sys, t, z, [20, 21], config=InverseConfig(staged=False))
    direct = DirectInverseDynamics(sys)
    tau = np.array([direct(r.q[k], r.qd[k], r.qdd[k, [20, 21]]) for k in range(len(t))])
    assert np.max(np.abs(tau - r.tau)) <= 1e-8 * np.max(np.abs(tau))
    # The textbook formula (SVD null space of all 22 rows) needs exactly consistent
    # states: take them from the direct kinematics.
    q, qd, qdd = direct_kinematics(sys, t, z, [20, 21])
    for k in range(0, len(t), 40):
        want = _reference_tau(sys, q[k], qd[k], qdd[k, [20, 21]], [20, 21])
        np.testing.assert_allclose(direct(q[k], qd[k], qdd[k, [20, 21]]), want, rtol=1e-9)


def test_the_four_stages_and_the_single_batch_give_the_same_answer(fourbar):
    tr = load_trajectory(DATA / 'fourbars1-with-rel-angle-trajectory.txt', columns=1)
    a = inverse_dynamics(fourbar, tr.t[:300], tr.z[:300], [4], config=InverseConfig())
    b = inverse_dynamics(fourbar, tr.t[:300], tr.z[:300], [4],
                         config=InverseConfig(staged=False))
    assert len(a.iterations) == 4 and len(b.iterations) == 1
    assert np.max(np.abs(a.tau - b.tau)) < 1e-6


def test_end_effector_path_is_solved_by_inverse_kinematics_first():
    sys = load_system(CONFIG / 'pick_and_place.yaml')
    t, z = _pick_and_place_motion(sys, 100)
    motors = inverse_dynamics(sys, t, z, [20, 21], config=InverseConfig(staged=False))
    ee = [sys.names.index('x6'), sys.names.index('y6')]
    path = inverse_dynamics(sys, t, motors.q[:, ee], ee, actuators=[20, 21],
                            config=InverseConfig(staged=False))
    assert np.max(np.abs(path.q[:, [20, 21]] - z)) < 1e-5
    assert np.max(np.abs(path.tau[5:-5] - motors.tau[5:-5])) < 1e-3 * np.max(np.abs(motors.tau))


def test_redundant_actuation_gives_minimum_norm_torques_in_both_methods():
    sys = load_system(CONFIG / 'fourbar_two_motors.yaml')
    tr = load_trajectory(DATA / 'fourbars1-with-rel-angle-trajectory.txt', columns=1)
    r = inverse_dynamics(sys, tr.t[:200], tr.z[:200], [4], config=InverseConfig(staged=False))
    direct = DirectInverseDynamics(sys, [4])
    for k in range(0, 200, 50):
        tau = direct(r.q[k], r.qd[k], r.qdd[k, [4]])
        cons = sys.constraints
        R, S = r_s_matrices(cons.phi_q(r.q[k]), [4])
        qdd = S @ (-(cons.phi_q_dot(r.q[k], r.qd[k]) @ r.qd[k])) + R @ r.qdd[k, [4]]
        Q = sys.forces.evaluate(r.q[k], r.qd[k], None, jacobians=False).Q
        W = R.T[:, [4, 5]]
        # virtual power balance (Eq. 6.110) and minimum norm (τ in the row space of W)
        np.testing.assert_allclose(W @ tau, R.T @ (sys.M @ qdd - Q), rtol=1e-9)
        assert abs(W[0, 0] * tau[1] - W[0, 1] * tau[0]) < 1e-9 * np.linalg.norm(tau)
        np.testing.assert_allclose(r.tau[k], tau, rtol=1e-6)


def test_an_unreachable_prescribed_pose_names_the_sample(tmp_path, capsys):
    sys = load_system(CONFIG / 'fourbar_inverse.yaml')
    t = np.arange(50) * 0.01
    y1 = 0.805 + 0.02 * np.arange(50)   # the crank is 1 m long: y1 > 1 cannot be assembled
    with pytest.raises(AssemblyError, match=r'sample 10 \(t=0\.1 s: y1=1\.005\)'):
        inverse_dynamics(sys, t, y1[:, None], [1], actuators=[4])
    f = tmp_path / 'y1.txt'
    np.savetxt(f, np.column_stack((t, y1)))
    assert inverse_main([str(CONFIG / 'fourbar_inverse.yaml'), '--trajectory', str(f),
                         '--coordinates', 'y1', '--output', str(tmp_path / 'o.csv')]) == 2
    assert 'sample 10' in capsys.readouterr().err


def test_cli_writes_torques_and_reactions(tmp_path):
    f = tmp_path / 'short.txt'
    tr = load_trajectory(DATA / 'fourbars1-with-rel-angle-trajectory.txt', columns=1)
    np.savetxt(f, np.column_stack((tr.t[:100], tr.z[:100])))
    out = tmp_path / 'tau.csv'
    assert inverse_main([str(CONFIG / 'fourbar_inverse.yaml'), '--trajectory', str(f),
                         '--output', str(out), '--reactions', '--batch',
                         '--plot', str(tmp_path / 'tau.png')]) == 0
    header = out.read_text().splitlines()[0].split(',')
    assert header[:2] == ['t', 'crank_motor.effort'] and 'p0_on_body0.fx' in header
    data = np.loadtxt(out, delimiter=',', skiprows=1)
    adams = np.loadtxt(ADAMS, comments='%')[:100]
    assert np.max(np.abs(data[:, 1] + adams[:, 1])) < 0.05
    assert (tmp_path / 'tau.png').stat().st_size > 0


@pytest.mark.parametrize('name', ['fourbar_inverse.yaml', 'pick_and_place.yaml',
                                  'fourbar_two_motors.yaml'])
def test_batched_linearisation_equals_the_per_sample_factor_in_every_stage(name):
    sys = load_system(CONFIG / name)
    z_idx = [4] if 'fourbar' in name else [20, 21]
    rng = np.random.default_rng(3)
    N, n = 4, sys.n
    X = np.hstack((sys.q0 + 0.05 * rng.normal(size=(N, n)), rng.normal(size=(N, 2 * n))))
    Qx = rng.normal(size=(N, n))
    z = rng.normal(size=(N, len(z_idx)))
    batch, single = BatchModel(sys, z_idx), StepModel(sys, z_idx)
    for stage in (1, 2, 3, 4):
        e, Jx, JQ = batch.errors(stage, X, Qx, z)
        for k in range(N):
            xs = [X[k], Qx[k]] if stage == 4 else [X[k]]
            e1, J1 = step_error(single, stage, z[k], None, None, xs, True)
            np.testing.assert_allclose(e[k], e1, rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(Jx[k], J1[0], rtol=1e-9, atol=1e-9)
            if stage == 4:
                np.testing.assert_allclose(JQ[k], J1[1], rtol=1e-9, atol=1e-9)


def test_levenberg_marquardt_over_custom_factors_gives_the_gauss_newton_answer(fourbar):
    tr = load_trajectory(DATA / 'fourbars1-with-rel-angle-trajectory.txt', columns=1)
    a = inverse_dynamics(fourbar, tr.t[:100], tr.z[:100], [4],
                         config=InverseConfig(staged=False))
    b = inverse_dynamics(fourbar, tr.t[:100], tr.z[:100], [4],
                         config=InverseConfig(staged=False, solver='levenberg_marquardt'))
    assert np.max(np.abs(a.tau - b.tau)) < 1e-6


def _motion(sys, name, N):
    """N samples of the Adams crank trajectory (four-bar) or the smooth two-motor motion."""
    if 'fourbar' in name:
        tr = load_trajectory(DATA / 'fourbars1-with-rel-angle-trajectory.txt', columns=1)
        return tr.t[:N], tr.z[:N], [4]
    t, z = _pick_and_place_motion(sys, N)
    return t, z, [20, 21]


@pytest.mark.parametrize('name', ['fourbar_inverse.yaml', 'pick_and_place.yaml'])
def test_batched_direct_kinematics_equals_the_sample_by_sample_solution(name):
    sys = load_system(CONFIG / name)
    t, z, z_idx = _motion(sys, name, 400 if 'fourbar' in name else 200)
    fast = direct_kinematics(sys, t, z, z_idx)
    slow = _direct_kinematics_sequential(sys, t, z, z_idx)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
    assert np.max(np.abs(sys.constraints.phi(fast[0][-1]))) < 1e-10


@pytest.mark.parametrize('name', ['fourbar_inverse.yaml', 'pick_and_place.yaml'])
def test_cholesky_and_qr_elimination_give_the_same_torques(name):
    # Cholesky (default) on pick-and-place; the four-bar's stage 4 falls back to QR
    sys = load_system(CONFIG / name)
    t, z, z_idx = _motion(sys, name, 300)
    a = inverse_dynamics(sys, t, z, z_idx, config=InverseConfig(elimination='cholesky'))
    b = inverse_dynamics(sys, t, z, z_idx, config=InverseConfig(elimination='qr'))
    scale = np.abs(b.tau).max()
    assert scale > 1e-3
    assert np.max(np.abs(a.tau - b.tau)) < 1e-8 * scale
    assert np.max(np.abs(a.q - b.q)) < 1e-9


def test_unknown_elimination_is_a_clear_error(fourbar):
    tr = load_trajectory(DATA / 'fourbars1-with-rel-angle-trajectory.txt', columns=1)
    with pytest.raises(MbfgError, match='elimination'):
        inverse_dynamics(fourbar, tr.t[:10], tr.z[:10], [4],
                         config=InverseConfig(elimination='lu'))


def test_direct_inverse_dynamics_workspaces_are_independent():
    """The model is shared, the buffers are per run (Pinocchio's Model/Data): two threads
    with their own workspaces give the sequential answers and their own multipliers."""
    import threading

    sys_ = load_system(Path(__file__).resolve().parents[2] / 'config' / 'fourbar.yaml')
    direct = DirectInverseDynamics(sys_)
    rng = np.random.default_rng(0)
    states = []
    for _ in range(40):
        q = np.asarray(sys_.q0, float)
        qd = np.zeros(sys_.n)
        states.append((q, qd, rng.normal(size=direct.d)))
    expected = []
    for q, qd, zdd in states:
        expected.append((direct(q, qd, zdd).copy(), direct.ws.lam.copy()))
    results: dict[int, list] = {0: [], 1: []}

    def run(k: int) -> None:
        ws = direct.workspace()
        for q, qd, zdd in states[k::2]:
            results[k].append((direct(q, qd, zdd, ws).copy(), ws.lam.copy()))
    threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (0, 1):
        for (tau, lam), (tau_e, lam_e) in zip(results[k], expected[k::2]):
            assert np.allclose(tau, tau_e, atol=1e-12) and np.allclose(lam, lam_e, atol=1e-12)
    assert not np.allclose(expected[0][1], expected[1][1])     # the states really differ
