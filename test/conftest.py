"""Shared paths to the reference data (all inside the repository) and small helpers."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from support.progress import group_summary

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CONFIG = REPO / 'config'
DATA = Path(__file__).resolve().parent / 'data'

UPSTREAM_MECHANISMS = tuple(CONFIG / name for name in (
    'fourbars1.yaml', 'fourbars1-with-rel-angle.yaml', 'pendulum1.yaml', 'pendulum2.yaml',
    'pendulum3.yaml', 'pick-and-place-robot.yaml'))
"""The mechanism files copied unchanged from MBDS/multibody-state-estimation (config/SOURCE.md).

Tests use only files inside the repository (config/, test/data/), named explicitly."""


def numerical_jacobian(fn, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of a vector function (GTSAM's numericalDerivative idea)."""
    x = np.asarray(x, dtype=float)
    f0 = np.atleast_1d(fn(x))
    J = np.zeros((f0.size, x.size))
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        J[:, i] = (np.atleast_1d(fn(x + e)) - np.atleast_1d(fn(x - e))).ravel() / (2 * h)
    return J


def pytest_terminal_summary(terminalreporter) -> None:
    """After the run, one line per test folder with its counts and time (issue 30 item 7)."""
    lines = group_summary(terminalreporter.stats)
    if len(lines) > 1:
        terminalreporter.write_sep('-', 'per folder (summed test time)')
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope='session')
def small_bag(tmp_path_factory):
    """A 0.2 s rosbag2 of the simulated four-bar (encoders, IMU, truth), as the demo writes
    it: the input of the replay tests (test/cli). Tests must not change it."""
    from dataclasses import replace

    from support.ros_data import T0, fourbar_data

    from mbfg_ros.cli.demo import write_simulation_bag
    system, traj, recs = fourbar_data(duration=0.2)
    bag = tmp_path_factory.mktemp('bag') / 'b'
    write_simulation_bag(bag, system, traj, [replace(r, t=r.t - T0) for r in recs])
    return bag
