"""Issue 26: every hostile input of test/data/hostile/ through every entry point of its kind.

The README's promise, checked: a bad input is answered with exit status 2 and exactly
one line on stderr, naming the file and the key (the expectations are in
test/data/hostile/cases.yaml, written by hand from the files, not from the code). The
CLIs run in-process through their ``main(argv)``; the nodes as subprocesses with a short
timeout (ROS tests). Nothing is written where the tools were told to write.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
import yaml
from support.ros_data import REPO, ros_env, unique_domain

from mbfg_ros.cli.identify import main as identify_main
from mbfg_ros.cli.inverse import main as inverse_main
from mbfg_ros.cli.replay import main as replay_main
from mbfg_ros.cli.simulate import main as simulate_main
from mbfg_ros.cli.statics import main as statics_main

HOSTILE = REPO / 'test' / 'data' / 'hostile'
TABLE = yaml.safe_load((HOSTILE / 'cases.yaml').read_text())
CONFIG = REPO / 'config'
URDF = CONFIG / 'urdf' / 'double_pendulum.urdf'
DFKI = CONFIG / 'dfki_double_pendulum.yaml'
TRAJ_MECH = CONFIG / 'fourbars1-with-rel-angle.yaml'
BAG_MECH = CONFIG / 'fourbar.yaml'
GOOD_TRAJ = CONFIG / 'fourbars1-with-rel-angle-trajectory.txt'
GOOD_CSV = REPO / 'test' / 'data' / 'dfki' / 'design_A.0_20220815_sys_id_trajectory_00.csv'


def _cli(main: Callable, args: Callable[[Path, str, Path], list[str]]):
    def run(path: Path, kind: str, out: Path) -> tuple[int, str]:
        return main(args(path, kind, out)), ''
    return run


def _mech(path: Path, kind: str) -> list[str]:
    """The mechanism arguments: the file itself, or the URDF with the file as overlay."""
    return [str(URDF), '--overlay', str(path)] if kind == 'overlay' else [str(path)]


def _node(module: str) -> Callable[[Path, str, Path], tuple[int, str]]:
    def run(path: Path, kind: str, out: Path) -> tuple[int, str]:
        params = ['-p', f'mechanism:={URDF}', '-p', f'overlay:={path}'] if kind == 'overlay' \
            else ['-p', f'mechanism:={path}']
        if module == 'simulator_node':
            params += ['-p', f'output:={out / "sim_bag"}']
        r = subprocess.run([sys.executable, '-m', f'mbfg_ros.ros.{module}', '--ros-args',
                            *params], env=ros_env(unique_domain(26)), capture_output=True,
                           text=True, timeout=60, cwd=out)
        return r.returncode, r.stdout + r.stderr
    return run


RUNNERS: dict[str, Callable[[Path, str, Path], tuple[int, str]]] = {
    'simulate': _cli(simulate_main, lambda p, k, o: _mech(p, k) + [
        '--duration', '0.02', '--dt', '0.01', '--quiet', '--output', str(o / 'sim.csv')]),
    'simulate_numpy': _cli(simulate_main, lambda p, k, o: _mech(p, k) + [
        '--backend', 'numpy', '--duration', '0.02', '--dt', '0.01', '--quiet', '--output',
        str(o / 'sim.csv')]),
    'statics': _cli(statics_main, lambda p, k, o: [str(p), '--output', str(o / 'eq.csv')]),
    'inverse': _cli(inverse_main, lambda p, k, o: (
        [str(TRAJ_MECH), '--trajectory', str(p)] if k == 'trajectory'
        else _mech(p, k) + ['--trajectory', str(GOOD_TRAJ)]) + ['--output', str(o / 'i.csv')]),
    'inverse_bag': _cli(inverse_main, lambda p, k, o: [
        str(URDF), '--bag', str(p), '--output', str(o / 'i.csv')]),
    'inverse_measured': _cli(inverse_main, lambda p, k, o: [
        str(DFKI), '--measured', str(p), '--output', str(o / 'i.csv')]),
    'identify': _cli(identify_main, lambda p, k, o: (
        [str(DFKI), '--measured', str(p)] if k == 'csv'
        else [str(p), '--measured', str(GOOD_CSV)]) + ['--output', str(o / 'id.yaml')]),
    'replay': _cli(replay_main, lambda p, k, o: (
        [str(BAG_MECH), str(p)] if k == 'bag' else _mech(p, k)[:1] + [str(o / 'no_bag')]
        + _mech(p, k)[1:]) + ['--output', str(o / 'est'), '--quiet']),
    'estimator_node': _node('estimator_node'),
    'simulator_node': _node('simulator_node'),
}
NODES = {'estimator_node', 'simulator_node'}


def _params():
    for case in TABLE['cases']:
        for entry in case.get('entry_points', TABLE['entry_points'][case['kind']]):
            marks = [pytest.mark.ros] if entry in NODES else []
            yield pytest.param(case, entry, id=f'{case["file"]}-{entry}', marks=marks)


def test_the_table_names_every_file_of_the_corpus_and_every_runner_exists():
    listed = {c['file'] for c in TABLE['cases']}
    present = {p.name for p in HOSTILE.iterdir()} - {'cases.yaml', 'SOURCE.md'}
    assert listed == present
    entries = {e for es in TABLE['entry_points'].values() for e in es}
    assert entries <= set(RUNNERS)


@pytest.mark.parametrize('case, entry', list(_params()))
def test_every_entry_point_answers_every_hostile_input_with_one_line(case, entry, tmp_path,
                                                                      capsys):
    path = HOSTILE / case['file']
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, text = RUNNERS[entry](path, case['kind'], tmp_path)
    captured = capsys.readouterr()
    lines = [ln for ln in (text + captured.err).splitlines() if ln.strip()]
    assert rc == 2, '\n'.join(lines)
    assert len(lines) == 1, '\n'.join(lines)
    line = lines[0]
    assert 'Traceback' not in line
    assert case['file'] in line, line              # the file at fault is named
    assert case['expect'] in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == before   # nothing written


@pytest.mark.ros
def test_a_node_given_an_invalid_topic_parameter_says_one_line():
    r = subprocess.run([sys.executable, '-m', 'mbfg_ros.ros.estimator_node', '--ros-args', '-p',
                        f'mechanism:={BAG_MECH}', '-p', 'joint_states_topic:=a b'],
                       env=ros_env(unique_domain(27)), capture_output=True, text=True,
                       timeout=60)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith('estimator_node: error: Invalid topic name') and "'a b'" in lines[0]
