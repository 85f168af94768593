"""Joint friction and geared rotor inertia (issue 11, item 1).

The reference is DFKI's documented double-pendulum plant, written out in
test/support/dfki_reference.py from their documented form; its parameters are read from
DFKI's own file (test/data/dfki), not from the package's YAML.
"""
import math
import re

import numpy as np
import pytest
from conftest import CONFIG, numerical_jacobian
from support.dfki_reference import DFKI, dfki_tau, dfki_terms, natural_state, simulate_dfki

from mbfg_ros.planar.dynamics import actuator_efforts
from mbfg_ros.core.errors import MechanismError
from mbfg_ros.planar.problems.inverse_direct import DirectInverseDynamics
from mbfg_ros.planar.dynamics import build_system, forward_accel, load_system
from mbfg_ros.planar.friction import friction_torque
from mbfg_ros.planar.kinematics import solve_velocity
from mbfg_ros.planar.mechanism_yaml import parse_mechanism
from mbfg_ros.planar.model import Friction

SYS = load_system(CONFIG / 'dfki_double_pendulum.yaml')


def random_states(count, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield (rng.uniform(-math.pi, math.pi, 2), rng.uniform(-6, 6, 2),
               rng.uniform(-40, 40, 2))


def test_inverse_dynamics_equals_dfki_documented_model():
    idd = DirectInverseDynamics(SYS, z_idx=(4, 5))
    worst = 0.0
    for q, qd, qdd in random_states(200):
        ref = dfki_tau(DFKI, q, qd, qdd)
        Q, Qd, Qdd = natural_state(DFKI, q, qd, qdd)
        tau = idd(Q, Qd, Qdd[4:])
        tau_ls = actuator_efforts(SYS, Q, Qd, Qdd)          # the estimator's path
        worst = max(worst, np.abs(tau - ref).max(), np.abs(tau_ls - ref).max())
    assert worst < 1e-9


def test_forward_dynamics_equals_dfki_documented_model():
    rng = np.random.default_rng(3)
    for q, qd, _ in random_states(50, seed=1):
        u = rng.uniform(-3, 3, 2)
        M, C, G, F = dfki_terms(DFKI, q, qd)
        ref = np.linalg.solve(M, u - C @ qd + G - F)
        Q, Qd, _ = natural_state(DFKI, q, qd, np.zeros(2))
        a = forward_accel(SYS, Q, Qd, u)
        np.testing.assert_allclose(a.qdd[4:], ref, rtol=1e-9, atol=1e-9)
        _, _, Qdd = natural_state(DFKI, q, qd, ref)
        np.testing.assert_allclose(a.qdd, Qdd, rtol=1e-9, atol=1e-8)


def rigid_text(text):
    """The same YAML without friction and rotor keys."""
    text = re.sub(r',?\s*friction: \{[^}]*\}', '', text)
    return re.sub(r', Ir: [^,}]+, gr: [^,}]+', '', text)


def test_without_friction_and_rotor_the_dfki_model_is_the_rigid_one():
    text = rigid_text((CONFIG / 'dfki_double_pendulum.yaml').read_text())
    rigid = build_system(parse_mechanism(text))
    assert not rigid.forces.state_dependent and not rigid.M[4:, 4:].any()
    p = dict(DFKI, Ir=0.0, cf1=0.0, cf2=0.0, b1=0.0, b2=0.0)
    idd = DirectInverseDynamics(rigid, z_idx=(4, 5))
    for q, qd, qdd in random_states(20, seed=2):
        Q, Qd, Qdd = natural_state(p, q, qd, qdd)
        np.testing.assert_allclose(idd(Q, Qd, Qdd[4:]), dfki_tau(p, q, qd, qdd), atol=1e-9)


@pytest.mark.parametrize('fr', [
    Friction(b=0.01, fc=0.2, v_s=0.05),
    Friction(b=0.0, fc=0.1, v_s=0.01, smooth='atan'),
    Friction(b=0.002, fc=0.1, v_s=0.02, fs=0.3, v_st=0.2)])
def test_friction_torque_derivative_and_limits(fr):
    for v in np.linspace(-1, 1, 41):
        F, dF = friction_torque(fr, v)
        h = 1e-7
        num = (friction_torque(fr, v + h)[0] - friction_torque(fr, v - h)[0]) / (2 * h)
        assert dF == pytest.approx(num, rel=1e-5, abs=1e-6)
    assert friction_torque(fr, 0.0)[0] == 0.0
    # Far beyond v_s and v_st: b v + fc sign(v).
    assert friction_torque(fr, 50.0)[0] == pytest.approx(fr.b * 50 + fr.fc, rel=1e-3)
    assert friction_torque(fr, -50.0)[0] == pytest.approx(-fr.b * 50 - fr.fc, rel=1e-3)


def test_stribeck_peak_exceeds_coulomb_level_near_rest():
    fr = Friction(fc=0.1, v_s=0.001, fs=0.3, v_st=0.2)
    assert friction_torque(fr, 0.02)[0] > 0.28
    assert friction_torque(fr, 1.0)[0] == pytest.approx(0.1, abs=1e-4)


FRICTION_YAML = """
points:
  - {x: 0, y: 0, fixed: true}
  - {x: 1, y: 0}
  - {x: 1.5, y: 0.5}
  - {x: 2, y: 0.0}
  - {x: 3, y: 0, fixed: true}
planar_bodies:
  - {points: [0, 1], length: auto, mass: 1, I0: 0.4, cog: [0.5, 0.1]}
  - {points: [1, 2], length: auto, mass: 2, I0: 0.3, cog: [0.3, 0]}
  - {points: [2, 3], length: auto, mass: 1, I0: 0.2, cog: [0.2, 0]}
  - {points: [3, 4], length: auto, mass: 1, I0: 0.3, cog: [0.5, 0]}
relative_coordinates:
  - {type: RelativeAngle, bodies: [ground, body0], name: crank}
  - {type: RelativeAngle, bodies: [body0, body1], name: knee}
joints:
  - {name: j0, type: revolute, bodies: [ground, body0],
     friction: {b: 0.05, fc: 0.3, v_s: 0.1}}
  - {name: j1, type: revolute, bodies: [body0, body1],
     friction: {b: 0.02, fc: 0.2, v_s: 0.2, smooth: atan, fs: 0.4, v_st: 0.5}}
  - {name: j2, type: revolute, bodies: [body1, body2], friction: {fc: 0.1, v_s: 0.3}}
actuators:
  - {name: m0, joint: j0, Ir: 0.01, gr: 5}
  - {name: m1, joint: j1, Ir: 0.02, gr: -3}
"""


def test_friction_force_and_dynamics_jacobians_match_finite_differences():
    sys = build_system(parse_mechanism(FRICTION_YAML))
    rng = np.random.default_rng(4)
    for spread in (0.0, 0.05, 0.3):
        q = sys.q0 + spread * rng.standard_normal(sys.n)
        qd = 0.3 * rng.standard_normal(sys.n)
        tau = rng.standard_normal(2)
        ft = sys.forces.evaluate(q, qd, tau)
        np.testing.assert_allclose(ft.Q_q, numerical_jacobian(
            lambda x: sys.forces.evaluate(x, qd, tau, jacobians=False).Q, q), atol=1e-5)
        np.testing.assert_allclose(ft.Q_qd, numerical_jacobian(
            lambda x: sys.forces.evaluate(q, x, tau, jacobians=False).Q, qd), atol=1e-5)
        a = forward_accel(sys, q, qd, tau, jacobians=True)
        scale = max(1.0, np.abs(a.qdd_q).max())
        np.testing.assert_allclose(a.qdd_q / scale, numerical_jacobian(
            lambda x: forward_accel(sys, x, qd, tau).qdd, q) / scale, atol=1e-5)
        np.testing.assert_allclose(a.qdd_qd, numerical_jacobian(
            lambda x: forward_accel(sys, q, x, tau).qdd, qd), atol=1e-5)


def test_friction_and_rotor_power_balance():
    """Signs, independently: on the manifold the friction power q̇ᵀQ_f is −Σ F(φ̇)φ̇ with φ̇
    the joint rates, and ½ q̇ᵀ M q̇ gains the rotors' ½ Ir (ω_carrier + gr φ̇)²."""
    sys = build_system(parse_mechanism(FRICTION_YAML))
    rigid = build_system(parse_mechanism(rigid_text(FRICTION_YAML)))
    assert rigid.mech.joints[0].friction is None and rigid.mech.actuators[0].Ir == 0
    q = sys.q0
    Jq = sys.constraints.phi_q(q)[sys.rows]
    qd = solve_velocity(Jq, sys.z_idx, np.array([0.7, -0.4][:sys.dof]))
    crank, knee = qd[-2], qd[-1]
    extra = 0.5 * 0.01 * (5 * crank) ** 2 + 0.5 * 0.02 * (crank - 3 * knee) ** 2
    assert 0.5 * qd @ sys.M @ qd - 0.5 * qd @ rigid.M @ qd == pytest.approx(extra, rel=1e-12)
    Qf = sys.forces.evaluate(q, qd, None, jacobians=False).Q - \
        rigid.forces.evaluate(q, qd, None, jacobians=False).Q

    def angle(b):
        i, j = sys.mech.bodies[b].points[:2]
        return sys.mech.point_index[i], sys.mech.point_index[j]

    def omega(b):           # body angular velocity from its two points: (d × ḋ) / |d|²
        if b < 0:
            return 0.0
        i, j = angle(b)
        pi = q[i] if i[0] >= 0 else np.zeros(2)
        vi = qd[i] if i[0] >= 0 else np.zeros(2)
        pj, vj = q[j], qd[j]
        d, dd = pj - pi, vj - vi
        return (d[0] * dd[1] - d[1] * dd[0]) / (d @ d)
    fr = [j.friction for j in sys.mech.joints]
    rates = [omega(j.bodies[1]) - omega(j.bodies[0]) for j in sys.mech.joints]
    assert rates[0] == pytest.approx(crank) and rates[1] == pytest.approx(knee)
    power = -sum(friction_torque(f, r)[0] * r for f, r in zip(fr, rates))
    assert Qf @ qd == pytest.approx(power, rel=1e-9)
    assert power < 0


@pytest.mark.parametrize('edit, message', [
    (('fc: 0.3', 'fc: -1'), r'joints\[0\].friction.fc: must be zero or positive'),
    (('v_s: 0.1', 'v_s: 0'), r'joints\[0\].friction.v_s: must be a positive number'),
    (('smooth: atan', 'smooth: sign'), r"joints\[1\].friction.smooth: unknown smooth sign 'sign'"),
    (('fc: 0.1, v_s', 'fk: 0.1, v_s'), r"fr.yaml: joints\[2\].friction.fk: unknown key 'fk'"),
    (('Ir: 0.01', 'Ir: -1'), r'actuators\[0\].Ir: must be zero or positive'),
    (('gr: 5', 'gr: 0'), r'actuators\[0\].gr: the gear ratio must be finite and non-zero'),
    (('  - {type: RelativeAngle, bodies: [body0, body1], name: knee}\n', ''),
     r'actuators\[1\].Ir: a rotor inertia needs the joint angle as a coordinate: add '
     r'relative_coordinates: \{type: RelativeAngle, bodies: \[body0, body1\]\}'),
    (('  - {type: RelativeAngle, bodies: [ground, body0], name: crank}\n', ''),
     r'actuators\[0\].Ir: a rotor inertia needs the joint angle'),
])
def test_bad_friction_and_rotor_values_name_file_and_key(edit, message):
    with pytest.raises(MechanismError, match=message):
        parse_mechanism(FRICTION_YAML.replace(*edit), source='fr.yaml')


def test_statics_are_unchanged_by_friction_and_rotor():
    """Smooth friction is zero at rest and a rotor stores no potential energy."""
    from mbfg_ros.planar.problems.statics import static_equilibrium
    a = static_equilibrium(build_system(parse_mechanism(FRICTION_YAML)))
    b = static_equilibrium(build_system(parse_mechanism(rigid_text(FRICTION_YAML))))
    assert a.verdict == b.verdict
    np.testing.assert_allclose(a.q, b.q, atol=1e-10)


def dfki_yaml_at(q1, q2):
    """The package's DFKI YAML started at DFKI angles (q1, q2), at rest."""
    text = (CONFIG / 'dfki_double_pendulum.yaml').read_text()
    text = text.replace('{x: 0, y: -l1, name: elbow_axis}',
                        f'{{x: l1*sin({q1}), y: -l1*cos({q1}), name: elbow_axis}}')
    return text.replace('{x: 0, y: -l1-l2, name: tip}',
                        f'{{x: x1+l2*sin({q1 + q2}), y: y1-l2*cos({q1 + q2}), name: tip}}')


def test_forward_simulation_with_friction_and_rotor_follows_dfki_ode():
    """The factor-graph integrator on the full model against DFKI's equations integrated
    by scipy (DOP853, rtol 1e-10), with a torque on both motors."""

    from mbfg_ros.simulation.forward import ForwardConfig, simulate
    sys = build_system(parse_mechanism(dfki_yaml_at(1.0, 0.5)))

    def u(t):
        return np.array([0.3 * math.sin(3 * t), 0.2 * math.cos(5 * t)])

    traj = simulate(sys, 1.0, ForwardConfig(dt=5e-4), tau_fn=lambda t, q, qd: u(t + 2.5e-4))
    ref = simulate_dfki(DFKI, u, traj.t, [1.0, 0.5, 0, 0])
    err = np.abs(traj.q[:, 4] + math.pi / 2 - ref.y[0]).max()
    err2 = np.abs(traj.q[:, 5] - ref.y[1]).max()
    assert max(err, err2) < 5e-3


def test_staged_inverse_dynamics_with_friction_and_rotor_equals_dfki():
    """The factor-graph (staged batch) inverse dynamics on a smooth motion of both joints."""
    from mbfg_ros.planar.problems.inverse import InverseConfig, inverse_dynamics
    t = np.linspace(0, 1, 201)
    q1, q2 = 0.8 * np.sin(2 * t), 0.5 * np.sin(3 * t + 0.3)
    qd = np.stack((1.6 * np.cos(2 * t), 1.5 * np.cos(3 * t + 0.3)), 1)
    qdd = np.stack((-3.2 * np.sin(2 * t), -4.5 * np.sin(3 * t + 0.3)), 1)
    res = inverse_dynamics(SYS, t, np.stack((q1 - math.pi / 2, q2), 1), (4, 5), (4, 5),
                           InverseConfig())
    ref = np.array([dfki_tau(DFKI, (a, b), v, w) for a, b, v, w in zip(q1, q2, qd, qdd)])
    # The trapezoidal rule's O(dt²) error on q̈ at dt = 5 ms, inside the first/last samples.
    np.testing.assert_allclose(res.tau[5:-5], ref[5:-5], atol=5e-4)


def test_joint_reactions_balance_with_friction_as_a_couple():
    """Newton-Euler on each body holds with friction (no residual), and each joint's friction
    appears as a couple on its two bodies, +F(φ̇) on the first and −F(φ̇) on the second."""
    from mbfg_ros.planar.problems.reactions import JointReactions
    sys = build_system(parse_mechanism(FRICTION_YAML.replace('Ir: 0.01', 'Ir: 0').replace(
        'Ir: 0.02', 'Ir: 0')))
    q = sys.q0
    qd = solve_velocity(sys.constraints.phi_q(q)[sys.rows], sys.z_idx, [0.7] * sys.dof)
    tau = np.array([0.3, -0.2])
    a = forward_accel(sys, q, qd, tau)
    rx = JointReactions(sys)(q, qd, a.qdd, None, tau)
    assert np.abs(rx.residual).max() < 1e-9
    couples = {rx.labels[k]: rx.moments[k] for k, kind in enumerate(rx.kinds)
               if kind == 'friction'}
    for name, rate in (('j0', qd[-2]), ('j1', qd[-1])):
        F = friction_torque(sys.mech.joint(name).friction, rate)[0]
        assert abs(F) > 0.05
        first, second = sys.mech.joint(name).bodies
        on_second = [v for k, v in couples.items() if k.startswith(f'friction_{name}_on_')
                     and k.endswith(sys.mech.bodies[second].name)]
        assert on_second == [pytest.approx(-F, rel=1e-12)]
