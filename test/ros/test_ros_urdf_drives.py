"""The simulator node on a URDF robot with the overlay's joint friction and rotors (issue 27
item 1), over real DDS into a real rosbag2: the recorded ground truth of a passive fall keeps
the power balance E(0) − E(T) = ∫ F(q̇)·q̇ dt with E from Pinocchio (``model.armature``) and F
written out here (a node without the friction keeps E; one without the armature moves
differently, and its E with the armature does not balance)."""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
import yaml
from support.ros_data import REPO, unique_domain
from support.ros_nodes import start

from mbfg_ros.core.bag import read_messages
from mbfg_ros.ros import conversions as cv

pytestmark = pytest.mark.ros

URDF = REPO / 'config' / 'urdf'
B, FC, V_S, IR, GR = 4.0, 1.5, 0.05, 1e-4, 100.0


def _record(tmp_path, overlay: dict, domain: int, name: str):
    ov = tmp_path / f'{name}.yaml'
    ov.write_text(yaml.safe_dump(overlay))
    bag = tmp_path / name
    params = {'mechanism': str(URDF / 'ur5.urdf'), 'overlay': str(ov), 'realtime': 'false',
              'duration': 1.0, 'record': 'true', 'output': str(bag), 'publish_rate': 1000.0,
              'seed': 1}
    proc = start('simulator_node', params, domain, tmp_path)
    assert proc.wait(120) == 0, (tmp_path / 'simulator_node.log').read_text()
    msgs = list(read_messages(bag, {'/simulator_node/ground_truth': cv.TYPES['JointState']}))
    t = np.array([m.msg.header.stamp.sec + 1e-9 * m.msg.header.stamp.nanosec for m in msgs])
    q = np.array([list(m.msg.position) for m in msgs])
    qd = np.array([list(m.msg.velocity) for m in msgs])
    assert list(msgs[0].msg.name) == list(pin.buildModelFromUrdf(str(URDF / 'ur5.urdf')).names[1:])
    return t, q, qd


def test_simulator_node_falls_with_the_overlays_friction_and_armature(tmp_path):
    base = yaml.safe_load((URDF / 'ur5_sensors.yaml').read_text())
    names = list(pin.buildModelFromUrdf(str(URDF / 'ur5.urdf')).names[1:])
    drives = {j: {'friction': {'b': B, 'fc': FC, 'v_s': V_S}, 'Ir': IR, 'gr': GR} for j in names}
    t, q, qd = _record(tmp_path, {**base, 'joints': drives}, unique_domain(61), 'drives')
    assert len(t) > 900 and np.all(np.diff(t) > 0)

    pm = pin.buildModelFromUrdf(str(URDF / 'ur5.urdf'))
    pm.armature = np.full(pm.nv, IR * GR ** 2)
    pd = pm.createData()

    def energy(a, b):
        M = pin.crba(pm, pd, a)
        M = np.triu(M) + np.triu(M, 1).T
        return 0.5 * b @ M @ b + pin.computePotentialEnergy(pm, pd, a)
    E = np.array([energy(a, b) for a, b in zip(q, qd)])
    power = np.array([sum(B * v * v + FC * math.tanh(v / V_S) * v for v in b) for b in qd])
    work = np.sum(0.5 * (power[1:] + power[:-1]) * np.diff(t))
    assert E[0] - E[-1] > 1.0                                   # friction took real energy
    assert E[0] - E[-1] == pytest.approx(work, rel=1e-3)   # without the armature: 2 %
