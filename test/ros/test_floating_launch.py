"""The floating-base node's launch file, parameters file and parameter table (no DDS).

The generic structure checks (console script, installed config files, described
arguments, declared parameters) run on every launch file in test_launch_files.py; here:
what this launch gives its nodes, that the bundled parameters file and overlay build the
node's settings and robot, that bad parameters are one-line errors naming the parameter,
and that docs/floating-base.md's parameter table is the node's.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest
from support.launch_stub import calls, kw, parsed, run_launch_function
from support.ros_data import REPO, ros_env, unique_domain

from mbfg_ros.loader import load_floating
from mbfg_ros.ros.floating_params import floating_params, parse_floating
from mbfg_ros.ros.params import ParameterError, load_params_file

LAUNCH = REPO / 'launch' / 'floating_estimator.launch.py'
PARAMS = REPO / 'config' / 'solo12_estimator.yaml'
URDF = REPO / 'config' / 'urdf' / 'solo12.urdf'
OVERLAY = REPO / 'config' / 'urdf' / 'solo12_floating.yaml'


def _run_opaque(context: dict) -> list:
    """The launch file's ``_nodes`` run with stand-in launch modules (launch_ros has no
    wheel here): the Node calls it makes, as recorded keyword arguments."""
    return run_launch_function(LAUNCH, context)


def test_the_launch_declares_its_arguments_with_the_bundled_solo12_as_default():
    tree = parsed('floating_estimator.launch.py')
    args = {ast.literal_eval(c.args[0]): c for c in calls(tree, 'DeclareLaunchArgument')}
    assert set(args) >= {'urdf', 'overlay', 'params_file', 'namespace', 'use_sim_time',
                         'state_publisher'}
    defaults = {name: [ast.literal_eval(e) for e in kw(c, 'default_value').args[0].elts
                       if isinstance(e, ast.Constant)]
                for name, c in args.items() if isinstance(kw(c, 'default_value'), ast.Call)}
    assert defaults['urdf'][-1] == 'solo12.urdf'
    assert defaults['overlay'][-1] == 'solo12_floating.yaml'
    assert defaults['params_file'][-1] == 'solo12_estimator.yaml'


def test_the_launch_gives_both_nodes_the_urdf_text_and_shows_the_estimate():
    nodes = _run_opaque({'urdf': str(URDF)})
    by_exe = {n.k['executable']: n for n in nodes}
    assert set(by_exe) == {'floating_estimator_node', 'robot_state_publisher'}
    est = by_exe['floating_estimator_node'].k['parameters'][1]
    assert est['robot_description'] == URDF.read_text()
    rsp = by_exe['robot_state_publisher'].k
    assert rsp['parameters'][0]['robot_description'] == URDF.read_text()
    assert rsp['remappings'] == [('joint_states', 'floating_estimator_node/joint_states')]


def test_the_bundled_parameters_file_and_overlay_build_the_node_settings_and_robot():
    values = load_params_file(PARAMS, 'floating_estimator_node')
    declared = {p.name for p in floating_params()}
    assert set(values) <= declared, set(values) - declared
    values.update({'robot_description': URDF.read_text(), 'overlay': str(OVERLAY)})
    settings = parse_floating(values)
    assert settings.config.foot_radius == pytest.approx(0.016)   # Solo-12's ball feet
    assert settings.imu_topic == 'imu/base'
    robot = load_floating(settings.source, settings.overlay)
    assert robot.base_link == 'base_link' and len(robot.joint_names) == 12
    assert robot.contact_names == ('FL_FOOT', 'FR_FOOT', 'HL_FOOT', 'HR_FOOT')


@pytest.mark.parametrize('change, named', [
    ({'frequency': 0.0}, 'frequency'),
    ({'contact_source': 'vision'}, 'contact_source'),
    ({'lag': -1.0}, 'lag'),
    ({'contact_topic': 'feet/contact'}, 'contact_topic'),
    ({'overlay': ''}, 'overlay'),
    ({'no_such_parameter': 1.0}, 'no_such_parameter'),
])
def test_a_bad_parameter_is_one_error_naming_it(change, named):
    values = {'urdf': str(URDF), 'overlay': str(OVERLAY), **change}
    with pytest.raises(ParameterError) as err:
        parse_floating(values)
    text = str(err.value)
    assert len(text.splitlines()) == 1 and named in text, text


def test_the_node_refuses_a_bad_robot_in_one_line_with_exit_2(tmp_path):
    """A fixed-base overlay (no floating_base): exit 2, one line naming the key."""
    overlay = tmp_path / 'arm.yaml'
    overlay.write_text('gravity: [0, 0, -9.81]\n')
    r = subprocess.run([sys.executable, '-m', 'mbfg_ros.ros.floating_node', '--ros-args',
                        '-p', f'urdf:={URDF}', '-p', f'overlay:={overlay}'],
                       env=ros_env(unique_domain(43)), capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and 'floating_base' in lines[0], lines


def test_docs_list_every_parameter_of_the_node():
    """docs/floating-base.md's parameter table ("Running it live") names exactly the node's
    parameters (the estimator's config fields included)."""
    text = (REPO / 'docs' / 'floating-base.md').read_text()
    section = text.split('## Running it live', 1)[1].split('\n## ', 1)[0]
    named, in_table = set(), False
    for line in section.splitlines():
        if not line.startswith('|'):
            in_table = False
            continue
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if not in_table:
            in_table = cells[0] == 'name'          # the parameter table's header
            continue
        if not set(cells[0]) <= set('-: '):
            named |= {n.strip() for n in cells[0].replace('`', '').split(',')}
    params = {p.name for p in floating_params()}
    assert params - named == set(), params - named
    assert {n for n in named if re.fullmatch(r'[a-z_]+', n)} - params == set()


def test_contact_source_effort_is_a_node_setting_and_needs_no_foot_topic():
    """``contact_source: effort`` (the stance from the legs' efforts, the estimator's third
    source) is accepted by the node's parameters, and the node built on it in rclpy
    subscribes to joint_states and the IMU only (no Bool, no WrenchStamped per foot)."""
    import rclpy
    from rclpy.parameter import Parameter

    from mbfg_ros.estimation.floating.config import CONTACT_SOURCES
    from mbfg_ros.ros.floating_node import FloatingEstimatorNode

    assert 'effort' in CONTACT_SOURCES
    settings = parse_floating({'urdf': str(URDF), 'overlay': str(OVERLAY),
                               'contact_source': 'effort'})
    assert settings.config.contact_source == 'effort'
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=unique_domain(44))
    node = None
    try:
        node = FloatingEstimatorNode(context=ctx, parameter_overrides=[
            Parameter('urdf', value=str(URDF)), Parameter('overlay', value=str(OVERLAY)),
            Parameter('contact_source', value='effort')])
        assert node.estimator.config.contact_source == 'effort'
        assert node.input_topics == ['joint_states', 'imu']
        topics = {s.topic_name for s in node.subscriptions}
        assert not any('feet/' in t for t in topics), topics
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        rclpy.shutdown(context=ctx)
