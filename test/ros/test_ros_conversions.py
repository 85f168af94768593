"""Messages <-> records and parameters: no DDS, rosbags dataclasses and rclpy messages."""
from __future__ import annotations

import math
from types import SimpleNamespace as NS

import numpy as np
import pytest
from support.ros_data import REPO

from mbfg_ros.core.bag import typestore
from mbfg_ros.core.measurements import quaternion_from_yaw, quaternion_yaw
from mbfg_ros.ros import conversions as cv
from mbfg_ros.ros.params import (
    ESTIMATOR_PARAMS,
    SIMULATOR_PARAMS,
    ParameterError,
    load_params_file,
    noise_note,
    parse_estimator,
    parse_simulator,
)


@pytest.fixture(scope='module')
def kit():
    return cv.rosbags_kit(typestore())


def test_stamps_convert_to_integer_nanoseconds_without_rounding(kit):
    t = 1_700_000_000_123_456_789
    msg = cv.joint_state_msg(kit, t, ['crank'], [0.1])
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1_700_000_000, 123_456_789)
    assert cv.stamp_ns(msg.header.stamp) == t


def test_joint_state_fields_map_to_encoder_rate_and_effort(kit):
    msg = cv.joint_state_msg(kit, 2 * 10**9, ['crank', 'coupler_joint'], [0.1, 0.2],
                             [], [3.0, -1.0])
    t, rec, unknown, nonfinite = cv.joint_state_to_record(msg, ['crank', 'coupler_joint'])
    assert t == 2 * 10**9 and rec.t == 2.0 and unknown == () and nonfinite == 0
    assert rec.names == ('crank', 'coupler_joint')
    np.testing.assert_array_equal(rec.position, [0.1, 0.2])
    assert np.all(np.isnan(rec.velocity))           # empty array = not given
    np.testing.assert_array_equal(rec.effort, [3.0, -1.0])


def test_unknown_joint_names_are_dropped_and_reported(kit):
    msg = cv.joint_state_msg(kit, 10**9, ['wheel', 'crank'], [5.0, 0.3])
    _, rec, unknown, _ = cv.joint_state_to_record(msg, ['crank'])
    assert rec.names == ('crank',) and unknown == ('wheel',)
    np.testing.assert_array_equal(rec.position, [0.3])


def test_non_finite_values_become_not_given_and_are_counted(kit):
    msg = cv.joint_state_msg(kit, 10**9, ['crank', 'coupler_joint'], [np.nan, 0.2],
                             [np.inf, 1.0])
    _, rec, _, nonfinite = cv.joint_state_to_record(msg, ['crank', 'coupler_joint'])
    assert nonfinite == 2
    assert np.isnan(rec.position[0]) and np.isnan(rec.velocity[0])
    assert rec.position[1] == 0.2


@pytest.mark.parametrize('position, reason', [([0.1], 'length_mismatch'),
                                              ([np.nan, np.nan], 'no_usable_values')])
def test_unusable_joint_states_are_rejected_with_a_reason(kit, position, reason):
    msg = cv.joint_state_msg(kit, 10**9, ['crank', 'coupler_joint'], position)
    with pytest.raises(cv.InputRejected, match=reason):
        cv.joint_state_to_record(msg, ['crank', 'coupler_joint'])


def test_zero_stamp_is_rejected_unless_a_receive_time_is_given(kit):
    msg = cv.joint_state_msg(kit, 0, ['crank'], [0.1])
    with pytest.raises(cv.InputRejected, match='no_stamp'):
        cv.joint_state_to_record(msg)
    assert cv.joint_state_to_record(msg, now_ns=5)[0] == 5


def test_imu_reads_the_3_axis_gyro_accel_and_the_unit_quaternion(kit):
    quat = np.array([0.1, -0.2, 0.3, 0.9])
    msg = cv.imu_msg(kit, 10**9, 'imu', [0.1, -0.2, 0.7], [1.5, -9.0, 0.25], 2.0 * quat,
                     gyro_var=4e-4)
    t, rec = cv.imu_to_record(msg, 'coupler_imu')
    assert rec.sensor == 'coupler_imu'
    np.testing.assert_array_equal(rec.gyro, [0.1, -0.2, 0.7])
    np.testing.assert_array_equal(rec.accel, [1.5, -9.0, 0.25])
    np.testing.assert_allclose(rec.orientation, quat / np.linalg.norm(quat), atol=1e-12)
    np.testing.assert_allclose(rec.gyro_var, [4e-4] * 3)
    assert rec.accel_var is None          # zero covariance: use the configured σ


def test_the_quaternion_is_normalised_by_numpy_s_norm_bit_for_bit(kit):
    """The record's orientation is ``q / np.linalg.norm(q)`` exactly (issue 24 computes the
    norm as numpy does, sqrt of ``q.dot(q)``, without its overhead), and None where that
    norm is not above 1e-6; quaternions of every magnitude, some just around the bound."""
    rng = np.random.default_rng(8)
    seen = [0, 0]
    for k in range(3000):
        q = rng.standard_normal(4) * 10.0 ** rng.uniform(-160, 150)
        if k % 3 == 0:
            q = q / np.linalg.norm(q) * 1e-6 * (1.0 + rng.uniform(-1e-15, 1e-15))
        msg = cv.imu_msg(kit, 10**9, 'imu', [0.1, 0.2, 0.3], [0.0, 0.0, 9.8], q)
        quat = cv.imu_to_record(msg, 'x')[1].orientation
        a = cv._imu_values(msg)[0:4]
        norm = float(np.linalg.norm(a))
        if norm > 1e-6:
            assert quat.tobytes() == (a / norm).tobytes(), q
        else:
            assert quat is None, q
        seen[quat is None] += 1
    assert min(seen) > 100, seen


def test_a_planar_reading_keeps_its_yaw_through_the_quaternion(kit):
    angle = 2.5
    msg = cv.imu_msg(kit, 10**9, 'imu', [0, 0, 0.7], [1.5, -9.0, 0], quaternion_from_yaw(angle))
    rec = cv.imu_to_record(msg, 'x')[1]
    assert math.isclose(quaternion_yaw(rec.orientation), angle, abs_tol=1e-12)


def test_imu_orientation_is_ignored_when_its_covariance_says_not_provided(kit):
    msg = cv.imu_msg(kit, 10**9, 'imu', [0, 0, 0.7], [1.5, -9.0, 0], None)
    assert msg.orientation_covariance[0] == -1.0
    assert cv.imu_to_record(msg, 'x')[1].orientation is None


def test_quaternion_yaw_matches_the_rotation_of_the_x_axis():
    for yaw in np.linspace(-3.1, 3.1, 13):
        # rotation about z of yaw, then a small tilt would change nothing planar
        q = (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2))
        x, y, z, w = q
        rx = (1 - 2 * (y * y + z * z), 2 * (x * y + w * z))     # R e_x
        assert quaternion_yaw(q) == pytest.approx(math.atan2(rx[1], rx[0]), abs=1e-12)


def test_reference_samples_interpolate_and_hold_at_the_ends():
    def dur(s):
        return NS(sec=int(s), nanosec=int(round((s - int(s)) * 1e9)))
    msg = NS(joint_names=['crank'], header=NS(stamp=NS(sec=10, nanosec=0)),
             points=[NS(positions=[0.0], velocities=[1.0], accelerations=[],
                        time_from_start=dur(0.0)),
                     NS(positions=[1.0], velocities=[1.0], accelerations=[],
                        time_from_start=dur(1.0))])
    ref = cv.trajectory_to_reference(msg)
    assert ref.sample(10.25)[0][0] == pytest.approx(0.25)
    assert ref.sample(9.0)[0][0] == 0.0 and ref.sample(12.0)[0][0] == 1.0
    assert ref.sample(10.5)[2][0] == 0.0           # accelerations not given -> 0


def test_rclpy_and_rosbags_kits_build_messages_with_the_same_content(kit):
    rk = cv.rclpy_kit()
    for k in (kit, rk):
        msg = cv.imu_msg(k, 3 * 10**9 + 5, 'f', [0, 0, 0.1], [0.2, 0.3, 0],
                         quaternion_from_yaw(0.4))
        t, rec = cv.imu_to_record(msg, 's')
        assert t == 3 * 10**9 + 5 and quaternion_yaw(rec.orientation) == pytest.approx(0.4)
        d = cv.diagnostics_msg(k, 10, 'n', 'h', 1, 'm', {'a': 1})
        assert d.status[0].values[0].key == 'a'


# ------------------------------------------------------------------ parameters

def test_every_parameter_has_a_description_and_a_default_in_range():
    for spec in ESTIMATOR_PARAMS + SIMULATOR_PARAMS:
        assert len(spec.description) > 15, spec.name
        if spec.lo is not None:
            assert spec.lo <= spec.default <= spec.hi, spec.name


def test_parameters_build_the_frozen_estimator_config():
    s = parse_estimator({'mechanism': 'm.yaml', 'frequency': 50, 'kp': 4.0,
                         'command_joints': ['crank']})
    assert s.config.frequency == 50.0 and isinstance(s.config.frequency, float)
    assert s.config.kp == 4.0 and s.config.command_joints == ('crank',)
    with pytest.raises(Exception):
        s.config.frequency = 1.0          # frozen


@pytest.mark.parametrize('values, match', [
    ({'frequency': -1.0}, "'frequency': must be >= 0.1"),
    ({'frequency': 'fast'}, "'frequency': expected a number"),
    ({'command_joints': 'crank'}, "'command_joints': expected a list of strings"),
    ({'frequncy': 5.0}, "unknown parameter 'frequncy'"),
])
def test_bad_parameters_are_named_in_one_message(values, match):
    with pytest.raises(ParameterError, match=match):
        parse_estimator({'mechanism': 'm.yaml', **values})


def test_missing_mechanism_parameter_is_an_error():
    with pytest.raises(ParameterError, match="'mechanism'.*'robot_description'.*is required"):
        parse_estimator({})
    with pytest.raises(ParameterError, match="'storage': expected mcap or sqlite3"):
        parse_simulator({'mechanism': 'm', 'storage': 'bag'})


def test_the_shipped_params_file_parses_for_the_node_and_the_replay():
    values = load_params_file(REPO / 'config' / 'estimator.yaml')
    s = parse_estimator({**values, 'mechanism': 'm.yaml'})
    assert s.values['frequency'] == values['frequency']


def test_the_simulator_says_when_its_sensors_are_exact_and_the_noise_file_makes_them_real():
    """Issue 30 item 4: zero noise is the default and is announced; the shipped
    config/simulator_noise.yaml turns on every sensor imperfection."""
    exact = parse_simulator({'mechanism': 'm.urdf'})
    note = noise_note(exact.values)
    assert note is not None and 'config/simulator_noise.yaml' in note
    values = load_params_file(REPO / 'config' / 'simulator_noise.yaml', 'simulator_node')
    noisy = parse_simulator({**values, 'mechanism': 'm.urdf'})
    assert noise_note(noisy.values) is None
    for name in ('encoder_resolution', 'encoder_sigma', 'encoder_rate_sigma', 'gyro_sigma',
                 'accel_sigma'):
        assert noisy.values[name] > 0.0, name
        assert noise_note({**exact.values, name: 0.01}) is None, name
    assert noisy.values['encoder_resolution'] == pytest.approx(2 * math.pi / 4096)


def test_node_specific_parameters_override_the_wildcard(tmp_path):
    p = tmp_path / 'p.yaml'
    p.write_text('/**:\n  ros__parameters:\n    frequency: 10.0\n    kp: 1.0\n'
                 '/ns/estimator_node:\n  ros__parameters:\n    frequency: 20.0\n'
                 'other_node:\n  ros__parameters:\n    frequency: 30.0\n')
    assert load_params_file(p) == {'frequency': 20.0, 'kp': 1.0}


def test_params_file_errors_name_the_file_and_line(tmp_path):
    p = tmp_path / 'bad.yaml'
    p.write_text('/**:\n  ros__parameters:\n    frequency: [1\n')
    with pytest.raises(ParameterError, match=r'bad.yaml: line \d+: not valid YAML'):
        load_params_file(p)
    p.write_text('frequency: 10\n')
    with pytest.raises(ParameterError, match=r"no '/\*\*' or 'estimator_node' entry"):
        load_params_file(p)
    with pytest.raises(ParameterError, match='parameters file not found'):
        load_params_file(tmp_path / 'none.yaml')
