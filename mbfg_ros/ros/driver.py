"""The tick schedule and per-tick outputs shared by the live node and the replay tool.

robot_localization's pattern: message callbacks only turn a message into a
record and :meth:`EstimatorDriver.push` it; a timer calls
:meth:`EstimatorDriver.advance` with the current clock, which runs every tick
due since the last one. Pure Python (no rclpy) so ``mbfg-replay`` uses the
very same object.

Why replay equals live: ticks sit on a fixed grid ``t_k = k * period`` in
integer nanoseconds of the stamp clock (:func:`tick_times`), whatever rate
the caller polls at. Tick ``t_k`` drains exactly the queued records stamped
``<= t_k`` in a canonical order (stamp, then joints before IMUs, then sensor
name, then arrival), feeds them to the :class:`~mbfg_ros.estimator.Estimator`
and calls ``Estimator.tick(t_k)``. A node under ``use_sim_time`` whose clock
(``/clock``) reaches ``t_k`` after the messages stamped ``<= t_k`` arrived,
and a replay that runs the ticks before each message's stamp and then queues
it, make identical calls; so they produce identical estimates. A clock that
jumps ahead runs the missed grid ticks (at most ``max_catchup``), a clock that
jumps back (bag loop) resets the estimator and says so.

Torque commands (:class:`CommandLaw`): with a reference motion of the
actuated joints, computed torque ``τ = ID(q̂, q̂̇, s̈_ref + Kp (s_ref − ŝ) +
Kd (ṡ_ref − ŝ̇))``; without one, the torques that hold the estimated pose,
``τ = ID(q̂, 0, 0)``.
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..measurements import Estimate, ImuMeasurement, JointMeasurement
from ..model import Mechanism
from .conversions import Reference
from .params import EstimatorSettings, ParameterError

__all__ = ['tick_times', 'TickOutput', 'EstimatorDriver', 'CommandLaw', 'period_ns']

NS = 1_000_000_000


def period_ns(frequency: float) -> int:
    """The tick period in integer nanoseconds."""
    return max(1, int(round(NS / float(frequency))))


def tick_times(last_ns: int | None, now_ns: int, period: int, inclusive: bool = True,
               max_ticks: int = 1_000_000) -> tuple[list[int], int]:
    """Grid ticks ``k * period`` in ``(last_ns, now_ns]`` (``< now_ns`` if not inclusive).

    With ``last_ns`` None only the latest grid point is due (no catch-up from
    the epoch). Returns ``(ticks, skipped)``: at most ``max_ticks`` latest
    ticks, ``skipped`` counts the older ones left out.
    """
    hi = now_ns if inclusive else now_ns - 1
    last_k = hi // period
    if last_ns is None:
        return ([last_k * period] if last_k * period >= 0 else []), 0
    first_k = last_ns // period + 1
    count = last_k - first_k + 1
    if count <= 0:
        return [], 0
    skipped = max(0, count - max_ticks)
    return [k * period for k in range(first_k + skipped, last_k + 1)], skipped


# ------------------------------------------------------------------ commands

def _actuator_index(mech: Mechanism, name: str) -> int | None:
    """Actuator called ``name``, or driving the joint or coordinate called ``name``."""
    coords = mech.coordinate_names
    for i, a in enumerate(mech.actuators):
        if name in (a.name, a.joint) or (a.coordinate is not None
                                         and coords[a.coordinate] == name):
            return i
    return None


class CommandLaw:
    """Computed torque / pose-holding torques in ``command_joints`` order.

    The actuated quantities s(q) are the actuators' joints (revolute angle,
    seed 000 §2 body angles) or coordinates. Computed torque (seed 003 §6):
    ``s̈* = s̈_ref + Kp (s_ref − s) + Kd (ṡ_ref − ṡ)``; q̈ solves the
    acceleration problem ``[Φq; J_s] q̈ = [−Φ̇q q̇; s̈* − J̇_s q̇]`` (seed 000
    Eq. 3 with s as independent coordinates, Eq. 12); τ then solves the
    equations of motion ``B_act τ + Φqᵀ λ = M q̈ − Q`` (least squares in
    (τ, λ); equal to the virtual-power result of seed 003 Eq. 6.110, which the
    tests check). Holding: q̇ = 0, q̈ = 0.
    """

    def __init__(self, sys: Any, command_joints: Sequence[str], kp: float, kd: float) -> None:
        from ..sensors import SensorModel

        mech = sys.mech
        self.sys = sys
        self.kp = float(kp)
        self.kd = float(kd)
        names = list(command_joints) or [a.name for a in mech.actuators]
        order = []
        for name in names:
            i = _actuator_index(mech, name)
            if i is None:
                known = [a.name for a in mech.actuators] + [a.joint for a in mech.actuators
                                                            if a.joint]
                raise ParameterError(f"parameter 'command_joints': {name!r} is not an actuator "
                                     f"or actuated joint of {mech.source} (known: "
                                     f"{', '.join(known) or 'none'})")
            order.append(i)
        self.names = tuple(names)
        self.order = np.array(order, dtype=int)
        self.n_act = len(mech.actuators)
        self.sm = SensorModel(sys)
        self._act_joint = [self.sm.joint_names.index(a.joint) if a.joint else None
                           for a in mech.actuators]
        self._angular = np.array([j is not None and self.sm.joint_is_angular(j)
                                  for j in self._act_joint], dtype=bool)
        self._zeros = np.zeros(sys.n)

    def reference_columns(self, ref: Reference) -> np.ndarray:
        """Column of ``ref`` for each actuator.

        :raises ValueError: the reference does not name every actuator.
        """
        cols = []
        for i, a in enumerate(self.sys.mech.actuators):
            col = next((k for k, n in enumerate(ref.names)
                        if _actuator_index(self.sys.mech, n) == i), None)
            if col is None:
                raise ValueError(f'reference lacks actuator {a.name!r}'
                                 + (f' (joint {a.joint!r})' if a.joint else ''))
            cols.append(col)
        return np.array(cols, dtype=int)

    def _efforts(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        sys = self.sys
        B = sys.forces.actuator_matrix(q)
        Jq = sys.constraints.phi_q(q)[sys.rows]
        Q = sys.forces.evaluate(q, qd, None, jacobians=False).Q
        sol = np.linalg.lstsq(np.hstack((B, Jq.T)), sys.M @ qdd - Q, rcond=None)[0]
        return sol[:self.n_act][self.order]

    def hold(self, q: np.ndarray) -> np.ndarray:
        """Actuator efforts that hold pose ``q`` (q̇ = 0, q̈ = 0), command order."""
        return self._efforts(q, self._zeros, self._zeros)

    def actuated(self, q: np.ndarray, qd: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(s, ṡ, J_s, J̇_s q̇) of the actuated quantities."""
        k = self.n_act
        s, sd, J, Jdqd = np.empty(k), np.empty(k), np.zeros((k, self.sys.n)), np.zeros(k)
        for i, a in enumerate(self.sys.mech.actuators):
            j = self._act_joint[i]
            if j is None:
                c = a.coordinate
                s[i], sd[i], J[i, c] = q[c], qd[c], 1.0
            else:
                p, v = self.sm.joint(j, q, qd, want=True)
                s[i], sd[i], J[i] = p.h[0], v.h[0], p.Hq[0]
                Jdqd[i] = v.Hq[0] @ qd
        return s, sd, J, Jdqd

    def track(self, q: np.ndarray, qd: np.ndarray, s_ref: np.ndarray, sd_ref: np.ndarray,
              sdd_ref: np.ndarray) -> np.ndarray:
        """Computed torque towards the reference (actuator order in, command order out)."""
        from ..sensors import wrap_angle

        sys = self.sys
        s, sd, J, Jdqd = self.actuated(q, qd)
        err = s_ref - s
        err = np.where(self._angular, wrap_angle(err), err)
        sdd = sdd_ref + self.kp * err + self.kd * (sd_ref - sd)
        Jq = sys.constraints.phi_q(q)[sys.rows]
        c = -(sys.constraints.phi_q_dot(q, qd)[sys.rows] @ qd)
        A = np.vstack((Jq, J))
        qdd = np.linalg.lstsq(A, np.concatenate((c, sdd - Jdqd)), rcond=None)[0]
        return self._efforts(q, qd, qdd)


# ------------------------------------------------------------------ outputs

@dataclass
class TickOutput:
    """What one tick publishes. ``estimate`` None: not initialised (diagnostics only)."""

    t_ns: int
    estimate: Estimate | None
    joint_effort: np.ndarray | None
    command: np.ndarray | None
    level: int
    message: str
    values: dict = field(default_factory=dict)


_KIND = {JointMeasurement: 0, ImuMeasurement: 1}


def _order_key(t_ns: int, rec: Any, seq: int) -> tuple:
    name = rec.sensor if isinstance(rec, ImuMeasurement) else ''
    return (t_ns, _KIND.get(type(rec), 2), name, seq)


class EstimatorDriver:
    """Queue + tick grid + estimator + command law (one per node or replay run)."""

    BACKWARDS_STREAK = 10
    """Consecutive records older than :attr:`backwards_ns` read as "the stamps went
    back" (bag loop): reset. Merely late records (a burst processed slowly) are only
    dropped as too old."""

    def __init__(self, sys: Any, settings: EstimatorSettings, estimator: Any = None) -> None:
        from ..estimator import Estimator

        self.sys = sys
        self.settings = settings
        cfg = settings.config
        self.frequency = float(settings.values['frequency'])
        self.period = period_ns(self.frequency)
        self.lag_ns = int(round(float(settings.values['lag_duration']) * NS))
        self.max_queue = int(settings.values.get('max_queue', 10000))
        self.backwards_ns = int(NS * max(1.0, 2 * float(settings.values['lag_duration']),
                                         float(getattr(cfg, 'backwards_tolerance', 0.0))))
        self.max_catchup = max(1, int(math.ceil(settings.values['lag_duration']
                                                * self.frequency)))
        self.estimator = estimator if estimator is not None else Estimator(sys, cfg)
        mech = sys.mech
        self.joint_names = tuple(j.name for j in mech.joints)
        self.coordinate_names = tuple(mech.coordinate_names)
        self.imu_names = tuple(s.name for s in mech.sensors)
        self.law = CommandLaw(sys, settings.values['command_joints'], settings.values['kp'],
                              settings.values['kd'])
        # estimated actuator effort of each named joint (-1: not actuated -> NaN)
        self._effort_src = np.array([next((i for i, a in enumerate(mech.actuators)
                                           if a.joint == j.name), -1) for j in mech.joints],
                                    dtype=int)
        self.reference: Reference | None = None
        self._ref_cols: np.ndarray | None = None
        self._queue: list = []
        self._seq = 0
        self.last_tick: int | None = None
        self._fed = False
        self._too_old_streak = 0
        self.counters: dict[str, int] = {}
        self.events: list[str] = []        # human-readable notes for the caller to log

    # ---------------------------------------------------------------- input

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def note(self, text: str) -> None:
        self.events.append(text)

    def push(self, t_ns: int, record: JointMeasurement | ImuMeasurement) -> bool:
        """Queue a record for the tick at or after its stamp; False if dropped (counted)."""
        self.count('received')
        if self.last_tick is not None and t_ns < self.last_tick - self.lag_ns:
            # too old for the window; far older, repeatedly: the stamps went back (bag loop)
            far = t_ns < self.last_tick - self.backwards_ns
            self._too_old_streak = self._too_old_streak + 1 if far else 0
            if self._too_old_streak >= self.BACKWARDS_STREAK:
                self.reset(f'stamps went back by {(self.last_tick - t_ns) / NS:.3f} s '
                           f'(bag loop?)')
            else:
                self.count('dropped.too_old')
                return False
        else:
            self._too_old_streak = 0
        heapq.heappush(self._queue, (_order_key(t_ns, record, self._seq), record))
        self._seq += 1
        if len(self._queue) > self.max_queue:
            heapq.heappop(self._queue)
            self.count('dropped.queue_full')
        return True

    def set_reference(self, ref: Reference) -> bool:
        """Use ``ref`` for the torque commands; False (counted, noted) if it does not fit."""
        try:
            cols = self.law.reference_columns(ref)
        except ValueError as exc:
            self.count('dropped.bad_reference')
            self.note(f'reference ignored: {exc}')
            return False
        self.reference, self._ref_cols = ref, cols
        self.count('references')
        return True

    def reset(self, reason: str) -> None:
        """Forget queue, tick grid position and estimator state; counted and noted."""
        self._queue.clear()
        self.last_tick = None
        self._fed = False
        self._too_old_streak = 0
        self.count('resets')
        self.note(f'reset: {reason}')
        try:
            self.estimator.reset(reason)
        except Exception as exc:  # noqa: BLE001 - the node must survive its core
            self.note(f'estimator reset failed: {exc!r}')

    # ---------------------------------------------------------------- ticks

    def advance(self, now_ns: int, inclusive: bool = True) -> list[TickOutput]:
        """Run every grid tick due at clock ``now_ns``; a clock gone back resets."""
        if self.last_tick is not None and now_ns < self.last_tick - self.period:
            self.reset(f'clock jumped back by {(self.last_tick - now_ns) / NS:.3f} s')
        ticks, skipped = tick_times(self.last_tick, now_ns, self.period, inclusive,
                                    self.max_catchup)
        if skipped:
            self.count('ticks_skipped', skipped)
        return [self._tick(t) for t in ticks]

    def _drain(self, t_ns: int) -> None:
        q = self._queue
        while q and q[0][0][0] <= t_ns:
            _, rec = heapq.heappop(q)
            try:
                ok = self.estimator.add(rec)
            except Exception as exc:  # noqa: BLE001
                ok = False
                self.count('dropped.estimator_error')
                self.note(f'estimator.add failed: {exc!r}')
            if ok:
                self._fed = True
                self.count('queued_used')
            else:
                self.count('rejected_by_estimator')

    def _tick(self, t_ns: int) -> TickOutput:
        self.last_tick = t_ns
        self._drain(t_ns)
        est = None
        status = 'waiting for measurements'
        if self._fed:
            t0 = time.perf_counter()
            try:
                est = self.estimator.tick(t_ns / NS)
            except Exception as exc:  # noqa: BLE001
                self.count('estimator_exceptions')
                self.reset(f'estimator.tick raised {exc!r}')
            dt = time.perf_counter() - t0
            status = est.status if est is not None else status
        else:
            dt = 0.0
        level = 0
        effort = command = None
        if est is not None:
            tau = np.asarray(est.tau, dtype=float).reshape(-1)
            effort = np.where(self._effort_src >= 0,
                              tau[np.maximum(self._effort_src, 0)] if tau.size else np.nan,
                              np.nan)
            command = self._command(est, t_ns)
            if status != 'ok':
                level = 1
        else:
            level = 1
        values = {'tick_time': f'{t_ns / NS:.9f}', 'solver_status': status,
                  'tick_ms': f'{1e3 * (est.tick_seconds if est is not None else dt):.3f}',
                  'queue': len(self._queue)}
        try:
            core = dict(self.estimator.counters)
        except Exception:  # noqa: BLE001
            core = {}
        values.update({f'estimator.{k}': v for k, v in sorted(core.items())})
        values.update({f'input.{k}': v for k, v in sorted(self.counters.items())})
        return TickOutput(t_ns, est, effort, command, level, status, values)

    def _command(self, est: Estimate, t_ns: int) -> np.ndarray | None:
        q, qd = np.asarray(est.q, dtype=float), np.asarray(est.qd, dtype=float)
        try:
            if self.reference is not None and self._ref_cols is not None:
                p, v, a = self.reference.sample(t_ns / NS)
                c = self._ref_cols
                out = self.law.track(q, qd, p[c], v[c], a[c])
            else:
                out = self.law.hold(q)
        except Exception as exc:  # noqa: BLE001 - singular pose etc.
            self.count('command_errors')
            self.note(f'torque command failed: {exc!r}')
            return None
        return out if np.all(np.isfinite(out)) else None
