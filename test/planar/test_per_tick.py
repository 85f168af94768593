"""The planar formulation's per-tick forms (issue 24) equal the general ones they shortcut.

* ``System.state_terms`` (LeanKinematics, angle caches reused, rows as a slice) against
  :func:`forward_accel` on the tensor path of :class:`Constraints` (``terms=``);
* the float encoder and IMU models against the batch models at one state;
* the float angle wrap against :func:`wrap_angle`, bit for bit.
"""
from pathlib import Path

import numpy as np
import pytest

from mbfg_ros.core.angles import wrap_angle
from mbfg_ros.planar.dynamics import forward_accel, load_system
from mbfg_ros.planar.sensors import _wrap

CONFIG = Path(__file__).resolve().parents[2] / 'config'
NAMES = ['fourbar.yaml', 'five_bar.yaml', 'dfki_double_pendulum.yaml', 'slider_crank.yaml',
         'pick_and_place.yaml']


def _states(sys, count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield (sys.q0 + 0.05 * rng.normal(size=sys.n), rng.normal(size=sys.n),
               rng.normal(size=sys.n), rng.normal(size=len(sys.mech.actuators)))


@pytest.mark.parametrize('name', NAMES)
def test_state_terms_equal_forward_dynamics_on_the_tensor_constraints(name):
    sys = load_system(CONFIG / name)
    for q, qd, _, tau in _states(sys, 3, 4):
        got = sys.state_terms(q, qd, tau, True)
        ref_t = sys.constraints.terms(q, qd)
        ref = forward_accel(sys, q, qd, tau, jacobians=True, terms=ref_t)
        scale = 1.0 + np.abs(ref.qdd_q).max()
        np.testing.assert_allclose(got.phi, ref_t.phi, atol=1e-12)
        np.testing.assert_allclose(got.phi_q, ref_t.phi_q, atol=1e-12)
        np.testing.assert_allclose(got.phi_q_dot, ref_t.phi_q_dot, atol=1e-12)
        np.testing.assert_allclose(got.qdd, ref.qdd, atol=1e-10 * scale)
        np.testing.assert_allclose(got.qdd_q, ref.qdd_q, atol=1e-10 * scale)
        np.testing.assert_allclose(got.qdd_qd, ref.qdd_qd, atol=1e-10 * scale)


@pytest.mark.parametrize('name', ['fourbar.yaml', 'five_bar.yaml', 'slider_crank.yaml'])
def test_one_state_encoder_and_imu_models_equal_the_batch_models(name):
    sys = load_system(CONFIG / name)
    sm = sys.sensor_model()
    for q, qd, qdd, _ in _states(sys, 3, 5):
        X = np.stack((np.stack((q, qd, qdd)),) * 2)       # two states: the batch form
        for j in range(len(sm.joint_names)):
            batch = sm.joint_batch(j, X)
            if batch is None:                              # prismatic: scalar only
                continue
            (pos, vel), (Hp, Hv) = batch
            p, v = sm.joint(j, q, qd, want=True)
            pv, vv = sm.joint(j, q, qd)
            np.testing.assert_allclose([p.h[0], pv.h[0]], pos[0], atol=1e-14)
            np.testing.assert_allclose([v.h[0], vv.h[0]], vel[0], atol=1e-12)
            np.testing.assert_allclose(np.stack((p.Hq[0], p.Hqd[0], p.Hqdd[0])), Hp[0],
                                       atol=1e-12)
            np.testing.assert_allclose(np.stack((v.Hq[0], v.Hqd[0], v.Hqdd[0])), Hv[0],
                                       atol=1e-12)
            (pos1, vel1), (Hp1, Hv1) = sm.joint_batch(j, X[:1])
            np.testing.assert_array_equal(pos1, [p.h[0]])
            np.testing.assert_array_equal(Hp1[0], np.stack((p.Hq[0], p.Hqd[0], p.Hqdd[0])))
            np.testing.assert_array_equal(Hv1[0], np.stack((v.Hq[0], v.Hqd[0], v.Hqdd[0])))
        for k in range(len(sm.imu_names)):
            (gyro, f, ori), (Hg, Hf, Ho) = sm.imu_batch(k, X)
            gm, fm, om = sm.imu(k, q, qd, qdd, want=True)
            np.testing.assert_allclose(gm.h[0], gyro[0], atol=1e-12)
            np.testing.assert_allclose(fm.h, f[0], atol=1e-12)
            np.testing.assert_allclose(om.h[0], ori[0], atol=1e-14)
            for m, H in ((gm, Hg[0]), (fm, Hf[0]), (om, Ho[0])):
                np.testing.assert_allclose(np.stack((m.Hq, m.Hqd, m.Hqdd), axis=1), H,
                                           atol=1e-12)


def test_float_wrap_is_wrap_angle_bit_for_bit():
    pi = np.pi
    values = [0.0, -0.0, pi, -pi, 3 * pi, -3 * pi, 2 * pi, -2 * pi, 1e-300, -1e-300,
              np.nextafter(pi, 4.0), np.nextafter(-pi, -4.0), 1e6 + 0.1, -1e6 - 0.1]
    values += list(np.random.default_rng(0).uniform(-20.0, 20.0, 200))
    for a in values:
        got, want = _wrap(float(a)), float(wrap_angle(a))
        assert got == want and np.signbit(got) == np.signbit(want), a
