"""What the ROS edge reads of a URDF robot: joints with limits, IMUs, actuators.

The estimator node, the bag replay, the limit gate and the command law read a
mechanism's *edge description* (``system.mech``): joint names, types and limits that
``JointState`` is checked against, IMUs with their topics, frame ids and ranges, actuators
with the joint each drives, coordinate names. The planar ``Mechanism`` is one; this is the
same record for a ``SpatialModel``, built once from the URDF (``<limit>``) and overlay.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..planar.model import JointLimits
from .model import SpatialImu, SpatialModel

__all__ = ['SpatialDescription', 'EdgeJoint', 'EdgeActuator', 'describe']


@dataclass(frozen=True)
class EdgeJoint:
    """A URDF joint JointState reports: name, ``revolute``/``prismatic``, limits."""

    name: str
    type: str
    limits: JointLimits


@dataclass(frozen=True)
class EdgeActuator:
    """A motor on a URDF joint (the actuator and the joint share the name)."""

    name: str
    joint: str
    coordinate: int


@dataclass(frozen=True)
class SpatialDescription:
    """The edge description of a URDF robot (same fields as the planar ``Mechanism``'s)."""

    source: str
    name: str
    joints: tuple[EdgeJoint, ...]
    sensors: tuple[SpatialImu, ...]
    actuators: tuple[EdgeActuator, ...]
    coordinate_names: tuple[str, ...]

    @property
    def n(self) -> int:
        return len(self.coordinate_names)


def _bound(x: float, default: float) -> float:
    return float(x) if np.isfinite(x) else default


POSITION_SLACK = 0.05
"""rad or m a reading may pass the URDF's position limit (encoders read past the soft
limit; a robot can be pushed there)."""
RATE_SLACK = 1.5
"""Factor on the URDF's velocity and effort limits (a rate or torque spike just above the
rated value is still a reading; the gate is for garbage, not for the rating)."""


def describe(model: SpatialModel) -> SpatialDescription:
    """The edge description of ``model``: the URDF limits with :data:`POSITION_SLACK` and
    :data:`RATE_SLACK`, or the planar defaults' sanity bounds where the URDF gives none (a
    continuous joint has no position range). Torque commands are clamped to the URDF's
    effort itself (``command_effort``, issue 25)."""
    d = JointLimits()
    joints = tuple(EdgeJoint(
        nm, model.joint_type[j],
        JointLimits(position=(_bound(model.lower[j] - POSITION_SLACK, d.position[0]),
                              _bound(model.upper[j] + POSITION_SLACK, d.position[1])),
                    velocity=_bound(RATE_SLACK * model.velocity_limit[j], d.velocity),
                    effort=_bound(RATE_SLACK * model.effort_limit[j], d.effort),
                    command_effort=_bound(model.effort_limit[j], d.effort)))
        for j, nm in enumerate(model.joint_names))
    acts = tuple(EdgeActuator(nm, nm, j) for j, nm in enumerate(model.joint_names)
                 if model.actuated[j])
    return SpatialDescription(source=model.source, name=model.name, joints=joints,
                              sensors=tuple(model.imus), actuators=acts,
                              coordinate_names=tuple(model.joint_names))
