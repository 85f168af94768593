"""The innovation gate's process-noise terms kept per τ² (issue 24, branch tick6): a tick loop's
τ = t_k − t_{k−1} takes a handful of values (its stamps' differences in rounding), and Q(τ) is
kept for each while σ_d is the same object and no external share is shown. The gate's model
variances, decisions and the estimates equal those of an estimator that recomputes Q(τ) on
every tick, bit for bit."""
from __future__ import annotations

import numpy as np
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
        while i < len(recs) and recs[i].t <= t + 1e-12:
            kept.add(recs[i])
            fresh.add(recs[i])
            i += 1
        fresh._gate_q = None                           # Q(τ) computed anew
        a, b = kept.tick(t), fresh.tick(t)
        assert (a is None) == (b is None)
        if a is not None:
            for f in ('q', 'qd', 'qdd', 'tau', 'q_std'):
                assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert np.array_equal(kept._model_var, fresh._model_var)
    assert kept._gate_q is not None and len(kept._gate_q[1]) > 1     # several τ² kept
    assert kept.counters == fresh.counters and kept.counters['used_joint_pos'] > 300
