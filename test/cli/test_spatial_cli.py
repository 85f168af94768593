"""mbfg-simulate and mbfg-inverse on URDF robots: outputs, and one-line errors (exit 2)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from mbfg_ros.cli.inverse import main as inverse_main
from mbfg_ros.cli.simulate import main as simulate_main

DATA = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
BAD = Path(__file__).resolve().parents[1] / 'data' / 'urdf'     # error-test files
PNG = b'\x89PNG\r\n\x1a\n'


def _csv(path: Path) -> tuple[list[str], np.ndarray]:
    header = path.read_text().splitlines()[0].split(',')
    return header, np.loadtxt(path, delimiter=',', skiprows=1, ndmin=2)


def test_simulate_a_urdf_arm_writes_named_columns_and_a_plot(tmp_path, capsys):
    out, png = tmp_path / 'ur5.csv', tmp_path / 'ur5.png'
    rc = simulate_main([str(DATA / 'ur5.urdf'), '--duration', '0.2', '--output', str(out),
                        '--plot', str(png), '--quiet'])
    text = capsys.readouterr().out
    assert rc == 0 and '200 steps' in text and 'energy drift' in text
    header, data = _csv(out)
    assert header[:3] == ['t', 'shoulder_pan_joint.position', 'shoulder_lift_joint.position']
    assert 'wrist_3_joint.acceleration' in header and header[-1] == 'phi_norm'
    assert data.shape == (201, 1 + 3 * 6 + 1)
    # the arm falls from its zero pose: gravity pulls the shoulder and the elbow
    assert np.abs(data[-1, 1:7] - data[0, 1:7]).max() > 1e-3
    assert png.read_bytes()[:8] == PNG


def test_simulate_a_loop_with_a_constant_motor_torque(tmp_path, capsys):
    out = tmp_path / 'fb.csv'
    args = [str(DATA / 'fourbar.urdf'), '--overlay', str(DATA / 'fourbar_loops.yaml'),
            '--duration', '0.05', '--output', str(out), '--quiet']
    assert simulate_main(args + ['--torque', 'crank_joint=20']) == 0
    with_motor = _csv(out)[1]
    assert simulate_main(args + ['--force']) == 0        # issue 26: replacing needs --force
    passive = _csv(out)[1]
    assert with_motor[-1, 1] > passive[-1, 1] + 1e-4        # the motor turns the crank faster
    assert with_motor[:, -1].max() < 1e-9                    # the loop stays closed
    capsys.readouterr()


def test_inverse_of_a_urdf_trajectory_equals_pinocchio(tmp_path, capsys):
    t = np.linspace(0, 1, 201)
    z = 0.3 * np.sin(np.outer(t, np.arange(1, 7)))
    traj = tmp_path / 'traj.txt'
    np.savetxt(traj, np.column_stack([t, z]))
    out, png = tmp_path / 'tau.csv', tmp_path / 'tau.png'
    assert inverse_main([str(DATA / 'ur5.urdf'), '--trajectory', str(traj), '--output',
                         str(out), '--plot', str(png)]) == 0
    header, data = _csv(out)
    assert header == ['t'] + [f'{j}.effort' for j in ('shoulder_pan_joint', 'shoulder_lift_joint',
                                                   'elbow_joint', 'wrist_1_joint',
                                                   'wrist_2_joint', 'wrist_3_joint')]
    pm = pin.buildModelFromUrdf(str(DATA / 'ur5.urdf'))
    pd = pm.createData()
    w = np.arange(1, 7)
    k = 100
    s = t[k]
    ref = pin.rnea(pm, pd, 0.3 * np.sin(w * s), 0.3 * w * np.cos(w * s),
                   -0.3 * w * w * np.sin(w * s))
    assert data[k, 1:] == pytest.approx(ref, abs=1e-3 * np.abs(ref).max())
    assert png.read_bytes()[:8] == PNG
    capsys.readouterr()


@pytest.mark.parametrize('args,words', [
    (['bad_floating.urdf'], "joint 'free': a floating joint's <origin> must be"),
    (['bad_mimic.urdf'], "joint 'joint2': mimic joints"),
    (['ur5.urdf', '--overlay', 'BAD'], 'loops: expected a list'),
    (['ur5.urdf', '--torque', 'elbow_joint=x'], '--torque: elbow_joint: not a number'),
    (['ur5.urdf', '--torque', 'nope=1'], "'nope' is not an actuated joint"),
])
def test_bad_urdf_input_is_one_line_and_exit_2(tmp_path, capsys, args, words):
    bad = tmp_path / 'bad.yaml'
    bad.write_text('loops: 3\n')
    robot = (BAD if args[0].startswith('bad_') else DATA) / args[0]
    argv = [str(robot)] + [str(bad) if a == 'BAD' else a for a in args[1:]]
    rc = simulate_main(argv + ['--duration', '0.01', '--quiet'])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count('\n') == 0 and words in err, err
    assert err.startswith('mbfg-simulate: error: ')


def test_a_floating_base_robot_is_refused_in_one_line(tmp_path, capsys):
    """Issue 28: Solo-12 loads with its free base, but the CLIs hold the root fixed: they
    say so in one line naming the overlay key, instead of simulating a bolted-down robot."""
    overlay = tmp_path / 'free.yaml'
    overlay.write_text('floating_base: true\n')
    rc = simulate_main([str(BAD / 'solo12.urdf'), '--overlay', str(overlay), '--duration',
                        '0.01', '--quiet'])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count('\n') == 0, err
    assert 'floating_base: floating-base robots are not supported by the estimator yet' in err


def test_inverse_on_a_urdf_names_wrong_columns_of_trajectory_and_measured_input(tmp_path,
                                                                                capsys):
    traj = tmp_path / 'traj.txt'
    np.savetxt(traj, np.column_stack([np.linspace(0, 1, 50), np.zeros((50, 2))]))
    rc = inverse_main([str(DATA / 'ur5.urdf'), '--trajectory', str(traj), '--output',
                       str(tmp_path / 'o.csv')])
    err = capsys.readouterr().err
    assert rc == 2 and 'columns' in err
    # --measured is a CSV with a header row (issue 27: no longer refused for a URDF)
    rc = inverse_main([str(DATA / 'ur5.urdf'), '--measured', str(traj), '--output',
                       str(tmp_path / 'o.csv')])
    assert rc == 2 and "no column 't'" in capsys.readouterr().err


def _trajectory_bag(path: Path, joints: list[str], t: np.ndarray, q: np.ndarray,
                    qd: np.ndarray | None, qdd: np.ndarray | None) -> None:
    from mbfg_ros.core.bag import BagWriter, typestore
    store = typestore()
    JT = store.types['trajectory_msgs/msg/JointTrajectory']
    JTP = store.types['trajectory_msgs/msg/JointTrajectoryPoint']
    Header = store.types['std_msgs/msg/Header']
    Time = store.types['builtin_interfaces/msg/Time']
    Duration = store.types['builtin_interfaces/msg/Duration']
    empty = np.zeros(0)
    q, qd, qdd = (None if a is None else np.ascontiguousarray(a) for a in (q, qd, qdd))
    pts = [JTP(positions=q[k].copy(), velocities=qd[k].copy() if qd is not None else empty,
               accelerations=qdd[k].copy() if qdd is not None else empty, effort=empty,
               time_from_start=Duration(sec=int(t[k]), nanosec=int(round((t[k] % 1) * 1e9))))
           for k in range(len(t))]
    msg = JT(header=Header(stamp=Time(sec=0, nanosec=0), frame_id=''), joint_names=joints,
             points=pts)
    with BagWriter(path, store=store) as w:
        w.write('/arm/joint_trajectory', 'trajectory_msgs/msg/JointTrajectory', 1, msg)


def test_inverse_of_a_joint_trajectory_in_a_bag_uses_its_rates(tmp_path, capsys):
    joints = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
              'wrist_2_joint', 'wrist_3_joint']
    t = np.linspace(0.0, 1.0, 11)                       # coarse: a fit could not get q̈ right
    w = np.arange(1, 7)
    q = 0.3 * np.sin(np.outer(t, w))
    qd = 0.3 * w * np.cos(np.outer(t, w))
    qdd = -0.3 * w * w * np.sin(np.outer(t, w))
    bag = tmp_path / 'traj_bag'
    # the message lists the joints in another order than the URDF
    order = [5, 0, 3, 1, 4, 2]
    _trajectory_bag(bag, [joints[i] for i in order], t, q[:, order], qd[:, order],
                    qdd[:, order])
    out = tmp_path / 'tau.csv'
    assert inverse_main([str(DATA / 'ur5.urdf'), '--bag', str(bag), '--topic',
                         '/arm/joint_trajectory', '--output', str(out)]) == 0
    _, data = _csv(out)
    pm = pin.buildModelFromUrdf(str(DATA / 'ur5.urdf'))
    pd = pm.createData()
    ref = np.array([pin.rnea(pm, pd, q[k], qd[k], qdd[k]) for k in range(len(t))])
    assert np.abs(data[:, 1:] - ref).max() < 1e-9 * np.abs(ref).max()
    capsys.readouterr()
    rc = inverse_main([str(DATA / 'ur5.urdf'), '--bag', str(bag), '--output', str(out),
                       '--force'])                      # issue 26: replacing needs --force
    assert rc == 2 and '/joint_trajectory' in capsys.readouterr().err
