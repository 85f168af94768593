"""Inverse dynamics over a whole motion of a URDF robot (seed 002 §IV at every sample).

The prescribed joints' positions sampled in time (a trajectory file: time, then one
column per prescribed joint) give their rates and accelerations by the same
Savitzky-Golay fit the planar path uses (``trajectory.derivatives``). Open trees prescribe
every joint. With loops, the actuated joints are prescribed and the others follow from the
loop equations at every sample: position by assembly (``SpatialSystem.assemble``, started
from the previous sample), then ``φ_q q̇ = 0`` and ``φ_q q̈ = −γ`` for the free
components. τ is ``SpatialSystem.inverse`` at each (q, q̇, q̈).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np

from ..errors import MbfgError
from ..trajectory import derivatives
from .system import SpatialSystem

__all__ = ['SpatialInverseResult', 'inverse_trajectory']


class SpatialInverseResult(NamedTuple):
    """Row k is sample k: the full tree state and the actuator torques."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray              # (N, na) in ``system.actuator_names`` order


def inverse_trajectory(system: SpatialSystem, t: np.ndarray, z: np.ndarray,
                       prescribed: Sequence[int] | None = None, window: int = 31,
                       order: int = 5, progress: Callable[[float], None] | None = None
                       ) -> SpatialInverseResult:
    """τ along the motion ``z`` (N × len(prescribed)) of the ``prescribed`` joints.

    ``prescribed`` defaults to every tree joint (open trees) or the actuated joints (loops).
    """
    n = system.n
    if prescribed is None:
        prescribed = list(np.flatnonzero(system.model.actuated)) if system.loops.m \
            else list(range(n))
    pres = np.asarray(prescribed, int)
    z = np.asarray(z, float).reshape(len(t), -1)
    if z.shape[1] != len(pres):
        raise MbfgError(f'the trajectory has {z.shape[1]} joint columns, expected '
                        f'{len(pres)} ({", ".join(system.names[i] for i in pres)})')
    if not system.loops.m and len(pres) != n:
        raise MbfgError(f'an open tree needs every joint prescribed ({n}: '
                        f'{", ".join(system.names)}), got {len(pres)}')
    zd, zdd = derivatives(np.asarray(t, float), z, window=window, order=order)
    free = np.setdiff1d(np.arange(n), pres)
    N = len(t)
    Q, QD, QDD = (np.zeros((N, n)) for _ in range(3))
    TAU = np.zeros((N, system.B.shape[1]))
    q = np.array(system.q0, float)
    for k in range(N):
        q[pres] = z[k]
        qd, qdd = np.zeros(n), np.zeros(n)
        qd[pres], qdd[pres] = zd[k], zdd[k]
        if system.loops.m:
            q = system.assemble(q, keep=pres)
            Jc, _ = system.loops.jacobian(q)
            qd[free] = np.linalg.lstsq(Jc[:, free], -Jc[:, pres] @ zd[k], rcond=None)[0]
            _, gamma = system.loops.jacobian(q, qd)
            qdd[free] = np.linalg.lstsq(Jc[:, free], -Jc[:, pres] @ zdd[k] - gamma,
                                        rcond=None)[0]
        Q[k], QD[k], QDD[k] = q, qd, qdd
        TAU[k] = system.inverse(q, qd, qdd)
        if progress is not None:
            progress((k + 1) / N)
    return SpatialInverseResult(np.asarray(t, float), Q, QD, QDD, TAU)
