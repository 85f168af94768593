"""The external-torque topics of the estimator node over real DDS, and the same topics in the
replay's output bag (issue 27 item 4; docs/external-torques.md): a UR5 whose JointStates
carry efforts, ``external_wrench_link`` set."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.ros_data import REPO, unique_domain
from support.ros_nodes import Peer, _publish_in_real_time, start, stop
from support.ur5 import readings as _readings, simulate_ur5 as _simulate_ur5

from mbfg_ros.cli.replay import replay
from mbfg_ros.core.bag import BagWriter, read_messages, typestore
from mbfg_ros.ros import conversions as cv
from mbfg_ros.spatial.system import build_spatial_system

pytestmark = pytest.mark.ros

URDF = REPO / 'config' / 'urdf' / 'ur5.urdf'
NAMES = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
         'wrist_2_joint', 'wrist_3_joint']
TOPICS = {'/estimator_node/external_torques': 'JointState',
          '/estimator_node/external_torques_sigma': 'JointState',
          '/estimator_node/contact': 'Bool',
          '/estimator_node/external_wrench': 'WrenchStamped'}
PARAMS = {'frequency': 200.0, 'lag_duration': 0.05, 'disturbance_process': True,
          'external_wrench_link': 'forearm_link'}


def _joint_records(duration: float):
    system = build_spatial_system(URDF, URDF.parent / 'ur5_sensors.yaml')   # readings' IMU
    traj, taus = _simulate_ur5(system, duration=duration, dt=5e-3)
    return [r for r in _readings(system, traj, taus, np.random.default_rng(5))
            if not hasattr(r, 'sensor')]


def _check(ext, sigma, contact, wrench, frame: str) -> None:
    assert ext and sigma and contact and wrench
    for m in (ext[-1], sigma[-1]):
        assert list(m.name) == NAMES                       # the URDF joints, actuator order
        assert len(m.effort) == 6 and np.all(np.isfinite(m.effort))
        assert len(m.position) == 0 and len(m.velocity) == 0
    assert np.all(np.array(sigma[-1].effort) > 0)
    assert wrench[-1].header.frame_id == frame
    f = wrench[-1].wrench.force
    assert np.all(np.isfinite([f.x, f.y, f.z]))
    assert isinstance(contact[-1].data, bool)


def test_node_publishes_external_torques_sigma_contact_and_wrench(tmp_path):
    recs = _joint_records(1.0)
    domain = unique_domain(42)
    proc = start('estimator_node', {'mechanism': str(URDF), **PARAMS}, domain, tmp_path)
    peer = Peer(domain)
    try:
        pub = peer.publisher('/joint_states', 'JointState')
        for topic, short in TOPICS.items():
            peer.listen(topic, short)
        peer.spin_until(lambda: pub.get_subscription_count() > 0
                        and peer.node.count_publishers('/estimator_node/external_torques') > 0,
                        60, 'discovery of estimator_node')
        t0 = peer.node.get_clock().now().nanoseconds + 200_000_000
        msgs = [(t0 + int(r.t * 1e9), cv.joint_state_msg(peer.kit, t0 + int(r.t * 1e9),
                                                         r.names, r.position, r.velocity,
                                                         r.effort), 'js') for r in recs]
        _publish_in_real_time(peer, {'js': pub}, msgs)
        box = peer.inbox
        peer.spin_until(lambda: len(box['/estimator_node/external_wrench']) > 20, 30,
                        'external torques')
    finally:
        peer.close()
        assert stop(proc) == 0, (tmp_path / 'estimator_node.log').read_text()
    _check(*(box[t] for t in TOPICS), 'forearm_link')


def test_replay_writes_the_external_topics(tmp_path: Path):
    recs = _joint_records(0.6)
    store = typestore()
    kit = cv.rosbags_kit(store)
    bag = tmp_path / 'in'
    ns = lambda r: int(round((r.t + 1.0) * 1e9))           # noqa: E731
    with BagWriter(bag, 'mcap', store) as w:
        for r in recs:
            w.write('/joint_states', cv.TYPES['JointState'], ns(r),
                    cv.joint_state_msg(kit, ns(r), r.names, r.position, r.velocity, r.effort))
    out = tmp_path / 'out'
    replay(bag, URDF, dict(PARAMS), output=out, show_progress=False)
    got: dict[str, list] = {t: [] for t in TOPICS}
    for m in read_messages(out, {t: cv.TYPES[s] for t, s in TOPICS.items()}):
        got[m.topic].append(m.msg)
    _check(*(got[t] for t in TOPICS), 'forearm_link')
