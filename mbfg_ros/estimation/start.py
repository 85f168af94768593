"""The estimator's start-up state from the first readings (seed 000 §5.1's position and
velocity problems with the readings as targets): positions by Gauss-Newton with
continuation from the YAML pose, rates by least squares. Runs once per (re-)start, before
any graph exists."""
from __future__ import annotations

import math

import numpy as np

from ..core.observation import Observation
from ..core.angles import wrap_angle
from ..core.interface import MultibodySystem as System
from ..core.interface import SensorModel

__all__ = ['seed_position', 'seed_velocity']


def seed_position(sys: System, sm: SensorModel, obs: list[Observation]) -> np.ndarray:
    """Gauss-Newton on [Φ(q); h(q) − z] from the YAML pose, by continuation.

    The targets move from their values at the assembled YAML pose to the
    readings in steps of ≤ 0.2 rad, so the iteration stays on the YAML
    pose's assembly branch. Runs once, before any graph exists (a few
    lines; the factor-graph form is the smoother's first update).
    """
    q = np.array(sys.q0, float)
    # only scalar readings are targets (a 3-D orientation is not: sm.position_target)
    obs = [o for o in obs if sm.position_target(o.kind)]
    if not obs:
        return q
    zeros = np.zeros(sys.n)

    def phi(q: np.ndarray) -> np.ndarray:
        return sys.constraint_terms(q, zeros)[0]

    def phi_q(q: np.ndarray) -> np.ndarray:
        return sys.constraint_terms(q, zeros)[1]

    def h_and_H(q):
        hs, Hs, ang = [], [], []
        for o in obs:
            if o.kind == 'joint_pos':
                m = sm.joint(o.index, q, zeros, True)[0]
            else:
                m = sm.imu(o.index, q, zeros, zeros, True)[2]
            ang.append(sm.angle_residual(o.kind, o.index))
            hs.append(m.h[0])
            Hs.append(m.Hq[0])
        return np.array(hs), np.array(Hs), np.array(ang)

    z = np.array([o.z[0] for o in obs])

    def follow(q: np.ndarray, use: np.ndarray) -> np.ndarray:
        h0, _, ang = h_and_H(q)
        diff = np.where(use, np.where(ang, wrap_angle(z - h0), z - h0), 0.0)
        steps = max(1, int(math.ceil(float(np.max(np.abs(diff))) / 0.2)))
        for s in range(1, steps + 1):
            target = h0 + diff * s / steps
            for _ in range(8):         # consistent readings converge in 3-5; garbage must
                h, H, _ = h_and_H(q)      # not make a start-up cost tens of milliseconds
                r = np.concatenate((phi(q), np.where(ang, wrap_angle(h - target),
                                                          h - target)[use]))
                J = np.vstack((phi_q(q), H[use]))
                dq = np.linalg.lstsq(J, -r, rcond=None)[0]
                q = q + dq
                if np.max(np.abs(dq)) < 1e-12:
                    break
        return q

    def misfit(q: np.ndarray) -> float:
        h, _, ang = h_and_H(q)
        r = np.where(ang, wrap_angle(h - z), h - z)
        return float(np.max(np.abs(np.concatenate((phi(q), r)))))

    every = np.ones(len(obs), dtype=bool)
    q = follow(q, every)
    if len(obs) > 1 and not misfit(q) < 0.05:
        # readings of a closed loop, all moved at once along straight lines, may pull the
        # iteration to a compromise pose (an angle going the short way round while the
        # loop must go the long way): follow them one at a time instead, each continuation
        # staying on the branch the previous ones reached
        q2 = np.array(sys.q0, float)
        for i in range(len(obs)):
            q2 = follow(q2, np.arange(len(obs)) <= i)
        if np.all(np.isfinite(q2)) and misfit(q2) < misfit(q):
            q = q2
    if not np.all(np.isfinite(q)):
        raise FloatingPointError('start-up position diverged')
    return q

def seed_velocity(sys: System, sm: SensorModel, q: np.ndarray, obs: list[Observation]
                  ) -> tuple[np.ndarray, bool]:
    """Least squares [Φq; H] q̇ = [0; ż] from rate readings, or zero without any."""
    if not obs:
        return np.zeros(sys.n), False
    zeros = np.zeros(sys.n)
    rows, rhs = [], []
    for o in obs:
        if o.kind == 'joint_vel':
            m = sm.joint(o.index, q, zeros, True)[1]
        else:
            m = sm.imu(o.index, q, zeros, zeros, True)[0]
        rows.append(np.atleast_2d(m.Hqd))
        rhs.append(np.atleast_1d(o.z))
    phi_q = sys.constraint_terms(q, zeros)[1]
    A = np.vstack([phi_q] + rows)
    b = np.concatenate([np.zeros(phi_q.shape[0])] + rhs)
    return np.linalg.lstsq(A, b, rcond=None)[0], True
