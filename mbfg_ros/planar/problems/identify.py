"""Parameter identification: inverse dynamics is linear in the dynamic parameters.

In natural coordinates a body's mass matrix and weight (seed 000 Eq. 4,
:func:`mbfg_ros.planar.forces.body_mass_matrix`) are linear in its mass m, first
moments mx = m·cx, my = m·cy and its inertia I0 about the first point:

    M_b = m·Mm + mx·Mx + my·My + I0·MI,   Q_b = m·[g; 0] + mx·[−g; g]/L + my·[−Pᵀg; Pᵀg]/L

(Mm = diag(I, 0); Mx: −2I/L on (i, i), I/L on (i, j) and (j, i); My: P/L on (i, j);
MI: ±I/L²). Joint friction ``F = b φ̇ + (fc + (fs − fc) e) σ(φ̇/v_s)``,
e = exp(−(φ̇/v_st)²), is linear in b, fc and fs (σ, v_s and v_st fixed), and a
rotor's ``Ir c cᵀ q̈`` in Ir. With y = M q̈ − Q the actuator efforts solve
``B_act τ + Φqᵀλ = y`` (seed 003 Eq. 6.110), linear in y, so

    τ(q, q̇, q̈) = W(q, q̇, q̈) π + τ0(q, q̇, q̈)

(τ0: what is not identified: point masses, springs, forces). Stacking the
samples gives an over-determined linear problem. Not every parameter shows in
τ (a body turning about a fixed point shows only I0 and its first moments;
a rotor on the ground moves with the link it drives): the **base parameters**
are the columns kept, in a fixed order of preference, by a rank-revealing
test of W's normalised columns; each other column is a combination W_base K
of them, so only β = π_base + K π_other is identifiable. The fit keeps the
other parameters at their YAML values and solves a (weighted, bounded) least
squares problem for the base ones (``scipy.optimize.lsq_linear``; m, I0, b, fc,
fs, Ir ≥ 0). Standard errors: σ̂² (WᵀW)⁻¹ of the base columns, σ̂² = RSS/(rows − rank).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np
import scipy.optimize
import yaml

from ...core.errors import MbfgError
from .measured import DerivativeOptions, JointLog, MeasuredInverse, measured_states, torques
from ..dynamics import System, build_system
from ..forces import Forces, mass_matrix
from ..model import Body, Friction, Mechanism

__all__ = ['Parameter', 'IdentifyConfig', 'Identified', 'Regressed', 'parameters', 'regressor',
           'regress', 'regress_logs', 'identify', 'identify_states', 'identify_regressed',
           'base_columns', 'apply_parameters', 'identified_yaml']

_P = np.array([[0.0, -1.0], [1.0, 0.0]])


class Parameter(NamedTuple):
    """One identifiable parameter: ``kind`` in mass, mx, my, I0 (body ``owner``), b, fc (joint
    ``owner``), Ir (actuator ``owner``); ``value`` its YAML value; ``lower`` its bound."""

    name: str
    kind: str
    owner: int
    value: float
    lower: float


@dataclass(frozen=True)
class IdentifyConfig:
    """What to fit and how.

    ``friction``: b and fc of every revolute joint that is driven by an actuator
    or has friction in the YAML (smooth sign and v_s from the YAML, else tanh and
    0.01 rad/s); ``stribeck``: also the static level fs of each of those joints (the
    Stribeck bump ``(fs − fc) exp(−(φ̇/v_st)²)``, v_st from the YAML, default 0.1 rad/s;
    a joint whose YAML friction has fs ≠ fc always gets it);
    ``rotor``: Ir of every actuator whose rotor coordinates exist;
    ``same_rotor``: one Ir shared by all of them (identical motors, as DFKI's model has);
    ``weights``: one per actuator (residuals are multiplied by them; default 1), or
    ``'auto'``: Gautier and Khalil's weighted least squares, 1/σ_j per actuator with σ_j
    the RMSE of actuator j after an unweighted fit (a noisy joint no longer drowns a
    quiet one);
    ``fixed``: parameter names (``link2.my``, ``elbow.b``, ...) held at their YAML
    values, e.g. the lateral first moments of links whose centre of mass lies on the
    link axis;
    ``rank_tol``: a column is dependent when its normalised residual after the
    kept columns is below this; ``skip``: samples dropped at each end of every
    log (default: half the Savitzky-Golay window).
    """

    friction: bool = True
    stribeck: bool = False
    rotor: bool = True
    same_rotor: bool = False
    bodies: bool = True
    weights: tuple[float, ...] | str | None = None
    fixed: tuple[str, ...] = ()
    bounded: bool = True
    rank_tol: float = 1e-6
    derivatives: DerivativeOptions = DerivativeOptions()
    skip: int | None = None


class Identified(NamedTuple):
    """Result of :func:`identify`."""

    params: tuple[Parameter, ...]
    values: np.ndarray            # (p,) identified (dependent ones: YAML values)
    base: tuple[int, ...]         # indices of the base parameters
    base_values: np.ndarray       # β = π_base + K π_other (the identifiable combinations)
    base_std: np.ndarray          # standard errors of β
    combos: np.ndarray            # K (len(base), p - len(base)): β = π_base + K π_other
    rmse: np.ndarray              # fit RMSE per actuator, N·m
    rows: int
    mech: Mechanism               # the mechanism with the identified values
    system: System

    def predict(self, log: JointLog, options: DerivativeOptions = DerivativeOptions()
                ) -> MeasuredInverse:
        """Torques of the identified model along a measured motion."""
        st = measured_states(self.system, log, options)
        return st._replace(tau=torques(self.system, st.q, st.qd, st.qdd))

    def report(self) -> str:
        """A plain-text table of the base parameters with standard errors and the fit RMSE."""
        other = [i for i in range(len(self.params)) if i not in self.base]
        lines = [f'{len(self.base)} base parameters of {len(self.params)} '
                 f'({self.rows} equations):']
        for k, i in enumerate(self.base):
            combo = ' '.join(f'{c:+.6g}·{self.params[j].name}'
                             for c, j in zip(self.combos[k], other) if abs(c) > 1e-9)
            lines.append(f'  {self.params[i].name:<24} {self.base_values[k]:+.6g} '
                         f'± {self.base_std[k]:.2g}' + (f'   (= {self.params[i].name} {combo})'
                                                        if combo else ''))
        if other:
            lines.append('  not identifiable alone (kept at their YAML values): '
                         + ', '.join(self.params[j].name for j in other))
        lines.append('fit RMSE per actuator: ' + ', '.join(
            f'{a.name} {e:.4f}' for a, e in zip(self.mech.actuators, self.rmse)))
        return '\n'.join(lines)


def _friction_joints(mech: Mechanism) -> list[int]:
    driven = {a.joint for a in mech.actuators if a.joint is not None}
    return [k for k, j in enumerate(mech.joints)
            if j.type == 'revolute' and (j.friction is not None or j.name in driven)]


def _has_stribeck(f: Friction, config: IdentifyConfig) -> bool:
    """Whether a joint's static level fs is a parameter: asked for, or in its YAML friction."""
    return config.stribeck or f.fs != f.fc


def parameters(mech: Mechanism, config: IdentifyConfig = IdentifyConfig()) -> list[Parameter]:
    """The parameter vector π, in the order of preference for base parameters (I0, first
    moments, friction, rotors, masses last: a mass at a fixed point does not show)."""
    out: list[Parameter] = []
    if config.bodies:
        for b, body in enumerate(mech.bodies):
            out.append(Parameter(f'{body.name}.I0', 'I0', b, body.I0, 0.0))
        for b, body in enumerate(mech.bodies):
            out.append(Parameter(f'{body.name}.mx', 'mx', b, body.mass * body.cog[0], -np.inf))
            out.append(Parameter(f'{body.name}.my', 'my', b, body.mass * body.cog[1], -np.inf))
    if config.friction:
        for k in _friction_joints(mech):
            j = mech.joints[k]
            f = j.friction or Friction()
            out.append(Parameter(f'{j.name}.b', 'b', k, f.b, 0.0))
            out.append(Parameter(f'{j.name}.fc', 'fc', k, f.fc, 0.0))
            if _has_stribeck(f, config):
                out.append(Parameter(f'{j.name}.fs', 'fs', k, f.fs, 0.0))
    rotors = [k for k, a in enumerate(mech.actuators) if a.rotor is not None]
    if config.rotor and config.same_rotor and rotors:
        out.append(Parameter('rotors.Ir', 'Ir', -1,
                             float(np.mean([mech.actuators[k].Ir for k in rotors])), 0.0))
    elif config.rotor:
        for k in rotors:
            out.append(Parameter(f'{mech.actuators[k].name}.Ir', 'Ir', k, mech.actuators[k].Ir,
                                 0.0))
    if config.bodies:
        for b, body in enumerate(mech.bodies):
            out.append(Parameter(f'{body.name}.mass', 'mass', b, body.mass, 0.0))
    unknown = sorted(set(config.fixed) - {p.name for p in out})
    if unknown:
        raise MbfgError(f'identify: fixed parameter(s) {", ".join(unknown)} unknown; the '
                        f'parameters are {", ".join(p.name for p in out)}')
    return [p for p in out if p.name not in config.fixed]


def _body_unit_matrices(body: Body) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per kind: the 4x4 mass-matrix part and the 4-vector weight per unit g (g applied later)."""
    L = body.length
    I2, Z = np.eye(2), np.zeros((2, 2))
    Mm = np.block([[I2, Z], [Z, Z]])
    Mx = np.block([[-2 * I2 / L, I2 / L], [I2 / L, Z]])
    My = np.block([[Z, _P / L], [_P.T / L, Z]])
    MI = np.block([[I2, -I2], [-I2, I2]]) / L ** 2
    return {'mass': (Mm, np.block([[I2], [Z]])), 'mx': (Mx, np.block([[-I2], [I2]]) / L),
            'my': (My, np.block([[-_P.T], [_P.T]]) / L), 'I0': (MI, np.zeros((4, 2)))}


def _zeroed(mech: Mechanism, params: Sequence[Parameter]) -> Mechanism:
    """The mechanism with every parameter of ``params`` set to zero (friction removed)."""
    kinds = {(p.kind, p.owner) for p in params}
    bodies = tuple(dataclasses.replace(b, mass=0.0, I0=0.0, cog=(0.0, 0.0))
                   if ('I0', k) in kinds else b for k, b in enumerate(mech.bodies))
    joints = tuple(dataclasses.replace(j, friction=None) if ('b', k) in kinds else j
                   for k, j in enumerate(mech.joints))
    acts = tuple(dataclasses.replace(a, Ir=0.0)
                 if ('Ir', k) in kinds or (('Ir', -1) in kinds and a.rotor is not None) else a
                 for k, a in enumerate(mech.actuators))
    return dataclasses.replace(mech, bodies=bodies, joints=joints, actuators=acts)


def regressor(sys: System, params: Sequence[Parameter], q: np.ndarray, qd: np.ndarray,
              qdd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """W (N, n_act, p) and τ0 (N, n_act) with τ = W π + τ0 at every sample (module docstring)."""
    mech = sys.mech
    n, N = sys.n, len(q)
    g = np.array(mech.gravity, dtype=float)
    pidx = mech.point_index
    zero = _zeroed(mech, params)
    M0, F0 = mass_matrix(zero), Forces(zero)
    forces = sys.forces
    body_cols = []
    for i, p in enumerate(params):
        if p.kind in ('mass', 'mx', 'my', 'I0'):
            body = mech.bodies[p.owner]
            a, b = body.points[:2]
            idx = np.concatenate((pidx[a], pidx[b]))
            keep = idx >= 0
            Mk, Gk = _body_unit_matrices(body)[p.kind]
            body_cols.append((i, idx[keep], Mk[np.ix_(keep, keep)], (Gk @ g)[keep], keep))
    fric = {}
    stribeck = {p.owner for p in params if p.kind == 'fs'}
    for i, p in enumerate(params):
        if p.kind in ('b', 'fc', 'fs'):
            f = mech.joints[p.owner].friction or Friction()
            # b: b·φ̇; fc: fc·σ (times 1 − e with a Stribeck level); fs: fs·e·σ,
            # e = exp(−(φ̇/v_st)²): the model's F is linear in b, fc, fs (v_s, v_st fixed).
            unit = {'b': Friction(b=1.0, fc=0.0),
                    'fc': dataclasses.replace(f, b=0.0, fc=1.0,
                                              fs=0.0 if p.owner in stribeck else 1.0),
                    'fs': dataclasses.replace(f, b=0.0, fc=0.0, fs=1.0)}[p.kind]
            fric.setdefault(p.owner, []).append((i, unit))
    rotor_c = []
    for i, p in enumerate(params):
        if p.kind == 'Ir':
            owners = [p.owner] if p.owner >= 0 else \
                [k for k, a in enumerate(mech.actuators) if a.rotor is not None]
            for k in owners:
                carrier, joint = mech.actuators[k].rotor
                c = np.zeros(n)
                if carrier >= 0:
                    c[carrier] += 1.0
                c[joint] += mech.actuators[k].gr
                rotor_c.append((i, c))
    from ..friction import friction_torque
    n_act = forces.n_act
    W = np.zeros((N, n_act, len(params)))
    tau0 = np.zeros((N, n_act))
    Y = np.zeros((n, len(params) + 1))
    for k in range(N):
        qk, qdk, qddk = q[k], qd[k], qdd[k]
        Y[:] = 0.0
        for i, idx, Mk, Gk, keep in body_cols:
            Y[idx, i] = Mk @ qddk[idx] - Gk
        for owner, items in fric.items():
            grad, rate = forces.joint_rate(qk, qdk, mech.joints[owner].bodies)
            for i, unit in items:
                Y[:, i] = friction_torque(unit, rate)[0] * grad
        for i, c in rotor_c:
            Y[:, i] += c * (c @ qddk)
        Y[:, -1] = M0 @ qddk - F0.evaluate(qk, qdk, None, jacobians=False).Q
        A = np.hstack((forces.actuator_matrix(qk), sys.constraints.phi_q(qk)[sys.rows].T))
        Z = np.linalg.lstsq(A, Y, rcond=None)[0] if A.shape[0] != A.shape[1] else \
            np.linalg.solve(A, Y)
        W[k] = Z[:n_act, :-1]
        tau0[k] = Z[:n_act, -1]

    return W, tau0


def base_columns(W: np.ndarray, tol: float = 1e-6) -> tuple[list[int], np.ndarray]:
    """Base columns of W (rows x p) in order of preference, and K with W_other = W_base K.

    A column is kept when the part of it (normalised) outside the span of the
    columns kept before it exceeds ``tol`` (Gram-Schmidt on QR factors)."""
    norms = np.linalg.norm(W, axis=0)
    keep: list[int] = []
    Qb = np.zeros((W.shape[0], 0))
    for i in range(W.shape[1]):
        if norms[i] == 0:
            continue
        v = W[:, i] / norms[i]
        r = v - Qb @ (Qb.T @ v)
        r = r - Qb @ (Qb.T @ r)
        if np.linalg.norm(r) > tol:
            Qb = np.hstack((Qb, (r / np.linalg.norm(r))[:, None]))
            keep.append(i)
    other = [i for i in range(W.shape[1]) if i not in keep]
    K = np.linalg.lstsq(W[:, keep], W[:, other], rcond=None)[0] if other else \
        np.zeros((len(keep), 0))
    return keep, K


class Regressed(NamedTuple):
    """Measured samples turned into the linear problem τ = W π + τ0 (:func:`regress`); fitting
    several configurations (weights, fixed parameters) to the same data reuses it."""

    params: tuple[Parameter, ...]  # every parameter of the configuration, the fixed ones too
    W: np.ndarray                  # (N, n_act, p)
    tau0: np.ndarray               # (N, n_act): what is not identified
    tau: np.ndarray                # (N, n_act): measured efforts (samples with NaN dropped)


def regress(sys: System, states: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray,
                                                np.ndarray]],
            config: IdentifyConfig = IdentifyConfig()) -> Regressed:
    """The regressor of (q, q̇, q̈, measured τ) sample sets, stacked; samples whose measured τ
    is not finite are left out. Fixed parameters are kept as columns (their YAML values are
    applied by the fit), so one ``Regressed`` serves every ``fixed`` and ``weights``."""
    params = parameters(sys.mech, dataclasses.replace(config, fixed=()))
    if not params:
        raise MbfgError('identify: nothing to identify (no bodies, friction or rotors selected)')
    Ws, t0s, taus = [], [], []
    for q, qd, qdd, tau in states:
        W, tau0 = regressor(sys, params, q, qd, qdd)
        ok = np.isfinite(tau).all(axis=1)
        Ws.append(W[ok])
        t0s.append(tau0[ok])
        taus.append(np.asarray(tau)[ok])
    if not Ws:
        raise MbfgError('identify: no data to fit')
    return Regressed(tuple(params), np.concatenate(Ws), np.concatenate(t0s), np.concatenate(taus))


def regress_logs(sys: System, logs: Sequence[JointLog],
                 config: IdentifyConfig = IdentifyConfig()) -> Regressed:
    """:func:`regress` of measured logs: differentiated with ``config.derivatives``, ``skip``
    samples dropped at each end of every log."""
    skip = config.skip if config.skip is not None else config.derivatives.window // 2
    states = []
    for log in logs:
        st = measured_states(sys, log, config.derivatives)
        if st.effort is None:
            raise MbfgError(f'{log.source}: identification needs measured efforts')
        s = slice(skip, len(st.t) - skip if skip else None)
        states.append((st.q[s], st.qd[s], st.qdd[s], st.effort[s]))
    return regress(sys, states, config)


def _stacked(data: Regressed | Sequence[Regressed]) -> Regressed:
    if isinstance(data, Regressed):
        return data
    if not data:
        raise MbfgError('identify: no data to fit')
    names = [tuple(p.name for p in d.params) for d in data]
    if any(n != names[0] for n in names):
        raise MbfgError('identify: the data sets were regressed with different parameters')
    return Regressed(data[0].params, np.concatenate([d.W for d in data]),
                     np.concatenate([d.tau0 for d in data]), np.concatenate([d.tau for d in data]))


def identify_regressed(sys: System, data: Regressed | Sequence[Regressed],
                       config: IdentifyConfig = IdentifyConfig()) -> Identified:
    """Fit ``config``'s free parameters to regressed data (one set or several, stacked); the
    fixed ones enter τ0 with their YAML values."""
    mech = sys.mech
    data = _stacked(data)
    every = parameters(mech, dataclasses.replace(config, fixed=()))
    if [p.name for p in every] != [p.name for p in data.params]:
        raise MbfgError('identify: the data were regressed for other parameters ('
                        + ', '.join(p.name for p in data.params) + ') than this configuration\'s ('
                        + ', '.join(p.name for p in every) + ')')
    params = parameters(mech, config)
    free = [i for i, p in enumerate(every) if p.name not in config.fixed]
    held = [i for i, p in enumerate(every) if p.name in config.fixed]
    W = data.W[:, :, free]
    tau0 = data.tau0 + (data.W[:, :, held] @ np.array([every[i].value for i in held])
                        if held else 0.0)
    if isinstance(config.weights, str):
        if config.weights != 'auto':
            raise MbfgError(f"identify: weights {config.weights!r}: give numbers or 'auto'")
        first = _fit(sys, params, W, tau0, data.tau, dataclasses.replace(config, weights=None))
        weights = tuple(1.0 / np.maximum(first.rmse, 1e-12 * max(first.rmse.max(), 1e-300)))
        return _fit(sys, params, W, tau0, data.tau, dataclasses.replace(config, weights=weights))
    return _fit(sys, params, W, tau0, data.tau, config)


def _fit(sys: System, params: Sequence[Parameter], W: np.ndarray, tau0: np.ndarray,
         tau: np.ndarray, config: IdentifyConfig) -> Identified:
    """Weighted, bounded linear least squares for the base parameters (module docstring)."""
    mech = sys.mech
    w = np.ones(len(mech.actuators)) if config.weights is None else \
        np.asarray(config.weights, dtype=float)
    if w.shape != (len(mech.actuators),):
        raise MbfgError(f'identify: {len(w)} weights for {len(mech.actuators)} actuators')
    if not len(tau):
        raise MbfgError('identify: no samples with measured efforts to fit')
    A = (W * w[None, :, None]).reshape(-1, len(params))
    y = ((tau - tau0) * w).reshape(-1)
    base, K = base_columns(A, config.rank_tol)
    other = [i for i in range(len(params)) if i not in base]
    prior = np.array([p.value for p in params])
    Ab = A[:, base]
    rhs = y - A[:, other] @ prior[other] if other else y
    scale = np.linalg.norm(Ab, axis=0)
    lower = np.array([params[i].lower for i in base]) if config.bounded else \
        np.full(len(base), -np.inf)
    sol = scipy.optimize.lsq_linear(Ab / scale, rhs, bounds=(lower * scale, np.inf),
                                    method='bvls' if len(base) < 40 else 'trf', tol=1e-14)
    x = sol.x / scale
    values = prior.copy()
    values[base] = x
    resid = rhs - Ab @ x
    dof = max(1, len(y) - len(base))
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.inv(Ab.T @ Ab)
    beta = x + (K @ prior[other] if other else 0.0)
    fit = resid.reshape(-1, len(mech.actuators)) / w
    rmse = np.sqrt(np.mean(fit ** 2, axis=0))
    new = apply_parameters(mech, params, values)
    return Identified(tuple(params), values, tuple(base), beta, np.sqrt(np.diag(cov)), K, rmse,
                      len(y), new, build_system(new))


def identify_states(sys: System, states: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray,
                                                        np.ndarray]],
                    config: IdentifyConfig = IdentifyConfig()) -> Identified:
    """Fit from (q, q̇, q̈, measured τ) sample sets (already differentiated)."""
    return identify_regressed(sys, regress(sys, states, config), config)


def identify(sys: System, logs: Sequence[JointLog], config: IdentifyConfig = IdentifyConfig()
             ) -> Identified:
    """Fit the parameters of ``sys`` to measured motions with measured efforts."""
    return identify_regressed(sys, regress_logs(sys, logs, config), config)


def apply_parameters(mech: Mechanism, params: Sequence[Parameter], values: np.ndarray
                     ) -> Mechanism:
    """The mechanism with the given parameter values (cog = first moments / mass)."""
    bodies = list(mech.bodies)
    joints = list(mech.joints)
    acts = list(mech.actuators)
    val = {(p.kind, p.owner): float(v) for p, v in zip(params, values)}
    for b, body in enumerate(bodies):
        if not any((kind, b) in val for kind in ('I0', 'mx', 'my', 'mass')):
            continue
        m = val.get(('mass', b), body.mass)     # a fixed parameter keeps its YAML value
        mx = val.get(('mx', b), body.mass * body.cog[0])
        my = val.get(('my', b), body.mass * body.cog[1])
        cog = (mx / m, my / m) if m > 0 else (0.0, 0.0)
        bodies[b] = dataclasses.replace(body, mass=m, I0=val.get(('I0', b), body.I0), cog=cog)
    for k, j in enumerate(joints):
        if ('b', k) in val or ('fc', k) in val or ('fs', k) in val:
            f = j.friction or Friction()
            fc = val.get(('fc', k), f.fc)
            joints[k] = dataclasses.replace(j, friction=dataclasses.replace(
                f, b=val.get(('b', k), f.b), fc=fc,
                fs=val.get(('fs', k), fc if f.fs == f.fc else f.fs)))
    for k, a in enumerate(acts):
        if ('Ir', k) in val:
            acts[k] = dataclasses.replace(a, Ir=val[('Ir', k)])
        elif ('Ir', -1) in val and a.rotor is not None:
            acts[k] = dataclasses.replace(a, Ir=val[('Ir', -1)])
    return dataclasses.replace(mech, bodies=tuple(bodies), joints=tuple(joints),
                               actuators=tuple(acts))


def identified_yaml(source: str | Path, result: Identified) -> str:
    """The source YAML with the identified values written in (comments are not kept)."""
    doc: Any = yaml.safe_load(Path(source).read_text())
    mech = result.mech
    for b, body in enumerate(mech.bodies):
        item = doc['planar_bodies'][b]
        item['mass'] = float(body.mass)
        item['I0'] = float(body.I0)
        item['cog'] = [float(body.cog[0]), float(body.cog[1])]
    for k, j in enumerate(mech.joints):
        if j.friction is not None:
            item = doc['joints'][k]
            fr = dict(item.get('friction') or {})
            fr['b'] = float(j.friction.b)
            fr['fc'] = float(j.friction.fc)
            if j.friction.fs != j.friction.fc:
                fr['fs'] = float(j.friction.fs)
                fr.setdefault('v_st', float(j.friction.v_st))
            fr.setdefault('v_s', float(j.friction.v_s))
            fr.setdefault('smooth', j.friction.smooth)
            item['friction'] = fr
    for k, a in enumerate(mech.actuators):
        if a.rotor is not None and a.Ir:
            doc['actuators'][k]['Ir'] = float(a.Ir)
            doc['actuators'][k]['gr'] = float(a.gr)
    head = (f'# Identified by mbfg-identify from {source} ({result.rows} equations, '
            f'{len(result.base)} base parameters; fit RMSE '
            + ', '.join(f'{a.name} {e:.4f} N m' for a, e in zip(mech.actuators, result.rmse))
            + ')\n')
    return head + yaml.safe_dump(doc, sort_keys=False)
