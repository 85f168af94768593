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
from support.ros_nodes import Peer, start, stop
from support.ros_data import REPO, ros_env, unique_domain
from support.ur5 import readings as _readings, simulate_ur5 as _simulate_ur5

from mbfg_ros.core.bag import BagWriter, typestore
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
              'accel_sigma': 0.05, 'seed': 3,
              # the passive fall brings the elbow onto its ±π stop at ~0.99 s: an impact the
              # estimator does not model (stops are simulation only); this test is about the
              # smooth fall
              'joint_limits': 'false'}
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
    from mbfg_ros.core.bag import read_messages
    msgs = list(read_messages(bag, {'/joint_states': cv.TYPES['JointState']}))
    assert list(msgs[0].msg.name) == list(build_spatial_system(URDF / 'ur5.urdf').names)


def _arm_fuzz_pool(kit, now, rng, names, imu_frame='wrist_imu'):
    """Malformed JointState (six URDF joints) and 3-axis Imu messages of every bad-input
    class, quaternion garbage included, plus plausible garbage inside the URDF limits."""
    big, nan, inf = 1e300, float('nan'), float('inf')
    n = len(names)

    def js(stamp, nm=names, pos=(), vel=(), eff=()):
        return cv.joint_state_msg(kit, max(stamp, 0), nm, pos, vel, eff)

    def imu(stamp, g=(0.0, 0.0, 0.0), a=(0.0, 0.0, 9.81), quat=None, cov=0.0, frame=imu_frame):
        m = cv.imu_msg(kit, max(stamp, 0), frame, g, a)
        m.angular_velocity_covariance = np.full(9, cov)
        if quat is not None:
            m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w = quat
            m.orientation_covariance = np.zeros(9)
        return m

    pool = [js(now, pos=[nan] * n), js(now, pos=[inf] * n), js(now, pos=[big] + [0.0] * (n - 1)),
            js(now, pos=[inf] + [0.1] * (n - 1)), js(now, vel=[nan, inf] + [0.0] * (n - 2)),
            js(now, nm=list(names[:-1]) + ['gripper'], pos=[0.1] * n),
            imu(now, g=(inf, 0.1, 0.1), a=(0.0, nan, 9.81)),
            js(now, vel=[big] * n), js(now, eff=[big] * n), js(now, eff=[1e4] * n),
            js(now, pos=[0.1] * (n - 1)), js(now, pos=[0.1] * (n + 1)),
            js(now, nm=[names[0]] * n, pos=[0.1] * n), js(now, nm=['x'] * 2, pos=[1.0, 2.0]),
            js(now, nm=[], pos=[]), js(now - 100 * NS, pos=[0.0] * n),
            js(now + 10 ** 6 * NS, pos=[0.0] * n), js(0, pos=[0.0] * n),
            imu(now, g=(nan,) * 3, a=(nan,) * 3), imu(now, g=(inf, 0, 0)), imu(now, a=(big, 0, 0)),
            imu(now, quat=(0, 0, 0, 0)), imu(now, quat=(nan, 0, 0, 1)),
            imu(now, quat=(big, big, 0, 0)), imu(now, quat=(1e-300, 0, 0, 0)),
            imu(now, cov=nan), imu(now, cov=-1.0), imu(now - 100 * NS), imu(now + 10 ** 6 * NS),
            imu(now, frame='\x00' * 40), imu(0, g=(40.0, 0, 0), a=(300.0, -300.0, 0))]
    for _ in range(30):                   # plausible-looking garbage: passes the limits
        pool.append(js(now, pos=list(rng.uniform(-3, 3, n)), eff=list(rng.normal(0, 20, n))))
        pool.append(imu(now, g=tuple(rng.normal(0, 3, 3)), a=tuple(rng.normal(0, 20, 3)),
                        quat=tuple(rng.normal(size=4))))
    return pool


def test_urdf_node_survives_a_fuzz_and_recovers_on_valid_data(tmp_path):
    """30 000 malformed messages of every class to the URDF node (3-axis IMU and quaternion
    garbage included), then 1 s of valid arm data in real time: the node lives, keeps its
    diagnostics keys, and the last 150 ms of estimates are within 2 mrad of the truth."""
    from test_ros_nodes import _msg, _publish_in_real_time, diag_values

    from mbfg_ros.spatial.sensor_sim import (SpatialSensorConfig, reference_motion,
                                             simulate_spatial_measurements, track_reference)
    system = build_spatial_system(URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml')
    domain = unique_domain(43)
    proc = start('estimator_node', {'mechanism': str(URDF / 'ur5.urdf'),
                                    'overlay': str(URDF / 'ur5_sensors.yaml'),
                                    'frequency': 250.0, 'lag_duration': 0.1,
                                    'dynamics_sigma': 2.0, 'diagnostics_period': 0.5},
                 domain, tmp_path)
    peer = Peer(domain)
    rng = np.random.default_rng(5)
    try:
        pubs = {'js': peer.publisher('/joint_states', 'JointState'),
                'imu': peer.publisher('/imu/wrist_imu', 'Imu')}
        peer.listen('/estimator_node/joint_states', 'JointState')
        peer.listen('/diagnostics', 'DiagnosticArray')
        diags, states = peer.inbox['/diagnostics'], peer.inbox['/estimator_node/joint_states']
        peer.spin_until(lambda: all(p.get_subscription_count() > 0 for p in pubs.values())
                        and diags, 60, 'discovery of estimator_node')
        keys_before = set(diag_values(diags[-1]))
        now = peer.node.get_clock().now().nanoseconds
        pool = _arm_fuzz_pool(peer.kit, now, rng, list(system.names))
        Imu = _msg('Imu')
        received = lambda: int(diag_values(diags[-1])['input.received'])  # noqa: E731
        total, chunk = 30_000, 1000
        for k in range(total):
            msg = pool[int(rng.integers(len(pool)))]
            (pubs['imu'] if isinstance(msg, Imu) else pubs['js']).publish(msg)
            if k % chunk == chunk - 1:
                peer.spin_until(lambda: received() >= 0.9 * k - 2 * chunk, 60,
                                f'the node to take in {k} messages')
        assert proc.poll() is None, 'the node died during the fuzz'
        count = len(diags)
        peer.spin_until(lambda: len(diags) >= count + 4 and len(
            {diag_values(m)['input.received'] for m in diags[-4:]}) == 1, 60, 'the drain')
        # 1 s of valid data from now on, in real time
        ref = reference_motion(system, 1.0, 1e-3, seed=3)
        tr = track_reference(system, ref)
        recs = simulate_spatial_measurements(
            system, tr.t, tr.q, tr.qd, tr.qdd, tr.tau,
            SpatialSensorConfig(encoder_rate=500.0, imu_rate=500.0, encoder_sigma=1e-3),
            np.random.default_rng(7))
        t_start = peer.node.get_clock().now().nanoseconds + 100_000_000
        good = []
        for r in recs:
            t = t_start + int(round(r.t * NS))
            if hasattr(r, 'sensor'):
                good.append((t, cv.imu_msg(peer.kit, t, 'wrist_imu', r.gyro, r.accel), 'imu'))
            else:
                good.append((t, cv.joint_state_msg(peer.kit, t, r.names, r.position,
                                                   r.velocity, r.effort), 'js'))
        _publish_in_real_time(peer, pubs, good)
        t_end = good[-1][0]
        peer.spin_until(lambda: states and cv.stamp_ns(states[-1].header.stamp) >= t_end - 8e6,
                        30, 'estimates of the valid readings')
        peer.spin_until(lambda: cv.stamp_ns(diags[-1].header.stamp) > t_end, 20,
                        'diagnostics after the valid readings')
        assert proc.poll() is None, 'the node died'
        v = diag_values(diags[-1])
    finally:
        peer.close()
        rc = stop(proc)
    log = (tmp_path / 'estimator_node.log').read_text()
    assert rc == 0, log
    assert set(v) - {'tick_time'} == keys_before - {'tick_time'}     # bounded diagnostics
    for key in ('input.nonfinite_values', 'input.out_of_limits', 'input.dropped.future',
                'input.dropped.length_mismatch', 'input.dropped.repeated_names',
                'input.unknown_joint'):
        assert int(v[key]) > 0, (key, v)
    errs = []
    for m in states:
        t = cv.stamp_ns(m.header.stamp)
        if t_end - 150_000_000 <= t <= t_end:
            k = int(round((t - t_start) / 1e6))
            errs.append(np.abs(np.array(m.position) - tr.q[k]).max())
    assert len(errs) >= 3 and max(errs) < 2e-3, (errs, v)
    assert len(log.splitlines()) < 400, 'the log is not throttled'
