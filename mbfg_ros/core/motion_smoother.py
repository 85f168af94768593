"""A zero-lag smoother of measured joint motion, solved as one GTSAM Gaussian factor graph.

Each measured joint coordinate z gets a state x_k = (z, ż, z̈) at every sample k. Two kinds
of factor tie them to the log (one graph per joint, the joints are independent):

- a **process factor** between consecutive states: the white-noise-jerk (constant-jerk)
  motion model x_{k+1} = F x_k + w, F = [[1, h, h²/2], [0, 1, h], [0, 0, 1]], w ~ N(0, Q),
  Q = q_j [[h⁵/20, h⁴/8, h³/6], [h⁴/8, h³/3, h²/2], [h³/6, h²/2, h]] (the continuous model
  integrated over a step h; Bar-Shalom, Li & Kirubarajan, *Estimation with Applications to
  Tracking and Navigation*, §6.2.3), with q_j = ``jerk``² the jerk's spectral density;
- a **measurement factor** per sample on z (σ ``position_sigma``) and, where logged, on ż
  (σ ``velocity_sigma``).

Eliminating the whole chain at once is the fixed-interval (Rauch-Tung-Striebel) smoother:
every estimate uses the samples before and after it, so nothing is delayed. It is the
kinematic part of the estimator's model run over the whole log; the estimator's dynamics
factor is left out on purpose, since it needs the torques that inverse dynamics on the
result is to compute.

The state is scaled by the smoother's own time constant T = (σ_z²/q_j)^(1/6) (the states are
z, T ż, T² z̈) and eliminated by QR: in seconds, Q's entries span h⁵ to h and the Cholesky
default of GTSAM meets an indeterminate system.
"""
from __future__ import annotations

import gtsam
import numpy as np

from .errors import MbfgError

__all__ = ['smooth_motion']

_UNIT3 = gtsam.noiseModel.Unit.Create(3)


def _process(h: float, T: float, jerk: float) -> tuple[np.ndarray, np.ndarray]:
    """Whitened Jacobians (A_k, A_{k+1}) of the process factor in scaled states."""
    r = h / T
    F = np.array([[1.0, r, r * r / 2], [0.0, 1.0, r], [0.0, 0.0, 1.0]])
    Qn = np.array([[r ** 5 / 20, r ** 4 / 8, r ** 3 / 6],
                   [r ** 4 / 8, r ** 3 / 3, r ** 2 / 2],
                   [r ** 3 / 6, r ** 2 / 2, r]]) * (jerk ** 2 * T ** 5)
    Wh = np.linalg.inv(np.linalg.cholesky(Qn))
    return -Wh @ F, Wh


def smooth_motion(t: np.ndarray, z: np.ndarray, zd: np.ndarray | None, jerk: float,
                  position_sigma: float, velocity_sigma: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Smoothed z, ż, z̈ (each (N, k)) of uniformly sampled positions z (N, k) and, if given,
    measured velocities zd (N, k) (module docstring). ``jerk``: the jerk's spectral density's
    square root [unit/s³/√Hz]; larger follows the data more closely."""
    for name, value in (('jerk', jerk), ('position_sigma', position_sigma),
                        ('velocity_sigma', velocity_sigma)):
        if not np.isfinite(value) or value <= 0:
            raise MbfgError(f'smoother: {name} must be a positive number, got {value}')
    N = len(t)
    if N < 3:
        raise MbfgError(f'smoother: {N} samples, at least 3 needed')
    h = float(np.mean(np.diff(t)))
    T = (position_sigma / jerk) ** (1 / 3)
    A1, A2 = _process(h, T, jerk)
    Hq = np.array([[1.0, 0.0, 0.0]])
    Hv = np.array([[0.0, 1.0 / T, 0.0]])
    nq = gtsam.noiseModel.Isotropic.Sigma(1, position_sigma)
    nv = gtsam.noiseModel.Isotropic.Sigma(1, velocity_sigma)
    zero = np.zeros(3)
    ordering = gtsam.Ordering()
    for k in range(N):
        ordering.push_back(k)
    unscale = np.array([1.0, 1.0 / T, 1.0 / T ** 2])
    out = np.empty((N, z.shape[1], 3))
    for j in range(z.shape[1]):
        g = gtsam.GaussianFactorGraph()
        for k in range(N):
            g.add(gtsam.JacobianFactor(k, Hq, z[k, j:j + 1], nq))
            if zd is not None:
                g.add(gtsam.JacobianFactor(k, Hv, zd[k, j:j + 1], nv))
            if k:
                g.add(gtsam.JacobianFactor(k - 1, A1, k, A2, zero, _UNIT3))
        sol = g.optimize(ordering, gtsam.EliminateQR)
        out[:, j] = np.array([sol.at(k) for k in range(N)]) * unscale
    return out[:, :, 0], out[:, :, 1], out[:, :, 2]
