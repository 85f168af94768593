"""Messages <-> plain records, for live rclpy messages and rosbags' dataclasses alike.

Reading is duck-typed: an rclpy ``sensor_msgs.msg.JointState`` and the
dataclass rosbags deserialises from a bag have the same attribute names, so
one function serves the node and the replay tool (DESIGN.md §2: same input,
same estimates). Writing goes through a small :class:`MessageKit`: one for
rclpy (:func:`rclpy_kit`) and one for a rosbags typestore
(:func:`rosbags_kit`); they differ only in how arrays and bytes are stored.

No rclpy import at module level: the replay tool imports this module on
machines without ROS.

Conventions (REP 103/145, sensor_msgs docs): a covariance whose first element
is -1 means "this field is not provided"; an all-zero covariance means
"unknown" (the configured noise is used). Planar orientation is the yaw of
the quaternion.
"""
from __future__ import annotations

import array
import functools
import importlib
import math
import struct
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..core.bounded import remember
from ..core.measurements import Estimate, ImuMeasurement, JointMeasurement
from .cdr import IMU_DOUBLES, ImuFields, JointStateFields, JointStateLayout, JointStateParser

__all__ = ['InputRejected', 'capped', 'LOG_CHARS', 'stamp_ns', 'ns_to_stamp_fields',
           'joint_state_to_record', 'JointStateReader',
           'imu_to_record', 'Reference', 'trajectory_to_reference', 'MessageKit',
           'rclpy_kit', 'rosbags_kit', 'TYPES', 'joint_state_msg', 'float_array_msg',
           'EstimateMessages', 'SerialisedMessage', 'SerialisedEstimateMessages',
           'diagnostics_msg', 'imu_msg', 'clock_msg', 'ExternalMessages',
           'EXTERNAL_TOPICS']

NS = 1_000_000_000

TYPES = {
    'JointState': 'sensor_msgs/msg/JointState',
    'Imu': 'sensor_msgs/msg/Imu',
    'Float64MultiArray': 'std_msgs/msg/Float64MultiArray',
    'DiagnosticArray': 'diagnostic_msgs/msg/DiagnosticArray',
    'JointTrajectory': 'trajectory_msgs/msg/JointTrajectory',
    'Clock': 'rosgraph_msgs/msg/Clock',
    'MarkerArray': 'visualization_msgs/msg/MarkerArray',
    'Bool': 'std_msgs/msg/Bool',
    'WrenchStamped': 'geometry_msgs/msg/WrenchStamped',
}
"""Short name -> ROS type name of every message the package reads or writes."""


@functools.lru_cache(maxsize=None)
def message_class(short: str) -> Any:
    """The rclpy message class of a short name in :data:`TYPES` (imported on first use)."""
    pkg, _, name = TYPES[short].split('/')
    return getattr(importlib.import_module(f'{pkg}.msg'), name)


def startup_error_text(exc: BaseException) -> str:
    """One line for a node that cannot start (bad YAML, parameter or file)."""
    if isinstance(exc, OSError):
        return f'{getattr(exc, "filename", "") or ""}: {exc.strerror or exc}'
    return str(exc)


LOG_CHARS = 200
"""Longest text taken from a message into a log line (issue 25: a peer's 1 MB joint name
must not reach the log whole)."""


def capped(value: Any, limit: int = LOG_CHARS) -> str:
    """``str(value)`` cut to ``limit`` characters, saying how many were left out."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f'{text[:limit]}... (+{len(text) - limit} characters)'


class InputRejected(ValueError):
    """A message that cannot be used at all; ``reason`` is a short counter key."""

    def __init__(self, reason: str, detail: str = '') -> None:
        self.reason = reason
        super().__init__(f'{reason}: {detail}' if detail else reason)


# ------------------------------------------------------------------ time

def stamp_ns(stamp: Any) -> int:
    """``builtin_interfaces/Time`` -> integer nanoseconds (exact, no float rounding)."""
    return int(stamp.sec) * NS + int(stamp.nanosec)


def ns_to_stamp_fields(t_ns: int) -> dict:
    """Integer nanoseconds -> ``{'sec': ..., 'nanosec': ...}`` (floor division, ns >= 0)."""
    sec, nanosec = divmod(int(t_ns), NS)
    return {'sec': int(sec), 'nanosec': int(nanosec)}


def _message_stamp(msg: Any, now_ns: int | None) -> int:
    return _checked_stamp(stamp_ns(msg.header.stamp), now_ns)


def _checked_stamp(t: int, now_ns: int | None) -> int:
    """A message's stamp ``t`` (ns); zero means ``now_ns`` (none given: rejected)."""
    if t == 0:
        if now_ns is None:
            raise InputRejected('no_stamp', 'header.stamp is zero')
        return int(now_ns)
    if t < 0:
        raise InputRejected('bad_stamp', f'negative stamp {t} ns')
    return t


# ------------------------------------------------------------------ reading

def _column(values: Sequence[float], n: int, field: str) -> np.ndarray:
    """A trajectory point's array: empty -> all NaN (not given); wrong length -> rejected;
    non-finite values NaN (a new array, never a view of the message)."""
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.size == 0:
        return np.full(n, np.nan)
    if arr.size != n:
        raise InputRejected('length_mismatch',
                            f'{field} has {arr.size} values for {n} names')
    return np.where(np.isfinite(arr), arr, np.nan)


_JOINT_FIELDS = ('position', 'velocity', 'effort')


@dataclass(frozen=True)
class _NamePlan:
    """What a JointState's name tuple means, worked out once per distinct tuple: the
    rejection (None: usable), the columns kept (None: all), the kept and unknown names, and
    the kept joints' limits as (3, kept) bounds of position, velocity and effort (None: the
    reader has no limits)."""

    rejected: InputRejected | None
    keep: np.ndarray | None
    names: tuple[str, ...]
    unknown: tuple[str, ...]
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None


@dataclass(frozen=True)
class _LayoutPlan:
    """What :meth:`JointStateReader.fast` does with the values of a
    :class:`~mbfg_ros.ros.cdr.JointStateLayout`, worked out once per layout: ``names`` the
    record's (the known ones, in message order); ``unknown`` the names it leaves out (their
    columns are not picked); ``counted`` the index in the tuple from which on it holds only
    counts and values; ``pick`` takes the (3, kept) values of the kept columns in row order
    from the unpacked tuple with a NaN appended (a sequence not given reads that NaN);
    ``checks`` (index, lower, upper) of every kept value with a finite bound."""

    names: tuple[str, ...]
    counted: int                        # index of the first count: counts and values on
    pick: Callable[[tuple], tuple]
    checks: tuple[tuple[int, float, float], ...]
    unknown: tuple[str, ...]


_NAN = (math.nan,)


class JointStateReader:
    """:func:`joint_state_to_record` for one set of ``known`` joint names, with the checks
    of a name tuple (empty, repeated, unknown names, the columns kept) worked out once per
    distinct tuple (names rarely change; at most :attr:`PLANS` kept, a peer sending ever
    new names costs the work, never memory) and the values checked as one (3, n) array.

    Reads an rclpy or rosbags message, or the :class:`~mbfg_ros.ros.cdr.JointStateFields`
    read from its bytes: the same doubles in, the same record out (live = replay).
    ``limits``: a name tuple's (lower, upper, |velocity|, |effort|) arrays
    (:func:`~mbfg_ros.estimation.gate.limit_arrays`), worked out with its plan, so that
    :meth:`checked` tells whether the limit gate has anything to do; :meth:`fast` does
    the same for bytes of a layout seen before, in a fraction of the time.
    """

    PLANS = 64

    def __init__(self, known: Iterable[str] | None = None,
                 limits: Callable[[tuple[str, ...]], tuple[np.ndarray, ...]] | None = None
                 ) -> None:
        if known is not None and not isinstance(known, (set, frozenset)):
            known = frozenset(known)
        self.known = known
        self._limits = limits
        self._plans: dict[tuple[str, ...], _NamePlan] = {}
        self._layouts: dict[JointStateLayout, _LayoutPlan | None] = {}

    def _plan(self, names: tuple[str, ...]) -> _NamePlan:
        plan = self._plans.get(names)
        if plan is not None:
            return plan
        n, known = len(names), self.known
        rejected, keep, kept, unknown = None, None, names, ()
        if n == 0:
            rejected = InputRejected('empty', 'JointState without names')
        elif len(set(names)) != n:
            rejected = InputRejected('repeated_names', f'repeated joint names {capped(names)}')
        elif known is not None and not known.issuperset(names):
            cols = [i for i, name in enumerate(names) if name in known]
            keep = np.array(cols, dtype=np.intp)
            kept = tuple(names[i] for i in cols)
            unknown = tuple(name for name in names if name not in known)
        lower = upper = None
        if rejected is None and self._limits is not None:
            # |v| > vmax is v > vmax or v < -vmax (IEEE: the same for NaN, never out)
            lo, hi, vmax, emax = self._limits(kept)
            lower, upper = np.stack((lo, -vmax, -emax)), np.stack((hi, vmax, emax))
        plan = _NamePlan(rejected, keep, kept, unknown, lower, upper)
        remember(self._plans, names, plan, self.PLANS)
        return plan

    def _layout_plan(self, layout: JointStateLayout) -> _LayoutPlan | None:
        """The :class:`_LayoutPlan` of ``layout``, or None where :meth:`fast` cannot
        decide alone: no limits, a name tuple rejected or without a known name, counts
        other than 0 or the number of names, no value at all. Names the model does not know
        (a gripper's fingers, a mobile base's wheels beside the arm) only leave their
        columns out of ``pick``, as :meth:`checked`'s ``keep`` does."""
        if layout in self._layouts:
            return self._layouts[layout]
        plan, n, counts = self._plan(layout.names), len(layout.names), layout.counts
        fast = None
        if (self._limits is not None and plan.rejected is None and plan.names
                and set(counts) <= {0, n} and any(counts)):
            cols = range(n) if plan.keep is None else plan.keep.tolist()
            nan = layout.starts[2] + counts[2]          # the NaN appended to the tuple
            pick = [start + j if count else nan
                    for start, count in zip(layout.starts, counts) for j in cols]
            checks = tuple((pick[k], lo, hi) for k, (lo, hi) in enumerate(
                zip(plan.lower.ravel().tolist(), plan.upper.ravel().tolist()))
                if pick[k] != nan and not (lo == -math.inf and hi == math.inf))
            fast = _LayoutPlan(plan.names, layout.starts[0] - 1, itemgetter(*pick), checks,
                               plan.unknown)
        return remember(self._layouts, layout, fast, self.PLANS)

    def fast(self, buf: bytes, parser: JointStateParser
             ) -> tuple[int, JointMeasurement, tuple[str, ...]] | None:
        """(stamp ns, record, unknown names) of the JointState bytes ``buf`` when they have
        a layout ``parser`` learnt (:meth:`~mbfg_ros.ros.cdr.JointStateParser.layout`)
        whose names are usable, at least one of them known, and every value is finite (the
        unknown joints' too) and every known joint's within the limits; None otherwise (the
        caller takes :meth:`checked`'s path, which says what is wrong). The record and the
        unknown names equal :meth:`checked`'s bit for bit (the same doubles, the same kept
        columns; issue 24: one ``struct`` call, the checks on Python floats, one array:
        ~2.7 µs for the four-bar's message where the parser and :meth:`checked` take
        ~6.4), and :meth:`checked` would count no non-finite value: an unknown joint's NaN
        counts there (``nonfinite_values``), so such a message takes its path. A stamp of
        zero takes :meth:`checked`'s path too."""
        layout = parser.layout(buf)
        if layout is None:
            return None
        fast = self._layout_plan(layout)
        if fast is None:
            return None
        values = layout.read(buf)
        if values is None:
            return None
        t = values[0] * NS + values[1]
        # a NaN or infinity makes the sum non-finite (an overflow too: checked() then);
        # the sum covers the unknown joints' values too (checked() counts theirs)
        if t <= 0 or not math.isfinite(sum(values[fast.counted:])):
            return None
        for i, lo, hi in fast.checks:
            x = values[i]
            if x < lo or x > hi:
                return None
        v = np.array(fast.pick(values + _NAN)).reshape(3, -1)
        return t, JointMeasurement(t / NS, fast.names, v[0], v[1], v[2]), fast.unknown

    def __call__(self, msg: Any, now_ns: int | None = None
                 ) -> tuple[int, JointMeasurement, tuple[str, ...], int]:
        """JointState -> (stamp ns, record, unknown names, number of non-finite values);
        see :func:`joint_state_to_record`."""
        return self.checked(msg, now_ns)[:4]

    def checked(self, msg: Any, now_ns: int | None = None
                ) -> tuple[int, JointMeasurement, tuple[str, ...], int, bool]:
        """:meth:`__call__` and whether every value lies within the limits the reader was
        given (``limits``: the (lower, upper, |velocity|, |effort|) arrays of
        :func:`~mbfg_ros.estimation.gate.limit_arrays` for a name tuple), so that the
        limit gate has nothing to do (issue 24: one comparison of the (3, n) values
        instead of the gate's); False without limits."""
        if isinstance(msg, JointStateFields):
            names = msg.name
            t = _checked_stamp(msg.stamp[0] * NS + msg.stamp[1], now_ns)
            raw = (msg.position, msg.velocity, msg.effort)
        else:
            names = tuple(map(str, msg.name))
            t = _message_stamp(msg, now_ns)
            raw = None
        plan = self._plan(names)
        if plan.rejected is not None:
            raise plan.rejected
        if raw is None:
            raw = tuple(np.asarray(v, dtype=float).reshape(-1)
                        for v in (msg.position, msg.velocity, msg.effort))
        n = len(names)
        v = np.full((3, n), np.nan)
        given = 0
        for i, a in enumerate(raw):
            if a.size:
                if a.size != n:
                    raise InputRejected('length_mismatch',
                                        f'{_JOINT_FIELDS[i]} has {a.size} values for {n} names')
                v[i] = a
                given += 1
        finite = np.isfinite(v)
        usable = int(np.count_nonzero(finite))      # (count_nonzero: ~0.2 µs, .any() ~0.7)
        nonfinite = given * n - usable
        if nonfinite:
            v[~finite] = np.nan
        if plan.keep is not None:
            v, finite = v[:, plan.keep], finite[:, plan.keep]
            usable = int(np.count_nonzero(finite))
        if not plan.names or not usable:
            raise InputRejected('no_usable_values',
                                'no finite value for a known joint' if plan.names else
                                f'no known joint among {plan.unknown}')
        within = plan.lower is not None and not (np.count_nonzero(v < plan.lower)
                                                 or np.count_nonzero(v > plan.upper))
        return t, JointMeasurement(t / NS, plan.names, v[0], v[1], v[2]), plan.unknown, \
            nonfinite, within


def joint_state_to_record(msg: Any, known: Iterable[str] | None = None,
                          now_ns: int | None = None
                          ) -> tuple[int, JointMeasurement, tuple[str, ...], int]:
    """JointState -> (stamp ns, record, unknown names, number of non-finite values).

    position -> encoder, velocity -> rate, effort -> known applied torque.
    Names not in ``known`` (a set is used as it is) are dropped from the record and
    returned so the caller can warn once. Non-finite values become NaN ("not given").
    A caller converting a stream keeps one :class:`JointStateReader` (its checks per name
    tuple cached).

    :raises InputRejected: wrong array lengths, repeated names, no usable value.
    """
    return JointStateReader(known)(msg, now_ns)


_IMU_PARTS = (('orientation_covariance', 4), ('angular_velocity_covariance', 16),
              ('linear_acceleration_covariance', 28))


_IMU_SPANS = ((0, 4), (4, 13), (13, 16), (16, 25), (25, 28), (28, 37))
"""The parts of :func:`_imu_values`: quaternion, its covariance, angular velocity, its
covariance, linear acceleration, its covariance."""


def _imu_values(msg: Any) -> np.ndarray:
    """The :data:`~mbfg_ros.ros.cdr.IMU_DOUBLES` float64 of an Imu message after its header
    (the layout :func:`~mbfg_ros.ros.cdr.read_imu` reads from the bytes); a covariance
    without values (a duck-typed message) reads as all zero ("unknown")."""
    a = np.zeros(IMU_DOUBLES)
    o, g, f = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    a[0:4] = (o.x, o.y, o.z, o.w)
    a[13:16] = (g.x, g.y, g.z)
    a[25:28] = (f.x, f.y, f.z)
    for field, at in _IMU_PARTS:
        cov = np.asarray(getattr(msg, field), dtype=float).reshape(-1)
        if cov.size == 9:
            a[at:at + 9] = cov
        elif cov.size:
            raise InputRejected('length_mismatch', f'{field} has {cov.size} values, not 9')
    return a


def _variances(a: np.ndarray, values: list, lo: int, finite: bool) -> np.ndarray | None:
    """The diagonal (3,) of the 3x3 row-major covariance at ``a[lo:lo + 9]`` (``values``:
    ``a`` as a list), or None: not all ``finite``, all zero ("unknown"), or a diagonal
    element that is not positive."""
    if not finite or not any(values[lo:lo + 9]):
        return None
    if values[lo] > 0.0 and values[lo + 4] > 0.0 and values[lo + 8] > 0.0:
        return a[lo:lo + 9:4]
    return None


def imu_to_record(msg: Any, sensor: str, now_ns: int | None = None
                  ) -> tuple[int, ImuMeasurement]:
    """Imu -> (stamp ns, record) for the YAML sensor ``sensor``.

    angular_velocity -> gyro (3,), linear_acceleration -> accelerometer (3,,
    specific force in the sensor frame), orientation -> the unit quaternion only
    when orientation_covariance[0] != -1. A part whose covariance[0] is -1 or
    whose values are not all finite is left out; variances are the covariance
    diagonals (None when not all positive). ``msg``: an rclpy or rosbags message or
    the :class:`~mbfg_ros.ros.cdr.ImuFields` read from its bytes (one path for both).
    The checks run on the values as Python floats (issue 24: 37 numbers, cheaper than
    numpy calls of ~0.5 µs each); the record's arrays are views of ``a``, as before.

    :raises InputRejected: nothing usable in the message.
    """
    if isinstance(msg, ImuFields):
        t = _checked_stamp(msg.stamp[0] * NS + msg.stamp[1], now_ns)
        a = msg.values
    else:
        t = _message_stamp(msg, now_ns)
        a = _imu_values(msg)
    values = a.tolist()
    # a NaN or infinity makes the sum non-finite (an overflow too: then each part is
    # looked at)
    if math.isfinite(sum(values)):
        quat_ok = ocov_ok = gyro_ok = gcov_ok = accel_ok = acov_ok = True
    else:
        quat_ok, ocov_ok, gyro_ok, gcov_ok, accel_ok, acov_ok = (
            all(map(math.isfinite, values[lo:hi])) for lo, hi in _IMU_SPANS)
    gyro = a[13:16] if values[16] != -1.0 and gyro_ok else None
    accel = a[25:28] if values[28] != -1.0 and accel_ok else None
    quat = None
    if values[4] != -1.0:
        q = a[0:4]
        # np.linalg.norm's own arithmetic for a 1-D float64 array (sqrt of q.dot(q)),
        # without its ~1 µs of checks
        norm = math.sqrt(q.dot(q)) if quat_ok else 0.0
        if norm > 1e-6:
            quat = q / norm
    if gyro is None and accel is None and quat is None:
        raise InputRejected('no_usable_values', f'Imu for {sensor!r} has no finite field')
    rec = ImuMeasurement(
        t / NS, sensor, gyro, accel, quat,
        gyro_var=_variances(a, values, 16, gcov_ok) if gyro is not None else None,
        accel_var=_variances(a, values, 28, acov_ok) if accel is not None else None,
        orientation_var=_variances(a, values, 4, ocov_ok) if quat is not None else None)
    return t, rec


@dataclass(frozen=True)
class Reference:
    """Desired motion of named joints: piecewise (position, velocity, acceleration).

    ``t`` (K,) absolute times in seconds, arrays (K, J); NaN where not given.
    """

    names: tuple[str, ...]
    t: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, velocity, acceleration) at ``t``: linear interpolation, held at the ends."""
        k = len(self.t)
        if k == 1 or t <= self.t[0]:
            return self.position[0], self.velocity[0], self.acceleration[0]
        if t >= self.t[-1]:
            return self.position[-1], self.velocity[-1], self.acceleration[-1]
        i = int(np.searchsorted(self.t, t, side='right')) - 1
        w = (t - self.t[i]) / (self.t[i + 1] - self.t[i])
        return tuple((1 - w) * a[i] + w * a[i + 1]  # type: ignore[return-value]
                     for a in (self.position, self.velocity, self.acceleration))


def trajectory_to_reference(msg: Any, now_ns: int | None = None) -> Reference:
    """JointTrajectory -> :class:`Reference` (header.stamp + time_from_start per point).

    A zero header stamp means "start now" (``now_ns``), as in ros2_control.

    :raises InputRejected: no points, lengths that do not match the names,
        time_from_start not increasing, non-finite positions.
    """
    names = tuple(str(n) for n in msg.joint_names)
    if not names or len(set(names)) != len(names):
        raise InputRejected('bad_reference', f'joint_names {capped(names)}')
    t0 = stamp_ns(msg.header.stamp)
    if t0 == 0:
        t0 = int(now_ns or 0)
    pts = list(msg.points)
    if not pts:
        raise InputRejected('bad_reference', 'no points')
    n = len(names)
    t, pos, vel, acc = [], [], [], []
    for p in pts:
        t.append((t0 + stamp_ns(p.time_from_start)) / NS)
        pos.append(_column(p.positions, n, 'positions'))
        vel.append(np.nan_to_num(_column(p.velocities, n, 'velocities')))
        acc.append(np.nan_to_num(_column(p.accelerations, n, 'accelerations')))
    pos_a = np.array(pos)
    if not np.all(np.isfinite(pos_a)):
        raise InputRejected('bad_reference', 'positions missing or not finite')
    if np.any(np.diff(t) <= 0):
        raise InputRejected('bad_reference', 'time_from_start not increasing')
    return Reference(names, np.array(t), pos_a, np.array(vel), np.array(acc))


# ------------------------------------------------------------------ writing

@dataclass(frozen=True)
class MessageKit:
    """How to build messages: ``make(type, **fields)``, array and byte converters."""

    make: Callable[..., Any]
    floats: Callable[[Any], Any]        # unbounded float64[] field
    fixed: Callable[[Any], Any]         # fixed-size float64[N] field
    byte: Callable[[int], Any]


def _float64_array(values: Any) -> Any:
    """An ``array('d')`` of ``values`` (rclpy's float64[] field), copied as raw bytes."""
    a = array.array('d')
    a.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return a


def rclpy_kit() -> MessageKit:
    """Kit building rclpy message objects (imports the message packages)."""
    cache: dict[str, Any] = {}

    def make(type_name: str, **fields: Any) -> Any:
        cls = cache.get(type_name)
        if cls is None:
            pkg, _, name = type_name.split('/')
            cls = cache[type_name] = getattr(importlib.import_module(f'{pkg}.msg'), name)
        return cls(**fields)

    return MessageKit(make, _float64_array,
                      lambda v: np.asarray(v, dtype=np.float64).reshape(-1),
                      lambda v: bytes([int(v)]))


def rosbags_kit(typestore: Any) -> MessageKit:
    """Kit building rosbags dataclasses of ``typestore`` (for serialisation to a bag)."""

    def make(type_name: str, **fields: Any) -> Any:
        return typestore.types[type_name](**fields)

    return MessageKit(make, lambda v: np.asarray(v, dtype=np.float64).reshape(-1),
                      lambda v: np.asarray(v, dtype=np.float64).reshape(-1), int)


def _header(kit: MessageKit, t_ns: int, frame_id: str = '') -> Any:
    return kit.make('std_msgs/msg/Header',
                    stamp=kit.make('builtin_interfaces/msg/Time', **ns_to_stamp_fields(t_ns)),
                    frame_id=frame_id)


def joint_state_msg(kit: MessageKit, t_ns: int, names: Sequence[str],
                    position: Sequence[float] = (), velocity: Sequence[float] = (),
                    effort: Sequence[float] = ()) -> Any:
    """A sensor_msgs/JointState."""
    return kit.make(TYPES['JointState'], header=_header(kit, t_ns), name=list(names),
                    position=kit.floats(position), velocity=kit.floats(velocity),
                    effort=kit.floats(effort))


EXTERNAL_TOPICS = {'~/external_torques': 'JointState', '~/external_torques_sigma': 'JointState',
                   '~/contact': 'Bool', '~/external_wrench': 'WrenchStamped'}
"""The external-torque outputs (docs/external-torques.md) and their short types."""


def wrench_msg(kit: MessageKit, t_ns: int, frame_id: str, w: Sequence[float]) -> Any:
    """A geometry_msgs/WrenchStamped of ``w = [n; f]`` (torque first, as the Jacobian rows)."""
    v3 = 'geometry_msgs/msg/Vector3'
    return kit.make(TYPES['WrenchStamped'], header=_header(kit, t_ns, frame_id),
                    wrench=kit.make('geometry_msgs/msg/Wrench',
                                    force=kit.make(v3, x=float(w[3]), y=float(w[4]),
                                                   z=float(w[5])),
                                    torque=kit.make(v3, x=float(w[0]), y=float(w[1]),
                                                    z=float(w[2]))))


def float_array_msg(kit: MessageKit, data: Sequence[float]) -> Any:
    """A std_msgs/Float64MultiArray, empty layout (as forward_command_controller reads it)."""
    layout = kit.make('std_msgs/msg/MultiArrayLayout', dim=[], data_offset=0)
    return kit.make(TYPES['Float64MultiArray'], layout=layout, data=kit.floats(data))


def imu_msg(kit: MessageKit, t_ns: int, frame_id: str, gyro: Sequence[float],
            accel: Sequence[float], orientation: Sequence[float] | None = None,
            gyro_var: float = 0.0, accel_var: float = 0.0, orientation_var: float = 0.0) -> Any:
    """A sensor_msgs/Imu from 3-vectors and a quaternion ``(x, y, z, w)``
    (orientation_covariance[0] = -1 when ``orientation`` is None)."""
    def vec(x: float, y: float, z: float) -> Any:
        return kit.make('geometry_msgs/msg/Vector3', x=float(x), y=float(y), z=float(z))

    def diag(v: float) -> Any:
        return kit.fixed(np.diag([v, v, v]).reshape(-1))

    if orientation is None:
        quat = kit.make('geometry_msgs/msg/Quaternion', x=0.0, y=0.0, z=0.0, w=1.0)
        o_cov = kit.fixed(np.r_[-1.0, np.zeros(8)])
    else:
        x, y, z, w = (float(v) for v in orientation)
        quat = kit.make('geometry_msgs/msg/Quaternion', x=x, y=y, z=z, w=w)
        o_cov = diag(orientation_var)
    return kit.make(TYPES['Imu'], header=_header(kit, t_ns, frame_id), orientation=quat,
                    orientation_covariance=o_cov, angular_velocity=vec(*gyro),
                    angular_velocity_covariance=diag(gyro_var),
                    linear_acceleration=vec(*accel),
                    linear_acceleration_covariance=diag(accel_var))


def clock_msg(kit: MessageKit, t_ns: int) -> Any:
    """A rosgraph_msgs/Clock."""
    return kit.make(TYPES['Clock'],
                    clock=kit.make('builtin_interfaces/msg/Time', **ns_to_stamp_fields(t_ns)))


def diagnostics_msg(kit: MessageKit, t_ns: int, name: str, hardware_id: str, level: int,
                    message: str, values: dict) -> Any:
    """A diagnostic_msgs/DiagnosticArray with one status (level 0 OK, 1 WARN, 2 ERROR)."""
    kvs = [kit.make('diagnostic_msgs/msg/KeyValue', key=str(k), value=str(v))
           for k, v in values.items()]
    status = kit.make('diagnostic_msgs/msg/DiagnosticStatus', level=kit.byte(level), name=name,
                      message=message, hardware_id=hardware_id, values=kvs)
    return kit.make(TYPES['DiagnosticArray'], header=_header(kit, t_ns), status=[status])


class EstimateMessages:
    """The estimator's per-tick output messages (``~/joint_states``, ``~/state``,
    ``~/state_stddev``, the torque command) for one kit: built once, refilled in place by
    :meth:`fill` (no per-tick allocation of message objects, names or layouts). The one
    builder of the live node (rclpy kit, published) and the replay (rosbags kit, serialised
    into the bag at once), issue 23."""

    def __init__(self, kit: MessageKit, joint_names: Sequence[str],
                 coordinate_names: Sequence[str]) -> None:
        self.kit = kit
        self.joints = joint_state_msg(kit, 0, joint_names)
        self.state = joint_state_msg(kit, 0, coordinate_names)
        self.stddev = joint_state_msg(kit, 0, coordinate_names)
        self.command = float_array_msg(kit, ())
        self.by_topic = {'~/joint_states': self.joints, '~/state': self.state,
                         '~/state_stddev': self.stddev, '~/torque_commands': self.command}

    def fill(self, t_ns: int, est: Estimate, joint_effort: np.ndarray,
             command: np.ndarray | None, stddev: bool = True) -> None:
        """Stamp ``t_ns``: joint positions, rates and ``joint_effort`` by joint; q, q̇ and
        their standard deviations by coordinate; ``command`` (None: left as it was);
        ``stddev`` False: the σ message left as it was (a predicted estimate, whose σ's
        the live node does not publish)."""
        f = self.kit.floats
        sec, nanosec = divmod(int(t_ns), NS)
        for msg in (self.joints, self.state, self.stddev) if stddev else (self.joints,
                                                                         self.state):
            msg.header.stamp.sec = sec
            msg.header.stamp.nanosec = nanosec
        self.joints.position = f(est.joint_position)
        self.joints.velocity = f(est.joint_velocity)
        self.joints.effort = f(joint_effort)
        self.state.position, self.state.velocity = f(est.q), f(est.qd)
        if stddev:
            self.stddev.position, self.stddev.velocity = f(est.q_std), f(est.qd_std)
        if command is not None:
            self.command.data = f(command)


_STAMP = struct.Struct('<iI')
_MARK_STAMP = (1_234_567_891, 987_654_321)      # a stamp the serialised bytes show once


class SerialisedMessage:
    """One output message kept as its serialised bytes (issue 24): serialised once
    (``serialize``, rclpy's) with a recognisable stamp and recognisable values in its
    float64 sequences ``fields`` of ``sizes`` values, whose places in the bytes are then
    found; per tick :meth:`set_stamp` and :attr:`views` (numpy views of those places)
    change them in place, and ``bytes(self.buf)`` is the message for rclpy's
    ``publish`` (``publish_raw``: no Python message converted, nothing serialised).

    :raises ValueError: a place not found exactly once (a serialisation this does not
        understand: the caller publishes message objects instead).
    """

    def __init__(self, msg: Any, fields: Sequence[str], sizes: Sequence[int],
                 serialize: Callable[[Any], bytes]) -> None:
        header = getattr(msg, 'header', None)
        if header is not None:
            header.stamp.sec, header.stamp.nanosec = _MARK_STAMP
        marks = []
        for k, (field, n) in enumerate(zip(fields, sizes)):
            mark = -np.pi * 1e300 / (2.0 + np.arange(n) + 100.0 * k)
            setattr(msg, field, _float64_array(mark))
            marks.append(mark.astype('<f8').tobytes())
        self.buf = bytearray(serialize(msg))

        def place(pattern: bytes) -> int:
            if self.buf.count(pattern) != 1:
                raise ValueError('serialised message: a field not found once')
            return self.buf.find(pattern)

        self._stamp_at = place(_STAMP.pack(*_MARK_STAMP)) if header is not None else -1
        self.views = [np.frombuffer(self.buf, '<f8', len(m) // 8, place(m)) if m else
                      np.zeros(0) for m in marks]

    def set_stamp(self, sec: int, nanosec: int) -> None:
        """The header stamp (a message with a header)."""
        _STAMP.pack_into(self.buf, self._stamp_at, sec, nanosec)


class SerialisedEstimateMessages:
    """:class:`EstimateMessages` as serialised bytes for the live node (issue 24):
    ``~/joint_states``, ``~/state``, ``~/state_stddev`` and the torque command, each a
    :class:`SerialisedMessage` whose values :meth:`fill` writes in place; the bytes carry
    the same doubles :class:`EstimateMessages` would (one message per topic, as before).

    :raises ValueError: a serialisation :class:`SerialisedMessage` does not understand.
    """

    def __init__(self, joint_names: Sequence[str], coordinate_names: Sequence[str],
                 command_size: int) -> None:
        from rclpy.serialization import serialize_message

        msgs = EstimateMessages(rclpy_kit(), joint_names, coordinate_names)
        nj, nc = len(joint_names), len(coordinate_names)
        self.joints = SerialisedMessage(msgs.joints, _JOINT_FIELDS, (nj, nj, nj),
                                        serialize_message)
        self.state = SerialisedMessage(msgs.state, _JOINT_FIELDS[:2], (nc, nc),
                                       serialize_message)
        self.stddev = SerialisedMessage(msgs.stddev, _JOINT_FIELDS[:2], (nc, nc),
                                        serialize_message)
        self.command = SerialisedMessage(msgs.command, ('data',), (command_size,),
                                         serialize_message)

    def fill(self, t_ns: int, est: Estimate, joint_effort: np.ndarray,
             command: np.ndarray | None, stddev: bool = True) -> bool:
        """As :meth:`EstimateMessages.fill`; False (nothing usable) when a value array's
        size is not the one the bytes were made for, or the stamp is no int32 seconds (the
        caller builds messages then)."""
        sec, nanosec = divmod(int(t_ns), NS)
        rows = ((self.joints, (est.joint_position, est.joint_velocity, joint_effort)),
                (self.state, (est.q, est.qd)))
        if stddev:
            rows += ((self.stddev, (est.q_std, est.qd_std)),)
        if command is not None:
            rows += ((self.command, (command,)),)
        try:
            for msg, values in rows:
                for view, v in zip(msg.views, values):
                    view[...] = v
                if msg is not self.command:
                    msg.set_stamp(sec, nanosec)
        except (ValueError, struct.error):
            return False
        return True


class ExternalMessages:
    """The external-torque messages (:data:`EXTERNAL_TOPICS`, docs/external-torques.md) for
    one kit: built once, refilled in place by :meth:`fill` (as :class:`EstimateMessages`);
    ``by_topic`` holds the wrench only when ``link`` is given."""

    def __init__(self, kit: MessageKit, names: Sequence[str], link: str) -> None:
        self.kit = kit
        self.torques = joint_state_msg(kit, 0, names)
        self.sigma = joint_state_msg(kit, 0, names)
        self.contact = kit.make(TYPES['Bool'], data=False)
        self.wrench = wrench_msg(kit, 0, link, np.zeros(6))
        self.by_topic = {'~/external_torques': self.torques,
                         '~/external_torques_sigma': self.sigma, '~/contact': self.contact}
        if link:
            self.by_topic['~/external_wrench'] = self.wrench

    def fill(self, t_ns: int, ext: Any) -> None:
        """Stamp ``t_ns``: ``effort`` = τ_ext and σ, the flag and the wrench ``[n; f]``
        (an :class:`~mbfg_ros.estimation.external.ExternalOutput`)."""
        f = self.kit.floats
        sec, nanosec = divmod(int(t_ns), NS)
        for msg in (self.torques, self.sigma, self.wrench):
            msg.header.stamp.sec = sec
            msg.header.stamp.nanosec = nanosec
        self.torques.effort, self.sigma.effort = f(ext.tau), f(ext.sigma)
        self.contact.data = bool(ext.contact)
        if ext.wrench is not None:
            n, fo = self.wrench.wrench.torque, self.wrench.wrench.force
            n.x, n.y, n.z, fo.x, fo.y, fo.z = (float(v) for v in ext.wrench)
