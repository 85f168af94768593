"""The estimator's innovation gate (issue 25): a reading far from the prediction is
rejected.

The :class:`GateMixin` part of :class:`~mbfg_ros.estimation.estimator.Estimator`; the
physical limits are checked before, once, by :class:`mbfg_ros.estimation.gate.LimitGate`.

Each reading passes an innovation gate
(robot_localization's ``*_rejection_threshold``): its Mahalanobis distance to
the prediction from the last estimate, ``|z − h(x̂(t))| / sqrt(S)``, above
``joint_rejection_threshold`` (encoders) or ``imu_rejection_threshold`` is rejected
(``rejected_outlier``). The innovation variance (issue 25) is the smoother's own
prediction, ``S = σ² + H P H ᵀ + H Q(τ) Hᵀ + s_m``: P the marginal covariance of the
estimate it is carried from (no cap tied to the sensor's σ), Q(τ) the process noise of
``dynamics_sigma`` and ``integrator_jerk`` over the τ it is carried, and ``s_m`` the
model error the innovations themselves show: a per-sensor running mean (time constant
``outlier_reset_time``/2) of the innovation power beyond the rest of S, each reading's
contribution clipped to 4 S so one outlier moves it little. A model a few percent off
facing a precise encoder leaves the estimate a steady few σ from the readings; ``s_m``
takes that in and the readings keep being used, where a fixed gate rejected them, let
the estimate run on the model alone, and reset again and again.
With the motor efforts measured (issue 27 item 4), the dynamics' σ in Q(τ) gains the
external torques' share, so a contact is a disturbance, not an outlier: the mismatch
``d = q̈ − q̈(q, q̇, τ_m)`` the last estimate shows (``M d = B τ_ext``: a contact under way,
which may stop or grow by as much again) and the effect ``∂q̈/∂τ σ_c`` of a contact not yet
seen, ``σ_c`` = ``contact_effort_fraction`` of each actuated joint's effort limit
(:func:`contact_sigmas`). Without it, the model with the measured efforts predicts none
of a push, the encoders' first readings of it are 10-80 σ off and a contact reset the
estimate (``diverged``) unless the gate was opened for every reading. The room for a
contact not yet seen widens the encoders' gate only: there a contact's first sign is a
small deviation (½ dt² ∂q̈/∂τ σ_c per tick, ~1e-4 rad on a UR5 at 500 Hz), far below an
encoder glitch, while an accelerometer sees the whole q̈ step of a contact at once, so room
for one there would be room for any spike of that size; an IMU's gate widens by the
contact the estimate shows (d²), once the encoders have shown it.
A sensor whose readings are all rejected for ``outlier_reset_time`` (the gate widened
by ``s_m`` meanwhile, up to ~55x in σ) means the estimate, not the sensor, is lost:
the smoother re-initialises from the newest readings (reset ``diverged``, the sensor
and its distance in :attr:`Estimator.last_reset_reason`), so a poisoned estimate never
latches.

One model evaluation per reading per tick (issue 24): with relinearisation off, the
readings of the new interval (t_{k−1}, t_k] are evaluated once, at their factor's
linearisation point (the new key's inserted prediction, or the state interpolated
between the two keys' points), and the gate takes those ``(e, H)``: the factor's own
residual, carried to the estimate of t_{k−1} by its own Jacobian
(``e + J_{k−1}(x̂_{k−1} − θ_{k−1})``, zero for a reading at the tick, whose point is the
estimate carried forward). The prediction is the same as the former second evaluation
(the last estimate carried by τ and linearised there) up to the point the model is
linearised at (there: the estimate at t_{k−1}; here: the carried state itself, exact at
the tick), so gate decisions differ from it only by that exactness; the factors, and so
the estimates, are unchanged. Late readings (stamped at or before t_{k−1}) and the
CustomFactors of ``relinearize_threshold > 0`` keep the carried linearisation
(:meth:`GateMixin._carried_rows`).
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from ..core.angles import wrap_angle
from ..core.bounded import remember
from ..core.interface import MultibodySystem
from ..core.observation import Observation
from .config import EstimatorConfig
from .intake import _Pending
from .layout import ReadingLayout, reading_slots
from .observations import residuals


def contact_sigmas(sys: MultibodySystem, fraction: float) -> np.ndarray:
    """σ_c per actuator (N·m or N): ``fraction`` of the effort limit of the joint it
    drives; 0 for an actuator without a joint or without a finite effort limit."""
    limits = {j.name: j.limits for j in sys.description.joints}
    out = np.zeros(len(sys.actuator_joints))
    for a, name in enumerate(sys.actuator_joints):
        lim = limits.get(name) if name is not None else None
        effort = abs(float(lim.effort)) if lim is not None else math.inf
        if fraction > 0 and math.isfinite(effort):
            out[a] = fraction * effort
    return out


_FLOAT_READINGS = 8
"""At most this many readings in a gate call: its passing update as floats
(:meth:`GateMixin._gate_pass_floats`), and with their layout its end too
(:meth:`GateMixin._gate_floats`); more: one array operation each."""


class _Diverged(Exception):
    """Every reading of a sensor was rejected for ``outlier_reset_time``."""

    def __init__(self, ready: list, detail: str = '') -> None:
        super().__init__(detail or 'readings rejected for outlier_reset_time')
        self.ready = ready


class GateMixin:
    """The innovation gate and its model-error term (module docstring)."""

    def _set_gate_switches(self, cfg: EstimatorConfig) -> None:
        """What the gate's per-call paths take from the configuration ``cfg``, worked out
        once by the constructor (thresholds and ``outlier_reset_time`` are not
        :data:`~.config.LIVE_FIELDS`: ``Estimator.reconfigure`` leaves them, as the kept
        :class:`~.layout.ReadingLayout`'s thresholds):
        ``_gate_tau_m``, the model error's time constant τ_m = ``outlier_reset_time``/2;
        ``_gate_every``, every threshold on (every reading gated); ``_gate_none``, every
        threshold off (:meth:`_gate_off`); ``_gate_floats_on``, every one on with τ_m > 0:
        the condition of the float paths (:meth:`_gate_floats`, :meth:`_gate_decide`'s few
        readings) instead of one check of the config per call."""
        self._gate_tau_m = 0.5 * cfg.outlier_reset_time
        self._gate_every = (cfg.joint_rejection_threshold > 0
                            and cfg.imu_rejection_threshold > 0)
        self._gate_none = (cfg.joint_rejection_threshold <= 0
                           and cfg.imu_rejection_threshold <= 0)
        self._gate_floats_on = self._gate_every and self._gate_tau_m > 0

    def _gate_off(self) -> bool:
        return self._x_last is None or self._gate_none

    def _carried_rows(self, items: list[_Pending]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(E, H, τ, reading of each row, σ of each row) of readings ``items`` predicted
        from the estimate of the newest tick at or before each stamp (the first in the window
        for older ones) carried forward by τ (q + τq̇ + ½τ²q̈, q̇ + τq̈), through the sensor model
        linearised once per base tick: ``E = h(x̂) ⊖ z + H (x̂(τ) − x̂)``."""
        n = self.n
        hist, times = self._x_hist, self._times
        last = len(hist) - 1
        groups: dict[int, list[int]] = {}
        for i, p in enumerate(items):
            base = last if p.t >= self._t_last else \
                max(0, bisect.bisect_right(times, p.t + self._eps) - 1)
            groups.setdefault(base, []).append(i)
        Es, Hs, taus, rows = [], [], [], []
        order = [i for ids in groups.values() for i in ids]         # the rows' readings
        for base, ids in groups.items():
            t_b, x = hist[base]
            obs = [items[i].ob for i in ids]
            E, H = self._linear_model(obs, x)                 # (R,), (R, 3n)
            sizes = [np.size(ob.sigma) for ob in obs]
            row_of = np.repeat(np.asarray(ids), sizes)
            tau = np.repeat(np.array([items[i].t for i in ids]) - t_b, sizes)
            qd, qdd = x[n:2 * n], x[2 * n:]
            Hq, Hqd = H[:, :n], H[:, n:2 * n]
            c1, c2 = Hq @ qd + Hqd @ qdd, Hq @ qdd
            Es.append(E + tau * c1 + 0.5 * tau * tau * c2)
            Hs.append(H)
            taus.append(tau)
            rows.append(row_of)
        return (np.concatenate(Es), np.concatenate(Hs), np.concatenate(taus),
                np.concatenate(rows), np.concatenate([items[i].ob.sigma for i in order]))

    def _gate(self, items: list[_Pending], E: np.ndarray, H: np.ndarray,
              tau: np.ndarray | float, row_of: np.ndarray, sig: np.ndarray,
              layout: ReadingLayout | None = None) -> np.ndarray:
        """Which of the readings ``items`` pass the innovation gate (module docstring).

        ``E`` (R,): each row's predicted residual ``h ⊖ z`` at the reading's stamp, ``H``
        (R, 3n) the model's Jacobian there, ``tau`` (R,) how far the prediction was carried
        from the last estimate, ``row_of`` (R,) the reading of each row, ``sig`` (R,) its σ.
        Its variance adds to σ² and the estimate's (HPHᵀ) the dynamics' σ on the new q̈,
        the change of q̈ over τ (``integrator_jerk`` · τ), and their effect on q̇ and q
        (HQHᵀ), and the model error s_m. A run of rejections of one sensor longer than
        ``outlier_reset_time`` raises :class:`_Diverged` (the caller puts the readings
        back).

        ``layout``: the readings' :class:`~.layout.ReadingLayout` (their sequence of
        sensors) when they were evaluated with it: one stamp at the tick (``tau`` then one
        float, ``E`` wrapped already where it is an angle: :func:`~.layout.layout_rows`) or
        a few stamps between the ticks (``tau`` per row); its constants replace the
        per-reading look-ups.
        """
        cfg = self.config
        N = len(items)
        n = self.n
        var_s = self._var_last if self._var_last is not None else np.zeros(3 * n)
        shown, unseen = self._external_var()
        dyn, sj2 = self._tick_dyn_sigma, self._jerk2
        stamp = isinstance(tau, float)                  # one stamp: τ one float
        unshown = isinstance(shown, float) and shown == 0.0     # no external share of q̈
        mv = self._model_var
        r = None                                        # z − h at the stamp, where wrapped
        if layout is not None:
            slots, thr = layout.slots, layout.thr
            sm = mv[layout.slot_rows]
            enc, enc_any, distinct = layout.enc_rows, layout.enc_any, layout.distinct
            if layout.wrap_any and not (layout.plan and stamp):
                r = -E
                r = np.where(layout.wrap_rows, wrap_angle(r), r)
            # (with the layout's own plan at one stamp, E's angles are wrapped to (−π, π]
            # already by :func:`~.layout.layout_rows`, so is −E up to the sign of π: r² is
            # the same; between the ticks E is carried to the last estimate, unwrapped)
        else:
            obs = [p.ob for p in items]
            slot_list = reading_slots(obs, self._slot_base)
            slots = np.array(slot_list)                 # the sensor of each reading
            wrap = self._slot_wrap[slots][row_of]
            sm = mv[slots][row_of]
            if wrap.any():
                r = -E
                r = np.where(wrap, wrap_angle(r), r)
            joint = self._slot_joint[slots]
            thr = np.where(joint, cfg.joint_rejection_threshold, cfg.imu_rejection_threshold)
            cnt = np.bincount(row_of, minlength=N)
            enc = joint[row_of]
            enc_any = unseen is not None and enc.any()
            distinct = len(set(slot_list)) == N
        HH = H * H
        var_x = np.dot(HH, var_s)                       # H P Hᵀ (diagonal P)
        # process noise Q(τ), diagonal per row: the new q̈ is only known to the dynamics'
        # σ and changes by up to integrator_jerk·τ; both drive q̇ and q over τ
        one = stamp or (tau[0] == tau[-1] and (tau == tau[0]).all())
        if one:                                         # one stamp (at the tick)
            a2 = (tau if stamp else float(tau[0])) ** 2
            a4 = a2 * a2
            held = self._gate_q
            Q = held[1].get(a2) if unshown and held is not None and held[0] is dyn else None
            if Q is None:   # kept per τ² while σ_d (the same object) and no external share hold
                # (a tick loop's τ takes a few values: its stamps' differences in rounding)
                jerk = self._gate_jerk.get(a2)     # the jerk's share: a constant of τ
                if jerk is None:
                    # (Q's coefficients of σ_d² for q, q̇, q̈; the jerk's share of each)
                    jerk = remember(self._gate_jerk, a2, (np.array([[0.25 * a4], [a2], [1.0]]),
                                                      np.stack((a4 * a2 / 36.0 * sj2,
                                                                0.25 * a4 * sj2, a2 * sj2))))
                Q = (jerk[0] * (dyn ** 2 + shown) + jerk[1]).reshape(3 * n)
                if unshown:
                    if held is None or held[0] is not dyn:
                        held = self._gate_q = (dyn, {})
                    remember(held[1], a2, Q, 16)
            var_p = np.dot(HH, Q)                       # H Q(τ) Hᵀ
        else:
            sd2 = dyn ** 2 + shown
            Cd, Cj, C = self._gate_rows_of(tau)
            Q = (Cd * sd2 + Cj).reshape(len(E), 3 * n)
            var_p = np.einsum('ij,ij->i', HH, Q)        # H Q(τ) Hᵀ, Q(τ) per row
        if unseen is not None and enc_any:
            # a contact not yet seen (module docstring): the encoders' rows only
            if one:                                     # Q_c(τ) the same for every row
                held = self._gate_qc                    # kept per τ² while σ_c's term holds
                Qc = held[1].get(a2) if held is not None and held[0] is unseen else None
                if Qc is None:
                    if held is None or held[0] is not unseen:
                        held = self._gate_qc = (unseen, {})
                    Qc = remember(held[1], a2, np.concatenate((0.25 * a4 * unseen, a2 * unseen,
                                                           unseen)), 16)
                var_c = np.dot(HH, Qc)
            else:
                var_c = np.einsum('rk,rk->r', HH.reshape(len(E), 3, n) @ unseen, C)
            # var_p + (var_c on the encoders' rows, else 0): var_p is this call's own array,
            # and x + 0.0 is x for these sums of squares (no −0.0), so added in place
            np.add(var_p, var_c, out=var_p, where=enc)
        if layout is not None and distinct and N <= _FLOAT_READINGS:
            # a few readings of distinct sensors (a tick's JointState and IMU): the rest as
            # Python floats (:meth:`_gate_floats`), or None if one fails: the arrays then
            keep = self._gate_floats(layout, items[0].t if stamp else [p.t for p in items],
                                     (E if r is None else r).tolist(), sig.tolist(),
                                     var_x.tolist(), var_p.tolist(), sm.tolist())
            if keep is not None:
                return keep
        s0 = sig * sig + var_x + var_p                  # the smoother's prediction
        rr = E * E if r is None else r * r              # (−E)² is E² exactly
        if layout is not None:
            # the three sums per reading in one pass (row_of is the layout's: each reading's
            # rows in the same order as three passes), the two means in one division
            sums = np.bincount(layout.row_of3, np.concatenate((rr / (s0 + sm), rr, s0)),
                               minlength=3 * N)
            d2 = sums[:N]
            means = sums[N:] / layout.cnt2
            power, base_var = means[:N], means[N:]
        else:
            d2 = np.bincount(row_of, rr / (s0 + sm), minlength=N)
            power = np.bincount(row_of, rr, minlength=N) / cnt
            base_var = np.bincount(row_of, s0, minlength=N) / cnt
        if not distinct:
            return self._gate_sequential(slots, [p.t for p in items], thr, d2, power,
                                         base_var)
        # one stamp (τ one float): the readings' time as one float
        t = items[0].t if stamp else np.array([p.t for p in items])
        return self._gate_decide(slots, t, thr, d2, power, base_var)

    def _gate_floats(self, layout: ReadingLayout, t: float | list[float], r: list[float],
                     sig: list[float], var_x: list[float], var_p: list[float],
                     sm: list[float]) -> np.ndarray | None:
        """:meth:`_gate`'s end and :meth:`_gate_decide`'s passing update for a few readings
        of distinct sensors in ``layout``'s sequence (at most :data:`_FLOAT_READINGS`),
        element by element as Python floats when every threshold is on and every reading
        passes: per row ``S₀ = σ² + HPHᵀ + HQHᵀ`` and ``r²`` (``r`` the row's residual),
        per reading ``d² = Σ r²/(S₀ + s_m)``, the innovation power ``Σ r²/rows`` and
        variance ``Σ S₀/rows``: the same operations in the same order on the same doubles
        as the array path (its sums per reading start at 0 and add the rows in order, as
        ``bincount`` does), without a dozen array calls on a few rows. The readings'
        verdicts (every one passes; read-only), or None when the array path decides (a
        threshold off, or a reading rejected)."""
        if not self._gate_floats_on:
            return None
        tau_m = self._gate_tau_m
        N = len(layout.cnt_list)
        d2, pw, ba = [0.0] * N, [0.0] * N, [0.0] * N
        for i, j in enumerate(layout.row_list):
            s = sig[i]
            s0 = s * s + var_x[i] + var_p[i]
            e = r[i]
            rr = e * e
            d2[j] += rr / (s0 + sm[i])
            pw[j] += rr
            ba[j] += s0
        for d, th in zip(d2, layout.thr_list):
            if not d <= th * th:
                return None
        cnt = layout.cnt_list
        self._gate_pass_floats(layout.slots, layout.slot_list,
                               [t] * N if isinstance(t, float) else t,
                               [p / c for p, c in zip(pw, cnt)],
                               [b / c for b, c in zip(ba, cnt)], tau_m)
        return layout.passed

    def _gate_rows_of(self, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The per-row constants of Q(τ) for τ per row (readings at several stamps):
        (σ_d²'s coefficients for q, q̇, q̈ (R, 3, 1), the jerk's share (R, 3, n), Q_c(τ)'s
        coefficients (R, 3): σ_d²'s), kept per τ (its bytes: merged ticks and stamps off the grid
        repeat a few patterns; at most 64, cleared when the σ's change); read-only."""
        key = tau.tobytes()
        held = self._gate_rows.get(key)
        if held is None:
            a2 = tau * tau
            a4 = a2 * a2
            Cd = np.empty((a2.size, 3))                 # (R, 3): q, q̇, q̈
            Cd[:, 0] = 0.25 * a4
            Cd[:, 1] = a2
            Cd[:, 2] = 1.0
            Cj = np.empty((a2.size, 3))
            Cj[:, 0] = a4 * a2 / 36.0
            Cj[:, 1] = 0.25 * a4
            Cj[:, 2] = a2
            # Q_c(τ)'s coefficients are σ_d²'s: ¼τ⁴, τ², 1 (0.25·(τ²·τ²) is (0.25·τ²)·τ²
            # exactly: a product by 0.25 is exact)
            held = remember(self._gate_rows, key,
                            (Cd[:, :, None], Cj[:, :, None] * self._jerk2, Cd))
            for c in held:
                c.flags.writeable = False
        return held

    def _gate_decide(self, slots: np.ndarray, t: np.ndarray | float, thr: np.ndarray,
                     d2: np.ndarray,
                     power: np.ndarray, base_var: np.ndarray) -> np.ndarray:
        """Which readings pass, and each sensor's model error ``s_m`` and rejected run
        updated (module docstring): reading i of sensor ``slots[i]`` at ``t[i]`` (``t`` one
        float: every reading at that stamp), its
        squared distance ``d2[i]`` against ``thr[i]`` (≤ 0: no gate), its innovation power
        and variance without ``s_m``. Vectorised over readings of distinct sensors (no
        per-reading Python); where a sensor has several readings in one call, they update
        its ``s_m`` one after the other (:meth:`_gate_sequential`, called instead)."""
        cfg = self.config
        mv, mt, rs = self._model_var, self._model_t, self._reject_since
        tau_m, every = self._gate_tau_m, self._gate_every
        if self._gate_floats_on and slots.size <= _FLOAT_READINGS:
            ok = d2 <= thr * thr
            if ok.all():        # the common case, a few readings: the same update as floats
                self._gate_pass_floats(slots, slots.tolist(),
                                       [t] * slots.size if isinstance(t, float) else t.tolist(),
                                       power.tolist(), base_var.tolist(), tau_m)
                return ok
        active = True if every else thr > 0
        on, ta, ba, pw = (slots, t, base_var, power) if every else \
            (slots[active], t if isinstance(t, float) else t[active], base_var[active],
             power[active])
        if on.size:
            # the model error the innovations show (module docstring): clipped, so an
            # outlier moves it by at most 4·α·S; a sensor's first reading starts it (α 0:
            # its stamp NaN, fmin takes the reading's; an entry newer than the reading,
            # α 0 too)
            ent_v, ent_t = mv[on], mt[on]
            alpha = np.minimum(1.0, (ta - np.fmin(ent_t, ta)) / tau_m)
            S = ba + ent_v
            mv[on] = (1.0 - alpha) * ent_v + alpha * np.maximum(
                0.0, np.minimum(pw, 4.0 * S) - ba)
            mt[on] = np.fmax(ent_t, ta)
        ok = d2 <= thr * thr
        if every and ok.all():                  # the common case: every reading passes
            rs[slots] = np.nan
            return ok
        rs[slots[ok if every else active & ok]] = np.nan
        rej = ~ok if every else active & ~ok
        keep = ~rej
        if not rej.any():
            return keep
        self._counters['rejected_outlier'] += int(rej.sum())
        bad = slots[rej]
        t_rej = t[rej] if isinstance(t, np.ndarray) else np.full(bad.size, t)
        since = np.where(np.isnan(rs[bad]), t_rej, rs[bad])
        rs[bad] = since
        over = np.flatnonzero(t_rej - since >= cfg.outlier_reset_time)
        if over.size:
            i = over[-1]
            raise _Diverged([], self._diverged_detail(int(bad[i]), float(t_rej[i] - since[i]),
                                                      float(d2[rej][i])))
        return keep

    def _gate_pass_floats(self, slots: np.ndarray, ks: list[int], ts: list[float],
                          power: list[float], base_var: list[float], tau_m: float) -> None:
        """:meth:`_gate_decide`'s update when every reading (of distinct sensors ``slots``,
        as a list ``ks``; at most :data:`_FLOAT_READINGS`) passes, element by element as
        Python floats (stamps ``ts``, innovation powers and variances): the same
        operations in the same order on the same doubles as its array path (α = min(1,
        (t − min(t_m, t))/τ_m), ``s_m ← (1 − α) s_m + α max(0, min(p, 4 S) − S₀)``, t_m ←
        max(t_m, t), NaN t_m read as t), without a dozen array calls on a few elements; the
        sensors' new state written back in one assignment per array."""
        mv, mt = self._model_var, self._model_t
        V, T = [], []
        for k, ti, pw, ba in zip(ks, ts, power, base_var):
            ent_t = mt.item(k)
            ent_v = mv.item(k)
            # min/max written out as Python's builtins evaluate them (the first argument
            # unless the other is strictly beyond it): the same values, no call each
            if ent_t != ent_t or ent_t > ti:        # NaN (first reading) or newer: fmin
                alpha = (ti - ti) / tau_m
            else:
                alpha = (ti - ent_t) / tau_m
            if not alpha < 1.0:
                alpha = 1.0
            S = ba + ent_v
            cap = 4.0 * S
            excess = (cap if cap < pw else pw) - ba
            V.append((1.0 - alpha) * ent_v + alpha * (excess if excess > 0.0 else 0.0))
            T.append(ti if ent_t != ent_t or ti > ent_t else ent_t)
        # distinct sensors: one write each, as the array path's
        mv[slots] = V
        mt[slots] = T
        self._reject_since[slots] = math.nan

    def _gate_sequential(self, slots: np.ndarray, t: np.ndarray | list[float],
                         thr: np.ndarray, d2: np.ndarray, power: np.ndarray, base_var: np.ndarray
                         ) -> np.ndarray:
        """:meth:`_gate_decide` reading by reading: a sensor with several readings in one
        call (readings at several stamps between two ticks) moves its ``s_m`` by each in
        turn. The sensors' state is read into Python lists once and written back once: the
        same float operations in the same order as :meth:`_gate_decide` on one reading
        (α = min(1, max(t − t_m, 0)/τ_m), t_m NaN read as t, ``s_m ← (1 − α) s_m + α max(0,
        min(p, 4 S) − S₀)``, t_m ← max(t_m, t)), without a NumPy scalar per look-up."""
        cfg = self.config
        mv, mt, rs = self._model_var, self._model_t, self._reject_since
        tau_m = self._gate_tau_m
        reset = cfg.outlier_reset_time
        V, T, since = mv.tolist(), mt.tolist(), rs.tolist()
        keep = [True] * slots.size
        rejected = 0
        diverged = ''
        stamps = t if isinstance(t, list) else t.tolist()
        for i, (k, ti, th, d, pw, ba) in enumerate(zip(
                slots.tolist(), stamps, thr.tolist(), d2.tolist(), power.tolist(),
                base_var.tolist())):
            if th <= 0:
                continue
            ent_t = T[k]
            if ent_t != ent_t:                  # NaN: the sensor's first reading
                ent_t = ti
            ent_v = V[k]
            # min/max written out as Python's builtins evaluate them (the first argument
            # unless the other is strictly beyond it): the same values, no call each
            gap = ti - ent_t
            alpha = (0.0 if 0.0 > gap else gap) / tau_m
            if not alpha < 1.0:
                alpha = 1.0
            S = ba + ent_v
            cap = 4.0 * S
            excess = (cap if cap < pw else pw) - ba
            V[k] = (1.0 - alpha) * ent_v + alpha * (excess if excess > 0.0 else 0.0)
            T[k] = ti if ti > ent_t else ent_t
            if d <= th * th:
                since[k] = math.nan
                continue
            keep[i] = False
            rejected += 1
            if since[k] != since[k]:
                since[k] = ti
            if ti - since[k] >= reset:
                diverged = self._diverged_detail(k, ti - since[k], d)
        mv[:] = V
        mt[:] = T
        rs[:] = since
        if rejected:
            self._counters['rejected_outlier'] += rejected
        if diverged:
            raise _Diverged([], diverged)
        return np.array(keep, dtype=bool)     # (bool when empty too)

    def _diverged_detail(self, slot: int, run: float, d2: float) -> str:
        kind, index = self._slot_key[slot]
        return (f'{kind} {index}: every reading rejected for {run:.3f} s, '
                f'{math.sqrt(d2):.3g} σ off')

    def _external_var(self) -> tuple[np.ndarray | float, np.ndarray | None]:
        """The external torques' share of the gate's q̈ variance (module docstring): with
        every effort known, ``(d², Σ_a (∂q̈/∂τ_a σ_c,a)²)`` at the last estimate (the contact
        the estimate shows, one not yet seen; None where no actuator has a σ_c), else
        ``(0, None)``.

        ``d``: one forward dynamics per call; ``∂q̈/∂τ``
        (:meth:`~mbfg_ros.core.interface.MultibodySystem.acceleration_gain`) moves with the
        pose only and is refreshed every ``covariance_every`` ticks (held in between, as the
        estimate's covariance).
        """
        if not self._n_act or not self._tau_all:
            return 0.0, None
        n, x = self.n, self._x_last
        q = x[:n]
        d = x[2 * n:] - self.sys.accelerations(q, x[n:2 * n], self._tau_prev)
        sc = self._contact_sigma
        if not self._contact_any:
            return d * d, None
        if self._contact_var is None or self._k - self._contact_k >= self.config.covariance_every:
            G = self.sys.acceleration_gain(q)
            self._contact_var, self._contact_k = (G * G) @ (sc * sc), self._k
        return d * d, self._contact_var

    def _linear_model(self, obs: list[Observation], x: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(E (rows,), H (rows, 3n)): the observation factors' own residuals ``h(x) ⊖ z``
        (wrapped angles, SO(3) orientation) and Jacobians of readings ``obs`` at the
        stacked state ``x``, stacked in order."""
        n = self.n
        e, H = residuals(self.sm, obs, np.reshape(x, (3, n)), True)
        return e, H.reshape(len(e), 3 * n)
