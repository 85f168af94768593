"""The life cycle shared by the nodes' entry points: init, build, spin, clean shutdown."""
from __future__ import annotations

import sys
from typing import Callable

import rclpy
import rclpy.executors
from rclpy.node import Node

from ..errors import MbfgError
from . import conversions as cv

__all__ = ['run_node']


def run_node(name: str, make: Callable[[], Node], spin: Callable[[Node], None],
             args: list[str] | None = None) -> int:
    """Run one node until it is done or ROS shuts down; the process exit code.

    A user error while building the node (bad parameter, YAML file) prints
    one line ``<name>: error: ...`` and returns 2. Ctrl-C and an external
    shutdown end cleanly with 0; an exception while ROS is still up is a
    bug and keeps its traceback. The node's ``close()`` (if it has one) runs
    before ``destroy_node()``.
    """
    rclpy.init(args=args)
    node = None
    try:
        try:
            node = make()
        except (MbfgError, OSError) as exc:
            print(f'{name}: error: {cv.startup_error_text(exc)}', file=sys.stderr)
            return 2
        spin(node)
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
            if close is not None:
                close()
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0
