"""A simulated UR5 and its noisy encoder and wrist-IMU readings (spatial estimator tests)."""
from __future__ import annotations

import numpy as np

from mbfg_ros.core.measurements import ImuMeasurement, JointMeasurement
from mbfg_ros.spatial.sensors import quaternion_from_matrix
from mbfg_ros.spatial.simulate import simulate_spatial


def simulate_ur5(sys_, duration=2.0, dt=2e-3, q0=None):
    """(trajectory, torques) from ``q0`` (default the URDF's) under gravity compensation at
    ``q0`` plus sinusoids."""
    n = sys_.n
    q0 = None if q0 is None else np.asarray(q0, dtype=float)
    g0 = sys_.torques(sys_.q0 if q0 is None else q0, np.zeros(n), np.zeros(n))
    amp = np.array([5, 10, 5, 0.3, 0.3, 0.005])
    damp = np.array([2, 2, 1, 0.05, 0.05, 0.001])

    def tau(t, q, qd):
        return g0 + amp * np.sin(2 * np.pi * 0.7 * t + np.arange(n)) - damp * qd
    tr = simulate_spatial(sys_, duration, dt, tau=tau, q0=q0)
    return tr, np.array([tau(t, q, qd) for t, q, qd in zip(tr.t, tr.q, tr.qd)])


def readings(sys_, tr, taus, rng, enc_sigma=1e-3, orientation=False):
    sm = sys_.sensor_model()
    out = []
    for k, t in enumerate(tr.t):
        q, qd, qdd = tr.q[k], tr.qd[k], tr.qdd[k]
        out.append(JointMeasurement(t, sys_.names, q + rng.normal(0, enc_sigma, sys_.n),
                                    np.zeros(0), taus[k]))
        g, f, o = sm.imu(0, q, qd, qdd)
        quat = None
        if orientation:
            from scipy.spatial.transform import Rotation
            quat = quaternion_from_matrix(o.h @ Rotation.from_rotvec(rng.normal(0, 0.01, 3))
                                          .as_matrix())
        out.append(ImuMeasurement(t, 'wrist_imu', g.h + rng.normal(0, 0.005, 3),
                                  f.h + rng.normal(0, 0.05, 3), quat))
    return out
