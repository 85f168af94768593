"""The floating-base tests' shared data (issue 28): the MuJoCo solo12 trot bag and the robot,
each read or built once per test module (a conftest.py in test/estimation/floating would
shadow the suite's ``from conftest import DATA``; the modules declare their fixtures from
these: ``pytest.fixture(scope='module', name='bag')(trot_bag)``)."""
from __future__ import annotations

from conftest import DATA

from bench.floating_base import floating_system
from bench.quadruped.bag import read_bag

TROT_BAG = DATA / 'solo12' / 'trot_3s'
"""The 3 s trot recording (test/data/solo12/SOURCE.md)."""


def trot_bag() -> dict:
    """The trot bag's streams (:func:`bench.quadruped.bag.read_bag`)."""
    return read_bag(TROT_BAG)


def solo_system():
    """The solo12 floating-base system (:func:`bench.floating_base.floating_system`)."""
    return floating_system()
