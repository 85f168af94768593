"""Joint limits in simulation (issue 30 item 3): position limits as unilateral constraints
(inelastic end stops that hold a joint the dynamics push further), velocity limits
reported when exceeded; ``mbfg-simulate`` applies them to a URDF robot by default."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.cli.simulate import main as simulate_main
from mbfg_ros.core.end_stops import EndStopLog, EndStops
from mbfg_ros.spatial.simulate import end_stops_of, simulate_spatial
from mbfg_ros.spatial.system import build_spatial_system

ARM = (Path(__file__).resolve().parents[1] / 'data' / 'urdf' / 'limited_bar.urdf').read_text()
"""A bar released horizontally: gravity turns it about +y toward q = π/2 (the centre of
mass at (0.3 cos q, 0, −0.3 sin q)); its stop at q = 1.0 rad comes first."""


@pytest.fixture
def arm(tmp_path):
    path = tmp_path / 'arm.urdf'
    path.write_text(ARM)
    return build_spatial_system(str(path), None, 'numpy'), path


def test_a_falling_bar_stops_at_its_limit_and_is_held_there(arm):
    system, _ = arm
    stops = end_stops_of(system)
    assert stops.upper[0] == 1.0 and stops.lower[0] == -0.5 and stops.velocity[0] == 1.0
    log = EndStopLog(system.names)
    dt = 1e-3
    held = simulate_spatial(system, 1.0, dt, end_stops=stops, log=log)
    free = simulate_spatial(system, 1.0, dt)
    q, qd = held.q[:, 0], held.qd[:, 0]
    assert q.max() <= 1.0 and free.q[:, 0].max() > 1.3          # without the stop: past it
    arrival = int(np.argmax(q >= 1.0))
    assert arrival > 0
    # until the stop the motion is the free fall's, step for step
    np.testing.assert_allclose(q[:arrival], free.q[:arrival, 0], atol=1e-12)
    # the free fall crosses 1.0 rad in the same step
    assert np.argmax(free.q[:, 0] >= 1.0) == arrival
    # then held: on the limit, at rest, not accelerating, for the rest of the run
    np.testing.assert_array_equal(q[arrival:], 1.0)
    np.testing.assert_array_equal(qd[arrival:], 0.0)
    np.testing.assert_array_equal(held.qdd[arrival + 1:, 0], 0.0)
    assert log.impacts.tolist() == [1]
    assert log.steps_locked[0] == len(q) - 1 - arrival
    # the velocity limit (1 rad/s) is passed on the way down: counted, not enforced
    over = int(np.sum(np.abs(qd[1:]) > 1.0))
    assert over > 0 and log.over_velocity[0] == over
    assert log.peak_velocity_ratio[0] == pytest.approx(np.abs(qd).max())
    text = '\n'.join(log.lines(stops, dt))
    assert 'hinge: stopped at its position limit' in text and 'not enforced' in text


def test_a_locked_joint_leaves_the_others_the_reduced_dynamics():
    """Elbow of the DFKI double pendulum held by its stop: the shoulder's q̈ is that of the
    system with the elbow frozen, M_ss q̈_s = (τ − h)_s (an independent reduction)."""
    from conftest import CONFIG
    system = build_spatial_system(str(CONFIG / 'urdf' / 'double_pendulum.urdf'), None, 'numpy')
    q, qd = np.array([0.7, 0.4]), np.array([0.5, 0.0])
    free = system.forward(q, qd, None)
    M = system.mass_matrix(q)
    none = np.array([np.inf, np.inf])
    at = np.array([np.inf, 0.4])          # the elbow's stop where it is, on the side it is pushed
    below = np.array([-np.inf, 0.4])
    stops = (EndStops(system.names, -none, at, none) if free[1] > 0 else
             EndStops(system.names, below, none, none))
    locked = stops.locked(q, qd, free)
    assert locked.tolist() == [False, True]
    held = stops.constrained(free, M, locked)
    generalised = M @ free                              # τ − h
    assert held[1] == pytest.approx(0.0, abs=1e-12)
    assert held[0] == pytest.approx(generalised[0] / M[0, 0], rel=1e-10)


def test_a_stop_that_would_pull_is_released():
    stops = EndStops(('a', 'b'), np.array([0.0, -1.0]), np.array([1.0, 1.0]),
                     np.array([np.inf, np.inf]))
    M = np.array([[1.0, -0.9], [-0.9, 1.0]])
    q, qd = np.array([0.0, 0.0]), np.zeros(2)
    # a pushed into its lower stop: locked; moving away (q̈ > 0): free
    assert stops.locked(q, qd, np.array([-1.0, 0.0])).tolist() == [True, False]
    assert not stops.locked(q, qd, np.array([1.0, 0.0])).any()
    # two locked with a reaction that would have to pull one of them: that one is released
    two = EndStops(('a', 'b'), np.array([0.0, 0.0]), np.array([1.0, 1.0]),
                   np.array([np.inf, np.inf]))
    free = np.array([-1.0, -0.05])
    lam_both = np.linalg.solve(np.linalg.inv(M), -free)
    assert (lam_both < 0).any()                         # locking both would pull one
    held = two.constrained(free, M, two.locked(q, qd, free))
    assert held[0] == pytest.approx(0.0, abs=1e-12)     # a stays on its stop
    assert held[1] > 0                                  # b leaves its stop
    q2, qd2, hit = two.clamp(np.array([-0.1, 0.5]), np.array([-2.0, 3.0]))
    assert q2.tolist() == [0.0, 0.5] and qd2.tolist() == [0.0, 3.0] and hit.tolist() == [True,
                                                                                       False]


def test_mbfg_simulate_applies_the_limits_and_says_so(arm, capsys):
    _, path = arm
    assert simulate_main([str(path), '--duration', '0.6', '--quiet']) == 0
    out = capsys.readouterr().out
    assert 'joint position limits as end stops' in out
    assert 'hinge: stopped at its position limit (range [-0.5, 1])' in out
    assert 'hinge: above its velocity limit 1' in out
    assert simulate_main([str(path), '--duration', '0.6', '--quiet', '--no-limits']) == 0
    out = capsys.readouterr().out
    assert 'joint limits ignored (--no-limits)' in out and 'stopped' not in out
