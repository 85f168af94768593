"""The nodes over real DDS (loopback, a private ROS_DOMAIN_ID per test process).

Node processes are started with ``python -m mbfg_ros.ros.<node>``; the test
process talks to them with rclpy. Waits are for discovery and for the
messages themselves (generous timeouts), never fixed sleeps.
"""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest
from support.ros_data import (  # noqa: E402
    REPO,
    T0,
    fourbar_data,
    fourbar_path,
    fourbar_system,
    ros_env,
    stamp_of,
    unique_domain,
)

from mbfg_ros.core.bag import bag_topics, read_messages  # noqa: E402
from mbfg_ros.cli.replay import replay  # noqa: E402
from mbfg_ros.cli.demo import write_simulation_bag  # noqa: E402
from mbfg_ros.core.angles import wrap_angle  # noqa: E402
from mbfg_ros.planar.sensors import joint_positions, joint_velocities  # noqa: E402
from mbfg_ros.ros import conversions as cv  # noqa: E402

from support.ros_nodes import (  # noqa: E402
    NS, SENSORS, STATE_AND_DIAGNOSTICS, Peer, _feed_valid_and_settle, _msg,
    _publish_in_real_time, _valid_messages, diag_values, start, stop,
)

pytestmark = pytest.mark.ros

# ------------------------------------------------------------------ start-up errors

@pytest.mark.parametrize('module', ['estimator_node', 'simulator_node'])
def test_a_bad_mechanism_path_exits_non_zero_with_one_error_line(module, tmp_path):
    r = subprocess.run([sys.executable, '-m', f'mbfg_ros.ros.{module}', '--ros-args', '-p',
                        'mechanism:=/no/such/robot.yaml'], env=ros_env(unique_domain(1)),
                       capture_output=True, text=True, timeout=60)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 2
    assert len(lines) == 1 and lines[0].startswith(f'{module}: error: ')
    assert '/no/such/robot.yaml' in lines[0]


def test_a_bad_parameter_exits_non_zero_with_one_error_line(tmp_path):
    r = subprocess.run([sys.executable, '-m', 'mbfg_ros.ros.estimator_node', '--ros-args',
                        '-p', f'mechanism:={fourbar_path()}', '-p', 'command_joints:=[wheel]'],
                       env=ros_env(unique_domain(2)), capture_output=True, text=True,
                       timeout=60)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1
    assert "'wheel' is not an actuator" in lines[0]


# ------------------------------------------------------------------ estimation over DDS

def test_live_node_on_sim_time_estimates_well_and_equals_the_replay(tmp_path):
    """Lockstep: messages are published ahead of /clock, the clock then moves one tick."""
    system, traj, recs = fourbar_data()
    domain = unique_domain(3)
    params = {'mechanism': fourbar_path(), 'use_sim_time': 'true', 'frequency': 200.0,
              'lag_duration': 0.1, 'encoder_sigma': 0.002}
    proc = start('estimator_node', params, domain, tmp_path)
    peer = Peer(domain)
    try:
        clock = peer.publisher('/clock', 'Clock')
        pub_js = peer.publisher('/joint_states', 'JointState')
        pub_imu = peer.publisher('/imu/coupler_imu', 'Imu')
        for topic in ('/estimator_node/state', '/estimator_node/joint_states'):
            peer.listen(topic, 'JointState')
        peer.listen('/diagnostics', 'DiagnosticArray')
        peer.spin_until(lambda: min(p.get_subscription_count() for p in (clock, pub_js, pub_imu))
                        > 0 and peer.node.count_publishers('/estimator_node/state') > 0,
                        60, 'discovery of estimator_node')
        diags = peer.inbox['/diagnostics']
        states = peer.inbox['/estimator_node/state']

        def tick_to(t_ns, inbox, timeout=10.0):
            # repeated while waiting: the first /clock may precede the subscriber's matching
            def send():
                clock.publish(cv.clock_msg(peer.kit, t_ns))
            send()
            peer.spin_until(lambda: inbox and cv.stamp_ns(inbox[-1].header.stamp) >= t_ns,
                            timeout, f'the tick at {t_ns / NS:.3f} s', retry=send)

        # the node runs before the data (its 1 Hz diagnostics carry the sim clock); generous:
        # under load the /diagnostics subscription may match seconds after the node is seen
        # (10 s timed out in CI, on Kilted and on Jazzy)
        tick_to(stamp_of(recs[0]) - 50_000_000, diags, timeout=40.0)
        period, lead = 5_000_000, 20_000_000
        i = 0
        t_ns = stamp_of(recs[0])
        while t_ns <= stamp_of(recs[-1]):
            while i < len(recs) and stamp_of(recs[i]) <= t_ns + lead:
                r = recs[i]
                if hasattr(r, 'sensor'):
                    pub_imu.publish(cv.imu_msg(peer.kit, stamp_of(r), 'coupler_imu', r.gyro,
                                               r.accel, r.orientation))
                else:
                    pub_js.publish(cv.joint_state_msg(peer.kit, stamp_of(r), r.names,
                                                      r.position, r.velocity, r.effort))
                i += 1
            tick_to(t_ns, states)                # each tick publishes its estimate
            t_ns += period
        peer.spin_until(lambda: len(peer.inbox['/estimator_node/state']) >= 150, 10,
                        'the estimates')
        # ~/joint_states is a separate topic: its message of the last tick may still be in
        # flight when ~/state's has arrived
        last = cv.stamp_ns(states[-1].header.stamp)
        js = peer.inbox['/estimator_node/joint_states']
        peer.spin_until(lambda: js and cv.stamp_ns(js[-1].header.stamp) >= last, 10,
                        'the last ~/joint_states')
    finally:
        peer.close()
        assert stop(proc) == 0, (tmp_path / 'estimator_node.log').read_text()
    live = {cv.stamp_ns(m.header.stamp): np.array(m.position)
            for m in peer.inbox['/estimator_node/state']}
    joints = {cv.stamp_ns(m.header.stamp): (np.array(m.position), np.array(m.velocity))
              for m in peer.inbox['/estimator_node/joint_states']}
    assert list(peer.inbox['/estimator_node/state'][0].name) == list(system.mech.coordinate_names)

    # accuracy: crank angle and rate against the truth, vs the encoder and its finite difference
    j = [jt.name for jt in system.mech.joints].index('crank')
    t_true = traj.t + T0
    truth_p = np.unwrap(np.array([joint_positions(system, q) for q in traj.q])[:, j])
    truth_v = np.array([joint_velocities(system, q, qd) for q, qd in zip(traj.q, traj.qd)])[:, j]
    ts = np.array(sorted(joints))[10:] / NS              # after the start-up transient
    est_p = np.array([joints[int(round(t * NS))][0][j] for t in ts])
    est_v = np.array([joints[int(round(t * NS))][1][j] for t in ts])
    enc = [r for r in recs if not hasattr(r, 'sensor')]
    te = np.array([r.t for r in enc])
    raw = np.array([r.position[j] for r in enc])
    fd = np.diff(np.unwrap(raw)) / np.diff(te)
    rmse = lambda e: float(np.sqrt(np.mean(np.square(e))))  # noqa: E731
    est_p_err = rmse(wrap_angle(est_p - np.interp(ts, t_true, truth_p)))
    raw_p_err = rmse(wrap_angle(raw - np.interp(te, t_true, truth_p)))
    est_v_err = rmse(est_v - np.interp(ts, t_true, truth_v))
    fd_err = rmse(fd - np.interp(0.5 * (te[1:] + te[:-1]), t_true, truth_v))
    assert est_p_err < raw_p_err, (est_p_err, raw_p_err)
    assert est_v_err < fd_err, (est_v_err, fd_err)

    # the replay of the same messages gives the same estimates at the same ticks
    bag = tmp_path / 'same_input'
    write_simulation_bag(bag, system, traj, [replace(r, t=r.t - T0) for r in recs])
    res = replay(bag, fourbar_path(), {k: v for k, v in params.items()
                                       if k not in ('mechanism', 'use_sim_time')},
                 show_progress=False)
    replayed = {int(round(t * NS)): q for t, q in zip(res.times, res.q)}
    common = sorted(set(live) & set(replayed))
    assert len(common) >= 190, (len(live), len(replayed))
    for t in common:
        np.testing.assert_array_equal(live[t], replayed[t], err_msg=f'at {t / NS:.3f} s')
    # every field of ~/joint_states, effort included (the estimated motor torque; NaN for
    # the joint no motor drives), equals what the core computed for that tick
    outs = {o.t_ns: o for o in res.outputs if o.estimate is not None}
    names = [jt.name for jt in system.mech.joints]
    effort_live = {cv.stamp_ns(m.header.stamp): np.array(m.effort)
                   for m in peer.inbox['/estimator_node/joint_states']}
    for t in common:
        o = outs[t]
        np.testing.assert_array_equal(joints[t][0], o.estimate.joint_position)
        np.testing.assert_array_equal(joints[t][1], o.estimate.joint_velocity)
        np.testing.assert_array_equal(effort_live[t], o.joint_effort)
    crank_effort = np.array([effort_live[t][names.index('crank')] for t in common])
    assert np.all(np.isfinite(crank_effort)) and np.all(np.abs(crank_effort) > 0)
    assert all(np.isnan(effort_live[t][names.index('coupler_joint')]) for t in common)


def test_the_node_survives_bad_input_and_counts_it_in_diagnostics(tmp_path):
    system, _, recs = fourbar_data()
    domain = unique_domain(4)
    proc = start('estimator_node', {'mechanism': fourbar_path(), 'frequency': 100.0,
                                    'lag_duration': 0.1, 'diagnostics_period': 0.2}, domain,
                 tmp_path)
    peer = Peer(domain)
    names = list(j.name for j in system.mech.joints)
    try:
        pub_js, pub_imu, pub_ref = peer.connect(
            {'/joint_states': 'JointState', '/imu/coupler_imu': 'Imu',
             '/estimator_node/reference': 'JointTrajectory'}, STATE_AND_DIAGNOSTICS).values()
        diags, states = peer.inbox['/diagnostics'], peer.inbox['/estimator_node/state']
        now = lambda: peer.node.get_clock().now().nanoseconds  # noqa: E731
        good, _ = _valid_messages(peer, system, now() + 100_000_000, duration=0.4)
        _publish_in_real_time(peer, {'js': pub_js, 'imu': pub_imu}, good)
        peer.spin_until(lambda: len(states) > 5, 20, 'estimates from good input')
        enc = [r for r in recs if not hasattr(r, 'sensor')]
        p = enc[50].position
        pub_js.publish(cv.joint_state_msg(peer.kit, now(), names, [np.nan, p[1]]))
        pub_js.publish(cv.joint_state_msg(peer.kit, now(), names, p, [np.inf, 0.0]))
        pub_js.publish(cv.joint_state_msg(peer.kit, now(), names, p[:1]))        # lengths
        pub_js.publish(cv.joint_state_msg(peer.kit, now(), ['wheel'] + names, [1.0, *p]))
        pub_js.publish(cv.joint_state_msg(peer.kit, now() - 3 * NS, names, p))   # stamp back
        pub_js.publish(cv.joint_state_msg(peer.kit, now() - 3 * NS // 10, names, p))  # too old
        pub_js.publish(cv.joint_state_msg(peer.kit, now(), names, p, (), [1e300, 0.0]))
        pub_js.publish(cv.joint_state_msg(peer.kit, now() + 100 * NS, names, p))  # future
        pub_imu.publish(cv.imu_msg(peer.kit, now(), 'coupler_imu', [0.0, 0.0, np.nan],
                                   [np.nan, 1.0, 0.0]))
        ref = _msg('JointTrajectory')(joint_names=['wheel'])
        pub_ref.publish(ref)                                                     # no points
        wanted = ('input.nonfinite_values', 'input.dropped.length_mismatch',
                  'input.unknown_joint', 'input.dropped.too_old', 'input.dropped.bad_reference',
                  'input.dropped.no_usable_values', 'input.out_of_limits',
                  'input.dropped.future', 'input.dropped.backwards')
        try:
            peer.spin_until(lambda: all(int(diag_values(diags[-1]).get(k, 0)) > 0
                                        for k in wanted), 20, f'{wanted} in /diagnostics')
        except AssertionError:
            raise AssertionError(diag_values(diags[-1])) from None
        for k in range(15):                                       # stamps back: bag loop
            pub_js.publish(cv.joint_state_msg(peer.kit, now() - 100 * NS + k * 10**7, names,
                                              enc[k].position))
        t_resume = now() + 50_000_000
        _, _, v = _feed_valid_and_settle(peer, {'js': pub_js, 'imu': pub_imu}, system, proc,
                                         t_resume, 0.4)
    finally:
        peer.close()
        rc = stop(proc)
    log = (tmp_path / 'estimator_node.log').read_text()
    assert rc == 0, log
    assert int(v['input.nonfinite_values']) >= 2, v
    assert int(v['input.out_of_limits']) == 1, v                        # the 1e300 effort
    assert int(v['estimator.used_effort']) == 0, v                      # never reached it
    resets = {k: x for k, x in v.items() if k.startswith('estimator.reset') and int(x)}
    # the bag loop, and the jump forward when live data resumed after its 5 old readings
    assert int(v['estimator.reset:backwards']) == 1, resets
    assert set(resets) <= {'estimator.resets', 'estimator.reset:backwards',
                           'estimator.reset:tick_gap'}, resets
    assert "unknown joints ['wheel'] ignored" in log and 'stamps went back' in log


def test_a_burst_ten_times_faster_than_real_time_merges_ticks_and_keeps_every_reading(
        tmp_path):
    """Forced overload over DDS: 1 s of 1 kHz encoder + IMU data and its /clock sent in
    0.1 s. The node cannot tick at 500 Hz of that clock: it merges ticks, drops no reading
    as too old, and its crank angle stays closer to the truth than the raw encoder."""
    system, traj, recs = fourbar_data(duration=1.0, rate=1000.0)
    domain = unique_domain(7)
    proc = start('estimator_node', {'mechanism': fourbar_path(), 'use_sim_time': 'true',
                                    'frequency': 500.0, 'lag_duration': 0.1,
                                    'encoder_sigma': 0.002, 'diagnostics_period': 0.2},
                 domain, tmp_path)
    peer = Peer(domain)
    try:
        clock, pub_js, pub_imu = peer.connect(
            {'/clock': 'Clock', **SENSORS},
            {'/estimator_node/joint_states': 'JointState',
             '/diagnostics': 'DiagnosticArray'}).values()
        diags, joints = peer.inbox['/diagnostics'], peer.inbox['/estimator_node/joint_states']
        t0 = stamp_of(recs[0])
        msgs = [(stamp_of(r), cv.imu_msg(peer.kit, stamp_of(r), 'coupler_imu', r.gyro,
                                         r.accel) if hasattr(r, 'sensor') else
                 cv.joint_state_msg(peer.kit, stamp_of(r), r.names, r.position))
                for r in recs]
        start_wall = time.monotonic()
        last_clock = 0
        for k, (t, msg) in enumerate(msgs):
            if t > last_clock:
                clock.publish(cv.clock_msg(peer.kit, t))
                last_clock = t
            (pub_imu if hasattr(msg, 'linear_acceleration') else pub_js).publish(msg)
            ahead = (t - t0) / 10 / NS - (time.monotonic() - start_wall)   # 10x real time
            if ahead > 0:
                time.sleep(ahead)
        t_end = msgs[-1][0]
        peer.spin_until(lambda: joints and cv.stamp_ns(joints[-1].header.stamp) >= t_end - 4e6,
                        30, 'the estimate at the end of the burst')
        peer.spin_until(lambda: diags and int(diag_values(diags[-1])['input.received'])
                        >= 0.95 * len(msgs) and cv.stamp_ns(diags[-1].header.stamp) >= t_end,
                        20, 'diagnostics after the burst')
        v = diag_values(diags[-1])
    finally:
        peer.close()
        rc = stop(proc)
    assert rc == 0, (tmp_path / 'estimator_node.log').read_text()
    assert int(v['ticks.merged']) > 0, v
    assert int(v['input.dropped.too_old']) == 0 and int(v['estimator.dropped_too_old']) == 0, v
    j = [jt.name for jt in system.mech.joints].index('crank')
    est = [(cv.stamp_ns(m.header.stamp), m.position[j]) for m in joints]
    truth = lambda t: joint_positions(system, traj.q[int(round((t - t0) / 1e6))])[j]  # noqa
    err = [wrap_angle(p - truth(t)) for t, p in est if t0 + 100_000_000 <= t <= t_end]
    raw = [wrap_angle(r.position[j] - truth(stamp_of(r))) for r in recs
           if not hasattr(r, 'sensor')]
    rmse = lambda e: float(np.sqrt(np.mean(np.square(e))))  # noqa: E731
    assert len(err) > 20, (len(err), [(t - t0) // 1_000_000 for t, _ in est])
    assert rmse(err) < rmse(raw), (rmse(err), rmse(raw), v)


def _cpu_seconds(pid: int) -> float:
    import os
    fields = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def test_an_idle_node_stops_ticking_and_uses_almost_no_cpu(tmp_path):
    """No input at all, then input that stops: the tick timer stops both times, the
    diagnostics say so, and the process uses under 5 % of a core meanwhile."""
    system = fourbar_system()
    domain = unique_domain(8)
    proc = start('estimator_node', {'mechanism': fourbar_path(), 'frequency': 500.0,
                                    'diagnostics_period': 0.25}, domain, tmp_path)
    peer = Peer(domain)
    try:
        pub_js, pub_imu = peer.connect(SENSORS, STATE_AND_DIAGNOSTICS).values()
        diags = peer.inbox['/diagnostics']

        def idle_for(seconds: float) -> tuple[float, dict]:
            peer.spin_until(lambda: diags[-1].status[0].message.startswith('idle'), 10,
                            'the node to report idle')
            cpu0, wall0 = _cpu_seconds(proc.pid), time.monotonic()
            runs0 = int(diag_values(diags[-1])['ticks.run'])
            count = len(diags)
            peer.spin_until(lambda: len(diags) >= count + int(seconds / 0.25), 3 * seconds,
                            'diagnostics while idle')
            share = (_cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - wall0)
            v = diag_values(diags[-1])
            assert int(v['ticks.run']) == runs0, v          # no tick ran while idle
            return share, {'message': diags[-1].status[0].message, **v}

        share, v = idle_for(2.0)
        assert v['message'].startswith('idle'), v
        assert share < 0.05, share
        t0 = peer.node.get_clock().now().nanoseconds + 50_000_000
        good, _ = _valid_messages(peer, system, t0, duration=0.3)
        _publish_in_real_time(peer, {'js': pub_js, 'imu': pub_imu}, good)
        states = peer.inbox['/estimator_node/state']
        peer.spin_until(lambda: len(states) > 20, 20, 'estimates')
        share, v = idle_for(2.0)                   # the input stopped: idle again
        assert v['message'].startswith('idle: no input for'), v
        assert share < 0.05, share
    finally:
        peer.close()
        assert stop(proc) == 0, (tmp_path / 'estimator_node.log').read_text()


def fuzz_pool(kit, now, rng, names):
    """Malformed messages of every bad-input class (JointState and Imu), plus plausible
    garbage that passes the limits."""

    def js(stamp, nm=names, pos=(), vel=(), eff=(), frame=''):
        m = cv.joint_state_msg(kit, max(stamp, 0), nm, pos, vel, eff)
        m.header.frame_id = frame
        return m

    def imu(stamp, g=0.0, a=(0.0, 9.81), cov=0.0, quat=None, frame='coupler_imu'):
        m = cv.imu_msg(kit, max(stamp, 0), frame, (0.0, 0.0, g), (*a, 0.0)[:3])
        m.angular_velocity_covariance = np.full(9, cov)
        if quat is not None:
            m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w = quat
            m.orientation_covariance = np.zeros(9)
        return m

    big, nan, inf = 1e300, float('nan'), float('inf')
    pool = [
        js(now, pos=[nan, nan]), js(now, pos=[inf, -inf]), js(now, vel=[nan, inf]),
        js(now, pos=[big, 0.0]), js(now, pos=[0.0, -big]), js(now, vel=[big, 1.0]),
        js(now, eff=[big, 0.0]), js(now, pos=[0.1, 0.2], eff=[50.0, 0.0]),
        js(now, pos=[0.1]), js(now, pos=[0.1, 0.2, 0.3]), js(now, vel=[1.0]),
        js(now, nm=['crank', 'crank'], pos=[0.1, 0.2]), js(now, nm=['wheel', 'x'],
                                                           pos=[1.0, 2.0]),
        js(now, nm=[], pos=[]), js(now - 100 * NS, pos=[0.3, 0.1]),
        js(now, pos=[nan, 0.2]), js(now, nm=['wheel', 'crank'], pos=[1.0, 0.1]),
        js(now + 10**6 * NS, pos=[0.3, 0.1]), js(0, pos=[2.0, -1.0]),
        js(now - NS // 2, pos=[0.3, 0.1]), js(now, pos=[0.1, 0.2], frame='\x01garbage'),
        imu(now, g=nan, a=(nan, nan)), imu(now, g=inf), imu(now, a=(big, 0.0)),
        imu(now, g=big), imu(now, cov=nan), imu(now, cov=-1.0), imu(now, quat=(0, 0, 0, 0)),
        imu(now, quat=(nan, 0, 0, 1)), imu(now - 100 * NS), imu(now + 10**6 * NS),
        imu(0, g=40.0, a=(300.0, -300.0)), imu(now, frame='\x00' * 50),
    ]
    for _ in range(40):                    # plausible-looking garbage: passes the limits
        pool.append(js(now, pos=list(rng.uniform(-3, 3, 2)), vel=list(rng.normal(0, 5, 2))))
        pool.append(imu(now, g=float(rng.normal(0, 5)), a=tuple(rng.normal(0, 30, 2))))
    return pool


@pytest.fixture(scope='module')
def fuzzed(tmp_path_factory):
    """Every bad-input class at full speed over DDS, silences included; then 1 s of valid
    encoder + IMU data. Returns (diagnostics after, keys before, P1 errors over the last
    150 ms of the valid second, node log, exit code)."""
    tmp_path = tmp_path_factory.mktemp('fuzz')
    system, _, _ = fourbar_data()
    domain = unique_domain(6)
    proc = start('estimator_node', {'mechanism': fourbar_path(), 'frequency': 250.0,
                                    'lag_duration': 0.1, 'diagnostics_period': 0.5}, domain,
                 tmp_path)
    peer = Peer(domain)
    rng = np.random.default_rng(11)
    names = [j.name for j in system.mech.joints]
    try:
        pub_js, pub_imu = peer.connect(SENSORS, STATE_AND_DIAGNOSTICS).values()
        diags, states = peer.inbox['/diagnostics'], peer.inbox['/estimator_node/state']
        keys_before = set(diag_values(diags[-1]))
        now = peer.node.get_clock().now().nanoseconds
        Imu, JointState = _msg('Imu'), _msg('JointState')
        pool = fuzz_pool(peer.kit, now, rng, names)
        assert isinstance(pool[0], JointState) and isinstance(pool[-1], Imu)
        total, chunk = 100_000, 1000
        received = lambda: int(diag_values(diags[-1])['input.received'])  # noqa: E731
        for k in range(total):
            msg = pool[int(rng.integers(len(pool)))]
            (pub_imu if isinstance(msg, Imu) else pub_js).publish(msg)
            if k in (30_000, 70_000):                       # silences
                end = time.monotonic() + 0.6
                while time.monotonic() < end:
                    peer.ex.spin_once(timeout_sec=0.01)
            elif k % chunk == chunk - 1:    # bursts of 1000, as fast as the node takes them in
                peer.spin_until(lambda: received() >= 0.9 * k - 2 * chunk, 60,
                                f'the node to take in {k} messages')
        assert proc.poll() is None, 'the node died during the fuzz'
        # the fuzz ends when the node has taken in all it will (its DDS queues drained):
        # input.received stops growing between two diagnostics
        count = len(diags)

        def drained():
            received = [diag_values(m)['input.received'] for m in diags[count:]]
            return len(received) >= 4 and len(set(received[-4:])) == 1

        peer.spin_until(drained, 60, 'the fuzz to drain')
        # the same publishers: new ones could lose their first messages while the node's
        # subscriptions are still matching them (seen: the first 0.3 s of the valid second)
        t_start = peer.node.get_clock().now().nanoseconds + 100_000_000
        traj, t_end, v = _feed_valid_and_settle(peer, {'js': pub_js, 'imu': pub_imu}, system,
                                                proc, t_start, 1.0)
    finally:
        peer.close()
        rc = stop(proc)
    log = (tmp_path / 'estimator_node.log').read_text()
    errs = []
    for m in states:
        t = cv.stamp_ns(m.header.stamp)
        if t_end - 150_000_000 <= t <= t_end:
            k = int(round((t - t_start) / 1e6))
            errs.append(np.linalg.norm(np.array(m.position[:2]) - traj.q[k, :2]))
    return v, keys_before, errs, log, rc, total


def test_after_100k_malformed_messages_the_node_lives_counts_every_class_and_stays_bounded(
        fuzzed):
    v, keys_before, _, log, rc, total = fuzzed
    assert rc == 0, log
    assert set(v) - {'tick_time'} == keys_before - {'tick_time'}     # bounded diagnostics
    assert int(v['input.received']) >= total * 0.9, v                  # DDS may shed some
    for key in ('input.nonfinite_values', 'input.out_of_limits', 'input.dropped.future',
                'input.dropped.length_mismatch', 'input.dropped.repeated_names',
                'input.unknown_joint', 'estimator.rejected_outlier'):
        assert int(v[key]) > 0, (key, v)
    assert len(log.splitlines()) < 400, 'the log is not throttled'


def test_after_100k_malformed_messages_one_second_of_valid_data_recovers_the_estimate(fuzzed):
    v, _, errs, _, _, _ = fuzzed
    assert len(errs) >= 3, len(errs)     # a loaded node merges ticks: fewer, not worse
    assert max(errs) < 0.005, (max(errs), v)


# ------------------------------------------------------------------ simulator

def test_the_simulator_records_a_bag_offline_and_exits_at_duration(tmp_path):
    proc = start('simulator_node', {'mechanism': fourbar_path(), 'realtime': 'false',
                                    'duration': 0.5, 'record': 'true', 'output': 'rec',
                                    'storage': 'sqlite3', 'encoder_sigma': 0.001},
                 unique_domain(5), tmp_path)
    try:
        rc = proc.wait(120)
    finally:
        stop(proc)
    assert rc == 0, (tmp_path / 'simulator_node.log').read_text()
    topics = bag_topics(tmp_path / 'rec')
    assert topics == {'/clock': cv.TYPES['Clock'], '/joint_states': cv.TYPES['JointState'],
                      '/imu/coupler_imu': cv.TYPES['Imu'],
                      '/simulator_node/ground_truth': cv.TYPES['JointState']}
    truth = [m.msg for m in read_messages(tmp_path / 'rec', {
        '/simulator_node/ground_truth': cv.TYPES['JointState']})]
    system = fourbar_data()[0]
    assert list(truth[0].name) == list(system.mech.coordinate_names)
    assert len(truth) == 51                                       # 100 Hz, t = 0 .. 0.5 s
    assert cv.stamp_ns(truth[-1].header.stamp) == NS + NS // 2
    assert not np.allclose(truth[0].position, truth[-1].position)  # it fell
    assert REPO.exists()
    assert 'sensor noise is off' not in (tmp_path / 'simulator_node.log').read_text()


def test_a_simulator_behind_real_time_reports_its_factor_and_warns_once(tmp_path):
    """dt 20 µs at 100 Hz publishing: 500 integrator steps per message, far slower than
    real time on any machine. The factor in /diagnostics says so; the log warns once per
    10 s, not per step."""
    domain = unique_domain(9)
    proc = start('simulator_node', {'mechanism': fourbar_path(), 'realtime': 'true',
                                    'dt': 2e-5, 'publish_rate': 100.0}, domain, tmp_path)
    peer = Peer(domain)
    try:
        peer.listen('/diagnostics', 'DiagnosticArray')
        diags = peer.inbox['/diagnostics']
        peer.spin_until(lambda: len(diags) >= 4, 30, 'four simulator diagnostics')
        v = diag_values(diags[-1])
    finally:
        peer.close()
        rc = stop(proc)
    log = (tmp_path / 'simulator_node.log').read_text()
    assert rc == 0, log
    assert diags[-1].status[0].name.endswith(': simulator')
    assert 0.0 < float(v['real_time_factor']) < 0.5, v
    assert float(v['lag_s']) > 0.5, v
    assert log.count('behind real time') == 1, log
    assert log.count('sensor noise is off') == 1, log        # the defaults: exact readings
