"""Torque commands a motor can be trusted with (issue 25 items 1-3, 7): limits, gains and
reference validation, commands that die with their data, the PD hold, capped log text.

Driver-level (no DDS): the same object the node and the replay run; the closed loop over
DDS is in test_closed_loop.py."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from support.ros_data import REPO, fourbar_data, fourbar_path, replay_driver, stamp_of
from support.ur5 import readings, simulate_ur5

from mbfg_ros.ros.conversions import LOG_CHARS, Reference
from mbfg_ros.ros.driver import COMMAND_KEYS, EstimatorDriver
from mbfg_ros.ros.params import ESTIMATOR_PARAMS, ParameterError, check_live, parse_estimator

NS = 1_000_000_000
URDF = REPO / 'config' / 'urdf'


run = replay_driver     # replay-style feeding: every tick's output


def urdf_efforts() -> dict[str, float]:
    """``<limit effort>`` of each joint of ur5.urdf, read from the XML (independent of the
    package's URDF parser)."""
    root = ET.parse(URDF / 'ur5.urdf').getroot()
    return {j.get('name'): float(j.find('limit').get('effort'))
            for j in root.iter('joint') if j.find('limit') is not None}


@pytest.fixture(scope='module')
def ur5_run():
    """A UR5 driver fed 0.6 s of simulated readings, with kp 400, kd 40."""
    values = {'mechanism': str(URDF / 'ur5.urdf'), 'overlay': str(URDF / 'ur5_sensors.yaml'),
              'frequency': 500.0, 'lag_duration': 0.05, 'kp': 400.0, 'kd': 40.0}
    settings = parse_estimator(values)
    from mbfg_ros.loader import load_mechanism
    system = load_mechanism(settings.mechanism, values['overlay'])
    tr, taus = simulate_ur5(system, duration=0.6)
    recs = readings(system, tr, taus, np.random.default_rng(4))
    return system, settings, recs


def test_a_step_reference_is_saturated_at_the_urdf_effort_limits_and_counted(ur5_run):
    """Issue 25 measured 25x the effort limit for a 1 rad step in 20 ms at kp 400, kd 40:
    now every command is within ``<limit effort>``, the clamped values are counted."""
    system, settings, recs = ur5_run
    d = EstimatorDriver(system, settings)
    half = 2 * (len(recs) // 4)                     # records alternate joints, IMU
    outs = run(d, recs[:half])
    q_now = np.array(recs[half - 2].position)
    t0 = recs[half].t
    names = tuple(system.names)
    ref = Reference(names, np.array([t0, t0 + 0.02]), np.vstack((q_now, q_now + 1.0)),
                    np.zeros((2, 6)), np.zeros((2, 6)))
    assert d.set_reference(ref)
    outs = [o for o in outs + run(d, recs[half:]) if o.command is not None]
    cmds = np.array([o.command for o in outs])
    limit = np.array([urdf_efforts()[n] for n in d.law.names])
    assert len(cmds) > 50
    assert np.all(np.abs(cmds) <= limit + 1e-9), np.abs(cmds).max(axis=0)
    at_limit = np.isclose(np.abs(cmds), limit)
    assert at_limit.any()                          # the step did ask for more
    v = d.diagnostics()[2]
    assert int(v['commands.saturated']) == int(at_limit.sum()) > 0
    assert {f'commands.{k}' for k in COMMAND_KEYS} <= set(v)
    assert any(c == 'command:saturated' for c, _ in d.events)


def test_gains_outside_a_sane_range_are_refused_at_start_up_and_live():
    """kp 1e9 was inside the declared range (1.7e9 N·m); now the range ends at a natural
    frequency no motor reaches, and the same check refuses a live change."""
    with pytest.raises(ParameterError, match="'kp'.*must be <="):
        parse_estimator({'mechanism': str(fourbar_path()), 'kp': 1e9})
    with pytest.raises(ParameterError, match="'kd'.*must be <="):
        parse_estimator({'mechanism': str(fourbar_path()), 'kd': 1e6})
    with pytest.raises(ParameterError, match="'kp'"):
        check_live(ESTIMATOR_PARAMS, {'kp': 1e9}, 'estimator_node')
    spec = {p.name: p for p in ESTIMATOR_PARAMS}
    assert spec['kp'].hi <= 1e6 and spec['kd'].hi <= 1e4


def test_references_outside_the_joint_limits_or_naming_unknown_joints_are_refused(ur5_run):
    system, settings, _ = ur5_run
    d = EstimatorDriver(system, settings)
    names = tuple(system.names)
    q = np.tile(system.q0, (2, 1))
    zero = np.zeros((2, 6))
    t = np.array([0.0, 1.0])
    assert d.set_reference(Reference(names, t, q, zero, zero))
    far = q.copy()
    far[1, 2] = 4.0                                  # elbow: URDF range ±π
    vel = zero.copy()
    vel[0, 0] = 10.0                                 # shoulder_pan: URDF 3.15 rad/s
    acc = zero.copy()
    acc[1, 3] = np.inf
    bad = [Reference(names, t, far, zero, zero), Reference(names, t, q, vel, zero),
           Reference(names, t, q, zero, acc),
           Reference(names + ('gripper',), t, np.hstack((q, q[:, :1])),
                     np.zeros((2, 7)), np.zeros((2, 7)))]
    for ref in bad:
        assert not d.set_reference(ref)
    assert d.counters['dropped.bad_reference'] == 4
    texts = ' '.join(t for c, t in d.events if c == 'reference')
    for word in ('elbow_joint', 'shoulder_pan_joint', 'non-finite', 'gripper'):
        assert word in texts, texts


def test_commands_stop_within_the_command_timeout_of_the_data_and_say_why():
    """The sensors stop: ticks go on (dynamics-only prediction) but no command older than
    ``command_timeout`` after the newest reading; /diagnostics ERROR names the reason."""
    system, _, recs = fourbar_data(duration=0.6)
    d = EstimatorDriver(system, parse_estimator({
        'mechanism': str(fourbar_path()), 'frequency': 200.0, 'lag_duration': 0.1,
        'kp': 25.0, 'kd': 10.0, 'command_timeout': 0.03}))
    outs = run(d, recs)
    last = stamp_of(recs[-1])
    outs += d.advance(last + int(0.3 * NS))             # 0.3 s of silence
    sent = [o for o in outs if o.command is not None]
    assert sent and max(o.t_ns for o in sent) > last - int(0.01 * NS)
    for o in outs:
        if o.t_ns > last + int(0.03 * NS) + 1:
            assert o.estimate is not None and o.command is None, o.t_ns - last
            assert o.level == 2 and o.withheld == 'timeout'
            assert 'no torque command' in o.message and 'command_timeout' in o.message
    level, message, v = d.diagnostics()
    assert level == 2 and 'command_timeout' in message
    assert int(v['commands.withheld.timeout']) >= 15


def test_command_timeout_defaults_to_the_sensor_timeout():
    d = EstimatorDriver(fourbar_data()[0], parse_estimator({
        'mechanism': str(fourbar_path()), 'sensor_timeout': 0.07}))
    assert d.command_timeout_ns == int(0.07 * NS)


def test_no_command_before_a_window_of_estimates_nor_for_a_window_after_a_reset():
    system, _, recs = fourbar_data(duration=0.8)
    d = EstimatorDriver(system, parse_estimator({
        'mechanism': str(fourbar_path()), 'frequency': 200.0, 'lag_duration': 0.1,
        'kp': 25.0, 'kd': 10.0}))
    half = len(recs) // 2

    def check(outs):
        first_est = next(o.t_ns for o in outs if o.estimate is not None)
        first_cmd = next(o.t_ns for o in outs if o.command is not None)
        assert first_cmd - first_est >= int(0.1 * NS) - 1
        for o in outs:
            if o.t_ns < first_cmd:
                assert o.command is None
                if o.estimate is not None:
                    assert o.level == 2 and o.withheld == 'initialising'
        assert all(o.command is not None for o in outs if o.t_ns >= first_cmd)

    check(run(d, recs[:half]))
    d.reset('manual', 'test')
    check(run(d, recs[half:]))
    v = d.diagnostics()[2]
    assert int(v['commands.withheld.initialising']) >= 2 * 20


def test_a_peer_string_reaches_the_log_capped():
    """A JointState whose joint name is a megabyte: the log line stays short and says how
    much was cut."""
    system = fourbar_data()[0]
    d = EstimatorDriver(system, parse_estimator({'mechanism': str(fourbar_path())}))
    from mbfg_ros.ros.conversions import joint_state_msg, rclpy_kit
    huge = 'x' * 1_000_000
    msg = joint_state_msg(rclpy_kit(), 10**9, ('crank', huge), (0.1, 0.2), (), ())
    d.joint_state(msg, 10**9)
    msg = joint_state_msg(rclpy_kit(), 10**9, (huge, huge), (0.1, 0.2), (), ())
    d.joint_state(msg, 10**9)
    assert len(d.events) == 2
    for _, text in d.events:
        assert len(text) <= 4 * LOG_CHARS + 40 and 'characters)' in text, len(text)


def test_the_controller_yaml_wires_the_commands_to_an_effort_controller(ur5_run):
    """config/forward_command_controller.yaml: an effort forward_command_controller whose
    joints are the estimator's command_joints, in order; the estimator part is valid and
    its commands come out in that order."""
    import yaml

    from mbfg_ros.ros.params import load_params_file
    path = REPO / 'config' / 'forward_command_controller.yaml'
    data = yaml.safe_load(path.read_text())
    ctrl = data['effort_controller']['ros__parameters']
    assert data['controller_manager']['ros__parameters']['effort_controller']['type'] == \
        'forward_command_controller/ForwardCommandController'
    assert ctrl['interface_name'] == 'effort'
    values = load_params_file(path)
    assert values['command_joints'] == ctrl['joints']
    system = ur5_run[0]
    settings = parse_estimator({**values, 'mechanism': str(URDF / 'ur5.urdf'),
                                'overlay': str(URDF / 'ur5_sensors.yaml')})
    d = EstimatorDriver(system, settings)
    assert list(d.law.names) == ctrl['joints']
    assert d.command_timeout_ns == int(0.02 * NS)
    assert '-r ~/torque_commands:=/effort_controller/commands' in path.read_text()
