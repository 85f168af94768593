"""The command law's computed torque on a fully actuated tree (issue 24: the torque command
at the estimate rate): q̈[idx] = s̈* directly, without the least-squares acceleration problem
of the general case (closed loops, coordinates, under-actuation), must give the same torques
as that general problem, and those torques must reproduce s̈* through the forward dynamics."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import CONFIG

from mbfg_ros.estimation.control import CommandLaw
from mbfg_ros.spatial.system import build_spatial_system

URDF = CONFIG / 'urdf'
ROBOTS = {'ur5': (URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml'),
          'panda_like': (URDF / 'panda_like.urdf', None)}


@pytest.mark.parametrize('robot', list(ROBOTS))
def test_the_direct_computed_torque_equals_the_general_acceleration_problem(robot):
    urdf, overlay = ROBOTS[robot]
    sys_ = build_spatial_system(urdf, overlay) if overlay else build_spatial_system(urdf)
    names = [a.name for a in sys_.description.actuators][::-1]      # a permuted order
    law = CommandLaw(sys_, names, kp=400.0, kd=40.0)
    general = CommandLaw(sys_, names, kp=400.0, kd=40.0)
    general._direct = None                      # the least-squares path of every system
    assert law._direct is not None              # a fully actuated tree takes the direct path
    rng = np.random.default_rng(3)
    n, k = sys_.n, law.n_act
    for _ in range(5):
        q, qd = rng.uniform(-2, 2, n), rng.uniform(-1, 1, n)
        s_ref, sd_ref, sdd_ref = rng.uniform(-2, 2, k), rng.uniform(-1, 1, k), \
            rng.uniform(-3, 3, k)
        tau = law.track(q, qd, s_ref, sd_ref, sdd_ref)
        np.testing.assert_allclose(tau, general.track(q, qd, s_ref, sd_ref, sdd_ref),
                                   rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(law.hold_at(q, qd, s_ref), general.hold_at(q, qd, s_ref),
                                   rtol=1e-9, atol=1e-9)
        # the torques drive the reference's acceleration: forward dynamics of τ gives s̈*
        full = np.empty(k)
        full[law.order] = tau
        err = np.angle(np.exp(1j * (s_ref - q[law._direct])))
        want = sdd_ref + 400.0 * err + 40.0 * (sd_ref - qd[law._direct])
        np.testing.assert_allclose(sys_.accelerations(q, qd, full)[law._direct], want,
                                   rtol=1e-7, atol=1e-7)


def test_the_square_acceleration_problem_is_solved_as_least_squares_would():
    """The four-bar (3 loop rows + 1 actuator = 4 coordinates): ``track``'s square
    acceleration problem is one LU solve (issue 24), equal to the least-squares solution
    it replaced at random consistent states; a singular matrix falls back to least squares."""
    from mbfg_ros.estimation.control import solve_linear_system
    from mbfg_ros.planar.dynamics import load_system

    sys_ = load_system(CONFIG / 'fourbar.yaml')
    law = CommandLaw(sys_, [], kp=400.0, kd=40.0)
    rng = np.random.default_rng(7)
    q0 = np.asarray(sys_.q0, float)
    solved = 0
    for _ in range(5):
        _, Jq, gamma = sys_.constraint_terms(q0, np.zeros(sys_.n))
        qd = np.linalg.svd(Jq)[2][-1] * rng.uniform(-3, 3)       # on the constraint manifold
        s, sd, J, Jdqd = law.actuated(q0, qd)
        _, Jq, gamma = sys_.constraint_terms(q0, qd)
        A = np.concatenate((Jq, J))
        assert A.shape[0] == A.shape[1] == sys_.n
        b = np.concatenate((-gamma, rng.uniform(-5, 5, 1) - Jdqd))
        want = np.linalg.lstsq(A, b, rcond=None)[0]
        np.testing.assert_allclose(solve_linear_system(A, b), want, rtol=1e-10, atol=1e-10)
        s_ref = s + rng.uniform(-0.2, 0.2, 1)
        tau = law.track(q0, qd, s_ref, np.zeros(1), np.zeros(1))
        err = np.angle(np.exp(1j * (s_ref - s)))
        qdd = np.linalg.lstsq(A, np.concatenate((-gamma, 400.0 * err - 40.0 * sd - Jdqd)),
                              rcond=None)[0]
        np.testing.assert_allclose(tau, sys_.torques(q0, qd, qdd)[law.order], rtol=1e-9,
                                   atol=1e-9)
        solved += 1
    assert solved == 5
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    b = np.array([1.0, 2.0])
    np.testing.assert_allclose(solve_linear_system(singular, b),
                               np.linalg.lstsq(singular, b, rcond=None)[0])


@pytest.mark.parametrize('name', ['fourbar.yaml', 'slider_crank.yaml'])
def test_the_one_actuator_command_is_the_array_arithmetic_bit_for_bit(name):
    """A planar mechanism with one actuator (issue 24: its command in floats, the square
    problem by LAPACK's gesv): :meth:`CommandLaw.track` and ``hold_at`` equal, bit for bit,
    the class docstring's computed torque written in numpy arrays (wrap_angle, the general
    constraint terms, np.linalg.solve) at random states, references and gains."""
    from mbfg_ros.core.angles import wrap_angle
    from mbfg_ros.planar.dynamics import load_system

    sys_ = load_system(CONFIG / name)
    rng = np.random.default_rng(11)
    cons = sys_.constraints
    for _ in range(20):
        kp, kd = rng.uniform(0, 1e3), rng.uniform(0, 100)
        law = CommandLaw(sys_, [], kp=kp, kd=kd)
        assert law.n_act == 1 and law._direct is None
        q, qd = sys_.q0 + 0.05 * rng.normal(size=sys_.n), rng.normal(size=sys_.n)
        s, sd, J, Jdqd = law.actuated(q, qd)
        s_ref, sd_ref, sdd_ref = s + rng.uniform(-4, 4, 1), rng.normal(size=1), \
            rng.normal(size=1)
        t = cons.terms(q, qd)
        A = np.concatenate((t.phi_q, J))
        for ref, want_sd, want_sdd in ((s_ref, sd_ref, sdd_ref),
                                       (s_ref, np.zeros(1), np.zeros(1))):
            err = ref - s
            if law._wrap:
                err = wrap_angle(err)
            sdd = want_sdd + kp * err + kd * (want_sd - sd)
            b = np.concatenate((-(t.phi_q_dot @ qd), sdd - Jdqd))
            want = sys_.torques(q, qd, np.linalg.solve(A, b))[law.order]
            got = (law.track(q, qd, ref, want_sd, want_sdd) if want_sd is sd_ref
                   else law.hold_at(q, qd, ref))
            assert got.tobytes() == want.tobytes()


# every mechanism YAML of config/ with an actuator (the ROS parameter files are no mechanism)
_MECHANISMS = sorted(p.name for p in CONFIG.glob('*.yaml')
                     if 'ros__parameters' not in p.read_text() and 'actuators:' in p.read_text())


def _general_track(sys_, law, q, qd, s_ref, sd_ref, sdd_ref):
    """The class docstring's computed torque by the general path, in arrays: s, ṡ, J_s and
    J̇_s q̇ from the encoders' Model records (unit rows for actuated coordinates), Φq and γ
    from ``constraint_terms`` (Φ and all), A and b concatenated (what ``track`` did before
    issue 24's buffers, constraint_jacobian and joint_rows)."""
    from mbfg_ros.core.angles import wrap_angle
    from mbfg_ros.estimation.control import solve_linear_system

    sm = sys_.sensor_model()
    acts = sys_.description.actuators
    k = len(acts)
    s, sd, J, Jdqd = np.empty(k), np.empty(k), np.zeros((k, sys_.n)), np.zeros(k)
    for i, a in enumerate(acts):
        if a.joint is None:
            c = a.coordinate
            s[i], sd[i], J[i, c] = q[c], qd[c], 1.0
        else:
            p, v = sm.joint(sm.joint_names.index(a.joint), q, qd, want=True)
            s[i], sd[i], J[i] = p.h[0], v.h[0], p.Hq[0]
            Jdqd[i] = v.Hq[0] @ qd
    angular = law._angular
    err = s_ref - s
    err = np.where(angular, wrap_angle(err), err)
    sdd = sdd_ref + law.kp * err + law.kd * (sd_ref - sd)
    _, Jq, gamma = sys_.constraint_terms(q, qd)
    A = np.concatenate((Jq, J))
    b = np.concatenate((-gamma, sdd - Jdqd))
    return sys_.torques(q, qd, solve_linear_system(A, b))[law.order], (s, sd, J, Jdqd)


@pytest.mark.parametrize('name', _MECHANISMS)
def test_the_planar_command_equals_the_general_path_bit_for_bit(name):
    """Issue 24's command path (the acceleration problem in kept buffers, Φq and γ without
    Φ, the encoders' rows without Model records, the actuated coordinates' constant rows
    written once) gives the general path's torques bit for bit on every mechanism of
    config/: at the assembled pose (exact zeros in the rows: a horizontal crank) and random
    states, gains on and off (kp = kd = 0: s̈* = s̈_ref), with a reference and holding a
    pose, calls interleaved between two laws of one system (the buffers hold no state)."""
    from mbfg_ros.planar.dynamics import load_system

    sys_ = load_system(CONFIG / name)
    rng = np.random.default_rng(24)
    n = sys_.n
    laws = [CommandLaw(sys_, [], kp=0.0, kd=0.0), CommandLaw(sys_, [], kp=400.0, kd=40.0)]
    k = laws[0].n_act
    for trial in range(12):
        q = np.array(sys_.q0, float) if trial == 0 else sys_.q0 + 0.05 * rng.normal(size=n)
        qd = np.zeros(n) if trial == 0 else rng.normal(size=n)
        s_ref, sd_ref, sdd_ref = rng.uniform(-3, 3, k), rng.normal(size=k), rng.normal(size=k)
        for law in laws:
            want, parts = _general_track(sys_, law, q, qd, s_ref, sd_ref, sdd_ref)
            got = law.track(q, qd, s_ref, sd_ref, sdd_ref)
            assert got.tobytes() == want.tobytes(), (name, trial, law.kp)
            zero = np.zeros(k)
            want, _ = _general_track(sys_, law, q, qd, s_ref, zero, zero)
            assert law.hold_at(q, qd, s_ref).tobytes() == want.tobytes(), (name, trial)
            for got_part, want_part in zip(law.actuated(q, qd), parts):
                assert np.asarray(got_part).tobytes() == want_part.tobytes()


@pytest.mark.parametrize('name', _MECHANISMS + ['pendulum3.yaml'])
def test_joint_rows_and_constraint_jacobian_are_the_general_numbers(name):
    """``SensorModel.joint_rows`` is ``joint(..., want=True)``'s numbers for every encoder
    (revolute and prismatic), ∂ḣ/∂q̇ = ∂h/∂q; ``System.constraint_jacobian`` is
    ``constraint_terms`` without Φ, bit for bit (issue 24)."""
    from mbfg_ros.planar.dynamics import load_system

    sys_ = load_system(CONFIG / name)
    sm = sys_.sensor_model()
    rng = np.random.default_rng(5)
    for trial in range(6):
        q = np.array(sys_.q0, float) if trial == 0 else sys_.q0 + 0.05 * rng.normal(size=sys_.n)
        qd = rng.normal(size=sys_.n)
        for j in range(len(sm.joint_names)):
            p, v = sm.joint(j, q, qd, want=True)
            pos, vel, rows = sm.joint_rows(j, q, qd)
            assert (pos, vel) == (p.h[0], v.h[0])
            assert rows.shape == (2, sys_.n)
            assert rows.tobytes() == np.concatenate((p.Hq, v.Hq)).tobytes()
            assert v.Hqd.tobytes() == p.Hq.tobytes()
        _, Jq, gamma = sys_.constraint_terms(q, qd)
        got_Jq, got_gamma = sys_.constraint_jacobian(q, qd)
        assert got_Jq.tobytes() == Jq.tobytes() and got_gamma.tobytes() == gamma.tobytes()


def test_only_actuated_coordinates_take_the_constant_rows():
    """The constant J_s rows (J̇_s q̇ = 0) belong to actuated coordinates only: a revolute
    joint's angle is atan2 of its bodies' points in natural coordinates (seed 000 §2), its
    row changes with q even where a relative coordinate measures the same angle (the DFKI
    pendulum), so it must come from the encoder at each state."""
    from mbfg_ros.planar.dynamics import load_system

    for name, coords in (('fourbar.yaml', [None]), ('five_bar.yaml', [True, True]),
                         ('dfki_double_pendulum.yaml', [None, None]),
                         ('fourbar_two_motors.yaml', [True, True])):
        sys_ = load_system(CONFIG / name)
        law = CommandLaw(sys_, [], kp=1.0, kd=1.0)
        assert [c is not None or None for _, _, c in law._act] == coords, name
        rng = np.random.default_rng(1)
        J = [law.actuated(sys_.q0 + 0.1 * rng.normal(size=sys_.n), np.ones(sys_.n))[2]
             for _ in range(2)]
        for i, _, c in law._act:
            if c is None:      # an encoder's row: moves with the pose, has a rate term
                assert not np.array_equal(J[0][i], J[1][i]), name
            else:
                assert np.array_equal(J[0][i], np.eye(sys_.n)[c]), name
