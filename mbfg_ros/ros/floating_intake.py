"""The floating-base node's input path and ticks, without ROS (issue 28 item 3).

:class:`FloatingDriver` takes the messages (duck-typed: rclpy's classes and rosbags'
dataclasses have the same fields) of ``joint_states`` (sensor_msgs/JointState), the base
IMU (sensor_msgs/Imu), each foot's contact (std_msgs/Bool) and force
(geometry_msgs/WrenchStamped); checks each once (stamp, names, lengths, finiteness, frame,
time) and queues it as a reading, or counts why not (a fixed set of counters: bad input
never raises). :meth:`FloatingDriver.advance` runs a tick: the readings stamped up to the
*data horizon* (the newest stamp every flowing stream, joint_states and IMU, has reached)
go to the :class:`~mbfg_ros.estimation.floating.FloatingEstimator` in stamp order, then
its ``tick`` at the horizon. So an estimate never waits for a tick grid and never runs
ahead of a stream; a stream silent for ``sensor_timeout`` (node clock) stops holding the
ticks.

* **IMU frame.** ``header.frame_id`` must be the base frame or a frame fixed to it in the
  URDF (merged fixed links): the readings are rotated into the base axes and the
  accelerometer's specific force moved to the base origin with the centripetal term
  ``−ω × (ω × r)`` (the ``α × r`` term is not: no angular acceleration is measured; mount
  the IMU near the base origin or give its frame as base_link). Anything else is rejected
  (``input.rejected.frame``).
* **Contacts.** A Bool has no stamp: it takes the newest joint_states or IMU stamp
  received before it (the sensor clock, not the node clock, so a ``/clock`` that lags
  the data does not shift contact switches). A foot force (or Bool) whose sample's tick
  already ran goes into the next tick (at most one tick late) rather than being dropped;
  one older than ``sensor_timeout`` is (``input.rejected.late``).
* **Time.** Stamps are integer nanoseconds; the estimator gets seconds since the first
  reading after a (re-)start (float precision). Stamps going back by more than
  :data:`BACKWARDS_S` on joint_states :data:`BACKWARDS_COUNT` times in a row (a bag loop,
  a clock jump) reset the estimator (``resets.backwards``); a single late reading is
  dropped (``input.rejected.late``).
* **Failures.** An exception from the estimator is counted (``estimator.errors``) and a
  failed tick resets it (``resets.error``); the node keeps running.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ['FloatingDriver', 'COUNTER_KEYS', 'STREAMS', 'BACKWARDS_S', 'BACKWARDS_COUNT']

NS = 1_000_000_000
STREAMS = ('joint_states', 'imu', 'contact', 'wrench')
REJECT_REASONS = ('joint_names', 'lengths', 'nonfinite', 'frame', 'stamp', 'future', 'late',
                  'queue_full', 'foot')
COUNTER_KEYS = (tuple(f'input.{s}.used' for s in STREAMS)
                + tuple(f'input.rejected.{r}' for r in REJECT_REASONS)
                + ('ticks.run', 'ticks.no_estimate', 'estimator.errors', 'resets.backwards',
                   'resets.manual', 'resets.error'))
"""Every counter of :attr:`FloatingDriver.counters` (a fixed set, all present from start)."""

BACKWARDS_S = 0.5
BACKWARDS_COUNT = 10

_JOINTS, _IMU, _CONTACT, _FORCE = 0, 1, 2, 3
_ORDER = {_CONTACT: 0, _FORCE: 0, _JOINTS: 1, _IMU: 2}


def _stamp_ns(msg: Any) -> int:
    s = msg.header.stamp
    return int(s.sec) * NS + int(s.nanosec)


class FloatingDriver:
    """Messages in, :class:`FloatingEstimate` out (module docstring).

    :param estimator: a ``FloatingEstimator`` (its ``joint_names`` and ``contact_names``).
    :param base_frames: frames fixed to the base, name -> (4, 4) pose in the base frame
        (the base frame itself included, identity): the accepted IMU ``frame_id``.
    :param feet: the feet read (contact names of the estimator).
    """

    def __init__(self, estimator: Any, base_frames: dict[str, np.ndarray],
                 feet: Sequence[str], sensor_timeout: float = 0.1,
                 future_tolerance: float = 0.25, max_queue: int = 10000) -> None:
        self.estimator = estimator
        self.joint_names = tuple(estimator.joint_names)
        self.contact_names = tuple(estimator.contact_names)
        self.feet = tuple(feet)
        self._feet_set = frozenset(self.feet)
        self.n = len(self.joint_names)
        self._frames = {name: (np.asarray(T, float)[:3, :3].copy(),
                               np.asarray(T, float)[:3, 3].copy(),
                               bool(np.allclose(T, np.eye(4), atol=1e-12)))
                        for name, T in base_frames.items()}
        self.timeout_ns = int(sensor_timeout * NS)
        self.future_ns = int(future_tolerance * NS)
        self.max_queue = int(max_queue)
        self.counters = dict.fromkeys(COUNTER_KEYS, 0)
        self._order_cache: tuple[tuple[str, ...], np.ndarray | None] = ((), None)
        self.queue: list[tuple[int, int, int, Any]] = []
        self._seq = 0
        self.last_tick_ns: int | None = None
        self.last_estimate: Any = None
        self.last_t_ns = 0
        self.reset_reason = ''
        self._epoch_ns: int | None = None
        self._newest = {_JOINTS: None, _IMU: None}      # newest stamp per stream
        self._heard = {_JOINTS: None, _IMU: None}       # node clock when last taken
        self._backwards = 0

    # ------------------------------------------------------------------ input
    def _reject(self, reason: str) -> None:
        self.counters[f'input.rejected.{reason}'] += 1

    def _time_ok(self, t: int, now_ns: int) -> bool:
        if t <= 0:
            self._reject('stamp')
            return False
        if now_ns > 0 and t > now_ns + self.future_ns:
            self._reject('future')
            return False
        return True

    def _push(self, t: int, kind: int, payload: Any) -> None:
        if len(self.queue) >= self.max_queue:
            self.queue.sort(key=_sort_key)
            self.queue.pop(0)
            self._reject('queue_full')
        self._seq += 1
        self.queue.append((t, _ORDER[kind], self._seq, (kind, payload)))

    def _late(self, t: int, stream: int) -> bool:
        """True (and counted) for a reading at or before the last tick; after
        :data:`BACKWARDS_COUNT` joint readings in a row more than :data:`BACKWARDS_S` back,
        the estimator restarts from them (a bag loop, a clock jump)."""
        last = self.last_tick_ns
        if last is None or t > last:
            if stream == _JOINTS:
                self._backwards = 0
            return False
        if stream == _JOINTS and t < last - int(BACKWARDS_S * NS):
            self._backwards += 1
            if self._backwards >= BACKWARDS_COUNT:
                self.reset('backwards')
                return False
        self._reject('late')
        return True

    def _joint_order(self, names: Sequence[str]) -> np.ndarray | None:
        """Index into the message of each estimator joint (cached on the names), or None
        when one is missing."""
        key = tuple(names)
        cached_key, order = self._order_cache
        if key == cached_key:
            return order
        where = {nm: k for k, nm in enumerate(key)}
        order = (np.array([where[nm] for nm in self.joint_names], dtype=np.intp)
                 if all(nm in where for nm in self.joint_names) and len(where) == len(key)
                 else None)
        self._order_cache = (key, order)
        return order

    def joint_state(self, msg: Any, now_ns: int) -> bool:
        """A sensor_msgs/JointState; True when queued."""
        try:
            t = _stamp_ns(msg)
            names = msg.name
            pos = np.asarray(msg.position, dtype=float)
            vel = np.asarray(msg.velocity, dtype=float)
            eff = np.asarray(msg.effort, dtype=float)
        except Exception:  # noqa: BLE001 - a message of the wrong shape: counted
            self._reject('lengths')
            return False
        if not self._time_ok(t, now_ns):
            return False
        m = len(names)
        if pos.shape != (m,) or vel.shape not in ((0,), (m,)) or eff.shape not in ((0,), (m,)):
            self._reject('lengths')
            return False
        order = self._joint_order(names)
        if order is None:
            self._reject('joint_names')
            return False
        q = pos[order]
        if not np.all(np.isfinite(q)):
            self._reject('nonfinite')
            return False
        qd = vel[order] if vel.size else None
        tau = eff[order] if eff.size else None
        if qd is not None and not np.all(np.isfinite(qd)):
            qd = np.where(np.isfinite(qd), qd, np.nan)
        if tau is not None and not np.all(np.isfinite(tau)):
            tau = np.where(np.isfinite(tau), tau, np.nan)
        if self._late(t, _JOINTS):
            return False
        self._heard_from(_JOINTS, t, now_ns)
        self._push(t, _JOINTS, (q, qd, tau))
        self.counters['input.joint_states.used'] += 1
        return True

    def imu(self, msg: Any, now_ns: int) -> bool:
        """A sensor_msgs/Imu of the base IMU; True when queued."""
        try:
            t = _stamp_ns(msg)
            frame = msg.header.frame_id
            w, a = msg.angular_velocity, msg.linear_acceleration
            gyro = np.array((w.x, w.y, w.z), dtype=float)
            acc = np.array((a.x, a.y, a.z), dtype=float)
            missing = (msg.angular_velocity_covariance[0] == -1.0
                       or msg.linear_acceleration_covariance[0] == -1.0)
        except Exception:  # noqa: BLE001 - a message of the wrong shape: counted
            self._reject('lengths')
            return False
        if not self._time_ok(t, now_ns):
            return False
        mount = self._frames.get(frame)
        if mount is None:
            self._reject('frame')
            return False
        if missing or not (np.all(np.isfinite(gyro)) and np.all(np.isfinite(acc))):
            self._reject('nonfinite')
            return False
        R, r, identity = mount
        if not identity:
            gyro = R @ gyro
            acc = R @ acc - np.cross(gyro, np.cross(gyro, r))
        if self._late(t, _IMU):
            return False
        self._heard_from(_IMU, t, now_ns)
        self._push(t, _IMU, (gyro, acc))
        self.counters['input.imu.used'] += 1
        return True

    def contact(self, foot: str, msg: Any, now_ns: int) -> bool:
        """A std_msgs/Bool of ``foot``: stamped with the newest sensor stamp (module
        docstring); True when queued."""
        if foot not in self._feet_set:
            self._reject('foot')
            return False
        data = getattr(msg, 'data', None)
        if not isinstance(data, (bool, np.bool_)):
            self._reject('lengths')
            return False
        stamps = [s for s in self._newest.values() if s is not None]
        if not stamps:
            return False            # nothing to stamp it with yet: the next one will do
        t = max(stamps)
        if self.last_tick_ns is not None and t <= self.last_tick_ns:
            t = self.last_tick_ns + 1      # after the tick that already ran
        self._push(t, _CONTACT, (foot, bool(data)))
        self.counters['input.contact.used'] += 1
        return True

    def wrench(self, foot: str, msg: Any, now_ns: int) -> bool:
        """A geometry_msgs/WrenchStamped of ``foot``, the force in the foot's link frame
        (``header.frame_id`` the foot or empty); True when queued."""
        if foot not in self._feet_set:
            self._reject('foot')
            return False
        try:
            t = _stamp_ns(msg)
            frame = msg.header.frame_id
            f = msg.wrench.force
            force = np.array((f.x, f.y, f.z), dtype=float)
        except Exception:  # noqa: BLE001 - a message of the wrong shape: counted
            self._reject('lengths')
            return False
        if not self._time_ok(t, now_ns):
            return False
        if frame not in ('', foot):
            self._reject('frame')
            return False
        if not np.all(np.isfinite(force)):
            self._reject('nonfinite')
            return False
        last = self.last_tick_ns
        if last is not None and t <= last:
            if last - t > self.timeout_ns:
                self._reject('late')
                return False
            t = last + 1        # its sample's tick already ran (the horizon is set by the
            #                     joints and the IMU): the next one takes it
        self._push(t, _FORCE, (foot, force))
        self.counters['input.wrench.used'] += 1
        return True

    def _heard_from(self, stream: int, t: int, now_ns: int) -> None:
        newest = self._newest[stream]
        if newest is None or t > newest:
            self._newest[stream] = t
        self._heard[stream] = now_ns
        if self._epoch_ns is None:
            self._epoch_ns = t - NS       # seconds since 1 s before the first reading

    # ------------------------------------------------------------------ ticks
    def horizon(self, now_ns: int) -> int | None:
        """The newest stamp every flowing stream (joint_states, IMU) has reached; None when
        none flows (no input for ``sensor_timeout``)."""
        out = None
        for stream in (_JOINTS, _IMU):
            newest, heard = self._newest[stream], self._heard[stream]
            if newest is None or now_ns - heard > self.timeout_ns:
                continue
            out = newest if out is None else min(out, newest)
        return out

    def idle(self, now_ns: int) -> bool:
        """No stream has delivered for ``sensor_timeout``."""
        return self.horizon(now_ns) is None

    def advance(self, now_ns: int) -> Any:
        """One tick at the data horizon (module docstring): the new estimate, or None (no
        new data, not initialised yet, or a failure: counted)."""
        t_ns = self.horizon(now_ns)
        if t_ns is None or (self.last_tick_ns is not None and t_ns <= self.last_tick_ns):
            return None
        queue = self.queue
        queue.sort(key=_sort_key)
        k = 0
        for k, item in enumerate(queue):       # noqa: B007 - k is used after the loop
            if item[0] > t_ns:
                break
        else:
            k = len(queue)
        due, self.queue = queue[:k], queue[k:]
        est = self.estimator
        epoch = self._epoch_ns if self._epoch_ns is not None else t_ns - NS
        names = self.contact_names
        try:
            for t, _, _, (kind, p) in due:
                ts = (t - epoch) / NS
                if kind == _JOINTS:
                    est.add_joints(ts, p[0], p[1], p[2])
                elif kind == _IMU:
                    est.add_imu(ts, p[0], p[1])
                elif kind == _CONTACT:
                    if p[0] in names:
                        est.add_contact(ts, p[0], p[1])
                else:
                    if p[0] in names:
                        est.add_foot_force(ts, p[0], p[1])
            out = est.tick((t_ns - epoch) / NS)
        except Exception as exc:  # noqa: BLE001 - never dies on the estimator: counted, reset
            self.counters['estimator.errors'] += 1
            self.reset('error', f'{type(exc).__name__}: {exc}')
            return None
        self.last_tick_ns = t_ns
        self.counters['ticks.run'] += 1
        if out is None:
            self.counters['ticks.no_estimate'] += 1
            return None
        self.last_estimate, self.last_t_ns = out, t_ns
        return out

    def reset(self, reason: str, detail: str = '') -> None:
        """Forget the state (``resets.<reason>``: manual, backwards, error); the next
        readings start the estimator again."""
        self.counters[f'resets.{reason}'] += 1
        self.reset_reason = f'{reason}: {detail}' if detail else reason
        try:
            self.estimator.reset()
        except Exception:  # noqa: BLE001 - a reset that fails is counted; nothing else to do
            self.counters['estimator.errors'] += 1
        self.queue = []
        self.last_tick_ns = None
        self.last_estimate = None
        self._epoch_ns = None
        self._newest = {_JOINTS: None, _IMU: None}
        self._heard = {_JOINTS: None, _IMU: None}
        self._backwards = 0

    def diagnostics(self, now_ns: int) -> tuple[int, str, dict[str, Any]]:
        """(level 0/1/2, message, values): the counters, the estimator's own
        (``estimator.<key>``), the status of the newest estimate."""
        values: dict[str, Any] = dict(self.counters)
        for k, v in getattr(self.estimator, 'counters', {}).items():
            values[f'estimator.{k}'] = v
        est = self.last_estimate
        status = getattr(est, 'status', 'initialising') if est is not None else 'initialising'
        values['estimate.status'] = status
        values['queue'] = len(self.queue)
        if self.idle(now_ns):
            level, message = 1, 'no input (joint_states and IMU silent)'
        elif est is None:
            level, message = 1, 'initialising'
        elif status != 'ok':
            level, message = 1, f'estimate {status}'
        else:
            level, message = 0, 'ok'
        if self.reset_reason:
            values['resets.last'] = self.reset_reason
        return level, message, values


def _sort_key(item: tuple) -> tuple:
    return item[0], item[1], item[2]
