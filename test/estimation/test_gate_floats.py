"""The innovation gate's passing update as Python floats (issue 24, branch tick6) against its
array path: the same model variances, stamps and rejection runs bit for bit, for sensors
seen for the first time (NaN stamp), seen at a later stamp (a late reading), seen long ago
(α clipped to 1) and just before, at one stamp and at several."""
from __future__ import annotations

import numpy as np
import pytest
from support.ros_data import fourbar_system

from mbfg_ros.estimation import innovation_gate
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig


def gate_state(est: Estimator, rng: np.random.Generator, t: float) -> None:
    """Model variances and stamps of every sensor slot: NaN (never seen), after ``t``, long
    before it and just before it; some sensors in a rejected run."""
    size = est._model_var.size
    est._model_var[:] = rng.uniform(0.0, 2.0, size)
    est._model_t[:] = rng.choice([np.nan, t + 0.01, t - 50.0, t - 1e-3, t], size)
    est._reject_since[:] = rng.choice([np.nan, t - 0.2], size)


@pytest.mark.parametrize('one_stamp', [True, False])
def test_the_passing_update_as_floats_equals_the_array_path(monkeypatch, one_stamp):
    system = fourbar_system()
    est = Estimator(system, EstimatorConfig(frequency=500.0, joint_rejection_threshold=4.0,
                                            imu_rejection_threshold=5.0,
                                            outlier_reset_time=0.5))
    rng = np.random.default_rng(3)
    size = est._model_var.size
    assert size >= 4
    for trial in range(40):
        n = int(rng.integers(1, min(size, innovation_gate._FLOAT_READINGS) + 1))
        slots = rng.permutation(size)[:n]
        t0 = 1.0 + trial
        t = t0 if one_stamp else t0 - rng.choice([0.0, 1e-3, 2e-3], n)
        thr = rng.choice([4.0, 5.0], n)
        d2 = rng.uniform(0.0, 15.0, n)              # every one inside its threshold
        power = rng.uniform(0.0, 3.0, n)
        base_var = rng.uniform(0.0, 1.0, n)
        gate_state(est, rng, t0)
        start = (est._model_var.copy(), est._model_t.copy(), est._reject_since.copy())
        keep_f = est._gate_decide(slots, t, thr, d2, power, base_var)
        floats = (est._model_var.copy(), est._model_t.copy(), est._reject_since.copy())
        est._model_var[:], est._model_t[:], est._reject_since[:] = start
        monkeypatch.setattr(innovation_gate, '_FLOAT_READINGS', 0)      # the array path
        keep_a = est._gate_decide(slots, t, thr, d2, power, base_var)
        monkeypatch.undo()
        arrays = (est._model_var, est._model_t, est._reject_since)
        assert keep_f.all() and np.array_equal(keep_f, keep_a)
        for f, a, s in zip(floats, arrays, start):
            assert np.array_equal(f, a, equal_nan=True)
            assert np.array_equal(f.view(np.int64), a.view(np.int64))     # bit for bit
        # the update did something: the passed sensors' stamps and rejection runs moved
        assert not np.array_equal(floats[2], start[2], equal_nan=True) or \
            np.isnan(start[2][slots]).all()


def test_the_gates_covariance_reads_nan_as_zero_and_inf_as_the_largest_double():
    """The gate's P from the marginal covariance: np.nan_to_num's result (NaN → 0, +inf →
    the largest double), negative variances clipped to 0, σ's NaN kept for publishing."""
    est = Estimator(fourbar_system(), EstimatorConfig(frequency=500.0))
    size = 3 * est.n
    diag = np.resize([0.25, np.nan, np.inf, -1e-3, 1e300, -0.0], size)

    class Smoother:
        def marginalCovariance(self, key):      # noqa: N802 - GTSAM's name
            return np.diag(diag)

    est._smoother = Smoother()
    est._covariance(0)
    var = np.maximum(diag, 0.0)
    assert np.array_equal(est._var_last, np.nan_to_num(var, nan=0.0))
    assert not np.signbit(est._var_last).any()
    assert np.array_equal(np.isnan(est._std_last), np.isnan(diag))


@pytest.mark.parametrize('array_path', [False, True])
def test_the_sequential_gate_equals_the_gate_reading_by_reading(monkeypatch, array_path):
    """Readings of one sensor at several stamps between two ticks (issue 24, branch tick7):
    :meth:`_gate_sequential` on Python lists moves each sensor's model variance, stamp and
    rejected run as :meth:`_gate_decide` called on one reading at a time in the same order
    (its float path, or its array path), bit for bit: the same readings kept, the same
    rejections counted, the same 'diverged' detail (the last sensor over
    ``outlier_reset_time``), with readings rejected, ungated (threshold 0) and first seen."""
    system = fourbar_system()
    gated, ungated = (Estimator(system, EstimatorConfig(
        frequency=500.0, joint_rejection_threshold=4.0, imu_rejection_threshold=imu,
        outlier_reset_time=0.5)) for imu in (5.0, 0.0))     # (IMU readings ungated: thr 0)
    rng = np.random.default_rng(11)
    size = gated._model_var.size
    if array_path:
        monkeypatch.setattr(innovation_gate, '_FLOAT_READINGS', 0)
    diverged_seen = rejected_seen = 0
    for trial in range(60):
        est = ungated if trial % 3 == 0 else gated
        stamps = int(rng.integers(2, 5))
        per = int(rng.integers(1, size + 1))
        sensors = rng.permutation(size)[:per]
        t0 = 1.0 + trial
        slots = np.tile(sensors, stamps)            # each sensor once per stamp, in time order
        t = np.repeat(t0 - 1e-3 * np.arange(stamps)[::-1], per)
        n = slots.size
        thr = rng.choice([4.0, 5.0, 0.0] if trial % 3 == 0 else [4.0, 5.0], n)
        d2 = rng.uniform(0.0, 40.0, n)              # some beyond their threshold
        power = rng.uniform(0.0, 3.0, n)
        base_var = rng.uniform(0.0, 1.0, n)
        gate_state(est, rng, t0)
        est._reject_since[:] = rng.choice([np.nan, t0 - 0.2, t0 - 0.6], size)
        start = (est._model_var.copy(), est._model_t.copy(), est._reject_since.copy())
        count0 = est._counters['rejected_outlier']
        detail_seq = ''
        try:
            keep_seq = est._gate_sequential(slots, t, thr, d2, power, base_var)
        except innovation_gate._Diverged as exc:
            detail_seq, keep_seq = str(exc), None
        seq = (est._model_var.copy(), est._model_t.copy(), est._reject_since.copy())
        count_seq = est._counters['rejected_outlier'] - count0
        est._model_var[:], est._model_t[:], est._reject_since[:] = start
        keep_one, detail_one = [], ''
        for i in range(n):
            one = slice(i, i + 1)
            try:
                keep_one.append(bool(est._gate_decide(slots[one], t[one], thr[one], d2[one],
                                                      power[one], base_var[one])[0]))
            except innovation_gate._Diverged as exc:
                detail_one = str(exc)
                keep_one.append(False)
        count_one = est._counters['rejected_outlier'] - count0 - count_seq
        assert detail_seq == detail_one
        if keep_seq is not None:
            assert keep_seq.tolist() == keep_one
        assert count_seq == count_one == keep_one.count(False) - int(
            ((thr <= 0) & ~np.array(keep_one)).sum())
        for s, o in zip(seq, (est._model_var, est._model_t, est._reject_since)):
            assert np.array_equal(s.view(np.int64), o.view(np.int64))      # bit for bit
        diverged_seen += bool(detail_seq)
        rejected_seen += count_seq
    assert diverged_seen and rejected_seen          # both cases were exercised


def test_the_sequential_update_of_no_readings_is_an_empty_mask():
    """No readings: a boolean mask (it indexes the readings' rows), nothing moved."""
    est = Estimator(fourbar_system(), EstimatorConfig(frequency=500.0))
    before = est._model_var.copy()
    empty = np.zeros(0)
    keep = est._gate_sequential(np.zeros(0, int), [], empty, empty, empty, empty)
    assert keep.dtype == bool and keep.size == 0
    assert np.arange(3)[keep].size == 0
    assert np.array_equal(est._model_var, before)


@pytest.mark.parametrize('one_stamp', [True, False])
def test_the_gate_of_a_layouts_few_readings_as_floats_equals_its_array_path(monkeypatch,
                                                                           one_stamp):
    """Branch tick8e: a layout's few readings of distinct sensors (a JointState and an IMU)
    go through the gate's end as Python floats (GateMixin._gate_floats: S₀, r², the sums
    per reading, the verdicts, the passing update); the same verdicts and model
    variances, stamps and rejected runs as the array path, bit for bit, at one stamp and
    at a stamp per reading (τ per row), every reading passing or some rejected (the
    array path then decides), with a contact's term on the encoders' rows."""
    from conftest import CONFIG

    from mbfg_ros.core.observation import Observation
    from mbfg_ros.estimation.intake import _Pending
    from mbfg_ros.estimation.layout import layout_rows
    from mbfg_ros.spatial.system import build_spatial_system
    system = build_spatial_system(CONFIG / 'urdf' / 'ur5.urdf',
                                  CONFIG / 'urdf' / 'ur5_sensors.yaml')
    n = system.n
    est = Estimator(system, EstimatorConfig(frequency=1000.0, joint_rejection_threshold=4.0,
                                            imu_rejection_threshold=5.0,
                                            outlier_reset_time=0.5))
    rng = np.random.default_rng(21)
    passed = rejected = 0
    for trial in range(40):
        x = rng.standard_normal(3 * n) * 0.3
        est._x_last, est._var_last = x, rng.uniform(0.0, 1e-4, 3 * n)
        scale = 1e-3 if trial % 4 else 0.3           # some readings far off: rejected
        obs = [Observation('joint_pos', j, np.array([x[j] + scale * rng.standard_normal()]),
                           np.array([1e-3])) for j in rng.permutation(n)[:int(
                               rng.integers(1, n + 1))]]
        obs += [Observation('gyro', 0, rng.standard_normal(3) * scale, np.full(3, 0.005)),
                Observation('accel', 0, rng.standard_normal(3), np.full(3, 0.05))][
                    :int(rng.integers(0, 3))]
        layout = est._layout_of(obs)
        E, H = layout_rows(est.sm, obs, x.reshape(3, n), layout)
        if not trial % 4 == 1:
            E = E * 1e-2 / max(1e-12, np.abs(E).max())  # every reading passes
        sig = np.concatenate([o.sigma for o in obs])
        t0 = 2.0 + trial
        if one_stamp:
            items, tau = [_Pending(t0, o) for o in obs], 1e-3
        else:
            ts = t0 - 1e-4 * rng.integers(0, 3, len(obs))
            items = [_Pending(float(t), o) for t, o in zip(ts, obs)]
            tau = (ts - (t0 - 1e-3))[layout.row_of]
        unseen = rng.uniform(0.0, 2.0, n) if trial % 2 else None
        monkeypatch.setattr(est, '_external_var', lambda u=unseen: (0.0, u))
        gate_state(est, rng, t0)
        start = (est._model_var.copy(), est._model_t.copy(), est._reject_since.copy())
        keep_f = est._gate(items, E, H, tau, layout.row_of, sig, layout=layout).copy()
        floats = (est._model_var.copy(), est._model_t.copy(), est._reject_since.copy())
        est._model_var[:], est._model_t[:], est._reject_since[:] = start
        with monkeypatch.context() as m:
            m.setattr(innovation_gate, '_FLOAT_READINGS', 0)    # the array path
            keep_a = est._gate(items, E, H, tau, layout.row_of, sig, layout=layout)
        assert np.array_equal(keep_f, keep_a)
        for f, a in zip(floats, (est._model_var, est._model_t, est._reject_since)):
            assert np.array_equal(f.view(np.int64), a.view(np.int64))     # bit for bit
        passed += bool(keep_f.all())
        rejected += not keep_f.all()
    assert passed > 10 and rejected


@pytest.mark.parametrize('off', ['joint', 'imu'])
def test_a_sensor_whose_threshold_is_off_keeps_its_model_error_on_the_float_path_too(off):
    """A threshold 0 gates nothing (EstimatorConfig), so those sensors' model error s_m and
    stamps stay as they are, even when every reading would pass (zero distances): the float
    path (every threshold on, worked out once per configuration:
    GateMixin._set_gate_switches) must not take the call; the gated sensors move as on the
    array path; and still so after a reconfigure (which leaves the switches: their fields
    are not live)."""
    cfg = EstimatorConfig(frequency=500.0, joint_rejection_threshold=0.0 if off == 'joint'
                          else 4.0, imu_rejection_threshold=0.0 if off == 'imu' else 5.0)
    est = Estimator(fourbar_system(), cfg)
    joint = est._slot_joint
    slots = np.concatenate((np.flatnonzero(joint)[:3], np.flatnonzero(~joint)[:3]))
    assert slots.size <= innovation_gate._FLOAT_READINGS
    ungated = joint[slots] if off == 'joint' else ~joint[slots]
    thr = np.where(joint[slots], cfg.joint_rejection_threshold, cfg.imu_rejection_threshold)
    rng = np.random.default_rng(8)
    for reconfigured in (False, True):
        if reconfigured:
            est.reconfigure(dynamics_sigma=2.0)
        gate_state(est, rng, 1.0)
        est._model_t[slots] = 0.5                       # each sensor seen before t = 1
        start = est._model_var.copy(), est._model_t.copy()
        n = slots.size
        keep = est._gate_decide(slots, 1.0, thr, np.zeros(n), rng.uniform(0.1, 3.0, n),
                                rng.uniform(0.1, 1.0, n))
        assert keep.all()
        for now, before in zip((est._model_var, est._model_t), start):
            assert np.array_equal(now[slots[ungated]], before[slots[ungated]], equal_nan=True)
        assert (est._model_t[slots[~ungated]] == 1.0).all()     # the gated ones moved
