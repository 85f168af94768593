"""The joint friction law, shared by both formulations (issue 27: one law, two model types).

The torque resisting a joint rate φ̇ (DFKI's plant, dfki-ric-underactuated-lab/double_pendulum
docs/text/dynamics.rst, generalised with a Stribeck bump)::

    F(φ̇) = b φ̇ + (fc + (fs − fc) exp(−(φ̇/v_st)²)) σ(φ̇ / v_s)

with σ = tanh or σ = (2/π)·atan. The planar YAML writes it as ``joints[k].friction`` and the
URDF overlay as ``joints: {name: {friction: ...}}`` (:mod:`mbfg_ros.spatial.drives`); both
evaluate it here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ['Friction', 'friction_torque', 'SMOOTH_SIGNS']

SMOOTH_SIGNS = ('tanh', 'atan')


@dataclass(frozen=True)
class Friction:
    """Joint friction (YAML ``joints[k].friction``): the torque resisting the joint rate φ̇ is

    ``F(φ̇) = b φ̇ + (fc + (fs − fc) exp(−(φ̇/v_st)²)) · σ(φ̇/v_s)``

    with the smooth sign ``σ = tanh`` (default) or ``σ = (2/π) atan``, so that
    ``fc`` is always the Coulomb level at |φ̇| ≫ v_s. ``fs`` (default ``fc``)
    and ``v_st`` give a Stribeck bump; DFKI's ``cf·atan(100 φ̇)`` is
    ``smooth: atan, v_s: 0.01, fc: cf·π/2``.
    """

    b: float = 0.0        # viscous, N·m·s/rad
    fc: float = 0.0       # Coulomb level, N·m
    v_s: float = 0.01     # smoothing velocity of the sign, rad/s
    smooth: str = 'tanh'  # 'tanh' or 'atan'
    fs: float = 0.0       # static (Stribeck) level, N·m; equals fc when not given
    v_st: float = 0.1     # Stribeck velocity, rad/s


def friction_torque(f: Friction, rate: float) -> tuple[float, float]:
    """F(φ̇) and dF/dφ̇ of one joint (the torque that resists the motion)."""
    x = rate / f.v_s
    if f.smooth == 'tanh':
        s = math.tanh(x)
        ds = (1.0 - s * s) / f.v_s
    else:
        s = (2.0 / math.pi) * math.atan(x)
        ds = (2.0 / math.pi) / (f.v_s * (1.0 + x * x))
    level, dlevel = f.fc, 0.0
    if f.fs != f.fc:
        e = math.exp(-(rate / f.v_st) ** 2)
        level = f.fc + (f.fs - f.fc) * e
        dlevel = (f.fs - f.fc) * e * (-2.0 * rate / f.v_st ** 2)
    return f.b * rate + level * s, f.b + dlevel * s + level * ds
