"""What differs between the ROS 2 distros the package runs on, picked at run time.

Run on Kilted by ``make test`` and on Jazzy by ``make test-jazzy`` (``-m ros``). The
one API the package uses that not every distro has is rclpy's ``EventsExecutor``
(``rclpy.experimental``: Kilted, and Jazzy's newer 7.1.x releases; not Humble). Both
paths are tested on every distro: with it (DDS, below) and without it (the import
made to fail, as on Humble).
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import rclpy
import rclpy.executors
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
from support.ros_data import fourbar_data, fourbar_path, ros_env, unique_domain

from mbfg_ros.ros.polling import make_executor
from mbfg_ros.ros.params import ParameterError

pytestmark = pytest.mark.ros


def _has_events_executor() -> bool:
    try:
        from rclpy.experimental import EventsExecutor  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture
def ros_default_context():
    """The default context make_executor uses, initialised for one test."""
    rclpy.init(domain_id=unique_domain(24))
    yield
    rclpy.shutdown()


def test_auto_and_single_are_the_single_threaded_executor_on_every_distro(
        ros_default_context):
    for kind in ('auto', 'single'):
        ex = make_executor(kind)
        try:
            assert isinstance(ex, rclpy.executors.SingleThreadedExecutor)
        finally:
            ex.shutdown()


def test_without_the_events_executor_asking_for_it_is_one_clear_error(monkeypatch,
                                                                     ros_default_context):
    """As on Humble: ``rclpy.experimental`` does not exist."""
    monkeypatch.setitem(sys.modules, 'rclpy.experimental', None)
    with pytest.raises(ParameterError, match="'events' needs rclpy's EventsExecutor"):
        make_executor('events')
    ex = make_executor('auto')                  # the default still works
    ex.shutdown()


def _events_refused(r: subprocess.CompletedProcess) -> None:
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(lines) == 1 and lines[0].startswith('estimator_node: error: ')
    assert "'events' needs rclpy's EventsExecutor" in lines[0]


def test_without_the_events_executor_the_node_refuses_it_at_start_up():
    """As on Humble (``rclpy.experimental`` made unimportable in the node's process):
    ``executor: events`` is one error line and exit status 2, not a traceback."""
    code = ("import sys; sys.modules['rclpy.experimental'] = None; "
            'from mbfg_ros.ros.estimator_node import main; sys.exit(main())')
    r = subprocess.run([sys.executable, '-c', code, '--ros-args', '-p',
                        f'mechanism:={fourbar_path()}', '-p', 'executor:=events'],
                       env=ros_env(unique_domain(24)), capture_output=True, text=True,
                       timeout=60)
    _events_refused(r)


def test_with_the_events_executor_the_node_estimates_over_dds(tmp_path):
    """Where the distro has the EventsExecutor (Kilted, Jazzy 7.1.6 here) the node runs
    on it over DDS; where it has none (Humble) the node refuses it at start-up."""
    if not _has_events_executor():
        r = subprocess.run([sys.executable, '-m', 'mbfg_ros.ros.estimator_node', '--ros-args',
                            '-p', f'mechanism:={fourbar_path()}', '-p', 'executor:=events'],
                           env=ros_env(unique_domain(23)), capture_output=True, text=True,
                           timeout=60)
        _events_refused(r)
        return
    system = fourbar_data()[0]
    domain = unique_domain(23)
    proc = start('estimator_node', {'mechanism': fourbar_path(), 'frequency': 100.0,
                                    'lag_duration': 0.1, 'diagnostics_period': 0.2,
                                    'executor': 'events'}, domain, tmp_path)
    peer = Peer(domain)
    try:
        pubs = peer.connect(SENSORS, STATE_AND_DIAGNOSTICS)
        pub_js, pub_imu = pubs['/joint_states'], pubs['/imu/coupler_imu']
        states, diags = peer.inbox['/estimator_node/state'], peer.inbox['/diagnostics']
        t0 = peer.node.get_clock().now().nanoseconds + 100_000_000
        msgs, traj = _valid_messages(peer, system, t0, duration=0.4)
        _publish_in_real_time(peer, {'js': pub_js, 'imu': pub_imu}, msgs)
        peer.spin_until(lambda: len(states) > 10, 20, 'estimates')
        peer.spin_until(lambda: diag_values(diags[-1]).get('executor') == 'events', 20,
                        'the executor in /diagnostics')
        last = states[-1]
        k = int(round((last.header.stamp.sec * 10**9 + last.header.stamp.nanosec - t0) / 1e6))
        assert np.linalg.norm(np.array(last.position[:2]) - traj.q[k, :2]) < 0.01
    finally:
        peer.close()
        rc = stop(proc)
    assert rc == 0, (tmp_path / 'estimator_node.log').read_text()


def test_the_distro_under_test_is_reported():
    """Which rclpy ran (shown by pytest -rA / the CI log)."""
    from importlib.metadata import PackageNotFoundError, version
    found = {}
    for dist in ('ros-rclpy', 'ros-jazzy-rclpy'):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            pass
    assert found, 'no rclpy wheel'
    print(f'rclpy wheels: {found}; EventsExecutor: {_has_events_executor()}')
    assert rclpy.ok() in (True, False)
