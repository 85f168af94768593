"""core.bounded.remember: the one bounded-cache idiom of the per-tick caches."""
from __future__ import annotations

from mbfg_ros.core.bounded import KEPT, remember


def test_remember_stores_and_returns_the_value():
    cache: dict = {}
    value = object()
    assert remember(cache, 'k', value) is value
    assert cache == {'k': value}


def test_remember_empties_a_full_cache_before_storing():
    cache = {i: i for i in range(3)}
    remember(cache, 'new', 1, most=3)
    assert cache == {'new': 1}
    remember(cache, 'next', 2, most=3)
    assert cache == {'new': 1, 'next': 2}          # not full: kept


def test_the_default_bound_is_kept_entries():
    cache: dict = {}
    for i in range(KEPT):
        remember(cache, i, i)
    assert len(cache) == KEPT
    remember(cache, 'one more', 0)
    assert cache == {'one more': 0}
