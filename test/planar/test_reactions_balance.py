"""Joint reactions (seed 003 §6.2.2, Eq. 6.101) balance every body, checked by Newton-Euler.

The check is written here from the mechanism description alone: each body's
mass, centre of gravity, angular acceleration and loads (gravity, forces,
torques, springs, rotational springs, motors) are computed from the pose and
the YAML, and added to the reactions that ``JointReactions`` reports; force
and moment must vanish on every body. A reaction that hides a couple in a pin
force (the rotational-spring bug of issue 14), a missing slider normal force
or a wrong angle-constraint moment leaves a residual.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.planar.problems.inverse import InverseConfig, inverse_dynamics
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.planar.model import GROUND
from mbfg_ros.planar.problems.reactions import JointReactions
from mbfg_ros.planar.problems.statics import static_equilibrium

CONFIG = Path(__file__).resolve().parents[2] / 'config'
# The Newton-Euler written here has no joint friction and no rotor bodies: the DFKI plant (both)
# is checked by test_friction_rotor.py (reactions with friction; dynamics against DFKI's model).
# every mechanism YAML of config/ (the ROS parameters files, estimator*.yaml, are not one)
MECHANISMS = sorted(p.name for p in CONFIG.glob('*.yaml')
                    if 'ros__parameters' not in p.read_text()
                    and p.name != 'dfki_double_pendulum.yaml')
TOL = 1e-9


def _cross(a, b) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def _perp(v):
    return np.array([-v[1], v[0]])


class NewtonEuler:
    """Force and moment balance of every body, from the YAML and the motion only."""

    def __init__(self, sys):
        self.sys, self.mech = sys, sys.mech
        self.owner = {}
        for e, body in enumerate(self.mech.bodies):
            for p in body.points:
                self.owner.setdefault(p, e)     # documented: the first body through a point

    def _points(self, v, fixed_value):
        mech = self.mech
        out, k = [], 0
        for p in mech.points:
            if p.fixed:
                out.append(np.array([p.x, p.y]) if fixed_value else np.zeros(2))
            else:
                out.append(np.array(v[k:k + 2]))
                k += 2
        return out

    def body_angles(self, r, v):
        """(θ, θ̇) per body from its first two points."""
        out = []
        for body in self.mech.bodies:
            i, j = body.points[:2]
            d, dd = r[j] - r[i], v[j] - v[i]
            out.append((math.atan2(d[1], d[0]), _cross(d, dd) / (d @ d)))
        return out

    def residuals(self, q, qd, qdd, rx, Q_extra=None, tau=None):
        """Per body (force residual, moment residual), and the scale of the loads."""
        mech = self.mech
        r, v, a = self._points(q, True), self._points(qd, False), self._points(qdd, False)
        ang = self.body_angles(r, v)
        g = np.array(mech.gravity)
        F = [np.zeros(2) for _ in mech.bodies]
        M = [0.0 for _ in mech.bodies]
        loads = []

        def force(e, at, f):
            if e == GROUND:
                return
            F[e] += f
            M[e] += _cross(at, f)
            loads.append(np.linalg.norm(f))

        def couple(e, m):
            if e == GROUND:
                return
            M[e] += m
            loads.append(abs(m) / self.length)

        self.length = max(1.0, max(np.linalg.norm(x) for x in r))
        for e, body in enumerate(mech.bodies):
            # A body's material point (ξ, η) sits at r_i + (ξ d + η d⊥)/L, d = r_j − r_i
            # (seed 000's natural-coordinate body; L its nominal length), so
            # d'Alembert's force is −m a_G and his moment about the origin is
            # −∫ r × a dm = −[m r_i × a_i + m ξ_G/L (r_i × d̈ + d × a_i)
            #                 + m η_G/L (r_i × d̈⊥ + d⊥ × a_i) + I0 d × d̈ / L²],
            # which is −(r_G × m a_G + I_G θ̈) for a rigid motion.
            i, j = body.points[:2]
            L, m, (cx, cy) = body.length, body.mass, body.cog
            d, ddd = r[j] - r[i], a[j] - a[i]
            rG = r[i] + (cx * d + cy * _perp(d)) / L
            aG = a[i] + (cx * ddd + cy * _perp(ddd)) / L
            force(e, rG, m * g)
            F[e] -= m * aG
            M[e] -= (m * _cross(r[i], a[i]) + m * cx / L * (_cross(r[i], ddd) + _cross(d, a[i]))
                     + m * cy / L * (_cross(r[i], _perp(ddd)) + _cross(_perp(d), a[i]))
                     + body.I0 * _cross(d, ddd) / L ** 2)
            loads.append(m * np.linalg.norm(aG))
        for f in mech.forces:
            if f.point is not None:
                force(self.owner.get(f.point, GROUND), r[f.point], np.array([f.fx, f.fy]))
            else:
                body = mech.bodies[f.body]
                i, j = body.points[:2]
                d = r[j] - r[i]
                force(f.body, r[i] + (f.at[0] * d + f.at[1] * _perp(d)) / body.length,
                      np.array([f.fx, f.fy]))
        for t in mech.torques:
            couple(t.body, t.torque)
        for s in mech.springs:
            pa, pb = s.points
            d = r[pb] - r[pa]
            length = np.linalg.norm(d)
            tension = s.k * (length - s.length) + s.c * (d @ (v[pb] - v[pa])) / length
            force(self.owner.get(pa, GROUND), r[pa], tension * d / length)
            force(self.owner.get(pb, GROUND), r[pb], -tension * d / length)
        spring_couples = {}
        for k, s in enumerate(mech.rotational_springs):
            th = [(0.0, 0.0) if b == GROUND else ang[b] for b in s.bodies]
            phi, rate = th[1][0] - th[0][0], th[1][1] - th[0][1]
            torque = -s.k * math.remainder(phi - s.angle, 2 * math.pi) - s.c * rate
            couple(s.bodies[1], torque)
            couple(s.bodies[0], -torque)
            spring_couples[k] = (s.bodies, torque)
        for p, m in mech.point_masses:
            force(self.owner.get(p, GROUND), r[p], m * (g - a[p]))
        gen = np.zeros(self.sys.n) if Q_extra is None else np.array(Q_extra, float)
        for k, act in enumerate(mech.actuators if tau is not None else ()):
            if act.coordinate is not None:
                gen[act.coordinate] += tau[k]
            else:
                bodies = mech.joint(act.joint).bodies
                couple(bodies[1], tau[k])
                couple(bodies[0], -tau[k])
        pidx = mech.point_index
        for p in range(len(mech.points)):
            if pidx[p, 0] >= 0:
                force(self.owner.get(p, GROUND), r[p], gen[pidx[p]])
        # The reactions under test: pins, slider normal forces, angle-constraint couples.
        for k, kind in enumerate(rx.kinds):
            e = int(rx.bodies[k])
            if kind in ('pin', 'slider'):
                force(e, rx.at[k], rx.forces[k])
            elif kind == 'angle':
                couple(e, rx.moments[k])
        scale = max(loads)
        return F, M, scale, spring_couples


def _check(sys, ne, q, qd, qdd, rx, Q_extra=None, tau=None, where=''):
    F, M, scale, springs = ne.residuals(q, qd, qdd, rx, Q_extra, tau)
    for e, body in enumerate(sys.mech.bodies):
        assert np.linalg.norm(F[e]) <= TOL * scale, (where, body.name, F[e], scale)
        assert abs(M[e]) <= TOL * scale * ne.length, (where, body.name, M[e], scale)
    for k, (bodies, torque) in springs.items():
        got = {int(rx.bodies[i]): rx.moments[i] for i in rx.of_kind('rotational_spring')
               if rx.joints[i] == f'rotational_spring{k}'}
        assert got[bodies[1]] == pytest.approx(torque, abs=1e-12 * scale)
        assert got[bodies[0]] == pytest.approx(-torque, abs=1e-12 * scale)
    # Newton's third law: the sides of every pin and slider add up to zero.
    for joint in set(rx.joints):
        idx = [i for i, j in enumerate(rx.joints) if j == joint and rx.kinds[i] in ('pin',
                                                                                     'slider')]
        if idx:
            assert np.linalg.norm(rx.forces[idx].sum(axis=0)) <= TOL * scale, (where, joint)


def _prescription(sys):
    """The motion the inverse-dynamics run prescribes, and its actuated coordinates."""
    mech = sys.mech
    coord = [a.coordinate for a in mech.actuators if a.coordinate is not None]
    act = coord if mech.actuators and len(coord) == len(mech.actuators) else None
    z_idx = act if act and len(act) == sys.dof else list(sys.z_idx)
    return z_idx, act or z_idx


@pytest.mark.parametrize('name', MECHANISMS)
def test_reactions_balance_every_body_along_an_inverse_dynamics_run(name):
    sys = load_system(CONFIG / name)
    z_idx, act = _prescription(sys)
    t = np.linspace(0.0, 1.0, 41)
    z = sys.q0[z_idx] + 0.05 * np.sin(2.0 * t)[:, None] * np.ones(len(z_idx))
    res = inverse_dynamics(sys, t, z, z_idx, act, InverseConfig(staged=False))
    jr, ne = JointReactions(sys), NewtonEuler(sys)
    for k in range(len(t)):
        rx = jr(res.q[k], res.qd[k], res.qdd[k], res.Q[k])
        _check(sys, ne, res.q[k], res.qd[k], res.qdd[k], rx, Q_extra=res.Q[k],
               where=f'{name} sample {k}')


@pytest.mark.parametrize('name', MECHANISMS)
def test_reactions_balance_every_body_at_every_static_equilibrium(name):
    """The equilibrium nearest the YAML pose (often unstable) and the stable one downhill."""
    sys = load_system(CONFIG / name)
    nearest = static_equilibrium(sys, stable=False)
    low = static_equilibrium(sys, stable=True)
    assert low.verdict == 'stable'
    zero = np.zeros(sys.n)
    jr, ne = JointReactions(sys), NewtonEuler(sys)
    for eq in (nearest, low):
        rx = jr(eq.q, zero, zero)
        _check(sys, ne, eq.q, zero, zero, rx, where=f'{name} statics ({eq.verdict})')


def test_joint_motor_torques_and_slider_normal_forces_balance_in_motion():
    """Slider-crank driven by its joint motor (a couple between ground and crank)."""
    from mbfg_ros.planar.dynamics import forward_accel
    sys = load_system(CONFIG / 'slider_crank.yaml')
    q = sys.q0
    qd = 2.0 * np.linalg.svd(sys.constraints.phi_q(q))[2][-1]
    tau = np.array([3.5])
    a = forward_accel(sys, q, qd, tau)
    rx = JointReactions(sys)(q, qd, a.qdd, tau=tau)
    _check(sys, NewtonEuler(sys), q, qd, a.qdd, rx, tau=tau, where='slider-crank motor')
    motor = {int(rx.bodies[i]): rx.moments[i] for i in rx.of_kind('actuator')}
    assert motor == {GROUND: -3.5, 0: 3.5}
    # The guide is smooth: the force on the slider is normal to the line through
    # (-3, -2) and (8, 2), and `normal` is its signed size along the left normal.
    k = [i for i in rx.of_kind('slider') if rx.bodies[i] != GROUND][0]
    line = np.array([11.0, 4.0]) / np.hypot(11.0, 4.0)
    assert abs(rx.forces[k] @ line) <= 1e-12 * np.linalg.norm(rx.forces[k])
    assert rx.normal['guide'] == pytest.approx(rx.forces[k] @ _perp(line), rel=1e-12)
    assert abs(rx.normal['guide']) > 1.0


def test_inconsistent_loads_show_as_a_residual_not_as_a_reaction():
    sys = load_system(CONFIG / 'slider_crank.yaml')
    zero = np.zeros(sys.n)
    rx = JointReactions(sys)(sys.q0, zero, zero, tau=np.array([1.0]))   # not in equilibrium
    assert rx.residual > 0.1


def test_a_massless_link_is_a_two_force_member_carrying_its_distance_tension():
    """A four-bar whose coupler has no mass: its pins push along it, equal and opposite,
    and the distance constraint's tension (seed 003 Eq. 6.61) is that force."""
    from mbfg_ros.planar.dynamics import build_system, forward_accel
    from mbfg_ros.planar.mechanism_yaml import parse_mechanism
    text = (CONFIG / 'fourbar.yaml').read_text().replace(
        '    length: 2*L\n    mass: 2.0\n    I0: (1/3)*mass*length^2',
        '    length: 2*L\n    mass: 0.0\n    I0: 0.0')
    mech = parse_mechanism(text, source='massless_coupler')
    assert mech.bodies[1].mass == 0.0
    sys = build_system(mech)
    q = sys.q0
    qd = 1.5 * np.linalg.svd(sys.constraints.phi_q(q))[2][-1]
    a = forward_accel(sys, q, qd, np.array([2.0]))
    rx = JointReactions(sys)(q, qd, a.qdd, tau=np.array([2.0]))
    _check(sys, NewtonEuler(sys), q, qd, a.qdd, rx, tau=np.array([2.0]), where='massless')
    f1 = rx.forces[rx.labels.index('p1_on_body1')]
    f2 = rx.forces[rx.labels.index('p2_on_body1')]
    r1, r2 = q[0:2], q[2:4]
    u = (r2 - r1) / np.linalg.norm(r2 - r1)
    np.testing.assert_allclose(f1 + f2, 0, atol=1e-9 * np.linalg.norm(f1))
    assert abs(_cross(u, f1)) <= 1e-9 * np.linalg.norm(f1)        # along the link
    T = rx.tension['body1_p1_p2']
    # In tension (T > 0) the link pulls its ends together and the pins pull them apart.
    np.testing.assert_allclose(f1, -T * u, rtol=1e-9, atol=1e-12)
    assert abs(T) > 0.1


def test_every_element_kind_at_once_balances_in_motion():
    """Relative angle between two pinned bodies (their vectors share the elbow), an
    absolute angle, a slider, point and body forces, a torque, springs, a rotational
    spring, a point mass, a coordinate motor on an angle and a joint motor."""
    from test_yaml_names import BY_INDEX

    from mbfg_ros.planar.dynamics import build_system, forward_accel
    from mbfg_ros.planar.mechanism_yaml import parse_mechanism
    text = BY_INDEX + ('actuators:\n  - {name: m_angle, coordinate: elbow_angle}\n'
                       '  - {name: m_joint, joint: elbow_joint}\n')
    text = text.replace('rotational_springs:\n  - {bodies: [ground, 0], k: 4}',
                        'rotational_springs:\n  - {bodies: [ground, 0], k: 4, c: 0.3}\n'
                        '  - {bodies: [0, 1], k: 2, c: 0.2, angle: 0.4}')
    sys = build_system(parse_mechanism(text, source='all kinds'))
    q = sys.q0
    qd = 1.3 * np.linalg.svd(sys.constraints.phi_q(q))[2][-1]
    tau = np.array([0.7, -1.1])
    a = forward_accel(sys, q, qd, tau)
    rx = JointReactions(sys)(q, qd, a.qdd, tau=tau)
    assert rx.residual < 1e-9
    _check(sys, NewtonEuler(sys), q, qd, a.qdd, rx, tau=tau, where='all kinds')
    kinds = set(rx.kinds)
    assert kinds == {'pin', 'slider', 'angle', 'rotational_spring', 'actuator'}
    # The coordinate motor on elbow_angle reaches the bodies through the angle row.
    elbow = {int(rx.bodies[i]): rx.moments[i] for i in rx.of_kind('angle')
             if rx.joints[i] == 'elbow_angle'}
    assert elbow[1] == pytest.approx(0.7, rel=1e-9) and elbow[0] == pytest.approx(-0.7,
                                                                                rel=1e-9)


@pytest.mark.parametrize('name', ['extensions.yaml', 'quick_return.yaml',
                                  'slider_crank_spring.yaml', 'runaway_slider.yaml'])
def test_test_mechanisms_balance_in_motion_with_their_motors(name):
    """Mobile slider (quick-return), every extension key, springs on sliders."""
    from mbfg_ros.planar.dynamics import forward_accel
    sys = load_system(Path(__file__).resolve().parents[1] / 'data' / name)
    q = sys.q0
    N = np.linalg.svd(sys.constraints.phi_q(q))[2][sys.n - sys.dof:]
    qd = 0.8 * N.sum(axis=0)
    tau = np.linspace(0.5, -1.5, sys.forces.n_act)
    a = forward_accel(sys, q, qd, tau)
    rx = JointReactions(sys)(q, qd, a.qdd, tau=tau)
    assert rx.residual < 1e-9
    _check(sys, NewtonEuler(sys), q, qd, a.qdd, rx, tau=tau, where=name)
