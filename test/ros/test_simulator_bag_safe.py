"""Issue 26, "No data lost", for ``simulator_node``'s recorded bag.

While the node records, nothing is under ``output``: the bag grows in a temporary
directory beside it and is renamed into place on a clean stop (SIGTERM here, handled
like SIGINT), whole and readable; a SIGKILL leaves nothing under ``output``; an existing
``output`` is refused with one line and exit 2, untouched.
"""
from __future__ import annotations

import signal
import time

import pytest
from support.ros_data import fourbar_path, unique_domain
from support.ros_nodes import start, stop

from mbfg_ros.core.bag import bag_topics, read_messages
from mbfg_ros.ros import conversions as cv

pytestmark = pytest.mark.ros

PARAMS = {'realtime': 'true', 'record': 'true', 'output': 'rec', 'storage': 'mcap'}


def _recording(tmp_path, proc, timeout: float = 60.0) -> list:
    """Wait until the node has opened its bag's file somewhere in ``tmp_path`` (its writer
    records from then on; the file's first bytes come with the first 1 MiB chunk, ~16 s
    of this simulator's topics, which the claims here do not need); the temporaries."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, (tmp_path / 'simulator_node.log').read_text()
        temps = [p for p in tmp_path.iterdir() if p.name.startswith('.rec.')]
        if any(True for t in temps for _ in t.rglob('*.mcap')):
            return temps
        time.sleep(0.1)
    raise AssertionError('the simulator never started recording')


def test_the_bag_appears_under_output_only_on_a_clean_stop(tmp_path):
    proc = start('simulator_node', {'mechanism': fourbar_path(), **PARAMS},
                 unique_domain(44), tmp_path)
    try:
        temps = _recording(tmp_path, proc)
        assert len(temps) == 1, temps
        assert not (tmp_path / 'rec').exists()          # nothing half-written under output
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    finally:
        stop(proc)
    log = (tmp_path / 'simulator_node.log').read_text()
    assert rc == 0, log
    assert sorted(p.name for p in tmp_path.iterdir()) == ['rec', 'simulator_node.log']
    assert sorted(p.name for p in (tmp_path / 'rec').iterdir()) == ['metadata.yaml', 'rec.mcap']
    assert bag_topics(tmp_path / 'rec')['/joint_states'] == cv.TYPES['JointState']
    truth = list(read_messages(tmp_path / 'rec', {
        '/simulator_node/ground_truth': cv.TYPES['JointState']}))
    assert len(truth) >= 10, log                        # 100 Hz for at least 0.5 s


def test_a_killed_simulator_leaves_nothing_under_output(tmp_path):
    proc = start('simulator_node', {'mechanism': fourbar_path(), **PARAMS},
                 unique_domain(45), tmp_path)
    try:
        _recording(tmp_path, proc)
        proc.kill()
        proc.wait(15)
    finally:
        stop(proc)
    assert not (tmp_path / 'rec').exists()


def test_an_existing_output_is_refused_in_one_line_and_left_alone(tmp_path):
    (tmp_path / 'rec').mkdir()
    (tmp_path / 'rec' / 'notes.txt').write_text('mine')
    proc = start('simulator_node', {'mechanism': fourbar_path(), **PARAMS},
                 unique_domain(46), tmp_path)
    try:
        rc = proc.wait(60)
    finally:
        stop(proc)
    log = (tmp_path / 'simulator_node.log').read_text().strip().splitlines()
    assert rc == 2, log
    assert len(log) == 1 and 'rec: the output bag exists' in log[0], log
    assert [p.name for p in (tmp_path / 'rec').iterdir()] == ['notes.txt']
    assert (tmp_path / 'rec' / 'notes.txt').read_text() == 'mine'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['rec', 'simulator_node.log']
