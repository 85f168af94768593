"""Joint friction and geared rotors on URDF joints (issue 27 item 1).

A real arm's motor adds two terms to the rigid tree's ``M(q) q̈ + h(q, q̇) = B τ``:

* **friction** ``F(q̇)`` resisting each joint's rate: the planar YAML's law
  (:func:`mbfg_ros.core.friction.friction_torque`: viscous ``b``, Coulomb ``fc``, Stribeck
  ``fs``/``v_st``, smooth sign ``tanh``/``atan`` over ``v_s``) plus a constant ``offset``;
* **rotor inertia**: a rotor of inertia ``Ir`` behind a gear of ratio ``gr`` turns at
  ``ω_r = cᵀ q̇``. Its kinetic energy ``½ Ir (cᵀ q̇)²`` adds ``Ir c cᵀ`` to ``M``. With
  ``c = gr e_j`` this is the *armature* ``Ir gr²`` on the joint's diagonal (Spong's reduced
  model, Pinocchio's ``model.armature``). With ``carried: true`` the stator rides on the
  parent link, so the rotor also turns with it: ``ω_r = a_jᵀ ω_parent + gr q̇_j`` (DFKI's
  ``[[gr²Ir + Ir, −gr·Ir], ...]``, the planar YAML's rotor). That projection is a constant
  ``c`` only when every revolute joint from the root to ``j`` turns about an axis parallel
  to ``a_j`` (planar chains); otherwise ``carried`` is refused (its ``c(q)`` would bring
  gyroscopic terms this model does not have).

So ``M_r = Σ Ir c cᵀ`` is constant and the equations of motion become
``(M(q) + M_r) q̈ + h(q, q̇) + F(q̇) = B τ``.

Overlay (``joints:``, every key optional)::

    joints:
      joint_a:
        friction: {b: 0.1, fc: 0.5, v_s: 0.01, smooth: tanh, fs: 0.6, v_st: 0.1, offset: 0.0}
        Ir: 1.0e-4        # rotor inertia, kg·m²
        gr: 100           # signed gear ratio (rotor turns / joint turn)
        carried: false    # true: the rotor turns with the parent link too

The URDF's ``<dynamics damping="b" friction="fc"/>`` are the defaults of ``b`` and ``fc``
(``fs`` defaults to ``fc``); the overlay's keys replace them one by one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.errors import MechanismError
from ..core.friction import SMOOTH_SIGNS, Friction, friction_torque

__all__ = ['JointDrive', 'Drives', 'parse_drives', 'build_drives', 'rotor_vector',
           'root_axes', 'DRIVE_KEYS', 'FRICTION_KEYS']

DRIVE_KEYS = ('friction', 'Ir', 'gr', 'carried')
FRICTION_KEYS = ('b', 'fc', 'v_s', 'smooth', 'fs', 'v_st', 'offset')
_PARALLEL_TOL = 1e-9


@dataclass(frozen=True)
class JointDrive:
    """What the motor and its transmission add at one tree joint (module docstring)."""

    friction: Friction | None = None
    offset: float = 0.0        # constant torque the joint loses, N·m (or N)
    Ir: float = 0.0            # rotor inertia, kg·m²
    gr: float = 1.0            # signed gear ratio
    carried: bool = False      # the rotor turns with the parent link too


@dataclass(frozen=True)
class Drives:
    """The drive terms of a whole tree, built once (:func:`build_drives`)."""

    M: np.ndarray                               # (n, n) constant Σ Ir c cᵀ
    laws: tuple[tuple[int, Friction], ...]      # (joint, law) for the joints with friction
    offset: np.ndarray                          # (n,)

    @property
    def has_rotor(self) -> bool:
        return bool(np.any(self.M))

    @property
    def has_friction(self) -> bool:
        return bool(self.laws) or bool(np.any(self.offset))

    @property
    def armature(self) -> np.ndarray:
        """The diagonal of ``M_r`` (Pinocchio's ``model.armature`` when nothing is carried)."""
        return np.diag(self.M).copy()

    def friction(self, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """F(q̇) (n,) and its diagonal Jacobian dF/dq̇ (n,)."""
        F = self.offset.copy()
        dF = np.zeros(len(F))
        for j, law in self.laws:
            f, df = friction_torque(law, float(qd[j]))
            F[j] += f
            dF[j] = df
        return F, dF


def _number(value: Any, name: str, path: str, minimum: float | None = None,
            positive: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not math.isfinite(v):
        raise MechanismError(f'expected a finite number, got {value!r}', source=name, path=path)
    if positive and not v > 0:
        raise MechanismError(f'must be positive, got {v!r}', source=name, path=path)
    if minimum is not None and v < minimum:
        raise MechanismError(f'must be zero or positive, got {v!r}', source=name, path=path)
    return v


def _friction(value: Any, default: Friction, name: str, path: str
              ) -> tuple[Friction, float]:
    if not isinstance(value, Mapping):
        raise MechanismError('expected a mapping with ' + ', '.join(FRICTION_KEYS),
                             source=name, path=path)
    unknown = sorted(set(value) - set(FRICTION_KEYS))
    if unknown:
        raise MechanismError(f'unknown key {unknown[0]!r} (allowed: {", ".join(FRICTION_KEYS)})',
                             source=name, path=f'{path}.{unknown[0]}')
    b = _number(value.get('b', default.b), name, f'{path}.b', minimum=0.0)
    fc = _number(value.get('fc', default.fc), name, f'{path}.fc', minimum=0.0)
    v_s = _number(value.get('v_s', default.v_s), name, f'{path}.v_s', positive=True)
    smooth = value.get('smooth', default.smooth)
    if smooth not in SMOOTH_SIGNS:
        raise MechanismError(f'unknown smooth sign {smooth!r} (known: {", ".join(SMOOTH_SIGNS)})',
                             source=name, path=f'{path}.smooth')
    fs = _number(value['fs'], name, f'{path}.fs', minimum=0.0) if 'fs' in value else fc
    v_st = _number(value.get('v_st', default.v_st), name, f'{path}.v_st', positive=True)
    offset = _number(value.get('offset', 0.0), name, f'{path}.offset')
    return Friction(b, fc, v_s, smooth, fs, v_st), offset


def parse_drives(value: Any, joint_names: Sequence[str],
                 urdf_dynamics: Sequence[tuple[float, float]], name: str, urdf_name: str
                 ) -> tuple[JointDrive | None, ...]:
    """Per tree joint, its drive from the URDF's ``<dynamics damping friction>``
    (``urdf_dynamics[j] = (b, fc)``) and the overlay's ``joints:`` (``value``); None for a
    joint with neither. Errors name the overlay key (or the URDF joint)."""
    if value is not None and not isinstance(value, Mapping):
        raise MechanismError('expected a mapping joint name → {friction, Ir, gr, carried}',
                             source=name, path='joints')
    value = value or {}
    for j in value:
        if j not in joint_names:
            raise MechanismError(f'unknown joint {j!r} (tree joints: {", ".join(joint_names)})',
                                 source=name, path=f'joints.{j}')
    out: list[JointDrive | None] = []
    for j, (b, fc) in zip(joint_names, urdf_dynamics):
        for what, v in (('damping', b), ('friction', fc)):
            if not (math.isfinite(v) and v >= 0):
                raise MechanismError(f'<dynamics {what}="{v}">: must be zero or positive',
                                     source=urdf_name, path=f'joint {j!r}')
        default = Friction(b=b, fc=fc, fs=fc)
        entry = value.get(j)
        if entry is None:
            out.append(JointDrive(friction=default) if (b or fc) else None)
            continue
        path = f'joints.{j}'
        if not isinstance(entry, Mapping):
            raise MechanismError(f'expected a mapping with {", ".join(DRIVE_KEYS)}',
                                 source=name, path=path)
        unknown = sorted(set(entry) - set(DRIVE_KEYS))
        if unknown:
            raise MechanismError(f'unknown key {unknown[0]!r} (allowed: '
                                 f'{", ".join(DRIVE_KEYS)})', source=name,
                                 path=f'{path}.{unknown[0]}')
        law, offset = (_friction(entry['friction'], default, name, f'{path}.friction')
                       if entry.get('friction') is not None else (default, 0.0))
        carried = entry.get('carried', False)
        if not isinstance(carried, bool):
            raise MechanismError(f'expected true or false, got {carried!r}', source=name,
                                 path=f'{path}.carried')
        out.append(JointDrive(
            friction=law if (law.b or law.fc or law.fs) else None, offset=offset,
            Ir=_number(entry.get('Ir', 0.0), name, f'{path}.Ir', minimum=0.0),
            gr=_number(entry.get('gr', 1.0), name, f'{path}.gr'), carried=carried))
    return tuple(out)


def root_axes(model) -> np.ndarray:
    """(n, 3) joint axes in the root frame at q = 0."""
    R = np.zeros((model.nb, 3, 3))
    R[0] = np.eye(3)
    axes = np.zeros((model.n, 3))
    for j in range(model.n):
        R[j + 1] = R[int(model.parent[j])] @ model.T_home[j][:3, :3]
        axes[j] = R[j + 1] @ model.axis[j]
    return axes


def rotor_vector(model, j: int, gr: float, carried: bool, axes: np.ndarray | None = None,
                 source: str | None = None) -> np.ndarray:
    """c (n,) with ω_r = cᵀ q̇ for a rotor of gear ratio ``gr`` on joint ``j`` (module
    docstring); ``axes``: :func:`root_axes` (computed when None and ``carried``).

    :raises MechanismError: ``carried`` on a joint whose revolute ancestors do not all turn
        about axes parallel to its own.
    """
    c = np.zeros(model.n)
    c[j] = gr
    if not carried:
        return c
    axes = root_axes(model) if axes is None else axes
    k = int(model.parent[j]) - 1          # the joint that moves the parent link
    while k >= 0:
        if model.joint_type[k] == 'revolute':
            dot = float(axes[k] @ axes[j])
            if abs(abs(dot) - 1.0) > _PARALLEL_TOL:
                raise MechanismError(
                    f'carried: true needs every revolute joint from the root to turn '
                    f'about an axis parallel to this one\'s; {model.joint_names[k]!r} '
                    'does not (drop carried: the armature Ir·gr² alone)',
                    source=source or model.source,
                    path=f'joints.{model.joint_names[j]}.carried')
            c[k] = math.copysign(1.0, dot)
        k = int(model.parent[k]) - 1
    return c


def build_drives(model, source: str | None = None) -> Drives:
    """``M_r``, the friction laws and offsets of ``model.drives`` (a ``SpatialModel``);
    ``source`` names the overlay in errors (default: the model's source).

    :raises MechanismError: a carried rotor :func:`rotor_vector` cannot model.
    """
    n = model.n
    M = np.zeros((n, n))
    offset = np.zeros(n)
    laws: list[tuple[int, Friction]] = []
    drives = model.drives or (None,) * n
    axes = root_axes(model) if any(d is not None and d.carried for d in drives) else None
    for j, d in enumerate(drives):
        if d is None:
            continue
        if d.friction is not None:
            laws.append((j, d.friction))
        offset[j] = d.offset
        if d.Ir:
            c = rotor_vector(model, j, d.gr, d.carried, axes, source)
            M += d.Ir * np.outer(c, c)
    for a in (M, offset):
        a.setflags(write=False)
    return Drives(M=M, laws=tuple(laws), offset=offset)
