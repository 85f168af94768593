"""Initialisation of inverse dynamics by direct kinematics (seed 000 Eqs. 10, 12): at each
sample the position problem with the prescribed coordinates (Newton from the previous
sample, or all samples at once), then q̇ and q̈ from the velocity and acceleration problems.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...core.errors import AssemblyError, MbfgError
from .inverse_direct import LeanKinematics
from .inverse_models import BatchModel
from ..dynamics import System
from ...core.trajectory import derivatives

__all__ = ['direct_kinematics']


def _prescription(sys: System, t: np.ndarray, z: np.ndarray, z_idx: Sequence[int],
                  zd: np.ndarray | None, zdd: np.ndarray | None):
    """Checked z_idx, the rates ż, z̈ (from ``t`` if not given) and the independent rows."""
    z_idx = np.asarray(z_idx, dtype=int)
    if zd is None or zdd is None:
        zd, zdd = derivatives(t, z)
    rows = np.asarray(sys.rows, dtype=int)
    if len(rows) + z.shape[1] != sys.n:
        raise MbfgError(f'{z.shape[1]} prescribed coordinates for a mechanism with {sys.dof} '
                        'degrees of freedom: prescribe exactly one coordinate per degree of '
                        'freedom')
    return z_idx, zd, zdd, rows


def direct_kinematics(sys: System, t: np.ndarray, z: np.ndarray, z_idx: Sequence[int],
                      zd: np.ndarray | None = None, zdd: np.ndarray | None = None,
                      q_guess: np.ndarray | None = None, tol: float = 1e-12
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, q̇, q̈ at every sample from the position, velocity and acceleration problems.

    Newton on ``[Φr(q); q[z] − z_k] = 0`` from the previous sample (first
    from ``q_guess`` or the assembled pose), then seed 000 Eqs. 10 and 12
    with ``[Φr_q; B]``. For speed the sequential pass takes one Newton step
    per sample (from the extrapolation of the two previous samples, which
    keeps the assembly branch), then all samples are polished together by
    batched Newton steps, and q̇, q̈ are batched solves. If any sample does
    not converge this way, the samples are solved one at a time to full
    convergence instead (which names the failing sample).

    :raises AssemblyError: naming the sample (index and time) where the
        prescribed pose cannot be assembled.
    """
    n = sys.n
    z_idx, zd, zdd, rows = _prescription(sys, t, z, z_idx, zd, zdd)
    N, d = z.shape
    r = len(rows)
    batch = BatchModel(sys, z_idx)
    q0 = np.array(sys.q0 if q_guess is None else q_guess, dtype=float)
    Q_ = _positions_batched(sys, batch, z, q0, tol)
    if Q_ is None:
        return _direct_kinematics_sequential(sys, t, z, z_idx, zd, zdd, q_guess, tol)
    A = np.zeros((N, n, n))
    A[:, np.arange(r, n), z_idx] = 1.0
    zero = np.zeros((N, n))
    A[:, :r] = batch.terms(Q_, zero)[1][:, rows]
    bad = np.flatnonzero(np.linalg.cond(A) > 1e10)
    if len(bad):
        k = int(bad[0])
        raise AssemblyError(f'the prescribed coordinates do not determine the pose at '
                            f'sample {k} (t={t[k]:.6g} s): singular configuration',
                            source=sys.mech.source, path='trajectory')
    QD = np.linalg.solve(A, np.concatenate((np.zeros((N, r)), zd), axis=1)[..., None])[..., 0]
    Jd = batch.terms(Q_, QD)[2][:, rows]
    c = -np.einsum('kij,kj->ki', Jd, QD)
    QDD = np.linalg.solve(A, np.concatenate((c, zdd), axis=1)[..., None])[..., 0]
    return Q_, QD, QDD


def _positions_batched(sys: System, batch: BatchModel, z: np.ndarray, q0: np.ndarray,
                       tol: float) -> np.ndarray | None:
    """Positions of all samples (see :func:`direct_kinematics`), None if any fails."""
    n = sys.n
    N, d = z.shape
    z_idx = batch.z_idx
    rows = batch.rows
    r = len(rows)
    lean = LeanKinematics(sys.constraints)
    scale = max(1.0, float(np.max(np.abs(q0))))
    zero = np.zeros(n)
    A = np.zeros((n, n))
    A[np.arange(r, n), z_idx] = 1.0
    rhs = np.zeros(n)
    Q_ = np.empty((N, n))
    q = q0.copy()
    for k in range(N):
        if k >= 2:
            q = 2 * Q_[k - 1] - Q_[k - 2]
        q[z_idx] = z[k]
        for _ in range(30 if k == 0 else 1):
            kt = lean.terms(q, zero)
            phi = kt.phi[rows]
            if k == 0 and np.max(np.abs(phi), initial=0.0) <= tol * scale ** 2:
                break
            A[:r] = kt.phi_q[rows]
            rhs[:r] = -phi
            try:
                step = np.linalg.solve(A, rhs)
            except np.linalg.LinAlgError:
                return None
            norm = float(np.max(np.abs(step)))
            if norm > 0.5 * scale:
                step *= 0.5 * scale / norm
            q = q + step
        if not np.all(np.isfinite(q)):
            return None
        Q_[k] = q
    AA = np.zeros((N, n, n))
    AA[:, np.arange(r, n), z_idx] = 1.0
    rhs = np.zeros((N, n, 1))
    zero = np.zeros((N, n))
    for _ in range(30):
        phi, J = batch.terms(Q_, zero)[:2]
        if np.max(np.abs(phi[:, rows]), initial=0.0) <= tol * scale ** 2:
            break
        AA[:, :r] = J[:, rows]
        rhs[:, :r, 0] = -phi[:, rows]
        try:
            step = np.linalg.solve(AA, rhs)[..., 0]
        except np.linalg.LinAlgError:
            return None
        norm = np.max(np.abs(step), axis=1, keepdims=True)
        step *= np.minimum(1.0, 0.5 * scale / np.maximum(norm, 1e-300))
        Q_ = Q_ + step
        if not np.all(np.isfinite(Q_)):
            return None
    else:
        return None
    if np.max(np.abs(phi), initial=0.0) > 1e-8 * scale ** 2:
        return None
    return Q_


def _direct_kinematics_sequential(sys: System, t: np.ndarray, z: np.ndarray, z_idx: Sequence[int],
                      zd: np.ndarray | None = None, zdd: np.ndarray | None = None,
                      q_guess: np.ndarray | None = None, tol: float = 1e-12
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`direct_kinematics` one sample at a time (its fallback; the exact diagnosis)."""
    n = sys.n
    z_idx, zd, zdd, rows = _prescription(sys, t, z, z_idx, zd, zdd)
    N, d = z.shape
    r = len(rows)
    lean = LeanKinematics(sys.constraints)
    q = np.array(sys.q0 if q_guess is None else q_guess, dtype=float)
    Q_, QD, QDD = np.zeros((N, n)), np.zeros((N, n)), np.zeros((N, n))
    A = np.zeros((n, n))
    A[np.arange(r, n), z_idx] = 1.0
    scale = max(1.0, float(np.max(np.abs(q))))
    prev = None
    for k in range(N):
        if prev is not None and k >= 2:
            q = 2 * Q_[k - 1] - Q_[k - 2]     # extrapolate along the path
        q[z_idx] = z[k]
        ok = False
        for _ in range(30):
            phi = lean.phi(q)[rows]
            if np.max(np.abs(phi), initial=0.0) <= tol * scale ** 2:
                ok = True
                break
            A[:r] = lean.phi_q(q)[rows]
            try:
                step = np.linalg.solve(A, np.concatenate((-phi, np.zeros(d))))
            except np.linalg.LinAlgError:
                break
            norm = float(np.max(np.abs(step)))
            if norm > 0.5 * scale:
                step *= 0.5 * scale / norm
            q = q + step
            if not np.all(np.isfinite(q)):
                break
        if ok:
            res = np.max(np.abs(sys.constraints.phi(q)), initial=0.0)
            ok = res <= 1e-8 * scale ** 2
        if not ok:
            names = ', '.join(f'{sys.names[i]}={v:.6g}' for i, v in zip(z_idx, z[k]))
            raise AssemblyError(f'the prescribed pose cannot be assembled at sample {k} '
                                f'(t={t[k]:.6g} s: {names})', source=sys.mech.source,
                                path='trajectory')
        kt = lean.terms(q, np.zeros(n))
        A[:r] = kt.phi_q[rows]
        if np.linalg.cond(A) > 1e10:
            raise AssemblyError(f'the prescribed coordinates do not determine the pose at '
                                f'sample {k} (t={t[k]:.6g} s): singular configuration',
                                source=sys.mech.source, path='trajectory')
        qd = np.linalg.solve(A, np.concatenate((np.zeros(r), zd[k])))
        Jd = lean.terms(q, qd).phi_q_dot[rows]
        qdd = np.linalg.solve(A, np.concatenate((-(Jd @ qd), zdd[k])))
        Q_[k], QD[k], QDD[k] = q, qd, qdd
        prev = q
    return Q_, QD, QDD
