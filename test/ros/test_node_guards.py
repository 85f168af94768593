"""What a DDS peer must not be able to do to the estimator node (issue 25 item 7), and the
reference that arrives before the node (item 4), over real DDS.

* ``use_sim_time`` set at runtime froze the estimates while /diagnostics said "ok": now
  refused, counted, the estimates go on;
* a second node with the same fully qualified name is warned about at start-up;
* a reference published (transient local) before the node started is not lost.
"""
from __future__ import annotations

import numpy as np
import pytest
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from support.ros_nodes import (
    SENSORS,
    STATE_AND_DIAGNOSTICS,
    Peer,
    _publish_in_real_time,
    _valid_messages,
    diag_values,
    start,
    stop,
)
from support.ros_data import fourbar_data, fourbar_path, unique_domain

from mbfg_ros.ros import conversions as cv

pytestmark = pytest.mark.ros


def test_use_sim_time_is_refused_a_duplicate_name_warned_and_an_early_reference_kept(
        tmp_path):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    system = fourbar_data()[0]
    domain = unique_domain(62)
    peer = Peer(domain)
    # 1. the reference first, transient local, before any node runs
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
    ref_pub = peer.node.create_publisher(JointTrajectory, '/estimator_node/reference',
                                         qos)
    traj = JointTrajectory(joint_names=['crank'])
    traj.points.append(JointTrajectoryPoint(positions=[0.2]))
    ref_pub.publish(traj)
    params = {'mechanism': fourbar_path(), 'frequency': 200.0, 'lag_duration': 0.1,
              'diagnostics_period': 0.2, 'markers_rate': 0.0}
    logs = [tmp_path / 'a', tmp_path / 'b']
    for d in logs:
        d.mkdir()
    procs = [start('estimator_node', params, domain, d) for d in logs]
    try:
        pubs = peer.connect(SENSORS, STATE_AND_DIAGNOSTICS)
        pub_js, pub_imu = pubs['/joint_states'], pubs['/imu/coupler_imu']
        diags, states = peer.inbox['/diagnostics'], peer.inbox['/estimator_node/state']
        now = lambda: peer.node.get_clock().now().nanoseconds  # noqa: E731

        def feed(seconds):
            msgs, _ = _valid_messages(peer, system, now() + 50_000_000, duration=seconds)
            _publish_in_real_time(peer, {'js': pub_js, 'imu': pub_imu}, msgs)
            return msgs[-1][0]

        feed(0.5)
        values = lambda: [diag_values(m) for m in diags[-6:]]  # noqa: E731
        peer.spin_until(lambda: any(v.get('node.duplicate_names') == '1' for v in values())
                        and any(v.get('input.references') == '1' for v in values()), 30,
                        'both nodes reporting the duplicate name and the early reference')

        # 2. use_sim_time at runtime: refused with the reason; estimates go on, level < ok
        client = peer.node.create_client(SetParameters, '/estimator_node/set_parameters')
        peer.spin_until(client.service_is_ready, 30, 'the set_parameters service')
        req = SetParameters.Request(parameters=[Parameter(
            name='use_sim_time', value=ParameterValue(type=ParameterType.PARAMETER_BOOL,
                                                      bool_value=True))])
        future = client.call_async(req)
        peer.spin_until(future.done, 30, 'the set_parameters response')
        result = future.result().results[0]
        assert not result.successful and 'use_sim_time' in result.reason, result
        n0 = len(states)
        t_last = feed(0.5)
        peer.spin_until(lambda: any(cv.stamp_ns(m.header.stamp) >= t_last - 20_000_000
                                    for m in states[n0:]), 20,
                        'estimates after the refused use_sim_time')
        assert all(p.poll() is None for p in procs)
    finally:
        peer.close()
        rcs = [stop(p) for p in procs]
    texts = [(d / 'estimator_node.log').read_text() for d in logs]
    assert rcs == [0, 0], texts
    for text in texts:
        assert 'other node(s) named /estimator_node are running' in text, text
    assert any("parameter 'use_sim_time' is fixed at start-up" in t for t in texts), texts
    assert np.isfinite(t_last)
