"""Figures a user can read at a glance (issue 30 item 5): the replay figure's title clear of
the panels, the raw finite-difference rate on the rate panels, a τ̂ panel for an arm; the
simulation figure's legends beside the panels and no |Φ| panel on an open chain."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mbfg_ros.cli.replay_plot as replay_plot
import mbfg_ros.cli.sim_report as sim_report
import mbfg_ros.cli.simulate as simulate_cli
from mbfg_ros.cli.demo import main as demo_main
from mbfg_ros.cli.replay import replay
from mbfg_ros.cli.replay_plot import finite_difference_rate, show_efforts
from mbfg_ros.loader import load_mechanism

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / 'config' / 'urdf'


def _capture(monkeypatch, module):
    figs = []

    def keep(fig, path, dpi=110):
        fig.canvas.draw()
        figs.append(fig)
        return Path(path)
    monkeypatch.setattr(module, 'save_figure', keep)
    return figs


def test_finite_difference_rate_unwraps_angles_and_skips_repeated_stamps():
    t = np.array([0.0, 0.1, 0.1, 0.3])
    z = np.array([3.1, -3.1, -3.1, -2.9])          # across +-pi: +0.0832 rad, not -6.2
    tm, rate = finite_difference_rate(t, z, revolute=True)
    np.testing.assert_allclose(tm, [0.05, 0.2])
    np.testing.assert_allclose(rate, [(2 * np.pi - 6.2) / 0.1, 0.2 / 0.2])
    _, rate = finite_difference_rate(t, z, revolute=False)
    assert rate[0] == pytest.approx(-62.0)


def test_the_torque_column_shows_only_when_it_says_something():
    assert not show_efforts(np.full((5, 2), np.nan), False)
    assert not show_efforts(np.zeros((5, 2)), False)           # a passive mechanism's 0
    assert show_efforts(np.zeros((5, 2)), True)                # a measured effort to compare
    assert show_efforts(np.array([[0.0, np.nan], [0.3, np.nan]]), False)


@pytest.fixture(scope='module')
def arm_bag(tmp_path_factory):
    out = tmp_path_factory.mktemp('demo')
    assert demo_main(['--mechanism', str(URDF / 'ur5.urdf'), '--overlay',
                      str(URDF / 'ur5_sensors.yaml'), '--duration', '0.6', '--out',
                      str(out)]) == 0
    return out / 'ur5_sim'


def test_the_arm_replay_figure_has_a_clear_title_raw_rates_and_a_torque_panel(
        arm_bag, tmp_path, monkeypatch):
    figs = _capture(monkeypatch, replay_plot)
    system = load_mechanism(str(URDF / 'ur5.urdf'), str(URDF / 'ur5_sensors.yaml'))
    res = replay(arm_bag, URDF / 'ur5.urdf', {'frequency': 500.0, 'unknown_effort_sigma': 20.0,
                                              'overlay': str(URDF / 'ur5_sensors.yaml')},
                 show_progress=False)
    labels = replay_plot.plot_replay(res, system, tmp_path / 'p.png')
    assert labels == ['shoulder_pan_joint [rad]', 'shoulder_pan_joint rate [rad/s]',
                      'shoulder_pan_joint error [mrad]', 'shoulder_pan_joint torque [N·m]']
    fig = figs[0]
    axes = np.array(fig.axes).reshape(6, 4)
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    assert all(title.y0 >= ax.get_tightbbox(renderer).y1 for ax in fig.axes)   # no overlap
    readings = sum(1 for m in res.measured if 'elbow_joint' in m[1])
    fd = [ln for ln in axes[2, 1].get_lines() if ln.get_label() == 'encoder finite difference']
    assert len(fd) == 1 and len(fd[0].get_xdata()) == readings - 1
    tau = {ln.get_label(): ln for ln in axes[2, 3].get_lines()}
    assert set(tau) == {'estimated τ̂', 'measured effort'}
    # τ̂ follows the measured motor effort (the demo's applied torques) on the elbow
    t_est, est = tau['estimated τ̂'].get_data()
    t_m, meas = tau['measured effort'].get_data()
    late = t_est > t_est[0] + 0.2
    err = est[late] - np.interp(t_est[late], t_m, meas)
    assert np.sqrt(np.mean(err ** 2)) < 0.1 * np.sqrt(np.mean(meas ** 2))


def test_the_simulation_figure_drops_phi_on_an_open_chain_and_keeps_legends_aside(
        tmp_path, monkeypatch):
    figs = _capture(monkeypatch, sim_report)
    assert simulate_cli.main([str(URDF / 'ur5.urdf'), '--duration', '0.05', '--plot',
                              str(tmp_path / 'a.png'), '--quiet']) == 0
    assert simulate_cli.main([str(URDF / 'fourbar.urdf'), '--overlay',
                              str(URDF / 'fourbar_loops.yaml'), '--duration', '0.05',
                              '--plot', str(tmp_path / 'b.png'), '--quiet']) == 0
    open_chain, loop = figs
    assert len(open_chain.axes) == 2 and len(loop.axes) == 3
    assert loop.axes[2].get_ylabel().startswith('‖Φ(q)‖')
    renderer = open_chain.canvas.get_renderer()
    for ax in open_chain.axes:
        legend = ax.get_legend().get_window_extent(renderer)
        assert legend.x0 >= ax.get_window_extent(renderer).x1           # beside, not over
        assert legend.x1 <= open_chain.bbox.x1 + 1                      # and inside the figure
