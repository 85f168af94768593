"""Observation factors on the stacked state x = [q, q̇, q̈] (seed 000 §6 style).

An :class:`Observation` is one scalar or vector reading (encoder angle or
rate, prismatic position, gyroscope, accelerometer, orientation). Its error
is ``h(q, q̇, q̈) − z`` (wrapped to (−π, π] for angles: encoder,
orientation) with the model Jacobian ``[H_q, H_q̇, H_q̈]`` of
:class:`~mbfg_ros.core.interface.SensorModel` (the :class:`Observation` record lives in
:mod:`mbfg_ros.core.observation`, below the sensor models that build it).

* A reading taken at a tick is a factor on that tick's key alone
  (:func:`observation_factor`).
* A reading taken between ticks, at ``t_m = t_{k−1} + s·dt`` with
  s ∈ (0, 1), is a factor on the two keys (x_{k−1}, x_k) that bracket it
  (:func:`interval_factor`). The state at t_m is interpolated between them
  under the trapezoidal model of seed 000 Eq. 23 (q̈ piecewise linear, so q
  is a cubic and q̇ a quadratic in time) by cubic Hermite interpolation of
  each level from its value and its derivative at both ends
  (:func:`interpolation_weights`):

      q(t_m)  = h00 q_{k−1}  + h10 dt q̇_{k−1}  + h01 q_k  + h11 dt q̇_k
      q̇(t_m)  = h00 q̇_{k−1} + h10 dt q̈_{k−1}  + h01 q̇_k + h11 dt q̈_k
      q̈(t_m)  = (1 − s) q̈_{k−1} + s q̈_k

  with h00 = 2s³ − 3s² + 1, h10 = s³ − 2s² + s, h01 = 3s² − 2s³,
  h11 = s³ − s². This is exact for a cubic q (so for the piecewise-linear
  q̈ of the trapezoidal model) and equals each key's own state at s = 0 and
  s = 1, so the two-key factor joins the one-key factors continuously.
  The interpolation is linear in the keys,
  ``[q; q̇; q̈](t_m) = (a ⊗ I_n) x_{k−1} + (b ⊗ I_n) x_k`` with constant 3x3
  weights a, b (functions of s only), so the Jacobians are exact by the
  chain rule: ``∂e/∂x_{k−1} = [H_q H_q̇ H_q̈](a ⊗ I_n)`` and likewise with b.

All readings on one key (or one pair of keys) in one update go into ONE
CustomFactor: each Python callback costs tens of microseconds, so one fat
factor per tick beats one per message.
"""
from __future__ import annotations

from itertools import accumulate
from typing import Sequence

import gtsam
import numpy as np

from ..core.angles import wrap_angle
from ..core.factors import custom_factor, linear_factor
from ..core.interface import SensorModel
from ..core.observation import Observation

__all__ = ['Observation', 'interpolation_weights', 'residuals', 'observation_error',
           'observation_factor', 'interval_error', 'interval_rows', 'interval_factor',
           'observation_sigmas', 'repeated_state']


def interpolation_weights(s: np.ndarray | float, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Weights (a, b), each (N, 3, 3), of the state at ``t_{k−1} + s dt``.

    ``[q; q̇; q̈](t_{k−1} + s dt) = (a ⊗ I_n) x_{k−1} + (b ⊗ I_n) x_k`` for
    x = [q; q̇; q̈]: cubic Hermite for q and q̇, linear for q̈ (module docstring).
    """
    s = np.atleast_1d(np.asarray(s, dtype=float))
    s2, s3 = s * s, s * s * s
    h00, h10, h01, h11 = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, 3 * s2 - 2 * s3, s3 - s2
    a = np.zeros((s.size, 3, 3))
    b = np.zeros((s.size, 3, 3))
    a[:, 0, 0] = a[:, 1, 1] = h00
    a[:, 0, 1] = a[:, 1, 2] = dt * h10
    a[:, 2, 2] = 1.0 - s
    b[:, 0, 0] = b[:, 1, 1] = h01
    b[:, 0, 1] = b[:, 1, 2] = dt * h11
    b[:, 2, 2] = s
    return a, b


def repeated_state(X: np.ndarray, count: int) -> np.ndarray:
    """(count, 3, n): the one state ``X`` (3, n), C-contiguous, of ``count`` readings as a
    read-only view repeating it (:func:`numpy.broadcast_to`'s, without its call's cost):
    what a sensor model's batch takes when its readings share one state."""
    view = np.ndarray((count,) + X.shape, X.dtype, X, 0, (0,) + X.strides)
    view.flags.writeable = False
    return view


def residuals(sm: SensorModel, obs: Sequence[Observation], states, want: bool):
    """Residuals and model Jacobians (rows, 3, n) of ``obs``; ``states[i]`` is the
    (q, q̇, q̈) of reading i, or ``states`` is an array (len(obs), 3, n) of them (the
    interval's interpolated states: no per-reading tuple), or one array (3, n): the state
    of every reading (readings at one key). Readings of one sensor are
    evaluated together, vectorised over their states (``sm.joint_batch``;
    ``sm.imu_errors``, which owns the IMU's residual: 1-axis/2-axis/yaw on a plane,
    3-axis and SO(3) in space); prismatic joints use the scalar model per state. A
    reading has as many rows as its σ."""
    n = sm.n
    sizes = [ob.sigma.size for ob in obs]                   # rows of each reading
    start = list(accumulate(sizes, initial=0))
    e = np.empty(start.pop())
    H = np.empty((e.size, 3, n)) if want else None
    if isinstance(states, np.ndarray) and states.ndim == 2:
        Xs, X1 = None, np.ascontiguousarray(states)       # (3, n): the one state of all
    else:
        Xs = states if isinstance(states, np.ndarray) else None
        one = None if Xs is not None else \
            (states[0] if all(st is states[0] for st in states) else None)
        X1 = np.stack(one) if one is not None else None
    cache: dict[int, np.ndarray] = {}

    def stacked(state) -> np.ndarray:       # readings often share one state object
        x = cache.get(id(state))
        if x is None:
            x = cache[id(state)] = np.stack(state)
        return x

    def at(ids: list[int]) -> np.ndarray:   # (N, 3, n): the states of readings ids
        if X1 is not None:
            return repeated_state(X1, len(ids))
        if Xs is not None:
            return Xs[ids]
        return np.array([stacked(states[i]) for i in ids])

    direct = sm.direct_encoders              # encoders read q_j, q̇_j directly (or None)
    groups: dict[tuple[str, int], list[int]] = {}
    jids: list[int] = []
    for i, ob in enumerate(obs):
        if ob.kind in ('joint_pos', 'joint_vel'):
            if direct is not None:
                jids.append(i)
                continue
            groups.setdefault(('j', ob.index), []).append(i)
        else:
            groups.setdefault(('i', ob.index), []).append(i)
    if jids:
        # joint coordinates (spatial): every encoder reading at once, unit-row Jacobians
        idx = np.array([obs[i].index for i in jids])
        z = np.array([obs[i].z[0] for i in jids])
        rate = [obs[i].kind != 'joint_pos' for i in jids]
        if any(rate):
            lvl = np.array(rate, dtype=int)
            wrap = (lvl == 0) & direct[idx]
        else:                                   # angles only (the common case)
            lvl, wrap = 0, direct[idx]
        if X1 is not None:
            r = X1[lvl, idx] - z
        else:
            X = at(jids)
            r = X[np.arange(len(jids)), lvl, idx] - z
        if wrap.all():
            r = wrap_angle(r)
        elif wrap.any():
            r[wrap] = wrap_angle(r[wrap])
        rows = [start[i] for i in jids]
        if rows[-1] - rows[0] == len(rows) - 1:   # consecutive rows (encoders first)
            rows = np.arange(rows[0], rows[-1] + 1)
            e[rows[0]:rows[-1] + 1] = r
        else:
            e[rows] = r
        if want:
            H[rows] = 0.0
            H[rows, lvl, idx] = 1.0
    for (cls, index), ids in groups.items():
        X = at(ids)                                               # (N, 3, n)
        if cls == 'j':
            batch = sm.joint_batch(index, X)
            if batch is None:                                     # prismatic: scalar model
                for i in ids:
                    ob = obs[i]
                    q, qd, _ = X1 if X1 is not None else states[i] if Xs is None else Xs[i]
                    pos, vel = sm.joint(index, q, qd, want)
                    m = pos if ob.kind == 'joint_pos' else vel
                    e[start[i]] = m.h[0] - ob.z[0]
                    if want:
                        H[start[i]] = np.stack((m.Hq[0], m.Hqd[0], m.Hqdd[0]))
                continue
            (pos, vel), (Hp, Hv) = batch
            for r, i in enumerate(ids):
                ob = obs[i]
                if ob.kind == 'joint_pos':
                    e[start[i]] = wrap_angle(pos[r] - ob.z[0])
                    if want:
                        H[start[i]] = Hp[r]
                else:
                    e[start[i]] = vel[r] - ob.z[0]
                    if want:
                        H[start[i]] = Hv[r]
            continue
        ei, Hi = sm.imu_errors(index, [obs[i] for i in ids], X, want)
        if len(ids) == 1 or ids[-1] - ids[0] == len(ids) - 1:     # consecutive readings
            at_rows = slice(start[ids[0]], start[ids[-1]] + sizes[ids[-1]])
        else:
            at_rows = np.concatenate([np.arange(start[i], start[i] + sizes[i]) for i in ids])
        e[at_rows] = ei
        if want:
            H[at_rows] = Hi
    return e, H


def observation_error(sm: SensorModel, obs: Sequence[Observation],
                      xs: Sequence[np.ndarray], want: bool):
    """Stacked errors of ``obs`` taken at the key's time, with the (rows x 3n) Jacobian."""
    n = sm.n
    e, H = residuals(sm, obs, np.reshape(xs[0], (3, n)), want)
    return e, ([H.reshape(len(e), 3 * n)] if want else None)


def interval_error(sm: SensorModel, obs: Sequence[Observation], a: np.ndarray, b: np.ndarray,
                   xs: Sequence[np.ndarray], want: bool):
    """Stacked errors of ``obs`` between two keys, with the two (rows x 3n) Jacobians.

    ``a``, ``b`` (len(obs), 3, 3): :func:`interpolation_weights` of each reading.
    """
    e, _, J0, J1 = interval_rows(sm, obs, a, b, xs, want)
    return e, ([J0, J1] if want else None)


def interval_rows(sm: SensorModel, obs: Sequence[Observation], a: np.ndarray, b: np.ndarray,
                  xs: Sequence[np.ndarray], want: bool = True):
    """:func:`interval_error` with the model Jacobian too: (e, H (rows, 3n) at each
    reading's interpolated state, ∂e/∂x_{k−1}, ∂e/∂x_k), or (e, None, None, None)."""
    n = sm.n
    X0, X1 = xs[0].reshape(3, n), xs[1].reshape(3, n)
    Xm = a @ X0 + b @ X1                         # (N, 3, n): state at each reading
    e, H = residuals(sm, obs, Xm, want)
    if not want:
        return e, None, None, None
    rows = np.repeat(np.arange(len(obs)), [np.size(ob.sigma) for ob in obs])
    J0 = np.einsum('rin,rij->rjn', H, a[rows]).reshape(len(e), 3 * n)
    J1 = np.einsum('rin,rij->rjn', H, b[rows]).reshape(len(e), 3 * n)
    return e, H.reshape(len(e), 3 * n), J0, J1


def observation_sigmas(obs: Sequence[Observation]) -> np.ndarray:
    """The σ of every row of ``obs``, stacked (a new float array)."""
    try:                        # σ's are 1-D arrays (the intake's): one concatenation
        sig = np.concatenate([ob.sigma for ob in obs])
    except ValueError:          # a scalar σ
        return np.concatenate([np.atleast_1d(ob.sigma) for ob in obs]).astype(float)
    return sig if sig.dtype == float else sig.astype(float)


def observation_factor(key: int, sm: SensorModel, obs: Sequence[Observation],
                       at: np.ndarray | None = None,
                       evaluated: tuple[np.ndarray, list[np.ndarray]] | None = None
                       ) -> gtsam.NonlinearFactor:
    """One factor over ``key`` for all readings ``obs`` taken at its time (diagonal
    noise from their σ): a CustomFactor, or with ``at`` (the key's linearisation point)
    the same equations linearised there once (:func:`~mbfg_ros.core.factors.linear_factor`;
    ``evaluated``: :func:`observation_error` of ``obs`` at ``at``, if the caller has it)."""
    obs = tuple(obs)
    noise = gtsam.noiseModel.Diagonal.Sigmas(observation_sigmas(obs))
    if at is not None:
        return linear_factor([key], noise, _Bound(sm, obs), [at], evaluated)
    return custom_factor([key], noise, _Bound(sm, obs))


def interval_factor(key0: int, key1: int, dt: float, sm: SensorModel,
                    obs: Sequence[Observation],
                    at: tuple[np.ndarray, np.ndarray] | None = None) -> gtsam.NonlinearFactor:
    """One factor over (``key0``, ``key1``), ``dt`` apart, for all readings ``obs``
    taken between them (each at its fraction ``Observation.s`` of the interval); with
    ``at`` (the two keys' linearisation points) linearised there once, as
    :func:`observation_factor`."""
    obs = tuple(sorted(obs, key=lambda o: o.s))
    a, b = interpolation_weights([o.s for o in obs], dt)
    noise = gtsam.noiseModel.Diagonal.Sigmas(observation_sigmas(obs))
    if at is not None:
        return linear_factor([key0, key1], noise, _BoundInterval(sm, obs, a, b), list(at))
    return custom_factor([key0, key1], noise, _BoundInterval(sm, obs, a, b))


class _Bound:
    """``observation_error`` bound to its readings (picklable, no hidden state)."""

    __slots__ = ('sm', 'obs')

    def __init__(self, sm: SensorModel, obs: tuple[Observation, ...]) -> None:
        self.sm, self.obs = sm, obs

    def __call__(self, xs, want):
        return observation_error(self.sm, self.obs, xs, want)


class _BoundInterval:
    """``interval_error`` bound to its readings and their weights."""

    __slots__ = ('sm', 'obs', 'a', 'b')

    def __init__(self, sm: SensorModel, obs: tuple[Observation, ...], a: np.ndarray,
                 b: np.ndarray) -> None:
        self.sm, self.obs, self.a, self.b = sm, obs, a, b

    def __call__(self, xs, want):
        return interval_error(self.sm, self.obs, self.a, self.b, xs, want)
