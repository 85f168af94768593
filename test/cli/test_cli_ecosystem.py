"""The CLI papercuts of issue 12, one test each (each one fails on the old behaviour).

Silent re-assembly, exact points, coordinate names in CSV headers, mbfg-replay's
positional mechanism (old form deprecated), --help pages, output paths checked
before the run, and the complete commented example YAML of the docs.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
from support.ros_data import fourbar_path

from mbfg_ros.cli.inverse import main as inverse_main
from mbfg_ros.cli.replay import main as replay_main
from mbfg_ros.cli.simulate import main as simulate_main
from mbfg_ros.cli.statics import main as statics_main
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.planar.mechanism_yaml import load_mechanism

ROOT = Path(__file__).resolve().parents[2]

FOURBAR = """\
name: fb
points:
  - {{x: 0, y: 0, fixed: true, name: A}}
  - {{x: 1, y: 0, name: P1{p1}}}
  - {{x: 1, y: {y2}, name: P2}}
  - {{x: 4, y: 0, fixed: true, name: B}}
planar_bodies:
  - {{points: [0, 1], length: 1.0, mass: 1, I0: 0.3, cog: [0.5, 0]}}
  - {{points: [1, 2], length: {coupler}, mass: 2, I0: 2.6, cog: [1, 0]}}
  - {{points: [2, 3], length: auto, mass: 4, I0: 5, cog: [1, 0]}}
"""


def _yaml(tmp_path, name='m.yaml', p1='', y2='2', coupler='2.0'):
    path = tmp_path / name
    path.write_text(FOURBAR.format(p1=p1, y2=y2, coupler=coupler))
    return path


def test_assembly_far_from_the_yaml_pose_warns_naming_the_points(tmp_path, capsys):
    """A coupler 6x too short still closes: the old tools moved the points silently."""
    bad = _yaml(tmp_path, coupler='2.0/6')
    assert simulate_main([str(bad), '--duration', '0.01', '--quiet']) == 0
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if 'warning' in x]
    assert len(line) == 1, err
    assert line[0].startswith('mbfg-simulate: warning: ') and 'P2 by' in line[0]
    assert 'exact: true' in line[0]
    good = _yaml(tmp_path, 'good.yaml')
    assert simulate_main([str(good), '--duration', '0.01', '--quiet']) == 0
    assert 'warning' not in capsys.readouterr().err


def test_points_marked_exact_stay_where_given(tmp_path):
    """P1 exact, P2 rough (0.1 m off): assembly moves P2 only."""
    rough = load_system(_yaml(tmp_path, y2='2.1'))
    kept = load_system(_yaml(tmp_path, 'exact.yaml', p1=', exact: true', y2='2.1'))
    assert load_mechanism(tmp_path / 'exact.yaml').points[1].exact
    assert np.hypot(rough.q0[0] - 1.0, rough.q0[1]) > 1e-6          # moved without exact
    np.testing.assert_array_equal(kept.q0[:2], [1.0, 0.0])          # bit for bit
    assert np.max(np.abs(kept.constraints.phi(kept.q0))) < 1e-10


def test_csv_headers_name_the_coordinates(tmp_path):
    out = tmp_path / 'run.csv'
    assert simulate_main([str(ROOT / 'config' / 'fourbars1-with-rel-angle.yaml'),
                          '--duration', '0.01', '--quiet', '--output', str(out)]) == 0
    header = out.read_text().splitlines()[0].split(',')
    assert header[:6] == ['t', 'x1.position', 'y1.position', 'x2.position', 'y2.position',
                          'theta0.position']
    assert 'theta0.velocity' in header and 'x1.acceleration' in header
    assert header[-1] == 'phi_norm'
    assert not any(re.fullmatch(r'q\d+', h) for h in header)


def test_replay_takes_the_mechanism_first_like_the_other_tools(small_bag, tmp_path, capsys):
    assert replay_main([str(fourbar_path()), str(small_bag), '--output',
                        str(tmp_path / 'new'), '--quiet']) == 0
    assert 'deprecated' not in capsys.readouterr().err
    assert (tmp_path / 'new.csv').exists()


def test_replays_old_mechanism_option_still_works_with_a_deprecation_note(small_bag, tmp_path,
                                                                        capsys):
    assert replay_main([str(small_bag), '--mechanism', str(fourbar_path()), '--output',
                        str(tmp_path / 'old'), '--quiet']) == 0
    err = capsys.readouterr().err
    assert 'mbfg-replay: note: --mechanism is deprecated' in err
    assert (tmp_path / 'old.csv').exists()


def test_replay_with_only_a_bag_says_what_it_expects(small_bag, capsys):
    with pytest.raises(SystemExit) as exc:
        replay_main([str(small_bag)])
    assert exc.value.code == 2
    assert 'expected MECHANISM BAG' in capsys.readouterr().err


@pytest.mark.parametrize('main, words', [
    (simulate_main, ['dependent: integrate all of q', 'independent: integrate only',
                     'trapezoidal: second order', 'euler: first order',
                     'anchored: a window', 'incremental: ISAM2', 'batch: batch',
                     'x1.velocity']),
    (inverse_main, ['one sample per line', 'time [s]', 'one value per prescribed coordinate',
                    'comments', 'strictly increasing']),
    (replay_main, ['MECHANISM BAG', '/joint_states', 'sensor_msgs/msg/JointState',
                   '/imu/<name>', 'sensor_msgs/msg/Imu', 'angular_velocity.z',
                   "a URDF's movable joints", 'on all three axes', '--overlay YAML',
                   'trajectory_msgs/msg/JointTrajectory', 'ground_truth', 'header.stamp']),
])
def test_help_pages_say_what_each_choice_means(main, words, capsys):
    with pytest.raises(SystemExit):
        main(['--help'])
    text = ' '.join(capsys.readouterr().out.split())
    missing = [w for w in words if w not in text]
    assert not missing, missing


@pytest.mark.parametrize('tool', ['simulate', 'inverse', 'statics', 'replay'])
def test_an_unwritable_output_is_reported_before_the_run(tool, tmp_path, small_bag, capsys):
    nowhere = tmp_path / 'no_such_dir' / 'out.csv'
    traj = ROOT / 'config' / 'fourbars1-with-rel-angle-trajectory.txt'
    args = {
        'simulate': (simulate_main, [str(ROOT / 'config' / 'fourbars1.yaml'), '--duration',
                                     '1000', '--quiet', '--output', str(nowhere)]),
        'inverse': (inverse_main, [str(ROOT / 'config' / 'fourbars1-with-rel-angle.yaml'),
                                   '--trajectory', str(traj), '--output', str(nowhere)]),
        'statics': (statics_main, [str(ROOT / 'config' / 'fourbars1.yaml'), '--output',
                                   str(nowhere)]),
        'replay': (replay_main, [str(fourbar_path()), str(small_bag), '--quiet', '--csv',
                                 str(nowhere)]),
    }[tool]
    start = time.monotonic()
    assert args[0](args[1]) == 2
    assert time.monotonic() - start < 10                 # not after 1000 s of simulation
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'no_such_dir' in err[0] and 'does not exist' in err[0], err


def test_a_directory_given_as_the_output_file_is_reported_first(tmp_path, capsys):
    assert simulate_main([str(ROOT / 'config' / 'fourbars1.yaml'), '--duration', '1000',
                          '--quiet', '--output', str(tmp_path)]) == 2
    assert 'it is a directory' in capsys.readouterr().err


def _yaml_blocks(path: Path) -> list[str]:
    return re.findall(r'```yaml\n(.*?)```', path.read_text(), flags=re.S)


def test_the_complete_example_yaml_loads_and_uses_every_key(tmp_path):
    """The commented example of the docs: it loads, simulates, and no key of the format
    is missing from it (the parser's own key lists are the reference)."""
    import ast
    docs = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]
    blocks = [b for p in docs for b in _yaml_blocks(p) if 'every key' in b]
    assert blocks, 'no complete example YAML in the docs'
    example = tmp_path / 'example.yaml'
    example.write_text(blocks[0])
    sys_ = load_system(example)
    assert sys_.dof >= 1 and not sys_.assembly_moves
    assert simulate_main([str(example), '--duration', '0.01', '--quiet']) == 0
    # every key the parser allows (ctx.mapping(..., {keys}) and the top-level set)
    src = (ROOT / 'mbfg_ros' / 'planar' / 'mechanism_yaml.py').read_text()
    keys = set(ast.literal_eval(re.search(r'_TOP_KEYS = (\{.*?\})', src, re.S).group(1)))
    for found in re.findall(r"ctx\.mapping\([^{)]*(\{[^}]*\})", src):
        keys |= set(ast.literal_eval(found))
    assert {'exact', 'gyro_range', 'through', 'limits', 'visual'} <= keys
    text = blocks[0]
    missing = sorted(k for k in keys if not re.search(rf'(^|[\s{{,]){k}:', text, re.M))
    assert not missing, missing
    for form in ('RelativeAngleAbsoluteDOF', 'RelativeAngle', 'through:', 'revolute',
                 'prismatic', 'coordinate:', 'joint:', 'auto'):
        assert form in text, form
