"""Seed 002 §VII's closed-loop graph against Pinocchio's constrained dynamics.

The loop-closure Jacobian ``C`` and drift ``γ`` of each revolute loop joint come from
Pinocchio's frame kinematics alone (frames A on the parent link and B on the child link;
the relative twist of B to A, in B, may only turn about the axis); the reference solves
the KKT system ``[M −Cᵀ; C 0] [θ̈; λ] = [τ − h; −γ]`` by least squares (planar loops make
``C`` rank-deficient: θ̈ is unique, λ is not). The repo's own loop code is used only to put
the four-bar and five-bar in an assembled configuration.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from mbfg_ros.spatial.dynamics_graph import DynamicsGraph
from mbfg_ros.spatial.system import build_spatial_system


DATA = Path(__file__).resolve().parents[2] / 'config' / 'urdf'
TOL = 1e-9


class PinLoops:
    """Pinocchio's tree of the URDF plus the overlay's loop joints as frame pairs."""

    def __init__(self, model, urdf_text: str) -> None:
        self.m = model
        self.pm = pin.buildModelFromXML(urdf_text)
        self.pm.gravity = pin.Motion(np.concatenate([model.gravity, np.zeros(3)]))
        self.pd = None
        joints = [self.pm.joints[self.pm.getJointId(nm)] for nm in model.joint_names]
        self.P = np.zeros((model.n, model.n))                 # ours = P @ Pinocchio's
        self.P[np.arange(model.n), [jt.idx_v for jt in joints]] = 1.0
        self.pairs = []
        for i, lp in enumerate(model.loops):
            ids = []
            for side, link, T in (('A', lp.parent, lp.T_parent), ('B', lp.child, lp.T_child)):
                body = self.pm.frames[self.pm.getFrameId(model.link_names[link])]
                place = body.placement * pin.SE3(T[:3, :3].copy(), T[:3, 3].copy())
                ids.append(self.pm.addFrame(pin.Frame(f'loop{i}{side}', body.parentJoint,
                                                      place, pin.FrameType.OP_FRAME)))
            axis = np.asarray(lp.axis, float)
            basis = np.linalg.svd(axis[None, :])[2][1:]          # two axes ⟂ the joint axis
            sel = np.zeros((5, 6))                               # Pinocchio [linear; angular]
            sel[:3, :3] = np.eye(3)
            sel[3:, 3:] = basis
            self.pairs.append((ids[0], ids[1], sel))
        self.pd = self.pm.createData()

    def constraints(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(C, γ) in our joint order: P (v_B − Ad_{BA} v_A) = 0, P (a_B − Ad a_A
        + v_B × Ad v_A) at θ̈ = 0 is γ (body accelerations, LOCAL frames)."""
        pm, pd, P = self.pm, self.pd, self.P
        qp, vp = P.T @ q, P.T @ qd
        pin.forwardKinematics(pm, pd, qp, vp, np.zeros(pm.nv))
        pin.computeJointJacobians(pm, pd, qp)
        pin.updateFramePlacements(pm, pd)
        Cs, gs = [], []
        for a, b, sel in self.pairs:
            X = pd.oMf[b].actInv(pd.oMf[a])                      # A in B
            JA = pin.getFrameJacobian(pm, pd, a, pin.LOCAL)
            JB = pin.getFrameJacobian(pm, pd, b, pin.LOCAL)
            vA = pin.getFrameVelocity(pm, pd, a, pin.LOCAL)
            vB = pin.getFrameVelocity(pm, pd, b, pin.LOCAL)
            aA = pin.getFrameAcceleration(pm, pd, a, pin.LOCAL)
            aB = pin.getFrameAcceleration(pm, pd, b, pin.LOCAL)
            Cs.append(sel @ (JB - X.toActionMatrix() @ JA) @ P.T)
            gs.append(sel @ (aB - X.act(aA) + vB.cross(X.act(vA))).vector)
        return np.vstack(Cs), np.concatenate(gs)

    def forward(self, q, qd, tau):
        """θ̈ of the constrained system for joint torques ``tau`` (our order)."""
        pm, pd, P = self.pm, self.pd, self.P
        qp, vp = P.T @ q, P.T @ qd
        M = P @ pin.crba(pm, pd, qp) @ P.T
        M = np.triu(M) + np.triu(M, 1).T
        h = P @ pin.nonLinearEffects(pm, pd, qp, vp)
        C, g = self.constraints(q, qd)
        n, k = len(q), C.shape[0]
        K = np.block([[M, -C.T], [C, np.zeros((k, k))]])
        x = np.linalg.lstsq(K, np.concatenate([tau - h, -g]), rcond=None)[0]
        return x[:n]


@pytest.mark.parametrize('name', ['fourbar', 'five_bar'])
def test_closed_loop_graph_equals_pinocchio_kkt(name):
    S = build_spatial_system(DATA / f'{name}.urdf', DATA / f'{name}_loops.yaml', 'numpy')
    m = S.model
    ref = PinLoops(m, (DATA / f'{name}.urdf').read_text())
    dg = DynamicsGraph(m)
    act = np.flatnonzero(m.actuated)
    rng = np.random.default_rng(13)
    for _ in range(10):
        q = S.assemble(S.q0 + S.B @ rng.uniform(-0.3, 0.3, len(act)), keep=act)
        C, _ = ref.constraints(q, np.zeros(m.n))
        N = np.linalg.svd(C)[2][np.linalg.matrix_rank(C):].T       # Pinocchio's null space
        qd = N @ rng.normal(size=N.shape[1])
        tau = np.zeros(m.n)
        tau[act] = rng.normal(size=len(act)) * 3
        qdd_ref = ref.forward(q, qd, tau)
        C, g = ref.constraints(q, qd)
        assert np.abs(C @ qd).max() < 1e-10 and np.abs(C @ qdd_ref + g).max() < 1e-9
        qdd = dg.forward(q, qd, tau).qdd
        assert np.abs(qdd - qdd_ref).max() < TOL * max(1.0, np.abs(qdd_ref).max())
        assert np.abs(dg.inverse(q, qd, qdd_ref).tau[act] - tau[act]).max() < \
            TOL * max(1.0, np.abs(tau).max())
