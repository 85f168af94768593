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

from ..core.bounded import remember
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


def _floats_within(v: np.ndarray | None, limit: float) -> bool:
    """No component of the 3-vector ``v`` (None: not given) beyond ±``limit``: the test
    ``any(|v| > limit)`` of :meth:`LimitGate.imu` negated (NaN never beyond), on three
    floats; False for another length."""
    if v is None:
        return True
    if v.shape != (3,):
        return False
    x, y, z = v.tolist()
    return not (abs(x) > limit or abs(y) > limit or abs(z) > limit)


class LimitGate:
    """Applies the joint limits and IMU ranges of ``desc`` (a system's ``description``) to
    measurement records."""

    def __init__(self, desc: EdgeDescription) -> None:
        self._limits = {j.name: j.limits for j in desc.joints}
        self._ranges = {s.name: (float(s.gyro_range), float(s.accel_range))
                        for s in desc.sensors}
        self._cache: dict[tuple[str, ...], tuple[np.ndarray, ...]] = {}

    def imu_within(self, rec: ImuMeasurement) -> bool:
        """Whether :meth:`imu` would leave ``rec`` as it is: no gyro or accel component
        beyond its range (NaN never beyond), on a 3-vector's three floats, the common
        case (issue 24: the live intake skips the gate then); False where it cannot say
        at once (another length: :meth:`imu` decides). True for a sensor without ranges."""
        rng = self._ranges.get(rec.sensor)
        if rng is None:
            return True
        return _floats_within(rec.gyro, rng[0]) and _floats_within(rec.accel, rng[1])

    def arrays(self, names: tuple[str, ...]) -> tuple[np.ndarray, ...]:
        """(lower, upper, |velocity|, |effort|) of the joints ``names``
        (:func:`limit_arrays`; unbounded for a name without limits), kept per name tuple:
        what :meth:`joint` compares a record with (a reader's own "all within" test
        takes them from here too)."""
        arr = self._cache.get(names)
        if arr is None:     # bounded (core.bounded): the names come from the wire
            arr = remember(self._cache, names,
                           limit_arrays([self._limits.get(nm) for nm in names]))
        return arr

    def joint(self, rec: JointMeasurement) -> tuple[JointMeasurement | None, int]:
        """(record with out-of-limit values set to NaN, or None if nothing is left;
        number of values out of limits)."""
        lo, hi, vmax, emax = self.arrays(tuple(rec.names))
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
