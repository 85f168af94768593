"""Shared plumbing of the command-line tools: one-line errors and progress."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from ..core.errors import MbfgError
from ..core.output import atomic_path, check_output

__all__ = ['run_cli', 'Progress', 'save_figure', 'plain', 'speed_phrase', 'load_checked',
           'check_writable', 'add_force_argument', 'Terminated']

_FORMATS = ('png', 'pdf', 'svg', 'jpg', 'jpeg', 'eps', 'ps', 'tif', 'tiff', 'webp')


def plain(text: str) -> str:
    """Docstring text for ``--help``: RST literals (double backquotes) shown without them."""
    return text.replace('``', '')


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Save a matplotlib figure at exactly ``path`` and close it.

    The format follows the suffix when matplotlib knows it, else PNG (matplotlib
    itself would append ``.png`` to a name without a suffix).
    """
    import matplotlib.pyplot as plt

    path = Path(path)
    suffix = path.suffix.lower().lstrip('.')
    fmt = suffix if suffix in _FORMATS else 'png'
    try:
        if path.parent != Path(''):
            path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path, 'plot') as tmp:     # issue 26: renamed into place on success
            fig.savefig(tmp, dpi=dpi, format=fmt)
    except OSError as exc:
        raise MbfgError(f'{path}: cannot write: {exc.strerror}') from None
    finally:
        plt.close(fig)
    return path


def speed_phrase(wall: float, simulated: float) -> str:
    """``'4.2x faster than real time'`` (or slower) for ``wall`` seconds spent on
    ``simulated`` seconds."""
    if not (wall > 0 and simulated > 0):
        return 'real-time factor undefined'
    ratio = simulated / wall
    if ratio >= 1:
        return f'{ratio:.1f}x faster than real time'
    return f'{1 / ratio:.1f}x slower than real time'


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so every ``finally`` and temporary output is cleaned."""


def _terminate(_signum: int, _frame: Any) -> None:
    raise Terminated


def run_cli(main: Callable[[list[str] | None], int], argv: list[str] | None = None,
            prog: str = 'mbfg') -> int:
    """Run ``main``; a user error (:class:`MbfgError`, missing file) prints one line, exit 2.

    A closed output pipe (``mbfg-... | head``) ends quietly with status 141
    (128 + SIGPIPE, what a shell reports for a killed writer). SIGTERM is handled
    like SIGINT (issue 26): temporary outputs are removed, the old outputs kept, one
    line, status 143 (130 for SIGINT). An ``OSError`` that escaped (a full or vanished
    disk) is one line and status 2. Programming errors keep their traceback: they are
    bugs to report.
    """
    previous = {}
    # SIGINT as KeyboardInterrupt even where it was inherited ignored (a job started with
    # '&' by a non-interactive shell): an interrupt must still clean the temporaries up.
    for sig, handler in ((signal.SIGTERM, _terminate),
                         (signal.SIGINT, signal.default_int_handler)):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:         # not the main thread: leave the signals alone
            pass
    try:
        return _run(main, argv, prog)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(main: Callable[[list[str] | None], int], argv: list[str] | None, prog: str) -> int:
    try:
        try:
            return int(main(argv) or 0)
        finally:                   # also after argparse's SystemExit (--help, usage errors)
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly. Point stdout at devnull so
        # the interpreter's final flush does not raise again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141
    except MbfgError as exc:
        text = ' '.join(str(exc).splitlines())      # one line, whatever a foreign text held
        print(f'{prog}: error: {text}', file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f'{prog}: error: {exc.filename}: file not found', file=sys.stderr)
        return 2
    except Terminated:
        print(f'{prog}: terminated (SIGTERM); no output replaced', file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f'{prog}: interrupted; no output replaced', file=sys.stderr)
        return 130
    except OSError as exc:
        where = f'{exc.filename}: ' if exc.filename else ''
        print(f'{prog}: error: {where}{exc.strerror or exc}', file=sys.stderr)
        return 2


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


def load_checked(path: str | Path, prog: str) -> Any:
    """A planar mechanism YAML through :func:`~mbfg_ros.loader.load_mechanism`, printing
    ``<prog>: warning: ...`` on stderr when assembly moved points far from the YAML pose
    (:func:`~mbfg_ros.loader.mechanism_warning`).

    :raises MbfgError: ``path`` is a URDF (the planar tools' problems need a YAML).
    """
    from ..loader import is_urdf, load_mechanism, mechanism_warning
    if is_urdf(str(path)):
        raise MbfgError(f'{path}: {prog} takes a planar mechanism YAML, not a URDF')
    system = load_mechanism(str(path))
    warning = mechanism_warning(system)
    if warning:
        print(f'{prog}: warning: {warning}', file=sys.stderr)
    return system


def add_force_argument(p: Any) -> None:
    """``--force``: replace existing outputs (issue 26: refused otherwise)."""
    p.add_argument('--force', action='store_true',
                   help='replace outputs that exist (never the inputs); without it an '
                        'existing output is refused')


def check_writable(path: str | Path | None, what: str = 'output', force: bool = False,
                   inputs: tuple = ()) -> None:
    """Fail now, not after a long run, when ``path`` cannot or must not be written:
    its directory is missing or not writable, it is a directory itself (a bag:
    ``what='directory'``), it exists and ``force`` is not set, or it is one of
    ``inputs`` (:func:`~mbfg_ros.core.output.check_output`).

    :raises MbfgError: one line naming the path and why.
    """
    check_output(path, 'bag' if what == 'directory' else what, force=force, inputs=inputs,
                 directory=what == 'directory')
