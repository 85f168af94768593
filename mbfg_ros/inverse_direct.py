"""Direct inverse dynamics for one state by the virtual power method.

Seed 003 Eq. 6.110: with q̈ = S c + R z̈ (seed 000 Eq. 12), the actuator
efforts τ satisfy ``Rᵀ (M q̈ − Q − B_act τ) = 0``, i.e.
``(Rᵀ B_act) τ = Rᵀ (M q̈ − Q)``; with more actuators than degrees of freedom
the minimum-norm τ is returned (least squares).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .dynamics import System
from .kinematics import r_s_matrices

__all__ = ['inverse_dynamics_direct']


def inverse_dynamics_direct(sys: System, q: np.ndarray, qd: np.ndarray, zdd: np.ndarray,
                            z_idx: Sequence[int] | None = None) -> np.ndarray:
    """Actuator efforts τ (order of ``mech.actuators``) for accelerations ``zdd`` of ``q[z_idx]``."""
    z_idx = list(sys.z_idx if z_idx is None else z_idx)
    cons = sys.constraints
    Jq = cons.phi_q(q)
    R, S = r_s_matrices(Jq, z_idx)
    c = -(cons.phi_q_dot(q, qd) @ qd)
    qdd = S @ c + R @ zdd
    Q = sys.forces.evaluate(q, qd, None, jacobians=False).Q
    A = R.T @ sys.forces.actuator_matrix(q)
    return np.linalg.lstsq(A, R.T @ (sys.M @ qdd - Q), rcond=None)[0]
