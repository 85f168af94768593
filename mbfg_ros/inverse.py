"""Inverse dynamics as a staged batch factor graph (seed 000 §5.3, §7.2, Fig. 4).

Given samples z_k of prescribed coordinates (any coordinates of q: a crank
angle, a relative angle, or the x, y of an end-effector point, in which case
the position factors solve the inverse kinematics), find q, q̇, q̈ at every
sample and the generalized forces Q_k that produce the motion. Q is the
force *added* to the modelled ones (gravity, springs, external loads) and
has zero priors on every coordinate that no actuator drives (seed 000 §5.3).

Variables per sample k: the stacked state ``x_k = [q_k, q̇_k, q̈_k]`` (3n)
and ``Q_k`` (n); during stage 1 the rates of x_k are held at their initial
values by a linear prior (they are not yet part of the problem).
Stages (seed 000 §7.2; each stage is a batch Gauss-Newton or
Levenberg-Marquardt solve of the whole graph so far, warm-started by the
previous stage):

1. q, priors on q_k[z] = z_k, position constraints f_dpc (Eq. 24), soft
   equality f_eq between consecutive q;
2. + q̇, q̈ and trapezoidal factors f_ti (Eq. 23);
3. + velocity constraints f_dvc (Eq. 25);
4. + the actuator efforts τ_k, f_didyn (Eq. 28, q̈(q, q̇, Q) − q̈) with
   Q = S_act τ, and a weak *minimum-torque* prior on τ (seed 002 §VII),
   which leaves a unique answer when the actuation is redundant and does
   not bias it otherwise. Seed 000 carries the full Q (n) with tight zero
   priors on the unactuated components; Q = S_act τ is that prior made
   exact, and it shrinks the per-sample variable from n to n_act (the
   ``levenberg_marquardt`` path keeps the seed's full-Q form; the tests
   compare the two).

Solver (``solver='gauss_newton'``, the default): each Gauss-Newton
iteration linearises the nonlinear factors of *all* samples in one numpy
pass (:class:`BatchModel`, the equations of :func:`step_error` over a
sample axis; the tests compare the two), builds the whitened linear graph
directly as GTSAM JacobianFactors (per sample one on (x_k, τ_k), one on
(x_k, x_{k+1}) for the linear f_eq, f_ti), eliminates it multifrontally in
chain order (Cholesky, GTSAM's default, falling back to QR for a stage whose
fronts it finds indeterminate; ``elimination='qr'`` forces QR) and adds the
step. BLAS runs single-threaded meanwhile (see ``_single_blas_thread``).
It stops when the step, or the next step predicted from the last two, is
below ``step_tol``. ``'levenberg_marquardt'``
runs GTSAM's optimizer over the same factors as per-sample CustomFactors
(slow: one Python callback per sample and linearisation).

Two additions to the seed's graph, both forced by the maths:

* the trapezoidal rule alone leaves a (−1)^k mode of q̇ and q̈ of every
  coordinate undetermined (its characteristic root is −1; a prior on the
  initial state only pins it through the whole chain, which GTSAM rightly
  reports as indeterminate for 2000 samples); weak priors
  on q̇_k, q̈_k from the direct-kinematics initialisation remove it. In
  stage 1 the same priors hold the rates, not yet coupled to anything;
* initialisation by *direct kinematics*: at each sample the position problem
  with the prescribed coordinates (Newton from the previous sample), then
  q̇ and q̈ from the velocity and acceleration problems (seed 000 Eqs. 10,
  12) with the spline's ż, z̈. Each stage then converges in one or two
  iterations. With ``staged=False`` only the final graph is solved, also
  initialised with Q from the direct (virtual power) inverse dynamics.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import gtsam
import numpy as np

from .dynamics import System, forward_accel
from .errors import AssemblyError, MbfgError
from .inverse_direct import (DirectInverseDynamics, LeanKinematics, angle_hess,
                             angle_hess_matrix, angle_local)
from .kinematics import selector
from .trajectory import derivatives

__all__ = ['InverseConfig', 'InverseResult', 'inverse_dynamics', 'direct_kinematics',
           'step_error', 'StepModel', 'BatchModel']


@dataclass(frozen=True)
class InverseConfig:
    """Options of :func:`inverse_dynamics` (sigmas are standard deviations)."""

    staged: bool = True              # the seed's four stages; False: one batch solve
    solver: str = 'gauss_newton'     # or 'levenberg_marquardt'
    elimination: str = 'cholesky'    # gauss_newton's linear solves: 'cholesky' or 'qr'
    max_iterations: int = 30
    step_tol: float = 1e-9           # stop when max |Δ| < step_tol * max(1, max |x_init|)
    sigma_prior: float = 1e-6        # q_k[z] = z_k
    sigma_qd_prior: float = 1e-3     # q̇_k prior from direct kinematics (weak)
    sigma_qdd_prior: float = 1e-2    # q̈_k prior from direct kinematics (weak)
    sigma_pos: float = 1e-6          # f_dpc
    sigma_vel: float = 1e-6          # f_dvc
    sigma_int: float = 1e-6          # f_ti
    sigma_eq: float = 10.0           # f_eq (seed Table 2: variance 1e2)
    sigma_dyn: float = 1e-6          # f_didyn
    sigma_zero: float = 1e-6         # zero prior on unactuated Q components
    sigma_tau: float = 10.0          # minimum-torque prior on actuated components
    sg_window: int = 31              # Savitzky-Golay window (samples) of the start's ż, z̈
    sg_order: int = 5                # and its polynomial order (trajectory.derivatives)


class InverseResult(NamedTuple):
    """Inverse dynamics along a trajectory (rows: samples)."""

    t: np.ndarray            # (N,)
    q: np.ndarray            # (N, n)
    qd: np.ndarray
    qdd: np.ndarray
    Q: np.ndarray            # (N, n) generalized force added to the modelled ones
    tau: np.ndarray          # (N, n_act) Q on the actuated coordinates
    actuators: tuple[int, ...]
    z_idx: tuple[int, ...]
    iterations: tuple[int, ...]   # per stage


class StepModel:
    """What the per-sample factor needs, built once (immutable)."""

    def __init__(self, sys: System, z_idx: Sequence[int]) -> None:
        self.sys = sys
        self.n, self.m = sys.n, sys.m
        self.lean = LeanKinematics(sys.constraints)
        self.z_idx = np.array([int(i) for i in z_idx], dtype=int)
        self.B = selector(self.z_idx, self.n)


def step_error(model: StepModel, stage: int, zk: np.ndarray, zdk: np.ndarray,
               zddk: np.ndarray, xs: Sequence[np.ndarray], want: bool):
    """Errors of one sample for ``stage`` (1-4); variables [x] (stages 1-3) or [x, Q].

    x = [q, q̇, q̈].

    Rows: Φ(q) (f_dpc, Eq. 24); q[z] − z_k (prior); from stage 3 Φq q̇
    (f_dvc, Eq. 25);
    stage 4 q̈(q, q̇, Q) − q̈ (f_didyn, Eq. 28).
    """
    n, m = model.n, model.m
    d = len(model.z_idx)
    z = model.z_idx
    x = xs[0]
    q = x[:n]
    if stage == 1:
        phi = model.lean.phi(q)
        e = np.concatenate((phi, q[z] - zk))
        if not want:
            return e, None
        J1 = np.zeros((m + d, 3 * n))
        J1[:m, :n] = model.lean.phi_q(q)
        J1[m:, :n] = model.B
        return e, [J1]
    qd, qdd = x[n:2 * n], x[2 * n:]
    kt = model.lean.terms(q, qd)
    parts = [kt.phi, q[z] - zk]
    if stage >= 3:
        parts.append(kt.phi_q @ qd)
    if stage >= 4:
        a = forward_accel(model.sys, q, qd, Q_extra=xs[1], jacobians=want, jac_Q=want,
                          terms=kt)
        parts.append(a.qdd - qdd)
    e = np.concatenate(parts)
    if not want:
        return e, None
    rows = len(e)
    Jq = np.zeros((rows, n))
    Jv = np.zeros((rows, 2 * n))
    Jq[:m] = kt.phi_q
    Jq[m:m + d] = model.B
    r = m + d
    if stage >= 3:
        Jq[r:r + m] = kt.phi_q_dot
        Jv[r:r + m, :n] = kt.phi_q
        r += m
    if stage < 4:
        return e, [np.hstack((Jq, Jv))]
    Jq[r:] = a.qdd_q
    Jv[r:, :n] = a.qdd_qd
    Jv[r:, n:] = -np.eye(n)
    JQ = np.zeros((rows, n))
    JQ[r:] = a.qdd_Q
    return e, [np.hstack((Jq, Jv)), JQ]


class BatchModel:
    """Stage errors and Jacobians of *all* samples in one numpy pass (immutable).

    The same equations as :func:`step_error` (which stays the per-sample
    reference; the tests compare the two), written over a leading sample
    axis: distance and slider rows through the constant tensor of
    :class:`LeanKinematics`, angle rows through its u = P q + p0 map with the
    formulas of ``angle_local`` on arrays, and q̈(q, q̇, Q) by batched
    inverses of the augmented matrices. This replaces one Python callback per
    sample and linearisation (the cost of the CustomFactor graph).
    """

    def __init__(self, sys: System, z_idx: Sequence[int]) -> None:
        self.sys = sys
        lean = LeanKinematics(sys.constraints)
        self.n, self.m, self.mq, self.K = sys.n, sys.m, lean.mq, lean.K
        self.Tm, self.Tl, self.J0, self.phi0 = lean.Tm, lean.Tl, lean.J0, lean.phi0
        self.P, self.P3, self.p0 = lean.P, lean.P3, lean.p0
        self.rows = np.asarray(sys.rows, dtype=int)
        self.z_idx = np.array([int(i) for i in z_idx], dtype=int)
        self.B = selector(self.z_idx, self.n)

    def _angles(self, q: np.ndarray, qd: np.ndarray):
        """Angle-row quantities (N, K) of ``angle_local``, for all samples at once."""
        N, K = len(q), self.K
        U = np.moveaxis((q @ self.P.T + self.p0).reshape(N, K, 5), 2, 0)
        Ud = np.moveaxis((qd @ self.P.T).reshape(N, K, 5), 2, 0)
        phi, g, hd, _, gam, cache = angle_local(U, Ud, np.cos, np.sin)
        return phi, np.stack(g, axis=2), np.stack(hd, axis=2), np.stack(gam, axis=2), cache

    def terms(self, q: np.ndarray, qd: np.ndarray):
        """Φ (N, m), Φq, Φ̇q, (Φ̇q q̇)_q (N, m, n) and the angle-row cache."""
        N, n, m, mq, K = len(q), self.n, self.m, self.mq, self.K
        phi = np.empty((N, m))
        J = np.empty((N, m, n))
        Jd = np.empty((N, m, n))
        G = np.zeros((N, m, n))
        cache = None
        if mq:
            J[:, :mq] = (q @ self.Tm.T).reshape(N, mq, n) + self.J0
            phi[:, :mq] = 0.5 * np.einsum('kij,kj->ki', J[:, :mq] + self.J0, q) + self.phi0
            Jd[:, :mq] = (qd @ self.Tm.T).reshape(N, mq, n)
        if K:
            p, g, hd, gam, cache = self._angles(q, qd)
            phi[:, mq:] = p
            J[:, mq:] = np.einsum('nkj,kjm->nkm', g, self.P3)
            Jd[:, mq:] = np.einsum('nkj,kjm->nkm', hd, self.P3)
            G[:, mq:] = np.einsum('nkj,kjm->nkm', gam, self.P3)
        return phi, J, Jd, G, cache

    def hess_vec(self, cache, v: np.ndarray) -> np.ndarray:
        """(Φq v)_q (N, m, n) for one v per sample."""
        N, n, mq = len(v), self.n, self.mq
        H = np.empty((N, self.m, n))
        if mq:
            H[:, :mq] = (v @ self.Tm.T).reshape(N, mq, n)
        if self.K:
            Vu = np.moveaxis((v @ self.P.T).reshape(N, self.K, 5), 2, 0)
            hu = np.stack(angle_hess(cache, Vu), axis=2)
            H[:, mq:] = np.einsum('nkj,kjm->nkm', hu, self.P3)
        return H

    def hess_weighted(self, cache, lam: np.ndarray) -> np.ndarray:
        """Σ_k λ_k Φqq^k (N, n, n) for one λ (N, m) per sample."""
        N, n, mq, K = len(lam), self.n, self.mq, self.K
        H = (lam[:, :mq] @ self.Tl).reshape(N, n, n) if mq else np.zeros((N, n, n))
        if K:
            Hu = angle_hess_matrix(cache)          # (N, K, 5, 5)
            HP = np.einsum('nkab,kbj->nkaj', Hu * lam[:, mq:, None, None], self.P3)
            H = H + np.einsum('kai,nkaj->nij', self.P3, HP)
        return H

    def forces(self, q: np.ndarray, qd: np.ndarray):
        """Q (N, n), Q_q, Q_qd (N, n, n) of the modelled forces."""
        N, n, f = len(q), self.n, self.sys.forces
        if not f.state_dependent:
            return np.broadcast_to(f.Q0, (N, n)), np.zeros((N, n, n)), np.zeros((N, n, n))
        out = [f.evaluate(q[k], qd[k], None, jacobians=True) for k in range(N)]
        return (np.array([o.Q for o in out]), np.array([o.Q_q for o in out]),
                np.array([o.Q_qd for o in out]))

    def errors(self, stage: int, X: np.ndarray, Qx: np.ndarray | None, z: np.ndarray):
        """Stacked errors (N, rows) and Jacobians wrt x (N, rows, 3n) and Q (stage 4)."""
        n, m = self.n, self.m
        N, d = len(X), len(self.z_idx)
        q, qd, qdd = X[:, :n], X[:, n:2 * n], X[:, 2 * n:]
        phi, J, Jd, G, cache = self.terms(q, qd)
        rows = m + d + (m if stage >= 3 else 0) + (n if stage >= 4 else 0)
        e = np.empty((N, rows))
        Jx = np.zeros((N, rows, 3 * n))
        e[:, :m] = phi
        e[:, m:m + d] = q[:, self.z_idx] - z
        Jx[:, :m, :n] = J
        Jx[:, m:m + d, :n] = self.B
        r = m + d
        if stage >= 3:
            e[:, r:r + m] = np.einsum('kij,kj->ki', J, qd)
            Jx[:, r:r + m, :n] = Jd
            Jx[:, r:r + m, n:2 * n] = J
            r += m
        if stage < 4:
            return e, Jx, None
        ir = self.rows
        nr = len(ir)
        F, Fq, Fqd = self.forces(q, qd)
        A = np.zeros((N, n + nr, n + nr))
        A[:, :n, :n] = self.sys.mass_matrix(q)
        A[:, :n, n:] = np.swapaxes(J[:, ir], 1, 2)
        A[:, n:, :n] = J[:, ir]
        Ainv = np.linalg.inv(A)
        Jdr = Jd[:, ir]
        c = -np.einsum('kij,kj->ki', Jdr, qd)
        rhs = np.concatenate((F + Qx, c), axis=1)
        sol = np.einsum('kij,kj->ki', Ainv, rhs)
        acc, lam = sol[:, :n], sol[:, n:]
        lam_full = np.zeros((N, m))
        lam_full[:, ir] = lam
        top_q = Fq - self.hess_weighted(cache, lam_full)
        bot_q = -(G[:, ir] + self.hess_vec(cache, acc)[:, ir])
        Ann, Anr = Ainv[:, :n, :n], Ainv[:, :n, n:]
        e[:, r:] = acc - qdd
        Jx[:, r:, :n] = Ann @ top_q + Anr @ bot_q
        Jx[:, r:, n:2 * n] = Ann @ Fqd - 2.0 * (Anr @ Jdr)
        Jx[:, r:, 2 * n:] = -np.eye(n)
        JQ = np.zeros((N, rows, n))
        JQ[:, r:] = Ann
        return e, Jx, JQ


class _StageSystem:
    """The whitened linear system of one stage about the current estimate, as GTSAM factors.

    Two JacobianFactors per sample k, every row divided by its sigma (so the
    factors carry unit noise and their sum of squares is the graph's): one on
    (x_k, τ_k) stacking f_dpc, the z prior, f_dvc, f_didyn (linearised by
    :class:`BatchModel`), the minimum-torque prior on τ_k and the weak rate
    prior on x_k; one on (x_k, x_{k+1}) stacking f_eq and f_ti. The constant
    blocks are filled once per stage; each iteration overwrites the nonlinear
    rows and the right-hand sides. Keeping the two apart keeps the front that
    eliminates τ_k small.
    """

    def __init__(self, model: BatchModel, stage: int, t: np.ndarray, z: np.ndarray,
                 rates0: np.ndarray, act: Sequence[int], cfg: InverseConfig) -> None:
        n, m, N = model.n, model.m, len(t)
        d = len(model.z_idx)
        self.model, self.stage, self.z, self.rates0, self.N = model, stage, z, rates0, N
        self.qr = False      # set when Cholesky elimination failed once (see _eliminate)
        self._sigma_eq, self._sigma_int = cfg.sigma_eq, cfg.sigma_int
        s = [np.full(m, cfg.sigma_pos), np.full(d, cfg.sigma_prior)]
        if stage >= 3:
            s.append(np.full(m, cfg.sigma_vel))
        if stage >= 4:
            s.append(np.full(n, cfg.sigma_dyn))
        self.w_nl = 1.0 / np.concatenate(s)
        self.r_nl = r = len(self.w_nl)
        self.act = list(act)
        n_act = len(self.act)
        self.w_Q = np.full(n_act, 1.0 / cfg.sigma_tau)
        self.r_Q = n_act if stage >= 4 else 0
        self.Qfull = np.zeros((N, n)) if stage >= 4 else None
        self.w_rate = 1.0 / np.concatenate((np.full(n, cfg.sigma_qd_prior),
                                            np.full(n, cfg.sigma_qdd_prior)))
        self.r1 = r1 = r + self.r_Q + 2 * n
        self.Ax = np.zeros((N, r1, 3 * n))
        self.AQ = np.zeros((N, r1, n_act)) if stage >= 4 else None
        self.b1 = np.zeros((N, r1))
        if stage >= 4:
            self.AQ[:, r:r + n_act] = np.diag(self.w_Q)
        self.Ax[:, r + self.r_Q:, n:] = np.diag(self.w_rate)
        r2 = n + (2 * n if stage >= 2 else 0)
        self.B0 = np.zeros((N - 1, r2, 3 * n))
        self.B1 = np.zeros((N - 1, r2, 3 * n))
        self.b2 = np.zeros((N - 1, r2))
        eye = np.eye(n)
        we = 1.0 / cfg.sigma_eq
        self.B0[:, :n, :n] = -we * eye
        self.B1[:, :n, :n] = we * eye
        if stage >= 2:
            wi = 1.0 / cfg.sigma_int
            h = 0.5 * np.diff(t)[:, None, None]
            self.B0[:, n:2 * n, :n] = -wi * eye
            self.B0[:, n:2 * n, n:2 * n] = -wi * h * eye
            self.B0[:, 2 * n:, n:2 * n] = -wi * eye
            self.B0[:, 2 * n:, 2 * n:] = -wi * h * eye
            self.B1[:, n:2 * n, :n] = wi * eye
            self.B1[:, n:2 * n, n:2 * n] = -wi * h * eye
            self.B1[:, 2 * n:, n:2 * n] = wi * eye
            self.B1[:, 2 * n:, 2 * n:] = -wi * h * eye
        self.h = 0.5 * np.diff(t)[:, None]
        self.unit1 = gtsam.noiseModel.Unit.Create(r1)
        self.unit2 = gtsam.noiseModel.Unit.Create(r2)
        self.xk = [_key('x', k) for k in range(N)]
        self.fk = [_key('f', k) for k in range(N)]
        self.ordering = gtsam.Ordering()
        for k in range(N):
            if stage >= 4:
                self.ordering.push_back(self.fk[k])
            self.ordering.push_back(self.xk[k])
        keys = gtsam.KeyVector()
        for k in range(N):
            keys.append(self.xk[k])
        for k in range(N if stage >= 4 else 0):
            keys.append(self.fk[k])
        self.keys = keys

    def linearize(self, X: np.ndarray, tau: np.ndarray | None) -> gtsam.GaussianFactorGraph:
        """The factor graph of the stage linearised at (X, τ); Q = S_act τ."""
        n, r, N = self.model.n, self.r_nl, self.N
        Qx = None
        if tau is not None:
            Qx = self.Qfull
            Qx[:, self.act] = tau
        e, Jx, JQ = self.model.errors(self.stage, X, Qx, self.z)
        w = self.w_nl[:, None]
        self.Ax[:, :r] = Jx * w
        b1 = self.b1
        b1[:, :r] = -e * self.w_nl
        if JQ is not None:
            self.AQ[:, :r] = JQ[:, :, self.act] * w
            b1[:, r:r + self.r_Q] = -tau * self.w_Q
        b1[:, r + self.r_Q:] = -(X[:, n:] - self.rates0) * self.w_rate
        q, qd, qdd = X[:, :n], X[:, n:2 * n], X[:, 2 * n:]
        b2 = self.b2
        b2[:, :n] = -(q[1:] - q[:-1]) / self._sigma_eq
        if self.stage >= 2:
            b2[:, n:2 * n] = -(q[1:] - q[:-1] - self.h * (qd[:-1] + qd[1:])) / self._sigma_int
            b2[:, 2 * n:] = -(qd[1:] - qd[:-1] - self.h * (qdd[:-1] + qdd[1:])) / self._sigma_int
        g = gtsam.GaussianFactorGraph()
        xk, fk, Ax, AQ, u1 = self.xk, self.fk, self.Ax, self.AQ, self.unit1
        if AQ is not None:
            for k in range(N):
                g.add(gtsam.JacobianFactor(xk[k], Ax[k], fk[k], AQ[k], b1[k], u1))
        else:
            for k in range(N):
                g.add(gtsam.JacobianFactor(xk[k], Ax[k], b1[k], u1))
        B0, B1, u2 = self.B0, self.B1, self.unit2
        for k in range(N - 1):
            g.add(gtsam.JacobianFactor(xk[k], B0[k], xk[k + 1], B1[k], b2[k], u2))
        return g


def _eliminate(graph: gtsam.GaussianFactorGraph, system: _StageSystem, cfg: InverseConfig
               ) -> gtsam.GaussianBayesTree:
    """Multifrontal elimination of one linearised stage, Cholesky first if configured.

    GTSAM's default (``EliminatePreferCholesky``) forms each front's normal
    equations: about 2x faster than QR here. It squares the condition number,
    and with constraint rows weighted 1e6 against f_eq's 0.1 GTSAM may call a
    front indeterminate; then this stage falls back to QR (``system.qr``).
    """
    if cfg.elimination == 'cholesky' and not system.qr:
        try:
            return graph.eliminateMultifrontal(system.ordering)
        except RuntimeError:
            system.qr = True
    return graph.eliminateMultifrontal(system.ordering, gtsam.EliminateQR)


def _gauss_newton(system: _StageSystem, X: np.ndarray, Qx: np.ndarray | None,
                  cfg: InverseConfig) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Batch Gauss-Newton: linearise in numpy, eliminate with GTSAM's QR, add the step.

    All variables are vectors, so the retraction is addition. Stops when
    max |Δ| < ``step_tol`` times the variables' scale (no extra linearisation
    to confirm convergence).
    """
    N, w = X.shape
    scale = max(1.0, float(np.max(np.abs(X))),
                float(np.max(np.abs(Qx))) if Qx is not None else 0.0)
    step = np.inf
    for it in range(1, cfg.max_iterations + 1):
        graph = system.linearize(X, Qx)
        delta = _eliminate(graph, system, cfg).optimize()
        v = delta.vector(system.keys)
        X = X + v[:N * w].reshape(N, w)
        if Qx is not None:
            Qx = Qx + v[N * w:].reshape(N, -1)
        prev, step = step, float(np.max(np.abs(v), initial=0.0))
        # Converged when this step, or the next one predicted from the observed
        # linear contraction (step / prev, required < 0.1), is below the tolerance.
        if step <= cfg.step_tol * scale or (it > 1 and step < 0.1 * prev
                                            and step * step / prev <= cfg.step_tol * scale):
            return X, Qx, it
    raise MbfgError(f'inverse dynamics did not converge in {cfg.max_iterations} '
                    f'Gauss-Newton iterations (last step {step:.3g})')


def _gtsam_error(fn: Callable, keys: tuple[int, ...], this: gtsam.CustomFactor,
                 values: gtsam.Values, jacobians: list | None) -> np.ndarray:
    e, J = fn([values.atVector(k) for k in keys], jacobians is not None)
    if jacobians is not None:
        for i, Ji in enumerate(J):
            jacobians[i] = np.asfortranarray(Ji)
    return e


def _key(c: str, k: int) -> int:
    return gtsam.symbol(c, k)


def _prescription(sys: System, t: np.ndarray, z: np.ndarray, z_idx: Sequence[int],
                  zd: np.ndarray | None, zdd: np.ndarray | None):
    """Checked z_idx, the rates ż, z̈ (from ``t`` if not given) and the independent rows."""
    z_idx = np.asarray(z_idx, dtype=int)
    if zd is None or zdd is None:
        zd, zdd = derivatives(t, z)
    rows = np.asarray(sys.rows, dtype=int)
    if len(rows) + z.shape[1] != sys.n:
        raise MbfgError(f'{z.shape[1]} prescribed coordinates for a mechanism with {sys.dof} '
                        'degrees of freedom: prescribe exactly one coordinate per degree of '
                        'freedom')
    return z_idx, zd, zdd, rows


def direct_kinematics(sys: System, t: np.ndarray, z: np.ndarray, z_idx: Sequence[int],
                      zd: np.ndarray | None = None, zdd: np.ndarray | None = None,
                      q_guess: np.ndarray | None = None, tol: float = 1e-12
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, q̇, q̈ at every sample from the position, velocity and acceleration problems.

    Newton on ``[Φr(q); q[z] − z_k] = 0`` from the previous sample (first
    from ``q_guess`` or the assembled pose), then seed 000 Eqs. 10 and 12
    with ``[Φr_q; B]``. For speed the sequential pass takes one Newton step
    per sample (from the extrapolation of the two previous samples, which
    keeps the assembly branch), then all samples are polished together by
    batched Newton steps, and q̇, q̈ are batched solves. If any sample does
    not converge this way, the samples are solved one at a time to full
    convergence instead (which names the failing sample).

    :raises AssemblyError: naming the sample (index and time) where the
        prescribed pose cannot be assembled.
    """
    n = sys.n
    z_idx, zd, zdd, rows = _prescription(sys, t, z, z_idx, zd, zdd)
    N, d = z.shape
    r = len(rows)
    batch = BatchModel(sys, z_idx)
    q0 = np.array(sys.q0 if q_guess is None else q_guess, dtype=float)
    Q_ = _positions_batched(sys, batch, z, q0, tol)
    if Q_ is None:
        return _direct_kinematics_sequential(sys, t, z, z_idx, zd, zdd, q_guess, tol)
    A = np.zeros((N, n, n))
    A[:, np.arange(r, n), z_idx] = 1.0
    zero = np.zeros((N, n))
    A[:, :r] = batch.terms(Q_, zero)[1][:, rows]
    bad = np.flatnonzero(np.linalg.cond(A) > 1e10)
    if len(bad):
        k = int(bad[0])
        raise AssemblyError(f'the prescribed coordinates do not determine the pose at '
                            f'sample {k} (t={t[k]:.6g} s): singular configuration',
                            source=sys.mech.source, path='trajectory')
    QD = np.linalg.solve(A, np.concatenate((np.zeros((N, r)), zd), axis=1)[..., None])[..., 0]
    Jd = batch.terms(Q_, QD)[2][:, rows]
    c = -np.einsum('kij,kj->ki', Jd, QD)
    QDD = np.linalg.solve(A, np.concatenate((c, zdd), axis=1)[..., None])[..., 0]
    return Q_, QD, QDD


def _positions_batched(sys: System, batch: BatchModel, z: np.ndarray, q0: np.ndarray,
                       tol: float) -> np.ndarray | None:
    """Positions of all samples (see :func:`direct_kinematics`), None if any fails."""
    n = sys.n
    N, d = z.shape
    z_idx = batch.z_idx
    rows = batch.rows
    r = len(rows)
    lean = LeanKinematics(sys.constraints)
    scale = max(1.0, float(np.max(np.abs(q0))))
    zero = np.zeros(n)
    A = np.zeros((n, n))
    A[np.arange(r, n), z_idx] = 1.0
    rhs = np.zeros(n)
    Q_ = np.empty((N, n))
    q = q0.copy()
    for k in range(N):
        if k >= 2:
            q = 2 * Q_[k - 1] - Q_[k - 2]
        q[z_idx] = z[k]
        for _ in range(30 if k == 0 else 1):
            kt = lean.terms(q, zero)
            phi = kt.phi[rows]
            if k == 0 and np.max(np.abs(phi), initial=0.0) <= tol * scale ** 2:
                break
            A[:r] = kt.phi_q[rows]
            rhs[:r] = -phi
            try:
                step = np.linalg.solve(A, rhs)
            except np.linalg.LinAlgError:
                return None
            norm = float(np.max(np.abs(step)))
            if norm > 0.5 * scale:
                step *= 0.5 * scale / norm
            q = q + step
        if not np.all(np.isfinite(q)):
            return None
        Q_[k] = q
    AA = np.zeros((N, n, n))
    AA[:, np.arange(r, n), z_idx] = 1.0
    rhs = np.zeros((N, n, 1))
    zero = np.zeros((N, n))
    for _ in range(30):
        phi, J = batch.terms(Q_, zero)[:2]
        if np.max(np.abs(phi[:, rows]), initial=0.0) <= tol * scale ** 2:
            break
        AA[:, :r] = J[:, rows]
        rhs[:, :r, 0] = -phi[:, rows]
        try:
            step = np.linalg.solve(AA, rhs)[..., 0]
        except np.linalg.LinAlgError:
            return None
        norm = np.max(np.abs(step), axis=1, keepdims=True)
        step *= np.minimum(1.0, 0.5 * scale / np.maximum(norm, 1e-300))
        Q_ = Q_ + step
        if not np.all(np.isfinite(Q_)):
            return None
    else:
        return None
    if np.max(np.abs(phi), initial=0.0) > 1e-8 * scale ** 2:
        return None
    return Q_


def _direct_kinematics_sequential(sys: System, t: np.ndarray, z: np.ndarray, z_idx: Sequence[int],
                      zd: np.ndarray | None = None, zdd: np.ndarray | None = None,
                      q_guess: np.ndarray | None = None, tol: float = 1e-12
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`direct_kinematics` one sample at a time (its fallback; the exact diagnosis)."""
    n = sys.n
    z_idx, zd, zdd, rows = _prescription(sys, t, z, z_idx, zd, zdd)
    N, d = z.shape
    r = len(rows)
    lean = LeanKinematics(sys.constraints)
    q = np.array(sys.q0 if q_guess is None else q_guess, dtype=float)
    Q_, QD, QDD = np.zeros((N, n)), np.zeros((N, n)), np.zeros((N, n))
    A = np.zeros((n, n))
    A[np.arange(r, n), z_idx] = 1.0
    scale = max(1.0, float(np.max(np.abs(q))))
    prev = None
    for k in range(N):
        if prev is not None and k >= 2:
            q = 2 * Q_[k - 1] - Q_[k - 2]     # extrapolate along the path
        q[z_idx] = z[k]
        ok = False
        for _ in range(30):
            phi = lean.phi(q)[rows]
            if np.max(np.abs(phi), initial=0.0) <= tol * scale ** 2:
                ok = True
                break
            A[:r] = lean.phi_q(q)[rows]
            try:
                step = np.linalg.solve(A, np.concatenate((-phi, np.zeros(d))))
            except np.linalg.LinAlgError:
                break
            norm = float(np.max(np.abs(step)))
            if norm > 0.5 * scale:
                step *= 0.5 * scale / norm
            q = q + step
            if not np.all(np.isfinite(q)):
                break
        if ok:
            res = np.max(np.abs(sys.constraints.phi(q)), initial=0.0)
            ok = res <= 1e-8 * scale ** 2
        if not ok:
            names = ', '.join(f'{sys.names[i]}={v:.6g}' for i, v in zip(z_idx, z[k]))
            raise AssemblyError(f'the prescribed pose cannot be assembled at sample {k} '
                                f'(t={t[k]:.6g} s: {names})', source=sys.mech.source,
                                path='trajectory')
        kt = lean.terms(q, np.zeros(n))
        A[:r] = kt.phi_q[rows]
        if np.linalg.cond(A) > 1e10:
            raise AssemblyError(f'the prescribed coordinates do not determine the pose at '
                                f'sample {k} (t={t[k]:.6g} s): singular configuration',
                                source=sys.mech.source, path='trajectory')
        qd = np.linalg.solve(A, np.concatenate((np.zeros(r), zd[k])))
        Jd = lean.terms(q, qd).phi_q_dot[rows]
        qdd = np.linalg.solve(A, np.concatenate((-(Jd @ qd), zdd[k])))
        Q_[k], QD[k], QDD[k] = q, qd, qdd
        prev = q
    return Q_, QD, QDD


def _linear(jf: gtsam.JacobianFactor, keys: Sequence[int], dim: int
            ) -> gtsam.LinearContainerFactor:
    """A linear factor in a nonlinear graph (exact: linearised about zero)."""
    zero = gtsam.Values()
    for k in keys:
        zero.insert(k, np.zeros(dim))
    return gtsam.LinearContainerFactor(jf, zero)


def _trapezoid_factor(n: int, h: float, keys: tuple[int, int],
                      noise: gtsam.noiseModel.Base) -> gtsam.LinearContainerFactor:
    """f_ti (Eq. 23) twice between stacked states: q from q̇, q̇ from q̈ (exactly linear)."""
    eye, zz = np.eye(n), np.zeros((n, n))
    A0 = np.block([[-eye, -h * eye, zz], [zz, -eye, -h * eye]])
    A1 = np.block([[eye, -h * eye, zz], [zz, eye, -h * eye]])
    jf = gtsam.JacobianFactor(keys[0], A0, keys[1], A1, np.zeros(2 * n), noise)
    return _linear(jf, keys, 3 * n)


def _equality_factor(n: int, keys: tuple[int, int], noise: gtsam.noiseModel.Base
                     ) -> gtsam.LinearContainerFactor:
    """f_eq: soft equality q_{k+1} − q_k = 0 between stacked states (linear)."""
    eye, zz = np.eye(n), np.zeros((n, 2 * n))
    jf = gtsam.JacobianFactor(keys[0], np.hstack((-eye, zz)), keys[1], np.hstack((eye, zz)),
                              np.zeros(n), noise)
    return _linear(jf, keys, 3 * n)


def _rate_prior_factor(n: int, key: int, rates: np.ndarray, noise: gtsam.noiseModel.Base
                       ) -> gtsam.LinearContainerFactor:
    """Weak linear prior on the rates [q̇, q̈] of a stacked state (see module doc)."""
    A = np.hstack((np.zeros((2 * n, n)), np.eye(2 * n)))
    jf = gtsam.JacobianFactor(key, A, np.asarray(rates, dtype=float), noise)
    return _linear(jf, (key,), 3 * n)


def _optimize(graph: gtsam.NonlinearFactorGraph, init: gtsam.Values, cfg: InverseConfig
              ) -> tuple[gtsam.Values, int]:
    """Batch Gauss-Newton with GTSAM's linearisation, QR elimination and retraction.

    The loop is written here rather than calling ``gtsam.GaussNewtonOptimizer``
    because GTSAM's optimizers call the Python factors from worker threads
    that fight for the GIL: measured 5.7 s per iteration against 0.4 s for
    the same linearise + eliminate + retract done from Python (2000-sample
    four-bar). It stops when the step is below ``step_tol`` (no extra
    linearisation to confirm convergence).
    """
    if cfg.solver not in ('gauss_newton', 'levenberg_marquardt'):
        raise MbfgError(f"unknown solver {cfg.solver!r} (gauss_newton, levenberg_marquardt)")
    if cfg.solver == 'levenberg_marquardt':
        params = gtsam.LevenbergMarquardtParams()
        params.setMaxIterations(cfg.max_iterations)
        params.setRelativeErrorTol(1e-10)
        params.setLinearSolverType('MULTIFRONTAL_QR')
        opt = gtsam.LevenbergMarquardtOptimizer(graph, init, params)
        return opt.optimize(), int(opt.iterations())
    ordering = gtsam.Ordering.ColamdNonlinearFactorGraph(graph)
    values = init
    scale = max(float(np.max(np.abs(init.atVector(k)))) for k in init.keys())
    for it in range(1, cfg.max_iterations + 1):
        lin = graph.linearize(values)
        delta = lin.eliminateMultifrontal(ordering, gtsam.EliminateQR).optimize()
        values = values.retract(delta)
        step = float(np.max(np.abs(delta.vector()), initial=0.0))
        if step <= cfg.step_tol * max(1.0, scale):
            return values, it
    raise MbfgError(f'inverse dynamics did not converge in {cfg.max_iterations} '
                    f'Gauss-Newton iterations (last step {step:.3g})')


def _single_blas_thread() -> contextlib.AbstractContextManager:
    """Limit BLAS to one thread while the batch solve runs (if threadpoolctl is installed).

    The batch is thousands of small matrix products and inverses; OpenBLAS's
    worker threads cost more than they give there (pick-and-place, 1000
    samples, four stages: 3.0 CPU s and 2.2 s wall with two threads, 2.0 s
    both with one). Without threadpoolctl nothing changes but the speed.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api='blas')


def inverse_dynamics(sys: System, t: np.ndarray, z: np.ndarray, z_idx: Sequence[int],
                     actuators: Sequence[int] | None = None,
                     config: InverseConfig = InverseConfig(),
                     progress: Callable[[float], None] | None = None) -> InverseResult:
    """Inverse dynamics of the prescribed motion ``z`` (N, d) of ``q[z_idx]`` at times ``t``.

    ``actuators``: coordinate indices with an unknown effort (default: the
    coordinates of ``sys.mech.actuators``, else ``z_idx``). ``progress``
    receives the fraction done (0..1) after each stage.
    """
    with _single_blas_thread():
        return _inverse_dynamics(sys, t, z, z_idx, actuators, config, progress)


def _inverse_dynamics(sys: System, t: np.ndarray, z: np.ndarray, z_idx: Sequence[int],
                      actuators: Sequence[int] | None, config: InverseConfig,
                      progress: Callable[[float], None] | None) -> InverseResult:
    t = np.asarray(t, dtype=float)
    z = np.asarray(z, dtype=float).reshape(len(t), -1)
    z_idx = tuple(int(i) for i in z_idx)
    if z.shape[1] != len(z_idx):
        raise MbfgError(f'{z.shape[1]} trajectory columns for {len(z_idx)} prescribed '
                        'coordinates')
    act = _actuated(sys, z_idx, actuators)
    if len(act) < sys.dof:
        raise MbfgError(f'{len(act)} actuated coordinate(s) cannot drive {sys.dof} degrees of '
                        'freedom')
    cfg = config
    if cfg.solver not in ('gauss_newton', 'levenberg_marquardt'):
        raise MbfgError(f"unknown solver {cfg.solver!r} (gauss_newton, levenberg_marquardt)")
    if cfg.elimination not in ('cholesky', 'qr'):
        raise MbfgError(f"unknown elimination {cfg.elimination!r} (cholesky, qr)")
    n = sys.n
    zd, zdd = derivatives(t, z, cfg.sg_window, cfg.sg_order)
    q, qd, qdd = direct_kinematics(sys, t, z, z_idx, zd, zdd)
    stages = (1, 2, 3, 4) if cfg.staged else (4,)
    if cfg.solver == 'levenberg_marquardt':
        X, Qs, iterations = _solve_custom(sys, t, z, zd, zdd, z_idx, act, q, qd, qdd, stages,
                                          cfg, progress)
    else:
        model = BatchModel(sys, z_idx)
        X = np.hstack((q, qd, qdd))
        rates0 = X[:, n:].copy()
        Qs = None
        iterations = []
        for stage in stages:
            if stage == 4:
                tau = _direct_tau(sys, X, z_idx, act)
            system = _StageSystem(model, stage, t, z, rates0, act, cfg)
            X, tau, its = _gauss_newton(system, X, tau if stage == 4 else None, cfg)
            iterations.append(its)
            if progress is not None:
                progress(stage / 4.0)
        Qs = _full_Q(tau, act, n)
    return InverseResult(t, X[:, :n], X[:, n:2 * n], X[:, 2 * n:], Qs, Qs[:, list(act)], act,
                         z_idx, tuple(iterations))


def _solve_custom(sys: System, t: np.ndarray, z: np.ndarray, zd: np.ndarray, zdd: np.ndarray,
                  z_idx: tuple[int, ...], act: tuple[int, ...], q: np.ndarray, qd: np.ndarray,
                  qdd: np.ndarray, stages: tuple[int, ...], cfg: InverseConfig,
                  progress: Callable[[float], None] | None):
    """The stages as nonlinear GTSAM graphs of per-sample CustomFactors (for LM).

    Same factors as the Gauss-Newton path; slower (one Python callback per
    sample and linearisation).
    """
    n, N = sys.n, len(t)
    model = StepModel(sys, z_idx)
    m, d = sys.m, len(z_idx)

    def noise(stage: int) -> gtsam.noiseModel.Base:
        s = [np.full(m, cfg.sigma_pos), np.full(d, cfg.sigma_prior)]
        if stage >= 3:
            s.append(np.full(m, cfg.sigma_vel))
        if stage >= 4:
            s.append(np.full(n, cfg.sigma_dyn))
        return gtsam.noiseModel.Diagonal.Sigmas(np.concatenate(s))

    eq_noise = gtsam.noiseModel.Isotropic.Sigma(n, cfg.sigma_eq)
    int_noise = gtsam.noiseModel.Isotropic.Sigma(2 * n, cfg.sigma_int)
    q_sig = np.full(n, cfg.sigma_zero)
    q_sig[list(act)] = cfg.sigma_tau
    Q_noise = gtsam.noiseModel.Diagonal.Sigmas(q_sig)
    trapz = [_trapezoid_factor(n, 0.5 * (t[k + 1] - t[k]), (_key('x', k), _key('x', k + 1)),
                               int_noise) for k in range(N - 1)]
    eqs = [_equality_factor(n, (_key('x', k), _key('x', k + 1)), eq_noise)
           for k in range(N - 1)]
    rate_noise = gtsam.noiseModel.Diagonal.Sigmas(np.concatenate(
        (np.full(n, cfg.sigma_qd_prior), np.full(n, cfg.sigma_qdd_prior))))
    rate_priors = [_rate_prior_factor(n, _key('x', k), np.concatenate((qd[k], qdd[k])),
                                      rate_noise) for k in range(N)]

    def build(stage: int) -> gtsam.NonlinearFactorGraph:
        g = gtsam.NonlinearFactorGraph()
        nm = noise(stage)
        for k in range(N):
            keys = (_key('x', k), _key('f', k)) if stage >= 4 else (_key('x', k),)
            fn = functools.partial(step_error, model, stage, z[k], zd[k], zdd[k])
            g.add(gtsam.CustomFactor(nm, list(keys), functools.partial(_gtsam_error, fn, keys)))
            if stage >= 4:
                g.add(gtsam.PriorFactorVector(_key('f', k), np.zeros(n), Q_noise))
        for f in eqs + rate_priors + (trapz if stage >= 2 else []):
            g.add(f)
        return g

    values = gtsam.Values()
    for k in range(N):
        values.insert(_key('x', k), np.concatenate((q[k], qd[k], qdd[k])))
    iterations = []
    for stage in stages:
        if stage == 4:
            X = np.array([values.atVector(_key('x', k)) for k in range(N)])
            Q0 = _full_Q(_direct_tau(sys, X, z_idx, act), act, n)
            for k in range(N):
                values.insert(_key('f', k), Q0[k])
        values, its = _optimize(build(stage), values, cfg)
        iterations.append(its)
        if progress is not None:
            progress(stage / 4.0)
    X = np.array([values.atVector(_key('x', k)) for k in range(N)])
    Qs = np.array([values.atVector(_key('f', k)) for k in range(N)])
    return X, Qs, iterations


def _direct_tau(sys: System, X: np.ndarray, z_idx: Sequence[int], act: Sequence[int]
                ) -> np.ndarray:
    """τ (N, n_act) initial guess: direct inverse dynamics at the kinematics X (N, 3n)."""
    n = sys.n
    direct = DirectInverseDynamics(sys, z_idx, actuators=act)
    zc = [2 * n + i for i in z_idx]
    return np.array([direct(x[:n], x[n:2 * n], x[zc]) for x in X]).reshape(len(X), len(act))


def _full_Q(tau: np.ndarray, act: Sequence[int], n: int) -> np.ndarray:
    """Q = S_act τ for every sample: (N, n_act) -> (N, n)."""
    Q = np.zeros((len(tau), n))
    Q[:, list(act)] = tau
    return Q


def _actuated(sys: System, z_idx: Sequence[int], actuators: Sequence[int] | None
              ) -> tuple[int, ...]:
    if actuators is not None:
        return tuple(int(a) for a in actuators)
    mech = sys.mech
    if mech.actuators:
        if any(a.coordinate is None for a in mech.actuators):
            raise MbfgError(f'{mech.source}: actuators: the factor-graph inverse dynamics '
                            'needs actuators on coordinates (joint actuators: use '
                            'DirectInverseDynamics)')
        return tuple(int(a.coordinate) for a in mech.actuators)
    return tuple(z_idx)
