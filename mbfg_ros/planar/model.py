"""Mechanism model: the immutable planar model types (its YAML parser is
:mod:`mbfg_ros.planar.mechanism_yaml`).

Coordinates are natural coordinates (seed 000 §2, App. III): the x, y of each
non-fixed point in index order, then the relative coordinates.

Nothing here depends on ROS or GTSAM. The model is built once and never
changed by the algorithms (Pinocchio's model/data split).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..core.errors import MechanismError
from ..core.friction import Friction  # noqa: F401  (re-exported: the planar YAML's friction)

__all__ = ['Point', 'Body', 'RelativeCoordinate', 'Slider', 'PointForce', 'BodyTorque',
           'Spring', 'RotationalSpring', 'Actuator', 'Joint', 'JointLimits', 'Imu', 'Mechanism',
           'GROUND']

GROUND = -1
"""Body index that stands for the fixed frame (``ground`` in the YAML)."""


@dataclass(frozen=True)
class Point:
    """A point of the mechanism; ``x``, ``y`` are its (approximate) YAML position.

    ``exact``: the position is known exactly; assembly keeps it and moves the others.
    """

    x: float
    y: float
    fixed: bool
    name: str
    exact: bool = False


@dataclass(frozen=True)
class Body:
    """A rigid planar body through 2+ points.

    Its frame has the origin at the first point and +x toward the second;
    ``cog`` is in that frame and ``I0`` is the inertia about the first point.
    """

    name: str
    points: tuple[int, ...]
    length: float
    mass: float
    I0: float
    cog: tuple[float, float]


@dataclass(frozen=True)
class RelativeCoordinate:
    """An angle added to q.

    ``RelativeAngleAbsoluteDOF``: angle of the vector ``points[0] -> points[1]``
    from the global x axis. ``RelativeAngle``: angle of body ``bodies[1]``
    minus angle of body ``bodies[0]`` (either may be ground).
    """

    name: str
    type: str
    points: tuple[int, int] | None = None
    bodies: tuple[int, int] | None = None


@dataclass(frozen=True)
class Slider:
    """Point ``point`` moves on the line through two points (seed 000 Eqs. 42-43).

    ``line`` names two mechanism points (fixed or mobile); ``through`` gives
    two fixed global coordinates instead.
    """

    name: str
    point: int
    line: tuple[int, int] | None
    through: tuple[tuple[float, float], tuple[float, float]] | None


@dataclass(frozen=True)
class PointForce:
    """A constant force (world frame) at a point or at a body-fixed location."""

    fx: float
    fy: float
    point: int | None = None
    body: int | None = None
    at: tuple[float, float] = (0.0, 0.0)


@dataclass(frozen=True)
class BodyTorque:
    """A constant torque on a body (counter-clockwise positive)."""

    body: int
    torque: float


@dataclass(frozen=True)
class Spring:
    """Translational spring-damper between two points."""

    points: tuple[int, int]
    k: float
    c: float
    length: float


@dataclass(frozen=True)
class RotationalSpring:
    """Rotational spring-damper between two bodies (either may be ground).

    The torque on ``bodies[1]`` is ``-k (phi - angle) - c phidot`` with
    ``phi`` the angle of body 1 minus the angle of body 0; body 0 gets the
    opposite torque.
    """

    bodies: tuple[int, int]
    k: float
    c: float
    angle: float


@dataclass(frozen=True)
class JointLimits:
    """Physical limits of a joint's readings (YAML ``limits:``); a reading outside is
    rejected before it reaches the estimator.

    The defaults are sanity bounds, not the robot's range: they only catch
    garbage (1e300 is finite). Give the robot's real limits in the YAML.
    ``command_effort`` is the rating a torque command is clamped to (issue 25; None:
    ``effort``): a URDF's ``<limit effort>`` while ``effort`` gates readings with slack.
    """

    position: tuple[float, float] = (-1.0e6, 1.0e6)   # rad or m
    velocity: float = 1.0e3                           # |q̇|, rad/s or m/s
    effort: float = 1.0e4                             # |τ|, N·m or N
    command_effort: float | None = None               # |τ| of a command; None: effort


@dataclass(frozen=True)
class Joint:
    """A named joint whose position JointState reports.

    ``revolute``: the angle of ``bodies[1]`` minus that of ``bodies[0]``
    (ground allowed) minus ``offset``. ``prismatic``: the signed distance of
    the slider's point from the first point of its line, along the line,
    minus ``offset``.
    """

    name: str
    type: str
    bodies: tuple[int, int] | None = None
    slider: int | None = None
    offset: float = 0.0
    limits: JointLimits = JointLimits()
    friction: Friction | None = None


@dataclass(frozen=True)
class Actuator:
    """A motor: drives one coordinate of q, or a named joint.

    ``Ir`` is the rotor inertia and ``gr`` the (signed) gear ratio: the rotor
    turns at ω_r = ω_carrier + gr·φ̇, with φ the driven joint angle and the
    carrier the joint's first body (the one the motor's stator is fixed to).
    Its kinetic energy ½ Ir ω_r² adds Ir c cᵀ to M (c: ω_r = cᵀ q̇), which is
    DFKI's reflected inertia gr²·Ir with the coupling gr·Ir to the carrier
    (their model has −gr·Ir: ``gr: -6`` for their elbow).
    """

    name: str
    coordinate: int | None = None
    joint: str | None = None
    Ir: float = 0.0
    gr: float = 1.0
    rotor: tuple[int, int] | None = None   # (carrier angle coordinate or -1, joint coordinate)


@dataclass(frozen=True)
class Imu:
    """An IMU on a body, mounted at ``point`` (body frame) and rotated by ``angle``."""

    name: str
    body: int
    point: tuple[float, float]
    angle: float
    frame_id: str
    topic: str
    gyro_range: float = 1.0e3       # |ω| beyond this is rejected, rad/s
    accel_range: float = 1.0e4      # |f| per axis beyond this is rejected, m/s²


@dataclass(frozen=True)
class Mechanism:
    """Immutable description of a planar mechanism in natural coordinates."""

    source: str
    name: str
    points: tuple[Point, ...]
    bodies: tuple[Body, ...]
    relative: tuple[RelativeCoordinate, ...]
    sliders: tuple[Slider, ...] = ()
    gravity: tuple[float, float] = (0.0, -9.81)
    forces: tuple[PointForce, ...] = ()
    torques: tuple[BodyTorque, ...] = ()
    springs: tuple[Spring, ...] = ()
    rotational_springs: tuple[RotationalSpring, ...] = ()
    point_masses: tuple[tuple[int, float], ...] = ()
    actuators: tuple[Actuator, ...] = ()
    joints: tuple[Joint, ...] = ()
    sensors: tuple[Imu, ...] = ()
    parameters: Mapping[str, float] = field(default_factory=dict)

    @property
    def point_index(self) -> np.ndarray:
        """(P, 2) int array: index in q of each point's x and y, -1 if fixed."""
        idx = -np.ones((len(self.points), 2), dtype=int)
        k = 0
        for i, p in enumerate(self.points):
            if not p.fixed:
                idx[i] = (k, k + 1)
                k += 2
        return idx

    @property
    def n(self) -> int:
        """Number of generalized (dependent) coordinates."""
        return 2 * sum(not p.fixed for p in self.points) + len(self.relative)

    @property
    def coordinate_names(self) -> tuple[str, ...]:
        """Names of q: ``x<i>``, ``y<i>`` per moving point i, then relative names."""
        names = []
        for i, p in enumerate(self.points):
            if not p.fixed:
                names += [f'x{i}', f'y{i}']
        names += [r.name for r in self.relative]
        return tuple(names)

    def coordinate(self, key: int | str, *, path: str = 'coordinate') -> int:
        """Index of a coordinate given by index or name."""
        names = self.coordinate_names
        if isinstance(key, bool):
            raise MechanismError(f'expected a coordinate index or name, got {key!r}',
                                 source=self.source, path=path)
        if isinstance(key, int) or (isinstance(key, str) and key.strip().isdigit()):
            i = int(key)
            if not 0 <= i < len(names):
                raise MechanismError(f'coordinate index {i} out of range 0..{len(names) - 1}',
                                     source=self.source, path=path)
            return i
        if key in names:
            return names.index(key)
        raise MechanismError(f'unknown coordinate {key!r} (coordinates: {", ".join(names)})',
                             source=self.source, path=path)

    def joint(self, name: str) -> Joint:
        """The joint called ``name``."""
        for j in self.joints:
            if j.name == name:
                return j
        raise KeyError(name)

    def angle_coordinate(self, bodies: tuple[int, int]) -> int | None:
        """Index in q of a relative coordinate equal to angle(bodies[1]) − angle(bodies[0]).

        A ``RelativeAngle`` with these bodies, or, when ``bodies[0]`` is the
        ground, a ``RelativeAngleAbsoluteDOF`` on the basic points of ``bodies[1]``.
        """
        base = self.n - len(self.relative)
        for k, r in enumerate(self.relative):
            if r.bodies is not None and tuple(r.bodies) == tuple(bodies):
                return base + k
            if (r.points is not None and bodies[0] == GROUND and bodies[1] != GROUND
                    and tuple(r.points) == tuple(self.bodies[bodies[1]].points[:2])):
                return base + k
        return None

    def q_guess(self) -> np.ndarray:
        """Approximate q from the YAML pose (before the position problem)."""
        q = [c for p in self.points if not p.fixed for c in (p.x, p.y)]
        for r in self.relative:
            q.append(self._relative_angle_at_pose(r))
        return np.array(q, dtype=float)

    def body_angle_at_pose(self, b: int) -> float:
        """Angle of body ``b`` (first->second point) at the YAML pose; 0 for ground."""
        if b == GROUND:
            return 0.0
        i, j = self.bodies[b].points[:2]
        pi, pj = self.points[i], self.points[j]
        return math.atan2(pj.y - pi.y, pj.x - pi.x)

    def _relative_angle_at_pose(self, r: RelativeCoordinate) -> float:
        if r.points is not None:
            pi, pj = self.points[r.points[0]], self.points[r.points[1]]
            return math.atan2(pj.y - pi.y, pj.x - pi.x)
        assert r.bodies is not None
        a = self.body_angle_at_pose(r.bodies[1]) - self.body_angle_at_pose(r.bodies[0])
        return math.atan2(math.sin(a), math.cos(a))
