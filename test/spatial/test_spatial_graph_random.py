"""Seed 002's dynamics graph on hand-built random trees, against a Pinocchio model built
programmatically from the same numbers (no URDF on either side).

The trees branch, mix revolute and prismatic joints along arbitrary unit axes, have random
joint origins, centres of mass, rotated inertias and a gravity in an arbitrary direction,
so that neither the graph nor the reference can lean on aligned axes, chains or the URDF
parsers. Besides τ and θ̈ (seed 002 Eq. 7 and the forward problem), the joint wrenches
``F_j`` (Eq. 6) are compared with Pinocchio's ``data.f`` (the wrench the parent applies
to body ``j`` through its joint, in the joint frame = our child link frame).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from mbfg_ros.spatial.dynamics_graph import ORDERINGS, DynamicsGraph, solve_nonlinear
from mbfg_ros.spatial.model import SpatialModel


TOL = 1e-9


def _rot(rng: np.random.Generator) -> np.ndarray:
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q @ np.diag(np.sign(np.diag(R)))
    return Q if np.linalg.det(Q) > 0 else -Q


def random_model(rng: np.random.Generator, n: int, branch: bool = True,
                 prismatic: float = 0.3) -> SpatialModel:
    """A random tree of ``n`` joints: joint ``j`` moves link ``j + 1`` (the loader's
    numbering), its parent link any earlier link when ``branch``."""
    parent = np.array([rng.integers(0, j + 1) if branch and j > 1 else j for j in range(n)])
    kinds = tuple('prismatic' if rng.random() < prismatic else 'revolute' for _ in range(n))
    T_home = np.zeros((n, 4, 4))
    for j in range(n):
        T_home[j] = np.eye(4)
        T_home[j, :3, :3] = _rot(rng)
        T_home[j, :3, 3] = rng.normal(size=3) * 0.4
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1)[:, None]
    nb = n + 1
    inertia = np.zeros((nb, 3, 3))
    for b in range(nb):
        R = _rot(rng)
        s = rng.uniform(0.05, 1.0, 3)      # principal second moments sum m x^2, ... (issue 26:
        inertia[b] = R @ np.diag(s.sum() - s) @ R.T      # the triangle inequality holds)
    g = rng.normal(size=3)
    g *= 9.81 / np.linalg.norm(g)
    inf = np.full(n, np.inf)
    return SpatialModel(
        source='random', link_names=tuple(f'link{b}' for b in range(nb)),
        joint_names=tuple(f'joint{j}' for j in range(n)), joint_type=kinds,
        parent=parent, child=np.arange(1, nb), T_home=T_home, axis=axis,
        mass=rng.uniform(0.3, 3.0, nb), com=rng.normal(size=(nb, 3)) * 0.2, inertia=inertia,
        gravity=g, lower=-inf, upper=inf, velocity_limit=inf, effort_limit=inf,
        actuated=np.ones(n, bool), q0=np.zeros(n))


def pinocchio_model(m: SpatialModel):
    """The same tree as a Pinocchio model: Pinocchio joint ``j + 1`` is our joint ``j``."""
    model = pin.Model()
    model.gravity = pin.Motion(np.concatenate([m.gravity, np.zeros(3)]))   # [linear; angular]
    for j in range(m.n):
        jm = (pin.JointModelRevoluteUnaligned(m.axis[j]) if m.joint_type[j] == 'revolute'
              else pin.JointModelPrismaticUnaligned(m.axis[j]))
        placement = pin.SE3(m.T_home[j, :3, :3].copy(), m.T_home[j, :3, 3].copy())
        jid = model.addJoint(int(m.parent[j]), jm, placement, m.joint_names[j])
        b = int(m.child[j])
        model.appendBodyToJoint(jid, pin.Inertia(float(m.mass[b]), m.com[b].copy(),
                                                 m.inertia[b].copy()), pin.SE3.Identity())
    return model


def _swap(x: np.ndarray) -> np.ndarray:
    """Pinocchio's [linear; angular] ↔ our [angular; linear]."""
    return np.concatenate([x[3:], x[:3]])


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


@pytest.mark.parametrize('seed', range(6))
def test_hand_built_trees_equal_pinocchio_under_every_ordering(seed):
    rng = np.random.default_rng(100 + seed)
    m = random_model(rng, n=int(rng.integers(3, 9)))
    pm = pinocchio_model(m)
    pd = pm.createData()
    dg = DynamicsGraph(m)
    worst: dict[str, float] = {}

    def note(name: str, err: float) -> None:
        worst[name] = max(worst.get(name, 0.0), err)

    for k in range(20):
        q, qd, qdd = rng.normal(size=(3, m.n))
        tau = pin.rnea(pm, pd, q, qd, qdd).copy()
        F_ref = np.array([_swap(pd.f[j + 1].vector) for j in range(m.n)])
        qdd_ref = pin.aba(pm, pd, q, qd, tau).copy()
        for ordering in ORDERINGS:
            inv = dg.inverse(q, qd, qdd, ordering)
            note('ID tau', _rel(inv.tau, tau))
            note('ID F', _rel(inv.F, F_ref))
            note('FD qdd', _rel(dg.forward(q, qd, tau, ordering).qdd, qdd_ref))
            acc = set(rng.choice(m.n, size=int(rng.integers(1, m.n)), replace=False).tolist())
            h = dg.hybrid(q, qd, {j: qdd_ref[j] for j in acc},
                          {j: tau[j] for j in range(m.n) if j not in acc}, ordering)
            note('hybrid', max(_rel(h.tau, tau), _rel(h.qdd, qdd_ref)))
    assert max(worst.values()) < TOL, worst


def test_seed_table3_orderings_on_a_hand_built_3r_arm():
    """Seed 002 Table III's hybrid 3R problem (θ̈1, τ2, τ3 known) under every ordering."""
    rng = np.random.default_rng(7)
    m = random_model(rng, 3, branch=False, prismatic=0.0)
    pm = pinocchio_model(m)
    pd = pm.createData()
    dg = DynamicsGraph(m)
    for _ in range(10):
        q, qd, qdd = rng.normal(size=(3, 3))
        tau = pin.rnea(pm, pd, q, qd, qdd).copy()
        for ordering in ORDERINGS:
            h = dg.hybrid(q, qd, {0: qdd[0]}, {1: tau[1], 2: tau[2]}, ordering)
            assert _rel(h.tau, tau) < TOL and _rel(h.qdd, qdd) < TOL, ordering


def test_nonlinear_graph_on_a_hand_built_tree():
    """The full graph (pose and twist factors too), solved by LM, gives the same answers."""
    rng = np.random.default_rng(11)
    m = random_model(rng, 6)
    pm = pinocchio_model(m)
    pd = pm.createData()
    dg = DynamicsGraph(m)
    q, qd, qdd = rng.normal(size=(3, m.n))
    tau = pin.rnea(pm, pd, q, qd, qdd).copy()
    inv = solve_nonlinear(dg, q, qd, {j: qdd[j] for j in range(m.n)}, {})
    assert _rel(inv.tau, tau) < 1e-8
    fwd = solve_nonlinear(dg, q, qd, {}, {j: tau[j] for j in range(m.n)})
    assert _rel(fwd.qdd, qdd) < 1e-8


def _perturbed(values, k: int, d: np.ndarray):
    import gtsam
    out = gtsam.Values(values)
    if _is_pose(values, k):
        out.update(k, values.atPose3(k).retract(d))
    else:
        out.update(k, values.atVector(k) + d)
    return out


def _is_pose(values, k: int) -> bool:
    try:
        values.atPose3(k)
    except RuntimeError:
        return False
    return True


@pytest.mark.parametrize('seed', range(3))
def test_the_nonlinear_graphs_factor_jacobians_at_random_values(seed):
    """Every factor of ``nonlinear_graph`` as GTSAM linearises it (the ``CustomFactor``
    wrappers' key order and the error functions together) against central differences of
    its whitened error, at random values that satisfy no factor (seed 002 Eqs. 4-7)."""
    import gtsam

    from mbfg_ros.spatial.dynamics_graph import nonlinear_graph
    rng = np.random.default_rng(200 + seed)
    m = random_model(rng, 5)
    dg = DynamicsGraph(m)
    q, qd, qdd, tau = rng.normal(size=(4, m.n))
    graph, init = nonlinear_graph(dg, q, qd, {0: qdd[0], 2: qdd[2]},
                                  {j: tau[j] for j in (1, 3, 4)})
    values = gtsam.Values()
    for k in init.keys():
        try:
            init.atPose3(k)
            values.insert(k, gtsam.Pose3.Expmap(rng.normal(size=6)))
        except RuntimeError:
            values.insert(k, rng.normal(size=init.atVector(k).shape))
    h = 1e-6
    for i in range(graph.size()):
        f = graph.at(i)
        jf = f.linearize(values)
        A, col = jf.getA(), 0
        for k in jf.keys():
            dim = 6 if _is_pose(values, k) else len(values.atVector(k))
            num = np.zeros((A.shape[0], dim))
            for d in range(dim):
                e = np.zeros(dim)
                e[d] = h
                # keep each JacobianFactor alive: getb() of a temporary reads freed memory
                jf_hi = f.linearize(_perturbed(values, k, e))
                jf_lo = f.linearize(_perturbed(values, k, -e))
                hi, lo = jf_hi.getb().copy(), jf_lo.getb().copy()
                num[:, d] = -(hi - lo) / (2 * h)
            ana = A[:, col:col + dim]
            scale = max(1.0, np.abs(num).max())
            assert np.abs(ana - num).max() < 1e-6 * scale, (i, gtsam.DefaultKeyFormatter(k))
            col += dim


def _dag(dg: DynamicsGraph, gfg, ordering) -> set[tuple[str, str]]:
    """The eliminated DAG's edges (frontal → parent) whose conditional block is nonzero.

    GTSAM's QR elimination leaves a zero-row factor on the separator when a variable's
    factors have no rows to spare, so its conditionals can carry exactly-zero blocks for
    variables that are structurally, not numerically, parents; those are left out."""
    import gtsam
    bn = gfg.eliminateSequential(dg.ordering(gfg, ordering), gtsam.EliminateQR)
    name = gtsam.DefaultKeyFormatter
    edges = set()
    for i in range(bn.size()):
        c = bn.at(i)
        keys, S, col = list(c.keys()), c.S(), 0
        for k in keys[1:]:
            dim = 6 if name(k)[0] in 'AF' else 1
            if np.abs(S[:, col:col + dim]).max() > 1e-12:
                edges.add((name(keys[0]), name(k)))
            col += dim
    return edges


@pytest.mark.parametrize('n', [3, 6])
def test_the_rnea_ordering_eliminates_to_algorithm_1(n):
    """Seed 002 Fig. 5d / Algorithm 1: under τ_n..τ_1, F_1..F_n, A_n..A_1 the inverse
    dynamics graph of an nR chain eliminates to τ_j ← F_j, F_j ← (A_j, F_{j+1}), F_n ← A_n,
    A_j ← A_{j-1} (joint j moves link j + 1 here; A of the fixed root is known)."""
    rng = np.random.default_rng(n)
    m = random_model(rng, n, branch=False, prismatic=0.0)
    dg = DynamicsGraph(m)
    q, qd, qdd = rng.normal(size=(3, n))
    gfg = dg.linear_graph(q, qd, dict(enumerate(qdd)), {})
    want = {(f't{j}', f'F{j}') for j in range(n)}
    want |= {(f'F{j}', f'A{j + 1}') for j in range(n)}
    want |= {(f'F{j}', f'F{j + 1}') for j in range(n - 1)}
    want |= {(f'A{c}', f'A{c - 1}') for c in range(2, n + 1)}
    assert _dag(dg, gfg, 'rnea') == want


def test_the_aba_dag_has_fewer_edges_than_the_crba_dag():
    """Seed 002 §V-A, Fig. 7: forward dynamics eliminated in the ABA order gives a DAG with
    fewer edges (less computation) than in the CRBA order."""
    rng = np.random.default_rng(4)
    m = random_model(rng, 6, branch=False, prismatic=0.0)
    dg = DynamicsGraph(m)
    q, qd, tau = rng.normal(size=(3, 6))
    gfg = dg.linear_graph(q, qd, {}, dict(enumerate(tau)))
    assert len(_dag(dg, gfg, 'aba')) < len(_dag(dg, gfg, 'crba'))


def test_seed_table3_md_and_custom_orders():
    """Seed 002 Table III (1-based there; joint j moves link j + 1 here): with θ̈1, τ2, τ3
    known, the MD order t1, a2, a3, V̇3, F1, V̇1, F2, V̇2, F3 and the CUSTOM order
    t1, a2, a3, F1, V̇1, V̇3, F3, V̇2, F2 both solve the hybrid problem, their DAGs have the
    same number of edges, and CUSTOM's ends on the clique {F2, V̇2}."""
    from mbfg_ros.spatial.dynamics_graph import key
    rng = np.random.default_rng(12)
    m = random_model(rng, 3, branch=False, prismatic=0.0)
    pm = pinocchio_model(m)
    pd = pm.createData()
    dg = DynamicsGraph(m)
    q, qd, qdd = rng.normal(size=(3, 3))
    tau = pin.rnea(pm, pd, q, qd, qdd).copy()
    qk, tk = {0: qdd[0]}, {1: tau[1], 2: tau[2]}
    gfg = dg.linear_graph(q, qd, qk, tk)
    orders = {'MD': ['t0', 'a1', 'a2', 'A3', 'F0', 'A1', 'F1', 'A2', 'F2'],
              'CUSTOM': ['t0', 'a1', 'a2', 'F0', 'A1', 'A3', 'F2', 'A2', 'F1']}
    edges = {}
    for name, seq in orders.items():
        keys = [key(s[0], int(s[1:])) for s in seq]
        h = dg.hybrid(q, qd, qk, tk, keys)
        assert _rel(h.tau, tau) < TOL and _rel(h.qdd, qdd) < TOL, name
        edges[name] = _dag(dg, gfg, keys)
    assert len(edges['MD']) == len(edges['CUSTOM']) == 13
    assert ('A2', 'F1') in edges['CUSTOM']          # the root clique {F2, V̇2}, 1-based
    with pytest.raises(ValueError, match='every unknown'):
        dg.hybrid(q, qd, qk, tk, [key('t', 0)])
