"""The estimator node on a URDF robot over real DDS (issue 13 item 3): the URDF as the
``robot_description`` parameter (from a parameters file, as a launch file gives it), the
overlay with the wrist IMU, ``~/joint_states`` with the URDF joint names, the live
estimate equal to the bag replay of the same messages, and bad URDF/overlay input."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_ros_nodes import Peer, start, stop
from test_ros_support import REPO, ros_env, unique_domain
from test_spatial_estimator import _readings, _simulate_ur5

from mbfg_ros.bag import BagWriter, typestore
from mbfg_ros.cli.replay import replay
from mbfg_ros.ros import conversions as cv
from mbfg_ros.spatial.system import build_spatial_system

pytestmark = pytest.mark.ros

NS = 1_000_000_000
T0 = 1.0
URDF = REPO / 'config' / 'urdf'


def _params_file(tmp_path: Path, **extra) -> Path:
    """A ROS parameters file holding the URDF text, as robot_state_publisher's launch
    files pass robot_description."""
    import yaml
    values = {'robot_description': (URDF / 'ur5.urdf').read_text(),
              'overlay': str(URDF / 'ur5_sensors.yaml'), **extra}
    path = tmp_path / 'ur5_params.yaml'
    path.write_text(yaml.safe_dump({'estimator_node': {'ros__parameters': values}}))
    return path


def test_urdf_node_estimates_with_urdf_names_and_equals_the_replay(tmp_path):
    system = build_spatial_system(URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml')
    traj, taus = _simulate_ur5(system, duration=0.6)
    recs = _readings(system, traj, taus, np.random.default_rng(3))
    stamp = lambda r: int(round((r.t + T0) * NS))          # noqa: E731
    domain = unique_domain(40)
    params = {'use_sim_time': True, 'frequency': 500.0, 'lag_duration': 0.05}
    proc = start('estimator_node', {}, domain, tmp_path,
                 extra=('--params-file', str(_params_file(tmp_path, **params))))
    peer = Peer(domain)
    try:
        clock = peer.publisher('/clock', 'Clock')
        pub_js = peer.publisher('/joint_states', 'JointState')
        pub_imu = peer.publisher('/imu/wrist_imu', 'Imu')
        peer.listen('/estimator_node/joint_states', 'JointState')
        peer.listen('/estimator_node/torque_commands', 'Float64MultiArray')
        peer.listen('/diagnostics', 'DiagnosticArray')
        peer.spin_until(lambda: min(p.get_subscription_count() for p in (clock, pub_js, pub_imu))
                        > 0 and peer.node.count_publishers('/estimator_node/joint_states') > 0,
                        60, 'discovery of estimator_node')
        js = peer.inbox['/estimator_node/joint_states']

        def tick_to(t_ns, inbox, timeout=20.0):
            def send():
                clock.publish(cv.clock_msg(peer.kit, t_ns))
            send()
            peer.spin_until(lambda: inbox and cv.stamp_ns(inbox[-1].header.stamp) >= t_ns,
                            timeout, f'the tick at {t_ns / NS:.3f} s', retry=send)

        # the node runs before the data (its diagnostics carry the sim clock); then lockstep:
        # messages ahead of /clock by `lead`, the clock moves one tick at a time
        tick_to(stamp(recs[0]) - 50_000_000, peer.inbox['/diagnostics'], timeout=40.0)
        i, t_ns, period, lead = 0, stamp(recs[0]), 2_000_000, 10_000_000
        while t_ns <= stamp(recs[-1]):
            while i < len(recs) and stamp(recs[i]) <= t_ns + lead:
                r = recs[i]
                if hasattr(r, 'sensor'):
                    pub_imu.publish(cv.imu_msg(peer.kit, stamp(r), 'wrist_imu', r.gyro, r.accel,
                                               r.orientation))
                else:
                    pub_js.publish(cv.joint_state_msg(peer.kit, stamp(r), r.names, r.position,
                                                      r.velocity, r.effort))
                i += 1
            tick_to(t_ns, js)
            t_ns += period
    finally:
        peer.close()
        assert stop(proc) == 0, (tmp_path / 'estimator_node.log').read_text()
    log = (tmp_path / 'estimator_node.log').read_text()
    assert '<robot_description>' in log and '6 joints, 1 IMUs' in log, log
    assert list(js[-1].name) == list(system.names)          # the URDF joint names
    live = {cv.stamp_ns(m.header.stamp): (np.array(m.position), np.array(m.velocity),
                                          np.array(m.effort)) for m in js}
    ts = sorted(live)[20:]
    k = np.array([int(round((t / NS - T0) / (traj.t[1] - traj.t[0]))) for t in ts])
    q_err = np.array([live[t][0] for t in ts]) - traj.q[k]
    assert np.sqrt(np.mean(q_err ** 2)) < 0.7e-3            # raw encoder: 1e-3 rad
    tau_err = np.array([live[t][2] for t in ts]) - taus[k]
    assert np.sqrt(np.mean(tau_err ** 2)) < 0.05 * np.sqrt(np.mean(taus ** 2))
    cmds = peer.inbox['/estimator_node/torque_commands']
    assert cmds and len(cmds[-1].data) == 6 and np.all(np.isfinite(cmds[-1].data))

    # the replay of the same messages gives the same estimates at the same ticks
    store = typestore()
    kit = cv.rosbags_kit(store)
    bag = tmp_path / 'same_input'
    with BagWriter(bag, 'mcap', store) as w:
        for r in recs:
            if hasattr(r, 'sensor'):
                w.write('/imu/wrist_imu', cv.TYPES['Imu'], stamp(r),
                        cv.imu_msg(kit, stamp(r), 'wrist_imu', r.gyro, r.accel, r.orientation))
            else:
                w.write('/joint_states', cv.TYPES['JointState'], stamp(r),
                        cv.joint_state_msg(kit, stamp(r), r.names, r.position, r.velocity,
                                           r.effort))
    res = replay(bag, URDF / 'ur5.urdf', {'overlay': str(URDF / 'ur5_sensors.yaml'),
                                          'frequency': 500.0, 'lag_duration': 0.05},
                 show_progress=False)
    replayed = {o.t_ns: o.estimate.joint_position for o in res.outputs if o.estimate is not None}
    common = sorted(set(live) & set(replayed))
    assert len(common) >= 0.9 * len(live), (len(live), len(replayed))
    for t in common:
        np.testing.assert_array_equal(live[t][0], replayed[t], err_msg=f'at {t / NS:.3f} s')


@pytest.mark.parametrize('case,expect', [
    ('bad_overlay_key', "unknown key 'imu'"),
    ('bad_imu_link', "imus[0].link"),
    ('not_xml', '<robot_description>'),
    ('floating', "joint 'base_free'"),
])
def test_bad_urdf_or_overlay_exits_2_with_one_error_line(case, expect, tmp_path):
    import yaml
    urdf = (URDF / 'ur5.urdf').read_text()
    overlay = {'imus': [{'name': 'w', 'link': 'tool0'}]}
    if case == 'bad_overlay_key':
        overlay = {'imu': [{'name': 'w'}]}
    elif case == 'bad_imu_link':
        overlay = {'imus': [{'name': 'w', 'link': 'no_such_link'}]}
    elif case == 'not_xml':
        urdf = '<robot name="x"><link name="a"></robot'
    elif case == 'floating':
        urdf = urdf.replace('<joint name="shoulder_pan_joint" type="revolute">',
                            '<joint name="base_free" type="floating">')
    ov = tmp_path / 'overlay.yaml'
    ov.write_text(yaml.safe_dump(overlay))
    pf = tmp_path / 'p.yaml'
    pf.write_text(yaml.safe_dump({'estimator_node': {'ros__parameters': {
        'robot_description': urdf, 'overlay': str(ov)}}}))
    r = subprocess.run([sys.executable, '-m', 'mbfg_ros.ros.estimator_node', '--ros-args',
                        '--params-file', str(pf)], env=ros_env(unique_domain(41)),
                       capture_output=True, text=True, timeout=60)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(lines) == 1 and lines[0].startswith('estimator_node: error: '), lines
    assert expect in lines[0], lines[0]


def test_urdf_simulator_node_records_a_bag_the_estimator_replays(tmp_path):
    """simulator_node on the UR5 (URDF file + overlay) as fast as possible, recording; the
    recorded sensors replayed through the estimator beat the raw encoders against the
    recorded ground truth."""
    bag = tmp_path / 'ur5_sim'
    params = {'mechanism': str(URDF / 'ur5.urdf'), 'overlay': str(URDF / 'ur5_sensors.yaml'),
              'realtime': 'false', 'duration': 1.0, 'record': 'true', 'output': str(bag),
              'publish_rate': 500.0, 'encoder_sigma': 0.001, 'gyro_sigma': 0.005,
              'accel_sigma': 0.05, 'seed': 3}
    proc = start('simulator_node', params, unique_domain(42), tmp_path)
    assert proc.wait(120) == 0, (tmp_path / 'simulator_node.log').read_text()
    res = replay(bag, URDF / 'ur5.urdf', {'overlay': str(URDF / 'ur5_sensors.yaml'),
                                          'frequency': 500.0, 'lag_duration': 0.05},
                 show_progress=False)
    truth = {int(round(t * NS)): q for t, q, _ in res.truth}
    est = {o.t_ns: o.estimate.joint_position for o in res.outputs if o.estimate is not None}
    common = sorted(set(truth) & set(est))[25:]
    assert len(common) > 400
    err = np.array([est[t] - truth[t] for t in common])
    assert np.sqrt(np.mean(err ** 2)) < 0.5e-3          # the encoders: 1e-3 rad
    from mbfg_ros.bag import read_messages
    msgs = list(read_messages(bag, {'/joint_states': cv.TYPES['JointState']}))
    assert list(msgs[0].msg.name) == list(build_spatial_system(URDF / 'ur5.urdf').names)
