"""The closed loop over DDS (issue 25 item 5): simulator node -> estimator node -> torque
commands -> simulator, following a reference, with one core kept busy by another process.

The simulator holds the last command it got, as an effort ``forward_command_controller``
does. In real time, gains kp 25, kd 10 (ω = 5 rad/s): offline, the four-bar loop holds with
80 ms of command delay at kp 25, kd 10, where kp 100, kd 20 does not; the node's tick loop
(issue 24) keeps the live delay to a few ms, so the loop holds with margin (kp 100, kd 20
passed too, at a load average of 2). Before the tick loop this test had to run the
simulation at a quarter of real time with kp 9, kd 6. Checked: every
command within the joints' effort limits, the robot follows the
reference without diverging, and when the sensors stop the commands stop within
``command_timeout`` (before: ~0.5 s and 82-175 more commands, growing)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from support.ros_nodes import Peer, _msg, start, stop
from support.ros_data import REPO, fourbar_path, unique_domain

from mbfg_ros.ros import conversions as cv

pytestmark = pytest.mark.ros

URDF = REPO / 'config' / 'urdf'
COMMAND_TIMEOUT = 0.1
REFERENCE_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)


def _ur5_efforts() -> dict[str, float]:
    root = ET.parse(URDF / 'ur5.urdf').getroot()
    return {j.get('name'): float(j.find('limit').get('effort'))
            for j in root.iter('joint') if j.find('limit') is not None}


CASES = {
    'ur5': ({'mechanism': URDF / 'ur5.urdf', 'overlay': URDF / 'ur5_sensors.yaml'},
            ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
             'wrist_2_joint', 'wrist_3_joint'], 0.3, {'unknown_effort_sigma': 20.0}),
    'fourbar': ({'mechanism': fourbar_path()}, ['crank'], 0.5, {}),
}


@pytest.fixture
def busy_core():
    """Another process spinning on one of the machine's cores for the test's duration."""
    proc = subprocess.Popen([sys.executable, '-c', 'while True: pass'])
    yield proc
    proc.kill()
    proc.wait(5)


@pytest.mark.parametrize('case', list(CASES))
def test_closed_loop_follows_the_reference_within_limits_and_stops_with_the_data(
        case, tmp_path, busy_core):
    mech, joints, step, extra = CASES[case]
    domain = unique_domain(60 + list(CASES).index(case))
    sim = start('simulator_node', {**mech, 'realtime': 'true', 'dt': 0.004, 'rate_scale': 1.0,
                                   'publish_rate': 250.0, 'encoder_sigma': 1e-4,
                                   'markers_rate': 0.0}, domain, tmp_path)
    est = start('estimator_node', {**mech, 'frequency': 250.0, 'lag_duration': 0.08,
                                   'kp': 25.0, 'kd': 10.0, 'command_timeout': COMMAND_TIMEOUT,
                                   'command_topic': '/simulator_node/torque_commands',
                                   'markers_rate': 0.0, **extra}, domain, tmp_path)
    peer = Peer(domain)
    arrivals: dict[str, list] = {'cmd': [], 'js': []}
    node = peer.node
    for key, topic, short in (('cmd', '/simulator_node/torque_commands', 'Float64MultiArray'),
                              ('js', '/joint_states', 'JointState')):
        node.create_subscription(_msg(short), topic,
                                 lambda m, k=key: arrivals[k].append((time.monotonic(), m)),
                                 QoSProfile(depth=1000))
    ref_pub = node.create_publisher(JointTrajectory, '/estimator_node/reference',
                                    REFERENCE_QOS)
    try:
        peer.spin_until(lambda: len(arrivals['cmd']) > 50 and len(arrivals['js']) > 50, 90,
                        'commands and readings in the loop')
        # the reference: from the pose the estimator holds, each actuated joint `step` on
        # over 1.5 s (a smooth cosine ramp), then held
        js = arrivals['js'][-1][1]
        names = list(js.name)
        s0 = np.array([js.position[names.index(j)] for j in joints])
        # on the data's clock: a simulator slower than real time stamps behind the wall
        t0 = cv.stamp_ns(js.header.stamp) + 200_000_000
        traj = JointTrajectory(joint_names=joints)
        traj.header.stamp.sec, traj.header.stamp.nanosec = divmod(t0, 1_000_000_000)
        ramp = np.linspace(0.0, 1.5, 31)
        for tk in ramp:
            w = 0.5 - 0.5 * np.cos(np.pi * tk / 1.5)
            wd = 0.5 * np.pi / 1.5 * np.sin(np.pi * tk / 1.5)
            p = JointTrajectoryPoint(positions=list(s0 + step * w),
                                             velocities=list(np.full(len(joints), step * wd)))
            p.time_from_start.sec, p.time_from_start.nanosec = divmod(
                int(round(tk * 1e9)), 1_000_000_000)
            traj.points.append(p)
        ref_pub.publish(traj)
        t_end = time.monotonic() + 4.0          # 4 s of simulated time
        peer.spin_until(lambda: time.monotonic() > t_end, 30, 'the motion')
        assert sim.poll() is None and est.poll() is None
        # commands within the limits, and the loop converged on the reference's end
        cmds = np.array([m.data for _, m in arrivals['cmd']])
        assert cmds.shape[1] == len(joints) and np.all(np.isfinite(cmds))
        limits = np.array([_ur5_efforts()[j] for j in joints]) if case == 'ur5' \
            else np.full(len(joints), 1.0e4)
        assert np.all(np.abs(cmds) <= limits + 1e-9), np.abs(cmds).max(axis=0)
        js = arrivals['js'][-1][1]
        s = np.array([js.position[list(js.name).index(j)] for j in joints])
        err = np.angle(np.exp(1j * (s - (s0 + step))))
        hist = [np.round([m.position[list(m.name).index(j)] for j in joints], 3)
                for _, m in arrivals['js'][-500::50]]
        # no divergence: near the reference's end (passed within 0.05 rad at load 6-12; with
        # the load of parallel test runs commands come late or are withheld for a while,
        # and the arm drifts by up to 0.15 rad before they resume)
        assert np.all(np.abs(err) < 0.25), (s, s0 + step, hist)
        v = np.array([js.velocity[list(js.name).index(j)] for j in joints]) \
            if len(js.velocity) else np.zeros(1)
        assert np.all(np.abs(v) < 1.0), v
        # the sensors stop: the commands stop within command_timeout (the peer keeps
        # spinning meanwhile, so arrival times are not those of a backlog it works off)
        peer.spin_until(lambda: True, 1, 'nothing')
        sim.send_signal(signal.SIGINT)
        quiet = time.monotonic() + 2.0
        peer.spin_until(lambda: time.monotonic() > quiet, 5, 'silence')
        assert stop(sim) == 0, (tmp_path / 'simulator_node.log').read_text()
        last_data = arrivals['js'][-1][0]
        after = [a for a, _ in arrivals['cmd'] if a > last_data]
        # delivery over DDS with a core busy adds its own delay: 0.1 s of slack
        assert not after or after[-1] - last_data < COMMAND_TIMEOUT + 0.1, \
            (len(after), after[-1] - last_data)
        assert len(after) <= 250 * (COMMAND_TIMEOUT + 0.1), len(after)
        assert est.poll() is None
    finally:
        peer.close()
        stop(sim)
        rc = stop(est)
    assert rc == 0, (tmp_path / 'estimator_node.log').read_text()
