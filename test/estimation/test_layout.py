"""Issue 24: a tick's readings evaluated with their layout's constants
(:mod:`mbfg_ros.estimation.layout`) give exactly the generic evaluation's residuals and
Jacobians, and the innovation gate with the layout decides and learns as without it."""
import itertools
import math

import numpy as np
import pytest
from conftest import CONFIG
from support.feeding import add_due

from mbfg_ros.core.observation import Observation
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.estimation.intake import _Pending
from mbfg_ros.estimation.layout import ReadingLayout, layout_rows
from mbfg_ros.estimation.observations import residuals
from mbfg_ros.spatial.sensor_model import quaternion_matrix
from mbfg_ros.spatial.system import build_spatial_system

URDF = CONFIG / 'urdf'


@pytest.fixture(scope='module')
def ur5():
    return build_spatial_system(URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml')


def _orientation(rng) -> Observation:
    q = rng.standard_normal(4)
    return Observation('orient', 0, quaternion_matrix(q / np.linalg.norm(q)), np.full(3, 0.01))


SPATIAL_IMU = {      # a 3-axis IMU's readings (and an orientation), drawn from rng
    'g': lambda rng: Observation('gyro', 0, rng.standard_normal(3), np.full(3, 0.05)),
    'a': lambda rng: Observation('accel', 0, rng.standard_normal(3), np.full(3, 0.05)),
    'o': _orientation}
PLANAR_IMU = {       # a planar IMU's: gyroscope, in-plane specific force, yaw
    'g': lambda rng: Observation('gyro', 0, rng.standard_normal(1), 0.05 * np.ones(1)),
    'a': lambda rng: Observation('accel', 0, rng.standard_normal(2), np.full(2, 0.05)),
    'o': lambda rng: Observation('orient', 0, rng.uniform(-4, 4, 1), 0.01 * np.ones(1))}


def _sequence(rng, order: str, angles, rates, imu: dict) -> list[Observation]:
    """Readings in the sequence ``order`` (e = the encoder angles of joints ``angles``,
    v = the rates of joints ``rates``, g, a, o = ``imu``'s gyroscope, accelerometer,
    orientation), far enough from the state for the angles to wrap."""
    one = np.ones(1)
    out = []
    for c in order:
        if c == 'e':
            out += [Observation('joint_pos', j, rng.uniform(-4, 4, 1), 0.01 * one)
                    for j in angles]
        elif c == 'v':
            out += [Observation('joint_vel', j, rng.standard_normal(1), 0.1 * one)
                    for j in rates]
        else:
            out.append(imu[c](rng))
    return out


def _readings(rng, n: int, order: str) -> list[Observation]:
    """A URDF arm's readings (:func:`_sequence`): every encoder, rates of joints 0 and 3,
    a 3-axis IMU."""
    return _sequence(rng, order, range(n), (0, 3), SPATIAL_IMU)


def _layout(est: Estimator, obs: list[Observation]) -> ReadingLayout:
    cfg = est.config
    return ReadingLayout(obs, est.sm, est._slot_base, est._slot_wrap, est._slot_joint,
                         cfg.joint_rejection_threshold, cfg.imu_rejection_threshold)


@pytest.mark.parametrize('order', ['ega', 'gae', 'eag', 'evgao', 'gveae', 'e', 'ga'])
def test_layout_rows_are_the_generic_residuals(ur5, order):
    """Every reading sequence (encoders first or last, rates between, the IMU's parts in
    either order, an orientation, a sensor twice): the same residuals and Jacobians, bit
    for bit, as observations.residuals (which groups the readings one by one)."""
    rng = np.random.default_rng(len(order))
    est = Estimator(ur5)
    for _ in range(3):
        obs = _readings(rng, ur5.n, order)
        X = rng.standard_normal((3, ur5.n))
        layout = _layout(est, obs)
        e, H = layout_rows(est.sm, obs, X, layout)
        e0, H0 = residuals(est.sm, obs, X, True)
        np.testing.assert_array_equal(e, e0)
        np.testing.assert_array_equal(H, H0.reshape(len(e0), -1))
        if 'e' in order:            # the encoder angles' residuals are wrapped
            assert layout.wrap_any and np.abs(e[layout.wrap_rows]).max() <= math.pi


def _two_estimators(ur5) -> list:
    """Two like estimators at a known last state (x = 0, σ² = 1e-6), for the gate's A/B."""
    n = ur5.n
    ests = [Estimator(ur5, EstimatorConfig(joint_rejection_threshold=3.0)) for _ in '01']
    for est in ests:
        est._x_last = np.zeros(3 * n)
        est._var_last = np.full(3 * n, 1e-6)
    return ests


def _gate_ab(ur5, rng, draw, same_var) -> None:
    """Two estimators' gates over 39 ticks of readings ``draw(rng, t, n)`` gives: (the
    readings pending, their layout, residuals e and Jacobian H, τ for the gate with the
    layout, τ per row for the one without); the same readings kept, the same model-error
    stamps, the model errors compared by ``same_var``, rejections among them."""
    n = ur5.n
    ests = _two_estimators(ur5)
    t_prev = 1.0
    for k in range(1, 40):
        t = t_prev + 1e-3 * k
        items, layout, e, H, tau, tau_rows = draw(rng, t, n)
        sig = np.concatenate([p.ob.sigma for p in items])
        keep = ests[0]._gate(items, e, H, tau, layout.row_of, sig, layout=layout)
        keep0 = ests[1]._gate(items, e, H, tau_rows, layout.row_of, sig)
        np.testing.assert_array_equal(keep, keep0)
        same_var(ests[0]._model_var, ests[1]._model_var)
        np.testing.assert_array_equal(ests[0]._model_t, ests[1]._model_t)
    assert ests[0].counters['rejected_outlier'] == ests[1].counters['rejected_outlier'] > 0


def test_the_gate_with_the_layout_decides_and_learns_as_without(ur5):
    """The gate on readings at one stamp with their layout (τ one float, the residuals'
    angles wrapped already) keeps the same readings and moves each sensor's model error
    as the per-reading gate does, rejections included."""
    est = _two_estimators(ur5)[0]

    def draw(rng, t, n):
        obs = _readings(rng, n, 'ega')
        X = rng.standard_normal((3, n)) * 0.01
        layout = _layout(est, obs)
        e, H = layout_rows(est.sm, obs, X, layout)
        return ([_Pending(t, ob) for ob in obs], layout, e, H, t - 1.0,
                np.full(e.size, t - 1.0))
    _gate_ab(ur5, np.random.default_rng(3), draw, lambda a, b: np.testing.assert_allclose(
        a, b, rtol=1e-12, atol=0))


def _planar_readings(rng, joints: list[int], order: str) -> list[Observation]:
    """A planar mechanism's readings (:func:`_sequence`): angles and rates of ``joints``,
    a planar IMU."""
    return _sequence(rng, order, joints, joints, PLANAR_IMU)


@pytest.mark.parametrize('mechanism, joints, order, plan', [
    ('fourbar', [0], 'ega', True), ('fourbar', [0, 1], 'gae', True),
    ('fourbar', [1, 0], 'evgao', True), ('fourbar', [0], 'vgee', True),
    ('fourbar', [0, 1], 'ev', True), ('slider_crank', [0], 'ev', True),
    ('slider_crank', [0, 1], 'ev', False)])
def test_planar_layout_rows_are_the_generic_residuals(mechanism, joints, order, plan):
    """Natural coordinates (encoders are functions of q, seed 000 §2): revolute encoders
    take the layout's plan (one joint_batch per encoder), a prismatic one does not; either
    way the residuals and Jacobians are observations.residuals' bit for bit, in every
    reading sequence (an encoder's angle and rate, a sensor twice, the IMU's parts in
    either order, a yaw), and every angle residual is wrapped."""
    from mbfg_ros.planar.dynamics import load_system
    system = load_system(CONFIG / f'{mechanism}.yaml')
    rng = np.random.default_rng(len(order) + len(joints))
    est = Estimator(system)
    for _ in range(3):
        obs = _planar_readings(rng, joints, order)
        X = rng.standard_normal((3, system.n))
        layout = _layout(est, obs)
        assert layout.plan is plan
        e, H = layout_rows(est.sm, obs, X, layout)
        e0, H0 = residuals(est.sm, obs, X, True)
        np.testing.assert_array_equal(e, e0)
        np.testing.assert_array_equal(H, H0.reshape(len(e0), -1))
        assert np.abs(e[layout.wrap_rows]).max() <= math.pi


def _fourbar():
    from mbfg_ros.planar.dynamics import load_system
    return load_system(CONFIG / 'fourbar.yaml')


@pytest.mark.parametrize('mechanism', ['ur5', 'fourbar'])
@pytest.mark.parametrize('stamps', [(0.5, 1.0), (0.25, 0.5, 1.0), (0.3,), (0.1, 0.2, 0.6, 0.9),
                                    tuple(np.arange(1, 6) / 5),      # a 5-period merged tick
                                    tuple(np.arange(1, 21) / 20)])   # 10 periods, 2 stamps each
def test_readings_between_ticks_by_layouts_are_the_interval_rows(ur5, mechanism, stamps):
    """Readings at a few stamps between two ticks (sensors off the tick grid; some at the
    tick itself): the state interpolated once per stamp and each stamp's readings by its
    layout give observations.interval_rows' residuals, model Jacobians and both keys'
    Jacobians: bit for bit where each sensor is read at one stamp (and for the URDF arm's
    direct encoders always, every stamp in one pass: layout.layout_rows_at_stamps); to
    rounding where a planar sensor is read at several (the
    general path evaluates its readings vectorised over their states, the layouts one
    state at a time). More than :data:`~mbfg_ros.estimation.graph.INTERVAL_STAMPS` stamps
    take the general path (None)."""
    from mbfg_ros.estimation.graph import INTERVAL_STAMPS
    from mbfg_ros.estimation.observations import interpolation_weights, interval_rows
    system = ur5 if mechanism == 'ur5' else _fourbar()
    est = Estimator(system)
    n, dt = system.n, 1e-3
    rng = np.random.default_rng(len(stamps))
    for _ in range(3):
        obs, span = [], []
        for i, s in enumerate(stamps):
            order = ('ega', 'ga', 'e', 'gae')[i % 4]
            group = (_readings(rng, n, order) if mechanism == 'ur5'
                     else _planar_readings(rng, [0, 1], order))
            obs += [o._replace(s=s) for o in group]
            span += [s] * len(group)
        x0, x1 = rng.standard_normal(3 * n), rng.standard_normal(3 * n)
        rows = sum(o.sigma.size for o in obs)
        e, H, J0, J1, layout = est._interval_layout_rows(obs, span, dt, x0, x1, rows)
        a, b = interpolation_weights(span, dt)
        e0, H0, J00, J10 = interval_rows(est.sm, obs, a, b, [x0, x1])
        sensors = [(o.kind, o.index) for o in obs]
        exact = mechanism == 'ur5' or len(set(sensors)) == len(sensors)
        for got, want in ((e, e0), (H, H0), (J0, J00), (J1, J10)):
            if exact:
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, rtol=0,
                                           atol=1e-13 * max(1.0, np.abs(want).max()))
        assert layout.rows == rows and layout.row_of.size == rows
    many = [0.1 * (i + 1) for i in range(INTERVAL_STAMPS + 1)]
    obs = [Observation('gyro', 0, np.zeros(3 if mechanism == 'ur5' else 1),
                       np.ones(3 if mechanism == 'ur5' else 1), s) for s in many]
    assert est._interval_layout_rows(obs, many, dt, x0, x1,
                                     sum(o.sigma.size for o in obs)) is None


def test_the_gate_with_the_layout_between_ticks_decides_and_learns_as_without(ur5):
    """Readings at two stamps between the ticks (τ per row, the residuals carried to the
    last estimate and so not wrapped: some encoder angles a turn off): the gate with their
    sequence's layout keeps the same readings and moves each sensor's model error as the
    per-reading gate does, rejections included."""
    est = _two_estimators(ur5)[0]

    def draw(rng, t, n):
        obs = _readings(rng, n, 'ga') + _readings(rng, n, 'e')
        X = rng.standard_normal((3, n)) * 0.01
        stamps = [t - 5e-4] * 2 + [t] * n
        layout = _layout(est, obs)
        e, H = layout_rows(est.sm, obs, X, layout)
        e[layout.enc_rows] += 2 * math.pi * rng.integers(-1, 2, int(layout.enc_rows.sum()))
        tau = (np.array(stamps) - (t - 1e-3))[layout.row_of]
        return ([_Pending(ts, ob) for ts, ob in zip(stamps, obs)], layout, e, H, tau,
                tau.copy())
    _gate_ab(ur5, np.random.default_rng(5), draw, np.testing.assert_array_equal)


def test_the_interval_weights_as_floats_are_interpolation_weights_bit_for_bit():
    """The Hermite weights of a few stamps (up to ``INTERVAL_STAMPS``) computed element by
    element (``graph._interval_weights``, issue 24 branch tick7) are
    :func:`~mbfg_ros.estimation.observations.interpolation_weights`'s, bit for bit, for
    fractions on and off a grid, at 0 and at 1, and several dt's."""
    from mbfg_ros.estimation.graph import INTERVAL_STAMPS, _interval_weights
    from mbfg_ros.estimation.observations import interpolation_weights
    rng = np.random.default_rng(7)
    cases = [[0.5, 1.0], [1.0 / 3.0, 2.0 / 3.0, 1.0], [0.0], [0.7], [1e-9, 0.25, 0.999999999]]
    cases += [sorted(rng.uniform(0, 1, int(rng.integers(1, 5))).tolist()) for _ in range(20)]
    # up to INTERVAL_STAMPS fractions (a merged tick's readings), on grids too: 5 periods
    # at two stamps each, INTERVAL_STAMPS stamps
    cases += [sorted(rng.uniform(0, 1, int(rng.integers(5, INTERVAL_STAMPS + 1))).tolist())
              for _ in range(10)]
    cases += [(np.arange(1, m + 1) / m).tolist() for m in (10, INTERVAL_STAMPS)]
    for span in cases:
        for dt in (1e-3, 2e-3 + 1e-18, 3.0000000000000001e-3, 0.01 * rng.uniform()):
            got, want = _interval_weights(span, dt), interpolation_weights(span, dt)
            for g, w in zip(got, want):
                assert g.shape == w.shape == (len(span), 3, 3)
                assert np.array_equal(g.view(np.int64), w.view(np.int64))


def test_an_intervals_readings_kept_tell_whether_all_are_at_the_tick():
    """``_Current.at_tick`` after the gate (``kept``): on the layouts' path the readings'
    fractions are kept beside them (their observations keep the intake's s), so the
    readings left at the tick when those between the ticks were rejected become the
    one-key factor, and not while one between them is left; without fractions the
    observations' own s decide."""
    from mbfg_ros.estimation.graph import _Current
    one = np.ones(1)
    obs = [Observation('joint_pos', j, one, one) for j in range(3)]     # s = 1 (intake's)
    items = [_Pending(t, ob) for t, ob in zip((0.5, 1.0, 1.0), obs)]
    e = np.arange(3.0)
    J = (np.ones((3, 6)), np.ones((3, 6)))
    cur = _Current(items, obs, (0, 1), (None, None), e, None, J, None, None, np.arange(3),
                   one.repeat(3), None, [0.5, 1.0 - 1e-12, 1.0])
    assert not cur.at_tick()
    left = cur.kept(np.array([False, True, True]))
    assert left.at_tick() and left.span == [1.0 - 1e-12, 1.0]
    assert [p.ob.index for p in left.items] == [1, 2] and left.e.tolist() == [1.0, 2.0]
    assert not cur.kept(np.array([True, False, True])).at_tick()
    plain = _Current(items, [ob._replace(s=s) for ob, s in zip(obs, (0.5, 1.0, 1.0))],
                     (0, 1), (None, None), e, None, J, None, None, np.arange(3),
                     one.repeat(3))
    assert not plain.at_tick() and plain.kept(np.array([False, True, True])).at_tick()


def test_a_merged_ticks_readings_in_any_arrival_order_give_one_plan_and_the_same_estimates(ur5):
    """Live, the Imu of an instant often arrives before its JointState, and which one comes
    first changes from stamp to stamp. The readings of a merged tick (every 8th grid time: 8
    stamps, encoders and IMU at each) are evaluated in stamp order and, at one stamp, in
    sensor order, whatever order they arrived in: the estimates equal those of the readings
    in a fixed order (to rounding: start-up and the first tick take them as they come), and
    the interval's layouts plan is built once (in arrival order it had up to 2⁸ sequences
    for a cache of 64 and cost as reading by reading)."""
    from mbfg_ros.spatial.sensor_sim import (SpatialSensorConfig, reference_motion,
                                             simulate_spatial_measurements, track_reference)
    tr = track_reference(ur5, reference_motion(ur5, 0.6, 1e-3, seed=2))
    recs = simulate_spatial_measurements(
        ur5, tr.t, tr.q, tr.qd, tr.qdd, tr.tau,
        SpatialSensorConfig(encoder_rate=1000.0, effort_sigma=0.0, imu_rate=1000.0),
        np.random.default_rng(2))
    rng = np.random.default_rng(5)
    shuffled = []
    for _, same in itertools.groupby(recs, key=lambda r: r.t):     # one stamp's readings
        same = list(same)
        shuffled += [same[m] for m in rng.permutation(len(same))]
    assert [r.t for r in shuffled] == [r.t for r in recs] and shuffled != recs

    def run(readings):
        est = Estimator(ur5, EstimatorConfig(frequency=1000.0, lag_duration=0.05))
        out, i = [], 0
        for k, t in enumerate(tr.t):
            i = add_due(readings, i, t, est)
            if k % 8 and est.initialised:
                continue
            e = est.tick(t)
            if e is not None:
                out.append(np.concatenate((e.q, e.qd, e.qdd)))
        return np.array(out), len(est._interval_plans)
    fixed, plans_fixed = run(recs)
    mixed, plans_mixed = run(shuffled)
    assert fixed.shape[0] > 50
    np.testing.assert_allclose(mixed, fixed, rtol=1e-9, atol=1e-12)
    assert plans_mixed == plans_fixed == 1
