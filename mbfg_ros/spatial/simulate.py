"""Forward-dynamics simulation of a URDF robot (``SpatialSystem``), with the package's
integrators (seed 000 Eqs. 22-23) on the joint coordinates of the spanning tree.

``trapezoidal`` (default, second order, keeps energy): per step, Newton on
``q_k = q_{k-1} + dt/2 (q̇_{k-1} + q̇_k)``, ``q̇_k = q̇_{k-1} + dt/2 (q̈_{k-1} + q̈_k)`` with
``q̈_k = FD(q_k, q̇_k, τ)``. The Newton matrix uses the exact ∂q̈/∂q, ∂q̈/∂q̇ of the
tree dynamics; with loops, the constrained q̈ of the null-space solver is differentiated
by one-sided differences (the loops' q̈ Jacobian has no closed form here; it only steers
Newton, the residual is exact; it is computed once per step). ``euler`` (first order,
explicit, for comparison).

With loops, after each step q is projected back onto φ(q) = 0 (minimum-norm Gauss-Newton)
and q̇ onto the null space of φ_q, so the constraints do not drift; the trajectory
records ``phi_norm`` = ‖φ(q)‖ per step.

``end_stops`` (:func:`end_stops_of`: the URDF's ``<limit lower upper velocity>`` and the
overlay's ``limits``) makes the position limits unilateral constraints
(:mod:`mbfg_ros.core.end_stops`): a joint reaching a limit stops there (inelastic) and is
held while the dynamics push it further; velocities above their limits are counted in an
:class:`~mbfg_ros.core.end_stops.EndStopLog`. Exact on open chains; with loops the joint is
put back on its limit after the projection onto φ = 0 and held with q̈ = 0 (the loops'
constraint forces are not re-solved for the lock; issue 30 item 3).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Protocol, Union

import numpy as np

from ..core.end_stops import EndStopLog, EndStops
from ..core.errors import MbfgError
from ..core.interface import MultibodySystem
from .loops import LoopConstraints
from .model import SpatialModel

__all__ = ['SpatialTrajectory', 'SpatialStepper', 'simulate_spatial', 'INTEGRATORS',
           'end_stops_of', 'Simulable']


class Simulable(MultibodySystem, Protocol):
    """What the integrators take of a URDF robot: the package's
    :class:`~mbfg_ros.core.interface.MultibodySystem` with the spatial members they use
    (:class:`.system.SpatialSystem` is one; it builds its
    :meth:`~.system.SpatialSystem.integrator` on this module, so the integrators name the
    members they use rather than the class)."""

    model: SpatialModel
    loops: LoopConstraints
    B: np.ndarray                 # (n, na) actuator selection

    @property
    def actuator_names(self) -> tuple[str, ...]: ...

    def forward(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray: ...

    def null_space(self, q: np.ndarray, qd: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def assemble(self, q_guess: np.ndarray, keep: np.ndarray | None = None,
                 tol: float = 1e-12, iterations: int = 50) -> np.ndarray: ...


INTEGRATORS = ('trapezoidal', 'euler')

TorqueInput = Union[None, np.ndarray, Callable[[float, np.ndarray, np.ndarray], np.ndarray]]


class SpatialTrajectory(NamedTuple):
    """Row k is time t[k] (row 0 is t = 0); same fields as ``forward.Trajectory``."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    phi_norm: np.ndarray


def _tau_function(system: Simulable, tau: TorqueInput
                  ) -> Callable[[float, np.ndarray, np.ndarray], np.ndarray]:
    na = system.B.shape[1]
    if tau is None:
        zero = np.zeros(na)
        return lambda t, q, qd: zero
    if callable(tau):
        return tau
    arr = np.asarray(tau, float)
    if arr.shape != (na,):
        raise MbfgError(f'torques: expected {na} values (actuators '
                        f'{", ".join(system.actuator_names)}), got shape {arr.shape}')
    return lambda t, q, qd: arr


def _project(system: Simulable, q: np.ndarray, qd: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Back onto φ(q) = 0 and φ_q q̇ = 0 (loops only)."""
    if not system.loops.m:
        return q, qd
    q = system.assemble(q, tol=1e-13)
    N = system.null_space(q)[0]
    return q, N @ (N.T @ qd)


def end_stops_of(system: Simulable) -> EndStops:
    """The robot's joint limits as end stops: ``<limit lower upper velocity>`` of the URDF
    (with the overlay's ``limits``); a continuous joint has no position limit, a velocity
    limit of 0 or none is no limit."""
    m = system.model
    vel = np.asarray(m.velocity_limit, float)
    vel = np.where(np.isfinite(vel) & (vel > 0), vel, np.inf)
    return EndStops(tuple(system.names), np.asarray(m.lower, float),
                    np.asarray(m.upper, float), vel)


class SpatialStepper:
    """One integrator step at a time (the simulator node's workspace): ``t``, ``q``, ``q̇``,
    ``q̈`` after each :meth:`step` under the torques given to it (module docstring)."""

    def __init__(self, system: Simulable, dt: float, integrator: str = 'trapezoidal',
                 q0: np.ndarray | None = None, qd0: np.ndarray | None = None,
                 tau0: np.ndarray | None = None, newton_tol: float = 1e-12,
                 newton_iterations: int = 20, end_stops: EndStops | None = None,
                 log: EndStopLog | None = None) -> None:
        if integrator not in INTEGRATORS:
            raise MbfgError(f'integrator {integrator!r}: expected one of '
                            f'{", ".join(INTEGRATORS)}')
        if not dt > 0:
            raise MbfgError(f'dt must be > 0, got {dt}')
        self.system, self.dt, self.integrator = system, float(dt), integrator
        self.newton_tol, self.newton_iterations = newton_tol, newton_iterations
        n = system.n
        self._na = system.B.shape[1]
        q = np.array(system.q0 if q0 is None else q0, float)
        qd = np.zeros(n) if qd0 is None else np.array(qd0, float)
        self.stops = end_stops if end_stops is not None and end_stops.limited else None
        self.log = None if self.stops is None else (
            log if log is not None else EndStopLog(tuple(system.names)))
        self.locked = np.zeros(n, bool)
        self.q, self.qd = _project(system, q, qd)
        if self.stops is not None:
            self.q, self.qd, _ = self.stops.clamp(self.q, self.qd)
        self.qdd, self.locked = self.held_accelerations(self.q, self.qd, self._tau(tau0))
        self.t = 0.0
        self.steps = 0
        self._eye = np.eye(2 * n)

    def _tau(self, tau: np.ndarray | None) -> np.ndarray:
        if tau is None:
            return np.zeros(self._na)
        arr = np.asarray(tau, float)
        if arr.shape != (self._na,):
            raise MbfgError(f'torques: expected {self._na} values (actuators '
                            f'{", ".join(self.system.actuator_names)}), got shape {arr.shape}')
        return arr

    def held_accelerations(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray]:
        """(q̈, locked): the forward dynamics with the joints on a stop that the dynamics push
        into it held there (:meth:`EndStops.constrained`; with loops q̈ = 0 on them)."""
        qdd = self.system.forward(q, qd, tau)
        if self.stops is None:
            return qdd, self.locked
        locked = self.stops.locked(q, qd, qdd)
        if locked.any():
            if self.system.loops.m:
                qdd = np.where(locked, 0.0, qdd)
            else:
                qdd = self.stops.constrained(qdd, self.system.mass_matrix(q), locked)
        return qdd, locked

    def step(self, tau: np.ndarray | None = None) -> None:
        """Advance ``dt`` with the actuator torques ``tau`` held over the step (None: 0).

        :raises MbfgError: the state became non-finite (diverged).
        """
        system, dt, n = self.system, self.dt, self.system.n
        q, qd, qdd = self.q, self.qd, self.qdd
        tau_k = self._tau(tau)
        hold = self.stops is not None and self.locked.any()
        if self.integrator == 'euler':
            q_new, qd_new = _project(system, q + dt * qd, qd + dt * qdd)
        else:
            q_new = q + dt * qd + 0.5 * dt * dt * qdd           # Taylor guess
            qd_new = qd + dt * qdd
            J = None
            for _ in range(self.newton_iterations):
                if J is None or not system.loops.m:
                    a, Jq, Jv = system.accelerations(q_new, qd_new, tau_k, jacobians=True)
                    J = self._eye.copy()
                    J[:n, n:] -= 0.5 * dt * np.eye(n)
                    J[n:, :n] -= 0.5 * dt * Jq
                    J[n:, n:] -= 0.5 * dt * Jv
                else:          # loops: keep the step's first (finite-difference) Jacobian
                    a = system.forward(q_new, qd_new, tau_k)
                if hold:       # joints on a stop at the step's start stay held over it
                    a = (np.where(self.locked, 0.0, a) if system.loops.m else
                         self.stops.constrained(a, system.mass_matrix(q_new), self.locked))
                r = np.concatenate([q_new - q - 0.5 * dt * (qd + qd_new),
                                    qd_new - qd - 0.5 * dt * (qdd + a)])
                if np.abs(r).max() < self.newton_tol:
                    break
                step = np.linalg.solve(J, -r)
                q_new = q_new + step[:n]
                qd_new = qd_new + step[n:]
            q_new, qd_new = _project(system, q_new, qd_new)
        self.steps += 1
        self.t = self.steps * dt
        if self.stops is not None:
            q_new, qd_new, hit = self.stops.clamp(q_new, qd_new)
            self.log.update(self.stops, q, qd_new, hit, self.locked)
        self.q, self.qd = q_new, qd_new
        self.qdd, self.locked = self.held_accelerations(q_new, qd_new, tau_k)
        if not np.all(np.isfinite(self.q)):
            raise MbfgError(f'the simulation diverged at t = {self.t:.4g} s (try a smaller dt)')


def simulate_spatial(system: Simulable, duration: float, dt: float = 1e-3,
                     integrator: str = 'trapezoidal', tau: TorqueInput = None,
                     q0: np.ndarray | None = None, qd0: np.ndarray | None = None,
                     progress: Callable[[float], None] | None = None,
                     newton_tol: float = 1e-12, newton_iterations: int = 20,
                     end_stops: EndStops | None = None, log: EndStopLog | None = None
                     ) -> SpatialTrajectory:
    """Simulate ``duration`` seconds from (q0, q̇0) (default: the assembled q0 at rest).

    ``tau``: actuator torques (``system.actuator_names`` order): None (passive), a
    constant array, or ``f(t, q, q̇)`` (trapezoidal: at the step's end time and start state,
    held over the step; euler: at each new state).
    ``progress(t)`` is called after each step. ``end_stops`` (:func:`end_stops_of`; None:
    no limits) holds joints at their position limits; ``log`` (made by the caller) counts
    the impacts and the velocity-limit excesses.
    """
    if integrator not in INTEGRATORS:
        raise MbfgError(f'integrator {integrator!r}: expected one of {", ".join(INTEGRATORS)}')
    if not (duration > 0 and dt > 0):
        raise MbfgError(f'duration and dt must be > 0, got {duration} and {dt}')
    steps = int(round(duration / dt))
    if steps < 1:
        raise MbfgError(f'dt {dt:g} s is longer than the duration {duration:g} s')
    n = system.n
    tau_of = _tau_function(system, tau)
    q = np.array(system.q0 if q0 is None else q0, float)
    qd = np.zeros(n) if qd0 is None else np.array(qd0, float)
    q, qd = _project(system, q, qd)
    sim = SpatialStepper(system, dt, integrator, q, qd, tau_of(0.0, q, qd), newton_tol,
                         newton_iterations, end_stops, log)
    T = np.arange(steps + 1) * dt
    Q, QD, QDD = (np.zeros((steps + 1, n)) for _ in range(3))
    PHI = np.zeros(steps + 1)
    Q[0], QD[0], QDD[0] = sim.q, sim.qd, sim.qdd
    PHI[0] = np.linalg.norm(system.loops.phi(sim.q)) if system.loops.m else 0.0
    for k in range(1, steps + 1):
        if integrator == 'euler':
            # explicit: the step uses the old q̈; the new q̈ is under the new state's torques
            sim.step(None)
            sim.qdd, sim.locked = sim.held_accelerations(sim.q, sim.qd,
                                                         tau_of(T[k], sim.q, sim.qd))
        else:
            sim.step(tau_of(T[k], sim.q, sim.qd))
        Q[k], QD[k], QDD[k] = sim.q, sim.qd, sim.qdd
        if system.loops.m:
            PHI[k] = np.linalg.norm(system.loops.phi(sim.q))
        if progress is not None:
            progress(float(T[k]))
    return SpatialTrajectory(T, Q, QD, QDD, PHI)
