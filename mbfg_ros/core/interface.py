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
  seed 002 §VII); ``constraint_jacobian(q, qd)``: (φ_q, γ) alone, the same numbers without
  φ (what an acceleration problem needs: the command law's, issue 24);
* ``generalized_forces(q, qd, tau)``: Q with ``M(q) q̈ = Q + φ_qᵀ λ`` (applied forces and
  actuator efforts; for joint coordinates also the velocity-product terms);
* ``accelerations(q, qd, tau, jacobians=False)``: q̈ (forward dynamics), with
  ``jacobians`` the tuple (q̈, ∂q̈/∂q, ∂q̈/∂q̇) a dynamics factor needs (seed 000 Eq. 28);
  ``torques(q, qd, qdd)``: the actuator efforts (inverse dynamics, least squares in the
  constraint forces); ``torque_jacobians(q, qd, qdd)``: (τ, ∂τ/∂q, ∂τ/∂q̇, ∂τ/∂q̈), each
  (n_act, n), analytic where the formulation has them (the σ of the external torques,
  issue 27 item 4).

What the estimator (and the ROS edge) need besides:

* ``m``, ``state_terms(q, qd, tau, jacobians)``: constraint rows and forward dynamics of the
  state factor (seed 000 Eqs. 24-26) with their Jacobians in one evaluation;
  ``independent_state_error(basis, tau, xs, want)``: the stacked independent-coordinate
  state factor (seed 000 Eqs. 27, 30-32; planar only, a spatial system raises);
* ``joint_names``, ``actuator_joints``, ``joint_coordinate(name)``: what encoders and
  ``effort`` fields name, and the coordinate equal to a revolute joint's angle;
* ``description``: the :class:`EdgeDescription` (joints, limits, IMUs, actuators,
  coordinate names) the ROS edge and the CLIs read; the formulations keep their own
  model objects to themselves;
* ``sensor_model()``: the measurement models of the encoders and IMUs (frame and sensor
  kinematics), a :class:`SensorModel` (``planar.sensors.SensorModel``,
  ``spatial.sensor_model.SpatialSensorModel``);

An optional capability (every system has the method; a formulation without it raises
:class:`~mbfg_ros.core.errors.MbfgError` with one line, so shared code never probes):

* ``link_jacobian(q, link)``: the (6, n) Jacobian of a link's twist ``[ω; v]`` in its own
  frame at its origin (``τ = Jᵀ w`` for a wrench there; spatial only, issue 27 item 4).

A free-floating robot (issue 28: legged robots) is not a ``MultibodySystem`` yet: its
configuration and velocity differ in size and live on SE(3) × Rⁿ, and its feet close loops
with the ground only while in stance. :class:`FloatingBase` declares what the estimator
will ask of one (``spatial.floating.FloatingBaseDynamics`` implements it); nothing is wired
to it yet, and ``spatial.system.build_spatial_system`` refuses a floating base.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np

from .end_stops import EndStopLog, EndStops
from .observation import Model, Observation

__all__ = ['MultibodySystem', 'StateTerms', 'SensorModel', 'EdgeDescription', 'EdgeJoint',
           'EdgeActuator', 'EdgeSensor', 'JointLimits', 'DrawingGeometry', 'Stepper',
           'SimulatedSystem', 'EndStopModel', 'FloatingBase']


class StateTerms(NamedTuple):
    """Constraint rows and forward-dynamics terms at one state, what
    :meth:`MultibodySystem.state_terms` returns (seed 000 Eqs. 24-26; a tree's rows are empty)."""

    phi: np.ndarray
    phi_q: np.ndarray
    phi_q_dot: np.ndarray          # ∂(Φq q̇)/∂q
    qdd: np.ndarray
    qdd_q: np.ndarray | None
    qdd_qd: np.ndarray | None


class JointLimits(Protocol):
    """Physical limits of a joint's readings (rad or m; rad/s or m/s; N·m or N)."""

    @property
    def position(self) -> tuple[float, float]: ...

    @property
    def velocity(self) -> float: ...

    @property
    def effort(self) -> float: ...

    @property
    def command_effort(self) -> float | None:
        """The |τ| a torque command is clamped to (None: ``effort``)."""
        ...


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
    """A motor: its name, the joint it drives (None: a planar actuator on a coordinate)
    and the coordinate it drives directly (None: a joint the sensor model reads)."""

    @property
    def name(self) -> str: ...

    @property
    def joint(self) -> str | None: ...

    @property
    def coordinate(self) -> int | None: ...


class EdgeSensor(Protocol):
    """An IMU: its name, its topic (``imu/<name>`` unless the YAML or overlay says
    otherwise), the ``frame_id`` its messages carry and the ranges beyond which its readings
    are rejected (|ω| in rad/s, |f| per axis in m/s²)."""

    @property
    def name(self) -> str: ...

    @property
    def topic(self) -> str: ...

    @property
    def frame_id(self) -> str: ...

    @property
    def gyro_range(self) -> float: ...

    @property
    def accel_range(self) -> float: ...


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
class SensorModel(Protocol):
    """The measurement models h(q, q̇, q̈) of a system's encoders and IMUs, with analytic
    Jacobians: what the observation factors, the innovation gate, the start-up and the
    command law use (issue 23). ``planar.sensors.SensorModel`` (natural coordinates, seed
    000 §2: 1-axis gyro, 2-axis specific force, yaw) and
    ``spatial.sensor_model.SpatialSensorModel`` (joint coordinates: encoders read q_j; 3-axis
    IMUs, orientation on SO(3)) implement it; shared code asks the model, never which one
    it holds.

    * ``n``, ``joint_names``, ``imu_names``: state size, encoder and IMU names (indices);
    * ``joint(j, q, q̇, want)``: (position, rate) :class:`Model` of encoder ``j``;
      ``joint_rows(j, q, q̇)``: its position and rate as floats with the rows
      [∂h/∂q; ∂ḣ/∂q] (2, n) (∂ḣ/∂q̇ = ∂h/∂q), the numbers of ``joint(..., want=True)``
      without the records (the command law's actuated quantities, issue 24);
      ``joint_is_angular(j)``: its position is an angle (revolute); ``joint_values(q, q̇)``:
      every encoder's (position, rate) values at once (the published joint readings);
    * ``joint_batch(j, X)``: position and rate of encoder ``j`` at states X (N, 3, n) with
      Jacobians, or None where only the scalar ``joint`` applies (prismatic);
    * ``direct_encoders``: where every encoder reads its own coordinate (q_j, q̇_j), the
      per-joint "angular" flags (the observation code then takes all encoder readings at
      once with unit-row Jacobians); None where encoders are functions of q;
    * ``imu(k, q, q̇, q̈, want)``: (gyro, specific force, orientation) models of IMU ``k``;
      ``imu_observations(...)``: the :class:`Observation` of one IMU record;
      ``imu_errors(k, obs, X, want)``: stacked residuals of IMU ``k``'s readings and their
      Jacobians (rows, 3, n);
    * ``angle_residual(kind, index)``: the residual of such a reading is one angle wrapped
      to (−π, π] (a revolute encoder, a planar yaw);
    * ``position_target(kind)``: a position-level reading of that kind is a scalar target
      of the start-up position problem (encoders; a planar yaw, not a 3-D orientation).
    """

    n: int
    joint_names: tuple[str, ...]
    imu_names: tuple[str, ...]
    direct_encoders: np.ndarray | None

    def joint_is_angular(self, j: int) -> bool: ...

    def joint(self, j: int, q: np.ndarray, qd: np.ndarray, want: bool = False
              ) -> tuple[Model, Model]: ...

    def joint_rows(self, j: int, q: np.ndarray, qd: np.ndarray
                   ) -> tuple[float, float, np.ndarray]: ...

    def joint_batch(self, j: int, X: np.ndarray) -> tuple[tuple, tuple] | None: ...

    def joint_values(self, q: np.ndarray, qd: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]: ...

    def imu(self, k: int, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, want: bool = False
            ) -> tuple[Model, Model, Model]: ...

    def imu_observations(self, k: int, gyro: np.ndarray | None, accel: np.ndarray | None,
                         quat: np.ndarray | None, s_gyro: np.ndarray, s_accel: np.ndarray,
                         s_orient: np.ndarray) -> list[Observation]: ...

    def imu_errors(self, k: int, obs: Sequence[Observation], X: np.ndarray, want: bool
                   ) -> tuple[np.ndarray, np.ndarray | None]: ...

    def angle_residual(self, kind: str, index: int) -> bool: ...

    def position_target(self, kind: str) -> bool: ...


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

    def constraint_jacobian(self, q: np.ndarray, qd: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray]: ...

    def generalized_forces(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray
                           ) -> np.ndarray: ...

    def accelerations(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray,
                      jacobians: bool = False): ...

    def torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray: ...

    def torque_jacobians(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...

    def acceleration_gain(self, q: np.ndarray) -> np.ndarray:
        """∂q̈/∂τ (n, number of actuators) at ``q``: q̈ is affine in τ (one factorisation,
        not a forward dynamics per actuator)."""
        ...

    @property
    def m(self) -> int: ...

    @property
    def joint_names(self) -> tuple[str, ...]: ...

    @property
    def actuator_joints(self) -> tuple[str | None, ...]: ...

    def joint_coordinate(self, name: str) -> int | None: ...

    def state_terms(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None,
                    jacobians: bool = True) -> StateTerms: ...

    def independent_state_error(self, basis: Sequence[int] | np.ndarray,
                                tau: np.ndarray | None, xs: Sequence[np.ndarray], want: bool
                                ) -> tuple[np.ndarray, list[np.ndarray] | None]: ...

    def sensor_model(self) -> SensorModel: ...

    def link_jacobian(self, q: np.ndarray, link: str) -> np.ndarray: ...

    @property
    def description(self) -> EdgeDescription: ...


class DrawingGeometry(Protocol):
    """Where a mechanism's marker points are at a state q (issue 23: ``ros.markers`` draws
    through this, never through a formulation's model). All positions in metres, in the
    drawing plane (z = 0); index arrays are built once, the methods evaluate per call.

    Implemented by ``planar.drawing.PlanarDrawing``; a formulation without a drawing of its
    own (a URDF robot, drawn by ``robot_state_publisher``) returns None from
    :meth:`SimulatedSystem.drawing`."""

    segment_points: np.ndarray     # (S, 2) point indices of the body segments
    joint_points: np.ndarray       # (J,) point index of each drawn joint
    moving_points: np.ndarray      # (M,) points that move (an uncertainty ellipse each)

    @property
    def size(self) -> float:
        """A characteristic length (m): line widths and sphere sizes scale with it."""
        ...

    @property
    def n_imus(self) -> int: ...

    def points(self, q: np.ndarray) -> np.ndarray:
        """(P, 2) every point's position."""
        ...

    def segments(self, q: np.ndarray) -> np.ndarray:
        """(S, 2, 2) body segments: [[start xy], [end xy]]."""
        ...

    def joints(self, q: np.ndarray) -> np.ndarray:
        """(J, 2) joint positions."""
        ...

    def imu_arrows(self, q: np.ndarray) -> np.ndarray:
        """(I, 2, 2) per IMU: mounting point and the tip of an arrow along its x axis."""
        ...

    def ellipses(self, q: np.ndarray, q_std: np.ndarray, scale: float) -> np.ndarray:
        """(M, 4) per moving point: x, y, semi-axes ``scale`` σx and ``scale`` σy."""
        ...


class Stepper(Protocol):
    """A forward-dynamics integrator advanced one ``dt`` at a time (the simulator node):
    time ``t`` and the state ``q``, ``qd``, ``qdd`` after the last :meth:`step` under the
    actuator efforts given to it (``description.actuators`` order; None: none applied).
    ``stops`` and ``log``: the joint limits it enforces and what they did
    (:class:`~mbfg_ros.core.end_stops.EndStopLog`: impacts, velocity-limit excess), or None
    when it runs without limits."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    stops: EndStops | None
    log: EndStopLog | None

    @property
    def t(self) -> float: ...

    def step(self, tau: np.ndarray | None = None) -> object: ...


class EndStopModel(Protocol):
    """Joint position limits as forces for the factor-graph forward dynamics (issue 30 item
    3; ``planar.end_stops.PlanarEndStops``): ``system`` is the system to integrate (its
    forces include the stops; simulation only, never the estimator's), ``stops`` the joint
    limits (joint order, ±inf: none) and ``joints(q, qd)`` the joint positions and rates."""

    @property
    def system(self) -> SimulatedSystem: ...

    @property
    def stops(self) -> EndStops: ...

    def joints(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


@runtime_checkable
class SimulatedSystem(MultibodySystem, Protocol):
    """What forward dynamics, the simulator node and the marker drawing need of a system
    besides :class:`MultibodySystem` (issue 23: no ``hasattr`` probes of a formulation):

    * ``independent_indices``: the default independent coordinates z ⊂ q (seed 000 §3;
      the factor-graph priors weight q̇[z]); ``independent_dynamics``: whether the
      independent-coordinate graph (seed 000 Fig. 3) is available for this formulation;
    * ``energy(q, qd)``: mechanical energy (kinetic + potential of the conservative
      applied forces), for (n,) or (N, n) states;
    * ``integrator(dt, limits=True)``: the formulation's own :class:`Stepper` (with
      ``limits`` holding the joints at their position limits, issue 30 item 3), or None when
      the factor-graph forward dynamics (``simulation.forward``) integrates it;
    * ``end_stop_model(dt)``: for the factor-graph forward dynamics, an
      :class:`EndStopModel` (the system with its joint position limits as stop forces, to
      be integrated instead of this one), or None (the formulation's own integrator holds
      its limits);
    * ``sensor_config(**fields)`` and ``simulate_measurements(t, q, qd, qdd, tau, config,
      rng)``: the simulated encoder and IMU records of sampled states (rows per sample);
      ``fields`` are ``encoder_rate``, ``imu_rate``, ``encoder_counts``, ``encoder_sigma``,
      ``encoder_velocity_sigma``, ``gyro_sigma``, ``accel_sigma``;
    * ``drawing()``: the :class:`DrawingGeometry` of ``~/markers``, or None.
    """

    @property
    def independent_indices(self) -> tuple[int, ...]: ...

    @property
    def independent_dynamics(self) -> bool: ...

    def energy(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray | float: ...

    def integrator(self, dt: float, limits: bool = True) -> Stepper | None: ...

    def end_stop_model(self, dt: float) -> EndStopModel | None: ...

    def sensor_config(self, **fields: float) -> object: ...

    def simulate_measurements(self, t: np.ndarray, q: np.ndarray, qd: np.ndarray,
                              qdd: np.ndarray, tau: np.ndarray | None, config: object,
                              rng: np.random.Generator) -> list: ...

    def drawing(self) -> DrawingGeometry | None: ...


@runtime_checkable
class FloatingBase(Protocol):
    """The dynamics of a free-floating robot with point contacts (issue 28, seed 004 §5 and
    seed 003's constrained dynamics): ``q`` (nq = n + 7: base position, quaternion x y z w,
    joints), ``v`` (nv = n + 6: base linear and angular velocity in the base frame, joint
    rates), ``M(q) v̇ + h(q, v) = Sᵀ τ + Σ J_cᵀ f_c`` with ``f_c`` the ground's 3-D force on
    each stance contact (world axes), named as ``contact_names``.

    * ``integrate(q, v, dt)`` and ``difference(q0, q1)``: ``q ⊕ v dt`` and ``q₁ ⊖ q₀`` on the
      configuration manifold (never ``q + v dt``);
    * ``mass_matrix(q)``, ``bias(q, v)``; ``forward(q, v, tau)``: v̇ in flight;
    * ``inverse(q, v, vdot, f_c, contacts)``: ``M v̇ + h − Σ J_cᵀ f_c`` (nv,), base rows first;
    * ``contact_kinematics(q, v, contacts)``: (positions (k, 3), J (3k, nv), γ (3k,)) with
      ``p̈ = J v̇ + γ``;
    * ``constrained_forward(q, v, tau, contacts, kp, kd, anchors)``: v̇ and ``f_c`` with those
      contacts in stance (zero contact acceleration, optional Baumgarte terms);
    * ``contact_inverse(q, v, vdot, contacts)``: (τ, ``f_c``) with the minimum-norm forces
      that balance the base;
    * ``contact_jacobian(q, contacts)``: J (3k, nv) of the contact points' velocities,
      world axes;
    * ``contact_motion(q, v, contacts)``: (positions, linear velocities, angular velocities)
      of the contact frames (k, 3) each, world axes (the floating-base estimator's leg
      kinematics and rolling feet).
    """

    n: int
    nq: int
    nv: int
    contact_names: tuple[str, ...]
    joint_names: tuple[str, ...]

    def integrate(self, q: np.ndarray, v: np.ndarray, dt: float = 1.0) -> np.ndarray: ...

    def difference(self, q0: np.ndarray, q1: np.ndarray) -> np.ndarray: ...

    def mass_matrix(self, q: np.ndarray) -> np.ndarray: ...

    def bias(self, q: np.ndarray, v: np.ndarray) -> np.ndarray: ...

    def forward(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> np.ndarray: ...

    def inverse(self, q: np.ndarray, v: np.ndarray, vdot: np.ndarray,
                f_c: np.ndarray | None = None, contacts: Sequence[str] = ()) -> np.ndarray: ...

    def contact_kinematics(self, q: np.ndarray, v: np.ndarray, contacts: Sequence[str]
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def constrained_forward(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                            contacts: Sequence[str], kp: float = 0.0, kd: float = 0.0,
                            anchors: np.ndarray | None = None) -> object: ...

    def contact_inverse(self, q: np.ndarray, v: np.ndarray, vdot: np.ndarray,
                        contacts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]: ...

    def contact_jacobian(self, q: np.ndarray, contacts: Sequence[str]) -> np.ndarray: ...

    def contact_motion(self, q: np.ndarray, v: np.ndarray, contacts: Sequence[str]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
