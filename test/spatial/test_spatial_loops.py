"""Loop-closure constraints of spatial trees: φ_q and γ against finite differences, and the
constrained inverse/forward dynamics (null-space) on loops of every joint type."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support.spatial_random import random_urdf

from mbfg_ros.spatial.dynamics import SpatialDynamics
from mbfg_ros.spatial.loops import ROWS, LoopConstraints
from mbfg_ros.spatial.model import LoopJoint
from mbfg_ros.spatial.system import build_spatial_system
from mbfg_ros.spatial.urdf import load_spatial


def _closed_model(kind: str, seed: int):
    """A random 8-joint chain closed back to its base by a loop joint of ``kind`` at q*."""
    rng = np.random.default_rng(seed)
    model = load_spatial(random_urdf(rng, 8, branch=False, fixed=False))
    q_star = rng.normal(size=model.n)
    T = SpatialDynamics(model).poses(q_star)
    parent, child = 0, 8
    T_parent = np.eye(4)
    T_parent[:3, 3] = rng.normal(size=3) * 0.2
    T_child = np.linalg.inv(T[child]) @ T[parent] @ T_parent     # frames coincide at q*
    loop = LoopJoint(name=f'{kind}_loop', type=kind, parent=parent, T_parent=T_parent,
                     child=child, T_child=T_child, axis=np.array([0.0, 0.6, 0.8]))
    return dataclasses.replace(model, loops=(loop,), q0=q_star), q_star


@pytest.mark.parametrize('kind', sorted(ROWS))
def test_phi_q_and_gamma_match_finite_differences(kind):
    model, q = _closed_model(kind, 3)
    lc = LoopConstraints(model)
    assert lc.m == ROWS[kind]
    assert np.abs(lc.phi(q)).max() < 1e-12
    Jc, _ = lc.jacobian(q)
    h = 1e-6
    num = np.array([(lc.phi(q + e) - lc.phi(q - e)) / (2 * h) for e in np.eye(model.n) * h]).T
    assert np.abs(num - Jc).max() < 1e-7
    # γ = q̇ᵀ φ_qq q̇ along a constraint-consistent velocity
    _, sv, Vt = np.linalg.svd(Jc)
    N = Vt[int(np.sum(sv > 1e-9)):].T
    qd = N @ np.random.default_rng(1).normal(size=N.shape[1])
    _, gamma = lc.jacobian(q, qd)
    h = 1e-4
    num_g = (lc.phi(q + h * qd) - 2 * lc.phi(q) + lc.phi(q - h * qd)) / h**2
    assert np.abs(gamma - num_g).max() < 1e-5 * max(1.0, np.abs(gamma).max())
    assert np.abs(gamma).max() > 1e-3            # not trivially zero


@pytest.mark.parametrize('kind', sorted(ROWS))
def test_constrained_forward_and_inverse_dynamics_agree(kind):
    model, q = _closed_model(kind, 4)
    S = build_spatial_system(model, backend='numpy')
    N, _, Jc = S.null_space(q)
    assert N.shape[1] == model.n - ROWS[kind]             # these loops have independent rows
    rng = np.random.default_rng(2)
    qd = N @ rng.normal(size=N.shape[1])
    tau = rng.normal(size=model.n)
    qdd = S.forward(q, qd, tau)
    _, gamma = S.loops.jacobian(q, qd)
    assert np.abs(Jc @ qdd + gamma).max() < 1e-9         # the loop stays closed
    # redundant actuation (every joint driven): the inverse returns the minimum-norm τ
    # that produces the same motion; it differs from tau only by a constraint force.
    tau_min = S.inverse(q, qd, qdd)
    assert np.abs(S.forward(q, qd, tau_min) - qdd).max() < 1e-8
    assert np.linalg.norm(tau_min) <= np.linalg.norm(tau) + 1e-12
    # Pinocchio backend, same answers
    P = build_spatial_system(model, backend='pinocchio')
    assert P.forward(q, qd, tau) == pytest.approx(qdd, abs=1e-9)
