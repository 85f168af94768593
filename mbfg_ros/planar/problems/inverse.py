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

Modules: this one holds the configuration, the result, the linear systems of the stages and
the solvers; the equations per sample and batched are in
:mod:`mbfg_ros.planar.problems.inverse_models`, the
direct-kinematics initialisation in :mod:`mbfg_ros.planar.problems.inverse_kinematics`.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import gtsam
import numpy as np

from ...core.errors import MbfgError
from ...core.factors import custom_factor
from .inverse_direct import DirectInverseDynamics
from .inverse_kinematics import direct_kinematics
from .inverse_models import BatchModel, StepModel, step_error
from ..dynamics import System
from ...core.trajectory import derivatives

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


def _key(c: str, k: int) -> int:
    return gtsam.symbol(c, k)


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
            g.add(custom_factor(keys, nm, fn))
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
