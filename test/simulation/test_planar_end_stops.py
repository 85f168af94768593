"""Planar joint position limits as stiff end stops in simulation (issue 30 item 3): the
four-bar of config/ with a crank limit falls onto the stop, stays within a small
penetration, comes to rest there with the energy of the impact dissipated; the stop is a
simulation-only force (the loaded system, which the estimator and inverse dynamics use, has
none); ``mbfg-simulate MECH.yaml`` applies it by default and ``--no-limits`` lets the crank
pass through."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.cli.simulate import main as simulate_main
from mbfg_ros.core.end_stops import EndStopLog
from mbfg_ros.planar.dynamics import load_system
from mbfg_ros.planar.end_stops import STOP_OMEGA_DT
from mbfg_ros.planar.forces import stop_torque
from mbfg_ros.simulation.forward import ForwardConfig, simulate

REPO = Path(__file__).resolve().parents[2]
CRANK = '  - {name: crank, type: revolute, bodies: [ground, 0]}\n'
LIMITED = ('  - {name: crank, type: revolute, bodies: [ground, 0], '
           'limits: {position: [-0.5, 1.0], velocity: 2.0}}\n')
LOWER = -0.5
G = 9.81


@pytest.fixture(scope='module')
def yaml_path(tmp_path_factory) -> Path:
    """config/fourbar.yaml with the crank limited to [−0.5, 1.0] rad and 2 rad/s: released
    horizontal, gravity turns the crank down (negative), through −0.5 rad at ~0.31 s."""
    text = (REPO / 'config' / 'fourbar.yaml').read_text()
    assert CRANK in text
    path = tmp_path_factory.mktemp('stops') / 'fourbar_limited.yaml'
    path.write_text(text.replace(CRANK, LIMITED))
    return path


def _potential_at_crank(theta: float) -> float:
    """Gravity potential of config/fourbar.yaml (crank 1 m, 1 kg; coupler 2 m, 2 kg; rocker
    to B = (4, 0), 4 kg; uniform bars) with the crank at ``theta``, assembled by hand: the
    coupler-rocker point is the intersection of two circles, on the upper branch of the
    YAML pose (1, 2)."""
    p1 = np.array([math.cos(theta), math.sin(theta)])
    B = np.array([4.0, 0.0])
    r0, r1 = 2.0, math.hypot(3.0, 2.0)
    d = np.linalg.norm(B - p1)
    a = (r0 ** 2 - r1 ** 2 + d ** 2) / (2 * d)
    h = math.sqrt(r0 ** 2 - a ** 2)
    e = (B - p1) / d
    p2 = p1 + a * e + h * np.array([-e[1], e[0]])
    assert p2[1] > 0
    return G * (1.0 * p1[1] / 2 + 2.0 * (p1[1] + p2[1]) / 2 + 4.0 * p2[1] / 2)


def test_the_hand_assembly_gives_the_yaml_pose_energy():
    assert _potential_at_crank(0.0) == pytest.approx(58.86)


def test_the_crank_falls_onto_its_stop_and_rests_there(yaml_path):
    system = load_system(yaml_path)
    dt = 1e-3
    model = system.end_stop_model(dt)
    log = EndStopLog(model.stops.names)
    held = simulate(system, 3.0, ForwardConfig(dt=dt), end_stops=model, log=log)
    crank = np.array([model.joints(q, qd)[0][0] for q, qd in zip(held.q, held.qd)])
    rate = np.array([model.joints(q, qd)[1][0] for q, qd in zip(held.q, held.qd)])
    # penetration: an impact at v ≈ 3.5 rad/s goes about v dt / 0.2 past the limit
    assert crank.min() < LOWER
    assert crank.min() > LOWER - 0.01
    assert LOWER - 1e-3 < crank[-1] < LOWER
    # at rest on the stop: no rate, no kinetic energy, the constraints still hold
    assert np.abs(rate[-200:]).max() < 1e-6
    assert 0.5 * held.qd[-1] @ system.M @ held.qd[-1] < 1e-9
    assert held.phi_norm.max() < 1e-5
    # the energy left is the potential of the hand-assembled pose at the limit: the rest
    # (21 J of the 58.86 J) was dissipated by the stop's damper
    E = system.energy(held.q, held.qd)
    assert E[0] == pytest.approx(58.86)
    assert E[-1] == pytest.approx(_potential_at_crank(LOWER), abs=0.02)
    assert E[0] - E[-1] > 20.0
    # the log: the impact(s), held most of the run, the velocity limit exceeded in the fall
    assert 1 <= log.impacts[0] <= 2
    assert log.steps_locked[0] * dt > 2.5
    assert log.peak_penetration[0] == pytest.approx(LOWER - crank.min(), abs=1e-12)
    assert log.over_velocity[0] > 0 and log.peak_velocity_ratio[0] > 1.5
    assert log.impacts[1] == 0 and log.over_velocity[1] == 0       # coupler_joint: no limit


def test_without_the_stop_the_crank_swings_through_and_keeps_its_energy(yaml_path):
    system = load_system(yaml_path)
    free = simulate(system, 1.0, ForwardConfig())
    assert system.forces.stops == ()      # the loaded system (estimator, inverse) has none
    crank = np.arctan2(free.q[:, 1], free.q[:, 0])       # point 1 = (cos θ, sin θ)
    assert crank.min() < LOWER - 1.0
    E = system.energy(free.q, free.qd)
    assert np.abs(E - E[0]).max() < 0.01


def test_the_stop_sizes_for_the_step_and_is_simulation_only(yaml_path):
    system = load_system(yaml_path)
    fine, = system.end_stop_model(1e-3).specs
    coarse, = system.end_stop_model(1e-2).specs
    # k = I ω², c = 2 ζ I ω with ω = 0.2 / dt, ζ = 1: k / c = ω / 2, k ∝ 1/dt², c ∝ 1/dt
    assert fine.k / fine.c == pytest.approx(STOP_OMEGA_DT / 1e-3 / 2)
    assert fine.k / coarse.k == pytest.approx(100.0)
    assert fine.c / coarse.c == pytest.approx(10.0)
    model = system.end_stop_model(1e-3)
    # a pose past the lower stop: only the end-stop system feels a force there
    th = LOWER - 0.05
    q = system.q0.copy()
    q[:2] = math.cos(th), math.sin(th)
    qd = np.zeros(system.n)
    plain = system.forces.evaluate(q, qd, None).Q
    stopped = model.system.forces.evaluate(q, qd, None).Q
    torque = stop_torque(model.specs[0], th, 0.0)
    assert torque == pytest.approx(model.specs[0].k * 0.05)
    # the extra generalised force on point 1 is the torque's, T ∂θ/∂(x1, y1)
    np.testing.assert_allclose(stopped[:2] - plain[:2],
                               torque * np.array([-math.sin(th), math.cos(th)]), rtol=1e-9)
    np.testing.assert_allclose(stopped[2:], plain[2:])


def test_the_stop_jacobians_match_finite_differences(yaml_path):
    model = load_system(yaml_path).end_stop_model(1e-3)
    forces = model.system.forces
    th = LOWER - 0.02
    q = model.system.q0.copy()
    q[:2] = math.cos(th), math.sin(th)
    qd = np.array([0.3, 0.5, -0.2, 0.1])        # moving out of the stop slowly: still pushing
    terms = forces.evaluate(q, qd, None)
    h = 1e-7
    for k in range(len(q)):
        e = np.zeros(len(q))
        e[k] = h
        dq = (forces.evaluate(q + e, qd, None).Q - forces.evaluate(q - e, qd, None).Q) / (2 * h)
        dv = (forces.evaluate(q, qd + e, None).Q - forces.evaluate(q, qd - e, None).Q) / (2 * h)
        np.testing.assert_allclose(terms.Q_q[:, k], dq, rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(terms.Q_qd[:, k], dv, rtol=1e-5, atol=1e-3)


def test_mbfg_simulate_applies_planar_limits_by_default(yaml_path, capsys):
    assert simulate_main([str(yaml_path), '--duration', '0.6', '--quiet']) == 0
    out = capsys.readouterr().out
    assert 'joint position limits as end stops' in out
    assert 'crank: stopped at its position limit (range [-0.5, 1])' in out
    assert 'crank: above its velocity limit 2' in out


def test_mbfg_simulate_no_limits_lets_the_crank_pass(yaml_path, tmp_path, capsys):
    csv = tmp_path / 'free.csv'
    assert simulate_main([str(yaml_path), '--duration', '0.6', '--quiet', '--no-limits',
                          '-o', str(csv)]) == 0
    out = capsys.readouterr().out
    assert 'joint limits ignored (--no-limits)' in out and 'stopped' not in out
    data = np.genfromtxt(csv, delimiter=',', names=True)
    crank = np.arctan2(data['y1position'], data['x1position'])
    assert crank.min() < LOWER - 0.3
