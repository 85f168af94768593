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
    """A ``pinocchio.Model`` of the tree of ``model``, joint for joint, in the same order."""
    import pinocchio as pin
    pm = pin.Model()
    pm.name = 'mbfg_tree'
    for j in range(model.n):
        T = model.T_home[j]
        placement = pin.SE3(np.array(T[:3, :3]), np.array(T[:3, 3]))
        ax = np.array(model.axis[j], float)
        if model.joint_type[j] == 'revolute':
            jm = pin.JointModelRevoluteUnaligned(*ax)
        else:
            jm = pin.JointModelPrismaticUnaligned(*ax)
        parent = int(model.parent[j])            # link index = joint id (link 0: universe)
        jid = pm.addJoint(parent, jm, placement, model.joint_names[j])
        b = j + 1
        pm.appendBodyToJoint(jid, pin.Inertia(float(model.mass[b]), np.array(model.com[b]),
                                              np.array(model.inertia[b])), pin.SE3.Identity())
    # the root link's own mass never moves: it does not enter τ or M
    pm.gravity = pin.Motion(np.concatenate([np.asarray(model.gravity, float), np.zeros(3)]))
    return pm


class PinocchioDynamics:
    """``SpatialDynamics``'s interface on Pinocchio (open-chain trees; loops are constraints
    handled by the caller). Each instance owns one ``pinocchio.Data``: one per thread."""

    def __init__(self, model: SpatialModel) -> None:
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
        q, qd, qdd = (np.asarray(x, float) for x in (q, qd, qdd))
        if not derivatives:
            return IDResult(tau=np.array(pin.rnea(pm, pd, q, qd, qdd)))
        dq, dv, M = pin.computeRNEADerivatives(pm, pd, q, qd, qdd)
        return IDResult(tau=np.array(pd.tau), dtau_dq=np.array(dq), dtau_dqd=np.array(dv),
                        M=self._sym(M))

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q) (``pin.crba``, symmetrised)."""
        return self._sym(self._pin.crba(self.pmodel, self.pdata, np.asarray(q, float)))

    def bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """h(q, q̇) = ID(q, q̇, 0) (``pin.nonLinearEffects``)."""
        return np.array(self._pin.nonLinearEffects(self.pmodel, self.pdata,
                                                   np.asarray(q, float), np.asarray(qd, float)))

    def forward(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray,
                derivatives: bool = False) -> FDResult:
        """q̈ (``pin.aba``), optionally with ∂q̈/∂q, ∂q̈/∂q̇ and M⁻¹."""
        pin, pm, pd = self._pin, self.pmodel, self.pdata
        q, qd, tau = (np.asarray(x, float) for x in (q, qd, tau))
        if not derivatives:
            return FDResult(qdd=np.array(pin.aba(pm, pd, q, qd, tau)))
        dq, dv, Minv = pin.computeABADerivatives(pm, pd, q, qd, tau)
        return FDResult(qdd=np.array(pd.ddq), dqdd_dq=np.array(dq), dqdd_dqd=np.array(dv),
                        dqdd_dtau=self._sym(Minv))
