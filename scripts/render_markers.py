"""Render the four-bar's ~/markers (estimate and truth) to a PNG for the README.

    python scripts/render_markers.py [--mechanism YAML] [--at SECONDS] [--out PNG]

Simulates the mechanism falling under gravity, samples noisy encoders and IMU,
runs the estimator offline (the node's own driver, as mbfg-replay does) up to
``--at`` s, then builds the very MarkerArrays the nodes publish on ``~/markers``
(estimator: blue, with uncertainty ellipses scaled up to be visible;
simulator: red) and draws them with matplotlib. No ROS graph, no GUI.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbfg_ros.planar.dynamics import load_system  # noqa: E402
from mbfg_ros.simulation.forward import ForwardConfig, simulate  # noqa: E402
from mbfg_ros.ros.driver import EstimatorDriver  # noqa: E402
from mbfg_ros.ros.marker_png import render_png  # noqa: E402
from mbfg_ros.ros.markers import ESTIMATE_STYLE, TRUTH_STYLE, MarkerPublisher  # noqa: E402
from mbfg_ros.ros.params import parse_estimator  # noqa: E402
from mbfg_ros.planar.sensors import SensorConfig, simulate_measurements  # noqa: E402

NS = 1_000_000_000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--mechanism', default=str(ROOT / 'config' / 'fourbar.yaml'))
    ap.add_argument('--at', type=float, default=0.6, help='simulated seconds (default 0.6)')
    ap.add_argument('--ellipse-scale', type=float, default=300.0,
                    help='ellipse semi-axes in sigmas (default 300: visible at this zoom)')
    ap.add_argument('--out', default=str(ROOT / 'docs' / 'markers.png'))
    a = ap.parse_args(argv)
    system = load_system(a.mechanism)
    traj = simulate(system, a.at + 0.01, ForwardConfig(dt=1e-3))
    cfg = SensorConfig(encoder_rate=200.0, encoder_counts=4096, encoder_sigma=0.002,
                       imu_rate=200.0, gyro_sigma=0.01, accel_sigma=0.05)
    recs = simulate_measurements(system, traj.t, traj.q, traj.qd, traj.qdd, cfg,
                                 np.random.default_rng(3))
    settings = parse_estimator({'mechanism': a.mechanism, 'frequency': 200.0,
                                'lag_duration': 0.1, 'covariance_every': 1})
    driver = EstimatorDriver(system, settings)
    t_at = int(round((1.0 + a.at) * NS))           # stamps start at 1 s (0 means unset)
    stamps = []
    for r in recs:
        t = int(round((1.0 + r.t) * NS))
        if t <= t_at:
            driver.push(t, replace(r, t=t / NS))
            stamps.append(t)
    outs = driver.advance(stamps[0]) + driver.advance(t_at)   # every tick in between
    last = next(o for o in reversed(outs) if o.estimate is not None)
    est = last.estimate
    print("position sigma of the coordinates [m]:", np.round(est.q_std, 6))
    geometry = system.drawing()
    k = int(round((last.t_ns / NS - 1.0) / 1e-3))
    truth = MarkerPublisher(geometry, 'world', TRUTH_STYLE).fill(last.t_ns, traj.q[k])
    estimate = MarkerPublisher(geometry, 'world', ESTIMATE_STYLE, True,
                               a.ellipse_scale).fill(last.t_ns, est.q, est.q_std)
    path = render_png([truth, estimate], a.out,
                      f'{system.description.name}: ~/markers at t = {last.t_ns / NS - 1.0:.2f} s '
                      f'(ellipses {a.ellipse_scale:g} σ)',
                      labels=['truth (simulator_node)', 'estimate (estimator_node)'])
    print(path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
