"""Shared fixtures: paths to the reference data and small helpers."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SHARED = REPO.parent / 'shared' / 'data' / 'mbse'
if not SHARED.is_dir():
    SHARED = REPO / 'config'
DATA = Path(__file__).resolve().parent / 'data'


@pytest.fixture
def shared_dir() -> Path:
    return SHARED


def numerical_jacobian(fn, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of a vector function (GTSAM's numericalDerivative idea)."""
    x = np.asarray(x, dtype=float)
    f0 = np.atleast_1d(fn(x))
    J = np.zeros((f0.size, x.size))
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        J[:, i] = (np.atleast_1d(fn(x + e)) - np.atleast_1d(fn(x - e))).ravel() / (2 * h)
    return J
