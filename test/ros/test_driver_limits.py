"""The limit gate on negative values through the EstimatorDriver, the input path of the node
and the replay (issue 29): a JointState beyond the YAML limits in the negative direction has
those values set aside and counted (out_of_limits) before the estimator sees them."""
from __future__ import annotations

import numpy as np
import pytest
from support.limits import CASES, T_NS, limited_fourbar

from mbfg_ros.core.bag import typestore
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.ros import conversions as cv
from mbfg_ros.ros.driver import EstimatorDriver
from mbfg_ros.ros.params import parse_estimator


@pytest.fixture(scope='module')
def limited(tmp_path_factory):
    path = limited_fourbar(tmp_path_factory.mktemp('limits'))
    return path, load_system(path)


@pytest.mark.parametrize('case', list(CASES))
def test_the_driver_gates_negative_values_before_the_estimator(limited, case):
    path, system = limited
    sent, kept, bad = CASES[case]
    driver = EstimatorDriver(system, parse_estimator({'mechanism': str(path)}))
    kit = cv.rosbags_kit(typestore())
    rec = driver.joint_state(cv.joint_state_msg(kit, T_NS, ('crank', 'coupler_joint'), *sent))
    assert driver.counters['out_of_limits'] == bad
    for got, want in zip((rec.position, rec.velocity, rec.effort), kept):
        np.testing.assert_array_equal(got, want)
