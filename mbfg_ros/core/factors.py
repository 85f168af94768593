"""The generic factors of seed 000 §6 as pure error functions, and the one GTSAM binding.

Each ``*_error`` function takes its fixed parameters first, then the list of variable
values ``xs`` and a flag ``want``; it returns the error vector and, when asked, the list
of Jacobians (one per variable, analytic). :func:`custom_factor` is the package's one
binder of such a function to a :class:`gtsam.CustomFactor` (GTSAM's
python/CustomFactors.md pattern; issue 23: the planar inverse dynamics, the spatial
dynamics graph and the estimator all bind through it) via a callback that keeps its last
evaluation (:class:`_Evaluation`: ISAM2 relinearises unchanged factors in its batch steps).
A factor depends only on its keys and fixed parameters (no hidden inputs).
:func:`linear_factor` hands such a function, linearised once at given values, to GTSAM as
a built-in linear factor instead (issue 24: the estimator with relinearisation off, so
ISAM2 never calls back into Python).

For speed (each Python callback costs tens of microseconds) the problems use *stacked*
variables ``x = [q, q̇, q̈]``:

    prior (21)                     -> :func:`prior_factor` (GTSAM's PriorFactorVector)
    f_dpc + f_dvc + f_ddyn (24-26)  -> :func:`stacked_state_error` (any
                                      :class:`~mbfg_ros.core.interface.MultibodySystem`)
    two f_ti / f_ei (23 / 22)       -> :func:`stacked_trapezoidal_error` (the estimator's:
                                      q rows with the rule's end correction),
                                      :func:`stacked_euler_error` (between steps;
                                      the simulator's rows:
                                      :func:`stacked_integrator_jacobians`)
    f_ipc + f_ivc + f_iac + f_idyn  -> :func:`stacked_indep_state_error` (the system's own,
    (27, 30-32)                       ``planar.factors`` for natural coordinates)
    f_eq                           -> not needed: consecutive stacked states share the
                                      integrator factor

the same equations as the single-variable factors, fewer and fatter factors (those, used
by no module, now live with their test: ``test/support/seed_factors.py``).
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Sequence

import gtsam
import numpy as np

if TYPE_CHECKING:
    from .interface import MultibodySystem, StateTerms

__all__ = [
    'ErrorFn', 'custom_factor', 'linear_factor', 'stacked_linear_factor', 'linear_container',
    'prior_factor', 'sigmas', 'whitened_state_rows', 'whitened_trapezoidal_b',
    'stacked_state_error', 'stacked_trapezoidal_error', 'stacked_trapezoidal_jerk_error',
    'stacked_euler_error', 'stacked_integrator_jacobians',
    'stacked_indep_state_error', 'basis_matrix',
]

ErrorFn = Callable[[Sequence[Any], bool], tuple[np.ndarray, list[np.ndarray] | None]]


class _Evaluation:
    """A CustomFactor's callback: ``fn`` at the factor's keys, keeping its last evaluation.

    Called again at the very same values (not a tolerance: the same numbers), it returns
    the kept residual and Jacobians instead of re-running Python. The estimator
    linearises every factor once (relinearisation off), yet ISAM2 relinearises *every*
    factor of the smoother at its unchanged linearisation point whenever an update
    affects 65 % or more of the variables (its batch step): ~80 Python factors, 15-40 ms
    at 1 kHz where a tick takes ~1.5 ms. With the kept evaluations that step costs
    only GTSAM's own elimination. Elsewhere (iterative solvers) the values change
    between calls and every call evaluates ``fn``.

    Variables other than vectors (``pose``: the spatial dynamics graph's Pose3 links) are
    read with ``Values.atPose3``; a factor with one is evaluated at every call (no kept
    evaluation: its solvers change the values between calls).
    """

    __slots__ = ('fn', 'keys', 'poses', 'xs', 'e', 'J')

    def __init__(self, fn: ErrorFn, keys: tuple[int, ...],
                 poses: tuple[bool, ...] | None = None) -> None:
        self.fn, self.keys = fn, keys
        self.poses = poses if poses is not None and any(poses) else None
        self.xs: list[np.ndarray] | None = None
        self.e: np.ndarray | None = None
        self.J: list[np.ndarray] | None = None

    def __call__(self, this: gtsam.CustomFactor, values: gtsam.Values,
                 jacobians: list | None) -> np.ndarray:
        want = jacobians is not None
        if self.poses is not None:
            xs = [values.atPose3(k) if p else values.atVector(k)
                  for k, p in zip(self.keys, self.poses)]
            e, J = self.fn(xs, want)
            if want:
                for i, Ji in enumerate(J):
                    jacobians[i] = np.asfortranarray(Ji, dtype=float)
            return e
        xs = [values.atVector(k) for k in self.keys]
        if (self.xs is None or (want and self.J is None)
                or not all(np.array_equal(a, b) for a, b in zip(xs, self.xs))):
            e, J = self.fn(xs, want)
            self.xs, self.e = xs, e
            self.J = [np.asfortranarray(Ji, dtype=float) for Ji in J] if want else None
        if want:
            for i, Ji in enumerate(self.J):
                jacobians[i] = Ji
        return self.e


def custom_factor(keys: Sequence[int], noise: gtsam.noiseModel.Base, fn: ErrorFn,
                  poses: Sequence[bool] | None = None) -> gtsam.CustomFactor:
    """A GTSAM CustomFactor over ``keys`` computing ``fn(xs, want) -> (e, J or None)``
    (``J[i]``: ∂e/∂ of variable i, one column per tangent dimension), its last evaluation
    kept (:class:`_Evaluation`). The variables are vectors, except those flagged in
    ``poses`` (``gtsam.Pose3``, tangent ``[rotation; translation]``)."""
    keys = tuple(int(k) for k in keys)
    flags = tuple(bool(p) for p in poses) if poses is not None else None
    return gtsam.CustomFactor(noise, gtsam.KeyVector(list(keys)),
                              _Evaluation(fn, keys, flags))


def linear_factor(keys: Sequence[int], noise: gtsam.noiseModel.Base | np.ndarray,
                  fn: ErrorFn | None,
                  xs: Sequence[np.ndarray],
                  evaluated: tuple[np.ndarray, Sequence[np.ndarray]] | None = None
                  ) -> gtsam.LinearContainerFactor:
    """``fn`` linearised once at ``xs`` (the values of ``keys``), as GTSAM's built-in
    linear factor: a whitened :class:`gtsam.JacobianFactor` in a
    :class:`gtsam.LinearContainerFactor` holding its linearisation point (issue 24).

    Numerically the factor :func:`custom_factor` gives once GTSAM linearises it at
    ``xs`` (``NoiseModelFactor::linearize``: A = Σ^-½ J, b = −Σ^-½ e, no noise model
    left), but ISAM2 never calls back into Python: each callback costs tens of
    microseconds per linearisation. Only for a solver that keeps the linearisation
    point (ISAM2 without relinearisation): away from ``xs`` GTSAM moves only b,
    b − A δ (the factor stays linear). ``noise`` is diagonal (a constrained model
    has no whitening: use :func:`custom_factor`).

    ``evaluated``: ``fn(xs, True)`` when the caller has it already (e.g. an innovation
    gate that evaluated the same model at the same point): then ``fn`` is not called.
    ``noise`` may be the σ's themselves (an array): no noise model is built then.
    """
    e, J = fn(xs, True) if evaluated is None else evaluated
    inv = 1.0 / (noise if isinstance(noise, np.ndarray) else noise.sigmas())
    # Σ^-½ J row by row, built transposed so that the result is column-major (Eigen's
    # layout: pybind11 then passes it without a copy)
    return _container(keys, [(np.asarray(Ji).T * inv).T for Ji in J], -e * inv,
                      'linear_factor', xs)


def _container(keys: Sequence[int], A: Sequence[np.ndarray], b: np.ndarray, who: str,
               xs: Sequence[np.ndarray] | None = None) -> gtsam.LinearContainerFactor:
    """The JacobianFactor ``A δ = b`` on 1 or 2 ``keys`` in a LinearContainerFactor at
    their values ``xs`` (its linearisation point; without ``xs``, none: GTSAM then
    takes the factor as it is wherever it linearises it)."""
    unit = _unit(b.size)
    if len(keys) == 1:
        jf = gtsam.JacobianFactor(keys[0], A[0], b, unit)
    elif len(keys) == 2:
        jf = gtsam.JacobianFactor(keys[0], A[0], keys[1], A[1], b, unit)
    else:
        raise ValueError(f'{who}: 1 or 2 keys, got {len(keys)}')
    if xs is None:
        return gtsam.LinearContainerFactor(jf)
    values = gtsam.Values()
    for k, x in zip(keys, xs):
        values.insert(k, x)
    return gtsam.LinearContainerFactor(jf, values)


@lru_cache(maxsize=64)
def _unit(rows: int) -> gtsam.noiseModel.Unit:
    """The unit noise model of ``rows`` rows: a whitened JacobianFactor's (the same linear
    system as no model; GTSAM's Python binding builds the factor ~2x faster with it)."""
    return gtsam.noiseModel.Unit.Create(rows)


def stacked_linear_factor(keys: Sequence[int], xs: Sequence[np.ndarray],
                          blocks: Sequence[tuple[Sequence[int], np.ndarray, np.ndarray,
                                                 Sequence[np.ndarray]]]
                          ) -> gtsam.LinearContainerFactor:
    """Several factors linearised at ``xs`` (the values of ``keys``) as ONE whitened
    :class:`gtsam.JacobianFactor` in a :class:`gtsam.LinearContainerFactor` (issue 24).

    ``blocks``: per factor (positions of its variables in ``keys``, its diagonal σ, its
    error e and Jacobians J, one per variable it has): the rows of each, stacked in order,
    are those :func:`linear_factor` gives it (A = Σ^-½ J, b = −Σ^-½ e; zero columns on
    the variables it does not have), so the linear system is the same as with one factor
    each; GTSAM builds and indexes one object instead of several.

    The container holds no linearisation point: it is for a solver whose own
    linearisation point of ``keys`` is ``xs`` and stays there (ISAM2 without
    relinearisation, given ``xs`` as the new keys' values), where GTSAM would move b by
    −A δ with δ = 0, so the factor is the same without building ``gtsam.Values``; ``xs``
    give the variables' sizes. (A caller may instead write the same rows into buffers it
    keeps from call to call: :func:`whitened_state_rows`, :func:`whitened_trapezoidal_b`,
    :func:`linear_container`.)
    """
    rows = sum(e.size for _, _, e, _ in blocks)
    A = [np.zeros((rows, x.size), order='F') for x in xs]
    b = np.empty(rows)
    r = 0
    for on, sigma, e, J in blocks:      # b = −Σ^-½ e, A = Σ^-½ J
        m = e.size
        inv = 1.0 / sigma
        np.multiply(e, -inv, out=b[r:r + m])
        col = inv[:, None]
        for pos, Ji in zip(on, J):
            np.multiply(Ji, col, out=A[pos][r:r + m])
        r += m
    return _container(keys, A, b, 'stacked_linear_factor')


def linear_container(keys: Sequence[int], A: Sequence[np.ndarray], b: np.ndarray
                     ) -> gtsam.LinearContainerFactor:
    """The whitened JacobianFactor ``A δ = b`` on 1 or 2 ``keys`` in a LinearContainerFactor
    without a linearisation point (as :func:`stacked_linear_factor`'s): for a
    caller that writes A and b itself, e.g. into buffers it keeps from tick to tick (GTSAM
    copies them into the factor, so they can be written again once it is built)."""
    return _container(keys, A, b, 'linear_container')


def sigmas(*blocks: tuple[int, float]) -> gtsam.noiseModel.Diagonal:
    """Diagonal noise from (size, sigma) blocks."""
    return gtsam.noiseModel.Diagonal.Sigmas(
        np.concatenate([np.full(size, s, dtype=float) for size, s in blocks]))


def prior_factor(key: int, value: np.ndarray, noise: gtsam.noiseModel.Base
                 ) -> gtsam.PriorFactorVector:
    """f_prior, Eq. 21: e = x − x0 (GTSAM's built-in factor)."""
    return gtsam.PriorFactorVector(key, np.asarray(value, dtype=float), noise)


def stacked_state_error(sys: MultibodySystem, tau: np.ndarray | None, xs: Sequence[np.ndarray],
                        want: bool):
    """f_dpc + f_dvc + f_ddyn (Eqs. 24-26) on one stacked state x = [q, q̇, q̈].

    ``sys``: any mechanism with ``state_terms`` (the planar ``System`` or a spatial
    ``SpatialSystem``, whose loop rows are seed 002 §VII's and q̈ its tree dynamics).

    Error rows: [Φ(q) (m); Φq q̇ (m); q̈(q, q̇) − q̈ (n)].
    """
    n, m = sys.n, sys.m
    x = xs[0]
    q, qd, qdd = x[:n], x[n:2 * n], x[2 * n:]
    a = t = sys.state_terms(q, qd, tau, want)
    if not m:                                   # a tree: the dynamics rows alone
        e = a.qdd - qdd
        if not want:
            return e, None
        return e, [np.concatenate((a.qdd_q, a.qdd_qd, _neg_eye(n)), axis=1)]
    e = np.concatenate((t.phi, t.phi_q @ qd, a.qdd - qdd))
    if not want:
        return e, None
    J = np.empty((2 * m + n, 3 * n))
    _state_jacobian(t, n, m, J, True)
    return e, [J]


def _state_jacobian(t: StateTerms, n: int, m: int, J: np.ndarray, full: bool) -> None:
    """The state factor's Jacobian (Eqs. 24-26) from ``t`` (``state_terms`` with
    Jacobians) written into ``J`` (2m + n, 3n): its blocks that move with the state (Φq,
    Φ̇q, ∂q̈/∂q, ∂q̈/∂q̇), the constant ones (zeros, the −I of Eq. 26) only with ``full``."""
    r = 2 * m
    if full:
        J[:] = 0.0
        J[r:, 2 * n:] = _neg_eye(n)
    J[r:, :n] = t.qdd_q
    J[r:, n:2 * n] = t.qdd_qd
    if m:                                       # loops: the constraint rows (Eqs. 24-25)
        J[:m, :n] = t.phi_q
        J[m:r, :n] = t.phi_q_dot
        J[m:r, n:2 * n] = t.phi_q


def whitened_state_rows(sys: MultibodySystem, tau: np.ndarray | None, x: np.ndarray,
                        inv: np.ndarray, ninv: np.ndarray, J: np.ndarray, A: np.ndarray,
                        b: np.ndarray, full: bool) -> None:
    """:func:`stacked_state_error`'s rows at ``x`` whitened, written in place: ``A`` (its
    rows, 3n) ← Σ^-½ J and ``b`` (its rows) ← −Σ^-½ e, with ``inv`` = 1/σ and ``ninv`` =
    −1/σ per row: the rows :func:`stacked_linear_factor` gives the block (σ, e, J),
    element by element the same products.

    ``J`` (rows, 3n), a buffer the caller keeps from call to call, receives the Jacobian:
    only its blocks that move with the state (Eqs. 24-26: Φq, Φ̇q and the dynamics'
    ∂q̈/∂q, ∂q̈/∂q̇), the constant ones (zeros, the −I of Eq. 26) only with ``full`` (a new
    buffer); then A and b are each one product (issue 24: fewer numpy calls than a new
    Jacobian and error per tick; a JacobianFactor copies A and b, so the caller may keep
    them too)."""
    n, m = sys.n, sys.m
    q, qd, qdd = x[:n], x[n:2 * n], x[2 * n:]
    t = sys.state_terms(q, qd, tau, True)
    r = 2 * m
    _state_jacobian(t, n, m, J, full)
    np.subtract(t.qdd, qdd, out=b[r:])
    if m:                                       # loops: the constraint rows (Eqs. 24-25)
        b[:m] = t.phi
        np.matmul(t.phi_q, qd, out=b[m:r])
    np.multiply(J, inv[:, None], out=A)
    np.multiply(b, ninv, out=b)


@lru_cache(maxsize=8)
def _neg_eye(n: int) -> np.ndarray:
    """−I (n x n), read-only (a constant block of every state factor's Jacobian)."""
    out = -np.eye(n)
    out.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def stacked_integrator_jacobians(n: int, dt: float, trapezoidal: bool, corrected: bool = False
                                 ) -> tuple[np.ndarray, np.ndarray]:
    """A0, A1 with e = A0 x_{k-1} + A1 x_k for stacked x = [p, ṗ, p̈] (Eqs. 22/23);
    ``corrected`` (with ``trapezoidal`` only): the q rows of :func:`stacked_trapezoidal_error`
    (the trapezoidal rule with its end correction, + dt²/12 (q̈_k − q̈_{k−1})); the
    simulator's (``simulation/forward.py``) are Eq. 23's own, the default.

    Constants of (n, dt): kept per value (a tick loop has a handful of dt's), read-only."""
    eye = np.eye(n)
    J0 = np.zeros((2 * n, 3 * n))
    J1 = np.zeros((2 * n, 3 * n))
    h = 0.5 * dt if trapezoidal else dt
    J0[:n, :n] = -eye
    J0[:n, n:2 * n] = -h * eye
    J0[n:, n:2 * n] = -eye
    J0[n:, 2 * n:] = -h * eye
    J1[:n, :n] = eye
    J1[n:, n:2 * n] = eye
    if trapezoidal:
        J1[:n, n:2 * n] = -h * eye
        J1[n:, 2 * n:] = -h * eye
        if corrected:
            c = dt * dt / 12.0
            J0[:n, 2 * n:] = -c * eye
            J1[:n, 2 * n:] = c * eye
    J0.flags.writeable = J1.flags.writeable = False
    return J0, J1


def stacked_trapezoidal_error(n: int, dt: float, xs: Sequence[np.ndarray], want: bool):
    """Two f_ti (Eq. 23) between stacked states, q from q̇ and q̇ from q̈, the q rows with
    the trapezoidal rule's end correction (Euler–Maclaurin):

        q_k − q_{k−1} − dt/2 (q̇_{k−1} + q̇_k) + dt²/12 (q̈_k − q̈_{k−1})
        q̇_k − q̇_{k−1} − dt/2 (q̈_{k−1} + q̈_k)

    Both rows are exact for q̈ linear over the step, the trapezoidal model the
    estimator's readings between keys are interpolated under (cubic Hermite,
    :func:`mbfg_ros.estimation.observations.interpolation_weights`); Eq. 23's q row alone
    errs by dt³/12 q⃛ there. That error does not average out: with keys several grid
    periods apart (merged ticks) it biased the four-bar's crank angle by 0.036 mrad at 4
    periods from noise-free readings, 0.004 with the correction
    (``bench/predicted_estimates.py``: its angle at a tick every 4 periods 1.18x that of
    every period, 1.02x with it). The q̇ row has no such correction from x alone (it
    needs q⃛ at the keys); its error is dt³/12 q⁗."""
    X0, X1 = np.asarray(xs[0]).reshape(3, n), np.asarray(xs[1]).reshape(3, n)   # q, q̇, q̈
    # [q; q̇]_k − [q; q̇]_{k−1} − dt/2 ([q̇; q̈]_{k−1} + [q̇; q̈]_k), both levels at once
    e = (X1[:2] - X0[:2] - 0.5 * dt * (X0[1:] + X1[1:])).reshape(2 * n)
    e[:n] += dt * dt / 12.0 * (X1[2] - X0[2])
    return e, (list(stacked_integrator_jacobians(n, dt, True, True)) if want else None)


def whitened_trapezoidal_b(n: int, dt: float, x0: np.ndarray, x1: np.ndarray,
                           inv: np.ndarray, out: np.ndarray) -> None:
    """``out`` ← −Σ^-½ e of :func:`stacked_trapezoidal_error` (Eq. 23) between ``x0`` and
    ``x1``, ``inv`` = 1/σ per row: the same doubles as ``-e * inv`` (−(d − h + c) is
    h − d − c exactly), in place and without the error function's list and reshapes."""
    X0, X1 = x0.reshape(3, n), x1.reshape(3, n)
    B = out.reshape(2, n)
    np.subtract(0.5 * dt * (X0[1:] + X1[1:]), X1[:2] - X0[:2], out=B)
    B[0] -= dt * dt / 12.0 * (X1[2] - X0[2])
    np.multiply(out, inv, out=out)


def stacked_trapezoidal_jerk_error(n: int, dt: float, xs: Sequence[np.ndarray], want: bool):
    """:func:`stacked_trapezoidal_error` plus the change of q̈ over the step, q̈_k − q̈_{k−1}
    (a bounded-jerk process model). Where the dynamics say little about q̈ (motor torques
    unknown), the trapezoidal rule alone leaves q̈ free to alternate from tick to tick
    (q̇_k − q̇_{k−1} = dt/2 (q̈_{k−1} + q̈_k) only fixes the sum); these rows damp it."""
    e, J = stacked_trapezoidal_error(n, dt, xs, want)
    x0, x1 = xs
    e = np.concatenate((e, x1[2 * n:] - x0[2 * n:]))
    if not want:
        return e, None
    eye = np.eye(n)
    J0 = np.vstack((J[0], np.hstack((np.zeros((n, 2 * n)), -eye))))
    J1 = np.vstack((J[1], np.hstack((np.zeros((n, 2 * n)), eye))))
    return e, [J0, J1]


def stacked_euler_error(n: int, dt: float, xs: Sequence[np.ndarray], want: bool):
    """Two f_ei (Eq. 22) between stacked states."""
    x0, x1 = xs
    e = np.concatenate((x1[:n] - x0[:n] - dt * x0[n:2 * n],
                        x1[n:2 * n] - x0[n:2 * n] - dt * x0[2 * n:]))
    return e, (list(stacked_integrator_jacobians(n, dt, False)) if want else None)


def basis_matrix(basis: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """The (d, n) matrix B of z = B q: the selector of seed 000 Eq. 9 that picks ``q[idx]``
    for indices, or B itself if 2-D."""
    if isinstance(basis, np.ndarray) and basis.ndim == 2:
        return basis
    B = np.zeros((len(basis), n))
    B[np.arange(len(basis)), list(basis)] = 1.0
    return B


def stacked_indep_state_error(sys: MultibodySystem, basis: Sequence[int] | np.ndarray,
                              tau: np.ndarray | None, xs: Sequence[np.ndarray], want: bool):
    """f_ipc + f_ivc + f_iac + f_idyn (Eqs. 27, 30-32) on stacked x = [q, q̇, q̈] and
    Z = [z, ż, z̈] with z = B q (``basis``: indices or a (d, n) matrix): the system's own
    ``independent_state_error`` (natural coordinates:
    :func:`mbfg_ros.planar.factors.stacked_indep_state_error`; a formulation without
    independent-coordinate dynamics raises)."""
    return sys.independent_state_error(basis, tau, xs, want)


