"""The input path and tick schedule shared by the live node and the replay tool.

robot_localization's pattern: message callbacks only turn a message into a
record and queue it (:meth:`EstimatorDriver.joint_state`,
:meth:`EstimatorDriver.imu`: the one input path, validated once here); a timer
calls :meth:`EstimatorDriver.advance` with the current clock, which runs the
ticks due. Pure Python (no rclpy) so ``mbfg-replay`` uses the very same object.

Input, in order (every outcome counted under a fixed key, :data:`INPUT_KEYS`):

1. structure (:mod:`.conversions`): stamps, lengths, names, finiteness;
2. physical limits (:class:`~mbfg_ros.estimation.gate.LimitGate`, from the YAML or the
   URDF and its overlay);
3. time: a stamp more than ``future_tolerance`` ahead of the clock is
   ``future``; stamps back by more than the backwards tolerance, ten in a
   row, are a bag loop (reset ``backwards``), fewer are dropped as
   ``backwards``; a stamp older than the window is ``too_old``;
4. the estimator's own innovation gate (``estimator.rejected_outlier``).

The records go to ``Estimator.add_validated`` (issue 23 item 3): the estimator does not
check their stamps again (its ``add`` does, for direct Python callers), so each drop is
counted once, under ``input.*``, and a late reading the driver keeps is not a bag loop to
an estimator with a ``backwards_tolerance`` shorter than the window.

Why replay equals live: ticks sit on a fixed grid ``t_k = k * period + phase`` in
integer nanoseconds of the stamp clock (:func:`tick_times`), whatever rate the
caller polls at. ``phase`` is 0, or with ``align_ticks`` (issue 24) the first
JointState's stamp modulo the period, taken once per start or reset (before the first
estimate; ticks run on IMU readings alone before it move to the new grid): ticks
then fall on the encoders' own stamps (a simulator's or ros2_control's update grid),
so their estimates go out as soon as the readings are in (up to a period sooner) and
the readings sit at the ticks (a one-key factor, cheaper than readings between two
keys, seed 000 Eq. 23). Replay takes the same phase from the same first JointState.
Tick ``t_k`` drains exactly the queued records stamped ``<= t_k`` in a canonical order
(stamp, then joints before IMUs, then sensor name, then arrival) and calls
``Estimator.tick(t_k)``.

Live only (``live=True``):

* **Overload.** When more than one grid tick is due (the node fell behind),
  one call runs one tick, up to ``max_merge_ticks`` grid ticks on
  (``ticks.merged`` counts the ones left out, ``ticks.overruns`` the events, and
  :attr:`EstimatorDriver.behind` tells the caller to come back soon): the
  estimator takes the longer step and every reading of the interval through its
  two-key factor. Readings are never dropped for being slow; the estimate
  degrades gracefully toward fewer, longer steps.
* **The tick clock is the data.** Ticks run up to the newest reading's stamp,
  moving on with the clock between readings (``input.latency_ms`` = clock −
  newest stamp at the last reading). So a backlog (the node fell behind after a
  burst), stamps that lag the clock (a simulator slower than real time, a sensor
  with a constant delay, a bag played without ``--clock``) never make readings
  too old, and are no bag loop: no reset storm. In silence the ticks carry on
  with the clock (dynamics-only prediction, status ``stale``). A sensor slower
  than the others must stay within ``lag_duration`` of them.
* **Ticks wait for every flowing stream.** They never run further than what
  every flowing sensor stream has delivered (:meth:`EstimatorDriver.data_horizon`:
  its newest stamp plus 7/8 of its stamp spacing for a stream at the tick rate or faster,
  so a tick waits for that stream's reading at its stamp; plus 1.5 of its spacing, at least
  one tick period, for a slower one). A
  tick run past readings still on their way (a sensor driver that stalled, one
  topic delivered before the other) puts them on keys deep in the window; a
  factor there makes ISAM2 re-eliminate most of the window, and past 65 % of it
  GTSAM relinearises every factor (its batch step: 15-40 ms at 1 kHz where a
  tick takes ~1.5 ms, whose backlog then came late again). A stream counts as
  flowing while it delivered within ``sensor_timeout`` (wall time) and its
  newest stamp is within half a window of the newest overall; a stream not seen
  yet does not hold the ticks.

Torque commands (issue 25, ``docs/torque-commands.md``): every command is clamped to
its joints' effort ratings (``commands.saturated``); none goes out while the newest
reading is older than ``command_timeout`` (in the tick's time, and live also since it
arrived: a node working off a backlog sends none), before the first estimate, or for one
window (``lag_duration``) after an (re-)initialisation or reset; the tick's level is
then ERROR and its message says why (``commands.withheld.<reason>``). With no
reference, or after its last point, the command is a PD hold (kp, kd, dynamics
compensated) around the pose latched when holding began (the reference's last point
after one).
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..estimation.control import CommandLaw, actuator_index
from ..estimation.estimator import LIVE_FIELDS, Estimator
from ..estimation.external import ExternalConfig, ExternalOutput, ExternalTorques
from ..estimation.gate import LimitGate
from ..core.measurements import Estimate, ImuMeasurement, JointMeasurement
from . import cdr
from . import conversions as cv
from ..core.bounded import remember
from ..core.errors import MbfgError
from .conversions import Reference
from .params import EstimatorSettings, ParameterError

__all__ = ['tick_times', 'TickOutput', 'EstimatorDriver', 'period_ns', 'INPUT_KEYS',
           'COMMAND_KEYS', 'WITHHELD']

NS = 1_000_000_000

LIMITS_FROM = ("a planar YAML's joints[].limits and sensors[] ranges; a URDF's <limit> and the "
               "overlay's limits and IMU ranges")
"""Where the gate's limits come from, said in its log lines for planar and URDF robots alike
(issue 30 item 2)."""

INPUT_KEYS = ('received', 'queued', 'unknown_joint', 'nonfinite_values', 'out_of_limits',
              'dropped.no_stamp', 'dropped.bad_stamp', 'dropped.empty',
              'dropped.repeated_names', 'dropped.length_mismatch', 'dropped.no_usable_values',
              'dropped.out_of_limits', 'dropped.future', 'dropped.backwards',
              'dropped.too_old', 'dropped.queue_full', 'dropped.bad_reference',
              'dropped.estimator_error', 'dropped.malformed', 'dropped.other',
              'rejected_by_estimator', 'references', 'command_errors')
"""Every input counter (``input.<key>`` in /diagnostics): a fixed set, whatever arrives."""

WITHHELD = ('no_estimate', 'initialising', 'timeout', 'error')
"""Why a tick sends no torque command (``commands.withheld.<reason>``, issue 25): no
estimate yet, the estimator (re-)initialised or reset less than a window ago, the newest
reading older than ``command_timeout``, the law failed (singular pose, non-finite τ)."""

COMMAND_KEYS = ('sent', 'saturated', 'saturated_ticks') + tuple(f'withheld.{r}'
                                                                 for r in WITHHELD)
"""The command counters (``commands.<key>`` in /diagnostics): ``saturated`` counts
clamped values, ``saturated_ticks`` the commands with at least one."""

_WITHHELD_TEXT = {'no_estimate': 'no estimate yet',
                  'initialising': 'the estimator (re-)initialised less than lag_duration ago',
                  'timeout': 'newest reading older than command_timeout',
                  'error': 'the command law failed'}


def period_ns(frequency: float) -> int:
    """The tick period in integer nanoseconds."""
    return max(1, int(round(NS / float(frequency))))


def tick_times(last_ns: int | None, now_ns: int, period: int, inclusive: bool = True,
               max_ticks: int = 1_000_000, phase: int = 0) -> tuple[list[int], int]:
    """Grid ticks ``k * period + phase`` in ``(last_ns, now_ns]`` (``< now_ns`` if not
    inclusive; ``0 <= phase < period``).

    With ``last_ns`` None only the latest grid point is due (no catch-up from
    the epoch). Returns ``(ticks, skipped)``: at most ``max_ticks`` latest
    ticks, ``skipped`` counts the older ones left out.
    """
    hi = (now_ns if inclusive else now_ns - 1) - phase
    last_k = hi // period
    if last_ns is None:
        return ([last_k * period + phase] if last_k * period >= 0 else []), 0
    first_k = (last_ns - phase) // period + 1
    count = last_k - first_k + 1
    if count <= 0:
        return [], 0
    skipped = max(0, count - max_ticks)
    return [k * period + phase for k in range(first_k + skipped, last_k + 1)], skipped


@dataclass
class TickOutput:
    """What one tick publishes. ``estimate`` None: not initialised. ``command`` None: no
    torque command this tick (``withheld`` says why, one of :data:`WITHHELD`)."""

    t_ns: int
    estimate: Estimate | None
    joint_effort: np.ndarray | None
    command: np.ndarray | None
    level: int
    message: str
    external: ExternalOutput | None = None   # τ_ext, σ, contact, wrench (issue 27 item 4)
    withheld: str = ''


_KIND = {JointMeasurement: 0, ImuMeasurement: 1}


class EstimatorDriver:
    """Input gate + queue + tick grid + estimator + command law (one per node or replay)."""

    BACKWARDS_STREAK = 10
    """Consecutive records stamped far before the newest one read as "the stamps went
    back" (bag loop): reset. Fewer are dropped (``dropped.backwards``)."""


    def __init__(self, sys: Any, settings: EstimatorSettings, estimator: Any = None,
                 live: bool = False) -> None:
        self.sys = sys
        self.settings = settings
        self.live = live
        cfg = settings.config
        v = settings.values
        self.frequency = float(v['frequency'])
        self.period = period_ns(self.frequency)
        self.align = bool(v['align_ticks'])
        self.phase = 0                # ns: the tick grid's offset (module docstring)
        self._phased = False          # align_ticks: the phase taken since the start/reset
        self.lag_ns = int(round(float(v['lag_duration']) * NS))
        self.max_queue = int(v['max_queue'])
        self.backwards_ns = int(NS * max(2 * float(v['lag_duration']),
                                         float(cfg.backwards_tolerance)))
        self.future_ns = int(NS * float(v['future_tolerance']))
        self.max_catchup = max(1, int(math.ceil(v['lag_duration'] * self.frequency)))
        self.max_merge = int(v['max_merge_ticks'])
        self.max_gap_ns = int(NS * float(cfg.max_tick_gap))
        self.silence_ns = int(NS * float(cfg.sensor_timeout))
        self._push_wall = -self.silence_ns
        self.behind = False           # live: more grid ticks were due than the last call ran
        self.estimator = estimator if estimator is not None else Estimator(sys, cfg)
        mech = sys.description
        self.gate = LimitGate(mech)
        self.joint_names = tuple(j.name for j in mech.joints)
        self._known_joints = frozenset(self.joint_names)
        # the reader tells when every value lies within the gate's limits (issue 24)
        self._joint_reader = cv.JointStateReader(self._known_joints, self.gate.arrays)
        self._joint_parser = cdr.JointStateParser()
        self._unknown_notes: dict[tuple[str, ...], str] = {}    # unknown names -> note
        self.coordinate_names = tuple(mech.coordinate_names)
        self.imu_names = tuple(s.name for s in mech.sensors)
        self._limits_of = f'the limits of {mech.name} ({LIMITS_FROM})'
        try:
            self.law = CommandLaw(sys, v['command_joints'], 0.0, 0.0)
        except ValueError as exc:
            raise ParameterError(f"parameter 'command_joints': {exc}") from None
        try:
            self.law.set_gains(v['kp'], v['kd'])
        except ValueError as exc:
            raise ParameterError(f'parameter {exc}') from None
        timeout = float(v.get('command_timeout', 0.0)) or float(cfg.sensor_timeout)
        self.command_timeout_ns = int(round(timeout * NS))
        self.settle_ns = self.lag_ns          # no command for one window after a (re-)init
        self._cmd_from: int | None = None     # first tick allowed a command (None: no init)
        self._inits = (0, 0)                  # the estimator's (initialisations, resets)
        self._hold_s: np.ndarray | None = None    # the latched pose of the PD hold
        self._newest_used = -1                # newest stamp the estimator accepted (ns)
        self._newest_wall = 0                 # live: when the newest accepted one arrived
        self.command_counters: dict[str, int] = dict.fromkeys(COMMAND_KEYS, 0)
        # estimated actuator effort of each named joint (-1: not actuated -> NaN)
        self._effort_src = np.array([next((i for i, a in enumerate(mech.actuators)
                                           if a.joint == j.name), -1) for j in mech.joints],
                                    dtype=int)
        self._effort_has = self._effort_src >= 0          # the joints with an actuator
        self._effort_take = np.maximum(self._effort_src, 0)     # (a valid index for the rest)
        self._effort_every = bool(self._effort_has.all())
        try:
            self.external = ExternalTorques(sys, ExternalConfig(
                v['contact_threshold'], v['contact_min_duration'], v['external_effort_sigma'],
                v['external_wrench_link'], v['external_wrench_damping']))
        except MbfgError as exc:
            raise ParameterError(f"parameter 'external_wrench_link': {exc}") from None
        self._tau_motor = np.zeros(len(self.external.names))
        self.reference: Reference | None = None
        self._ref_cols: np.ndarray | None = None
        self._queue: list = []
        self._seq = 0
        self.last_tick: int | None = None
        self._last_clock: int | None = None
        self._max_stamp: int | None = None
        self._hold: tuple[float, int | None] | None = None    # _due's, and until when
        self._fed = False
        self._back_streak = 0
        self.delay_ns = 0
        # live, per sensor stream (joints: '', each IMU its name):
        # [newest stamp, stamp spacing (running mean), wall time of its last reading]
        self._streams: dict[str, list[int]] = {}
        self.counters: dict[str, int] = dict.fromkeys(INPUT_KEYS, 0)
        # predicted: estimates of predict(); unpublished: smoothed ticks at a grid time a
        # prediction was already published for (the node publishes one estimate per stamp);
        # thinned: grid ticks the node's governor left without an estimate (issue 24)
        self.ticks = {'run': 0, 'merged': 0, 'overruns': 0, 'skipped': 0, 'published': 0,
                      'predicted': 0, 'unpublished': 0, 'thinned': 0}
        self._predicted_ns = -1               # grid time of the newest prediction
        self._thinned_ns = -1                 # grid time of the newest thinned grid tick
        self.events: list[tuple[str, str]] = []      # (category, text) for the caller to log
        self.last_output: TickOutput | None = None

    # ---------------------------------------------------------------- input

    def count(self, key: str, n: int = 1) -> None:
        """Count ``n`` under ``key``; a key outside :data:`INPUT_KEYS` counts as
        ``dropped.other`` (the key set stays fixed, nothing goes uncounted)."""
        self.counters[key if key in self.counters else 'dropped.other'] += n

    NOTE_CHARS = 4 * cv.LOG_CHARS
    """Longest note: text from a message inside it is capped (:func:`.conversions.capped`),
    and the whole line too (issue 25)."""

    def note(self, category: str, text: str) -> None:
        """A note for the log, at most :attr:`NOTE_CHARS` long; the caller throttles per
        ``category``."""
        self.events.append((category, cv.capped(text, self.NOTE_CHARS)))

    def _raw(self, read: Any, buf: bytes, type_name: str, what: str) -> Any:
        """The fields of the message in ``buf`` (its CDR bytes, :mod:`.cdr`), the message
        rclpy deserialises from them (an encapsulation :mod:`.cdr` does not read), or None:
        bytes that are no whole message (``dropped.malformed``, noted)."""
        try:
            return read(buf)
        except cdr.Unsupported:
            try:
                from rclpy.serialization import deserialize_message
                return deserialize_message(buf, cv.message_class(type_name))
            except Exception as exc:  # noqa: BLE001 - rclpy's RMWError: bytes it cannot read
                reason = exc
        except cdr.Malformed as exc:
            reason = exc
        self.counters['dropped.malformed'] += 1
        self.note(f'{what}:malformed', f'{what}: message dropped (malformed: {reason})')
        return None

    def joint_state(self, msg: Any, now_ns: int | None = None) -> JointMeasurement | None:
        """A JointState message (rclpy or rosbags, or its serialised bytes as
        ``take_message(raw=True)`` gives them) into the queue: the record queued, or None
        if it was dropped (counted)."""
        self.counters['received'] += 1
        if isinstance(msg, bytes):
            # a known layout, usable names, every value finite and within the limits:
            # the record without the general checks (issue 24; the same record, the same
            # unknown names counted and noted)
            fast = self._joint_reader.fast(msg, self._joint_parser)
            if fast is not None:
                t, rec, unknown = fast
                if unknown:
                    self._unknown_joints(unknown)
                return rec if self.push(t, rec, now_ns) else None
            msg = self._raw(self._joint_parser, msg, 'JointState', 'joint_states')
            if msg is None:
                return None
        try:
            t, rec, unknown, nonfinite, within = self._joint_reader.checked(msg, now_ns)
        except cv.InputRejected as exc:
            self.count(f'dropped.{exc.reason}')
            self.note(f'joint_states:{exc.reason}', f'joint_states: message dropped ({exc})')
            return None
        if nonfinite:
            self.counters['nonfinite_values'] += nonfinite
        if unknown:
            self._unknown_joints(unknown)
        if within:          # every value within the joint limits: the gate has no work
            return rec if self.push(t, rec, now_ns) else None
        rec, bad = self.gate.joint(rec)
        return self._gated(t, rec, bad, 'joint_states', now_ns)

    def _unknown_joints(self, unknown: tuple[str, ...]) -> None:
        """A JointState's names the mechanism does not have: counted (``unknown_joint``,
        one per name) and noted; their values are ignored. The note's text is worked out
        once per name tuple (a stream with a gripper's fingers sends it every message:
        ~1 µs each; :meth:`note` caps it, a length test for a text this short)."""
        self.counters['unknown_joint'] += len(unknown)
        text = self._unknown_notes.get(unknown)
        if text is None:
            text = remember(self._unknown_notes, unknown,
                            f'joint_states: unknown joints {cv.capped(list(unknown))} '
                            f'ignored (mechanism joints: {list(self.joint_names)})')
        self.note('joint_states:unknown', text)

    def imu(self, msg: Any, sensor: str, now_ns: int | None = None) -> ImuMeasurement | None:
        """An Imu message (or its serialised bytes) for the YAML sensor ``sensor`` into
        the queue: the record queued, or None if it was dropped (counted)."""
        self.counters['received'] += 1
        if isinstance(msg, bytes):
            msg = self._raw(cdr.read_imu, msg, 'Imu', f'imu {sensor}')
            if msg is None:
                return None
        try:
            t, rec = cv.imu_to_record(msg, sensor, now_ns)
        except cv.InputRejected as exc:
            self.count(f'dropped.{exc.reason}')
            self.note(f'imu:{exc.reason}', f'imu {sensor}: message dropped ({exc})')
            return None
        if self.gate.imu_within(rec):
            return rec if self.push(t, rec, now_ns) else None      # the gate has no work
        rec, bad = self.gate.imu(rec)
        return self._gated(t, rec, bad, f'imu {sensor}', now_ns)

    def _gated(self, t: int, rec: Any, bad: int, what: str, now_ns: int | None) -> Any:
        if bad:
            self.counters['out_of_limits'] += bad
            self.note(f'{what}:limits', f'{what}: values outside {self._limits_of} ignored')
        if rec is None:
            self.counters['dropped.out_of_limits'] += 1
            return None
        return rec if self.push(t, rec, now_ns) else None

    def push(self, t_ns: int, record: JointMeasurement | ImuMeasurement,
             now_ns: int | None = None) -> bool:
        """Queue a validated record for the tick at or after its stamp; False if dropped.

        ``now_ns``: the clock when it arrived (live), for the future and latency checks.
        """
        if now_ns is not None and t_ns > now_ns + self.future_ns:
            self.counters['dropped.future'] += 1
            self.note('future', f'stamps ahead of the clock by {(t_ns - now_ns) / NS:.3f} s '
                      'dropped (future_tolerance)')
            return False
        if self._max_stamp is not None and t_ns < self._max_stamp - self.backwards_ns:
            self._back_streak += 1
            if self._back_streak < self.BACKWARDS_STREAK:
                self.counters['dropped.backwards'] += 1
                return False
            self.reset('backwards', f'stamps went back by {(self._max_stamp - t_ns) / NS:.3f} s '
                       '(bag loop?)')
        else:
            self._back_streak = 0
        if self.last_tick is not None and t_ns < self.last_tick - self.lag_ns:
            self.counters['dropped.too_old'] += 1
            return False
        if self.align and not self._phased and isinstance(record, JointMeasurement):
            self._take_phase(t_ns)
        self._max_stamp = t_ns if self._max_stamp is None else max(self._max_stamp, t_ns)
        self._hold = None                                   # _due's hold: work it out anew
        wall = time.monotonic_ns() if self.live else 0      # when it arrived (live)
        name = record.sensor if isinstance(record, ImuMeasurement) else ''    # its stream
        if now_ns is not None and self.live:
            # the tick clock is the newest data, moving on with the clock between readings
            delay = max(0, now_ns - self._max_stamp)
            if (delay > self.lag_ns // 2) != (self.delay_ns > self.lag_ns // 2):
                self.note('latency', f'input stamps lag the clock by {delay / NS:.3f} s: ticks '
                          'follow the data' if delay > self.lag_ns // 2 else
                          'input stamps caught up with the clock')
            self.delay_ns = delay
            self._push_wall = wall
            stream = self._streams.get(name)
            if stream is None:
                self._streams[name] = [t_ns, 0, wall]
            else:
                if t_ns > stream[0]:
                    step = min(t_ns - stream[0], self.lag_ns // 2)
                    stream[1] = step if stream[1] == 0 else (3 * stream[1] + step) // 4
                    stream[0] = t_ns
                stream[2] = wall
        # the canonical order (module docstring): stamp, joints before IMUs, sensor name,
        # arrival
        heapq.heappush(self._queue, ((t_ns, _KIND.get(type(record), 2), name, self._seq),
                                     record, wall))
        self._seq += 1
        self.counters['queued'] += 1
        if len(self._queue) > self.max_queue:
            heapq.heappop(self._queue)
            self.counters['dropped.queue_full'] += 1
        return True

    def _take_phase(self, t_ns: int) -> None:
        """``align_ticks``: the grid's phase from the first JointState stamp ``t_ns``
        since the start or a reset (module docstring), whatever came before it (ticks on
        IMU readings alone while the estimator waits for its encoders move to the new grid
        at the next tick), so live and replay take the same phase from the same first
        JointState however their ticks fell before it; after the first estimate the grid
        stays (:meth:`_tick` closes the choice: an estimator that started without
        encoders keeps its grid)."""
        self.phase = t_ns % self.period
        self._phased = True

    def grid_index(self, t_ns: int) -> int:
        """The index k of the newest grid tick ``k * period + phase`` at or before ``t_ns``."""
        return (t_ns - self.phase) // self.period

    def grid_time(self, k: int) -> int:
        """The stamp of grid tick ``k``."""
        return k * self.period + self.phase

    def reference_message(self, msg: Any, now_ns: int | None = None) -> bool:
        """A JointTrajectory for the torque commands; False (counted, noted) if unusable."""
        try:
            ref = cv.trajectory_to_reference(msg, now_ns)
        except cv.InputRejected as exc:
            self.count(f'dropped.{exc.reason}')
            self.note('reference', f'reference dropped ({exc})')
            return False
        return self.set_reference(ref)

    def set_reference(self, ref: Reference) -> bool:
        """Use ``ref`` for the torque commands; False (counted, noted) if it does not fit."""
        desc = self.sys.description
        unknown = [n for n in ref.names
                   if n not in self._known_joints and actuator_index(desc, n) is None]
        try:
            if unknown:
                raise ValueError(f'unknown joints {cv.capped(unknown)}')
            cols = self.law.reference_columns(ref.names)
            why = self.law.check_reference(cols, ref.position, ref.velocity, ref.acceleration)
            if why:
                raise ValueError(why)
        except ValueError as exc:
            self.counters['dropped.bad_reference'] += 1
            self.note('reference', f'reference ignored: {exc}')
            return False
        self.reference, self._ref_cols = ref, cols
        self._hold_s = None
        self.counters['references'] += 1
        return True

    def reset(self, category: str = 'manual', detail: str = '') -> None:
        """Forget queue, tick grid position and estimator state; counted by category
        (:data:`~mbfg_ros.estimation.estimator.RESET_REASONS`), noted with ``detail``."""
        self._queue.clear()
        self._hold = None
        self.last_tick = None
        self._phased = False
        self._predicted_ns = -1
        self._thinned_ns = -1
        self._max_stamp = None
        self._fed = False
        self._back_streak = 0
        self.delay_ns = 0
        self._streams.clear()
        self._cmd_from = None
        self._hold_s = None
        self.external.reset()
        self.note(f'reset:{category}', f'reset ({category}): {detail}' if detail
                  else f'reset ({category})')
        try:
            self.estimator.reset(category, detail)
        except Exception as exc:  # noqa: BLE001 - the node must survive its core
            self.note('reset:error', f'estimator reset failed: {exc!r}')

    def reconfigure(self, values: dict[str, Any]) -> None:
        """Apply validated live parameters (``ros2 param set``): the estimator's noise
        σ's (:data:`~mbfg_ros.estimation.estimator.LIVE_FIELDS`) and the command law's
        ``kp``, ``kd``.

        :raises ValueError: a value the estimator refuses (nothing changed then).
        """
        sigmas = {k: float(x) for k, x in values.items() if k in LIVE_FIELDS}
        if sigmas:
            self.estimator.reconfigure(**sigmas)
        if 'kp' in values or 'kd' in values:
            self.law.set_gains(values.get('kp', self.law.kp), values.get('kd', self.law.kd))

    def set_state(self, msg: Any, now_ns: int | None = None) -> str:
        """robot_localization's ``set_pose`` for joints: re-initialise at the positions (and
        velocities, if given) of a JointState. Returns ``''`` when done, else why it was
        refused (nothing changed): unknown joint, non-finite value, no position, bad
        structure or stamp. A zero stamp means now. Efforts in it are ignored.

        The state is reset (category ``manual``) and the message queued as the one
        reading the next tick re-initialises from (the start-up seeding solves the
        constraints for the given joints, so the YAML assembly branch is kept).
        """
        try:
            t, rec, unknown, nonfinite = cv.joint_state_to_record(msg, self._known_joints,
                                                                  now_ns)
        except cv.InputRejected as exc:
            return str(exc)
        if unknown:
            return (f'unknown joints {cv.capped(list(unknown))} (mechanism joints: '
                    f'{list(self.joint_names)})')
        if nonfinite:
            return f'{nonfinite} non-finite values (NaN or inf)'
        if not np.isfinite(rec.position).any():
            return 'no joint position given'
        gated, bad = self.gate.joint(rec)
        if bad or gated is None:
            return f'values outside {self._limits_of}'
        if now_ns is not None and t > now_ns + self.future_ns:
            return f'stamped {(t - now_ns) / NS:.3f} s ahead of the clock'
        rec = JointMeasurement(rec.t, rec.names, rec.position, rec.velocity,
                               np.full(len(rec.names), np.nan))
        self.reset('manual', f'set_state: {", ".join(rec.names)}')
        self.push(t, rec, now_ns)
        return ''

    # ---------------------------------------------------------------- ticks

    def advance(self, now_ns: int, inclusive: bool = True) -> list[TickOutput]:
        """Run the grid ticks due at clock ``now_ns`` minus the input latency (live: one,
        possibly merged, tick per call; see :meth:`_advance_live`); a clock gone back
        resets."""
        if self._last_clock is not None and now_ns < self._last_clock - 2 * self.period:
            self.reset('clock_jump',
                       f'clock jumped back by {(self._last_clock - now_ns) / NS:.3f} s')
        self._last_clock = now_ns
        T = self._due(now_ns)
        self.behind = False
        if self.live and self.last_tick is not None:
            return self._advance_live(T, inclusive)
        ticks, skipped = tick_times(self.last_tick, T, self.period, inclusive, self.max_catchup,
                                    self.phase)
        if skipped:
            self.ticks['skipped'] += skipped
        return [self._tick(t) for t in ticks]

    def _due(self, now_ns: int) -> int:
        """The stamp clock up to which ticks are due at clock ``now_ns`` (live: held at the
        data horizon while readings flow; module docstring).

        Live, the hold (:meth:`_hold_at`) is kept with the wall time up to which it stays
        what it is, and worked out again only when a reading was queued or the driver
        reset since (:meth:`push` and :meth:`reset` drop it) or the wall clock reached
        that time (a stream or all of them fell silent): a loop pass asking up
        to four times (the governor's ``due_grid``, ``predict_newest``, ``predict``,
        ``smooth``) walks :meth:`data_horizon` once, and every call returns what working
        it out anew at its own wall time would (no decision changes)."""
        T = now_ns - self.delay_ns
        if self.live and self._max_stamp is not None:
            wall = time.monotonic_ns()
            hold = self._hold
            if hold is None or wall >= hold[0]:
                hold = self._hold = self._hold_at(wall)
            if hold[1] is not None:
                T = min(T, hold[1])
        return T

    def _hold_at(self, wall: int) -> tuple[float, int | None]:
        """(until, hold): the stamp the ticks are held at by wall time ``wall`` (None: not
        held, no reading for ``sensor_timeout``), and the wall time up to which (exclusive)
        it stays the same. The hold depends on the wall clock only through "within
        ``sensor_timeout`` of a reading" tests (here and in :meth:`data_horizon`), each true
        while ``wall < x`` for its own ``x``; the monotonic clock only moves on, so every test
        comes out the same until the nearest ``x`` after ``wall`` (:meth:`_horizon`), and a
        test already false stays so until a reading comes."""
        if wall - self._push_wall >= self.silence_ns:
            return math.inf, None
        # readings are flowing (perhaps a backlog): ticks stay within half a window of the
        # newest one, so the readings still on their way are not too old on arrival
        horizon, until = self._horizon(wall)
        return until, min(self._max_stamp + self.lag_ns // 2, horizon)

    def predict(self, now_ns: int, before_tick: bool = False) -> list[TickOutput]:
        """Live, for :meth:`predict_newest` (the governor's ``predict``, issue 24): the newest
        smoothed estimate carried to each grid time due at clock ``now_ns`` after the newest
        one that had its turn (none while more than ``max_merge_ticks`` are due: the
        smoother is behind), by
        :meth:`Estimator.predict` (no state change; the readings stay queued for the tick).
        Each one carries its own torque command, computed from it (a loop that came late
        sends the older ones' commands too, oldest first: ``~/command`` keeps step with
        ``~/state``, one per estimate, and a recording of it is whole).
        ``before_tick``: the caller runs the due tick next (:meth:`smooth`), so the grid
        times it merges get predictions and the newest due one is left to it. Empty before
        the first estimate. Counted in ``ticks.predicted``."""
        if self.last_tick is None:
            return []
        due = self.grid_index(self._due(now_ns))
        if due > self.grid_index(self.last_tick) + self.max_merge:
            # the smoother is behind a backlog: predictions from its old state would be
            # late and worse than none, and their budget is the catch-up's
            return []
        last = due - before_tick
        first = self.grid_index(self.handled_ns) + 1
        outs: list[TickOutput] = []
        for k in range(first, last + 1):
            g = self.grid_time(k)
            try:
                est = self.estimator.predict(g / NS)
            except Exception as exc:  # noqa: BLE001 - the node must survive it
                self.note('predict', f'estimator.predict failed: {exc!r}')
                break
            if est is None or not est.predicted:
                break
            self._predicted_ns = g
            self.ticks['predicted'] += 1
            effort = self._joint_effort(est)
            level = 0 if est.status == 'ok' else 1
            status = f'{est.status} (predicted)'
            command, withheld = self._command(est, g)
            if withheld:
                level = 2
                status = f'{status}; no torque command: {_WITHHELD_TEXT[withheld]}'
            outs.append(TickOutput(g, est, effort, command, level, status, None, withheld))
        return outs

    def _joint_effort(self, est: Estimate) -> np.ndarray:
        """Each joint's effort in the estimate: its actuator's τ̂, NaN for a joint without
        one (a tick's and a prediction's ``~/joint_states`` alike)."""
        tau = np.asarray(est.tau, dtype=float).reshape(-1)
        if self._effort_every and tau.size:     # every joint actuated (an arm): one gather
            return tau[self._effort_src]
        return np.where(self._effort_has, tau[self._effort_take] if tau.size else np.nan,
                        np.nan)

    @property
    def predicted_ns(self) -> int:
        """Grid time of the newest prediction (-1: none since the start or a reset)."""
        return self._predicted_ns

    @property
    def handled_ns(self) -> int:
        """Newest grid time that has had its turn: smoothed, predicted or thinned (-1:
        none since the start or a reset)."""
        last = -1 if self.last_tick is None else self.last_tick
        return max(last, self._predicted_ns, self._thinned_ns)

    def due_grid(self, now_ns: int) -> tuple[int, int]:
        """Live, for the node's governor (issue 24): (grid periods due at clock ``now_ns``
        since the smoother's last tick, grid ticks due that have not had their turn). (0, 0)
        before the first tick."""
        if self.last_tick is None:
            return 0, 0
        due = self.grid_index(self._due(now_ns))
        return (due - self.grid_index(self.last_tick),
                max(due - self.grid_index(self.handled_ns), 0))

    def _thin_until(self, g: int) -> None:
        """The grid ticks after the newest handled one up to ``g`` (inclusive) get no
        estimate: counted in ``ticks.thinned``."""
        n = (g - self.handled_ns) // self.period
        if n > 0:
            self.ticks['thinned'] += n
            self._thinned_ns = g

    def thin(self, now_ns: int) -> None:
        """Live (the governor's ``thin``): every grid tick due at clock ``now_ns`` without
        its turn gets no estimate (``ticks.thinned``)."""
        if self.last_tick is not None:
            self._thin_until(self.grid_time(self.grid_index(self._due(now_ns))))

    def smooth(self, now_ns: int) -> list[TickOutput]:
        """Live (the governor's ``smooth``): :meth:`advance`, the grid ticks it merges
        that had no turn yet counted in ``ticks.thinned`` (no late estimate for them)."""
        handled = self.handled_ns
        outs = self.advance(now_ns)
        if outs and handled >= 0:
            n = min((outs[-1].t_ns - handled) // self.period - 1, self.max_merge)
            if n > 0:
                self.ticks['thinned'] += n
        return outs

    def predict_newest(self, now_ns: int, n: int = 1,
                       before_tick: bool = False) -> list[TickOutput]:
        """Live (the governor's ``predict``): :meth:`predict` for the ``n`` newest grid ticks
        due at clock ``now_ns`` (``before_tick``: before the newest, which the smoother
        takes next), each with its torque command; the older ones without their turn (the
        loop came late) counted in ``ticks.thinned``, as are the ``n`` when no prediction
        can be made (the smoother behind a backlog)."""
        if self.last_tick is None:
            return []
        p = self.period
        g = self.grid_time(self.grid_index(self._due(now_ns)) - before_tick)
        self._thin_until(g - max(n, 1) * p)
        outs = self.predict(now_ns, before_tick)
        if not outs:
            self._thin_until(g)
        return outs

    def _advance_live(self, T: int, inclusive: bool) -> list[TickOutput]:
        """One tick per call: the next grid tick, or when several are due (the node fell
        behind) a merged one up to ``max_merge`` grid ticks on; after a silence longer
        than the estimator's ``max_tick_gap`` (no reading queued in it: the estimator
        re-initialises anyway) straight to the newest."""
        p = self.period
        first = self.grid_index(self.last_tick) + 1
        last = self.grid_index(T if inclusive else T - 1)
        n = last - first + 1
        if n <= 0:
            return []
        k = first
        if n > 1:
            self.ticks['overruns'] += 1
            oldest = self._queue[0][0][0] if self._queue else None
            if n * p > self.max_gap_ns and (oldest is None
                                            or oldest > self.last_tick + self.max_gap_ns):
                k = last
                self.ticks['skipped'] += n - 1
            else:
                k = first + min(n, self.max_merge) - 1
                self.ticks['merged'] += k - first
            self.behind = k < last
        return [self._tick(self.grid_time(k))]

    def data_horizon(self, wall: int | None = None) -> int:
        """Live: the stamp up to which every flowing sensor stream has delivered, plus
        7/8 of its stamp spacing for a stream at the tick rate or faster (a tick waits for
        its reading at the tick: under a simulator's clock, which comes before the readings
        of its stamp, a tick would otherwise run first and its readings come late, onto an
        older key), else 1.5 of it (at least one tick period, at most half a window); no
        limit (a huge value) when no stream is flowing. ``wall``: ``time.monotonic_ns()``
        if the caller has it. Module docstring."""
        if wall is None:
            wall = time.monotonic_ns()
        return self._horizon(wall)[0]

    def _horizon(self, wall: int) -> tuple[int, int]:
        """(:meth:`data_horizon` at wall time ``wall``, the wall time from which on it may
        differ: the newest reading's or a stream's ``sensor_timeout`` running out)."""
        silence = self.silence_ns
        newest = self._max_stamp if self._max_stamp is not None else 0
        horizon, until = 1 << 62, self._push_wall + silence
        for stamp, spacing, last in self._streams.values():
            if wall - last <= silence:
                if last + silence < until:
                    until = last + silence + 1          # when this stream falls silent
                if stamp >= newest - self.lag_ns // 2:
                    if 0 < spacing <= self.period:
                        # a stream at the tick rate or faster: a tick waits for its reading
                        # at or before the tick (due within 7/8 of its spacing after its
                        # newest: a stamp's jitter of an eighth of the spacing does not
                        # hold it)
                        allow = spacing - spacing // 8
                    else:
                        allow = min(max(self.period, (3 * spacing) // 2), self.lag_ns // 2)
                    horizon = min(horizon, stamp + allow)
        return horizon, until

    def idle(self, now_ns: int, silence_ns: int) -> bool:
        """Nothing queued and no reading for ``silence_ns`` of the tick clock: no tick to run."""
        if self._queue:
            return False
        return self._max_stamp is None or now_ns - self.delay_ns - self._max_stamp > silence_ns

    @property
    def pending(self) -> int:
        """Records queued for ticks not yet run."""
        return len(self._queue)

    def _drain(self, t_ns: int) -> None:
        q = self._queue
        est = self.estimator
        while q and q[0][0][0] <= t_ns:
            key, rec, wall = heapq.heappop(q)
            try:
                ok = est.add_validated(rec)    # stamps checked here, once (push)
            except Exception as exc:  # noqa: BLE001
                ok = False
                self.counters['dropped.estimator_error'] += 1
                self.note('estimator', f'estimator.add failed: {exc!r}')
            if ok:
                self._fed = True
                self._newest_used = max(self._newest_used, key[0])
                self._newest_wall = max(self._newest_wall, wall)
            else:
                self.counters['rejected_by_estimator'] += 1

    def _tick(self, t_ns: int) -> TickOutput:
        self.last_tick = t_ns
        self._drain(t_ns)
        est = None
        status = 'waiting for measurements'
        if self._fed:
            resets = self.estimator.counters.get('resets', 0)
            try:
                est = self.estimator.tick(t_ns / NS)
            except Exception as exc:  # noqa: BLE001
                self.reset('error', f'estimator.tick raised {exc!r}')
            else:
                if self.estimator.counters.get('resets', 0) != resets:
                    reason = self.estimator.last_reset_reason
                    self.note('reset:' + reason.split(':')[0], f'estimator reset ({reason})')
            self.ticks['run'] += 1
            status = est.status if est is not None else status
            if est is not None:
                self._phased = True           # the grid stays from the first estimate on
        effort = command = ext = None
        level, withheld = 1, ''
        if est is not None:
            effort = self._joint_effort(est)
            level = 0 if status == 'ok' else 1
            try:
                ext = self.external.update(est, self.estimator.known_torque(
                    est.t, self._tau_motor))
            except Exception as exc:  # noqa: BLE001 - the node must survive it
                self.note('external', f'external torques failed: {exc!r}')
        command, withheld = self._command(est, t_ns)
        if withheld and (est is not None or self._fed):
            level = 2
            status = f'{status}; no torque command: {_WITHHELD_TEXT[withheld]}'
        out = TickOutput(t_ns, est, effort, command, level, status, ext, withheld)
        self.last_output = out
        return out

    def _command_allowed(self, est: Estimate | None, t_ns: int) -> str:
        """'' when a command may go out at tick ``t_ns``, else the :data:`WITHHELD` reason."""
        core = self.estimator.counters
        inits = (core.get('initialisations', 0), core.get('resets', 0))
        if inits != self._inits:                  # (re-)initialised or reset: settle first
            self._inits = inits
            self._cmd_from = t_ns + self.settle_ns if inits[0] else None
            self._hold_s = None
        if est is None:
            self._hold_s = None
            return 'no_estimate' if self._cmd_from is None else 'initialising'
        if self._cmd_from is None:
            self._cmd_from = t_ns + self.settle_ns
        if t_ns < self._cmd_from:
            return 'initialising'
        if t_ns - self._newest_used > self.command_timeout_ns:
            return 'timeout'
        if self.live and time.monotonic_ns() - self._newest_wall > self.command_timeout_ns:
            return 'timeout'          # live and behind: the data arrived too long ago
        return ''

    def _command(self, est: Estimate | None, t_ns: int) -> tuple[np.ndarray | None, str]:
        """(command, '') or (None, why): the law's τ clamped to the effort ratings."""
        why = self._command_allowed(est, t_ns)
        if why:
            self.command_counters['withheld.' + why] += 1
            return None, why
        q, qd = np.asarray(est.q, dtype=float), np.asarray(est.qd, dtype=float)
        law = self.law
        try:
            ref = self.reference
            if ref is not None and self._ref_cols is not None and t_ns / NS < ref.t[-1]:
                p, v, a = ref.sample(t_ns / NS)
                c = self._ref_cols
                out = law.track(q, qd, p[c], v[c], a[c])
                self._hold_s = None
            else:
                if self._hold_s is None:     # holding begins: latch the pose
                    self._hold_s = ref.position[-1][self._ref_cols].copy() \
                        if ref is not None and self._ref_cols is not None \
                        else law.actuated(q, qd)[0]
                out = law.hold_at(q, qd, self._hold_s)
        except Exception as exc:  # noqa: BLE001 - singular pose etc.
            self.counters['command_errors'] += 1
            self.note('command', f'torque command failed: {exc!r}')
            out = None
        if out is None or np.isnan(out).any():
            self.command_counters['withheld.error'] += 1
            return None, 'error'
        out, over = law.clamp(out)
        if over:
            self.command_counters['saturated'] += over
            self.command_counters['saturated_ticks'] += 1
            self.note('command:saturated', f'torque commands saturated at the effort limits '
                      f'({over} of {out.size}): the reference or gains ask for more than the '
                      'motors give')
        self.command_counters['sent'] += 1
        return out, ''

    # ---------------------------------------------------------------- diagnostics

    def diagnostics(self) -> tuple[int, str, dict[str, Any]]:
        """(level, message, values) of the input, tick and estimator counters.

        The key set is fixed (it never grows with what arrives): ``input.*``
        (:data:`INPUT_KEYS`), ``ticks.*``, ``estimator.*`` (the estimator's
        counters, whose reset categories are a fixed set too).
        """
        out = self.last_output
        values: dict[str, Any] = {f'input.{k}': v for k, v in self.counters.items()}
        values['input.latency_ms'] = f'{self.delay_ns / 1e6:.1f}'
        values['input.pending'] = len(self._queue)
        values.update({f'ticks.{k}': v for k, v in self.ticks.items()})
        values.update({f'commands.{k}': v for k, v in self.command_counters.items()})
        try:
            core = self.estimator.counters
        except Exception:  # noqa: BLE001
            core = {}
        values.update({f'estimator.{k}': v for k, v in core.items()})
        values.update({f'external.{k}': v for k, v in self.external.counters.items()})
        if out is None:
            return 1, 'waiting for measurements', values
        values['tick_time'] = f'{out.t_ns / NS:.9f}'
        return out.level, out.message, values
