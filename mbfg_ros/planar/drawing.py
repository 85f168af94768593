"""The drawing geometry of a planar mechanism (``core.interface.DrawingGeometry``): where
the ``~/markers`` points are at a state q (issue 23: moved here from ``ros.markers``, which
now draws any system's geometry through the Protocol).

* body segments: each body as segments between its points in order (a body of 3+ points
  closes into a polygon);
* joints: a revolute joint at the point its two bodies share, a prismatic joint at its
  slider point;
* IMUs: an arrow from the mounting point along the IMU's x axis, a quarter body long;
* ellipses: per moving point (x, y, scale σx, scale σy) from the diagonal of the marginal
  covariance.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .extended import Extended, point_columns
from .forces import body_matrix_A
from .model import GROUND, Mechanism

__all__ = ['PlanarDrawing']


class PlanarDrawing:
    """Where the marker points are for a state q (all (k, 2) arrays, metres); index arrays
    built once from the mechanism."""

    def __init__(self, mech: Mechanism) -> None:
        self._mech = mech
        cols, consts = point_columns(mech)
        self._cols = cols
        self._ext = Extended(mech.n, consts)
        pairs: list[tuple[int, int]] = []
        for b in mech.bodies:
            pts = list(b.points)
            pairs += list(zip(pts[:-1], pts[1:]))
            if len(pts) >= 3:
                pairs.append((pts[-1], pts[0]))
        self.segment_points = np.array(pairs, dtype=int).reshape(-1, 2)
        joints = []
        for j in mech.joints:
            p = self._joint_point(j)
            if p is not None:
                joints.append(p)
        self.joint_points = np.array(joints, dtype=int)
        self._imus = []
        for s in mech.sensors:
            body = mech.bodies[s.body]
            i, k = body.points[:2]
            A = body_matrix_A(s.point[0], s.point[1], body.length)
            self._imus.append((i, k, A, float(s.angle), 0.25 * body.length))
        self.moving_points = np.array([i for i, p in enumerate(mech.points) if not p.fixed],
                                      dtype=int)
        self.moving_cols = cols[self.moving_points] if self.moving_points.size else \
            np.zeros((0, 2), dtype=int)
        self._size = max([b.length for b in mech.bodies] + [1e-3])

    @property
    def size(self) -> float:
        """The longest body (m), at least 1 mm."""
        return self._size

    @property
    def n_imus(self) -> int:
        return len(self._imus)

    def _joint_point(self, j: Any) -> int | None:
        mech = self._mech
        if j.type != 'revolute':
            return mech.sliders[j.slider].point if j.slider is not None else None
        b0, b1 = j.bodies
        sets = [set(range(len(mech.points))) if b == GROUND else set(mech.bodies[b].points)
                for b in (b0, b1)]
        if GROUND in (b0, b1):
            other = sets[1] if b0 == GROUND else sets[0]
            common = [i for i in sorted(other) if mech.points[i].fixed]
        else:
            common = sorted(sets[0] & sets[1])
        if common:
            return common[0]
        body = b1 if b1 != GROUND else b0
        return mech.bodies[body].points[0]

    def points(self, q: np.ndarray) -> np.ndarray:
        """(P, 2) positions of every point of the mechanism."""
        w = self._ext.of(np.asarray(q, dtype=float))
        return w[self._cols]

    def segments(self, q: np.ndarray) -> np.ndarray:
        """(S, 2, 2) body segments: [[start xy], [end xy]]."""
        return self.points(q)[self.segment_points]

    def joints(self, q: np.ndarray) -> np.ndarray:
        """(J, 2) joint positions."""
        return self.points(q)[self.joint_points]

    def imu_arrows(self, q: np.ndarray) -> np.ndarray:
        """(I, 2, 2) IMU arrows: mounting point, and a quarter body length along the
        IMU's x axis."""
        pts = self.points(q)
        out = np.zeros((len(self._imus), 2, 2))
        for k, (i, j, A, alpha, length) in enumerate(self._imus):
            start = A @ np.concatenate((pts[i], pts[j]))
            d = pts[j] - pts[i]
            phi = np.arctan2(d[1], d[0]) + alpha
            out[k, 0] = start
            out[k, 1] = start + length * np.array([np.cos(phi), np.sin(phi)])
        return out

    def ellipses(self, q: np.ndarray, q_std: np.ndarray, scale: float) -> np.ndarray:
        """(M, 4) per moving point: x, y, semi-axis along x, semi-axis along y."""
        q, s = np.asarray(q, dtype=float), np.asarray(q_std, dtype=float)
        c = self.moving_cols
        return np.column_stack((q[c[:, 0]], q[c[:, 1]], scale * s[c[:, 0]],
                                scale * s[c[:, 1]])) if c.size else np.zeros((0, 4))
