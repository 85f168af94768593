"""Joint friction and geared rotor inertia: the terms a real motor adds to the rigid model.

DFKI's documented double-pendulum plant (dfki-ric-underactuated-lab/double_pendulum,
docs/text/dynamics.rst, model/plant.py) is ``M q̈ + C q̇ − G + F(q̇) = u`` with
``F = b q̇ + cf·atan(100 q̇)`` and the rotor terms gr²·Ir on the driven joint and
−gr·Ir coupling to the link that carries the motor added to M.

Here the friction torque resisting a joint rate φ̇ is

    F(φ̇) = b φ̇ + (fc + (fs − fc) exp(−(φ̇/v_st)²)) σ(φ̇ / v_s)

with σ = tanh or σ = (2/π)·atan (:class:`~mbfg_ros.core.friction.Friction`, the law in
:func:`mbfg_ros.core.friction.friction_torque`, shared with the URDF path); F is zero at
rest, so friction never changes a static equilibrium (it bounds the holding
torque by fs instead, :func:`holding_band`). A rotor on a joint turns at
ω_r = ω_carrier + gr·φ̇ = cᵀ q̇; its kinetic energy ½ Ir (cᵀq̇)² adds Ir c cᵀ to
the (constant) mass matrix because φ and the carrier angle are relative
coordinates of q (:func:`rotor_mass_matrix`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..core.friction import Friction, friction_torque
from .model import Mechanism

__all__ = ['friction_torque', 'rotor_mass_matrix', 'holding_band', 'rigid_mechanism']


def rotor_mass_matrix(mech: Mechanism) -> np.ndarray:
    """Σ Ir c cᵀ over the actuators with a rotor, c: ω_r = cᵀ q̇ (n x n)."""
    n = mech.n
    M = np.zeros((n, n))
    for a in mech.actuators:
        if not a.Ir or a.rotor is None:
            continue
        carrier, joint = a.rotor
        c = np.zeros(n)
        if carrier >= 0:
            c[carrier] += 1.0
        c[joint] += a.gr
        M += a.Ir * np.outer(c, c)
    return M


def holding_band(f: Friction) -> float:
    """Largest torque the joint's friction can hold at rest (max(fc, fs)); a documented bound,
    not part of the smooth model (whose friction is zero at φ̇ = 0)."""
    return max(f.fc, f.fs)


def rigid_mechanism(mech: Mechanism) -> Mechanism:
    """The same mechanism without joint friction and rotor inertias (the rigid-body model)."""
    joints = tuple(dataclasses.replace(j, friction=None) for j in mech.joints)
    acts = tuple(dataclasses.replace(a, Ir=0.0, rotor=None) for a in mech.actuators)
    return dataclasses.replace(mech, joints=joints, actuators=acts)
