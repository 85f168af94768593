"""simulator_node keeps the joints within their position limits (issue 30 item 3): a planar
four-bar (stiff stop forces) and a URDF bar (inelastic end stops) fall onto their limits;
the recorded /joint_states stay within them and the log says what the stops did;
``joint_limits:=false`` lets the four-bar's crank fall through. Real nodes over DDS,
real rosbag2 files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.ros_data import REPO, unique_domain
from support.ros_nodes import start, stop

from mbfg_ros.core.bag import read_messages
from mbfg_ros.ros import conversions as cv

pytestmark = pytest.mark.ros

CRANK = '  - {name: crank, type: revolute, bodies: [ground, 0]}\n'
LIMITED = ('  - {name: crank, type: revolute, bodies: [ground, 0], '
           'limits: {position: [-0.5, 1.0], velocity: 2.0}}\n')

ARM = (Path(__file__).resolve().parents[1] / 'data' / 'urdf' / 'limited_bar.urdf').read_text()
"""A bar released horizontally turns about +y toward q = π/2 under gravity; its limit at
1.0 rad comes first (at ~0.3 s)."""


def _record(tmp_path, mechanism, domain, **params) -> tuple[dict, str]:
    """Run the simulator offline for 1 s, recording; the joint positions by name (one row
    per /joint_states message) and the node's log."""
    proc = start('simulator_node', {'mechanism': mechanism, 'realtime': 'false',
                                    'duration': 1.0, 'record': 'true', 'output': 'rec',
                                    'markers_rate': 0.0, **params}, domain, tmp_path)
    try:
        rc = proc.wait(120)
    finally:
        stop(proc)
    log = (tmp_path / 'simulator_node.log').read_text()
    assert rc == 0, log
    msgs = [m.msg for m in read_messages(tmp_path / 'rec',
                                         {'/joint_states': cv.TYPES['JointState']})]
    assert len(msgs) == 101, len(msgs)                    # 100 Hz, t = 0 .. 1 s
    names = list(msgs[0].name)
    pos = np.array([m.position for m in msgs])
    return {name: pos[:, k] for k, name in enumerate(names)}, log


@pytest.fixture
def fourbar(tmp_path):
    text = (REPO / 'config' / 'fourbar.yaml').read_text()
    assert CRANK in text
    path = tmp_path / 'fourbar_limited.yaml'
    path.write_text(text.replace(CRANK, LIMITED))
    return path


def test_the_simulated_fourbar_stays_within_its_crank_limit(tmp_path, fourbar):
    joints, log = _record(tmp_path, fourbar, unique_domain(41))
    crank = joints['crank']
    assert crank.min() < -0.45                            # it reached the stop ...
    assert crank.min() > -0.51                            # ... and stayed within ~10 mrad
    assert abs(crank[-1] + 0.5) < 1e-3                     # resting on it
    assert 'crank: stopped at its position limit (range [-0.5, 1])' in log
    assert 'crank: above its velocity limit 2' in log


def test_joint_limits_false_lets_the_crank_fall_through(tmp_path, fourbar):
    joints, log = _record(tmp_path, fourbar, unique_domain(42), joint_limits='false')
    assert joints['crank'].min() < -1.5
    assert 'stopped at its position limit' not in log


def test_the_simulated_urdf_bar_stays_within_its_limit(tmp_path):
    path = tmp_path / 'arm.urdf'
    path.write_text(ARM)
    joints, log = _record(tmp_path, path, unique_domain(43))
    hinge = joints['hinge']
    assert hinge.max() == pytest.approx(1.0, abs=1e-9)    # on the limit, not past it
    assert hinge[-1] == pytest.approx(1.0, abs=1e-9)
    assert 'hinge: stopped at its position limit (range [-0.5, 1])' in log
    assert 'hinge: above its velocity limit 1' in log
