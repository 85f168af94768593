"""``make test`` progress a person can follow (issue 30 item 7)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from support.progress import folder_of, group_summary

ROOT = Path(__file__).resolve().parents[2]


def _rep(nodeid, when='call', duration=0.5):
    return SimpleNamespace(nodeid=nodeid, when=when, duration=duration)


def test_folder_of_names_the_group():
    assert folder_of('test/core/test_bag_io.py::test_x') == 'core'
    assert folder_of('test/ros/test_ros_nodes.py::test_y[a/b]') == 'ros'
    assert folder_of('test/test_top.py::test_z') == '.'


def test_group_summary_counts_each_folder_and_sums_its_time():
    stats = {
        'passed': [_rep('test/core/a.py::t1'), _rep('test/core/a.py::t2'),
                   _rep('test/planar/b.py::t3', duration=2.0)],
        'failed': [_rep('test/planar/b.py::t4', duration=1.0)],
        '': [_rep('test/core/a.py::t1', when='setup', duration=0.3)],
        'warnings': [SimpleNamespace(message='w', nodeid='test/core/a.py::t1')],
    }
    lines = group_summary(stats)
    assert len(lines) == 2
    core, planar = lines
    assert core.startswith('core') and '2 passed' in core and 'failed' not in core
    assert float(re.search(r'([\d.]+) s$', core).group(1)) == 1.3   # 0.5 + 0.5 + 0.3 setup
    assert planar.startswith('planar') and '1 passed, 1 failed' in planar
    assert float(re.search(r'([\d.]+) s$', planar).group(1)) == 3.0


def test_make_test_prints_file_names_not_only_dots():
    """The Makefile's suites run pytest without -q (each file named); .ci/run still runs them."""
    make = (ROOT / 'Makefile').read_text()
    runs = re.findall(r'^\t\S+ -m pytest (.*)$', make, re.M)
    assert len(runs) == 2 and all('-q' not in r.split() for r in runs), runs
    assert 'make test' in (ROOT / '.ci' / 'run').read_text()


def test_a_run_prints_per_file_lines_a_folder_summary_and_the_closing_count():
    out = subprocess.run(
        [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider',
         'test/docs/test_test_progress.py::test_folder_of_names_the_group',
         'test/core/test_trajectory_files.py'],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:]
    text = out.stdout
    assert re.search(r'^test/core/test_trajectory_files\.py \.+ +\[ *\d+%\]$', text, re.M), text
    assert re.search(r'^core +\d+ passed', text, re.M), text
    assert re.search(r'^docs +1 passed', text, re.M), text
    assert re.search(r'=+ \d+ passed in [\d.]+s', text.splitlines()[-1]), text
