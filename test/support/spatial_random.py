"""Random URDF trees for the spatial tests, and Pinocchio's view of them.

The trees have revolute, continuous and prismatic joints along random axes, random joint
origins, random physical inertias (of a random mass distribution) with rotated principal
axes, fixed joints (merged by both loaders) and branching, so that nothing in a test depends
on aligned axes or a chain.
Pinocchio builds its model from the same URDF text with its own parser: it is an
independent reference for open chains.
"""
from __future__ import annotations

import numpy as np


def _f(x: np.ndarray) -> str:
    return ' '.join(f'{v:.17g}' for v in x)


def physical_inertia(sigma: np.ndarray) -> np.ndarray:
    """Inertia about the centre of mass of a body whose second moment of mass about it is
    ``sigma`` = sum m r r^T (symmetric positive definite): tr(sigma) 1 - sigma. Its principal
    moments s2 + s3, s1 + s3, s1 + s2 obey the triangle inequality strictly (issue 26), as
    every real body's do; a random SPD matrix alone often does not."""
    return np.trace(sigma) * np.eye(3) - sigma


def random_urdf(rng: np.random.Generator, n: int = 6, branch: bool = True,
                fixed: bool = True, kinds: tuple[str, ...] = ('revolute', 'continuous',
                                                              'prismatic')) -> str:
    """URDF text of a random tree with n movable joints (one fixed joint when ``fixed``)."""
    out = ['<?xml version="1.0" encoding="utf-8"?>', '<robot name="random_tree">']

    def link(name: str) -> str:
        m = rng.uniform(0.5, 3.0)
        A = rng.normal(size=(3, 3))
        inertia = physical_inertia(0.5 * (A @ A.T + 0.1 * np.eye(3)))
        c, rpy = rng.normal(size=3) * 0.2, rng.uniform(-1, 1, 3)
        i = inertia
        return (f'<link name="{name}"><inertial><origin xyz="{_f(c)}" rpy="{_f(rpy)}"/>'
                f'<mass value="{m:.17g}"/><inertia ixx="{i[0, 0]:.17g}" ixy="{i[0, 1]:.17g}" '
                f'ixz="{i[0, 2]:.17g}" iyy="{i[1, 1]:.17g}" iyz="{i[1, 2]:.17g}" '
                f'izz="{i[2, 2]:.17g}"/></inertial></link>')

    out.append(link('base'))
    names = ['base']
    for j in range(n):
        parent = names[-1] if not branch or j < 3 else names[rng.integers(0, len(names))]
        weights = np.array([{'revolute': 0.5, 'continuous': 0.2, 'prismatic': 0.3}[k]
                            for k in kinds])
        kind = rng.choice(list(kinds), p=weights / weights.sum())
        if fixed and j == 2:
            out.append(link(f'flange{j}'))
            o, r = rng.normal(size=3) * 0.3, rng.uniform(-1, 1, 3)
            out.append(f'<joint name="fixed{j}" type="fixed"><parent link="{parent}"/>'
                       f'<child link="flange{j}"/><origin xyz="{_f(o)}" rpy="{_f(r)}"/></joint>')
            parent = f'flange{j}'
        name = f'link{j}'
        out.append(link(name))
        o, r, a = rng.normal(size=3) * 0.3, rng.uniform(-1, 1, 3), rng.normal(size=3)
        a /= np.linalg.norm(a)
        lim = '' if kind == 'continuous' else \
            '<limit lower="-3" upper="3" effort="10" velocity="5"/>'
        out.append(f'<joint name="joint{j}" type="{kind}"><parent link="{parent}"/>'
                   f'<child link="{name}"/><origin xyz="{_f(o)}" rpy="{_f(r)}"/>'
                   f'<axis xyz="{_f(a)}"/>{lim}</joint>')
        names.append(name)
    out.append('</robot>')
    return '\n'.join(out)


class PinReference:
    """Pinocchio model from URDF text, with our joint order and angle-only coordinates."""

    def __init__(self, urdf: str | bytes, joint_names: tuple[str, ...],
                 gravity: np.ndarray | None = None) -> None:
        import pinocchio as pin
        self.pin = pin
        text = urdf.decode() if isinstance(urdf, bytes) else urdf
        self.model = pin.buildModelFromXML(text)
        if gravity is not None:
            self.model.gravity = pin.Motion(np.concatenate([gravity, np.zeros(3)]))
        self.data = self.model.createData()
        joints = [self.model.joints[self.model.getJointId(nm)] for nm in joint_names]
        self.idx_q = [jt.idx_q for jt in joints]
        self.nq2 = [jt.nq == 2 for jt in joints]        # continuous: (cos, sin)
        n = len(joint_names)
        self.P = np.zeros((n, n))                          # ours = P @ pinocchio's
        self.P[np.arange(n), [jt.idx_v for jt in joints]] = 1.0

    def q(self, q: np.ndarray) -> np.ndarray:
        out = np.zeros(self.model.nq)
        for k, (i, two) in enumerate(zip(self.idx_q, self.nq2)):
            out[i:i + 2 if two else i + 1] = [np.cos(q[k]), np.sin(q[k])] if two else [q[k]]
        return out

    def sym(self, A: np.ndarray) -> np.ndarray:
        A = np.triu(A) + np.triu(A, 1).T
        return self.P @ A @ self.P.T

    def rnea(self, q, qd, qdd):
        pin, P = self.pin, self.P
        return P @ pin.rnea(self.model, self.data, self.q(q), P.T @ qd, P.T @ qdd)

    def rnea_derivatives(self, q, qd, qdd):
        pin, P = self.pin, self.P
        dq, dv, M = pin.computeRNEADerivatives(self.model, self.data, self.q(q), P.T @ qd,
                                               P.T @ qdd)
        return P @ dq @ P.T, P @ dv @ P.T, self.sym(M)

    def crba(self, q):
        return self.sym(self.pin.crba(self.model, self.data, self.q(q)))

    def aba(self, q, qd, tau):
        pin, P = self.pin, self.P
        return P @ pin.aba(self.model, self.data, self.q(q), P.T @ qd, P.T @ tau)

    def aba_derivatives(self, q, qd, tau):
        pin, P = self.pin, self.P
        dq, dv, Minv = pin.computeABADerivatives(self.model, self.data, self.q(q),
                                                 P.T @ qd, P.T @ tau)
        return P @ dq @ P.T, P @ dv @ P.T, self.sym(Minv)
