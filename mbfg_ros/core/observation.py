"""The records the estimator and the sensor models of both formulations exchange (issue 23:
they live below both, so neither formulation imports the estimator).

* :class:`Observation`: one reading as the observation factors take it
  (:mod:`mbfg_ros.estimation.observations`);
* :class:`Model`: one measurement model ``h`` evaluated at a state, with its Jacobians
  ``(H_q, H_q̇, H_q̈)`` (what :class:`~mbfg_ros.core.interface.SensorModel` returns).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ['Observation', 'Model']


class Observation(NamedTuple):
    """One reading: ``kind`` (``joint_pos``, ``joint_vel``, ``gyro``, ``accel`` or
    ``orient``), ``index`` (the joint index for joint_*, else the IMU's), value ``z``
    (1 or 2 entries), standard deviations ``sigma`` (same size), and ``s``: where
    it was taken in the interval (t_{k−1}, t_k] of a two-key factor, as a fraction
    of the interval (1 = at t_k; one-key factors ignore it)."""

    kind: str
    index: int
    z: np.ndarray
    sigma: np.ndarray
    s: float = 1.0


class Model(NamedTuple):
    """One measurement model evaluated at a state."""

    h: np.ndarray
    Hq: np.ndarray | None = None
    Hqd: np.ndarray | None = None
    Hqdd: np.ndarray | None = None
