"""Mechanism YAML: bodies, points and sliders by name wherever an index is accepted;
duplicate keys are errors that name both lines (issue 14)."""
from __future__ import annotations

import pytest

from mbfg_ros.core.errors import MechanismError
from mbfg_ros.planar.mechanism_yaml import parse_mechanism
from mbfg_ros.planar.model import GROUND

BY_INDEX = """
points:
  - {x: 0, y: 0, fixed: true, name: pivot}
  - {x: 1, y: 0, name: elbow}
  - {x: 2, y: 0, name: hand}
planar_bodies:
  - {points: [0, 1], mass: 1, I0: 0.3, name: upper}
  - {points: [1, 2], mass: 1, I0: 0.3, name: lower}
relative_coordinates:
  - {type: RelativeAngle, bodies: [0, 1], name: elbow_angle}
  - {type: RelativeAngleAbsoluteDOF, points: [0, 1], name: shoulder}
sliders:
  - {name: rail, point: 2, through: [[0, 0], [3, 0]]}
forces:
  - {point: 2, fx: 1}
  - {body: 1, at: [0.5, 0], fy: 2}
torques:
  - {body: 0, torque: 0.5}
springs:
  - {points: [0, 2], k: 3}
rotational_springs:
  - {bodies: [ground, 0], k: 4}
point_masses:
  - {point: 2, mass: 0.1}
joints:
  - {name: shoulder_joint, type: revolute, bodies: [ground, 0]}
  - {name: elbow_joint, type: revolute, bodies: [0, 1]}
  - {name: rail_joint, type: prismatic, slider: 0}
sensors:
  - {name: imu, type: imu, body: 1}
"""

BY_NAME = (BY_INDEX
           .replace('points: [0, 1], mass', 'points: [pivot, elbow], mass')
           .replace('points: [1, 2], mass', 'points: [elbow, hand], mass')
           .replace('bodies: [0, 1], name: elbow_angle', 'bodies: [upper, lower], name: '
                    'elbow_angle')
           .replace('points: [0, 1], name: shoulder', 'points: [pivot, elbow], name: shoulder')
           .replace('point: 2, through', 'point: hand, through')
           .replace('{point: 2, fx: 1}', '{point: hand, fx: 1}')
           .replace('{body: 1, at', '{body: lower, at')
           .replace('{body: 0, torque', '{body: upper, torque')
           .replace('points: [0, 2], k', 'points: [pivot, hand], k')
           .replace('bodies: [ground, 0], k', 'bodies: [ground, upper], k')
           .replace('{point: 2, mass', '{point: hand, mass')
           .replace('bodies: [ground, 0]}', 'bodies: [ground, upper]}')
           .replace('bodies: [0, 1]}', 'bodies: [upper, lower]}')
           .replace('slider: 0}', 'slider: rail}')
           .replace('body: 1}', 'body: lower}'))


def test_every_reference_accepts_a_name_and_means_the_same_as_the_index():
    assert BY_NAME.count('upper') >= 6 and 'slider: rail' in BY_NAME
    a = parse_mechanism(BY_INDEX, source='index.yaml')
    b = parse_mechanism(BY_NAME, source='name.yaml')
    for field in ('bodies', 'relative', 'sliders', 'forces', 'torques', 'springs',
                  'rotational_springs', 'point_masses', 'joints', 'sensors'):
        assert getattr(a, field) == getattr(b, field), field
    assert b.rotational_springs[0].bodies == (GROUND, 0)


def test_an_unknown_name_lists_the_known_ones():
    text = BY_NAME.replace('{body: lower, at', '{body: forearm, at')
    with pytest.raises(MechanismError, match=r"name.yaml: forces\[1\].body: unknown body "
                       r"'forearm' \(known: upper, lower, or an index 0..1\)"):
        parse_mechanism(text, source='name.yaml')


def test_an_ambiguous_name_is_an_error():
    text = BY_NAME.replace('name: lower}', 'name: upper}')
    with pytest.raises(MechanismError, match="body name 'upper' is ambiguous"):
        parse_mechanism(text, source='name.yaml')


def test_a_duplicate_key_is_an_error_naming_both_lines():
    text = """points:
  - {x: 0, y: 0, fixed: true}
  - {x: 1, y: 0}
planar_bodies:
  - points: [0, 1]
    mass: 1
    I0: 0.3
    mass: 2
"""
    with pytest.raises(MechanismError, match=r"d.yaml: line 8: duplicate key 'mass' "
                       r"\(lines 6 and 8\)"):
        parse_mechanism(text, source='d.yaml')


def test_a_duplicate_top_level_section_is_an_error():
    text = BY_INDEX + 'gravity: [0, -9.81]\ngravity: [0, -1.62]\n'
    with pytest.raises(MechanismError, match="duplicate key 'gravity'"):
        parse_mechanism(text, source='d.yaml')
