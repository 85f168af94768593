"""Shared plumbing of the command-line tools: one-line errors and progress."""
from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

from ..errors import MbfgError

__all__ = ['run_cli', 'Progress']


def run_cli(main: Callable[[list[str] | None], int], argv: list[str] | None = None,
            prog: str = 'mbfg') -> int:
    """Run ``main``; a user error (:class:`MbfgError`, missing file) prints one line, exit 2.

    Programming errors keep their traceback: they are bugs to report.
    """
    try:
        return int(main(argv) or 0)
    except MbfgError as exc:
        print(f'{prog}: error: {exc}', file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f'{prog}: error: {exc.filename}: file not found', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f'{prog}: interrupted', file=sys.stderr)
        return 130


class Progress:
    """A dependency-free progress bar on stderr, refreshed at most 5 times a second.

    Quiet when stderr is not a terminal unless ``force`` is set; then it prints
    a line every 10 %.
    """

    def __init__(self, total: float, label: str = '', stream: TextIO | None = None,
                 force: bool = False, enabled: bool = True) -> None:
        self.total = max(float(total), 1e-12)
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, 'isatty', lambda: False)()
        self.enabled = enabled and (self.tty or force)
        self.start = time.perf_counter()
        self._last = 0.0
        self._last_decile = -1

    def update(self, done: float) -> None:
        if not self.enabled:
            return
        frac = min(max(done / self.total, 0.0), 1.0)
        now = time.perf_counter()
        if self.tty:
            if now - self._last < 0.2 and frac < 1.0:
                return
            self._last = now
            bar = '#' * int(30 * frac)
            elapsed = now - self.start
            eta = elapsed * (1 - frac) / frac if frac > 0 else 0.0
            self.stream.write(f'\r{self.label} [{bar:<30}] {100 * frac:5.1f}% '
                              f'{elapsed:6.1f}s elapsed, {eta:6.1f}s left')
            self.stream.flush()
        else:
            decile = int(10 * frac)
            if decile != self._last_decile:
                self._last_decile = decile
                self.stream.write(f'{self.label} {10 * decile}%\n')

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write('\n')
            self.stream.flush()
