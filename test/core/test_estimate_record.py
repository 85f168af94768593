"""Estimate.of_tick (issue 24, branch tick6): the record a smoother tick returns, built without
the frozen dataclass's per-field __setattr__, is the record __init__ builds: every field (and
no other attribute), ``predicted`` False, still frozen, and ``dataclasses.replace`` works."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mbfg_ros.core.measurements import Estimate


def test_of_tick_is_the_record_init_builds():
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=3) for _ in range(8)]
    cov = rng.normal(size=(9, 9))
    args = (0.25, *arrays, 1e-4, 'stale', {'ticks': 3}, cov)
    names = [f.name for f in dataclasses.fields(Estimate) if f.name != 'predicted']
    fast, slow = Estimate.of_tick(*args), Estimate(*args)
    assert set(vars(fast)) == {f.name for f in dataclasses.fields(Estimate)}
    assert fast.predicted is False and slow.predicted is False
    for name, value in zip(names, args):
        assert getattr(fast, name) is value and getattr(slow, name) is value, name
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.t = 1.0
    moved = dataclasses.replace(fast, t=0.5, predicted=True)
    assert moved.t == 0.5 and moved.predicted and moved.q is fast.q


def test_replaced_is_dataclasses_replace():
    rng = np.random.default_rng(2)
    arrays = [rng.normal(size=3) for _ in range(8)]
    last = Estimate.of_tick(0.25, *arrays, 1e-4, 'ok', {'ticks': 3}, None)
    changes = dict(t=0.3, q=rng.normal(size=3), status='stale', predicted=True)
    fast, slow = last.replaced(**changes), dataclasses.replace(last, **changes)
    assert set(vars(fast)) == set(vars(slow))
    for name, value in vars(slow).items():
        assert getattr(fast, name) is value, name
    assert last.t == 0.25 and last.predicted is False        # the original unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.t = 1.0
