"""Kinematic problems of seed 000 §2: position, velocity, acceleration, R and S.

All solvers tolerate rank-deficient Φq (redundant constraints such as the
pick-and-place robot's, 22 rows of rank 20): they use least squares /
pseudo-inverses (numpy's SVD-based ``lstsq`` and ``pinv``) rather than a
square inverse. The position problem is a Newton-Raphson iteration written
here because it is a few lines and runs before any factor graph exists; the
factor-graph form of the same problem is the f_dpc factor.
"""
from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

import numpy as np
import scipy.linalg

from ..core.errors import AssemblyError
from .constraints import Constraints

__all__ = ['solve_position', 'solve_velocity', 'solve_acceleration', 'independent_rows',
           'choose_independent', 'RS', 'r_s_matrices', 'selector']


def selector(idx: Sequence[int], n: int) -> np.ndarray:
    """The constant matrix B (d x n) of Eq. 9 that picks ``q[idx]``."""
    B = np.zeros((len(idx), n))
    B[np.arange(len(idx)), list(idx)] = 1.0
    return B


def solve_position(cons: Constraints, q_guess: np.ndarray,
                   prescribed: Mapping[int, float] | None = None, *, tol: float = 1e-12,
                   max_iter: int = 60, max_jump: float = 0.25,
                   source: str = '<mechanism>') -> np.ndarray:
    """Position problem Φ(q) = 0 by Newton-Raphson from ``q_guess``.

    Coordinates in ``prescribed`` are held at their values; the others are
    solved with minimum-norm steps (``lstsq``), so the result stays on the
    assembly branch of the guess. When a prescribed value is more than
    ``max_jump`` away from the guess, it is approached in sub-steps
    (continuation): a single Newton jump could land on another branch (the
    angle equation also holds for θ + π, and a four-bar has two closures).

    :raises AssemblyError: if the iteration does not converge; the message
        names the constraints left violated.
    """
    q = np.array(q_guess, dtype=float)
    prescribed = dict(prescribed or {})
    free = np.array([i for i in range(cons.n) if i not in prescribed], dtype=int)
    if prescribed:
        idx = np.array(list(prescribed), dtype=int)
        target = np.array([prescribed[i] for i in idx], dtype=float)
        start = q[idx].copy()
        jump = float(np.max(np.abs(target - start))) if np.all(np.isfinite(start)) else 0.0
        steps = max(1, int(np.ceil(jump / max_jump)))
        for k in range(1, steps):
            q[idx] = start + (target - start) * (k / steps)
            q = _newton(cons, q, free, 1e-8, max_iter, source)
        q[idx] = target
    return _newton(cons, q, free, tol, max_iter, source)


def _newton(cons: Constraints, q: np.ndarray, free: np.ndarray, tol: float, max_iter: int,
            source: str) -> np.ndarray:
    scale = max(1.0, float(np.max(np.abs(q))) if q.size else 1.0)
    for _ in range(max_iter):
        phi = cons.phi(q)
        err = float(np.max(np.abs(phi))) if phi.size else 0.0
        if err <= tol * scale ** 2:
            return q
        J = cons.phi_q(q)[:, free]
        step = np.linalg.lstsq(J, -phi, rcond=None)[0]
        # Limit the step so Newton does not jump to another assembly branch.
        norm = float(np.max(np.abs(step))) if step.size else 0.0
        if norm > 0.5 * scale:
            step *= 0.5 * scale / norm
        q = q.copy()
        q[free] += step
        if not np.all(np.isfinite(q)):
            break
    phi = cons.phi(q)
    worst = np.argsort(-np.abs(phi))[:3]
    detail = ', '.join(f'{cons.labels[k]} |phi|={abs(phi[k]):.3g}' for k in worst)
    raise AssemblyError(f'position problem did not converge (cannot assemble): {detail}',
                        source=source, path='points')


def solve_velocity(phi_q: np.ndarray, idx: Sequence[int] = (),
                   zd: Sequence[float] = ()) -> np.ndarray:
    """Velocity problem, Eq. 10: ``[Φq; B] q̇ = [0; ż]`` (least squares)."""
    n = phi_q.shape[1]
    A = np.vstack((phi_q, selector(idx, n)))
    rhs = np.concatenate((np.zeros(phi_q.shape[0]), np.asarray(zd, dtype=float)))
    return np.linalg.lstsq(A, rhs, rcond=None)[0]


def solve_acceleration(phi_q: np.ndarray, c: np.ndarray, idx: Sequence[int] = (),
                       zdd: Sequence[float] = ()) -> np.ndarray:
    """Acceleration problem, Eq. 12: ``[Φq; B] q̈ = [c; z̈]``, c = −Φ̇q q̇ (Eq. 3)."""
    n = phi_q.shape[1]
    A = np.vstack((phi_q, selector(idx, n)))
    rhs = np.concatenate((c, np.asarray(zdd, dtype=float)))
    return np.linalg.lstsq(A, rhs, rcond=None)[0]


def independent_rows(phi_q: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """Indices of a maximal set of linearly independent rows of Φq (pivoted QR)."""
    if phi_q.shape[0] == 0:
        return np.zeros(0, dtype=int)
    _, R, piv = scipy.linalg.qr(phi_q.T, pivoting=True, mode='economic')
    d = np.abs(np.diag(R))
    rank = int(np.sum(d > tol * max(1.0, d[0])))
    return np.sort(piv[:rank])


def choose_independent(phi_q: np.ndarray, dof: int, prefer: Sequence[int] = ()) -> list[int]:
    """Pick ``dof`` coordinates that can serve as independent coordinates z.

    Coordinates in ``prefer`` (e.g. relative angles) are tried first; the rest
    are chosen by pivoted QR on the null-space basis so that ``B R`` is well
    conditioned.
    """
    n = phi_q.shape[1]
    N = scipy.linalg.null_space(phi_q, rcond=1e-9)
    chosen: list[int] = []
    for i in prefer:
        trial = chosen + [i]
        if len(chosen) < dof and np.linalg.matrix_rank(N[trial, :], tol=1e-6) == len(trial):
            chosen = trial
    rest = [i for i in range(n) if i not in chosen]
    if len(chosen) < dof and rest:
        # Project out what the chosen ones already span, then pivot.
        Nr = N.copy()
        if chosen:
            Qc, _ = np.linalg.qr(N[chosen, :].T)
            Nr = N - (N @ Qc) @ Qc.T
        _, _, piv = scipy.linalg.qr(Nr[rest, :].T, pivoting=True)
        chosen += [rest[k] for k in piv[:dof - len(chosen)]]
    return sorted(chosen)


class RS(NamedTuple):
    """R (n x d) and S (n x m) of seed 000 Eqs. 8-12."""

    R: np.ndarray
    S: np.ndarray


def r_s_matrices(phi_q: np.ndarray, idx: Sequence[int]) -> RS:
    """R and S with ``q̇ = S b + R ż`` (Eq. 11) for independent coordinates ``q[idx]``.

    R spans the null space of Φq and satisfies ``B R = I``; S is a particular
    inverse with ``Φq S b = b`` for consistent b and ``B S = 0``. Built from the
    SVD null space so that redundant constraints are allowed.
    """
    n = phi_q.shape[1]
    B = selector(idx, n)
    N = scipy.linalg.null_space(phi_q, rcond=1e-9)
    R = N @ np.linalg.inv(B @ N)
    S = (np.eye(n) - R @ B) @ np.linalg.pinv(phi_q, rcond=1e-9)
    return RS(R, S)
