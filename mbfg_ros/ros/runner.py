"""The life cycle shared by the nodes' entry points: init, build, spin, clean shutdown."""
from __future__ import annotations

import signal
import sys
import threading
from typing import Any, Callable, Sequence

import rclpy
import rclpy.executors
from rclpy.exceptions import NameValidationException
from rclpy.node import Node

from ..core.errors import MbfgError
from . import conversions as cv
from .command_line import help_text, unparsable_urdf_override, wants_help
from .params import ParamSpec

__all__ = ['run_node', 'stop_on_signals']


def run_node(name: str, make: Callable[[], Node], spin: Callable[[Node], None],
             args: list[str] | None = None, specs: Sequence[ParamSpec] = (),
             summary: str = '') -> int:
    """Run one node until it is done or ROS shuts down; the process exit code.

    Before ROS sees the command line: ``-h``/``--help`` prints the parameters of
    ``specs`` with their defaults (``summary`` first) and returns 0; a
    ``-p robot_description:=`` that ROS cannot parse is one error line pointing to a
    parameters file, exit 2 (issue 30 item 6).

    A user error while building the node (bad parameter, YAML file) prints
    one line ``<name>: error: ...`` and returns 2. Ctrl-C and an external
    shutdown end cleanly with 0; an exception while ROS is still up is a
    bug and keeps its traceback. The node's ``close()`` (if it has one) runs
    before ``destroy_node()``.

    Signals: Ctrl-C in a terminal sends SIGINT to the whole process group, then
    ``ros2 launch`` sends its own SIGINT and later SIGTERM. The first SIGINT or
    SIGTERM sets ``node.stop_requested`` (a ``threading.Event`` the spin loops check
    between callbacks; :func:`stop_on_signals`, installed by the spin function once
    its executor exists) and every later one is ignored, so no KeyboardInterrupt can
    land inside a tick or in the clean-up.
    """
    argv = list(sys.argv[1:] if args is None else args)
    if specs and wants_help(argv):
        sys.stdout.write(help_text(name, summary, specs))
        return 0
    bad = unparsable_urdf_override(argv)
    if bad:
        print(f'{name}: error: {bad}', file=sys.stderr)
        return 2
    try:
        rclpy.init(args=args)
    except Exception as exc:  # noqa: BLE001 - rcl's RCLError: a command line it cannot parse
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f'{name}: error: {first}', file=sys.stderr)
        return 2
    node = None
    try:
        try:
            node = make()
        except (MbfgError, OSError) as exc:
            print(f'{name}: error: {cv.startup_error_text(exc)}', file=sys.stderr)
            return 2
        except NameValidationException as exc:   # issue 26: a topic parameter like 'a b'
            print(f'{name}: error: {" ".join(str(exc).split())}', file=sys.stderr)
            return 2
        if not hasattr(node, 'stop_requested'):
            node.stop_requested = threading.Event()
        try:
            spin(node)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, _ignore)               # clean-up is not interruptible
    except KeyboardInterrupt:
        pass
    except rclpy.executors.ExternalShutdownException:
        pass
    except Exception:
        if rclpy.ok():          # a real bug: keep the traceback
            raise
        # shut down by a signal while a callback was publishing: a clean exit
    finally:
        if node is not None:
            close = getattr(node, 'close', None)
            try:
                if close is not None:
                    close()
                node.destroy_node()
            except Exception:  # noqa: BLE001 - handles already gone after a shutdown
                if rclpy.ok():
                    raise
        if rclpy.ok():
            rclpy.shutdown()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)   # rclpy's shutdown restored the defaults
    return 0


def _ignore(_signum: int, _frame: Any) -> None:
    """A Python-level "ignore": a signal already pending when the handler changes runs
    this, where ``SIG_IGN`` would make CPython print "Signal 15 ignored due to race
    condition" with a traceback (SIGINT then SIGTERM within one executor wait)."""


def stop_on_signals(node: Node) -> None:
    """SIGINT/SIGTERM set ``node.stop_requested`` once; later ones are ignored.

    Call it after the executor is created (rclpy's executors hook the signals too).
    """
    stop = node.stop_requested

    def request_stop(_signum: int, _frame: Any) -> None:
        stop.set()          # later signals land here again: a no-op

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
        signal.siginterrupt(sig, False)   # restart waits instead of failing inside rclpy
