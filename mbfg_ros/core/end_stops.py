"""Joint position limits as unilateral constraints, velocity limits as reports (issue 30
item 3): what a simulator does at a joint's ``<limit lower upper>`` and ``velocity``.

A joint that reaches a position limit stops there: its position is held at the limit and
its rate into the limit is removed (an inelastic end stop: the impact takes the kinetic
energy of that motion). While the dynamics push it further, it is locked: the stop's
reaction λ (a generalised force on that coordinate only) is the one that makes its
acceleration zero,

    q̈ = q̈_free + M⁻¹ e_A λ_A,   (M⁻¹)_AA λ_A = −q̈_free,A,

kept only where λ pushes away from the stop (else the joint leaves the stop: the active set
is reduced until every λ has the right sign; a linear complementarity problem solved by
elimination, exact for one active joint). Velocity limits are not enforced (a simulated
motor does not saturate the rate); exceeding them is counted and reported.

Pure numpy on the joint coordinates; no formulation is imported.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ['EndStops', 'EndStopLog']


@dataclass(frozen=True)
class EndStops:
    """Per coordinate: ``lower``/``upper`` position limits (±inf: none) and ``velocity``
    limit (inf: none); ``names`` for the reports."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.names)
        for what in ('lower', 'upper', 'velocity'):
            arr = np.asarray(getattr(self, what), float)
            if arr.shape != (n,):
                raise ValueError(f'EndStops.{what}: expected {n} values, got {arr.shape}')
            object.__setattr__(self, what, arr)
        if np.any(self.lower > self.upper):
            k = int(np.flatnonzero(self.lower > self.upper)[0])
            raise ValueError(f'EndStops: joint {self.names[k]!r}: lower {self.lower[k]:g} > '
                             f'upper {self.upper[k]:g}')

    @property
    def limited(self) -> bool:
        """Whether any coordinate has a finite position limit."""
        return bool(np.isfinite(self.lower).any() or np.isfinite(self.upper).any())

    def clamp(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q, q̇, hit): positions beyond a limit put on it, their rate into the limit removed;
        ``hit`` marks the coordinates that were beyond."""
        below, above = q < self.lower, q > self.upper
        hit = below | above
        if not hit.any():
            return q, qd, hit
        q = np.clip(q, self.lower, self.upper)
        qd = qd.copy()
        qd[below] = np.maximum(qd[below], 0.0)
        qd[above] = np.minimum(qd[above], 0.0)
        return q, qd, hit

    def on_stop(self, q: np.ndarray, tol: float = 1e-12) -> np.ndarray:
        """Coordinates at one of their position limits."""
        return (q <= self.lower + tol) | (q >= self.upper - tol)

    def locked(self, q: np.ndarray, qd: np.ndarray, qdd_free: np.ndarray,
               tol: float = 1e-12) -> np.ndarray:
        """Coordinates on a stop, not moving away from it, that the free dynamics push into
        it: the candidates for :meth:`constrained`."""
        at_lower = (q <= self.lower + tol) & (qd <= 0.0) & (qdd_free < 0.0)
        at_upper = (q >= self.upper - tol) & (qd >= 0.0) & (qdd_free > 0.0)
        return at_lower | at_upper

    def constrained(self, qdd_free: np.ndarray, M: np.ndarray, locked: np.ndarray
                    ) -> np.ndarray:
        """q̈ with the ``locked`` coordinates held by their stops' reactions (module
        docstring); coordinates whose reaction would pull them onto the stop are released."""
        active = np.flatnonzero(locked)
        if not active.size:
            return qdd_free
        Minv = np.linalg.inv(M)
        sign = np.where(qdd_free < 0.0, 1.0, -1.0)      # lower stop pushes +, upper pushes −
        while active.size:
            lam = np.linalg.solve(Minv[np.ix_(active, active)], -qdd_free[active])
            wrong = lam * sign[active] < 0.0
            if not wrong.any():
                return qdd_free + Minv[:, active] @ lam
            active = active[~wrong]
        return qdd_free


@dataclass
class EndStopLog:
    """What the end stops did during a run, per coordinate: ``impacts`` (times a joint came
    onto a stop), ``steps_locked``, ``over_velocity`` (steps with |q̇| above its limit),
    ``peak_velocity_ratio`` (largest |q̇| / limit) and ``peak_penetration`` (deepest past a
    limit: 0 for the exact stops here, > 0 for a stiff stop force such as the planar one,
    :mod:`mbfg_ros.planar.end_stops`)."""

    names: tuple[str, ...]
    impacts: np.ndarray = field(init=False)
    steps_locked: np.ndarray = field(init=False)
    over_velocity: np.ndarray = field(init=False)
    peak_velocity_ratio: np.ndarray = field(init=False)
    peak_penetration: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.names)
        self.impacts = np.zeros(n, int)
        self.steps_locked = np.zeros(n, int)
        self.over_velocity = np.zeros(n, int)
        self.peak_velocity_ratio = np.zeros(n)
        self.peak_penetration = np.zeros(n)

    def update_penetrating(self, stops: EndStops, q_before: np.ndarray, q: np.ndarray,
                           qd: np.ndarray) -> None:
        """Count one step of a stop that is a force (positions may pass a limit): a joint
        beyond its limit is 'locked', one that just went beyond is an impact; the depth
        is kept in ``peak_penetration``."""
        depth = np.maximum(stops.lower - q, q - stops.upper)
        beyond = depth > 0.0
        np.maximum(self.peak_penetration, depth, out=self.peak_penetration)
        self.update(stops, q_before, qd, beyond, beyond)

    @property
    def total_impacts(self) -> int:
        return int(self.impacts.sum())

    @property
    def total_over_velocity(self) -> int:
        """Steps with some joint above its velocity limit, summed over joints."""
        return int(self.over_velocity.sum())

    def update(self, stops: EndStops, q_before: np.ndarray, qd: np.ndarray, hit: np.ndarray,
               locked: np.ndarray) -> None:
        """Count one step: impacts (a hit by a joint that was not on its stop at the step's
        start), locked joints, velocities above their limits."""
        self.impacts += hit & ~stops.on_stop(q_before)
        self.steps_locked += locked
        ratio = np.abs(qd) / stops.velocity
        self.over_velocity += ratio > 1.0
        np.maximum(self.peak_velocity_ratio, ratio, out=self.peak_velocity_ratio)

    def lines(self, stops: EndStops, dt: float) -> list[str]:
        """One line per joint that hit a stop or exceeded its velocity limit (``dt``: the
        step, to say how long)."""
        out = []
        for k, name in enumerate(self.names):
            if self.impacts[k]:
                out.append(f'{name}: stopped at its position limit (range '
                           f'[{stops.lower[k]:.4g}, {stops.upper[k]:.4g}]) {self.impacts[k]} '
                           f'time(s), held there {self.steps_locked[k] * dt:.3g} s'
                           + (f', at most {self.peak_penetration[k]:.3g} past it'
                              if self.peak_penetration[k] > 0 else ''))
            if self.over_velocity[k]:
                out.append(f'{name}: above its velocity limit {stops.velocity[k]:.4g} for '
                           f'{self.over_velocity[k] * dt:.3g} s (peak '
                           f'{self.peak_velocity_ratio[k]:.2f}x the limit; not enforced)')
        return out
