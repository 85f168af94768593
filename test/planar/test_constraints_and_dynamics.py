"""Constraint rows, generalized forces and dynamics Jacobians vs finite differences.

States are drawn far from the assembled pose too (off the constraint manifold,
random velocities), as the factor graphs evaluate them there while iterating.
"""
import math

import numpy as np
import pytest
from conftest import DATA, UPSTREAM_MECHANISMS, numerical_jacobian

from mbfg_ros.planar.dynamics import accel_independent_eq15, forward_accel, load_system
from mbfg_ros.planar.kinematics import r_s_matrices, selector, solve_velocity

MECHS = [*UPSTREAM_MECHANISMS, DATA / 'extensions.yaml', DATA / 'quick_return.yaml']
SYSTEMS = {p.name: load_system(p) for p in MECHS}


def states(sys, count=4, seed=0):
    rng = np.random.default_rng(seed)
    for k in range(count):
        spread = [0.0, 0.05, 0.3, 1.0][k % 4]
        yield (sys.q0 + spread * rng.standard_normal(sys.n), rng.standard_normal(sys.n),
               rng.standard_normal(sys.n))


@pytest.mark.parametrize('name', SYSTEMS)
def test_constraint_jacobians_match_finite_differences(name):
    sys = SYSTEMS[name]
    c = sys.constraints
    lam = np.random.default_rng(1).standard_normal(c.m)
    for q, v, a in states(sys):
        np.testing.assert_allclose(c.phi_q(q), numerical_jacobian(c.phi, q), atol=1e-6)
        np.testing.assert_allclose(c.hess_vec(q, a), numerical_jacobian(
            lambda x: c.phi_q(x) @ a, q), atol=1e-6)
        np.testing.assert_allclose(c.phi_q_dot(q, v), numerical_jacobian(
            lambda x: c.phi_q(x) @ v, q), atol=1e-6)            # Eq. 40c
        np.testing.assert_allclose(c.phidot_q_qd_q(q, v), numerical_jacobian(
            lambda x: c.phi_q_dot(x, v) @ v, q), atol=1e-6)     # (Φ̇q q̇)_q
        np.testing.assert_allclose(c.hess_weighted(q, lam), numerical_jacobian(
            lambda x: c.phi_q(x).T @ lam, q), atol=1e-6)
        t = c.terms(q, v)
        np.testing.assert_allclose(t.phi, c.phi(q), atol=1e-12)
        np.testing.assert_allclose(t.gamma_q, c.phidot_q_qd_q(q, v), atol=1e-12)


def test_phi_q_dot_is_the_time_derivative_of_phi_q_along_a_motion():
    sys = SYSTEMS['fourbars1-with-rel-angle.yaml']
    c = sys.constraints
    q, v, _ = next(states(sys, seed=3))
    h = 1e-6
    numeric = (c.phi_q(q + h * v) - c.phi_q(q - h * v)) / (2 * h)
    np.testing.assert_allclose(c.phi_q_dot(q, v), numeric, atol=1e-7)   # Eq. 40a


def test_angle_coordinate_equals_the_geometric_angle_on_the_manifold():
    sys = SYSTEMS['fourbars1-with-rel-angle.yaml']
    from mbfg_ros.planar.kinematics import solve_position
    for theta in (0.3, 2.0, -2.8):
        q = solve_position(sys.constraints, sys.q0, {4: theta})
        assert math.atan2(q[1], q[0]) == pytest.approx(theta, abs=1e-10)
        assert math.hypot(q[0], q[1]) == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize('name', SYSTEMS)
def test_generalized_force_jacobians_match_finite_differences(name):
    sys = SYSTEMS[name]
    tau = np.linspace(-1, 1, sys.forces.n_act)
    for q, v, _ in states(sys):
        ft = sys.forces.evaluate(q, v, tau)
        np.testing.assert_allclose(ft.Q_q, numerical_jacobian(
            lambda x: sys.forces.evaluate(x, v, tau).Q, q), atol=1e-6)
        np.testing.assert_allclose(ft.Q_qd, numerical_jacobian(
            lambda x: sys.forces.evaluate(q, x, tau).Q, v), atol=1e-6)
        B = sys.forces.actuator_matrix(q)
        np.testing.assert_allclose(B @ tau, ft.Q - sys.forces.evaluate(q, v).Q, atol=1e-12)


@pytest.mark.parametrize('name', SYSTEMS)
def test_forward_dynamics_jacobians_match_finite_differences(name):
    sys = SYSTEMS[name]
    tau = np.linspace(-1, 1, sys.forces.n_act)
    for q, v, _ in states(sys, count=3):
        a = forward_accel(sys, q, v, tau, jacobians=True, jac_Q=True)
        scale = 1.0 + np.abs(a.qdd_q).max()
        np.testing.assert_allclose(a.qdd_q / scale, numerical_jacobian(
            lambda x: forward_accel(sys, x, v, tau).qdd, q) / scale, atol=1e-6)
        np.testing.assert_allclose(a.qdd_qd, numerical_jacobian(
            lambda x: forward_accel(sys, q, x, tau).qdd, v), atol=1e-6)
        Q0 = np.zeros(sys.n)
        np.testing.assert_allclose(a.qdd_Q, numerical_jacobian(
            lambda x: forward_accel(sys, q, v, tau, Q_extra=x).qdd, Q0), atol=1e-6)


@pytest.mark.parametrize('name', SYSTEMS)
def test_augmented_system_equals_seed_eq15_in_independent_coordinates(name):
    sys = SYSTEMS[name]
    rng = np.random.default_rng(5)
    qd = solve_velocity(sys.constraints.phi_q(sys.q0), sys.z_idx, rng.standard_normal(sys.dof))
    Q = sys.forces.evaluate(sys.q0, qd).Q
    a = forward_accel(sys, sys.q0, qd)
    np.testing.assert_allclose(a.qdd[list(sys.z_idx)],
                               accel_independent_eq15(sys, sys.q0, qd, Q), atol=1e-9)
    # The accelerations satisfy the acceleration constraint Φq q̈ = −Φ̇q q̇ (Eq. 3).
    c = sys.constraints
    np.testing.assert_allclose(c.phi_q(sys.q0) @ a.qdd, -c.phi_q_dot(sys.q0, qd) @ qd,
                               atol=1e-9)


@pytest.mark.parametrize('name', SYSTEMS)
def test_r_spans_the_null_space_and_s_inverts_phi_q(name):
    sys = SYSTEMS[name]
    Jq = sys.constraints.phi_q(sys.q0)
    R, S = r_s_matrices(Jq, sys.z_idx)
    B = selector(sys.z_idx, sys.n)
    np.testing.assert_allclose(Jq @ R, 0, atol=1e-10)
    np.testing.assert_allclose(B @ R, np.eye(sys.dof), atol=1e-10)
    np.testing.assert_allclose(B @ S, 0, atol=1e-10)
    b = Jq @ np.random.default_rng(2).standard_normal(sys.n)   # a consistent b
    np.testing.assert_allclose(Jq @ S @ b, b, atol=1e-9)


def test_pendulum_matches_the_textbook_equation():
    # A uniform bar (m, L) pinned at one end: θ̈ = −(3 g / 2 L) cos θ with θ from +x.
    sys = SYSTEMS['pendulum1.yaml']
    theta = math.pi / 4
    a = forward_accel(sys, sys.q0, np.zeros(2))
    L = 2.0
    tangential = np.array([-math.sin(theta), math.cos(theta)]) * L
    expected = -(3 * 9.81 / (2 * L)) * math.cos(theta)
    assert a.qdd @ tangential / L ** 2 == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize('name', SYSTEMS)
def test_a_system_has_every_member_the_modules_it_builds_on_declare(name):
    """``factors``, ``end_stops`` and ``sensors`` take a planar system as the Protocols they
    declare (they import no ``dynamics``, so ``System`` builds its door methods on them):
    a real System has every member, and its ``accel`` is :func:`forward_accel`."""
    from support.protocols import missing_members

    from mbfg_ros.planar.end_stops import StoppedSystem
    from mbfg_ros.planar.factors import IndependentStateSystem
    from mbfg_ros.planar.sensors import SensedMechanism

    sys = SYSTEMS[name]
    for proto in (IndependentStateSystem, StoppedSystem, SensedMechanism):
        assert not missing_members(sys, proto), (proto, missing_members(sys, proto))
    q, qd, _ = list(states(sys, count=2))[1]
    tau = np.full(len(sys.mech.actuators), 0.3)
    a, b = sys.accel(q, qd, tau, jacobians=True, jac_Q=True), forward_accel(
        sys, q, qd, tau, jacobians=True, jac_Q=True)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
