"""Readings handed to estimators as a tick loop does: every record stamped up to the tick."""
from __future__ import annotations

from typing import Any, Sequence


def add_due(recs: Sequence[Any], i: int, t: float, *estimators: Any) -> int:
    """``est.add`` of ``recs[i:]`` stamped up to ``t`` (1e-12 s of rounding allowed; ``recs``
    in stamp order) for each of ``estimators``; the index of the first record not added."""
    while i < len(recs) and recs[i].t <= t + 1e-12:
        for est in estimators:
            est.add(recs[i])
        i += 1
    return i
