"""Structural checks of the ament_python package skeleton.

These read package.xml, setup.py (with ast, never executing it), setup.cfg and the
file tree, so they run without ROS and fail loudly when the layout drifts.
"""
import ast
import configparser
import glob
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = 'mbfg_ros'

EXEC_DEPENDS = {
    'rclpy', 'sensor_msgs', 'std_msgs', 'std_srvs', 'visualization_msgs', 'trajectory_msgs',
    'diagnostic_msgs', 'geometry_msgs', 'builtin_interfaces', 'rosgraph_msgs', 'launch',
    'launch_ros', 'ament_index_python', 'nav_msgs', 'tf2_msgs',
    'python3-numpy', 'python3-yaml', 'python3-scipy', 'python3-matplotlib',
}
TEST_DEPENDS = {'python3-pytest'}
CONSOLE_SCRIPTS = {
    'mbfg-simulate': 'mbfg_ros.cli.simulate:main',
    'mbfg-inverse': 'mbfg_ros.cli.inverse:main',
    'mbfg-statics': 'mbfg_ros.cli.statics:main',
    'mbfg-replay': 'mbfg_ros.cli.replay:main',
    'mbfg-identify': 'mbfg_ros.cli.identify:main',
    'estimator_node': 'mbfg_ros.ros.estimator_node:main',
    'simulator_node': 'mbfg_ros.ros.simulator_node:main',
    'floating_estimator_node': 'mbfg_ros.ros.floating_node:main',
}


# ---------------------------------------------------------------- setup.py parsing

def _setup_call():
    """Return (setup(...) ast.Call, {module-level name: constant}) from setup.py."""
    tree = ast.parse((ROOT / 'setup.py').read_text(), filename='setup.py')
    names = {}
    call = None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant)):
            names[node.targets[0].id] = node.value.value
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == 'setup'):
            call = node
    assert call is not None, 'setup.py has no setup(...) call'
    return call, names


def _kwarg(name):
    call, _ = _setup_call()
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    raise AssertionError(f'setup() has no {name}= argument')


def _eval(node, names):
    """Evaluate the small expression language setup.py uses.

    Strings, names bound to constants, list literals, `+`, and glob('pattern').
    A glob call evaluates to a list of ('glob', pattern); a plain file path in a
    file list stays a str.
    """
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        assert node.id in names, f'setup.py: unknown name {node.id}'
        return names[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _eval(node.left, names) + _eval(node.right, names)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, names) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == 'glob':
        assert len(node.args) == 1 and not node.keywords, 'glob() takes one pattern here'
        pattern = _eval(node.args[0], names)
        assert not os.path.isabs(pattern), f'glob pattern must be relative: {pattern}'
        return [('glob', pattern)]
    raise AssertionError(f'setup.py: cannot evaluate {ast.dump(node)}')


def data_files():
    """[(destination, [pattern or path, ...]), ...] from setup.py's data_files."""
    _, names = _setup_call()
    result = []
    for entry in _eval(_kwarg('data_files'), names):
        dest, files = entry
        patterns = [f[1] if isinstance(f, tuple) else f for f in files]
        result.append((dest, patterns))
    return result


def console_scripts():
    node = _kwarg('entry_points')
    entry_points = ast.literal_eval(node)
    out = {}
    for spec in entry_points['console_scripts']:
        name, target = (s.strip() for s in spec.split('=', 1))
        out[name] = target
    return out


# ---------------------------------------------------------------- package.xml

@pytest.fixture(scope='module')
def package_xml():
    return ET.parse(ROOT / 'package.xml').getroot()


def test_package_xml_format3_metadata(package_xml):
    assert package_xml.tag == 'package'
    assert package_xml.get('format') == '3'
    assert package_xml.findtext('name') == PKG
    assert package_xml.findtext('version') == '0.1.0'
    assert (package_xml.findtext('description') or '').strip()
    assert package_xml.findtext('license') == 'BSD-3-Clause'
    maintainer = package_xml.find('maintainer')
    assert maintainer is not None
    assert maintainer.text.strip() == 'mbfg_ros developers'
    assert maintainer.get('email') == 'dev@example.com'


def test_package_xml_dependencies(package_xml):
    exec_deps = {e.text.strip() for e in package_xml.findall('exec_depend')}
    test_deps = {e.text.strip() for e in package_xml.findall('test_depend')}
    assert EXEC_DEPENDS <= exec_deps, f'missing exec_depend: {EXEC_DEPENDS - exec_deps}'
    assert TEST_DEPENDS <= test_deps, f'missing test_depend: {TEST_DEPENDS - test_deps}'


def test_package_xml_build_type(package_xml):
    assert package_xml.findtext('export/build_type') == 'ament_python'


def test_setup_py_matches_package_xml(package_xml):
    _, names = _setup_call()
    assert _eval(_kwarg('name'), names) == package_xml.findtext('name')
    assert _eval(_kwarg('version'), names) == package_xml.findtext('version')


# ---------------------------------------------------------------- setup.py / setup.cfg

def test_console_scripts_declared():
    assert console_scripts() == CONSOLE_SCRIPTS


def _defines(module_file, attr):
    tree = ast.parse(module_file.read_text(), filename=str(module_file))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name == attr:
            return True
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == attr for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split('.')[0]) == attr for a in node.names):
            return True
    return False


@pytest.mark.parametrize('script', sorted(CONSOLE_SCRIPTS))
def test_console_script_module_exists(script):
    """Every console script points at an installable module that defines its function."""
    target = console_scripts().get(script, CONSOLE_SCRIPTS[script])
    module, _, attr = target.partition(':')
    parts = module.split('.')
    assert parts[0] == PKG, f'{script} -> {module}: not inside {PKG}'
    # find_packages() only installs directories that have an __init__.py.
    for i in range(1, len(parts)):
        init = ROOT.joinpath(*parts[:i], '__init__.py')
        assert init.is_file(), f'{script} -> {module}: {init.relative_to(ROOT)} is missing'
    module_file = ROOT.joinpath(*parts[:-1], parts[-1] + '.py')
    if not module_file.is_file():
        module_file = ROOT.joinpath(*parts, '__init__.py')
    assert module_file.is_file(), \
        f'{script} -> {module}: {"/".join(parts)}.py does not exist'
    assert attr, f'{script} -> {target}: no function named'
    assert _defines(module_file, attr), \
        f'{script} -> {target}: {module_file.relative_to(ROOT)} defines no {attr}'


def test_setup_cfg_installs_scripts_under_lib():
    cfg = configparser.RawConfigParser()
    assert cfg.read(ROOT / 'setup.cfg'), 'setup.cfg missing'
    assert cfg.get('develop', 'script_dir') == f'$base/lib/{PKG}'
    assert cfg.get('install', 'install_scripts') == f'$base/lib/{PKG}'


def test_ament_resource_marker():
    marker = ROOT / 'resource' / PKG
    assert marker.is_file()
    dests = dict(data_files())
    assert dests.get('share/ament_index/resource_index/packages') == [f'resource/{PKG}']
    assert 'package.xml' in dests.get(f'share/{PKG}', [])


def test_data_files_sources_exist():
    for dest, patterns in data_files():
        for pattern in patterns:
            if not glob.has_magic(pattern):
                assert (ROOT / pattern).is_file(), f'data_files {dest}: {pattern} missing'


@pytest.mark.parametrize('subdir', ['launch', 'config'])
def test_every_launch_and_config_file_is_installed(subdir):
    installed = {}
    for dest, patterns in data_files():
        for pattern in patterns:
            for path in glob.glob(str(ROOT / pattern)):
                installed[Path(path).resolve()] = dest
    missing = []
    for path in sorted((ROOT / subdir).rglob('*')):
        if not path.is_file() or path.name == '.gitkeep' or '__pycache__' in path.parts:
            continue
        dest = installed.get(path.resolve())
        if dest != f'share/{PKG}/{path.parent.relative_to(ROOT).as_posix()}':
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, (
        f'not installed to share/{PKG}/{subdir} (same subfolder) by setup.py data_files: '
        f'{missing}')
