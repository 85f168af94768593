"""Joint reactions (seed 003 §6.2.2) and hybrid dynamics (seed 002 §VI)."""
from pathlib import Path

import numpy as np

from mbfg_ros.planar.problems.hybrid import hybrid_dynamics
from mbfg_ros.planar.problems.inverse_direct import DirectInverseDynamics
from mbfg_ros.planar.dynamics import forward_accel, load_system
from mbfg_ros.planar.problems.reactions import JointReactions, constraint_multipliers

CONFIG = Path(__file__).resolve().parents[2] / 'config'


def _cross(a, b):
    return a[0] * b[1] - a[1] * b[0]


def test_static_four_bar_reactions_balance_forces_and_moments_of_every_body():
    sys = load_system(CONFIG / 'fourbar_inverse.yaml')
    mech = sys.mech
    q, zero = sys.q0, np.zeros(sys.n)
    tau = DirectInverseDynamics(sys)(q, zero, np.zeros(1))   # holds the pose
    Qx = np.zeros(sys.n)
    Qx[4] = tau[0]
    rx = JointReactions(sys)(q, zero, zero, Qx)
    pos = {i: (p.x, p.y) if p.fixed else tuple(q[sys.mech.point_index[i]])
           for i, p in enumerate(mech.points)}
    g = np.array(mech.gravity)
    for e, body in enumerate(mech.bodies):
        F = {int(lab.split('_on_')[0][1:]): f
             for lab, kind, f in zip(rx.labels, rx.kinds, rx.forces)
             if kind == 'pin' and lab.endswith(f'_on_body{e}')}
        i, j = body.points[:2]
        ri, rj = np.array(pos[i]), np.array(pos[j])
        u = (rj - ri) / np.linalg.norm(rj - ri)
        rG = ri + body.cog[0] * u + body.cog[1] * np.array([-u[1], u[0]])
        assert np.allclose(sum(F.values()) + body.mass * g, 0, atol=1e-9)
        moment = sum(_cross(np.array(pos[p]) - ri, f) for p, f in F.items())
        moment += _cross(rG - ri, body.mass * g) + (tau[0] if e == 0 else 0.0)
        assert abs(moment) < 1e-9


def test_pin_reactions_are_equal_and_opposite_in_motion():
    sys = load_system(CONFIG / 'pick_and_place.yaml')
    q = sys.q0
    qd = 0.5 * np.linalg.svd(sys.constraints.phi_q(q))[2][-1]
    a = forward_accel(sys, q, qd, np.array([3.0, -2.0]))
    Qx = np.zeros(sys.n)
    Qx[[20, 21]] = [3.0, -2.0]
    rx = JointReactions(sys)(q, qd, a.qdd, Qx)
    by_point: dict[str, list] = {}
    for lab, kind, f in zip(rx.labels, rx.kinds, rx.forces):
        if kind == 'pin':
            by_point.setdefault(lab.split('_on_')[0], []).append(f)
    pairs = [v for k, v in by_point.items() if len(v) == 2 and k not in ('p1', 'p12')]
    assert pairs
    for f1, f2 in pairs:
        np.testing.assert_allclose(f1 + f2, 0, atol=1e-8 * (1 + np.abs(f1).max()))


def test_multipliers_are_the_minimum_norm_solution_with_redundant_rows():
    sys = load_system(CONFIG / 'pick_and_place.yaml')
    q, zero = sys.q0, np.zeros(sys.n)
    a = forward_accel(sys, q, zero)
    lam = constraint_multipliers(sys, q, zero, a.qdd)
    Jq = sys.constraints.phi_q(q)
    Q = sys.forces.evaluate(q, zero, None, jacobians=False).Q
    np.testing.assert_allclose(Jq.T @ lam, Q - sys.M @ a.qdd, atol=1e-8)
    N = np.linalg.svd(Jq.T)[2][-(sys.m - len(sys.rows)):]     # null space of Φqᵀ
    assert np.max(np.abs(N @ lam)) < 1e-8


def test_hybrid_dynamics_equals_the_augmented_system():
    sys = load_system(CONFIG / 'pick_and_place.yaml')
    q = sys.q0
    qd = np.linalg.svd(sys.constraints.phi_q(q))[2][-1]
    Qg = np.zeros(sys.n)
    Qg[21] = 4.0                                  # known motor torque on theta1
    res = hybrid_dynamics(sys, q, qd, [20], [1.5], Q_given=Qg)
    n, rows = sys.n, sys.rows
    Jr = sys.constraints.phi_q(q)[rows]
    r = len(rows)
    A = np.zeros((n + r + 1, n + r + 1))
    A[:n, :n], A[:n, n:n + r], A[20, -1] = sys.M, Jr.T, -1.0
    A[n:n + r, :n], A[-1, 20] = Jr, 1.0
    Q = sys.forces.evaluate(q, qd, None, jacobians=False).Q + Qg
    b = np.concatenate((Q, -(sys.constraints.phi_q_dot(q, qd)[rows] @ qd), [1.5]))
    x = np.linalg.solve(A, b)
    np.testing.assert_allclose(res.qdd, x[:n], atol=1e-9)
    np.testing.assert_allclose(res.tau, x[-1:], rtol=1e-9)
    # Forward then hybrid: prescribing the forward acceleration returns the applied torque.
    a = forward_accel(sys, q, qd, None, Q_extra=Qg + np.eye(n)[20] * 7.0)
    back = hybrid_dynamics(sys, q, qd, [20], [a.qdd[20]], Q_given=Qg)
    np.testing.assert_allclose(back.tau, [7.0], rtol=1e-8)
