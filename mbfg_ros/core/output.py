"""Outputs that never destroy what the tool did not write (issue 26, "No data lost").

Every file or bag directory a tool writes goes through here:

* :func:`check_output` refuses, before any work, an output that exists (unless
  ``force``), that is one of the inputs (or holds or lies inside one), or whose
  directory is missing or read-only; a directory is replaced (with ``force``) only
  when it is a rosbag2 bag (``metadata.yaml``), never an arbitrary directory;
* :func:`atomic_path` / :func:`atomic_dir` hand out a temporary name in the same
  directory and rename it into place (``os.replace``, atomic on POSIX) only on
  success, so a signal, a kill or a full disk leaves the old output untouched and
  no half-written file under the final name; the temporary is removed on failure;
* an ``OSError`` while writing (``ENOSPC``, a vanished directory) becomes one
  :class:`OutputError` line naming the path.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from .errors import MbfgError

__all__ = ['OutputError', 'check_output', 'atomic_path', 'atomic_dir', 'write_text_atomic']


class OutputError(MbfgError):
    """An output cannot be written (exists, is an input, disk full...); names the path."""


def _same_or_inside(a: Path, b: Path) -> bool:
    """True when ``a`` is ``b`` or lies inside directory ``b``."""
    return a == b or b in a.parents


def check_output(path: str | Path | None, what: str = 'output', *, force: bool = False,
                 inputs: Iterable[str | Path | None] = (), directory: bool = False) -> None:
    """Refuse now (not after a long run) an output that would destroy something.

    :param directory: the output is a directory (a rosbag2 bag), else a file.
    :raises OutputError: one line naming the path and the reason.
    """
    if path is None:
        return
    p = Path(path)
    real = p.resolve()
    for src in inputs:
        if src is None or str(src).lstrip().startswith('<'):     # URDF text, not a path
            continue
        s = Path(src).resolve()
        if _same_or_inside(real, s) or _same_or_inside(s, real):
            raise OutputError(f'{p}: the {what} would overwrite the input {src}; '
                              'choose another path')
    parent = p.parent if str(p.parent) else Path('.')
    if not parent.is_dir():
        raise OutputError(f'{p}: cannot write the {what}: directory {parent} does not exist')
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f'{p}: cannot write the {what}: permission denied')
    if p.is_symlink() or p.exists():
        if p.is_dir() and not directory:
            raise OutputError(f'{p}: cannot write the {what}: it is a directory')
        if directory and p.is_dir() and not (p / 'metadata.yaml').is_file():
            raise OutputError(f'{p}: exists and is not a rosbag2 bag (no metadata.yaml); '
                              f'not replacing it, choose another path for the {what}')
        if directory and not p.is_dir():
            raise OutputError(f'{p}: cannot write the {what}: it is a file')
        if not force:
            raise OutputError(f'{p}: the {what} exists (use --force to replace it)')


def _temp_name(path: Path, kind: str) -> Path:
    """A fresh name beside ``path``, hidden, keeping the suffix (matplotlib reads it)."""
    fd, name = tempfile.mkstemp(prefix=f'.{path.name}.', suffix=f'.{kind}{path.suffix}',
                                dir=path.parent if str(path.parent) else '.')
    os.close(fd)
    return Path(name)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path, what: str = 'output') -> Iterator[Path]:
    """Yield a temporary file name beside ``path``; on success it replaces ``path``.

    On any exception (signal, ``OSError``) the temporary is removed and ``path`` is
    left as it was; an ``OSError`` is raised again as one :class:`OutputError` line.
    """
    final = Path(path)
    try:
        tmp = _temp_name(final, 'tmp')
    except OSError as exc:
        raise OutputError(f'{final}: cannot write the {what}: {exc.strerror}') from None
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, final)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(f'{final}: cannot write the {what}: {exc.strerror or exc}') from None
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path, what: str = 'bag') -> Iterator[Path]:
    """Yield a directory name (not yet created) with ``path``'s name inside a temporary
    directory beside ``path`` (a bag names its files after its directory: they must be
    ``<name>.mcap``, not the temporary's hidden name); on success it replaces ``path``
    (an old bag is moved aside first and removed after the swap). On failure the
    temporary is removed, ``path`` untouched.
    """
    final = Path(path)
    if final.is_dir() and not (final / 'metadata.yaml').is_file():
        raise OutputError(f'{final}: exists and is not a rosbag2 bag (no metadata.yaml); '
                          f'not replacing it, choose another path for the {what}')
    if final.exists() and not final.is_dir():
        raise OutputError(f'{final}: cannot write the {what}: it is a file')
    try:
        holder = Path(tempfile.mkdtemp(prefix=f'.{final.name}.', suffix='.tmpdir',
                                       dir=final.parent if str(final.parent) else '.'))
    except OSError as exc:
        raise OutputError(f'{final}: cannot write the {what}: {exc.strerror}') from None
    try:
        yield holder / final.name
        old = None
        if final.exists():
            old = _temp_name(final, 'old')
            old.unlink()
            os.replace(final, old)
        os.replace(holder / final.name, final)
        holder.rmdir()
        if old is not None:
            _remove(old)
    except OSError as exc:
        _remove(holder)
        raise OutputError(f'{final}: cannot write the {what}: {exc.strerror or exc}') from None
    except BaseException:
        _remove(holder)
        raise


def write_text_atomic(path: str | Path, text: str, what: str = 'output') -> None:
    """Write ``text`` to ``path`` through :func:`atomic_path`."""
    with atomic_path(path, what) as tmp:
        tmp.write_text(text)
