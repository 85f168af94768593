"""Shared helpers of the ROS-edge and CLI tests: simulated four-bar data, a node's ROS env.

Their own checks are in test/ros/test_ros_support.py."""
from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
T0 = 1.0        # stamp of simulation time 0


def fourbar_path() -> Path:
    """The four-bar with joints crank/coupler_joint, actuator crank_motor, IMU coupler_imu."""
    cfg = REPO / 'config' / 'fourbar.yaml'
    return cfg if cfg.exists() else REPO / 'test' / 'data' / 'fourbar_estimator.yaml'


@functools.lru_cache(maxsize=None)
def fourbar_system():
    from mbfg_ros.planar.dynamics import load_system
    return load_system(fourbar_path())


@functools.lru_cache(maxsize=None)
def fourbar_data(duration: float = 1.0, rate: float = 200.0, seed: int = 3):
    """(system, trajectory, noisy measurement records) of the four-bar in free fall.

    Records are stamped ``T0 + t``.
    """
    from dataclasses import replace

    from mbfg_ros.planar.sensors import SensorConfig, simulate_measurements
    from mbfg_ros.simulation.forward import ForwardConfig, simulate

    system = fourbar_system()
    traj = simulate(system, duration, ForwardConfig(dt=1e-3))
    cfg = SensorConfig(encoder_rate=rate, encoder_counts=4096, encoder_sigma=0.002,
                       imu_rate=rate, gyro_sigma=0.01, accel_sigma=0.05)
    recs = simulate_measurements(system, traj.t, traj.q, traj.qd, traj.qdd, cfg,
                                 np.random.default_rng(seed))
    recs = [replace(r, t=r.t + T0) for r in recs]
    return system, traj, recs


def stamp_of(rec) -> int:
    return int(round(rec.t * 1e9))


def replay_driver(driver, recs, feed=None) -> list:
    """Feed an ``EstimatorDriver`` as the replay tool does: the ticks due before each
    record's stamp, then the record (``feed(t_ns, record)``; default ``driver.push``); the
    ticks due at the last stamp. Every tick's output, in order."""
    feed = driver.push if feed is None else feed
    outs, clock = [], None
    for r in recs:
        t = stamp_of(r)
        clock = t if clock is None else max(clock, t)
        outs += driver.advance(clock, inclusive=False)
        feed(t, r)
    outs += driver.advance(clock)
    return outs


def publish_record(cv, kit, pub_clock, pub_js, pub_imu, rec) -> None:
    """One four-bar record (:func:`fourbar_data`) over DDS as a simulator on sim time sends
    it: ``/clock`` at its stamp first, then its Imu (``coupler_imu``) or JointState."""
    t = stamp_of(rec)
    pub_clock.publish(cv.clock_msg(kit, t))
    if hasattr(rec, 'sensor'):
        pub_imu.publish(cv.imu_msg(kit, t, 'coupler_imu', rec.gyro, rec.accel, rec.orientation))
    else:
        pub_js.publish(cv.joint_state_msg(kit, t, rec.names, rec.position, rec.velocity,
                                          rec.effort))


def fourbar_publishers(peer, cv) -> tuple:
    """(``/clock``, ``/joint_states``, ``/imu/coupler_imu``) publishers of ``peer`` for
    :func:`publish_record`: a four-bar simulator's outputs (a deep queue for the readings)."""
    return (peer.create_publisher(cv.message_class('Clock'), '/clock', 10),
            peer.create_publisher(cv.message_class('JointState'), '/joint_states', 1000),
            peer.create_publisher(cv.message_class('Imu'), '/imu/coupler_imu', 1000))


def ros_env(domain: int) -> dict:
    """Environment of a node subprocess: the Makefile's ROS exports, a private domain."""
    env = dict(os.environ)
    env.update({'RMW_IMPLEMENTATION': 'rmw_fastrtps_cpp', 'ROS_DOMAIN_ID': str(domain),
                'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST',
                'PYTHONPATH': str(REPO) + os.pathsep + env.get('PYTHONPATH', ''),
                'PYTHONUNBUFFERED': '1', 'RCUTILS_COLORIZED_OUTPUT': '0'})
    return env


def unique_domain(offset: int = 0) -> int:
    """A domain id private to this test process (0..101 are valid everywhere)."""
    return 10 + (os.getpid() * 7 + offset) % 90


def write_joint_state_bag(path: Path, t: np.ndarray, names: list[str], *columns: np.ndarray,
                          topic: str = '/joint_states') -> None:
    """An MCAP rosbag2 of one JointState per sample ``t`` (s, stamped from 1 s), with
    ``names`` and the per-joint ``columns`` (positions, then velocities and efforts as
    given), each an array (samples, joints) in ``names``' order."""
    from mbfg_ros.core.bag import BagWriter, typestore
    from mbfg_ros.ros import conversions as cv
    kit = cv.rosbags_kit(typestore())
    with BagWriter(path, 'mcap') as w:
        for k in range(len(t)):
            ns = 10 ** 9 + int(round(t[k] * 1e9))
            w.write(topic, cv.TYPES['JointState'], ns, cv.joint_state_msg(
                kit, ns, names, *(list(x[k]) for x in columns)))
