"""The planar four-bar and five-bar, written as spatial URDF + loop overlay, give the planar
module's torques and accelerations to 1e-9.

Two formulations that share no code: the planar module's natural coordinates
(points, seed 000/001) and the spatial module's joint coordinates on a spanning tree with
a loop-closing revolute (seed 002 §VII, seed 004). The test only converts states between
them (point positions, velocities and accelerations read off the spatial links).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.planar.problems.inverse_direct import inverse_dynamics_direct
from mbfg_ros.planar.dynamics import forward_accel, load_system
from mbfg_ros.spatial.dynamics import SpatialDynamics
from mbfg_ros.spatial.system import build_spatial_system

ROOT = Path(__file__).parents[2]
URDF = Path(__file__).resolve().parents[2] / 'config' / 'urdf'

# planar point -> (spatial link name, point in that link's frame)
FOURBAR_POINTS = {1: ('coupler', [0.0, 0.0, 0.0]), 2: ('coupler', [2.0, 0.0, 0.0])}
FIVEBAR_POINTS = {1: ('left_coupler', [0.0, 0.0, 0.0]), 2: ('left_coupler', [2.0, 0.0, 0.0]),
                  3: ('right_coupler', [0.0, 0.0, 0.0])}
FIVEBAR_ANGLES = ['left_crank_joint', 'right_crank_joint']     # theta_left, theta_right


def _planar_state(S, kin, points, angles, q, qd, qdd):
    """Natural coordinates (points in index order, then relative angles) of a spatial state."""
    m = S.model
    out = [[], [], []]
    for _, (link, r) in sorted(points.items()):
        b = m.link_names.index(link)
        p, pd, pdd = kin.point_motion(q, qd, qdd, b, np.array(r))
        for k, x in enumerate((p, pd, pdd)):
            out[k].extend(x[:2])
    for name in angles:
        j = m.joint_names.index(name)
        for k, x in enumerate((q, qd, qdd)):
            out[k].append(x[j])
    return [np.array(x) for x in out]


@pytest.mark.parametrize('name,config,points,angles', [
    ('fourbar', 'fourbar.yaml', FOURBAR_POINTS, []),
    ('five_bar', 'five_bar.yaml', FIVEBAR_POINTS, FIVEBAR_ANGLES),
])
@pytest.mark.parametrize('backend', ['numpy', 'pinocchio'])
def test_spatial_loop_model_equals_the_planar_model(name, config, points, angles, backend):
    S = build_spatial_system(URDF / f'{name}.urdf', URDF / f'{name}_loops.yaml', backend)
    kin = SpatialDynamics(S.model)        # point kinematics only
    planar = load_system(ROOT / 'config' / config)
    assert planar.mech.n == 2 * len(points) + len(angles)
    act = np.flatnonzero(S.model.actuated)
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(25):
        q = S.assemble(S.q0 + S.B @ rng.uniform(-0.4, 0.4, len(act)), keep=act)
        N = S.null_space(q)[0]
        qd = N @ rng.normal(size=N.shape[1]) * 2.0
        tau = rng.normal(size=len(act)) * 5.0
        qdd = S.forward(q, qd, tau)
        x, xd, xdd = _planar_state(S, kin, points, angles, q, qd, qdd)
        # the planar model's own constraints hold at the converted state
        t = planar.constraints.terms(x, xd)
        assert np.abs(planar.constraints.phi(x)).max() < 1e-9
        assert np.abs(t.phi_q @ xd).max() < 1e-9
        # forward dynamics: same accelerations of every point and angle
        acc = forward_accel(planar, x, xd, tau)
        assert acc.qdd == pytest.approx(xdd, abs=1e-9, rel=1e-9)
        # inverse dynamics: the planar model needs the applied torques for these z̈
        tau_planar = inverse_dynamics_direct(planar, x, xd, xdd[list(planar.z_idx)])
        assert tau_planar == pytest.approx(tau, abs=1e-9, rel=1e-9)
        assert S.inverse(q, qd, qdd) == pytest.approx(tau, abs=1e-9, rel=1e-9)
        checked += 1
    assert checked == 25
