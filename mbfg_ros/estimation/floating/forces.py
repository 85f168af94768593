"""Contact forces, τ̂ and effort-based contact detection of the floating-base estimator.

The :class:`ForcesMixin` part of :class:`~.estimator.FloatingEstimator`.
At each force tick (``force_rate``): the floating-base equations of motion (seed 003 §3)
``J_cᵀ f = M v̇ + h − Sᵀ τ`` on the stance feet, solved in least squares over all nv rows
with the measured efforts (without efforts: the base rows only, the minimum-norm forces of
``contact_inverse``, whose joint rows then give τ̂). ``v̇``: the base's linear acceleration
from the accelerometer (``Rᵀ a = f_imu + Rᵀ g``, minus ``ω × v_b`` for the body-frame
derivative), its angular acceleration and the joint accelerations by finite differences of
the bias-corrected gyro and of q̇ between keyframes (:mod:`.keyframes`). When the legs share
no joint each stance foot's force comes from its own leg's joint rows; with
``contact_source: effort`` those forces set the contact states (with hysteresis).
"""
from __future__ import annotations

import gtsam
import numpy as np

from .stance import cross

__all__ = ['ForcesMixin']


class ForcesMixin:
    """Contact forces and τ̂ from the equations of motion (module docstring)."""

    def _legs_of_feet(self) -> list[np.ndarray] | None:
        """Per contact, the joints that move it (its leg), if no two contacts share one
        (then each stance foot's force comes from its own leg's joint rows)."""
        rng = np.random.default_rng(0)
        q = np.zeros(7 + self.n)
        q[6] = 1.0
        q[7:] = rng.uniform(-0.5, 0.5, self.n)
        J = self.system.contact_jacobian(q, self.contact_names)[:, 6:]
        cols = [np.flatnonzero(np.abs(J[3 * i:3 * i + 3]).max(axis=0) > 1e-12)
                for i in range(self.k)]
        used = np.concatenate(cols) if cols else np.zeros(0, int)
        return cols if len(used) == len(set(used.tolist())) else None


    def _effort_contacts(self, t: float, q: np.ndarray, v: np.ndarray, vdot: np.ndarray
                         ) -> None:
        """``contact_source: effort``: every foot's force from its leg's joint rows and
        efforts; in stance while its vertical (world) component is above
        ``contact_force_threshold``, back in swing below half of it (hysteresis)."""
        rhs = self.system.inverse(q, v, vdot)[6:] - self._tau
        J = self.system.contact_jacobian(q, self.contact_names)
        f = np.empty((self.k, 3))
        self._leg_forces(J, rhs, self._all_feet, f)
        thr = self.config.contact_force_threshold
        for i in range(self.k):
            fz = f[i, 2]
            if fz > thr or (self._stance[i] and fz > 0.5 * thr):
                self._set_stance(i, t, True)
            else:
                self._set_stance(i, t, False)
        self._forces[self._stance] = f[self._stance]
        self._tau_hat = self._tau

    def _contact_forces(self, t: float, nav: gtsam.NavState, w: np.ndarray) -> None:
        """Stance forces and τ̂ from the equations of motion (module docstring) at ``nav``
        and the latest readings."""
        R = nav.attitude().matrix()
        vb = R.T @ nav.velocity()
        qx = nav.attitude().toQuaternion()
        q, v, vdot = self._qfull, self._vfull, self._vdot
        q[:3] = nav.position()
        q[3:7] = (qx.x(), qx.y(), qx.z(), qx.w())
        q[7:] = self._q
        v[:3], v[3:6], v[6:] = vb, w, self._qd
        vdot[:3] = self._acc - self._bias.accelerometer() - self._g * R[2] - cross(w, vb)
        self._forces[:] = np.nan
        if self._from_effort:
            if np.isfinite(self._tau).all():
                self._effort_contacts(t, q, v, vdot)
            return
        stance = np.flatnonzero(self._stance)
        if not len(stance):
            self._tau_hat = self.system.inverse(q, v, vdot)[6:]
            return
        names = [self.contact_names[i] for i in stance]
        if np.isfinite(self._tau).all():
            # the joint rows: τ = (M v̇ + h)_joints − J_jointsᵀ f; a foot's force from its own
            # leg's joints when the legs share none (the base rows need the base's angular
            # acceleration, whose finite difference is the noisiest term)
            rhs = self.system.inverse(q, v, vdot)[6:] - self._tau
            J = self.system.contact_jacobian(q, names)
            f = np.empty((len(stance), 3))
            if self._leg_cols is None:
                f[:] = np.linalg.lstsq(J[:, 6:].T, rhs, rcond=None)[0].reshape(-1, 3)
            else:
                self._leg_forces(J, rhs, stance, f)
            self._tau_hat = self._tau
        else:
            self._tau_hat, f = self.system.contact_inverse(q, v, vdot, names)
        self._forces[stance] = f

    def _leg_forces(self, J: np.ndarray, rhs: np.ndarray, stance: np.ndarray,
                    f: np.ndarray) -> None:
        """Each stance foot's force from its own leg's joint rows ``J_legᵀ f = rhs_leg``
        (3-joint legs: one batched solve; a singular leg, stretched straight: least squares)."""
        if self._leg3 is not None:
            cols = self._leg3[stance]                      # (m, 3)
            Jr = J.reshape(len(stance), 3, -1)
            A = np.take_along_axis(Jr, 6 + cols[:, None, :].repeat(3, axis=1), axis=2)
            try:
                f[:] = np.linalg.solve(A.transpose(0, 2, 1), rhs[cols][..., None])[..., 0]
                return
            except np.linalg.LinAlgError:
                pass
        for row, i in enumerate(stance):
            cols = self._leg_cols[i]
            A = J[3 * row:3 * row + 3, 6 + cols].T
            f[row] = np.linalg.lstsq(A, rhs[cols], rcond=None)[0]
