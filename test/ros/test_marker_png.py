"""The MarkerArray -> PNG renderer (scripts/render_markers.py, the README picture)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
from support.ros_data import REPO, fourbar_system

from mbfg_ros.ros.marker_png import render_png
from mbfg_ros.ros.markers import ESTIMATE_STYLE, TRUTH_STYLE, MarkerPublisher


def test_the_png_shows_both_drawings_in_their_colours(tmp_path):
    import matplotlib.image as mpimg

    system = fourbar_system()
    g = system.drawing()
    q = system.q0
    truth = MarkerPublisher(g, 'world', TRUTH_STYLE).fill(10**9, q)
    shifted = q.copy()
    shifted[1] += 0.5                               # the estimate 0.5 m above: both visible
    est = MarkerPublisher(g, 'world', ESTIMATE_STYLE, True, 3.0).fill(10**9, shifted,
                                                                     np.full(q.size, 0.01))
    path = render_png([truth, est], tmp_path / 'm.png', 'test', ['truth', 'estimate'])
    img = mpimg.imread(path)[..., :3]
    for color in (TRUTH_STYLE.body, ESTIMATE_STYLE.body):
        on_white = np.array(color[:3]) * color[3] + (1.0 - color[3])   # alpha on white
        near = np.all(np.abs(img - on_white) < 0.08, axis=-1)
        assert near.sum() > 200, (color, near.sum())


def test_the_readme_script_writes_its_png(tmp_path):
    out = tmp_path / 'markers.png'
    r = subprocess.run([sys.executable, str(REPO / 'scripts' / 'render_markers.py'), '--at',
                        '0.2', '--out', str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 10_000
