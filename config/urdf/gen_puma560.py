"""Writes puma560.urdf from Corke's mdl_puma560 (standard DH) numbers; see SOURCE.md.

URDF link i's frame is DH frame i-1 turned by q_i about its z (z = joint i's axis); DH frame i is
link i * B_i with B_i = Tz(d_i) Tx(a_i) Rx(alpha_i). So joint i's origin is B_{i-1} (B_0 = I) and
Corke's COM r_i / inertia I_i (in DH frame i) become B_i r_i / R_i I_i R_i^T in link i.
Run: python gen_puma560.py (rewrites puma560.urdf next to this file).
"""
from pathlib import Path

import numpy as np

PI = np.pi
A = [0, 0.4318, 0.0203, 0, 0, 0]
D = [0, 0, 0.15005, 0.4318, 0, 0]
ALPHA = [PI / 2, 0, -PI / 2, PI / 2, -PI / 2, 0]
MASS = [1e-3, 17.4, 4.8, 0.82, 0.34, 0.09]      # link 1: Corke's 0, see the header
COM = [[0, 0, 0], [-0.3638, 0.006, 0.2275], [-0.0203, -0.0141, 0.070], [0, 0.019, 0],
       [0, 0, 0], [0, 0, 0.032]]
INERTIA = [[0.18, 0.35, 0.18], [0.13, 0.524, 0.539], [0.066, 0.086, 0.020],   # link 3: 0.0125
           [1.8e-3, 1.3e-3, 1.8e-3], [0.3e-3, 0.4e-3, 0.3e-3], [0.15e-3, 0.15e-3, 0.04e-3]]
QLIM_DEG = [(-160, 160), (-45, 225), (-225, 45), (-110, 170), (-100, 100), (-266, 266)]

HEADER = '''<!-- PUMA 560 (6R), for mbfg_ros's spatial tests (see SOURCE.md; gen_puma560.py).
     Kinematics and dynamics: Corke's Robotics Toolbox mdl_puma560 (standard DH,
     Armstrong et al. 1986 inertial parameters as tabulated by Corke):
       a     = [0, 0.4318, 0.0203, 0, 0, 0]
       d     = [0, 0, 0.15005, 0.4318, 0, 0]
       alpha = [pi/2, 0, -pi/2, pi/2, -pi/2, 0]
       m     = [0, 17.4, 4.8, 0.82, 0.34, 0.09]
       r_i (COM in DH frame i) = [0 0 0], [-0.3638 0.006 0.2275], [-0.0203 -0.0141 0.070],
                                 [0 0.019 0], [0 0 0], [0 0 0.032]
       I_i (about the COM, DH frame i axes, diagonal) = [0 0.35 0], [0.13 0.524 0.539],
           [0.066 0.086 0.0125], [1.8e-3 1.3e-3 1.8e-3], [0.3e-3 0.4e-3 0.3e-3],
           [0.15e-3 0.15e-3 0.04e-3]
     Conversion: URDF link i's frame is DH frame i-1 rotated by q_i about its z (so the z axis of
     link i is joint i's axis and the joint sits at its origin); DH frame i = link i * B_i with
     B_i = Tz(d_i) Tx(a_i) Rx(alpha_i). Hence joint i's origin is B_{i-1} (B_0 = identity) and
     the COM / inertia of link i are B_i applied to Corke's r_i / I_i (written out below).
     Link 1 (Corke: m = 0, I = diag(0, 0.35, 0)) is given m = 1e-3 kg and Ixx = Izz = 0.18 (in DH
     frame 1) so its inertia is positive definite and physically consistent: the COM lies on
     joint 1's fixed axis and the link only ever spins about that axis, so neither changes the
     joint-space dynamics (M, C, g are exactly Corke's).
     Link 3's Izz is raised from the published 0.0125 to 0.020 (= 0.086 - 0.066): as published
     its principal moments 0.066, 0.086, 0.0125 break the triangle inequality (0.086 > 0.066 +
     0.0125 by 0.0075, about 10 %), which no mass distribution can (Ixx + Izz - Iyy = 2 sum m y^2);
     0.020 is the nearest physical Izz (equality: the mass in the x-z plane of DH frame 3); Ixx,
     Iyy as published. URDF checks refuse the published values (issue 26).
     Effort (100 N m) and velocity (3 rad/s) limits are placeholders (Corke gives none).
     "flange" (fixed) = DH frame 6: oMf(flange) equals the standard-DH product A1...A6. -->'''


def fmt(x) -> str:
    x = float(x)
    return repr(0.0 if abs(x) < 1e-15 else x)


def xyz(v) -> str:
    return ' '.join(fmt(x) for x in v)


def B(i: int) -> np.ndarray:
    """Tz(d_i) Tx(a_i) Rx(alpha_i): link i's frame -> DH frame i."""
    ca, sa = np.cos(ALPHA[i]), np.sin(ALPHA[i])
    T = np.eye(4)
    T[:3, :3] = [[1, 0, 0], [0, ca, -sa], [0, sa, ca]]
    T[:3, 3] = [A[i], 0, D[i]]
    return T


def urdf() -> str:
    out = ['<?xml version="1.0"?>', HEADER, '<robot name="puma560">',
           '  <link name="base_link"/>  <!-- DH frame 0 -->']
    w = out.append
    parent = 'base_link'
    for i in range(6):
        Bp = np.eye(4) if i == 0 else B(i - 1)
        roll = np.arctan2(Bp[2, 1], Bp[2, 2])
        lo, hi = np.deg2rad(QLIM_DEG[i])
        note = '' if i == 0 else (f'  <!-- B_{i}: d={D[i - 1]} a={A[i - 1]} '
                                  f'alpha={ALPHA[i - 1] / PI:g}*pi -->')
        w(f'  <joint name="joint{i + 1}" type="revolute">')
        w(f'    <parent link="{parent}"/>')
        w(f'    <child link="link{i + 1}"/>')
        w(f'    <origin xyz="{xyz(Bp[:3, 3])}" rpy="{xyz([roll, 0, 0])}"/>' + note)
        w('    <axis xyz="0 0 1"/>')
        w(f'    <limit lower="{fmt(lo)}" upper="{fmt(hi)}" effort="100.0" velocity="3.0"/>'
          f'  <!-- qlim {QLIM_DEG[i]} deg -->')
        w('  </joint>')
        Bi = B(i)
        R = Bi[:3, :3]
        c = R @ COM[i] + Bi[:3, 3]
        Ic = R @ np.diag(INERTIA[i]) @ R.T
        w(f'  <link name="link{i + 1}">')
        w(f'    <inertial>  <!-- m={MASS[i]} r={COM[i]} I=diag{INERTIA[i]} '
          f'in DH frame {i + 1} -->')
        w(f'      <origin xyz="{xyz(c)}" rpy="0 0 0"/>')
        w(f'      <mass value="{fmt(MASS[i])}"/>')
        w(f'      <inertia ixx="{fmt(Ic[0, 0])}" ixy="{fmt(Ic[0, 1])}" ixz="{fmt(Ic[0, 2])}" '
          f'iyy="{fmt(Ic[1, 1])}" iyz="{fmt(Ic[1, 2])}" izz="{fmt(Ic[2, 2])}"/>')
        w('    </inertial>')
        w('  </link>')
        parent = f'link{i + 1}'
    w('  <link name="flange"/>  <!-- DH frame 6 -->')
    w('  <joint name="flange_joint" type="fixed">')
    w('    <parent link="link6"/>')
    w('    <child link="flange"/>')
    w(f'    <origin xyz="{xyz(B(5)[:3, 3])}" rpy="0 0 0"/>'
      '  <!-- B_6 = identity (d6 = a6 = alpha6 = 0) -->')
    w('  </joint>')
    w('</robot>')
    return '\n'.join(out) + '\n'


if __name__ == '__main__':
    (Path(__file__).resolve().parent / 'puma560.urdf').write_text(urdf())
