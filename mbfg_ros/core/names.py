"""ROS 2 name syntax checked at load, without rclpy (issue 26).

An IMU ``topic: imu/../../x y`` in a mechanism or overlay file made the node die
with rclpy's ``InvalidTopicNameException`` at start-up; the file is now refused
when it is read, with the file and key named. The rules are ROS 2's (design
article "Topic and Service name mapping to DDS"): tokens of letters, digits and
underscores, not starting with a digit, separated by single ``/``; an optional
leading ``/`` or ``~/`` (or a bare ``~``); no trailing ``/``.
"""
from __future__ import annotations

import re

__all__ = ['topic_problem']

_TOKEN = r'[A-Za-z_][A-Za-z0-9_]*'
_TOPIC = re.compile(rf'(~|~/{_TOKEN}(/{_TOKEN})*|/?{_TOKEN}(/{_TOKEN})*)')
MAX_TOPIC = 255


def topic_problem(name: str) -> str:
    """Why ``name`` is not a valid ROS 2 topic name, or '' when it is."""
    if not name:
        return 'an empty topic name'
    if len(name) > MAX_TOPIC:
        return f'a topic name of {len(name)} characters (at most {MAX_TOPIC})'
    if _TOPIC.fullmatch(name) is None:
        return (f'{name!r} is not a valid ROS topic name (tokens of letters, digits and _, '
                'not starting with a digit, separated by single /)')
    return ''
