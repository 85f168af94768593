"""``MultibodySystem.torque_jacobians`` (issue 27 item 4): (τ, ∂τ/∂q, ∂τ/∂q̇, ∂τ/∂q̈) of the
inverse dynamics, analytic in both formulations, against central differences of the
system's own ``torques`` at random states: planar natural coordinates (closed loops,
friction of DFKI's pendulum), URDF trees on both backends (rigid, and with DFKI's friction
and rotors), and a URDF with a loop (the differences path)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.loader import load_mechanism
from mbfg_ros.spatial.system import build_spatial_system

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / 'config'


def _system(case: str):
    if case == 'ur5-pinocchio':
        return build_spatial_system(CONFIG / 'urdf' / 'ur5.urdf', backend='pinocchio')
    if case == 'ur5-numpy':
        return build_spatial_system(CONFIG / 'urdf' / 'ur5.urdf', backend='numpy')
    if case == 'double-pendulum-drives':
        return build_spatial_system(CONFIG / 'urdf' / 'double_pendulum.urdf',
                                    CONFIG / 'urdf' / 'double_pendulum_dfki.yaml')
    if case == 'five-bar-urdf-loop':
        return build_spatial_system(CONFIG / 'urdf' / 'five_bar.urdf',
                                    CONFIG / 'urdf' / 'five_bar_loops.yaml')
    return load_mechanism(CONFIG / f'{case}.yaml')


def _central(sys_, x, slot: int, h: float = 1e-6) -> np.ndarray:
    n = sys_.n
    cols = []
    for k in range(n):
        plus, minus = [v.copy() for v in x], [v.copy() for v in x]
        plus[slot][k] += h
        minus[slot][k] -= h
        cols.append((sys_.torques(*plus) - sys_.torques(*minus)) / (2 * h))
    return np.array(cols).T


@pytest.mark.parametrize('case', ['fourbar', 'five_bar', 'fourbar_inverse',
                                  'dfki_double_pendulum', 'ur5-pinocchio', 'ur5-numpy',
                                  'double-pendulum-drives', 'five-bar-urdf-loop'])
def test_torque_jacobians_match_central_differences(case):
    sys_ = _system(case)
    n = sys_.n
    rng = np.random.default_rng(5)
    for _ in range(2):
        q = np.asarray(sys_.q0, float) + 0.05 * rng.standard_normal(n)
        x = [q, rng.uniform(-1.5, 1.5, n), rng.uniform(-3, 3, n)]
        tau, *J = sys_.torque_jacobians(*x)
        np.testing.assert_allclose(tau, sys_.torques(*x), rtol=1e-10, atol=1e-10)
        assert all(j.shape == (len(tau), n) for j in J)
        for slot in range(3):
            num = _central(sys_, x, slot)
            scale = max(1.0, np.abs(num).max())
            np.testing.assert_allclose(J[slot], num, atol=2e-6 * scale,
                                       err_msg=f'{case}: ∂τ/∂{("q", "qd", "qdd")[slot]}')
    assert np.abs(J[0]).max() > 1e-3            # not trivially zero in q
