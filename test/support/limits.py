"""Joint limits and IMU ranges around negative values (issue 29): a four-bar YAML with them,
and (sent, kept, number out of limits) cases for a JointState of (crank, coupler_joint).

Used by test/estimation/test_limit_gate.py and test/ros/test_driver_limits.py."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mbfg_ros.core.measurements import JointMeasurement

from .ros_data import fourbar_path

LIMITS = '{position: [-1.0, 2.0], velocity: 5.0, effort: 3.0}'
T_NS = 2_000_000_000


def limited_fourbar(folder: Path) -> Path:
    """config/fourbar.yaml written to ``folder`` with limits on the crank and ranges on the
    coupler IMU; the coupler joint keeps the default sanity limits (|q̇| 1e3, |τ| 1e4)."""
    text = fourbar_path().read_text()
    crank = '{name: crank, type: revolute, bodies: [ground, 0]}'
    imu = 'angle: 0, frame_id: coupler_imu}'
    assert crank in text and imu in text
    text = text.replace(crank, crank[:-1] + f', limits: {LIMITS}}}')
    text = text.replace(imu, imu[:-1] + ', gyro_range: 20.0, accel_range: 100.0}')
    path = folder / 'fourbar_limits.yaml'
    path.write_text(text)
    return path


def joint(pos, vel, eff) -> JointMeasurement:
    """A record of (crank, coupler_joint) values at T_NS."""
    return JointMeasurement(T_NS / 1e9, ('crank', 'coupler_joint'), np.array(pos, float),
                            np.array(vel, float), np.array(eff, float))


# (crank, coupler) values; NaN where the gate must set the value aside
CASES = {
    'just inside, negative': (([-0.99, -3.0], [-4.99, -999.0], [-2.99, -9999.0]),
                              ([-0.99, -3.0], [-4.99, -999.0], [-2.99, -9999.0]), 0),
    'position below the range': (([-1.01, 0.5], [0.0, 0.0], [0.0, 0.0]),
                                 ([np.nan, 0.5], [0.0, 0.0], [0.0, 0.0]), 1),
    'negative velocity': (([0.5, 0.5], [-5.01, -2000.0], [0.0, 0.0]),
                          ([0.5, 0.5], [np.nan, np.nan], [0.0, 0.0]), 2),
    'negative effort': (([0.5, 0.5], [0.0, 0.0], [-3.01, -2e4]),
                        ([0.5, 0.5], [0.0, 0.0], [np.nan, np.nan]), 2),
    'position above the range': (([2.01, 0.5], [0.0, 0.0], [0.0, 0.0]),
                                 ([np.nan, 0.5], [0.0, 0.0], [0.0, 0.0]), 1),
}
