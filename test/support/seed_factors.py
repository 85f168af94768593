"""The single-variable factors of seed 000 §6 (Eqs. 22-32) as pure error functions.

The package builds its graphs from the stacked forms (``core.factors.stacked_*``,
``planar.factors.stacked_indep_state_error``: the same equations, fewer and fatter
factors); these separate factors were used by no module, only by
``test/core/test_factors.py``, which checks each one's Jacobians against finite differences
and through GTSAM (issue 23 moved them here out of the package).

Each takes its fixed parameters first, then the variable values ``xs`` and a flag
``want``; it returns the error and, when asked, the Jacobians (one per variable).

    Euler f_ei (22)        -> euler_error
    trapezoidal f_ti (23)  -> trapezoidal_error
    f_dpc (24)             -> position_constraint_error
    f_dvc (25)             -> velocity_constraint_error
    f_ddyn (26)            -> forward_dynamics_error
    f_idyn (27)            -> forward_dynamics_indep_error
    f_didyn (28)           -> inverse_dynamics_error (Q a variable)
    f_iidyn (29)           -> inverse_dynamics_indep_error
    f_ipc, f_ivc, f_iac (30-32) -> ipc_error, ivc_error, iac_error
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from mbfg_ros.planar.constraints import Constraints
from mbfg_ros.planar.dynamics import System, forward_accel
from mbfg_ros.planar.kinematics import selector

__all__ = ['euler_error', 'trapezoidal_error', 'position_constraint_error',
           'velocity_constraint_error', 'ipc_error', 'ivc_error', 'iac_error',
           'forward_dynamics_error', 'forward_dynamics_indep_error', 'inverse_dynamics_error',
           'inverse_dynamics_indep_error']


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
