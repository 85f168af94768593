"""Measurement models h(q, q̇, q̈) of encoders and IMUs, with analytic Jacobians.

Shared by the observation factors (:mod:`mbfg_ros.estimation.observations`, through the
:class:`~mbfg_ros.core.interface.SensorModel` protocol) and the simulator
(:func:`simulate_measurements`), so both read the same physics.

Body angle (natural coordinates, seed 000 §2): a body with basic points i, j
has θ = atan2(dy, dx), d = r_j − r_i, with ``∂θ/∂d = (−dy, dx)/|d|²`` and
rate ``θ̇ = (dx ḋy − dy ḋx)/|d|²``. A body-fixed point at (ξ, η) is
``r = A(ξ, η) [r_i; r_j]`` (forces.body_matrix_A), linear in q, so its
acceleration is ``A [r̈_i; r̈_j]``. Models:

* revolute joint (bodies a → b, ground allowed): ``θ_b − θ_a − offset``
  wrapped to (−π, π]; rate ``θ̇_b − θ̇_a``;
* prismatic joint: ``s = (p − a)·e − offset``, e = (b − a)/|b − a| the unit
  vector of the slider line; rate ṡ;
* gyroscope: ``θ̇`` of the IMU's body (planar rate about z);
* accelerometer: specific force ``f = Rᵀ(θ + α) (a_P − g)`` in the sensor
  frame (gravity included: at rest it reads ``−Rᵀ g``);
* orientation: ``θ + α`` (α the mounting angle).

Each model returns ``h`` and, when asked, ``(H_q, H_q̇, H_q̈)``; the tests
check them against finite differences.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from operator import itemgetter
from typing import Protocol, Sequence

import numpy as np

from ..core.angles import wrap_angle, wrap_scalar
from ..core.observation import Model, Observation
from .extended import Extended, point_columns
from ..core.measurements import (ImuMeasurement, JointMeasurement, quaternion_from_yaw,
                                 quaternion_yaw)
from .forces import body_matrix_A
from .model import GROUND, Imu, Mechanism

__all__ = ['SensorModel', 'Model', 'sample_indices', 'joint_positions',
           'joint_velocities', 'imu_reading', 'SensorConfig', 'simulate_measurements',
           'SensedMechanism']


class SensedMechanism(Protocol):
    """What the sensor models take of a planar system: its mechanism
    (:class:`.dynamics.System` is one; it builds its ``sensor_model`` and
    ``simulate_measurements`` on this module)."""

    mech: Mechanism


_P = np.array([[0.0, -1.0], [1.0, 0.0]])
_ZERO1 = np.zeros(1)


_wrap = wrap_scalar     # wrap_angle of a float, bit for bit (core.angles)


def _body_angle(v: list, o: int, h: int) -> tuple[float, float, float, float, float, float]:
    """(dx, dy, ḋx, ḋy, r², θ) of the body whose (xi, yi, xj, yj) are ``v[o:o + 4]`` and
    whose rates are ``v[o + h:o + h + 4]`` (floats: the per-tick form of
    :meth:`SensorModel._angle_batch` for one state)."""
    dx, dy = v[o + 2] - v[o], v[o + 3] - v[o + 1]
    ddx, ddy = v[o + h + 2] - v[o + h], v[o + h + 3] - v[o + h + 1]
    return dx, dy, ddx, ddy, dx * dx + dy * dy, math.atan2(dy, dx)


def _angle_rows(dx: float, dy: float, ddx: float, ddy: float, r2: float
                ) -> tuple[float, tuple[float, ...], tuple[float, ...]]:
    """θ̇ and the local rows ∂θ/∂(ri, rj), ∂θ̇/∂(ri, rj) (module docstring; the formulas of
    :meth:`SensorModel._angle_batch`, for one state)."""
    gx, gy = -dy / r2, dx / r2
    rate = gx * ddx + gy * ddy
    rx = ddy / r2 - 2.0 * rate * dx / r2
    ry = -ddx / r2 - 2.0 * rate * dy / r2
    return rate, (-gx, -gy, gx, gy), (-rx, -ry, rx, ry)


def _entries(sel: np.ndarray) -> tuple[tuple[int, int, float], ...]:
    """(row, column, value) of the nonzero entries of a scatter matrix ``sel``, row by row
    (one per row: each local entry lands on one column of q)."""
    return tuple((int(r), int(i), float(sel[r, i])) for r, i in zip(*np.nonzero(sel)))


def _flat_gather(gather: itemgetter, n: int, W: int) -> itemgetter:
    """``gather`` (positions in [q, consts, q̇, 0, q̈, 0]) moved to the flat one-state layout
    [q, q̇, q̈, consts, 0] (``x.reshape(-1).tolist()`` and the constants: one list instead
    of three and their joins)."""
    probe = gather(list(range(W + 2 * (n + 1))))
    probe = probe if isinstance(probe, tuple) else (probe,)
    zero = 3 * n + W - n                        # the 0 after the constants
    flat = []
    for p in probe:
        if p < n:                               # q
            flat.append(p)
        elif p < W:                             # a constant
            flat.append(3 * n + p - n)
        else:                                   # a rate or an acceleration (or its 0)
            lvl, i = divmod(p - W, n + 1)
            flat.append(zero if i == n else (lvl + 1) * n + i)
    return itemgetter(*flat)


def _imu_row_gathers(cols: tuple[tuple[int, int], ...], n: int
                     ) -> tuple[itemgetter, itemgetter, itemgetter]:
    """The Jacobian rows (3n each, [∂/∂q, ∂/∂q̇, ∂/∂q̈]) of an IMU's gyro, accelerometer (two
    rows) and yaw as gathers of their local values, (∂θ̇/∂, ∂θ/∂, 0), (∂f0/∂θ·∂θ/∂, ∂f/∂r̈
    row 0, ∂f1/∂θ·∂θ/∂, row 1, 0) and (∂θ/∂, 0), four per local coordinate of the body
    (:meth:`SensorModel._imu_errors_one`); ``cols`` the (local, column) of each coordinate
    on q."""
    def rows(blocks: list[list[tuple[int, int]]], zero: int) -> itemgetter:
        src = [zero] * (len(blocks) * 3 * n)
        for r, parts in enumerate(blocks):
            for base, off in parts:             # local values from ``base`` at column offset
                for c, i in cols:
                    src[r * 3 * n + off + i] = base + c
        return itemgetter(*src)
    return (rows([[(0, 0), (4, n)]], 8),
            rows([[(0, 0), (4, 2 * n)], [(8, 0), (12, 2 * n)]], 16),
            rows([[(0, 0)]], 4))


class SensorModel:
    """Precomputed measurement models of a system's joints and IMUs (immutable).

    Jacobians are computed on the extended vector ``[q, constants]`` and the
    constant columns are dropped (fixed points have no derivative).
    """

    direct_encoders = None           # encoders are functions of q (body angles, sliders)

    def __init__(self, sys: SensedMechanism) -> None:
        mech = sys.mech
        self.n = n = mech.n
        self.mech = mech
        pw, consts = point_columns(mech)
        self.ext = Extended(n, consts)
        self.W = self.ext.W
        self.g = np.array(mech.gravity, dtype=float)
        self._g0, self._g1 = (float(x) for x in mech.gravity)

        def body_w(b: int) -> np.ndarray | None:
            if b == GROUND:
                return None
            i, j = mech.bodies[b].points[:2]
            return np.concatenate((pw[i], pw[j]))

        self._body_w = [body_w(b) for b in range(len(mech.bodies))]
        self.joint_names = tuple(j.name for j in mech.joints)
        self._joints = []
        for j in mech.joints:
            if j.type == 'revolute':
                self._joints.append(('rev', body_w(j.bodies[0]), body_w(j.bodies[1]), j.offset))
            else:
                s = mech.sliders[j.slider]
                if s.line is not None:
                    a_idx, b_idx = pw[s.line[0]], pw[s.line[1]]
                    extra = None
                else:
                    a_idx = b_idx = None
                    extra = (np.array(s.through[0], float), np.array(s.through[1], float))
                self._joints.append(('pri', pw[s.point], (a_idx, b_idx, extra), j.offset))
        self.imu_names = tuple(s.name for s in mech.sensors)
        self._imus = []
        for s in mech.sensors:
            body = mech.bodies[s.body]
            A = body_matrix_A(s.point[0], s.point[1], body.length)
            self._imus.append((body_w(s.body), A, float(s.angle)))
        # Per-tick plans (model-only, built once): which entries of the stacked vector
        # [q, consts, q̇, 0, q̈, 0] a sensor reads (a constant's rate is the 0), and the
        # matrix scattering its local rows (4 per body, signed) onto the n columns of q.
        W = self.W
        self._consts = self.ext.consts.tolist()

        def plan(parts: list[tuple[float, np.ndarray]], levels: int
                 ) -> tuple[np.ndarray, np.ndarray]:
            pos = np.concatenate([idx for _, idx in parts])
            rate = np.where(pos < n, pos, n)
            gather = np.concatenate([pos] + [W + k * (n + 1) + rate for k in range(levels - 1)])
            sel = np.zeros((4 * len(parts), n))
            for r, (sign, idx) in enumerate(parts):
                for c, i in enumerate(idx):
                    if i < n:
                        sel[4 * r + c, i] += sign
            return itemgetter(*gather.tolist()), sel

        self._rev = {}            # joint -> (has a, has b, gather (itemgetter), sel, offset)
        for j, (kind, a, b, offset) in enumerate(self._joints):
            if kind == 'rev':
                parts = [(sign, idx) for sign, idx in ((-1.0, a), (1.0, b)) if idx is not None]
                self._rev[j] = (a is not None, b is not None) + plan(parts, 2) + (offset,)
        self._imu_plan = [plan([(1.0, idx)], 3) + (tuple(A.ravel().tolist()),)
                          for idx, A, _ in self._imus]
        # the same scatters as float loops (sel's nonzero entries): per revolute joint
        # (local entry, column of q, sign), per IMU (local coordinate, column of q)
        self._rev_cols = {j: _entries(plan_j[3]) for j, plan_j in self._rev.items()}
        self._imu_cols = [tuple((r, i) for r, i, _ in _entries(sel))
                          for _, sel, _ in self._imu_plan]
        # The one-state forms read the state x (3, n) flat, [q, q̇, q̈, consts, 0] (one
        # tolist): per revolute joint and IMU the gather of its entries in that layout, and
        # per IMU the rows of each reading kind as one gather of its local values (every
        # local coordinate lands on its own column: the float scatter's assignments).
        self._flat_tail = self._consts + [0.0]
        self._rev_flat = {j: _flat_gather(plan_j[2], n, W) for j, plan_j in self._rev.items()}
        self._imu_flat = [_flat_gather(g, n, W) for g, _, _ in self._imu_plan]
        self._imu_take = [_imu_row_gathers(cols, n) for cols in self._imu_cols]
        # joint_values: every body of a revolute joint evaluated once (its (xi, yi, xj, yj)
        # and their rates gathered from [q, consts, q̇, 0]), each joint from its two bodies'
        # (θ, θ̇): (joint, revolute, body a, body b (None: ground), offset)
        bodies: dict[tuple, int] = {}
        self._jv_plan = []
        for j, (kind, a, b, offset) in enumerate(self._joints):
            ends = [None if kind != 'rev' or idx is None
                    else bodies.setdefault(tuple(idx.tolist()), len(bodies)) for idx in (a, b)]
            self._jv_plan.append((j, kind == 'rev', ends[0], ends[1], offset))
        self._jv_bodies = [itemgetter(*(list(key) + [W + (p if p < n else n) for p in key]))
                           for key in bodies]

    # -- helpers ---------------------------------------------------------
    def _drop(self, Jw: np.ndarray) -> np.ndarray:
        return Jw[..., :self.n]

    # -- joints ----------------------------------------------------------
    def joint(self, j: int, q: np.ndarray, qd: np.ndarray, want: bool = False
              ) -> tuple[Model, Model]:
        """Position and rate models of joint ``j`` (each 1 row)."""
        kind, a, b, offset = self._joints[j]
        if kind == 'rev':
            if not want:                 # values only (the estimate's joint readings)
                h = np.array(self._rev_values(j, q, qd))
                return Model(h[0:1]), Model(h[1:2])
            pos, vel, rows = self._rev_rows(j, q, qd)
            zero = np.zeros((1, self.n))
            return (Model(np.array([pos]), rows[0:1], zero, zero),
                    Model(np.array([vel]), rows[1:2], rows[0:1].copy(), zero))
        w, wd = self.ext.of(q), self.ext.rate(qd)
        return self._prismatic(a, b, offset, w, wd, want)

    def joint_rows(self, j: int, q: np.ndarray, qd: np.ndarray
                   ) -> tuple[float, float, np.ndarray]:
        """Position and rate of joint ``j`` and the rows [∂h/∂q; ∂ḣ/∂q] (2, n): the numbers
        of :meth:`joint` with ``want`` (∂ḣ/∂q̇ = ∂h/∂q) without its records and zero
        blocks (the command law's J_s and J̇_s q̇, ~3 µs less per revolute actuator,
        issue 24). A revolute joint's local rows are scattered as floats (:meth:`joint_batch`'s
        one-state form: each column gets at most two exact ±1 multiples, so the sum is the
        product with ``sel``'s bits)."""
        if self._joints[j][0] == 'rev':
            pos, vel, g, gr = self._rev_local(j, q, qd)
            n = self.n
            H = [0.0] * (2 * n)                 # [∂angle/∂q, ∂rate/∂q]
            for r, i, sign in self._rev_cols[j]:
                H[i] += sign * g[r]
                H[n + i] += sign * gr[r]
            return pos, vel, np.array(H).reshape(2, n)
        p, v = self.joint(j, q, qd, want=True)
        return float(p.h[0]), float(v.h[0]), np.concatenate((p.Hq, v.Hq))

    def _stacked(self, gather: itemgetter, *x: np.ndarray) -> tuple:
        """The entries ``gather`` (an itemgetter of the plan) of [q, consts, q̇, 0(, q̈, 0)]
        as floats (Python lists: cheaper than numpy's concatenate and fancy indexing at
        this size)."""
        if len(x) == 2:
            return gather(x[0].tolist() + self._consts + x[1].tolist() + [0.0])
        return gather(x[0].tolist() + self._consts + x[1].tolist() + [0.0] + x[2].tolist()
                      + [0.0])

    def joint_values(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The angles (or slider positions) and rates of every encoder at (q, q̇), the
        values of :meth:`joint` (seed 000 §2 body angles), [q, consts, q̇, 0] listed once
        and each body's angle and rate computed once for all the revolute joints (the
        four-bar's crank and coupler joints share the crank: 2 bodies instead of 3)."""
        full = q.tolist() + self._consts + qd.tolist() + [0.0]
        ang = []                       # (θ, θ̇) of each body, once (:meth:`_rev_values`' floats)
        for get in self._jv_bodies:
            xi, yi, xj, yj, vxi, vyi, vxj, vyj = get(full)
            dx, dy = xj - xi, yj - yi
            ddx, ddy = vxj - vxi, vyj - vyi
            ang.append((math.atan2(dy, dx), (dx * ddy - dy * ddx) / (dx * dx + dy * dy)))
        pos, vel = [], []
        for j, rev, a, b, offset in self._jv_plan:
            if rev:
                ta, ra = (0.0, 0.0) if a is None else ang[a]
                tb, rb = (0.0, 0.0) if b is None else ang[b]
                pos.append(_wrap(tb - ta - offset))
                vel.append(rb - ra)
            else:
                mp, mv = self.joint(j, q, qd)
                pos.append(mp.h[0])
                vel.append(mv.h[0])
        return np.array(pos), np.array(vel)

    def _rev_values(self, j: int, q: np.ndarray, qd: np.ndarray, full: list | None = None
                    ) -> tuple[float, float]:
        """Angle θ_b − θ_a − offset (wrapped) and rate of revolute joint ``j`` (floats;
        θ̇ = (dx ḋy − dy ḋx)/|d|², module docstring); ``full``: [q, consts, q̇, 0] listed
        already (:meth:`joint_values`)."""
        has_a, has_b, gather, _, offset = self._rev[j]
        v = self._stacked(gather, q, qd) if full is None else gather(full)
        h = len(v) // 2
        ta = ra = tb = rb = 0.0
        o = 0
        if has_a:
            dx, dy, ddx, ddy, r2, ta = _body_angle(v, 0, h)
            ra = (dx * ddy - dy * ddx) / r2
            o = 4
        if has_b:
            dx, dy, ddx, ddy, r2, tb = _body_angle(v, o, h)
            rb = (dx * ddy - dy * ddx) / r2
        return _wrap(tb - ta - offset), rb - ra

    def _rev_rows(self, j: int, q: np.ndarray, qd: np.ndarray
                  ) -> tuple[float, float, np.ndarray]:
        """Angle, rate and the Jacobian rows [∂angle/∂q; ∂rate/∂q] (2, n) of revolute joint
        ``j`` (∂rate/∂q̇ = ∂angle/∂q); the module docstring's formulas, local rows scattered
        by one product."""
        pos, vel, g, gr = self._rev_local(j, q, qd)
        return pos, vel, np.dot((g, gr), self._rev[j][3])

    def _rev_local(self, j: int, q: np.ndarray, qd: np.ndarray
                   ) -> tuple[float, float, tuple, tuple]:
        """:meth:`_rev_rows` with the rows in the bodies' local coordinates (ri, rj of body
        a, then of body b; before the signed scatter ``sel``)."""
        return self._rev_at(j, self._stacked(self._rev[j][2], q, qd))

    def _rev_at(self, j: int, v: tuple) -> tuple[float, float, tuple, tuple]:
        """:meth:`_rev_local` of the joint's entries ``v`` (its bodies' (ri, rj), then their
        rates, gathered)."""
        has_a, has_b, _, _, offset = self._rev[j]
        h = len(v) // 2
        ta = ra = tb = rb = 0.0
        g: tuple = ()
        gr: tuple = ()
        o = 0
        if has_a:
            dx, dy, ddx, ddy, r2, ta = _body_angle(v, 0, h)
            ra, g, gr = _angle_rows(dx, dy, ddx, ddy, r2)
            o = 4
        if has_b:
            dx, dy, ddx, ddy, r2, tb = _body_angle(v, o, h)
            rb, gb, grb = _angle_rows(dx, dy, ddx, ddy, r2)
            g, gr = g + gb, gr + grb
        return _wrap(tb - ta - offset), rb - ra, g, gr

    def _prismatic(self, p_idx, line, offset, w, wd, want):
        a_idx, b_idx, fixed = line
        p, pd = w[p_idx], wd[p_idx]
        if fixed is not None:
            a, b = fixed
            ad = bd = np.zeros(2)
        else:
            a, b, ad, bd = w[a_idx], w[b_idx], wd[a_idx], wd[b_idx]
        r, rd = p - a, pd - ad
        D, Dd = b - a, bd - ad
        ln = math.sqrt(D @ D)
        e = D / ln
        Pm = (np.eye(2) - np.outer(e, e)) / ln
        s = float(r @ e) - offset
        ed = Pm @ Dd
        sd = float(rd @ e + r @ ed)
        if not want:
            return Model(np.array([s])), Model(np.array([sd]))
        # position: ∂s/∂r = e, ∂s/∂D = P r
        s_r, s_D = e, Pm @ r
        # rate ṡ = ṙ·e + rᵀ P Ḋ (derivatives derived in the module docstring of the tests)
        l3, l5 = ln ** 3, ln ** 5
        rD, DDd, rDd = r @ D, D @ Dd, r @ Dd
        sd_r = ed
        sd_D = (Pm @ rd - rDd * D / l3 - r * DDd / l3 - rD * Dd / l3
                + 3.0 * rD * DDd * D / l5)
        Gp = np.zeros(self.W)
        Gv = np.zeros(self.W)
        Gvd = np.zeros(self.W)
        np.add.at(Gp, p_idx, s_r)
        np.add.at(Gv, p_idx, sd_r)
        np.add.at(Gvd, p_idx, e)
        if fixed is None:
            np.add.at(Gp, a_idx, -s_r - s_D)
            np.add.at(Gp, b_idx, s_D)
            np.add.at(Gv, a_idx, -sd_r - sd_D)
            np.add.at(Gv, b_idx, sd_D)
            np.add.at(Gvd, a_idx, -e - s_D)
            np.add.at(Gvd, b_idx, s_D)
        zero = np.zeros((1, self.n))
        return (Model(np.array([s]), self._drop(Gp)[None, :], zero, zero),
                Model(np.array([sd]), self._drop(Gv)[None, :], self._drop(Gvd)[None, :], zero))

    def angle_residual(self, kind: str, index: int) -> bool:
        """A revolute encoder's angle and the IMU's yaw are residuals wrapped to (−π, π]."""
        return ((kind == 'joint_pos' and self.joint_is_angular(index))
                or kind == 'orient')

    @staticmethod
    def position_target(kind: str) -> bool:
        """Encoders and the yaw (a scalar) are targets of the start-up position problem."""
        return kind in ('joint_pos', 'orient')

    def joint_is_angular(self, j: int) -> bool:
        return self._joints[j][0] == 'rev'

    # -- IMU -------------------------------------------------------------
    def imu(self, k: int, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, want: bool = False
            ) -> tuple[Model, Model, Model]:
        """Gyro (1), accelerometer (2) and orientation (1) models of IMU ``k``."""
        rate, f0, f1, phi, rows, dRTv = self._imu_rows(k, q, qd, qdd, want)
        gyro = np.array([rate])
        f = np.array([f0, f1])
        ori = np.array([_wrap(phi)])
        if not want:
            return Model(gyro), Model(f), Model(ori)
        n = self.n
        zero1 = np.zeros((1, n))
        return (Model(gyro, rows[1:2], rows[0:1], zero1),
                Model(f, rows[4:6], np.zeros((2, n)), rows[2:4]),
                Model(ori, rows[0:1].copy(), zero1.copy(), zero1.copy()))

    def _imu_rows(self, k: int, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, want: bool
                  ) -> tuple[float, float, float, float, np.ndarray | None, tuple | None]:
        """IMU ``k``'s gyro θ̇, specific force f = Rᵀ(θ + α)(A r̈ − g), angle θ + α
        (unwrapped) and, with ``want``, the rows [∂θ/∂q; ∂θ̇/∂q; ∂f/∂q̈ (2); ∂f/∂q (2)]
        (6, n) and ∂Rᵀ/∂θ (A r̈ − g) (module docstring's models; ∂f/∂q = ∂Rᵀ/∂θ (A r̈ − g)
        ∂θ/∂q; floats, one product scatters the local rows: each local entry lands on its
        own column, so the products are those of scaling the scattered ∂θ/∂q)."""
        rate, f0, f1, phi, local = self._imu_local(k, q, qd, qdd, want)
        if not want:
            return rate, f0, f1, phi, None, None
        g4, gr4, cr, sr, d0, d1 = local
        rows = (g4, gr4, cr, sr, tuple(d0 * g for g in g4), tuple(d1 * g for g in g4))
        return rate, f0, f1, phi, np.dot(rows, self._imu_plan[k][1]), (d0, d1)

    def _imu_local(self, k: int, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, want: bool
                   ) -> tuple[float, float, float, float, tuple | None]:
        """:meth:`_imu_rows`' values and, with ``want``, its rows in the body's local
        coordinates (ri, rj) before the scatter: (∂θ/∂, ∂θ̇/∂, ∂f/∂r̈ (2 rows), ∂Rᵀ/∂θ (A r̈ −
        g) (2 floats))."""
        return self._imu_at(k, self._stacked(self._imu_plan[k][0], q, qd, qdd), want)

    def _imu_at(self, k: int, v: tuple, want: bool
                ) -> tuple[float, float, float, float, tuple | None]:
        """:meth:`_imu_local` of the IMU's entries ``v`` (its body's (ri, rj), their rates and
        accelerations, gathered)."""
        A = self._imu_plan[k][2]
        alpha = self._imus[k][2]
        dx, dy, ddx, ddy, r2, th = _body_angle(v, 0, 4)
        rate, g4, gr4 = _angle_rows(dx, dy, ddx, ddy, r2)
        a0, a1, a2, a3, a4, a5, a6, a7 = A
        x0, x1, x2, x3 = v[8:12]
        v0 = a0 * x0 + a1 * x1 + a2 * x2 + a3 * x3 - self._g0
        v1 = a4 * x0 + a5 * x1 + a6 * x2 + a7 * x3 - self._g1
        phi = th + alpha
        c, s = math.cos(phi), math.sin(phi)
        f0, f1 = c * v0 + s * v1, -s * v0 + c * v1
        if not want:
            return rate, f0, f1, phi, None
        return rate, f0, f1, phi, (
            g4, gr4, (c * a0 + s * a4, c * a1 + s * a5, c * a2 + s * a6, c * a3 + s * a7),
            (-s * a0 + c * a4, -s * a1 + c * a5, -s * a2 + c * a6, -s * a3 + c * a7),
            -s * v0 + c * v1, -c * v0 - s * v1)

    # -- many states at once (readings of one sensor in an interval factor) -------
    # The same formulas as joint/imu, vectorised over N states; the scalar forms stay
    # for the per-tick single-state calls (twice as fast for N = 1), and a test checks
    # the two against each other.
    @staticmethod
    def _angle_batch(w: np.ndarray, wd: np.ndarray, idx: np.ndarray | None):
        """Body angle θ = atan2(dy, dx) and rate θ̇ (module docstring) for N states at once,
        with their Jacobians: (θ, θ̇, ∂θ/∂w, ∂θ̇/∂w) as (N,),
        (N,), (N, 4), (N, 4); ground gives zeros."""
        N = w.shape[0]
        if idx is None:
            z = np.zeros((N, 4))
            return np.zeros(N), np.zeros(N), z, z
        d = w[:, idx[2:]] - w[:, idx[:2]]
        dd = wd[:, idx[2:]] - wd[:, idx[:2]]
        r2 = np.einsum('ij,ij->i', d, d)[:, None]
        G = np.stack((-d[:, 1], d[:, 0]), axis=1) / r2
        rate = np.einsum('ij,ij->i', G, dd)
        rate_d = np.stack((dd[:, 1], -dd[:, 0]), axis=1) / r2 - 2.0 * rate[:, None] * d / r2
        return (np.arctan2(d[:, 1], d[:, 0]), rate, np.hstack((-G, G)),
                np.hstack((-rate_d, rate_d)))

    def _extended(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[q, consts], [q̇, 0], [q̈, 0] of the N states X (N, 3, n)."""
        N, n = X.shape[0], self.n
        W = self.ext.W
        w = np.empty((N, W))
        w[:, :n] = X[:, 0]
        w[:, n:] = self.ext.consts
        wd = np.zeros((N, W))
        wd[:, :n] = X[:, 1]
        wdd = np.zeros((N, W))
        wdd[:, :n] = X[:, 2]
        return w, wd, wdd

    def joint_batch(self, j: int, X: np.ndarray) -> tuple[tuple, tuple] | None:
        """Revolute joint ``j`` at N states: ((pos, vel) values (N,), their (N, 3, n) Jacobians
        [H_q, H_q̇, H_q̈]); None for other joint kinds (the scalar model serves those)."""
        kind, a, b, offset = self._joints[j]
        if kind != 'rev':
            return None
        n, N = self.n, X.shape[0]
        if N == 1:          # one state: the scalar model, its rows scattered as floats
            pos, vel, g, gr = self._rev_at(j, self._rev_flat[j](X[0].reshape(-1).tolist()
                                                                + self._flat_tail))
            n3 = 3 * n
            H = [0.0] * (2 * n3)                # [H of the angle; H of the rate]
            for r, i, sign in self._rev_cols[j]:
                H[i] += sign * g[r]             # ∂angle/∂q
                H[n3 + i] += sign * gr[r]       # ∂rate/∂q
                H[n3 + n + i] += sign * g[r]    # ∂rate/∂q̇ = ∂angle/∂q
            H += (pos, vel)                     # one array: the rows, then the values
            a = np.array(H)
            H = a[:2 * n3].reshape(2, 1, 3, n)
            return (a[2 * n3:2 * n3 + 1], a[2 * n3 + 1:]), (H[0], H[1])
        if X.strides[0] == 0:                  # one state broadcast: the scalar model, once
            pos, vel, rows = self._rev_rows(j, X[0, 0], X[0, 1])
            H = np.zeros((2, N, 3, n))          # [H of the angle, H of the rate]
            H[:, :, 0] = rows[:, None]          # ∂angle/∂q, ∂rate/∂q
            H[1, :, 1] = rows[0]                # ∂rate/∂q̇ = ∂angle/∂q
            return (np.full(N, pos), np.full(N, vel)), (H[0], H[1])
        w, wd, _ = self._extended(X)
        ta, ra, ga, gra = self._angle_batch(w, wd, a)
        tb, rb, gb, grb = self._angle_batch(w, wd, b)
        pos = wrap_angle(tb - ta - offset)
        vel = rb - ra
        Gp = np.zeros((N, self.W))
        Gv = np.zeros((N, self.W))
        if b is not None:
            Gp[:, b] += gb
            Gv[:, b] += grb
        if a is not None:
            Gp[:, a] -= ga
            Gv[:, a] -= gra
        Hp = np.zeros((N, 3, n))
        Hv = np.zeros((N, 3, n))
        Hp[:, 0] = Gp[:, :n]
        Hv[:, 0] = Gv[:, :n]
        Hv[:, 1] = Gp[:, :n]
        return (pos, vel), (Hp, Hv)

    def imu_batch(self, k: int, X: np.ndarray) -> tuple[tuple, tuple]:
        """IMU ``k`` at N states: ((gyro (N,), accel (N, 2), orientation (N,)), their
        Jacobians (N, 1|2|1, 3, n)), as :meth:`imu` per state."""
        idx, A, alpha = self._imus[k]
        n, N = self.n, X.shape[0]
        w, wd, wdd = self._extended(X)
        th, rate, g, gr = self._angle_batch(w, wd, idx)
        v = wdd[:, idx] @ A.T - self.g                                   # (N, 2)
        phi = th + alpha
        c, s = np.cos(phi), np.sin(phi)
        f = np.stack((c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1]), axis=1)
        Gq = np.zeros((N, self.W))
        Gr = np.zeros((N, self.W))
        Gq[:, idx] += g
        Gr[:, idx] += gr
        gq = Gq[:, :n]
        Hg = np.zeros((N, 1, 3, n))
        Hg[:, 0, 0] = Gr[:, :n]
        Hg[:, 0, 1] = gq
        Ho = np.zeros((N, 1, 3, n))
        Ho[:, 0, 0] = gq
        dRTv = np.stack((-s * v[:, 0] + c * v[:, 1], -c * v[:, 0] - s * v[:, 1]), axis=1)
        RT = np.stack((np.stack((c, s), axis=1), np.stack((-s, c), axis=1)), axis=1)  # (N,2,2)
        Fa = np.zeros((N, 2, self.W))
        Fa[:, :, idx] = RT @ A
        Hf = np.zeros((N, 2, 3, n))
        Hf[:, :, 0] = dRTv[:, :, None] * gq[:, None, :]
        Hf[:, :, 2] = Fa[:, :, :n]
        return (rate, f, wrap_angle(phi)), (Hg, Hf, Ho)

    # -- all joints at once ----------------------------------------------
    def imu_observations(self, k: int, gyro: np.ndarray | None, accel: np.ndarray | None,
                         quat: np.ndarray | None, s_gyro: np.ndarray, s_accel: np.ndarray,
                         s_orient: np.ndarray) -> list:
        """Observations of one 3-axis IMU record on a plane whose normal is z: the z rate,
        the in-plane specific force and the yaw (each part when finite)."""
        out = []
        if gyro is not None and math.isfinite(gyro[2]):
            out.append(Observation('gyro', k, gyro[2:], s_gyro[2:]))
        if accel is not None and math.isfinite(accel[0]) and math.isfinite(accel[1]):
            out.append(Observation('accel', k, accel[:2], s_accel[:2]))
        if quat is not None and np.all(np.isfinite(quat)):
            out.append(Observation('orient', k, np.array([quaternion_yaw(quat)]), s_orient[2:]))
        return out

    def imu_errors(self, k: int, obs: Sequence, X: np.ndarray, want: bool
                   ) -> tuple[np.ndarray, np.ndarray | None]:
        """Residuals ``h − z`` of IMU ``k``'s readings ``obs`` (kinds ``gyro``: z rate,
        ``accel``: in-plane specific force, ``orient``: yaw, wrapped) at the states
        ``X`` (N, 3, n), stacked, with their model Jacobians (rows, 3, n)."""
        if X.shape[0] == 1 or X.strides[0] == 0:
            return self._imu_errors_one(k, obs, X[0], want)
        (gyro, f, ori), (Hg, Hf, Ho) = self.imu_batch(k, X)
        sizes = [np.size(ob.sigma) for ob in obs]
        e = np.empty(sum(sizes))
        H = np.empty((e.size, 3, self.n)) if want else None
        r0 = 0
        for r, ob in enumerate(obs):
            if ob.kind == 'gyro':
                e[r0] = gyro[r] - ob.z[0]
                if want:
                    H[r0] = Hg[r, 0]
            elif ob.kind == 'accel':
                e[r0:r0 + 2] = f[r] - ob.z
                if want:
                    H[r0:r0 + 2] = Hf[r]
            else:
                e[r0] = wrap_angle(ori[r] - ob.z[0])
                if want:
                    H[r0] = Ho[r, 0]
            r0 += sizes[r]
        return e, H

    def _imu_errors_one(self, k: int, obs: Sequence, x: np.ndarray, want: bool
                        ) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`imu_errors` with every reading at one state ``x`` (3, n): the scalar
        model, once (the batch form costs twice as much for one state). The Jacobian's
        entries are written as floats by the IMU's scatter plan (each local coordinate of
        the body on its own column of q) and made one array."""
        v = self._imu_flat[k](x.reshape(-1).tolist() + self._flat_tail)
        rate, f0, f1, phi, local = self._imu_at(k, v, want)
        e = []
        if not want:
            for ob in obs:
                kind = ob.kind
                if kind == 'gyro':
                    e.append(rate - ob.z[0])
                elif kind == 'accel':
                    z0, z1 = ob.z.tolist()
                    e += (f0 - z0, f1 - z1)
                else:
                    e.append(_wrap(_wrap(phi) - ob.z[0]))
            return np.array(e), None
        g4, gr4, cr, sr, d0, d1 = local
        take_gyro, take_accel, take_orient = self._imu_take[k]
        H: list = []
        for ob in obs:
            kind = ob.kind
            if kind == 'gyro':                      # [∂θ̇/∂q, ∂θ/∂q, 0]
                e.append(rate - ob.z[0])
                H += take_gyro(gr4 + g4 + (0.0,))
            elif kind == 'accel':                   # [∂f/∂q, 0, ∂f/∂q̈] (2 rows)
                z0, z1 = ob.z.tolist()
                e += (f0 - z0, f1 - z1)
                a0, a1, a2, a3 = g4
                H += take_accel((d0 * a0, d0 * a1, d0 * a2, d0 * a3) + cr
                                + (d1 * a0, d1 * a1, d1 * a2, d1 * a3) + sr + (0.0,))
            else:                                   # [∂θ/∂q, 0, 0]
                e.append(_wrap(_wrap(phi) - ob.z[0]))
                H += take_orient(g4 + (0.0,))
        return np.array(e), np.array(H).reshape(len(e), 3, self.n)

    def joint_positions(self, q: np.ndarray) -> np.ndarray:
        z = np.zeros(self.n)
        return np.array([self.joint(j, q, z)[0].h[0] for j in range(len(self._joints))])

    def joint_velocities(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        return np.array([self.joint(j, q, qd)[1].h[0] for j in range(len(self._joints))])


def joint_positions(sys: SensedMechanism, q: np.ndarray) -> np.ndarray:
    """Positions of ``mech.joints`` (revolute wrapped to (−π, π] minus offset)."""
    return SensorModel(sys).joint_positions(np.asarray(q, dtype=float))


def joint_velocities(sys: SensedMechanism, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """Rates of ``mech.joints``."""
    return SensorModel(sys).joint_velocities(np.asarray(q, float), np.asarray(qd, float))


def imu_reading(sys: SensedMechanism, imu: Imu | int | str, q: np.ndarray, qd: np.ndarray,
                qdd: np.ndarray) -> tuple[float, np.ndarray, float]:
    """(gyro_z, specific force (2,) in the sensor frame, angle) of one IMU."""
    model = SensorModel(sys)
    k = _imu_index(sys.mech, imu)
    g, f, o = model.imu(k, np.asarray(q, float), np.asarray(qd, float), np.asarray(qdd, float))
    return float(g.h[0]), f.h, float(o.h[0])


def _imu_index(mech: Mechanism, imu: Imu | int | str) -> int:
    if isinstance(imu, int):
        return imu
    name = imu.name if isinstance(imu, Imu) else imu
    return [s.name for s in mech.sensors].index(name)


# --------------------------------------------------------------------------
# Simulated sensors
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class SensorConfig:
    """What :func:`simulate_measurements` produces.

    Encoders (one JointState per sample with every joint in ``joints``,
    default all YAML joints): ``encoder_rate`` Hz, ``encoder_counts`` per
    turn (0: no quantisation; revolute joints only), additive Gaussian
    ``encoder_sigma`` (rad or m), velocity with ``encoder_velocity_sigma``
    (None: empty velocity field); effort is left empty. IMUs (``imus``, default all YAML sensors):
    ``imu_rate`` Hz, ``gyro_sigma`` rad/s, ``accel_sigma`` m/s²,
    ``orientation_sigma`` rad (None: no orientation, like most IMUs without a
    filter). A rate of 0 disables that sensor. ``dropouts``: (start, end)
    intervals without encoder messages.
    """

    encoder_rate: float = 500.0
    encoder_counts: int = 4096
    encoder_sigma: float = math.radians(0.05)
    encoder_velocity_sigma: float | None = None
    joints: tuple[str, ...] | None = None
    imu_rate: float = 500.0
    gyro_sigma: float = 0.01
    accel_sigma: float = 0.05
    orientation_sigma: float | None = None
    imus: tuple[str, ...] | None = None
    dropouts: tuple[tuple[float, float], ...] = ()


def sample_indices(t: np.ndarray, rate: float) -> np.ndarray:
    """Indices of ``t`` nearest to a grid of period 1/rate starting at t[0]."""
    if rate <= 0 or len(t) == 0:
        return np.zeros(0, dtype=int)
    grid = np.arange(t[0], t[-1] + 0.5 / rate, 1.0 / rate)
    idx = np.clip(np.searchsorted(t, grid), 0, len(t) - 1)
    prev = np.clip(idx - 1, 0, len(t) - 1)
    idx = np.where(np.abs(t[prev] - grid) < np.abs(t[idx] - grid), prev, idx)
    return np.unique(idx)


def simulate_measurements(sys: SensedMechanism, t: np.ndarray, q: np.ndarray, qd: np.ndarray,
                          qdd: np.ndarray, config: SensorConfig,
                          rng: np.random.Generator) -> list[JointMeasurement | ImuMeasurement]:
    """Noisy encoder and IMU messages from a sampled trajectory, sorted by stamp.

    Each message is stamped with the trajectory time of the sample it reads
    (the nearest sample to the sensor's clock), so the truth is exact there.
    """
    t = np.asarray(t, dtype=float)
    model = SensorModel(sys)
    mech = sys.mech
    out: list[tuple[float, int, JointMeasurement | ImuMeasurement]] = []
    names = config.joints if config.joints is not None else model.joint_names
    jidx = [model.joint_names.index(nm) for nm in names]
    step = 2.0 * math.pi / config.encoder_counts if config.encoder_counts else 0.0
    for i in sample_indices(t, config.encoder_rate) if names else []:
        if any(a <= t[i] < b for a, b in config.dropouts):
            continue
        pos = np.empty(len(names))
        vel = np.empty(len(names)) if config.encoder_velocity_sigma is not None else np.zeros(0)
        for k, j in enumerate(jidx):
            p, v = model.joint(j, q[i], qd[i])
            z = p.h[0]
            if step and model.joint_is_angular(j):
                z = round(z / step) * step
            pos[k] = wrap_angle(z + rng.normal(0.0, config.encoder_sigma)) \
                if model.joint_is_angular(j) else z + rng.normal(0.0, config.encoder_sigma)
            if config.encoder_velocity_sigma is not None:
                vel[k] = v.h[0] + rng.normal(0.0, config.encoder_velocity_sigma)
        out.append((float(t[i]), 0, JointMeasurement(float(t[i]), tuple(names), pos, vel,
                                                      np.zeros(0))))
    imus = config.imus if config.imus is not None else model.imu_names
    for nm in imus:
        k = model.imu_names.index(nm)
        for i in sample_indices(t, config.imu_rate):
            g, f, o = model.imu(k, q[i], qd[i], qdd[i])
            quat = None
            if config.orientation_sigma is not None:
                quat = quaternion_from_yaw(
                    float(wrap_angle(o.h[0] + rng.normal(0.0, config.orientation_sigma))))
            # a planar IMU: rate about the plane normal, specific force in the plane
            gyro = np.array([0.0, 0.0, g.h[0] + rng.normal(0.0, config.gyro_sigma)])
            accel = np.append(f.h + rng.normal(0.0, config.accel_sigma, 2), 0.0)
            out.append((float(t[i]), 1, ImuMeasurement(float(t[i]), mech.sensors[k].name,
                                                       gyro, accel, quat)))
    out.sort(key=lambda r: (r[0], r[1]))
    return [m for _, _, m in out]
