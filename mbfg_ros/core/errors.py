"""Error types of mbfg_ros.

Every user-facing error names where the problem is (file, YAML path, line,
topic or field) so that a CLI can print one line and exit without a traceback.
"""
from __future__ import annotations

__all__ = ['MbfgError', 'ExpressionError', 'MechanismError', 'AssemblyError',
           'TrajectoryError']


class MbfgError(Exception):
    """Base class of every error mbfg_ros raises on bad user input."""


class ExpressionError(MbfgError):
    """An arithmetic expression in a mechanism file cannot be evaluated."""


class MechanismError(MbfgError):
    """A mechanism description is invalid.

    The message has the form ``<file>: <yaml.path>: <what is wrong>``.
    """

    def __init__(self, message: str, *, source: str = '<mechanism>', path: str = '') -> None:
        self.source = source
        self.path = path
        self.reason = message
        where = f'{source}: {path}: ' if path else f'{source}: '
        super().__init__(where + message)


class AssemblyError(MechanismError):
    """The position problem has no solution near the given pose."""


class TrajectoryError(MbfgError):
    """A trajectory file is invalid (the message names the file and line)."""
