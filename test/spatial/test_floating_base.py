"""A free-floating base (issue 28 item 1): the Solo-12 quadruped (test/data/urdf/solo12.urdf,
example-robot-data, see SOURCE.md) loads with a free base, and its dynamics equal Pinocchio's
own model of the same URDF (``buildModelFromUrdf(path, JointModelFreeFlyer())``: Pinocchio's
URDF parser, not ours) to 1e-9: free-flyer RNEA, ABA, CRBA, and constrained dynamics with four
feet and with two (a trot pair) in stance; inverse dynamics with contact forces."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA

from mbfg_ros.core.errors import MechanismError
from mbfg_ros.core.interface import FloatingBase, MultibodySystem
from mbfg_ros.spatial.floating import FloatingBaseDynamics
from mbfg_ros.spatial.system import build_spatial_system
from mbfg_ros.spatial.urdf import load_spatial

pin = pytest.importorskip('pinocchio')

SOLO = DATA / 'urdf' / 'solo12.urdf'
FEET = ('FL_FOOT', 'FR_FOOT', 'HL_FOOT', 'HR_FOOT')
TROT = ('FL_FOOT', 'HR_FOOT')
OVERLAY = {'floating_base': True, 'contacts': list(FEET)}
TOL = 1e-9


def _free_urdf() -> str:
    """Solo-12 with the URDF's own way of saying it: a floating joint from a world link."""
    text = SOLO.read_text()
    return text.replace('<link name="base_link">', '<link name="world"/>\n<joint name="base_free" '
                        'type="floating"><parent link="world"/><child link="base_link"/>'
                        '</joint>\n<link name="base_link">', 1)


@pytest.fixture(scope='module')
def solo() -> FloatingBaseDynamics:
    return FloatingBaseDynamics(load_spatial(SOLO, OVERLAY))


@pytest.fixture(scope='module')
def ref():
    pm = pin.buildModelFromUrdf(str(SOLO), pin.JointModelFreeFlyer())
    return pm, pm.createData()


def _states(dyn: FloatingBaseDynamics, count: int, seed: int = 3):
    """Random (q, v, v̇, τ): base anywhere with any attitude, joints within ±1.5 rad."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        quat = rng.normal(size=4)
        q = np.concatenate([rng.normal(size=3), quat / np.linalg.norm(quat),
                            rng.uniform(-1.5, 1.5, dyn.n)])
        yield q, rng.normal(size=dyn.nv), rng.normal(size=dyn.nv), rng.normal(size=dyn.n)


def _close(a, b, tol=TOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    scale = max(1.0, float(np.abs(b).max()))
    assert np.abs(a - b).max() <= tol * scale, np.abs(a - b).max()


def test_solo12_loads_with_a_free_base_and_its_feet():
    m = load_spatial(SOLO, OVERLAY)
    assert m.floating and m.base_joint == '' and m.link_names[0] == 'base_link'
    assert m.n == 12 and m.nb == 13
    import xml.etree.ElementTree as ET
    total = sum(float(e.get('value')) for e in ET.fromstring(SOLO.read_text()).iter('mass'))
    assert m.mass.sum() == pytest.approx(total, rel=1e-12)   # the base's mass counts now
    assert [c.name for c in m.contacts] == list(FEET)
    # FL_FOOT is merged into FL_LOWER_LEG by the fixed FL_ANKLE joint at (0, 0.008, -0.16)
    fl = m.contacts[0]
    assert m.link_names[fl.link] == 'FL_LOWER_LEG'
    np.testing.assert_allclose(fl.position, [0.0, 0.008, -0.16], atol=1e-15)
    dyn = FloatingBaseDynamics(m)
    assert (dyn.nq, dyn.nv) == (19, 18)
    # the estimator's future door (core.interface), and not the fixed-base one
    assert isinstance(dyn, FloatingBase) and not isinstance(dyn, MultibodySystem)
    # without the overlay key the same URDF is the fixed-base robot it always was
    assert not load_spatial(SOLO).floating


def test_the_urdf_floating_joint_gives_the_same_model():
    a = load_spatial(SOLO, OVERLAY)
    b = load_spatial(_free_urdf(), {'contacts': list(FEET)})
    assert b.floating and b.base_joint == 'base_free' and b.link_names == a.link_names
    for field in ('mass', 'com', 'inertia', 'T_home', 'axis'):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_free_flyer_rnea_crba_nle_aba_equal_pinocchio_from_the_urdf(solo, ref):
    pm, pd = ref
    assert [pm.names[i] for i in range(2, pm.njoints)] == list(solo.model.joint_names)
    for q, v, a, tau in _states(solo, 6):
        _close(solo.inverse(q, v, a), pin.rnea(pm, pd, q, v, a))
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        _close(solo.mass_matrix(q), M)
        _close(solo.bias(q, v), pin.nonLinearEffects(pm, pd, q, v))
        _close(solo.forward(q, v, tau), pin.aba(pm, pd, q, v, np.r_[np.zeros(6), tau]))
        # and the base really is free: no torque moves it without a wrench
        assert np.abs(solo.inverse(q, v, solo.forward(q, v, tau))[:6]).max() < 1e-9


def _pin_constrained(pm, pd, q, v, tau, feet, kp=0.0, kd=0.0, anchors=None):
    """Pinocchio's constrained dynamics with 3-D contacts at the feet (world-aligned), and
    its Baumgarte corrector towards ``anchors`` (placements on the universe side)."""
    models = pin.StdVec_RigidConstraintModel()
    lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    for i, name in enumerate(feet):
        f = pm.frames[pm.getFrameId(name)]
        anchor = pin.SE3.Identity() if anchors is None else pin.SE3(np.eye(3), anchors[i])
        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, f.parentJoint,
                                      f.placement, 0, anchor, lwa)
        cm.m_baumgarte_parameters.Kp = kp
        cm.m_baumgarte_parameters.Kd = kd
        models.append(cm)
    datas = pin.StdVec_RigidConstraintData()
    for c in models:
        datas.append(c.createData())
    pin.initConstraintDynamics(pm, pd, models, datas)
    settings = pin.ProximalSettings(1e-14, 1e-14, 0.0, 1)     # μ = 0: the exact KKT solution
    a = pin.constraintDynamics(pm, pd, q, v, np.r_[np.zeros(6), tau], models, datas, settings)
    return np.array(a), np.array(pd.lambda_c).reshape(-1, 3)


@pytest.mark.parametrize('feet', [FEET, TROT], ids=['four_feet', 'trot_pair'])
def test_constrained_dynamics_equal_pinocchio(solo, ref, feet):
    pm, pd = ref
    for q, v, _, tau in _states(solo, 4, seed=11):
        a_ref, f_ref = _pin_constrained(pm, pd, q, v, tau, feet)
        r = solo.constrained_forward(q, v, tau, feet)
        assert r.contacts == feet
        _close(r.vdot, a_ref)
        _close(r.f_c, f_ref)
        # the feet do not accelerate, and the motion balances with those forces
        _, J, gamma = solo.contact_kinematics(q, v, feet)
        assert np.abs(J @ r.vdot + gamma).max() < 1e-9
        res = solo.inverse(q, v, r.vdot, r.f_c, feet)
        _close(res[6:], tau)
        assert np.abs(res[:6]).max() < 1e-9


def test_a_standing_robot_carries_its_weight_on_its_feet(solo):
    q = solo.neutral(np.tile([0.0, 0.8, -1.6], 4))
    v = np.zeros(solo.nv)
    tau, f = solo.contact_inverse(q, v, np.zeros(solo.nv), FEET)   # static equilibrium
    m = solo.model
    assert f[:, 2].sum() == pytest.approx(m.mass.sum() * 9.81, rel=1e-12)
    assert np.abs(f[:, :2].sum(axis=0)).max() < 1e-9               # no net horizontal force
    # those torques hold it: forward dynamics in stance gives no motion and the same forces
    r = solo.constrained_forward(q, v, tau, FEET)
    assert np.abs(r.vdot).max() < 1e-9
    _close(r.f_c, f)


@pytest.mark.parametrize('feet', [FEET, TROT], ids=['four_feet', 'trot_pair'])
def test_contact_inverse_splits_the_base_wrench_onto_the_feet(solo, ref, feet):
    pm, pd = ref
    for q, v, _, tau in _states(solo, 3, seed=5):
        a_ref, f_ref = _pin_constrained(pm, pd, q, v, tau, feet)
        tau_hat, f_hat = solo.contact_inverse(q, v, a_ref, feet)
        res = solo.inverse(q, v, a_ref, f_hat, feet)
        assert np.abs(res[:6]).max() < 1e-9            # the base is balanced exactly
        _close(res[6:], tau_hat)
        # the truth differs only by internal forces the base cannot feel (null space of
        # J_bᵀ: two feet, a squeeze along the line joining them; four feet, six directions),
        # and the split carries none of them (minimum norm)
        J = solo.contact_jacobian(q, feet)
        U, sv, Vt = np.linalg.svd(J[:, :6].T)
        rank = int(np.sum(sv > 1e-9 * sv[0]))
        assert rank == 5 if len(feet) == 2 else rank == 6
        N = Vt[rank:]
        d = (f_ref - f_hat).ravel()
        _close(N.T @ (N @ d), d)
        assert np.abs(N @ f_hat.ravel()).max() < 1e-9
        _close(tau_hat - tau, J[:, 6:].T @ d)


def test_baumgarte_terms_equal_pinocchios_corrector(solo, ref):
    pm, pd = ref
    for q, v, _, tau in _states(solo, 3, seed=8):
        p, J, gamma = solo.contact_kinematics(q, v, TROT)
        anchors = p + np.array([0.01, -0.02, 0.015])       # the feet have drifted
        r = solo.constrained_forward(q, v, tau, TROT, kp=100.0, kd=20.0, anchors=anchors)
        want = -20.0 * (J @ v) - 100.0 * (p - anchors).ravel()
        assert np.abs(J @ r.vdot + gamma - want).max() < 1e-9 * max(1.0, np.abs(want).max())
        a_ref, f_ref = _pin_constrained(pm, pd, q, v, tau, TROT, 100.0, 20.0, anchors)
        _close(r.vdot, a_ref)
        _close(r.f_c, f_ref)


def test_configuration_manifold_round_trips(solo):
    q, v, _, _ = next(_states(solo, 1, seed=2))
    q1 = solo.integrate(q, v, 0.1)
    assert np.linalg.norm(q1[3:7]) == pytest.approx(1.0, abs=1e-14)
    np.testing.assert_allclose(solo.difference(q, q1), 0.1 * v, atol=1e-12)
    pose = solo.base_pose(q1)
    back = solo.configuration(pose, q1[7:])
    assert solo.base_pose(back).equals(pose, 1e-14)              # q and −q: same attitude
    assert abs(abs(back[3:7] @ q1[3:7]) - 1.0) < 1e-14
    np.testing.assert_allclose(back[[0, 1, 2] + list(range(7, 19))],
                               q1[[0, 1, 2] + list(range(7, 19))], atol=1e-14)
    # the base moves along its body twist: a pure forward speed along the base x axis
    v = np.zeros(solo.nv)
    v[0] = 1.0
    moved = solo.integrate(q, v, 0.5)
    R = solo.base_pose(q).rotation().matrix()
    np.testing.assert_allclose(moved[:3] - q[:3], 0.5 * R[:, 0], atol=1e-14)
    np.testing.assert_array_equal(solo.base_twist(np.arange(18.0))[:6], [3, 4, 5, 0, 1, 2])


def test_a_base_link_fixed_to_the_root_becomes_the_base_frame(solo):
    """``base_link`` names a frame fixed to the root: the base pose and twist are that
    frame's, and the physics is unchanged (same joint torques for the same motion)."""
    text = SOLO.read_text().replace('</robot>', (
        '<link name="imu"/><joint name="imu_mount" type="fixed"><parent link="base_link"/>'
        '<child link="imu"/><origin xyz="0.05 -0.02 0.03" rpy="0.1 -0.2 0.3"/></joint>'
        '</robot>'))
    other = FloatingBaseDynamics(load_spatial(text, {**OVERLAY, 'base_link': 'imu'}))
    assert other.model.link_names[0] == 'imu'
    import gtsam
    T_0B = gtsam.Pose3(gtsam.Rot3.RzRyRx(0.1, -0.2, 0.3), np.array([0.05, -0.02, 0.03]))
    Ad = T_0B.AdjointMap()           # [ω; v] of the base frame -> of the imu frame
    for q, v, a, _ in _states(solo, 3, seed=21):
        pose_B = solo.base_pose(q).compose(T_0B)
        qB = other.configuration(pose_B, q[7:])
        vB, aB = v.copy(), a.copy()
        tw = np.linalg.solve(Ad, solo.base_twist(v))
        ac = np.linalg.solve(Ad, solo.base_twist(a))
        vB[:3], vB[3:6] = tw[3:], tw[:3]
        aB[:3], aB[3:6] = ac[3:], ac[:3]
        tau_B, tau_0 = other.inverse(qB, vB, aB), solo.inverse(q, v, a)
        _close(tau_B[6:], tau_0[6:])
        # the base rows are the same wrench seen from the imu frame: W_B = Adᵀ W_0 ([n; f])
        W0 = np.concatenate([tau_0[3:6], tau_0[:3]])
        _close(np.concatenate([tau_B[3:6], tau_B[:3]]), Ad.T @ W0)
        assert vB @ other.mass_matrix(qB) @ vB == pytest.approx(v @ solo.mass_matrix(q) @ v,
                                                                rel=1e-12)
        _close(other.contact_kinematics(qB, vB, FEET)[0], solo.contact_kinematics(q, v, FEET)[0])


@pytest.mark.parametrize('urdf,overlay,words', [
    (SOLO, {'floating_base': 'yes'}, 'floating_base: expected true or false'),
    (SOLO, {'base_link': 'base_link'}, 'base_link: base_link names the free base'),
    (SOLO, {'floating_base': True, 'base_link': 'FL_FOOT'}, "'FL_FOOT' is not the root link"),
    (SOLO, {'contacts': ['FL_FOOT']}, 'contacts: contacts need a free base'),
    (SOLO, {'floating_base': True, 'contacts': ['FL_TOE']}, "contacts[0]: unknown link 'FL_TOE'"),
    (SOLO, {'floating_base': True, 'contacts': 'FL_FOOT'}, 'contacts: expected a list'),
    ('free', {'floating_base': False}, "floating_base: false, but the URDF has the floating"),
    (DATA / 'urdf' / 'bad_floating.urdf', None, "joint 'free': a floating joint's <origin>"),
])
def test_floating_base_input_errors_name_the_key_or_joint(urdf, overlay, words):
    source = _free_urdf() if urdf == 'free' else urdf
    with pytest.raises(MechanismError) as err:
        load_spatial(source, overlay)
    assert words in str(err.value) and '\n' not in str(err.value), str(err.value)


def test_a_floating_joint_away_from_the_root_or_under_a_heavy_world_is_refused():
    text = SOLO.read_text()
    mid = text.replace('<joint name="FL_KFE" type="revolute">', '<joint name="FL_KFE" '
                       'type="floating">')
    with pytest.raises(MechanismError, match="joint 'FL_KFE': a floating joint must join the "
                       "root link 'base_link'"):
        load_spatial(mid)
    heavy = _free_urdf().replace('<link name="world"/>', '<link name="world"><inertial><mass '
                                 'value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" '
                                 'izz="1"/></inertial></link>')
    with pytest.raises(MechanismError, match="joint 'base_free': the world link 'world' of a "
                       "floating joint has a mass"):
        load_spatial(heavy)


@pytest.mark.parametrize('urdf,overlay,where', [
    (SOLO, OVERLAY, 'floating_base: '), ('free', None, "joint 'base_free': ")])
def test_the_estimator_side_refuses_a_floating_base_in_one_line(urdf, overlay, where):
    source = _free_urdf() if urdf == 'free' else urdf
    with pytest.raises(MechanismError) as err:
        build_spatial_system(source, overlay)
    msg = str(err.value)
    assert where + 'floating-base robots are not supported by the estimator yet' in msg, msg


def test_the_fixed_root_classes_and_the_floating_ones_do_not_mix():
    from mbfg_ros.spatial.dynamics_graph import DynamicsGraph
    from mbfg_ros.spatial.floating_graph import FloatingDynamicsGraph
    from mbfg_ros.spatial.pin_backend import PinocchioDynamics
    free = load_spatial(SOLO, OVERLAY)
    for cls in (PinocchioDynamics, DynamicsGraph):
        with pytest.raises(ValueError, match='a floating base: use'):
            cls(free)
    for cls in (FloatingBaseDynamics, FloatingDynamicsGraph):
        with pytest.raises(ValueError, match='needs a floating base'):
            cls(load_spatial(SOLO))
        looped = load_spatial(SOLO, {**OVERLAY, 'loops': [
            {'name': 'tie', 'type': 'spherical', 'parent': 'FL_FOOT', 'child': 'FR_FOOT'}]})
        with pytest.raises(ValueError, match="closed loops on a floating base are not "
                           "supported yet \\(loop joint 'tie'\\)"):
            cls(looped)
