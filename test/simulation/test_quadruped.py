"""The simulated quadruped truth (bench/quadruped/sim.py) and its bags (bench/quadruped/bag.py).

The short bag is test/data/solo12/trot_3s (SOURCE.md there); the physics checks are
Newton's (total contact force = m g standing still), the contact's (a stance foot does
not move), the sensors' conventions (an accelerometer at rest reads +g up) and the
REP-105 twist convention (the truth twist, in base_link, integrates to the pose).
"""
from __future__ import annotations

import numpy as np
import pytest


from conftest import DATA

from bench.quadruped import sim as Q
from bench.floating_base import quat_to_rot
from bench.quadruped.bag import FOOT_LINKS, TOPICS, read_bag
from mbfg_ros.core.bag import bag_topics

BAG = DATA / 'solo12' / 'trot_3s'
G = 9.81


@pytest.fixture(scope='module')
def bag() -> dict:
    return read_bag(BAG)


def test_short_bag_has_every_topic_with_its_standard_type_at_1khz(bag):
    from rosbags.rosbag2 import Reader

    assert bag_topics(BAG) == TOPICS
    with Reader(BAG) as r:
        counts = {c.topic: c.msgcount for c in r.connections}
        duration = r.duration / 1e9
    n = len(bag['t'])
    assert n >= 2500 and set(counts.values()) == {n}
    assert np.all(np.diff(bag['t']) == pytest.approx(1e-3, abs=1e-9))
    assert duration == pytest.approx((n - 1) * 1e-3, abs=2e-9)    # rosbags: end − start + 1 ns
    assert sum(f.stat().st_size for f in BAG.iterdir()) <= 2_000_000
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(Q.SOLO12_URDF))
    assert bag['joint_names'] == list(model.names[1:])


def test_short_bag_walks_forward_with_trotting_contacts(bag):
    assert bag['p'][-1, 0] - bag['p'][0, 0] > 0.4
    trotting = bag['t'] > 1.0
    duty = bag['contact'][trotting].mean(axis=0)
    assert np.all((duty > 0.4) & (duty < 0.8)), duty        # a trot: each foot ~half in stance
    # diagonal pairs: FL with HR, FR with HL
    c = bag['contact'][trotting]
    assert np.mean(c[:, 0] == c[:, 3]) > 0.8 and np.mean(c[:, 1] == c[:, 2]) > 0.8
    assert np.mean(c[:, 0] == c[:, 1]) < 0.6


def test_total_contact_force_is_m_g_while_standing_still(bag):
    still = (bag['t'] > 0.2) & (bag['t'] < 0.5)
    total = bag['force_true'][still].sum(axis=1)
    mass = 2.5            # the URDF's masses: 2.500 kg (test/data/solo12/SOURCE.md)
    assert total[:, 2].mean() == pytest.approx(mass * G, rel=5e-3)
    # Σ f = m (a − g): horizontally only the settling sway after the start (< 0.1 m/s²)
    assert np.abs(total[:, :2].mean(axis=0)).max() < 0.25
    # the measured foot forces (foot frames, noisy) carry the same weight
    assert np.linalg.norm(bag['force'][still].sum(axis=1), axis=1).mean() == pytest.approx(
        mass * G, rel=0.02)


def test_truth_twist_in_base_frame_integrates_to_the_pose(bag):
    R = np.array([quat_to_rot(q) for q in bag['quat']])
    v_world = np.einsum('kij,kj->ki', R, bag['v'])
    dp = np.diff(bag['p'], axis=0) / 1e-3
    # MuJoCo's semi-implicit step: p_k = p_(k−1) + dt v_k
    assert np.abs(dp - v_world[1:]).max() < 1e-6
    assert np.abs(bag['v'][bag['t'] > 1.5, 0]).max() > 0.2     # it moves


def test_accelerometer_reads_plus_g_up_and_gyro_zero_at_rest(bag):
    still = bag['t'] < 0.4
    R = np.array([quat_to_rot(q) for q in bag['quat'][still]])
    expected = np.einsum('kji,j->ki', R, [0.0, 0.0, G])        # Rᵀ (0, 0, g)
    assert np.abs(bag['acc'][still].mean(axis=0) - expected.mean(axis=0)).max() < 0.15
    assert np.abs(bag['gyro'][still].mean(axis=0)).max() < 0.015    # bias ≤ 5σ of 3e-3


def test_encoders_are_quantised_to_16_bits(bag):
    step = 2 * np.pi / 2 ** 16
    k = bag['q'] / step
    assert np.abs(k - np.round(k)).max() < 1e-6


def test_stance_feet_do_not_move_in_the_truth():
    run = Q.simulate('trot', 2.0, seed=3)
    c = run.contact > 0.5
    # mid-stance: in contact 20 ms before and after (not touchdown or lift-off)
    w = 20
    mid = np.zeros_like(c)
    for i in range(4):
        s = np.convolve(c[:, i].astype(float), np.ones(2 * w + 1), 'same')
        mid[:, i] = s >= 2 * w + 1
    speed = np.linalg.norm(run.foot_v, axis=2)
    assert mid.sum() > 1000
    assert np.median(speed[mid]) < 0.02
    assert np.median(speed[~c]) > 0.15                         # swing feet do move
    assert not run.fell


def test_sway_moves_the_base_with_all_feet_planted():
    run = Q.simulate('sway', 3.0, seed=1)
    assert run.contact[500:].min() == 1.0
    assert np.ptp(run.p[1500:, 2]) > 0.02 and np.ptp(run.p[1500:, 1]) > 0.02
    assert np.percentile(np.linalg.norm(run.foot_v[500:], axis=2), 95) < 0.02


def test_push_is_felt_and_survived():
    quiet = Q.simulate('stand', 2.5, seed=2)
    pushed = Q.simulate('push', 2.5, seed=2)
    assert np.abs(quiet.v[:, 1]).max() < 0.01
    assert np.abs(pushed.v[:, 1]).max() > 0.1
    assert not pushed.fell and pushed.p[-1, 2] > 0.2


def test_leg_ik_puts_the_feet_where_asked_in_mujoco():
    import mujoco

    model = mujoco.MjModel.from_xml_string(Q.mjcf_from_urdf())
    data = mujoco.MjData(model)
    rng = np.random.default_rng(4)
    target = Q.Gait().nominal() + rng.uniform(-0.04, 0.04, (4, 3))
    data.qpos[3] = 1.0
    data.qpos[7:] = Q.feet_ik(target)
    mujoco.mj_kinematics(model, data)
    got = np.array([data.xpos[model.body(f).id] for f in FOOT_LINKS]) - data.qpos[:3]
    assert np.abs(got - target).max() < 1e-9


def test_mjcf_keeps_the_urdf_masses_and_inertias():
    import mujoco
    import pinocchio as pin

    model = mujoco.MjModel.from_xml_string(Q.mjcf_from_urdf())
    ref = pin.buildModelFromUrdf(str(Q.SOLO12_URDF), pin.JointModelFreeFlyer())
    assert model.body_mass.sum() == pytest.approx(sum(i.mass for i in ref.inertias), rel=1e-12)
    # the composite inertia at the same posture: MuJoCo's mass matrix against Pinocchio's
    data = mujoco.MjData(model)
    q = Q.feet_ik(Q.Gait().nominal())
    data.qpos[3] = 1.0
    data.qpos[7:] = q
    mujoco.mj_forward(model, data)
    M = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, M)
    Mp = pin.crba(ref, ref.createData(), np.r_[0, 0, 0, 0, 0, 0, 1, q])
    Mp = np.triu(Mp) + np.triu(Mp, 1).T
    # the same generalised velocities: both put the base's linear velocity first, MuJoCo in
    # the world frame and Pinocchio in the base frame (equal at the identity orientation)
    assert np.abs(M - Mp).max() < 1e-9


def test_cli_refuses_an_existing_bag_and_replaces_it_with_force(tmp_path, capsys):
    import importlib.util

    from conftest import REPO
    spec = importlib.util.spec_from_file_location('simulate_quadruped',
                                                  REPO / 'scripts' / 'simulate_quadruped.py')
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from mbfg_ros.cli.common import run_cli

    out = tmp_path / 'b'
    args = ['--scenario', 'stand', '--duration', '0.05', '--out', str(out)]
    assert run_cli(mod.main, args) == 0
    first = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert run_cli(mod.main, args) == 2
    assert 'exists (use --force' in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == first
    assert run_cli(mod.main, args + ['--force', '--seed', '1']) == 0
    assert len(read_bag(out)['t']) == 50
    with pytest.raises(SystemExit) as exc:
        run_cli(mod.main, ['--scenario', 'walk', '--out', str(tmp_path / 'c')])
    assert exc.value.code == 2 and not (tmp_path / 'c').exists()
