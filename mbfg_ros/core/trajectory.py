"""Prescribed-motion files for inverse dynamics.

Format (the one of seed 000's library, ``config/trajectories/*.txt``): plain
text, one sample per line, first column the time [s], then one column per
prescribed coordinate; columns separated by whitespace and/or commas; lines
starting with ``%`` or ``#`` (and blank lines) are comments. Time must
increase strictly; every value must be finite; no step may exceed
:data:`MAX_GAP` times the median step, nor the span :data:`MAX_SAMPLES` median
steps (:func:`check_time`, issue 26: a 1000 s gap became 500 979 interpolated
rows, a 1e9 s gap asked for 3.6 TiB).

Every problem raises :class:`~mbfg_ros.core.errors.TrajectoryError` naming the
file and the line (``file:line: what``).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np
import scipy.interpolate
import scipy.signal

from .errors import TrajectoryError

__all__ = ['Trajectory', 'load_trajectory', 'parse_trajectory', 'derivatives', 'check_time',
           'MAX_GAP', 'MAX_SAMPLES']

#: Largest step accepted, in median steps: a recording paused and resumed (the DFKI
#: logs' jitter is below 2) must be split, not interpolated across.
MAX_GAP = 10.0
#: Longest span accepted, in median steps (what a uniform resampling would allocate).
MAX_SAMPLES = 10_000_000

_SPLIT = re.compile(r'[,\s]+')


class Trajectory(NamedTuple):
    """Samples of a prescribed motion: ``t`` (N,), ``z`` (N, k), with the file name."""

    t: np.ndarray
    z: np.ndarray
    source: str


def load_trajectory(path: str | Path, columns: int | None = None) -> Trajectory:
    """Read a trajectory file; ``columns``: expected number of coordinate columns.

    :raises TrajectoryError: unreadable file, bad number, NaN/inf, wrong column
        count, time not strictly increasing, fewer than 3 samples.
    """
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise TrajectoryError(f'{source}: cannot read file: {exc.strerror}') from None
    except UnicodeDecodeError as exc:
        raise TrajectoryError(f'{source}: not a text file (byte {exc.start} is not UTF-8)'
                              ) from None
    return parse_trajectory(text, source=source, columns=columns)


def check_time(t: np.ndarray, source: str, lines: np.ndarray | None = None) -> None:
    """Issue 26: a time column (already strictly increasing) whose largest step is at
    most :data:`MAX_GAP` median steps and whose span is at most :data:`MAX_SAMPLES` of
    them; ``lines[k]``: the file line of sample ``k`` for the message.

    :raises TrajectoryError: ``file:line: ...`` naming the gap and what to do.
    """
    if len(t) < 3:
        return
    dt = np.diff(t)
    h = float(np.median(dt))
    k = int(np.argmax(dt))
    where = f'{source}:{int(lines[k + 1])}' if lines is not None else source
    if dt[k] > MAX_GAP * h:
        raise TrajectoryError(f'{where}: a gap of {dt[k]:.6g} s after t={t[k]:.6g} is '
                              f'{dt[k] / h:.3g} times the median step {h:.3g} s (at most '
                              f'{MAX_GAP:g}): split the file at the gap')
    if (t[-1] - t[0]) > MAX_SAMPLES * h:
        raise TrajectoryError(f'{source}: a span of {t[-1] - t[0]:.6g} s is '
                              f'{(t[-1] - t[0]) / h:.3g} median steps of {h:.3g} s (at most '
                              f'{MAX_SAMPLES}): check the time unit')


def parse_trajectory(text: str, *, source: str = '<string>',
                     columns: int | None = None) -> Trajectory:
    """Parse trajectory text (see :func:`load_trajectory`)."""
    rows: list[list[float]] = []
    lines: list[int] = []
    width = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in '%#':
            continue
        fields = [f for f in _SPLIT.split(line) if f]
        try:
            values = [float(f) for f in fields]
        except ValueError:
            bad = next(f for f in fields if not _is_float(f))
            raise TrajectoryError(f'{source}:{lineno}: not a number: {bad!r}') from None
        if not all(math.isfinite(v) for v in values):
            raise TrajectoryError(f'{source}:{lineno}: value is NaN or infinite')
        want = width if width is not None else (None if columns is None else columns + 1)
        if want is not None and len(values) != want:
            what = (f'expected {want} columns (time + {want - 1} coordinates)'
                    if columns is not None else f'expected {want} columns like the first line')
            raise TrajectoryError(f'{source}:{lineno}: {what}, got {len(values)}')
        if len(values) < 2:
            raise TrajectoryError(f'{source}:{lineno}: need a time column and at least one '
                                  f'coordinate column, got {len(values)} column(s)')
        if rows and values[0] <= rows[-1][0]:
            raise TrajectoryError(f'{source}:{lineno}: time {values[0]:g} does not increase '
                                  f'(previous sample at line {lines[-1]} has t={rows[-1][0]:g})')
        width = len(values)
        rows.append(values)
        lines.append(lineno)
    if len(rows) < 3:
        raise TrajectoryError(f'{source}: need at least 3 samples, found {len(rows)}')
    data = np.array(rows)
    check_time(data[:, 0], source, np.array(lines))
    return Trajectory(data[:, 0].copy(), data[:, 1:].copy(), source)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def derivatives(t: np.ndarray, z: np.ndarray, window: int = 31, order: int = 5
                ) -> tuple[np.ndarray, np.ndarray]:
    """ż and z̈ at the samples, for initialising and regularising inverse dynamics.

    Uniform sampling: Savitzky-Golay local polynomial fits (``order`` over
    ``window`` samples), which also average out the rounding of the file's
    numbers (the seed's trajectory has 8 digits: a cubic spline's z̈ is then
    off by up to 0.03 rad/s², the fit's by 1e-4). Non-uniform sampling: a
    not-a-knot cubic spline.
    """
    t = np.asarray(t, dtype=float)
    z = np.asarray(z, dtype=float)
    dt = np.diff(t)
    N = len(t)
    if N >= 7 and np.ptp(dt) <= 1e-6 * dt.mean():
        w = min(window, N if N % 2 else N - 1)
        p = min(order, w - 2)
        h = float(dt.mean())
        return (scipy.signal.savgol_filter(z, w, p, deriv=1, delta=h, axis=0, mode='interp'),
                scipy.signal.savgol_filter(z, w, p, deriv=2, delta=h, axis=0, mode='interp'))
    spline = scipy.interpolate.CubicSpline(t, z, axis=0)
    return spline(t, 1), spline(t, 2)
