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

from ..core.errors import MbfgError
from ..core.trajectory import check_time, derivatives
from .system import SpatialSystem

__all__ = ['SpatialInverseResult', 'inverse_trajectory', 'load_joint_trajectory']


class SpatialInverseResult(NamedTuple):
    """Row k is sample k: the full tree state and the actuator torques."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray              # (N, na) in ``system.actuator_names`` order


def inverse_trajectory(system: SpatialSystem, t: np.ndarray, z: np.ndarray,
                       prescribed: Sequence[int] | None = None, window: int = 31,
                       order: int = 5, progress: Callable[[float], None] | None = None,
                       zd: np.ndarray | None = None, zdd: np.ndarray | None = None
                       ) -> SpatialInverseResult:
    """τ along the motion ``z`` (N × len(prescribed)) of the ``prescribed`` joints.

    ``prescribed`` defaults to every tree joint (open trees) or the actuated joints (loops).
    ``zd``, ``zdd``: the rates and accelerations when the motion carries them (a
    ``JointTrajectory`` with velocities and accelerations); else Savitzky-Golay fits.
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
    if zd is None or zdd is None:
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


def load_joint_trajectory(path: str, topic: str, joints: Sequence[str]
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None,
                                     np.ndarray | None]:
    """(t, q, q̇ or None, q̈ or None) of the first ``trajectory_msgs/JointTrajectory`` on
    ``topic`` of a rosbag2 (what a MoveIt or ``joint_trajectory_controller`` client sends),
    in the order of ``joints``; t is each point's ``time_from_start``. Rates and
    accelerations are returned when every point carries them for every joint.
    """
    from ..core.bag import read_messages
    topic = topic if topic.startswith('/') else '/' + topic
    for m in read_messages(path, {topic: 'trajectory_msgs/msg/JointTrajectory'}):
        msg = m.msg
        names = list(msg.joint_names)
        missing = [j for j in joints if j not in names]
        if missing:
            raise MbfgError(f'{path}: {topic}: the JointTrajectory has no joint '
                            f'{missing[0]!r} (it names {", ".join(names)})')
        idx = [names.index(j) for j in joints]
        pts = list(msg.points)
        if len(pts) < 3:
            raise MbfgError(f'{path}: {topic}: {len(pts)} trajectory points, need at least 3')
        t = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in pts])
        if np.any(np.diff(t) <= 0):
            raise MbfgError(f'{path}: {topic}: time_from_start is not strictly increasing')
        check_time(t, f'{path}: {topic}')        # issue 26: gaps, absurd spans

        def field(name: str) -> np.ndarray | None:
            rows = [getattr(p, name) for p in pts]
            if any(len(r) != len(names) for r in rows):
                return None
            return np.array([[r[i] for i in idx] for r in rows], float)
        q = field('positions')
        if q is None:
            raise MbfgError(f'{path}: {topic}: a trajectory point has no positions for every '
                            'joint')
        return t, q, field('velocities'), field('accelerations')
    raise MbfgError(f'{path}: {topic}: no JointTrajectory message')
