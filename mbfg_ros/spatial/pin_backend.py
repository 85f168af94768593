"""The per-tick spatial dynamics through Pinocchio, when it is installed.

Same interface and results as ``dynamics.SpatialDynamics`` (τ, M, q̈ and their exact
Jacobians for the spanning tree), built from the same immutable ``SpatialModel`` (so fixed
joints are merged and the overlay's gravity applies identically; Pinocchio never reads
the URDF here). ``bench/spatial_dynamics.py`` measures why it exists: in Python the
numpy recursion costs about 140 µs for τ with Jacobians on a 6-DOF arm, against the
100 µs per-tick target; Pinocchio's C++ takes a few µs. The numpy version stays the
package's own reference and the fallback when ``pin`` is missing.
"""
from __future__ import annotations

import numpy as np

from .dynamics import FDResult, IDResult
from .sensors import ImuReading
from .model import SpatialModel

__all__ = ['PinocchioDynamics', 'available']


def available() -> bool:
    """True when the ``pin`` package (Pinocchio's Python bindings) imports."""
    try:
        import pinocchio  # noqa: F401
    except ImportError:
        return False
    return True


def build_pinocchio_model(model: SpatialModel):  # -> pinocchio.Model
    """A ``pinocchio.Model`` of the tree of ``model``, joint for joint, in the same order.

    Fixed root: tree link ``b`` is Pinocchio joint ``b`` (0 the universe). Floating root
    (``model.floating``): a ``JointModelFreeFlyer`` carrying link 0 comes first, so link
    ``b`` is joint ``b + 1``.
    """
    import pinocchio as pin
    pm = pin.Model()
    pm.name = 'mbfg_tree'
    off = 0
    if model.floating:
        jid = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(),
                          model.base_joint or 'root_joint')
        pm.appendBodyToJoint(jid, pin.Inertia(float(model.mass[0]), np.array(model.com[0]),
                                              np.array(model.inertia[0])), pin.SE3.Identity())
        off = 1
    for j in range(model.n):
        T = model.T_home[j]
        placement = pin.SE3(np.array(T[:3, :3]), np.array(T[:3, 3]))
        ax = np.array(model.axis[j], float)
        if model.joint_type[j] == 'revolute':
            jm = pin.JointModelRevoluteUnaligned(*ax)
        else:
            jm = pin.JointModelPrismaticUnaligned(*ax)
        parent = int(model.parent[j]) + off      # link index (+ 1 floating) = joint id
        jid = pm.addJoint(parent, jm, placement, model.joint_names[j])
        b = j + 1
        pm.appendBodyToJoint(jid, pin.Inertia(float(model.mass[b]), np.array(model.com[b]),
                                              np.array(model.inertia[b])), pin.SE3.Identity())
    # a fixed root link's own mass never moves: it does not enter τ or M
    pm.gravity = pin.Motion(np.concatenate([np.asarray(model.gravity, float), np.zeros(3)]))
    return pm


def _fixed_root(model: SpatialModel) -> None:
    """These classes hold the root fixed (their q is the joints'); a free base has its own,
    :class:`.floating.FloatingBaseDynamics`."""
    if model.floating:
        raise ValueError(f'{model.source}: a floating base: use '
                         'mbfg_ros.spatial.floating.FloatingBaseDynamics')


class PinocchioDynamics:
    """``SpatialDynamics``'s interface on Pinocchio (open-chain trees; loops are constraints
    handled by the caller). Each instance owns one ``pinocchio.Data``: one per thread."""

    def __init__(self, model: SpatialModel) -> None:
        _fixed_root(model)
        import pinocchio as pin
        self._pin = pin
        self.model = model
        self.n, self.nb = model.n, model.nb
        self.pmodel = build_pinocchio_model(model)
        self.pdata = self.pmodel.createData()
        self._iu = np.triu_indices(self.n, 1)

    def _sym(self, A: np.ndarray) -> np.ndarray:
        A = np.array(A)
        A[self._iu[1], self._iu[0]] = A[self._iu]
        return A

    def inverse(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                derivatives: bool = False) -> IDResult:
        """τ = ID(q, q̇, q̈) (``pin.rnea``), optionally with ∂τ/∂q, ∂τ/∂q̇ and M."""
        pin, pm, pd = self._pin, self.pmodel, self.pdata
        q, qd, qdd = np.asarray(q, float), np.asarray(qd, float), np.asarray(qdd, float)
        if not derivatives:
            return IDResult(tau=pin.rnea(pm, pd, q, qd, qdd))    # a new array
        dq, dv, M = pin.computeRNEADerivatives(pm, pd, q, qd, qdd)
        return IDResult(tau=np.array(pd.tau), dtau_dq=np.array(dq), dtau_dqd=np.array(dv),
                        M=self._sym(M))

    def accelerations(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """q̈ = ABA(q, q̇, τ) alone (``pin.aba``, which returns a new array): what
        :meth:`forward` gives without derivatives, without its result object (issue 24)."""
        return self._pin.aba(self.pmodel, self.pdata, np.asarray(q, float),
                             np.asarray(qd, float), np.asarray(tau, float))

    def acceleration_jacobians(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray
                               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q̈, ∂q̈/∂q, ∂q̈/∂q̇) of one ``pin.computeABADerivatives`` pass (it fills
        ``data.ddq`` too): :meth:`forward` with derivatives, without M⁻¹ nor the result
        object. Copies: Pinocchio returns views of this instance's ``Data``."""
        pd = self.pdata
        dq, dv, _ = self._pin.computeABADerivatives(self.pmodel, pd, np.asarray(q, float),
                                                     np.asarray(qd, float),
                                                     np.asarray(tau, float))
        return pd.ddq.copy(), dq.copy(), dv.copy()

    def torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """τ = RNEA(q, q̇, q̈) alone (``pin.rnea``, which returns a new array): what
        :meth:`inverse` gives without derivatives, without its result object."""
        return self._pin.rnea(self.pmodel, self.pdata, np.asarray(q, float),
                              np.asarray(qd, float), np.asarray(qdd, float))

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q) (``pin.crba``, symmetrised)."""
        return self._sym(self._pin.crba(self.pmodel, self.pdata, np.asarray(q, float)))

    def mass_matrix_inverse(self, q: np.ndarray) -> np.ndarray:
        """M(q)⁻¹ (``pin.computeMinverse``: one pass of the articulated-body algorithm,
        symmetrised)."""
        return self._sym(self._pin.computeMinverse(self.pmodel, self.pdata,
                                                   np.asarray(q, float)))

    def bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """h(q, q̇) = ID(q, q̇, 0) (``pin.nonLinearEffects``)."""
        return np.array(self._pin.nonLinearEffects(self.pmodel, self.pdata,
                                                   np.asarray(q, float), np.asarray(qd, float)))

    def forward(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray,
                derivatives: bool = False, minv: bool = True) -> FDResult:
        """q̈ (``pin.aba``), optionally with ∂q̈/∂q, ∂q̈/∂q̇ and (``minv``) M⁻¹."""
        pin, pm, pd = self._pin, self.pmodel, self.pdata
        q, qd, tau = np.asarray(q, float), np.asarray(qd, float), np.asarray(tau, float)
        if not derivatives:
            return FDResult(qdd=pin.aba(pm, pd, q, qd, tau))     # a new array
        dq, dv, Minv = pin.computeABADerivatives(pm, pd, q, qd, tau)
        return FDResult(qdd=np.array(pd.ddq), dqdd_dq=np.array(dq), dqdd_dqd=np.array(dv),
                        dqdd_dtau=self._sym(Minv) if minv else None)


class PinocchioImu:
    """``sensors.ImuModel`` on Pinocchio's frame kinematics derivatives (same readings and
    Jacobians; the numpy model is its reference in the tests, this one is ~10x cheaper).

    In the sensor frame (Pinocchio's ``LOCAL``), with ``(v, ω)`` the frame twist and
    ``(a, α)`` its spatial acceleration from q̈ alone:

    * gyroscope ``ω``;
    * specific force ``a + ω × v − Rᵀ g`` (classical acceleration minus gravity);
    * orientation ``R``; moving ``q_k`` turns the frame by ``J_ω[:, k]`` (local), so
      ``∂(−Rᵀ g)/∂q = −[Rᵀ g]× J_ω`` and ``H_rot = [J_ω, 0, 0]``.
    """

    def __init__(self, model: SpatialModel, link: int, T_mount: np.ndarray) -> None:
        _fixed_root(model)
        import pinocchio as pin
        self._pin = pin
        self.n = model.n
        self.pmodel = build_pinocchio_model(model)
        T = np.asarray(T_mount, float)
        # link b is moved by joint b - 1, Pinocchio joint id b (0 is the universe)
        placement = pin.SE3(T[:3, :3], T[:3, 3])
        self.fid = self.pmodel.addFrame(pin.Frame('imu', int(link), 0, placement,
                                                  pin.FrameType.OP_FRAME))
        self.pdata = self.pmodel.createData()
        self.g = np.asarray(model.gravity, float)
        # gravity along one root axis k (the usual case): Rᵀ g = g_k R[k] without a product
        axes = np.flatnonzero(self.g)
        self._g_axis = (int(axes[0]), float(self.g[axes[0]])) if axes.size == 1 else None
        self._local = pin.LOCAL
        self._L = np.zeros((9, 2 * self.n))          # _accel_rows' scratch right factor
        self._H6 = np.zeros((6, 3 * self.n))         # gyro_accel_errors' H: zero ∂/∂q̈ gyro

    def measure(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                jacobians: bool = False) -> ImuReading:
        """The readings at (q, q̇, q̈) and, with ``jacobians``, ∂/∂[q, q̇, q̈] (class
        docstring; :meth:`measure_rows` as an :class:`~.sensors.ImuReading`)."""
        h, R, H = self.measure_rows(q, qd, qdd, jacobians)
        if H is None:
            return ImuReading(gyro=h[:3], accel=h[3:], R=R)
        return ImuReading(gyro=h[:3], accel=h[3:], R=R, H_gyro=H[0:3], H_accel=H[3:6],
                          H_rot=H[6:9])

    def measure_rows(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                     jacobians: bool = True
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(h (6,) = [gyroscope; specific force], R, H (9, 3n): the rows of the gyroscope,
        the accelerometer and the orientation stacked, or None without ``jacobians``) at
        (q, q̇, q̈) (class docstring; :meth:`_kinematics`, :meth:`_accel_rows`)."""
        n = self.n
        R, h, K = self._kinematics(q, qd, qdd, jacobians)
        R = np.array(R)
        h = np.array(h)
        if not jacobians:
            return h, R, None
        H = np.zeros((9, 3 * n))                      # rows: gyro, accel, orientation
        self._accel_rows(K, H)
        H[6:9, :2 * n] = self._L[6:9]                 # [J_ω, 0]
        return h, R, H

    def gyro_accel_errors(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                          z: list[float], jacobians: bool = True
                          ) -> tuple[np.ndarray, np.ndarray | None]:
        """(e (6,), H (6, 3n) or None): the residuals ``h − z`` of a gyroscope and an
        accelerometer reading ``z`` (6 floats, [gyro; accel]) taken at one state, and
        their Jacobians: :meth:`measure_rows`'s first six rows, the same float operations
        (issue 24: one record per tick; no rotation copy, no orientation rows, the
        residuals subtracted as floats)."""
        R, h, K = self._kinematics(q, qd, qdd, jacobians)
        e = np.array([h[0] - z[0], h[1] - z[1], h[2] - z[2],
                      h[3] - z[3], h[4] - z[4], h[5] - z[5]])
        if not jacobians:
            return e, None
        H = self._H6.copy()
        self._accel_rows(K, H)
        return e, H

    def _kinematics(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, jacobians: bool
                    ) -> tuple[np.ndarray, list[float], np.ndarray | None]:
        """One Pinocchio pass at (q, q̇, q̈): (R (the frame's rotation: a view of the SE3
        Pinocchio returns, which the view keeps alive), h (6 floats: [ω; a + ω × v − Rᵀ g]),
        K (3, 9) ``[ω×, −v×, −(Rᵀg)×]`` or None without ``jacobians``). With ``jacobians``
        the frame's kinematics derivatives are computed
        (``computeForwardKinematicsDerivatives``) and :meth:`_accel_rows` takes them."""
        pin, pm, pd, f, local = self._pin, self.pmodel, self.pdata, self.fid, self._local
        if jacobians:
            pin.computeForwardKinematicsDerivatives(pm, pd, q, qd, qdd)
        else:
            pin.forwardKinematics(pm, pd, q, qd, qdd)
        oMf = pin.updateFramePlacement(pm, pd, f)
        R = oMf.rotation
        vx, vy, vz, wx, wy, wz = pin.getFrameVelocity(pm, pd, f, local).vector.tolist()
        ax, ay, az = pin.getFrameAcceleration(pm, pd, f, local).linear.tolist()
        if self._g_axis is not None:
            k, gk = self._g_axis
            rx, ry, rz = R[k].tolist()
            gx, gy, gz = gk * rx, gk * ry, gk * rz                   # Rᵀ g
        else:
            gx, gy, gz = (self.g @ R).tolist()
        # specific force a + ω × v − Rᵀ g: (ω × v − Rᵀ g) + a, the order of the sums fixed
        h = [wx, wy, wz, (wy * vz - wz * vy - gx) + ax, (wz * vx - wx * vz - gy) + ay,
             (wx * vy - wy * vx - gz) + az]
        if not jacobians:
            return R, h, None
        K = np.array([0.0, -wz, wy, 0.0, vz, -vy, 0.0, gz, -gy,
                      wz, 0.0, -wx, -vz, 0.0, vx, -gz, 0.0, gx,
                      -wy, wx, 0.0, vy, -vx, 0.0, gy, -gx, 0.0]).reshape(3, 9)
        return R, h, K

    def _accel_rows(self, K: np.ndarray, H: np.ndarray) -> None:
        """Write the gyroscope's and the accelerometer's Jacobians into ``H[:6]`` (rows
        (6, 3n) over [q, q̇, q̈]; its block ``[0:3, 2n:]``, the gyroscope's ∂/∂q̈, is left
        as it is: zero) after :meth:`_kinematics` with ``jacobians``; the rows
        of the orientation ``[J_ω, 0, 0]`` are left in ``self._L[6:9, :]`` (its first 2n
        columns). The accelerometer's in one product:
        ``[∂a/∂q, ∂a/∂q̇] + [ω×, −v×, −(Rᵀg)×] [∂v/∂q, J; J_ω, 0]`` (the ∂(ω × v) and
        ∂(−Rᵀg) terms). ``self._L`` (9, 2n) is this instance's scratch matrix for the
        right factor, its block ``[6:9, n:]`` zero for good; Pinocchio returns the
        derivatives as new arrays."""
        n = self.n
        dv_dq, da_dq, da_dv, J = self._pin.getFrameAccelerationDerivatives(
            self.pmodel, self.pdata, self.fid, self._local)
        L = self._L
        L[:6, :n] = dv_dq
        L[:6, n:] = J
        L[6:, :n] = J[3:]
        D = np.concatenate((da_dq[:3], da_dv[:3]), axis=1)
        D += K.dot(L)              # K @ L: the same dgemm call, without matmul's overhead
        H[0:3, :2 * n] = L[3:6]                       # gyroscope: [∂ω/∂q, J_ω, 0]
        H[3:6, :2 * n] = D
        H[3:6, 2 * n:] = J[:3]
