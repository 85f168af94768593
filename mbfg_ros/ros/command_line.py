"""What the nodes read from their command line before ROS does (issue 30 item 6).

``--help`` prints the parameter table (:data:`~mbfg_ros.ros.params.ESTIMATOR_PARAMS` or
``SIMULATOR_PARAMS``: name, default, meaning) instead of starting the node, and a
``-p robot_description:=...`` whose value ROS cannot parse (a URDF file's text: ROS reads
``-p`` values as YAML, and an XML declaration, comments or quotes break it) is refused with
one line pointing to a parameters file, instead of rcl's traceback. No rclpy import.
"""
from __future__ import annotations

import shutil
import textwrap
from typing import Sequence

import yaml

from .params import ParamSpec

__all__ = ['user_args', 'wants_help', 'param_overrides', 'unparsable_urdf_override',
           'help_text', 'URDF_ON_COMMAND_LINE']

URDF_ON_COMMAND_LINE = (
    "-p robot_description:=<URDF text> cannot be read by ROS (it parses -p values as YAML); "
    "give the file instead (-p mechanism:=robot.urdf) or put robot_description in a "
    "parameters file (--params-file robot_params.yaml, see docs/urdf-arms.md)")


def _ros_spans(argv: Sequence[str]) -> list[tuple[int, int]]:
    """Index ranges ``[start, end)`` of the ``--ros-args ... [--]`` blocks."""
    spans, i = [], 0
    while i < len(argv):
        if argv[i] == '--ros-args':
            j = i + 1
            while j < len(argv) and argv[j] != '--' and argv[j] != '--ros-args':
                j += 1
            spans.append((i, min(j + 1, len(argv)) if j < len(argv) and argv[j] == '--'
                          else j))
            i = spans[-1][1]
        else:
            i += 1
    return spans


def user_args(argv: Sequence[str]) -> list[str]:
    """The arguments outside ``--ros-args ... --`` (the ones meant for the program)."""
    inside = {k for a, b in _ros_spans(argv) for k in range(a, b)}
    return [arg for k, arg in enumerate(argv) if k not in inside]


def wants_help(argv: Sequence[str]) -> bool:
    """``-h`` or ``--help`` given to the program (not inside ``--ros-args``)."""
    return any(arg in ('-h', '--help') for arg in user_args(argv))


def param_overrides(argv: Sequence[str]) -> list[tuple[str, str]]:
    """``(name, value)`` of every ``-p``/``--param name:=value`` inside ``--ros-args``."""
    out = []
    for a, b in _ros_spans(argv):
        for k in range(a + 1, b - 1):
            if argv[k] in ('-p', '--param') and ':=' in argv[k + 1]:
                name, value = argv[k + 1].split(':=', 1)
                out.append((name.rsplit(':', 1)[-1], value))
    return out


def unparsable_urdf_override(argv: Sequence[str]) -> str | None:
    """The one-line error when ``-p robot_description:=`` carries text ROS cannot parse.

    rcl reads the value as a YAML scalar; what PyYAML (the same YAML 1.1 grammar as rcl's
    libyaml) cannot read as one string, or reads as another string (multi-line text is
    folded), is refused here rather than in rcl's traceback or silently altered.
    """
    for name, value in param_overrides(argv):
        if name != 'robot_description':
            continue
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return URDF_ON_COMMAND_LINE
        if not isinstance(parsed, str) or ('\n' in value and parsed != value):
            return URDF_ON_COMMAND_LINE
    return None


def _default_text(spec: ParamSpec) -> str:
    value = spec.default
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, str):
        return repr(value) if value == '' else value
    if isinstance(value, list):
        return '[' + ', '.join(value) + ']'
    return format(value, 'g') if isinstance(value, float) else str(value)


def help_text(node: str, summary: str, specs: Sequence[ParamSpec],
              width: int | None = None) -> str:
    """``--help`` of a node: usage, what it does, and every parameter with its default.

    Built from the one parameter table, so the help, ``ros2 param describe`` and
    docs/node-reference.md cannot disagree on names or defaults.
    """
    width = width or min(max(shutil.get_terminal_size((100, 20)).columns, 60), 120)
    name_w = max(len(p.name) for p in specs)
    default_w = min(max(len(_default_text(p)) for p in specs), 18)
    indent = ' ' * (4 + name_w + 2 + default_w + 2)
    lines = [
        f'usage: ros2 run mbfg_ros {node} --ros-args -p mechanism:=ROBOT.urdf|MECHANISM.yaml',
        '           [-p overlay:=SENSORS.yaml] [-p NAME:=VALUE ...] [--params-file FILE]',
        '',
        *textwrap.wrap(summary, width),
        '',
        'parameters (name, default, meaning; "live": ros2 param set changes it while running):',
    ]
    for p in specs:
        default = _default_text(p)
        head = f'    {p.name:<{name_w}}  {default:<{default_w}}  '
        text = p.description + (' Live.' if p.live else '')
        if len(default) > default_w:
            lines.append(f'    {p.name:<{name_w}}  {default}')
            head = indent
        lines.extend(textwrap.wrap(text, width, initial_indent=head,
                                   subsequent_indent=indent) or [head.rstrip()])
    lines += [
        '',
        *textwrap.wrap('A URDF robot: -p mechanism:=robot.urdf -p overlay:=sensors.yaml, or '
                       'robot_description (the URDF text) in a parameters file '
                       '(--params-file); -p robot_description:="$(cat robot.urdf)" does not '
                       'work (ROS parses -p values as YAML).', width),
        'Reference: docs/node-reference.md.',
    ]
    return '\n'.join(lines) + '\n'
