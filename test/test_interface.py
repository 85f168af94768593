"""The formulation seam: the planar and the spatial systems answer the same questions the
same way (interface.MultibodySystem) — the four-bar written both ways."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.interface import MultibodySystem
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.spatial.system import build_spatial_system

ROOT = Path(__file__).resolve().parents[1]
URDF = ROOT / 'config' / 'urdf'


@pytest.fixture(scope='module')
def both():
    planar = load_system(ROOT / 'config' / 'fourbar.yaml')
    spatial = build_spatial_system(URDF / 'fourbar.urdf', URDF / 'fourbar_loops.yaml')
    return planar, spatial


def test_both_systems_implement_the_interface(both):
    for system in both:
        assert isinstance(system, MultibodySystem)


def test_the_same_questions_give_consistent_answers(both):
    planar, spatial = both
    assert planar.angle_coordinates == ()                  # x1, y1, x2, y2: lengths
    assert spatial.angle_coordinates == (0, 1, 2)          # three revolute joints
    for system in both:
        q = np.asarray(system.q0, float)
        qd = np.zeros(system.n)
        phi, phi_q, gamma = system.constraint_terms(q, qd)
        assert np.abs(phi).max() < 1e-9 and phi_q.shape == (len(phi), system.n)
        assert np.allclose(gamma, 0.0)                     # at rest
        M = system.mass_matrix(q)
        assert M.shape == (system.n, system.n) and np.allclose(M, M.T)
        B = system.actuator_matrix(q)
        tau = np.full(B.shape[1], 1.5)
        qdd = system.accelerations(q, qd, tau)
        assert np.abs(phi_q @ qdd + gamma).max() < 1e-9    # the loop stays closed
        assert system.torques(q, qd, qdd) == pytest.approx(tau, abs=1e-9)
