"""Sensor models on a spatial tree, with exact Jacobians for observation factors.

An IMU mounted on link ``b`` at pose ``T_bs`` (sensor frame in the link frame) reads
(seed 000 §6.3's IMU written for 3-D; ``R_s`` the sensor orientation in the root frame,
``p`` the mounting point):

* gyroscope ``ω_s = R_sᵀ ω_b`` (rad/s, sensor frame);
* accelerometer, the specific force ``f_s = R_sᵀ (p̈ − g)`` (m/s², sensor frame; at rest it
  reads +9.81 upward, as a real IMU and ``sensor_msgs/Imu`` do);
* orientation ``R_s`` (the ``Imu`` message's quaternion, root frame).

Jacobians are with respect to the stacked state ``x = [q, q̇, q̈]`` (3n columns), from the
link motion derivatives of ``SpatialDynamics.motion_derivatives`` (forward mode, exact).
The gravity enters as the base acceleration ``a_0 = −g`` of the recursions, so the link
accelerations already hold ``p̈ − g``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.angles import skew
from .dynamics import SpatialDynamics, cross3

__all__ = ['ImuReading', 'ImuModel', 'quaternion_from_matrix']


def _cross_cols(w: np.ndarray, A: np.ndarray) -> np.ndarray:
    """w × A[:, c] for every column c of the (3, m) array A."""
    return skew(w) @ A


def quaternion_from_matrix(R: np.ndarray) -> np.ndarray:
    """Unit quaternion ``(x, y, z, w)`` (``geometry_msgs/Quaternion`` order), w ≥ 0."""
    t = np.trace(R)
    if t > 0.0:
        w = 0.5 * np.sqrt(1.0 + t)
        x, y, z = (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), \
            (R[1, 0] - R[0, 1]) / (4 * w)
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        r = np.sqrt(max(1.0 + R[i, i] - R[j, j] - R[k, k], 0.0))
        v = np.zeros(3)
        v[i] = 0.5 * r
        v[j] = (R[j, i] + R[i, j]) / (2 * r)
        v[k] = (R[k, i] + R[i, k]) / (2 * r)
        w = (R[k, j] - R[j, k]) / (2 * r)
        x, y, z = v
    q = np.array([x, y, z, w])
    return q if q[3] >= 0 else -q


@dataclass(frozen=True)
class ImuReading:
    """One IMU's noiseless readings and, when asked, their Jacobians (3 × 3n each)."""

    gyro: np.ndarray                 # (3,) rad/s, sensor frame
    accel: np.ndarray                # (3,) m/s², specific force, sensor frame
    R: np.ndarray                    # (3, 3) sensor orientation in the root frame
    H_gyro: np.ndarray | None = None
    H_accel: np.ndarray | None = None
    H_rot: np.ndarray | None = None  # right-perturbation δθ (sensor frame) per direction


class ImuModel:
    """A 3-axis gyroscope + accelerometer (+ orientation) rigidly mounted on one link."""

    def __init__(self, dyn: SpatialDynamics, link: int,
                 T_mount: np.ndarray | None = None) -> None:
        if not 0 <= link < dyn.nb:
            raise ValueError(f'link index {link} outside 0..{dyn.nb - 1}')
        self.dyn = dyn
        self.link = int(link)
        self.T_mount = np.eye(4) if T_mount is None else np.asarray(T_mount, float)
        self._Kb = dyn.K[self.link]
        self._zero_block = np.zeros((3, dyn.n))

    def measure(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                jacobians: bool = False) -> ImuReading:
        """Readings at the state (q, q̇, q̈); with ``jacobians`` their ∂/∂[q, q̇, q̈]."""
        dyn, b = self.dyn, self.link
        qdd = np.asarray(qdd, float)
        st = dyn.state(q, qd)
        a = dyn.a0 + self._Kb @ (st.s * qdd[:, None] + st.sdot * st.qd[:, None])
        T = st.T[b] @ self.T_mount
        R, p = T[:3, :3], T[:3, 3]
        w, v = st.v[b, :3], st.v[b, 3:]
        al, av = a[:3], a[3:]
        pd = v + cross3(w, p)
        pdd = av + cross3(al, p) + cross3(w, pd)           # p̈ − g
        RT = R.T
        gyro, accel = RT @ w, RT @ pdd
        if not jacobians:
            return ImuReading(gyro=gyro, accel=accel, R=R)
        n = dyn.n
        _, dv, da = dyn.motion_derivatives(st, qdd)
        dw, dvl = dv[b, :3], dv[b, 3:]                          # (3, 3n)
        dal, dav = da[b, :3], da[b, 3:]
        # moving q_k turns the link about s_k: ∂p = K (v_k + ω_k × p), ∂R = K [ω_k]× R
        Jw = st.s[:, :3].T * self._Kb                           # (3, n)
        dp = np.zeros((3, 3 * n))
        dp[:, :n] = st.s[:, 3:].T * self._Kb + _cross_cols(-p, Jw)
        dpd = dvl + _cross_cols(-p, dw) + _cross_cols(w, dp)
        dpdd = dav + _cross_cols(-p, dal) + _cross_cols(al, dp) + _cross_cols(-pd, dw) \
            + _cross_cols(w, dpd)
        # ∂(Rᵀ x)/∂q_k = Rᵀ (x × ω_k) K  (from ∂R = [ω_k]× R)
        H_gyro = RT @ dw
        H_gyro[:, :n] += RT @ (skew(w) @ Jw)
        H_accel = RT @ dpdd
        H_accel[:, :n] += RT @ (skew(pdd) @ Jw)
        H_rot = np.zeros((3, 3 * n))
        H_rot[:, :n] = RT @ Jw
        return ImuReading(gyro=gyro, accel=accel, R=R, H_gyro=H_gyro, H_accel=H_accel,
                          H_rot=H_rot)
