"""Estimator.add_validated's intake of issue 24 (EDGE2: a few joints' values checked as Python
floats, σ arrays kept per variances) queues what the records mean, written out here one value
at a time: observations, applied torques and counters; the σ's it shares are read-only and the
values it queues are copies of the caller's."""
from __future__ import annotations

import math

import numpy as np
import pytest
from support.limits import limited_fourbar

from mbfg_ros.core.measurements import ImuMeasurement, JointMeasurement
from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.planar.dynamics import load_system

NAMES = ('crank', 'coupler_joint')


@pytest.fixture(scope='module')
def limited(tmp_path_factory):
    path = limited_fourbar(tmp_path_factory.mktemp('intake'))
    return path, load_system(path)


def _expected_joint_obs(rec: JointMeasurement, cfg: EstimatorConfig, joints: dict,
                        actuated: dict) -> tuple[list, dict, int]:
    """What a JointMeasurement means to the estimator (intake.py's docstring, written out
    one value at a time): per known joint an encoder reading of each finite position
    (σ = √variance when finite and positive, else ``encoder_sigma``), then a rate reading of
    each finite velocity (``encoder_rate_sigma``); each finite effort of an actuated joint
    is its applied torque; infinite values count as ``dropped_nonfinite`` and are not used."""
    def listed(v):
        return None if v is None or len(v) == 0 else [float(x) for x in v]

    pos, vel, eff = listed(rec.position), listed(rec.velocity), listed(rec.effort)
    pvar, vvar = listed(rec.position_var), listed(rec.velocity_var)
    inf = sum(1 for v in (pos, vel, eff) if v for x in v if math.isinf(x))
    obs, tau = [], {}

    def sigma(var, i, default):
        return math.sqrt(var[i]) if var and math.isfinite(var[i]) and var[i] > 0 else default

    any_vel = vel is not None and any(math.isfinite(x) for x in vel)
    for i, name in enumerate(rec.names):
        if name not in joints:
            continue
        if pos is not None and math.isfinite(pos[i]):
            obs.append(('joint_pos', joints[name], pos[i],
                        sigma(pvar, i, cfg.encoder_sigma)))
        if any_vel and math.isfinite(vel[i]):
            obs.append(('joint_vel', joints[name], vel[i],
                        sigma(vvar, i, cfg.encoder_rate_sigma)))
        if eff is not None and name in actuated and math.isfinite(eff[i]):
            tau[actuated[name]] = eff[i]
    return obs, tau, inf


def test_add_validated_queues_what_a_joint_state_means(limited):
    _, system = limited
    cfg = EstimatorConfig()
    est = Estimator(system, cfg)
    joints = {n: i for i, n in enumerate(est.sm.joint_names)}
    actuated = {j: k for k, j in enumerate(system.actuator_joints)}
    rng = np.random.default_rng(26)
    caller = np.zeros(2)
    for k in range(400):
        names = NAMES if rng.random() < 0.8 else NAMES[::-1]
        arrays = []
        for field in range(3):
            if rng.random() < 0.2:
                arrays.append(np.zeros(0))
                continue
            a = rng.normal(size=2)
            for i in range(2):
                u = rng.random()
                a[i] = math.nan if u < 0.15 else (math.inf if u < 0.2 else a[i])
            arrays.append(a)
        if rng.random() < 0.3:              # a direct caller's lists
            arrays = [a.tolist() for a in arrays]
        pvar = np.abs(rng.normal(size=2)) * 1e-4 if rng.random() < 0.3 else None
        if pvar is not None and rng.random() < 0.5:
            pvar[0] = -1.0
        rec = JointMeasurement(k * 1e-3, names, *arrays, position_var=pvar)
        want, tau, inf = _expected_joint_obs(rec, cfg, joints, actuated)
        est._pending = []
        tau_before = est._tau.copy()
        nonfinite = est.counters['dropped_nonfinite']
        est.add_validated(rec)
        got = [(p.ob.kind, p.ob.index, float(p.ob.z[0]), float(p.ob.sigma[0]))
               for p in est._pending]
        assert got == want, (rec, got, want)
        assert est.counters['dropped_nonfinite'] - nonfinite == inf
        expect_tau = tau_before.copy()
        for a, x in tau.items():
            expect_tau[a] = x
        np.testing.assert_array_equal(est._tau, expect_tau)
        # the queued values are the record's at the time of the call: a caller reusing its
        # array does not change them
        if isinstance(rec.position, np.ndarray) and rec.position.size:
            caller = rec.position
            caller[:] = 7.0
            assert all(float(p.ob.z[0]) != 7.0 or w[2] == 7.0
                       for p, w in zip(est._pending, want))


def test_add_validated_imu_sigmas_are_kept_read_only(limited):
    _, system = limited
    cfg = EstimatorConfig()
    est = Estimator(system, cfg)
    sensor = est.sm.imu_names[0]
    recs = [ImuMeasurement(k * 1e-3, sensor, np.array([0.1, 0.2, 0.3 + k]),
                           np.array([1.0, 9.8, 0.0]),
                           gyro_var=np.array([1e-4, 1e-4, 4e-4]) if k % 2 else None)
            for k in range(4)]
    for rec in recs:
        est.add_validated(rec)
    sig = {(p.ob.kind, p.t): p.ob.sigma for p in est._pending}
    gyro = [s for (kind, _), s in sorted(sig.items(), key=lambda kv: kv[0][1])
            if kind == 'gyro']
    assert len(gyro) == 4
    np.testing.assert_allclose(gyro[1][-1], 0.02)          # √4e-4, the z axis
    np.testing.assert_allclose(gyro[0][-1], cfg.gyro_sigma)
    for s in gyro:
        assert not s.flags.writeable                        # shared between readings
        with pytest.raises(ValueError):
            s[...] = 0.0


def test_an_arms_efforts_are_its_applied_torques():
    """Every joint actuated (the UR5): each finite effort is its actuator's applied torque
    from the record's stamp on; a NaN leaves that actuator's torque and stamp as they were;
    a record in another joint order maps by name."""
    from pathlib import Path

    from mbfg_ros.loader import load_mechanism

    urdf = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
    system = load_mechanism(str(urdf / 'ur5.urdf'), str(urdf / 'ur5_sensors.yaml'))
    est = Estimator(system, EstimatorConfig())
    names = tuple(est.sm.joint_names)
    act = {j: k for k, j in enumerate(system.actuator_joints)}
    assert set(act) == set(names)
    eff = np.arange(1.0, len(names) + 1.0)
    est.add_validated(JointMeasurement(0.5, names, np.zeros(len(names)),
                                       np.full(len(names), np.nan), eff))
    for k, name in enumerate(names):
        assert est._tau[act[name]] == eff[k] and est._tau_t[act[name]] == 0.5
    used = est.counters['used_effort']
    eff2 = -eff
    eff2[2] = np.nan
    est.add_validated(JointMeasurement(0.6, names[::-1], np.zeros(len(names)),
                                       np.full(len(names), np.nan), eff2))
    for k, name in enumerate(names[::-1]):
        a = act[name]
        if k == 2:
            assert est._tau[a] == eff[names.index(name)] and est._tau_t[a] == 0.5
        else:
            assert est._tau[a] == eff2[k] and est._tau_t[a] == 0.6
    assert est.counters['used_effort'] == used + len(names) - 1
