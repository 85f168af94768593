"""Loading mechanism YAML files: the upstream format and the extensions."""
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import CONFIG, DATA, UPSTREAM_MECHANISMS

from mbfg_ros.core.errors import AssemblyError, MechanismError
from mbfg_ros.planar.dynamics import build_system, load_system
from mbfg_ros.planar.mechanism_yaml import load_mechanism, parse_mechanism
from mbfg_ros.planar.model import GROUND


@pytest.mark.parametrize('path', UPSTREAM_MECHANISMS, ids=lambda p: p.name)
def test_every_upstream_mechanism_loads_and_assembles(path):
    sys = load_system(path)
    assert np.max(np.abs(sys.constraints.phi(sys.q0))) < 1e-10
    assert sys.dof >= 1


def test_fourbar_matches_seed_listing_1():
    mech = load_mechanism(CONFIG / 'fourbars1.yaml')
    assert mech.coordinate_names == ('x1', 'y1', 'x2', 'y2')
    rocker = mech.bodies[2]
    assert rocker.length == pytest.approx(math.hypot(3.0, 2.0))   # length: auto
    assert rocker.I0 == pytest.approx(4.0 * 13.0 / 3.0)            # (1/3)*mass*length^2
    assert rocker.cog == pytest.approx((0.5 * math.hypot(3, 2), 0.0))


def test_point_expressions_may_use_earlier_points():
    mech = load_mechanism(CONFIG / 'pendulum2.yaml')
    p2 = mech.points[2]
    assert (p2.x, p2.y) == pytest.approx((7 + 5 * math.cos(math.pi / 4),
                                          5 * math.sin(math.pi / 4)))


def test_pick_and_place_has_redundant_constraints_and_two_dof():
    sys = load_system(CONFIG / 'pick-and-place-robot.yaml')
    assert sys.n == 22
    assert np.linalg.matrix_rank(sys.constraints.phi_q(sys.q0)) == 20
    assert sys.m > len(sys.rows) == 20
    assert sys.dof == 2


def test_every_extension_key_is_read():
    mech = load_mechanism(DATA / 'extensions.yaml')
    assert mech.gravity == (0.3, -9.81)
    assert mech.coordinate_names[-2:] == ('crank_angle', 'elbow')
    assert mech.sliders[0].through == ((-3.0, -2.0), (8.0, 2.0))
    assert mech.springs[0].k == 50 and mech.springs[0].length == 1.0
    assert mech.rotational_springs[0].bodies == (GROUND, 1)
    assert mech.rotational_springs[1].angle == 0.3
    assert mech.torques[0].torque == 2.0
    assert mech.forces[1].at == (0.3, 0.2)
    assert mech.point_masses == ((2, 0.5),)
    assert [j.name for j in mech.joints] == ['j0', 'j1', 's0']
    assert mech.actuators[1].coordinate == mech.coordinate_names.index('crank_angle')
    assert mech.sensors[0].topic == 'imu/imu0' and mech.sensors[0].frame_id == 'imu0'
    build_system(mech)


BASE = """
points:
  - {x: 0, y: 0, fixed: true}
  - {x: 1, y: 0}
planar_bodies:
  - {points: [0, 1], mass: 1, I0: 1}
"""


@pytest.mark.parametrize('text, path, message', [
    (BASE + 'colour: red\n', 'colour', "unknown key 'colour'"),
    (BASE.replace('I0: 1', 'I0: 1, inertia: 2'), r'planar_bodies\[0\]\.inertia',
     "unknown key 'inertia'"),
    (BASE.replace('I0: 1', 'I0: 2*q'), r'planar_bodies\[0\]\.I0', "unknown name 'q'"),
    (BASE.replace('I0: 1', 'I0: 1/'), r'planar_bodies\[0\]\.I0', 'cannot parse'),
    (BASE.replace('[0, 1]', '[0, 7]'), r'planar_bodies\[0\]\.points\[1\]',
     'point index 7 out of range'),
    (BASE.replace('[0, 1]', '[0]'), r'planar_bodies\[0\]\.points', 'at least 2'),
    (BASE.replace('mass: 1', 'mass: -1'), r'planar_bodies\[0\]\.mass', 'must be >= 0'),
    (BASE.replace('{x: 1, y: 0}', '{x: 1, y: [0]}'), r'points\[1\]\.y', 'expected a number'),
    (BASE.replace('fixed: true', 'fixed: yes please'), r'points\[0\]\.fixed', 'true or false'),
    (BASE + 'gravity: [0, -9.81, 0]\n', 'gravity', 'expected 2 numbers'),
    (BASE + 'actuators: [{name: m, coordinate: z9}]\n', r'actuators\[0\]\.coordinate',
     "unknown coordinate 'z9'"),
    (BASE + 'actuators: [{name: m, joint: nope}]\n', r'actuators\[0\]\.joint',
     "unknown joint 'nope'"),
    (BASE + 'joints: [{name: j, type: ball, bodies: [ground, 0]}]\n', r'joints\[0\]\.type',
     "unknown joint type 'ball'"),
    (BASE + 'sensors: [{name: s, type: imu, body: 3}]\n', r'sensors\[0\]\.body',
     'body index 3 out of range'),
    (BASE + 'relative_coordinates: [{type: Weird, points: [0, 1]}]\n',
     r'relative_coordinates\[0\]\.type', "unknown type 'Weird'"),
    ('points: [1, 2\n', r'line \d+', 'invalid YAML'),
])
def test_bad_input_names_the_file_the_yaml_path_and_the_problem(text, path, message):
    with pytest.raises(MechanismError, match=rf'^bad\.yaml: {path}: .*{message}'):
        parse_mechanism(text, source='bad.yaml')


def test_colinear_three_point_body_is_rejected():
    text = """
points:
  - {x: 0, y: 0, fixed: true}
  - {x: 1, y: 0}
  - {x: 2, y: 0}
planar_bodies:
  - {points: [0, 1, 2], mass: 1, I0: 1}
"""
    with pytest.raises(MechanismError, match=r'planar_bodies\[0\]\.points: point 2 is colinear'):
        parse_mechanism(text, source='bad.yaml')


def test_unassemblable_mechanism_is_an_assembly_error_naming_the_constraint():
    # Crank of length 1 and rocker of length 1 cannot close a 10 m gap with a 1 m coupler.
    text = """
points:
  - {x: 0, y: 0, fixed: true}
  - {x: 1, y: 0}
  - {x: 2, y: 0.1}
  - {x: 10, y: 0, fixed: true}
planar_bodies:
  - {points: [0, 1], length: 1, mass: 1, I0: 1}
  - {points: [1, 2], length: 1, mass: 1, I0: 1}
  - {points: [2, 3], length: 1, mass: 1, I0: 1}
"""
    with pytest.raises(AssemblyError, match=r'^far\.yaml: points: .*cannot assemble.*distance'):
        build_system(parse_mechanism(text, source='far.yaml'))


def test_missing_file_is_a_mechanism_error(tmp_path: Path):
    with pytest.raises(MechanismError, match='nope.yaml: cannot read file'):
        load_mechanism(tmp_path / 'nope.yaml')


def test_mechanism_without_degree_of_freedom_is_rejected():
    text = """
points:
  - {x: 0, y: 0, fixed: true}
  - {x: 1, y: 0, fixed: true}
  - {x: 0.5, y: 1}
planar_bodies:
  - {points: [0, 2], mass: 1, I0: 1}
  - {points: [1, 2], mass: 1, I0: 1}
"""
    with pytest.raises(MechanismError, match='no degree of freedom'):
        build_system(parse_mechanism(text, source='rigid.yaml'))


def test_the_upstream_mechanisms_are_the_files_config_source_md_lists_as_copied():
    """The tests' upstream set is exactly the provenance note's, and all are in config/."""
    import re

    text = (CONFIG / 'SOURCE.md').read_text()
    copied = text.split('copied unchanged')[0]
    assert set(re.findall(r'`([^`]+\.yaml)`', copied)) == {p.name for p in UPSTREAM_MECHANISMS}
    assert all(p.is_file() and p.parent == CONFIG for p in UPSTREAM_MECHANISMS)
