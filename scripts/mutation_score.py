"""Mutation score of the last ``mutmut run`` over the mutants selected by name globs (issue 29).

``python scripts/mutation_score.py [GLOB ...] < <(mutmut results --all true)``: reads
mutmut's ``name: status`` lines, keeps the mutants matching any glob (all if none given),
prints the count per status, the score (killed + timeout + caught by type check over the
mutants checked) and the survivors, one per line (``mutmut show NAME`` gives the diff).
Mutants not checked (outside the run) and without tests are reported, not scored.
Exit 0 whatever the score: the report is the output (``make mutants`` is not a gate).
"""
from __future__ import annotations

import fnmatch
import sys
from collections import Counter
from typing import Iterable, TextIO

KILLED = ('killed', 'timeout', 'caught by type check', 'segfault')
NOT_SCORED = ('not checked', 'skipped', 'no tests')


def parse(lines: Iterable[str]) -> dict[str, str]:
    """``{mutant name: status}`` from ``mutmut results --all true``."""
    out = {}
    for line in lines:
        name, sep, status = line.strip().partition(': ')
        if sep and '__mutmut_' in name:
            out[name] = status
    return out


def select(results: dict[str, str], globs: list[str]) -> dict[str, str]:
    if not globs:
        return results
    return {k: v for k, v in results.items() if any(fnmatch.fnmatchcase(k, g) for g in globs)}


def report(results: dict[str, str], out: TextIO) -> float | None:
    """Print the counts, score and survivors; the score (None when nothing was checked)."""
    counts = Counter(results.values())
    checked = sum(n for s, n in counts.items() if s not in NOT_SCORED)
    killed = sum(counts[s] for s in KILLED)
    out.write(f'mutants selected: {len(results)}\n')
    for status, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        out.write(f'  {status}: {n}\n')
    score = killed / checked if checked else None
    out.write(f'score: {killed}/{checked} = {100 * score:.1f} %\n' if score is not None
              else 'score: nothing checked\n')
    survivors = sorted(k for k, v in results.items() if v not in KILLED + NOT_SCORED)
    if survivors:
        out.write('not killed (mutmut show NAME):\n')
        for name in survivors:
            out.write(f'  {name}: {results[name]}\n')
    return score


def main(argv: list[str]) -> int:
    report(select(parse(sys.stdin), argv), sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
