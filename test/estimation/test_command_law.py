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
