import numpy as np
pi=np.pi
a=[0,0.4318,0.0203,0,0,0]; d=[0,0,0.15005,0.4318,0,0]; al=[pi/2,0,-pi/2,pi/2,-pi/2,0]
m=[1e-3,17.4,4.8,0.82,0.34,0.09]
r=[[0,0,0],[-0.3638,0.006,0.2275],[-0.0203,-0.0141,0.070],[0,0.019,0],[0,0,0],[0,0,0.032]]
I=[[0.18,0.35,0.18],[0.13,0.524,0.539],[0.066,0.086,0.0125],[1.8e-3,1.3e-3,1.8e-3],[0.3e-3,0.4e-3,0.3e-3],[0.15e-3,0.15e-3,0.04e-3]]
qlim=[(-160,160),(-45,225),(-225,45),(-110,170),(-100,100),(-266,266)]
def fmt(x):
    x=float(x)
    if abs(x)<1e-15: x=0.0
    return repr(x)
def B(i):  # Tz(d) Tx(a) Rx(alpha): link i frame -> DH frame i
    ca,sa=np.cos(al[i]),np.sin(al[i])
    T=np.eye(4); T[:3,:3]=[[1,0,0],[0,ca,-sa],[0,sa,ca]]; T[:3,3]=[a[i],0,d[i]]; return T
out=[]
w=out.append
w('<?xml version="1.0"?>')
w('''<!-- PUMA 560 (6R), written for mbfg_ros's spatial tests (see SOURCE.md).
     Kinematics and dynamics: Corke's Robotics Toolbox mdl_puma560 (standard DH, Armstrong et al. 1986
     inertial parameters as tabulated by Corke):
       a     = [0, 0.4318, 0.0203, 0, 0, 0]
       d     = [0, 0, 0.15005, 0.4318, 0, 0]
       alpha = [pi/2, 0, -pi/2, pi/2, -pi/2, 0]
       m     = [0, 17.4, 4.8, 0.82, 0.34, 0.09]
       r_i (COM in DH frame i) = [0 0 0], [-0.3638 0.006 0.2275], [-0.0203 -0.0141 0.070],
                                 [0 0.019 0], [0 0 0], [0 0 0.032]
       I_i (about the COM, DH frame i axes, diagonal) = [0 0.35 0], [0.13 0.524 0.539],
           [0.066 0.086 0.0125], [1.8e-3 1.3e-3 1.8e-3], [0.3e-3 0.4e-3 0.3e-3], [0.15e-3 0.15e-3 0.04e-3]
     Conversion: URDF link i's frame is DH frame i-1 rotated by q_i about its z (so the z axis of
     link i is joint i's axis and the joint sits at its origin); DH frame i = link i * B_i with
     B_i = Tz(d_i) Tx(a_i) Rx(alpha_i). Hence joint i's origin is B_{i-1} (B_0 = identity) and
     the COM / inertia of link i are B_i applied to Corke's r_i / I_i (written out below).
     Link 1 (Corke: m = 0, I = diag(0, 0.35, 0)) is given m = 1e-3 kg and Ixx = Izz = 0.18 (in DH
     frame 1) so its inertia is positive definite and physically consistent: the COM lies on
     joint 1's fixed axis and the link only ever spins about that axis, so neither changes the
     joint-space dynamics (M, C, g are exactly Corke's).
     Effort (100 N m) and velocity (3 rad/s) limits are placeholders (Corke gives none).
     "flange" (fixed) = DH frame 6: oMf(flange) equals the standard-DH product A1...A6. -->''')
w('<robot name="puma560">')
w('  <link name="base_link"/>  <!-- DH frame 0 -->')
parent='base_link'
for i in range(6):
    Bp=np.eye(4) if i==0 else B(i-1)
    R=Bp[:3,:3]; rpy=[np.arctan2(R[2,1],R[2,2]),0.0,0.0]
    assert np.allclose(R, [[1,0,0],[0,np.cos(rpy[0]),-np.sin(rpy[0])],[0,np.sin(rpy[0]),np.cos(rpy[0])]])
    lo,hi=np.deg2rad(qlim[i])
    w(f'  <joint name="joint{i+1}" type="revolute">')
    w(f'    <parent link="{parent}"/>')
    w(f'    <child link="link{i+1}"/>')
    w(f'    <origin xyz="{" ".join(fmt(x) for x in Bp[:3,3])}" rpy="{" ".join(fmt(x) for x in rpy)}"/>'
      + ('' if i==0 else f'  <!-- B_{i}: d={d[i-1]} a={a[i-1]} alpha={al[i-1]/pi:g}*pi -->'))
    w('    <axis xyz="0 0 1"/>')
    w(f'    <limit lower="{fmt(lo)}" upper="{fmt(hi)}" effort="100.0" velocity="3.0"/>  <!-- qlim {qlim[i]} deg -->')
    w('  </joint>')
    Bi=B(i); c=Bi[:3,:3]@r[i]+Bi[:3,3]; Ic=Bi[:3,:3]@np.diag(I[i])@Bi[:3,:3].T
    w(f'  <link name="link{i+1}">')
    w(f'    <inertial>  <!-- m={m[i]} r={r[i]} I=diag{I[i]} in DH frame {i+1} -->')
    w(f'      <origin xyz="{" ".join(fmt(x) for x in c)}" rpy="0 0 0"/>')
    w(f'      <mass value="{fmt(m[i])}"/>')
    w(f'      <inertia ixx="{fmt(Ic[0,0])}" ixy="{fmt(Ic[0,1])}" ixz="{fmt(Ic[0,2])}" iyy="{fmt(Ic[1,1])}" iyz="{fmt(Ic[1,2])}" izz="{fmt(Ic[2,2])}"/>')
    w('    </inertial>')
    w('  </link>')
    parent=f'link{i+1}'
B6=B(5)
w('  <link name="flange"/>  <!-- DH frame 6 -->')
w('  <joint name="flange_joint" type="fixed">')
w('    <parent link="link6"/>')
w('    <child link="flange"/>')
w(f'    <origin xyz="{" ".join(fmt(x) for x in B6[:3,3])}" rpy="0 0 0"/>  <!-- B_6 = identity (d6 = a6 = alpha6 = 0) -->')
w('  </joint>')
w('</robot>')
open('test/data/urdf/puma560.urdf','w').write('\n'.join(out)+'\n')
