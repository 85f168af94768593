"""``~/markers`` over DDS: the estimator draws its estimate, the simulator the truth.

The marker geometry is checked against the state published at the same stamp
(bodies, joints, IMU arrows, ellipses), and the rate against ``markers_rate``
(the markers come at their own rate, not once per tick).
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from support.ros_nodes import (
    Peer,
    _publish_in_real_time,
    _valid_messages,
    start,
    stop,
)
from support.ros_data import fourbar_data, fourbar_path, unique_domain

from mbfg_ros.core.interface import DrawingGeometry
from mbfg_ros.ros import conversions as cv
from mbfg_ros.ros.markers import marker_array_to_segments

pytestmark = pytest.mark.ros


def _check_against(geometry: DrawingGeometry, drawn: dict, q, q_std=None, scale=3.0,
                   prefix='') -> None:
    (kind, segs, _), = drawn[prefix + 'bodies']
    np.testing.assert_allclose(segs, geometry.segments(q), atol=1e-12)
    (kind, pts, _, _), = drawn[prefix + 'joints']
    np.testing.assert_allclose(pts, geometry.joints(q), atol=1e-12)
    arrows = np.array([a[1] for a in drawn[prefix + 'imus']])
    np.testing.assert_allclose(arrows, geometry.imu_arrows(q), atol=1e-12)
    if q_std is not None:
        ell = np.array([e[1] for e in drawn[prefix + 'uncertainty']])
        want = geometry.ellipses(q, q_std, scale)
        np.testing.assert_allclose(ell[:, :2], want[:, :2], atol=1e-12)
        np.testing.assert_allclose(ell[:, 2:], 2 * want[:, 2:], rtol=1e-9, atol=1e-6)


def test_the_estimator_draws_its_estimate_at_the_markers_rate(tmp_path):
    system = fourbar_data()[0]
    geometry = system.drawing()
    domain = unique_domain(25)
    proc = start('estimator_node', {'mechanism': fourbar_path(), 'frequency': 200.0,
                                    'lag_duration': 0.1, 'markers_rate': 20.0,
                                    'frame_id': 'mechanism', 'covariance_every': 1,
                                    'diagnostics_period': 0.2}, domain, tmp_path)
    peer = Peer(domain)
    try:
        pubs = peer.connect({'/joint_states': 'JointState', '/imu/coupler_imu': 'Imu'},
                            {'/estimator_node/state': 'JointState',
                             '/estimator_node/state_stddev': 'JointState',
                             '/estimator_node/markers': 'MarkerArray',
                             '/diagnostics': 'DiagnosticArray'})
        markers = peer.inbox['/estimator_node/markers']
        states = peer.inbox['/estimator_node/state']
        t0 = peer.node.get_clock().now().nanoseconds + 100_000_000
        msgs, _ = _valid_messages(peer, system, t0, duration=1.0)
        wall0 = time.monotonic()
        _publish_in_real_time(peer, {'js': pubs['/joint_states'],
                                     'imu': pubs['/imu/coupler_imu']}, msgs)
        t_end = msgs[-1][0]
        peer.spin_until(lambda: states and cv.stamp_ns(states[-1].header.stamp)
                        >= t_end - 10_000_000, 20, 'the last estimates')
        peer.spin_until(lambda: markers and cv.stamp_ns(markers[-1].markers[0].header.stamp)
                        >= cv.stamp_ns(states[-1].header.stamp), 20, 'the last markers')
        wall = time.monotonic() - wall0
    finally:
        peer.close()
        rc = stop(proc)
    assert rc == 0, (tmp_path / 'estimator_node.log').read_text()
    by_stamp = {cv.stamp_ns(m.header.stamp): m for m in states}
    stds = {cv.stamp_ns(m.header.stamp): m for m in peer.inbox['/estimator_node/state_stddev']}
    checked = 0
    for m in markers:
        t = cv.stamp_ns(m.markers[0].header.stamp)
        assert {mk.header.frame_id for mk in m.markers} == {'mechanism'}
        if t in by_stamp and t in stds:
            _check_against(geometry, marker_array_to_segments(m), np.array(by_stamp[t].position),
                           np.array(stds[t].position))
            checked += 1
    assert checked >= 5, (checked, len(markers))
    # 1 s of estimates at 200 Hz (fewer when a loaded machine merges ticks), markers at
    # 20 Hz on the steady clock: about 20 over the run's wall time, each stamp once, never
    # more than the timer's rate allows (not one per tick)
    stamps = [cv.stamp_ns(m.markers[0].header.stamp) for m in markers]
    assert len(set(stamps)) == len(stamps)
    assert len(markers) <= 20.0 * wall + 3, (len(markers), len(states), wall)
    assert len(markers) < len(states), (len(markers), len(states))


def test_the_simulator_draws_the_truth_in_its_own_colour(tmp_path):
    system = fourbar_data()[0]
    geometry = system.drawing()
    domain = unique_domain(26)
    proc = start('simulator_node', {'mechanism': fourbar_path(), 'realtime': 'true',
                                    'publish_rate': 50.0, 'markers_rate': 10.0}, domain,
                 tmp_path)
    peer = Peer(domain)
    try:
        peer.listen('/simulator_node/markers', 'MarkerArray')
        peer.listen('/simulator_node/ground_truth', 'JointState')
        markers = peer.inbox['/simulator_node/markers']
        truth = peer.inbox['/simulator_node/ground_truth']
        peer.spin_until(lambda: len(markers) >= 6 and len(truth) > 30, 30,
                        'truth markers and ground truth')
        peer.spin_until(lambda: cv.stamp_ns(truth[-1].header.stamp)
                        >= cv.stamp_ns(markers[-1].markers[0].header.stamp), 10,
                        'the ground truth of the last markers')
    finally:
        peer.close()
        rc = stop(proc)
    assert rc == 0, (tmp_path / 'simulator_node.log').read_text()
    by_stamp = {cv.stamp_ns(m.header.stamp): np.array(m.position) for m in truth}
    checked = 0
    for m in markers:
        drawn = marker_array_to_segments(m)
        assert set(drawn) == {'truth/bodies', 'truth/joints', 'truth/imus'}
        t = cv.stamp_ns(m.markers[0].header.stamp)
        if t in by_stamp:
            _check_against(geometry, drawn, by_stamp[t], prefix='truth/')
            checked += 1
    assert checked >= 3, (checked, len(markers))
    colour = marker_array_to_segments(markers[-1])['truth/bodies'][0][2]
    assert colour[0] > 0.5 and colour[2] < 0.5                  # red, not the estimate's blue
