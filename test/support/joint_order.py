"""JointState readings in another order than the model's (issue 29): the planar four-bar and
the UR5 with their simulated truth, and the records rewritten with the joints reversed, one
message per joint, or with unknown names among them.

Used by test/estimation/test_joint_state_order.py (the Estimator) and
test/ros/test_driver_joint_order.py (the EstimatorDriver the node and replay use)."""
from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import numpy as np

from mbfg_ros.core.measurements import JointMeasurement

from .ros_data import T0, fourbar_data, fourbar_path
from .ur5 import readings as ur5_readings
from .ur5 import simulate_ur5

REPO = Path(__file__).resolve().parents[2]
URDF = REPO / 'config' / 'urdf'
UNKNOWN = ('gripper_finger_joint', 'conveyor_joint')
CASES = ('reversed', 'subsets', 'unknown')
UR5_Q0 = (0.5, -1.2, 1.2, -1.57, -2.2, -0.6)
"""A UR5 pose whose joint j and joint 5 - j differ (the URDF's q0 has pairs of equal angles,
which a reversed message read at the model's index would swap unnoticed)."""


def _take(m: JointMeasurement, idx: list[int], names: tuple[str, ...],
          extra: dict[int, str] | None = None) -> JointMeasurement:
    """``m`` with the joints ``idx`` (model indices) in that order; ``extra``: unknown names
    inserted at those message positions."""
    def pick(a: np.ndarray, fill: float) -> np.ndarray:
        if a.size == 0:
            return a
        vals = [float(a[i]) for i in idx]
        for pos in sorted(extra or {}):
            vals.insert(pos, fill)
        return np.array(vals)

    out = [names[i] for i in idx]
    for pos, nm in sorted((extra or {}).items()):
        out.insert(pos, nm)
    # an unknown joint's values are plausible but wrong for every model joint
    return replace(m, names=tuple(out), position=pick(m.position, 2.5),
                   velocity=pick(m.velocity, -3.0), effort=pick(m.effort, 40.0))


def reorder(recs: list, names: tuple[str, ...], case: str) -> list:
    """The records with each JointMeasurement (joints in model order) rewritten: ``reversed``
    names, ``subsets`` (one message per joint, last joint first) or ``unknown`` (reversed,
    with two unknown names among them). Other records pass unchanged."""
    n = len(names)
    out = []
    for m in recs:
        if not isinstance(m, JointMeasurement):
            out.append(m)
        elif case == 'reversed':
            out.append(_take(m, list(range(n))[::-1], names))
        elif case == 'subsets':
            out.extend(_take(m, [i], names) for i in reversed(range(n)))
        elif case == 'unknown':
            out.append(_take(m, list(range(n))[::-1], names, {0: UNKNOWN[0], 2: UNKNOWN[1]}))
        else:
            raise ValueError(case)
    return out


@functools.lru_cache(maxsize=None)
def fourbar_case():
    """(path, system, {stamp ns: true joint angles}, records) of config/fourbar.yaml (joints
    crank, coupler_joint) in free fall: 0.4 s at 200 Hz, records stamped T0 + t."""
    from mbfg_ros.planar.sensors import joint_positions

    system, traj, recs = fourbar_data(0.4)
    truth = {int(round((T0 + t) * 1e9)): joint_positions(system, q)
             for t, q in zip(traj.t, traj.q)}
    return fourbar_path(), system, truth, recs


@functools.lru_cache(maxsize=None)
def ur5_case():
    """(urdf, overlay, system, {stamp ns: true q}, records) of config/urdf/ur5.urdf from
    :data:`UR5_Q0` under torques: 0.3 s at 500 Hz (encoders with effort, wrist IMU),
    records stamped T0 + t."""
    from mbfg_ros.spatial.system import build_spatial_system

    urdf, overlay = URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml'
    system = build_spatial_system(urdf, overlay)
    tr, taus = simulate_ur5(system, duration=0.3, q0=UR5_Q0)
    recs = [replace(r, t=r.t + T0)
            for r in ur5_readings(system, tr, taus, np.random.default_rng(11))]
    truth = {int(round((T0 + t) * 1e9)): q for t, q in zip(tr.t, tr.q)}
    return urdf, overlay, system, truth, recs
