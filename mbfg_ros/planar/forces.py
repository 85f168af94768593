"""Mass matrix M and generalized forces Q(q, q̇) in natural coordinates.

Seed 000 Eq. 4: ``M q̈ + Φqᵀ λ = Q``. A planar body with basic points i, j
(length L) places its material point at local (ξ, η) at
``r = A(ξ, η) [ri; rj]``, ``A = [(1 − ξ/L) I − (η/L) P, (ξ/L) I + (η/L) P]``
with P the 90° rotation. Then ``M_b = ∫ Aᵀ A dm``, constant, which needs only
the mass, the centre of gravity and I0 about the first point (García de
Jalón & Bayo's natural-coordinate body, the model the seed's library uses);
relative coordinates carry no mass. Gravity acts at the centre of mass,
``Q_b = A(cog)ᵀ m g``; a force at a body-fixed location is ``A(at)ᵀ F``.

Elements that depend on the state (body torques, translational and
rotational springs and dampers, torques of actuators at revolute joints) use
the body angle θ = atan2(dy, dx) of the vector d = rj − ri, with
``∂θ/∂d = (−dy, dx)/|d|²`` (virtual power), and return analytic Jacobians
``Q_q``, ``Q_qd`` for the dynamics factors.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .extended import Extended, point_columns
from .friction import friction_torque, rotor_mass_matrix
from .model import GROUND, Body, Mechanism, RotationalSpring, Spring

__all__ = ['mass_matrix', 'Forces', 'ForceTerms', 'body_matrix_A', 'body_mass_matrix',
           'ElementLoad', 'spring_tension', 'rotational_spring_torque', 'JointStop',
           'stop_torque']

_P = np.array([[0.0, -1.0], [1.0, 0.0]])


def body_matrix_A(xi: float, eta: float, length: float) -> np.ndarray:
    """The 2x4 matrix A with ``r(ξ, η) = A [ri; rj]`` for a two-point body frame."""
    a, b = xi / length, eta / length
    return np.hstack(((1 - a) * np.eye(2) - b * _P, a * np.eye(2) + b * _P))


def _body_w_index(mech: Mechanism, body: int, dump: int) -> np.ndarray:
    """Indices in q of (xi, yi, xj, yj) of a body's basic points; ``dump`` for fixed."""
    if body == GROUND:
        return np.full(4, dump)
    pidx = mech.point_index
    i, j = mech.bodies[body].points[:2]
    idx = np.concatenate((pidx[i], pidx[j]))
    return np.where(idx < 0, dump, idx)


def body_mass_matrix(body: Body) -> np.ndarray:
    """The constant 4x4 mass matrix ``∫ Aᵀ A dm`` of a body on its basic points (ri, rj)."""
    L, m, I0 = body.length, body.mass, body.I0
    cx, cy = body.cog
    Mii = (m - 2 * m * cx / L + I0 / L ** 2) * np.eye(2)
    Mij = (m * cx / L - I0 / L ** 2) * np.eye(2) + (m * cy / L) * _P
    Mjj = (I0 / L ** 2) * np.eye(2)
    return np.block([[Mii, Mij], [Mij.T, Mjj]])


def spring_tension(spring: Spring, length: float, rate: float) -> float:
    """Tension of a translational spring-damper, ``k (L − L0) + c L̇`` (seed 003 Eq. 6.3)."""
    return spring.k * (length - spring.length) + spring.c * rate


def rotational_spring_torque(spring: RotationalSpring, phi: float, rate: float) -> float:
    """Torque on the second body, ``−k (φ − φ0) − c φ̇`` (seed 003 Eq. 6.15), φ − φ0 wrapped."""
    return -spring.k * math.remainder(phi - spring.angle, 2 * math.pi) - spring.c * rate


class JointStop(NamedTuple):
    """A joint's position limits as a stiff one-sided rotational spring-damper, simulation
    only (issue 30 item 3; built by :func:`mbfg_ros.planar.end_stops.with_end_stops`).

    The joint angle ``a = θ_b − θ_a − offset`` is wrapped to within π of the middle of
    [lower, upper]; beyond a limit the stop applies ``−k (a − limit) − c ȧ``, clamped so that
    it only ever pushes the joint back (never pulls it onto the stop)."""

    bodies: tuple[int, int]
    offset: float
    lower: float
    upper: float
    k: float
    c: float


def stop_torque(stop: JointStop, phi: float, rate: float) -> float:
    """Torque of an end stop on ``bodies[1]`` at relative angle φ = θ_b − θ_a and rate φ̇
    (:class:`JointStop`); 0 within the limits."""
    mid = 0.5 * (stop.lower + stop.upper)
    a = mid + math.remainder(phi - stop.offset - mid, 2 * math.pi)
    if a > stop.upper:
        return min(0.0, -stop.k * (a - stop.upper) - stop.c * rate)
    if a < stop.lower:
        return max(0.0, -stop.k * (a - stop.lower) - stop.c * rate)
    return 0.0


def mass_matrix(mech: Mechanism) -> np.ndarray:
    """Constant mass matrix M (n x n) of seed 000 Eq. 4 in natural coordinates."""
    n = mech.n
    M = np.zeros((n + 1, n + 1))
    for b, body in enumerate(mech.bodies):
        idx = _body_w_index(mech, b, n)
        M[np.ix_(idx, idx)] += body_mass_matrix(body)
    pidx = mech.point_index
    for p, mass in mech.point_masses:
        if pidx[p, 0] >= 0:
            M[pidx[p], pidx[p]] += mass
    M = M[:n, :n] + rotor_mass_matrix(mech)
    return M


class ForceTerms(NamedTuple):
    """Q and its Jacobians at one state."""

    Q: np.ndarray     # (n,)
    Q_q: np.ndarray   # (n, n)
    Q_qd: np.ndarray  # (n, n)


class ElementLoad(NamedTuple):
    """One applied load as physical forces at points (natural coordinates: Q on a point's
    x, y *is* the force there).

    ``body``: the body it acts on (GROUND for the ground's share of a spring or
    motor between a body and the ground); None for a load that acts on the
    points themselves (point forces, translational springs, point masses,
    coordinate actuators): a point shared by several bodies is a pin, and
    :mod:`mbfg_ros.planar.problems.reactions` gives such a load to the first body through it.
    ``couple``: the moment of the forces when they form a pure couple (body
    torques, rotational springs, joint motors), else 0.
    """

    kind: str                  # gravity, force, torque, spring, rotational_spring, friction,
    #                            point_mass, actuator
    label: str
    body: int | None
    points: tuple[int, ...]
    forces: np.ndarray         # (len(points), 2) [N]
    couple: float              # [N m]


class _Angle(NamedTuple):
    grad: np.ndarray   # (4,) ∂θ/∂(ri, rj)
    hess: np.ndarray   # (4, 4)
    rate: float        # θ̇
    rate_q: np.ndarray  # (4,) ∂θ̇/∂(ri, rj)
    value: float


def _pair(K: np.ndarray) -> np.ndarray:
    """[[K, −K], [−K, K]] for a 2x2 K (slices: np.block costs ~40 µs per call on the tick)."""
    out = np.empty((4, 4))
    out[:2, :2] = out[2:, 2:] = K
    out[:2, 2:] = out[2:, :2] = -K
    return out


def _angle_grad(dx: float, dy: float) -> tuple[float, float, float]:
    """∂θ/∂rj = (−dy, dx)/r² of a body angle θ = atan2(dy, dx), d = rj − ri (∂θ/∂ri is its
    negative), and r² = dx² + dy²: (gx, gy, r²), the one place of the formula."""
    r2 = dx * dx + dy * dy
    return -dy / r2, dx / r2, r2


def _angle(ext: np.ndarray, ext_d: np.ndarray, idx: np.ndarray) -> _Angle:
    """Body angle θ = atan2(dy, dx) and its derivatives (ground: θ = 0)."""
    dx, dy = ext[idx[2]] - ext[idx[0]], ext[idx[3]] - ext[idx[1]]
    gx, gy, r2 = _angle_grad(dx, dy)
    G = np.array([gx, gy])
    Hd = np.array([[2 * dx * dy, dy * dy - dx * dx], [dy * dy - dx * dx, -2 * dx * dy]]) / r2 ** 2
    dd = np.array([ext_d[idx[2]] - ext_d[idx[0]], ext_d[idx[3]] - ext_d[idx[1]]])
    grad = np.concatenate((-G, G))
    hess = _pair(Hd)
    Hdd = Hd @ dd
    return _Angle(grad, hess, float(G @ dd), np.concatenate((-Hdd, Hdd)), math.atan2(dy, dx))


def _angle_grad_hess(w: list, idx: list) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """∂θ/∂(ri, rj) (4) and ∂²θ/∂(ri, rj)² row by row (16) of a body angle, as floats from
    the entries ``idx`` of w (a list): the per-tick form of :func:`_angle`'s grad and hess
    (same formulas, no rate)."""
    xi, yi, xj, yj = w[idx[0]], w[idx[1]], w[idx[2]], w[idx[3]]
    dx, dy = xj - xi, yj - yi
    gx, gy, r2 = _angle_grad(dx, dy)
    r4 = r2 * r2
    a, b = 2 * dx * dy / r4, (dy * dy - dx * dx) / r4
    c = -2 * dx * dy / r4
    return ((-gx, -gy, gx, gy),
            (a, b, -a, -b, b, c, -b, -c, -a, -b, a, b, -b, -c, b, c))


class Forces:
    """Generalized forces Q(q, q̇, τ) of a mechanism (immutable after build).

    ``tau`` are the actuator efforts in the order of ``mech.actuators``:
    a coordinate actuator adds τ to that coordinate's Q; a joint actuator adds
    the torque τ between its two bodies (virtual power, ``τ ∂φ/∂q``).

    State-dependent elements work on an extended vector ``[q, fixed point
    coordinates, 0]`` so that fixed points enter with their real coordinates;
    Jacobian columns of constants are dropped.

    ``stops``: joint end stops (:class:`JointStop`), given only to the system a simulator
    integrates (never to the estimator's or inverse dynamics' system).
    """

    def __init__(self, mech: Mechanism, stops: tuple[JointStop, ...] = ()) -> None:
        n = self.n = mech.n
        g = np.array(mech.gravity, dtype=float)
        pw, consts = point_columns(mech)
        self.ext = Extended(n, consts + [0.0])     # w = [q, fixed points, 0]
        self.W = W = self.ext.W
        ground = np.full(4, W - 1)

        def body_idx(b: int) -> np.ndarray:
            if b == GROUND:
                return ground
            i, j = mech.bodies[b].points[:2]
            return np.concatenate((pw[i], pw[j]))

        Q0 = np.zeros(W)
        for b, body in enumerate(mech.bodies):
            A = body_matrix_A(body.cog[0], body.cog[1], body.length)
            Q0[body_idx(b)] += A.T @ (body.mass * g)
        for p, mass in mech.point_masses:
            Q0[pw[p]] += mass * g
        for f in mech.forces:
            F = np.array([f.fx, f.fy])
            if f.point is not None:
                Q0[pw[f.point]] += F
            else:
                A = body_matrix_A(f.at[0], f.at[1], mech.bodies[f.body].length)
                Q0[body_idx(f.body)] += A.T @ F
        self.Q0 = Q0[:n].copy()
        self._torques = [(body_idx(t.body), t.torque) for t in mech.torques]
        self._springs = [(np.concatenate((pw[s.points[0]], pw[s.points[1]])), s)
                         for s in mech.springs]
        self._rsprings = [(body_idx(s.bodies[0]), body_idx(s.bodies[1]), s)
                          for s in mech.rotational_springs]
        self._friction = [(body_idx(j.bodies[0]), body_idx(j.bodies[1]), j.friction)
                          for j in mech.joints if j.friction is not None]
        self.stops = tuple(stops)
        self._stops = [(body_idx(st.bodies[0]), body_idx(st.bodies[1]), st) for st in stops]
        self._act = []
        self._act_bodies = []     # (actuator, sign, body's w indices, their W x W flat indices)
        for k, a in enumerate(mech.actuators):
            if a.coordinate is not None:
                self._act.append(('coord', a.coordinate))
            else:
                j = mech.joint(a.joint)
                self._act.append(('joint', (body_idx(j.bodies[0]), body_idx(j.bodies[1]))))
                for sign, b in ((-1.0, j.bodies[0]), (1.0, j.bodies[1])):
                    if b != GROUND:
                        ii = body_idx(b)
                        keep = [c for c in range(4) if ii[c] < n]    # entries on q
                        self._act_bodies.append((
                            k, sign, ii, ii.tolist(), (ii[:, None] * W + ii).ravel(),
                            keep, ii[keep], [4 * a + b for a in keep for b in keep],
                            np.array([ii[a] * n + ii[b] for a in keep for b in keep],
                                     dtype=int)))
        self._w_consts = list(consts) + [0.0]     # w = q.tolist() + this
        # per-tick plan of the joint actuators: (actuator, sign, body's w indices as a list,
        # ((local entry, coordinate of q), ...) of the gradient, the same of the Hessian's
        # entries on q × q flattened)
        self._act_plan = tuple((k, sign, ii_list, tuple(zip(keep, iq.tolist())),
                                tuple(zip(keep2, iq2.tolist())))
                               for k, sign, _, ii_list, _, keep, iq, keep2, iq2
                               in self._act_bodies)
        self._Q0_list = self.Q0.tolist()
        self._zero_nn = np.zeros((n, n))
        self._zero_nn.flags.writeable = False     # Q_q̇ without state-dependent forces
        # Q0 with zero Jacobians, read only: what evaluate gives when no element depends
        # on the state and every effort is zero or none is given (idle); the per-tick
        # state terms read it without the call
        Q0 = self.Q0.copy()
        Q0.flags.writeable = False
        self.at_rest = ForceTerms(Q0, self._zero_nn, self._zero_nn)
        self._act_coords = [(k, what) for k, (kind, what) in enumerate(self._act)
                            if kind == 'coord']
        self._ground = ground
        self._body_idx = body_idx
        self.mech = mech
        self.point_w = pw
        self.n_act = len(self._act)
        self.state_dependent = bool(self._torques or self._springs or self._rsprings
                                    or self._friction or self._stops)
        self.joint_actuated = any(k == 'joint' for k, _ in self._act)

    def idle(self, tau: np.ndarray | None) -> bool:
        """Whether :meth:`evaluate` at any state is :attr:`at_rest` for efforts ``tau``: no
        element depends on the state and every effort is zero or none is given (tested on
        floats, as :meth:`_actuator_terms_q` does)."""
        return not self.state_dependent and (tau is None or not any(tau.tolist()))

    def _is_ground(self, idx: np.ndarray) -> bool:
        return idx is self._ground

    def _relative(self, ext: np.ndarray, extd: np.ndarray, ia: np.ndarray, ib: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, float]:
        """φ = θ_b − θ_a between two bodies: (idx, ∂φ/∂w, ∂²φ/∂w², ∂φ̇/∂w, φ, φ̇) on 8 columns."""
        idx = np.concatenate((ia, ib))
        grad = [0.0] * 8
        hess = [0.0] * 64
        rate_q = [0.0] * 8
        phi, rate = 0.0, 0.0
        for sign, o, ii in ((-1.0, 0, ia), (1.0, 4, ib)):
            if self._is_ground(ii):
                continue
            # :func:`_angle`'s formulas as floats: G = (−dy, dx)/r², Hd (2x2), its pair
            i0, i1, i2, i3 = ii.tolist()
            dx, dy = float(ext[i2] - ext[i0]), float(ext[i3] - ext[i1])
            d0, d1 = float(extd[i2] - extd[i0]), float(extd[i3] - extd[i1])
            gx, gy, r2 = _angle_grad(dx, dy)
            r4 = r2 * r2
            h00, h01, h11 = 2 * dx * dy / r4, (dy * dy - dx * dx) / r4, -2 * dx * dy / r4
            hd0, hd1 = h00 * d0 + h01 * d1, h01 * d0 + h11 * d1
            grad[o:o + 4] = (sign * -gx, sign * -gy, sign * gx, sign * gy)
            rate_q[o:o + 4] = (sign * -hd0, sign * -hd1, sign * hd0, sign * hd1)
            for r, (a, b) in enumerate(((h00, h01), (h01, h11), (-h00, -h01), (-h01, -h11))):
                hess[8 * (o + r) + o:8 * (o + r) + o + 4] = (sign * a, sign * b, sign * -a,
                                                             sign * -b)
            phi += sign * math.atan2(dy, dx)
            rate += sign * (gx * d0 + gy * d1)
        return (idx, np.array(grad), np.array(hess).reshape(8, 8), np.array(rate_q), phi,
                rate)

    def evaluate(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None = None,
                 jacobians: bool = True) -> ForceTerms:
        """Q(q, q̇, τ) and, if asked, ``Q_q``, ``Q_qd`` (analytic)."""
        n, W = self.n, self.W
        if not (self.state_dependent or (tau is not None and self.n_act)):
            return ForceTerms(self.Q0.copy(), np.zeros((n, n)), np.zeros((n, n)))
        if not self.state_dependent:
            return self._actuator_terms_q(q, tau)
        if not jacobians:
            return ForceTerms(self._values(q, qd, tau), self._zero_nn, self._zero_nn)
        Q = np.zeros(W)
        Q[:n] = self.Q0
        Qq = np.zeros((W, W))
        ext = self.ext.of(q)
        Qqd = np.zeros((W, W))
        extd = self.ext.rate(qd)
        for idx, torque in self._torques:
            a = _angle(ext, extd, idx)
            Q[idx] += torque * a.grad
            Qq[np.ix_(idx, idx)] += torque * a.hess
        for idx, spring in self._springs:
            r, v = ext[idx], extd[idx]
            d, dd = r[2:] - r[:2], v[2:] - v[:2]
            length = math.hypot(d[0], d[1])
            e = d / length
            ldot = e @ dd
            f = spring_tension(spring, length, ldot)
            Qb = -f * e
            Q[idx[:2]] -= Qb
            Q[idx[2:]] += Qb
            if jacobians:
                Pe = (np.eye(2) - np.outer(e, e)) / length
                df_dd = spring.k * e + spring.c * (Pe @ dd)
                K = -(np.outer(e, df_dd) + f * Pe)
                Kd = -spring.c * np.outer(e, e)
                Qq[np.ix_(idx, idx)] += _pair(K)
                Qqd[np.ix_(idx, idx)] += _pair(Kd)
        for ia, ib, s in self._rsprings:
            idx, grad, hess, rate_q, phi, rate = self._relative(ext, extd, ia, ib)
            tq = rotational_spring_torque(s, phi, rate)
            np.add.at(Q, idx, tq * grad)
            if jacobians:
                dtq_dq = -s.k * grad - s.c * rate_q
                np.add.at(Qq, (idx[:, None], idx[None, :]), np.outer(grad, dtq_dq) + tq * hess)
                np.add.at(Qqd, (idx[:, None], idx[None, :]), -s.c * np.outer(grad, grad))
        for ia, ib, fr in self._friction:
            # Friction torque −F(φ̇) between the joint's bodies (virtual power, like a damper).
            idx, grad, hess, rate_q, phi, rate = self._relative(ext, extd, ia, ib)
            F, dF = friction_torque(fr, rate)
            np.add.at(Q, idx, -F * grad)
            if jacobians:
                np.add.at(Qq, (idx[:, None], idx[None, :]),
                          -dF * np.outer(grad, rate_q) - F * hess)
                np.add.at(Qqd, (idx[:, None], idx[None, :]), -dF * np.outer(grad, grad))
        for ia, ib, st in self._stops:
            # End stop (JointStop): a rotational spring-damper acting only beyond a limit.
            idx, grad, hess, rate_q, phi, rate = self._relative(ext, extd, ia, ib)
            tq = stop_torque(st, phi, rate)
            if tq == 0.0:
                continue
            np.add.at(Q, idx, tq * grad)
            if jacobians:
                dtq_dq = -st.k * grad - st.c * rate_q
                np.add.at(Qq, (idx[:, None], idx[None, :]), np.outer(grad, dtq_dq) + tq * hess)
                np.add.at(Qqd, (idx[:, None], idx[None, :]), -st.c * np.outer(grad, grad))
        if tau is not None and self.n_act:
            self._actuator_terms(ext, tau, Q, Qq)
        return ForceTerms(Q[:n], Qq[:n, :n], Qqd[:n, :n])

    def _values(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        """Q(q, q̇, τ) of :meth:`evaluate` without Jacobians, element by element in the same
        order and with the same formulas, as floats on w = [q, fixed points, 0] (the
        per-tick value path: inverse dynamics, forward dynamics without Jacobians)."""
        n, W = self.n, self.W
        w = q.tolist() + self._w_consts
        wd = qd.tolist() + [0.0] * (W - n)
        Q = self._Q0_list + [0.0] * (W - n)
        for idx, torque in self._torques:
            i0, i1, i2, i3 = idx.tolist()
            dx, dy = w[i2] - w[i0], w[i3] - w[i1]
            gx, gy, _ = _angle_grad(dx, dy)
            for i, g in ((i0, -gx), (i1, -gy), (i2, gx), (i3, gy)):
                Q[i] += torque * g
        for idx, spring in self._springs:
            i0, i1, i2, i3 = idx.tolist()
            d0, d1 = w[i2] - w[i0], w[i3] - w[i1]
            length = math.hypot(d0, d1)
            e0, e1 = d0 / length, d1 / length
            f = spring_tension(spring, length, e0 * (wd[i2] - wd[i0]) + e1 * (wd[i3] - wd[i1]))
            b0, b1 = -f * e0, -f * e1
            Q[i0] -= b0
            Q[i1] -= b1
            Q[i2] += b0
            Q[i3] += b1
        for elements, torque_of in ((self._rsprings, rotational_spring_torque),
                                    (self._friction, None), (self._stops, stop_torque)):
            for ia, ib, el in elements:
                idx, grad, phi, rate = self._relative_values(w, wd, ia, ib)
                if torque_of is None:               # friction: −F(φ̇)
                    tq = -friction_torque(el, rate)[0]
                else:
                    tq = torque_of(el, phi, rate)
                    if torque_of is stop_torque and tq == 0.0:
                        continue
                for i, g in zip(idx, grad):
                    Q[i] += tq * g
        if tau is not None and self.n_act:
            tl = tau.tolist()
            for k, what in self._act_coords:
                Q[what] += tl[k]
            for k, sign, ii, _, _ in self._act_plan:     # ∂θ/∂(ri, rj) only, no Hessian
                i0, i1, i2, i3 = ii
                gx, gy, _ = _angle_grad(w[i2] - w[i0], w[i3] - w[i1])
                f = sign * tl[k]
                for i, g in ((i0, -gx), (i1, -gy), (i2, gx), (i3, gy)):
                    Q[i] += f * g
        return np.array(Q[:n])

    def _relative_values(self, w: list, wd: list, ia: np.ndarray, ib: np.ndarray
                         ) -> tuple[list, list, float, float]:
        """:meth:`_relative`'s (idx, ∂φ/∂w, φ, φ̇) as floats from w, ẇ (lists)."""
        idx, grad = [], []
        phi, rate = 0.0, 0.0
        for sign, ii in ((-1.0, ia), (1.0, ib)):
            if self._is_ground(ii):
                continue
            i0, i1, i2, i3 = ii.tolist()
            dx, dy = w[i2] - w[i0], w[i3] - w[i1]
            gx, gy, _ = _angle_grad(dx, dy)
            idx += (i0, i1, i2, i3)
            grad += (sign * -gx, sign * -gy, sign * gx, sign * gy)
            phi += sign * math.atan2(dy, dx)
            rate += sign * (gx * (wd[i2] - wd[i0]) + gy * (wd[i3] - wd[i1]))
        return idx, grad, phi, rate

    def _actuator_terms(self, ext: np.ndarray, tau: np.ndarray, Q: np.ndarray,
                        Qq: np.ndarray) -> None:
        """Add the actuators' ``B_act τ`` to Q (W,) and its q-Jacobian to Qq (W, W): a
        coordinate actuator adds τ to its coordinate, a joint actuator the torque τ
        between its bodies (``±τ ∂θ/∂q`` on each body, virtual power)."""
        for k, what in self._act_coords:
            Q[what] += tau[k]
        flat = Qq.reshape(-1)
        w = ext.tolist()
        for k, sign, _, ii, ii2, *_ in self._act_bodies:
            grad, hess = _angle_grad_hess(w, ii)
            f = sign * tau[k]
            Q[ii] += f * np.array(grad)
            flat[ii2] += f * np.array(hess)

    def _actuator_terms_q(self, q: np.ndarray, tau: np.ndarray) -> ForceTerms:
        """Q = Q0 + B_act τ with its q-Jacobian when no element depends on the state (the
        per-tick case): :meth:`_actuator_terms` on the n columns of q only. No effort (every
        τ_k zero: a passive mechanism, or none given yet) adds nothing: Q = Q0, Q_q = 0,
        without evaluating B_act(q). (Every τ_k zero tested on floats: ``any`` of the list
        is ndarray.any's answer, NaN included, in a tenth of its time.)"""
        n = self.n
        if not any(tau.tolist()):
            return ForceTerms(self.Q0.copy(), self._zero_nn, self._zero_nn)
        if not self._act_bodies:
            Q = self.Q0.copy()
            for k, what in self._act_coords:
                Q[what] += tau[k]
            return ForceTerms(Q, np.zeros((n, n)), self._zero_nn)
        Q = self._Q0_list.copy()            # floats, one array each at the end
        Qq = [0.0] * (n * n)
        tl = tau.tolist()
        for k, what in self._act_coords:
            Q[what] += tl[k]
        w = q.tolist() + self._w_consts
        for k, sign, ii, on_q, on_qq in self._act_plan:
            grad, hess = _angle_grad_hess(w, ii)
            f = sign * tl[k]
            for c, i in on_q:
                Q[i] += f * grad[c]
            for c, i in on_qq:
                Qq[i] += f * hess[c]
        return ForceTerms(np.array(Q), np.array(Qq).reshape(n, n), self._zero_nn)

    def joint_rate(self, q: np.ndarray, qd: np.ndarray, bodies: tuple[int, int]
                   ) -> tuple[np.ndarray, float]:
        """∂φ/∂q (n,) and φ̇ of the relative angle φ = θ_b − θ_a between two bodies (either may be
        ground): a torque T between them is the generalized force T ∂φ/∂q (virtual power)."""
        ext, extd = self.ext.of(q), self.ext.rate(qd)
        idx, grad, _, rate = self._relative_values(ext.tolist(), extd.tolist(),
                                                   self._body_idx(bodies[0]),
                                                   self._body_idx(bodies[1]))
        full = np.zeros(self.W)
        np.add.at(full, idx, grad)
        return full[:self.n], rate

    def relative_angle(self, q: np.ndarray, qd: np.ndarray, bodies: tuple[int, int]
                       ) -> tuple[float, float]:
        """(φ, φ̇) of the relative angle φ = θ_b − θ_a between two bodies (either may be
        ground; φ not wrapped: a difference of two atan2)."""
        ext, extd = self.ext.of(q), self.ext.rate(qd)
        _, _, phi, rate = self._relative_values(ext.tolist(), extd.tolist(),
                                                self._body_idx(bodies[0]),
                                                self._body_idx(bodies[1]))
        return phi, rate

    def actuator_matrix(self, q: np.ndarray) -> np.ndarray:
        """B_act(q) (n x n_act): Q gains ``B_act τ`` from actuator efforts τ."""
        return np.array(self.actuator_entries(q)).reshape(self.n, self.n_act)

    def actuator_entries(self, q: np.ndarray) -> list[float]:
        """B_act(q)'s entries row by row (n · n_act floats): a coordinate actuator's 1, a
        joint actuator's ``±∂θ/∂(ri, rj)`` of each of its bodies (:func:`_angle`'s gradient,
        added in body order), on the coordinates of q (fixed points dropped)."""
        n_act = self.n_act
        B = [0.0] * (self.n * n_act)
        for k, what in self._act_coords:
            B[what * n_act + k] = 1.0
        if self._act_plan:
            w = q.tolist() + self._w_consts
            for k, sign, ii, on_q, _ in self._act_plan:
                xi, yi, xj, yj = w[ii[0]], w[ii[1]], w[ii[2]], w[ii[3]]
                dx, dy = xj - xi, yj - yi
                gx, gy, _ = _angle_grad(dx, dy)   # ∂θ/∂(ri, rj) = (−G, G) (_angle)
                g = (-sign * gx, -sign * gy, sign * gx, sign * gy)
                for c, i in on_q:
                    B[i * n_act + k] += g[c]
        return B

    def element_loads(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None = None,
                      Q_extra: np.ndarray | None = None) -> list[ElementLoad]:
        """Every applied load at (q, q̇, τ) as forces at points, element by element.

        The same elements as :meth:`evaluate` (gravity at the centre of mass,
        ``A(cog)ᵀ m g``; forces; torques, springs and motors through
        ``∂θ/∂(ri, rj)``), kept apart so that each can be given to the body it
        acts on (seed 003 Eq. 6.101 needs the loads of one element at a time).
        ``Q_extra`` (a generalized force, e.g. the unknown Q of inverse
        dynamics) on a point coordinate is a force at that point. Generalized
        forces on relative coordinates are not forces at points: the angle
        constraint of the coordinate carries them to the bodies.
        """
        mech = self.mech
        g = np.array(mech.gravity, dtype=float)
        ext, extd = self.ext.of(q), self.ext.rate(qd)
        pw = self.point_w
        out: list[ElementLoad] = []

        def basic(b: int) -> tuple[int, ...]:
            return mech.bodies[b].points[:2]

        def idx(b: int) -> np.ndarray:
            i, j = basic(b)
            return np.concatenate((pw[i], pw[j]))

        def couple_halves(kind: str, label: str, bodies: tuple[int, int], torque: float,
                          ) -> None:
            for sign, b in ((-1.0, bodies[0]), (1.0, bodies[1])):
                if b == GROUND:
                    out.append(ElementLoad(kind, label, GROUND, (), np.zeros((0, 2)),
                                           sign * torque))
                    continue
                a = _angle(ext, extd, idx(b))
                out.append(ElementLoad(kind, label, b, basic(b),
                                       (sign * torque * a.grad).reshape(2, 2), sign * torque))

        for b, body in enumerate(mech.bodies):
            if body.mass:
                A = body_matrix_A(body.cog[0], body.cog[1], body.length)
                out.append(ElementLoad('gravity', f'gravity_{body.name}', b, basic(b),
                                       (A.T @ (body.mass * g)).reshape(2, 2), 0.0))
        for k, f in enumerate(mech.forces):
            F = np.array([f.fx, f.fy])
            if f.point is not None:
                out.append(ElementLoad('force', f'force{k}', None, (f.point,), F[None, :], 0.0))
            else:
                A = body_matrix_A(f.at[0], f.at[1], mech.bodies[f.body].length)
                out.append(ElementLoad('force', f'force{k}', f.body, basic(f.body),
                                       (A.T @ F).reshape(2, 2), 0.0))
        for k, t in enumerate(mech.torques):
            a = _angle(ext, extd, idx(t.body))
            out.append(ElementLoad('torque', f'torque{k}', t.body, basic(t.body),
                                   (t.torque * a.grad).reshape(2, 2), t.torque))
        for k, s in enumerate(mech.springs):
            pa, pb = s.points
            d = ext[pw[pb]] - ext[pw[pa]]
            dd = extd[pw[pb]] - extd[pw[pa]]
            length = math.hypot(d[0], d[1])
            e = d / length
            f = spring_tension(s, length, float(e @ dd))
            out.append(ElementLoad('spring', f'spring{k}', None, (pa, pb),
                                   np.array([f * e, -f * e]), 0.0))
        for k, s in enumerate(mech.rotational_springs):
            phi = rate = 0.0
            for sign, b in ((-1.0, s.bodies[0]), (1.0, s.bodies[1])):
                if b != GROUND:
                    a = _angle(ext, extd, idx(b))
                    phi += sign * a.value
                    rate += sign * a.rate
            couple_halves('rotational_spring', f'rotational_spring{k}', s.bodies,
                          rotational_spring_torque(s, phi, rate))
        for j in mech.joints:
            if j.friction is None:
                continue
            rate = 0.0
            for sign, b in ((-1.0, j.bodies[0]), (1.0, j.bodies[1])):
                if b != GROUND:
                    rate += sign * _angle(ext, extd, idx(b)).rate
            couple_halves('friction', f'friction_{j.name}', j.bodies,
                          -friction_torque(j.friction, rate)[0])
        for p, mass in mech.point_masses:
            out.append(ElementLoad('point_mass', f'point_mass_{mech.points[p].name}', None,
                                   (p,), (mass * g)[None, :], 0.0))
        owner_of_coord = {int(c): (p, axis) for p in range(len(mech.points))
                          for axis, c in enumerate(mech.point_index[p]) if c >= 0}
        gen = np.zeros(self.n)
        if Q_extra is not None:
            gen += Q_extra
        if tau is not None:
            for k, (kind, what) in enumerate(self._act):
                act = mech.actuators[k]
                if kind == 'coord':
                    gen[what] += tau[k]
                else:
                    couple_halves('actuator', act.name, mech.joint(act.joint).bodies,
                                  float(tau[k]))
        for c in np.flatnonzero(gen):
            if int(c) in owner_of_coord:
                p, axis = owner_of_coord[int(c)]
                F = np.zeros((1, 2))
                F[0, axis] = gen[c]
                out.append(ElementLoad('actuator', f'Q_{mech.coordinate_names[c]}', None, (p,),
                                       F, 0.0))
        return out

    def potential(self, q: np.ndarray, q_ref: np.ndarray | None = None) -> float:
        """Potential energy V(q) of the conservative loads, with ``−∂V/∂q = Q(q, 0)``.

        Seed 003 §6.1.1: constant forces and gravity ``−Q0ᵀ q`` (Eqs. 6.1,
        6.17), body torques ``−T θ`` (6.2), translational springs
        ``½ k (L − L0)²`` (6.3) and rotational springs ``½ k (φ − φ0)²`` (6.15,
        wrapped as their torque is). Dampers store nothing, and actuators are
        not included. A body torque's angle is unwrapped next to ``q_ref``
        (default ``q``), so differences of V between nearby poses are exact.
        """
        ext = self.ext.of(q)
        ref = ext if q_ref is None else self.ext.of(q_ref)
        zero = np.zeros(self.W)
        V = -float(self.Q0 @ np.asarray(q, dtype=float)[:self.n])
        for idx, torque in self._torques:
            th = _angle(ext, zero, idx).value
            th0 = _angle(ref, zero, idx).value
            V -= torque * (th0 + math.remainder(th - th0, 2 * math.pi))
        for idx, spring in self._springs:
            r = ext[idx]
            V += 0.5 * spring.k * (math.hypot(*(r[2:] - r[:2])) - spring.length) ** 2
        for ia, ib, s in self._rsprings:
            phi = 0.0
            for sign, ii in ((-1.0, ia), (1.0, ib)):
                if not self._is_ground(ii):
                    phi += sign * _angle(ext, zero, ii).value
            V += 0.5 * s.k * math.remainder(phi - s.angle, 2 * math.pi) ** 2
        return V
