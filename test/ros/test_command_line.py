"""``estimator_node --help`` / ``simulator_node --help`` and a URDF given with ``-p``
(issue 30 item 6): the parameter table with defaults, and one line instead of rcl's
traceback."""
from __future__ import annotations

import subprocess
import sys

import pytest
from support.ros_data import REPO, ros_env, unique_domain

from mbfg_ros.ros.command_line import (
    help_text,
    param_overrides,
    unparsable_urdf_override,
    user_args,
    wants_help,
)
from mbfg_ros.ros.params import ESTIMATOR_PARAMS, SIMULATOR_PARAMS

UR5 = (REPO / 'config' / 'urdf' / 'ur5.urdf').read_text()


def test_help_is_the_programs_flag_not_a_ros_argument():
    assert wants_help(['--help']) and wants_help(['-h', '--ros-args', '-p', 'a:=1'])
    assert wants_help(['--ros-args', '-p', 'a:=1', '--', '--help'])
    assert not wants_help(['--ros-args', '--help'])          # rcl's own --help: not ours
    assert not wants_help(['--ros-args', '-p', 'mechanism:=x.urdf'])
    assert user_args(['a', '--ros-args', '-p', 'x:=1', '--', 'b', '--ros-args', '-r',
                      'y:=z']) == ['a', 'b']


def test_overrides_are_read_only_inside_ros_args():
    argv = ['-p', 'robot_description:=x', '--ros-args', '-p', 'mechanism:=m.urdf',
            '--param', 'estimator_node:frequency:=5', '-r', '__ns:=/a', '--', '-p', 'z:=1']
    assert param_overrides(argv) == [('mechanism', 'm.urdf'), ('frequency', '5')]


def test_a_urdf_file_text_on_the_command_line_is_refused_with_the_way_out():
    msg = unparsable_urdf_override(['--ros-args', '-p', f'robot_description:={UR5}'])
    assert msg is not None
    assert '--params-file' in msg and 'mechanism:=robot.urdf' in msg and '\n' not in msg
    # multi-line text YAML would fold into one line: refused, not silently altered
    folded = '<robot name="r">\n  <link name="a"/>\n</robot>'
    assert unparsable_urdf_override(['--ros-args', '-p', f'robot_description:={folded}'])
    # what rcl does read as this very string passes
    assert unparsable_urdf_override(
        ['--ros-args', '-p', 'robot_description:=<robot name="r"><link name="a"/></robot>']
    ) is None
    assert unparsable_urdf_override(['--ros-args', '-p', 'mechanism:=robot.urdf']) is None


@pytest.mark.parametrize('specs', [ESTIMATOR_PARAMS, SIMULATOR_PARAMS], ids=['est', 'sim'])
def test_help_lists_every_parameter_with_its_default(specs):
    text = help_text('node', 'What it does.', specs, width=100)
    rows = {line.split()[0]: line.split()[1] for line in text.splitlines()
            if line.startswith('    ') and not line.startswith('     ')}
    assert set(rows) == {p.name for p in specs}
    expected = {'frequency': '500', 'lag_duration': '0.05', 'executor': 'auto',
                'marker_ellipses': 'true', 'mechanism': "''", 'dt': '0.001',
                'encoder_sigma': ('0.001' if specs is ESTIMATOR_PARAMS else '0'),
                'storage': 'mcap', 'window': '2', 'realtime': 'true'}
    for name, default in expected.items():
        if name in rows:
            assert rows[name] == default, (name, rows[name])
    assert all(len(line) <= 100 for line in text.splitlines())
    assert 'What it does.' in text and '--params-file' in text


@pytest.mark.ros
@pytest.mark.parametrize('module', ['estimator_node', 'simulator_node'])
def test_node_help_prints_the_parameters_and_exits_0(module):
    r = subprocess.run([sys.executable, '-m', f'mbfg_ros.ros.{module}', '--help'],
                       env=ros_env(unique_domain(11)), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f'usage: ros2 run mbfg_ros {module} --ros-args')
    assert 'is required' not in r.stdout + r.stderr
    for name in ('mechanism', 'robot_description', 'overlay', 'encoder_sigma'):
        assert f'\n    {name} ' in r.stdout, name


@pytest.mark.ros
def test_a_urdf_passed_with_p_is_one_line_pointing_to_a_parameters_file():
    r = subprocess.run([sys.executable, '-m', 'mbfg_ros.ros.estimator_node', '--ros-args',
                        '-p', f'robot_description:={UR5}'], env=ros_env(unique_domain(12)),
                       capture_output=True, text=True, timeout=60)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 2
    assert len(lines) == 1 and lines[0].startswith('estimator_node: error: -p robot_description')
    assert '--params-file' in lines[0] and 'Traceback' not in r.stderr
