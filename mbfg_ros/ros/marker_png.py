"""Render ``visualization_msgs/MarkerArray`` messages to a PNG with matplotlib (no GUI).

What RViz or Foxglove would show of ``~/markers`` seen from above (the mechanism
plane), for documentation and for checking markers without a display:
LINE_LIST segments, SPHERE_LIST discs, ARROWs and flat SPHERE ellipses, each in
its marker colour. Duck-typed: rclpy or rosbags messages.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .markers import marker_array_to_segments

__all__ = ['render_png']


def render_png(arrays: Sequence[Any], path: str | Path, title: str = '',
               labels: Sequence[str] = ()) -> Path:
    """Draw ``arrays`` (MarkerArrays, later ones on top) into ``path``; returns it.

    ``labels``: one legend entry per array (its bodies' colour).
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Ellipse

    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=110)
    handles = []
    widths = np.linspace(8.0, 2.5, len(arrays)) if len(arrays) > 1 else [3.0]
    for k, msg in enumerate(arrays):
        lw = float(widths[k])    # earlier drawings wider: both stay visible where they agree
        drawn = marker_array_to_segments(msg)
        for ns, items in drawn.items():
            for item in items:
                kind, color = item[0], item[2]
                if kind == 'segments':
                    lc = LineCollection(item[1], colors=[color], linewidths=lw,
                                        zorder=2 + k)
                    ax.add_collection(lc)
                    if k < len(labels) and ns.endswith('bodies'):
                        handles.append(plt.Line2D([], [], color=color, lw=lw,
                                                  label=labels[k]))
                elif kind == 'points':
                    ax.scatter(item[1][:, 0], item[1][:, 1], s=12 * lw ** 2 / 2, color=[color],
                               zorder=4 + k, edgecolors='white', linewidths=0.8)
                elif kind == 'arrow' and len(item[1]) == 2:
                    (x0, y0), (x1, y1) = item[1]
                    ax.annotate('', xy=(x1, y1), xytext=(x0, y0), zorder=5 + k,
                                arrowprops=dict(arrowstyle='-|>', color=color, lw=2.0))
                elif kind == 'ellipse':
                    x, y, w, h = item[1]
                    ax.add_patch(Ellipse((x, y), w, h, facecolor=color, edgecolor=color[:3],
                                         zorder=10))
    ax.set_aspect('equal')
    ax.autoscale_view()
    ax.margins(0.1)
    ax.grid(True, alpha=0.3)
    ax.set_xlabel('x [m]')
    ax.set_ylabel('y [m]')
    if title:
        ax.set_title(title)
    if handles:
        ax.legend(handles=handles, loc='best')
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
