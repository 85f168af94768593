"""DFKI's documented double-pendulum plant, written out for the tests (independent of the package).

From dfki-ric-underactuated-lab/double_pendulum (BSD-3), docs/text/dynamics.rst and
src/python/double_pendulum/model/plant.py ("UnderactuatedLecture" formulas), read and rewritten
here from the documented equations, not copied:

    M(q) q̈ + C(q, q̇) q̇ − G(q) + F(q̇) = u,   F = b q̇ + cf·atan(100 q̇),

with the rotor terms [[gr²Ir + Ir, −gr·Ir], [−gr·Ir, gr²Ir]] in M. q1 is the absolute shoulder
angle, q2 the elbow angle relative to link 1, both 0 hanging down. Parameters: DFKI's identified
model 2.0 file in test/data/dfki.
"""
from __future__ import annotations

import math

import numpy as np
import yaml
from conftest import DATA

DFKI = yaml.safe_load((DATA / 'dfki' / 'design_A.0_model_2.0_model_parameters.yml').read_text())


def dfki_terms(p, q, qd):
    """M, C, G, F of DFKI's documented model (their symbols)."""
    m1, m2, l1, r1, r2 = p['m1'], p['m2'], p['l1'], p['r1'], p['r2']
    I1, I2, Ir, gr, g = p['I1'], p['I2'], p['Ir'], p['gr'], p['g']
    c2, s2 = math.cos(q[1]), math.sin(q[1])
    M = np.array([
        [I1 + I2 + m2 * l1 ** 2 + 2 * m2 * l1 * r2 * c2 + gr ** 2 * Ir + Ir,
         I2 + m2 * l1 * r2 * c2 - gr * Ir],
        [I2 + m2 * l1 * r2 * c2 - gr * Ir, I2 + gr ** 2 * Ir]])
    C = np.array([[-2 * m2 * l1 * r2 * s2 * qd[1], -m2 * l1 * r2 * s2 * qd[1]],
                  [m2 * l1 * r2 * s2 * qd[0], 0.0]])
    G = np.array([-m1 * g * r1 * math.sin(q[0])
                  - m2 * g * (l1 * math.sin(q[0]) + r2 * math.sin(q[0] + q[1])),
                  -m2 * g * r2 * math.sin(q[0] + q[1])])
    F = np.array([p['b1'] * qd[0] + p['cf1'] * math.atan(100 * qd[0]),
                  p['b2'] * qd[1] + p['cf2'] * math.atan(100 * qd[1])])
    return M, C, G, F


def dfki_tau(p, q, qd, qdd):
    M, C, G, F = dfki_terms(p, q, qd)
    return M @ qdd + C @ qd - G + F


def natural_state(p, q, qd, qdd):
    """(q, q̇, q̈) in the package's coordinates (x1, y1, x2, y2, θ_shoulder, θ_elbow)."""
    l1, l2 = p['l1'], p['l2']
    a1, a2 = q[0] - math.pi / 2, q[0] + q[1] - math.pi / 2       # body angles from +x
    w1, w2 = qd[0], qd[0] + qd[1]
    e1, e2 = qdd[0], qdd[0] + qdd[1]

    def point(L, a, w, e):
        u, n = np.array([math.cos(a), math.sin(a)]), np.array([-math.sin(a), math.cos(a)])
        return L * u, L * w * n, L * (e * n - w * w * u)
    p1, v1, c1 = point(l1, a1, w1, e1)
    p2, v2, c2 = point(l2, a2, w2, e2)
    Q = np.concatenate((p1, p1 + p2, [a1, q[1]]))
    Qd = np.concatenate((v1, v1 + v2, [w1, qd[1]]))
    Qdd = np.concatenate((c1, c1 + c2, [e1, qdd[1]]))
    return Q, Qd, Qdd


def simulate_dfki(p, u, t_eval: np.ndarray, x0, rtol: float = 1e-10, max_step: float = np.inf):
    """DFKI's plant ``p`` (their equations: M q̈ = u(t) − C q̇ + G − F) integrated by
    scipy's DOP853 from x0 = [q, q̇] over ``t_eval`` under the torques ``u(t)``; the
    ``solve_ivp`` solution (``.y[:2]`` the angles)."""
    from scipy.integrate import solve_ivp

    def rhs(tk, x):
        M, C, G, F = dfki_terms(p, x[:2], x[2:])
        return np.concatenate((x[2:], np.linalg.solve(M, u(tk) - C @ x[2:] + G - F)))
    return solve_ivp(rhs, (0.0, float(t_eval[-1])), list(x0), method='DOP853', rtol=rtol,
                     atol=1e-12, t_eval=t_eval, max_step=max_step)
