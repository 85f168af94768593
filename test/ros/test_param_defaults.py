"""Every estimator-node parameter's default equals the Python API's (issue 29).

The node's ``lag_duration`` default once said 0.1 while ``EstimatorConfig`` said 0.05: the
node and ``Estimator(sys)`` disagreed, and nothing compared the two sources. One test over
all of :data:`ESTIMATOR_PARAMS`: a parameter is an ``EstimatorConfig`` field (same name or
mapped below) with the field's default, or listed as node-only with the reason.
"""
from __future__ import annotations

import dataclasses

from support.ros_data import fourbar_path

from mbfg_ros.estimation.config import EstimatorConfig
from mbfg_ros.ros.params import ESTIMATOR_PARAMS, parse_estimator

RENAMED = {'max_queue': 'max_pending'}
"""Node parameter -> the EstimatorConfig field of the same meaning under another name: the
driver's queue of readings waiting for a tick / the estimator's buffer of readings."""

NODE_ONLY = {
    'mechanism', 'robot_description', 'overlay',                   # what to load
    'joint_states_topic', 'reference_topic', 'command_topic',      # ROS wiring
    'future_tolerance', 'diagnostics_period', 'max_tick_load',     # the node's clock / load
    'max_merge_ticks', 'executor', 'predict_between_ticks', 'predict_max_spacing',
    'align_ticks',                                                  # the tick grid's phase
    'command_timeout',                  # the torque commands' guard (driver), 0 = sensor_timeout
    'markers_rate', 'frame_id', 'marker_ellipses', 'ellipse_scale',  # RViz markers
    'contact_threshold', 'contact_min_duration', 'external_effort_sigma',  # the external-
    'external_wrench_link', 'external_wrench_damping',  # torque detector after the estimate
}
"""Parameters with no EstimatorConfig counterpart (the ROS edge only)."""


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def test_every_node_parameter_default_equals_its_estimator_config_field():
    fields = {f.name: f.default for f in dataclasses.fields(EstimatorConfig)}
    names = [p.name for p in ESTIMATOR_PARAMS]
    assert len(set(names)) == len(names)
    unclassified = [n for n in names if n not in fields and n not in RENAMED
                    and n not in NODE_ONLY]
    assert unclassified == [], 'classify these parameters: an EstimatorConfig field or ' \
                               'node-only (with the reason)'
    assert set(RENAMED.values()) <= set(fields) and not NODE_ONLY & set(fields)
    checked = 0
    for p in ESTIMATOR_PARAMS:
        field = RENAMED.get(p.name, p.name)
        if field not in fields:
            continue
        want = _plain(fields[field])
        assert p.default == want and type(p.default) is type(want), \
            f'parameter {p.name!r} defaults to {p.default!r}, EstimatorConfig.{field} to ' \
            f'{want!r}'
        # a parameter of the same name is passed on to the estimator
        assert p.config == (field == p.name), p.name
        checked += 1
    assert checked == len(names) - len(NODE_ONLY)


def test_a_node_with_default_parameters_builds_the_default_estimator_config():
    settings = parse_estimator({'mechanism': str(fourbar_path())})
    assert settings.config == EstimatorConfig()
    fields = {f.name: f.default for f in dataclasses.fields(EstimatorConfig)}
    for name, field in RENAMED.items():
        assert settings.values[name] == fields[field], name


EXTERNAL = {'contact_threshold': 'threshold', 'contact_min_duration': 'min_duration',
            'external_effort_sigma': 'effort_sigma', 'external_wrench_link': 'wrench_link',
            'external_wrench_damping': 'wrench_damping'}
"""The node's external-torque parameters -> the ``ExternalConfig`` fields they set."""


def test_the_external_torque_parameters_default_to_external_config():
    """The node once said contact_min_duration 0.004 where ExternalConfig said 0 (issue 27's
    measured choice): both sources agree now."""
    from mbfg_ros.estimation.external import ExternalConfig
    fields = {f.name: f.default for f in dataclasses.fields(ExternalConfig)}
    defaults = {p.name: p.default for p in ESTIMATOR_PARAMS}
    assert {k: defaults[k] for k in EXTERNAL} == {k: fields[f] for k, f in EXTERNAL.items()}
