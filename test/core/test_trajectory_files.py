"""Trajectory files: the seed's file loads as is; bad files name the file and line."""
from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.cli.inverse import main as inverse_main
from mbfg_ros.core.errors import TrajectoryError
from mbfg_ros.core.trajectory import derivatives, load_trajectory

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / 'config'             # upstream files, copied unchanged (config/SOURCE.md)
ADAMS = REPO / 'test' / 'data' / 'InverseDynamics_4bars_MSC.tab'
SEED_TRAJ = DATA / 'fourbars1-with-rel-angle-trajectory.txt'
CONFIG = Path(__file__).resolve().parents[2] / 'config' / 'fourbar_inverse.yaml'


def test_the_seed_trajectory_file_loads_as_is():
    tr = load_trajectory(SEED_TRAJ, columns=1)
    assert tr.z.shape == (2000, 1)
    np.testing.assert_allclose(tr.z[:, 0], 1.2 * (1 - np.cos(2 * tr.t)), atol=1e-7)


def test_comma_separated_files_with_hash_comments_load(tmp_path):
    f = tmp_path / 'a.csv'
    f.write_text('# t, a, b\n0, 1, 2\n0.1, 1.5, 2\n\n0.2,2,3\n')
    tr = load_trajectory(f)
    assert tr.z.tolist() == [[1, 2], [1.5, 2], [2, 3]]


@pytest.mark.parametrize('text, line, what', [
    ('0 1\n0.1 2 3\n0.2 3\n', 2, 'expected 2 columns'),
    ('0 1\n0.1 2\n0.1 3\n', 3, 'does not increase'),
    ('0 1\n0.1 nan\n0.2 3\n', 2, 'NaN'),
    ('% c\n0 1\n0.1 abc\n0.2 3\n', 3, "not a number: 'abc'"),
])
def test_bad_trajectory_files_name_the_file_and_line(tmp_path, text, line, what):
    f = tmp_path / 'bad.txt'
    f.write_text(text)
    with pytest.raises(TrajectoryError, match=rf'bad\.txt:{line}: .*{what}'):
        load_trajectory(f)


def test_column_count_must_match_the_prescribed_coordinates(tmp_path):
    f = tmp_path / 'two.txt'
    f.write_text('0 1 2\n0.1 1 2\n0.2 1 2\n')
    with pytest.raises(TrajectoryError, match=r'two\.txt:1: expected 2 columns \(time \+ 1'):
        load_trajectory(f, columns=1)


def test_cli_reports_bad_input_on_one_line_and_exits_2(tmp_path, capsys):
    f = tmp_path / 'bad.txt'
    f.write_text('0 1\n0.1 2\n0.05 3\n')
    assert inverse_main([str(CONFIG), '--trajectory', str(f), '--output',
                         str(tmp_path / 'o.csv')]) == 2
    err = capsys.readouterr().err.strip()
    assert '\n' not in err and 'bad.txt:3' in err


def test_cli_rejects_a_coordinate_that_does_not_exist(tmp_path, capsys):
    assert inverse_main([str(CONFIG), '--trajectory', str(SEED_TRAJ), '--coordinates',
                         'theta9', '--output', str(tmp_path / 'o.csv')]) == 2
    assert "unknown coordinate 'theta9'" in capsys.readouterr().err


def test_derivatives_of_the_rounded_seed_samples_are_accurate():
    tr = load_trajectory(SEED_TRAJ, columns=1)
    zd, zdd = derivatives(tr.t, tr.z)
    assert np.max(np.abs(zd[:, 0] - 2.4 * np.sin(2 * tr.t))) < 1e-5
    assert np.max(np.abs(zdd[:, 0] - 4.8 * np.cos(2 * tr.t))) < 1e-3
