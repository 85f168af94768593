"""Friction and geared rotors on URDF joints (issue 27 item 1): against Pinocchio's
``model.armature`` and a friction formula written here, Jacobians by differences, the URDF's
``<dynamics>`` defaults, simulation's power balance, and the overlay's errors."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml
from conftest import CONFIG, numerical_jacobian

from mbfg_ros.core.errors import MechanismError
from mbfg_ros.spatial.simulate import simulate_spatial
from mbfg_ros.spatial.system import build_spatial_system

URDF = CONFIG / 'urdf'
UR5_JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
              'wrist_2_joint', 'wrist_3_joint')
# per joint: b, fc, v_s, smooth, fs, v_st, offset, Ir, gr
UR5_DRIVES = [(0.8, 2.0, 0.02, 'tanh', 3.0, 0.2, 0.1, 3e-5, 101.0),
              (1.1, 2.5, 0.01, 'atan', 2.5, 0.1, -0.2, 3e-5, -101.0),
              (0.5, 1.5, 0.05, 'tanh', 1.5, 0.1, 0.0, 2e-5, 101.0),
              (0.2, 0.6, 0.01, 'tanh', 0.9, 0.05, 0.05, 1e-5, 80.0),
              (0.2, 0.6, 0.03, 'atan', 0.6, 0.1, 0.0, 1e-5, 80.0),
              (0.1, 0.3, 0.01, 'tanh', 0.3, 0.1, 0.0, 0.0, 1.0)]


def _overlay() -> dict:
    return {'joints': {j: {'friction': {'b': b, 'fc': fc, 'v_s': vs, 'smooth': sm, 'fs': fs,
                                        'v_st': vst, 'offset': off}, 'Ir': Ir, 'gr': gr}
                       for j, (b, fc, vs, sm, fs, vst, off, Ir, gr) in zip(UR5_JOINTS,
                                                                           UR5_DRIVES)}}


def friction(qd: np.ndarray) -> np.ndarray:
    """The issue's law written out: b v + (fc + (fs − fc) e^{−(v/v_st)²}) σ(v/v_s) + offset."""
    out = np.zeros(len(qd))
    for k, (b, fc, vs, sm, fs, vst, off, _, _) in enumerate(UR5_DRIVES):
        v = qd[k]
        sign = math.tanh(v / vs) if sm == 'tanh' else 2 / math.pi * math.atan(v / vs)
        out[k] = b * v + (fc + (fs - fc) * math.exp(-(v / vst) ** 2)) * sign + off
    return out


def _pinocchio_ur5():
    pm = pin.buildModelFromUrdf(str(URDF / 'ur5.urdf'))
    assert tuple(pm.names[1:]) == UR5_JOINTS
    pm.armature = np.array([d[7] * d[8] ** 2 for d in UR5_DRIVES])
    return pm, pm.createData()


@pytest.mark.parametrize('backend', ['numpy', 'pinocchio'])
def test_ur5_with_friction_and_armature_equals_pinocchio_armature_plus_friction(backend):
    S = build_spatial_system(URDF / 'ur5.urdf', _overlay(), backend)
    pm, pd = _pinocchio_ur5()
    rng = np.random.default_rng(27)
    for _ in range(5):
        q, qd, qdd = rng.uniform(-2, 2, 6), rng.uniform(-1.5, 1.5, 6), rng.uniform(-3, 3, 6)
        qd[2] = 0.004                                 # inside the smooth sign's band
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        assert np.allclose(S.mass_matrix(q), M, atol=1e-10)
        tau = pin.rnea(pm, pd, q, qd, qdd) + friction(qd)
        assert np.allclose(S.inverse(q, qd, qdd), tau, atol=1e-9)
        assert np.allclose(S.torques(q, qd, qdd), tau, atol=1e-9)
        assert np.allclose(S.forward(q, qd, tau), qdd, atol=1e-8)
        assert np.allclose(S.forward(q, qd, tau),
                           pin.aba(pm, pd, q, qd, tau - friction(qd)), atol=1e-8)
        Q = S.generalized_forces(q, qd, tau)
        assert np.allclose(Q, tau - pin.nonLinearEffects(pm, pd, q, qd) - friction(qd),
                           atol=1e-9)


@pytest.mark.parametrize('backend,tol', [('numpy', 3e-5), ('pinocchio', 3e-8)])
def test_state_terms_jacobians_equal_differences_with_friction_and_rotors(backend, tol):
    """The estimator's dynamics factor: ∂q̈/∂q, ∂q̈/∂q̇ exact (central differences; the numpy
    recursion's q̈ carries ~1e-9 rounding, so its differences are coarser)."""
    S = build_spatial_system(URDF / 'ur5.urdf', _overlay(), backend)
    rng = np.random.default_rng(3)
    tau = rng.uniform(-5, 5, 6)
    for _ in range(3):
        q, qd = rng.uniform(-2, 2, 6), rng.uniform(-1, 1, 6)
        qd[1] = 0.003                                   # steep part of the sign and the bump
        st = S.state_terms(q, qd, tau, jacobians=True)
        Jq = numerical_jacobian(lambda x: S.forward(x, qd, tau), q, 1e-5)
        Jv = numerical_jacobian(lambda x: S.forward(q, x, tau), qd, 1e-7)
        assert np.allclose(st.qdd, S.forward(q, qd, tau), atol=1e-12)
        assert np.abs(st.qdd_q - Jq).max() < tol * (1 + np.abs(Jq).max())
        assert np.abs(st.qdd_qd - Jv).max() < 1e3 * tol * (1 + np.abs(Jv).max())


def test_friction_only_takes_the_aba_path_with_exact_rate_jacobian():
    ov = _overlay()
    for j in ov['joints'].values():
        j.pop('Ir')
    S = build_spatial_system(URDF / 'ur5.urdf', ov, 'pinocchio')
    assert not S.drives.has_rotor
    q, qd, tau = np.full(6, 0.3), np.linspace(-0.5, 0.5, 6), np.ones(6)
    qdd, Jq, Jv = S.accelerations(q, qd, tau, jacobians=True)
    assert np.allclose(Jv, numerical_jacobian(lambda x: S.forward(q, x, tau), qd, 1e-7),
                       atol=1e-5)
    pm, pd = _pinocchio_ur5()
    pm.armature[:] = 0
    assert np.allclose(qdd, pin.aba(pm, pd, q, qd, tau - friction(qd)), atol=1e-9)


def test_loops_keep_the_drive_terms_in_both_directions():
    """Five-bar (loops): forward then inverse gives the torques back with friction + rotors."""
    ov = {'joints': {'left_crank_joint': {'friction': {'b': 0.3, 'fc': 0.2}, 'Ir': 1e-3,
                                          'gr': 5},
                     'left_elbow': {'friction': {'b': 0.1}}}}
    base = build_spatial_system(URDF / 'five_bar.urdf', URDF / 'five_bar_loops.yaml')
    loops = yaml.safe_load((URDF / 'five_bar_loops.yaml').read_text())
    S = build_spatial_system(URDF / 'five_bar.urdf', {**loops, **ov})
    q, qd = S.q0, S.null_space(S.q0)[0] @ np.full(S.dof, 0.7)
    tau = np.full(S.B.shape[1], 0.5)
    qdd = S.forward(q, qd, tau)
    assert not np.allclose(qdd, base.forward(q, qd, tau))
    assert np.allclose(S.inverse(q, qd, qdd), tau, atol=1e-8)


def test_urdf_dynamics_are_the_defaults_and_the_overlay_replaces_keys():
    text = (URDF / 'double_pendulum.urdf').read_text().replace(
        '<axis xyz="0 -1 0"/>', '<axis xyz="0 -1 0"/><dynamics damping="0.2" friction="0.3"/>')
    S = build_spatial_system(text)
    z = np.zeros(2)
    qd = np.array([0.5, -2.0])
    rigid = build_spatial_system(URDF / 'double_pendulum.urdf')
    F = S.inverse(z, qd, z) - rigid.inverse(z, qd, z)
    assert np.allclose(F, 0.2 * qd + 0.3 * np.tanh(qd / 0.01), atol=1e-12)
    S2 = build_spatial_system(text, {'joints': {'elbow': {'friction': {'b': 0.05,
                                                                       'smooth': 'atan'}}}})
    F2 = S2.inverse(z, qd, z) - rigid.inverse(z, qd, z)
    assert F2[0] == pytest.approx(F[0], abs=1e-12)
    assert F2[1] == pytest.approx(0.05 * qd[1] + 0.3 * 2 / math.pi * math.atan(qd[1] / 0.01),
                                  abs=1e-12)


def test_passive_fall_loses_exactly_the_friction_work():
    """Simulation with friction and carried rotors: E(0) − E(T) = ∫ F·q̇ dt (power balance)."""
    S = build_spatial_system(URDF / 'double_pendulum.urdf',
                             URDF / 'double_pendulum_dfki.yaml')
    tr = simulate_spatial(S, 1.0, 1e-3, q0=np.array([1.5, -0.8]))
    E = np.array([S.energy(q, qd) for q, qd in zip(tr.q, tr.qd)])
    power = np.array([S.drives.friction(qd)[0] @ qd for qd in tr.qd])
    work = np.sum(0.5 * (power[1:] + power[:-1]) * np.diff(tr.t))
    assert E[0] - E[-1] > 0.05                     # friction matters here
    assert E[0] - E[-1] == pytest.approx(work, rel=2e-3)


@pytest.mark.parametrize('joints,path,words', [
    ({'nope': {'Ir': 1}}, 'joints.nope', 'unknown joint'),
    ({'elbow': {'inertia': 1}}, 'joints.elbow.inertia', "unknown key 'inertia'"),
    ({'elbow': {'Ir': -1}}, 'joints.elbow.Ir', 'zero or positive'),
    ({'elbow': {'friction': {'smooth': 'sign'}}}, 'joints.elbow.friction.smooth', 'smooth'),
    ({'elbow': {'friction': {'v_s': 0}}}, 'joints.elbow.friction.v_s', 'positive'),
    ({'elbow': {'carried': 'yes'}}, 'joints.elbow.carried', 'true or false'),
])
def test_bad_drive_keys_are_named(joints, path, words):
    with pytest.raises(MechanismError) as e:
        build_spatial_system(URDF / 'double_pendulum.urdf', {'joints': joints})
    assert path in str(e.value) and words in str(e.value)


def test_a_carried_rotor_behind_a_crossed_axis_is_refused():
    with pytest.raises(MechanismError) as e:
        build_spatial_system(URDF / 'ur5.urdf', {'joints': {'shoulder_lift_joint': {
            'Ir': 1e-4, 'gr': 100, 'carried': True}}})
    assert 'joints.shoulder_lift_joint.carried' in str(e.value)
    assert "'shoulder_pan_joint'" in str(e.value)


def test_rigid_urdfs_have_no_drives():
    S = build_spatial_system(Path(URDF / 'ur5.urdf'))
    assert S.drives is None and S.model.drives == ()
