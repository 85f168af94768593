"""Measured joint motion: reading logs, derivatives, and inverse dynamics on them.

A :class:`JointLog` holds what a robot records per joint: positions, and
where available the measured velocities and efforts (DFKI's double-pendulum
CSVs, or a rosbag2's ``sensor_msgs/JointState``). :func:`measured_inverse`
turns it into torques:

1. each named revolute joint is mapped to the relative coordinate of q that
   equals its angle (``joint position + offset``, :meth:`Mechanism.angle_coordinate`);
2. ż, z̈ from :func:`motion_derivatives` (Savitzky-Golay fits, documented there);
3. q, q̇, q̈ from the position, velocity and acceleration problems (seed 000
   Eqs. 10, 12: :func:`mbfg_ros.planar.problems.inverse.direct_kinematics`);
4. τ from ``B_act τ + Φqᵀλ = M q̈ − Q(q, q̇)`` (seed 003 Eq. 6.110, with the
   YAML's friction and rotor terms in Q and M):
   :func:`mbfg_ros.planar.dynamics.actuator_efforts`.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import scipy.signal

from ...core.errors import MbfgError, TrajectoryError
from ...core.trajectory import check_time
from .inverse import direct_kinematics
from ...core.motion_smoother import smooth_motion
from ..dynamics import System, actuator_efforts

__all__ = ['JointLog', 'DerivativeOptions', 'MeasuredInverse', 'load_joint_csv',
           'load_joint_bag', 'joint_coordinates', 'motion_derivatives', 'measured_inverse',
           'resample_uniform', 'torque_fit', 'measured_states', 'torques']


class JointLog(NamedTuple):
    """Measured joint signals, one row per sample (``velocity``/``effort`` may be None)."""

    t: np.ndarray                     # (N,) s
    joints: tuple[str, ...]
    position: np.ndarray              # (N, k) rad
    velocity: np.ndarray | None       # (N, k) rad/s
    effort: np.ndarray | None         # (N, k) N·m
    source: str


@dataclass(frozen=True)
class DerivativeOptions:
    """How ż, z̈ come from the log (:func:`motion_derivatives`).

    ``method``: ``savgol`` (positions only: local polynomial of ``order`` over
    ``window`` samples, its first and second derivatives), ``velocity``
    (measured velocities, smoothed by the same fit, and their derivative; the
    positions are smoothed too) or ``smoother`` (a zero-lag GTSAM smoother over the
    whole log, :mod:`mbfg_ros.core.motion_smoother`: white-noise jerk of density
    ``jerk``², positions with σ ``position_sigma``, measured velocities, where logged,
    with σ ``velocity_sigma``). ``window`` is odd, in samples. The defaults
    (101 samples = 0.2 s at DFKI's 500 Hz, cubic, measured velocities; jerk 0.5
    with σ 2e-4 rad) gave the lowest torque error on DFKI's trajectory_01 among the
    values tried. Half a window is dropped at each end when fitting or scoring, whatever
    the method.
    """

    method: str = 'velocity'
    window: int = 101
    order: int = 3
    jerk: float = 0.5                 # rad/s³/√Hz (smoother)
    position_sigma: float = 2e-4      # rad (smoother)
    velocity_sigma: float = 0.1       # rad/s (smoother)


class MeasuredInverse(NamedTuple):
    """Inverse dynamics along a measured motion."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray                   # (N, n_act), order of ``mech.actuators``
    effort: np.ndarray | None         # measured, same columns as tau (None if not logged)


def _read_columns(path: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    try:
        with open(path, newline='') as f:
            reader = csv.reader(f)
            header = [h.strip() for h in next(reader)]
            rows = list(reader)
    except OSError as exc:
        raise TrajectoryError(f'{path}: cannot read file: {exc.strerror}') from None
    except UnicodeDecodeError as exc:              # issue 26: a binary file
        raise TrajectoryError(f'{path}: not a text CSV (byte {exc.start} is not UTF-8)'
                              ) from None
    except csv.Error as exc:                       # a NUL byte, a runaway quoted field
        raise TrajectoryError(f'{path}: not a CSV: {exc}') from None
    except StopIteration:
        raise TrajectoryError(f'{path}: empty file') from None
    missing = [n for n in names if n not in header]
    if missing:
        raise TrajectoryError(f'{path}: no column {missing[0]!r} (columns: {", ".join(header)})')
    idx = [header.index(n) for n in names]
    out = np.empty((len(rows), len(names)))
    for k, row in enumerate(rows):
        try:
            out[k] = [float(row[i]) for i in idx]
        except (ValueError, IndexError):
            raise TrajectoryError(f'{path}:{k + 2}: missing or bad number') from None
    if not np.isfinite(out).all():
        k = int(np.flatnonzero(~np.isfinite(out).all(1))[0])
        raise TrajectoryError(f'{path}:{k + 2}: value is NaN or infinite')
    return {n: out[:, j] for j, n in enumerate(names)}


def load_joint_csv(path: str | Path, joints: Sequence[str], position: Sequence[str],
                   velocity: Sequence[str] | None = None, effort: Sequence[str] | None = None,
                   time: str = 'time') -> JointLog:
    """A CSV with a header row: a ``time`` column and per joint the named columns.

    :raises TrajectoryError: unreadable file, missing column, bad number, time
        not strictly increasing (naming ``file:line``).
    """
    path = Path(path)
    for what, cols in (('position', position), ('velocity', velocity), ('effort', effort)):
        if cols is not None and len(cols) != len(joints):
            raise MbfgError(f'{len(cols)} {what} columns for {len(joints)} joints '
                            f'({", ".join(joints)})')
    names = [time, *position, *(velocity or ()), *(effort or ())]
    data = _read_columns(path, names)
    t = data[time]
    bad = np.flatnonzero(np.diff(t) <= 0)
    if len(bad):
        raise TrajectoryError(f'{path}:{int(bad[0]) + 3}: time {t[bad[0] + 1]:g} does not '
                              'increase')
    if len(t) < 3:
        raise TrajectoryError(f'{path}: need at least 3 samples, found {len(t)}')
    check_time(t, str(path), np.arange(len(t)) + 2)      # issue 26: gaps, absurd spans

    def stack(cols: Sequence[str] | None) -> np.ndarray | None:
        return None if cols is None else np.stack([data[c] for c in cols], axis=1)
    return JointLog(t, tuple(joints), stack(position), stack(velocity), stack(effort),
                    str(path))


def load_joint_bag(path: str | Path, joints: Sequence[str], topic: str = '/joint_states'
                   ) -> JointLog:
    """``sensor_msgs/JointState`` messages of ``topic`` (time: ``header.stamp``).

    Velocity and effort are kept when every message carries them for the joints.
    """
    from ...core.bag import read_messages
    rows_t, pos, vel, eff = [], [], [], []
    topic = topic if topic.startswith('/') else '/' + topic
    for m in read_messages(path, {topic: 'sensor_msgs/msg/JointState'}):
        msg = m.msg
        names = list(msg.name)
        if not all(j in names for j in joints):
            continue
        idx = [names.index(j) for j in joints]
        rows_t.append(int(msg.header.stamp.sec) * 1e9 + int(msg.header.stamp.nanosec))
        pos.append([msg.position[i] for i in idx])
        vel.append([msg.velocity[i] for i in idx] if len(msg.velocity) == len(names) else None)
        eff.append([msg.effort[i] for i in idx] if len(msg.effort) == len(names) else None)
    if len(rows_t) < 3:
        raise TrajectoryError(f'{path}: {topic}: fewer than 3 JointState messages name every '
                              f'joint of {", ".join(joints)}')
    t = np.array(rows_t) * 1e-9
    order = np.argsort(t, kind='stable')
    keep = order[np.concatenate(([True], np.diff(t[order]) > 0))]
    check_time(t[keep], f'{path}: {topic}')              # issue 26: gaps, absurd spans

    def stack(rows: list) -> np.ndarray | None:
        if any(r is None for r in rows):
            return None
        return np.array(rows, dtype=float)[keep]
    return JointLog(t[keep], tuple(joints), np.array(pos, dtype=float)[keep], stack(vel),
                    stack(eff), str(path))


def resample_uniform(log: JointLog, tol: float = 1e-6) -> JointLog:
    """The log on a uniform grid at its median step (linear interpolation of every signal).

    Savitzky-Golay fits need uniform sampling; a log with jitter (DFKI's
    500 Hz runs have a few 3.5 ms steps) is resampled, an already uniform one
    is returned unchanged.
    """
    dt = np.diff(log.t)
    h = float(np.median(dt))
    if np.ptp(dt) <= tol * h:
        return log
    t = log.t[0] + h * np.arange(int(math.floor((log.t[-1] - log.t[0]) / h + 1e-9)) + 1)

    def interp(x: np.ndarray | None) -> np.ndarray | None:
        if x is None:
            return None
        return np.stack([np.interp(t, log.t, x[:, j]) for j in range(x.shape[1])], axis=1)
    return JointLog(t, log.joints, interp(np.unwrap(log.position, axis=0)), interp(log.velocity),
                    interp(log.effort), log.source)


def motion_derivatives(t: np.ndarray, z: np.ndarray, zd_measured: np.ndarray | None,
                       options: DerivativeOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Smoothed z, ż, z̈ at uniformly spaced samples.

    ``savgol``: Savitzky-Golay on positions (derivatives 0, 1, 2). ``velocity``:
    positions as above, ż and z̈ from the same fit of the measured velocities
    (derivatives 0 and 1): one differentiation fewer, far less noise on z̈.
    Zero-phase (a centred window), so torques are not delayed. ``smoother``:
    :func:`mbfg_ros.core.motion_smoother.smooth_motion` (zero-lag too; uses the measured
    velocities when logged).
    """
    if options.method == 'smoother':
        return smooth_motion(t, z, zd_measured, options.jerk, options.position_sigma,
                             options.velocity_sigma)
    w, p = int(options.window), int(options.order)
    if w < 3 or w % 2 == 0:
        raise MbfgError(f'Savitzky-Golay window must be odd and >= 3, got {w}')
    if not 1 <= p < w:
        raise MbfgError(f'Savitzky-Golay order must be in 1..{w - 1}, got {p}')
    if len(t) < w:
        raise MbfgError(f'{len(t)} samples: fewer than the Savitzky-Golay window ({w})')
    h = float(np.mean(np.diff(t)))

    def sg(x: np.ndarray, deriv: int) -> np.ndarray:
        return scipy.signal.savgol_filter(x, w, p, deriv=deriv, delta=h, axis=0, mode='interp')
    zs = sg(z, 0)
    if options.method == 'savgol':
        if p < 2:
            raise MbfgError('Savitzky-Golay order must be >= 2 for accelerations from positions')
        return zs, sg(z, 1), sg(z, 2)
    if options.method == 'velocity':
        if zd_measured is None:
            raise MbfgError("derivatives 'velocity' need measured velocities (give the "
                            "velocity columns, or use 'savgol')")
        return zs, sg(zd_measured, 0), sg(zd_measured, 1)
    raise MbfgError(f"unknown derivative method {options.method!r} (savgol, velocity, "
                    "smoother)")


def joint_coordinates(sys: System, joints: Sequence[str]) -> tuple[list[int], np.ndarray]:
    """For each revolute joint, the index of the relative coordinate equal to its angle, and the
    offset to add to the joint position (``q[c] = position + offset``)."""
    mech = sys.mech
    idx, off = [], []
    known = {j.name for j in mech.joints}
    for name in joints:
        if name not in known:
            raise MbfgError(f'{mech.source}: no joint {name!r} (joints: '
                            f'{", ".join(sorted(known)) or "none"})')
        j = mech.joint(name)
        c = mech.angle_coordinate(j.bodies) if j.type == 'revolute' else None
        if c is None:
            raise MbfgError(f'{mech.source}: joint {name!r}: inverse dynamics on measured motion '
                            'needs its angle as a coordinate: add relative_coordinates: '
                            '{type: RelativeAngle, bodies: [...]} for it')
        idx.append(c)
        off.append(j.offset)
    return idx, np.array(off)


def measured_states(sys: System, log: JointLog, options: DerivativeOptions = DerivativeOptions()
                    ) -> MeasuredInverse:
    """q, q̇, q̈ along a measured motion and the measured efforts in actuator order (``tau`` is
    left empty: (N, 0)). Steps 1-3 of the module docstring; the states depend only on the
    geometry, not on masses, friction or rotors."""
    log = resample_uniform(log)
    z_idx, offset = joint_coordinates(sys, log.joints)
    if len(z_idx) != sys.dof:
        raise MbfgError(f'{len(z_idx)} joints measured for {sys.dof} degrees of freedom')
    z = np.unwrap(log.position, axis=0) + offset
    z, zd, zdd = motion_derivatives(log.t, z, log.velocity, options)
    guess = _guess(sys, z[0], z_idx)
    q, qd, qdd = direct_kinematics(sys, log.t, z, z_idx, zd, zdd, q_guess=guess)
    effort = None
    if log.effort is not None:
        cols = []
        for a in sys.mech.actuators:
            if a.joint in log.joints:
                cols.append(log.effort[:, log.joints.index(a.joint)])
            else:
                cols.append(np.full(len(log.t), np.nan))
        effort = np.stack(cols, axis=1)
    return MeasuredInverse(log.t, q, qd, qdd, np.zeros((len(log.t), 0)), effort)


def measured_inverse(sys: System, log: JointLog, options: DerivativeOptions = DerivativeOptions()
                     ) -> MeasuredInverse:
    """Actuator torques along a measured motion (see the module docstring).

    ``log.joints`` must determine the pose (one per degree of freedom); the
    measured efforts, if any, are returned in actuator order for comparison
    (an actuator's effort is the column of its joint).
    """
    st = measured_states(sys, log, options)
    return st._replace(tau=torques(sys, st.q, st.qd, st.qdd))


def torques(sys: System, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """τ at every sample: ``B_act τ + Φqᵀλ = M q̈ − Q`` (seed 003 Eq. 6.110)."""
    return np.array([actuator_efforts(sys, q[k], qd[k], qdd[k]) for k in range(len(q))])


def _guess(sys: System, z0: np.ndarray, z_idx: Sequence[int]) -> np.ndarray:
    """The assembled pose moved to the first sample's coordinates (keeps the assembly branch
    for open chains whose joint angles are coordinates)."""
    from ..kinematics import solve_position
    return solve_position(sys.constraints, sys.q0,
                          {int(c): float(v) for c, v in zip(z_idx, z0)}, source=sys.mech.source)


def torque_fit(tau: np.ndarray, effort: np.ndarray, skip: int = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """RMSE and Pearson r per column of model torque against measured effort (rows ``skip:-skip``
    dropped, e.g. the Savitzky-Golay window's ends)."""
    s = slice(skip, len(tau) - skip if skip else None)
    a, b = tau[s], effort[s]
    rmse = np.sqrt(np.mean((a - b) ** 2, axis=0))
    r = np.array([np.corrcoef(a[:, j], b[:, j])[0, 1] for j in range(a.shape[1])])
    return rmse, r
