"""The command law's computed torque on a fully actuated tree (issue 24: the torque command
at the estimate rate): q̈[idx] = s̈* directly, without the least-squares acceleration problem
of the general case (closed loops, coordinates, under-actuation), must give the same torques
as that general problem, and those torques must reproduce s̈* through the forward dynamics."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import CONFIG

from mbfg_ros.estimation.control import CommandLaw
from mbfg_ros.spatial.system import build_spatial_system

URDF = CONFIG / 'urdf'
ROBOTS = {'ur5': (URDF / 'ur5.urdf', URDF / 'ur5_sensors.yaml'),
          'panda_like': (URDF / 'panda_like.urdf', None)}


@pytest.mark.parametrize('robot', list(ROBOTS))
def test_the_direct_computed_torque_equals_the_general_acceleration_problem(robot):
    urdf, overlay = ROBOTS[robot]
    sys_ = build_spatial_system(urdf, overlay) if overlay else build_spatial_system(urdf)
    names = [a.name for a in sys_.description.actuators][::-1]      # a permuted order
    law = CommandLaw(sys_, names, kp=400.0, kd=40.0)
    general = CommandLaw(sys_, names, kp=400.0, kd=40.0)
    general._direct = None                      # the least-squares path of every system
    assert law._direct is not None              # a fully actuated tree takes the direct path
    rng = np.random.default_rng(3)
    n, k = sys_.n, law.n_act
    for _ in range(5):
        q, qd = rng.uniform(-2, 2, n), rng.uniform(-1, 1, n)
        s_ref, sd_ref, sdd_ref = rng.uniform(-2, 2, k), rng.uniform(-1, 1, k), \
            rng.uniform(-3, 3, k)
        tau = law.track(q, qd, s_ref, sd_ref, sdd_ref)
        np.testing.assert_allclose(tau, general.track(q, qd, s_ref, sd_ref, sdd_ref),
                                   rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(law.hold_at(q, qd, s_ref), general.hold_at(q, qd, s_ref),
                                   rtol=1e-9, atol=1e-9)
        # the torques drive the reference's acceleration: forward dynamics of τ gives s̈*
        full = np.empty(k)
        full[law.order] = tau
        err = np.angle(np.exp(1j * (s_ref - q[law._direct])))
        want = sdd_ref + 400.0 * err + 40.0 * (sd_ref - qd[law._direct])
        np.testing.assert_allclose(sys_.accelerations(q, qd, full)[law._direct], want,
                                   rtol=1e-7, atol=1e-7)
