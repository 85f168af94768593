"""One entry point for a mechanism, planar or spatial: what the nodes, replay and CLIs load.

* a planar mechanism YAML (``*.yaml``): :func:`~mbfg_ros.planar.dynamics.load_system`;
* a URDF file (``*.urdf``, ``*.xml``) or the URDF text itself (the ``robot_description``
  parameter), with an optional overlay YAML (loops, actuators, IMUs, limits, gravity,
  q0): :func:`~mbfg_ros.spatial.system.build_spatial_system`;
* a floating-base URDF (the overlay's ``floating_base: true``, ``base_link``, ``contacts``)
  for the floating-base estimator: :func:`load_floating` (issue 28).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from .core.errors import MechanismError
from .core.interface import FloatingBase, SimulatedSystem

__all__ = ['load_mechanism', 'is_urdf', 'mechanism_warning', 'FloatingRobot', 'load_floating']

URDF_SUFFIXES = ('.urdf', '.xml')


def is_urdf(source: str) -> bool:
    """True for URDF text or a path ending in ``.urdf``/``.xml``."""
    s = str(source)
    return s.lstrip().startswith('<') or Path(s).suffix.lower() in URDF_SUFFIXES


def load_mechanism(source: str, overlay: str = '', backend: str = 'auto') -> SimulatedSystem:
    """The system of ``source`` (module docstring): a planar ``System`` or a
    ``SpatialSystem``, both :class:`~mbfg_ros.core.interface.SimulatedSystem` (the nodes,
    replay and the CLIs use nothing else of it).

    :raises MechanismError: unreadable or invalid input (naming file and key), or an
        overlay given with a planar YAML.
    """
    if is_urdf(source):
        from .spatial.system import build_spatial_system
        return build_spatial_system(source, overlay or None, backend=backend)
    if overlay:
        raise MechanismError('an overlay only applies to a URDF (the planar YAML holds '
                             'everything)', source=str(overlay))
    from .planar.dynamics import load_system
    return load_system(source)


def mechanism_warning(system: SimulatedSystem) -> str:
    """The planar assembly warning (a pose moved to close the loops), else ''."""
    from .planar.dynamics import System, assembly_warning
    return assembly_warning(system) if isinstance(system, System) else ''


@dataclass(frozen=True)
class FloatingRobot:
    """A floating-base robot as the floating-base node needs it: the dynamics (the
    :class:`~mbfg_ros.core.interface.FloatingBase` the estimator takes) and the names and
    frames its messages use."""

    system: FloatingBase
    name: str                            # the URDF's <robot name>
    base_link: str                       # the free base's frame (overlay base_link or root)
    joint_names: tuple[str, ...]         # URDF joint order (the estimator's)
    contact_names: tuple[str, ...]       # overlay contacts (the feet)
    base_frames: Mapping[str, np.ndarray]  # frames fixed to the base: name -> (4, 4) in it
    source: str


def load_floating(source: str, overlay: str = '') -> FloatingRobot:
    """The floating-base robot of a URDF (path or text) and its overlay (``floating_base:
    true``, optional ``base_link``, ``contacts``: docs/urdf-arms.md "Floating-base robots").

    :raises MechanismError: unreadable or invalid input (naming file and key), a robot
        without a free base or without contacts.
    """
    from .spatial.floating import FloatingBaseDynamics
    from .spatial.urdf import load_spatial

    if not is_urdf(source):
        raise MechanismError('a floating-base robot is a URDF (file or robot_description '
                             'text)', source=str(source))
    model = load_spatial(source, overlay or None)
    where = str(overlay) if overlay else model.source
    if not model.floating:
        raise MechanismError('not a floating-base robot: the overlay needs floating_base: '
                             'true (or the URDF a floating joint)', source=where,
                             path='floating_base')
    if not model.contacts:
        raise MechanismError('a floating-base robot needs its feet: the overlay\'s contacts: '
                             '[...] (links or frames)', source=where, path='contacts')
    try:
        system = FloatingBaseDynamics(model)
    except ValueError as exc:
        raise MechanismError(str(exc).split(': ', 1)[-1], source=model.source) from None
    base = model.link_names[0]
    T0 = np.asarray(model.frames.get(base, (0, np.eye(4)))[1], float)
    inv = np.linalg.inv(T0)
    frames = {name: inv @ np.asarray(T, float) for name, (b, T) in model.frames.items()
              if b == 0}
    frames[base] = np.eye(4)
    return FloatingRobot(system=system, name=model.name, base_link=base,
                         joint_names=tuple(model.joint_names),
                         contact_names=tuple(system.contact_names), base_frames=frames,
                         source=model.source)
