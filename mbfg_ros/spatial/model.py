"""The immutable spatial multibody model (seed 002 §III, seed 004 §5): a tree of
rigid links joined by 1-DOF joints, plus loop-closing joints.

Conventions (GTSAM's, so the factors use ``gtsam.Pose3`` directly):

* Links are numbered ``0..nb-1``; link 0 is the root: the URDF root link, fixed to
  the world, or, with ``floating`` (a URDF ``floating`` joint from a world link, or the
  overlay's ``floating_base: true``), the free base whose pose on SE(3) and twist are part
  of the state (seed 004 §5: the root's DOFs come first in the generalized coordinates;
  :mod:`.floating` has its dynamics). Movable joint ``j`` (``0..n-1``) moves link
  ``child[j] = j + 1`` relative to link ``parent[j] <= j``; ``q[j]`` is its coordinate.
  Joints are topologically ordered, depth first (checked at construction: every
  recursion relies on it).
* ``T_home[j]`` (4x4) is the URDF joint origin: the child link frame in the parent
  link frame at ``q[j] = 0``. The child frame at ``q`` is
  ``T_home[j] @ exp(screw_j q_j)`` with ``screw_j`` the unit joint twist in the child
  frame: ``[axis; 0]`` (revolute, continuous) or ``[0; axis]`` (prismatic).
* Twists and wrenches are 6-vectors ``[angular; linear]`` in the link frame
  (GTSAM's Pose3 tangent order; Pinocchio's Motion/Force order is
  ``[linear; angular]``: swap the halves when comparing).
* Each link's body frame is its URDF link frame; ``mass``, ``com`` (in that frame)
  and ``inertia`` (3x3 about the centre of mass, axes of that frame). Fixed joints
  are merged into their parent link (inertia combined, the merged link kept as a
  named frame in ``frames``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ['JOINT_TYPES', 'LoopJoint', 'PointContact', 'SpatialModel']

JOINT_TYPES = ('revolute', 'prismatic')
"""Movable joint types after loading (``continuous`` is a revolute without limits)."""


@dataclass(frozen=True)
class LoopJoint:
    """A loop-closing joint (seed 002 §VII): ``child`` link joined to ``parent`` link.

    The joint frame is ``T_parent`` in the parent link and ``T_child`` in the child
    link; they coincide up to the joint's motion along ``axis`` (joint frame).
    ``actuated``: a motor acts across it (redundant actuation).
    """

    name: str
    type: str                 # 'revolute' | 'prismatic' | 'spherical' | 'fixed'
    parent: int
    T_parent: np.ndarray      # (4, 4)
    child: int
    T_child: np.ndarray       # (4, 4)
    axis: np.ndarray          # (3,) unit, joint frame
    actuated: bool = False


@dataclass(frozen=True)
class SpatialImu:
    """A 3-axis IMU rigidly mounted on tree link ``link`` at pose ``T_mount`` (sensor frame
    in the link frame). Its ``Imu`` messages arrive on ``topic`` with ``frame_id``."""

    name: str
    link: int
    T_mount: np.ndarray       # (4, 4)
    frame_id: str
    topic: str
    gyro_range: float = 1.0e3       # |ω| beyond this is rejected, rad/s
    accel_range: float = 1.0e4      # |f| per axis beyond this is rejected, m/s²


@dataclass(frozen=True)
class PointContact:
    """A point that may touch the ground (a foot): point ``position`` (3,) of tree link
    ``link``, in that link's frame; ``name`` is the URDF link or frame it was given as
    (overlay ``contacts:``). In stance it transmits a 3-D force ``f_c`` (world axes)."""

    name: str
    link: int
    position: np.ndarray      # (3,)


@dataclass(frozen=True)
class SpatialModel:
    """A spatial multibody model: built once (``load_spatial``), never mutated."""

    source: str
    link_names: tuple[str, ...]          # (nb,)
    joint_names: tuple[str, ...]         # (n,)
    joint_type: tuple[str, ...]          # (n,) in JOINT_TYPES
    parent: np.ndarray                   # (n,) int: parent link of joint j
    child: np.ndarray                    # (n,) int: child link of joint j
    T_home: np.ndarray                   # (n, 4, 4)
    axis: np.ndarray                     # (n, 3) unit, child frame
    mass: np.ndarray                     # (nb,)
    com: np.ndarray                      # (nb, 3)
    inertia: np.ndarray                  # (nb, 3, 3) about the com
    gravity: np.ndarray                  # (3,) in the root frame, e.g. (0, 0, -9.81)
    lower: np.ndarray                    # (n,) position limits (-inf: none)
    upper: np.ndarray                    # (n,)
    velocity_limit: np.ndarray           # (n,) (inf: none)
    effort_limit: np.ndarray             # (n,) (inf: none)
    actuated: np.ndarray                 # (n,) bool
    q0: np.ndarray                       # (n,) start / assembly guess
    loops: tuple[LoopJoint, ...] = ()
    frames: dict = field(default_factory=dict)   # name -> (link index, (4, 4) pose in it)
    imus: tuple[SpatialImu, ...] = ()
    name: str = 'robot'                  # the URDF's <robot name="...">
    drives: tuple = ()                   # (n,) drives.JointDrive or None per joint; () = none
    floating: bool = False               # link 0 is a free base (module docstring)
    base_joint: str = ''                 # the URDF floating joint ('' : overlay floating_base)
    contacts: tuple[PointContact, ...] = ()   # overlay contacts: (floating base only)

    def __post_init__(self) -> None:
        # Every recursion relies on this numbering (the loader guarantees it).
        n = len(self.joint_names)
        if not np.array_equal(np.asarray(self.child), np.arange(1, n + 1)):
            raise ValueError('SpatialModel: joint j must move link j + 1 (child = 1..n)')
        if np.any(np.asarray(self.parent) > np.arange(n)):
            raise ValueError('SpatialModel: joints must be topologically ordered '
                             '(parent[j] <= j)')

    @property
    def n(self) -> int:
        """Number of tree joint coordinates."""
        return len(self.joint_names)

    @property
    def nb(self) -> int:
        """Number of links, root included."""
        return len(self.link_names)

    @property
    def screw(self) -> np.ndarray:
        """(n, 6) unit joint twists ``[angular; linear]`` in the child frames."""
        s = np.zeros((self.n, 6))
        rev = np.array([t == 'revolute' for t in self.joint_type])
        s[rev, :3] = self.axis[rev]
        s[~rev, 3:] = self.axis[~rev]
        return s

    def spatial_inertia(self) -> np.ndarray:
        """(nb, 6, 6) link spatial inertias in the link frames, ``[angular; linear]``
        order (seed 002 Eq. 6's ``G``): ``[[I_c + m [c]ᵀ[c], m [c]], [m [c]ᵀ, m 1]]``."""
        G = np.zeros((self.nb, 6, 6))
        for b in range(self.nb):
            m, c = self.mass[b], self.com[b]
            C = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
            G[b, :3, :3] = self.inertia[b] + m * C.T @ C
            G[b, :3, 3:] = m * C
            G[b, 3:, :3] = m * C.T
            G[b, 3:, 3:] = m * np.eye(3)
        return G
