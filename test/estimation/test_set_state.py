"""``EstimatorDriver.set_state`` (the node's ``~/set_state``) without DDS: the estimate
restarts at the given joint positions, bad requests change nothing."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from support.ros_data import fourbar_data, fourbar_path

from mbfg_ros.core.angles import wrap_angle
from mbfg_ros.planar.sensors import joint_positions
from mbfg_ros.ros.driver import EstimatorDriver
from mbfg_ros.ros.params import parse_estimator

NS = 1_000_000_000
T = 5 * NS


def _js(names, pos, vel=(), t=T):
    stamp = SimpleNamespace(sec=t // NS, nanosec=t % NS)
    return SimpleNamespace(header=SimpleNamespace(stamp=stamp), name=list(names),
                           position=list(pos), velocity=list(vel), effort=[])


def _driver():
    system = fourbar_data()[0]
    s = parse_estimator({'mechanism': str(fourbar_path()), 'frequency': 100.0,
                         'lag_duration': 0.1})
    return system, EstimatorDriver(system, s)


@pytest.mark.parametrize('k', [300, 600, 1000])
@pytest.mark.parametrize('which', [[0], [0, 1]])
def test_set_state_restarts_at_the_given_joint_positions_even_far_round_the_loop(k, which):
    """Both joints of a closed loop given far from the YAML pose (the crank 2.5 rad on):
    the start-up seeding follows them one at a time when moving all at once misses."""
    system, d = _driver()
    _, traj, _ = fourbar_data()
    names = [j.name for j in system.mech.joints]
    target = joint_positions(system, traj.q[k])
    assert d.set_state(_js([names[i] for i in which], target[which], [0.0] * len(which)),
                       T) == ''
    out = d.advance(T)[-1]          # the tick at the request's stamp (later ones move on)
    assert out.estimate is not None
    err = wrap_angle(np.asarray(out.estimate.joint_position) - target)
    assert np.max(np.abs(err)) < 1e-6, (k, which, out.estimate.joint_position, target)
    assert d.estimator.counters['reset:manual'] == 1


@pytest.mark.parametrize('msg, why', [
    (_js(['wheel', 'crank'], [1.0, 0.1]), "unknown joints ['wheel']"),
    (_js(['crank', 'coupler_joint'], [np.nan, 0.1]), 'non-finite'),
    (_js(['crank', 'coupler_joint'], [0.1, 0.2], [np.inf, 0.0]), 'non-finite'),
    (_js(['crank', 'coupler_joint'], [0.1]), 'length_mismatch'),
    (_js(['crank'], [], [1.0]), 'no joint position'),
    (_js(['crank'], [0.1], t=T + 100 * NS), 'ahead of the clock'),
])
def test_bad_set_state_requests_are_refused_with_a_reason_and_change_nothing(msg, why):
    _, d = _driver()
    reason = d.set_state(msg, T)
    assert why in reason, reason
    assert d.pending == 0 and d.estimator.counters['resets'] == 0
