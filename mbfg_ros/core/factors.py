"""Factors of seed 000 §6 as pure error functions, and their GTSAM binding.

Each ``*_error`` function takes its fixed parameters first, then the list of
variable values ``xs`` and a flag ``want_jacobians``; it returns the error
vector and, when asked, the list of Jacobians (one per variable, analytic).
:func:`custom_factor` binds one to a :class:`gtsam.CustomFactor` (GTSAM's
python/CustomFactors.md pattern) through a callback that keeps its last
evaluation (:class:`_Evaluation`: ISAM2 relinearises unchanged factors in its batch
steps). A factor depends only on its keys and fixed parameters (no hidden inputs).

Factors:
    prior (21)             -> :func:`prior_factor` (GTSAM's PriorFactorVector)
    Euler f_ei (22)        -> :func:`euler_error`
    trapezoidal f_ti (23)  -> :func:`trapezoidal_error`
    f_dpc (24)             -> :func:`position_constraint_error`
    f_dvc (25)             -> :func:`velocity_constraint_error`
    f_ddyn (26)            -> :func:`forward_dynamics_error`
    f_idyn (27)            -> :func:`forward_dynamics_indep_error`
    f_didyn (28)           -> :func:`inverse_dynamics_error` (Q a variable)
    f_iidyn (29)           -> :func:`inverse_dynamics_indep_error`
    f_ipc, f_ivc, f_iac (30-32) -> :func:`ipc_error`, :func:`ivc_error`, :func:`iac_error`
    f_eq                   -> not needed: consecutive stacked states share the integrator factor

For speed (each Python callback costs tens of microseconds) the problems use
*stacked* variables ``x = [q, q̇, q̈]`` with :func:`stacked_state_error`
(f_dpc + f_dvc + f_ddyn on one step) and :func:`stacked_trapezoidal_error` /
:func:`stacked_euler_error` (two integrator factors between steps): the same
equations, fewer and fatter factors.
"""
from __future__ import annotations

from typing import Callable, Sequence

import gtsam
import numpy as np

from ..planar.constraints import Constraints
from ..planar.dynamics import System, forward_accel
from ..planar.kinematics import selector

__all__ = [
    'ErrorFn', 'custom_factor', 'linear_factor', 'prior_factor', 'euler_error',
    'trapezoidal_error', 'position_constraint_error', 'velocity_constraint_error',
    'forward_dynamics_error', 'forward_dynamics_indep_error', 'inverse_dynamics_error',
    'inverse_dynamics_indep_error', 'ipc_error', 'ivc_error', 'iac_error',
    'stacked_state_error', 'stacked_trapezoidal_error', 'stacked_trapezoidal_jerk_error',
    'stacked_euler_error',
    'stacked_integrator_jacobians',
    'stacked_indep_state_error', 'basis_matrix', 'sigmas',
]

ErrorFn = Callable[[Sequence[np.ndarray], bool], tuple[np.ndarray, list[np.ndarray] | None]]


class _Evaluation:
    """A CustomFactor's callback: ``fn`` at the factor's keys, keeping its last evaluation.

    Called again at the very same values (not a tolerance: the same numbers), it returns
    the kept residual and Jacobians instead of re-running Python. The estimator
    linearises every factor once (relinearisation off), yet ISAM2 relinearises *every*
    factor of the smoother at its unchanged linearisation point whenever an update
    affects 65 % or more of the variables (its batch step): ~80 Python factors, 15-40 ms
    at 1 kHz where a tick takes ~1.5 ms. With the kept evaluations that step costs
    only GTSAM's own elimination. Elsewhere (iterative solvers) the values change
    between calls and every call evaluates ``fn``.
    """

    __slots__ = ('fn', 'keys', 'xs', 'e', 'J')

    def __init__(self, fn: ErrorFn, keys: tuple[int, ...]) -> None:
        self.fn, self.keys = fn, keys
        self.xs: list[np.ndarray] | None = None
        self.e: np.ndarray | None = None
        self.J: list[np.ndarray] | None = None

    def __call__(self, this: gtsam.CustomFactor, values: gtsam.Values,
                 jacobians: list | None) -> np.ndarray:
        xs = [values.atVector(k) for k in self.keys]
        want = jacobians is not None
        if (self.xs is None or (want and self.J is None)
                or not all(np.array_equal(a, b) for a, b in zip(xs, self.xs))):
            e, J = self.fn(xs, want)
            self.xs, self.e = xs, e
            self.J = [np.asfortranarray(Ji, dtype=float) for Ji in J] if want else None
        if want:
            for i, Ji in enumerate(self.J):
                jacobians[i] = Ji
        return self.e


def custom_factor(keys: Sequence[int], noise: gtsam.noiseModel.Base, fn: ErrorFn
                  ) -> gtsam.CustomFactor:
    """A GTSAM CustomFactor over vector-valued ``keys`` computing ``fn`` (its last
    evaluation kept: :class:`_Evaluation`)."""
    keys = tuple(int(k) for k in keys)
    return gtsam.CustomFactor(noise, list(keys), _Evaluation(fn, keys))


def linear_factor(keys: Sequence[int], noise: gtsam.noiseModel.Base, fn: ErrorFn | None,
                  xs: Sequence[np.ndarray],
                  evaluated: tuple[np.ndarray, Sequence[np.ndarray]] | None = None
                  ) -> gtsam.LinearContainerFactor:
    """``fn`` linearised once at ``xs`` (the values of ``keys``), as GTSAM's built-in
    linear factor: a whitened :class:`gtsam.JacobianFactor` in a
    :class:`gtsam.LinearContainerFactor` holding its linearisation point (issue 24).

    Numerically the factor :func:`custom_factor` gives once GTSAM linearises it at
    ``xs`` (``NoiseModelFactor::linearize``: A = Σ^-½ J, b = −Σ^-½ e, no noise model
    left), but ISAM2 never calls back into Python: each callback costs tens of
    microseconds per linearisation. Only for a solver that keeps the linearisation
    point (ISAM2 without relinearisation): away from ``xs`` GTSAM moves only b,
    b − A δ (the factor stays linear). ``noise`` is diagonal (a constrained model
    has no whitening: use :func:`custom_factor`).

    ``evaluated``: ``fn(xs, True)`` when the caller has it already (e.g. an innovation
    gate that evaluated the same model at the same point): then ``fn`` is not called.
    """
    e, J = fn(xs, True) if evaluated is None else evaluated
    inv = 1.0 / noise.sigmas()
    b = -e * inv
    # Σ^-½ J row by row, built transposed so that the result is column-major (Eigen's
    # layout: pybind11 then passes it without a copy)
    A = [(np.asarray(Ji).T * inv).T for Ji in J]
    point = gtsam.Values()
    if len(keys) == 1:
        jf = gtsam.JacobianFactor(keys[0], A[0], b, None)
    elif len(keys) == 2:
        jf = gtsam.JacobianFactor(keys[0], A[0], keys[1], A[1], b, None)
    else:
        raise ValueError(f'linear_factor: 1 or 2 keys, got {len(keys)}')
    for k, x in zip(keys, xs):
        point.insert(k, x)
    return gtsam.LinearContainerFactor(jf, point)


def sigmas(*blocks: tuple[int, float]) -> gtsam.noiseModel.Diagonal:
    """Diagonal noise from (size, sigma) blocks."""
    return gtsam.noiseModel.Diagonal.Sigmas(
        np.concatenate([np.full(size, s, dtype=float) for size, s in blocks]))


def prior_factor(key: int, value: np.ndarray, noise: gtsam.noiseModel.Base
                 ) -> gtsam.PriorFactorVector:
    """f_prior, Eq. 21: e = x − x0 (GTSAM's built-in factor)."""
    return gtsam.PriorFactorVector(key, np.asarray(value, dtype=float), noise)


# -- integrators -----------------------------------------------------------------
def euler_error(dt: float, xs: Sequence[np.ndarray], want: bool):
    """f_ei, Eq. 22: e = x_{t+1} − x_t − Δt ẋ_t; variables (x_t, x_{t+1}, ẋ_t)."""
    x0, x1, xd0 = xs
    e = x1 - x0 - dt * xd0
    if not want:
        return e, None
    eye = np.eye(len(x0))
    return e, [-eye, eye, -dt * eye]


def trapezoidal_error(dt: float, xs: Sequence[np.ndarray], want: bool):
    """f_ti, Eq. 23: e = x_{t+1} − x_t − Δt/2 (ẋ_t + ẋ_{t+1}).

    Variables (x_t, x_{t+1}, ẋ_t, ẋ_{t+1}).
    """
    x0, x1, xd0, xd1 = xs
    e = x1 - x0 - 0.5 * dt * (xd0 + xd1)
    if not want:
        return e, None
    eye = np.eye(len(x0))
    return e, [-eye, eye, -0.5 * dt * eye, -0.5 * dt * eye]


# -- constraints -----------------------------------------------------------------
def position_constraint_error(cons: Constraints, xs: Sequence[np.ndarray], want: bool):
    """f_dpc, Eq. 24: e = Φ(q), ∂e/∂q = Φq."""
    q = xs[0]
    return cons.phi(q), ([cons.phi_q(q)] if want else None)


def velocity_constraint_error(cons: Constraints, xs: Sequence[np.ndarray], want: bool):
    """f_dvc, Eq. 25: e = Φq q̇; ∂e/∂q = Φ̇q (Eq. 40c), ∂e/∂q̇ = Φq."""
    q, qd = xs
    Jq = cons.phi_q(q)
    e = Jq @ qd
    return e, ([cons.phi_q_dot(q, qd), Jq] if want else None)


def ipc_error(cons: Constraints, idx: Sequence[int], xs: Sequence[np.ndarray], want: bool):
    """f_ipc, Eq. 30: e = [Φ(q); q[idx] − z]; variables (q, z)."""
    q, z = xs
    idx = list(idx)
    e = np.concatenate((cons.phi(q), q[idx] - z))
    if not want:
        return e, None
    d = len(idx)
    return e, [np.vstack((cons.phi_q(q), selector(idx, len(q)))),
               np.vstack((np.zeros((cons.m, d)), -np.eye(d)))]


def ivc_error(cons: Constraints, idx: Sequence[int], xs: Sequence[np.ndarray], want: bool):
    """f_ivc, Eq. 31: e = [Φq q̇; q̇[idx] − ż]; variables (q, q̇, ż)."""
    q, qd, zd = xs
    idx = list(idx)
    Jq = cons.phi_q(q)
    e = np.concatenate((Jq @ qd, qd[idx] - zd))
    if not want:
        return e, None
    d, n = len(idx), len(q)
    return e, [np.vstack((cons.phi_q_dot(q, qd), np.zeros((d, n)))),
               np.vstack((Jq, selector(idx, n))),
               np.vstack((np.zeros((cons.m, d)), -np.eye(d)))]


def iac_error(cons: Constraints, idx: Sequence[int], xs: Sequence[np.ndarray], want: bool):
    """f_iac, Eq. 32: e = [Φ̇q q̇ + Φq q̈; q̈[idx] − z̈]; variables (q, q̇, q̈, z̈)."""
    q, qd, qdd, zdd = xs
    idx = list(idx)
    t = cons.terms(q, qd)
    e = np.concatenate((t.phi_q_dot @ qd + t.phi_q @ qdd, qdd[idx] - zdd))
    if not want:
        return e, None
    d, n = len(idx), len(q)
    zeros = np.zeros((d, n))
    return e, [np.vstack((t.gamma_q + cons.hess_vec(q, qdd), zeros)),
               np.vstack((2.0 * t.phi_q_dot, zeros)),
               np.vstack((t.phi_q, selector(idx, n))),
               np.vstack((np.zeros((cons.m, d)), -np.eye(d)))]


# -- dynamics --------------------------------------------------------------------
def forward_dynamics_error(sys: System, tau: np.ndarray | None, xs: Sequence[np.ndarray],
                           want: bool):
    """f_ddyn, Eq. 26: e = q̈(q, q̇) − q̈ with analytic ∂/∂q, ∂/∂q̇ (see dynamics.py)."""
    q, qd, qdd = xs
    a = forward_accel(sys, q, qd, tau, jacobians=want)
    e = a.qdd - qdd
    return e, ([a.qdd_q, a.qdd_qd, -np.eye(len(q))] if want else None)


def forward_dynamics_indep_error(sys: System, idx: Sequence[int], tau: np.ndarray | None,
                                 xs: Sequence[np.ndarray], want: bool):
    """f_idyn, Eq. 27: e = z̈(q, q̇) − z̈ with z̈ = B q̈ (≡ Eq. 15); variables (q, q̇, z̈)."""
    q, qd, zdd = xs
    idx = list(idx)
    a = forward_accel(sys, q, qd, tau, jacobians=want)
    e = a.qdd[idx] - zdd
    return e, ([a.qdd_q[idx], a.qdd_qd[idx], -np.eye(len(idx))] if want else None)


def inverse_dynamics_error(sys: System, tau: np.ndarray | None, xs: Sequence[np.ndarray],
                           want: bool):
    """f_didyn, Eq. 28: e = q̈(q, q̇, Q) − q̈ with Q (n) a variable.

    Q is the generalized force *added* to the modelled ones (gravity, springs,
    ``tau``); ∂e/∂Q is Eq. 47 computed through the augmented system, which
    stays valid with relative coordinates (where Eq. 47's M⁻¹ does not exist).
    """
    q, qd, qdd, Q = xs
    a = forward_accel(sys, q, qd, tau, Q_extra=Q, jacobians=want, jac_Q=want)
    e = a.qdd - qdd
    return e, ([a.qdd_q, a.qdd_qd, -np.eye(len(q)), a.qdd_Q] if want else None)


def inverse_dynamics_indep_error(sys: System, idx: Sequence[int], tau: np.ndarray | None,
                                 xs: Sequence[np.ndarray], want: bool):
    """f_iidyn, Eq. 29: e = z̈(q, q̇, Q) − z̈; ∂e/∂Q = rows idx of Eq. 47 (= M̄⁻¹Rᵀ, Eq. 50)."""
    q, qd, zdd, Q = xs
    idx = list(idx)
    a = forward_accel(sys, q, qd, tau, Q_extra=Q, jacobians=want, jac_Q=want)
    e = a.qdd[idx] - zdd
    return e, ([a.qdd_q[idx], a.qdd_qd[idx], -np.eye(len(idx)), a.qdd_Q[idx]]
               if want else None)


# -- stacked variables [q, q̇, q̈] ------------------------------------------------
def stacked_state_error(sys: System, tau: np.ndarray | None, xs: Sequence[np.ndarray],
                        want: bool):
    """f_dpc + f_dvc + f_ddyn (Eqs. 24-26) on one stacked state x = [q, q̇, q̈].

    ``sys``: any mechanism with ``state_terms`` (the planar ``System`` or a spatial
    ``SpatialSystem``, whose loop rows are seed 002 §VII's and q̈ its tree dynamics).

    Error rows: [Φ(q) (m); Φq q̇ (m); q̈(q, q̇) − q̈ (n)].
    """
    n, m = sys.n, sys.m
    x = xs[0]
    q, qd, qdd = x[:n], x[n:2 * n], x[2 * n:]
    a = t = sys.state_terms(q, qd, tau, want)
    e = np.concatenate((t.phi, t.phi_q @ qd, a.qdd - qdd))
    if not want:
        return e, None
    J = np.zeros((2 * m + n, 3 * n))
    J[:m, :n] = t.phi_q
    J[m:2 * m, :n] = t.phi_q_dot
    J[m:2 * m, n:2 * n] = t.phi_q
    J[2 * m:, :n] = a.qdd_q
    J[2 * m:, n:2 * n] = a.qdd_qd
    J[2 * m:, 2 * n:] = -np.eye(n)
    return e, [J]


def stacked_integrator_jacobians(n: int, dt: float, trapezoidal: bool
                                 ) -> tuple[np.ndarray, np.ndarray]:
    """A0, A1 with e = A0 x_{k-1} + A1 x_k for stacked x = [p, ṗ, p̈] (Eqs. 22/23)."""
    eye = np.eye(n)
    J0 = np.zeros((2 * n, 3 * n))
    J1 = np.zeros((2 * n, 3 * n))
    h = 0.5 * dt if trapezoidal else dt
    J0[:n, :n] = -eye
    J0[:n, n:2 * n] = -h * eye
    J0[n:, n:2 * n] = -eye
    J0[n:, 2 * n:] = -h * eye
    J1[:n, :n] = eye
    J1[n:, n:2 * n] = eye
    if trapezoidal:
        J1[:n, n:2 * n] = -h * eye
        J1[n:, 2 * n:] = -h * eye
    return J0, J1


def stacked_trapezoidal_error(n: int, dt: float, xs: Sequence[np.ndarray], want: bool):
    """Two f_ti (Eq. 23) between stacked states: q from q̇, and q̇ from q̈."""
    x0, x1 = xs
    h = 0.5 * dt
    e = np.concatenate((x1[:n] - x0[:n] - h * (x0[n:2 * n] + x1[n:2 * n]),
                        x1[n:2 * n] - x0[n:2 * n] - h * (x0[2 * n:] + x1[2 * n:])))
    return e, (list(stacked_integrator_jacobians(n, dt, True)) if want else None)


def stacked_trapezoidal_jerk_error(n: int, dt: float, xs: Sequence[np.ndarray], want: bool):
    """:func:`stacked_trapezoidal_error` plus the change of q̈ over the step, q̈_k − q̈_{k−1}
    (a bounded-jerk process model). Where the dynamics say little about q̈ (motor torques
    unknown), the trapezoidal rule alone leaves q̈ free to alternate from tick to tick
    (q̇_k − q̇_{k−1} = dt/2 (q̈_{k−1} + q̈_k) only fixes the sum); these rows damp it."""
    e, J = stacked_trapezoidal_error(n, dt, xs, want)
    x0, x1 = xs
    e = np.concatenate((e, x1[2 * n:] - x0[2 * n:]))
    if not want:
        return e, None
    eye = np.eye(n)
    J0 = np.vstack((J[0], np.hstack((np.zeros((n, 2 * n)), -eye))))
    J1 = np.vstack((J[1], np.hstack((np.zeros((n, 2 * n)), eye))))
    return e, [J0, J1]


def stacked_euler_error(n: int, dt: float, xs: Sequence[np.ndarray], want: bool):
    """Two f_ei (Eq. 22) between stacked states."""
    x0, x1 = xs
    e = np.concatenate((x1[:n] - x0[:n] - dt * x0[n:2 * n],
                        x1[n:2 * n] - x0[n:2 * n] - dt * x0[2 * n:]))
    return e, (list(stacked_integrator_jacobians(n, dt, False)) if want else None)


def basis_matrix(basis: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """The (d, n) matrix B of z = B q: a selector for indices, or B itself if 2-D."""
    if isinstance(basis, np.ndarray) and basis.ndim == 2:
        return basis
    return selector(basis, n)


def stacked_indep_state_error(sys: System, basis: Sequence[int] | np.ndarray,
                              tau: np.ndarray | None, xs: Sequence[np.ndarray], want: bool):
    """f_ipc + f_ivc + f_iac + f_idyn (Eqs. 27, 30-32) on stacked x = [q, q̇, q̈], Z = [z, ż, z̈].

    ``basis`` gives z = B q: indices (B a selector, the seed's z ⊂ q) or a
    (d, n) matrix B (e.g. a tangent basis of the constraint manifold; R of
    Eq. 8 is defined for any B with [Φq; B] regular). Error rows:
    [Φ; B q − z; Φq q̇; B q̇ − ż; Φ̇q q̇ + Φq q̈; B q̈ − z̈; B q̈(q, q̇) − z̈].
    """
    n, m = sys.n, sys.m
    B = basis_matrix(basis, n)
    d = B.shape[0]
    x, Z = xs
    q, qd, qdd = x[:n], x[n:2 * n], x[2 * n:]
    z, zd, zdd = Z[:d], Z[d:2 * d], Z[2 * d:]
    cons = sys.constraints
    t = cons.terms(q, qd)
    a = forward_accel(sys, q, qd, tau, jacobians=want, terms=t)
    e = np.concatenate((t.phi, B @ q - z, t.phi_q @ qd, B @ qd - zd,
                        t.phi_q_dot @ qd + t.phi_q @ qdd, B @ qdd - zdd, B @ a.qdd - zdd))
    if not want:
        return e, None
    rows = 3 * (m + d) + d
    Jx = np.zeros((rows, 3 * n))
    Jz = np.zeros((rows, 3 * d))
    eye = np.eye(d)
    r = 0
    Jx[r:r + m, :n] = t.phi_q
    r += m
    Jx[r:r + d, :n] = B
    Jz[r:r + d, :d] = -eye
    r += d
    Jx[r:r + m, :n] = t.phi_q_dot
    Jx[r:r + m, n:2 * n] = t.phi_q
    r += m
    Jx[r:r + d, n:2 * n] = B
    Jz[r:r + d, d:2 * d] = -eye
    r += d
    Jx[r:r + m, :n] = t.gamma_q + cons.hess_vec(q, qdd)
    Jx[r:r + m, n:2 * n] = 2.0 * t.phi_q_dot
    Jx[r:r + m, 2 * n:] = t.phi_q
    r += m
    Jx[r:r + d, 2 * n:] = B
    Jz[r:r + d, 2 * d:] = -eye
    r += d
    Jx[r:r + d, :n] = B @ a.qdd_q
    Jx[r:r + d, n:2 * n] = B @ a.qdd_qd
    Jz[r:r + d, 2 * d:] = -eye
    return e, [Jx, Jz]
