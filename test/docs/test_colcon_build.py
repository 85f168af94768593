"""Build the package with colcon (ament_python) in a scratch workspace and check the install.

This is what `colcon build` does in a ROS 2 workspace: the files `ros2 run` and
`ros2 launch` look for must land in share/ and lib/<package>/.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
from glob import glob
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = 'mbfg_ros'
SOURCES = ['package.xml', 'setup.py', 'setup.cfg', 'resource', PKG, 'launch', 'config']
CONSOLE_SCRIPTS = [
    'mbfg-simulate', 'mbfg-inverse', 'mbfg-statics', 'mbfg-replay',
    'estimator_node', 'simulator_node',
]
PROBES = ['launch/zz_probe.launch.py', 'config/zz_probe.yaml']


def _colcon():
    if importlib.util.find_spec('colcon_core') is None \
            or importlib.util.find_spec('colcon_ros') is None:
        return None
    exe = Path(sys.executable).parent / 'colcon'
    if exe.exists():
        return str(exe)
    return shutil.which('colcon')


@pytest.fixture(scope='module')
def colcon_install(tmp_path_factory):
    colcon = _colcon()
    # requirements.txt installs colcon-common-extensions: its absence is a broken install.
    assert colcon is not None, 'colcon not found: `make venv` installs colcon-common-extensions'
    ws = tmp_path_factory.mktemp('colcon_ws')
    src = ws / 'src' / PKG
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns('__pycache__', '*.pyc', '*.egg-info')
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        elif path.exists():
            shutil.copy2(path, src / name)
    # Probe files, so the data_files globs are exercised even while launch/ and
    # config/ are still empty in the repo.
    for rel in PROBES:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text('# probe\n')
    env = dict(os.environ, COLCON_HOME=str(ws / '.colcon'), PYTHONDONTWRITEBYTECODE='1')
    env.pop('COLCON_DEFAULTS_FILE', None)
    proc = subprocess.run(
        [colcon, '--log-base', str(ws / 'log'), 'build', '--merge-install',
         '--base-paths', 'src', '--build-base', 'build', '--install-base', 'install',
         '--event-handlers', 'console_cohesion+', 'summary+'],
        cwd=ws, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, \
        f'colcon build failed ({proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}'
    return ws / 'install'


def test_ament_index_marker(colcon_install):
    assert (colcon_install / 'share/ament_index/resource_index/packages' / PKG).is_file()


def test_package_xml_installed(colcon_install):
    assert (colcon_install / 'share' / PKG / 'package.xml').is_file()


def test_launch_and_config_installed(colcon_install):
    expected = [
        ('launch', p) for p in glob(str(ROOT / 'launch' / '*.launch.py'))
    ] + [
        ('config', p) for p in glob(str(ROOT / 'config' / '*.yaml'))
    ] + [tuple(rel.split('/')) for rel in PROBES]
    missing = [f'{sub}/{Path(p).name}' for sub, p in expected
               if not (colcon_install / 'share' / PKG / sub / Path(p).name).is_file()]
    assert not missing, f'not installed under share/{PKG}: {missing}'


@pytest.mark.parametrize('script', CONSOLE_SCRIPTS)
def test_console_script_installed_for_ros2_run(colcon_install, script):
    exe = colcon_install / 'lib' / PKG / script
    assert exe.is_file(), f'lib/{PKG}/{script} missing (ros2 run {PKG} {script} needs it)'
    assert os.access(exe, os.X_OK)


def test_python_package_installed(colcon_install):
    found = list(colcon_install.glob(f'lib/python3*/site-packages/{PKG}/__init__.py'))
    assert found, f'{PKG}/__init__.py not installed into lib/python3*/site-packages'


def test_ament_index_finds_share_directory(colcon_install):
    """What `ros2 launch mbfg_ros ...` does to find the launch files."""
    assert importlib.util.find_spec('ament_index_python') is not None, \
        'ament_index_python not importable: `make venv` installs ros-ament-index-python'
    env = dict(os.environ, AMENT_PREFIX_PATH=str(colcon_install))
    code = ('from ament_index_python.packages import get_package_share_directory as g; '
            f'print(g({PKG!r}))')
    proc = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == colcon_install / 'share' / PKG
