"""The floating-base estimator node over real DDS (issue 28 item 3's ROS edge).

The simulated Solo-12's 3 s trot (test/data/solo12/trot_3s, MuJoCo truth) is played in real
time by a separate process (``python -m bench.quadruped.player``: 1 kHz joint_states with
efforts, base IMU, the four feet's contact Bools) into ``floating_estimator_node`` (its own
process, the bundled config/urdf/solo12.urdf + solo12_floating.yaml). The test listens to
``~/odom``, ``~/joint_states``, the feet's contact outputs, ``/tf`` and ``/diagnostics``,
and scores the estimate against the bag's ``/truth/odom``, next to the leg-odometry
baseline computed here on the same bag (bench/floating_base.py's ``leg_odometry``, which
starts from the truth: a broken or absent estimator cannot beat it). Waits are for
discovery and for the messages (generous timeouts), never fixed sleeps.
"""
from __future__ import annotations

import math
import subprocess
import sys
import threading

import numpy as np
import pytest
from support.ros_data import REPO, ros_env, unique_domain

from bench.floating_base import BIAS_WINDOW, LegKinematics, leg_odometry, quat_to_rot, yaw_of
from bench.quadruped.bag import FOOT_LINKS, read_bag
from mbfg_ros.ros import conversions as cv
from mbfg_ros.ros.floating_messages import message, tf_message_class
from support.ros_nodes import Peer, diag_values, start, stop

pytestmark = pytest.mark.ros

BAG = REPO / 'test' / 'data' / 'solo12' / 'trot_3s'
URDF = REPO / 'config' / 'urdf' / 'solo12.urdf'
OVERLAY = REPO / 'config' / 'urdf' / 'solo12_floating.yaml'
PARAMS = REPO / 'config' / 'solo12_estimator.yaml'
NODE = '/floating_estimator_node'
SETTLE = 0.5
"""Seconds of the bag left out of the scores (the estimator's start-up while standing)."""


def _quat_xyzw_to_rot(q) -> np.ndarray:
    return quat_to_rot(np.array([q.w, q.x, q.y, q.z]))


class Player:
    """``bench.quadruped.player`` in its own process; its START/BAD/DONE lines."""

    def __init__(self, domain: int, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'bench.quadruped.player', str(BAG), *args],
            env=ros_env(domain), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def value(self, key: str, field: int = 1) -> str | None:
        return next((ln.split()[field] for ln in self.lines if ln.startswith(key + ' ')
                     and len(ln.split()) > field), None)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def _live(tmp, domain: int, node_params: dict, player_args: tuple, reset: bool = False):
    """One live run: the node, the player, everything the test process heard (a
    generator: the node and the player are stopped after the ``yield``). ``reset``: call
    ``~/reset`` once the run is over and take the diagnostics after it."""
    node = start('floating_node', {'urdf': URDF, 'overlay': OVERLAY, **node_params}, domain,
                 tmp, extra=('--params-file', str(PARAMS)))
    peer = Peer(domain)
    inbox: dict[str, list] = {}

    def listen(topic: str, type_name: str) -> None:
        inbox[topic] = []
        peer.node.create_subscription(message(type_name), topic, inbox[topic].append,
                                      peer_qos())
    listen(f'{NODE}/odom', 'nav_msgs/msg/Odometry')
    listen(f'{NODE}/joint_states', 'sensor_msgs/msg/JointState')
    for f in FOOT_LINKS:
        listen(f'{NODE}/feet/{f}/contact', 'std_msgs/msg/Bool')
    listen(f'{NODE}/feet/FL_FOOT/force', 'geometry_msgs/msg/WrenchStamped')
    listen('/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray')
    tf_cls = tf_message_class()
    if tf_cls is not None:
        listen('/tf', 'tf2_msgs/msg/TFMessage')
    player = None
    try:
        peer.spin_until(lambda: all(peer.node.count_publishers(t) > 0 for t in inbox)
                        and inbox['/diagnostics'], 60, 'discovery of the node')
        player = Player(domain, *player_args)
        peer.spin_until(lambda: player.value('DONE') is not None or player.proc.poll()
                        not in (None, 0), 120, 'the player to finish')
        assert player.value('DONE') is not None, player.lines
        start_ns = int(player.value('START'))
        d = read_bag(BAG)
        end_ns = start_ns + int(round((d['t'][-1] - d['t'][0]) * 1e9))
        odom = inbox[f'{NODE}/odom']
        peer.spin_until(lambda: odom and cv.stamp_ns(odom[-1].header.stamp) >= end_ns - 20e6,
                        60, 'the estimates up to the end of the bag')
        diags = inbox['/diagnostics']
        n_diag = len(diags)
        peer.spin_until(lambda: len(diags) > n_diag + 1, 30, 'diagnostics after the run')
        diag = diag_values(diags[-1])
        answer = None
        if reset:
            from std_srvs.srv import Trigger
            client = peer.node.create_client(Trigger, f'{NODE}/reset')
            peer.spin_until(client.service_is_ready, 30, 'the reset service')
            future = client.call_async(Trigger.Request())
            peer.spin_until(future.done, 30, 'the reset answer')
            answer = future.result()
            n_diag = len(diags)
            peer.spin_until(lambda: len(diags) > n_diag + 1, 30, 'diagnostics after reset')
        alive = node.poll() is None
        yield {'inbox': inbox, 'start': start_ns, 'd': d, 'alive': alive,
               'flow': float(player.value('DONE', 2) or 100.0) / 100.0,
               'bad': int(player.value('BAD') or 0), 'diag': diag,
               'after_reset': diag_values(diags[-1]), 'reset_answer': answer,
               'tf': tf_cls is not None, 'log': tmp / 'floating_node.log'}
    finally:
        if player is not None:
            player.close()
        stop(node)
        peer.close()


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    """Real time (the node's clock is the system clock, the player stamps with it), contact
    Bools, malformed messages every 100 samples."""
    yield from _live(tmp_path_factory.mktemp('floating'), unique_domain(41), {},
                     ('--bad-every', '100'))


@pytest.fixture(scope='module')
def run_sim(tmp_path_factory):
    """Sim time (the player publishes /clock at each sample's stamp, the node on
    use_sim_time), contacts from the feet's forces (WrenchStamped, no Bool), ~/reset at
    the end."""
    yield from _live(tmp_path_factory.mktemp('floating_sim'), unique_domain(42),
                     {'use_sim_time': 'true', 'contact_source': 'force'},
                     ('--sim-time', '--wrenches', '--no-contacts'), reset=True)


def peer_qos():
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    return QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)


def _index(run, msg) -> int:
    """The bag sample of an output's stamp (samples 1 ms apart from the player's START)."""
    return int(round((cv.stamp_ns(msg.header.stamp) - run['start']) / 1e6))


def _scored(run, topic: str) -> list[tuple[int, object]]:
    d = run['d']
    n = len(d['t'])
    out = []
    for m in run['inbox'][topic]:
        k = _index(run, m)
        if 0 <= k < n and d['t'][k] - d['t'][0] >= SETTLE:
            out.append((k, m))
    return out


def _baseline(d) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Leg odometry + IMU (bench/floating_base.py) on the same bag: base-frame velocity,
    position and rotation per sample."""
    kin = LegKinematics(joint_names=d['joint_names'])
    bias_g = d['gyro'][d['t'] <= BIAS_WINDOW].mean(axis=0)
    tr = leg_odometry(d, kin, bias_g)
    v_base = np.einsum('kji,kj->ki', tr.R, tr.v)
    return v_base, tr.p, tr.R


def _xy_drift(p_est: np.ndarray, yaw_est0: float, k0: int, k1: int, d) -> float:
    """‖(p₁ − p₀) − truth's‖ in xy with the estimate's start yaw aligned to the truth's."""
    yaw_true0 = yaw_of(quat_to_rot(d['quat'][k0]))
    c, s = math.cos(yaw_true0 - yaw_est0), math.sin(yaw_true0 - yaw_est0)
    dp = p_est[1, :2] - p_est[0, :2]
    dp = np.array([c * dp[0] - s * dp[1], s * dp[0] + c * dp[1]])
    return float(np.linalg.norm(dp - (d['p'][k1, :2] - d['p'][k0, :2])))


def test_the_node_lives_and_publishes_every_output_in_time(run):
    assert run['alive'], run['log'].read_text()[-3000:]
    odom = _scored(run, f'{NODE}/odom')
    d = run['d']
    span = d['t'][-1] - d['t'][0] - SETTLE
    # 500 Hz asked: one estimate per 2 ms in which the player sent data (it reports the
    # share of such slots; a stalled player gives the node nothing to tick on). Measured
    # 0.97-0.99 of that at load 2-2.7 on the 2 cores, 0.72-0.79 with another test run
    # beside it (the node short of CPU); a node ticking at half its rate (250 Hz: 0.50,
    # measured) is below 0.55
    expected = 500 * span * run['flow']
    diag = run['diag']
    # nothing lost between the node and a RELIABLE subscriber: every estimate it counted
    # published came (the diagnostics are taken after the run, the node idle by then)
    heard = len(run['inbox'][f'{NODE}/odom'])
    assert heard >= int(diag['ticks.published']) - 2, (heard, diag['ticks.published'])
    # the rate is a machine's figure (bench/floating_node_throughput.py), not this test's:
    # with its CPU the node ticks at the rate asked, and a node with a bug that ticks at
    # half of it (250 Hz: 0.50, measured) is below 0.55; on a machine that starves it (2x
    # slower, a test suite beside it: 206 of 1067 once) its loop gives up whole periods and
    # says so (loop.behind: 35-43 in runs at 0.9 of the rate, 194 in one at 0.57; over 5 %
    # of the periods it is starved), and then only a node that still estimates is asked for
    starved = int(diag['loop.behind']) > 0.05 * expected
    assert len(odom) > (0.1 if starved else 0.55) * expected, (len(odom), expected, diag)
    stamps = np.array(sorted(k for k, _ in odom))
    assert np.max(np.diff(stamps)) < 500, 'the estimates stalled for over 0.5 s'
    m = odom[-1][1]
    assert m.header.frame_id == 'odom' and m.child_frame_id == 'base_link'
    assert np.all(np.isfinite(m.pose.covariance)) and np.all(np.isfinite(m.twist.covariance))
    cov = np.asarray(m.pose.covariance).reshape(6, 6)
    assert np.all(np.diag(cov) > 0) and np.allclose(cov, cov.T, atol=1e-12)
    assert run['inbox'][f'{NODE}/feet/FL_FOOT/force']


def test_the_velocity_and_xy_drift_beat_leg_odometry(run):
    """Base-frame velocity RMSE against /truth/odom (REP-105: the twist in base_link) below
    a quarter of the leg-odometry baseline's on the same bag (leg odometry behind the node's
    API passes at 1x, not at 1/4: the IMU fusion is what is tested), and the xy drift over
    the trot below the baseline's (it starts from the truth)."""
    d = run['d']
    odom = _scored(run, f'{NODE}/odom')
    ks = np.array([k for k, _ in odom])
    v = np.array([[m.twist.twist.linear.x, m.twist.twist.linear.y, m.twist.twist.linear.z]
                  for _, m in odom])
    rmse = float(np.sqrt(np.mean(np.sum((v - d['v'][ks]) ** 2, axis=1))))
    v_base, p_base, R_base = _baseline(d)
    rmse_base = float(np.sqrt(np.mean(np.sum((v_base[ks] - d['v'][ks]) ** 2, axis=1))))
    k0, k1 = ks[0], ks[-1]
    p_est = np.array([[m.pose.pose.position.x, m.pose.pose.position.y, m.pose.pose.position.z]
                      for m in (odom[0][1], odom[-1][1])])
    yaw0 = yaw_of(_quat_xyzw_to_rot(odom[0][1].pose.pose.orientation))
    drift = _xy_drift(p_est, yaw0, k0, k1, d)
    drift_base = _xy_drift(p_base[[k0, k1]], yaw_of(R_base[k0]), k0, k1, d)
    print(f'v RMSE {rmse:.4f} (leg odometry {rmse_base:.4f}) m/s, xy drift {drift:.4f} '
          f'(leg odometry {drift_base:.4f}) m', file=sys.stderr)
    assert rmse < rmse_base / 4, (rmse, rmse_base)
    assert drift < drift_base, (drift, drift_base)
    walked = float(np.linalg.norm(np.diff(d['p'][k0:k1 + 1, :2], axis=0), axis=1).sum())
    assert walked > 0.2        # the trot moved: the drift is measured over a real distance


def test_the_attitude_follows_the_truth(run):
    """Roll and pitch are observable (gravity): within 2° of the truth all along."""
    d = run['d']
    worst = 0.0
    for k, m in _scored(run, f'{NODE}/odom'):
        R = _quat_xyzw_to_rot(m.pose.pose.orientation)
        Rt = quat_to_rot(d['quat'][k])
        worst = max(worst, math.degrees(math.acos(np.clip((R[:, 2] @ Rt[:, 2]), -1.0, 1.0))))
    assert worst < 2.0, worst


def test_joint_states_carry_the_urdf_joints_and_the_measured_motion(run):
    d = run['d']
    js = _scored(run, f'{NODE}/joint_states')
    assert js
    assert list(js[-1][1].name) == list(d['joint_names'])
    err = np.array([np.asarray(m.position) - d['q'][k] for k, m in js])
    assert float(np.sqrt(np.mean(err ** 2))) < 2e-3
    assert all(len(m.velocity) == len(m.name) == len(m.effort) for _, m in js)
    tau = np.array([m.effort for _, m in js])
    assert np.all(np.isfinite(tau))        # efforts measured: τ̂ known


def test_contact_outputs_follow_the_contact_inputs(run):
    """~/feet/<FOOT>/contact (no stamp: matched to the odometry published just before it)
    agrees with the input Bool of that sample, and both states occur (a trot)."""
    d = run['d']
    for i, f in enumerate(FOOT_LINKS):
        outs = run['inbox'][f'{NODE}/feet/{f}/contact']
        odom = run['inbox'][f'{NODE}/odom']
        n = min(len(outs), len(odom))
        assert n > 100, (f, len(outs), len(odom))
        ks = [_index(run, o) for o in odom[:n]]
        pairs = [(bool(c.data), d['contact'][k, i] > 0.5) for c, k in zip(outs[:n], ks)
                 if 0 <= k < len(d['t']) and d['t'][k] - d['t'][0] >= SETTLE]
        agree = np.mean([a == b for a, b in pairs])
        assert agree > 0.95, (f, agree)
        assert {a for a, _ in pairs} == {True, False}, f


def test_bad_messages_are_counted_and_the_node_keeps_estimating(run):
    """The player sent, every 100 samples, a JointState with a wrong joint name, one with a
    NaN position and an Imu in a frame that is not on the robot; each class is counted and
    the estimate went on (the scores above are on the same run)."""
    v, bad = run['diag'], run['bad']
    assert bad >= 25
    for key in ('input.rejected.joint_names', 'input.rejected.nonfinite',
                'input.rejected.frame'):
        assert 0.9 * bad <= int(v[key]) <= bad, (key, v[key], bad)
    assert int(v['input.joint_states.used']) > 2500
    assert int(v['ticks.run']) > 0 and int(v['estimator.errors']) == 0
    assert run['alive']


def test_tf_is_published_or_its_absence_is_reported(run):
    """odom → base_link on /tf where tf2_msgs is installed (a ROS install); the PyPI
    wheels have no tf2_msgs, and the node then says so in /diagnostics."""
    if run['tf']:
        tfs = run['inbox']['/tf']
        assert tfs
        tr = tfs[-1].transforms[0]
        assert (tr.header.frame_id, tr.child_frame_id) == ('odom', 'base_link')
        assert run['diag']['tf.published'] == 'True'
    else:
        assert run['diag']['tf.published'] == 'False'
        assert 'tf2_msgs is not installed' in run['log'].read_text()


def test_under_sim_time_with_contacts_from_the_foot_forces_it_beats_leg_odometry(run_sim):
    """The other clock and the other contact source: the same bounds (the contact states
    then come from the force threshold, and still follow the simulator's flags)."""
    assert run_sim['alive'], run_sim['log'].read_text()[-3000:]
    test_the_velocity_and_xy_drift_beat_leg_odometry(run_sim)
    v = run_sim['diag']
    assert int(v['input.wrench.used']) > 4 * 2500 and int(v['input.contact.used']) == 0
    # every input used; a machine stall may deliver a reading after its sensor_timeout
    # (counted as late, never silently): at most one in a thousand, nothing else
    rejected = {k: int(x) for k, x in v.items() if k.startswith('input.rejected.') and int(x)}
    used = sum(int(v[f'input.{s}.used']) for s in ('joint_states', 'imu', 'wrench'))
    assert set(rejected) <= {'input.rejected.late'}, rejected
    assert sum(rejected.values()) <= used / 1000, (rejected, used)
    d = run_sim['d']
    outs = run_sim['inbox'][f'{NODE}/feet/FL_FOOT/contact']
    odom = run_sim['inbox'][f'{NODE}/odom']
    n = min(len(outs), len(odom))
    ks = [_index(run_sim, o) for o in odom[:n]]
    agree = np.mean([bool(c.data) == (d['contact'][k, 0] > 0.5) for c, k in zip(outs, ks)
                     if 0 <= k < len(d['t']) and d['t'][k] - d['t'][0] >= SETTLE])
    assert agree > 0.9, agree


def test_contact_forces_are_published_in_odom_axes_and_carry_the_weight(run_sim):
    """~/feet/<FOOT>/force: in odom's axes; averaged over the trot the feet carry the
    robot's weight, so FL's mean vertical force is about a quarter of m g (±40 %)."""
    forces = run_sim['inbox'][f'{NODE}/feet/FL_FOOT/force']
    assert forces and forces[-1].header.frame_id == 'odom'
    fz = np.array([m.wrench.force.z for m in forces[len(forces) // 5:]])
    from mbfg_ros.loader import load_floating
    weight = float(np.sum(load_floating(str(URDF), str(OVERLAY)).system.model.mass)) * 9.81
    assert 0.6 * weight / 4 < fz.mean() < 1.4 * weight / 4, (fz.mean(), weight)


def test_the_reset_service_restarts_the_estimator(run_sim):
    assert run_sim['reset_answer'].success
    assert int(run_sim['after_reset']['resets.manual']) == 1
    assert run_sim['after_reset']['requests.reset'] == '1'
