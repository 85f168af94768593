"""The command law of the package (no ROS): computed torque towards a reference and the
pose-holding torques, on any :class:`~mbfg_ros.core.interface.MultibodySystem`.

The actuator efforts come from the system's inverse dynamics ``torques(q, q̇, q̈)`` (the
planar least-squares :func:`mbfg_ros.planar.dynamics.actuator_efforts`, seed 000 Eq. 2 /
seed 003 Eq. 6.110; the spatial tree-and-loops inverse dynamics); the actuators and their
joints come from ``system.description`` (issue 23: the edge description, never a
formulation's model).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.angles import wrap_angle
from ..core.interface import EdgeDescription, MultibodySystem

__all__ = ['actuator_index', 'CommandLaw']


def actuator_index(desc: EdgeDescription, name: str) -> int | None:
    """Actuator called ``name``, or driving the joint or coordinate called ``name``."""
    coords = desc.coordinate_names
    for i, a in enumerate(desc.actuators):
        if name in (a.name, a.joint) or (a.coordinate is not None
                                         and coords[a.coordinate] == name):
            return i
    return None


class CommandLaw:
    """Computed torque / pose-holding torques in ``command_joints`` order.

    The actuated quantities s(q) are the actuators' joints (revolute angle,
    seed 000 §2 body angles) or coordinates. Computed torque (seed 003 §6):
    ``s̈* = s̈_ref + Kp (s_ref − s) + Kd (ṡ_ref − ṡ)``; q̈ solves the
    acceleration problem ``[Φq; J_s] q̈ = [−Φ̇q q̇; s̈* − J̇_s q̇]`` (seed 000
    Eq. 3 with s as independent coordinates, Eq. 12); τ then comes from
    the system's ``torques``. Holding: q̇ = 0, q̈ = 0.

    :raises ValueError: a name in ``command_joints`` is no actuator or actuated joint.
    """

    def __init__(self, sys: MultibodySystem, command_joints: Sequence[str], kp: float,
                 kd: float) -> None:
        desc = sys.description
        self.sys = sys
        self.kp = float(kp)
        self.kd = float(kd)
        names = list(command_joints) or [a.name for a in desc.actuators]
        order = []
        for name in names:
            i = actuator_index(desc, name)
            if i is None:
                known = [a.name for a in desc.actuators] + [a.joint for a in desc.actuators
                                                            if a.joint]
                raise ValueError(f'{name!r} is not an actuator or actuated joint of '
                                 f'{desc.source} (known: {", ".join(known) or "none"})')
            order.append(i)
        self.names = tuple(names)
        self.order = np.array(order, dtype=int)
        self.n_act = len(desc.actuators)
        self.sm = sys.sensor_model()
        self._act_joint = [self.sm.joint_names.index(a.joint) if a.joint else None
                           for a in desc.actuators]
        self._angular = np.array([j is not None and self.sm.joint_is_angular(j)
                                  for j in self._act_joint], dtype=bool)
        self._zeros = np.zeros(sys.n)

    def reference_columns(self, names: Sequence[str]) -> np.ndarray:
        """Column of a reference with joint ``names`` for each actuator.

        :raises ValueError: the reference does not name every actuator.
        """
        cols = []
        desc = self.sys.description
        for i, a in enumerate(desc.actuators):
            col = next((k for k, n in enumerate(names)
                        if actuator_index(desc, n) == i), None)
            if col is None:
                raise ValueError(f'reference lacks actuator {a.name!r}'
                                 + (f' (joint {a.joint!r})' if a.joint else ''))
            cols.append(col)
        return np.array(cols, dtype=int)

    def hold(self, q: np.ndarray) -> np.ndarray:
        """Actuator efforts that hold pose ``q`` (q̇ = 0, q̈ = 0), command order."""
        return self.sys.torques(q, self._zeros, self._zeros)[self.order]

    def actuated(self, q: np.ndarray, qd: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(s, ṡ, J_s, J̇_s q̇) of the actuated quantities."""
        k = self.n_act
        s, sd, J, Jdqd = np.empty(k), np.empty(k), np.zeros((k, self.sys.n)), np.zeros(k)
        for i, a in enumerate(self.sys.description.actuators):
            j = self._act_joint[i]
            if j is None:
                c = a.coordinate
                s[i], sd[i], J[i, c] = q[c], qd[c], 1.0
            else:
                p, v = self.sm.joint(j, q, qd, want=True)
                s[i], sd[i], J[i] = p.h[0], v.h[0], p.Hq[0]
                Jdqd[i] = v.Hq[0] @ qd
        return s, sd, J, Jdqd

    def track(self, q: np.ndarray, qd: np.ndarray, s_ref: np.ndarray, sd_ref: np.ndarray,
              sdd_ref: np.ndarray) -> np.ndarray:
        """Computed torque towards the reference (actuator order in, command order out)."""
        sys = self.sys
        s, sd, J, Jdqd = self.actuated(q, qd)
        err = s_ref - s
        err = np.where(self._angular, wrap_angle(err), err)
        sdd = sdd_ref + self.kp * err + self.kd * (sd_ref - sd)
        _, Jq, gamma = sys.constraint_terms(q, qd)
        A = np.vstack((Jq, J))
        qdd = np.linalg.lstsq(A, np.concatenate((-gamma, sdd - Jdqd)), rcond=None)[0]
        return sys.torques(q, qd, qdd)[self.order]
