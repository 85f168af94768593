"""Shared by the bench scripts: the four-bar truth."""
from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from mbfg_ros.planar.dynamics import System, forward_accel

__all__ = ['truth']


def truth(sys: System, duration: float, rate: float, alpha: float = 10.0,
          rtol: float = 1e-10) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t, q, q̇, q̈) sampled at ``rate`` Hz by DOP853 with Baumgarte stabilisation."""
    n = sys.n
    cons = sys.constraints

    def rhs(_t, y):
        q, qd = y[:n], y[n:]
        # Baumgarte: add −2α Φq q̇ − α² Φ to the acceleration right-hand side by a
        # generalized force correction through the augmented system's c term.
        a = forward_accel(sys, q, qd, None)
        Jq = cons.phi_q(q)[sys.rows]
        corr = -2 * alpha * (Jq @ qd) - alpha ** 2 * cons.phi(q)[sys.rows]
        dq = np.linalg.lstsq(Jq, corr, rcond=None)[0]
        return np.concatenate((qd, a.qdd + dq))

    t = np.arange(0.0, duration + 0.5 / rate, 1.0 / rate)
    y0 = np.concatenate((sys.q0, np.zeros(n)))
    sol = solve_ivp(rhs, (0.0, float(t[-1])), y0, method='DOP853', rtol=rtol, atol=rtol,
                    t_eval=t)
    if not sol.success:
        raise RuntimeError(sol.message)
    q, qd = sol.y[:n].T.copy(), sol.y[n:].T.copy()
    qdd = np.array([forward_accel(sys, a, b, None).qdd for a, b in zip(q, qd)])
    return t, q, qd, qdd
