"""An independent high-accuracy reference for the four-bar of seed 000 (fourbars1.yaml).

Written from the geometry alone, sharing no code with ``mbfg_ros``: the
closed-form position of the four-bar as a function of the crank angle θ, and
the one-degree-of-freedom equation of motion from Lagrange's equations

    M(θ) θ̈ + ½ M'(θ) θ̇² = −V'(θ),
    M(θ) = Σ_i m_i |dG_i/dθ|² + I_Gi (dφ_i/dθ)²,   V(θ) = Σ_i m_i g y_Gi(θ),

integrated with scipy's DOP853 at rtol 1e-12. Bodies are uniform bars
(I0 = m L²/3 about the first point, so I_G = m L²/12 about the centre of
mass G at mid-length), as in the YAML file.

Geometry (fourbars1.yaml, L = 1, xb = 4): A = (0, 0) and B = (4, 0) fixed;
crank A–P1 of length 1 (mass 1), coupler P1–P2 of length 2 (mass 2), rocker
P2–B of length √13 (mass 4); at θ = 0, P1 = (1, 0) and P2 = (1, 2).
The generalized coordinates of the package are q = [x1, y1, x2, y2].
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.integrate import solve_ivp

A = np.array([0.0, 0.0])
B = np.array([4.0, 0.0])
L1, L2 = 1.0, 2.0
L3 = float(np.sqrt(13.0))
MASSES = (1.0, 2.0, 4.0)
LENGTHS = (L1, L2, L3)
G = 9.81


def _cross(a: np.ndarray, b: np.ndarray) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def _perp(a: np.ndarray) -> np.ndarray:
    return np.array([-a[1], a[0]])


class Pose(NamedTuple):
    """Points and their first and second derivatives with respect to θ."""

    p1: np.ndarray
    p2: np.ndarray
    p1_t: np.ndarray
    p2_t: np.ndarray
    p1_tt: np.ndarray
    p2_tt: np.ndarray


def pose(theta: float) -> Pose:
    """Closed-form position (circle intersection) and θ-derivatives (implicit)."""
    c, s = np.cos(theta), np.sin(theta)
    p1 = L1 * np.array([c, s])
    p1_t = L1 * np.array([-s, c])
    p1_tt = -p1
    d_vec = B - p1
    d = float(np.hypot(*d_vec))
    u = d_vec / d
    a = (L2 ** 2 - L3 ** 2 + d ** 2) / (2.0 * d)
    h = np.sqrt(L2 ** 2 - a ** 2)
    p2 = p1 + a * u + h * _perp(u)      # the branch through (1, 2) at θ = 0
    # |p2 - p1|² = L2², |p2 - B|² = L3²  differentiated once and twice in θ.
    K = np.vstack((p2 - p1, p2 - B))
    p2_t = np.linalg.solve(K, np.array([(p2 - p1) @ p1_t, 0.0]))
    r = p2_t - p1_t
    p2_tt = np.linalg.solve(K, np.array([(p2 - p1) @ p1_tt - r @ r, -(p2_t @ p2_t)]))
    return Pose(p1, p2, p1_t, p2_t, p1_tt, p2_tt)


def _bodies(p: Pose):
    """(first, second) points of each bar with derivatives: value, d/dθ, d²/dθ²."""
    zero = np.zeros(2)
    return (((A, zero, zero), (p.p1, p.p1_t, p.p1_tt)),
            ((p.p1, p.p1_t, p.p1_tt), (p.p2, p.p2_t, p.p2_tt)),
            ((p.p2, p.p2_t, p.p2_tt), (B, zero, zero)))


def mass_terms(theta: float) -> tuple[float, float, float]:
    """M(θ), M'(θ) and V'(θ) of Lagrange's equation."""
    p = pose(theta)
    M = dM = dV = 0.0
    for (first, second), m, length in zip(_bodies(p), MASSES, LENGTHS):
        g_t = 0.5 * (first[1] + second[1])           # centre of mass at mid-length
        g_tt = 0.5 * (first[2] + second[2])
        v = second[0] - first[0]
        v_t = second[1] - first[1]
        v_tt = second[2] - first[2]
        phi_t = _cross(v, v_t) / length ** 2         # body angle rate per unit θ̇
        phi_tt = _cross(v, v_tt) / length ** 2       # (|v| is constant)
        i_g = m * length ** 2 / 12.0
        M += m * (g_t @ g_t) + i_g * phi_t ** 2
        dM += 2.0 * m * (g_t @ g_tt) + 2.0 * i_g * phi_t * phi_tt
        dV += m * G * g_t[1]
    return M, dM, dV


def energy(theta: float, theta_d: float) -> float:
    """Total mechanical energy ½ M θ̇² + V (V = Σ m g y_G)."""
    p = pose(theta)
    V = sum(m * G * 0.5 * (first[0][1] + second[0][1])
            for (first, second), m in zip(_bodies(p), MASSES))
    return 0.5 * mass_terms(theta)[0] * theta_d ** 2 + V


def _rhs(_t: float, y: np.ndarray) -> np.ndarray:
    theta, theta_d = y
    M, dM, dV = mass_terms(theta)
    return np.array([theta_d, -(0.5 * dM * theta_d ** 2 + dV) / M])


class Reference(NamedTuple):
    t: np.ndarray
    theta: np.ndarray
    theta_d: np.ndarray
    q: np.ndarray       # (N, 4): x1, y1, x2, y2
    qd: np.ndarray      # (N, 4)


def simulate(t: np.ndarray, theta0: float = 0.0, theta_d0: float = 0.0,
             rtol: float = 1e-12, atol: float = 1e-12) -> Reference:
    """Integrate the four-bar from (θ0, θ̇0) and sample it at times ``t`` (t[0] = 0)."""
    t = np.asarray(t, dtype=float)
    sol = solve_ivp(_rhs, (0.0, float(t[-1])), [theta0, theta_d0], method='DOP853',
                    rtol=rtol, atol=atol, t_eval=t, dense_output=False)
    if not sol.success:
        raise RuntimeError(sol.message)
    theta, theta_d = sol.y
    q = np.empty((len(t), 4))
    qd = np.empty((len(t), 4))
    for k, (th, thd) in enumerate(zip(theta, theta_d)):
        p = pose(th)
        q[k] = np.concatenate((p.p1, p.p2))
        qd[k] = np.concatenate((p.p1_t, p.p2_t)) * thd
    return Reference(t, theta, theta_d, q, qd)


def accelerations(r: Reference) -> np.ndarray:
    """(N, 4): q̈ of ``r``'s samples, from θ̈ of the equation of motion and the pose's
    θ-derivatives (q̈ = ∂q/∂θ θ̈ + ∂²q/∂θ² θ̇²)."""
    qdd = np.empty_like(r.q)
    for k, (th, thd) in enumerate(zip(r.theta, r.theta_d)):
        p = pose(th)
        thdd = _rhs(0.0, np.array([th, thd]))[1]
        qdd[k] = (np.concatenate((p.p1_t, p.p2_t)) * thdd
                  + np.concatenate((p.p1_tt, p.p2_tt)) * thd ** 2)
    return qdd


def rmse(q: np.ndarray, q_ref: np.ndarray) -> float:
    """Root mean square of all coordinate errors over all samples (seed 000 Table 1)."""
    return float(np.sqrt(np.mean((np.asarray(q) - np.asarray(q_ref)) ** 2)))
