"""Joint position limits of a planar mechanism as stiff end stops in simulation (issue 30
item 3).

A planar joint's angle is a function of the natural coordinates (``θ_b − θ_a − offset``),
so its limit cannot be a bound on one coordinate as in joint space
(:mod:`mbfg_ros.core.end_stops`). Instead each revolute joint with a position range
(YAML ``limits: position: [lo, hi]``) gets a one-sided rotational spring-damper
(:class:`~mbfg_ros.planar.forces.JointStop`) that acts only beyond the range, with the
exact Jacobians of the rotational springs, so the factor-graph integrator treats it like
any other applied force.

Stiffness and damping are chosen from the joint's effective inertia and the step: with
``I = 1 / (∂φ/∂q · A⁻¹ · ∂φ/∂q)`` (the angular inertia the joint sees through the
constraints, ``A⁻¹`` the n x n block of the inverted augmented matrix of seed 000 Eq. 5,
at the assembled pose), the stop is an oscillator of natural frequency ``ω = STOP_OMEGA_DT /
dt`` (0.2 rad per step: well resolved by the trapezoidal rule, ~31 steps per period) and
damping ratio ``STOP_DAMPING`` (1, critical: an impact does not bounce back),

    k = I ω²,   c = 2 ζ I ω.

A fall onto a stop at rate v penetrates about v/ω (≈ v · 5 dt), a static load T about
T / k. The stop is given only to the system the simulator integrates
(:func:`with_end_stops`), never to the estimator's dynamics factor or inverse dynamics: it
is not a model of the robot's actuation.

Prismatic joints' limits are not enforced (reported by :func:`unenforced_limits`);
a range of a full turn or more is no stop. Velocity limits are never enforced: their
excess is counted (:class:`~mbfg_ros.core.end_stops.EndStopLog`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Protocol

import numpy as np

from ..core.end_stops import EndStops
from .factors import IndependentStateSystem
from .forces import Forces, JointStop
from .model import Mechanism

__all__ = ['PlanarEndStops', 'with_end_stops', 'unenforced_limits', 'STOP_OMEGA_DT',
           'STOP_DAMPING', 'StoppedSystem']


class StoppedSystem(IndependentStateSystem, Protocol):
    """What the end stops take of a planar system: the one :mod:`.factors` takes (its
    accelerations' ∂q̈/∂Q at the assembled pose, seed 000 Eq. 5) with its mechanism and
    its forces (replaced by ``dataclasses.replace`` with the stops added:
    :class:`.dynamics.System`, a frozen dataclass, is one; it builds its
    ``end_stop_model`` on this module)."""

    mech: Mechanism
    forces: Forces


STOP_OMEGA_DT = 0.2
"""ω·dt of a stop's spring (module docstring)."""

STOP_DAMPING = 1.0
"""Damping ratio ζ of a stop (1: critical)."""


def _limited(joint) -> bool:
    """A revolute joint whose position range is less than a full turn."""
    lo, hi = joint.limits.position
    return joint.type == 'revolute' and hi - lo < 2 * math.pi


def unenforced_limits(sys: StoppedSystem) -> list[str]:
    """Names of the joints whose position limits no stop enforces (prismatic joints with a
    range narrower than the YAML's sanity default)."""
    return [j.name for j in sys.mech.joints
            if j.type != 'revolute' and j.limits.position[1] - j.limits.position[0] < 1e6]


class PlanarEndStops:
    """The end stops of a planar system for a step ``dt`` (module docstring):

    * ``system``: the system the simulator integrates (the stops among its forces);
    * ``stops``: an :class:`~mbfg_ros.core.end_stops.EndStops` on the joints (YAML order;
      ±inf where no stop acts, the YAML velocity limits);
    * :meth:`joints`: joint angles (wrapped next to their range) and rates at a state.
    """

    def __init__(self, sys: StoppedSystem, dt: float) -> None:
        mech = sys.mech
        joints = mech.joints
        lower = np.full(len(joints), -np.inf)
        upper = np.full(len(joints), np.inf)
        velocity = np.array([j.limits.velocity if j.type == 'revolute' else np.inf
                             for j in joints])
        Ainv = sys.accel(sys.q0, np.zeros(sys.n), jac_Q=True).qdd_Q
        omega = STOP_OMEGA_DT / dt
        specs = []
        self._joints = []
        for k, j in enumerate(joints):
            if not _limited(j):
                continue
            lower[k], upper[k] = j.limits.position
            g, _ = sys.forces.joint_rate(sys.q0, np.zeros(sys.n), j.bodies)
            inertia = 1.0 / float(g @ Ainv @ g)
            specs.append(JointStop(j.bodies, j.offset, lower[k], upper[k],
                                   inertia * omega ** 2, 2 * STOP_DAMPING * inertia * omega))
            self._joints.append((k, j.bodies, j.offset, 0.5 * (lower[k] + upper[k])))
        self.specs = tuple(specs)
        self.stops = EndStops(tuple(j.name for j in joints), lower, upper, velocity)
        self.system = dataclasses.replace(sys, forces=Forces(mech, self.specs))
        self._forces = sys.forces
        self._others = [(k, j.bodies, j.offset) for k, j in enumerate(joints)
                        if j.type == 'revolute' and not _limited(j)]
        self._pos = np.zeros(len(joints))
        self._rate = np.zeros(len(joints))

    def joints(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(angle, rate) of every joint (prismatic: 0, not monitored); a limited joint's
        angle is wrapped to within π of the middle of its range, others to (−π, π]."""
        pos, rate = self._pos, self._rate
        for k, bodies, offset, mid in self._joints:
            phi, rate[k] = self._forces.relative_angle(q, qd, bodies)
            pos[k] = mid + math.remainder(phi - offset - mid, 2 * math.pi)
        for k, bodies, offset in self._others:
            phi, rate[k] = self._forces.relative_angle(q, qd, bodies)
            pos[k] = math.remainder(phi - offset, 2 * math.pi)
        return pos.copy(), rate.copy()


def with_end_stops(sys: StoppedSystem, dt: float) -> PlanarEndStops:
    """The end stops of ``sys`` for step ``dt`` (:class:`PlanarEndStops`)."""
    return PlanarEndStops(sys, dt)
