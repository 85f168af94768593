"""The assembled multibody system and its equations of motion.

:class:`System` bundles what is built once from a mechanism: constraints,
mass matrix, forces, the assembled initial pose, the independent constraint
rows used by the dynamics and a default choice of independent coordinates.

Forward dynamics in dependent coordinates, seed 000 Eq. 5/6, is solved with
the augmented (saddle-point) system

    [M  Φqᵀ] [q̈]   [Q]
    [Φq  0 ] [λ] = [c],   c = −Φ̇q q̇   (Eq. 3)

restricted to a maximal set of independent constraint rows (chosen once at
the assembled pose by pivoted QR; generic mechanisms keep their rank along a
motion). The augmented matrix stays invertible when M is only semidefinite,
which is the case with relative coordinates (they carry no mass; see the
remark under seed 000 Eq. 47), so Eq. 6's M⁻¹ is never formed.

Analytic Jacobians (the seed's library used central differences, one full
solve per column): differentiating the augmented system gives

    A [∂q̈/∂q; ∂λ/∂q]   = [Q_q − Σλ_k Φqq^k ; −(Φ̇q q̇)_q − (Φq q̈)_q]
    A [∂q̈/∂q̇; ∂λ/∂q̇] = [Q_q̇ ; −2 Φ̇q]
    A [∂q̈/∂Q; ∂λ/∂Q]   = [I ; 0]                       (Eq. 47)

so every Jacobian costs one solve with the already factored A.
Independent coordinates: z̈ = B q̈ (Eq. 12 with B R = I, B S = 0) equals
Eq. 15's M̄⁻¹ Q̄; the tests check that identity.

Inverse dynamics (:func:`actuator_efforts`, the system's ``torques``): the actuator efforts
τ and the multipliers λ of

    B_act(q) τ + Φqᵀ λ = M q̈ − Q(q, q̇)           (seed 000 Eq. 2 with Q = B_act τ + Q_ext)

in least squares. It equals the virtual-power inverse dynamics of seed 003 Eq. 6.110 (Rᵀ
of the same equation) without choosing independent coordinates, so it has no singularity
where a fixed choice of z degenerates. The estimator reports the torques consistent with
its estimate through it, and the command law turns a reference motion into torque commands
with it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import scipy.linalg.lapack as lapack

from ..core.errors import MbfgError, MechanismError
from ..core.interface import StateTerms
from .constraints import Constraints, ConstraintTerms
from .drawing import PlanarDrawing
from .end_stops import PlanarEndStops
from .factors import stacked_indep_state_error
from .forces import Forces, mass_matrix
from .lean_kinematics import KinTerms, LeanKinematics
from .kinematics import choose_independent, independent_rows, r_s_matrices, solve_position
from .mechanism_yaml import load_mechanism
from .model import Mechanism
from .sensors import SensorConfig, SensorModel, simulate_measurements

__all__ = ['System', 'build_system', 'load_system', 'Accel', 'forward_accel', 'actuator_efforts',
           'actuator_effort_jacobians', 'accel_independent_eq15', 'assembly_warning',
           'ASSEMBLY_TOLERANCE']


@dataclass(frozen=True, eq=False)
class System:
    """A mechanism ready for computation (immutable)."""

    mech: Mechanism
    constraints: Constraints
    forces: Forces
    M: np.ndarray
    q0: np.ndarray
    rows: np.ndarray          # independent constraint rows used by the dynamics
    dof: int
    z_idx: tuple[int, ...]    # default independent coordinates
    assembly_moves: tuple[tuple[int, float, float], ...] = ()
    """(point, distance assembly moved it from the YAML pose [m], length of the shortest
    body through it [m]) of every point moved by more than ASSEMBLY_TOLERANCE of that
    length (see :func:`assembly_warning`)."""
    lean: LeanKinematics = field(init=False, repr=False)
    """The constraint rows' fast per-state evaluation (built once from ``constraints``;
    :func:`forward_accel` and the estimator's per-tick calls use it)."""
    _A0: np.ndarray = field(init=False, repr=False)
    """The augmented matrix of seed 000 Eq. 5 with M in place and zero constraint blocks
    (copied and filled per state by :func:`forward_accel`)."""

    _I: np.ndarray = field(init=False, repr=False)
    """The identity of A's size (the right-hand side giving A⁻¹; read only)."""
    _rsel: slice | np.ndarray = field(init=False, repr=False)
    """``rows`` as a slice when they are every constraint row in order (the usual case: a
    view instead of a copy per use)."""
    _C2: np.ndarray | None = field(init=False, repr=False)
    """When every row of ``rows`` is a distance or slider row (quadratic in q, seed 000
    Eqs. 41-43): the constant (n + r, (n + r) n) map of the solution s = [q̈; λ] of Eq. 5
    onto Eq. 47's second-order terms, ``(s @ _C2).reshape(n + r, n) = −[Σ_k λ_k Φqq^k;
    (Φqq q̈)[rows]]`` (both linear in s, their Hessians constant); None otherwise."""
    _n: int = field(init=False, repr=False)
    _effort: tuple | None = field(init=False, repr=False)
    """:func:`_effort_plan`'s maps of the inverse dynamics' matrix (None: built per call)."""
    _quad: tuple | None = field(init=False, repr=False)
    """With ``_C2`` and every Φq entry exact (:func:`_quadratic_plan`): (``big``, ``off``,
    mq·n, ``rate``), the maps giving Φq and the augmented matrix A of seed 000 Eq. 5 from q
    in one product and [Φ̇q; −Φ̇q[rows]; −2 Φ̇q[rows]] from q̇ in another
    (:func:`_quadratic_state_terms`); None otherwise."""

    def __post_init__(self) -> None:
        lean = LeanKinematics(self.constraints)
        object.__setattr__(self, 'lean', lean)
        n, r = self.mech.n, len(self.rows)
        object.__setattr__(self, '_n', n)
        every = r == self.constraints.m and np.array_equal(self.rows, np.arange(r))
        object.__setattr__(self, '_rsel', slice(0, r) if every else self.rows)
        A0 = np.zeros((n + r, n + r), order='F')       # LAPACK's order: no copy per call
        A0[:n, :n] = self.M
        object.__setattr__(self, '_A0', A0)
        object.__setattr__(self, '_I', np.eye(n + r, order='F'))
        C2 = None
        if np.all(np.asarray(self.rows) < lean.mq):
            T = lean.T[np.asarray(self.rows, dtype=int)]           # (r, n, n): T[i, c, j]
            C2 = np.zeros((n + r, (n + r) * n))
            C2[n:, :n * n] = -T.reshape(r, n * n)                   # −λ_i T_i (n x n)
            C2[:n, n * n:] = -T.transpose(2, 0, 1).reshape(n, r * n)   # −q̈_j T[:, :, j]
        object.__setattr__(self, '_C2', C2)
        object.__setattr__(self, '_quad', _quadratic_plan(lean, self.rows, A0)
                           if C2 is not None and not lean.K else None)
        object.__setattr__(self, '_effort', _effort_plan(lean, self.rows, self.forces.n_act))

    @property
    def n(self) -> int:
        return self._n

    @property
    def m(self) -> int:
        return self.constraints.m

    @property
    def names(self) -> tuple[str, ...]:
        return self.mech.coordinate_names

    # -- the formulation seam (interface.MultibodySystem) ---------------------------------
    @property
    def angle_coordinates(self) -> tuple[int, ...]:
        """Indices of the angle coordinates (the relative coordinates, after the points)."""
        base = self.mech.n - len(self.mech.relative)
        return tuple(range(base, self.mech.n))

    def mass_matrix(self, q: np.ndarray | None = None) -> np.ndarray:
        """M, constant in natural coordinates (seed 000 Eq. 3); ``q`` is not used."""
        return self.M

    def actuator_matrix(self, q: np.ndarray) -> np.ndarray:
        """B(q): generalized forces of unit actuator efforts (``mech.actuators`` order)."""
        return self.forces.actuator_matrix(q)

    def constraint_terms(self, q: np.ndarray, qd: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Φ, Φq, γ = Φ̇q q̇) over every constraint row (seed 000 Eqs. 24-26). Every row
        quadratic in q (distances and sliders, Eqs. 41-43; no angle row): Φq and Φ̇q from
        the lean kinematics (its affine Φq: each entry the same one- or two-term sum as the
        general path's, so the same bits; ~7 µs less on the four-bar's torque commands,
        issue 24; with angle rows :meth:`Constraints.rates`, the same bits as ``terms``
        without its third derivatives): :meth:`constraint_jacobian`, and Φ from the
        general path (the lean one sums in another order)."""
        phi_q, gamma = self.constraint_jacobian(q, qd)
        return self.constraints.phi(q), phi_q, gamma

    def constraint_jacobian(self, q: np.ndarray, qd: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray]:
        """(Φq, γ = Φ̇q q̇): :meth:`constraint_terms` without Φ, the same bits (the rows
        of the acceleration problem Φq q̈ = −γ, seed 000 Eq. 3, which needs no Φ: the
        command law's, ~3.5 µs less on the four-bar, issue 24). With angle rows Φq and Φ̇q
        of the general path alone (:meth:`Constraints.rates`: ``terms`` also forms Φ and the
        third derivatives of (Φ̇q q̇)_q; the same bits for Φq and Φ̇q)."""
        if not self.lean.K:
            phi_q, phi_q_dot = self.lean.rates(q, qd)
        else:
            phi_q, phi_q_dot = self.constraints.rates(q, qd)
        return phi_q, phi_q_dot @ qd

    def generalized_forces(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray
                           ) -> np.ndarray:
        """Q(q, q̇, τ): applied forces and actuator efforts (seed 000 Eq. 5's right side)."""
        return self.forces.evaluate(q, qd, tau, jacobians=False).Q

    def accelerations(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray,
                      jacobians: bool = False):
        """q̈ under actuator efforts ``tau`` (:func:`forward_accel`); with ``jacobians``
        (q̈, ∂q̈/∂q, ∂q̈/∂q̇) (seed 000 Eqs. 28d-g, exact). q̈ alone of all-quadratic rows
        (the live prediction between ticks): :func:`_quadratic_state_terms` without Φ."""
        if not jacobians and self._quad is not None:
            return _quadratic_state_terms(self, q, qd, tau, False, with_phi=False).qdd
        a = forward_accel(self, q, qd, tau, jacobians=jacobians)
        return (a.qdd, a.qdd_q, a.qdd_qd) if jacobians else a.qdd

    def accel(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None = None, *,
              Q_extra: np.ndarray | None = None, jacobians: bool = False,
              jac_Q: bool = False, terms: ConstraintTerms | KinTerms | None = None) -> Accel:
        """:func:`forward_accel` of this system (seed 000 Eq. 5/6): how the modules this one
        builds on (``factors``, ``end_stops``) reach it without importing this module."""
        return forward_accel(self, q, qd, tau, Q_extra=Q_extra, jacobians=jacobians,
                             jac_Q=jac_Q, terms=terms)

    def acceleration_gain(self, q: np.ndarray) -> np.ndarray:
        """∂q̈/∂τ (n, n_act) at ``q``: q̈ is affine in the actuator efforts (seed 000 Eq. 5:
        ``[M Φqᵀ; Φq 0] [q̈; λ] = [Q; c]`` with ``Q = B(q) τ + …``), so it is the top-left
        block of the augmented matrix's inverse times ``B(q)`` (one factorisation for
        every actuator)."""
        rows = self.rows
        n, r = self.n, len(rows)
        Jq = self.constraints.phi_q(q)[rows]
        A = np.zeros((n + r, n + r))
        A[:n, :n] = self.mass_matrix(q)
        A[:n, n:] = Jq.T
        A[n:, :n] = Jq
        B = self.forces.actuator_matrix(q)
        rhs = np.zeros((n + r, B.shape[1]))
        rhs[:n] = B
        return np.linalg.solve(A, rhs)[:n]

    def torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """Actuator efforts for (q, q̇, q̈) (:func:`actuator_efforts`)."""
        return actuator_efforts(self, q, qd, qdd)

    def torque_jacobians(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(τ, ∂τ/∂q, ∂τ/∂q̇, ∂τ/∂q̈) of the inverse dynamics, analytic
        (:func:`actuator_effort_jacobians`)."""
        return actuator_effort_jacobians(self, q, qd, qdd)

    def state_terms(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None,
                    jacobians: bool = True) -> StateTerms:
        """What the estimator's state factor needs at (q, q̇) (seed 000 Eqs. 24-26):
        Φ, Φq, ∂(Φq q̇)/∂q and q̈ with ∂q̈/∂q, ∂q̈/∂q̇ (one constraint evaluation shared)."""
        if self._quad is not None:
            return _quadratic_state_terms(self, q, qd, tau, jacobians)
        t = self.lean.terms(q, qd)
        qdd, _, qdd_q, qdd_qd, _ = _accel(self, q, qd, tau, None, jacobians, False, t)
        return StateTerms(t.phi, t.phi_q, t.phi_q_dot, qdd, qdd_q, qdd_qd)

    def independent_state_error(self, basis: Sequence[int] | np.ndarray,
                                tau: np.ndarray | None, xs: Sequence[np.ndarray], want: bool):
        """f_ipc + f_ivc + f_iac + f_idyn on stacked x and Z
        (:func:`mbfg_ros.planar.factors.stacked_indep_state_error`)."""
        return stacked_indep_state_error(self, basis, tau, xs, want)

    def link_jacobian(self, q: np.ndarray, link: str) -> np.ndarray:
        """A link's 6-D Jacobian is spatial only (issue 27 item 4: the external wrench at a
        URDF link); a planar mechanism raises."""
        raise MbfgError(f'{self.mech.source}: external_wrench_link {link!r}: a wrench at a '
                        'link needs a URDF robot (planar mechanisms give joint torques only)')

    @property
    def actuator_joints(self) -> tuple[str | None, ...]:
        """The joint each actuator drives (None: an actuator between points)."""
        return tuple(a.joint for a in self.mech.actuators)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Names of the YAML joints (encoders report these)."""
        return tuple(j.name for j in self.mech.joints)

    def joint_coordinate(self, name: str) -> int | None:
        """The coordinate of q equal to revolute joint ``name``'s angle, or None."""
        j = next((j for j in self.mech.joints if j.name == name), None)
        if j is None or j.type != 'revolute':
            return None
        return self.mech.angle_coordinate(j.bodies)

    @property
    def description(self):
        """The edge description (:class:`~mbfg_ros.core.interface.EdgeDescription`)."""
        return self.mech

    def sensor_model(self):
        """The estimator's measurement models (:class:`~mbfg_ros.planar.sensors.SensorModel`)."""
        return SensorModel(self)

    # -- simulation and drawing (interface.SimulatedSystem, issue 23) ---------------------
    @property
    def independent_indices(self) -> tuple[int, ...]:
        """The default independent coordinates z ⊂ q (``z_idx``)."""
        return self.z_idx

    @property
    def independent_dynamics(self) -> bool:
        """Natural coordinates have the independent-coordinate graph (seed 000 Fig. 3)."""
        return True

    def energy(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """Mechanical energy ½ q̇ᵀ M q̇ − Q0ᵀ q for constant applied forces Q0 (gravity);
        ``q``, ``qd`` (n,) or (N, n). Only meaningful for conservative mechanisms whose
        applied forces do not depend on q or q̇."""
        Q0 = self.forces.evaluate(self.q0, np.zeros(self.n), None, jacobians=False)[0]
        q = np.asarray(q, dtype=float)
        qd = np.asarray(qd, dtype=float)
        kinetic = 0.5 * np.einsum('...i,ij,...j->...', qd, self.mass_matrix(q), qd)
        return kinetic - q @ Q0

    def integrator(self, dt: float, limits: bool = True) -> None:
        """None: the factor-graph forward dynamics (``simulation.forward``) integrates a
        planar mechanism (its joint limits through :meth:`end_stop_model`)."""
        return None

    def end_stop_model(self, dt: float):
        """The joint position limits as stiff stop forces for step ``dt``
        (:class:`~mbfg_ros.planar.end_stops.PlanarEndStops`: the system to integrate, the
        limits, the joint angles; issue 30 item 3)."""
        return PlanarEndStops(self, dt)

    def sensor_config(self, **fields: float):
        """A :class:`~mbfg_ros.planar.sensors.SensorConfig` of ``fields``."""
        return SensorConfig(**fields)

    def simulate_measurements(self, t: np.ndarray, q: np.ndarray, qd: np.ndarray,
                              qdd: np.ndarray, tau: np.ndarray | None, config,
                              rng: np.random.Generator) -> list:
        """:func:`~mbfg_ros.planar.sensors.simulate_measurements` (the encoders' effort is
        left empty: ``tau`` is not read)."""
        return simulate_measurements(self, t, q, qd, qdd, config, rng)

    def drawing(self):
        """The ``~/markers`` geometry (:class:`~mbfg_ros.planar.drawing.PlanarDrawing`)."""
        return PlanarDrawing(self.mech)


def build_system(mech: Mechanism, z_idx: Sequence[int] | None = None) -> System:
    """Assemble a mechanism: solve the position problem from the YAML pose.

    :raises MechanismError: if it cannot be assembled, has no degree of
        freedom, or a degree of freedom carries no inertia.
    """
    cons = Constraints(mech)
    guess = mech.q_guess()
    pidx = mech.point_index
    exact = {int(pidx[i, c]): float(guess[pidx[i, c]]) for i, p in enumerate(mech.points)
             if p.exact and not p.fixed for c in (0, 1)}
    q0 = solve_position(cons, guess, exact or None, source=mech.source)
    moves = _assembly_moves(mech, guess, q0)
    Jq = cons.phi_q(q0)
    rows = independent_rows(Jq)
    dof = mech.n - len(rows)
    if dof <= 0:
        raise MechanismError(f'the mechanism has no degree of freedom ({mech.n} coordinates, '
                             f'{len(rows)} independent constraints)', source=mech.source,
                             path='planar_bodies')
    prefer = list(range(mech.n - len(mech.relative), mech.n))   # the angles
    if z_idx is None:
        z_idx = choose_independent(Jq, dof, prefer=prefer)
    z_idx = tuple(int(i) for i in z_idx)
    if len(z_idx) != dof:
        raise MechanismError(f'{len(z_idx)} independent coordinates given, the mechanism has '
                             f'{dof} degrees of freedom', source=mech.source, path='')
    M = mass_matrix(mech)
    R = r_s_matrices(Jq, z_idx).R
    Mbar = R.T @ M @ R
    if np.linalg.cond(Mbar) > 1e12:
        raise MechanismError('a degree of freedom has no inertia (reduced mass matrix '
                             'R^T M R is singular): give the bodies mass and I0',
                             source=mech.source, path='planar_bodies')
    return System(mech, cons, Forces(mech), M, q0, rows, dof, z_idx, moves)


ASSEMBLY_TOLERANCE = 0.03
"""Assembly moving a point by more than this fraction of the shortest body through it
is reported (:func:`assembly_warning`): the YAML pose was far from closing the loops."""


def _assembly_moves(mech: Mechanism, guess: np.ndarray, q0: np.ndarray
                    ) -> tuple[tuple[int, float, float], ...]:
    pidx = mech.point_index
    out = []
    for i, p in enumerate(mech.points):
        if p.fixed:
            continue
        lengths = [b.length for b in mech.bodies if i in b.points and b.length > 0]
        if not lengths:
            continue
        d = float(np.hypot(*(q0[pidx[i]] - guess[pidx[i]])))
        if d > ASSEMBLY_TOLERANCE * min(lengths):
            out.append((i, d, min(lengths)))
    return tuple(out)


def assembly_warning(sys: System) -> str:
    """One line naming the points assembly moved far from the YAML pose ('' if none)."""
    if not sys.assembly_moves:
        return ''
    pts = sys.mech.points
    moved = ', '.join(f'{pts[i].name} by {d:.3g} m ({100 * d / length:.0f} % of its body '
                      f'length {length:g} m)' for i, d, length in sys.assembly_moves)
    return (f'{sys.mech.source}: assembling the mechanism moved {moved} from the YAML pose: '
            'the pose does not close the loops (a length or a point is off?); mark the '
            'points you know exactly with "exact: true" to keep them')


def load_system(path: str | Path, z_idx: Sequence[int] | None = None) -> System:
    """Load a mechanism YAML file and assemble it (see :func:`build_system`)."""
    return build_system(load_mechanism(path), z_idx)


class Accel(NamedTuple):
    """q̈(q, q̇, Q) and, when asked, its Jacobians (seed 000 Eqs. 26d, 28d-g)."""

    qdd: np.ndarray
    lam: np.ndarray                 # multipliers of ``System.rows``
    qdd_q: np.ndarray | None = None
    qdd_qd: np.ndarray | None = None
    qdd_Q: np.ndarray | None = None


def forward_accel(sys: System, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None = None,
                  *, Q_extra: np.ndarray | None = None, jacobians: bool = False,
                  jac_Q: bool = False, terms: ConstraintTerms | KinTerms | None = None) -> Accel:
    """Dependent-coordinate accelerations q̈(q, q̇, Q), seed 000 Eq. 5/6.

    ``tau``: actuator efforts (order of ``mech.actuators``); ``Q_extra``: any
    further generalized force (e.g. the unknown Q of inverse dynamics);
    ``terms``: ``sys.lean.terms(q, qd)`` (or ``sys.constraints.terms``) when the caller
    already has it. One inverse of the augmented matrix A serves q̈, λ and every
    Jacobian (module docstring, Eq. 47): ``[q̈; λ] = A⁻¹ [Q; c]`` and
    ``[∂q̈/∂q, ∂q̈/∂q̇] = (A⁻¹)[:n] [[top_q, Q_q̇], [bot_q, −2 Φ̇q]]`` in one product.
    """
    return Accel(*_accel(sys, q, qd, tau, Q_extra, jacobians, jac_Q, terms))


def _accel(sys: System, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None,
           Q_extra: np.ndarray | None, jacobians: bool, jac_Q: bool,
           terms: ConstraintTerms | KinTerms | None) -> tuple:
    """:func:`forward_accel`'s fields as a tuple (``System.state_terms`` reads them without
    the record). With ``sys._C2`` (every row of the dynamics quadratic in q) Eq. 47's
    second-order terms are one product of the solution [q̈; λ]."""
    n, rows = sys._n, sys._rsel
    lean = sys.lean
    if terms is None and not jacobians:     # q̈ alone: Φq and Φ̇q, no Φ
        t = None
        phi_q, phi_q_dot = lean.rates(q, qd)
    else:
        t = lean.terms(q, qd) if terms is None else terms
        phi_q, phi_q_dot = t.phi_q, t.phi_q_dot
    ft = sys.forces.evaluate(q, qd, tau, jacobians=jacobians)
    Q = ft.Q if Q_extra is None else ft.Q + Q_extra
    Jq = phi_q[rows]
    A = sys._A0.copy(order='F')
    A[:n, n:] = Jq.T
    A[n:, :n] = Jq
    # A⁻¹ by LAPACK's gesv against I (what np.linalg.inv does, without its ~3 µs of Python;
    # getrs with several right-hand sides is pathologically slow in scipy's OpenBLAS)
    Ainv, info = lapack.dgesv(A, sys._I, overwrite_a=True)[2:]
    if info != 0:
        raise np.linalg.LinAlgError('Singular matrix: the augmented matrix [M Φqᵀ; Φq 0]')
    Jd = phi_q_dot[rows]
    # [Q; c], c = −Φ̇q q̇ (np.dot: @'s BLAS product without matmul's dispatch)
    sol = np.dot(Ainv, np.concatenate((Q, -np.dot(Jd, qd))))
    qdd, lam = sol[:n], sol[n:]
    if not jacobians:
        return qdd, lam, None, None, (Ainv[:n, :n] if jac_Q else None)
    C2 = sys._C2
    if C2 is not None:             # quadratic rows: (Φ̇q q̇)_q = 0, Φqq constant
        Rq = np.dot(sol, C2).reshape(len(A), n)      # C2 holds −Φqq: Rq = [−Σλ Φqq; −Φqq q̈]
        Rq[:n] += ft.Q_q
        Jqd = np.dot(Ainv[:n, n:], -2.0 * Jd)
        if sys.forces.state_dependent:
            Jqd += np.dot(Ainv[:n, :n], ft.Q_qd)
        return (qdd, lam, np.dot(Ainv[:n], Rq), Jqd, (Ainv[:n, :n] if jac_Q else None))
    if isinstance(rows, slice):
        lam_full = lam
    else:
        lam_full = np.zeros(sys.m)
        lam_full[rows] = lam
    at = t if isinstance(t, KinTerms) else None
    R = np.empty((len(A), 2 * n))
    R[:n, :n] = ft.Q_q - lean.hess_weighted(q, lam_full, at)
    R[n:, :n] = -(t.gamma_q[rows] + lean.hess_vec(q, qdd, at)[rows])
    R[:n, n:] = ft.Q_qd
    R[n:, n:] = -2.0 * Jd
    J = np.dot(Ainv[:n], R)
    return qdd, lam, J[:, :n], J[:, n:], (Ainv[:n, :n] if jac_Q else None)


def _exact_affine(lean: LeanKinematics) -> bool:
    """Whether Φq = T q + J0 of the quadratic rows (seed 000 Eqs. 41-43) has at most two
    nonzero coefficients per entry, each a power of two: then every product T q is exact
    and any kernel's order of summing it (with exact zeros) gives the same bits, so
    constant maps stacking T's rows differently (:func:`_quadratic_plan`,
    :func:`_effort_plan`) reproduce ``lean.phi_q``'s numbers."""
    Tm = lean.Tm
    if Tm.size == 0:
        return False
    nz = Tm != 0
    return bool(nz.sum(axis=1).max() <= 2 and np.all(np.frexp(np.abs(Tm[nz]))[0] == 0.5))


def _effort_plan(lean: LeanKinematics, rows: np.ndarray, n_act: int
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """(``big``, ``off``): [B_act, Φq[rows]ᵀ] of :func:`actuator_efforts` column-major, its
    Φqᵀ columns as ``np.dot(big, q) + off`` (the actuator columns zero, filled per call);
    None unless every row is quadratic with exact coefficients (:func:`_exact_affine`)."""
    if lean.K or not n_act or not _exact_affine(lean):
        return None
    n = lean.n
    T3 = lean.Tm.reshape(lean.mq, n, n)
    rows = np.asarray(rows, dtype=int).tolist()
    big = np.zeros((n_act + len(rows), n, n))          # column c of A, entry j: row
    off = np.zeros((n_act + len(rows), n))
    for k, i in enumerate(rows):
        big[n_act + k] = T3[i]
        off[n_act + k] = lean.J0[i]
    return big.reshape(-1, n), off.reshape(-1)


def _quadratic_plan(lean: LeanKinematics, rows: np.ndarray, A0: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, int, np.ndarray] | None:
    """The constant maps of :func:`_quadratic_state_terms` (built once per model), or None
    where they would not give :meth:`LeanKinematics.rates`' bits: (``big``, ``off``, mq·n
    (where Φq ends in ``np.dot(big, q) + off``), ``rate``).

    Every row quadratic (seed 000 Eqs. 41-43): Φq = T q + J0 is affine in q, and so is the
    augmented matrix A = [M Φqᵀ; Φq 0] (Eq. 5) on the rows ``rows``. ``big`` stacks T's
    rows for Φq (row-major, mq·n) and for A (column-major, LAPACK's order); ``off`` holds
    J0 and the constant blocks (M, zeros) at the same places. ``np.dot(big, q) + off`` is
    then the separate products' numbers only when each of them is exact in any order: at
    most two nonzero coefficients per row of T, each a power of two (every distance or
    slider row of the configs: ±2), so every product is exact and a sum of two exact terms
    (plus exact zeros) is rounded once whatever the kernel's order or fused multiply-adds;
    J0 is added after the product in both. ``rate`` stacks T, −T[rows] and −2 T[rows]:
    ``np.dot(rate, q̇)`` is [Φ̇q; −Φ̇q[rows]; −2 Φ̇q[rows]] (Eq. 3's c and Eq. 47's −2 Φ̇q
    from one product; scaling by −1 and −2 is exact). Other coefficients: None (the
    general path)."""
    if not _exact_affine(lean):
        return None
    Tm = lean.Tm
    n, mq = lean.n, lean.mq
    rows = np.asarray(rows, dtype=int)
    nr = len(A0)
    T3 = Tm.reshape(mq, n, n)                     # T3[i, j] the row of Φq[i, j]
    big = np.zeros((mq * n + nr * nr, n))
    off = np.zeros(mq * n + nr * nr)
    big[:mq * n] = Tm
    off[:mq * n] = lean.J0.reshape(-1)
    Abig = np.zeros((nr, nr, n))                  # A[a, b] = Abig[a, b] · q + Aoff[a, b]
    Aoff = np.array(A0)
    for k, i in enumerate(rows.tolist()):
        Abig[n + k, :n] = T3[i]                   # Φq[rows] below M
        Abig[:n, n + k] = T3[i]                   # and its transpose beside it
        Aoff[n + k, :n] = lean.J0[i]
        Aoff[:n, n + k] = lean.J0[i]
    big[mq * n:] = Abig.transpose(1, 0, 2).reshape(nr * nr, n)    # column-major
    off[mq * n:] = Aoff.T.reshape(-1)
    Tr = T3[rows].reshape(-1, n)
    rate = np.vstack((Tm, -Tr, -2.0 * Tr))        # q̇ ↦ [Φ̇q; −Φ̇q[rows]; −2 Φ̇q[rows]]
    return big, off, mq * n, rate


def _quadratic_state_terms(sys: System, q: np.ndarray, qd: np.ndarray,
                           tau: np.ndarray | None, jacobians: bool, with_phi: bool = True
                           ) -> StateTerms:
    """:meth:`System.state_terms` where every row of the dynamics is quadratic and
    ``sys._quad`` holds (the four-bar's per-tick state factor, issue 24): the same
    operations on the same numbers as ``lean.terms`` and :func:`_accel`'s ``_C2`` branch,
    with Φq and A of Eq. 5 from one product (``_quadratic_plan``) instead of Φq, then A
    copied and filled, and fewer intermediate calls (~2 µs less). ``with_phi`` False:
    Φ is not evaluated (None; q̈ alone, :meth:`System.accelerations`)."""
    big, off, split, rate = sys._quad
    lean = sys.lean
    n, mq = sys._n, lean.mq
    nr = len(sys._A0)
    r = nr - n
    Y = np.dot(big, q) + off                      # [Φq (row-major); A (column-major)]
    phi_q = Y[:split].reshape(mq, n)
    A = Y[split:].reshape(nr, nr, order='F')
    Yd = np.dot(rate, qd)                         # [Φ̇q; −Φ̇q[rows]; −2 Φ̇q[rows]]
    phi_q_dot = Yd[:split].reshape(mq, n)
    phi = 0.5 * np.dot(phi_q + lean.J0, q) + lean.phi0 if with_phi else None
    forces = sys.forces
    ft = forces.at_rest if forces.idle(tau) else forces.evaluate(q, qd, tau, jacobians)
    Ainv, info = lapack.dgesv(A, sys._I, overwrite_a=True)[2:]
    if info != 0:
        raise np.linalg.LinAlgError('Singular matrix: the augmented matrix [M Φqᵀ; Φq 0]')
    # [Q; c], c = −Φ̇q q̇ (Eq. 3), and [q̈; λ] (Eq. 5)
    sol = np.dot(Ainv, np.concatenate((ft.Q, np.dot(Yd[split:split + r * n].reshape(r, n), qd))))
    qdd = sol[:n]
    if not jacobians:
        return StateTerms(phi, phi_q, phi_q_dot, qdd, None, None)
    Rq = np.dot(sol, sys._C2).reshape(nr, n)      # Eq. 47: [−Σλ Φqq; −Φqq q̈]
    Rq[:n] += ft.Q_q
    Jqd = np.dot(Ainv[:n, n:], Yd[split + r * n:].reshape(r, n))
    if forces.state_dependent:
        Jqd += np.dot(Ainv[:n, :n], ft.Q_qd)
    return StateTerms(phi, phi_q, phi_q_dot, qdd, np.dot(Ainv[:n], Rq), Jqd)


def actuator_efforts(sys: System, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray
                     ) -> np.ndarray:
    """Actuator efforts τ (order of ``mech.actuators``) that produce q̈ at (q, q̇) (module
    docstring: seed 000 Eq. 2, seed 003 Eq. 6.110).

    As many actuators and independent constraints as coordinates (the usual case: one
    actuator per degree of freedom), A = [B_act, Φqᵀ] is square and one LAPACK solve gives
    (τ, λ); otherwise the normal equations of the small well-posed system (10x cheaper
    than lstsq here). lstsq is the fallback when either is singular.
    """
    forces = sys.forces
    n_act = forces.n_act
    if not n_act:
        return np.zeros(0)
    n = sys._n
    Q = forces.evaluate(q, qd, None, jacobians=False).Q if forces.state_dependent else forces.Q0
    plan = sys._effort
    if plan is not None:           # Φq[rows]ᵀ in place from one product (_effort_plan)
        A = (np.dot(plan[0], q) + plan[1]).reshape(n, -1, order='F')
    else:
        Jq = sys.lean.phi_q(q)[sys._rsel]
        A = np.empty((n, n_act + Jq.shape[0]), order='F')   # LAPACK's order: gesv copies none
        A[:, n_act:] = Jq.T
    if n_act == 1:
        A[:, 0] = forces.actuator_entries(q)
    else:
        A[:, :n_act] = np.reshape(forces.actuator_entries(q), (n, n_act))
    b = np.dot(sys.M, qdd) - Q
    if A.shape[1] == n:
        sol, info = lapack.dgesv(A, b, overwrite_a=False, overwrite_b=True)[2:]
    else:
        sol, info = lapack.dgesv(A.T @ A, A.T @ b, overwrite_a=True, overwrite_b=True)[2:]
    if info != 0:                  # singular: least squares
        sol = np.linalg.lstsq(A, b, rcond=None)[0]
    return sol[:n_act]


def actuator_effort_jacobians(sys: System, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(τ, ∂τ/∂q, ∂τ/∂q̇, ∂τ/∂q̈) of :func:`actuator_efforts`, analytic.

    x = [τ; λ] solves ``Aᵀ (A x − b) = 0`` with A = [B_act(q), Φqᵀ] (the independent rows)
    and b = M q̈ − Q₀(q, q̇) (Q₀ without the actuators; M constant, seed 000 Eq. 3).
    Differentiating the normal equations, with r = A x − b and P = (AᵀA)⁻¹::

        ∂x/∂q̈ = P Aᵀ M,   ∂x/∂q̇ = −P Aᵀ Q_q̇,   ∂x/∂q = −P (Aᵀ (Q_q(τ) + Σ λ_k Φqq^k) + G)

    where Q_q(τ) is the generalized forces' Jacobian with the actuators at τ (seed 000
    Eq. 28's force Jacobians), Σ λ_k Φqq^k = ∂(Φqᵀλ)/∂q (Eq. 47's term) and G = ∂(Aᵀ r)/∂q
    at fixed r: ``[rᵀ ∂B_act/∂q; Φqq r]``, zero when the system is solved exactly (as
    many actuators and independent constraints as coordinates). Where A is rank deficient
    (more actuators than degrees of freedom: :func:`actuator_efforts` takes a least-squares
    solution there) by one-sided differences of :func:`actuator_efforts` instead.
    """
    n, n_act = sys.n, len(sys.mech.actuators)
    q, qd, qdd = (np.asarray(v, float) for v in (q, qd, qdd))
    if not n_act:
        z = np.zeros((0, n))
        return np.zeros(0), z, z.copy(), z.copy()
    forces, cons, rows = sys.forces, sys.constraints, sys.rows
    B = forces.actuator_matrix(q)
    A = np.hstack((B, cons.phi_q(q)[rows].T))
    M = sys.mass_matrix(q)
    base = forces.evaluate(q, qd, None, jacobians=True)
    b = M @ qdd - base.Q
    sv = np.linalg.svd(A, compute_uv=False)
    if A.shape[1] > A.shape[0] or sv[-1] <= 1e-9 * sv[0]:
        return _effort_jacobians_fd(sys, q, qd, qdd)
    P = np.linalg.inv(A.T @ A)
    x = P @ (A.T @ b)
    tau, lam = x[:n_act], x[n_act:]
    r = A @ x - b
    ft = forces.evaluate(q, qd, tau, jacobians=True)
    lam_full = np.zeros(sys.m)
    lam_full[rows] = lam
    Fq = ft.Q_q + cons.hess_weighted(q, lam_full)
    G = np.zeros((len(x), n))
    if np.any(r):
        G[n_act:] = cons.hess_vec(q, r)[rows]
        unit = np.zeros(n_act)
        for a in range(n_act):
            unit[a] = 1.0
            G[a] = r @ (forces.evaluate(q, qd, unit, jacobians=True).Q_q - base.Q_q)
            unit[a] = 0.0
    PA = P @ A.T
    x_q = -(PA @ Fq + P @ G)
    x_qd = -(PA @ ft.Q_qd)
    x_qdd = PA @ M
    return tau, x_q[:n_act], x_qd[:n_act], x_qdd[:n_act]


def _effort_jacobians_fd(sys: System, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(τ, ∂τ/∂q, ∂τ/∂q̇, ∂τ/∂q̈) by one-sided differences (step √ε) of
    :func:`actuator_efforts`: the rank-deficient case of :func:`actuator_effort_jacobians`."""
    tau = actuator_efforts(sys, q, qd, qdd)
    n, h = sys.n, 1.5e-8
    J = np.zeros((3, len(tau), n))
    for k in range(n):
        e = np.zeros(n)
        e[k] = h
        J[0, :, k] = (actuator_efforts(sys, q + e, qd, qdd) - tau) / h
        J[1, :, k] = (actuator_efforts(sys, q, qd + e, qdd) - tau) / h
        J[2, :, k] = (actuator_efforts(sys, q, qd, qdd + e) - tau) / h
    return tau, J[0], J[1], J[2]


def accel_independent_eq15(sys: System, q: np.ndarray, qd: np.ndarray,
                           Q: np.ndarray, z_idx: Sequence[int] | None = None) -> np.ndarray:
    """z̈ by seed 000 Eq. 15 literally: (RᵀMR)⁻¹ Rᵀ(Q − M S c). For tests and reference."""
    z_idx = sys.z_idx if z_idx is None else z_idx
    cons = sys.constraints
    Jq = cons.phi_q(q)
    R, S = r_s_matrices(Jq, z_idx)
    c = -(cons.phi_q_dot(q, qd) @ qd)
    M = sys.mass_matrix(q)
    return np.linalg.solve(R.T @ M @ R, R.T @ (Q - M @ (S @ c)))
