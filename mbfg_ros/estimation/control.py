"""Actuator efforts from a motion: the one control law of the package (no ROS).

:func:`actuator_efforts` solves the equations of motion in dependent
coordinates for the actuator efforts τ and the multipliers λ,

    B_act(q) τ + Φqᵀ λ = M q̈ − Q(q, q̇)           (seed 000 Eq. 2 with Q = B_act τ + Q_ext)

in least squares. It equals the virtual-power inverse dynamics of seed 003
Eq. 6.110 (Rᵀ of the same equation) without choosing independent
coordinates, so it has no singularity where a fixed choice of z degenerates.
The estimator reports the torques consistent with its estimate through it, and
:class:`CommandLaw` turns a reference motion into torque commands with it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..planar.model import Mechanism
from ..planar.sensors import wrap_angle

__all__ = ['actuator_efforts', 'actuator_index', 'CommandLaw']


def actuator_efforts(sys: Any, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray
                     ) -> np.ndarray:
    """Actuator efforts τ (order of ``mech.actuators``) that produce q̈ at (q, q̇).

    Normal equations of the small well-posed system (10x cheaper than lstsq
    here), with lstsq as the fallback when they are singular.
    """
    n_act = len(sys.mech.actuators)
    if not n_act:
        return np.zeros(0)
    B = sys.forces.actuator_matrix(q)
    Jq = sys.constraints.phi_q(q)[sys.rows]
    Q = sys.forces.evaluate(q, qd, None, jacobians=False).Q
    A = np.hstack((B, Jq.T))
    b = sys.mass_matrix(q) @ qdd - Q
    try:
        sol = np.linalg.solve(A.T @ A, A.T @ b)
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(A, b, rcond=None)[0]
    return sol[:n_act]


def actuator_index(mech: Mechanism, name: str) -> int | None:
    """Actuator called ``name``, or driving the joint or coordinate called ``name``."""
    coords = mech.coordinate_names
    for i, a in enumerate(mech.actuators):
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
    :func:`actuator_efforts`. Holding: q̇ = 0, q̈ = 0.

    :raises ValueError: a name in ``command_joints`` is no actuator or actuated joint.
    """

    def __init__(self, sys: Any, command_joints: Sequence[str], kp: float, kd: float) -> None:
        mech = sys.mech
        self.sys = sys
        self.kp = float(kp)
        self.kd = float(kd)
        names = list(command_joints) or [a.name for a in mech.actuators]
        order = []
        for name in names:
            i = actuator_index(mech, name)
            if i is None:
                known = [a.name for a in mech.actuators] + [a.joint for a in mech.actuators
                                                            if a.joint]
                raise ValueError(f'{name!r} is not an actuator or actuated joint of '
                                 f'{mech.source} (known: {", ".join(known) or "none"})')
            order.append(i)
        self.names = tuple(names)
        self.order = np.array(order, dtype=int)
        self.n_act = len(mech.actuators)
        self.sm = sys.sensor_model()
        self._act_joint = [self.sm.joint_names.index(a.joint) if a.joint else None
                           for a in mech.actuators]
        self._angular = np.array([j is not None and self.sm.joint_is_angular(j)
                                  for j in self._act_joint], dtype=bool)
        self._zeros = np.zeros(sys.n)

    def reference_columns(self, names: Sequence[str]) -> np.ndarray:
        """Column of a reference with joint ``names`` for each actuator.

        :raises ValueError: the reference does not name every actuator.
        """
        cols = []
        for i, a in enumerate(self.sys.mech.actuators):
            col = next((k for k, n in enumerate(names)
                        if actuator_index(self.sys.mech, n) == i), None)
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
        for i, a in enumerate(self.sys.mech.actuators):
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
