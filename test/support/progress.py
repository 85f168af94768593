"""Per-folder test summary for ``make test`` (issue 30 item 7: progress a person can follow).

pytest's default output names each file with its dots and a running percentage; this adds,
after the run, one line per test folder (core, planar, spatial, ...) with its counts and the
summed test time, so a reader sees where the minutes went and which group failed.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

OUTCOMES = ('passed', 'failed', 'error', 'skipped', 'xfailed', 'xpassed')


def folder_of(nodeid: str) -> str:
    """``test/core/test_bag_io.py::test_x`` -> ``core``; a file directly under test/ -> ``.``."""
    parts = nodeid.split('::')[0].split('/')
    if parts and parts[0] == 'test':
        parts = parts[1:]
    return parts[0] if len(parts) > 1 else '.'


def group_summary(stats: Mapping[str, Iterable]) -> list[str]:
    """One line per folder: ``core       45 passed, 1 failed   3.2 s``, folders sorted by name.

    ``stats`` maps an outcome to its reports (pytest's ``terminalreporter.stats``); a report
    needs ``nodeid``, ``when`` and ``duration``. Setup/teardown time counts toward its test;
    an outcome is counted once per test (the call phase, or setup when setup failed or skipped).
    """
    counts: dict[str, dict[str, int]] = {}
    seconds: dict[str, float] = {}
    for outcome in OUTCOMES:
        for rep in stats.get(outcome, ()):
            nodeid = getattr(rep, 'nodeid', None)
            if not nodeid:
                continue
            group = folder_of(nodeid)
            counts.setdefault(group, {})
            counts[group][outcome] = counts[group].get(outcome, 0) + 1
    for reports in stats.values():
        for rep in reports:
            nodeid = getattr(rep, 'nodeid', None)
            if nodeid and hasattr(rep, 'duration'):
                group = folder_of(nodeid)
                seconds[group] = seconds.get(group, 0.0) + float(rep.duration)
    width = max((len(g) for g in counts), default=0)
    lines = []
    for group in sorted(counts):
        text = ', '.join(f'{counts[group][o]} {o}' for o in OUTCOMES if counts[group].get(o))
        lines.append(f'{group:<{width}}  {text:<40} {seconds.get(group, 0.0):7.1f} s')
    return lines
