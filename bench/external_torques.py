#!/usr/bin/env python3
"""Benchmark of the external joint torques and the contact flag (issue 27 item 4) against a
generalised-momentum observer, on a simulated UR5 (config/urdf/ur5.urdf).

Truth: ``spatial.sensor_sim.track_reference`` (the package's implicit trapezoidal
integrator, computed torque at the sensor rate, the truth's own model) following
``reference_motion``, with contacts added as joint torques ``τ_ext = Jᵀ [0; f]`` of a force
``f`` at the origin of ``forearm_link`` (``SpatialSystem.link_jacobian``):

* ``impulse``: ``impulse_force`` N for 20 ms;
* ``push``: ``push_force`` N held for 1 s;

one event every ``spacing`` s, alternating, after a free first segment. Sensors at 500 Hz:
encoders with Gaussian noise ``--encoder-sigma`` (rad), ``effort`` = the motors' torques
(what ros2_control's effort state reports), no IMU. ``--runs`` runs, each its own random
reference (seed, seed + 1, ...) with its own start-up ramp, so that the free motion adds up
to minutes (4 x 40 s: 128 s) and false alarms are counted, not only rated.

Compared, with the same flag rule (|·| > k σ on some joint for ``min_duration``):

* ``estimator``: :class:`~mbfg_ros.estimation.external.ExternalTorques` on the online
  estimator (σ from the estimate's covariance), its jerk rows on the mismatch
  q̈ − q̈(q, q̇, τ) (``disturbance_process``) and/or on q̈ (``jerk_process`` alone),
  ``--process``; the innovation gate at ``--gate`` (default 10, the estimator's);
* ``momentum``: the generalised-momentum observer (De Luca & Mattone 2005; Haddadin, De Luca,
  Albu-Schäffer 2017, Eq. 29), written here with Pinocchio's M, C, g::

      r(t) = K_O (p(t) − ∫₀ᵗ (τ_m + Cᵀ(q, q̇) q̇ − g(q) + r) ds − p(0)),  p = M(q) q̇

  discretised with the rectangle rule at the sensor rate, fed with the estimator's q̂, q̇̂
  (``momentum``) or with raw encoders and finite differences (``momentum-raw``); its σ per
  joint is the RMS of r over the first free segment (the observer has no σ of its own: a
  user calibrates a threshold this way).

Measured: detection delay per event (the first rising flag after the contact starts;
missed if none within the event + 0.2 s; a flag already up is not a detection), false
alarms counted per run and per minute (rising flags outside the events and 0.5 s after
them), and the estimator's τ_ext RMS in free motion against its mean σ. Then:

* side by side **at equal false alarms**: per detector and rule, the smallest threshold
  whose false alarms over all runs are at most ``--fa-target`` per minute (calibrated on the
  same runs, for every detector alike) and its delays; rules: the flag's (|x| > k σ for
  ``--min-duration``) and a one-sided CUSUM of max |x|/σ at ``--cusum-drift``;
* the estimator's flag rule on a grid of k (``--tune-k``) and minimum durations
  (``--tune-duration``): what the defaults were chosen from;
* the **ideal matched-filter delay** on these encoders (:func:`matched_filter_delays`):
  when the contact's acceleration has moved the encoders ``--bound-z`` σ in a known-onset,
  known-shape test, a floor no detector on the encoders alone goes below.

    .venv/bin/python bench/external_torques.py [--encoder-sigma 1e-5] [--runs 4]
        [--duration 40] [--gate 10] [--process both] [--jerk 100] [--quick]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mbfg_ros.estimation.estimator import Estimator, EstimatorConfig  # noqa: E402
from mbfg_ros.estimation.external import ExternalConfig, ExternalTorques  # noqa: E402
from mbfg_ros.spatial.sensor_sim import (SpatialSensorConfig, reference_motion,  # noqa: E402
                                         simulate_spatial_measurements, track_reference)
from mbfg_ros.spatial.system import build_spatial_system  # noqa: E402

URDF = REPO / 'config' / 'urdf' / 'ur5.urdf'
RATE = 500.0
LINK = 'forearm_link'
FREE = 2.0           # s of free motion before the first event (also the observer's calibration)
AFTER = 0.5          # s after an event not counted for false alarms


def events(duration: float, spacing: float, impulse: float, push: float
           ) -> list[tuple[str, float, float, float]]:
    """(kind, start, length, force) alternating impulse and push, every ``spacing`` s."""
    out, t, k = [], FREE, 0
    while t + 1.2 < duration:
        out.append(('impulse', t, 0.02, impulse) if k % 2 == 0 else ('push', t, 1.0, push))
        t += spacing
        k += 1
    return out


def scenario(system, duration: float, seed: int, evs, encoder_sigma: float):
    dt = 1.0 / RATE
    ref = reference_motion(system, duration, dt, seed=seed)
    n = system.n
    ext = np.zeros((len(ref.t), n))
    direction = np.array([0.0, 0.0, 0.0, 0.3, -0.5, 0.8])
    direction[3:] /= np.linalg.norm(direction[3:])
    for kind, t0, length, force in evs:
        on = (ref.t >= t0) & (ref.t < t0 + length)
        for k in np.flatnonzero(on):      # the force's joint torques at the reference pose
            ext[k] = system.link_jacobian(ref.q[k], LINK).T @ (force * direction)
    tr = track_reference(system, ref, external=ext)
    cfg = SpatialSensorConfig(encoder_rate=RATE, encoder_counts=0, encoder_sigma=encoder_sigma,
                              effort_sigma=0.0, imu_rate=0.0)
    recs = simulate_spatial_measurements(system, tr.t, tr.q, tr.qd, tr.qdd, tr.tau, cfg,
                                         np.random.default_rng(seed))
    return tr, ext, recs


def run_estimator(system, recs, cfg: EstimatorConfig, xcfg: ExternalConfig) -> dict:
    est = Estimator(system, cfg)
    ext = ExternalTorques(system, xcfg)
    buf = np.zeros(len(ext.names))
    t, tau, sig, flag, q, qd, ms = [], [], [], [], [], [], []
    for r in recs:
        est.add(r)
        start = time.perf_counter()
        e = est.tick(r.t)
        if e is None:
            continue
        o = ext.update(e, est.known_torque(e.t, buf))
        ms.append(1e3 * (time.perf_counter() - start))
        t.append(e.t)
        tau.append(o.tau.copy())
        sig.append(o.sigma.copy())
        flag.append(o.contact)
        q.append(e.q)
        qd.append(e.qd)
    return {'t': np.array(t), 'tau': np.array(tau), 'sigma': np.array(sig),
            'flag': np.array(flag), 'q': np.array(q), 'qd': np.array(qd),
            'ms': np.array(ms), 'resets': est.counters['resets']}


def momentum_observer(system, t: np.ndarray, q: np.ndarray, qd: np.ndarray,
                      tau_m: np.ndarray, gain: float) -> np.ndarray:
    """r (N, n) of the generalised-momentum observer (module docstring), Pinocchio's M, C, g."""
    import pinocchio as pin

    from mbfg_ros.spatial.pin_backend import build_pinocchio_model
    pm = build_pinocchio_model(system.model)
    pd = pm.createData()
    N, n = q.shape
    r = np.zeros((N, n))
    integral = np.zeros(n)
    p0 = None
    for k in range(N):
        M = pin.crba(pm, pd, q[k])
        M = np.triu(M) + np.triu(M, 1).T
        p = M @ qd[k]
        if p0 is None:
            p0 = p
        r[k] = gain * (p - integral - p0)
        C = pin.computeCoriolisMatrix(pm, pd, q[k], qd[k])
        g = pin.computeGeneralizedGravity(pm, pd, q[k])
        if k + 1 < N:
            integral += (tau_m[k] + C.T @ qd[k] - g + r[k]) * (t[k + 1] - t[k])
    return r


def flags(t: np.ndarray, value: np.ndarray, sigma: np.ndarray, k: float,
          min_duration: float) -> np.ndarray:
    """The contact rule of ExternalTorques on a whole series (|value| > k σ on some joint,
    sustained for ``min_duration``)."""
    return sustained(t, np.max(np.abs(value) / sigma, axis=1) > k, min_duration)


def sustained(t: np.ndarray, above: np.ndarray, min_duration: float) -> np.ndarray:
    """``above`` held since at least ``min_duration`` (the flag's rule, vectorised)."""
    idx = np.arange(len(t))
    start = np.maximum.accumulate(np.where(above & ~np.r_[False, above[:-1]], idx, 0))
    return above & (t - t[start] >= min_duration - 1e-9)


def cusum(value: np.ndarray, sigma: np.ndarray, drift: float) -> np.ndarray:
    """One-sided CUSUM (Page 1954) of z = max_i |value_i| / σ_i: S_k = max(0, S_{k−1} +
    z_k − ``drift``); a flag while S_k > h."""
    z = np.max(np.abs(value) / sigma, axis=1) - drift
    S = np.zeros(len(z))
    acc = 0.0
    for i, zi in enumerate(z.tolist()):
        acc = max(0.0, acc + zi)
        S[i] = acc
    return S


def equal_false_alarms(series: list, evs, duration: float, rule: str, grid: np.ndarray,
                       target: float, min_duration: float, drift: float):
    """The smallest threshold of ``grid`` whose false alarms over all runs are at most
    ``target`` per minute, with its delays: (threshold, delays, false, free s), or None.
    ``rule``: 'threshold' (k of the flag's rule) or 'cusum' (h at ``drift``)."""
    stats = [np.max(np.abs(v) / s, axis=1) if rule == 'threshold' else cusum(v, s, drift)
             for _, v, s in series]
    for thr in grid:
        d: dict[str, list[float]] = {'impulse': [], 'push': []}
        false, free_s = 0, 0.0
        for (t, _, _), z in zip(series, stats):
            fl = sustained(t, z > thr, min_duration) if rule == 'threshold' else z > thr
            sc = score(t, fl, evs, duration)
            for kind in d:
                d[kind] += sc['delays'][kind]
            false += sc['false']
            free_s += sc['free_s']
        if 60.0 * false / free_s <= target:
            return thr, d, false, free_s
    return None


def score(t: np.ndarray, flag: np.ndarray, evs, duration: float) -> dict:
    """Detection delay per event kind and false alarms per minute. A detection is the
    first rising flag in the event (a flag already up when the contact starts was raised
    by something else: it is a false alarm, and the event waits for the next rise)."""
    rising = t[np.flatnonzero(flag & ~np.r_[False, flag[:-1]])]
    busy = np.zeros(len(t), bool)
    delays: dict[str, list[float]] = {'impulse': [], 'push': []}
    for kind, t0, length, _ in evs:
        busy |= (t >= t0) & (t < t0 + length + AFTER)
        hit = rising[(rising >= t0 - 1e-9) & (rising <= t0 + length + 0.2)]
        delays[kind].append(float(hit[0] - t0) if hit.size else math.inf)
    free_time = (~busy).sum() / RATE
    idx = np.searchsorted(t, rising)
    false = int(np.sum(~busy[np.minimum(idx, len(t) - 1)]))
    return {'delays': delays, 'false_per_min': 60.0 * false / max(free_time, 1e-9),
            'false': false, 'free_s': free_time}


def fmt_delays(d: list[float]) -> str:
    ok = [x for x in d if math.isfinite(x)]
    missed = len(d) - len(ok)
    if not ok:
        return f'missed {missed}/{len(d)}'
    s = f'{1e3 * np.median(ok):.0f} ms (max {1e3 * max(ok):.0f})'
    return s + (f', missed {missed}/{len(d)}' if missed else '')


def _rms_parts(value: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, int]:
    return np.sum(value[mask] ** 2, axis=0), int(mask.sum())


def matched_filter_delays(system, tr, ext: np.ndarray, evs, encoder_sigma: float,
                          z: float) -> dict[str, list[float]]:
    """What any detector on these encoders can reach at best: per event, the time after
    its start at which the encoders' deviation from the contact-free motion,
    ``δq(t) = ∫∫ M⁻¹ τ_ext`` (the contact's acceleration at its first pose, held over the
    event), reaches ``z`` σ in the matched filter ``sqrt(Σ_ticks |δq|²) / σ_enc`` (known
    onset, shape and direction: an ideal likelihood-ratio test, ignoring the controller's
    reaction and the model's errors)."""
    dt = 1.0 / RATE
    out: dict[str, list[float]] = {'impulse': [], 'push': []}
    for kind, t0, length, _ in evs:
        k0 = int(np.ceil(t0 * RATE - 1e-9))
        a = np.linalg.solve(system.mass_matrix(tr.q[k0]), ext[k0])
        tt = dt * np.arange(1, int(0.5 * RATE) + 1)
        on = np.minimum(tt, length)
        dev = np.outer(0.5 * on * on + on * (tt - on), a)
        snr = np.sqrt(np.cumsum(np.sum(dev * dev, axis=1))) / encoder_sigma
        hit = np.flatnonzero(snr >= z)
        out[kind].append(float(tt[hit[0]]) if hit.size else math.inf)
    return out


def run_once(system, a, seed: int, duration: float, evs, processes: list[str]) -> dict:
    """One run (its own reference, events, estimators and observers): per detector the
    score, and the sums behind the free-motion and push statistics."""
    tr, ext, recs = scenario(system, duration, seed, evs, a.encoder_sigma)
    xcfg = ExternalConfig(threshold=a.k, min_duration=a.min_duration)
    out: dict = {'rows': {}, 'free': {}, 'push': {}, 'ms': {}, 'resets': {}, 'series': {},
                 'bound': matched_filter_delays(system, tr, ext, evs, a.encoder_sigma, a.bound_z)}
    res = None
    for proc in processes:
        cfg = EstimatorConfig(frequency=RATE, lag_duration=a.lag, encoder_sigma=a.encoder_sigma,
                              dynamics_sigma=a.dynamics_sigma, jerk_process=True,
                              disturbance_process=proc == 'disturbance',
                              integrator_jerk=a.jerk, joint_rejection_threshold=a.gate,
                              contact_effort_fraction=a.contact_fraction)
        res = run_estimator(system, recs, cfg, xcfg)
        t = res['t']
        name = f'estimator tau_ext ({proc} jerk)'
        out['rows'][name] = score(t, res['flag'], evs, duration)
        out['series'][name] = (t, res['tau'], res['sigma'])
        out['ms'][name] = res['ms']
        out['resets'][name] = res['resets']
        busy = np.zeros(len(t), bool)
        for _, t0, length, _ in evs:
            busy |= (t >= t0) & (t < t0 + length + AFTER)
        fm = ~busy & (t > 0.5)
        ss, cnt = _rms_parts(res['tau'], fm)
        out['free'][name] = (ss, np.sum(res['sigma'][fm], axis=0), cnt)
        k = np.rint(t * RATE).astype(int)
        pushes = np.zeros(len(t), bool)
        for kind, t0, length, _ in evs:
            if kind == 'push':
                pushes |= (t >= t0 + 0.2) & (t < t0 + length)
        es, cnt = _rms_parts(res['tau'] - ext[k], pushes)
        out['push'][name] = (es, _rms_parts(ext[k], pushes)[0], cnt)
    # the momentum observer, fed the (last) estimator's state and raw encoders
    t = res['t']
    k = np.rint(t * RATE).astype(int)
    enc = [r for r in recs if hasattr(r, 'names')]
    te = np.array([r.t for r in enc])
    z = np.array([r.position for r in enc])
    qd_fd = np.vstack([np.zeros(system.n), np.diff(z, axis=0) / np.diff(te)[:, None]])
    r_est = momentum_observer(system, t, res['q'], res['qd'], tr.tau[k], a.observer_gain)
    ke = np.rint(te * RATE).astype(int)
    r_raw = momentum_observer(system, te, z, qd_fd, tr.tau[ke], a.observer_gain)
    free = (t > 0.5) & (t < FREE)
    cal = np.sqrt(np.mean(r_est[free] ** 2, axis=0))
    free_e = (te > 0.5) & (te < FREE)
    cal_raw = np.sqrt(np.mean(r_raw[free_e] ** 2, axis=0))
    name = f'momentum (K_O = {a.observer_gain:g}, on the estimate)'
    out['rows'][name] = score(t, flags(t, r_est, cal, a.k, a.min_duration), evs, duration)
    out['series'][name] = (t, r_est, np.broadcast_to(cal, r_est.shape))
    name = f'momentum (K_O = {a.observer_gain:g}, raw encoders)'
    out['rows'][name] = score(te, flags(te, r_raw, cal_raw, a.k, a.min_duration), evs, duration)
    out['series'][name] = (te, r_raw, np.broadcast_to(cal_raw, r_raw.shape))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--duration', type=float, default=40.0, help='s per run')
    ap.add_argument('--runs', type=int, default=4,
                    help='runs, each its own reference motion (seed, seed + 1, ...)')
    ap.add_argument('--quick', action='store_true', help='one run of 12 s')
    ap.add_argument('--seed', type=int, default=3)
    ap.add_argument('--encoder-sigma', type=float, default=1e-5,
                    help='rad (1e-5: a 19-bit encoder; 8.7e-4 = 0.05 deg)')
    ap.add_argument('--impulse-force', type=float, default=150.0, help='N over 20 ms')
    ap.add_argument('--push-force', type=float, default=40.0, help='N held 1 s')
    ap.add_argument('--spacing', type=float, default=5.0)
    ap.add_argument('--k', type=float, default=3.0)
    ap.add_argument('--min-duration', type=float, default=0.0)
    ap.add_argument('--dynamics-sigma', type=float, default=5.0)
    ap.add_argument('--jerk', type=float, default=100.0)
    ap.add_argument('--lag', type=float, default=0.1)
    ap.add_argument('--gate', type=float, default=10.0,
                    help='joint_rejection_threshold (0: the innovation gate off)')
    ap.add_argument('--contact-fraction', type=float, default=0.2,
                    help='contact_effort_fraction: the gate\'s room for a contact, a fraction '
                    'of the effort limits (0: none)')
    ap.add_argument('--process', choices=('disturbance', 'acceleration', 'both'),
                    default='both', help='the estimator\'s jerk rows: on q̈ − q̈(q, q̇, τ) '
                    '(disturbance_process), on q̈ (jerk_process alone), or both side by side')
    ap.add_argument('--observer-gain', type=float, default=50.0, help='K_O, 1/s')
    ap.add_argument('--tune-k', type=float, nargs='+', default=[1.5, 2.0, 2.5, 3.0],
                    help='k of the flag-rule grid')
    ap.add_argument('--tune-duration', type=float, nargs='+', default=[0.0, 0.002, 0.004],
                    help='min durations (s) of the flag-rule grid')
    ap.add_argument('--bound-z', type=float, default=4.0,
                    help='SNR of the ideal matched-filter delay (4: a one-sided tail of 3e-5, '
                    'one false alarm per minute of tests at 500 Hz)')
    ap.add_argument('--fa-target', type=float, default=1.0,
                    help='false alarms per minute of the equal-false-alarm comparison')
    ap.add_argument('--cusum-drift', type=float, nargs='+', default=[2.0],
                    help='drifts of the CUSUM rule (units of sigma)')
    a = ap.parse_args(argv)
    runs, duration = (1, 12.0) if a.quick else (a.runs, a.duration)
    processes = ['disturbance', 'acceleration'] if a.process == 'both' else [a.process]
    system = build_spatial_system(URDF)
    evs = events(duration, a.spacing, a.impulse_force, a.push_force)
    total: dict = {}
    for run in range(runs):
        o = run_once(system, a, a.seed + run, duration, evs, processes)
        for key in ('rows', 'free', 'push', 'ms', 'resets', 'series'):
            for name, v in o[key].items():
                total.setdefault(key, {}).setdefault(name, []).append(v)
        for kind, v in o['bound'].items():
            total.setdefault('bound', {}).setdefault(kind, []).extend(v)
    print(f'UR5, {runs} runs x {duration:g} s at {RATE:g} Hz (reference seeds {a.seed}..'
          f'{a.seed + runs - 1}), encoders sigma {a.encoder_sigma:g} rad, {len(evs)} events per '
          f'run at {LINK} (impulse {a.impulse_force:g} N x 20 ms, push {a.push_force:g} N x '
          f'1 s, every {a.spacing:g} s from {FREE:g} s), k = {a.k:g}, min duration '
          f'{1e3 * a.min_duration:g} ms')
    print(f'estimator: dynamics_sigma {a.dynamics_sigma:g}, integrator_jerk {a.jerk:g}, lag '
          f'{a.lag:g} s, joint_rejection_threshold {a.gate:g}, contact_effort_fraction '
          f'{a.contact_fraction:g}')
    for name, ms in total['ms'].items():
        print(f'  {name}: tick+external p50 {np.median(np.concatenate(ms)):.2f} ms, resets '
              f'{sum(total["resets"][name])}')
    print(f'{"detector":44s} {"impulse delay":>22s} {"push delay":>22s} {"false":>6s} '
          f'{"free s":>7s} {"/min":>6s}  false alarms per run')
    for name, scores in total['rows'].items():
        d = {kind: sum((s['delays'][kind] for s in scores), []) for kind in ('impulse', 'push')}
        false = sum(s['false'] for s in scores)
        free_s = sum(s['free_s'] for s in scores)
        print(f'{name:44s} {fmt_delays(d["impulse"]):>22s} {fmt_delays(d["push"]):>22s} '
              f'{false:6d} {free_s:7.1f} {60.0 * false / free_s:6.2f}  '
              + ' '.join(str(s['false']) for s in scores))
    print(f'ideal matched filter on these encoders (SNR {a.bound_z:g}): impulse '
          f'{fmt_delays(total["bound"]["impulse"])}, push {fmt_delays(total["bound"]["push"])}')
    print(f'at equal false alarms (at most {a.fa_target:g} per minute over all runs; the '
          'smallest threshold that meets it, calibrated on these same runs):')
    print(f'{"detector":44s} {"rule":>16s} {"impulse delay":>22s} {"push delay":>22s} '
          f'{"false":>6s} {"/min":>6s}')
    for name, series in total['series'].items():
        rules = [('threshold', np.arange(1.0, 40.01, 0.25), f'k for {1e3 * a.min_duration:g} ms',
                  0.0)] + [('cusum', np.arange(0.25, 100.01, 0.25), f'CUSUM drift {drift:g}',
                            drift) for drift in a.cusum_drift]
        for rule, grid, label, drift in rules:
            got = equal_false_alarms(series, evs, duration, rule, grid, a.fa_target,
                                     a.min_duration, drift)
            if got is None:
                print(f'{name:44s} {label:>16s}  no threshold of the grid meets it')
                continue
            thr, d, false, free_s = got
            print(f'{name:44s} {label + " " + format(thr, "g"):>16s} '
                  f'{fmt_delays(d["impulse"]):>22s} {fmt_delays(d["push"]):>22s} '
                  f'{false:6d} {60.0 * false / free_s:6.2f}')
    print('the flag rule of the estimator\'s tau_ext (|tau_ext| > k sigma on some joint for '
          'the min duration), a grid: impulse delay / push delay / false alarms (/min)')
    for name, series in total['series'].items():
        if not name.startswith('estimator'):
            continue
        print(f'  {name}')
        for k in a.tune_k:
            cells = []
            for md in a.tune_duration:
                d: dict[str, list[float]] = {'impulse': [], 'push': []}
                false, free_s = 0, 0.0
                for t, v, sg in series:
                    sc = score(t, flags(t, v, sg, k, md), evs, duration)
                    for kind in d:
                        d[kind] += sc['delays'][kind]
                    false += sc['false']
                    free_s += sc['free_s']
                cells.append(f'{1e3 * md:g} ms: {fmt_delays(d["impulse"])} / '
                             f'{fmt_delays(d["push"])} / {false} ({60 * false / free_s:.2f})')
            print(f'    k {k:<4g} ' + ' | '.join(cells))
    for name, parts in total['free'].items():
        ss = sum(p[0] for p in parts)
        cnt = sum(p[2] for p in parts)
        rms = np.sqrt(ss / cnt)
        sig = sum(p[1] for p in parts) / cnt
        print(f'{name}, free motion per joint: tau_ext RMS [N m] '
              + ' '.join(f'{v:.3f}' for v in rms))
        print('    mean sigma [N m] ' + ' '.join(f'{v:.3f}' for v in sig)
              + ' ; RMS / sigma ' + ' '.join(f'{v:.2f}' for v in rms / sig) + '   (target <= 2)')
        push = total['push'][name]
        cnt = sum(p[2] for p in push)
        if cnt:
            print('    pushes (after 0.2 s): tau_ext - truth RMS ' + ' '.join(
                f'{v:.3f}' for v in np.sqrt(sum(p[0] for p in push) / cnt)) + ' ; truth RMS '
                + ' '.join(f'{v:.3f}' for v in np.sqrt(sum(p[1] for p in push) / cnt)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
