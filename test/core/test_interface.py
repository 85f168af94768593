"""The formulation seam: the planar and the spatial systems answer the same questions the
same way (interface.MultibodySystem) — the four-bar written both ways."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.core.interface import MultibodySystem, SensorModel
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.spatial.system import build_spatial_system

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / 'config' / 'urdf'


@pytest.fixture(scope='module')
def both():
    planar = load_system(ROOT / 'config' / 'fourbar.yaml')
    spatial = build_spatial_system(URDF / 'fourbar.urdf', URDF / 'fourbar_loops.yaml')
    return planar, spatial


def test_both_systems_implement_the_interface(both):
    for system in both:
        assert isinstance(system, MultibodySystem)


def test_both_sensor_models_answer_what_the_estimator_asks(both):
    """SensorModel (issue 23): observations, the gate and the start-up ask the model how a
    reading behaves, never which formulation it holds."""
    planar, spatial = both
    psm, ssm = planar.sensor_model(), spatial.sensor_model()
    for sm in (psm, ssm):
        assert isinstance(sm, SensorModel)
        assert sm.position_target('joint_pos') and not sm.position_target('joint_vel')
        assert not sm.angle_residual('joint_vel', 0) and not sm.angle_residual('gyro', 0)
        joints = range(len(sm.joint_names))
        assert ([sm.angle_residual('joint_pos', j) for j in joints]
                == [sm.joint_is_angular(j) for j in joints])
    # planar: encoders are functions of the natural coordinates; the IMU's orientation is a
    # yaw, wrapped and a scalar target of the start-up position problem
    assert psm.direct_encoders is None
    assert psm.angle_residual('orient', 0) and psm.position_target('orient')
    # spatial: the encoders read the three revolute joint coordinates; an orientation lives
    # on SO(3), neither wrapped nor a scalar start-up target
    assert list(ssm.direct_encoders) == [True, True, True]
    assert not ssm.angle_residual('orient', 0) and not ssm.position_target('orient')


def test_the_same_questions_give_consistent_answers(both):
    planar, spatial = both
    assert planar.angle_coordinates == ()                  # x1, y1, x2, y2: lengths
    assert spatial.angle_coordinates == (0, 1, 2)          # three revolute joints
    for system in both:
        q = np.asarray(system.q0, float)
        qd = np.zeros(system.n)
        phi, phi_q, gamma = system.constraint_terms(q, qd)
        assert np.abs(phi).max() < 1e-9 and phi_q.shape == (len(phi), system.n)
        assert np.allclose(gamma, 0.0)                     # at rest
        M = system.mass_matrix(q)
        assert M.shape == (system.n, system.n) and np.allclose(M, M.T)
        B = system.actuator_matrix(q)
        tau = np.full(B.shape[1], 1.5)
        qdd = system.accelerations(q, qd, tau)
        assert np.abs(phi_q @ qdd + gamma).max() < 1e-9    # the loop stays closed
        assert system.torques(q, qd, qdd) == pytest.approx(tau, abs=1e-9)


@pytest.mark.parametrize('which', ['planar', 'spatial', 'spatial_tree'])
def test_accelerations_with_jacobians_and_generalized_forces(both, which):
    if which == 'spatial_tree':
        system = build_spatial_system(URDF / 'ur5.urdf')
    else:
        system = both[0] if which == 'planar' else both[1]
    rng = np.random.default_rng(3)
    q = np.asarray(system.q0, float)
    _, phi_q, _ = system.constraint_terms(q, np.zeros(system.n))
    _, sv, Vt = np.linalg.svd(phi_q) if len(phi_q) else (None, np.zeros(0), np.eye(system.n))
    N = Vt[int(np.sum(sv > 1e-9)):].T
    qd = N @ rng.normal(size=N.shape[1])
    tau = rng.normal(size=system.actuator_matrix(q).shape[1])
    qdd, dq, dqd = system.accelerations(q, qd, tau, jacobians=True)
    assert qdd == pytest.approx(system.accelerations(q, qd, tau), rel=1e-11, abs=1e-12)
    h = 1e-6
    for k in range(system.n):
        e = np.zeros(system.n)
        e[k] = h
        acc = system.accelerations
        num_q = (acc(q + e, qd, tau) - acc(q - e, qd, tau)) / (2 * h)
        num_v = (acc(q, qd + e, tau) - acc(q, qd - e, tau)) / (2 * h)
        assert dq[:, k] == pytest.approx(num_q, rel=1e-5, abs=1e-5)
        assert dqd[:, k] == pytest.approx(num_v, rel=1e-5, abs=1e-5)
    # M q̈ − Q is a constraint force: it has no component along the free motions
    resid = system.mass_matrix(q) @ qdd - system.generalized_forces(q, qd, tau)
    assert np.abs(N.T @ resid).max() < 1e-9


def test_the_factor_graph_forward_dynamics_takes_a_urdf_robot():
    """forward.py (seed 000 Fig. 2, dependent coordinates: stacked state factor + trapezoidal
    integrators in GTSAM) through the interface on URDF robots, against the spatial Newton
    trapezoidal integrator (spatial/simulate.py): the same equations, two solvers."""
    from pathlib import Path

    from mbfg_ros.simulation.forward import ForwardConfig, simulate
    from mbfg_ros.spatial.simulate import simulate_spatial
    from mbfg_ros.spatial.system import build_spatial_system
    urdf = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
    arm = build_spatial_system(urdf / 'ur5.urdf')
    a, b = simulate(arm, 0.3, ForwardConfig(dt=1e-3)), simulate_spatial(arm, 0.3, 1e-3)
    assert np.abs(a.q - b.q).max() < 1e-9 and np.abs(a.qd - b.qd).max() < 1e-8
    assert np.abs(a.q[-1] - a.q[0]).max() > 0.01                # it moved
    loop = build_spatial_system(urdf / 'fourbar.urdf', urdf / 'fourbar_loops.yaml')
    c, d = simulate(loop, 0.3, ForwardConfig(dt=1e-3)), simulate_spatial(loop, 0.3, 1e-3)
    assert c.phi_norm.max() < 1e-8                               # the loop stays closed
    assert np.abs(c.q - d.q).max() < 1e-5                        # projection vs tight factors
    with pytest.raises(Exception, match='independent coordinates are planar only'):
        simulate(arm, 0.01, ForwardConfig(dt=1e-3, coordinates='independent'))


_ROTOR = {'joints': {'shoulder_lift_joint': {'Ir': 3e-5, 'gr': -101.0,
                                             'friction': {'b': 1.1}},
                     'wrist_1_joint': {'Ir': 1e-5, 'gr': 80.0}}}


@pytest.mark.parametrize('which', ['planar', 'spatial_loops', 'ur5_pinocchio', 'ur5_numpy',
                                   'ur5_rotors', 'panda_like'])
def test_acceleration_gain_is_the_change_of_the_forward_dynamics_per_torque(both, which):
    """∂q̈/∂τ of the one-factorisation formula (M⁻¹B, the augmented inverse, the null-space
    solution) against a forward dynamics per actuator with each torque pushed: q̈ is affine
    in τ, so the differences are exact up to rounding (issue 24: the estimator's dynamics σ
    for unknown efforts)."""
    systems = {'planar': lambda: both[0], 'spatial_loops': lambda: both[1],
               'ur5_pinocchio': lambda: build_spatial_system(URDF / 'ur5.urdf', None,
                                                             'pinocchio'),
               'ur5_numpy': lambda: build_spatial_system(URDF / 'ur5.urdf', None, 'numpy'),
               'ur5_rotors': lambda: build_spatial_system(URDF / 'ur5.urdf', _ROTOR),
               'panda_like': lambda: build_spatial_system(URDF / 'panda_like.urdf')}
    system = systems[which]()
    rng = np.random.default_rng(11)
    q = np.asarray(system.q0, float)
    if which not in ('planar', 'spatial_loops'):
        q = q + rng.uniform(-1.0, 1.0, system.n)          # a tree: any pose is assembled
    qd = rng.normal(size=system.n) * (0.0 if which in ('planar', 'spatial_loops') else 1.0)
    na = system.actuator_matrix(q).shape[1]
    assert na >= 1
    tau = rng.normal(size=na)
    base = system.accelerations(q, qd, tau)
    G = system.acceleration_gain(q)
    assert G.shape == (system.n, na)
    for a in range(na):
        pushed = tau.copy()
        pushed[a] += 10.0
        col = (system.accelerations(q, qd, pushed) - base) / 10.0
        assert np.abs(G[:, a] - col).max() <= 1e-8 * max(1.0, np.abs(col).max())


@pytest.mark.parametrize('which', ['planar', 'spatial', 'spatial_tree'])
def test_the_command_laws_questions_are_the_general_answers(both, which):
    """``constraint_jacobian`` is ``constraint_terms`` without φ and ``joint_rows`` is
    ``joint(..., want=True)``'s numbers ([∂h/∂q; ∂ḣ/∂q], ∂ḣ/∂q̇ = ∂h/∂q), bit for bit, on
    both formulations (what the command law asks per command, issue 24)."""
    system = (build_spatial_system(URDF / 'ur5.urdf') if which == 'spatial_tree'
              else both[0] if which == 'planar' else both[1])
    sm = system.sensor_model()
    rng = np.random.default_rng(8)
    for _ in range(3):
        q = np.asarray(system.q0, float) + 0.05 * rng.normal(size=system.n)
        qd = rng.normal(size=system.n)
        _, phi_q, gamma = system.constraint_terms(q, qd)
        got_q, got_gamma = system.constraint_jacobian(q, qd)
        assert got_q.tobytes() == phi_q.tobytes() and got_gamma.tobytes() == gamma.tobytes()
        for j in range(len(sm.joint_names)):
            p, v = sm.joint(j, q, qd, want=True)
            pos, vel, rows = sm.joint_rows(j, q, qd)
            assert (pos, vel) == (p.h[0], v.h[0])
            assert rows.tobytes() == np.concatenate((p.Hq, v.Hq)).tobytes()
            assert np.array_equal(v.Hqd, p.Hq)
