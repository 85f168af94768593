"""Static equilibrium and its stability (seed 003 §6.1) against hand-derived potentials.

Each mechanism's potential energy is written here in closed form as a
function of its degrees of freedom (crank angles), independently of the
package; stationary points come from ``brentq`` on dV/dθ and stability from
the sign of d²V/dθ² (the signs of the reduced stiffness do not depend on the
coordinates, Sylvester's law of inertia).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq

from mbfg_ros.cli.statics import main as statics_main
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.planar.problems.reactions import JointReactions
from mbfg_ros.planar.problems.statics import StaticsError, classify, start_pose, static_equilibrium

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / 'config'
DATA = ROOT / 'test' / 'data'
G = 9.81


def _d(f, x, h=1e-5):
    return (f(x + h) - f(x - h)) / (2 * h)


def _dd(f, x, h=1e-4):
    return (f(x + h) - 2 * f(x) + f(x - h)) / h ** 2


# -- spring pendulum (config/spring_pendulum.yaml) ---------------------------------------
L, M, KR, KT, H, L0 = 1.0, 2.0, 30.0, 40.0, 1.0, 1.0


def _pendulum_V(phi: float) -> float:
    tip = np.array([L * np.cos(phi), L * np.sin(phi)])
    d = np.hypot(tip[0], tip[1] - H)
    return 0.5 * KR * phi ** 2 + M * G * L / 2 * np.sin(phi) + 0.5 * KT * (d - L0) ** 2


def _hand_phi() -> float:
    return brentq(lambda p: _d(_pendulum_V, p), -1.5, 1.5, xtol=1e-14)


def test_spring_pendulum_equilibrium_matches_the_hand_derivation():
    sys = load_system(CONFIG / 'spring_pendulum.yaml')
    eq = static_equilibrium(sys)
    phi = _hand_phi()
    assert abs(eq.q[2] - phi) < 1e-8
    np.testing.assert_allclose(eq.q[:2], [np.cos(phi), np.sin(phi)], atol=1e-8)
    assert eq.verdict == 'stable' and _dd(_pendulum_V, phi) > 0
    assert eq.energy == pytest.approx(_pendulum_V(phi) - _pendulum_V(0.0) + sys.forces.potential(
        np.array([1.0, 0.0, 0.0])), abs=1e-9)


def test_spring_pendulum_pivot_force_is_the_hand_force_balance_and_the_spring_a_couple():
    """Issue 14: the pivot force on the bar was (11.027, 10.281) N; balance needs (11.082, 9.001).

    Hand: the bar's loads are its weight, the tip spring's pull toward the anchor
    and the rotational spring's couple −kr φ (no force), so the pivot force is
    −(m g + T e_tip→anchor).
    """
    sys = load_system(CONFIG / 'spring_pendulum.yaml')
    eq = static_equilibrium(sys)
    zero = np.zeros(sys.n)
    rx = JointReactions(sys)(eq.q, zero, zero)
    phi = _hand_phi()
    tip = np.array([np.cos(phi), np.sin(phi)]) * L
    to_anchor = np.array([0.0, H]) - tip
    d = np.linalg.norm(to_anchor)
    pivot = -(np.array([0.0, -M * G]) + KT * (d - L0) * to_anchor / d)
    np.testing.assert_allclose(pivot, [11.082, 9.001], atol=1e-3)      # the values
    got = rx.forces[rx.labels.index('pivot_on_bar')]
    np.testing.assert_allclose(got, pivot, atol=1e-9)
    np.testing.assert_allclose(rx.forces[rx.labels.index('pivot_on_ground')], -pivot,
                               atol=1e-9)
    couple = rx.moments[rx.labels.index('rotational_spring0_on_bar')]
    assert couple == pytest.approx(-KR * phi, abs=1e-9)
    assert np.linalg.norm(got - [11.027, 10.281]) > 1.0                  # the old answer


# -- slider-crank with a spring (test/data/slider_crank_spring.yaml) ---------------------
def _sc_spring_V(th: float) -> float:
    L1, L2, m1, m2, k = 1.0, 3.0, 1.0, 2.0, 40.0
    x = L1 * np.cos(th) + np.sqrt(L2 ** 2 - (L1 * np.sin(th)) ** 2)
    y1 = L1 * np.sin(th)
    return m1 * G * y1 / 2 + m2 * G * y1 / 2 + 0.5 * k * (6.0 - x - 4.0) ** 2


def test_slider_crank_spring_from_20_degrees_reports_the_unstable_point_as_unstable():
    sys = load_system(DATA / 'slider_crank_spring.yaml')
    eq = static_equilibrium(sys, stable=False)            # starts at 20 degrees
    th = brentq(lambda t: _d(_sc_spring_V, t), 0.0, 0.35, xtol=1e-14)
    assert eq.q[4] == pytest.approx(th, abs=1e-8)
    assert _dd(_sc_spring_V, th) < 0
    assert eq.verdict == 'unstable' and eq.eigenvalues[0] < 0


def test_slider_crank_spring_goes_on_downhill_to_the_stable_minimum():
    sys = load_system(DATA / 'slider_crank_spring.yaml')
    eq = static_equilibrium(sys, stable=True)
    grid = np.linspace(-np.pi, np.pi, 2001)
    t0 = grid[np.argmin([_sc_spring_V(t) for t in grid])]
    th = brentq(lambda t: _d(_sc_spring_V, t), t0 - 0.05, t0 + 0.05, xtol=1e-14)
    assert eq.verdict == 'stable' and _dd(_sc_spring_V, th) > 0
    assert eq.q[4] == pytest.approx(th, abs=1e-8)
    assert [v for _, v in eq.visited] == ['unstable']


# -- gravity-only slider-crank (config/slider_crank.yaml) --------------------------------
def _sc_V(th: float) -> float:
    L1, L2 = np.sqrt(2.0), np.sqrt(17.0)
    p0, u = np.array([-3.0, -2.0]), np.array([11.0, 4.0]) / np.sqrt(137.0)
    r1 = L1 * np.array([np.cos(th), np.sin(th)])
    b = u @ (r1 - p0)
    s = b + np.sqrt(b * b - (r1 - p0) @ (r1 - p0) + L2 ** 2)   # the YAML's branch (right)
    r2 = p0 + s * u
    return 1.0 * G * r1[1] / 2 + 2.0 * G * (r1[1] + r2[1]) / 2


def test_gravity_slider_crank_crank_up_is_unstable_and_stable_goes_to_crank_down():
    sys = load_system(CONFIG / 'slider_crank.yaml')
    up = static_equilibrium(sys, stable=False)
    th_up = np.arctan2(up.q[1], up.q[0])
    assert abs(_d(_sc_V, th_up)) < 1e-7 and _dd(_sc_V, th_up) < 0
    assert up.q[1] > 1.3 and up.verdict == 'unstable'                 # crank up
    down = static_equilibrium(sys, stable=True)
    th = np.arctan2(down.q[1], down.q[0])
    th_hand = brentq(lambda t: _d(_sc_V, t), th - 0.1, th + 0.1, xtol=1e-14)
    assert th == pytest.approx(th_hand, abs=1e-8)
    assert _dd(_sc_V, th_hand) > 0 and down.verdict == 'stable' and down.q[1] < -1.3


# -- five-bar (config/five_bar.yaml) ----------------------------------------------------
def _five_bar_V(tl: float, tr: float) -> float:
    L1, L2, dd = 1.0, 2.0, 2.0
    a = L1 * np.array([np.cos(tl), np.sin(tl)])
    b = np.array([dd, 0.0]) + L1 * np.array([np.cos(tr), np.sin(tr)])
    c = b - a
    dist = np.linalg.norm(c)
    mid = a + c / 2
    h = np.sqrt(L2 ** 2 - (dist / 2) ** 2)
    e = mid + h * np.array([-c[1], c[0]]) / dist                    # end point above
    return G * (1.0 * a[1] / 2 + 1.0 * b[1] / 2 + 1.5 * (a[1] + e[1]) / 2
                + 1.5 * (b[1] + e[1]) / 2)


def _hessian(f, x, h=1e-4):
    Hm = np.zeros((2, 2))
    for i in range(2):
        for j in range(2):
            ei, ej = np.eye(2)[i] * h, np.eye(2)[j] * h
            Hm[i, j] = (f(*(x + ei + ej)) - f(*(x + ei - ej)) - f(*(x - ei + ej))
                        + f(*(x - ei - ej))) / (4 * h * h)
    return Hm


def test_five_bar_saddle_is_reported_and_left_for_a_minimum():
    sys = load_system(CONFIG / 'five_bar.yaml')
    q0 = start_pose(sys, {'theta_left': np.pi / 2, 'theta_right': -np.pi / 2})
    sad = static_equilibrium(sys, q0, stable=False)
    x = sad.q[6:8]
    grad = [(_five_bar_V(*(x + e)) - _five_bar_V(*(x - e))) / 2e-6 for e in np.eye(2) * 1e-6]
    assert np.max(np.abs(grad)) < 1e-6
    hand = np.linalg.eigvalsh(_hessian(_five_bar_V, x))
    assert hand[0] < 0 < hand[1]
    assert sad.verdict == 'saddle' and classify(hand) == 'saddle'
    low = static_equilibrium(sys, q0, stable=True)
    x = low.q[6:8]
    assert np.all(np.linalg.eigvalsh(_hessian(_five_bar_V, x)) > 0)
    assert low.verdict == 'stable' and 'saddle' in [v for _, v in low.visited]


def test_classify_names_the_four_verdicts():
    assert classify(np.array([1.0, 2.0])) == 'stable'
    assert classify(np.array([-1.0, -2.0])) == 'unstable'
    assert classify(np.array([-1.0, 2.0])) == 'saddle'
    assert classify(np.array([0.0, 2.0])) == 'neutral'


def test_four_bar_under_gravity_hangs_with_zero_crank_moment():
    sys = load_system(CONFIG / 'fourbar_inverse.yaml')
    eq = static_equilibrium(sys, stable=True)
    np.testing.assert_allclose(sys.constraints.phi(eq.q), 0, atol=1e-10)
    Q = sys.forces.evaluate(eq.q, np.zeros(sys.n), None, jacobians=False).Q
    assert np.max(np.abs(eq.basis.T @ Q)) < 1e-8       # virtual power: Rᵀ Q = 0 (Eq. 6.36)
    assert eq.verdict == 'stable'


def test_potential_energy_is_the_potential_of_the_forces():
    for name in ('spring_pendulum.yaml', 'slider_crank.yaml', 'pick_and_place.yaml'):
        sys = load_system(CONFIG / name)
        q = sys.q0 + 0.01
        Q = sys.forces.evaluate(q, np.zeros(sys.n), None, jacobians=False).Q
        h = 1e-6
        grad = [(sys.forces.potential(q + h * e, q) - sys.forces.potential(q - h * e, q)) / (2 * h)
                for e in np.eye(sys.n)]
        np.testing.assert_allclose(grad, -Q, atol=1e-6 * max(1.0, np.abs(Q).max()))


# -- CLI -------------------------------------------------------------------------------
def _rows(path):
    return dict(line.split(',') for line in path.read_text().splitlines()[1:])


def test_statics_cli_writes_the_equilibrium_verdict_and_reactions(tmp_path, capsys):
    out = tmp_path / 'eq.csv'
    assert statics_main([str(CONFIG / 'spring_pendulum.yaml'), '--output', str(out)]) == 0
    rows = _rows(out)
    assert abs(float(rows['phi']) - _hand_phi()) < 1e-8
    assert rows['stability'] == 'stable' and float(rows['stiffness_eig0']) > 0
    assert float(rows['pivot_on_bar_fx']) == pytest.approx(11.08195, abs=1e-4)
    assert float(rows['pivot_on_bar_fy']) == pytest.approx(9.00139, abs=1e-4)
    assert float(rows['rotational_spring0_on_bar_m']) == pytest.approx(-KR * _hand_phi())
    assert capsys.readouterr().out.startswith('stable equilibrium at phi=0.0426963')


def test_statics_cli_start_and_no_stable_report_the_unstable_point(tmp_path, capsys):
    out = tmp_path / 'eq.csv'
    assert statics_main([str(DATA / 'slider_crank_spring.yaml'), '--output', str(out),
                         '--start', 'crank=20deg', '--no-stable']) == 0
    assert _rows(out)['stability'] == 'unstable'
    text = capsys.readouterr().out
    assert text.startswith('unstable equilibrium at crank=0.138') and 'warning' in text
    assert statics_main([str(DATA / 'slider_crank_spring.yaml'), '--output', str(out),
                         '--force']) == 0           # issue 26: replacing needs --force
    text = capsys.readouterr().out
    assert 'passed an unstable equilibrium' in text and '\nstable equilibrium' in text
    assert _rows(out)['stability'] == 'stable'


def test_statics_without_an_equilibrium_says_how_far_it_got_and_suggests_a_start(tmp_path,
                                                                                  capsys):
    sys = load_system(DATA / 'runaway_slider.yaml')
    with pytest.raises(StaticsError, match=r'did not converge.*closest pose \(max \|residual\| '
                       r'[0-9.]+\): x0=.*--start x0='):
        static_equilibrium(sys, stable=False)
    out = tmp_path / 'eq.csv'
    assert statics_main([str(DATA / 'runaway_slider.yaml'), '--output', str(out)]) == 1
    err = capsys.readouterr().err
    assert 'no stable equilibrium found' in err and 'Try another start' in err
    assert not out.exists()


def test_statics_cli_plot_is_written_at_the_path_given(tmp_path):
    plot = tmp_path / 'eq_plot'
    assert statics_main([str(CONFIG / 'slider_crank.yaml'), '--output',
                         str(tmp_path / 'eq.csv'), '--plot', str(plot)]) == 0
    assert plot.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert not (tmp_path / 'eq_plot.png').exists()


def test_statics_cli_reports_a_missing_file_on_one_line(tmp_path, capsys):
    assert statics_main([str(tmp_path / 'nope.yaml'), '--output', str(tmp_path / 'o')]) == 2
    assert 'nope.yaml' in capsys.readouterr().err


def test_a_mechanism_without_potential_is_neutral_everywhere():
    from mbfg_ros.planar.dynamics import build_system
    from mbfg_ros.planar.mechanism_yaml import parse_mechanism
    text = (CONFIG / 'five_bar.yaml').read_text() + '\ngravity: [0, 0]\n'
    sys = build_system(parse_mechanism(text, source='weightless five-bar'))
    eq = static_equilibrium(sys)
    assert eq.verdict == 'neutral' and eq.iterations <= 2
    np.testing.assert_allclose(eq.q, sys.q0, atol=1e-12)
