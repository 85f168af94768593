"""Live parameters without DDS: which may change, their validation, and that the change
reaches the estimator and the command law (the DDS path is in test_ros_services.py)."""
from __future__ import annotations

import pytest
from support.ros_data import fourbar_data, fourbar_path

from mbfg_ros.estimation.estimator import LIVE_FIELDS
from mbfg_ros.ros.driver import EstimatorDriver
from mbfg_ros.ros.params import ESTIMATOR_PARAMS, ParameterError, check_live, parse_estimator


def _driver():
    system = fourbar_data()[0]
    return EstimatorDriver(system, parse_estimator({'mechanism': str(fourbar_path())}))


def test_the_live_parameters_are_the_sigmas_and_the_gains_with_ranges():
    live = {p.name for p in ESTIMATOR_PARAMS if p.live}
    assert live == set(LIVE_FIELDS) | {'kp', 'kd'}
    assert all(p.lo is not None and p.hi is not None for p in ESTIMATOR_PARAMS if p.live)


@pytest.mark.parametrize('changes, why', [
    ({'frequency': 100.0}, "'frequency' is fixed at start-up"),
    ({'encoder_sigma': 'big'}, 'expected a number'),
    ({'encoder_sigma': float('nan')}, 'finite'),
    ({'kp': -1.0}, 'must be >= 0'),
    ({'gyro_sigma': 0.0}, 'must be >= 1e-09'),
])
def test_a_bad_live_change_is_refused_with_the_reason(changes, why):
    with pytest.raises(ParameterError, match=why):
        check_live(ESTIMATOR_PARAMS, changes, 'estimator_node')


def test_parameters_that_are_not_ours_are_left_to_rclpy():
    assert check_live(ESTIMATOR_PARAMS, {'use_sim_time': True, 'kp': 2}, 'here') == {'kp': 2.0}


def test_a_live_change_reaches_the_estimator_and_the_command_law():
    d = _driver()
    values = check_live(ESTIMATOR_PARAMS, {'encoder_sigma': 2, 'dynamics_sigma': 3.0,
                                           'kp': 25.0, 'kd': 10.0}, 'here')
    assert values['encoder_sigma'] == 2.0 and isinstance(values['encoder_sigma'], float)
    noise_before = d.estimator._state_noise.sigmas().copy()
    d.reconfigure(values)
    cfg = d.estimator.config
    assert (cfg.encoder_sigma, cfg.dynamics_sigma) == (2.0, 3.0)
    assert (d.law.kp, d.law.kd) == (25.0, 10.0)
    assert d.estimator._state_noise.sigmas()[-1] == 3.0 != noise_before[-1]


def test_the_estimator_refuses_to_change_a_structural_field_while_running():
    d = _driver()
    with pytest.raises(ValueError, match='cannot change while running'):
        d.estimator.reconfigure(frequency=10.0)
    with pytest.raises(ValueError, match='positive'):
        d.estimator.reconfigure(encoder_sigma=-1.0)
    assert d.estimator.config.encoder_sigma > 0
