"""Every parameter of the floating-base estimator node, declared once (issue 28 item 3).

Two kinds, one table (:func:`floating_params`):

* the node's own (robot, topics, frames, rates), written here with their defaults;
* one per field of the estimator's frozen
  :class:`~mbfg_ros.estimation.floating.FloatingEstimatorConfig` whose default is a number,
  a bool or a string, named as the field, its default the field's default (the one source
  of the estimator's defaults; the estimator documents them, docs/floating-base.md).

:func:`parse_floating` validates the values (one-line errors naming the parameter, as
:mod:`.params` does for the fixed-base node, whose ``ParamSpec``, ``declare`` and ``read``
are reused) and builds the config with ``FloatingEstimatorConfig.from_mapping``.
No rclpy import at module level.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Mapping

from ..estimation.floating import FloatingEstimatorConfig
from ..estimation.floating.config import CONTACT_SOURCES
from .params import ParameterError, ParamSpec, ValuesByName, _validated

__all__ = ['NODE_PARAMS', 'floating_params', 'FloatingSettings', 'parse_floating',
           'CONTACT_SOURCES', 'NODE_NAME', 'foot_topic']

NODE_NAME = 'floating_estimator_node'

NODE_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec('urdf', '', 'Path of the robot URDF; used when robot_description is empty.',
              'string'),
    ParamSpec('robot_description', '', 'URDF text of the robot (the usual ROS parameter, '
              'from a launch file or a parameters file).', 'string'),
    ParamSpec('overlay', '', 'Path of the overlay YAML with floating_base: true, base_link '
              'and contacts (the feet), docs/urdf-arms.md.', 'string'),
    ParamSpec('frequency', 500.0, 'Estimates per second (tick loop on the wall clock; each '
              'estimate is at the newest stamp every flowing input has reached).',
              lo=1.0, hi=10000.0),
    ParamSpec('sensor_timeout', 0.1, 'Seconds (node clock) after which a silent joint_states '
              'or IMU stream stops holding the ticks; all silent: no estimate.',
              lo=1e-3, hi=3600.0),
    ParamSpec('future_tolerance', 0.25, 'Readings stamped more than this many seconds ahead '
              'of the node clock are dropped (input.rejected.future).', lo=1e-3, hi=1e6),
    ParamSpec('diagnostics_period', 1.0, 'Seconds between /diagnostics messages (steady '
              'clock).', lo=0.05, hi=3600.0),
    ParamSpec('max_queue', 10000, 'Readings kept waiting for a tick; beyond this the oldest '
              'are dropped (input.rejected.queue_full).', 'int', lo=10, hi=10_000_000),
    ParamSpec('joint_states_topic', 'joint_states', 'Input JointState topic (encoders, '
              'velocities, efforts).', 'string'),
    ParamSpec('imu_topic', 'imu', 'Input Imu topic of the base IMU (frame base_link or a '
              'frame fixed to it in the URDF).', 'string'),
    ParamSpec('feet', [], 'The feet whose contact topics are read and published (overlay '
              'contacts names); empty: every overlay contact.', 'string_array'),
    ParamSpec('contact_topic', 'feet/{foot}/contact', 'Input std_msgs/Bool per foot '
              '(contact_source topic); {foot} is replaced by the foot name.', 'string'),
    ParamSpec('wrench_topic', 'feet/{foot}/wrench', 'Input geometry_msgs/WrenchStamped per '
              'foot, force on the foot in its link frame (contact_source force, or '
              'foot_forces true); {foot} is replaced by the foot name.', 'string'),
    ParamSpec('foot_forces', False, 'Also read the wrench topics with contact_source topic '
              '(the measured foot forces go to the estimator).', 'bool'),
    ParamSpec('odom_frame', 'odom', 'Frame of ~/odom\'s pose, of the TF parent and of the '
              '~/feet/<FOOT>/force vectors (REP-105).', 'string'),
    ParamSpec('base_frame', '', 'Child frame of ~/odom and of the TF (REP-105 base_link); '
              'empty: the overlay base_link (or the URDF root).', 'string'),
    ParamSpec('publish_tf', True, 'Publish odom_frame -> base_frame on /tf (needs '
              'tf2_msgs; without it: a warning and tf.published false in /diagnostics).',
              'bool'),
)
"""The node's own parameters (the estimator's come from its config, :func:`floating_params`)."""


def _kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return 'bool'
    if isinstance(value, int):
        return 'int'
    if isinstance(value, float):
        return 'double'
    if isinstance(value, str):
        return 'string'
    return None


def _field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass (the string after each field), first
    sentence-ish line joined: the estimator documents its fields there."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    out = {}
    for a, b in zip(body, body[1:]):
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and \
                isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and \
                isinstance(b.value.value, str):
            out[a.target.id] = ' '.join(b.value.value.split())
    return out


def _config_params() -> tuple[ParamSpec, ...]:
    out = []
    docs = _field_docs(FloatingEstimatorConfig)
    for f in dataclasses.fields(FloatingEstimatorConfig):
        default = f.default
        if default is dataclasses.MISSING:
            continue
        kind = _kind(default)
        if kind is None:       # arrays and optional values: set in the estimator's config
            continue
        doc = docs.get(f.name, '')
        out.append(ParamSpec(f.name, default, (doc or f'The estimator\'s {f.name}') +
                             ' (FloatingEstimatorConfig, docs/floating-base.md).', kind,
                             config=True))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def floating_params() -> tuple[ParamSpec, ...]:
    """:data:`NODE_PARAMS` then one parameter per scalar field of
    ``FloatingEstimatorConfig`` (a field named as a node parameter is refused here: one
    name, one meaning)."""
    cfg = _config_params()
    clash = {p.name for p in NODE_PARAMS} & {p.name for p in cfg}
    if clash:
        raise ParameterError(f'{NODE_NAME}: FloatingEstimatorConfig field(s) {sorted(clash)} '
                             'clash with node parameters')
    return NODE_PARAMS + cfg


@dataclass(frozen=True)
class FloatingSettings(ValuesByName):
    """Validated parameters: the robot source, the estimator config, every value."""

    source: str                        # URDF path or text
    config: Any                        # FloatingEstimatorConfig
    values: Mapping[str, Any]


def foot_topic(pattern: str, foot: str) -> str:
    """``pattern`` with ``{foot}`` replaced by ``foot``."""
    return pattern.replace('{foot}', foot)


def parse_floating(values: Mapping[str, Any], where: str = NODE_NAME) -> FloatingSettings:
    """Validate the node's parameters and build the estimator config.

    :raises ParameterError: unknown name, wrong type, out of range, no robot, no overlay,
        a topic pattern without ``{foot}``, a config the estimator refuses.
    """
    specs = floating_params()
    v = _validated(specs, values, where)
    source = v['robot_description'] if v['robot_description'].strip() else v['urdf']
    if not source:
        raise ParameterError(f"{where}: parameter 'robot_description' (URDF text) or 'urdf' "
                             '(URDF path) is required')
    if not v['overlay']:
        raise ParameterError(f"{where}: parameter 'overlay' is required (a YAML with "
                             'floating_base: true, base_link and contacts)')
    for name in ('contact_topic', 'wrench_topic'):
        if '{foot}' not in v[name]:
            raise ParameterError(f'{where}: parameter {name!r}: expected a pattern with '
                                 f"{{foot}}, got {v[name]!r}")
    for name in ('odom_frame', 'joint_states_topic', 'imu_topic'):
        if not v[name].strip():
            raise ParameterError(f'{where}: parameter {name!r}: must not be empty')
    mapping = {p.name: v[p.name] for p in specs if p.config}
    try:
        config = FloatingEstimatorConfig.from_mapping(mapping, where)
    except (TypeError, ValueError) as exc:
        text = str(exc)
        raise ParameterError(text if text.startswith(where) else f'{where}: {text}') from None
    return FloatingSettings(source, config, v)
