"""Angles and SO(3) helpers shared by both formulations (issue 23: one copy each).

* :func:`wrap_angle`: an angle (or angle difference) wrapped to (−π, π], for encoder
  residuals of revolute joints and planar yaw (seed 000 §2 body angles); :func:`wrap_scalar`
  the same of one float (the per-tick paths);
* :func:`skew`: the cross-product matrix ``[x]×`` with ``[x]× y = x × y`` (seed 002 §III's
  ``ad`` and the IMU kinematics of seed 004 are built from it).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ['wrap_angle', 'wrap_scalar', 'skew']

_TWO_PI = 2.0 * math.pi


def wrap_angle(a: np.ndarray | float) -> np.ndarray | float:
    """Wrap to (−π, π] (a float array as it is: no conversion call on the per-tick paths)."""
    if not isinstance(a, np.ndarray) or a.dtype != np.float64:
        a = np.asarray(a, dtype=float)
    return np.pi - np.mod(np.pi - a, _TWO_PI)


def wrap_scalar(a: float) -> float:
    """:func:`wrap_angle` of one float, bit for bit, without numpy's call (Python's float
    ``%`` and numpy's ``mod`` both take fmod and move it to the divisor's sign)."""
    return math.pi - (math.pi - a) % _TWO_PI


def skew(x: np.ndarray) -> np.ndarray:
    """The 3x3 cross-product matrix of the 3-vector ``x``: ``skew(x) @ y == np.cross(x, y)``."""
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])
