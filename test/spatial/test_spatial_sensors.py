"""3-axis IMU on any link of a spatial tree: readings against Pinocchio's frame kinematics,
Jacobians against finite differences."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.spatial_random import PinReference, random_urdf

from mbfg_ros.spatial.dynamics import SpatialDynamics
from mbfg_ros.spatial.sensors import ImuModel, quaternion_from_matrix
from mbfg_ros.spatial.urdf import load_spatial, origin_matrix

DATA = Path(__file__).resolve().parents[2] / 'config' / 'urdf'


def _cases():
    rng = np.random.default_rng(8)
    return [('ur5', (DATA / 'ur5.urdf').read_text()), ('tree7', random_urdf(rng, 7))]


@pytest.mark.parametrize('name,urdf', _cases(), ids=['ur5', 'tree7'])
def test_imu_readings_equal_pinocchio_frame_kinematics(name, urdf):
    import pinocchio as pin
    model = load_spatial(urdf)
    dyn = SpatialDynamics(model)
    ref = PinReference(urdf, model.joint_names)
    pm, pd = ref.model, ref.data
    rng = np.random.default_rng(1)
    for link in range(1, model.nb):
        T_mount = origin_matrix(rng.normal(size=3) * 0.1, rng.uniform(-1, 1, 3))
        imu = ImuModel(dyn, link, T_mount)
        # the same frame in Pinocchio: on the joint that moves this link
        jid = pm.getJointId(model.joint_names[link - 1])
        fid = pm.addFrame(pin.Frame(f'imu{link}', jid, 0, pin.SE3(T_mount[:3, :3], T_mount[:3, 3]),
                                    pin.FrameType.OP_FRAME))
        pd = pm.createData()
        for _ in range(10):
            q, qd, qdd = rng.normal(size=(3, model.n))
            r = imu.measure(q, qd, qdd)
            pin.forwardKinematics(pm, pd, ref.q(q), ref.P.T @ qd, ref.P.T @ qdd)
            pin.updateFramePlacements(pm, pd)
            R = pd.oMf[fid].rotation
            w = pin.getFrameVelocity(pm, pd, fid, pin.LOCAL).angular
            acc = pin.getFrameClassicalAcceleration(pm, pd, fid, pin.LOCAL).linear
            f = acc - R.T @ model.gravity                       # specific force
            assert np.abs(r.R - R).max() < 1e-12
            assert np.abs(r.gyro - w).max() < 1e-10
            assert np.abs(r.accel - f).max() < 1e-9 * max(1.0, np.abs(f).max())


@pytest.mark.parametrize('name,urdf', _cases(), ids=['ur5', 'tree7'])
def test_imu_jacobians_match_finite_differences(name, urdf):
    model = load_spatial(urdf)
    dyn = SpatialDynamics(model)
    rng = np.random.default_rng(2)
    n = model.n
    h = 1e-6
    for link in (1, model.nb - 1, model.nb // 2):
        imu = ImuModel(dyn, link, origin_matrix(rng.normal(size=3) * 0.1,
                                                rng.uniform(-1, 1, 3)))
        x = rng.normal(size=3 * n)
        r = imu.measure(x[:n], x[n:2 * n], x[2 * n:], jacobians=True)
        num_g, num_a, num_r = (np.zeros((3, 3 * n)) for _ in range(3))
        for c in range(3 * n):
            e = np.zeros(3 * n)
            e[c] = h
            hi = imu.measure(*np.split(x + e, 3))
            lo = imu.measure(*np.split(x - e, 3))
            num_g[:, c] = (hi.gyro - lo.gyro) / (2 * h)
            num_a[:, c] = (hi.accel - lo.accel) / (2 * h)
            D = r.R.T @ (hi.R - lo.R) / (2 * h)                 # ≈ [δθ]×
            num_r[:, c] = [D[2, 1], D[0, 2], D[1, 0]]
        for ana, num in ((r.H_gyro, num_g), (r.H_accel, num_a), (r.H_rot, num_r)):
            assert np.abs(ana - num).max() < 1e-6 * max(1.0, np.abs(num).max())


def test_at_rest_the_accelerometer_reads_gravity_upward_and_quaternions_are_unit():
    model = load_spatial(DATA / 'ur5.urdf')
    dyn = SpatialDynamics(model)
    imu = ImuModel(dyn, model.nb - 1)
    q = np.random.default_rng(0).normal(size=model.n)
    z = np.zeros(model.n)
    r = imu.measure(q, z, z)
    assert r.R @ r.accel == pytest.approx([0.0, 0.0, 9.81], abs=1e-12)
    assert np.allclose(r.gyro, 0.0)
    quat = quaternion_from_matrix(r.R)
    assert np.linalg.norm(quat) == pytest.approx(1.0) and quat[3] >= 0
    x, y, zq, w = quat
    R = np.array([[1 - 2 * (y * y + zq * zq), 2 * (x * y - zq * w), 2 * (x * zq + y * w)],
                  [2 * (x * y + zq * w), 1 - 2 * (x * x + zq * zq), 2 * (y * zq - x * w)],
                  [2 * (x * zq - y * w), 2 * (y * zq + x * w), 1 - 2 * (x * x + y * y)]])
    assert np.abs(R - r.R).max() < 1e-12
    with pytest.raises(ValueError, match='link index'):
        ImuModel(dyn, model.nb)


def test_quaternion_from_matrix_covers_every_branch():
    rng = np.random.default_rng(4)
    for rpy in list(rng.uniform(-np.pi, np.pi, (300, 3))) + [(np.pi, 0, 0), (0, np.pi, 0),
                                                            (0, 0, np.pi)]:
        R = origin_matrix(None, rpy)[:3, :3]
        x, y, z, w = quaternion_from_matrix(R)
        back = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        assert np.abs(back - R).max() < 1e-12


@pytest.mark.parametrize('name,urdf', _cases(), ids=['ur5', 'tree7'])
def test_pinocchio_imu_equals_the_numpy_model(name, urdf):
    """The estimator's fast IMU (Pinocchio frame-kinematics derivatives) gives the numpy
    model's readings and Jacobians (which are checked by finite differences above)."""
    from mbfg_ros.spatial.pin_backend import PinocchioImu
    model = load_spatial(urdf)
    dyn = SpatialDynamics(model)
    rng = np.random.default_rng(2)
    for link in range(1, model.nb):
        T_mount = origin_matrix(rng.normal(size=3) * 0.1, rng.uniform(-1, 1, 3))
        ref, fast = ImuModel(dyn, link, T_mount), PinocchioImu(model, link, T_mount)
        for _ in range(5):
            q, qd, qdd = rng.normal(size=(3, model.n))
            a, b = ref.measure(q, qd, qdd, True), fast.measure(q, qd, qdd, True)
            for k in ('gyro', 'accel', 'R', 'H_gyro', 'H_accel', 'H_rot'):
                np.testing.assert_allclose(getattr(b, k), getattr(a, k), atol=1e-10, err_msg=k)
            np.testing.assert_allclose(fast.measure(q, qd, qdd).accel, a.accel, atol=1e-12)


def test_a_gyroscope_and_accelerometer_pair_at_one_state_equals_the_reading_by_reading_path():
    """Issue 24: SpatialSensorModel.imu_errors takes a (gyro, accel) record at one state
    from the model's stacked rows (PinocchioImu.measure_rows); its residuals and Jacobians
    equal the general path's (the pair in the other order, evaluated reading by reading)."""
    from mbfg_ros.core.observation import Observation
    from mbfg_ros.spatial.system import build_spatial_system
    urdf = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
    sm = build_spatial_system(urdf / 'ur5.urdf', urdf / 'ur5_sensors.yaml').sensor_model()
    rng = np.random.default_rng(4)
    n = sm.n
    for _ in range(5):
        X = rng.normal(size=(1, 3, n))
        gyro = Observation('gyro', 0, rng.normal(size=3), np.ones(3))
        accel = Observation('accel', 0, rng.normal(size=3), np.ones(3))
        e, H = sm.imu_errors(0, [gyro, accel], np.broadcast_to(X, (2, 3, n)), True)
        e0, H0 = sm.imu_errors(0, [accel, gyro], np.broadcast_to(X, (2, 3, n)), True)
        np.testing.assert_array_equal(e, np.concatenate((e0[3:], e0[:3])))
        np.testing.assert_array_equal(H, np.concatenate((H0[3:], H0[:3])))
        r = sm.imu(0, *X[0], want=True)
        np.testing.assert_allclose(e[:3], r[0].h - gyro.z, rtol=0, atol=1e-15)
        np.testing.assert_allclose(e[3:], r[1].h - accel.z, rtol=0, atol=1e-15)


def test_joint_values_are_each_joints_model():
    """SpatialSensorModel.joint_values: every encoder's q_j, q̇_j in one call, as its model;
    copies (the Estimate's own arrays)."""
    from mbfg_ros.spatial.system import build_spatial_system
    urdf = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
    sm = build_spatial_system(urdf / 'ur5.urdf', urdf / 'ur5_sensors.yaml').sensor_model()
    rng = np.random.default_rng(6)
    q, qd = rng.normal(size=sm.n), rng.normal(size=sm.n)
    pos, vel = sm.joint_values(q, qd)
    models = [sm.joint(j, q, qd) for j in range(len(sm.joint_names))]
    np.testing.assert_array_equal(pos, [p.h[0] for p, _ in models])
    np.testing.assert_array_equal(vel, [v.h[0] for _, v in models])
    pos[0] += 1.0
    assert q[0] != pos[0]
