"""The tick loops' building blocks, shared by the fixed-base estimator node and the
floating-base one (issue 24's loop, issue 28's node): the QoS of sensors and outputs, the
callback group the executor leaves to the loop, the executor, taking messages without a
callback each, and the garbage collector's pauses for ``/diagnostics``.

The loop itself (:func:`mbfg_ros.ros.estimator_node.run_loop`) and each node's intake stay
with their node: this module holds what both ask of rclpy.
"""
from __future__ import annotations

import time
from typing import Any

import rclpy
import rclpy.executors
from rclpy.callback_groups import CallbackGroup
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from .params import ParameterError

__all__ = ['SENSOR_QOS', 'OUTPUT_QOS', 'SPIN_EVERY_S', 'PolledGroup', 'event_handler_types',
           'events_executor_class', 'make_executor', 'take', 'newest', 'take_raw', 'newest_raw',
           'drain', 'GcPauses']

SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000,
                        reliability=ReliabilityPolicy.BEST_EFFORT,
                        durability=DurabilityPolicy.VOLATILE)
"""Sensor-data QoS (best effort, volatile) with a history of 1 s at 1 kHz, so a
stream survives a slow tick. Matches reliable and best-effort publishers alike."""

OUTPUT_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                        reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.VOLATILE)

SPIN_EVERY_S = 0.01
"""Loop mode: seconds between two turns of the executor (services, parameters, references,
``~/set_state``, diagnostics, markers): one ready callback per turn, without waiting.
A turn costs ~0.13 ms of CPU here (rclpy builds its wait set in Python), so 1 % of a core
at this rate; a request waits at most this long plus one tick."""

class PolledGroup(CallbackGroup):
    """A callback group the executor leaves out of its wait set while ``polling`` is set
    (rclpy's public extension point: ``Executor.can_execute`` asks the entity's group):
    the tick loop takes the messages of its subscriptions itself. With ``polling`` unset
    it is a reentrant group (idle: the executor waits on them and a message wakes the
    node)."""

    def __init__(self, polling: bool = False) -> None:
        super().__init__()
        self.polling = polling

    def can_execute(self, entity: Any) -> bool:
        return not self.polling

    def beginning_execution(self, entity: Any) -> bool:
        return not self.polling

    def ending_execution(self, entity: Any) -> None:
        pass


def event_handler_types() -> tuple[type, ...]:
    """rclpy's QoS event handler class (``rclpy.event_handler.EventHandler`` since Iron,
    ``rclpy.qos_event.QoSEventHandler`` in Humble), as an ``isinstance`` tuple."""
    try:
        from rclpy.event_handler import EventHandler
        return (EventHandler,)
    except ImportError:
        pass
    try:
        from rclpy.qos_event import QoSEventHandler
        return (QoSEventHandler,)
    except ImportError:
        return ()


def events_executor_class() -> type:
    """rclpy's EventsExecutor class, or a :class:`ParameterError` naming the parameter
    where the distro has none (Humble)."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        raise ParameterError("parameter 'executor': 'events' needs rclpy's "
                             'EventsExecutor (Kilted, recent Jazzy; not Humble); use '
                             'auto or single') from None
    return EventsExecutor


def make_executor(kind: str = 'auto', context: Any = None) -> rclpy.executors.Executor:
    """``events``: rclpy's EventsExecutor (``rclpy.experimental``: Kilted, and Jazzy's
    7.1.x releases since its backport; not Humble: a clear error there, picked at run
    time); ``single``, and ``auto``/``loop`` (the executor of all but the sensors and the
    ticks, :func:`run_loop`): the SingleThreadedExecutor every distro has, of ``context``
    (None: the default one). Measured with bench/node_throughput.py at 1 kHz encoder +
    IMU: with the callbacks draining their queues (:func:`drain`), single kept the
    latency at tens of ms where events let it grow to seconds."""
    if kind == 'events':
        return events_executor_class()(context=context)
    # single; auto/loop: the executor of everything but the sensors and the ticks
    return rclpy.executors.SingleThreadedExecutor(context=context)


def take(sub: Any) -> Any:
    """The next message waiting on ``sub``, or None (nothing waiting)."""
    with sub.handle:
        info = sub.handle.take_message(sub.msg_type, sub.raw)
    return None if info is None else info[0]


def newest(sub: Any, take: Any = take) -> Any:
    """The newest message waiting on ``sub`` (the older ones taken and dropped), or None
    (deserialised: the floating-base node's ``/clock``). ``take``: how one message is
    taken (:func:`take`, or :func:`take_raw`: its bytes)."""
    last = None
    while (msg := take(sub)) is not None:
        last = msg
    return last


def take_raw(sub: Any) -> bytes | None:
    """The serialised bytes of the next message waiting on ``sub`` (no deserialisation:
    :mod:`.cdr` reads them), or None (nothing waiting)."""
    with sub.handle:
        info = sub.handle.take_message(sub.msg_type, True)
    return None if info is None else info[0]


def newest_raw(sub: Any) -> bytes | None:
    """The bytes of the newest message waiting on ``sub`` (the older ones taken and
    dropped unread), or None. A subscription keeping the last message only (rclpy's
    ``/clock`` one: KEEP_LAST, depth 1) is taken once."""
    qos = sub.qos_profile
    if qos.history == HistoryPolicy.KEEP_LAST and qos.depth == 1:
        return take_raw(sub)
    return newest(sub, take_raw)


def drain(inputs: list, limit: int, take: Any = take):
    """``(handler, message)`` pairs already waiting on the sensor subscriptions
    ``inputs`` (``(subscription, handler)`` pairs), taken round-robin, at most ``limit``.

    One executor dispatch per message costs far more than the message itself at
    1 kHz (rclpy rebuilds its wait set); taking what is queued in one callback is
    what the executor's own dispatch does (``Subscription.handle.take_message``),
    minus the per-message round trip. Round-robin over *every* sensor topic keeps
    their backlogs in step: draining one topic alone would run the ticks past the
    other topic's waiting readings and drop them as too old. Any failure of that
    internal API falls back to one message per callback. ``take``: how one message is
    taken (:func:`take`; the loop's :func:`take_raw`, its bytes for :mod:`.cdr`).
    """
    live = list(inputs)
    taken = 0
    try:
        while live and taken < limit:
            for item in tuple(live):
                msg = take(item[0])
                if msg is None:
                    live.remove(item)
                    continue
                taken += 1
                yield item[1], msg
    except Exception:  # noqa: BLE001 - an rclpy without this API: per-message dispatch
        return


class GcPauses:
    """Python's garbage-collector pauses, timed through ``gc.callbacks`` (for
    ``/diagnostics``: a pause delays every callback behind it)."""

    def __init__(self) -> None:
        self.count, self.ms_max, self._t0 = 0, 0.0, 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == 'start':
            self._t0 = time.perf_counter()
        else:
            self.count += 1
            self.ms_max = max(self.ms_max, 1e3 * (time.perf_counter() - self._t0))

    def take(self) -> tuple[int, float]:
        """(collections, longest pause in ms) since the last call."""
        out = (self.count, self.ms_max)
        self.count, self.ms_max = 0, 0.0
        return out
