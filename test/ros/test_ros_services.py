"""The estimator node's services and live parameters over real DDS.

``~/reset`` (std_srvs/Trigger), ``~/set_state`` (sensor_msgs/JointState, as
robot_localization's ``set_pose``) and ``ros2 param set`` (the node's
``set_parameters`` service) called from a test client in its own process and
domain. Waits are on conditions (discovery, messages, counters), never fixed sleeps.
"""
from __future__ import annotations

import numpy as np
import pytest
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

from mbfg_ros.core.angles import wrap_angle
from mbfg_ros.planar.sensors import joint_positions, joint_velocities
from mbfg_ros.ros import conversions as cv

pytestmark = pytest.mark.ros

NS = 1_000_000_000


def _call(peer: Peer, client, request, what: str, timeout: float = 30.0):
    peer.spin_until(lambda: client.service_is_ready(), 60, f'the {what} service')
    future = client.call_async(request)
    peer.spin_until(future.done, timeout, f'the {what} response')
    return future.result()


def test_reset_and_set_state_over_dds_are_applied_counted_and_bad_input_is_refused(tmp_path):
    from std_srvs.srv import Trigger

    system, traj, _ = fourbar_data()
    names = [j.name for j in system.mech.joints]
    domain = unique_domain(21)
    proc = start('estimator_node', {'mechanism': fourbar_path(), 'frequency': 100.0,
                                    'lag_duration': 0.1, 'diagnostics_period': 0.2}, domain,
                 tmp_path)
    peer = Peer(domain)
    try:
        pubs = peer.connect({**SENSORS, '/estimator_node/set_state': 'JointState'},
                            {**STATE_AND_DIAGNOSTICS,
                             '/estimator_node/joint_states': 'JointState'})
        pub_js, pub_imu = pubs['/joint_states'], pubs['/imu/coupler_imu']
        pub_set = pubs['/estimator_node/set_state']
        diags, joints = peer.inbox['/diagnostics'], peer.inbox['/estimator_node/joint_states']
        now = lambda: peer.node.get_clock().now().nanoseconds  # noqa: E731
        counter = lambda k: int(diag_values(diags[-1]).get(k, -1))  # noqa: E731

        # 1. good data, then ~/reset: counted as a manual reset; new data re-initialises
        good, _ = _valid_messages(peer, system, now() + 100_000_000, duration=0.3)
        _publish_in_real_time(peer, {'js': pub_js, 'imu': pub_imu}, good)
        peer.spin_until(lambda: len(joints) > 5, 20, 'estimates from good input')
        peer.spin_until(lambda: counter('estimator.initialisations') >= 1, 20,
                        'the first initialisation in /diagnostics')
        inits = counter('estimator.initialisations')
        client = peer.node.create_client(Trigger, '/estimator_node/reset')
        res = _call(peer, client, Trigger.Request(), 'reset')
        assert res.success and 'reset' in res.message
        peer.spin_until(lambda: counter('requests.reset') == 1
                        and counter('estimator.reset:manual') == 1, 20,
                        'the reset in /diagnostics')
        more, _ = _valid_messages(peer, system, now() + 100_000_000, duration=0.3)
        _publish_in_real_time(peer, {'js': pub_js, 'imu': pub_imu}, more)
        peer.spin_until(lambda: counter('estimator.initialisations') > inits, 20,
                        're-initialisation after the reset')

        # 2. ~/set_state at a pose far from the data's: the next estimate starts there
        q_far = traj.q[-1]
        target = joint_positions(system, q_far)
        rates = joint_velocities(system, q_far, traj.qd[-1])
        rates = rates * (2.0 / rates[0])             # a consistent motion, crank at 2 rad/s
        assert abs(wrap_angle(target[0] - joint_positions(system, traj.q[0])[0])) > 0.3
        # the node goes idle when the input stops: every estimate after that comes from
        # set_state (a zero stamp means now)
        peer.spin_until(lambda: diags[-1].status[0].message.startswith('idle'), 20,
                        'the node to go idle')
        n0 = len(joints)
        pub_set.publish(cv.joint_state_msg(peer.kit, 0, names, target, rates))
        peer.spin_until(lambda: len(joints) > n0, 20, 'an estimate after set_state')
        first = joints[n0]
        # the estimator starts at the request's stamp and predicts to the next tick (at
        # most 10 ms: 0.02 rad at 2 rad/s, ~0.1 rad/s of gravity)
        err = wrap_angle(np.array(first.position) - target)
        assert np.max(np.abs(err)) < 0.03, (first.position, target)
        assert np.max(np.abs(np.array(first.velocity) - rates)) < 0.2, (first.velocity, rates)
        peer.spin_until(lambda: counter('requests.set_state') == 1
                        and counter('estimator.reset:manual') == 2, 20,
                        'set_state in /diagnostics')

        # 3. bad set_state: unknown joint, NaN, wrong lengths; refused, counted, node lives
        pub_set.publish(cv.joint_state_msg(peer.kit, now(), ['wheel', *names], [1.0, *target]))
        pub_set.publish(cv.joint_state_msg(peer.kit, now(), names, [np.nan, target[1]]))
        pub_set.publish(cv.joint_state_msg(peer.kit, now(), names, target[:1]))
        peer.spin_until(lambda: counter('requests.set_state_refused') == 3, 20,
                        'the refused set_state requests in /diagnostics')
        v = diag_values(diags[-1])
        assert int(v['requests.set_state']) == 1, v
        assert int(v['estimator.reset:manual']) == 2, v           # nothing reset by them
        # still estimating after the refusals
        t_after = now() + 100_000_000
        last, _ = _valid_messages(peer, system, t_after, duration=0.2)
        _publish_in_real_time(peer, {'js': pub_js, 'imu': pub_imu}, last)
        peer.spin_until(lambda: any(cv.stamp_ns(m.header.stamp) > t_after for m in joints),
                        20, 'estimates after the refused requests')
        assert proc.poll() is None, 'the node died'
    finally:
        peer.close()
        rc = stop(proc)
    log = (tmp_path / 'estimator_node.log').read_text()
    assert rc == 0, log
    assert "set_state refused: unknown joints ['wheel']" in log, log


def _parameter(name: str, value):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    if isinstance(value, str):
        v = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
    else:
        v = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=float(value))
    return Parameter(name=name, value=v)


def _set(peer: Peer, client, **values):
    from rcl_interfaces.srv import SetParameters
    req = SetParameters.Request(parameters=[_parameter(k, v) for k, v in values.items()])
    return _call(peer, client, req, 'set_parameters').results


def test_noise_and_gains_are_live_parameters_validated_over_dds(tmp_path):
    """ros2 param set over the node's set_parameters service: bad values are refused with a
    reason (the node keeps running); a 1000x larger encoder σ reaches the next factors:
    with encoders only, the reported standard deviations grow many times over."""
    from rcl_interfaces.srv import GetParameters, SetParameters

    system, _, _ = fourbar_data()
    domain = unique_domain(22)
    proc = start('estimator_node', {'mechanism': fourbar_path(), 'frequency': 100.0,
                                    'lag_duration': 0.1, 'diagnostics_period': 0.2,
                                    'covariance_every': 1}, domain, tmp_path)
    peer = Peer(domain)
    try:
        pubs = peer.connect(SENSORS, {**STATE_AND_DIAGNOSTICS,
                                      '/estimator_node/state_stddev': 'JointState'})
        pub_js = pubs['/joint_states']
        diags, stds = peer.inbox['/diagnostics'], peer.inbox['/estimator_node/state_stddev']
        now = lambda: peer.node.get_clock().now().nanoseconds  # noqa: E731
        counter = lambda k: int(diag_values(diags[-1]).get(k, -1))  # noqa: E731
        client = peer.node.create_client(SetParameters, '/estimator_node/set_parameters')
        getter = peer.node.create_client(GetParameters, '/estimator_node/get_parameters')

        def position_std(t_from: int) -> float:
            """Median over the estimates stamped after t_from (the first 50 ms left out: the
            estimate settles) of the mean position σ of the coordinates."""
            vals = [np.mean(m.position) for m in stds
                    if cv.stamp_ns(m.header.stamp) > t_from + 50_000_000]
            assert len(vals) >= 5, len(vals)
            return float(np.median(vals))

        def run(duration: float) -> int:
            t0 = now() + 100_000_000
            msgs, _ = _valid_messages(peer, system, t0, duration=duration)
            msgs = [m for m in msgs if m[2] == 'js']       # encoders only: their σ shows
            _publish_in_real_time(peer, {'js': pub_js}, msgs)
            peer.spin_until(lambda: stds and cv.stamp_ns(stds[-1].header.stamp)
                            >= msgs[-1][0] - 20_000_000, 20, 'the estimates')
            return t0

        # refused: wrong type, out of the descriptor's range, NaN, fixed at start-up
        for bad, why in ((dict(encoder_sigma='big'), 'expected a number'),
                         (dict(kp=-1.0), ''), (dict(dynamics_sigma=float('nan')), ''),
                         (dict(frequency=50.0), '')):
            (r,) = _set(peer, client, **bad)
            assert not r.successful and r.reason, (bad, r)
            assert why in r.reason, (bad, r.reason)
        peer.spin_until(lambda: counter('requests.params_refused') >= 1, 20,
                        'the refused changes in /diagnostics')
        assert proc.poll() is None, 'the node died'

        before = position_std(run(0.4))
        results = _set(peer, client, encoder_sigma=1.0, kp=25.0, kd=10.0)
        assert all(r.successful for r in results), [r.reason for r in results]
        from rcl_interfaces.srv import GetParameters as _G
        got = _call(peer, getter, _G.Request(names=['encoder_sigma', 'kp']),
                    'get_parameters').values
        assert [v.double_value for v in got] == [1.0, 25.0]
        after = position_std(run(0.4))
        peer.spin_until(lambda: counter('requests.params_set') == 3, 20,
                        'the accepted change in /diagnostics')
        v = diag_values(diags[-1])
        assert proc.poll() is None, 'the node died'
    finally:
        peer.close()
        rc = stop(proc)
    log = (tmp_path / 'estimator_node.log').read_text()
    assert rc == 0, log
    assert int(v['requests.params_refused']) == 1, v       # the one rclpy's checks let through
    assert after > 5 * before, (before, after)
    assert 'parameters changed: encoder_sigma=1' in log, log
