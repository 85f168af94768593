"""The planar formulation's per-tick forms (issue 24) equal the general ones they shortcut.

* ``System.state_terms`` (LeanKinematics, angle caches reused, rows as a slice) against
  :func:`forward_accel` on the tensor path of :class:`Constraints` (``terms=``);
* the float encoder and IMU models against the batch models at one state;
* the float angle wrap against :func:`wrap_angle`, bit for bit;
* Eq. 47's second-order terms of quadratic rows as one product (``System._C2``) against the
  tensor constraints' Hessians, and q̈'s Jacobians on that path against finite differences
  with a force that depends on q̇ (the four-bar with a spring-damper);
* the actuator efforts of the square system [B_act, Φqᵀ] (one solve) and of the
  non-square ones (normal equations) against least squares;
* the applied forces without Jacobians (floats) against the full evaluation, for every
  state-dependent element kind.
"""
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA

from mbfg_ros.core.angles import wrap_angle
from mbfg_ros.core.observation import Observation
from mbfg_ros.planar.dynamics import actuator_efforts, build_system, forward_accel, load_system
from mbfg_ros.planar.forces import Forces, JointStop
from mbfg_ros.planar.model import Spring
from mbfg_ros.planar.sensors import _wrap

CONFIG = Path(__file__).resolve().parents[2] / 'config'
NAMES = ['fourbar.yaml', 'five_bar.yaml', 'dfki_double_pendulum.yaml', 'slider_crank.yaml',
         'pick_and_place.yaml']


def _states(sys, count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield (sys.q0 + 0.05 * rng.normal(size=sys.n), rng.normal(size=sys.n),
               rng.normal(size=sys.n), rng.normal(size=len(sys.mech.actuators)))


@pytest.mark.parametrize('name', NAMES)
def test_state_terms_equal_forward_dynamics_on_the_tensor_constraints(name):
    sys = load_system(CONFIG / name)
    for q, qd, _, tau in _states(sys, 3, 4):
        got = sys.state_terms(q, qd, tau, True)
        ref_t = sys.constraints.terms(q, qd)
        ref = forward_accel(sys, q, qd, tau, jacobians=True, terms=ref_t)
        scale = 1.0 + np.abs(ref.qdd_q).max()
        np.testing.assert_allclose(got.phi, ref_t.phi, atol=1e-12)
        np.testing.assert_allclose(got.phi_q, ref_t.phi_q, atol=1e-12)
        np.testing.assert_allclose(got.phi_q_dot, ref_t.phi_q_dot, atol=1e-12)
        np.testing.assert_allclose(got.qdd, ref.qdd, atol=1e-10 * scale)
        np.testing.assert_allclose(got.qdd_q, ref.qdd_q, atol=1e-10 * scale)
        np.testing.assert_allclose(got.qdd_qd, ref.qdd_qd, atol=1e-10 * scale)


@pytest.mark.parametrize('name', ['fourbar.yaml', 'five_bar.yaml', 'slider_crank.yaml'])
def test_one_state_encoder_and_imu_models_equal_the_batch_models(name):
    sys = load_system(CONFIG / name)
    sm = sys.sensor_model()
    for q, qd, qdd, _ in _states(sys, 3, 5):
        X = np.stack((np.stack((q, qd, qdd)),) * 2)       # two states: the batch form
        for j in range(len(sm.joint_names)):
            batch = sm.joint_batch(j, X)
            if batch is None:                              # prismatic: scalar only
                continue
            (pos, vel), (Hp, Hv) = batch
            p, v = sm.joint(j, q, qd, want=True)
            pv, vv = sm.joint(j, q, qd)
            np.testing.assert_allclose([p.h[0], pv.h[0]], pos[0], atol=1e-14)
            np.testing.assert_allclose([v.h[0], vv.h[0]], vel[0], atol=1e-12)
            np.testing.assert_allclose(np.stack((p.Hq[0], p.Hqd[0], p.Hqdd[0])), Hp[0],
                                       atol=1e-12)
            np.testing.assert_allclose(np.stack((v.Hq[0], v.Hqd[0], v.Hqdd[0])), Hv[0],
                                       atol=1e-12)
            (pos1, vel1), (Hp1, Hv1) = sm.joint_batch(j, X[:1])
            np.testing.assert_array_equal(pos1, [p.h[0]])
            np.testing.assert_array_equal(Hp1[0], np.stack((p.Hq[0], p.Hqd[0], p.Hqdd[0])))
            np.testing.assert_array_equal(Hv1[0], np.stack((v.Hq[0], v.Hqd[0], v.Hqdd[0])))
        for k in range(len(sm.imu_names)):
            (gyro, f, ori), (Hg, Hf, Ho) = sm.imu_batch(k, X)
            gm, fm, om = sm.imu(k, q, qd, qdd, want=True)
            np.testing.assert_allclose(gm.h[0], gyro[0], atol=1e-12)
            np.testing.assert_allclose(fm.h, f[0], atol=1e-12)
            np.testing.assert_allclose(om.h[0], ori[0], atol=1e-14)
            for m, H in ((gm, Hg[0]), (fm, Hf[0]), (om, Ho[0])):
                np.testing.assert_allclose(np.stack((m.Hq, m.Hqd, m.Hqdd), axis=1), H,
                                           atol=1e-12)


def test_float_wrap_is_wrap_angle_bit_for_bit():
    pi = np.pi
    values = [0.0, -0.0, pi, -pi, 3 * pi, -3 * pi, 2 * pi, -2 * pi, 1e-300, -1e-300,
              np.nextafter(pi, 4.0), np.nextafter(-pi, -4.0), 1e6 + 0.1, -1e6 - 0.1]
    values += list(np.random.default_rng(0).uniform(-20.0, 20.0, 200))
    for a in values:
        got, want = _wrap(float(a)), float(wrap_angle(a))
        assert got == want and np.signbit(got) == np.signbit(want), a


def _with_imu(name: str) -> tuple:
    """(system, its sensor model, a gyro, an accelerometer and a yaw reading of IMU 0) of
    config ``name``; the four-bar's IMU added on body 1 where the config has none (the
    slider-crank and the five-bar)."""
    sys = load_system(CONFIG / name)
    sm = sys.sensor_model()
    if not sm.imu_names:
        mech = load_system(CONFIG / 'fourbar.yaml').mech
        sys = build_system(replace(sys.mech, sensors=(replace(mech.sensors[0], body=1,
                                                              point=(0.3, -0.2), angle=0.4),)))
        sm = sys.sensor_model()
    obs = [Observation('gyro', 0, np.array([0.3]), np.array([0.01])),
           Observation('accel', 0, np.array([1.5, -2.0]), np.array([0.05, 0.05])),
           Observation('orient', 0, np.array([3.1]), np.array([0.02]))]
    return sys, sm, obs


@pytest.mark.parametrize('name', ['fourbar.yaml', 'slider_crank.yaml', 'five_bar.yaml'])
def test_one_state_imu_errors_equal_the_batch_errors(name):
    sys, sm, obs = _with_imu(name)
    for q, qd, qdd, _ in _states(sys, 3, 6):
        x = np.stack((q, qd, qdd))
        for readings in (obs, obs[1:], obs[::-1], obs[:1]):
            e1, H1 = sm.imu_errors(0, readings, x[None], True)       # one state: floats
            if len(readings) > 1:                                     # one state per reading
                eb, Hb = sm.imu_errors(0, readings, np.stack((x,) * len(readings)), True)
                np.testing.assert_allclose(e1, eb, atol=1e-12)
                np.testing.assert_allclose(H1, Hb, atol=1e-12)
            gm, fm, om = sm.imu(0, q, qd, qdd, want=True)            # the models themselves
            models = {'gyro': gm, 'accel': fm, 'orient': om}
            want_e = np.concatenate([models[o.kind].h - o.z for o in readings])
            want_H = np.concatenate([np.stack((models[o.kind].Hq, models[o.kind].Hqd,
                                               models[o.kind].Hqdd), axis=1)
                                     for o in readings])
            np.testing.assert_allclose(wrap_angle(e1 - want_e), 0.0, atol=1e-12)
            np.testing.assert_allclose(H1, want_H, atol=1e-12)
            e0, H0 = sm.imu_errors(0, readings, x[None], False)
            np.testing.assert_array_equal(e0, e1)
            assert H0 is None


@pytest.mark.parametrize('name', ['fourbar.yaml', 'slider_crank.yaml'])
def test_quadratic_rows_second_order_map_equals_the_constraint_hessians(name):
    sys = load_system(CONFIG / name)
    assert sys._C2 is not None               # every row of the dynamics quadratic in q
    n, rows = sys.n, sys.rows
    cons = sys.constraints
    for q, _, qdd, _ in _states(sys, 3, 7):
        lam = np.random.default_rng(1).normal(size=len(rows))
        lam_full = np.zeros(sys.m)
        lam_full[rows] = lam
        got = (np.concatenate((qdd, lam)) @ sys._C2).reshape(n + len(rows), n)
        np.testing.assert_allclose(got[:n], -cons.hess_weighted(q, lam_full), atol=1e-12)
        np.testing.assert_allclose(got[n:], -cons.hess_vec(q, qdd)[rows], atol=1e-12)


def test_quadratic_rows_accel_jacobians_with_a_velocity_dependent_force():
    four = load_system(CONFIG / 'fourbar.yaml')
    sys = build_system(replace(four.mech, springs=(Spring((1, 3), 30.0, 25.0, 2.0),)))
    assert sys._C2 is not None and sys.forces.state_dependent
    tau = np.array([0.7])
    for q, qd, _, _ in _states(sys, 3, 8):
        a = forward_accel(sys, q, qd, tau, jacobians=True)
        h = 1e-6
        num_q = np.empty((sys.n, sys.n))
        num_qd = np.empty((sys.n, sys.n))
        for i in range(sys.n):
            e = np.zeros(sys.n)
            e[i] = h
            num_q[:, i] = (forward_accel(sys, q + e, qd, tau).qdd
                           - forward_accel(sys, q - e, qd, tau).qdd) / (2 * h)
            num_qd[:, i] = (forward_accel(sys, q, qd + e, tau).qdd
                            - forward_accel(sys, q, qd - e, tau).qdd) / (2 * h)
        scale = 1.0 + np.abs(a.qdd_q).max()
        np.testing.assert_allclose(a.qdd_q / scale, num_q / scale, atol=1e-6)
        np.testing.assert_allclose(a.qdd_qd, num_qd, atol=1e-6)
        without = forward_accel(four, q, qd, tau, jacobians=True).qdd_qd
        assert np.abs(a.qdd_qd - without).max() > 0.01      # the damper's share is there


@pytest.mark.parametrize('name', ['fourbar.yaml', 'slider_crank.yaml', 'five_bar.yaml',
                                  'dfki_double_pendulum.yaml', 'pick_and_place.yaml'])
def test_actuator_efforts_are_the_least_squares_solution(name):
    sys = load_system(CONFIG / name)
    n_act = sys.forces.n_act
    for q, qd, qdd, _ in _states(sys, 3, 9):
        A = np.hstack((sys.forces.actuator_matrix(q), sys.constraints.phi_q(q)[sys.rows].T))
        b = sys.M @ qdd - sys.forces.evaluate(q, qd, None, jacobians=False).Q
        ref = np.linalg.lstsq(A, b, rcond=None)[0][:n_act]
        got = actuator_efforts(sys, q, qd, qdd)
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


def _exact_solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x of A x = b in rational arithmetic (the double entries taken exactly), rounded."""
    n = len(b)
    M = [[Fraction(float(A[r, c])) for c in range(n)] + [Fraction(float(b[r]))]
         for r in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(M[r][c]))
        M[c], M[p] = M[p], M[c]
        for r in range(n):
            if r != c and M[r][c] != 0:
                f = M[r][c] / M[c][c]
                M[r] = [x - f * y for x, y in zip(M[r], M[c])]
    return np.array([float(M[r][n] / M[r][r]) for r in range(n)])


def test_square_efforts_stay_accurate_near_a_singular_pose():
    # A state of the five-bar's estimator run (bench/planar_tick_check.py, 3 s) where the
    # two arms almost line up: [B_act, Φqᵀ] has condition ~7e6, τ̂ ~1.3e5 N m. The normal
    # equations square that condition (main's τ̂ was off by 8e-5 relative here).
    sys = load_system(CONFIG / 'five_bar.yaml')
    q = np.array([0.9999981180844577, 0.00195395923229714, 0.9967946666372338,
                  2.001951401147988, 1.000001880222229, 0.0019539671829753714,
                  0.0019540150346331405, 3.139638632581597])
    qd = np.array([-0.010744239250682954, 5.498677591270022, 0.05987934414574076,
                   5.498790692735716, 0.010744322035344997, 5.498711835816943,
                   5.498687123653422, -5.498721436982438])
    qdd = np.array([-39.848553121829326, -14.335794775858377, 0.003275336975216593,
                    -11.446056535511653, 38.84824554989132, -13.718989411566627,
                    -7.167682755044827, 6.837124647016424])
    A = np.hstack((sys.forces.actuator_matrix(q), sys.constraints.phi_q(q)[sys.rows].T))
    assert A.shape[0] == A.shape[1] and np.linalg.cond(A) > 1e6
    b = sys.M @ qdd - sys.forces.evaluate(q, qd, None, jacobians=False).Q
    ref = _exact_solve(A, b)[:sys.forces.n_act]
    got = actuator_efforts(sys, q, qd, qdd)
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()


def _forces_cases() -> dict:
    """(forces, a pose) with every state-dependent element kind: springs and rotational
    springs, friction, body torques, end stops (one active, one not), joint motors."""
    four = load_system(CONFIG / 'fourbar.yaml')
    crank = four.mech.joints[0]
    stops = (JointStop(crank.bodies, crank.offset, -0.1, 0.1, 500.0, 3.0),   # active
             JointStop(four.mech.joints[1].bodies, 0.0, -4.0, 4.0, 500.0, 3.0))  # inside
    spring = build_system(replace(four.mech, springs=(Spring((1, 3), 30.0, 25.0, 2.0),)))
    out = {name: (s.forces, s.q0) for name, s in (
        ('spring_pendulum', load_system(CONFIG / 'spring_pendulum.yaml')),
        ('dfki', load_system(CONFIG / 'dfki_double_pendulum.yaml')),
        ('extensions', load_system(DATA / 'extensions.yaml')), ('fourbar_spring', spring))}
    out['fourbar_stops'] = (Forces(four.mech, stops), four.q0)
    return out


@pytest.mark.parametrize('name', ['spring_pendulum', 'dfki', 'extensions', 'fourbar_stops',
                                  'fourbar_spring'])
def test_forces_without_jacobians_equal_the_full_evaluation(name):
    forces, q0 = _forces_cases()[name]
    assert forces.state_dependent
    rng = np.random.default_rng(10)
    hits = 0
    for k in range(6):
        q = q0 + [0.05, 0.5, 2.0][k % 3] * rng.normal(size=forces.n)
        qd = rng.normal(size=forces.n)
        for tau in (None, rng.normal(size=forces.n_act)):
            got = forces.evaluate(q, qd, tau, jacobians=False).Q
            ref = forces.evaluate(q, qd, tau, jacobians=True).Q
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
            hits += np.abs(ref - forces.Q0).max() > 1e-3      # the elements do act
    assert hits >= 6


@pytest.mark.parametrize('name', ['fourbar.yaml', 'five_bar.yaml', 'slider_crank.yaml',
                                  'dfki_double_pendulum.yaml'])
def test_joint_values_are_each_joints_model(name):
    """SensorModel.joint_values (every encoder in one call, the Estimate's joint readings)
    gives each joint's own model values (revolute and prismatic), bit for bit."""
    sys = load_system(CONFIG / name)
    sm = sys.sensor_model()
    assert sm.joint_names
    for q, qd, _, _ in _states(sys, 4, 7):
        pos, vel = sm.joint_values(q, qd)
        models = [sm.joint(j, q, qd) for j in range(len(sm.joint_names))]
        np.testing.assert_array_equal(pos, [p.h[0] for p, _ in models])
        np.testing.assert_array_equal(vel, [v.h[0] for _, v in models])
        assert pos.dtype == vel.dtype == float


@pytest.mark.parametrize('name', ['fourbar.yaml', 'five_bar.yaml', 'dfki_double_pendulum.yaml',
                                  'pick_and_place.yaml'])
def test_forces_without_effort_are_the_mean_of_opposite_efforts(name):
    """Q = Q0 + B_act(q) τ is affine in τ (and so is Q_q): with no effort (the per-tick
    shortcut: B_act not evaluated) it is the mean of the general path's Q at τ and −τ."""
    sys = load_system(CONFIG / name)
    forces = sys.forces
    assert forces.n_act
    for q, qd, _, tau in _states(sys, 3, 8):
        zero = forces.evaluate(q, qd, np.zeros_like(tau), jacobians=True)
        plus = forces.evaluate(q, qd, tau, jacobians=True)
        minus = forces.evaluate(q, qd, -tau, jacobians=True)
        assert np.abs(plus.Q - zero.Q).max() > 1e-3          # the efforts do act
        np.testing.assert_allclose(zero.Q, 0.5 * (plus.Q + minus.Q), rtol=0, atol=1e-12)
        np.testing.assert_allclose(zero.Q_q, 0.5 * (plus.Q_q + minus.Q_q), rtol=0, atol=1e-12)
        np.testing.assert_allclose(zero.Q_qd, 0.5 * (plus.Q_qd + minus.Q_qd), rtol=0,
                                   atol=1e-12)


@pytest.mark.parametrize('name', ['fourbar.yaml', 'slider_crank.yaml', 'pendulum3.yaml',
                                  'five_bar.yaml'])
def test_constraint_terms_are_the_general_paths_bits(name):
    """``System.constraint_terms`` (Φ, Φq, γ = Φ̇q q̇; the lean Φq and Φ̇q when every row is
    quadratic, issue 24) equals the general :class:`Constraints` path bit for bit, at states
    far from the assembled pose too (start-up and the torque command read it)."""
    sys_ = load_system(CONFIG / name)
    cons = sys_.constraints
    rng = np.random.default_rng(5)
    for scale in (0.01, 0.3, 3.0):
        for _ in range(50):
            q, qd = sys_.q0 + scale * rng.normal(size=sys_.n), rng.normal(size=sys_.n)
            t = cons.terms(q, qd)
            got = sys_.constraint_terms(q, qd)
            for a, b in zip(got, (cons.phi(q), t.phi_q, t.phi_q_dot @ qd)):
                assert a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize('name', NAMES)
def test_accelerations_alone_are_the_full_terms_bits(name):
    """q̈ alone (``System.accelerations`` without Jacobians: :meth:`LeanKinematics.rates`,
    no Φ, issue 24) equals :func:`forward_accel` given the full ``lean.terms`` bit for bit,
    and ``rates`` equals ``terms``' Φq and Φ̇q."""
    sys_ = load_system(CONFIG / name)
    for q, qd, _, tau in _states(sys_, 30, 9):
        t = sys_.lean.terms(q, qd)
        for a, b in zip(sys_.lean.rates(q, qd), (t.phi_q, t.phi_q_dot)):
            assert a.tobytes() == b.tobytes()
        want = forward_accel(sys_, q, qd, tau, terms=t).qdd
        assert sys_.accelerations(q, qd, tau).tobytes() == want.tobytes()


def _without(sys_, **plans):
    """``sys_`` built again with the given per-model plans set (None: the general path they
    shortcut)."""
    other = build_system(sys_.mech, sys_.z_idx)
    for name, value in plans.items():
        object.__setattr__(other, name, value)
    return other


def _same_bits(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def _quadratic_cases() -> dict:
    """Mechanisms whose dynamics rows are all quadratic with exact coefficients: the
    four-bar (with and without a spring-damper, so Q depends on q̇ and the motor's τ on q),
    the slider-crank, and the triple pendulum (8 of its 9 rows independent: ``rows`` not a
    slice)."""
    four = load_system(CONFIG / 'fourbar.yaml')
    spring = build_system(replace(four.mech, springs=(Spring((1, 3), 30.0, 25.0, 2.0),)))
    return {'fourbar': four, 'fourbar_spring': spring,
            'slider_crank': load_system(CONFIG / 'slider_crank.yaml'),
            'pendulum3': load_system(CONFIG / 'pendulum3.yaml')}


@pytest.mark.parametrize('name', ['fourbar', 'fourbar_spring', 'slider_crank', 'pendulum3'])
def test_quadratic_state_terms_are_the_general_paths_bits(name):
    """``System.state_terms`` of all-quadratic rows (``_quadratic_state_terms``: Φq and the
    augmented matrix from one product, Φ̇q with its negated and doubled rows from another,
    issue 24) equals ``lean.terms`` + ``_accel``'s path bit for bit, with and without
    Jacobians, with zero, −0 and nonzero efforts, near and far from the assembled pose; so
    does q̈ alone (``accelerations``: the same path without Φ)."""
    sys_ = _quadratic_cases()[name]
    assert sys_._quad is not None
    ref = _without(sys_, _quad=None)
    if name == 'pendulum3':
        assert not isinstance(sys_._rsel, slice)
    rng = np.random.default_rng(11)
    n_act = len(sys_.mech.actuators)
    for scale in (0.01, 0.3, 3.0):
        for k in range(20):
            q, qd = sys_.q0 + scale * rng.normal(size=sys_.n), rng.normal(size=sys_.n)
            tau = (rng.normal(size=n_act), np.zeros(n_act), np.full(n_act, -0.0))[k % 3]
            for want in (True, False):
                got = sys_.state_terms(q, qd, tau, want)
                exp = ref.state_terms(q, qd, tau, want)
                assert all(_same_bits(a, b) for a, b in zip(got, exp)), (k, want)
            assert _same_bits(sys_.accelerations(q, qd, tau), ref.accelerations(q, qd, tau))


def test_exact_affine_refuses_coefficients_whose_sums_can_round_differently():
    """The one-product maps are taken only where Φq's coefficients make every product exact
    and every sum one rounding (two terms, powers of two); three terms or a coefficient 3
    fall back to the general path."""
    from types import SimpleNamespace

    from mbfg_ros.planar.dynamics import _exact_affine
    ok = np.array([[2.0, -2.0, 0.0], [0.0, 0.5, 0.0]])
    assert _exact_affine(SimpleNamespace(Tm=ok))
    assert not _exact_affine(SimpleNamespace(Tm=np.array([[2.0, -2.0, 1.0]])))
    assert not _exact_affine(SimpleNamespace(Tm=np.array([[3.0, -2.0, 0.0]])))
    assert not _exact_affine(SimpleNamespace(Tm=np.zeros((0, 3))))


@pytest.mark.parametrize('name', ['fourbar', 'fourbar_spring', 'slider_crank', 'two_motors'])
def test_effort_plan_is_the_general_paths_bits(name):
    """:func:`actuator_efforts` with [B_act, Φqᵀ] from one product (``_effort_plan``) equals
    the matrix filled from ``lean.phi_q`` bit for bit: square (one motor) and not square
    (two motors on the four-bar: the normal equations)."""
    cases = _quadratic_cases()
    if name == 'two_motors':
        four = cases['fourbar']
        motor = replace(four.mech.actuators[0], name='coupler_motor',
                        joint=four.mech.joints[1].name)
        sys_ = build_system(replace(four.mech, actuators=four.mech.actuators + (motor,)))
    else:
        sys_ = cases[name]
    assert sys_._effort is not None
    ref = _without(sys_, _effort=None)
    for q, qd, qdd, _ in _states(sys_, 40, 12):
        assert _same_bits(actuator_efforts(sys_, q, qd, qdd), actuator_efforts(ref, q, qd, qdd))


@pytest.mark.parametrize('name', ['fourbar.yaml', 'slider_crank.yaml', 'five_bar.yaml'])
def test_one_state_sensor_rows_are_the_scalar_models_values(name):
    """The one-state encoder and IMU forms (their entries gathered from the flat state, the
    IMU's rows gathered per reading kind) give exactly the scalar models' numbers
    (``joint``, ``imu``: the local rows scattered by a product), every reading kind in
    every order, without the tolerance of the batch comparison."""
    sys_, sm, obs = _with_imu(name)
    for q, qd, qdd, _ in _states(sys_, 10, 13):
        x = np.stack((q, qd, qdd))
        for j in range(len(sm.joint_names)):
            batch = sm.joint_batch(j, x[None])
            if batch is None:
                continue
            (pos, vel), (Hp, Hv) = batch
            p, v = sm.joint(j, q, qd, want=True)
            assert pos.tolist() == p.h.tolist() and vel.tolist() == v.h.tolist()
            np.testing.assert_array_equal(Hp[0], np.stack((p.Hq[0], p.Hqd[0], p.Hqdd[0])))
            np.testing.assert_array_equal(Hv[0], np.stack((v.Hq[0], v.Hqd[0], v.Hqdd[0])))
        models = dict(zip(('gyro', 'accel', 'orient'), sm.imu(0, q, qd, qdd, want=True)))
        for readings in (obs, obs[::-1], [obs[1], obs[0], obs[1]], obs[2:]):
            e, H = sm.imu_errors(0, readings, x[None], True)
            want_H = np.concatenate([np.stack((models[o.kind].Hq, models[o.kind].Hqd,
                                               models[o.kind].Hqdd), axis=1)
                                     for o in readings])
            np.testing.assert_array_equal(H, want_H)
            want_e = [m - z for o in readings
                      for m, z in zip(models[o.kind].h.tolist(), o.z.tolist())]
            for got, w, o in zip(e.tolist(), want_e, [o for o in readings
                                                    for _ in range(o.z.size)]):
                assert got == (_wrap(w) if o.kind == 'orient' else w)


@pytest.mark.parametrize('name', ['fourbar', 'fourbar_spring', 'pendulum3'])
def test_idle_forces_are_the_evaluations_values(name):
    """``Forces.idle`` / ``at_rest`` (what the per-tick state terms read instead of
    ``evaluate``): idle exactly when no element depends on the state and every effort is
    zero, −0 or none is given (NaN is not zero), and then ``evaluate`` gives ``at_rest``'s
    values at any state."""
    sys_ = _quadratic_cases()[name]
    forces = sys_.forces
    n_act = forces.n_act
    efforts = [None, np.zeros(n_act), np.full(n_act, -0.0)]
    assert all(forces.idle(t) == (not forces.state_dependent) for t in efforts)
    if n_act:
        assert not forces.idle(np.full(n_act, np.nan))
        assert not forces.idle(np.full(n_act, 0.3))
    rng = np.random.default_rng(14)
    for tau in efforts:
        if not forces.idle(tau):
            continue
        for _ in range(5):
            q, qd = sys_.q0 + 0.3 * rng.normal(size=sys_.n), rng.normal(size=sys_.n)
            for jac in (True, False):
                for a, b in zip(forces.evaluate(q, qd, tau, jac), forces.at_rest):
                    np.testing.assert_array_equal(a, b)
    assert not forces.at_rest.Q.flags.writeable
