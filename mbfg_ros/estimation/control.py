"""The command law of the package (no ROS): computed torque towards a reference and the
pose-holding torques, on any :class:`~mbfg_ros.core.interface.MultibodySystem`.

The actuator efforts come from the system's inverse dynamics ``torques(q, q̇, q̈)`` (the
planar least-squares :func:`mbfg_ros.planar.dynamics.actuator_efforts`, seed 000 Eq. 2 /
seed 003 Eq. 6.110; the spatial tree-and-loops inverse dynamics); the actuators and their
joints come from ``system.description`` (issue 23: the edge description, never a
formulation's model).

Limits (issue 25): every command is clamped to its joint's effort rating
(:meth:`CommandLaw.clamp`: URDF ``<limit effort>``, overlay ``limits``, planar YAML
``limits.effort``), and a reference is checked against the joints' position and
velocity limits before it is used (:meth:`CommandLaw.check_reference`).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import scipy.linalg.lapack as lapack

from ..core.angles import wrap_angle, wrap_scalar
from ..core.interface import EdgeDescription, MultibodySystem
from .gate import limit_arrays

__all__ = ['actuator_index', 'CommandLaw', 'solve_linear_system', 'KP_MAX', 'KD_MAX',
           'COORDINATE_EFFORT']

KP_MAX = 1.0e5
"""Largest ``kp`` (1/s²): a natural frequency of 316 rad/s, beyond any motor's bandwidth
(issue 25: 1e9 was in range and asked for 1.7e9 N·m)."""
KD_MAX = 2.0e3
"""Largest ``kd`` (1/s): critical damping of :data:`KP_MAX` is 632 1/s."""
COORDINATE_EFFORT = 1.0e4
"""|τ| of a command for an actuator of a coordinate (no joint, so no YAML limits): the
sanity bound of the joints' default ``limits.effort``."""


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
    the system's ``torques``. :meth:`hold`: q̇ = 0, q̈ = 0 (the static torque);
    :meth:`hold_at`: the PD hold of issue 25, computed torque towards a latched pose
    at rest. :meth:`clamp` saturates a command at the joints' effort ratings.

    :raises ValueError: a name in ``command_joints`` is no actuator or actuated joint,
        or a gain outside ``[0, KP_MAX]``, ``[0, KD_MAX]``.
    """

    def __init__(self, sys: MultibodySystem, command_joints: Sequence[str], kp: float,
                 kd: float) -> None:
        desc = sys.description
        self.sys = sys
        self.kp = self.kd = 0.0
        self.set_gains(kp, kd)
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
        # the error wrapped whole (every actuated quantity an angle: True), not at all (none:
        # False) or where it is an angle (None)
        self._wrap = True if self._angular.all() else (None if self._angular.any() else False)
        self._zeros = np.zeros(sys.n)
        self._zeros_act = np.zeros(self.n_act)
        # a fully actuated tree whose encoders read their own coordinates: s = q[idx],
        # J_s a permutation, no constraint rows, so the acceleration problem of
        # :meth:`track` is q̈[idx] = s̈* (no least squares per command; issue 24)
        coords = [j for j in self._act_joint if j is not None]
        self._direct = (np.array(coords, dtype=int) if (
            self.sm.direct_encoders is not None and sys.m == 0
            and len(coords) == self.n_act == sys.n and len(set(coords)) == sys.n) else None)
        # per actuator (index, encoder or None, coordinate or None): an actuated coordinate
        # s = q_c has the constant row J_s = e_c and J̇_s q̇ = 0 (written once below), an
        # actuated joint its encoder's rows per state (issue 24)
        self._act = tuple((i, j, a.coordinate if j is None else None)
                          for i, (a, j) in enumerate(zip(desc.actuators, self._act_joint)))
        self._J0 = np.zeros((self.n_act, sys.n))
        for i, j, c in self._act:
            if j is None:
                self._J0[i, c] = 1.0
        self._J0.flags.writeable = False
        # the acceleration problem's A = [Φq; J_s] and b = [−γ; s̈* − J̇_s q̇] of
        # :meth:`track` (seed 000 Eqs. 3, 12): kept buffers, every entry written per call
        # but the constant rows of actuated coordinates (no state: nothing is read before
        # it is written for this call)
        self._m = sys.m
        self._A = np.concatenate((np.zeros((sys.m, sys.n)), self._J0))
        self._b = np.zeros(sys.m + self.n_act)
        # limits of each actuator's joint; an actuator of a coordinate has no joint limits:
        # the sanity bound of the planar defaults caps its commands
        joints = {j.name: j.limits for j in sys.description.joints}
        lims = [joints.get(a.joint) if a.joint else None for a in desc.actuators]
        effort = np.array([COORDINATE_EFFORT if lim is None else float(
            lim.effort if lim.command_effort is None else lim.command_effort)
            for lim in lims])
        self.effort_limit = effort[self.order]
        """|τ| of each command (``command_joints`` order), N·m or N."""
        lo, hi, velocity, _ = limit_arrays(lims)
        self.position_limits = np.column_stack((lo, hi)).reshape(-1, 2)
        """(lo, hi) of each actuated quantity (actuator order)."""
        self.velocity_limit = velocity
        """|ṡ| of each actuated quantity (actuator order)."""

    def set_gains(self, kp: float, kd: float) -> None:
        """Validated gains (finite, ``0 <= kp <= KP_MAX``, ``0 <= kd <= KD_MAX``).

        :raises ValueError: a gain out of range (nothing changed then).
        """
        kp, kd = float(kp), float(kd)
        for name, value, hi in (('kp', kp, KP_MAX), ('kd', kd, KD_MAX)):
            if not (math.isfinite(value) and 0.0 <= value <= hi):
                raise ValueError(f'{name} must be in [0, {hi:g}], got {value!r}')
        self.kp, self.kd = kp, kd

    def clamp(self, tau: np.ndarray) -> tuple[np.ndarray, int]:
        """(τ clamped to ``effort_limit``, how many were over it); NaN stays NaN."""
        lim = self.effort_limit
        over = int(np.count_nonzero(np.abs(tau) > lim))
        return (np.clip(tau, -lim, lim) if over else tau), over

    def check_reference(self, cols: np.ndarray, position: np.ndarray,
                        velocity: np.ndarray, acceleration: np.ndarray) -> str:
        """Why a reference's points (rows, columns ``cols`` per actuator) cannot be used,
        or ``''``: every value finite, positions within the joints' position limits,
        velocities within their velocity limits (issue 25)."""
        p, v, a = position[:, cols], velocity[:, cols], acceleration[:, cols]
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(v))
                and np.all(np.isfinite(a))):
            return 'non-finite values'
        lo, hi = self.position_limits[:, 0], self.position_limits[:, 1]
        bad = np.flatnonzero(np.any((p < lo) | (p > hi), axis=0))
        names = [a.name for a in self.sys.description.actuators]
        if bad.size:
            i = int(bad[0])
            return (f'position of {names[i]!r} outside its limits [{lo[i]:g}, {hi[i]:g}]')
        bad = np.flatnonzero(np.any(np.abs(v) > self.velocity_limit, axis=0))
        if bad.size:
            i = int(bad[0])
            return f'velocity of {names[i]!r} beyond its limit {self.velocity_limit[i]:g}'
        return ''

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

    def hold_at(self, q: np.ndarray, qd: np.ndarray, s_hold: np.ndarray) -> np.ndarray:
        """The PD hold of issue 25: computed torque towards the latched actuated pose
        ``s_hold`` at rest (``s̈* = Kp (s_hold − s) − Kd ṡ`` with the dynamics
        compensated), command order."""
        return self.track(q, qd, s_hold, self._zeros_act, self._zeros_act)

    def actuated(self, q: np.ndarray, qd: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(s, ṡ, J_s, J̇_s q̇) of the actuated quantities."""
        J = self._J0.copy()
        s, sd, Jdqd = self._rates(q, qd, J)
        return np.array(s), np.array(sd), J, np.array(Jdqd)

    def _rates(self, q: np.ndarray, qd: np.ndarray, J: np.ndarray
               ) -> tuple[list, list, list]:
        """(s, ṡ, J̇_s q̇) as lists of floats, the rows of J_s of the actuated joints written
        into ``J`` (those of actuated coordinates are constant: ``J`` holds them already)."""
        s, sd, Jdqd = [], [], []
        for i, j, c in self._act:
            if j is None:
                s.append(q[c])
                sd.append(qd[c])
                Jdqd.append(0.0)
            else:
                p, v, rows = self.sm.joint_rows(j, q, qd)
                J[i] = rows[0]
                s.append(p)
                sd.append(v)
                Jdqd.append(np.dot(rows[1], qd))
        return s, sd, Jdqd

    def track(self, q: np.ndarray, qd: np.ndarray, s_ref: np.ndarray, sd_ref: np.ndarray,
              sdd_ref: np.ndarray) -> np.ndarray:
        """Computed torque towards the reference (actuator order in, command order out)."""
        sys = self.sys
        idx = self._direct
        if idx is not None:
            s, sd = q[idx], qd[idx]
        else:
            m, A, b = self._m, self._A, self._b
            s, sd, Jdqd = self._rates(q, qd, A[m:])
        wrap = self._wrap
        if self.n_act == 1:
            # one actuator: the same IEEE operations on floats, without five ufuncs (~2.5 µs
            # of the four-bar's command, issue 24); wrap_scalar is wrap_angle bit for bit
            e = float(s_ref[0]) - s[0]
            if wrap:
                e = wrap_scalar(e)
            sdd = float(sdd_ref[0]) + self.kp * e + self.kd * (float(sd_ref[0]) - sd[0])
        else:
            s, sd = np.asarray(s), np.asarray(sd)
            err = s_ref - s
            if wrap:
                err = wrap_angle(err)
            elif wrap is None:
                err = np.where(self._angular, wrap_angle(err), err)
            sdd = sdd_ref + self.kp * err + self.kd * (sd_ref - sd)
        if idx is not None:
            qdd = np.empty(sys.n)
            qdd[idx] = sdd
            return sys.torques(q, qd, qdd)[self.order]
        # the acceleration problem [Φq; J_s] q̈ = [−γ; s̈* − J̇_s q̇] in the kept buffers
        # (J_s written above; Φ itself is not needed: constraint_jacobian, issue 24)
        Jq, gamma = sys.constraint_jacobian(q, qd)
        A[:m] = Jq
        np.negative(gamma, out=b[:m])
        if self.n_act == 1:
            b[m] = sdd - Jdqd[0]
        else:
            np.subtract(sdd, Jdqd, out=b[m:])
        return sys.torques(q, qd, solve_linear_system(A, b))[self.order]


def solve_linear_system(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x of the linear system ``A x = b`` (here q̈ of the acceleration problem of
    :meth:`CommandLaw.track`, seed 000 Eq. 3
    with the actuated quantities as independent coordinates, Eq. 12): one LU solve when
    ``A`` is square (as many constraint rows and actuators as coordinates: the four-bar,
    slider-crank, five-bar; ~1 µs against ~7 µs of least squares, issue 24), least
    squares when it is not or is singular (a singular pose of the mechanism)."""
    if A.shape[0] == A.shape[1]:
        # LAPACK's gesv, what np.linalg.solve calls (the same bits), without its ~2 µs of
        # Python; info > 0: singular
        qdd, info = lapack.dgesv(A, b)[2:]
        if info == 0 and np.isfinite(qdd).all():
            return qdd
    return np.linalg.lstsq(A, b, rcond=None)[0]
