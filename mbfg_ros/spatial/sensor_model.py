"""The estimator's measurement models on a spatial (URDF) mechanism.

The :class:`~mbfg_ros.core.interface.SensorModel` protocol, as the planar
:class:`~mbfg_ros.planar.sensors.SensorModel` implements it, so the observation factors
(:mod:`mbfg_ros.estimation.observations`), the innovation gate and the start-up of
:class:`~mbfg_ros.estimation.estimator.Estimator` serve both formulations:

* encoders read a tree joint coordinate directly: ``h = q_j`` (rad or m), rate ``q̇_j``
  (joint coordinates are the state, seed 004 §5);
* a 3-axis IMU on any link (:class:`~mbfg_ros.spatial.sensors.ImuModel`): gyroscope
  ``R_sᵀ ω`` (3 rows), accelerometer, the specific force ``R_sᵀ (p̈ − g)`` (3 rows), and
  orientation when the message carries it, with the residual on SO(3)
  ``e = Log(R_zᵀ R_s(q))`` (3 rows, sensor frame) and Jacobian ``J_r⁻¹(e) ∂δθ/∂q``.

Readings of one IMU taken at the same state (one factor on one key) share one evaluation.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..core.angles import skew
from ..core.observation import Model, Observation
from .sensors import ImuModel

__all__ = ['SpatialSensorModel', 'quaternion_matrix', 'so3_log']


def quaternion_matrix(quat: np.ndarray) -> np.ndarray:
    """Rotation matrix of a quaternion ``(x, y, z, w)`` (normalised here)."""
    x, y, z, w = np.asarray(quat, float) / np.linalg.norm(quat)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def so3_log(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ω = Log(R), J_r⁻¹(ω)): the rotation vector and the inverse right Jacobian of SO(3),
    so that ``Log(R Exp(δ)) ≈ ω + J_r⁻¹(ω) δ``."""
    c = min(1.0, max(-1.0, 0.5 * (np.trace(R) - 1.0)))
    th = math.acos(c)
    v = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if th < 1e-6:
        w = 0.5 * v
    elif th > math.pi - 1e-6:
        # near π: the axis from the symmetric part
        k = int(np.argmax(np.diag(R)))
        a = R[:, k] + np.eye(3)[k]
        w = th * a / np.linalg.norm(a)
    else:
        w = th / (2.0 * math.sin(th)) * v
    W = skew(w)
    if th < 1e-6:
        Jinv = np.eye(3) + 0.5 * W + W @ W / 12.0
    else:
        Jinv = np.eye(3) + 0.5 * W + (1.0 / th ** 2 - (1.0 + math.cos(th))
                                      / (2.0 * th * math.sin(th))) * W @ W
    return w, Jinv


class SpatialSensorModel:
    """Encoders on every tree joint and the overlay's IMUs of a ``SpatialSystem``.

    The IMU kinematics follow the system's backend: :class:`~.sensors.ImuModel` (numpy)
    or :class:`~.pin_backend.PinocchioImu` (same readings and Jacobians).
    """

    def __init__(self, sys: Any) -> None:
        model = sys.model
        self.n = n = model.n
        numpy_dyn = hasattr(sys.dyn, 'motion_derivatives')
        dyn = sys.dyn if numpy_dyn else sys.loops.dyn
        self.joint_names = tuple(model.joint_names)
        self._angular = tuple(t == 'revolute' for t in model.joint_type)
        # encoders read joint coordinates: observations.residuals takes them all at once
        self.direct_encoders = np.array(self._angular, dtype=bool)
        self.imu_names = tuple(s.name for s in model.imus)
        if numpy_dyn:
            self._imus = tuple(ImuModel(dyn, s.link, s.T_mount) for s in model.imus)
        else:      # the Pinocchio backend: its frame kinematics derivatives (~10x cheaper)
            from .pin_backend import PinocchioImu
            self._imus = tuple(PinocchioImu(model, s.link, s.T_mount) for s in model.imus)
        # each IMU's residuals of a (gyro, accel) pair at one state (gyro_accel_errors, the
        # Pinocchio backend's; None: numpy's ImuModel has none), looked up once rather than
        # per call of imu_errors
        self._imu_pair_of = tuple(getattr(m, 'gyro_accel_errors', None) for m in self._imus)
        eye = np.eye(n)
        zero = np.zeros((1, n))
        self._pos_H = [(eye[j:j + 1], zero, zero) for j in range(n)]
        self._vel_H = [(zero, eye[j:j + 1], zero) for j in range(n)]
        rows = np.zeros((n, 2, n))
        rows[:, 0] = eye
        rows.flags.writeable = False
        self._rows = rows

    # -- encoders ---------------------------------------------------------------------
    def angle_residual(self, kind: str, index: int) -> bool:
        """A revolute encoder's angle is wrapped; the orientation's residual is on SO(3)."""
        return kind == 'joint_pos' and self._angular[index]

    @staticmethod
    def position_target(kind: str) -> bool:
        """Encoders only: a 3-D orientation is no scalar target (the encoders and q0 seed a
        spatial start)."""
        return kind == 'joint_pos'

    def joint_is_angular(self, j: int) -> bool:
        return self._angular[j]

    def joint_values(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The angles and rates of every encoder at (q, q̇): encoder j reads q_j, q̇_j
        (seed 004 §5), copies."""
        nj = len(self.joint_names)
        return q[:nj].copy(), qd[:nj].copy()

    def joint(self, j: int, q: np.ndarray, qd: np.ndarray, want: bool = False
              ) -> tuple[Model, Model]:
        """(position, rate) of joint ``j``: ``q_j``, ``q̇_j`` with unit-row Jacobians."""
        if not want:
            return Model(np.array([q[j]])), Model(np.array([qd[j]]))
        return Model(np.array([q[j]]), *self._pos_H[j]), Model(np.array([qd[j]]),
                                                                *self._vel_H[j])

    def joint_rows(self, j: int, q: np.ndarray, qd: np.ndarray
                   ) -> tuple[float, float, np.ndarray]:
        """(q_j, q̇_j, [e_j; 0]): :meth:`joint`'s numbers without the records (the rows
        shared, read only)."""
        return float(q[j]), float(qd[j]), self._rows[j]

    def joint_batch(self, j: int, X: np.ndarray) -> tuple[tuple, tuple] | None:
        """Vectorised over states X (N, 3, n); None for a prismatic joint (its position
        residual is not wrapped: the observation code then takes the scalar path)."""
        if not self._angular[j]:
            return None
        N = X.shape[0]
        Hp = np.zeros((N, 3, self.n))
        Hv = np.zeros((N, 3, self.n))
        Hp[:, 0, j] = 1.0
        Hv[:, 1, j] = 1.0
        return (X[:, 0, j], X[:, 1, j]), (Hp, Hv)

    def joint_positions(self, q: np.ndarray) -> np.ndarray:
        return np.asarray(q, float).copy()

    def joint_velocities(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        return np.asarray(qd, float).copy()

    # -- IMUs -----------------------------------------------------------------------------
    def imu(self, k: int, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, want: bool = False
            ) -> tuple[Model, Model, Model]:
        """(gyro, specific force, orientation) models of IMU ``k``; the orientation's ``h``
        is the sensor rotation matrix (3, 3) and its Jacobian the right perturbation."""
        r = self._imus[k].measure(q, qd, qdd, jacobians=want)
        if not want:
            return Model(r.gyro), Model(r.accel), Model(r.R)
        n = self.n

        def split(H: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            return H[:, :n], H[:, n:2 * n], H[:, 2 * n:]
        return (Model(r.gyro, *split(r.H_gyro)), Model(r.accel, *split(r.H_accel)),
                Model(r.R, *split(r.H_rot)))

    def imu_observations(self, k: int, gyro: np.ndarray | None, accel: np.ndarray | None,
                         quat: np.ndarray | None, s_gyro: np.ndarray, s_accel: np.ndarray,
                         s_orient: np.ndarray) -> list:
        """Observations of one 3-axis IMU record (each part when finite)."""
        out = []
        if gyro is not None and np.all(np.isfinite(gyro)):
            out.append(Observation('gyro', k, np.asarray(gyro, float), s_gyro))
        if accel is not None and np.all(np.isfinite(accel)):
            out.append(Observation('accel', k, np.asarray(accel, float), s_accel))
        if quat is not None and np.all(np.isfinite(quat)) and np.linalg.norm(quat) > 0.5:
            out.append(Observation('orient', k, quaternion_matrix(quat), s_orient))
        return out

    def imu_errors(self, k: int, obs: Sequence, X: np.ndarray, want: bool
                   ) -> tuple[np.ndarray, np.ndarray | None]:
        """Stacked residuals of IMU ``k``'s readings ``obs`` at states X (N, 3, n) and
        their Jacobians (rows, 3, n): 3 rows per reading (module docstring)."""
        n = self.n
        one = X.shape[0] == 1 or X.strides[0] == 0          # every reading at one state
        pair_of = self._imu_pair_of[k]
        if one and pair_of is not None and len(obs) == 2 and obs[0].kind == 'gyro' \
                and obs[1].kind == 'accel':
            # a gyroscope and an accelerometer reading at one state (the common record):
            # the model's first six rows, in order, minus the readings
            x = X[0]
            e, Hm = pair_of(x[0], x[1], x[2], obs[0].z.tolist() + obs[1].z.tolist(), want)
            return e, (Hm.reshape(6, 3, n) if want else None)
        e = np.empty(3 * len(obs))
        H = np.empty((e.size, 3, n)) if want else None
        last, r = None, None
        for i, ob in enumerate(obs):
            x = X[i]
            if r is None or (not one and not np.array_equal(x, last)):
                r = self._imus[k].measure(x[0], x[1], x[2], jacobians=want)
                last = x
            rows = slice(3 * i, 3 * i + 3)
            if ob.kind == 'gyro':
                e[rows] = r.gyro - ob.z
                if want:
                    H[rows] = r.H_gyro.reshape(3, 3, n)
            elif ob.kind == 'accel':
                e[rows] = r.accel - ob.z
                if want:
                    H[rows] = r.H_accel.reshape(3, 3, n)
            else:
                w, Jinv = so3_log(ob.z.T @ r.R)
                e[rows] = w
                if want:
                    H[rows] = (Jinv @ r.H_rot).reshape(3, 3, n)
        return e, H
