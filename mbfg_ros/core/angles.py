"""Angles and SO(3) helpers shared by both formulations (issue 23: one copy each).

* :func:`wrap_angle`: an angle (or angle difference) wrapped to (−π, π], for encoder
  residuals of revolute joints and planar yaw (seed 000 §2 body angles);
* :func:`skew`: the cross-product matrix ``[x]×`` with ``[x]× y = x × y`` (seed 002 §III's
  ``ad`` and the IMU kinematics of seed 004 are built from it).
"""
from __future__ import annotations

import numpy as np

__all__ = ['wrap_angle', 'skew']


def wrap_angle(a: np.ndarray | float) -> np.ndarray | float:
    """Wrap to (−π, π]."""
    return np.pi - np.mod(np.pi - np.asarray(a, dtype=float), 2.0 * np.pi)


def skew(x: np.ndarray) -> np.ndarray:
    """The 3x3 cross-product matrix of the 3-vector ``x``: ``skew(x) @ y == np.cross(x, y)``."""
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])
