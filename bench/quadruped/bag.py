"""The simulated quadruped's runs as rosbag2 bags of standard messages, and back.

Topics (all at the 1 kHz physics rate, stamped with the sample time + ``T0``):

=====================================  ===============================  ==========================
``/clock``                             rosgraph_msgs/Clock
``/joint_states``                      sensor_msgs/JointState           encoders, velocities,
                                                                        motor torques (efforts)
``/imu/base``                          sensor_msgs/Imu                  ``base_link``; no
                                                                        orientation (cov[0] = −1)
``/feet/<FOOT>/contact``               std_msgs/Bool                    the contact flag
``/feet/<FOOT>/wrench``                geometry_msgs/WrenchStamped      ground on foot, in the
                                                                        ``<FOOT>`` link frame
``/truth/odom``                        nav_msgs/Odometry                ``world`` → ``base_link``,
                                                                        twist in ``base_link``
``/truth/feet/<FOOT>/wrench``          geometry_msgs/WrenchStamped      ground on foot, ``world``
=====================================  ===============================  ==========================

``<FOOT>`` is the URDF link (``FL_FOOT``, ``FR_FOOT``, ``HL_FOOT``, ``HR_FOOT``). The contact
is the pair the estimator node already publishes for one link (``~/contact`` Bool and
``~/external_wrench`` WrenchStamped, docs/external-torques.md): standard messages a robot
driver can publish without a custom package, the flag separate from the force so a robot
with only contact switches publishes only the Bool (docs/floating-base.md argues it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mbfg_ros.core.bag import BagWriter, read_messages, typestore
from mbfg_ros.core.output import atomic_dir
from mbfg_ros.ros import conversions as cv

from bench.quadruped.sim import FEET, Run

NS = 1_000_000_000
T0 = NS
"""Stamps start 1 s after zero (a zero stamp reads as "unset" in ROS tools)."""
FOOT_LINKS = tuple(f'{f}_FOOT' for f in FEET)
ODOM = 'nav_msgs/msg/Odometry'
TOPICS = {'/clock': cv.TYPES['Clock'], '/joint_states': cv.TYPES['JointState'],
          '/imu/base': cv.TYPES['Imu'], '/truth/odom': ODOM,
          **{f'/feet/{f}/contact': cv.TYPES['Bool'] for f in FOOT_LINKS},
          **{f'/feet/{f}/wrench': cv.TYPES['WrenchStamped'] for f in FOOT_LINKS},
          **{f'/truth/feet/{f}/wrench': cv.TYPES['WrenchStamped'] for f in FOOT_LINKS}}
"""Every topic of a quadruped bag and its type."""


def _odometry(kit: cv.MessageKit, t_ns: int, p: np.ndarray, quat: np.ndarray,
              v: np.ndarray, w: np.ndarray) -> Any:
    """nav_msgs/Odometry: pose in ``world``, twist in ``base_link`` (REP-105)."""
    mk = kit.make
    vec = 'geometry_msgs/msg/Vector3'
    pose = mk('geometry_msgs/msg/Pose',
              position=mk('geometry_msgs/msg/Point', x=float(p[0]), y=float(p[1]),
                          z=float(p[2])),
              orientation=mk('geometry_msgs/msg/Quaternion', w=float(quat[0]),
                             x=float(quat[1]), y=float(quat[2]), z=float(quat[3])))
    twist = mk('geometry_msgs/msg/Twist', linear=mk(vec, x=float(v[0]), y=float(v[1]),
                                                    z=float(v[2])),
               angular=mk(vec, x=float(w[0]), y=float(w[1]), z=float(w[2])))
    zero = kit.fixed(np.zeros(36))
    header = mk('std_msgs/msg/Header', frame_id='world',
                stamp=mk('builtin_interfaces/msg/Time', **cv.ns_to_stamp_fields(t_ns)))
    return mk(ODOM, header=header, child_frame_id='base_link',
              pose=mk('geometry_msgs/msg/PoseWithCovariance', pose=pose, covariance=zero),
              twist=mk('geometry_msgs/msg/TwistWithCovariance', twist=twist, covariance=zero))


def write_bag(run: Run, path: str | Path, storage: str = 'mcap', compress: str = '',
              gyro_var: float = 0.0, accel_var: float = 0.0) -> int:
    """Write ``run`` to the bag ``path`` (replaced atomically; callers check_output first).

    :param compress: '' (none), 'file' or 'message' (rosbag2's zstd compression modes;
        'message' with sqlite3 only); rosbags and ``ros2 bag`` read both.
    :returns: the number of messages written.
    """
    store = typestore()
    kit = cv.rosbags_kit(store)
    zero3 = np.zeros(3)
    with atomic_dir(path, 'bag') as tmp:
        w = BagWriter(tmp, storage, store, compress)
        with w:
            _write_rows(run, w, kit, zero3, gyro_var, accel_var)
        return w.count


def _write_rows(run: Run, w: BagWriter, kit: cv.MessageKit, zero3: np.ndarray,
                gyro_var: float, accel_var: float) -> None:
    for k, t in enumerate(run.t):
        t_ns = T0 + int(round(t * NS))
        w.write('/clock', cv.TYPES['Clock'], t_ns, cv.clock_msg(kit, t_ns))
        w.write('/joint_states', cv.TYPES['JointState'], t_ns,
                cv.joint_state_msg(kit, t_ns, run.joint_names, run.q[k], run.qd[k],
                                   run.tau[k]))
        w.write('/imu/base', cv.TYPES['Imu'], t_ns,
                cv.imu_msg(kit, t_ns, 'base_link', run.gyro[k], run.acc[k], None,
                           gyro_var, accel_var))
        for i, foot in enumerate(FOOT_LINKS):
            w.write(f'/feet/{foot}/contact', cv.TYPES['Bool'], t_ns,
                    kit.make(cv.TYPES['Bool'], data=bool(run.contact[k, i])))
            w.write(f'/feet/{foot}/wrench', cv.TYPES['WrenchStamped'], t_ns,
                    cv.wrench_msg(kit, t_ns, foot, np.r_[zero3, run.force[k, i]]))
            w.write(f'/truth/feet/{foot}/wrench', cv.TYPES['WrenchStamped'], t_ns,
                    cv.wrench_msg(kit, t_ns, 'world', np.r_[zero3, run.force_true[k, i]]))
        w.write('/truth/odom', ODOM, t_ns,
                _odometry(kit, t_ns, run.p[k], run.quat[k], run.v[k], run.w[k]))


def _vec(v: Any) -> list[float]:
    return [v.x, v.y, v.z]


def read_bag(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of a quadruped bag, one row per ``/joint_states`` stamp.

    Keys: ``t`` (s from the first sample's stamp − its period), ``joint_names``, ``q``,
    ``qd``, ``tau``, ``gyro``, ``acc``, ``contact`` (T×4), ``force`` (T×4×3, foot frames),
    ``p``, ``quat`` (w x y z), ``v``, ``w`` (truth), ``force_true`` (T×4×3, world).
    Every topic must have a message at every stamp (the writer's layout).
    """
    rows: dict[int, dict[str, Any]] = {}
    names: list[str] = []
    for m in read_messages(path, TOPICS):
        if m.topic == '/clock':
            continue
        stamp = (cv.stamp_ns(m.msg.header.stamp) if hasattr(m.msg, 'header') else m.log_ns)
        r = rows.setdefault(stamp, {})
        if m.topic == '/joint_states':
            names = list(m.msg.name)
            r['q'], r['qd'], r['tau'] = m.msg.position, m.msg.velocity, m.msg.effort
        elif m.topic == '/imu/base':
            r['gyro'] = _vec(m.msg.angular_velocity)
            r['acc'] = _vec(m.msg.linear_acceleration)
        elif m.topic == '/truth/odom':
            pose, tw = m.msg.pose.pose, m.msg.twist.twist
            r['p'] = _vec(pose.position)
            o = pose.orientation
            r['quat'] = [o.w, o.x, o.y, o.z]
            r['v'], r['w'] = _vec(tw.linear), _vec(tw.angular)
        else:
            foot = m.topic.split('/')[-2]
            i = FOOT_LINKS.index(foot)
            if m.topic.endswith('/contact'):
                r.setdefault('contact', [0.0] * 4)[i] = float(m.msg.data)
            elif m.topic.startswith('/truth/'):
                r.setdefault('force_true', [[0.0] * 3] * 4)[i] = _vec(m.msg.wrench.force)
            else:
                r.setdefault('force', [[0.0] * 3] * 4)[i] = _vec(m.msg.wrench.force)
    stamps = sorted(rows)
    keys = ('q', 'qd', 'tau', 'gyro', 'acc', 'contact', 'force', 'p', 'quat', 'v', 'w',
            'force_true')
    out: dict[str, Any] = {k: np.array([rows[s][k] for s in stamps], dtype=float)
                           for k in keys}
    ts = np.array(stamps, dtype=np.int64)
    out['t'] = (ts - T0) / NS
    out['joint_names'] = names
    return out
