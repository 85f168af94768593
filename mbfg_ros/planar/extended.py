"""Extended coordinates w = [q, constants]: one index space for moving and fixed points.

Constraints, forces and sensors address a point's (x, y) by two indices
into w, so a fixed point enters the same vectorised formulas as a moving
one, with its real coordinates. Jacobians are taken with respect to w and
the constant columns dropped (``[..., :n]``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .model import Mechanism

__all__ = ['Extended', 'point_columns']


def point_columns(mech: Mechanism) -> tuple[np.ndarray, list[float]]:
    """Per point its (x, y) index into w = [q, fixed point coordinates], and those constants."""
    n = mech.n
    pidx = mech.point_index
    cols = np.zeros((len(mech.points), 2), dtype=int)
    consts: list[float] = []
    for i, p in enumerate(mech.points):
        if p.fixed:
            cols[i] = (n + len(consts), n + len(consts) + 1)
            consts += [p.x, p.y]
        else:
            cols[i] = pidx[i]
    return cols, consts


class Extended:
    """w = [q, consts] for ``n`` coordinates (immutable)."""

    __slots__ = ('n', 'W', 'consts')

    def __init__(self, n: int, consts: Sequence[float]) -> None:
        self.n = n
        self.consts = np.array(consts, dtype=float)
        self.W = n + len(self.consts)

    def of(self, q: np.ndarray) -> np.ndarray:
        """The extended position vector [q, consts]."""
        return np.concatenate((q, self.consts))

    def rate(self, v: np.ndarray) -> np.ndarray:
        """An extended rate vector [v, 0] (constants do not move)."""
        out = np.zeros(self.W)
        out[:self.n] = v
        return out
