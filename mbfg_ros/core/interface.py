"""The formulation seam: what the problems need from a mechanism, planar or spatial.

The planar natural-coordinate model (``dynamics.System``, seed 000/001) and the spatial
URDF model (``spatial.system.SpatialSystem``, seed 002/004) both implement this small
protocol, so that code serving both (forward and inverse dynamics, the estimator to come,
reports) does not reach into either one's internals:

* ``n``, ``names``, ``q0``, ``angle_coordinates``: the coordinates, their names, the
  assembled start and which coordinates are angles (units, wrapping, plots);
* ``mass_matrix(q)``: M(q) (constant for natural coordinates, seed 000 Eq. 3; a function
  of q for joint coordinates, seed 004 §7);
* ``actuator_matrix(q)``: B(q), generalized forces of unit actuator efforts;
* ``constraint_terms(q, qd)``: (φ, φ_q, γ) with ``φ_q q̈ + γ = 0`` (seed 000 Eqs. 24-26,
  seed 002 §VII);
* ``generalized_forces(q, qd, tau)``: Q with ``M(q) q̈ = Q + φ_qᵀ λ`` (applied forces and
  actuator efforts; for joint coordinates also the velocity-product terms);
* ``accelerations(q, qd, tau, jacobians=False)``: q̈ (forward dynamics), with
  ``jacobians`` the tuple (q̈, ∂q̈/∂q, ∂q̈/∂q̇) a dynamics factor needs (seed 000 Eq. 28);
  ``torques(q, qd, qdd)``: the actuator efforts (inverse dynamics, least squares in the
  constraint forces).

What the estimator (and the ROS edge) need besides:

* ``m``, ``state_terms(q, qd, tau, jacobians)``: constraint rows and forward dynamics of the
  state factor (seed 000 Eqs. 24-26) with their Jacobians in one evaluation;
* ``joint_names``, ``actuator_joints``, ``joint_coordinate(name)``: what encoders and
  ``effort`` fields name, and the coordinate equal to a revolute joint's angle;
* ``description``: the :class:`EdgeDescription` (joints, limits, IMUs, actuators,
  coordinate names) the ROS edge and the CLIs read; the formulations keep their own
  model objects to themselves;
* ``sensor_model()``: the measurement models of the encoders and IMUs (frame and sensor
  kinematics: ``planar.sensors.SensorModel``, ``spatial.sensor_model.SpatialSensorModel``).
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ['MultibodySystem', 'EdgeDescription', 'EdgeJoint', 'EdgeActuator', 'EdgeSensor',
           'JointLimits']


class JointLimits(Protocol):
    """Physical limits of a joint's readings (rad or m; rad/s or m/s; N·m or N)."""

    @property
    def position(self) -> tuple[float, float]: ...

    @property
    def velocity(self) -> float: ...

    @property
    def effort(self) -> float: ...


class EdgeJoint(Protocol):
    """A joint as ``sensor_msgs/JointState`` names it: name, ``revolute``/``prismatic``,
    limits."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def limits(self) -> JointLimits: ...


class EdgeActuator(Protocol):
    """A motor: its name and the joint it drives."""

    @property
    def name(self) -> str: ...

    @property
    def joint(self) -> str: ...


class EdgeSensor(Protocol):
    """An IMU: its name (its topic is ``imu/<name>`` unless a launch file remaps it)."""

    @property
    def name(self) -> str: ...


class EdgeDescription(Protocol):
    """What the ROS edge, the command law and the CLIs read of a mechanism, planar or
    spatial (the planar ``Mechanism`` and the spatial ``SpatialDescription`` both satisfy
    it): names, joints with their limits, IMUs, actuators, coordinate names."""

    @property
    def source(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def joints(self) -> tuple[EdgeJoint, ...]: ...

    @property
    def sensors(self) -> tuple[EdgeSensor, ...]: ...

    @property
    def actuators(self) -> tuple[EdgeActuator, ...]: ...

    @property
    def coordinate_names(self) -> tuple[str, ...]: ...


@runtime_checkable
class MultibodySystem(Protocol):
    """A mechanism ready for computation (see the module docstring)."""

    @property
    def n(self) -> int: ...

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def angle_coordinates(self) -> tuple[int, ...]: ...

    q0: np.ndarray

    def mass_matrix(self, q: np.ndarray) -> np.ndarray: ...

    def actuator_matrix(self, q: np.ndarray) -> np.ndarray: ...

    def constraint_terms(self, q: np.ndarray, qd: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def generalized_forces(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray
                           ) -> np.ndarray: ...

    def accelerations(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray,
                      jacobians: bool = False): ...

    def torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray: ...

    @property
    def m(self) -> int: ...

    @property
    def joint_names(self) -> tuple[str, ...]: ...

    @property
    def actuator_joints(self) -> tuple[str | None, ...]: ...

    def joint_coordinate(self, name: str) -> int | None: ...

    def state_terms(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None,
                    jacobians: bool = True): ...

    def sensor_model(self): ...

    @property
    def description(self) -> EdgeDescription: ...
