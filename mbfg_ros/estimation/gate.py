"""The physical-limit gate: readings outside the mechanism's limits never reach the core.

The edge (ROS conversions, bag replay) checks a message's structure once:
lengths, names, finiteness. This gate then checks what only the mechanism
knows: the YAML ``limits`` of each joint (position range, |velocity|,
|effort|) and each IMU's ``gyro_range`` / ``accel_range``. A value outside is
replaced by NaN ("not given") and counted; a record left with nothing usable is
rejected. 1e300 is finite, and a finite garbage effort taken as the motor
torque poisoned every later initialisation: this is where it stops.

Built once per mechanism; per record it does a dictionary look-up and a few
vectorised comparisons (limits per name tuple are cached).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from ..core.measurements import ImuMeasurement, JointMeasurement
from ..core.interface import EdgeDescription, JointLimits

__all__ = ['LimitGate', 'limit_arrays']


def limit_arrays(lims: Sequence[JointLimits | None]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, |velocity|, |effort|) of each joint's limits, unbounded where a joint
    has none (None): the one reading of joint limits for the gate and the command law."""
    inf = float('inf')
    return (np.array([lim.position[0] if lim else -inf for lim in lims], dtype=float),
            np.array([lim.position[1] if lim else inf for lim in lims], dtype=float),
            np.array([lim.velocity if lim else inf for lim in lims], dtype=float),
            np.array([lim.effort if lim else inf for lim in lims], dtype=float))


class LimitGate:
    """Applies the joint limits and IMU ranges of ``desc`` (a system's ``description``) to
    measurement records."""

    def __init__(self, desc: EdgeDescription) -> None:
        self._limits = {j.name: j.limits for j in desc.joints}
        self._ranges = {s.name: (s.gyro_range, s.accel_range) for s in desc.sensors}
        self._cache: dict[tuple[str, ...], tuple[np.ndarray, ...]] = {}

    def _arrays(self, names: tuple[str, ...]) -> tuple[np.ndarray, ...]:
        arr = self._cache.get(names)
        if arr is None:
            arr = limit_arrays([self._limits.get(nm) for nm in names])
            if len(self._cache) < 64:                  # bounded: names come from the wire
                self._cache[names] = arr
        return arr

    def joint(self, rec: JointMeasurement) -> tuple[JointMeasurement | None, int]:
        """(record with out-of-limit values set to NaN, or None if nothing is left;
        number of values out of limits)."""
        lo, hi, vmax, emax = self._arrays(tuple(rec.names))
        pos, vel, eff = rec.position, rec.velocity, rec.effort
        with np.errstate(invalid='ignore'):
            bad_p = (pos < lo) | (pos > hi) if pos.size else np.zeros(0, bool)
            bad_v = np.abs(vel) > vmax if vel.size else np.zeros(0, bool)
            bad_e = np.abs(eff) > emax if eff.size else np.zeros(0, bool)
        bad = int(bad_p.sum() + bad_v.sum() + bad_e.sum())
        if bad:
            rec = replace(rec, position=np.where(bad_p, np.nan, pos) if pos.size else pos,
                          velocity=np.where(bad_v, np.nan, vel) if vel.size else vel,
                          effort=np.where(bad_e, np.nan, eff) if eff.size else eff)
            if not any(np.isfinite(a).any() for a in (rec.position, rec.velocity,
                                                        rec.effort)):
                return None, bad
        return rec, bad

    def imu(self, rec: ImuMeasurement) -> tuple[ImuMeasurement | None, int]:
        """(record without the parts out of range, or None if nothing is left; parts dropped)."""
        rng = self._ranges.get(rec.sensor)
        if rng is None:
            return rec, 0
        gyro_range, accel_range = rng
        gyro, accel = rec.gyro, rec.accel
        bad = 0
        if gyro is not None and np.any(np.abs(gyro) > gyro_range):
            gyro, bad = None, bad + 1
        if accel is not None and np.any(np.abs(accel) > accel_range):
            accel, bad = None, bad + 1
        if not bad:
            return rec, 0
        if gyro is None and accel is None and rec.orientation is None:
            return None, bad
        return replace(rec, gyro=gyro, accel=accel,
                       gyro_var=rec.gyro_var if gyro is not None else None,
                       accel_var=rec.accel_var if accel is not None else None), bad
