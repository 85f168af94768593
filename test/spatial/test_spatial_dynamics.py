"""The per-tick spatial dynamics (τ, M, q̈ and their Jacobians) against Pinocchio.

Pinocchio reads the same URDF text with its own parser and computes with its own
algorithms (``rnea``, ``crba``, ``aba`` and their analytic derivatives), so agreement to
1e-9 at random states checks our URDF loading (fixed-joint merging, rpy, inertial
frames, axes) and both our backends. The numpy Jacobians are also checked by finite
differences, which needs no Pinocchio at all.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.spatial_random import PinReference, random_urdf

from mbfg_ros.spatial.backend import spatial_dynamics
from mbfg_ros.spatial.dynamics import SpatialDynamics
from mbfg_ros.spatial.pin_backend import PinocchioDynamics
from mbfg_ros.spatial.urdf import load_spatial

TOL = 1e-9
STATES = 100


DATA = Path(__file__).resolve().parents[2] / 'config' / 'urdf'


def _cases():
    rng = np.random.default_rng(20261124)
    bundled = [(name, (DATA / f'{name}.urdf').read_text())
               for name in ('ur5', 'puma560', 'panda_like', 'double_pendulum')]
    return bundled + [('chain6', random_urdf(rng, 6, branch=False)),
                      ('tree7', random_urdf(rng, 7, branch=True)),
                      ('tree9', random_urdf(rng, 9, branch=True))]


CASES = _cases()


def _scale(A: np.ndarray) -> float:
    return max(1.0, float(np.abs(A).max()))


@pytest.mark.parametrize('backend', ['numpy', 'pinocchio'])
@pytest.mark.parametrize('name,urdf', CASES, ids=[c[0] for c in CASES])
def test_inverse_forward_and_jacobians_equal_pinocchio(name, urdf, backend):
    model = load_spatial(urdf)
    dyn = spatial_dynamics(model, backend)
    ref = PinReference(urdf, model.joint_names)
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(STATES):
        q, qd, qdd, tau = rng.normal(size=(4, model.n)) * [[1.5], [2.0], [3.0], [5.0]]
        r = dyn.inverse(q, qd, qdd, derivatives=True)
        dq, dv, M = ref.rnea_derivatives(q, qd, qdd)
        f = dyn.forward(q, qd, tau, derivatives=True)
        fq, fv, Minv = ref.aba_derivatives(q, qd, tau)
        pairs = [(r.tau, ref.rnea(q, qd, qdd)), (r.dtau_dq, dq), (r.dtau_dqd, dv), (r.M, M),
                 (dyn.mass_matrix(q), ref.crba(q)), (f.qdd, ref.aba(q, qd, tau)),
                 (f.dqdd_dq, fq), (f.dqdd_dqd, fv), (f.dqdd_dtau, Minv),
                 (dyn.bias(q, qd), ref.rnea(q, qd, np.zeros(model.n)))]
        for ours, theirs in pairs:
            worst = max(worst, float(np.abs(ours - theirs).max()) / _scale(theirs))
        assert dyn.inverse(q, qd, qdd).tau == pytest.approx(r.tau, rel=1e-9, abs=1e-11)
        assert dyn.forward(q, qd, tau).qdd == pytest.approx(f.qdd, rel=1e-9, abs=1e-11)
    assert worst < TOL, f'{name}/{backend}: worst relative difference {worst:.2e}'


@pytest.mark.parametrize('name,urdf', CASES, ids=[c[0] for c in CASES])
def test_numpy_jacobians_match_finite_differences(name, urdf):
    model = load_spatial(urdf)
    dyn = SpatialDynamics(model)
    rng = np.random.default_rng(11)
    h = 1e-4      # M of a real arm has cond ~3e4: rounding, not truncation, limits h
    for _ in range(5):
        q, qd, qdd, tau = rng.normal(size=(4, model.n))
        r = dyn.inverse(q, qd, qdd, derivatives=True)
        f = dyn.forward(q, qd, tau, derivatives=True)
        num = np.zeros((6, model.n, model.n))
        for k in range(model.n):
            e = np.zeros(model.n)
            e[k] = h
            num[:, :, k] = [
                (dyn.inverse(q + e, qd, qdd).tau - dyn.inverse(q - e, qd, qdd).tau) / (2 * h),
                (dyn.inverse(q, qd + e, qdd).tau - dyn.inverse(q, qd - e, qdd).tau) / (2 * h),
                (dyn.inverse(q, qd, qdd + e).tau - dyn.inverse(q, qd, qdd - e).tau) / (2 * h),
                (dyn.forward(q + e, qd, tau).qdd - dyn.forward(q - e, qd, tau).qdd) / (2 * h),
                (dyn.forward(q, qd + e, tau).qdd - dyn.forward(q, qd - e, tau).qdd) / (2 * h),
                (dyn.forward(q, qd, tau + e).qdd - dyn.forward(q, qd, tau - e).qdd) / (2 * h)]
        ana = [r.dtau_dq, r.dtau_dqd, r.M, f.dqdd_dq, f.dqdd_dqd, f.dqdd_dtau]
        for what, a, b in zip(('dtau_dq', 'dtau_dqd', 'M', 'dqdd_dq', 'dqdd_dqd', 'Minv'),
                              ana, num):
            # central differences: error ~ h² and ~ eps·|x|/h, so relative to the matrix
            assert np.abs(a - b).max() < 1e-6 * _scale(b), f'{name}: {what}'


@pytest.mark.parametrize('backend', ['numpy', 'pinocchio'])
def test_forward_undoes_inverse(backend):
    model = load_spatial(CASES[5][1])
    dyn = spatial_dynamics(model, backend)
    rng = np.random.default_rng(3)
    for _ in range(20):
        q, qd, qdd = rng.normal(size=(3, model.n))
        tau = dyn.inverse(q, qd, qdd).tau
        assert dyn.forward(q, qd, tau).qdd == pytest.approx(qdd, abs=1e-10)
        M = dyn.mass_matrix(q)
        assert np.allclose(M, M.T, atol=1e-13) and np.linalg.eigvalsh(M).min() > 0


def test_gravity_from_the_overlay_is_used(tmp_path):
    urdf = CASES[4][1]
    g = np.array([0.3, -9.0, 1.2])
    model = load_spatial(urdf, {'gravity': g.tolist()})
    ref = PinReference(urdf, model.joint_names, gravity=g)
    q = np.random.default_rng(0).normal(size=model.n)
    z = np.zeros(model.n)
    for backend in ('numpy', 'pinocchio'):
        tau = spatial_dynamics(model, backend).inverse(q, z, z).tau
        assert tau == pytest.approx(ref.rnea(q, z, z), abs=1e-10)
    assert np.abs(ref.rnea(q, z, z) - PinReference(urdf, model.joint_names).rnea(q, z, z)).max() \
        > 1e-3, 'the test gravity must differ from the default'


def test_backends_are_interchangeable():
    model = load_spatial(CASES[6][1])
    assert isinstance(spatial_dynamics(model, 'numpy'), SpatialDynamics)
    assert isinstance(spatial_dynamics(model, 'pinocchio'), PinocchioDynamics)
    assert isinstance(spatial_dynamics(model), PinocchioDynamics)    # pin is installed here
    with pytest.raises(ValueError, match='backend'):
        spatial_dynamics(model, 'rbdl')
