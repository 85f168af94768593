"""Launch files without ``launch``/``launch_ros`` (no wheel exists for them): read as Python
syntax trees (:func:`parsed`, :func:`calls`, :func:`kw`), or their node-building function
run with stand-in modules that record every action's arguments, so a test reads the Node
calls a launch file would make (``Rec.a``: positional, ``Rec.k``: keyword)."""
from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

__all__ = ['LAUNCH', 'Rec', 'calls', 'kw', 'parsed', 'run_launch_function']

LAUNCH = Path(__file__).resolve().parents[2] / 'launch'
"""The package's launch files."""

_MODULES = {'launch': ['LaunchDescription'],
            'launch.actions': ['DeclareLaunchArgument', 'OpaqueFunction'],
            'launch.conditions': ['IfCondition'],
            'launch.substitutions': ['PathJoinSubstitution'],
            'launch_ros': [],
            'launch_ros.actions': ['Node'],
            'launch_ros.descriptions': ['ParameterValue'],
            'launch_ros.substitutions': ['FindPackageShare']}


def parsed(name: str) -> ast.Module:
    """The syntax tree of the launch file ``name`` (in :data:`LAUNCH`)."""
    return ast.parse((LAUNCH / name).read_text(), filename=name)


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Every call of ``name`` (a plain or dotted name) in ``tree``."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, 'id', None) == name or getattr(n.func, 'attr', None) == name)]


def kw(call: ast.Call, name: str) -> ast.expr | None:
    """The value of keyword argument ``name`` of ``call``, or None."""
    return next((k.value for k in call.keywords if k.arg == name), None)


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
