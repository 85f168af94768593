"""The newcomer papercuts of issue 14, one test each: what a first-time user runs into."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.cli.common import speed_phrase
from mbfg_ros.cli.simulate import energy_drift, plot_trajectory
from mbfg_ros.cli.simulate import main as simulate_main
from mbfg_ros.simulation.forward import energy
from mbfg_ros.planar.dynamics import load_system

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / 'config'
DATA = ROOT / 'test' / 'data'
PNG = b'\x89PNG\r\n\x1a\n'


def test_dt_longer_than_the_duration_is_an_error_not_zero_steps(capsys):
    rc = simulate_main([str(CONFIG / 'pendulum1.yaml'), '--dt', '2', '--duration', '1',
                        '--quiet'])
    err = capsys.readouterr().err
    assert rc == 2 and '--dt 2 s is longer than --duration 1 s' in err


def test_plot_is_written_at_exactly_the_path_given(tmp_path, capsys):
    plot = tmp_path / 'x'
    assert simulate_main([str(CONFIG / 'pendulum1.yaml'), '--duration', '0.02', '--quiet',
                          '--plot', str(plot)]) == 0
    assert plot.read_bytes()[:8] == PNG and not (tmp_path / 'x.png').exists()
    assert f'wrote {plot}' in capsys.readouterr().out


def test_forward_plot_axes_carry_units(tmp_path):
    from mbfg_ros.simulation.forward import ForwardConfig, simulate
    sys_ = load_system(CONFIG / 'fourbar_inverse.yaml')
    traj = simulate(sys_, 0.01, ForwardConfig())
    labels = plot_trajectory(tmp_path / 'p.png', traj, sys_.names, 't', ['m'] * 4 + ['rad'])
    assert labels[0] == 'q [m or rad]' and labels[1] == 'q̇ [m/s or rad/s]'


def test_energy_drift_is_absolute_and_relative_to_the_motion_not_to_e_near_zero(capsys,
                                                                               tmp_path):
    """A pendulum released from the horizontal has E = 0: the old line printed −0.11."""
    out = tmp_path / 'run.csv'
    yaml = DATA / 'pendulum_horizontal.yaml'
    assert simulate_main([str(yaml), '--duration', '0.5', '--quiet', '--output',
                          str(out)]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if 'energy drift' in x][0]
    absolute = float(line.split()[2])
    relative = float(line.split('(')[1].split()[0])
    sys_ = load_system(yaml)
    data = np.loadtxt(out, delimiter=',', skiprows=1)
    n = sys_.n
    E = energy(sys_, data[:, 1:1 + n], data[:, 1 + n:1 + 2 * n])
    assert abs(E[0]) < 1e-9                                    # the energy's zero is here
    assert absolute == pytest.approx(E[-1] - E[0], rel=1e-3, abs=1e-12)
    assert abs(relative) < 1e-4                                # the old line: O(0.1)
    kinetic = 0.5 * np.einsum('ki,ij,kj->k', data[:, 1 + n:1 + 2 * n], sys_.M,
                              data[:, 1 + n:1 + 2 * n])
    assert energy_drift(E, kinetic)[1] == pytest.approx(relative, rel=1e-2)


def test_energy_drift_helper():
    drift, rel, scale = energy_drift(np.array([0.0, 1e-3, 5e-5]), np.array([0.0, 2.0, 1.0]))
    assert (drift, rel, scale) == (5e-5, 2.5e-5, 2.0)


def test_speed_is_said_as_faster_or_slower_than_real_time():
    assert speed_phrase(0.24, 1.0) == '4.2x faster than real time'
    assert speed_phrase(2.0, 1.0) == '2.0x slower than real time'


@pytest.mark.parametrize('module', ['mbfg_ros.cli.simulate', 'mbfg_ros.cli.inverse',
                                    'mbfg_ros.cli.statics', 'mbfg_ros.cli.replay',
                                    'mbfg_ros.cli.demo'])
def test_help_shows_no_raw_rst_backquotes(module, capsys):
    main = __import__(module, fromlist=['main']).main
    with pytest.raises(SystemExit) as exc:
        main(['--help'])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert 'usage:' in out and '``' not in out


def test_a_closed_pipe_ends_quietly_without_a_traceback(tmp_path):
    """``mbfg-statics ... | head -0``: the reader is gone before the first write."""
    r, w = os.pipe()
    os.close(r)                                   # nobody will ever read: EPIPE guaranteed
    try:
        proc = subprocess.run([sys.executable, '-m', 'mbfg_ros.cli.statics',
                               str(CONFIG / 'spring_pendulum.yaml'), '--output',
                               str(tmp_path / 'eq.csv')],
                              stdout=w, stderr=subprocess.PIPE, cwd=ROOT, timeout=120)
    finally:
        os.close(w)
    err = proc.stderr.decode()
    assert 'Traceback' not in err and 'BrokenPipeError' not in err, err
    assert proc.returncode == 141


def test_demo_outputs_are_named_after_the_mechanism_with_units_per_joint(tmp_path, capsys):
    from mbfg_ros.cli.replay import plot_replay, replay
    from mbfg_ros.cli.demo import main as demo_main
    out = tmp_path / 'demo'
    assert demo_main(['--mechanism', str(CONFIG / 'slider_crank.yaml'), '--duration', '0.2',
                      '--out', str(out)]) == 0
    text = capsys.readouterr().out
    names = sorted(p.name for p in out.iterdir())
    assert names == ['slider_crank_demo.png', 'slider_crank_estimates',
                     'slider_crank_estimates.csv', 'slider_crank_sim']
    assert 'slider position [m] ' in text and 'slider rate [m/s] ' in text
    assert 'crank position [rad] ' in text
    assert 'x faster than real time' in text or 'x slower than real time' in text
    # The replay plot has an error panel against the ground truth of the bag.
    sys_ = load_system(CONFIG / 'slider_crank.yaml')
    res = replay(out / 'slider_crank_sim', CONFIG / 'slider_crank.yaml',
                 {'frequency': 200.0}, show_progress=False)
    labels = plot_replay(res, sys_, tmp_path / 'plot')
    assert labels == ['crank [rad]', 'crank rate [rad/s]', 'crank error [mrad]',
                      'crank torque [N·m]']            # issue 30: the motor's estimated τ̂
    assert (tmp_path / 'plot').read_bytes()[:8] == PNG


def test_replay_with_no_matching_joint_names_fails_naming_both_sides(tmp_path, capsys):
    from mbfg_ros.core.bag import BagWriter, typestore
    from mbfg_ros.cli.replay import main as replay_main
    from mbfg_ros.ros import conversions as cv
    kit = cv.rosbags_kit(typestore())
    with BagWriter(tmp_path / 'b', 'mcap', typestore()) as w:
        for k in range(1, 20):
            t = 10 ** 9 + k * 10 ** 7
            w.write('/joint_states', cv.TYPES['JointState'], t,
                    cv.joint_state_msg(kit, t, ('left_wheel', 'right_wheel'), [0.1, 0.2],
                                       [0.0, 0.0]))
    rc = replay_main([str(tmp_path / 'b'), '--mechanism', str(CONFIG / 'slider_crank.yaml'),
                      '--output', str(tmp_path / 'o'), '--quiet'])
    err = capsys.readouterr().err
    assert rc == 2
    assert 'left_wheel, right_wheel' in err and 'crank, slider' in err


def test_inverse_plot_has_a_title_and_a_reactions_panel(tmp_path):
    from mbfg_ros.cli.inverse import main as inverse_main
    traj = tmp_path / 'traj.txt'
    t = np.linspace(0, 0.5, 51)
    np.savetxt(traj, np.column_stack((t, 0.3 * np.sin(t))))
    plot = tmp_path / 'tau'
    assert inverse_main([str(CONFIG / 'fourbar_inverse.yaml'), '--trajectory', str(traj),
                         '--output', str(tmp_path / 'tau.csv'), '--plot', str(plot),
                         '--reactions', '--batch']) == 0
    assert plot.read_bytes()[:8] == PNG
    header = (tmp_path / 'tau.csv').read_text().splitlines()[0].split(',')
    assert 'p0_on_body0.fx' in header and 'theta0_on_body0.m' in header
    from mbfg_ros.cli.inverse import plot_inverse
    from mbfg_ros.planar.problems.inverse import inverse_dynamics
    from mbfg_ros.planar.problems.reactions import JointReactions
    sys_ = load_system(CONFIG / 'fourbar_inverse.yaml')
    res = inverse_dynamics(sys_, t, 0.3 * np.sin(t)[:, None], [4])
    rx = [JointReactions(sys_)(res.q[k], res.qd[k], res.qdd[k], res.Q[k]) for k in range(3)]
    res = res._replace(t=res.t[:3], tau=res.tau[:3])
    titles = plot_inverse(tmp_path / 'p2', sys_.mech, res, ['crank_motor'], rx)
    assert titles[0].startswith('fourbar_inverse: inverse dynamics, actuator efforts')
    assert titles[1].startswith('joint reactions')


def test_urdf_demo_runs_the_arm_end_to_end(tmp_path, capsys):
    """`make demo`'s second part on a URDF: the arm tracks its reference, the bag replays
    through the estimator, every joint beats its encoder and the motor torques are
    estimated (the numbers are the estimator's, compared here with the simulated truth)."""
    import re

    from mbfg_ros.cli.demo import main as demo_main
    urdf = CONFIG / 'urdf'
    out = tmp_path / 'demo'
    assert demo_main(['--mechanism', str(urdf / 'ur5.urdf'), '--overlay',
                      str(urdf / 'ur5_sensors.yaml'), '--duration', '1.0', '--out',
                      str(out)]) == 0
    text = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ['ur5_demo.png', 'ur5_estimates',
                                                     'ur5_estimates.csv', 'ur5_sim']
    rows = re.findall(r'^(\w+) position \[rad\]\s+([\d.]+)\s+([\d.]+)$', text, re.M)
    assert len(rows) == 6
    for joint, raw, est in rows:
        assert float(est) < float(raw), (joint, raw, est)
    m = re.search(r'τ̂ RMSE ([\d.]+) N·m .*\(([\d.]+) % of their RMS', text)
    assert m and float(m.group(2)) < 5.0, text
