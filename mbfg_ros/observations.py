"""Observation factors on the stacked state x = [q, q̇, q̈] (seed 000 §6 style).

An :class:`Observation` is one scalar or vector reading (encoder angle or
rate, prismatic position, gyroscope, accelerometer, orientation) taken at
time ``t_k + delta`` and attached to the state of tick k at ``t_k``. The
model is evaluated at the state carried to the reading's time by the
second-order Taylor expansion the stacked variable makes free:

    q_m = q + δ q̇ + ½ δ² q̈,   q̇_m = q̇ + δ q̈,   q̈_m = q̈

so a reading between ticks needs no interpolation across two keys (one key,
one callback), with an error O(δ³ q⃛) (δ ≤ half a tick). The error is
``h(x_m) − z`` (wrapped to (−π, π] for angles: encoder, orientation) and the
Jacobian follows by the chain rule:

    ∂e/∂q = H_q,  ∂e/∂q̇ = δ H_q + H_q̇,  ∂e/∂q̈ = ½δ² H_q + δ H_q̇ + H_q̈.

All readings attached to one key in one update go into ONE CustomFactor
(:func:`observation_factor`): each Python callback costs tens of
microseconds, so one fat factor per tick beats one per message.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import gtsam
import numpy as np

from .factors import custom_factor
from .sensors import SensorModel, wrap_angle

__all__ = ['Observation', 'KINDS', 'observation_error', 'observation_factor',
           'observation_sigmas']

KINDS = ('joint_pos', 'joint_vel', 'gyro', 'accel', 'orient')
"""Kinds of reading: ``index`` is the joint index (joint_*) or the IMU index."""


class Observation(NamedTuple):
    """One reading: ``kind`` (see :data:`KINDS`), joint/IMU ``index``, value ``z``
    (1 or 2 entries), standard deviations ``sigma`` (same size), time offset
    ``delta`` from the key's time (s)."""

    kind: str
    index: int
    z: np.ndarray
    sigma: np.ndarray
    delta: float = 0.0


def _model(sm: SensorModel, ob: Observation, q, qd, qdd, want: bool, memo: dict):
    """(model, angular) of one observation; IMU and joint models shared within a call."""
    if ob.kind in ('joint_pos', 'joint_vel'):
        key = ('j', ob.index, ob.delta)
        if key not in memo:
            memo[key] = sm.joint(ob.index, q, qd, want)
        pos, vel = memo[key]
        if ob.kind == 'joint_pos':
            return pos, sm.joint_is_angular(ob.index)
        return vel, False
    key = ('i', ob.index, ob.delta)
    if key not in memo:
        memo[key] = sm.imu(ob.index, q, qd, qdd, want)
    g, f, o = memo[key]
    if ob.kind == 'gyro':
        return g, False
    if ob.kind == 'accel':
        return f, False
    return o, True


def observation_error(sm: SensorModel, obs: Sequence[Observation],
                      xs: Sequence[np.ndarray], want: bool):
    """Stacked errors of ``obs`` on one stacked state, with the (rows x 3n) Jacobian."""
    n = sm.n
    x = xs[0]
    q, qd, qdd = x[:n], x[n:2 * n], x[2 * n:]
    es = []
    Js = []
    memo: dict = {}
    for ob in obs:
        d = ob.delta
        if d:
            qm, qdm = q + d * qd + 0.5 * d * d * qdd, qd + d * qdd
        else:
            qm, qdm = q, qd
        m, angular = _model(sm, ob, qm, qdm, qdd, want, memo)
        r = m.h - ob.z
        if angular:
            r = wrap_angle(r)
        es.append(np.atleast_1d(r))
        if want:
            J = np.empty((len(r), 3 * n))
            J[:, :n] = m.Hq
            J[:, n:2 * n] = d * m.Hq + m.Hqd
            J[:, 2 * n:] = 0.5 * d * d * m.Hq + d * m.Hqd + m.Hqdd
            Js.append(J)
    e = np.concatenate(es)
    return e, ([np.vstack(Js)] if want else None)


def observation_sigmas(obs: Sequence[Observation]) -> np.ndarray:
    return np.concatenate([np.atleast_1d(ob.sigma) for ob in obs]).astype(float)


def observation_factor(key: int, sm: SensorModel, obs: Sequence[Observation]
                       ) -> gtsam.CustomFactor:
    """One CustomFactor over ``key`` for all readings ``obs`` (diagonal noise from their σ)."""
    obs = tuple(obs)
    noise = gtsam.noiseModel.Diagonal.Sigmas(observation_sigmas(obs))
    return custom_factor([key], noise, _Bound(sm, obs))


class _Bound:
    """``observation_error`` bound to its readings (picklable, no hidden state)."""

    __slots__ = ('sm', 'obs')

    def __init__(self, sm: SensorModel, obs: tuple[Observation, ...]) -> None:
        self.sm, self.obs = sm, obs

    def __call__(self, xs, want):
        return observation_error(self.sm, self.obs, xs, want)
