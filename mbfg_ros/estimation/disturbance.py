"""A disturbance process model for the estimator (issue 27 item 4 follow-up): bounded jerk of
the mismatch d = q̈ − q̈(q, q̇, τ) between ticks rather than of q̈ itself.

With measured motor efforts τ, d is the acceleration the model does not explain (a contact,
a push, model errors): M d = B τ_ext. Bounding the change of q̈ (``jerk_process``) makes a
step of the motor torque (a commanded acceleration step) look like an external torque for
a few ticks, because q̈ may not follow the model at once. Bounding the change of d
instead, d_k − d_{k−1}, lets q̈ move with the model under a torque step; only what the
model does not explain has to build up at the jerk bound.

:func:`stacked_trapezoidal_disturbance_error` is one two-key factor on (x_{k−1}, x_k):
the trapezoidal rows (seed 000 Eq. 23, :func:`~mbfg_ros.core.factors.stacked_trapezoidal_error`)
and the change of d, each side's forward dynamics at its own tick's known torques.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core import factors as F
from ..core.interface import MultibodySystem

__all__ = ['stacked_trapezoidal_disturbance_error']


def stacked_trapezoidal_disturbance_error(sys: MultibodySystem, dt: float, tau0: np.ndarray,
                                          tau1: np.ndarray, xs: Sequence[np.ndarray],
                                          want: bool):
    """Two f_ti (Eq. 23) between stacked states x = [q, q̇, q̈] plus the change of the
    dynamics mismatch, ``(q̈_k − q̈(q_k, q̇_k, τ_k)) − (q̈_{k−1} − q̈(q_{k−1}, q̇_{k−1},
    τ_{k−1}))`` (n rows, units of q̈; its σ is ``integrator_jerk``·dt).

    ``tau0``, ``tau1``: the known actuator efforts of ticks k−1 and k (those of each
    tick's state factor). Jacobians analytic from ``sys.accelerations(…, jacobians=True)``:
    ∂/∂x_k = [−∂q̈/∂q, −∂q̈/∂q̇, 1] at x_k, ∂/∂x_{k−1} = [∂q̈/∂q, ∂q̈/∂q̇, −1] at x_{k−1}.
    """
    n = sys.n
    x0, x1 = xs
    e, J = F.stacked_trapezoidal_error(n, dt, xs, want)
    if not want:
        a0 = sys.accelerations(x0[:n], x0[n:2 * n], tau0)
        a1 = sys.accelerations(x1[:n], x1[n:2 * n], tau1)
        return np.concatenate((e, (x1[2 * n:] - a1) - (x0[2 * n:] - a0))), None
    a0, a0_q, a0_qd = sys.accelerations(x0[:n], x0[n:2 * n], tau0, jacobians=True)
    a1, a1_q, a1_qd = sys.accelerations(x1[:n], x1[n:2 * n], tau1, jacobians=True)
    e = np.concatenate((e, (x1[2 * n:] - a1) - (x0[2 * n:] - a0)))
    eye = np.eye(n)
    J0 = np.vstack((J[0], np.hstack((a0_q, a0_qd, -eye))))
    J1 = np.vstack((J[1], np.hstack((-a1_q, -a1_qd, eye))))
    return e, [J0, J1]
