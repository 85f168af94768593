"""External joint torques, their σ, a contact flag and a wrench at a link (issue 27 item 4).

With the motor efforts τ_m measured (JointState ``effort``), the estimate (q, q̇, q̈) gives
the external joint torques (De Luca & Mattone 2005's residual idea, here from the smoother's
own estimate instead of a momentum observer)::

    τ_ext = τ_model(q, q̇, q̈) − τ_m            (actuator space: ``torques`` of the seam)

since ``M q̈ + h = B (τ_m + τ_ext)``. Only the formulation seam is used
(:class:`~mbfg_ros.core.interface.MultibodySystem`: ``torques``, ``actuator_matrix``,
``actuator_joints``, ``link_jacobian``), so planar mechanisms and URDF robots alike give
τ_ext; the wrench needs ``link_jacobian`` (URDF robots).

σ (first-order propagation of the estimate's covariance): with Σ the (3n, 3n) marginal
covariance of x = [q, q̇, q̈] at the tick (:attr:`Estimate.covariance`) and
J = ∂τ_model/∂x (``MultibodySystem.torque_jacobians``: analytic, one inverse dynamics with
derivatives)::

    σ_i² = (J Σ Jᵀ)_ii + effort_sigma²

the measured effort's noise taken independent of the estimate (an approximation: the
dynamics factor pulled q̈ toward FD(τ_m), so the two are somewhat correlated). J and σ
are refreshed when the estimator refreshes Σ (every ``covariance_every`` ticks, as
``~/state_stddev``), held in between.

Contact: a joint is "above" when |τ_ext,i| > k σ_i (``threshold`` k); the flag rises when
some joint stayed above for ``min_duration`` s and falls at the first tick none is.

Wrench at ``wrench_link`` (link frame, about its origin, ``[n; f]``): τ_ext = Bᵀ Jᵀ w is
solved by damped least squares, ``w = (AᵀA + λ² 1)⁻¹ Aᵀ τ_ext`` with A = Bᵀ Jᵀ (n_act, 6) and
λ = ``wrench_damping``: the exact solution where A has full column rank and λ is small, the
minimum-norm one otherwise (fewer than 6 joints above the link); joints below the link
(zero columns of J) do not enter.

Per tick nothing is allocated that can be made once: the outputs are views of buffers owned
by :class:`ExternalTorques`, overwritten by the next :meth:`ExternalTorques.update` (copy
them to keep them).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.interface import MultibodySystem
from ..core.measurements import Estimate

__all__ = ['ExternalConfig', 'ExternalOutput', 'ExternalTorques']


@dataclass(frozen=True)
class ExternalConfig:
    """Parameters of the external torques (the node's ``contact_*``/``external_*``)."""

    threshold: float = 3.0          # k: a joint is above when |τ_ext| > k σ
    min_duration: float = 0.0       # s above before the contact flag rises (0: the first tick)
    effort_sigma: float = 0.0       # N·m (N): noise of the measured efforts, added to σ
    wrench_link: str = ''           # link of the wrench ('' = no wrench)
    wrench_damping: float = 1e-3    # λ of the damped least squares

    def __post_init__(self) -> None:
        for name in ('threshold', 'min_duration', 'effort_sigma', 'wrench_damping'):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f'ExternalConfig.{name} must be a finite number >= 0, '
                                 f'got {v!r}')


@dataclass
class ExternalOutput:
    """One tick's external torques (views of the owner's buffers, see the module)."""

    t: float
    tau: np.ndarray           # (n_act,) τ_ext, NaN where the effort is not measured
    sigma: np.ndarray         # (n_act,) its σ
    contact: bool
    wrench: np.ndarray | None  # (6,) [n; f] at the link, link frame; None: no link
    valid: bool               # every actuator's effort measured (else the flag is False)


class ExternalTorques:
    """τ_ext, σ, contact flag and wrench, once per estimate (module docstring)."""

    def __init__(self, sys: MultibodySystem, config: ExternalConfig | None = None) -> None:
        self.sys = sys
        self.config = cfg = config if config is not None else ExternalConfig()
        n = sys.n
        B = np.asarray(sys.actuator_matrix(sys.q0), float)
        self.n, self.na = n, B.shape[1]
        self.names = tuple(j if j is not None else a.name for j, a in
                           zip(sys.actuator_joints, sys.description.actuators))
        self._B = B
        if cfg.wrench_link:
            sys.link_jacobian(sys.q0, cfg.wrench_link)     # unknown link / planar: raises
        self._tau = np.full(self.na, np.nan)
        self._sigma = np.full(self.na, np.nan)
        self._var = np.zeros(self.na)
        self._J = np.zeros((self.na, 3 * n))
        self._JS = np.zeros((self.na, 3 * n))
        self._wrench = np.full(6, np.nan) if cfg.wrench_link else None
        self._eye6 = (cfg.wrench_damping ** 2) * np.eye(6)
        self._cov: np.ndarray | None = None
        self._since: float | None = None
        self.contact = False
        self.counters = {'contacts': 0, 'no_effort': 0, 'no_covariance': 0}

    def reset(self) -> None:
        """Forget the flag's history and the held σ (after an estimator reset)."""
        self._since, self.contact, self._cov = None, False, None
        self._sigma[:] = np.nan

    def _refresh_sigma(self, est: Estimate) -> None:
        """J = ∂τ_model/∂[q, q̇, q̈] (``torque_jacobians``) and σ² = diag(J Σ Jᵀ) + σ_e²."""
        n, J = self.n, self._J
        _, J[:, :n], J[:, n:2 * n], J[:, 2 * n:] = self.sys.torque_jacobians(est.q, est.qd,
                                                                             est.qdd)
        np.matmul(J, est.covariance, out=self._JS)
        np.einsum('ij,ij->i', self._JS, J, out=self._var)
        self._var += self.config.effort_sigma ** 2
        np.sqrt(np.maximum(self._var, 0.0, out=self._var), out=self._sigma)
        self._cov = est.covariance

    def update(self, est: Estimate, tau_motor: np.ndarray) -> ExternalOutput:
        """τ_ext = est.tau − τ_m (NaN where ``tau_motor`` is), σ, the flag and the wrench."""
        cfg = self.config
        np.subtract(est.tau, tau_motor, out=self._tau)
        valid = bool(np.isfinite(self._tau).all())
        if est.covariance is None:
            self.counters['no_covariance'] += 1
        elif valid and est.covariance is not self._cov:
            self._refresh_sigma(est)        # only when σ is used
        if not valid:
            self.counters['no_effort'] += 1
            self._since, self.contact = None, False
        else:
            above = bool(np.any(np.abs(self._tau) > cfg.threshold * self._sigma))
            if not above:
                self._since, self.contact = None, False
            else:
                if self._since is None:
                    self._since = est.t
                if not self.contact and est.t - self._since >= cfg.min_duration - 1e-9:
                    self.contact = True
                    self.counters['contacts'] += 1
        if self._wrench is not None:
            if valid:
                A = self._B.T @ self.sys.link_jacobian(est.q, cfg.wrench_link).T   # (na, 6)
                self._wrench[:] = np.linalg.solve(A.T @ A + self._eye6, A.T @ self._tau)
            else:
                self._wrench[:] = np.nan
        return ExternalOutput(est.t, self._tau, self._sigma, self.contact, self._wrench, valid)

