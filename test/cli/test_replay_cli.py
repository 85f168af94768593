"""mbfg-replay on real rosbag2 files written by rosbags (simulated four-bar data)."""
from __future__ import annotations

import csv
import functools
import re

import numpy as np
import pytest
from support.ros_data import REPO, T0, fourbar_data, fourbar_path, fourbar_system

from mbfg_ros.core.bag import bag_topics, read_messages
from mbfg_ros.cli.replay import main, replay
from mbfg_ros.cli.demo import write_simulation_bag
from mbfg_ros.core.angles import wrap_angle
from mbfg_ros.planar.sensors import joint_positions
from mbfg_ros.ros import conversions as cv

PARAMS = {'frequency': 200.0, 'lag_duration': 0.1, 'encoder_sigma': 0.002}


@functools.lru_cache(maxsize=None)
def _bags(root):
    """An MCAP and a sqlite3 bag of the same simulation (records restamped to sim time)."""
    from dataclasses import replace
    system, traj, recs = fourbar_data()
    sim_recs = [replace(r, t=r.t - T0) for r in recs]
    out = {}
    for storage in ('mcap', 'sqlite3'):
        path = root / f'sim_{storage}'
        write_simulation_bag(path, system, traj, sim_recs, storage=storage)
        out[storage] = path
    return out


@pytest.fixture(scope='module')
def bags(tmp_path_factory):
    return _bags(tmp_path_factory.mktemp('bags'))


def test_replay_writes_the_node_topics_with_the_node_types(bags, tmp_path):
    res = replay(bags['mcap'], fourbar_path(), PARAMS, output=tmp_path / 'out',
                 plot=tmp_path / 'p.png', show_progress=False)
    assert bag_topics(tmp_path / 'out') == {
        '/estimator_node/joint_states': cv.TYPES['JointState'],
        '/estimator_node/state': cv.TYPES['JointState'],
        '/estimator_node/state_stddev': cv.TYPES['JointState'],
        '/estimator_node/torque_commands': cv.TYPES['Float64MultiArray'],
        '/diagnostics': cv.TYPES['DiagnosticArray']}
    assert (tmp_path / 'p.png').stat().st_size > 10_000
    rows = list(csv.reader(open(tmp_path / 'out.csv')))
    assert rows[0][:3] == ['t', 'x1.position', 'y1.position'] and len(rows) - 1 == len(res.times)
    states = [m.msg for m in read_messages(tmp_path / 'out',
                                           {'/estimator_node/state': cv.TYPES['JointState']})]
    assert len(states) == len(res.times) > 150
    assert list(states[0].name) == list(res.coordinate_names)
    np.testing.assert_array_equal(states[-1].position, res.q[-1])
    # issue 30 item 1: the CSV has what the bag has, τ̂ and the σ's included
    header, body = rows[0], rows[1:]
    col = {name: k for k, name in enumerate(header)}
    assert len(col) == len(header)                                   # no name twice

    def series(name):
        return np.array([float(r[col[name]]) for r in body])
    joints = [m.msg for m in read_messages(tmp_path / 'out', {
        '/estimator_node/joint_states': cv.TYPES['JointState']})]
    stddev = [m.msg for m in read_messages(tmp_path / 'out', {
        '/estimator_node/state_stddev': cv.TYPES['JointState']})]
    assert len(joints) == len(stddev) == len(body)
    for k, name in enumerate(joints[0].name):
        np.testing.assert_allclose(series(f'{name}.effort'), [m.effort[k] for m in joints],
                                   rtol=1e-8, equal_nan=True)
        np.testing.assert_allclose(series(f'{name}.position'), [m.position[k] for m in joints],
                                   rtol=1e-8, atol=1e-12)
    assert np.isfinite(series('crank.effort')).all()              # the actuated joint: τ̂
    for k, name in enumerate(stddev[0].name):
        np.testing.assert_allclose(series(f'{name}.position_std'),
                                   [m.position[k] for m in stddev], rtol=1e-8)
        np.testing.assert_allclose(series(f'{name}.velocity_std'),
                                   [m.velocity[k] for m in stddev], rtol=1e-8)
    assert series('x1.position_std')[-1] > 0


def test_replayed_crank_is_closer_to_the_truth_than_the_encoder(bags):
    system, traj, recs = fourbar_data()
    res = replay(bags['mcap'], fourbar_path(), PARAMS, show_progress=False)
    j = [jt.name for jt in system.mech.joints].index('crank')
    truth = np.unwrap(np.array([joint_positions(system, q) for q in traj.q])[:, j])
    est = np.array(res.joint_position)[:, j]
    err_est = wrap_angle(est - np.interp(res.t, traj.t + T0, truth))
    enc = [r for r in recs if not hasattr(r, 'sensor')]
    err_raw = wrap_angle(np.array([r.position[j] for r in enc])
                         - np.interp([r.t for r in enc], traj.t + T0, truth))
    skip = 20                                  # initial transient
    assert np.sqrt(np.mean(err_est[skip:] ** 2)) < np.sqrt(np.mean(err_raw ** 2))


def test_mcap_and_sqlite3_bags_give_identical_estimates(bags):
    a = replay(bags['mcap'], fourbar_path(), PARAMS, show_progress=False)
    b = replay(bags['sqlite3'], fourbar_path(), PARAMS, show_progress=False)
    np.testing.assert_array_equal(np.array(a.q), np.array(b.q))


def test_the_command_line_prints_speed_and_outputs(bags, tmp_path, capsys):
    params = tmp_path / 'p.yaml'
    params.write_text('estimator_node:\n  ros__parameters:\n    frequency: 100.0\n')
    rc = main([str(bags['mcap']), '--mechanism', str(fourbar_path()), '--params', str(params),
               '--output', str(tmp_path / 'o'), '--quiet'])
    out = capsys.readouterr().out
    assert rc == 0
    # the speed is printed either way; how fast is the bench's business, not a test's
    assert re.search(r'[0-9.]+x (faster|slower) than real time', out), out
    assert str(tmp_path / 'o.csv') in out
    assert 'ms per tick' in out


def test_a_missing_bag_is_one_line_and_exit_2(tmp_path, capsys):
    rc = main([str(fourbar_path()), str(tmp_path / 'nope'), '--quiet'])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and 'nope: no such bag' in err[0]


def test_a_bag_without_sensor_topics_is_one_line_and_exit_2(tmp_path, capsys):
    from mbfg_ros.core.bag import BagWriter
    kit = cv.rosbags_kit(__import__('mbfg_ros.core.bag').core.bag.typestore())
    with BagWriter(tmp_path / 'b') as w:
        w.write('/chatter', cv.TYPES['Clock'], 10**9, cv.clock_msg(kit, 10**9))
    rc = main([str(fourbar_path()), str(tmp_path / 'b'), '--quiet'])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert 'none of the expected topics /joint_states' in err[0] and '/chatter' in err[0]


def test_a_truncated_bag_writes_what_was_estimated_and_exits_2(bags, tmp_path, capsys):
    import shutil
    bag = tmp_path / 'cut'
    shutil.copytree(bags['mcap'], bag)
    f = next(bag.glob('*.mcap'))
    data = f.read_bytes()
    f.write_bytes(data[:int(len(data) * 0.6)])
    rc = main([str(fourbar_path()), str(bag), '--output', str(tmp_path / 'o'),
               '--quiet'])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert 'before the damage' in err[0] and 'wrote what was estimated' in err[0]
    rows = list(csv.reader(open(tmp_path / 'o.csv')))
    assert len(rows) > 50
    states = list(read_messages(tmp_path / 'o', {'/estimator_node/state':
                                                 cv.TYPES['JointState']}))
    assert len(states) == len(rows) - 1


def test_a_bad_params_file_entry_is_named(bags, tmp_path, capsys):
    params = tmp_path / 'p.yaml'
    params.write_text('/**:\n  ros__parameters:\n    frequncy: 100.0\n')
    rc = main([str(fourbar_path()), str(bags['mcap']), '--params', str(params),
               '--quiet'])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown parameter 'frequncy'" in err and 'p.yaml' in err


def test_the_shipped_params_file_sets_what_the_replay_driver_then_uses():
    import yaml

    from mbfg_ros.ros.driver import EstimatorDriver
    from mbfg_ros.ros.params import load_params_file, parse_estimator

    path = REPO / 'config' / 'estimator.yaml'
    written = yaml.safe_load(path.read_text())['/**']['ros__parameters']
    values = load_params_file(path)
    settings = parse_estimator({**values, 'mechanism': str(fourbar_path())})
    driver = EstimatorDriver(fourbar_system(), settings)
    assert driver.frequency == written['frequency']
    assert driver.lag_ns == round(written['lag_duration'] * 1e9)
    for key in ('encoder_sigma', 'gyro_sigma', 'accel_sigma', 'dynamics_sigma', 'kp', 'kd'):
        assert getattr(driver.estimator.config, key) == written[key], key
