"""Forward-dynamics simulation and whole-motion inverse dynamics of URDF robots."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from scipy.integrate import solve_ivp

from mbfg_ros.core.errors import MbfgError
from mbfg_ros.spatial.dynamics_graph import DynamicsGraph
from mbfg_ros.spatial.inverse_trajectory import inverse_trajectory
from mbfg_ros.spatial.simulate import simulate_spatial
from mbfg_ros.spatial.system import build_spatial_system

DATA = Path(__file__).resolve().parents[2] / 'config' / 'urdf'


def test_ur5_fall_matches_an_independent_integration_of_pinocchio_aba_to_second_order():
    S = build_spatial_system(DATA / 'ur5.urdf')
    pm = pin.buildModelFromUrdf(str(DATA / 'ur5.urdf'))
    pd = pm.createData()
    q0 = np.array([0.3, -1.0, 0.8, 0.2, 0.5, 0.1])
    errors = []
    for dt in (1e-3, 5e-4):
        tr = simulate_spatial(S, 1.0, dt, q0=q0)
        ref = solve_ivp(lambda t, y: np.concatenate([y[6:], pin.aba(pm, pd, y[:6], y[6:],
                                                                    np.zeros(6))]),
                        (0, 1), np.concatenate([q0, np.zeros(6)]), method='DOP853',
                        rtol=1e-11, atol=1e-11, t_eval=tr.t)
        errors.append(np.abs(ref.y[:6].T - tr.q).max())
    # trapezoidal: O(dt²); measured 1.7e-4 rad at 1 ms, 4.2e-5 at 0.5 ms
    assert errors[0] < 5e-4
    assert 3.0 < errors[0] / errors[1] < 5.0


@pytest.mark.parametrize('robot,limit', [('double_pendulum', 1e-6), ('ur5', 1e-4)])
def test_passive_fall_conserves_energy(robot, limit):
    S = build_spatial_system(DATA / f'{robot}.urdf')
    q0 = np.asarray(S.q0) + 0.4
    tr = simulate_spatial(S, 2.0, 1e-3, q0=q0)
    E = np.array([S.energy(q, qd) for q, qd in zip(tr.q, tr.qd)])
    kinetic = max(0.5 * qd @ S.dyn.mass_matrix(q) @ qd for q, qd in zip(tr.q, tr.qd))
    assert kinetic > 0.1                                  # it really moved
    assert abs(E[-1] - E[0]) < limit * kinetic


def test_fourbar_loop_stays_closed_and_keeps_energy():
    S = build_spatial_system(DATA / 'fourbar.urdf', DATA / 'fourbar_loops.yaml')
    tr = simulate_spatial(S, 0.3, 1e-3)
    assert tr.phi_norm.max() < 1e-9
    E = np.array([S.energy(q, qd) for q, qd in zip(tr.q, tr.qd)])
    kinetic = max(0.5 * qd @ S.dyn.mass_matrix(q) @ qd for q, qd in zip(tr.q, tr.qd))
    assert kinetic > 1.0 and abs(E[-1] - E[0]) < 1e-3 * kinetic


def test_euler_loses_energy_and_bad_arguments_are_named():
    S = build_spatial_system(DATA / 'double_pendulum.urdf')
    tr = simulate_spatial(S, 1.0, 1e-3, 'euler', q0=np.asarray(S.q0) + 1.0)
    assert len(tr.t) == 1001
    with pytest.raises(MbfgError, match='integrator'):
        simulate_spatial(S, 1.0, 1e-3, 'rk4')
    with pytest.raises(MbfgError, match='expected 2 values'):
        simulate_spatial(S, 0.1, 1e-3, tau=np.zeros(3))
    with pytest.raises(MbfgError, match='longer than the duration'):
        simulate_spatial(S, 0.001, 0.01)


def test_whole_motion_inverse_dynamics_of_the_ur5_equals_pinocchio():
    S = build_spatial_system(DATA / 'ur5.urdf')
    t = np.linspace(0.0, 2.0, 401)
    amp = np.array([0.5, 0.3, -0.4, 0.6, 0.2, -0.3])
    w = np.array([1.0, 2.0, 1.5, 3.0, 2.5, 1.0])
    z = np.sin(np.outer(t, w)) * amp
    res = inverse_trajectory(S, t, z)
    pm = pin.buildModelFromUrdf(str(DATA / 'ur5.urdf'))
    pd = pm.createData()
    ref = np.array([pin.rnea(pm, pd, np.sin(w * s) * amp, np.cos(w * s) * amp * w,
                             -np.sin(w * s) * amp * w * w) for s in t])
    inner = slice(20, -20)               # away from the Savitzky-Golay edges
    assert np.abs(res.tau[inner] - ref[inner]).max() < 1e-4 * np.abs(ref).max()


def test_whole_motion_inverse_dynamics_of_the_five_bar_closes_the_loop():
    S = build_spatial_system(DATA / 'five_bar.urdf', DATA / 'five_bar_loops.yaml')
    act = np.flatnonzero(S.model.actuated)
    t = np.linspace(0.0, 2.0, 201)
    z = S.q0[act] + 0.2 * np.sin(np.outer(t, [1.0, 1.3]))
    res = inverse_trajectory(S, t, z)
    dg = DynamicsGraph(S.model)
    for k in range(0, len(t), 20):
        q, qd, qdd = res.q[k], res.qd[k], res.qdd[k]
        assert np.allclose(q[act], z[k], atol=1e-12)
        Jc, gamma = S.loops.jacobian(q, qd)
        assert np.abs(S.loops.phi(q)).max() < 1e-9
        assert np.abs(Jc @ qd).max() < 1e-9 and np.abs(Jc @ qdd + gamma).max() < 1e-8
        # the seed-002 graph (another formulation) needs the same torques
        assert dg.inverse(q, qd, qdd).tau[act] == pytest.approx(res.tau[k], abs=1e-8)
    with pytest.raises(MbfgError, match='expected 2'):
        inverse_trajectory(S, t, np.zeros((len(t), 3)))


@pytest.mark.parametrize('robot, overlay', [('ur5', None), ('fourbar', 'fourbar_loops.yaml')])
def test_a_spatial_system_has_every_member_the_integrators_and_the_sensors_name(robot, overlay):
    """``simulate.Simulable`` and ``sensor_sim.Sensed`` declare what those modules take of a
    robot (they name no class, so ``system.py`` can build on them): a real system, with
    loops or without, has every member they and the ``MultibodySystem`` they extend
    declare, and as the kind they declare it."""
    from support.protocols import missing_members

    from mbfg_ros.core.interface import MultibodySystem
    from mbfg_ros.spatial.sensor_sim import Sensed
    from mbfg_ros.spatial.simulate import Simulable

    S = build_spatial_system(DATA / f'{robot}.urdf', overlay and DATA / overlay)
    assert bool(S.loops.m) == (overlay is not None)               # with loops, and without
    assert Sensed.__mro__.index(Simulable) < Sensed.__mro__.index(MultibodySystem)
    for proto in (Simulable, Sensed):
        assert not missing_members(S, proto), (proto, missing_members(S, proto))
    assert S.integrator(1e-3).system is S                       # the door builds on them
    assert isinstance(S.simulate_measurements(np.zeros(2), np.tile(S.q0, (2, 1)),
                                              np.zeros((2, S.n)), np.zeros((2, S.n)), None,
                                              S.sensor_config(), np.random.default_rng(0)),
                      list)
