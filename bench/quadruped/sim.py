"""A simulated quadruped truth with contacts (issue 28, item 4): solo12 in MuJoCo.

The robot is example-robot-data's solo12 (``test/data/urdf/solo12.urdf``, unchanged; see
the SOURCE.md beside it; its meshes are not read). :func:`mjcf_from_urdf` writes a minimal
MJCF from it: the root
link on a free joint, one motor per revolute joint, a sphere at every ``*_FOOT`` link
(the only geoms that touch the floor), a box on the base (a fall shows as a base
contact), a gyro and an accelerometer at the base origin.

:func:`simulate` steps MuJoCo at 1 kHz with a simple controller: a joint PD on
references from the legs' closed-form inverse kinematics (:func:`leg_ik`) plus a
feed-forward of the leg bias forces and of m g shared by the stance feet
(τ = Kp (q_ref − q) + Kd (q̇_ref − q̇) + h_legs − Σ J_cᵀ f_c, DESIGN.md §9's
M ν̇ + h = Sᵀ τ + Σ J_cᵀ f_c read for the legs). Scenarios: ``stand``; ``sway``
(the base moved through the joint references only); ``push`` (a 0.1 s external
force on the trunk); ``trot`` (diagonal pairs, open-loop foot trajectories, a yaw
feedback on the stance feet so it walks straight).

Outputs at every physics step (1 kHz), :class:`Run`: noisy sensors (16-bit encoders,
velocities, motor torques, a MEMS-grade base IMU with biases; :class:`SensorNoise`
states the values), contact flags from MuJoCo's contact list and the contact forces,
and the truth (base pose, twist, contact forces in the world frame).
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SOLO12_URDF = ROOT / 'test' / 'data' / 'urdf' / 'solo12.urdf'
FEET = ('FL', 'FR', 'HL', 'HR')
"""Leg prefixes in the URDF's order (joints FL_HAA, FL_HFE, FL_KFE, FR_HAA, ...)."""
SCENARIOS = ('stand', 'sway', 'push', 'trot')
DT = 1e-3
"""Physics and output period (1 kHz)."""
FOOT_RADIUS = 0.016
"""Radius of the contact sphere centred on each ``*_FOOT`` frame (solo's rubber foot, m)."""
TORQUE_LIMIT = 2.7
"""Solo12's motor torque limit at the joint, N m (0.025 N m/A × 12 A × gear 9); the
URDF's 1000 is a placeholder."""
UPPER, LOWER = 0.16, 0.16
"""Thigh and shank lengths (URDF: KFE and ANKLE origins' z)."""
HIP_X, HIP_Y = 0.1946, 0.0875
LEG_Y = 0.014 + 0.03745 + 0.008
"""Sideways offset of the foot from the HAA axis (HFE + KFE + ANKLE origins' y)."""


def _floats(text: str | None, default: str) -> list[float]:
    return [float(v) for v in (text or default).split()]


def mjcf_from_urdf(urdf: str | Path = SOLO12_URDF, foot_radius: float = FOOT_RADIUS,
                   torque_limit: float = TORQUE_LIMIT) -> str:
    """A minimal MJCF of a floating-base URDF: bodies, inertias, hinges, motors, feet, floor.

    Masses, inertias (full tensors), joint origins (``rpy`` as MuJoCo's extrinsic XYZ
    Euler angles, as URDF defines them), axes and limits come from the URDF unchanged;
    fixed joints become bodies without a joint.
    """
    robot = ET.parse(urdf).getroot()
    links = {lk.get('name'): lk for lk in robot.findall('link')}
    children: dict[str, list[ET.Element]] = {}
    parents = set()
    for j in robot.findall('joint'):
        children.setdefault(j.find('parent').get('link'), []).append(j)
        parents.add(j.find('child').get('link'))
    root = next(n for n in links if n not in parents)

    def inertial(name: str) -> str:
        el = links[name].find('inertial')
        if el is None:
            return ''
        org = el.find('origin')
        pos = _floats(org.get('xyz') if org is not None else None, '0 0 0')
        rpy = _floats(org.get('rpy') if org is not None else None, '0 0 0')
        m = float(el.find('mass').get('value'))
        i = el.find('inertia')
        ixx, iyy, izz, ixy, ixz, iyz = (float(i.get(k, '0'))
                                        for k in ('ixx', 'iyy', 'izz', 'ixy', 'ixz', 'iyz'))
        rot = _rpy(*rpy)                     # the inertia about the link frame's axes
        inertia = rot @ np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]) @ rot.T
        full = [inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2],
                inertia[1, 2]]
        return (f'<inertial pos="{pos[0]} {pos[1]} {pos[2]}" mass="{m}" '
                f'fullinertia="{" ".join(repr(float(v)) for v in full)}"/>')

    def body(name: str, joint: ET.Element | None, indent: str) -> list[str]:
        lines = []
        if joint is None:
            lines.append(f'{indent}<body name="{name}" pos="0 0 {foot_radius + 0.3}">')
            lines.append(f'{indent}  <freejoint name="root"/>')
            lines.append(f'{indent}  <site name="imu" pos="0 0 0"/>')
            lines.append(f'{indent}  <geom name="trunk" type="box" size="0.2 0.08 0.025" '
                         'contype="0" conaffinity="1" mass="0"/>')
        else:
            org = joint.find('origin')
            pos = _floats(org.get('xyz') if org is not None else None, '0 0 0')
            rpy = _floats(org.get('rpy') if org is not None else None, '0 0 0')
            lines.append(f'{indent}<body name="{name}" pos="{pos[0]} {pos[1]} {pos[2]}" '
                         f'euler="{rpy[0]} {rpy[1]} {rpy[2]}">')
            if joint.get('type') in ('revolute', 'continuous'):
                axis = _floats(joint.find('axis').get('xyz') if joint.find('axis') is not None
                               else None, '1 0 0')
                lim = joint.find('limit')
                rng = ''
                if joint.get('type') == 'revolute' and lim is not None:
                    rng = f' limited="true" range="{lim.get("lower")} {lim.get("upper")}"'
                lines.append(f'{indent}  <joint name="{joint.get("name")}" type="hinge" '
                             f'axis="{axis[0]} {axis[1]} {axis[2]}"{rng}/>')
            elif joint.get('type') != 'fixed':
                raise ValueError(f'{urdf}: joint {joint.get("name")}: type '
                                 f'{joint.get("type")} not supported here')
        lines.append(indent + '  ' + inertial(name))
        if name.endswith('_FOOT'):
            lines.append(f'{indent}  <geom name="{name}" type="sphere" size="{foot_radius}" '
                         'contype="0" conaffinity="1" mass="0" friction="1 0.005 0.0001"/>')
            lines.append(f'{indent}  <site name="{name}" pos="0 0 0"/>')
        for j in children.get(name, []):
            lines += body(j.find('child').get('link'), j, indent + '  ')
        lines.append(f'{indent}</body>')
        return lines

    motors = [f'    <motor name="{j.get("name")}" joint="{j.get("name")}" ctrllimited="true" '
              f'ctrlrange="{-torque_limit} {torque_limit}"/>'
              for j in robot.findall('joint') if j.get('type') in ('revolute', 'continuous')]
    xml = [f'<mujoco model="{robot.get("name")}">',
           '  <compiler angle="radian" eulerseq="XYZ" autolimits="true"/>',
           f'  <option timestep="{DT}" integrator="implicitfast" cone="elliptic"/>',
           '  <worldbody>',
           '    <geom name="floor" type="plane" size="0 0 1" contype="1" conaffinity="0" '
           'friction="1 0.005 0.0001" solref="0.005 1"/>',
           *body(root, None, '    '),
           '  </worldbody>',
           '  <actuator>', *motors, '  </actuator>',
           '  <sensor>',
           '    <gyro name="gyro" site="imu"/>',
           '    <accelerometer name="accelerometer" site="imu"/>',
           '  </sensor>',
           '</mujoco>']
    return '\n'.join(xml)


def leg_ik(p: np.ndarray, side: float) -> np.ndarray:
    """(q_HAA, q_HFE, q_KFE) putting the foot at ``p`` (from the HAA origin, base axes).

    Closed form for solo's leg (HAA about x, HFE and KFE about y, the foot LEG_Y to the
    ``side`` (+1 left, −1 right) of the HAA axis; knee bent backwards, q_KFE < 0).
    """
    x, y, z = p
    d = side * LEG_Y
    zp = -math.sqrt(max(y * y + z * z - d * d, 1e-12))
    q1 = math.atan2(z, y) - math.atan2(zp, d)
    a, b = -x, -zp
    c3 = (a * a + b * b - UPPER ** 2 - LOWER ** 2) / (2 * UPPER * LOWER)
    q3 = -math.acos(min(1.0, max(-1.0, c3)))
    q2 = math.atan2(a, b) - math.atan2(LOWER * math.sin(q3), UPPER + LOWER * math.cos(q3))
    return np.array([q1, q2, q3])


HIPS = np.array([[HIP_X, HIP_Y, 0.0], [HIP_X, -HIP_Y, 0.0],
                 [-HIP_X, HIP_Y, 0.0], [-HIP_X, -HIP_Y, 0.0]])
SIDES = (1.0, -1.0, 1.0, -1.0)


def feet_ik(p_feet: np.ndarray) -> np.ndarray:
    """The 12 joint angles putting the four feet at ``p_feet`` (4×3, base frame)."""
    return np.concatenate([leg_ik(p_feet[i] - HIPS[i], SIDES[i]) for i in range(4)])


@dataclass(frozen=True)
class Gait:
    """Foot references in the base frame; ``height`` is the base origin above the foot centres."""

    height: float = 0.24
    period: float = 0.30
    """Trot cycle (s): each diagonal pair in stance half of it."""
    lift: float = 0.05
    speed: float = 0.35
    """Forward speed commanded once ramped up (m/s)."""
    ramp: float = 1.0
    start: float = 0.5
    """Standing time before the scenario's motion (s)."""

    def nominal(self) -> np.ndarray:
        p = HIPS.copy()
        p[:, 1] += np.array(SIDES) * LEG_Y
        p[:, 2] = -self.height
        return p


def _rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    cr, sr, cp, sp = math.cos(r), math.sin(r), math.cos(p), math.sin(p)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    return _rot_z(y) @ ry @ rx


def references(scenario: str, gait: Gait, t: float, yaw: float, lateral: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """(feet positions in the base frame 4×3, stance flags 4) at time ``t``.

    ``yaw`` and ``lateral`` (the truth's heading and sideways position) close a slow loop
    in the trot only: the stance feet turn the base back to heading 0 and line 0.
    """
    nom = gait.nominal()
    stance = np.ones(4, dtype=bool)
    if scenario == 'sway' and t > gait.start:
        s = t - gait.start
        ramp = min(1.0, s / 1.0)
        b = ramp * np.array([0.03 * math.sin(2 * math.pi * 0.5 * s),
                             0.03 * math.sin(2 * math.pi * 0.35 * s),
                             0.025 * math.sin(2 * math.pi * 0.6 * s)])
        rot = _rpy(ramp * 0.10 * math.sin(2 * math.pi * 0.4 * s),
                   ramp * 0.10 * math.sin(2 * math.pi * 0.3 * s),
                   ramp * 0.12 * math.sin(2 * math.pi * 0.25 * s))
        return (nom - b) @ rot, stance
    if scenario != 'trot' or t <= gait.start:
        return nom, stance
    s = t - gait.start
    v = gait.speed * min(1.0, s / gait.ramp)
    wz = float(np.clip(-2.0 * yaw - 2.0 * lateral, -0.5, 0.5))
    half = gait.period / 2
    phase = (s % gait.period) / half                # 0..2
    out = nom.copy()
    for i in range(4):
        # diagonal pairs: FL+HR in stance first, FR+HL in swing first
        ph = phase if i in (0, 3) else (phase + 1.0) % 2.0
        d = half * (np.array([v, 0.0, 0.0]) + np.cross([0.0, 0.0, wz], nom[i]))
        d[2] = 0.0
        if ph < 1.0:                                 # stance: from +d/2 back to −d/2
            out[i] = nom[i] + d * (0.5 - ph)
        else:                                        # swing: cycloid forward, lifted
            u = ph - 1.0
            w = u - math.sin(2 * math.pi * u) / (2 * math.pi)
            out[i] = nom[i] + d * (w - 0.5)
            out[i, 2] += gait.lift * 0.5 * (1 - math.cos(2 * math.pi * u))
            stance[i] = False
    return out, stance


@dataclass(frozen=True)
class SensorNoise:
    """Sensor models; defaults are of solo12's class of hardware (stated in docs/floating-base.md).

    Encoders: 16 bits per joint turn (2π/65536 = 9.6e-5 rad) after a 5e-5 rad noise;
    velocities σ 0.01 rad/s; efforts (motor torques) σ 0.02 N m. IMU (BMI088-like):
    gyro white noise 2.4e-4 rad/s/√Hz (σ 7.7e-3 rad/s at 1 kHz), accelerometer
    1.6e-3 m/s²/√Hz (σ 0.05 m/s²), constant biases drawn with σ 3e-3 rad/s and
    0.04 m/s², bias random walks 2e-5 rad/s²/√Hz and 3e-4 m/s³/√Hz. Foot forces σ 0.2 N.
    """

    encoder_bits: int = 16
    q_sigma: float = 5e-5
    qd_sigma: float = 0.01
    tau_sigma: float = 0.02
    gyro_density: float = 2.4e-4
    acc_density: float = 1.6e-3
    gyro_bias_sigma: float = 3e-3
    acc_bias_sigma: float = 0.04
    gyro_walk: float = 2e-5
    acc_walk: float = 3e-4
    force_sigma: float = 0.2


@dataclass
class Run:
    """Everything recorded, one row per 1 kHz step (truth and measurements)."""

    t: np.ndarray
    joint_names: list[str]
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    gyro: np.ndarray
    acc: np.ndarray
    contact: np.ndarray
    """Foot contact flags (T×4) from MuJoCo's contact list."""
    force: np.ndarray
    """Measured foot forces (T×4×3), ground on foot, in the foot link's frame (+ noise),
    as a force sensor in the foot reads them."""
    p: np.ndarray
    """Truth base position (T×3, world)."""
    quat: np.ndarray
    """Truth base orientation (T×4, w x y z)."""
    v: np.ndarray
    """Truth base linear velocity (T×3, base frame)."""
    w: np.ndarray
    """Truth base angular velocity (T×3, base frame)."""
    q_true: np.ndarray
    qd_true: np.ndarray
    tau_true: np.ndarray
    force_true: np.ndarray
    foot_v: np.ndarray
    """Truth velocity of each foot's lowest point (T×4×3, world): ≈ 0 in stance."""
    mass: float
    gyro_bias: np.ndarray = field(default_factory=lambda: np.zeros(3))
    acc_bias: np.ndarray = field(default_factory=lambda: np.zeros(3))
    fell: bool = False


def _quat_to_rot(qw: float, qx: float, qy: float, qz: float) -> np.ndarray:
    return np.array([
        [1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qz * qw), 2 * (qx * qz + qy * qw)],
        [2 * (qx * qy + qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qx * qw)],
        [2 * (qx * qz - qy * qw), 2 * (qy * qz + qx * qw), 1 - 2 * (qx * qx + qy * qy)]])


def simulate(scenario: str, duration: float, seed: int = 0, gait: Gait = Gait(),
             noise: SensorNoise = SensorNoise(), kp: float = 6.0, kd: float = 0.15,
             push: tuple[float, float, float] = (5.0, 18.0, 0.0), push_at: float = 1.5,
             progress: Callable[[float], None] | None = None, warmup: float = 1.0) -> Run:
    """Simulate ``scenario`` for ``duration`` s at 1 kHz; see the module docstring.

    The robot is set on its feet and held standing for ``warmup`` s before the recording
    starts (not recorded): the recording begins at rest, so a standing calibration of the
    gyro bias over its first 0.4 s sees no motion (the drop onto the springy contacts
    pitches the base by mrad at first).
    """
    import mujoco

    if scenario not in SCENARIOS:
        raise ValueError(f'scenario {scenario!r}: one of {", ".join(SCENARIOS)}')
    model = mujoco.MjModel.from_xml_string(mjcf_from_urdf())
    data = mujoco.MjData(model)
    rng = np.random.default_rng(seed)
    nj = model.nu
    names = [model.joint(i + 1).name for i in range(nj)]
    mass = float(sum(model.body_mass))
    foot_geoms = [model.geom(f'{f}_FOOT').id for f in FEET]
    foot_bodies = [model.body(f'{f}_FOOT').id for f in FEET]
    floor = model.geom('floor').id
    trunk_body = model.body('base_link').id
    trunk_geom = model.geom('trunk').id
    gyro_adr = model.sensor('gyro').adr[0]
    acc_adr = model.sensor('accelerometer').adr[0]

    nom = gait.nominal()
    q0 = feet_ik(nom)
    data.qpos[:3] = (0.0, 0.0, gait.height + FOOT_RADIUS)
    data.qpos[3:7] = (1.0, 0.0, 0.0, 0.0)
    data.qpos[7:] = q0
    mujoco.mj_forward(model, data)

    steps = int(round(duration / DT))
    T = steps
    out = {k: np.zeros((T,) + s) for k, s in dict(
        q=(nj,), qd=(nj,), tau=(nj,), gyro=(3,), acc=(3,), contact=(4,), force=(4, 3),
        p=(3,), quat=(4,), v=(3,), w=(3,), q_true=(nj,), qd_true=(nj,), tau_true=(nj,),
        force_true=(4, 3), foot_v=(4, 3)).items()}
    res = 2 * math.pi / 2 ** noise.encoder_bits
    b_g = rng.normal(0.0, noise.gyro_bias_sigma, 3)
    b_a = rng.normal(0.0, noise.acc_bias_sigma, 3)
    b_g0, b_a0 = b_g.copy(), b_a.copy()
    sg = noise.gyro_density / math.sqrt(DT)
    sa = noise.acc_density / math.sqrt(DT)
    jac = np.zeros((3, model.nv))
    c6 = np.zeros(6)
    vel6 = np.zeros(6)
    q_prev = q0.copy()
    fell = False
    n_warm = int(round(warmup / DT))
    for k in range(-n_warm, steps):
        t = data.time - n_warm * DT
        rot = _quat_to_rot(*data.qpos[3:7])
        yaw = math.atan2(rot[1, 0], rot[0, 0])
        p_ref, stance_ref = references(scenario, gait, t + DT, yaw, data.qpos[1])
        q_ref = feet_ik(p_ref)
        qd_ref = (q_ref - q_prev) / DT if k > -n_warm else np.zeros(nj)
        q_prev = q_ref
        # feed-forward: leg bias forces and m g shared by the stance feet
        tau = data.qfrc_bias[6:].copy()
        n_st = int(stance_ref.sum())
        f_des = np.array([0.0, 0.0, mass * 9.81 / max(n_st, 1)])
        for i in range(4):
            if stance_ref[i]:
                mujoco.mj_jacBody(model, data, jac, None, foot_bodies[i])
                tau -= jac[:, 6:].T @ f_des
        tau += kp * (q_ref - data.qpos[7:]) + kd * (qd_ref - data.qvel[6:])
        data.ctrl[:] = np.clip(tau, -TORQUE_LIMIT, TORQUE_LIMIT)
        if scenario == 'push' and push_at <= t < push_at + 0.1:
            data.xfrc_applied[trunk_body, :3] = push
        else:
            data.xfrc_applied[trunk_body, :3] = 0.0
        mujoco.mj_step(model, data)
        if k < 0:
            continue

        # truth after the step
        rot = _quat_to_rot(*data.qpos[3:7])
        out['p'][k] = data.qpos[:3]
        out['quat'][k] = data.qpos[3:7]
        out['v'][k] = rot.T @ data.qvel[:3]
        out['w'][k] = data.qvel[3:6]
        out['q_true'][k] = data.qpos[7:]
        out['qd_true'][k] = data.qvel[6:]
        out['tau_true'][k] = data.actuator_force
        for c in range(data.ncon):
            con = data.contact[c]
            g1, g2 = con.geom1, con.geom2
            if trunk_geom in (g1, g2):
                fell = True
            other = g2 if g1 == floor else g1 if g2 == floor else -1
            if other not in foot_geoms:
                continue
            i = foot_geoms.index(other)
            mujoco.mj_contactForce(model, data, c, c6)
            f = con.frame.reshape(3, 3).T @ c6[:3]     # on geom2, along the normal geom1→geom2
            out['force_true'][k, i] += f if g2 == other else -f
            out['contact'][k, i] = 1.0
        for i in range(4):
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, foot_bodies[i],
                                     vel6, 0)
            # the lowest point of the sphere: v_centre + ω × (−r e_z)
            out['foot_v'][k, i] = vel6[3:] + np.cross(vel6[:3], [0.0, 0.0, -FOOT_RADIUS])
        # sensors
        b_g += rng.normal(0.0, noise.gyro_walk * math.sqrt(DT), 3)
        b_a += rng.normal(0.0, noise.acc_walk * math.sqrt(DT), 3)
        out['gyro'][k] = data.sensordata[gyro_adr:gyro_adr + 3] + b_g + rng.normal(0, sg, 3)
        out['acc'][k] = data.sensordata[acc_adr:acc_adr + 3] + b_a + rng.normal(0, sa, 3)
        out['q'][k] = np.round((data.qpos[7:] + rng.normal(0, noise.q_sigma, nj)) / res) * res
        out['qd'][k] = data.qvel[6:] + rng.normal(0, noise.qd_sigma, nj)
        out['tau'][k] = data.actuator_force + rng.normal(0, noise.tau_sigma, nj)
        for i in range(4):
            f_foot = data.xmat[foot_bodies[i]].reshape(3, 3).T @ out['force_true'][k, i]
            out['force'][k, i] = f_foot + out['contact'][k, i] * rng.normal(
                0, noise.force_sigma, 3)
        if progress is not None and k % 1000 == 999:
            progress(data.time)
    t = (np.arange(T) + 1) * DT
    return Run(t=t, joint_names=names, mass=mass, gyro_bias=b_g0, acc_bias=b_a0, fell=fell,
               **out)
