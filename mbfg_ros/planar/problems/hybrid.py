"""Hybrid dynamics in one factor graph (seed 002 §VI).

Some coordinates ("inverse-dynamics" set I) have prescribed accelerations
and unknown generalized forces; the others have known forces (the modelled
Q plus any given extra Q) and unknown accelerations. At one state (q, q̇)
the unknowns q̈ (n), λ (independent rows, r) and the forces τ_I on the
coordinates of I are the solution of three linear factors on three
variables, eliminated by GTSAM (QR, so no weighting tricks):

* dynamics (seed 000 Eq. 4):     M q̈ + Φrᵀ λ − B_Iᵀ τ_I = Q(q, q̇) + Q_given
* acceleration constraint (Eq. 3): Φr q̈ = −Φ̇r q̇
* prescribed accelerations:      q̈[I] = a_I

all hard (constrained noise models). Forward dynamics (I empty) and inverse
dynamics (|I| = degrees of freedom) are the two extreme cases.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import gtsam
import numpy as np

from ..dynamics import System

__all__ = ['HybridResult', 'hybrid_dynamics']


class HybridResult(NamedTuple):
    qdd: np.ndarray      # (n,)
    lam: np.ndarray      # (r,) multipliers of sys.rows
    tau: np.ndarray      # (|I|,) generalized force on each coordinate of I


def hybrid_dynamics(sys: System, q: np.ndarray, qd: np.ndarray, idx: Sequence[int],
                    acc: Sequence[float], Q_given: np.ndarray | None = None) -> HybridResult:
    """Solve the hybrid problem at (q, q̇) for prescribed ``acc`` of ``q[idx]``."""
    n, rows = sys.n, np.asarray(sys.rows, dtype=int)
    r, d = len(rows), len(idx)
    t = sys.constraints.terms(q, qd)
    M = sys.mass_matrix(q)
    Jr = t.phi_q[rows]
    Q = sys.forces.evaluate(q, qd, None, jacobians=False).Q
    if Q_given is not None:
        Q = Q + Q_given
    BI = np.zeros((d, n))
    BI[np.arange(d), list(idx)] = 1.0
    kq, kl, kt = gtsam.symbol('a', 0), gtsam.symbol('l', 0), gtsam.symbol('t', 0)
    g = gtsam.GaussianFactorGraph()
    hard = gtsam.noiseModel.Constrained.All
    if d:
        g.add(gtsam.JacobianFactor(kq, M, kl, Jr.T, kt, -BI.T, Q, hard(n)))
        g.add(gtsam.JacobianFactor(kq, BI, np.asarray(acc, dtype=float), hard(d)))
    else:
        g.add(gtsam.JacobianFactor(kq, M, kl, Jr.T, Q, hard(n)))
    g.add(gtsam.JacobianFactor(kq, Jr, -(t.phi_q_dot[rows] @ qd), hard(r)))
    sol = g.optimize()
    tau = sol.at(kt) if d else np.zeros(0)
    return HybridResult(sol.at(kq), sol.at(kl), tau)
