"""The URDF robots in test/data/urdf (SOURCE.md): they parse, load in Pinocchio with the
expected sizes and a positive-definite mass matrix, and their kinematics match the published
parameters they were written from (PUMA and UR5 standard DH; the planar loops close at q0)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml
from urdf_parser_py.urdf import URDF

URDF_DIR = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
BAD_DIR = Path(__file__).resolve().parents[1] / 'data' / 'urdf'       # error-test files

GOOD = {'ur5.urdf': 6, 'puma560.urdf': 6, 'panda_like.urdf': 9, 'double_pendulum.urdf': 2,
        'fourbar.urdf': 3, 'five_bar.urdf': 4}
"""Good URDFs and their number of joint coordinates (every movable joint is 1-DOF). Pinocchio's
nv equals it; its nq counts 2 (cos, sin) for a continuous joint (panda_like's joint 7)."""
CONTINUOUS = {'panda_like.urdf': 1}


def load(name: str) -> pin.Model:
    return pin.buildModelFromUrdf(str(URDF_DIR / name))


def random_q(model: pin.Model) -> np.ndarray:
    lo = np.clip(model.lowerPositionLimit, -10.0, 10.0)
    hi = np.clip(model.upperPositionLimit, -10.0, 10.0)
    return pin.randomConfiguration(model, lo, hi)


def dh(theta: float, d: float, a: float, alpha: float) -> np.ndarray:
    """Standard DH: Rz(theta) Tz(d) Tx(a) Rx(alpha)."""
    c, s, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    return np.array([[c, -s * ca, s * sa, a * c], [s, c * ca, -c * sa, a * s],
                     [0.0, sa, ca, d], [0.0, 0.0, 0.0, 1.0]])


def dh_chain(q, d, a, alpha) -> np.ndarray:
    T = np.eye(4)
    for qi, di, ai, al in zip(q, d, a, alpha):
        T = T @ dh(qi, di, ai, al)
    return T


@pytest.mark.parametrize('name', sorted(GOOD))
def test_parses_from_bytes(name):
    robot = _parse(name)
    assert robot.get_root()


@pytest.mark.parametrize('name', sorted(GOOD))
def test_pinocchio_loads_with_spd_mass_matrix(name):
    model = load(name)
    assert model.nv == GOOD[name]
    assert model.nq == GOOD[name] + CONTINUOUS.get(name, 0)
    data = model.createData()
    pin.seed(7)
    for _ in range(20):
        M = pin.crba(model, data, random_q(model))
        M = np.triu(M) + np.triu(M, 1).T
        assert np.linalg.eigvalsh(M).min() > 0.0


def test_puma560_matches_standard_dh():
    a = [0.0, 0.4318, 0.0203, 0.0, 0.0, 0.0]
    d = [0.0, 0.0, 0.15005, 0.4318, 0.0, 0.0]
    alpha = [np.pi / 2, 0.0, -np.pi / 2, np.pi / 2, -np.pi / 2, 0.0]
    model = load('puma560.urdf')
    data = model.createData()
    flange = model.getFrameId('flange')
    rng = np.random.default_rng(1)
    for _ in range(10):
        q = rng.uniform(-np.pi, np.pi, 6)
        pin.framesForwardKinematics(model, data, q)
        T = dh_chain(q, d, a, alpha)
        np.testing.assert_allclose(data.oMf[flange].homogeneous, T, rtol=0, atol=1e-12)
        # the last joint frame is DH frame 5 rotated by q6 (joint 6's axis is z5)
        np.testing.assert_allclose(data.oMi[6].homogeneous, T, rtol=0, atol=1e-12)


def test_puma560_gravity_matches_corke():
    # Robotics Toolbox: p560.gravload(qz) = [0 37.4837 0.2489 0 0 0] (N m)
    model = load('puma560.urdf')
    tau = pin.rnea(model, model.createData(), np.zeros(6), np.zeros(6), np.zeros(6))
    np.testing.assert_allclose(tau, [0, 37.4837, 0.2489, 0, 0, 0], atol=1e-4)


def _principal_moments(inertia) -> np.ndarray:
    i = inertia
    return np.linalg.eigvalsh([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz],
                               [i.ixz, i.iyz, i.izz]])


@pytest.mark.parametrize('name', sorted(GOOD))
def test_every_inertia_is_physical(name):
    # issue 26: PD and the triangle inequality (Ixx + Iyy - Izz = 2 sum m z^2 >= 0, ...)
    for link in _parse(name).links:
        if link.inertial is None:
            continue
        e = _principal_moments(link.inertial.inertia)
        assert e[0] > 0.0, (name, link.name, e)
        assert e[2] <= e[0] + e[1] + 1e-12 * e.sum(), (name, link.name, e)


def test_puma560_link3_izz_is_the_documented_correction():
    # SOURCE.md: Armstrong et al.'s 0.066, 0.086, 0.0125 break the triangle inequality; our
    # Izz (DH frame 3) is 0.086 - 0.066 = 0.020, the two others as published
    e = _principal_moments(_parse('puma560.urdf').link_map['link3'].inertial.inertia)
    np.testing.assert_allclose(e, [0.020, 0.066, 0.086], rtol=1e-12)


def test_ur5_base_to_tool0_matches_dh():
    a = [0.0, -0.425, -0.39225, 0.0, 0.0, 0.0]
    d = [0.089159, 0.0, 0.0, 0.10915, 0.09465, 0.0823]
    alpha = [np.pi / 2, 0.0, 0.0, np.pi / 2, -np.pi / 2, 0.0]
    model = load('ur5.urdf')
    data = model.createData()
    base, tool0 = model.getFrameId('base'), model.getFrameId('tool0')
    rng = np.random.default_rng(2)
    for _ in range(10):
        q = rng.uniform(-np.pi, np.pi, 6)
        pin.framesForwardKinematics(model, data, q)
        T = (data.oMf[base].inverse() * data.oMf[tool0]).homogeneous
        np.testing.assert_allclose(T, dh_chain(q, d, a, alpha), rtol=0, atol=1e-12)


def test_double_pendulum_matches_dfki_model():
    dfki = Path(__file__).resolve().parents[1] / 'data' / 'dfki'
    p = yaml.safe_load((dfki / 'design_A.0_model_2.0_model_parameters.yml').read_text())
    m1, m2, l1, r1, r2, I1, I2, g = (p[k] for k in ('m1', 'm2', 'l1', 'r1', 'r2', 'I1', 'I2', 'g'))
    model = load('double_pendulum.urdf')
    model.gravity.linear = np.array([0.0, 0.0, -g])
    data = model.createData()
    tip = model.getFrameId('tip')
    rng = np.random.default_rng(3)
    for _ in range(10):
        q = rng.uniform(-np.pi, np.pi, 2)
        c2 = np.cos(q[1])
        M = np.array([[I1 + I2 + m2 * l1**2 + 2 * m2 * l1 * r2 * c2, I2 + m2 * l1 * r2 * c2],
                      [I2 + m2 * l1 * r2 * c2, I2]])
        Mp = pin.crba(model, data, q)
        np.testing.assert_allclose(np.triu(Mp) + np.triu(Mp, 1).T, M, rtol=0, atol=1e-12)
        # DFKI: G(q) (on the right-hand side) = -g [(m1 r1 + m2 l1) s1 + m2 r2 s12, m2 r2 s12]
        s1, s12 = np.sin(q[0]), np.sin(q[0] + q[1])
        G = -g * np.array([(m1 * r1 + m2 * l1) * s1 + m2 * r2 * s12, m2 * r2 * s12])
        np.testing.assert_allclose(pin.computeGeneralizedGravity(model, data, q), -G,
                                   rtol=0, atol=1e-12)
        pin.framesForwardKinematics(model, data, q)
        x = l1 * s1 + 0.2 * s12
        z = -l1 * np.cos(q[0]) - 0.2 * np.cos(q[0] + q[1])
        np.testing.assert_allclose(data.oMf[tip].translation, [x, 0.0, z], rtol=0, atol=1e-12)


def _se3(origin: dict) -> pin.SE3:
    return pin.SE3(pin.rpy.rpyToMatrix(np.array(origin['rpy'], dtype=float)),
                   np.array(origin['xyz'], dtype=float))


@pytest.mark.parametrize('stem', ['fourbar', 'five_bar'])
def test_loop_overlay_closes_at_q0(stem):
    overlay = yaml.safe_load((URDF_DIR / f'{stem}_loops.yaml').read_text())
    model = load(f'{stem}.urdf')
    data = model.createData()
    assert overlay['gravity'] == [0, -9.81, 0]
    names = list(model.names)[1:]
    assert set(overlay['actuators']) <= set(names)
    assert set(overlay['q0']) == set(names)
    q0 = np.array([overlay['q0'][n] for n in names])
    pin.framesForwardKinematics(model, data, q0)
    for loop in overlay['loops']:
        assert loop['type'] == 'revolute'
        oMp = data.oMf[model.getFrameId(loop['parent'], pin.BODY)] * _se3(loop['origin_parent'])
        oMc = data.oMf[model.getFrameId(loop['child'], pin.BODY)] * _se3(loop['origin_child'])
        np.testing.assert_allclose(oMp.translation, oMc.translation, rtol=0, atol=1e-9)
        axis = np.array(loop['axis'], dtype=float)
        np.testing.assert_allclose(oMp.rotation @ axis, oMc.rotation @ axis, rtol=0, atol=1e-9)
        # a planar mechanism: every joint axis is world z, the motion stays in z = 0
        np.testing.assert_allclose(oMp.rotation @ axis, [0, 0, 1], rtol=0, atol=1e-12)
        assert abs(oMp.translation[2]) < 1e-12
    # away from q0 the loop opens
    pin.framesForwardKinematics(model, data, q0 + 0.1)
    loop = overlay['loops'][0]
    oMp = data.oMf[model.getFrameId(loop['parent'], pin.BODY)] * _se3(loop['origin_parent'])
    oMc = data.oMf[model.getFrameId(loop['child'], pin.BODY)] * _se3(loop['origin_child'])
    assert np.linalg.norm(oMp.translation - oMc.translation) > 1e-3


@pytest.mark.parametrize('stem, frames', [
    ('fourbar', {'crank': (0, 0), 'coupler': (1, 0), 'rocker': (4, 0), 'coupler_imu': (1, 1)}),
    ('five_bar', {'left_crank': (0, 0), 'left_coupler': (0, 1), 'right_crank': (2, 0),
                  'right_coupler': (2, 1), 'end_point': (1, 1 + np.sqrt(3))}),
])
def test_planar_points_at_q0(stem, frames):
    # the planar YAML's points (config/fourbar.yaml, config/five_bar.yaml) at its initial pose
    overlay = yaml.safe_load((URDF_DIR / f'{stem}_loops.yaml').read_text())
    model = load(f'{stem}.urdf')
    data = model.createData()
    q0 = np.array([overlay['q0'][n] for n in list(model.names)[1:]])
    pin.framesForwardKinematics(model, data, q0)
    for name, xy in frames.items():
        np.testing.assert_allclose(data.oMf[model.getFrameId(name)].translation, [*xy, 0.0],
                                   rtol=0, atol=1e-12)


def test_panda_like_matches_modified_dh_and_branches():
    mdh = [(0, 0.333, 0), (0, 0, -np.pi / 2), (0, 0.316, np.pi / 2), (0.0825, 0, np.pi / 2),
           (-0.0825, 0.384, -np.pi / 2), (0, 0, np.pi / 2), (0.088, 0, np.pi / 2)]
    model = load('panda_like.urdf')
    data = model.createData()
    robot = URDF.from_xml_string((URDF_DIR / 'panda_like.urdf').read_bytes())
    types = {j.name: j.type for j in robot.joints}
    assert types['panda_joint7'] == 'continuous'
    assert types['panda_finger_joint1'] == types['panda_finger_joint2'] == 'prismatic'
    assert all(j.mimic is None for j in robot.joints)
    # both fingers hang off the same (merged) link: the tree branches
    f1, f2 = model.getJointId('panda_finger_joint1'), model.getJointId('panda_finger_joint2')
    assert model.parents[f1] == model.parents[f2] == model.getJointId('panda_joint7')
    flange = model.getFrameId('panda_link8')
    pin.seed(4)
    for _ in range(10):
        q = random_q(model)
        pin.framesForwardKinematics(model, data, q)
        angles = [*q[:6], np.arctan2(q[7], q[6])]   # joint 7 is (cos, sin)
        T = np.eye(4)
        for (a, d, alpha), th in zip(mdh, angles):
            ca, sa, c, s = np.cos(alpha), np.sin(alpha), np.cos(th), np.sin(th)
            T = T @ np.array([[c, -s, 0, a], [s * ca, c * ca, -sa, -d * sa],
                              [s * sa, c * sa, ca, d * ca], [0, 0, 0, 1]])
        T = T @ np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0.107], [0, 0, 0, 1]])
        np.testing.assert_allclose(data.oMf[flange].homogeneous, T, rtol=0, atol=1e-12)


def _parse(name: str) -> URDF:
    folder = URDF_DIR if (URDF_DIR / name).exists() else BAD_DIR
    return URDF.from_xml_string((folder / name).read_bytes())


def test_bad_urdfs_carry_their_defect():
    # each parses as XML/URDF, so a loader must reject it for the intended reason
    assert [j.type for j in _parse('bad_floating.urdf').joints] == ['floating']
    assert [j.type for j in _parse('bad_planar.urdf').joints] == ['planar']
    mimic = _parse('bad_mimic.urdf').joint_map['joint2'].mimic
    assert (mimic.joint, mimic.multiplier, mimic.offset) == ('joint1', 2.0, 0.1)
    robot = _parse('bad_two_roots.urdf')
    children = {j.child for j in robot.joints}
    assert sorted(link.name for link in robot.links if link.name not in children) == [
        'base_a', 'base_b']
    robot = _parse('two_parents.urdf')
    assert sorted(j.name for j in robot.joints if j.child == 'rocker') == [
        'coupler_rocker', 'rocker_joint']


@pytest.mark.parametrize('stem, links', [
    ('fourbar', ['crank', 'coupler', 'rocker']),
    ('five_bar', ['left_crank', 'left_coupler', 'right_crank', 'right_coupler']),
])
def test_planar_bodies_match_the_planar_yaml(stem, links):
    # the package's own parser reads config/<stem>.yaml (the planar model the URDF mirrors)
    from mbfg_ros.planar.mechanism_yaml import load_mechanism
    mech = load_mechanism(URDF_DIR.parent / f'{stem}.yaml')
    overlay = yaml.safe_load((URDF_DIR / f'{stem}_loops.yaml').read_text())
    assert overlay['gravity'] == [*mech.gravity, 0]
    robot = _parse(f'{stem}.urdf')
    model = load(f'{stem}.urdf')
    data = model.createData()
    q0 = np.array([overlay['q0'][n] for n in list(model.names)[1:]])
    pin.framesForwardKinematics(model, data, q0)
    assert len(links) == len(mech.bodies)
    for body, name in zip(mech.bodies, links):
        inertial = robot.link_map[name].inertial
        assert inertial.mass == pytest.approx(body.mass, rel=1e-15)
        i_com = body.I0 - body.mass * (body.cog[0] ** 2 + body.cog[1] ** 2)
        assert inertial.inertia.izz == pytest.approx(i_com, rel=1e-15)
        # the body frame at the YAML pose: origin at its first point, +x toward its second
        p0, p1 = (np.array([mech.points[k].x, mech.points[k].y]) for k in body.points[:2])
        ex = (p1 - p0) / np.linalg.norm(p1 - p0)
        ey = np.array([-ex[1], ex[0]])
        cog = p0 + body.cog[0] * ex + body.cog[1] * ey
        oMl = data.oMf[model.getFrameId(name, pin.BODY)]
        np.testing.assert_allclose(oMl.act(np.array(inertial.origin.xyz)), [*cog, 0.0],
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(oMl.rotation[:, 0], [*ex, 0.0], rtol=0, atol=1e-12)
