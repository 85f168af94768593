"""Run a launch file's node-building function without ``launch``/``launch_ros`` (no wheel
exists for them): stand-in modules record every action's arguments, so a test reads the
Node calls a launch file would make (``Rec.a``: positional, ``Rec.k``: keyword)."""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

__all__ = ['Rec', 'run_launch_function']

_MODULES = {'launch': ['LaunchDescription'],
            'launch.actions': ['DeclareLaunchArgument', 'OpaqueFunction'],
            'launch.conditions': ['IfCondition'],
            'launch.substitutions': ['PathJoinSubstitution'],
            'launch_ros': [],
            'launch_ros.actions': ['Node'],
            'launch_ros.descriptions': ['ParameterValue'],
            'launch_ros.substitutions': ['FindPackageShare']}


class Rec:
    """A launch action or substitution: its arguments, recorded."""

    def __init__(self, *a: Any, **k: Any) -> None:
        self.a, self.k = a, k


class _Config(Rec):
    """``LaunchConfiguration(name)``: the context's value of ``name``."""

    def perform(self, context: dict) -> Any:
        return context[self.a[0]]


def run_launch_function(path: Path, context: dict, function: str = '_nodes') -> list:
    """``function(context)`` of the launch file ``path``, run with the stand-in modules in
    ``sys.modules`` (restored afterwards): the Node actions it returns."""
    fake = {name: types.ModuleType(name) for name in _MODULES}
    for name, classes in _MODULES.items():
        for cls in classes:
            setattr(fake[name], cls, Rec)
    fake['launch.substitutions'].LaunchConfiguration = _Config
    saved = {k: sys.modules.get(k) for k in fake}
    sys.modules.update(fake)
    try:
        spec = importlib.util.spec_from_file_location(path.stem.replace('.', '_'), path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return getattr(mod, function)(context)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
