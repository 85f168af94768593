"""The estimator's per-tick spatial calls (issue 24): the plain tree's direct backend path of
``SpatialSystem`` (no loops, no drives, every joint actuated) and the Pinocchio IMU's
(gyroscope, accelerometer) pair give the general path's numbers bit for bit, and their
results stay theirs when the next call reuses the backend's ``Data`` and scratch arrays."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from conftest import CONFIG

from mbfg_ros.spatial.system import build_spatial_system

URDF = CONFIG / 'urdf'


def _states(n: int, count: int, seed: int) -> list[tuple[np.ndarray, ...]]:
    """Random (q, q̇, q̈, τ) at a few scales (slow and fast motions)."""
    rng = np.random.default_rng(seed)
    return [tuple(s * rng.standard_normal((4, n))) for s in
            rng.choice([1e-3, 1.0, 10.0], count)]


@pytest.mark.parametrize('backend', ['numpy', 'pinocchio'])
@pytest.mark.parametrize('urdf,overlay', [('ur5.urdf', 'ur5_sensors.yaml'),
                                          ('panda_like.urdf', None)], ids=['ur5', 'panda'])
def test_the_plain_tree_path_equals_the_backends_general_results(backend, urdf, overlay):
    """accelerations (with and without Jacobians), forward, torques, inverse and
    state_terms of a plain tree: exactly the backend's FDResult / IDResult numbers."""
    S = build_spatial_system(URDF / urdf, URDF / overlay if overlay else None, backend)
    assert S._plain_tree
    dyn, n = S.dyn, S.n
    for q, qd, qdd, tau in _states(n, 20, 1):
        fd = dyn.forward(q, qd, tau, derivatives=True)
        np.testing.assert_array_equal(S.accelerations(q, qd, tau), dyn.forward(q, qd, tau).qdd)
        np.testing.assert_array_equal(S.forward(q, qd, tau), dyn.forward(q, qd, tau).qdd)
        np.testing.assert_array_equal(S.forward(q, qd, None),
                                      dyn.forward(q, qd, np.zeros(n)).qdd)
        for got, want in zip(S.accelerations(q, qd, tau, jacobians=True),
                             (fd.qdd, fd.dqdd_dq, fd.dqdd_dqd)):
            np.testing.assert_array_equal(got, want)
        t = S.state_terms(q, qd, tau, True)
        assert t.phi.shape == (0,) and t.phi_q.shape == t.phi_q_dot.shape == (0, n)
        for got, want in zip(t[3:], (fd.qdd, fd.dqdd_dq, fd.dqdd_dqd)):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(S.state_terms(q, qd, tau, False).qdd,
                                      dyn.forward(q, qd, tau).qdd)
        tau_id = dyn.inverse(q, qd, qdd).tau
        np.testing.assert_array_equal(S.torques(q, qd, qdd), tau_id)
        np.testing.assert_array_equal(S.inverse(q, qd, qdd), tau_id)


def test_results_are_not_overwritten_by_the_next_call():
    """Pinocchio keeps its results in one Data per instance: what the per-tick calls return
    (q̈ and its Jacobians, τ, the IMU pair's residuals and Jacobians) is the caller's own,
    unchanged by the next call at another state."""
    S = build_spatial_system(URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml', 'pinocchio')
    imu = S.sensor_model()._imus[0]
    (q, qd, qdd, tau), (q2, qd2, qdd2, tau2) = _states(S.n, 2, 2)
    z = list(np.arange(6.0))
    first = [*S.accelerations(q, qd, tau, jacobians=True), S.accelerations(q, qd, tau),
             S.torques(q, qd, qdd), *S.state_terms(q, qd, tau, True)[3:],
             *imu.gyro_accel_errors(q, qd, qdd, z), *imu.measure_rows(q, qd, qdd)]
    kept = [np.array(a) for a in first]
    S.accelerations(q2, qd2, tau2, jacobians=True)
    S.state_terms(q2, qd2, tau2, True)
    S.accelerations(q2, qd2, tau2)
    S.torques(q2, qd2, qdd2)
    imu.gyro_accel_errors(q2, qd2, qdd2, z)
    imu.measure_rows(q2, qd2, qdd2)
    for i, (a, b) in enumerate(zip(first, kept)):
        np.testing.assert_array_equal(a, b, err_msg=f'result {i}')


def _reference_rows(imu, q, qd, qdd) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(h (6,), R, H (9, 3n)) of PinocchioImu's class docstring written out with numpy
    (Pinocchio's frame kinematics and their derivatives, LOCAL): gyroscope ω, specific
    force (ω × v − Rᵀ g) + a; Jacobians ``[∂ω/∂q, J_ω, 0]``,
    ``[[∂a/∂q, ∂a/∂q̇] + [ω×, −v×, −(Rᵀg)×] [∂v/∂q, J; J_ω, 0], J_v]``, ``[J_ω, 0, 0]``."""
    pm, pd, f, n = imu.pmodel, imu.pdata, imu.fid, imu.n
    pin.computeForwardKinematicsDerivatives(pm, pd, q, qd, qdd)
    R = np.array(pin.updateFramePlacement(pm, pd, f).rotation)
    vel = pin.getFrameVelocity(pm, pd, f, pin.LOCAL)
    v, w = np.array(vel.linear), np.array(vel.angular)
    a = np.array(pin.getFrameAcceleration(pm, pd, f, pin.LOCAL).linear)
    Rg = R.T @ imu.g
    h = np.concatenate((w, (np.cross(w, v) - Rg) + a))
    dv_dq, da_dq, da_dv, J = pin.getFrameAccelerationDerivatives(pm, pd, f, pin.LOCAL)
    Jv, Jw = J[:3], J[3:]
    skew = pin.skew
    L = np.block([[dv_dq, J], [Jw, np.zeros((3, n))]])
    A = np.hstack((skew(w), -skew(v), -skew(Rg))) @ L + np.hstack((da_dq[:3], da_dv[:3]))
    zero = np.zeros((3, n))
    H = np.block([[dv_dq[3:], Jw, zero], [A, Jv], [Jw, zero, zero]])
    return h, R, H


@pytest.mark.parametrize('jacobians', [True, False])
def test_the_imu_pair_and_rows_equal_the_model_written_out(jacobians):
    """PinocchioImu.gyro_accel_errors (readings minus the first six rows) and measure_rows
    equal the class docstring's model written out with numpy (:func:`_reference_rows`),
    bit for bit: the same float operations. At random states taken in turn (the scratch
    arrays carry nothing over), on every link of the UR5 with a random mount."""
    from mbfg_ros.spatial.pin_backend import PinocchioImu
    from mbfg_ros.spatial.urdf import load_spatial, origin_matrix
    model = load_spatial(URDF / 'ur5.urdf')
    rng = np.random.default_rng(3)
    for link in range(1, model.nb):
        T_mount = origin_matrix(rng.normal(size=3) * 0.1, rng.uniform(-1, 1, 3))
        fast, ref = PinocchioImu(model, link, T_mount), PinocchioImu(model, link, T_mount)
        for q, qd, qdd, _ in _states(model.n, 6, link):
            z = rng.standard_normal(6)
            hr, Rr, Hr = _reference_rows(ref, q, qd, qdd)
            e, H = fast.gyro_accel_errors(q, qd, qdd, z.tolist(), jacobians)
            np.testing.assert_array_equal(e, hr - z)
            h, R, Hm = fast.measure_rows(q, qd, qdd, jacobians)
            np.testing.assert_array_equal(h, hr)
            np.testing.assert_array_equal(R, Rr)
            if jacobians:
                np.testing.assert_array_equal(H, Hr[:6])
                np.testing.assert_array_equal(Hm, Hr)
            else:
                assert H is None and Hm is None


def test_an_unactuated_joint_or_friction_takes_the_general_path():
    """B ≠ 1 (one joint without its actuator) or joint friction: not the plain tree;
    q̈ = ABA(B τ) and ABA(τ − F(q̇)) as Pinocchio computes them."""
    joints = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
              'wrist_2_joint', 'wrist_3_joint')
    under = build_spatial_system(URDF / 'ur5.urdf', {'actuators': list(joints[:5])},
                                 'pinocchio')
    fric = build_spatial_system(URDF / 'ur5.urdf', {'joints': {joints[1]: {
        'friction': {'b': 0.5, 'fc': 0.0, 'v_s': 0.01, 'smooth': 'tanh'}}}}, 'pinocchio')
    assert not under._plain_tree and not fric._plain_tree
    pm = pin.buildModelFromUrdf(str(URDF / 'ur5.urdf'))
    pd = pm.createData()
    for q, qd, _, tau in _states(6, 5, 4):
        Btau = np.append(tau[:5], 0.0)
        np.testing.assert_allclose(under.accelerations(q, qd, tau[:5]),
                                   pin.aba(pm, pd, q, qd, Btau), rtol=1e-9, atol=1e-9)
        F = np.zeros(6)
        F[1] = 0.5 * qd[1]
        np.testing.assert_allclose(fric.accelerations(q, qd, tau),
                                   pin.aba(pm, pd, q, qd, tau - F), rtol=1e-9, atol=1e-9)


def test_rotors_urdf_damping_and_loops_take_the_general_path():
    """The other ways out of the plain tree (issue 24's fast path must not swallow them): a
    rotor (``Ir``: ``M + M_r``), the URDF's own ``<dynamics damping>`` (friction by default,
    no overlay key) and a loop (the four-bar URDF with its loop overlay). q̈ is then what
    the general equations give, ``(M + M_r)⁻¹ (τ − h)`` and ``ABA(τ − b q̇)``, not the rigid
    tree's ABA of τ."""
    joints = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
              'wrist_2_joint', 'wrist_3_joint')
    rotor = build_spatial_system(URDF / 'ur5.urdf', {'joints': {joints[2]: {
        'Ir': 1e-4, 'gr': 100.0}}}, 'pinocchio')
    text = (URDF / 'ur5.urdf').read_text()
    head, sep, tail = text.partition('<joint name="elbow_joint" type="revolute">')
    damped = build_spatial_system(head + sep + '\n    <dynamics damping="0.7"/>' + tail, None,
                                  'pinocchio')
    loop = build_spatial_system(URDF / 'fourbar.urdf', URDF / 'fourbar_loops.yaml',
                                'pinocchio')
    assert not (rotor._plain_tree or damped._plain_tree or loop._plain_tree)
    pm = pin.buildModelFromUrdf(str(URDF / 'ur5.urdf'))
    pd = pm.createData()
    for q, qd, _, tau in _states(6, 5, 5):
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        M[2, 2] += 1e-4 * 100.0 ** 2
        h = pin.rnea(pm, pd, q, qd, np.zeros(6))
        np.testing.assert_allclose(rotor.accelerations(q, qd, tau), np.linalg.solve(M, tau - h),
                                   rtol=1e-9, atol=1e-9)
        F = np.zeros(6)
        F[2] = 0.7 * qd[2]
        np.testing.assert_allclose(damped.accelerations(q, qd, tau),
                                   pin.aba(pm, pd, q, qd, tau - F), rtol=1e-9, atol=1e-9)
    q = np.asarray(loop.q0)
    assert loop.state_terms(q, np.zeros(loop.n), None, True).phi.shape == (loop.m,)
