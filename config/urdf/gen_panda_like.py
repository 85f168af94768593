"""Writes panda_like.urdf: Franka's modified-DH kinematics and limits, franka_description's link
inertials, a fixed hand and two prismatic fingers; see SOURCE.md.

Modified (Craig) DH: T = Rx(alpha) Tx(a) Tz(d) Rz(q), so joint i's URDF origin is
xyz = (a, -d sin alpha, d cos alpha), rpy = (alpha, 0, 0), axis z.
Run: python gen_panda_like.py (rewrites panda_like.urdf next to this file).
"""
from pathlib import Path

import numpy as np

PI = np.pi
MDH = [(0, 0.333, 0), (0, 0, -PI / 2), (0, 0.316, PI / 2), (0.0825, 0, PI / 2),
       (-0.0825, 0.384, -PI / 2), (0, 0, PI / 2), (0.088, 0, PI / 2)]   # (a, d, alpha)
LIMITS = [(-2.8973, 2.8973), (-1.7628, 1.7628), (-2.8973, 2.8973), (-3.0718, -0.0698),
          (-2.8973, 2.8973), (-0.0175, 3.7525), None]                    # joint 7: continuous
VELOCITY = [2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61]
EFFORT = [87, 87, 87, 87, 12, 12, 12]
# franka_description: (mass, com, (ixx, ixy, ixz, iyy, iyz, izz)) of link0..link7 (link = DH frame)
INERTIALS = [
    (0.629769, (-0.041018, -0.00014, 0.049974),
     (0.00315, 8.2904e-07, 0.00015, 0.00388, 8.2299e-06, 0.004285)),
    (4.970684, (0.003875, 0.002081, -0.04762),
     (0.70337, -0.000139, 0.006772, 0.70661, 0.019169, 0.009117)),
    (0.646926, (-0.003141, -0.02872, 0.003495),
     (0.007962, -0.003925, 0.010254, 0.02811, 0.000704, 0.025995)),
    (3.228604, (0.027518, 0.039252, -0.066502),
     (0.037242, -0.004761, -0.011396, 0.036155, -0.012805, 0.01083)),
    (3.587895, (-0.05317, 0.104419, 0.027454),
     (0.025853, 0.007796, -0.001332, 0.019552, 0.008641, 0.028323)),
    (1.225946, (-0.011953, 0.041065, -0.038437),
     (0.035549, -0.002117, -0.004037, 0.029474, 0.000229, 0.008627)),
    (1.666555, (0.060149, -0.014117, -0.010517),
     (0.001964, 0.000109, -0.001158, 0.004354, 0.000341, 0.005433)),
    (0.735522, (0.010517, -0.004252, 0.061597),
     (0.012516, -0.000428, -0.001196, 0.010027, -0.000741, 0.004815)),
]

HEADER = '''<!-- A Franka-Panda-like BRANCHING arm for mbfg_ros's spatial tests (see SOURCE.md;
     gen_panda_like.py). Kinematics: Franka's documented modified (Craig) DH parameters,
     T = Rx(alpha) Tx(a) Tz(d) Rz(q):
       joint  a        d      alpha
         1    0        0.333   0
         2    0        0      -pi/2
         3    0        0.316   pi/2
         4    0.0825   0       pi/2
         5   -0.0825   0.384  -pi/2
         6    0        0       pi/2
         7    0.088    0       pi/2
       flange 0        0.107   0
     so each joint's URDF origin is xyz = (a, -d sin alpha, d cos alpha), rpy = (alpha, 0, 0).
     Joint position, velocity and torque limits: Franka's documentation. Joint 7 is written as
     "continuous" (no position limits) to exercise that type.
     Link inertials (link0..link7): the values published in Franka's franka_description
     (mass, centre of mass and inertia about it, link = DH frame); not identified by us.
     Hand: fixed to the flange turned by -pi/4 about z (as franka_description); 0.73 kg (Franka's
     documented hand mass), its centre of mass and inertia are our plausible box guess.
     Fingers: each on its own PRISMATIC joint from the hand (0 to 0.04 m, +y and -y), so the
     tree branches; 0.015 kg each, inertias our guess. No mimic joint (independent fingers). -->'''

HAND = '''  <link name="panda_link8"/>  <!-- the flange -->
  <joint name="panda_joint8" type="fixed">
    <parent link="panda_link7"/>
    <child link="panda_link8"/>
    <origin xyz="0 0 0.107" rpy="0 0 0"/>
  </joint>
  <joint name="panda_hand_joint" type="fixed">
    <parent link="panda_link8"/>
    <child link="panda_hand"/>
    <origin xyz="0 0 0" rpy="0 0 -0.7853981633974483"/>
  </joint>
  <link name="panda_hand">
    <inertial>  <!-- 0.73 kg; a 0.06 x 0.2 x 0.08 m box centred 0.04 m out: our guess -->
      <origin xyz="0 0 0.04" rpy="0 0 0"/>
      <mass value="0.73"/>
      <inertia ixx="0.002822" ixy="0" ixz="0" iyy="0.000608" iyz="0" izz="0.002652"/>
    </inertial>
  </link>
  <joint name="panda_finger_joint1" type="prismatic">
    <parent link="panda_hand"/>
    <child link="panda_leftfinger"/>
    <origin xyz="0 0 0.0584" rpy="0 0 0"/>
    <axis xyz="0 1 0"/>
    <limit lower="0.0" upper="0.04" effort="20.0" velocity="0.2"/>
  </joint>
  <link name="panda_leftfinger">
    <inertial>  <!-- 0.015 kg, a 0.02 x 0.01 x 0.05 m box: our guess -->
      <origin xyz="0 0.01 0.025" rpy="0 0 0"/>
      <mass value="0.015"/>
      <inertia ixx="3.25e-06" ixy="0" ixz="0" iyy="3.625e-06" iyz="0" izz="6.25e-07"/>
    </inertial>
  </link>
  <joint name="panda_finger_joint2" type="prismatic">
    <parent link="panda_hand"/>
    <child link="panda_rightfinger"/>
    <origin xyz="0 0 0.0584" rpy="0 0 0"/>
    <axis xyz="0 -1 0"/>
    <limit lower="0.0" upper="0.04" effort="20.0" velocity="0.2"/>
  </joint>
  <link name="panda_rightfinger">
    <inertial>
      <origin xyz="0 -0.01 0.025" rpy="0 0 0"/>
      <mass value="0.015"/>
      <inertia ixx="3.25e-06" ixy="0" ixz="0" iyy="3.625e-06" iyz="0" izz="6.25e-07"/>
    </inertial>
  </link>
</robot>'''


def f(x) -> str:
    x = float(x)
    return repr(0.0 if abs(x) < 1e-15 else x)


def inertial(out: list, mass, com, inertia) -> None:
    ixx, ixy, ixz, iyy, iyz, izz = (f(v) for v in inertia)
    out += ['    <inertial>',
            f'      <origin xyz="{f(com[0])} {f(com[1])} {f(com[2])}" rpy="0 0 0"/>',
            f'      <mass value="{f(mass)}"/>',
            f'      <inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" '
            f'izz="{izz}"/>',
            '    </inertial>']


def urdf() -> str:
    out = ['<?xml version="1.0"?>', HEADER, '<robot name="panda_like">',
           '  <link name="panda_link0">']
    inertial(out, *INERTIALS[0])
    out.append('  </link>')
    for i, (a, d, alpha) in enumerate(MDH):
        kind = 'revolute' if LIMITS[i] else 'continuous'
        bounds = f'lower="{LIMITS[i][0]}" upper="{LIMITS[i][1]}" ' if LIMITS[i] else ''
        out += [f'  <joint name="panda_joint{i + 1}" type="{kind}">',
                f'    <parent link="panda_link{i}"/>',
                f'    <child link="panda_link{i + 1}"/>',
                f'    <origin xyz="{f(a)} {f(-d * np.sin(alpha))} {f(d * np.cos(alpha))}" '
                f'rpy="{f(alpha)} 0 0"/>  <!-- a={a} d={d} alpha={alpha / PI:g}*pi -->',
                '    <axis xyz="0 0 1"/>',
                f'    <limit {bounds}effort="{EFFORT[i]:.1f}" velocity="{VELOCITY[i]}"/>',
                '  </joint>',
                f'  <link name="panda_link{i + 1}">']
        inertial(out, *INERTIALS[i + 1])
        out.append('  </link>')
    out.append(HAND)
    return '\n'.join(out) + '\n'


if __name__ == '__main__':
    (Path(__file__).resolve().parent / 'panda_like.urdf').write_text(urdf())
