"""Choose the per-tick dynamics implementation for a ``SpatialModel``."""
from __future__ import annotations

from typing import Union

from .dynamics import SpatialDynamics
from .model import SpatialModel
from .pin_backend import PinocchioDynamics, available

__all__ = ['BACKENDS', 'spatial_dynamics']

BACKENDS = ('auto', 'numpy', 'pinocchio')
"""``auto``: Pinocchio when ``pin`` imports, else the package's own numpy recursion."""


def spatial_dynamics(model: SpatialModel, backend: str = 'auto'
                     ) -> Union[SpatialDynamics, PinocchioDynamics]:
    """τ/M/q̈ with Jacobians for the tree of ``model`` (README: "Spatial robots (URDF)").

    Both give the same numbers to ~1e-13 (``test/spatial/test_spatial_dynamics.py``);
    ``bench/spatial_dynamics.py`` measures their cost.
    """
    if backend not in BACKENDS:
        raise ValueError(f'backend {backend!r}: expected one of {", ".join(BACKENDS)}')
    if backend == 'pinocchio' or (backend == 'auto' and available()):
        return PinocchioDynamics(model)
    return SpatialDynamics(model)
