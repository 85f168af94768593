"""Launch files: checked structurally (ast) always, loaded by launch_ros when it imports.

Structure: every executable is a console_scripts entry of setup.py, every
config file they name exists and is installed by setup.py's data_files globs,
every DeclareLaunchArgument has a description, every parameter they set is a
declared parameter of that node.
"""
from __future__ import annotations

import ast
import fnmatch

import pytest
from support.launch_stub import LAUNCH, calls, kw, parsed
from support.ros_data import REPO

from mbfg_ros.ros.floating_params import floating_params
from mbfg_ros.ros.params import ESTIMATOR_PARAMS, SIMULATOR_PARAMS

FILES = sorted(LAUNCH.glob('*.launch.py'))
NODE_PARAMS = {'estimator_node': {p.name for p in ESTIMATOR_PARAMS} | {'use_sim_time'},
               'simulator_node': {p.name for p in SIMULATOR_PARAMS} | {'use_sim_time'},
               'floating_estimator_node': {p.name for p in floating_params()} | {'use_sim_time'},
               # robot_state_publisher's own parameters (ros/robot_state_publisher README)
               'robot_state_publisher': {'robot_description', 'use_sim_time',
                                         'publish_frequency', 'frame_prefix'}}
OTHER_PACKAGES = {'robot_state_publisher': 'robot_state_publisher'}
"""Nodes of standard ROS packages a launch file may start: package -> executable (each an
exec_depend of package.xml)."""


def _setup():
    return ast.parse((REPO / 'setup.py').read_text())


def console_scripts() -> set[str]:
    for node in ast.walk(_setup()):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == 'console_scripts':
                    return {ast.literal_eval(e).split('=')[0].strip() for e in v.elts}
    raise AssertionError('setup.py has no console_scripts')


def data_file_globs() -> list[tuple[str, str]]:
    """(install dir suffix, glob pattern) of setup.py's data_files."""
    out = []
    for node in ast.walk(_setup()):
        if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'glob':
            out.append(ast.literal_eval(node.args[0]))
    return out


def test_the_launch_files_exist_and_are_installed():
    assert {f.name for f in FILES} >= {'estimator.launch.py', 'forward_dynamics.launch.py',
                                       'demo.launch.py', 'urdf_estimator.launch.py'}
    assert 'launch/*.launch.py' in data_file_globs()


@pytest.mark.parametrize('path', FILES, ids=lambda p: p.name)
def test_every_node_runs_a_console_script_of_this_package(path):
    tree = ast.parse(path.read_text())
    nodes = calls(tree, 'Node')
    assert nodes
    scripts = console_scripts()
    for n in nodes:
        pkg, exe = ast.literal_eval(kw(n, 'package')), ast.literal_eval(kw(n, 'executable'))
        if pkg == 'mbfg_ros':
            assert exe in scripts
        else:
            assert OTHER_PACKAGES.get(pkg) == exe, (pkg, exe)
            assert f'<exec_depend>{pkg}</exec_depend>' in (REPO / 'package.xml').read_text()


@pytest.mark.parametrize('path', FILES, ids=lambda p: p.name)
def test_every_launch_argument_has_a_description(path):
    for call in calls(ast.parse(path.read_text()), 'DeclareLaunchArgument'):
        name = ast.literal_eval(call.args[0])
        desc = kw(call, 'description')
        assert desc is not None, f'{path.name}: argument {name!r} has no description'
        assert len(ast.literal_eval(desc)) > 10, name


@pytest.mark.parametrize('path', FILES, ids=lambda p: p.name)
def test_every_config_file_named_exists_and_is_installed(path):
    globs = data_file_globs()
    found = 0
    for lst in ast.walk(ast.parse(path.read_text())):
        if not isinstance(lst, ast.List):
            continue
        consts = [e.value for e in lst.elts if isinstance(e, ast.Constant)]
        if 'config' in consts and consts[-1] != 'config':
            rel = '/'.join(consts[consts.index('config'):])
            found += 1
            assert (REPO / rel).exists(), f'{path.name} names {rel}, which does not exist'
            assert any(fnmatch.fnmatch(rel, g) for g in globs), f'{rel} is not installed'
    assert found >= 1


@pytest.mark.parametrize('path', FILES, ids=lambda p: p.name)
def test_parameters_set_by_launch_files_are_declared_by_the_node(path):
    for n in calls(ast.parse(path.read_text()), 'Node'):
        exe = ast.literal_eval(kw(n, 'executable'))
        params = kw(n, 'parameters')
        for d in (params.elts if params is not None else []):
            if isinstance(d, ast.Dict):
                for k in d.keys:
                    assert ast.literal_eval(k) in NODE_PARAMS[exe], (path.name, exe, k.value)


@pytest.mark.parametrize('name, args', [
    ('estimator.launch.py', {'mechanism', 'params_file', 'namespace', 'use_sim_time',
                             'command_topic'}),
    ('forward_dynamics.launch.py', {'mechanism', 'duration', 'dt', 'window', 'output',
                                    'realtime'}),
    ('urdf_estimator.launch.py', {'urdf', 'overlay', 'params_file', 'namespace',
                                  'use_sim_time', 'command_topic', 'state_publisher'}),
])

def test_launch_arguments_are_the_documented_ones(name, args):
    declared = {ast.literal_eval(c.args[0]) for c in calls(parsed(name),
                                                           'DeclareLaunchArgument')}
    assert declared >= args


def test_the_urdf_launch_reads_the_urdf_into_robot_description_of_both_nodes():
    """The URDF file's text becomes robot_description (the ROS way) of the estimator and
    of robot_state_publisher, which listens to the estimate."""
    tree = parsed('urdf_estimator.launch.py')
    nodes = {ast.literal_eval(kw(n, 'executable')): n for n in calls(tree, 'Node')}
    assert set(nodes) == {'estimator_node', 'robot_state_publisher'}
    for n in nodes.values():
        keys = {ast.literal_eval(k) for d in kw(n, 'parameters').elts
                if isinstance(d, ast.Dict) for k in d.keys}
        assert 'robot_description' in keys
    remap = kw(nodes['robot_state_publisher'], 'remappings').elts[0]
    assert [ast.literal_eval(e) for e in remap.elts] == ['joint_states',
                                                          'estimator_node/joint_states']
    assert calls(tree, 'read_text')


def test_the_urdf_launch_runs_its_opaque_function_on_the_bundled_robot(tmp_path):
    """The function that reads the URDF, run with a stand-in launch context (launch is not
    installable here): the estimator gets the URDF text and the overlay."""
    from support.launch_stub import run_launch_function
    urdf = REPO / 'config' / 'urdf' / 'ur5.urdf'
    nodes = run_launch_function(LAUNCH / 'urdf_estimator.launch.py', {'urdf': str(urdf)})
    est = next(n for n in nodes if n.k['executable'] == 'estimator_node')
    params = est.k['parameters'][1]
    assert params['robot_description'] == urdf.read_text()
    from mbfg_ros.loader import load_mechanism
    system = load_mechanism(params['robot_description'],
                            str(REPO / 'config' / 'urdf' / 'ur5_sensors.yaml'))
    assert system.mech.name == 'ur5' and system.mech.sensors[0].name == 'wrist_imu'


def test_the_demo_feeds_estimator_commands_back_to_the_simulator():
    tree = parsed('demo.launch.py')
    exes = {ast.literal_eval(kw(n, 'executable')): n for n in calls(tree, 'Node')}
    assert set(exes) == {'simulator_node', 'estimator_node'}
    remaps = kw(exes['estimator_node'], 'remappings')
    src = ast.literal_eval(remaps.elts[0].elts[0])
    assert src == '~/torque_commands'
    default = next(ast.literal_eval(kw(c, 'default_value')) for c in
                   calls(tree, 'DeclareLaunchArgument') if ast.literal_eval(c.args[0])
                   == 'feedback')
    assert default == '/simulator_node/torque_commands'   # the simulator's ~/torque_commands


@pytest.mark.parametrize('path', FILES, ids=lambda p: p.name)
def test_launch_files_load_with_launch_ros(path):
    pytest.importorskip('launch_ros', reason='launch_ros is not installable here (no PyPI '
                        'wheel); the structural tests above cover the launch files')
    import importlib.util

    from launch import LaunchDescription

    spec = importlib.util.spec_from_file_location(path.stem.replace('.', '_'), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ld = mod.generate_launch_description()
    assert isinstance(ld, LaunchDescription) and ld.entities
