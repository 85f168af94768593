"""Static equilibrium position (seed 003 §6.1.2, method of the Lagrange multipliers).

Minimise the total potential energy V(q) (gravity, springs, constant
external forces and torques) subject to Φ(q) = 0. With Q = −∂V/∂q the
generalized force of :class:`~mbfg_ros.forces.Forces` at q̇ = 0 (dampers
then exert nothing), the stationarity conditions are the KKT system

    F(q, λ) = [Q(q) − Φqᵀ λ; Φ(q)] = 0,

solved by Newton's method with its analytic Jacobian

    [[Q_q − Σ λ_k Φqq^k, −Φqᵀ], [Φq, 0]]

on the independent constraint rows (a small dense system: a hand-written
Newton loop is shorter and faster here than a factor graph, and Newton on
the KKT system converges to the equilibrium nearest the YAML pose, stable
or not; :func:`static_equilibrium` reports the reduced stiffness so a
caller can tell). A step is halved while it does not reduce ||F||.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .dynamics import System
from .errors import MbfgError
from .kinematics import r_s_matrices

__all__ = ['Equilibrium', 'static_equilibrium']


class Equilibrium(NamedTuple):
    """An equilibrium pose."""

    q: np.ndarray            # (n,)
    lam: np.ndarray          # (m,) multipliers (zero on dependent rows)
    iterations: int
    residual: float          # max |F|
    stiffness: np.ndarray    # reduced stiffness −Rᵀ(Q_q − Σλ Φqq)R (d x d); > 0: stable


def static_equilibrium(sys: System, q0: np.ndarray | None = None, tol: float = 1e-10,
                       max_iter: int = 100) -> Equilibrium:
    """Equilibrium nearest ``q0`` (default: the assembled YAML pose).

    :raises MbfgError: if Newton does not converge (the message names the file).
    """
    n, rows = sys.n, np.asarray(sys.rows, dtype=int)
    r = len(rows)
    cons = sys.constraints
    q = np.array(sys.q0 if q0 is None else q0, dtype=float)
    zero = np.zeros(n)
    lam = np.zeros(r)

    def residual(q: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, object]:
        ft = sys.forces.evaluate(q, zero, None, jacobians=True)
        Jr = cons.phi_q(q)[rows]
        return np.concatenate((ft.Q - Jr.T @ lam, cons.phi(q)[rows])), (ft, Jr)

    F, (ft, Jr) = residual(q, lam)
    # Start λ from least squares so the first Newton step is sensible.
    lam = np.linalg.lstsq(Jr.T, ft.Q, rcond=None)[0]
    F, (ft, Jr) = residual(q, lam)
    for it in range(1, max_iter + 1):
        lam_full = np.zeros(sys.m)
        lam_full[rows] = lam
        K = ft.Q_q - cons.hess_weighted(q, lam_full)
        J = np.block([[K, -Jr.T], [Jr, np.zeros((r, r))]])
        step = np.linalg.lstsq(J, -F, rcond=None)[0]
        alpha, fnorm = 1.0, float(np.linalg.norm(F))
        while alpha > 1e-6:
            qn, ln = q + alpha * step[:n], lam + alpha * step[n:]
            Fn, aux = residual(qn, ln)
            if np.linalg.norm(Fn) < fnorm or alpha < 1e-5:
                break
            alpha *= 0.5
        q, lam, F, (ft, Jr) = qn, ln, Fn, aux
        if float(np.max(np.abs(F))) <= tol:
            lam_full = np.zeros(sys.m)
            lam_full[rows] = lam
            K = ft.Q_q - cons.hess_weighted(q, lam_full)
            R = r_s_matrices(cons.phi_q(q), sys.z_idx).R
            return Equilibrium(q, lam_full, it, float(np.max(np.abs(F))), -R.T @ K @ R)
    raise MbfgError(f'{sys.mech.source}: static equilibrium: Newton did not converge in '
                    f'{max_iter} iterations (max |residual| {np.max(np.abs(F)):.3g})')
