"""Forward dynamics as a factor graph solved step by step (seed 000 §5.1-5.2).

Per time step the graph holds the state x_k = [q, q̇, q̈] (stacked, one
variable, see :mod:`mbfg_ros.core.factors`) and, in independent coordinates,
Z_k = [z, ż, z̈]:

* dependent coordinates, seed 000 Fig. 2: f_dpc + f_dvc + f_ddyn
  (Eqs. 24-26) on x_k, trapezoidal (Eq. 23) or Euler (Eq. 22) integrators
  q ← q̇ and q̇ ← q̈ between x_{k-1} and x_k;
* independent coordinates, Fig. 3: f_ipc + f_ivc + f_iac + f_idyn
  (Eqs. 27, 30-32) on (x_k, Z_k), integrators on Z only, and the soft
  equality f_eq between consecutive q (it picks the assembly branch).
  z = B q: the seed's B selects coordinates of q; B may also be the
  transposed null-space basis of Φq, re-chosen every step (``ic_basis``,
  see ``ForwardSimulator._reselect_independent``);
* priors on the initial state (Eq. 21): q0 and q̇0 (Table 2).

The integrators and f_eq are linear, so they enter as GTSAM
``JacobianFactor``s wrapped in ``LinearContainerFactor`` (exact, no Python
callback); only the state factor is a Python ``CustomFactor``.

Solvers (``ForwardConfig.solver``):

``anchored`` (default)
    A window of ``window`` states whose oldest state is held fixed (a
    constant inside the integrator factors) and whose other states are
    re-solved at every step, as the seed's reference code does. Solved by
    Gauss-Newton: GTSAM linearises the graph and eliminates it by QR; the
    loop around it is written here because GTSAM's optimizers judge
    convergence by the decrease of the error, which costs extra Python
    callbacks per step, and the error of this overdetermined problem never
    reaches zero. A step is accepted once max |δ| < ``tolerance``: from the
    extrapolated guess Gauss-Newton converges quadratically, so what is
    left is ~tolerance² (1-2 iterations per step; the four-bar's RMSE is the
    same to 3 digits as with a fully converged solve).
``anchored-lm``
    The same graph solved with GTSAM's ``LevenbergMarquardtOptimizer``
    (the seed's solver; slower).
``incremental``
    ``IncrementalFixedLagSmoother`` (ISAM2, QR factorisation,
    ``findUnusedFactorSlots``) with lag ``window`` steps. Fast, but the
    marginals of the released states are a soft memory of the past: long
    runs gain energy (see README).
``batch``
    ``BatchFixedLagSmoother`` (Levenberg-Marquardt, multifrontal QR).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import gtsam
import numpy as np
import scipy.linalg

from ..core.end_stops import EndStopLog
from ..core.errors import MbfgError
from ..core.factors import (
    basis_matrix,
    custom_factor,
    stacked_indep_state_error,
    stacked_integrator_jacobians,
    stacked_state_error,
)
from ..core.interface import EndStopModel, Stepper
from ..core.interface import SimulatedSystem as System

__all__ = ['ForwardConfig', 'ForwardSimulator', 'Trajectory', 'simulate', 'energy', 'stepper',
           'IC_BASES',
           'SOLVERS', 'COORDINATES', 'INTEGRATORS']

SOLVERS = ('anchored', 'anchored-lm', 'incremental', 'batch')
COORDINATES = ('dependent', 'independent')
INTEGRATORS = ('trapezoidal', 'euler')
IC_BASES = ('auto', 'tangent', 'coordinates')


@dataclass(frozen=True)
class ForwardConfig:
    """Options of the forward-dynamics factor graph.

    Noise defaults follow seed 000 Table 2 (covariances there; standard
    deviations here, σ = √cov) except ``sigma_constraint``: Table 2's
    √1e-3 leaves |Φ| ≈ 7e-7 on the four-bar; σ = 1e-3 keeps it near 1e-9
    at no cost in accuracy or speed.
    """

    dt: float = 1e-3
    window: int = 2
    coordinates: str = 'dependent'
    integrator: str = 'trapezoidal'
    solver: str = 'anchored'
    max_iterations: int = 8
    tolerance: float = 1e-3            # Gauss-Newton: accept once max |δ| < this
    sigma_prior_q: float = 1e-5        # cov 1e-10
    sigma_prior_qd_z: float = math.sqrt(1e-3)
    sigma_prior_qd: float = 1.0        # velocities not in z
    sigma_integrator: float = math.sqrt(1e-3)
    sigma_dynamics: float = math.sqrt(1e-3)
    sigma_constraint: float = 1e-3     # f_dpc, f_dvc, f_ipc, f_ivc, f_iac
    sigma_eq: float = 1e3              # Table 2: 10 (cov 1e2); see README
    ic_switch: float = 0.99            # re-choose z when σ_min(N[z]) < ic_switch × best
    ic_basis: str = 'auto'             # 'tangent' (z = Nᵀq), 'coordinates' (z ⊂ q) or 'auto'

    def __post_init__(self) -> None:
        def bad(name: str, value: object, want: str) -> MbfgError:
            return MbfgError(f'forward dynamics: {name} = {value!r}: {want}')
        if not (self.dt > 0 and math.isfinite(self.dt)):
            raise bad('dt', self.dt, 'expected a positive time step')
        if isinstance(self.window, bool) or not isinstance(self.window, int) \
                or self.window < 2:
            raise bad('window', self.window, 'expected an integer >= 2 (states in the window)')
        for name, allowed in (('coordinates', COORDINATES), ('integrator', INTEGRATORS),
                              ('solver', SOLVERS), ('ic_basis', IC_BASES)):
            if getattr(self, name) not in allowed:
                raise bad(name, getattr(self, name), f'expected one of {", ".join(allowed)}')
        if self.max_iterations < 1:
            raise bad('max_iterations', self.max_iterations, 'expected >= 1')
        if not 0.0 <= self.ic_switch <= 1.0:
            raise bad('ic_switch', self.ic_switch, 'expected a number in [0, 1]')
        for name in ('tolerance', 'sigma_prior_q', 'sigma_prior_qd_z', 'sigma_prior_qd',
                     'sigma_integrator', 'sigma_dynamics', 'sigma_constraint', 'sigma_eq'):
            v = getattr(self, name)
            if not (v > 0 and math.isfinite(v)):
                raise bad(name, v, 'expected a positive number')


class Trajectory(NamedTuple):
    """A simulated trajectory; row k is time t[k] (row 0 is t = 0)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    phi_norm: np.ndarray


class _Link(NamedTuple):
    """A linear factor between consecutive steps: e = A0 v_{k-1} + A1 v_k."""

    var: int            # which variable of a step (0: x, 1: Z)
    A0: np.ndarray
    A1: np.ndarray
    noise: gtsam.noiseModel.Diagonal


def _diag(*blocks: tuple[int, float]) -> gtsam.noiseModel.Diagonal:
    return gtsam.noiseModel.Diagonal.Sigmas(
        np.concatenate([np.full(size, s, dtype=float) for size, s in blocks]))


class _Graphs:
    """The factors of Fig. 2 / Fig. 3 for one system and configuration (built once)."""

    def __init__(self, sys: System, cfg: ForwardConfig) -> None:
        n, m = sys.n, sys.m
        self.sys, self.cfg, self.n = sys, cfg, n
        self.independent = cfg.coordinates == 'independent'
        if self.independent and not sys.independent_dynamics:
            raise MbfgError('forward dynamics: independent coordinates are planar only; a '
                            'URDF robot runs in dependent (joint) coordinates')
        self.idx = list(sys.independent_indices)
        self.B = basis_matrix(self.idx, n)
        d = len(self.idx)
        self.d = d
        trap = cfg.integrator == 'trapezoidal'
        si, sc, sd = cfg.sigma_integrator, cfg.sigma_constraint, cfg.sigma_dynamics
        if self.independent:
            self.dims = (3 * n, 3 * d)
            # rows: Φ; q[idx]−z; Φq q̇; q̇[idx]−ż; Φ̇q q̇+Φq q̈; q̈[idx]−z̈; z̈(q,q̇)−z̈
            self.state_noise = _diag((m + d, sc), (m + d, sc), (m + d, sc), (d, sd))
            A0, A1 = stacked_integrator_jacobians(d, cfg.dt, trap)
            E0 = np.zeros((n, 3 * n))
            E0[:, :n] = -np.eye(n)
            self.links = (_Link(1, A0, A1, _diag((2 * d, si))),
                          _Link(0, E0, -E0, _diag((n, cfg.sigma_eq))))
        else:
            self.dims = (3 * n,)
            self.state_noise = _diag((2 * m, sc), (n, sd))
            A0, A1 = stacked_integrator_jacobians(n, cfg.dt, trap)
            self.links = (_Link(0, A0, A1, _diag((2 * n, si))),)
        # priors on the initial state (Eq. 21, Table 2) as linear factors on x_0
        sel_q = np.zeros((n, 3 * n))
        sel_q[:, :n] = np.eye(n)
        sel_qd = np.zeros((n, 3 * n))
        sel_qd[:, n:2 * n] = np.eye(n)
        qd_sig = np.full(n, cfg.sigma_prior_qd)
        qd_sig[self.idx] = cfg.sigma_prior_qd_z
        self.prior_blocks = ((sel_q, _diag((n, cfg.sigma_prior_q))),
                             (sel_qd, gtsam.noiseModel.Diagonal.Sigmas(qd_sig)))
        self._zero = {dim: np.zeros(dim) for dim in self.dims}

    # -- keys and values ------------------------------------------------------------
    def keys(self, k: int) -> tuple[int, ...]:
        if self.independent:
            return (gtsam.symbol('x', k), gtsam.symbol('z', k))
        return (gtsam.symbol('x', k),)

    def stack(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
              B: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        x = np.concatenate((q, qd, qdd))
        if self.independent:
            B = self.B if B is None else B
            return (x, np.concatenate((B @ q, B @ qd, B @ qdd)))
        return (x,)

    # -- factors --------------------------------------------------------------------
    def state_factor(self, k: int, tau: np.ndarray | None, B: np.ndarray | None = None
                     ) -> gtsam.CustomFactor:
        if self.independent:
            B = self.B if B is None else B
            fn = functools.partial(stacked_indep_state_error, self.sys, B, tau)
        else:
            fn = functools.partial(stacked_state_error, self.sys, tau)
        return custom_factor(self.keys(k), self.state_noise, fn)

    def _linear(self, keys: Sequence[int], blocks: Sequence[np.ndarray], b: np.ndarray,
                noise: gtsam.noiseModel.Diagonal) -> gtsam.LinearContainerFactor:
        """An exact linear factor e = Σ A_i v_i − b (linearisation point zero)."""
        if len(keys) == 1:
            jf = gtsam.JacobianFactor(keys[0], blocks[0], b, noise)
        else:
            jf = gtsam.JacobianFactor(keys[0], blocks[0], keys[1], blocks[1], b, noise)
        lin = gtsam.Values()
        for key, A in zip(keys, blocks):
            lin.insert(key, np.zeros(A.shape[1]))
        return gtsam.LinearContainerFactor(jf, lin)

    def link_factors(self, k: int) -> list[gtsam.LinearContainerFactor]:
        """Integrators (and f_eq) between steps k−1 and k, both variables."""
        k0, k1 = self.keys(k - 1), self.keys(k)
        return [self._linear((k0[L.var], k1[L.var]), (L.A0, L.A1),
                             np.zeros(L.A0.shape[0]), L.noise) for L in self.links]

    def anchor_factors(self, k: int, anchor: Sequence[np.ndarray]
                       ) -> list[gtsam.LinearContainerFactor]:
        """Integrators (and f_eq) from a constant state (step k−1) to the variables of step k."""
        k1 = self.keys(k)
        return [self._linear((k1[L.var],), (L.A1,), -(L.A0 @ anchor[L.var]), L.noise)
                for L in self.links]

    def prior_factors(self, k: int, q0: np.ndarray, qd0: np.ndarray
                      ) -> list[gtsam.LinearContainerFactor]:
        key = self.keys(k)[0]
        return [self._linear((key,), (A,), value, noise)
                for (A, noise), value in zip(self.prior_blocks, (q0, qd0))]


class _Entry(NamedTuple):
    """A step in the anchored window: its state (x, [Z]), state factor and efforts."""

    step: int
    state: tuple[np.ndarray, ...]
    factor: gtsam.CustomFactor | None
    tau: np.ndarray | None


def _gauss_newton(graph: gtsam.NonlinearFactorGraph, values: gtsam.Values,
                  max_iterations: int, tolerance: float) -> tuple[gtsam.Values, int]:
    """Gauss-Newton with GTSAM linearisation and QR elimination; stop on max |δ|."""
    for it in range(1, max_iterations + 1):
        delta = graph.linearize(values).optimize(gtsam.EliminateQR)
        values = values.retract(delta)
        if np.abs(delta.vector()).max() < tolerance:
            return values, it
    return values, max_iterations


class ForwardSimulator:
    """Step-by-step forward dynamics with a fixed-lag window (seed 000 §5.1/5.2, §7.1).

    ``q0`` defaults to the assembled pose ``sys.q0``; ``qd0`` to rest. The
    initial state is itself solved from the priors of Table 2 and the state
    factor, so ``q̈0`` is consistent and an inconsistent ``qd0`` is projected
    onto the velocity constraints (its non-independent entries are weak).

    ``end_stops`` (``sys.end_stop_model(dt)``, issue 30 item 3): integrate its ``system``
    (the joint position limits as stop forces) instead of ``sys``, and count after every
    step in ``log`` (an :class:`~mbfg_ros.core.end_stops.EndStopLog`, made here unless
    given) the impacts, the depth past the limits and the velocity-limit excess.
    """

    def __init__(self, sys: System, config: ForwardConfig | None = None,
                 q0: np.ndarray | None = None, qd0: np.ndarray | None = None,
                 end_stops: EndStopModel | None = None, log: EndStopLog | None = None
                 ) -> None:
        self._stop_model = end_stops
        self.stops = None if end_stops is None else end_stops.stops
        self.log = None if end_stops is None else (
            log if log is not None else EndStopLog(end_stops.stops.names))
        if end_stops is not None:
            sys = end_stops.system
        self.sys = sys
        self.config = cfg = config or ForwardConfig()
        self._g = _Graphs(sys, cfg)
        n = sys.n
        q0 = np.array(sys.q0 if q0 is None else q0, dtype=float)
        qd0 = np.zeros(n) if qd0 is None else np.array(qd0, dtype=float)
        if q0.shape != (n,) or qd0.shape != (n,):
            raise MbfgError(f'forward dynamics: q0 and qd0 must have {n} entries '
                            f'({", ".join(sys.names)})')
        self.iterations = 0          # Gauss-Newton iterations of the last step
        self._k = 0
        self.switches = 0            # changes of independent coordinates (anchored)
        self._idx = list(sys.independent_indices)
        self._B = self._g.B
        angles = set(sys.angle_coordinates)
        self.ic_basis = cfg.ic_basis
        if cfg.ic_basis == 'auto':     # relative angles make good z; points' x, y do not
            self.ic_basis = ('coordinates' if all(i in angles for i in self._idx)
                             else 'tangent')
        self._n_act = len(sys.actuator_joints)
        # the initial state: priors + state factor, solved by Gauss-Newton
        qdd0 = sys.accelerations(q0, qd0, None)
        graph = gtsam.NonlinearFactorGraph()
        graph.add(self._g.state_factor(0, None))
        for f in self._g.prior_factors(0, q0, qd0):
            graph.add(f)
        values = gtsam.Values()
        for key, v in zip(self._g.keys(0), self._g.stack(q0, qd0, qdd0)):
            values.insert(key, v)
        values, _ = _gauss_newton(graph, values, 20, 1e-12)
        state = tuple(values.atVector(key) for key in self._g.keys(0))
        self._set_output(state)
        self._joints = (None if end_stops is None else
                        end_stops.joints(self.q, self.qd)[0])
        if cfg.solver.startswith('anchored'):
            self._window = [_Entry(0, state, None, None)]    # entry 0: the anchor
            self._prev = state
            if cfg.solver == 'anchored-lm':
                self._lm = gtsam.LevenbergMarquardtParams()
                self._lm.setMaxIterations(15)
                self._lm.setLinearSolverType('MULTIFRONTAL_QR')
        else:
            self._init_smoother(graph, values)

    # -- public ---------------------------------------------------------------------
    @property
    def t(self) -> float:
        return self._k * self.config.dt

    def step(self, tau: np.ndarray | None = None
             ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """Advance one ``dt`` with actuator efforts ``tau`` (order of mech.actuators)."""
        if tau is not None:
            tau = np.array(tau, dtype=float).reshape(-1)
            if tau.shape != (self._n_act,):
                raise MbfgError(f'forward dynamics: tau has {tau.size} entries, the mechanism '
                                f'has {self._n_act} actuators')
        k = self._k + 1
        if self.config.solver.startswith('anchored'):
            state = self._step_anchored(k, tau)
        else:
            state = self._step_smoother(k, tau)
        self._k = k
        self._set_output(state)
        if self._stop_model is not None:
            pos, rate = self._stop_model.joints(self.q, self.qd)
            self.log.update_penetrating(self.stops, self._joints, pos, rate)
            self._joints = pos
        return self.t, self.q.copy(), self.qd.copy(), self.qdd.copy()

    # -- internals ------------------------------------------------------------------
    def _set_output(self, state: Sequence[np.ndarray]) -> None:
        n = self.sys.n
        x = state[0]
        self.q, self.qd, self.qdd = x[:n].copy(), x[n:2 * n].copy(), x[2 * n:].copy()

    def _guess(self, last: Sequence[np.ndarray], before: Sequence[np.ndarray]
               ) -> tuple[np.ndarray, ...]:
        """Linear extrapolation of the two newest states."""
        return tuple(2.0 * a - b for a, b in zip(last, before))

    def _step_anchored(self, k: int, tau: np.ndarray | None) -> tuple[np.ndarray, ...]:
        g, cfg = self._g, self.config
        win = self._window
        if g.independent:
            self._reselect_independent(win[-1][1][0])
        last = win[-1][1]
        before = win[-2][1] if len(win) > 1 else self._prev
        win.append(_Entry(k, self._guess(last, before), g.state_factor(k, tau, self._B), tau))
        if len(win) > cfg.window:
            del win[0]
        graph = gtsam.NonlinearFactorGraph()
        values = gtsam.Values()
        anchor = win[0].state
        for j, e in enumerate(win[1:]):
            graph.add(e.factor)
            links = g.anchor_factors(e.step, anchor) if j == 0 else g.link_factors(e.step)
            for f in links:
                graph.add(f)
            for key, v in zip(g.keys(e.step), e.state):
                values.insert(key, v)
        if cfg.solver == 'anchored':
            values, self.iterations = _gauss_newton(graph, values, cfg.max_iterations,
                                                    cfg.tolerance)
        else:
            opt = gtsam.LevenbergMarquardtOptimizer(graph, values, self._lm)
            values = opt.optimize()
            self.iterations = opt.iterations()
        self._prev = last
        for j in range(1, len(win)):
            e = win[j]
            win[j] = e._replace(state=tuple(values.atVector(key) for key in g.keys(e.step)))
        return win[-1].state

    def _reselect_independent(self, x: np.ndarray) -> None:
        """Change the independent coordinates z = B q when they near a singular pose.

        Any fixed z of a closed loop meets poses where ``[Φq; B]`` is singular
        (e.g. every natural coordinate of the four-bar turns back somewhere in
        its swing); there the position problem has a fold and Fig. 3's graph
        would reflect the motion.

        ``ic_basis = 'coordinates'`` (the seed's z ⊂ q; García de Jalón &
        Bayo's coordinate partitioning): when σ_min(N[idx]) (N an orthonormal
        null-space basis of Φq) falls below ``ic_switch`` times that of the
        best choice (pivoted QR of Nᵀ), switch z. ``ic_basis = 'tangent'``
        (tangent-space parametrisation): B = Nᵀ at the newest state, every
        step, so z is locally the arc length along the constraint manifold.
        ``'auto'`` (default) takes 'coordinates' when the default z are
        relative coordinates (angles: four-bar with the crank angle, 0.003 mm
        RMSE over 5 s, against 0.022 mm tangent) and 'tangent' otherwise
        (points' x, y turn back: 0.040 mm, against 0.074 mm for z ⊂ q).
        Either way the window's Z values and factors are rewritten for the new
        B (the integrators on Z are basis-free, so they stay valid).
        """
        n, d = self.sys.n, len(self._idx)
        _, _, vt = np.linalg.svd(self.sys.constraint_terms(x[:n], np.zeros(n))[1])
        N = vt[n - d:].T
        if self.ic_basis == 'tangent':
            B = N.T         # its sign and rotation are free: the whole window is rewritten
        else:
            if d == 1:
                col = np.abs(N[:, 0])
                best = [int(np.argmax(col))]
                quality, best_quality = col[self._idx[0]], col[best[0]]
            else:
                quality = np.linalg.svd(N[self._idx], compute_uv=False)[-1]
                best = sorted(scipy.linalg.qr(N.T, pivoting=True, mode='r')[1][:d].tolist())
                best_quality = np.linalg.svd(N[best], compute_uv=False)[-1]
            if quality >= self.config.ic_switch * best_quality or best == self._idx:
                return
            self._idx = list(best)
            self.switches += 1
            B = basis_matrix(self._idx, n)
        self._B = B
        g = self._g
        for j, e in enumerate(self._window):
            xj = e.state[0]
            state = g.stack(xj[:n], xj[n:2 * n], xj[2 * n:], B)
            factor = None if e.factor is None else g.state_factor(e.step, e.tau, B)
            self._window[j] = _Entry(e.step, state, factor, e.tau)
        xp = self._prev[0]
        self._prev = g.stack(xp[:n], xp[n:2 * n], xp[2 * n:], B)

    def _init_smoother(self, graph: gtsam.NonlinearFactorGraph, values: gtsam.Values) -> None:
        cfg = self.config
        lag = (cfg.window - 0.5) * cfg.dt
        if cfg.solver == 'incremental':
            params = gtsam.ISAM2Params()
            params.setFactorization('QR')
            params.findUnusedFactorSlots = True
            params.setRelinearizeThreshold(0.0)
            params.relinearizeSkip = 1
            self._smoother = gtsam.IncrementalFixedLagSmoother(lag, params)
        else:
            params = gtsam.LevenbergMarquardtParams()
            params.setLinearSolverType('MULTIFRONTAL_QR')
            self._smoother = gtsam.BatchFixedLagSmoother(lag, params)
        stamps = {key: 0.0 for key in self._g.keys(0)}
        self._smoother.update(graph, values, stamps)
        x = tuple(values.atVector(key) for key in self._g.keys(0))
        self._last, self._before = x, x

    def _step_smoother(self, k: int, tau: np.ndarray | None) -> tuple[np.ndarray, ...]:
        g = self._g
        graph = gtsam.NonlinearFactorGraph()
        graph.add(g.state_factor(k, tau))
        for f in g.link_factors(k):
            graph.add(f)
        values = gtsam.Values()
        t = k * self.config.dt
        for key, v in zip(g.keys(k), self._guess(self._last, self._before)):
            values.insert(key, v)
        self._smoother.update(graph, values, {key: t for key in g.keys(k)})
        if self.config.solver == 'incremental':
            self._smoother.update()      # one more Gauss-Newton pass of ISAM2
        est = self._smoother.calculateEstimate()
        state = tuple(est.atVector(key) for key in g.keys(k))
        self._before, self._last = self._last, state
        self.iterations = 2 if self.config.solver == 'incremental' else 0
        return state


def energy(sys: System, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """Mechanical energy of the states ``q``, ``qd`` (``sys.energy``: for a planar
    mechanism ½ q̇ᵀ M q̇ − Q0ᵀ q for constant applied forces Q0, (n,) or (N, n) states).

    Only meaningful for conservative mechanisms whose applied forces do not depend on q
    or q̇."""
    return sys.energy(q, qd)


def stepper(sys: System, config: ForwardConfig, limits: bool = True) -> Stepper:
    """The simulator node's integrator (issue 23): the formulation's own
    (``sys.integrator(dt, limits)``, a URDF robot's joint-space trapezoidal rule) or else the
    factor graph of this module, :class:`ForwardSimulator`, with ``limits`` on the system of
    ``sys.end_stop_model(dt)`` (the joint position limits as stop forces; issue 30 item 3)."""
    own = sys.integrator(config.dt, limits=limits)
    if own is not None:
        return own
    return ForwardSimulator(sys, config, end_stops=sys.end_stop_model(config.dt)
                            if limits else None)


def simulate(sys: System, duration: float, config: ForwardConfig | None = None,
             tau_fn: Callable[[float, np.ndarray, np.ndarray], np.ndarray] | None = None,
             progress: object | None = None, q0: np.ndarray | None = None,
             qd0: np.ndarray | None = None, end_stops: EndStopModel | None = None,
             log: EndStopLog | None = None) -> Trajectory:
    """Simulate ``duration`` seconds; rows at t = 0, dt, ..., including t = 0.

    ``end_stops`` (``sys.end_stop_model(config.dt)``; None: no limits) integrates the
    system with its joint position limits as stop forces; ``log`` (made by the caller)
    counts the impacts and the velocity-limit excess (:class:`ForwardSimulator`).

    ``tau_fn(t, q, qd)`` gives the actuator efforts held over the step that
    starts at ``t`` (state ``q``, ``qd`` at ``t``); ``progress`` is any
    object with ``update(seconds_done)`` (e.g. :class:`cli.common.Progress`).
    """
    cfg = config or ForwardConfig()
    if not (duration >= 0 and math.isfinite(duration)):
        raise MbfgError(f'forward dynamics: duration = {duration!r}: expected >= 0')
    steps = int(round(duration / cfg.dt))
    sim = ForwardSimulator(sys, cfg, q0, qd0, end_stops, log)
    n = sys.n
    t = np.arange(steps + 1) * cfg.dt
    Q = np.empty((steps + 1, n))
    QD = np.empty((steps + 1, n))
    QDD = np.empty((steps + 1, n))
    Q[0], QD[0], QDD[0] = sim.q, sim.qd, sim.qdd
    every = max(1, steps // 200)
    for k in range(1, steps + 1):
        tau = None if tau_fn is None else tau_fn(sim.t, sim.q, sim.qd)
        _, Q[k], QD[k], QDD[k] = sim.step(tau)
        if progress is not None and k % every == 0:
            progress.update(k * cfg.dt)
    if progress is not None:
        progress.update(steps * cfg.dt)
    zero = np.zeros(n)
    phi_norm = np.array([np.linalg.norm(sys.constraint_terms(q, zero)[0]) for q in Q])
    return Trajectory(t, Q, QD, QDD, phi_norm)
