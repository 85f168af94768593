"""Identification of a URDF arm from measured torques (issue 27 item 3).

Inverse dynamics is linear in each link's ten standard parameters
``π_b = [m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` (inertia about the link frame's
origin; Pinocchio's ``computeJointTorqueRegressor`` gives the columns) and in each joint's drive
parameters (:mod:`.drives`): viscous ``b``, Coulomb ``fc`` (the unit law of
:func:`mbfg_ros.core.friction.friction_torque` with the overlay's ``v_s``, smooth sign and
Stribeck shape: ``fs/fc`` and ``v_st`` held),
a constant ``offset`` and the rotor inertia ``Ir`` (column ``c cᵀ q̈``, gear ratio and
``carried`` from the overlay)::

    τ = W(q, q̇, q̈) π

**Base parameters.** Not every column shows in τ; a pivoted QR of W's normalised columns keeps
the identifiable (base) ones and gives the regressor's condition number; base columns with a
small pivot are *poorly excited*, the others are combinations of them.

**Physical consistency by construction** (Wensing, Kim, Slotine, "Linear matrix inequalities
for physically consistent inertial parameter identification", RA-L 2018): a link is consistent
iff its pseudo-inertia ``J = [[½ tr(Ī) 1 − Ī, h], [hᵀ, m]]`` is positive definite (mass > 0,
inertia positive definite with the triangle inequality). Each link is written in log-Cholesky
parameters θ (Rucker & Wensing, "Smooth parameterization of rigid-body inertia", RA-L 2022):
``J = U Uᵀ``, ``U = e^α [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3],
[0, 0, 0, 1]]``, so every θ is a consistent link. The fit minimises, over θ and the drive
parameters (b, fc, Ir ≥ 0),

    Σ_samples ‖(W π(θ) − τ_measured) / σ_joint‖²  +  λ (‖θ − θ_URDF‖² + ‖(d − d_0) / s‖²)

(σ_joint: the measured torque's RMS; d: the drive parameters, s: |d_0| plus a floor), the
regularisation pulling what the data cannot see toward the URDF's and the overlay's values
(θ-space keeps every link strictly inside the consistent set; a prior of relative width 1
against torques known to 1 % of their RMS is λ = 1e-4, the default). Cross-validation fits
the first ``fit_fraction`` of every log and predicts the rest, beside an unconstrained
least-squares fit of the base parameters on the same split (the issue's benchmark).
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
import scipy.linalg
import scipy.optimize

from ..core.errors import MbfgError
from ..core.friction import Friction, friction_torque
from .drives import rotor_vector, root_axes
from .model import SpatialModel
from .system import SpatialSystem

__all__ = ['LINK_PARAMETERS', 'DRIVE_PARAMETERS', 'IdentifyConfig', 'Samples', 'UrdfIdentified',
           'link_parameters', 'pseudo_inertia', 'from_pseudo_inertia', 'log_cholesky',
           'to_log_cholesky', 'parameter_names', 'prior', 'regressor', 'identify_urdf',
           'identified_urdf', 'identified_overlay', 'write_identified']

LINK_PARAMETERS = ('m', 'mx', 'my', 'mz', 'Ixx', 'Ixy', 'Iyy', 'Ixz', 'Iyz', 'Izz')
DRIVE_PARAMETERS = ('b', 'fc', 'offset', 'Ir')
_FLOOR = np.array([0.1, 0.01, 0.01, 0.01, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3])
_DRIVE_FLOOR = np.array([0.1, 0.1, 0.1, 1e-4])
_BASE_TOL = 1e-6
_POOR = 1e-3
_EXP_MAX = 30.0      # |α|, |d| beyond: a trial step of the optimiser, not a link


@dataclass(frozen=True)
class IdentifyConfig:
    """``regularisation``: λ; ``fit_fraction``: the share of each log fitted in the
    cross-validation (the rest is predicted)."""

    regularisation: float = 1e-4
    fit_fraction: float = 0.6
    max_evaluations: int = 500
    """the constrained fit's cap on residual evaluations (Levenberg-Marquardt): where it
    stops there, :attr:`UrdfIdentified.evaluations` says so and the report too"""


class Samples(NamedTuple):
    """Measured states and torques, stacked over logs: q, q̇, q̈ (N, n), τ (N, n)."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray


# ---------------------------------------------------------------- one link's parameters

def link_parameters(model: SpatialModel) -> np.ndarray:
    """(n, 10) standard parameters of the moving links (about each link frame's origin)."""
    out = np.zeros((model.n, 10))
    for j in range(model.n):
        b = j + 1
        m, c, Ic = model.mass[b], model.com[b], model.inertia[b]
        Io = Ic + m * (float(c @ c) * np.eye(3) - np.outer(c, c))
        out[j] = [m, *(m * c), Io[0, 0], Io[0, 1], Io[1, 1], Io[0, 2], Io[1, 2], Io[2, 2]]
    return out


def _inertia(pi: np.ndarray) -> np.ndarray:
    return np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])


def pseudo_inertia(pi: np.ndarray) -> np.ndarray:
    """Wensing's 4x4 pseudo-inertia ``[[½ tr(Ī) 1 − Ī, h], [hᵀ, m]]`` of ``π`` (10,)."""
    Io = _inertia(pi)
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(Io) * np.eye(3) - Io
    J[:3, 3] = J[3, :3] = pi[1:4]
    J[3, 3] = pi[0]
    return J


def from_pseudo_inertia(J: np.ndarray) -> np.ndarray:
    """π (10,) of a pseudo-inertia (inverse of :func:`pseudo_inertia`)."""
    S = J[:3, :3]
    Io = np.trace(S) * np.eye(3) - S
    return np.array([J[3, 3], *J[:3, 3], Io[0, 0], Io[0, 1], Io[1, 1], Io[0, 2], Io[1, 2],
                     Io[2, 2]])


def log_cholesky(theta: np.ndarray) -> np.ndarray:
    """π (10,) of log-Cholesky parameters θ = (α, d1, d2, d3, s12, s23, s13, t1, t2, t3):
    always a physically consistent link (module docstring)."""
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = theta
    ea, e1, e2, e3 = np.exp(np.clip((a, d1, d2, d3), -_EXP_MAX, _EXP_MAX))
    U = ea * np.array([[e1, s12, s13, t1], [0.0, e2, s23, t2], [0.0, 0.0, e3, t3],
                       [0.0, 0.0, 0.0, 1.0]])
    return from_pseudo_inertia(U @ U.T)


def to_log_cholesky(pi: np.ndarray, floor: float = 1e-9) -> np.ndarray:
    """θ of a link (inverse of :func:`log_cholesky`); a link that is not strictly consistent
    (a massless URDF link) is first moved to the nearest one with eigenvalues ≥ ``floor``."""
    J = pseudo_inertia(pi)
    w, V = np.linalg.eigh(0.5 * (J + J.T))
    if w.min() < floor:
        J = (V * np.maximum(w, floor)) @ V.T
    P = np.eye(4)[::-1]
    U = P @ np.linalg.cholesky(P @ J @ P) @ P          # upper triangular, J = U Uᵀ
    a = math.log(U[3, 3])
    U = U / U[3, 3]
    return np.array([a, math.log(U[0, 0]), math.log(U[1, 1]), math.log(U[2, 2]), U[0, 1],
                     U[1, 2], U[0, 2], U[0, 3], U[1, 3], U[2, 3]])


def _dlog_cholesky(theta: np.ndarray) -> np.ndarray:
    """∂π/∂θ (10 x 10) of :func:`log_cholesky`: ``dJ = dU Uᵀ + U dUᵀ``, π linear in J."""
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = theta
    ea, e1, e2, e3 = np.exp(np.clip((a, d1, d2, d3), -_EXP_MAX, _EXP_MAX))
    U = ea * np.array([[e1, s12, s13, t1], [0.0, e2, s23, t2], [0.0, 0.0, e3, t3],
                       [0.0, 0.0, 0.0, 1.0]])
    dU = np.zeros((10, 4, 4))
    dU[0] = U
    for k, (i, e) in enumerate(((0, e1), (1, e2), (2, e3)), 1):
        dU[k, i, i] = ea * e
    for k, (i, j) in enumerate(((0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3)), 4):
        dU[k, i, j] = ea
    dJ = dU @ U.T
    dJ = dJ + dJ.transpose(0, 2, 1)
    return np.array([from_pseudo_inertia(J) for J in dJ]).T


# ---------------------------------------------------------------- the regressor

def parameter_names(system: SpatialSystem) -> list[str]:
    """``<link>.<param>`` for the links, then ``<joint>.<param>`` for the drives."""
    m = system.model
    return ([f'{m.link_names[j + 1]}.{p}' for j in range(m.n) for p in LINK_PARAMETERS]
            + [f'{j}.{p}' for j in m.joint_names for p in DRIVE_PARAMETERS])


def _drive(system: SpatialSystem, j: int):
    """The overlay's / URDF's drive of joint j (a ``JointDrive``), or None."""
    return system.model.drives[j] if system.model.drives else None


def prior(system: SpatialSystem) -> np.ndarray:
    """π of the URDF and overlay: links (10 n) then per joint (b, fc, offset, Ir)."""
    drive = np.zeros((system.n, 4))
    for j in range(system.n):
        d = _drive(system, j)
        if d is not None:
            f = d.friction or Friction()
            drive[j] = [f.b, f.fc, d.offset, d.Ir]
    return np.concatenate([link_parameters(system.model).ravel(), drive.ravel()])


def _unit_laws(system: SpatialSystem) -> list[Friction]:
    """Per joint the unit law (fc = 1, b = 0) with the overlay's v_s, smooth sign, v_st and
    Stribeck ratio fs/fc (1 without a prior Coulomb level)."""
    out = []
    for j in range(system.n):
        d = _drive(system, j)
        f = d.friction if d is not None and d.friction is not None else Friction()
        out.append(Friction(b=0.0, fc=1.0, v_s=f.v_s, smooth=f.smooth,
                            fs=f.fs / f.fc if f.fc > 0 else 1.0, v_st=f.v_st))
    return out


def _rotor_vectors(system: SpatialSystem) -> np.ndarray:
    """(n, n): row j is c_j of a unit rotor on joint j (gear ratio, carried: the overlay's)."""
    model = system.model
    carried = any(d is not None and d.carried for d in (model.drives or ()))
    axes = root_axes(model) if carried else None
    C = np.zeros((model.n, model.n))
    for j in range(model.n):
        d = _drive(system, j)
        C[j] = rotor_vector(model, j, d.gr if d is not None else 1.0,
                            bool(d is not None and d.carried), axes)
    return C


def regressor(system: SpatialSystem, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray
              ) -> np.ndarray:
    """W (N·n, 14 n): rows sample-major (sample k, joint j), columns as
    :func:`parameter_names`; ``W @ prior(system)`` is the system's inverse dynamics."""
    import pinocchio as pin
    from .pin_backend import build_pinocchio_model
    if system.loops.m:
        raise MbfgError(f'{system.model.source}: identification of a URDF with loop joints is '
                        'not supported (open trees only)')
    n = system.n
    pm = build_pinocchio_model(system.model)
    pd = pm.createData()
    laws, C = _unit_laws(system), _rotor_vectors(system)
    q, qd, qdd = (np.atleast_2d(np.asarray(x, float)) for x in (q, qd, qdd))
    N = len(q)
    W = np.zeros((N, n, 14 * n))
    base = 10 * n
    for k in range(N):
        W[k, :, :base] = pin.computeJointTorqueRegressor(pm, pd, q[k], qd[k], qdd[k])
        for j in range(n):
            col = base + 4 * j
            W[k, j, col] = qd[k, j]
            W[k, j, col + 1] = friction_torque(laws[j], float(qd[k, j]))[0]
            W[k, j, col + 2] = 1.0
            W[k, :, col + 3] = C[j] * float(C[j] @ qdd[k])
    return W.reshape(N * n, 14 * n)


# ---------------------------------------------------------------- the fit

def _base_columns(Wn: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(base column indices, their |pivot| relative to the first, condition number) of the
    column-normalised regressor (pivoted QR)."""
    _, R, piv = scipy.linalg.qr(Wn, mode='economic', pivoting=True)
    d = np.abs(np.diag(R))
    r = int(np.sum(d > _BASE_TOL * d[0]))
    base = piv[:r]
    sv = np.linalg.svd(Wn[:, base], compute_uv=False)
    return base, d[:r] / d[0], float(sv[0] / sv[-1])


class _Problem(NamedTuple):
    R: np.ndarray          # (p, p) of the QR of the scaled regressor
    y: np.ndarray          # (p,) Qᵀ τ_scaled
    rest: float            # ‖τ_scaled‖² − ‖y‖²


def _reduce(W: np.ndarray, tau: np.ndarray, sigma: np.ndarray) -> _Problem:
    """The least-squares data term in p rows: ‖W π − τ‖²_σ = ‖R π − y‖² + rest (σ per joint:
    the measured torque's RMS, so joints weigh alike)."""
    n = len(sigma)
    N = len(tau) // n
    s = np.tile(1.0 / sigma, N)
    Ws, ts = W * s[:, None], tau * s
    Q, R = np.linalg.qr(Ws)
    y = Q.T @ ts
    return _Problem(R, y, float(ts @ ts - y @ y))


def _fit(system: SpatialSystem, W: np.ndarray, tau: np.ndarray, sigma: np.ndarray,
         pi0: np.ndarray, lam: float, start: np.ndarray, max_evaluations: int
         ) -> tuple[np.ndarray, int, bool]:
    """Consistent links (log-Cholesky θ) and non-negative b, fc, Ir (written u², offsets
    free) minimising the data term plus ``λ (‖θ − θ_URDF‖² + ‖(drive − drive_0)/s‖²)`` by
    Levenberg-Marquardt from ``start`` (π; its links moved to consistent ones first).
    Regularising θ rather than π keeps every link strictly inside the consistent set (a
    link on its boundary has some log-Cholesky diagonal at −∞). (π, residual evaluations,
    converged: False where it stopped at ``max_evaluations``)."""
    n = system.n
    nl = 10 * n
    prob = _reduce(W, tau, sigma)
    mass_floor = 1e-6 * max(float(np.max(pi0[:nl:10])), 1e-3)
    theta_ref = np.concatenate([to_log_cholesky(pi0[10 * j:10 * j + 10], mass_floor)
                                for j in range(n)])
    drive_ref = pi0[nl:]
    w_theta = math.sqrt(lam)
    w_drive = math.sqrt(lam) / (np.abs(drive_ref) + np.tile(_DRIVE_FLOOR, n))
    squared = np.ones(4 * n, bool)
    squared[2::4] = False                            # offsets have either sign
    floor = np.tile(_DRIVE_FLOOR, n) * 1e-3

    def params(x: np.ndarray) -> np.ndarray:
        drive = x[nl:].copy()
        drive[squared] = drive[squared] ** 2
        return np.concatenate([*(log_cholesky(x[10 * j:10 * j + 10]) for j in range(n)),
                               drive])

    def residual(x: np.ndarray) -> np.ndarray:
        pi = params(x)
        return np.concatenate([prob.R @ pi - prob.y, w_theta * (x[:nl] - theta_ref),
                               w_drive * (pi[nl:] - drive_ref)])

    def jacobian(x: np.ndarray) -> np.ndarray:
        D = np.zeros((len(x), len(x)))
        for j in range(n):
            D[10 * j:10 * j + 10, 10 * j:10 * j + 10] = _dlog_cholesky(x[10 * j:10 * j + 10])
        dd = np.ones(4 * n)
        dd[squared] = 2 * x[nl:][squared]
        D[nl:, nl:] = np.diag(dd)
        reg = np.zeros((len(x), len(x)))
        reg[:nl, :nl] = w_theta * np.eye(nl)
        reg[nl:, nl:] = np.diag(w_drive * dd)
        return np.vstack([prob.R @ D, reg])

    theta0 = [to_log_cholesky(start[10 * j:10 * j + 10], mass_floor) for j in range(n)]
    drive0 = start[nl:].copy()
    drive0[squared] = np.sqrt(np.maximum(drive0[squared], floor[squared]))
    sol = scipy.optimize.least_squares(residual, np.concatenate([*theta0, drive0]),
                                       jac=jacobian, method='lm', max_nfev=max_evaluations)
    return params(sol.x), int(sol.nfev), bool(sol.status > 0)


def _least_squares(W: np.ndarray, tau: np.ndarray, sigma: np.ndarray, pi0: np.ndarray,
                   base: np.ndarray) -> np.ndarray:
    """Unconstrained least squares of the base columns, the others at their prior values."""
    n = len(sigma)
    N = len(tau) // n
    s = np.tile(1.0 / sigma, N)
    other = np.setdiff1d(np.arange(W.shape[1]), base)
    rhs = (tau - W[:, other] @ pi0[other]) * s
    pi = pi0.copy()
    pi[base] = np.linalg.lstsq(W[:, base] * s[:, None], rhs, rcond=None)[0]
    return pi


def _rmse(W: np.ndarray, pi: np.ndarray, tau: np.ndarray, n: int) -> np.ndarray:
    e = (W @ pi - tau).reshape(-1, n)
    return np.sqrt(np.mean(e ** 2, axis=0))


@dataclass(frozen=True)
class UrdfIdentified:
    """The identified parameters and what the data said about them."""

    names: tuple[str, ...]
    joint_names: tuple[str, ...]
    link_names: tuple[str, ...]          # the moving links, joint order
    prior: np.ndarray
    values: np.ndarray                   # fitted on every sample
    base: tuple[str, ...]                # identifiable (base) columns
    poorly_excited: tuple[str, ...]
    condition: float                     # of the normalised base regressor
    cv_rmse: np.ndarray                  # (n,) the constrained fit's prediction error
    cv_rmse_ls: np.ndarray               # (n,) unconstrained least squares, same split
    cv_rmse_prior: np.ndarray            # (n,) the URDF + overlay, same split
    min_eigenvalue: np.ndarray           # (n,) of each link's pseudo-inertia (> 0: consistent)
    ls_min_eigenvalue: np.ndarray        # (n,) the same for the least-squares fit
    evaluations: tuple[int, int] = (0, 0)    # the constrained fits' (all data, CV part)
    converged: tuple[bool, bool] = (True, True)  # False: stopped at max_evaluations

    def report(self) -> str:
        n = len(self.joint_names)
        lines = [f'{len(self.names)} parameters, {len(self.base)} identifiable (base); '
                 f'condition number of the normalised base regressor {self.condition:.3g}']
        if self.poorly_excited:
            lines.append('poorly excited (pivot < 1e-3 of the first): '
                         + ', '.join(self.poorly_excited))
        lines.append('cross-validation (fit the first part of every log, predict the rest), '
                     'torque RMSE N m per joint:')
        for j in range(n):
            lines.append(f'  {self.joint_names[j]}: identified {self.cv_rmse[j]:.4f}, '
                         f'unconstrained least squares {self.cv_rmse_ls[j]:.4f}, '
                         f'URDF {self.cv_rmse_prior[j]:.4f}')
        lines.append(f'  mean: identified {self.cv_rmse.mean():.4f}, least squares '
                     f'{self.cv_rmse_ls.mean():.4f}, URDF {self.cv_rmse_prior.mean():.4f}')
        bad = [self.link_names[j] for j in range(n) if self.ls_min_eigenvalue[j] <= 0]
        lines.append('every identified link is physically consistent (pseudo-inertia > 0)'
                     if (self.min_eigenvalue > 0).all() else
                     'NOT CONSISTENT: ' + ', '.join(self.link_names[j] for j in range(n)
                                                    if self.min_eigenvalue[j] <= 0))
        if bad:
            lines.append('the unconstrained fit is not consistent for: ' + ', '.join(bad))
        (n_all, n_cv), (ok_all, ok_cv) = self.evaluations, self.converged
        if ok_all and ok_cv:
            lines.append(f'the constrained fit converged in {n_all} evaluations (its '
                         f'cross-validation fit in {n_cv})')
        else:
            which = ' and '.join(w for w, ok in (('on all the data', ok_all),
                                                 ('on the cross-validation part', ok_cv))
                                 if not ok)
            lines.append(f'NOT CONVERGED: the constrained fit {which} stopped at its cap of '
                         f'{max(self.evaluations)} evaluations; the values it cannot tell '
                         'apart from the data (poorly excited, regularised) depend on where '
                         'it stopped: richer motion, or a higher cap (--max-evaluations, '
                         'IdentifyConfig.max_evaluations)')
        return '\n'.join(lines)

    def link(self, j: int) -> np.ndarray:
        return self.values[10 * j:10 * j + 10]

    def drive(self, j: int) -> np.ndarray:
        nl = 10 * len(self.joint_names)
        return self.values[nl + 4 * j:nl + 4 * j + 4]


def _split(parts: Sequence[Samples], fraction: float) -> tuple[Samples, Samples]:
    fit, val = [], []
    for s in parts:
        k = int(round(fraction * len(s.q)))
        if k < 1 or k >= len(s.q):
            raise MbfgError(f'a log of {len(s.q)} samples cannot be split {fraction:g} / '
                            f'{1 - fraction:g} for cross-validation')
        fit.append(Samples(*(x[:k] for x in s)))
        val.append(Samples(*(x[k:] for x in s)))
    return _stack(fit), _stack(val)


def _stack(parts: Sequence[Samples]) -> Samples:
    return Samples(*(np.concatenate([getattr(p, f) for p in parts]) for f in Samples._fields))


def identify_urdf(system: SpatialSystem, parts: Sequence[Samples],
                  config: IdentifyConfig = IdentifyConfig()) -> UrdfIdentified:
    """Identify ``system``'s links and drives from measured samples (module docstring);
    ``parts``: one :class:`Samples` per log (each split for the cross-validation)."""
    n = system.n
    pi0 = prior(system)
    names = parameter_names(system)
    fit, val = _split(parts, config.fit_fraction)
    every = _stack(parts)
    sigma = np.sqrt(np.mean(every.tau ** 2, axis=0))
    sigma = np.where(sigma > 0, sigma, 1.0)
    Wf = regressor(system, fit.q, fit.qd, fit.qdd)
    Wv = regressor(system, val.q, val.qd, val.qdd)
    tf, tv = fit.tau.ravel(), val.tau.ravel()
    norms = np.linalg.norm(Wf, axis=0)
    used = norms > 0
    base_u, pivots, cond = _base_columns(Wf[:, used] / norms[used])
    base = np.flatnonzero(used)[base_u]
    pi_ls = _least_squares(Wf, tf, sigma, pi0, base)
    pi_fit, cv_evaluations, cv_converged = _fit(system, Wf, tf, sigma, pi0,
                                                config.regularisation, pi_ls,
                                                config.max_evaluations)
    W, t_all = np.vstack([Wf, Wv]), np.concatenate([tf, tv])
    values, evaluations, converged = _fit(system, W, t_all, sigma, pi0, config.regularisation,
                                          _least_squares(W, t_all, sigma, pi0, base),
                                          config.max_evaluations)

    def eig(pi: np.ndarray) -> np.ndarray:
        return np.array([np.linalg.eigvalsh(pseudo_inertia(pi[10 * j:10 * j + 10])).min()
                         for j in range(n)])
    m = system.model
    return UrdfIdentified(
        names=tuple(names), joint_names=m.joint_names,
        link_names=tuple(m.link_names[1:]), prior=pi0, values=values,
        base=tuple(names[i] for i in base),
        poorly_excited=tuple(names[i] for i, p in zip(base, pivots) if p < _POOR),
        condition=cond, cv_rmse=_rmse(Wv, pi_fit, tv, n), cv_rmse_ls=_rmse(Wv, pi_ls, tv, n),
        cv_rmse_prior=_rmse(Wv, pi0, tv, n), min_eigenvalue=eig(values),
        ls_min_eigenvalue=eig(pi_ls), evaluations=(evaluations, cv_evaluations),
        converged=(converged, cv_converged))


# ---------------------------------------------------------------- writing the model

def _fmt(x: float) -> str:
    return repr(float(x))


def identified_urdf(urdf_text: str | bytes, system: SpatialSystem, result: UrdfIdentified
                    ) -> str:
    """The URDF with each moving link's ``<inertial>`` replaced by the identified one (in the
    link frame, about the centre of mass); links merged into it by fixed joints lose theirs
    (their mass is in the identified link). ``<dynamics>`` are removed from the tree joints
    (the overlay carries the identified friction)."""
    data = urdf_text.encode() if isinstance(urdf_text, str) else urdf_text
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    root = ET.fromstring(data, parser=parser)
    model = system.model
    merged = {name for name, (b, _) in model.frames.items()
              if b > 0 and name != model.link_names[b]}
    links = {el.get('name'): el for el in root.findall('link')}
    for name in merged:
        for ine in links[name].findall('inertial'):
            links[name].remove(ine)
    for j in range(model.n):
        el = links[model.link_names[j + 1]]
        for ine in el.findall('inertial'):
            el.remove(ine)
        pi = result.link(j)
        m = pi[0]
        c = pi[1:4] / m
        Ic = _inertia(pi) - m * (float(c @ c) * np.eye(3) - np.outer(c, c))
        ine = ET.Element('inertial')
        ET.SubElement(ine, 'origin', xyz=' '.join(_fmt(v) for v in c), rpy='0 0 0')
        ET.SubElement(ine, 'mass', value=_fmt(m))
        ET.SubElement(ine, 'inertia', ixx=_fmt(Ic[0, 0]), ixy=_fmt(Ic[0, 1]),
                      ixz=_fmt(Ic[0, 2]), iyy=_fmt(Ic[1, 1]), iyz=_fmt(Ic[1, 2]),
                      izz=_fmt(Ic[2, 2]))
        el.insert(0, ine)
    tree_joints = set(model.joint_names)
    for jt in root.findall('joint'):
        if jt.get('name') in tree_joints:
            for dyn in jt.findall('dynamics'):
                jt.remove(dyn)
    ET.indent(root)
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding='unicode') + '\n'


def identified_overlay(overlay: Mapping[str, Any], system: SpatialSystem,
                       result: UrdfIdentified) -> dict:
    """The overlay with ``joints:`` holding the identified friction (b, fc, offset; v_s,
    smooth, v_st and the ratio fs/fc from before) and rotor inertia (gear ratio and
    ``carried`` kept)."""
    out = dict(overlay)
    joints = {}
    laws = _unit_laws(system)
    for j, name in enumerate(system.model.joint_names):
        b, fc, off, Ir = (float(v) for v in result.drive(j))
        f = laws[j]
        d = _drive(system, j)
        entry: dict[str, Any] = {'friction': {'b': b, 'fc': fc, 'v_s': f.v_s,
                                              'smooth': f.smooth, 'fs': fc * f.fs,
                                              'v_st': f.v_st, 'offset': off}, 'Ir': Ir}
        if d is not None:
            entry['gr'] = float(d.gr)
            if d.carried:
                entry['carried'] = True
        joints[name] = entry
    out['joints'] = joints
    return out


def write_identified(path: str | Path, overlay_path: str | Path, urdf_text: bytes,
                     overlay: Mapping[str, Any], system: SpatialSystem,
                     result: UrdfIdentified) -> None:
    """Write the identified URDF and overlay (both loadable by every tool; each atomically)."""
    import yaml

    from ..core.output import write_text_atomic
    write_text_atomic(path, identified_urdf(urdf_text, system, result), 'URDF')
    write_text_atomic(overlay_path, '# identified by mbfg-identify (docs/real-arms.md)\n'
                      + yaml.safe_dump(identified_overlay(overlay, system, result),
                                       sort_keys=False), 'overlay')
