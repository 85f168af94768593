"""What the kinds and sensors of one tick's readings fix, built once and reused (issue 24).

A tick loop sees the same sequence of readings tick after tick (a JointState's encoders,
then an IMU's gyroscope and accelerometer, all at the tick): the rows each reading has,
the sensor (gate slot) of each, which rows are wrapped angles or encoders, the gate's
thresholds, and, where the encoders read joint coordinates directly (a URDF robot,
``SensorModel.direct_encoders``), the encoders' constant unit-row Jacobian ``h = q_j``
(seed 004 §5), or, where encoders are functions of q (natural coordinates, seed 000 §2:
a revolute joint's relative body angle), the readings of each encoder grouped so that its
model (``SensorModel.joint_batch``) is called once per encoder without the generic
grouping. :class:`ReadingLayout` holds them for one sequence of ``(kind, index)``;
:func:`layout_rows` evaluates the readings at one stacked state x = [q, q̇, q̈] with them
(the same residuals and Jacobians as :func:`~.observations.residuals`, whose per-reading
grouping it skips). The estimator keeps them per sequence (at most 64:
:meth:`~.graph.GraphMixin._layout_of`).
"""
from __future__ import annotations

import operator
from typing import Iterable, Sequence

import numpy as np

from ..core.angles import wrap_angle, wrap_scalar
from ..core.interface import SensorModel
from ..core.observation import Observation
from .observations import observation_sigmas, repeated_state, residuals

__all__ = ['ReadingLayout', 'reading_slots', 'layout_rows', 'stamp_plan', 'layout_rows_at_stamps']

SIGMA_MISSES = 4
"""Calls of :meth:`ReadingLayout.sigmas` with σ's other than the kept ones before it stops
keeping them."""


def _rows(ids: list[int], start: list[int], sizes: list[int]) -> slice | np.ndarray:
    """The rows of readings ``ids``: a slice when they are consecutive, else indices."""
    rows = [r for i in ids for r in range(start[i], start[i] + sizes[i])]
    if rows == list(range(rows[0], rows[0] + len(rows))):
        return slice(rows[0], rows[0] + len(rows))
    return np.array(rows)


def reading_slots(obs: Iterable[Observation], slot_base: dict) -> list[int]:
    """The gate slot (sensor) of each reading: ``slot_base[kind] + index`` (the estimator's
    ``_slot_base``: the first slot of each reading kind)."""
    return [slot_base[ob.kind] + ob.index for ob in obs]


class ReadingLayout:
    """The constants of one sequence of readings (module docstring).

    ``rows`` rows in all; ``row_of`` the reading of each row and ``cnt`` the rows of each
    reading (``row_of3``, ``cnt2``: them for the gate's three sums and two means at
    once); per reading its gate slot (``slots``), whether it is an encoder (``joint``) and
    its gate threshold (``thr``); per row its slot (``slot_rows``), whether it is a
    wrapped angle (``wrap_rows``) or an encoder (``enc_rows``); ``distinct``: no two
    readings of one sensor; ``slot_list``, ``thr_list``, ``row_list``, ``cnt_list``: slots,
    thr, row_of and cnt as lists, and ``passed`` the verdict when every reading passes
    (read-only), for the gate's float path (:meth:`~.innovation_gate.GateMixin._gate_floats`).
    With direct encoders (``plan``): their readings' positions,
    rows, level (0 angle, 1 rate) and coordinate, the IMU groups ``(imu, ids, rows)`` and
    ``H0``, the (rows, 3n) Jacobian with the encoders' unit rows filled in. With model
    encoders (revolute joints of natural coordinates, ``plan`` too): ``enc_groups``, per
    encoder ``(j, ids, rows, positions)``: its readings, their rows, and whether each
    reads the angle (else the rate). ``used``: (``used_<kind>`` counter, readings of that
    kind) of the sequence, for the tick's counts; :meth:`sigmas` the σ of each row."""

    __slots__ = ('rows', 'row_of', 'row_of3', 'cnt', 'cnt2', 'slots', 'joint', 'thr',
                 'slot_rows', 'wrap_rows', 'wrap_any', 'enc_rows', 'enc_any', 'distinct', 'plan',
                 'enc_ids', 'enc_at',
                 'enc_lvl', 'enc_idx', 'enc_wrap', 'enc_wrap_all', 'enc_wrap_any', 'imu_groups',
                 'H0', 'enc_groups', 'enc_take', 'used', '_sig', 'slot_list', 'thr_list',
                 'row_list', 'cnt_list', 'passed')

    def __init__(self, obs: Sequence[Observation], sm: SensorModel, slot_base: dict,
                 slot_wrap: np.ndarray, slot_joint: np.ndarray, joint_threshold: float,
                 imu_threshold: float) -> None:
        n = sm.n
        sizes = [int(np.size(ob.sigma)) for ob in obs]
        start = [0]
        for s in sizes:
            start.append(start[-1] + s)
        self.rows = start.pop()
        N = len(obs)
        self.row_of = np.repeat(np.arange(N), sizes)
        self.cnt = np.bincount(self.row_of, minlength=N)
        # the gate's three sums per reading in one bincount, its two means in one division
        self.row_of3 = np.concatenate((self.row_of, self.row_of + N, self.row_of + 2 * N))
        self.cnt2 = np.concatenate((self.cnt, self.cnt))
        slot_list = reading_slots(obs, slot_base)
        self.slots = np.array(slot_list)
        self.slot_list = slot_list
        self.distinct = len(set(slot_list)) == N
        self.joint = slot_joint[self.slots]
        self.thr = np.where(self.joint, joint_threshold, imu_threshold)
        # the gate's float path (:meth:`~.innovation_gate.GateMixin._gate_floats`): the same
        # as lists, and its verdict when every reading passes (read-only)
        self.thr_list = self.thr.tolist()
        self.row_list = self.row_of.tolist()
        self.cnt_list = self.cnt.tolist()
        self.passed = np.ones(N, dtype=bool)
        self.passed.flags.writeable = False
        self.slot_rows = self.slots[self.row_of]
        self.wrap_rows = slot_wrap[self.slot_rows]
        self.wrap_any = bool(self.wrap_rows.any())
        self.enc_rows = self.joint[self.row_of]
        self.enc_any = bool(self.enc_rows.any())
        direct = sm.direct_encoders
        enc = [i for i, ob in enumerate(obs) if ob.kind in ('joint_pos', 'joint_vel')]
        self.plan = all(sizes[i] == 1 for i in enc) and (
            direct is not None or all(sm.joint_is_angular(obs[i].index) for i in enc))
        self.enc_ids = enc
        self.enc_groups = None
        kinds: dict[str, int] = {}
        for ob in obs:
            kinds[ob.kind] = kinds.get(ob.kind, 0) + 1
        self.used = [(f'used_{kind}', c) for kind, c in kinds.items()]
        self._sig: tuple[list, np.ndarray, int] | bool | None = None
        if not self.plan:
            return
        groups: dict[int, list[int]] = {}
        for i, ob in enumerate(obs):
            if i not in enc:
                groups.setdefault(ob.index, []).append(i)
        self.imu_groups = [(k, ids, _rows(ids, start, sizes)) for k, ids in groups.items()]
        if direct is None:          # model encoders: one joint_batch per encoder
            by_joint: dict[int, list[int]] = {}
            for i in enc:
                by_joint.setdefault(obs[i].index, []).append(i)
            self.enc_groups = [(j, ids, [start[i] for i in ids],
                                [obs[i].kind == 'joint_pos' for i in ids])
                               for j, ids in by_joint.items()]
            self.H0 = np.empty((self.rows, 3 * n))
            return
        self.enc_at = _rows(enc, start, sizes) if enc else None
        self.enc_lvl = np.array([0 if obs[i].kind == 'joint_pos' else 1 for i in enc], int)
        self.enc_idx = np.array([obs[i].index for i in enc], int)
        self.enc_wrap = direct[self.enc_idx] & (self.enc_lvl == 0) if enc else None
        # where in X (3n, flat) the encoders read: a slice when consecutive coordinates of
        # one level (a JointState's angles in order), else flat indices
        flat = (self.enc_lvl * n + self.enc_idx).tolist()
        self.enc_take = slice(flat[0], flat[-1] + 1) if enc and \
            flat == list(range(flat[0], flat[0] + len(flat))) else np.array(flat, int)
        self.enc_wrap_all = bool(enc) and bool(self.enc_wrap.all())
        self.enc_wrap_any = bool(enc) and bool(self.enc_wrap.any())
        H0 = np.zeros((self.rows, 3, n))
        for i, lvl, j in zip(enc, self.enc_lvl.tolist(), self.enc_idx.tolist()):
            H0[start[i], lvl, j] = 1.0
        self.H0 = H0.reshape(self.rows, 3 * n)


    def sigmas(self, obs: Sequence[Observation]) -> np.ndarray:
        """:func:`~.observations.observation_sigmas` of readings ``obs`` (this layout's
        sequence), read-only: kept while every reading's σ is the same read-only array as
        the last call's (a URDF robot's intake keeps one per sensor and variances), so the
        same numbers; otherwise stacked again. After :data:`SIGMA_MISSES` misses (σ's that
        are new objects each tick, e.g. views cut per reading) it stops looking; writable
        σ's are never kept (they could change in place)."""
        held = self._sig
        if held is False:
            return observation_sigmas(obs)
        src = [ob.sigma for ob in obs]
        if held is not None and all(map(operator.is_, src, held[0])):
            return held[1]
        sig = observation_sigmas(obs)
        sig.flags.writeable = False
        misses = 0 if held is None else held[2] + 1
        if misses >= SIGMA_MISSES:
            self._sig = False
        elif all(isinstance(s, np.ndarray) and not s.flags.writeable for s in src):
            self._sig = (src, sig, misses)
        return sig


def _encoder_residuals(obs: Sequence[Observation], layout: ReadingLayout,
                       q_read: np.ndarray) -> np.ndarray:
    """The direct encoders' residuals ``q_j − z`` (wrapped where an angle): ``q_read`` the
    state's coordinate each one reads, in the layout's encoder order."""
    z = np.concatenate([obs[i].z for i in layout.enc_ids])   # one entry each
    r = q_read - z
    if layout.enc_wrap_all:
        r = wrap_angle(r)
    elif layout.enc_wrap_any:
        w = layout.enc_wrap
        r[w] = wrap_angle(r[w])
    return r


def layout_rows(sm: SensorModel, obs: Sequence[Observation], X: np.ndarray,
                layout: ReadingLayout) -> tuple[np.ndarray, np.ndarray]:
    """(e (rows,), H (rows, 3n)): the residuals ``h(x) ⊖ z`` and Jacobians of readings
    ``obs`` (in ``layout``'s sequence) at the one state X (3, n) =
    [q; q̇; q̈]: :func:`~.observations.residuals` with the layout's constants (direct
    encoders: ``q_j − z`` wrapped for angles, unit rows; model encoders: each by one
    ``joint_batch`` at X, the angle's residual wrapped; each IMU by its model's
    ``imu_errors``): the same calls on the same arguments, so the same numbers."""
    if not layout.plan:
        e, H = residuals(sm, obs, X, True)
        return e, H.reshape(len(e), -1)
    e = np.empty(layout.rows)
    H = layout.H0.copy()
    enc = layout.enc_ids
    groups = layout.enc_groups
    # every reading at the one state X (no copies), as residuals passes it; each
    # sensor's readings take its first rows
    Xs = repeated_state(X, len(obs))
    if groups is not None:
        for j, ids, rows, pos in groups:
            (hp, hv), (Hp, Hv) = sm.joint_batch(j, Xs[:len(ids)])
            for r, (i, row, p) in enumerate(zip(ids, rows, pos)):
                if p:
                    e[row] = wrap_scalar(float(hp[r]) - float(obs[i].z[0]))
                    H[row] = Hp[r].reshape(-1)
                else:
                    e[row] = hv[r] - obs[i].z[0]
                    H[row] = Hv[r].reshape(-1)
    elif enc:
        e[layout.enc_at] = _encoder_residuals(obs, layout, X.reshape(-1)[layout.enc_take])
    for k, ids, rows in layout.imu_groups:
        ei, Hi = sm.imu_errors(k, [obs[i] for i in ids], Xs[:len(ids)], True)
        e[rows] = ei
        H[rows] = Hi.reshape(len(ei), -1)
    return e, H


def stamp_plan(layout: ReadingLayout, runs: Sequence[tuple[int, int, ReadingLayout]], n: int
               ) -> tuple[np.ndarray, list[tuple]] | None:
    """What :func:`layout_rows_at_stamps` needs of readings at a few stamps: ``layout`` the
    layout of them all, ``runs`` each stamp's (first, end, layout), in order. (Where in
    the stamps' states (R, 3, n), flat, each encoder reads; per IMU and stamp (IMU, its
    readings, their rows, the stamp)), or None where the encoders are not read directly
    (their models then: :func:`layout_rows` per stamp)."""
    if not layout.plan or layout.enc_groups is not None:
        return None
    run_of = np.repeat(np.arange(len(runs)), [i1 - i0 for i0, i1, _ in runs])
    enc = layout.enc_ids
    take = (run_of[enc] * 3 * n + layout.enc_lvl * n + layout.enc_idx) if enc else \
        np.zeros(0, int)
    calls = []
    row = 0
    for j, (i0, _, run) in enumerate(runs):
        for k, ids, rows in run.imu_groups:
            at = slice(rows.start + row, rows.stop + row) if isinstance(rows, slice) \
                else rows + row
            calls.append((k, [i0 + i for i in ids], at, j))
        row += run.rows
    return take, calls


def layout_rows_at_stamps(sm: SensorModel, obs: Sequence[Observation], Xm: np.ndarray,
                          layout: ReadingLayout, plan: tuple[np.ndarray, list[tuple]]
                          ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`layout_rows` of readings ``obs`` at a few stamps in one pass: ``Xm`` (R, 3, n)
    each stamp's state, ``layout`` the layout of all of ``obs`` (direct encoders),
    ``plan`` :func:`stamp_plan`'s. Every encoder's ``q_j − z`` (wrapped for angles) read at
    its stamp's state at once, each IMU by its model at its stamp's state: the same
    operations on the same numbers as :func:`layout_rows` stamp by stamp, concatenated."""
    take, calls = plan
    e = np.empty(layout.rows)
    H = layout.H0.copy()
    enc = layout.enc_ids
    if enc:
        e[layout.enc_at] = _encoder_residuals(obs, layout, Xm.reshape(-1)[take])
    for k, ids, rows, j in calls:
        # the stamp's state repeated, as layout_rows passes it
        ei, Hi = sm.imu_errors(k, [obs[i] for i in ids], repeated_state(Xm[j], len(ids)), True)
        e[rows] = ei
        H[rows] = Hi.reshape(len(ei), -1)
    return e, H
