"""RViz / Foxglove markers of a planar mechanism (``visualization_msgs/MarkerArray``).

A closed loop cannot go through ``robot_state_publisher`` (URDF is a tree), so
the nodes draw the mechanism themselves on ``~/markers``:

==============  ============  =====================================================
namespace       type          geometry (z = 0, in ``frame_id``)
==============  ============  =====================================================
``bodies``      LINE_LIST     each body as segments between its points in order
                              (a body of 3+ points closes into a polygon)
``joints``      SPHERE_LIST   each YAML joint: a revolute joint at the point its two
                              bodies share, a prismatic joint at its slider point
``imus``        ARROW         one per IMU, from its mounting point along its x axis
``uncertainty`` SPHERE        one flat ellipse per moving point, semi-axes
                              ``ellipse_scale`` x (σx, σy), from the diagonal of the
                              marginal covariance (the x-y correlation is not kept)
==============  ============  =====================================================

:class:`~mbfg_ros.core.interface.DrawingGeometry` is the geometry (numpy only, tested
against the kinematics; ``system.drawing()`` gives it, None for a system without one);
:class:`MarkerPublisher` holds the prebuilt message and refills
its points in place, so publishing allocates no message objects.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..core.interface import DrawingGeometry

__all__ = ['MarkerStyle', 'MarkerPublisher', 'ESTIMATE_STYLE', 'TRUTH_STYLE',
           'marker_array_to_segments']

# visualization_msgs/Marker constants (the message defines them; repeated here so the
# geometry needs no ROS import)
ARROW, SPHERE, LINE_LIST, SPHERE_LIST = 0, 2, 5, 7
ADD, DELETEALL = 0, 3


@dataclass(frozen=True)
class MarkerStyle:
    """Colours (r, g, b, a) and sizes (m) of one mechanism drawing."""

    body: tuple[float, float, float, float]
    joint: tuple[float, float, float, float]
    imu: tuple[float, float, float, float]
    ellipse: tuple[float, float, float, float] = (1.0, 0.6, 0.0, 0.35)
    ns_prefix: str = ''


ESTIMATE_STYLE = MarkerStyle(body=(0.12, 0.47, 0.71, 1.0), joint=(0.08, 0.3, 0.5, 1.0),
                             imu=(0.17, 0.63, 0.17, 1.0))
"""The estimator's drawing: blue bodies, dark blue joints, green IMU arrows."""

TRUTH_STYLE = MarkerStyle(body=(0.84, 0.15, 0.16, 0.8), joint=(0.6, 0.1, 0.1, 0.8),
                          imu=(0.58, 0.4, 0.74, 0.8), ns_prefix='truth/')
"""The simulator's ground truth: red bodies, purple IMU arrows (namespaces ``truth/...``)."""


def _msg(pkg: str, name: str) -> Any:
    return getattr(importlib.import_module(f'{pkg}.msg'), name)


class MarkerPublisher:
    """The prebuilt MarkerArray of one mechanism drawing; :meth:`fill` refills it."""

    def __init__(self, geometry: DrawingGeometry, frame_id: str, style: MarkerStyle,
                 ellipses: bool = False, ellipse_scale: float = 2.0) -> None:
        Marker, MarkerArray = _msg('visualization_msgs', 'Marker'), \
            _msg('visualization_msgs', 'MarkerArray')
        Point, ColorRGBA = _msg('geometry_msgs', 'Point'), _msg('std_msgs', 'ColorRGBA')
        self.geometry = geometry
        self.ellipse_scale = float(ellipse_scale)
        g = geometry
        size = g.size

        def marker(ns: str, mid: int, kind: int, color: Sequence[float], scale: Sequence[float],
                   npoints: int = 0) -> Any:
            m = Marker()
            m.header.frame_id = frame_id
            m.ns = style.ns_prefix + ns
            m.id = mid
            m.type = kind
            m.action = ADD
            m.pose.orientation.w = 1.0
            m.scale.x, m.scale.y, m.scale.z = (float(v) for v in scale)
            m.color = ColorRGBA(r=float(color[0]), g=float(color[1]), b=float(color[2]),
                                a=float(color[3]))
            m.points = [Point() for _ in range(npoints)]
            m.frame_locked = False
            return m

        self.bodies = marker('bodies', 0, LINE_LIST, style.body, (0.02 * size, 0, 0),
                             2 * len(g.segment_points))
        self.joints = marker('joints', 0, SPHERE_LIST, style.joint, (0.06 * size,) * 3,
                             len(g.joint_points))
        self.imus = [marker('imus', k, ARROW, style.imu, (0.015 * size, 0.04 * size,
                                                          0.05 * size), 2)
                     for k in range(g.n_imus)]
        self.ellipses = [marker('uncertainty', k, SPHERE, style.ellipse, (0, 0, 0.001))
                         for k in range(len(g.moving_points))] if ellipses else []
        self.all = [self.bodies, self.joints, *self.imus, *self.ellipses]
        self.msg = MarkerArray(markers=self.all)

    def fill(self, t_ns: int, q: np.ndarray, q_std: np.ndarray | None = None) -> Any:
        """The MarkerArray for state ``q`` (``q_std``: the ellipses) stamped ``t_ns``."""
        g = self.geometry
        sec, nanosec = divmod(int(t_ns), 1_000_000_000)
        for m in self.all:
            m.header.stamp.sec, m.header.stamp.nanosec = sec, nanosec
        _set_points(self.bodies.points, g.segments(q).reshape(-1, 2))
        _set_points(self.joints.points, g.joints(q))
        for m, arrow in zip(self.imus, g.imu_arrows(q)):
            _set_points(m.points, arrow)
        if self.ellipses and q_std is not None:
            for m, (x, y, ax, ay) in zip(self.ellipses, g.ellipses(q, q_std,
                                                                    self.ellipse_scale)):
                m.pose.position.x, m.pose.position.y = float(x), float(y)
                m.scale.x = max(2.0 * float(ax), 1e-6) if np.isfinite(ax) else 1e-6
                m.scale.y = max(2.0 * float(ay), 1e-6) if np.isfinite(ay) else 1e-6
        return self.msg


def _set_points(points: list, xy: np.ndarray) -> None:
    for p, (x, y) in zip(points, xy):
        p.x, p.y = float(x), float(y)


def marker_array_to_segments(msg: Any) -> dict[str, Any]:
    """What a MarkerArray draws, by namespace: ``(S, 2, 2)`` segments of a LINE_LIST,
    ``(P, 2)`` points of a SPHERE_LIST, ``(2, 2)`` arrows, ``(x, y, w, h)`` ellipses
    (duck-typed: rclpy or rosbags messages; used by the PNG renderer and the tests)."""
    out: dict[str, Any] = {}
    for m in msg.markers:
        xy = np.array([[p.x, p.y] for p in m.points], dtype=float).reshape(-1, 2)
        color = (m.color.r, m.color.g, m.color.b, m.color.a)
        if m.type == LINE_LIST:
            out.setdefault(m.ns, []).append(('segments', xy.reshape(-1, 2, 2), color))
        elif m.type == SPHERE_LIST:
            out.setdefault(m.ns, []).append(('points', xy, color, m.scale.x))
        elif m.type == ARROW:
            out.setdefault(m.ns, []).append(('arrow', xy, color, m.scale.x))
        elif m.type == SPHERE:
            out.setdefault(m.ns, []).append((
                'ellipse', np.array([m.pose.position.x, m.pose.position.y, m.scale.x,
                                     m.scale.y]), color))
    return out
