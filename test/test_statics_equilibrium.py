"""Static equilibrium (seed 003 §6.1.2) against a hand-derived equilibrium."""
from pathlib import Path

import numpy as np
from scipy.optimize import brentq

from mbfg_ros.cli.statics import main as statics_main
from mbfg_ros.dynamics import load_system
from mbfg_ros.statics import static_equilibrium

CONFIG = Path(__file__).resolve().parents[1] / 'config'


def _hand_phi() -> float:
    """dV/dφ = 0 for the bar + rotational spring + tip spring of spring_pendulum.yaml."""
    L, m, kr, kt, h, l0, g = 1.0, 2.0, 30.0, 40.0, 1.0, 1.0, 9.81

    def dV(phi: float) -> float:
        tx, ty = L * np.cos(phi), L * np.sin(phi)
        d = np.hypot(tx, ty - h)
        dd = (tx * (-L * np.sin(phi)) + (ty - h) * (L * np.cos(phi))) / d
        return kr * phi + m * g * L / 2 * np.cos(phi) + kt * (d - l0) * dd
    return brentq(dV, -1.5, 1.5)


def test_spring_pendulum_equilibrium_matches_the_hand_derivation():
    sys = load_system(CONFIG / 'spring_pendulum.yaml')
    eq = static_equilibrium(sys)
    phi = _hand_phi()
    assert abs(eq.q[2] - phi) < 1e-9
    np.testing.assert_allclose(eq.q[:2], [np.cos(phi), np.sin(phi)], atol=1e-9)
    assert np.all(np.linalg.eigvalsh(eq.stiffness) > 0)      # stable


def test_four_bar_under_gravity_hangs_with_zero_crank_moment():
    sys = load_system(CONFIG / 'fourbar_inverse.yaml')
    eq = static_equilibrium(sys)
    np.testing.assert_allclose(sys.constraints.phi(eq.q), 0, atol=1e-10)
    # Virtual power: no generalized force along the motion (Rᵀ Q = 0).
    from mbfg_ros.kinematics import r_s_matrices
    R = r_s_matrices(sys.constraints.phi_q(eq.q), [4]).R
    Q = sys.forces.evaluate(eq.q, np.zeros(sys.n), None, jacobians=False).Q
    assert abs(float(R[:, 0] @ Q)) < 1e-8


def test_statics_cli_writes_the_equilibrium_and_reactions(tmp_path):
    out = tmp_path / 'eq.csv'
    assert statics_main([str(CONFIG / 'spring_pendulum.yaml'), '--output', str(out)]) == 0
    rows = dict(line.split(',') for line in out.read_text().splitlines()[1:])
    assert abs(float(rows['phi']) - _hand_phi()) < 1e-9
    assert 'pivot_on_bar_fx' in rows and 'stiffness_eig0' in rows


def test_statics_cli_reports_a_missing_file_on_one_line(tmp_path, capsys):
    assert statics_main([str(tmp_path / 'nope.yaml'), '--output', str(tmp_path / 'o')]) == 2
    assert 'nope.yaml' in capsys.readouterr().err
