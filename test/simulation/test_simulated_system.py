"""The simulation seam (issue 23, core.interface.SimulatedSystem): what the simulator node,
the forward dynamics and the markers ask of a system, answered by both formulations
through the loader, checked against independent expectations."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.core.interface import SimulatedSystem
from mbfg_ros.loader import load_mechanism
from mbfg_ros.simulation.forward import ForwardConfig, ForwardSimulator, stepper

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / 'config' / 'urdf'
FOURBAR = str(ROOT / 'config' / 'fourbar.yaml')


@pytest.fixture(scope='module')
def planar():
    return load_mechanism(FOURBAR)


@pytest.fixture(scope='module')
def ur5():
    return load_mechanism(str(URDF / 'ur5.urdf'), str(URDF / 'ur5_sensors.yaml'))


def test_the_loader_gives_simulated_systems(planar, ur5):
    for system in (planar, ur5):
        assert isinstance(system, SimulatedSystem)
    assert planar.independent_dynamics and not ur5.independent_dynamics
    assert ur5.independent_indices == tuple(range(6))          # a tree: every joint


def test_the_urdf_integrator_agrees_with_the_factor_graph_on_a_tree(ur5):
    """The node's stepper for a URDF robot is its own trapezoidal rule; on a tree the
    factor graph (simulation.forward, the same trapezoidal rule as soft factors) reaches
    the same state: the two integrators are one method."""
    own = stepper(ur5, ForwardConfig(dt=1e-3))
    graph = ForwardSimulator(ur5, ForwardConfig(dt=1e-3))
    assert not isinstance(own, ForwardSimulator)
    for _ in range(200):
        own.step(None)
        graph.step(None)
    assert own.t == pytest.approx(0.2) and graph.t == pytest.approx(0.2)
    assert np.abs(own.q - ur5.q0).max() > 1e-3                  # it fell
    np.testing.assert_allclose(own.q, graph.q, atol=1e-9)
    np.testing.assert_allclose(own.qd, graph.qd, atol=1e-8)


def test_a_planar_mechanism_steps_with_the_factor_graph_and_keeps_its_energy(planar):
    sim = stepper(planar, ForwardConfig(dt=1e-3))
    assert isinstance(sim, ForwardSimulator)
    E0 = planar.energy(sim.q, sim.qd)
    moved = 0.0
    for _ in range(300):
        sim.step(None)
        moved = max(moved, 0.5 * sim.qd @ planar.mass_matrix(sim.q) @ sim.qd)
    assert moved > 0.01                                          # J: it swung
    assert abs(planar.energy(sim.q, sim.qd) - E0) < 1e-3 * moved


def test_noise_free_encoders_read_the_joint_angles(planar, ur5):
    rng = np.random.default_rng(0)
    quiet = dict(encoder_rate=1.0, imu_rate=1.0, encoder_counts=0, encoder_sigma=0.0,
                 encoder_velocity_sigma=0.0, gyro_sigma=0.0, accel_sigma=0.0)
    # the UR5: joint coordinates, the encoders read q itself; effort = the applied torque
    q = np.asarray(ur5.q0) + 0.1
    qd = np.linspace(-0.3, 0.3, 6)
    tau = np.arange(6.0)
    recs = ur5.simulate_measurements(np.zeros(1), q[None], qd[None], np.zeros((1, 6)),
                                     tau[None], ur5.sensor_config(**quiet), rng)
    enc = [r for r in recs if not hasattr(r, 'sensor')]
    assert len(enc) == 1 and len(recs) == 1 + len(ur5.description.sensors)
    np.testing.assert_allclose(enc[0].position, q, atol=1e-12)
    np.testing.assert_allclose(enc[0].velocity, qd, atol=1e-12)
    np.testing.assert_allclose(enc[0].effort, tau, atol=1e-12)
    # the four-bar: natural coordinates; the crank's angle is that of point 1 about A = 0
    q = np.asarray(planar.q0, float)
    recs = planar.simulate_measurements(np.zeros(1), q[None], np.zeros((1, planar.n)),
                                        np.zeros((1, planar.n)), None,
                                        planar.sensor_config(**quiet), rng)
    enc = next(r for r in recs if not hasattr(r, 'sensor'))
    x1, y1 = q[planar.names.index('x1')], q[planar.names.index('y1')]
    assert enc.position[list(enc.names).index('crank')] == pytest.approx(np.arctan2(y1, x1),
                                                                         abs=1e-12)


def test_only_the_planar_mechanism_draws_itself(planar, ur5):
    assert ur5.drawing() is None
    g = planar.drawing()
    q = np.asarray(planar.q0, float)
    seg = g.segments(q)
    lengths = np.linalg.norm(seg[:, 1] - seg[:, 0], axis=1)
    # crank, coupler, rocker: two-point bodies, one segment each, as long as the body
    np.testing.assert_allclose(lengths, [b.length for b in planar.mech.bodies], rtol=1e-6)
    assert g.size == pytest.approx(max(b.length for b in planar.mech.bodies))
    assert g.n_imus == len(planar.description.sensors) == 1
