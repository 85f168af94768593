"""Seed 002's dynamics factor graph: inverse, forward and hybrid dynamics as one graph.

Given the joint positions and rates, the poses and twists follow from the kinematics; what
is left is the seed's *linear* graph (Figs. 4, 6, 9) over the link accelerations ``A_i``,
the joint wrenches ``F_j``, and per joint either ``θ̈_j`` or ``τ_j`` as the unknown:

* inverse dynamics: every θ̈ known → τ and the joint wrenches;
* forward dynamics: every τ known → θ̈;
* hybrid: any mix per joint (seed 002 §VI, Table III).

They are the same factors (``graph_factors``: Eqs. 5-7, gravity explicit) with different
variables known; known variables are parameters of the factors, as the seed omits them
from the simplified graphs. Each factor is a GTSAM ``JacobianFactor`` (the graph is exactly
linear in its unknowns), eliminated by GTSAM under the chosen ordering:

* ``colamd`` and ``metis`` (GTSAM's heuristics; the seed's COLAMD and ND);
* ``rnea``: τ, then F root → tips, then A tips → root (Algorithm 1 / Fig. 5: back
  substitution is the RNEA forward-backward path);
* ``crba``: all F, then all A, then all θ̈; ``aba``: F_i, A_i, θ̈_i alternately from the tips
  (Fig. 7a/b).

Closed loops (§VII): each loop joint adds two wrench variables (on each side), the
wrench-equivalence factor, its acceleration constraint and, for a passive joint, a zero
torque; a planar mechanism (every joint axis parallel) adds the planar-loop wrench
factor; redundant motors get the min-torque prior (unit weight; the dynamics factors are
then exact constraints, GTSAM's constrained noise model σ = 0, eliminated by its
constrained QR). ``nonlinear_graph`` builds the full graph with the pose and twist
factors (Eq. 4) as ``CustomFactor``s for a Levenberg-Marquardt solve of the same problem.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import gtsam
import numpy as np

from ..core.factors import custom_factor
from . import graph_factors as gf
from .model import SpatialModel

__all__ = ['ORDERINGS', 'DynamicsGraph', 'GraphSolution']

ORDERINGS = ('colamd', 'metis', 'rnea', 'crba', 'aba')

_A, _F, _QDD, _TAU, _WC, _WP, _QDDL = 'A', 'F', 'a', 't', 'W', 'w', 'l'


def key(kind: str, index: int) -> int:
    """GTSAM key of a graph variable (``A`` link accel, ``F`` joint wrench, ``a`` θ̈, ``t`` τ,
    ``W``/``w`` loop wrench on the child/parent side, ``l`` loop joint θ̈)."""
    return gtsam.symbol(kind, index)


@dataclass(frozen=True)
class GraphSolution:
    """Solved graph: θ̈ and τ of every tree joint, the joint wrenches and link accelerations."""

    qdd: np.ndarray          # (n,)
    tau: np.ndarray          # (n,)
    F: np.ndarray            # (n, 6) wrench on each child link through its joint
    A: np.ndarray            # (nb, 6) link accelerations (body frames)
    W: np.ndarray            # (n_loops, 6) loop wrenches on the loop child links


def tree_constants(graph: Any, model: SpatialModel) -> None:
    """The constants seed 002's graph of a tree needs, set once on ``graph``: ``model``,
    ``n``, ``nb``, the screw axes ``S``, the home poses ``T_home`` and their inverses, the
    spatial inertias ``G``, gravity ``g`` and the joints below each link (``children``)."""
    graph.model = model
    graph.n, graph.nb = model.n, model.nb
    graph.S = model.screw
    graph.T_home = np.asarray(model.T_home, float)
    graph.T_home_inv = np.linalg.inv(graph.T_home)
    graph.G = model.spatial_inertia()
    graph.g = np.asarray(model.gravity, float)
    graph.children = [[] for _ in range(graph.nb)]         # joints below a link
    for j, p in enumerate(model.parent):
        graph.children[int(p)].append(j)


class DynamicsGraph:
    """Builds and solves seed 002's graph for one ``SpatialModel`` (immutable constants)."""

    def __init__(self, model: SpatialModel) -> None:
        if model.floating:
            raise ValueError(f'{model.source}: a floating base: use '
                             'mbfg_ros.spatial.floating_graph.FloatingDynamicsGraph')
        tree_constants(self, model)
        self.loops = model.loops

    # -- kinematics (known part) ------------------------------------------------------------
    def kinematics(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(T (nb, 4, 4) link poses, V (nb, 6) body twists): pose factors and Eq. 4 solved."""
        T = np.zeros((self.nb, 4, 4))
        V = np.zeros((self.nb, 6))
        T[0] = np.eye(4)
        for j, p in enumerate(self.model.parent):
            c = j + 1
            Tj = gf.joint_transform(self.T_home[j], self.S[j], q[j])
            T[c] = T[p] @ Tj
            V[c] = gf.Ad(np.linalg.inv(Tj)) @ V[p] + self.S[j] * qd[j]
        return T, V

    # -- the linear graph ---------------------------------------------------------------------
    def linear_graph(self, q: np.ndarray, qd: np.ndarray,
                     qdd_known: Mapping[int, float], tau_known: Mapping[int, float],
                     planar: bool | None = None) -> gtsam.GaussianFactorGraph:
        """The seed's simplified graph: unknowns A, F, and θ̈ or τ per joint.

        Every tree joint needs θ̈ or τ known (hybrid); with loops, the loop joints' θ̈ and the
        loop wrenches are unknowns too.
        """
        q = np.asarray(q, float)
        qd = np.asarray(qd, float)
        n = self.n
        for j in range(n):           # a tree needs exactly one; a loop's passive joint both
            if not self.loops and (j in qdd_known) == (j in tau_known):
                raise ValueError(f'joint {self.model.joint_names[j]!r}: give exactly one of '
                                 'θ̈ or τ')
        T, V = self.kinematics(q, qd)
        redundant = bool(self.loops) and self._redundant(tau_known, qdd_known)
        hard = _hard_noise(redundant)
        hard6, hard1 = hard(6), hard(1)
        gfg = gtsam.GaussianFactorGraph()
        zero6 = np.zeros(6)
        for j in range(n):
            p, c = int(self.model.parent[j]), j + 1
            # Eq. 5: A_c − Ad A_p − S θ̈ − ad(V_c) S θ̇ = 0 (A_0 = 0: gravity is explicit)
            H: list = [None] * 6
            qdd0 = qdd_known.get(j, 0.0)
            e = gf.accel_error(zero6, zero6, V[c], q[j], qd[j], qdd0, self.T_home_inv[j],
                               self.S[j], H)
            keys, blocks = [key(_A, c)], [H[1]]
            if p != 0:
                keys.append(key(_A, p))
                blocks.append(H[0])
            if j not in qdd_known:
                keys.append(key(_QDD, j))
                blocks.append(H[5])
            gfg.add(_jf(keys, blocks, -e, hard6))
            # Eq. 7: Sᵀ F_j − τ_j = 0
            H = [None] * 2
            e = gf.torque_error(zero6, tau_known.get(j, 0.0), self.S[j], H)
            keys, blocks = [key(_F, j)], [H[0]]
            if j not in tau_known:
                keys.append(key(_TAU, j))
                blocks.append(H[1])
            gfg.add(_jf(keys, blocks, -e, hard1))
        # Eq. 6 per moving link (gravity explicit through the known pose)
        loop_terms = self._loop_terms(T, V, q, qd, planar)
        for c in range(1, self.nb):
            j = c - 1
            kids = [(zero6, q[k], self.T_home_inv[k], self.S[k]) for k in self.children[c]]
            H = [None] * (4 + 2 * len(kids))
            e = gf.wrench_error(zero6, V[c], zero6, T[c, :3, :3], kids, self.G[c], self.g, H)
            keys = [key(_A, c), key(_F, j)] + [key(_F, k) for k in self.children[c]]
            blocks = [H[0], H[2]] + [H[4 + 2 * i] for i in range(len(kids))]
            for k_, b_ in loop_terms.wrench_blocks.get(c, []):
                keys.append(k_)
                blocks.append(b_)
            gfg.add(_jf(keys, blocks, -e, hard6))
        for f in loop_terms.factors(hard):
            gfg.add(f)
        if redundant:
            unit = gtsam.noiseModel.Unit.Create(1)
            for j in range(n):
                if j not in tau_known and self.model.actuated[j]:     # min-torque prior
                    gfg.add(_jf([key(_TAU, j)], [np.ones((1, 1))], np.zeros(1), unit))
        return gfg

    def _redundant(self, tau_known: Mapping[int, float], qdd_known: Mapping[int, float]
                   ) -> bool:
        """With loops, motors may outnumber the degrees of freedom: then the torques are
        not unique and the min-torque prior picks them. It is added whenever a loop
        mechanism has unknown motor torques (with as many motors as degrees of freedom it
        changes the answer by ~σ², i.e. nothing)."""
        return any(self.model.actuated[j] and j not in tau_known for j in range(self.n))

    def _loop_terms(self, T: np.ndarray, V: np.ndarray, q: np.ndarray, qd: np.ndarray,
                    planar: bool | None) -> '_LoopTerms':
        return _LoopTerms(self, T, V, planar)

    # -- solving ------------------------------------------------------------------------------
    def ordering(self, gfg: gtsam.GaussianFactorGraph, name: str | Sequence[int]
                 ) -> gtsam.Ordering:
        """The elimination ordering ``name`` (one of ``ORDERINGS``) for ``gfg``, or ``name``
        itself when it is a sequence of every key of ``gfg`` (e.g. seed 002 Table III's MD
        and CUSTOM orders, written with ``key``)."""
        if not isinstance(name, str):
            seq = [int(k) for k in name]
            if len(seq) != len(set(seq)) or set(seq) != set(gfg.keyVector()):
                raise ValueError('ordering: an explicit ordering lists every unknown of the '
                                 'graph once')
            o = gtsam.Ordering()
            for k in seq:
                o.push_back(k)
            return o
        if name == 'colamd':
            return gtsam.Ordering.ColamdGaussianFactorGraph(gfg)
        if name == 'metis':
            return gtsam.Ordering.MetisGaussianFactorGraph(gfg)
        present = set(gfg.keyVector())
        n, tips_first = self.n, list(range(self.n - 1, -1, -1))
        if name == 'rnea':
            seq = [key(_TAU, j) for j in tips_first] + [key(_F, j) for j in range(n)] \
                + [key(_A, j + 1) for j in tips_first]
        elif name == 'crba':
            seq = [key(_F, j) for j in tips_first] + [key(_A, j + 1) for j in tips_first] \
                + [key(_QDD, j) for j in tips_first]
        elif name == 'aba':
            seq = [k for j in tips_first for k in (key(_F, j), key(_A, j + 1), key(_QDD, j))]
        else:
            raise ValueError(f'ordering {name!r}: expected one of {", ".join(ORDERINGS)}')
        rest = [k for k in gfg.keyVector() if k not in set(seq)]
        o = gtsam.Ordering()
        for k in [k for k in seq if k in present] + rest:
            o.push_back(k)
        return o

    def solve(self, gfg: gtsam.GaussianFactorGraph, ordering: str | Sequence[int] = 'colamd',
              qdd_known: Mapping[int, float] | None = None,
              tau_known: Mapping[int, float] | None = None) -> GraphSolution:
        """Eliminate ``gfg`` under ``ordering`` and back-substitute (seed 002 §IV-C).

        By QR (``EliminateQR``): GTSAM's default, Cholesky on the normal equations, squares
        the condition number, and a real arm's light wrist makes that 1e-7 of q̈.
        """
        sol = gfg.eliminateSequential(self.ordering(gfg, ordering), gtsam.EliminateQR).optimize()
        qdd_known = qdd_known or {}
        tau_known = tau_known or {}
        qdd = np.array([qdd_known[j] if j in qdd_known else sol.at(key(_QDD, j))[0]
                        for j in range(self.n)])
        tau = np.array([tau_known[j] if j in tau_known else sol.at(key(_TAU, j))[0]
                        for j in range(self.n)])
        F = np.array([sol.at(key(_F, j)) for j in range(self.n)])
        A = np.zeros((self.nb, 6))
        for c in range(1, self.nb):
            A[c] = sol.at(key(_A, c))
        W = np.array([sol.at(key(_WC, i)) for i in range(len(self.loops))]).reshape(-1, 6)
        return GraphSolution(qdd=qdd, tau=tau, F=F, A=A, W=W)

    # -- the three problems ---------------------------------------------------------------------
    def inverse(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                ordering: str | Sequence[int] = 'colamd') -> GraphSolution:
        """Inverse dynamics (seed 002 §IV): θ̈ known → τ and joint wrenches."""
        known = {j: float(x) for j, x in enumerate(qdd)}
        tau_known = {j: 0.0 for j in range(self.n)
                     if self.loops and not self.model.actuated[j]}
        return self.solve(self.linear_graph(q, qd, known, tau_known), ordering, known,
                          tau_known)

    def forward(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray,
                ordering: str | Sequence[int] = 'colamd') -> GraphSolution:
        """Forward dynamics (seed 002 §V): τ known → θ̈."""
        known = {j: float(x) for j, x in enumerate(tau)}
        return self.solve(self.linear_graph(q, qd, {}, known), ordering, {}, known)

    def hybrid(self, q: np.ndarray, qd: np.ndarray, qdd_known: Mapping[int, float],
               tau_known: Mapping[int, float], ordering: str | Sequence[int] = 'colamd'
               ) -> GraphSolution:
        """Hybrid dynamics (seed 002 §VI): per joint, θ̈ or τ known."""
        return self.solve(self.linear_graph(q, qd, qdd_known, tau_known), ordering,
                          qdd_known, tau_known)


def _hard_noise(redundant: bool) -> Callable[[int], gtsam.noiseModel.Diagonal]:
    """Noise of the dynamics factors (Eqs. 5-7, §VII's loop factors) of dimension ``d``.

    Alone they are square and exactly solvable: unit σ. With the min-torque prior (σ = 1)
    they must hold exactly while the prior is minimised: GTSAM's constrained model (σ = 0,
    constrained QR). A finite hard σ instead trades a σ² bias against a loss of precision
    ~ eps / σ in QR (σ = 1e-8: 3e-7 of τ on the redundant five-bar; constrained: 2e-14)."""
    if redundant:
        return gtsam.noiseModel.Constrained.All
    return lambda d: gtsam.noiseModel.Isotropic.Sigma(d, 1.0)


def _jf(keys: Sequence[int], blocks: Sequence[np.ndarray], b: np.ndarray,
        noise: gtsam.noiseModel.Base) -> gtsam.JacobianFactor:
    """A JacobianFactor ``Σ A_i x_i = b`` over 1-3 keys (GTSAM's Python constructors)."""
    blocks = [np.asarray(B, float).reshape(len(b), -1) for B in blocks]
    if len(keys) == 1:
        return gtsam.JacobianFactor(keys[0], blocks[0], b, noise)
    if len(keys) == 2:
        return gtsam.JacobianFactor(keys[0], blocks[0], keys[1], blocks[1], b, noise)
    if len(keys) == 3:
        return gtsam.JacobianFactor(keys[0], blocks[0], keys[1], blocks[1], keys[2], blocks[2],
                                    b, noise)
    # GTSAM's Python constructors stop at three keys: linearise an exactly linear
    # CustomFactor instead (done once per factor while building, not in the solve)
    def error(xs, want):
        return sum(B @ x for x, B in zip(xs, blocks)) - b, (list(blocks) if want else None)
    zero = gtsam.Values()
    for k, B in zip(keys, blocks):
        zero.insert(k, np.zeros(B.shape[1]))
    return custom_factor(keys, noise, error).linearize(zero)


class _LoopTerms:
    """Loop-closure parts of the linear graph (seed 002 §VII) at known poses and twists."""

    def __init__(self, g: DynamicsGraph, T: np.ndarray, V: np.ndarray,
                 planar: bool | None) -> None:
        self.g = g
        self.wrench_blocks: dict[int, list] = {}
        self._factors: list = []
        if not g.loops:
            return
        self.planar = _is_planar(g, T) if planar is None else planar
        for i, lp in enumerate(g.loops):
            self._add(i, lp, T, V)

    def _add(self, i: int, lp, T: np.ndarray, V: np.ndarray) -> None:
        p, c = lp.parent, lp.child
        kWc, kWp = key(_WC, i), key(_WP, i)
        # wrench balance: −W_c on the child link, −W_p on the parent link (the root's is
        # not modelled: a loop closed on the ground needs no W_p balance)
        self.wrench_blocks.setdefault(c, []).append((kWc, -np.eye(6)))
        if p != 0:
            self.wrench_blocks.setdefault(p, []).append((kWp, -np.eye(6)))
            # wrench equivalence: W_p + Ad(T_c⁻¹ T_p)ᵀ W_c = 0
            Tcp = np.linalg.inv(T[c]) @ T[p]
            self._factors.append(('hard6', [kWp, kWc], [np.eye(6), gf.Ad(Tcp).T],
                                  np.zeros(6)))
        # joint frame B on the child: screw S in B, wrench in B = Ad(T_cB)ᵀ W_c
        S = np.zeros(6)
        if lp.type == 'prismatic':
            S[3:] = lp.axis
        else:
            S[:3] = lp.axis
        AdcB = gf.Ad(np.asarray(lp.T_child, float))
        free = {'revolute': [S], 'prismatic': [S], 'fixed': [],
                'spherical': list(np.eye(6)[:3])}[lp.type]
        for s in free:                       # passive loop joint: no torque along free axes
            self._factors.append(('hard1', [kWc], [(s @ AdcB.T)[None, :]], np.zeros(1)))
        if self.planar:
            P = np.eye(6)[[0, 1, 5]]          # m_x, m_y, f_z in the joint frame (axis z)
            R = _frame_to_z(lp.axis)
            Rot = np.zeros((6, 6))
            Rot[:3, :3] = R
            Rot[3:, 3:] = R
            self._factors.append(('planar', [kWc], [P @ Rot @ AdcB.T], np.zeros(3)))
        # acceleration closure, in frame B: Ad(T_cB⁻¹) A_c − Ad(T_BA) Ad(T_pA⁻¹) A_p
        #   − S θ̈_ℓ − (velocity product terms) = 0, with the loop joint's θ̈_ℓ unknown
        TpA = np.asarray(lp.T_parent, float)
        TcB = np.asarray(lp.T_child, float)
        TB = T[c] @ TcB
        TA = T[p] @ TpA
        TBA = np.linalg.inv(TB) @ TA
        X_c = gf.Ad(np.linalg.inv(TcB))
        X_p = gf.Ad(TBA) @ gf.Ad(np.linalg.inv(TpA))
        VB = X_c @ V[c]
        VA_in_B = X_p @ V[p]
        rel = VB - VA_in_B                   # relative twist, in B
        # Eq. 5 across the loop joint, in B: A_B = Ad(T_BA) A_A + ρ̇ + ad(V_B) ρ with the
        # relative twist ρ = V_B − Ad(T_BA) V_A and ρ̇ = Σ s θ̈_ℓ along the free axes
        cols = [S] if lp.type in ('revolute', 'prismatic') else \
            (list(np.eye(6)[:3]) if lp.type == 'spherical' else [])
        kl = [key(_QDDL, 10 * i + m) for m in range(len(cols))]
        b = gf.ad(VB) @ rel
        blocks = [X_c]
        keys = [key(_A, c)]
        if p != 0:
            keys.append(key(_A, p))
            blocks.append(-X_p)
        for k_, s in zip(kl, cols):
            keys.append(k_)
            blocks.append(-s[:, None])
        self._factors.append(('hard6', keys, blocks, b))

    def factors(self, hard: Callable[[int], gtsam.noiseModel.Diagonal]) -> list:
        return [_jf(keys, blocks, b, hard(len(b))) for _kind, keys, blocks, b in self._factors]


def _frame_to_z(axis: np.ndarray) -> np.ndarray:
    """A rotation taking ``axis`` (joint frame) to z: rows = an orthonormal basis (e1, e2, a)."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    e = np.eye(3)[int(np.argmin(np.abs(a)))]
    e1 = np.cross(a, e)
    e1 /= np.linalg.norm(e1)
    return np.stack([e1, np.cross(a, e1), a])


def _is_planar(g: DynamicsGraph, T: np.ndarray) -> bool:
    """True when every revolute axis (tree and loops) is parallel, in the root frame."""
    axes = []
    for j in range(g.n):
        if g.model.joint_type[j] == 'revolute':
            axes.append(T[j + 1, :3, :3] @ g.model.axis[j])
    for lp in g.loops:
        if lp.type == 'revolute':
            axes.append(T[lp.child, :3, :3] @ lp.T_child[:3, :3] @ lp.axis)
    if not axes:
        return False
    a0 = axes[0]
    return all(np.linalg.norm(np.cross(a0, a)) < 1e-9 for a in axes)


# -- the full nonlinear graph (poses and twists as variables) -----------------------------

_T, _V, _Q, _QD = 'T', 'V', 'q', 'v'


def nonlinear_graph(dg: DynamicsGraph, q: np.ndarray, qd: np.ndarray,
                    qdd_known: Mapping[int, float], tau_known: Mapping[int, float],
                    sigma_known: float = 1e-9
                    ) -> tuple[gtsam.NonlinearFactorGraph, gtsam.Values]:
    """Seed 002's whole graph (Fig. 1/3) for an open tree: pose, twist (Eq. 4), accel (Eq. 5),
    wrench (Eq. 6) and torque (Eq. 7) ``CustomFactor``s, with the known q, q̇ and per joint
    θ̈ or τ as priors (σ = ``sigma_known``). Returns the graph and a neutral initial guess
    (identity poses, zero vectors). Loops are only in the linear graph."""
    if dg.loops:
        raise ValueError('nonlinear_graph: open trees only (loops: use linear_graph)')
    m = dg.model
    unit6 = gtsam.noiseModel.Unit.Create(6)
    unit1 = gtsam.noiseModel.Unit.Create(1)
    prior1 = gtsam.noiseModel.Isotropic.Sigma(1, sigma_known)
    graph = gtsam.NonlinearFactorGraph()
    init = gtsam.Values()
    identity = gtsam.Pose3()
    for c in range(1, dg.nb):
        init.insert(key(_T, c), identity)
        for kind in (_V, _A):
            init.insert(key(kind, c), np.zeros(6))
    for j in range(dg.n):
        init.insert(key(_F, j), np.zeros(6))
        for kind in (_Q, _QD, _QDD, _TAU):
            init.insert(key(kind, j), np.zeros(1))
    for j in range(dg.n):
        p, c = int(m.parent[j]), j + 1
        Th = gtsam.Pose3(dg.T_home[j])
        Ti, S = dg.T_home_inv[j], dg.S[j]
        graph.add(gtsam.PriorFactorVector(key(_Q, j), np.array([q[j]]), prior1))
        graph.add(gtsam.PriorFactorVector(key(_QD, j), np.array([qd[j]]), prior1))
        if j in qdd_known:
            graph.add(gtsam.PriorFactorVector(key(_QDD, j), np.array([qdd_known[j]]), prior1))
        if j in tau_known:
            graph.add(gtsam.PriorFactorVector(key(_TAU, j), np.array([tau_known[j]]), prior1))
        graph.add(_pose_factor(p, c, j, Th, S, unit6))
        graph.add(_twist_factor(p, c, j, Ti, S, unit6))
        graph.add(_accel_factor(p, c, j, Ti, S, unit6))
        graph.add(custom_factor([key(_F, j), key(_TAU, j)], unit1,
                                lambda xs, want, S=S: _filled(
                                    2, want, lambda H: gf.torque_error(xs[0], xs[1][0], S, H))))
    for c in range(1, dg.nb):
        graph.add(_wrench_factor(dg, c, unit6))
    return graph, init


def _filled(k: int, want: bool, error: Callable[[list | None], np.ndarray]
            ) -> tuple[np.ndarray, list | None]:
    """(e, J) of a ``graph_factors`` error that fills its ``k`` Jacobians in a list ``H``
    (the binder's convention, :func:`mbfg_ros.core.factors.custom_factor`)."""
    H = [None] * k if want else None
    return error(H), H


def _pose_factor(p: int, c: int, j: int, Th: gtsam.Pose3, S: np.ndarray,
                 noise: gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    if p == 0:     # the root is fixed at the identity: a unary factor on (T_c, θ)
        def err(xs, want):
            e, full = _filled(3, want, lambda H: gf.pose_error(gtsam.Pose3(), xs[0], xs[1][0],
                                                                Th, S, H))
            return e, (full[1:] if want else None)
        return custom_factor([key(_T, c), key(_Q, j)], noise, err, poses=(True, False))
    return custom_factor([key(_T, p), key(_T, c), key(_Q, j)], noise,
                         lambda xs, want: _filled(3, want, lambda H: gf.pose_error(
                             xs[0], xs[1], xs[2][0], Th, S, H)),
                         poses=(True, True, False))


def _recursion_factor(kind: str, p: int, tail: list[int], error, noise: gtsam.noiseModel.Base
                      ) -> gtsam.CustomFactor:
    """A factor whose first argument is the parent link's ``kind`` vector (twist or accel):
    a variable, or the fixed root's zero (then that key and its Jacobian are left out)."""
    zero = np.zeros(6)
    keys = ([key(kind, p)] if p else []) + tail

    def err(xs, want):
        head, args = (xs[0], xs[1:]) if p else (zero, xs)
        e, full = _filled(len(tail) + 1, want, lambda H: error(head, args, H))
        return e, ((full if p else full[1:]) if want else None)
    return custom_factor(keys, noise, err)


def _twist_factor(p: int, c: int, j: int, Ti: np.ndarray, S: np.ndarray,
                  noise: gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    """Eq. 4 over (V_p, V_c, θ, θ̇)."""
    return _recursion_factor(_V, p, [key(_V, c), key(_Q, j), key(_QD, j)],
                             lambda Vp, a, H: gf.twist_error(Vp, a[0], a[1][0], a[2][0], Ti, S,
                                                             H), noise)


def _accel_factor(p: int, c: int, j: int, Ti: np.ndarray, S: np.ndarray,
                  noise: gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    """Eq. 5 over (A_p, A_c, V_c, θ, θ̇, θ̈)."""
    return _recursion_factor(_A, p, [key(_A, c), key(_V, c), key(_Q, j), key(_QD, j),
                                     key(_QDD, j)],
                             lambda Ap, a, H: gf.accel_error(Ap, a[0], a[1], a[2][0], a[3][0],
                                                             a[4][0], Ti, S, H), noise)


def _wrench_factor(dg: DynamicsGraph, c: int, noise: gtsam.noiseModel.Base
                   ) -> gtsam.CustomFactor:
    j = c - 1
    kids = dg.children[c]
    keys = [key(_A, c), key(_V, c), key(_F, j), key(_T, c)]
    for k in kids:
        keys += [key(_F, k), key(_Q, k)]

    def err(xs, want):
        ch = [(xs[4 + 2 * i], xs[5 + 2 * i][0], dg.T_home_inv[k], dg.S[k])
              for i, k in enumerate(kids)]
        return _filled(len(keys), want, lambda H: gf.wrench_error(
            xs[0], xs[1], xs[2], xs[3].rotation().matrix(), ch, dg.G[c], dg.g, H))
    return custom_factor(keys, noise, err, poses=[k == 3 for k in range(len(keys))])


def solve_nonlinear(dg: DynamicsGraph, q: np.ndarray, qd: np.ndarray,
                    qdd_known: Mapping[int, float], tau_known: Mapping[int, float]
                    ) -> GraphSolution:
    """Levenberg-Marquardt on ``nonlinear_graph`` from a neutral guess (identity poses)."""
    graph, init = nonlinear_graph(dg, q, qd, qdd_known, tau_known)
    params = gtsam.LevenbergMarquardtParams()
    params.setRelativeErrorTol(1e-15)
    params.setAbsoluteErrorTol(1e-20)
    params.setMaxIterations(100)
    params.setLinearSolverType('MULTIFRONTAL_QR')
    vals = gtsam.LevenbergMarquardtOptimizer(graph, init, params).optimize()
    n = dg.n
    A = np.zeros((dg.nb, 6))
    for c in range(1, dg.nb):
        A[c] = vals.atVector(key(_A, c))
    return GraphSolution(qdd=np.array([vals.atVector(key(_QDD, j))[0] for j in range(n)]),
                         tau=np.array([vals.atVector(key(_TAU, j))[0] for j in range(n)]),
                         F=np.array([vals.atVector(key(_F, j)) for j in range(n)]), A=A,
                         W=np.zeros((0, 6)))
