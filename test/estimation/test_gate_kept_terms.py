"""The innovation gate's process-noise terms kept per τ² (issue 24, branch tick6): a tick loop's
τ = t_k − t_{k−1} takes a handful of values (its stamps' differences in rounding), and Q(τ) is
kept for each while σ_d is the same object and no external share is shown. The gate's model
variances, decisions and the estimates equal those of an estimator that recomputes Q(τ) on
every tick, bit for bit."""
from __future__ import annotations

import numpy as np
from support.feeding import add_due
from support.ros_data import fourbar_system

from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig
from mbfg_ros.planar.sensors import SensorConfig, simulate_measurements
from mbfg_ros.simulation.forward import ForwardConfig, simulate

RATE = 1000.0


def test_q_of_tau_kept_per_tau_squared_equals_recomputing_it_every_tick():
    system = fourbar_system()
    traj = simulate(system, 0.4, ForwardConfig(dt=1e-3))
    recs = simulate_measurements(system, traj.t, traj.q, traj.qd, traj.qdd,
                                 SensorConfig(joints=('crank',), encoder_rate=RATE,
                                              imu_rate=RATE), np.random.default_rng(0))
    cfg = EstimatorConfig(frequency=RATE, lag_duration=0.05)
    kept, fresh = Estimator(system, cfg), Estimator(system, cfg)
    ticks = np.arange(1, int(0.4 * RATE)) / RATE      # differences in rounding: several τ
    recs = sorted(recs, key=lambda r: r.t)
    i = 0
    for t in ticks:
        i = add_due(recs, i, t, kept, fresh)
        fresh._gate_q = None                           # Q(τ) computed anew
        a, b = kept.tick(t), fresh.tick(t)
        assert (a is None) == (b is None)
        if a is not None:
            for f in ('q', 'qd', 'qdd', 'tau', 'q_std'):
                assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert np.array_equal(kept._model_var, fresh._model_var)
    assert kept._gate_q is not None and len(kept._gate_q[1]) > 1     # several τ² kept
    assert kept.counters == fresh.counters and kept.counters['used_joint_pos'] > 300


def test_the_contact_term_widens_the_encoders_rows_only(monkeypatch):
    """A contact not yet seen (σ_c's term) widens the gate's variance of the encoders'
    rows and of nothing else (added in place on those rows, branch tick8e): the IMU's
    rows keep the variance they have without it, bit for bit."""
    from conftest import CONFIG

    from mbfg_ros.core.observation import Observation
    from mbfg_ros.estimation.intake import _Pending
    from mbfg_ros.estimation.layout import layout_rows
    from mbfg_ros.spatial.system import build_spatial_system
    system = build_spatial_system(CONFIG / 'urdf' / 'ur5.urdf',
                                  CONFIG / 'urdf' / 'ur5_sensors.yaml')
    n = system.n
    est = Estimator(system, EstimatorConfig(frequency=RATE))
    rng = np.random.default_rng(2)
    x = rng.standard_normal(3 * n) * 0.3
    est._x_last, est._var_last = x, np.full(3 * n, 1e-4)
    obs = [Observation('joint_pos', j, np.array([x[j] + 0.01]), np.array([1e-3]))
           for j in range(n)]
    obs += [Observation('gyro', 0, np.full(3, 0.1), np.full(3, 0.005)),
            Observation('accel', 0, np.full(3, 9.0), np.full(3, 0.05))]
    layout = est._layout_of(obs)
    E, H = layout_rows(est.sm, obs, x.reshape(3, n), layout)
    sig = np.concatenate([o.sigma for o in obs])
    items = [_Pending(1.0, o) for o in obs]
    seen = []
    monkeypatch.setattr(est, '_gate_decide', lambda slots, t, thr, d2, power, base_var: (
        seen.append(base_var.copy()), np.ones(slots.size, dtype=bool))[1])
    for unseen in (np.zeros(n), rng.uniform(0.5, 2.0, n)):
        monkeypatch.setattr(est, '_external_var', lambda u=unseen: (0.0, u))
        est._gate(items, E, H, 1.0 / RATE, layout.row_of, sig, layout=layout)
    enc = layout.joint
    assert enc.sum() == n and (~enc).sum() == 2
    assert (seen[1][enc] > seen[0][enc]).all()
    assert np.array_equal(seen[1][~enc], seen[0][~enc])
