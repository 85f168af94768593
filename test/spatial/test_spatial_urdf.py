"""Loading URDF robots (file or robot_description text) + YAML overlay into a SpatialModel."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.core.errors import MechanismError
from mbfg_ros.spatial.dynamics import SpatialDynamics
from mbfg_ros.spatial.urdf import load_spatial

DATA = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
BAD = Path(__file__).resolve().parents[1] / 'data' / 'urdf'     # error-test files


def test_file_text_and_bytes_give_the_same_model():
    path = DATA / 'ur5.urdf'
    a = load_spatial(path)
    b = load_spatial(path.read_text())           # robot_description: str with <?xml encoding?>
    c = load_spatial(path.read_bytes())
    assert a.source == str(path) and b.source == '<robot_description>'
    for m in (b, c):
        assert m.joint_names == a.joint_names and m.link_names == a.link_names
        assert np.array_equal(m.T_home, a.T_home) and np.array_equal(m.inertia, a.inertia)


def test_ur5_tree_limits_and_merged_fixed_frames():
    m = load_spatial(DATA / 'ur5.urdf')
    assert m.n == 6 and m.nb == 7
    assert m.joint_type == ('revolute',) * 6
    assert list(m.parent) == [0, 1, 2, 3, 4, 5] and list(m.child) == [1, 2, 3, 4, 5, 6]
    # fixed frames are merged: base/base_link share link 0, tool0 rides on the last link
    assert m.frames['tool0'][0] == 6 and 'base_link' in m.frames
    assert set(m.link_names).isdisjoint({'tool0'})
    assert np.all(np.isfinite(m.lower)) and np.all(m.effort_limit > 0)
    assert m.actuated.all()
    with pytest.raises(ValueError):
        m.mass[1] = 0.0                          # immutable arrays


def test_branching_tree_is_depth_first_with_contiguous_subtrees():
    m = load_spatial(DATA / 'panda_like.urdf')
    assert m.n == 9
    assert m.joint_type.count('prismatic') == 2
    # the continuous joint has no position limits
    cont = [i for i, j in enumerate(m.joint_names) if np.isinf(m.lower[i])]
    assert len(cont) == 1 and np.isinf(m.upper[cont[0]])
    # every subtree is a contiguous block of joint indices (pre-order)
    for j in range(m.n):
        below = [k for k in range(m.n) if _is_below(m, k, j)]
        assert below == list(range(j + 1, j + 1 + len(below)))


def _is_below(m, k: int, j: int) -> bool:
    link = m.parent[k]
    while link != 0:
        if link == m.child[j]:
            return True
        link = m.parent[link - 1]
    return False


def test_fixed_joint_merging_preserves_the_total_mass_and_com():
    m = load_spatial(DATA / 'ur5.urdf')
    T = SpatialDynamics(m).poses(np.zeros(m.n))
    text = (DATA / 'ur5.urdf').read_text()
    import xml.etree.ElementTree as ET
    total = sum(float(e.get('value')) for e in ET.fromstring(text).iter('mass'))
    assert m.mass.sum() == pytest.approx(total, rel=1e-12)
    com = sum(m.mass[b] * (T[b, :3, :3] @ m.com[b] + T[b, :3, 3]) for b in range(m.nb))
    assert np.all(np.isfinite(com))


@pytest.mark.parametrize('fname,joint,words', [
    ('bad_floating.urdf', None, 'floating'),
    ('bad_planar.urdf', None, 'planar'),
    ('bad_mimic.urdf', 'joint2', 'mimic'),
])
def test_unsupported_joints_are_named(fname, joint, words):
    with pytest.raises(MechanismError) as err:
        load_spatial(BAD / fname)
    msg = str(err.value)
    assert msg.startswith(str(BAD / fname)) and words in msg and "joint '" in msg
    if joint:
        assert f"joint '{joint}'" in msg


def test_two_roots_and_bad_xml_and_missing_file_are_clear(tmp_path):
    with pytest.raises(MechanismError, match='2 root links'):
        load_spatial(BAD / 'bad_two_roots.urdf')
    with pytest.raises(MechanismError, match='not a valid URDF'):
        load_spatial('<robot name="x"><link name="a"></robot>')
    with pytest.raises(MechanismError, match='cannot read the URDF') as err:
        load_spatial(tmp_path / 'nope.urdf')
    assert 'nope.urdf' in str(err.value)
    bad = '<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="revolute">' \
          '<parent link="a"/><child link="b"/><axis xyz="0 0 1"/></joint></robot>'
    with pytest.raises(MechanismError, match=r"joint 'j'.*needs <limit>"):
        load_spatial(bad)
    zero_axis = bad.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/>'
                            '<limit lower="-1" upper="1" effort="1" velocity="1"/>')
    with pytest.raises(MechanismError, match=r"joint 'j'.*not a direction"):
        load_spatial(zero_axis)


def test_a_link_with_two_parents_closes_a_loop():
    m = load_spatial(BAD / 'two_parents.urdf')
    assert m.joint_names == ('crank_joint', 'coupler_joint', 'rocker_joint')
    (loop,) = m.loops
    assert loop.name == 'coupler_rocker' and loop.type == 'revolute'
    assert m.link_names[loop.parent] == 'coupler' and m.link_names[loop.child] == 'rocker'


def test_overlay_loops_actuators_and_q0_close_the_fourbar():
    m = load_spatial(DATA / 'fourbar.urdf', DATA / 'fourbar_loops.yaml')
    assert list(m.gravity) == [0.0, -9.81, 0.0]
    assert list(m.actuated) == [True, False, False]
    (loop,) = m.loops
    T = SpatialDynamics(m).poses(m.q0)
    a = T[loop.parent] @ loop.T_parent
    b = T[loop.child] @ loop.T_child
    assert np.abs(a[:3, 3] - b[:3, 3]).max() < 1e-9       # q0 closes the loop


@pytest.mark.parametrize('overlay,where', [
    ({'gravty': [0, 0, -9.81]}, 'gravty'),
    ({'gravity': [0, 'x', 1]}, 'gravity'),
    ({'actuators': ['nope']}, 'actuators[0]'),
    ({'q0': {'nope': 1.0}}, 'q0.nope'),
    ({'limits': {'shoulder_pan_joint': {'lower': 'a'}}}, 'limits.shoulder_pan_joint.lower'),
    ({'loops': [{'parent': 'base_link', 'child': 'nolink'}]}, 'loops[0].child'),
    ({'loops': [{'parent': 'base_link', 'child': 'wrist_3_link', 'type': 'ball'}]},
     'loops[0].type'),
])
def test_overlay_errors_name_the_key(overlay, where):
    with pytest.raises(MechanismError) as err:
        load_spatial(DATA / 'ur5.urdf', overlay)
    assert f': {where}: ' in str(err.value)


def test_overlay_file_errors_name_the_file(tmp_path):
    f = tmp_path / 'o.yaml'
    f.write_text('gravity: [0, 0, -9.81]\ngravity: [0, 0, -9.8]\n')
    with pytest.raises(MechanismError) as err:
        load_spatial(DATA / 'ur5.urdf', f)
    assert str(f) in str(err.value) and 'gravity' in str(err.value)


def test_overlay_imus_on_merged_links_and_by_frame_id():
    """An IMU on a link merged by a fixed joint sits at that link's pose in the tree link;
    without `link`, its frame_id names the URDF link."""
    from mbfg_ros.spatial.urdf import origin_matrix
    m = load_spatial(DATA / 'ur5.urdf', {'imus': [
        {'name': 'wrist', 'link': 'tool0', 'origin': {'xyz': [0, 0, 0.02]}},
        {'name': 'forearm_imu', 'frame_id': 'forearm_link', 'topic': 'arm/imu'}]})
    wrist, fore = m.imus
    b, T_tool = m.frames['tool0']
    assert wrist.link == b == m.link_names.index('wrist_3_link')
    np.testing.assert_allclose(wrist.T_mount, T_tool @ origin_matrix([0, 0, 0.02], None))
    assert (wrist.frame_id, wrist.topic) == ('tool0', 'imu/wrist')
    assert fore.link == m.link_names.index('forearm_link') and fore.topic == 'arm/imu'
    np.testing.assert_allclose(fore.T_mount, np.eye(4))


@pytest.mark.parametrize('imus, where, words', [
    ([{'name': 'a', 'link': 'tool0'}, {'name': 'a', 'link': 'tool0'}], 'imus[1].name',
     'duplicate'),
    ([{'link': 'tool0'}], 'imus[0]', "missing key 'name'"),
    ([{'name': 'a', 'frame_id': 'camera'}], 'imus[0].frame_id', "unknown link 'camera'"),
    ([{'name': 'a', 'link': 'tool0', 'gyro_range': -1}], 'imus[0].gyro_range', 'positive'),
    ([{'name': 'a', 'link': 'tool0', 'mount': {}}], 'imus[0].mount', "unknown key 'mount'"),
    ({'name': 'a'}, 'imus', 'list'),
])
def test_overlay_imu_errors_name_the_entry(imus, where, words):
    with pytest.raises(MechanismError) as err:
        load_spatial(DATA / 'ur5.urdf', {'imus': imus})
    assert where in str(err.value) and words in str(err.value), str(err.value)
