"""Seed 002's dynamics graph: inverse, forward and hybrid dynamics on one graph, under every
ordering, against Pinocchio (open trees) and against the null-space solver (closed loops)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.spatial_random import PinReference, random_urdf

from mbfg_ros.spatial.dynamics_graph import ORDERINGS, DynamicsGraph, solve_nonlinear
from mbfg_ros.spatial.system import build_spatial_system
from mbfg_ros.spatial.urdf import load_spatial

DATA = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
TOL = 1e-9


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


ROBOTS = ['ur5', 'puma560', 'panda_like', 'double_pendulum']


@pytest.mark.parametrize('robot', ROBOTS)
def test_inverse_forward_hybrid_equal_pinocchio_under_every_ordering(robot):
    text = (DATA / f'{robot}.urdf').read_text()
    model = load_spatial(text)
    dg = DynamicsGraph(model)
    ref = PinReference(text, model.joint_names)
    rng = np.random.default_rng(42)
    worst, fd_over_bound = {}, 0.0
    for k in range(100):
        q, qd, qdd = rng.normal(size=(3, model.n))
        tau = ref.rnea(q, qd, qdd)
        ordering = ORDERINGS[k % len(ORDERINGS)]
        inv_order = 'rnea' if ordering in ('crba', 'aba') else ordering
        fwd_order = 'aba' if ordering == 'rnea' else ordering
        worst['ID'] = max(worst.get('ID', 0), _rel(dg.inverse(q, qd, qdd, inv_order).tau, tau))
        qdd_ref = ref.aba(q, qd, tau)
        # forward dynamics solves M q̈ = τ − h: its rounding grows with κ(M) (the puma560's
        # reaches 1.1e5, its error 5.7e-10, within 1.75x of a fixed 1e-9 on one CPU), so its
        # error is held to 1000 κ(M) ε (seen ≤ 53 κ ε on three robots; a wrong model is off
        # by ≫ 1e-6)
        kappa_eps = np.linalg.cond(ref.crba(q)) * np.finfo(float).eps
        fd_over_bound = max(fd_over_bound, _rel(dg.forward(q, qd, tau, fwd_order).qdd,
                                                qdd_ref) / (1000.0 * kappa_eps))
        # hybrid: a random half of the joints prescribed in acceleration, the rest in torque
        acc = set(rng.choice(model.n, size=max(1, model.n // 2), replace=False).tolist())
        h = dg.hybrid(q, qd, {j: qdd[j] for j in acc},
                      {j: tau[j] for j in range(model.n) if j not in acc}, fwd_order)
        worst['hybrid'] = max(worst.get('hybrid', 0), _rel(h.tau, tau), _rel(h.qdd, qdd_ref))
    assert max(worst.values()) < TOL, worst
    assert fd_over_bound < 1.0, fd_over_bound


def test_seed_table3_hybrid_3r_arm_against_the_equations_of_motion():
    """Seed 002 §VI: τ1 unknown with θ̈1 given, θ̈2, θ̈3 unknown with τ2, τ3 given."""
    text = random_urdf(np.random.default_rng(3), 3, branch=False, fixed=False,
                       kinds=('revolute',))
    model = load_spatial(text)
    dg = DynamicsGraph(model)
    ref = PinReference(text, model.joint_names)
    rng = np.random.default_rng(5)
    for _ in range(20):
        q, qd = rng.normal(size=(2, 3))
        qdd1, tau23 = rng.normal(), rng.normal(size=2)
        sol = dg.hybrid(q, qd, {0: qdd1}, {1: tau23[0], 2: tau23[1]})
        # M q̈ + h = τ with unknowns (τ1, θ̈2, θ̈3): a dense solve as the reference
        M, h = ref.crba(q), ref.rnea(q, qd, np.zeros(3))
        A = np.zeros((3, 3))
        A[:, 0] = [-1.0, 0.0, 0.0]
        A[:, 1:] = M[:, 1:]
        x = np.linalg.solve(A, np.array([0.0, *tau23]) - h - M[:, 0] * qdd1)
        assert sol.tau[0] == pytest.approx(x[0], rel=1e-10, abs=1e-10)
        assert sol.qdd[1:] == pytest.approx(x[1:], rel=1e-10, abs=1e-10)


@pytest.mark.parametrize('robot', ['ur5', 'panda_like', 'double_pendulum'])
def test_the_nonlinear_graph_with_pose_and_twist_factors_gives_the_same_answers(robot):
    model = load_spatial(DATA / f'{robot}.urdf')
    dg = DynamicsGraph(model)
    rng = np.random.default_rng(1)
    q, qd, qdd = rng.normal(size=(3, model.n))
    lin = dg.inverse(q, qd, qdd)
    nl = solve_nonlinear(dg, q, qd, {j: qdd[j] for j in range(model.n)}, {})
    assert _rel(nl.tau, lin.tau) < TOL and _rel(nl.F, lin.F) < TOL
    fwd = solve_nonlinear(dg, q, qd, {}, {j: lin.tau[j] for j in range(model.n)})
    assert _rel(fwd.qdd, qdd) < 1e-8


@pytest.mark.parametrize('name', ['fourbar', 'five_bar'])
@pytest.mark.parametrize('ordering', ['colamd', 'metis'])
def test_closed_loops_equal_the_null_space_solution(name, ordering):
    S = build_spatial_system(DATA / f'{name}.urdf', DATA / f'{name}_loops.yaml', 'numpy')
    dg = DynamicsGraph(S.model)
    act = np.flatnonzero(S.model.actuated)
    rng = np.random.default_rng(7)
    for _ in range(10):
        q = S.assemble(S.q0 + S.B @ rng.uniform(-0.3, 0.3, len(act)), keep=act)
        N = S.null_space(q)[0]
        qd = N @ rng.normal(size=N.shape[1])
        tau_a = rng.normal(size=len(act)) * 3
        qdd = S.forward(q, qd, tau_a)
        tau = np.zeros(S.n)
        tau[act] = tau_a
        assert _rel(dg.inverse(q, qd, qdd, ordering).tau[act], tau_a) < TOL
        assert _rel(dg.forward(q, qd, tau, ordering).qdd, qdd) < TOL


def test_redundant_actuation_gives_the_minimum_torques():
    S = build_spatial_system(DATA / 'five_bar.urdf',
                             {**_overlay(DATA / 'five_bar_loops.yaml'),
                              'actuators': ['left_crank_joint', 'right_crank_joint',
                                            'left_elbow']}, 'numpy')
    dg = DynamicsGraph(S.model)
    rng = np.random.default_rng(2)
    q = S.q0
    N = S.null_space(q)[0]
    qd = N @ rng.normal(size=N.shape[1])
    qdd = S.forward(q, qd, rng.normal(size=3))
    tau_min = S.inverse(q, qd, qdd)            # minimum-norm least squares
    act = np.flatnonzero(S.model.actuated)
    for ordering in ORDERINGS:
        sol = dg.inverse(q, qd, qdd, ordering)
        assert _rel(sol.tau[act], tau_min) < TOL, ordering


def _overlay(path: Path) -> dict:
    import yaml
    return yaml.safe_load(path.read_text())


def test_bad_requests_are_refused():
    dg = DynamicsGraph(load_spatial(DATA / 'double_pendulum.urdf'))
    z = np.zeros(2)
    with pytest.raises(ValueError, match='exactly one'):
        dg.hybrid(z, z, {0: 0.0}, {0: 0.0, 1: 0.0})
    with pytest.raises(ValueError, match='ordering'):
        dg.inverse(z, z, z, 'amd')
