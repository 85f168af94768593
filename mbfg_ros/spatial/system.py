"""A URDF robot ready for computation: tree dynamics + loop constraints + actuators.

``SpatialSystem`` is what the spatial problems (inverse and forward dynamics, simulation,
the CLIs) use. Equations of motion over the tree coordinates ``q`` (seed 003 §3, seed 002
§VII for the loops)::

    M(q) q̈ + h(q, q̇) = B τ + φ_qᵀ λ,      φ_q q̈ + γ = 0

with ``B`` selecting the actuated joints. Both problems are solved in the null space
``N`` of ``φ_q`` (SVD, so planar loops written in 3-D, whose rows are dependent, need no
special case):

* inverse: ``(Nᵀ B) τ = Nᵀ (M q̈ + h)``, least squares; with more actuators than degrees
  of freedom this is the minimum-norm (minimum-torque, seed 002 §VII) solution;
* forward: ``q̈ = q̈_p + N z`` with ``q̈_p = −φ_q⁺ γ`` and ``(Nᵀ M N) z = Nᵀ (B τ − h − M q̈_p)``.

Without loops, ``N = 1`` and these are plain RNEA and ``M⁻¹(τ − h)``.

Joint friction and geared rotors (:mod:`.drives`, issue 27): ``M`` is the tree's plus the
constant rotor matrix ``M_r`` and ``h`` gains the friction ``F(q̇)``, in every problem
(inverse, forward, simulation, the estimator's state factor and τ̂, computed torque).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Union

import numpy as np

from ..core.errors import AssemblyError, MbfgError, MechanismError
from ..core.interface import StateTerms
from .backend import spatial_dynamics
from .description import SpatialDescription, describe
from .drives import Drives, build_drives
from .dynamics import SpatialDynamics
from .loops import LoopConstraints
from .model import SpatialModel
from .pin_backend import PinocchioDynamics
from .sensor_sim import SpatialSensorConfig, simulate_spatial_measurements
from .simulate import SpatialStepper, end_stops_of
from .urdf import load_spatial

__all__ = ['SpatialSystem', 'build_spatial_system', 'RANK_TOL']

RANK_TOL = 1e-9
_FD_STEP = 2e-8
"""Step of the one-sided differences that differentiate the constrained q̈ and φ_q q̇ with
loops (≈ √ε times a unit-sized coordinate)."""
"""Singular values of φ_q below ``RANK_TOL · max(1, σ_max)`` count as zero."""


@dataclass(frozen=True)
class SpatialSystem:
    """An immutable spatial mechanism: model, tree dynamics, loop constraints, actuators."""

    model: SpatialModel
    dyn: Union[SpatialDynamics, PinocchioDynamics]
    loops: LoopConstraints
    B: np.ndarray                 # (n, na) actuator selection
    q0: np.ndarray                # assembled start configuration
    mech: SpatialDescription | None = None   # the edge description (description.describe)
    drives: Drives | None = None             # friction and rotors (None: the rigid tree)

    @cached_property
    def n(self) -> int:
        """Tree joint coordinates (the model's, kept: read on every tick)."""
        return self.model.n

    @property
    def names(self) -> tuple[str, ...]:
        return self.model.joint_names

    @property
    def actuator_names(self) -> tuple[str, ...]:
        return tuple(j for j, a in zip(self.model.joint_names, self.model.actuated) if a)

    # -- the formulation seam (interface.MultibodySystem) ---------------------------------
    @property
    def angle_coordinates(self) -> tuple[int, ...]:
        """Indices of the revolute joints (their coordinates are angles)."""
        return tuple(i for i, k in enumerate(self.model.joint_type) if k == 'revolute')

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q) of the tree (seed 004 §7) plus the rotors' constant ``M_r`` (:mod:`.drives`)."""
        M = self.dyn.mass_matrix(q)
        d = self.drives
        return M + d.M if d is not None and d.has_rotor else M

    def _friction(self, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(F(q̇), dF/dq̇ diagonal) of the joints' friction, or None without any."""
        d = self.drives
        return d.friction(qd) if d is not None and d.has_friction else None

    @cached_property
    def _every_joint_actuated(self) -> bool:
        """B is the identity (every tree joint has its actuator): B τ is τ."""
        return self.B.shape == (self.n, self.n) and bool(np.all(self.B == np.eye(self.n)))

    @cached_property
    def _plain_tree(self) -> bool:
        """No loops, no friction, no rotors and B = 1: q̈ is the tree's ABA of τ and τ its
        RNEA, straight from the backend (``dyn.accelerations``, ``dyn.acceleration_jacobians``,
        ``dyn.torques``): the estimator's per-tick path skips the checks of the general
        case (issue 24; the same calls on the same arrays, so the same numbers)."""
        d = self.drives
        return not self.loops.m and self._every_joint_actuated and \
            (d is None or not (d.has_friction or d.has_rotor))

    @cached_property
    def _no_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(φ, φ_q) of a tree: no rows (read-only constants of :meth:`state_terms`)."""
        phi, phi_q = np.zeros(0), np.zeros((0, self.n))
        phi.flags.writeable = phi_q.flags.writeable = False
        return phi, phi_q

    def _joint_torques(self, tau: np.ndarray) -> np.ndarray:
        """B τ (τ itself, as a float array, when B is the identity)."""
        tau = np.asarray(tau, float)
        return tau if self._every_joint_actuated else self.B @ tau

    def actuator_matrix(self, q: np.ndarray | None = None) -> np.ndarray:
        """B: joint torques select tree coordinates (constant)."""
        return self.B

    def constraint_terms(self, q: np.ndarray, qd: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(φ, φ_q, γ) of the loop joints, ``φ_q q̈ + γ = 0`` (empty without loops)."""
        Jc, gamma = self.loops.jacobian(q, qd)
        return self.loops.phi(q), Jc, gamma

    def constraint_jacobian(self, q: np.ndarray, qd: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray]:
        """(φ_q, γ) of :meth:`constraint_terms` without φ."""
        return self.loops.jacobian(q, qd)

    def generalized_forces(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray
                           ) -> np.ndarray:
        """Q = B τ − h(q, q̇): motor torques, gravity and velocity-product terms, so that
        ``M q̈ = Q + φ_qᵀ λ``; with joint friction ``Q = B τ − h − F(q̇)``."""
        Q = self.B @ np.asarray(tau, float) - self.dyn.bias(q, qd)
        fr = self._friction(qd)
        return Q - fr[0] if fr is not None else Q

    def accelerations(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray,
                      jacobians: bool = False):
        """q̈ under actuator torques (:meth:`forward`); with ``jacobians`` (q̈, ∂q̈/∂q, ∂q̈/∂q̇):
        exact for trees (the per-tick path), by one-sided differences with loops (the
        null-space solution has no closed-form derivative here)."""
        if self._plain_tree:
            tau = np.zeros(self.n) if tau is None else tau
            if jacobians:
                return self.dyn.acceleration_jacobians(q, qd, tau)
            return self.dyn.accelerations(q, qd, tau)
        if not jacobians:
            return self.forward(q, qd, tau)
        if not self.loops.m:
            return self._tree_accelerations(q, qd, self._joint_torques(tau))
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        # one-sided differences, h ≈ √ε: error ~1e-8 relative, half the calls of central ones
        n, h = self.n, _FD_STEP
        Jq, Jv = np.zeros((n, n)), np.zeros((n, n))
        qdd = self.forward(q, qd, tau)
        for k in range(n):
            e = np.zeros(n)
            e[k] = h
            Jq[:, k] = (self.forward(q + e, qd, tau) - qdd) / h
            Jv[:, k] = (self.forward(q, qd + e, tau) - qdd) / h
        return qdd, Jq, Jv

    def acceleration_gain(self, q: np.ndarray) -> np.ndarray:
        """∂q̈/∂τ (n, na) at ``q``: q̈ is affine in the actuator torques (seed 003's forward
        dynamics, ``M q̈ = B τ − h − F(q̇)``), so one factorisation gives every actuator's
        column: ``M⁻¹ B`` on a tree (Pinocchio's ``computeMinverse``; with rotors
        ``(M + M_r)⁻¹ B``), ``N (NᵀMN)⁻¹ Nᵀ B`` with loops (:meth:`forward`'s null-space
        solution)."""
        q = np.asarray(q, float)
        if not self.loops.m:
            if self.drives is not None and self.drives.has_rotor:
                return np.linalg.solve(self.mass_matrix(q), self.B)
            return self.dyn.mass_matrix_inverse(q) @ self.B
        N = self.null_space(q)[0]
        M = self.mass_matrix(q)
        return N @ np.linalg.solve(N.T @ M @ N, N.T @ self.B)

    def _tree_accelerations(self, q: np.ndarray, qd: np.ndarray, Btau: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q̈, ∂q̈/∂q, ∂q̈/∂q̇ of the tree (no loops), exact. Friction only: ABA of
        ``B τ − F`` and ``∂q̈/∂q̇ −= M⁻¹ diag(F')``. With rotors (``M_r`` may couple joints,
        which ABA cannot): ``q̈ = (M + M_r)⁻¹ (B τ − h − F)`` and, as ``M_r`` is constant,
        ``∂q̈/∂q = −(M + M_r)⁻¹ ∂ID/∂q``, ``∂q̈/∂q̇ = −(M + M_r)⁻¹ (∂ID/∂q̇ + diag F')`` with
        ID the rigid tree's inverse dynamics at that q̈."""
        d, fr = self.drives, self._friction(qd)
        if fr is not None:
            Btau = Btau - fr[0]
        if d is None or not d.has_rotor:
            r = self.dyn.forward(q, qd, Btau, derivatives=True, minv=fr is not None)
            if fr is None:
                return r.qdd, r.dqdd_dq, r.dqdd_dqd
            return r.qdd, r.dqdd_dq, r.dqdd_dqd - r.dqdd_dtau * fr[1]
        M = self.mass_matrix(q)
        qdd = np.linalg.solve(M, Btau - self.dyn.bias(q, qd))
        r = self.dyn.inverse(q, qd, qdd, derivatives=True)
        Minv = np.linalg.inv(M)
        dtau_dqd = r.dtau_dqd + np.diag(fr[1]) if fr is not None else r.dtau_dqd
        return qdd, -Minv @ r.dtau_dq, -Minv @ dtau_dqd

    def torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """Actuator torques for (q, q̇, q̈) (:meth:`inverse`)."""
        return self.inverse(q, qd, qdd)

    def torque_jacobians(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(τ, ∂τ/∂q, ∂τ/∂q̇, ∂τ/∂q̈) of :meth:`inverse`: on trees exact, from the tree's
        inverse-dynamics derivatives (``dyn.inverse(…, derivatives=True)``: Pinocchio's
        ``computeRNEADerivatives`` or the package's forward-mode RNEA, seed 004 §7) plus the
        drives' ``M_r`` in ∂τ/∂q̈ and ``dF/dq̇`` in ∂τ/∂q̇, mapped by B⁺ when not every joint
        is actuated; with loops by one-sided differences (the null-space least squares has
        no closed-form derivative here; ∂τ/∂q̈ is exact, τ being linear in q̈)."""
        q, qd, qdd = (np.asarray(v, float) for v in (q, qd, qdd))
        n = self.n
        if self.loops.m:
            tau = self.inverse(q, qd, qdd)
            J = np.zeros((3, len(tau), n))
            for k in range(n):
                e = np.zeros(n)
                e[k] = _FD_STEP
                J[0, :, k] = (self.inverse(q + e, qd, qdd) - tau) / _FD_STEP
                J[1, :, k] = (self.inverse(q, qd + e, qdd) - tau) / _FD_STEP
                e[k] = 1.0
                J[2, :, k] = self.inverse(q, qd, qdd + e) - tau
            return tau, J[0], J[1], J[2]
        r = self.dyn.inverse(q, qd, qdd, derivatives=True)
        tau, Jq, Jv, Ja = r.tau, r.dtau_dq, r.dtau_dqd, r.M
        d, fr = self.drives, self._friction(qd)
        if d is not None and d.has_rotor:
            tau, Ja = tau + d.M @ qdd, Ja + d.M
        if fr is not None:
            tau, Jv = tau + fr[0], Jv + np.diag(fr[1])
        if self.B.shape[1] == n:
            return tau, Jq, Jv, Ja
        Bp = np.linalg.pinv(self.B)
        return Bp @ tau, Bp @ Jq, Bp @ Jv, Bp @ Ja

    def link_jacobian(self, q: np.ndarray, link: str) -> np.ndarray:
        """(6, n) Jacobian of link ``link``'s twist ``[ω; v]`` in its own frame, at its
        origin (Pinocchio's ``LOCAL``), so that a wrench ``w = [n; f]`` there (link frame)
        takes the joint torques ``Jᵀ w`` (issue 27 item 4): from the world joint screws
        axes ``a_j`` of the ancestors ``K[b, j]`` (seed 004 §5): a revolute joint at ``p_j``
        moves the link origin ``p`` by ``ω = Rᵀ a_j``, ``v = Rᵀ a_j × (p − p_j)``, a prismatic
        one by ``v = Rᵀ a_j``.

        :raises MbfgError: ``link`` is not a link of the URDF (the message lists them).
        """
        names = self.model.link_names
        if link not in names:
            raise MbfgError(f'{self.model.source}: link {link!r} is not a link of the robot '
                            f'(links: {", ".join(names)})')
        b = names.index(link)
        dyn = self.loops.dyn
        T = dyn.poses(q)
        a = (T[1:, :3, :3] @ self.model.axis[:, :, None])[:, :, 0]      # world joint axes
        rev = np.array([k == 'revolute' for k in self.model.joint_type])[:, None]
        R, p = T[b, :3, :3], T[b, :3, 3]
        J = np.empty((6, self.n))
        J[:3] = R.T @ (a * rev).T
        # velocity of the link origin: ω_j × (p − p_j) (revolute), a_j (prismatic)
        J[3:] = R.T @ np.where(rev, np.cross(a, p - T[1:, :3, 3]), a).T
        return J * dyn.K[b]

    def independent_state_error(self, basis, tau, xs, want):
        """Independent-coordinate dynamics are planar only (seed 000 Fig. 3's graph)."""
        raise MbfgError('forward dynamics: independent coordinates are planar only; a '
                        'URDF robot runs in dependent (joint) coordinates')

    # -- what the estimator needs (same contract as the planar System) ---------------------
    @cached_property
    def m(self) -> int:
        """Rows of the loop constraints (dependent rows included; kept: read on every
        tick)."""
        return self.loops.m

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The tree joints (encoders report these; same as ``names``)."""
        return self.model.joint_names

    @property
    def actuator_joints(self) -> tuple[str, ...]:
        """The joint each actuator drives (``actuator_names``)."""
        return self.actuator_names

    def joint_coordinate(self, name: str) -> int | None:
        """The coordinate of q equal to revolute joint ``name``'s angle, or None."""
        names = self.model.joint_names
        if name not in names:
            return None
        j = names.index(name)
        return j if self.model.joint_type[j] == 'revolute' else None

    @property
    def description(self):
        """The edge description (:class:`~mbfg_ros.core.interface.EdgeDescription`)."""
        return self.mech

    def sensor_model(self):
        """The estimator's measurement models (:class:`.sensor_model.SpatialSensorModel`)."""
        from .sensor_model import SpatialSensorModel
        return SpatialSensorModel(self)

    # -- simulation and drawing (interface.SimulatedSystem, issue 23) ---------------------
    @property
    def independent_indices(self) -> tuple[int, ...]:
        """The default independent coordinates (:attr:`z_idx`)."""
        return self.z_idx

    @property
    def independent_dynamics(self) -> bool:
        """Joint coordinates run the dependent-coordinate graph only."""
        return False

    def integrator(self, dt: float, limits: bool = True):
        """The joint-space integrator (:class:`.simulate.SpatialStepper`, trapezoidal); with
        ``limits`` the joint position limits are inelastic end stops
        (:func:`.simulate.end_stops_of`, issue 30 item 3)."""
        return SpatialStepper(self, dt, end_stops=end_stops_of(self) if limits else None)

    def end_stop_model(self, dt: float) -> None:
        """None: a URDF robot's limits are held by its own integrator (:meth:`integrator`),
        not by forces in the factor-graph forward dynamics."""
        return None

    def sensor_config(self, **fields: float):
        """A :class:`.sensor_sim.SpatialSensorConfig` of ``fields``."""
        return SpatialSensorConfig(**fields)

    def simulate_measurements(self, t: np.ndarray, q: np.ndarray, qd: np.ndarray,
                              qdd: np.ndarray, tau: np.ndarray | None, config,
                              rng: np.random.Generator) -> list:
        """:func:`.sensor_sim.simulate_spatial_measurements`."""
        return simulate_spatial_measurements(self, t, q, qd, qdd, tau, config, rng)

    def drawing(self) -> None:
        """None: a URDF robot is drawn by ``robot_state_publisher`` from its joint states."""
        return None

    def state_terms(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None,
                    jacobians: bool = True):
        """(φ, φ_q, ∂(φ_q q̇)/∂q, q̈, ∂q̈/∂q, ∂q̈/∂q̇) for the estimator's state factor: exact
        on trees (the per-tick path); with loops ∂(φ_q q̇)/∂q by one-sided differences."""
        tau = np.zeros(self.B.shape[1]) if tau is None else tau
        n = self.n
        if not self.loops.m:
            phi, empty = self._no_rows
            if jacobians:
                qdd, dq, dqd = self.dyn.acceleration_jacobians(q, qd, tau) if \
                    self._plain_tree else self.accelerations(q, qd, tau, jacobians=True)
                return StateTerms(phi, empty, empty, qdd, dq, dqd)
            return StateTerms(phi, empty, empty, self.forward(q, qd, tau), None, None)
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        phi = self.loops.phi(q)
        Jc = self.loops.jacobian(q)[0]
        Jd = np.zeros((self.loops.m, n))
        if jacobians:
            base = Jc @ qd
            for k in range(n):
                e = np.zeros(n)
                e[k] = _FD_STEP
                Jd[:, k] = (self.loops.jacobian(q + e)[0] @ qd - base) / _FD_STEP
            qdd, dq, dqd = self.accelerations(q, qd, tau, jacobians=True)
            return StateTerms(phi, Jc, Jd, qdd, dq, dqd)
        return StateTerms(phi, Jc, Jd, self.forward(q, qd, tau), None, None)

    @property
    def z_idx(self) -> tuple[int, ...]:
        """Default independent coordinates: every joint of a tree; with loops, the joints
        most along the null space of φ_q at q0 (pivoted QR of Nᵀ), one per degree of
        freedom (used by the factor-graph forward dynamics for its priors)."""
        if not self.loops.m:
            return tuple(range(self.n))
        from scipy.linalg import qr
        N = self.null_space(self.q0)[0]
        piv = qr(N.T, pivoting=True)[2]
        return tuple(sorted(int(i) for i in piv[:N.shape[1]]))

    @property
    def dof(self) -> int:
        return self.n - int(np.linalg.matrix_rank(self.loops.jacobian(self.q0)[0])) \
            if self.loops.m else self.n

    def null_space(self, q: np.ndarray, qd: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(N (n, dof), φ_q⁺ γ (n,), φ_q) at (q, q̇): the constraint-consistent directions."""
        if not self.loops.m:
            return np.eye(self.n), np.zeros(self.n), np.zeros((0, self.n))
        Jc, gamma = self.loops.jacobian(q, qd)
        U, sv, Vt = np.linalg.svd(Jc)
        r = int(np.sum(sv > RANK_TOL * max(1.0, sv[0])))
        N = Vt[r:].T
        # φ_q⁺ γ from the same SVD
        pinv_g = Vt[:r].T @ ((U[:, :r].T @ gamma) / sv[:r])
        return N, pinv_g, Jc

    def inverse(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """Actuator torques (na,) that produce (q, q̇, q̈) (seed 003's inverse dynamics; with
        the drives' ``M_r q̈ + F(q̇)``)."""
        if self._plain_tree:
            return self.dyn.torques(q, qd, qdd)
        tau_q = self.dyn.inverse(q, qd, qdd).tau
        d, fr = self.drives, self._friction(qd)
        if d is not None and d.has_rotor:
            tau_q = tau_q + d.M @ np.asarray(qdd, float)
        if fr is not None:
            tau_q = tau_q + fr[0]
        if not self.loops.m and self.B.shape[1] == self.n:
            return tau_q
        N = self.null_space(q)[0]
        tau, *_ = np.linalg.lstsq(N.T @ self.B, N.T @ tau_q, rcond=None)
        return tau

    def forward(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        """q̈ (n,) under actuator torques ``tau`` (na,; None: zero) (seed 003's forward
        dynamics)."""
        if self._plain_tree:
            return self.dyn.accelerations(q, qd, tau if tau is not None else np.zeros(self.n))
        Btau = self._joint_torques(tau) if tau is not None else np.zeros(self.n)
        fr = self._friction(qd)
        if fr is not None:
            Btau = Btau - fr[0]
        rotor = self.drives is not None and self.drives.has_rotor
        if not self.loops.m:
            if rotor:
                return np.linalg.solve(self.mass_matrix(q), Btau - self.dyn.bias(q, qd))
            return self.dyn.forward(q, qd, Btau).qdd
        N, pinv_g, _ = self.null_space(q, qd)
        M = self.mass_matrix(q)
        h = self.dyn.bias(q, qd)
        qdd_p = -pinv_g
        z = np.linalg.solve(N.T @ M @ N, N.T @ (Btau - h - M @ qdd_p))
        return qdd_p + N @ z

    def energy(self, q: np.ndarray, qd: np.ndarray) -> float:
        """Kinetic + gravitational potential energy [J]."""
        M = self.mass_matrix(q)
        T = self.loops.dyn.poses(q)
        m = self.model
        com = (T[:, :3, :3] @ m.com[:, :, None])[:, :, 0] + T[:, :3, 3]
        return float(0.5 * qd @ M @ qd - np.sum(m.mass * (com @ m.gravity)))

    def assemble(self, q_guess: np.ndarray, keep: np.ndarray | None = None,
                 tol: float = 1e-12, iterations: int = 50) -> np.ndarray:
        """Close the loops from ``q_guess`` (Gauss-Newton on φ, minimum-norm steps).

        ``keep``: joint indices held at their guessed values (e.g. the actuated ones).
        """
        q = np.array(q_guess, float)
        if not self.loops.m:
            return q
        free = np.ones(self.n, bool)
        if keep is not None:
            free[np.asarray(keep, int)] = False
        for _ in range(iterations):
            phi = self.loops.phi(q)
            if np.abs(phi).max() < tol:
                return q
            Jc = self.loops.jacobian(q)[0][:, free]
            step, *_ = np.linalg.lstsq(Jc, -phi, rcond=None)
            q[free] += step
        raise AssemblyError(f'the loops do not close from q0 (|φ| = {np.abs(phi).max():.3g} '
                            f'after {iterations} iterations)', source=self.model.source,
                            path='q0')


def build_spatial_system(source: Union[str, bytes, os.PathLike, SpatialModel],
                         overlay: Union[str, os.PathLike, Mapping, None] = None,
                         backend: str = 'auto') -> SpatialSystem:
    """Load (URDF + overlay) or take a ``SpatialModel`` and assemble it at its q0.

    :raises MechanismError: a floating-base model (``SpatialModel.floating``): this system
        and everything built on it (estimator, nodes, CLIs) hold the root fixed.
    """
    model = source if isinstance(source, SpatialModel) else load_spatial(source, overlay)
    if model.floating:     # every method here holds the root fixed (issue 28: next session)
        raise MechanismError('floating-base robots are not supported by the estimator yet '
                             '(nor by the nodes and the CLIs; their dynamics: '
                             'mbfg_ros.spatial.floating)', source=model.source,
                             path=f'joint {model.base_joint!r}' if model.base_joint
                             else 'floating_base')
    dyn = spatial_dynamics(model, backend)
    loops = LoopConstraints(model)
    B = np.eye(model.n)[:, np.asarray(model.actuated, bool)]
    sys0 = SpatialSystem(model=model, dyn=dyn, loops=loops, B=B, q0=np.asarray(model.q0))
    q0 = sys0.assemble(model.q0, keep=np.flatnonzero(model.actuated)
                       if model.actuated.sum() < model.n else None)
    q0.setflags(write=False)
    B.setflags(write=False)
    drives = build_drives(model) if model.drives else None
    return SpatialSystem(model=model, dyn=dyn, loops=loops, B=B, q0=q0, mech=describe(model),
                         drives=drives)
