"""The planar (natural-coordinate) factor of seed 000 §6 that only the planar formulation can
evaluate: independent coordinates z = B q with the constraint's second derivatives.

:func:`stacked_indep_state_error` is f_ipc + f_ivc + f_iac + f_idyn (Eqs. 27, 30-32) on
the stacked state ``x = [q, q̇, q̈]`` and ``Z = [z, ż, z̈]``; the system's
``independent_state_error`` (what ``core.factors.stacked_indep_state_error`` and the forward
dynamics call) is this function. The generic factors (binder, priors, integrators, the
stacked dependent state) are in :mod:`mbfg_ros.core.factors` (issue 23).
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from ..core.factors import basis_matrix
from ..core.interface import MultibodySystem
from .constraints import Constraints

__all__ = ['stacked_indep_state_error', 'IndependentStateSystem']


class IndependentStateSystem(MultibodySystem, Protocol):
    """What Eqs. 27, 30-32 take of a planar system: the package's
    :class:`~mbfg_ros.core.interface.MultibodySystem` with its constraints and its
    accelerations with their Jacobians, :func:`.dynamics.forward_accel` (seed 000 Eq. 5/6;
    :class:`.dynamics.System` is one, and builds its ``independent_state_error`` on this
    module; :mod:`.end_stops` takes the same)."""

    constraints: Constraints

    def accel(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None = None, *,
              Q_extra: np.ndarray | None = None, jacobians: bool = False,
              jac_Q: bool = False, terms: Any = None) -> Any: ...


def stacked_indep_state_error(sys: IndependentStateSystem, basis: Sequence[int] | np.ndarray,
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
    a = sys.accel(q, qd, tau, jacobians=want, terms=t)
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
