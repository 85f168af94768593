"""Static equilibrium position and its stability (seed 003 §6.1).

Equilibrium (§6.1.2, method of the Lagrange multipliers): minimise the total
potential energy V(q) (gravity, springs, constant external forces and
torques; :meth:`~mbfg_ros.planar.forces.Forces.potential`) subject to Φ(q) = 0.
With Q = −∂V/∂q the generalized force at q̇ = 0 (dampers then exert nothing),
the stationarity conditions are the KKT system (Eqs. 6.20-6.22)

    F(q, λ) = [Q(q) − Φqᵀ λ; Φ(q)] = 0,

solved by Newton's method (Eq. 6.25) with its analytic Jacobian
``[[Q_q − Σ λ_k Φqq^k, −Φqᵀ], [Φq, 0]]`` on the independent constraint rows;
a step is halved while it does not reduce ||F||.

Stability (§6.1: "the total potential energy minimum condition is a
necessary and sufficient condition for the stability"). On the constraint
manifold the second derivative of V is the reduced stiffness

    K_r = Nᵀ (V_qq + Σ λ_k Φqq^k) N = −Nᵀ (Q_q − Σ λ_k Φqq^k) N,

Eq. 6.40 at an equilibrium (where Eq. 6.43 turns ∂Rᵀ/∂z Q into the λ term),
written with N an orthonormal basis of the null space of Φq in place of R, so
that its eigenvalues do not depend on a choice of independent coordinates
(their signs never do). The verdict: ``stable`` (all eigenvalues positive),
``unstable`` (some negative, none positive), ``saddle`` (both signs),
``neutral`` (none negative, some zero to 1e-8 of the largest).

Newton finds the stationary point nearest its start, stable or not. With
``stable=True`` an unstable point is left by a descent step along the
eigenvector of the most negative eigenvalue, then V is minimised on the
manifold (Newton in the tangent coordinates z, dq = N dz as Eq. 6.37, with
the reduced Hessian made positive definite and an Armijo line search on V),
and the minimum is polished by the KKT Newton. :class:`StaticsError` says how
far a run got (residual, closest pose) and suggests a start.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...core.errors import AssemblyError, MbfgError
from ..dynamics import System
from ..kinematics import solve_position

__all__ = ['Equilibrium', 'StaticsError', 'static_equilibrium', 'reduced_stiffness',
           'classify', 'VERDICTS', 'start_pose']

VERDICTS = ('stable', 'unstable', 'saddle', 'neutral')


class Equilibrium(NamedTuple):
    """An equilibrium pose and its stability."""

    q: np.ndarray            # (n,)
    lam: np.ndarray          # (m,) multipliers (zero on dependent rows)
    iterations: int          # Newton and descent iterations, all stages
    residual: float          # max |F|
    stiffness: np.ndarray    # reduced stiffness K_r (d x d), orthonormal tangent basis
    eigenvalues: np.ndarray  # (d,) of K_r, ascending
    verdict: str             # one of VERDICTS
    basis: np.ndarray        # (n, d) the orthonormal tangent basis N (K_r = Nᵀ K N)
    visited: tuple = ()      # ((q, verdict), ...) equilibria passed on the way (stable=True)
    energy: float = 0.0      # V(q)


class StaticsError(MbfgError):
    """No (stable) equilibrium was found; ``closest`` is the best pose reached."""

    def __init__(self, message: str, closest: np.ndarray | None = None,
                 residual: float = math.nan) -> None:
        super().__init__(message)
        self.closest = closest
        self.residual = residual


def classify(eigenvalues: np.ndarray, scale: float = 0.0, rtol: float = 1e-8,
             atol: float = 1e-12) -> str:
    """``stable`` / ``unstable`` / ``saddle`` / ``neutral`` from the reduced stiffness.

    An eigenvalue within ``rtol`` of the largest of ``scale`` and the
    eigenvalues (plus ``atol``) counts as zero.
    """
    ev = np.asarray(eigenvalues, dtype=float)
    if ev.size == 0:
        return 'neutral'
    tol = rtol * max(float(np.max(np.abs(ev))), scale) + atol
    neg, pos = bool(np.any(ev < -tol)), bool(np.any(ev > tol))
    if neg and pos:
        return 'saddle'
    if neg:
        return 'unstable'
    if pos and np.all(ev > tol):
        return 'stable'
    return 'neutral'


def _tangent_basis(sys: System, q: np.ndarray) -> np.ndarray:
    """Orthonormal basis (n, dof) of the null space of Φq(q)."""
    vt = np.linalg.svd(sys.constraints.phi_q(q))[2]
    return vt[sys.n - sys.dof:].T


def _multipliers(sys: System, q: np.ndarray, Q: np.ndarray) -> np.ndarray:
    lam = np.zeros(sys.m)
    rows = np.asarray(sys.rows, dtype=int)
    lam[rows] = np.linalg.lstsq(sys.constraints.phi_q(q)[rows].T, Q, rcond=None)[0]
    return lam


def reduced_stiffness(sys: System, q: np.ndarray, lam: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(K_r, N): ``K_r = −Nᵀ (Q_q − Σ λ_k Φqq^k) N`` (seed 003 Eq. 6.40 with R = N).

    ``lam`` defaults to the least-squares multipliers of ``Φqᵀ λ = Q``.
    """
    ft = sys.forces.evaluate(q, np.zeros(sys.n), None, jacobians=True)
    if lam is None:
        lam = _multipliers(sys, q, ft.Q)
    N = _tangent_basis(sys, q)
    K = -(N.T @ (ft.Q_q - sys.constraints.hess_weighted(q, lam)) @ N)
    return 0.5 * (K + K.T), N


class _Newton(NamedTuple):
    q: np.ndarray
    lam: np.ndarray
    iterations: int
    residual: float
    converged: bool
    closest: np.ndarray
    closest_residual: float


def _kkt_newton(sys: System, q: np.ndarray, tol: float, max_iter: int) -> _Newton:
    """Newton on the KKT system (seed 003 Eq. 6.25) from ``q``."""
    n, rows = sys.n, np.asarray(sys.rows, dtype=int)
    r = len(rows)
    cons = sys.constraints
    zero = np.zeros(n)

    def residual(q: np.ndarray, lam: np.ndarray):
        ft = sys.forces.evaluate(q, zero, None, jacobians=True)
        Jr = cons.phi_q(q)[rows]
        return np.concatenate((ft.Q - Jr.T @ lam, cons.phi(q)[rows])), ft, Jr

    F, ft, Jr = residual(q, np.zeros(r))
    lam = np.linalg.lstsq(Jr.T, ft.Q, rcond=None)[0]     # a sensible first step
    F, ft, Jr = residual(q, lam)
    best = (float(np.max(np.abs(F))), q)
    for it in range(1, max_iter + 1):
        lam_full = np.zeros(sys.m)
        lam_full[rows] = lam
        K = ft.Q_q - cons.hess_weighted(q, lam_full)
        J = np.block([[K, -Jr.T], [Jr, np.zeros((r, r))]])
        step = np.linalg.lstsq(J, -F, rcond=None)[0]
        alpha, fnorm = 1.0, float(np.linalg.norm(F))
        while True:
            qn, ln = q + alpha * step[:n], lam + alpha * step[n:]
            Fn, ftn, Jrn = residual(qn, ln)
            if np.linalg.norm(Fn) < fnorm or alpha < 1e-5:
                break
            alpha *= 0.5
        q, lam, F, ft, Jr = qn, ln, Fn, ftn, Jrn
        res = float(np.max(np.abs(F)))
        if not np.isfinite(res):
            break
        if res < best[0]:
            best = (res, q)
        if res <= tol:
            lam_full = np.zeros(sys.m)
            lam_full[rows] = lam
            return _Newton(q, lam_full, it, res, True, q, res)
    return _Newton(q, np.zeros(sys.m), max_iter, float(np.max(np.abs(F))), False, best[1],
                   best[0])


def _project(sys: System, q: np.ndarray) -> np.ndarray | None:
    try:
        return solve_position(sys.constraints, q, source=sys.mech.source)
    except AssemblyError:
        return None


def _length_scale(sys: System) -> float:
    return max([b.length for b in sys.mech.bodies] + [1e-3])


def _descend(sys: System, q: np.ndarray, direction: np.ndarray | None, max_iter: int
             ) -> tuple[np.ndarray, int]:
    """Minimise V on the manifold from ``q`` (first along ``direction`` if given).

    Newton in tangent coordinates (dq = N dz, seed 003 Eq. 6.37) with the
    reduced Hessian's eigenvalues replaced by their absolute values (floored),
    so every step goes downhill; Armijo backtracking on V along the projected
    step. Returns the last pose and the iterations used.
    """
    forces = sys.forces
    scale = _length_scale(sys)
    V = forces.potential(q)
    if direction is not None:
        # A step along the negative-curvature direction: both signs go down to
        # second order; take the one that goes down more.
        best = None
        for s in (0.05, 0.1, 0.2, 0.4):
            for sign in (1.0, -1.0):
                qt = _project(sys, q + sign * s * scale * direction)
                if qt is None:
                    continue
                Vt = forces.potential(qt, q)
                if best is None or Vt < best[0]:
                    best = (Vt, qt)
            if best is not None and best[0] < V:
                break
        if best is None or not best[0] < V:
            return q, 0
        q = best[1]
    zero = np.zeros(sys.n)
    for it in range(1, max_iter + 1):
        ft = forces.evaluate(q, zero, None, jacobians=False)
        lam = _multipliers(sys, q, ft.Q)
        K, N = reduced_stiffness(sys, q, lam)
        g = -(N.T @ ft.Q)                              # ∂V/∂z
        ev, U = np.linalg.eigh(K)
        floor = 1e-6 * max(float(np.max(np.abs(ev))), 1e-12)
        dz = -U @ ((U.T @ g) / np.maximum(np.abs(ev), floor))
        gnorm = float(np.linalg.norm(g))
        if gnorm <= 1e-9 * max(1.0, float(np.linalg.norm(ft.Q))) and ev[0] > floor:
            return q, it
        if ev[0] < -floor and gnorm <= 1e-6 * max(1.0, float(np.linalg.norm(ft.Q))):
            dz = U[:, 0] * 0.05 * scale                 # stuck on a ridge: roll off it
        step_max = 0.25 * scale
        if np.linalg.norm(dz) > step_max:
            dz *= step_max / np.linalg.norm(dz)
        slope = float(g @ dz)
        alpha, V0 = 1.0, forces.potential(q)
        while alpha > 1e-8:
            qt = _project(sys, q + alpha * (N @ dz))
            if qt is not None and forces.potential(qt, q) <= V0 + 1e-4 * alpha * min(slope, 0):
                break
            alpha *= 0.5
        else:
            return q, it
        if np.max(np.abs(qt - q)) <= 1e-13 * max(1.0, float(np.max(np.abs(q)))):
            return qt, it
        q = qt
    return q, max_iter


def _equilibrium(sys: System, nw: _Newton, iterations: int, visited: tuple) -> Equilibrium:
    K, N = reduced_stiffness(sys, nw.q, nw.lam)
    ev = np.linalg.eigvalsh(K)
    # The size of the terms K is made of, so that their round-off is not read as curvature.
    ft = sys.forces.evaluate(nw.q, np.zeros(sys.n), None, jacobians=True)
    scale = max(float(np.max(np.abs(ft.Q_q), initial=0.0)),
                float(np.max(np.abs(sys.constraints.hess_weighted(nw.q, nw.lam)), initial=0.0)))
    return Equilibrium(nw.q, nw.lam, iterations, nw.residual, K, ev, classify(ev, scale), N,
                       visited, sys.forces.potential(nw.q))


def _pose(sys: System, q: np.ndarray) -> str:
    return ', '.join(f'{name}={v:.6g}' for name, v in zip(sys.names, q))


def _start_hint(sys: System, q: np.ndarray) -> str:
    return ','.join(f'{sys.names[i]}={q[i]:.4g}' for i in sys.z_idx)


def static_equilibrium(sys: System, q0: np.ndarray | None = None, tol: float = 1e-10,
                       max_iter: int = 100, stable: bool = True,
                       max_restarts: int = 5) -> Equilibrium:
    """Equilibrium nearest ``q0`` (default: the assembled YAML pose), with its stability.

    ``stable=True``: from an unstable, saddle or non-converged point, go on
    downhill to a stable equilibrium (see the module doc); ``visited`` lists
    the equilibria passed on the way.

    :raises StaticsError: naming the file, the residual reached and the
        closest pose, if Newton does not converge (and, with ``stable``, no
        stable equilibrium is found).
    """
    q = np.array(sys.q0 if q0 is None else q0, dtype=float)
    source = sys.mech.source
    nw = _kkt_newton(sys, q, tol, max_iter)
    its = nw.iterations
    visited: list = []
    if not nw.converged and not stable:
        raise StaticsError(
            f'{source}: static equilibrium: Newton did not converge in {max_iter} iterations; '
            f'closest pose (max |residual| {nw.closest_residual:.3g}): '
            f'{_pose(sys, nw.closest)}. Try stable=True (mbfg-statics without --no-stable: '
            f'goes downhill instead), or another '
            f'start, e.g. --start {_start_hint(sys, nw.closest)}',
            nw.closest, nw.closest_residual)
    eq = _equilibrium(sys, nw, its, ()) if nw.converged else None
    if not stable or (eq is not None and eq.verdict in ('stable', 'neutral')):
        return eq
    if eq is not None:
        q_from, direction = eq.q, eq.basis @ np.linalg.eigh(eq.stiffness)[1][:, 0]
    else:                                  # Newton failed: go downhill from the start
        q_from, direction = q, None
    V_start = sys.forces.potential(q_from)
    q_low = q_from
    for _ in range(max_restarts):
        if eq is not None:
            visited.append((eq.q, eq.verdict))
        q_low, k = _descend(sys, q_from, direction, 4 * max_iter)
        its += k
        nw = _kkt_newton(sys, q_low, tol, max_iter)
        its += nw.iterations
        if not nw.converged:
            break
        eq = _equilibrium(sys, nw, its, tuple(visited))
        if eq.verdict in ('stable', 'neutral'):
            return eq
        q_from = eq.q
        direction = eq.basis @ np.linalg.eigh(eq.stiffness)[1][:, 0]
    last = visited[-1] if visited else None
    drop = V_start - sys.forces.potential(q_low, q_from)
    where = (f'last equilibrium: {last[1]} at {_pose(sys, last[0])}' if last is not None
             else f'start pose: {_pose(sys, q)}')
    raise StaticsError(
        f'{source}: static equilibrium: no stable equilibrium found going downhill: after '
        f'{its} iterations V had fallen by {drop:.4g} J without levelling off, at '
        f'{_pose(sys, q_low)} (V may have no minimum: a load pulls the mechanism along a '
        f'free direction, or a spring or stop is missing); {where}. Try another start '
        f'(--start {",".join(sys.names[i] + "=VALUE" for i in sys.z_idx)}, on another '
        'branch of the motion), or --no-stable for the nearest equilibrium whatever its '
        'stability',
        q_low, nw.closest_residual)


def start_pose(sys: System, values: dict[str, float]) -> np.ndarray:
    """An assembled pose with the named coordinates at ``values`` (the rest follow).

    Solved from the YAML pose by continuation (:func:`~mbfg_ros.planar.kinematics.solve_position`),
    so it stays on the YAML's assembly branch.

    :raises MechanismError: for an unknown coordinate; AssemblyError if it cannot be assembled.
    """
    prescribed = {sys.mech.coordinate(k, path='--start'): float(v) for k, v in values.items()}
    return solve_position(sys.constraints, sys.q0, prescribed, source=sys.mech.source)
