"""Dynamics of a free-floating base with stance-foot contacts (issue 28 item 1).

The root link of a ``SpatialModel`` with ``floating`` is a free body: its degrees of
freedom come first in the generalized coordinates (seed 004 §5: "the generalized coordinates
are the DOFs of the root link ... and the joint angles"). Pinocchio's free-flyer layout,
configuration and velocity of different sizes (nq = n + 7, nv = n + 6)::

    q = [p (3), quaternion x y z w (4), q_joints (n)]     base position (world) and attitude
    v = [v_b (3), ω_b (3), q̇_joints (n)]                  base twist in the base frame

so a configuration lives on SE(3) × Rⁿ and moves by :meth:`FloatingBaseDynamics.integrate`
(``q ⊕ v dt``) and :meth:`~FloatingBaseDynamics.difference` (``q₁ ⊖ q₀``), never by
adding vectors. :meth:`~FloatingBaseDynamics.base_pose` gives the base as a
``gtsam.Pose3`` (what the factors of :mod:`.contact_factors` hold) and
:meth:`~FloatingBaseDynamics.configuration` goes back.

Equations of motion with point contacts ``c`` in stance (seed 003 §3's constrained
dynamics, a stance foot being a loop closed on the ground, seed 002 §VII)::

    M(q) v̇ + h(q, v) = Sᵀ τ + Σ_c J_cᵀ f_c,        J_c v̇ + γ_c = 0

``S = [0 | 1]`` selects the actuated joints (the base is unactuated), ``J_c`` (3, nv) is the
Jacobian of contact point c's velocity in world axes, ``γ_c = J̇_c v`` its classical
acceleration at ``v̇ = 0`` (Pinocchio's ``LOCAL_WORLD_ALIGNED`` 3-D contact), and ``f_c``
the 3-D force the ground applies on the foot, in world axes. Optionally Baumgarte
stabilisation: ``J_c v̇ + γ_c = −K_d J_c v − K_p (p_c − p_c*)``.

* :meth:`~FloatingBaseDynamics.forward`: free flight (no contact), ``v̇ = ABA(q, v, Sᵀτ)``;
* :meth:`~FloatingBaseDynamics.constrained_forward`: ``(v̇, f_c)`` of the KKT system above;
* :meth:`~FloatingBaseDynamics.inverse`: ``M v̇ + h − Σ J_cᵀ f_c`` (RNEA), whose first six
  rows are the base's unbalanced wrench and the rest the joint torques;
* :meth:`~FloatingBaseDynamics.contact_inverse`: inverse dynamics of a standing or walking
  robot when the contact forces are not measured: the base rows ``M_b v̇ + h_b = J_bᵀ f``
  fix the forces up to the null space of ``J_bᵀ``, internal forces between the feet that
  the base cannot feel (two feet: a squeeze along the line joining them; four feet: six
  such directions); the minimum-norm forces, free of them (seed 003's redundant actuation,
  seed 002 §VII's minimum-torque prior), are taken, then the joint rows give τ.

Not modelled yet: closed loops and joint friction or rotors (both refused: ``SpatialModel.drives``
are not applied), 6-D contacts, unilateral contact and friction cones (a stance foot holds
whatever force the equations ask of it).

Each instance owns one ``pinocchio.Data`` (the Model/Data split of
``pin_backend.PinocchioDynamics``): one per thread. Pinocchio is required here; seed 002's
factor graph (:mod:`.floating_graph`) computes the same dynamics without it and is checked
against it (``test/spatial/test_floating_base_graph.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import gtsam
import numpy as np

from .model import SpatialModel
from .pin_backend import build_pinocchio_model
from .urdf import load_spatial

__all__ = ['FloatingBaseDynamics', 'ContactDynamics', 'BASE_DOF', 'load_floating']

BASE_DOF = 6
"""Velocity coordinates of the free base (its configuration takes 7: position, quaternion)."""


@dataclass(frozen=True)
class ContactDynamics:
    """Accelerations and contact forces of one constrained forward-dynamics solve."""

    vdot: np.ndarray          # (nv,)
    f_c: np.ndarray           # (k, 3) ground force on each stance foot, world axes
    contacts: tuple[str, ...]  # the stance feet, in f_c's row order


def _check_floating(model: SpatialModel, what: str) -> None:
    """A floating tree without loops: closed loops on a free base are not modelled yet."""
    if not model.floating:
        raise ValueError(f'{model.source}: {what} needs a floating base (a URDF floating '
                         'joint or the overlay floating_base: true)')
    if model.loops:
        raise ValueError(f'{model.source}: closed loops on a floating base are not supported '
                         f'yet (loop joint {model.loops[0].name!r})')
    if model.drives:
        from .drives import build_drives
        drives = build_drives(model, model.source)
        if drives.has_friction or drives.has_rotor:
            # never dropped without a word: the URDF's <dynamics> or the overlay's friction
            # and rotor keys are not in these dynamics yet
            raise ValueError(f'{model.source}: joint friction and rotor inertia on a '
                             'floating base are not modelled yet (remove the <dynamics> '
                             'damping/friction or the overlay friction/rotor keys)')


class FloatingBaseDynamics:
    """Free-floating tree dynamics of one ``SpatialModel`` with ``floating`` (module
    docstring), on Pinocchio. Contacts are named as the overlay's ``contacts:``."""

    def __init__(self, model: SpatialModel) -> None:
        _check_floating(model, 'FloatingBaseDynamics')
        import pinocchio as pin
        self._pin = pin
        self.model = model
        self.n = model.n
        self.nq, self.nv = model.n + 7, model.n + BASE_DOF
        self.pmodel = build_pinocchio_model(model)
        self.contact_names = tuple(c.name for c in model.contacts)
        self.joint_names = tuple(model.joint_names)
        self._fid = {}
        for c in model.contacts:      # tree link b is Pinocchio joint b + 1 (1: the base)
            placement = pin.SE3(np.eye(3), np.asarray(c.position, float))
            self._fid[c.name] = self.pmodel.addFrame(pin.Frame(
                f'contact_{c.name}', c.link + 1, 0, placement, pin.FrameType.OP_FRAME))
        self.pdata = self.pmodel.createData()
        self._lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        self._iu = np.triu_indices(self.nv, 1)

    # -- the configuration manifold ---------------------------------------------------------
    def neutral(self, q_joints: np.ndarray | None = None) -> np.ndarray:
        """(nq,) base at the world origin, identity attitude; joints at ``q_joints`` (default
        the model's ``q0``)."""
        q = np.zeros(self.nq)
        q[6] = 1.0
        q[7:] = self.model.q0 if q_joints is None else np.asarray(q_joints, float)
        return q

    def integrate(self, q: np.ndarray, v: np.ndarray, dt: float = 1.0) -> np.ndarray:
        """``q ⊕ v dt`` on SE(3) × Rⁿ (the base moves along its body twist, exp map)."""
        return np.array(self._pin.integrate(self.pmodel, np.asarray(q, float),
                                            np.asarray(v, float) * dt))

    def difference(self, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
        """``q₁ ⊖ q₀`` (nv,): the velocity that moves ``q0`` to ``q1`` in unit time."""
        return np.array(self._pin.difference(self.pmodel, np.asarray(q0, float),
                                             np.asarray(q1, float)))

    @staticmethod
    def base_pose(q: np.ndarray) -> gtsam.Pose3:
        """The base pose of configuration ``q`` as a ``gtsam.Pose3`` (base frame in world)."""
        x, y, z, w = (float(c) for c in q[3:7])
        return gtsam.Pose3(gtsam.Rot3.Quaternion(w, x, y, z), np.asarray(q[:3], float))

    def configuration(self, pose: gtsam.Pose3, q_joints: np.ndarray) -> np.ndarray:
        """(nq,) from a base pose and the joint positions (inverse of :meth:`base_pose`)."""
        q = np.empty(self.nq)
        q[:3] = pose.translation()
        w, x, y, z = pose.rotation().toQuaternion().coeffs()[[3, 0, 1, 2]]
        q[3:7] = (x, y, z, w)
        q[7:] = np.asarray(q_joints, float)
        return q

    @staticmethod
    def base_twist(v: np.ndarray) -> np.ndarray:
        """The base twist ``[ω; v]`` (GTSAM's and seed 002's order) of a velocity ``v``."""
        return np.concatenate([v[3:6], v[:3]])

    # -- unconstrained dynamics ---------------------------------------------------------------
    def _sym(self, A: np.ndarray) -> np.ndarray:
        A = np.array(A)
        A[self._iu[1], self._iu[0]] = A[self._iu]
        return A

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q) (nv, nv) (``pin.crba``, seed 004 §7), base block first."""
        return self._sym(self._pin.crba(self.pmodel, self.pdata, np.asarray(q, float)))

    def bias(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """h(q, v) = C v + g (nv,) (``pin.nonLinearEffects``)."""
        return np.array(self._pin.nonLinearEffects(self.pmodel, self.pdata,
                                                   np.asarray(q, float), np.asarray(v, float)))

    def selection(self) -> np.ndarray:
        """Sᵀ (nv, n): joint torques into generalized forces; the base rows are zero."""
        S_T = np.zeros((self.nv, self.n))
        S_T[BASE_DOF:] = np.eye(self.n)
        return S_T

    def forward(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """v̇ (nv,) in free flight under joint torques ``tau`` (n,) (``pin.aba``)."""
        u = np.zeros(self.nv)
        u[BASE_DOF:] = tau
        return np.array(self._pin.aba(self.pmodel, self.pdata, np.asarray(q, float),
                                      np.asarray(v, float), u))

    def inverse(self, q: np.ndarray, v: np.ndarray, vdot: np.ndarray,
                f_c: np.ndarray | None = None, contacts: Sequence[str] = ()) -> np.ndarray:
        """``M v̇ + h − Σ_c J_cᵀ f_c`` (nv,) (``pin.rnea``): rows 0-5 the base wrench the
        contacts leave unbalanced (zero for a consistent motion), rows 6: the joint torques
        τ. ``f_c`` (k, 3) world-axes forces on the feet ``contacts``."""
        tau = np.array(self._pin.rnea(self.pmodel, self.pdata, np.asarray(q, float),
                                      np.asarray(v, float), np.asarray(vdot, float)))
        if f_c is not None and len(contacts):
            J = self.contact_jacobian(q, contacts)
            tau -= J.T @ np.asarray(f_c, float).reshape(-1)
        return tau

    # -- contacts ---------------------------------------------------------------------------
    def _frames(self, contacts: Sequence[str]) -> list[int]:
        try:
            return [self._fid[c] for c in contacts]
        except KeyError as exc:
            raise ValueError(f'{self.model.source}: {exc.args[0]!r} is not a contact '
                             f'(overlay contacts: {", ".join(self.contact_names)})') from None

    def contact_jacobian(self, q: np.ndarray, contacts: Sequence[str]) -> np.ndarray:
        """J (3k, nv): velocities of the contact points, world axes (``LOCAL_WORLD_ALIGNED``)."""
        pin, pm, pd = self._pin, self.pmodel, self.pdata
        fids = self._frames(contacts)
        pin.computeJointJacobians(pm, pd, np.asarray(q, float))
        pin.updateFramePlacements(pm, pd)
        return np.vstack([pin.getFrameJacobian(pm, pd, f, self._lwa)[:3] for f in fids]) \
            if fids else np.zeros((0, self.nv))

    def contact_kinematics(self, q: np.ndarray, v: np.ndarray, contacts: Sequence[str]
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p (k, 3) world positions, J (3k, nv), γ (3k,)) of the contact points, with
        ``p̈ = J v̇ + γ`` (γ: the classical acceleration at v̇ = 0, seed 004 §5)."""
        pin, pm, pd = self._pin, self.pmodel, self.pdata
        fids = self._frames(contacts)
        q, v = np.asarray(q, float), np.asarray(v, float)
        pin.forwardKinematics(pm, pd, q, v, np.zeros(self.nv))
        pin.updateFramePlacements(pm, pd)
        p = np.array([pd.oMf[f].translation for f in fids]).reshape(-1, 3)
        gamma = np.concatenate([pin.getFrameClassicalAcceleration(pm, pd, f, self._lwa).linear
                                for f in fids]) if fids else np.zeros(0)
        return p, self.contact_jacobian(q, contacts), gamma

    def contact_motion(self, q: np.ndarray, v: np.ndarray, contacts: Sequence[str]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p (k, 3), ṗ (k, 3), ω (k, 3)) of the contact points: positions, linear and
        angular velocities of their frames, world axes (``LOCAL_WORLD_ALIGNED``). With the
        base at the identity pose these are the legs' kinematics in the base frame (what
        leg odometry and a rolling ball foot need: a ball of radius r rolling without
        slipping has its centre moving at ω × r e_z)."""
        pin, pm, pd = self._pin, self.pmodel, self.pdata
        fids = self._frames(contacts)
        pin.forwardKinematics(pm, pd, np.asarray(q, float), np.asarray(v, float))
        k = len(fids)
        p, pdot, w = np.empty((k, 3)), np.empty((k, 3)), np.empty((k, 3))
        for i, f in enumerate(fids):
            p[i] = pin.updateFramePlacement(pm, pd, f).translation
            tw = pin.getFrameVelocity(pm, pd, f, self._lwa)
            pdot[i], w[i] = tw.linear, tw.angular
        return p, pdot, w

    def constrained_forward(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                            contacts: Sequence[str], kp: float = 0.0, kd: float = 0.0,
                            anchors: np.ndarray | None = None) -> ContactDynamics:
        """(v̇, f_c) with the feet ``contacts`` in stance (module docstring): the KKT system
        ``[[M, −Jᵀ], [J, 0]] [v̇; f] = [Sᵀτ − h; −γ − K_d J v − K_p (p − p*)]``, solved by
        least squares so that a rank-deficient J (feet in a singular leg pose) still gives
        the minimum-norm forces. ``anchors`` (k, 3): the stance points p* (default: where
        the feet are, so K_p acts only with anchors)."""
        q, v = np.asarray(q, float), np.asarray(v, float)
        contacts = tuple(contacts)
        M = self.mass_matrix(q)
        h = self.bias(q, v)
        u = -h
        u[BASE_DOF:] += np.asarray(tau, float)
        if not contacts:
            return ContactDynamics(vdot=np.linalg.solve(M, u), f_c=np.zeros((0, 3)),
                                   contacts=())
        p, J, gamma = self.contact_kinematics(q, v, contacts)
        rhs = -gamma - kd * (J @ v)
        if anchors is not None and kp:
            rhs -= kp * (p - np.asarray(anchors, float).reshape(p.shape)).reshape(-1)
        k3 = J.shape[0]
        K = np.zeros((self.nv + k3, self.nv + k3))
        K[:self.nv, :self.nv] = M
        K[:self.nv, self.nv:] = -J.T
        K[self.nv:, :self.nv] = J
        x = np.linalg.lstsq(K, np.concatenate([u, rhs]), rcond=None)[0]
        return ContactDynamics(vdot=x[:self.nv], f_c=x[self.nv:].reshape(-1, 3),
                               contacts=contacts)

    def contact_inverse(self, q: np.ndarray, v: np.ndarray, vdot: np.ndarray,
                        contacts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(τ (n,), f_c (k, 3)): inverse dynamics with unmeasured contact forces (module
        docstring): the minimum-norm forces balancing the base rows, then the joint rows.
        The base wrench is balanced exactly when the feet can carry it (rank 6)."""
        rhs = self.inverse(q, v, vdot)
        if not len(contacts):
            return rhs[BASE_DOF:], np.zeros((0, 3))
        J = self.contact_jacobian(q, contacts)
        f = np.linalg.lstsq(J[:, :BASE_DOF].T, rhs[:BASE_DOF], rcond=None)[0]
        return rhs[BASE_DOF:] - J[:, BASE_DOF:].T @ f, f.reshape(-1, 3)


def load_floating(urdf: str | bytes, overlay: object = None) -> FloatingBaseDynamics:
    """``FloatingBaseDynamics`` of a URDF (path or text) and its overlay (path or mapping
    with ``floating_base: true`` or a URDF floating joint, and ``contacts:``): the one
    call a floating-base estimator's user needs (:func:`.urdf.load_spatial` then the
    dynamics; errors name the file and key)."""
    return FloatingBaseDynamics(load_spatial(urdf, overlay))  # type: ignore[arg-type]
