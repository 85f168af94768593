"""The CPU governor of the live node's tick loop with ``predict_between_ticks`` (issue 24).

The node process's whole CPU time (process clock: the loop thread's intake, predictions,
publishing, smoother ticks and executor turns, and rclpy's and the DDS middleware's own
threads: what ``top`` shows for the node) is charged against ``max_tick_load`` of the wall
clock as a credit in seconds of CPU: it grows by ``load`` × the wall time elapsed (at most
:data:`BANK_PERIODS` periods' worth banked) and shrinks by the CPU the process used (a busy
computer that preempts the node costs it no budget; its own work does). At each grid tick
that falls due, :meth:`TickGovernor.decide` chooses, in this order of priority:

1. ``smooth``: the smoother ticks (merging the grid ticks since its last one) when the
   credit covers a smoother tick (its running cost) above the reserve (below), and in
   any case once
   ``max_spacing`` grid periods have passed since its last tick (``forced``, even in debt:
   every estimate's accuracy rests on the smoother's spacing; ``bench/predicted_estimates.py``
   prints, per robot, the spacing N_max that keeps angle, rate and τ̂ within 10 %; so where
   the smoother alone costs more than ``max_spacing`` periods' budget the node uses more
   than ``max_tick_load``, as the merging design did past its 4-period pause);
2. ``predict``: the grid tick gets a predicted estimate
   (:meth:`~mbfg_ros.estimation.prediction.PredictionMixin.predict`, seed 000 Eq. 23 and
   26) if, after paying for it, the credit still reaches zero by the smoother's
   ``max_spacing``-th period, the loop's other work (intake, executor) paid meanwhile at
   its measured rate: the smoother's share is reserved first;
3. ``thin``: otherwise the grid tick gets no estimate (counted, ``ticks.thinned``).

A debt deeper than ``max_spacing`` periods' budget is forgiven (one slow tick: a GC
pause, GTSAM's batch relinearisation, does not hold the smoother back for long).

The reserve: the credit banks up to :data:`BANK_PERIODS` periods' budget, and a smoother
tick before its ``max_spacing``-th period is paid only from what lies above
:data:`RESERVE_PERIODS` periods' budget. On a machine whose speed comes and goes (a shared
VM: tens of ms at 1.5-2x the cost), the slow stretch's predictions are then paid from the
reserve the quick stretch left, where a governor that spent every credit on early smoother
ticks thinned them; in steady running nothing changes (the credit sits at the reserve and
the surplus goes to the smoother as before). ``bench/governor_bursts.py`` compares the two
on synthetic cost traces. Averaged over a second the node keeps to ``load``; within a
slow stretch it may spend the reserve (at most ``RESERVE_PERIODS`` × ``load`` × period of
CPU beyond its budget). Pure
Python, no rclpy: the node calls :meth:`charge` once per loop pass with the wall and process
clocks, :meth:`spent` after each smoother tick and prediction (their loop-thread CPU).
"""
from __future__ import annotations

from typing import Sequence

__all__ = ['TickGovernor', 'BANK_PERIODS', 'RESERVE_PERIODS', 'SMOOTH', 'PREDICT', 'THIN',
           'dry_run']

BANK_PERIODS = 14
"""Most credit banked, in periods' worth of budget (default): after a quiet spell the
smoother runs back to back for at most ``BANK_PERIODS - RESERVE_PERIODS`` periods' worth."""

RESERVE_PERIODS = 10
"""Credit kept for predictions, in periods' worth of budget (default): a smoother tick
before its ``max_spacing``-th period is paid only from the credit above it (module
docstring). 0 with ``BANK_PERIODS`` 4: the governor of the fifth and sixth sessions."""

SMOOTH, PREDICT, THIN = 'smooth', 'predict', 'thin'

_EMA = 0.05       # weight of a new sample in the running costs
_SPAN = 0.05      # s: the time the running share of the loop's other work averages over


class TickGovernor:
    """Spends ``load`` of a core (process CPU per wall second) on the node: the
    smoother at least every ``max_spacing`` grid periods, predictions in what is left
    (module docstring). ``period``: the grid period in seconds."""

    def __init__(self, load: float, period: float, max_spacing: int,
                 bank_periods: int = BANK_PERIODS, reserve_periods: int = RESERVE_PERIODS
                 ) -> None:
        if not (0.0 < load <= 1.0 and period > 0.0 and max_spacing >= 1
                and 0 <= reserve_periods < bank_periods):
            raise ValueError(f'TickGovernor: load {load!r} in (0, 1], period {period!r} > 0, '
                             f'max_spacing {max_spacing!r} >= 1, 0 <= reserve_periods '
                             f'{reserve_periods!r} < bank_periods {bank_periods!r}')
        self.load, self.period, self.max_spacing = float(load), float(period), int(max_spacing)
        self.credit = 0.0                   # s of CPU the loop may still spend
        self._bank = bank_periods * self.load * self.period
        self._reserve = reserve_periods * self.load * self.period
        self._floor = -self.max_spacing * self.load * self.period   # deepest debt kept
        self._wall: float | None = None
        self._cpu = 0.0
        self._work = 0.0                    # CPU of smoother ticks + predictions since charge
        self.prediction_cost = 0.0          # running mean, s (prediction + its publishing)
        self.smoother_cost = 0.0            # running mean, s (smoother tick + publishing)
        self.other_rate = 0.0               # running share of a core spent on the rest
        self.counts = {SMOOTH: 0, PREDICT: 0, THIN: 0, 'forced': 0}
        self._used = self._span = 0.0       # CPU and wall time charged since share()

    def charge(self, wall: float, cpu: float) -> None:
        """The wall clock (s, monotonic) and the node process's CPU clock (s) now: the
        budget earned since the last call is added, the CPU used is paid."""
        if self._wall is None:
            self._wall, self._cpu = wall, cpu
            return
        dt, used = wall - self._wall, cpu - self._cpu
        self._wall, self._cpu = wall, cpu
        if dt <= 0.0:
            return
        self._used += used
        self._span += dt
        other = max(used - self._work, 0.0)
        self._work = 0.0
        # a running mean over time (not over passes: a short pass must not weigh as much)
        w = min(dt / _SPAN, 1.0)
        self.other_rate += w * (min(other / dt, 1.0) - self.other_rate)
        self.credit = max(min(self.credit + self.load * dt, self._bank) - used, self._floor)

    def spent(self, kind: str, cpu: float, n: int = 1) -> None:
        """A smoother tick (``SMOOTH``) or ``n`` predictions with their publishing
        (``PREDICT``) took ``cpu`` s of the loop thread's CPU (already in the next
        :meth:`charge`; this keeps their running costs and tells them apart from the node's
        other work: intake, executor, the middleware's threads)."""
        self._work += cpu
        if kind == PREDICT and n > 0:
            cpu /= n
            self.prediction_cost += (_EMA * (cpu - self.prediction_cost)
                                     if self.prediction_cost else cpu)
        elif kind == SMOOTH:
            self.smoother_cost += (_EMA * (cpu - self.smoother_cost)
                                   if self.smoother_cost else cpu)

    def share(self) -> float:
        """The process's CPU per wall second charged since the last call (NaN: none)."""
        out = self._used / self._span if self._span > 0.0 else float('nan')
        self._used = self._span = 0.0
        return out

    def _earn(self, spacing: int) -> float:
        """The credit the budget still earns, past the loop's other work at its running
        rate, from ``spacing`` periods after the smoother's last tick to its
        ``max_spacing``-th."""
        left = max(self.max_spacing - spacing, 0)
        return left * self.period * max(self.load - self.other_rate, 0.0)

    def affordable(self, spacing: int, wanted: int, smoothing: bool = False) -> int:
        """How many of ``wanted`` predictions the budget affords for grid ticks due
        ``spacing`` periods after the smoother's last tick (the loop came late for the older
        ones): after :meth:`decide` said ``PREDICT``, at least 1 (the newest ones get them);
        ``smoothing`` (it said ``SMOOTH``): for the grid ticks before the one the smoother
        takes, paid with its tick and the next ``max_spacing`` periods' budget, maybe 0."""
        earn = self._earn(0 if smoothing else spacing)   # smoothing: a whole spacing again
        have = self.credit + earn - (self.smoother_cost if smoothing else 0.0)
        n = 0 if smoothing else 1
        while n < wanted and have - (n + 1) * self.prediction_cost >= 0.0:
            n += 1
        return n

    def decide(self, spacing: int) -> str:
        """``SMOOTH``, ``PREDICT`` or ``THIN`` for the grid tick due ``spacing`` periods
        after the smoother's last tick (module docstring); counted in :attr:`counts`."""
        if self.credit >= self.smoother_cost + self._reserve:
            kind = SMOOTH
        elif spacing >= self.max_spacing:
            kind = SMOOTH
            self.counts['forced'] += 1
        else:
            kind = (PREDICT if self.credit - self.prediction_cost + self._earn(spacing) >= 0.0
                    else THIN)
        self.counts[kind] += 1
        return kind


def dry_run(gov: TickGovernor, smoother: float, prediction: float, other: float,
            slow: Sequence[float]) -> tuple[list[str], float]:
    """``gov``'s decisions as the live loop takes them, one per grid period, on a synthetic
    machine: a smoother tick costs ``smoother`` s of CPU, a prediction ``prediction`` s and
    the loop's other work ``other`` s per period, each times ``slow[k]`` in period k (its
    slowness; 1: as given). (the decisions, CPU per wall second). For
    ``bench/governor_bursts.py`` and the tests: no rclpy, no clock."""
    wall = cpu = 0.0
    since, kinds = 0, []
    gov.charge(wall, cpu)
    for f in slow:
        wall += gov.period
        cpu += other * f
        gov.charge(wall, cpu)
        since += 1
        kind = gov.decide(since)
        cost = (smoother if kind == SMOOTH else prediction if kind == PREDICT else 0.0) * f
        cpu += cost
        gov.spent(kind, cost)
        since = 0 if kind == SMOOTH else since
        kinds.append(kind)
    return kinds, cpu / wall if wall > 0.0 else float('nan')
