"""Bounded caches: the one way a per-object cache of constants stays small (issue 24).

The per-tick path keeps what it can work out once per key (a reading sequence's layout,
the tick factor's buffers per dt, the gate's Q(τ) per τ, the σ's per variances); the keys
come from the wire or from the stamps, so a stream of new ones must not grow a cache
without end. Each cache is a plain dict owned by its object, read with ``dict.get`` by the
caller; :func:`remember` stores a new entry, emptying the dict first when it is full (a tick
loop repeats a few keys, so they come back at once). It runs on a miss only: the hit path
costs nothing more.
"""
from __future__ import annotations

from typing import Hashable, TypeVar

__all__ = ['remember', 'KEPT']

V = TypeVar('V')

KEPT = 64
"""Entries a cache holds before :func:`remember` empties it (unless told another bound)."""


def remember(cache: dict, key: Hashable, value: V, most: int = KEPT) -> V:
    """``value`` stored in ``cache`` under ``key`` and returned; ``cache`` emptied first
    when it holds ``most`` entries."""
    if len(cache) >= most:
        cache.clear()
    cache[key] = value
    return value
