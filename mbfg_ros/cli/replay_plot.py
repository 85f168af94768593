"""The replay figure (``mbfg-replay --plot``, the demo): per joint, what a reader checks at a
glance (issue 30 item 5).

Columns: position (measured, truth, estimate); rate (the estimate against the raw
finite difference of the encoder, what a controller without an estimator would use, and
the measured rate when the bag has one); error (estimate and encoder against the truth,
else estimate − measured); and, when the mechanism has actuators, the estimated joint
torque τ̂ against the measured effort. The title gets its own band, so it never overlaps a
panel.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .common import save_figure

__all__ = ['plot_replay', 'finite_difference_rate', 'truth_joint_positions', 'show_efforts']

ROW_INCHES = 2.8
TITLE_INCHES = 0.5


def finite_difference_rate(t: np.ndarray, z: np.ndarray, revolute: bool
                           ) -> tuple[np.ndarray, np.ndarray]:
    """(midpoint times, (z[k+1] − z[k]) / (t[k+1] − t[k])) of consecutive readings; angles
    are unwrapped first. Samples with a zero time step are left out."""
    t = np.asarray(t, float)
    z = np.unwrap(np.asarray(z, float)) if revolute else np.asarray(z, float)
    dt = np.diff(t)
    ok = dt > 0
    return (0.5 * (t[1:] + t[:-1]))[ok], (np.diff(z)[ok] / dt[ok])


def truth_joint_positions(system: Any, res: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, joint positions, joint velocities) of the ground truth in the bag."""
    n = system.n
    sm = system.sensor_model()
    rows = [(t, q, qd) for t, q, qd in res.truth if q.shape == (n,) and qd.shape == (n,)]
    if not rows:
        return np.zeros(0), np.zeros((0, len(res.joint_names))), np.zeros((0, 0))
    t = np.array([r[0] for r in rows])
    jp = np.array([sm.joint_positions(r[1]) for r in rows])
    jv = np.array([sm.joint_velocities(r[1], r[2]) for r in rows])
    return t, jp, jv


def _efforts(res: Any, J: int) -> np.ndarray:
    """τ̂ per tick with an estimate and per joint (NaN: no actuator drives the joint)."""
    rows = [o.joint_effort if o.joint_effort is not None else np.full(J, np.nan)
            for o in res.outputs if o.estimate is not None]
    return np.array(rows, float).reshape(len(rows), J)


def show_efforts(tau_hat: np.ndarray, measured_effort: bool) -> bool:
    """The torque column is drawn when it says something: a τ̂ that is not identically
    zero (an estimated motor torque), or a measured effort to compare with."""
    finite = tau_hat[np.isfinite(tau_hat)]
    return measured_effort or bool(finite.size and np.abs(finite).max() > 0)


def _measured(res: Any, name: str) -> np.ndarray:
    """(t, position, velocity, effort) rows of the readings of joint ``name`` (NaN: not
    given)."""
    rows = []
    for m in res.measured:
        names = list(m[1])
        if name not in names:
            continue
        k = names.index(name)
        eff = m[4][k] if len(m) > 4 and len(m[4]) > k else np.nan
        vel = m[3][k] if len(m[3]) > k else np.nan
        rows.append((m[0], m[2][k], vel, eff))
    return np.array(rows, float).reshape(len(rows), 4)


def plot_replay(res: Any, system: Any, path: Path) -> list[str]:
    """Draw the replay figure (module docstring) at exactly ``path``; returns the y-axis
    labels of the first row."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    from ..core.angles import wrap_angle

    names = res.joint_names
    J = len(names)
    t = res.t
    jp = np.array(res.joint_position).reshape(len(t), -1) if len(t) else np.zeros((0, J))
    jv = np.array(res.joint_velocity).reshape(len(t), -1) if len(t) else np.zeros((0, J))
    tau_hat = _efforts(res, J) if len(t) else np.zeros((0, J))
    meas = {name: _measured(res, name) for name in names}
    with_effort = show_efforts(tau_hat, any(np.isfinite(m[:, 3]).any() for m in meas.values()))
    cols = 4 if with_effort else 3
    height = ROW_INCHES * max(J, 1) + TITLE_INCHES
    fig, axes = plt.subplots(max(J, 1), cols, figsize=(5 * cols, height), squeeze=False,
                             sharex=True)
    tt, tp, tv = truth_joint_positions(system, res)
    kinds = {jt.name: jt.type for jt in system.description.joints}
    labels: list[str] = []
    for j, name in enumerate(names):
        revolute = kinds.get(name) in ('revolute', 'continuous')
        unwrap = np.unwrap if revolute else np.asarray    # wrapped angles: unwrap for display
        diff = wrap_angle if revolute else (lambda x: x)
        arr = meas[name]
        ax_p, ax_v, ax_e = axes[j][:3]
        unit = 'rad' if revolute else 'm'
        if len(arr):
            ax_p.plot(arr[:, 0], unwrap(arr[:, 1]), '.', ms=2, color='0.6', label='measured')
            if len(arr) > 1:
                tf, fd = finite_difference_rate(arr[:, 0], arr[:, 1], revolute)
                ax_v.plot(tf, fd, '.', ms=1.5, color='0.75', label='encoder finite difference')
            if np.isfinite(arr[:, 2]).any():
                ax_v.plot(arr[:, 0], arr[:, 2], '.', ms=2, color='C0', label='measured rate')
        if len(tt):
            ax_p.plot(tt, unwrap(tp[:, j]), 'k-', lw=0.8, label='ground truth')
            ax_v.plot(tt, tv[:, j], 'k-', lw=0.8, label='ground truth')
        if len(t):
            ax_p.plot(t, unwrap(jp[:, j]), 'C1-', lw=1.0, label='estimated')
            ax_v.plot(t, jv[:, j], 'C1-', lw=1.0, label='estimated')
            _focus(ax_v, [jv[:, j]] + ([tv[:, j]] if len(tt) else []))
        scale, eunit = 1e3, f'm{unit}'
        if len(tt) > 1:
            ref = unwrap(tp[:, j])
            if len(arr):
                ax_e.plot(arr[:, 0], scale * diff(arr[:, 1] - np.interp(arr[:, 0], tt, ref)),
                          '.', ms=2, color='0.6', label='measured − truth')
            if len(t):
                ax_e.plot(t, scale * diff(jp[:, j] - np.interp(t, tt, ref)), 'C1-', lw=1.0,
                          label='estimated − truth')
            elabel = f'{name} error [{eunit}]'
        else:
            if len(t) and len(arr):
                ax_e.plot(t, scale * diff(jp[:, j] - np.interp(t, arr[:, 0], unwrap(arr[:, 1]))),
                          'C1-', lw=1.0, label='estimated − measured')
            elabel = f'{name} estimated − measured [{eunit}]'
        row = [f'{name} [{unit}]', f'{name} rate [{unit}/s]', elabel]
        if with_effort:
            row.append(_effort_panel(axes[j][3], name, revolute, t, tau_hat[:, j], arr))
        for ax, lab in zip(axes[j], row):
            ax.set_ylabel(lab)
            ax.grid(True, alpha=0.3)
        if j == 0:                      # one legend per column, on the first row
            for ax in axes[0]:
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(loc='best', fontsize=7, markerscale=3)
        labels = labels or row
    for ax in axes[-1]:
        ax.set_xlabel('stamp [s]')
    fig.suptitle(f'mbfg_ros estimator replay: {system.description.name}')
    fig.tight_layout(rect=(0, 0, 1, 1 - TITLE_INCHES / height))
    save_figure(fig, path, dpi=110)
    return labels


def _focus(ax: Any, series: list[np.ndarray]) -> None:
    """Y range on the estimate and the truth (with a margin): the raw finite difference is
    noisy enough to flatten them otherwise; its cloud shows around them."""
    values = np.concatenate([np.asarray(s, float).ravel() for s in series])
    values = values[np.isfinite(values)]
    if not values.size:
        return
    lo, hi = float(values.min()), float(values.max())
    pad = max(0.5 * (hi - lo), 1e-3)
    ax.set_ylim(lo - pad, hi + pad)


def _effort_panel(ax: Any, name: str, revolute: bool, t: np.ndarray, tau: np.ndarray,
                  arr: np.ndarray) -> str:
    """τ̂ of joint ``name`` against the measured effort; its y label."""
    unit = 'N·m' if revolute else 'N'
    if len(arr) and np.isfinite(arr[:, 3]).any():
        ax.plot(arr[:, 0], arr[:, 3], '.', ms=2, color='0.6', label='measured effort')
    if np.isfinite(tau).any():
        ax.plot(t, tau, 'C1-', lw=1.0, label='estimated τ̂')
    else:
        ax.text(0.5, 0.5, 'no actuator on this joint', ha='center', va='center',
                transform=ax.transAxes, color='0.4')
        ax.set_yticks([])
    return f'{name} torque [{unit}]' if revolute else f'{name} force [{unit}]'
