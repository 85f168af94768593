"""One entry point for a mechanism, planar or spatial: what the nodes, replay and CLIs load.

* a planar mechanism YAML (``*.yaml``): :func:`~mbfg_ros.planar.dynamics.load_system`;
* a URDF file (``*.urdf``, ``*.xml``) or the URDF text itself (the ``robot_description``
  parameter), with an optional overlay YAML (loops, actuators, IMUs, limits, gravity,
  q0): :func:`~mbfg_ros.spatial.system.build_spatial_system`.
"""
from __future__ import annotations

from pathlib import Path

from .core.errors import MechanismError
from .core.interface import SimulatedSystem

__all__ = ['load_mechanism', 'is_urdf', 'mechanism_warning']

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
