"""URDF (file or ``robot_description`` string) + optional YAML overlay → ``SpatialModel``.

The URDF is parsed by ROS's own ``urdf_parser_py`` (``urdfdom-py`` on PyPI), always from
bytes (a ``str`` carrying an ``encoding=`` XML declaration is refused by lxml).

* Movable joints: ``revolute``, ``continuous`` (a revolute without position limits) and
  ``prismatic``. ``fixed`` joints are merged into their parent link: masses, centres of
  mass and inertias are combined (parallel-axis theorem) and the merged link stays
  available as a named frame. ``planar`` and ``mimic`` joints are refused with an error
  that names the joint.
* A free-floating base (legged robots; :mod:`.floating`): a ``floating`` joint from a
  world link (no inertia, no other joint, identity ``<origin>``) to the base link, or
  the overlay's ``floating_base: true`` on the usual URDF whose root is the base. Link 0
  is then free (``SpatialModel.floating``); ``base_link`` picks a link fixed to the root
  as the base frame (the frame whose pose is the state).
* The spanning tree is grown depth-first (pre-order) from the single root link. A link that is the
  child of a second joint (a loop written in the URDF itself), and every ``loops:`` entry
  of the overlay, becomes a loop-closing ``LoopJoint`` (seed 002 §VII).
* The URDF link frame is the body frame (Pinocchio's convention too).

Overlay YAML (every key optional)::

    gravity: [0, 0, -9.81]            # root frame
    actuators: [joint_a, joint_b]     # default: every tree joint
    q0: {joint_a: 0.3}                # start / assembly guess (default 0, inside limits)
    limits: {joint_a: {lower: -1, upper: 1, velocity: 2, effort: 50}}
    loops:
      - {name: j, type: revolute, parent: link_a, child: link_b, axis: [0, 0, 1],
         origin_parent: {xyz: [..], rpy: [..]}, origin_child: {xyz: [..], rpy: [..]},
         actuated: false}
    imus:                             # 3-axis IMUs (gyroscope, accelerometer, orientation)
      - {name: wrist_imu, link: tool0, origin: {xyz: [..], rpy: [..]},
         frame_id: wrist_imu, topic: imu/wrist_imu, gyro_range: 35, accel_range: 160}
    floating_base: true               # the root link is free (default false)
    base_link: trunk                  # its frame: the root or a link fixed to it
    contacts: [LF_FOOT, RF_FOOT]      # point contacts (feet): links or merged frames
    joints:                           # friction and geared rotors (spatial/drives.py)
      joint_a: {friction: {b: 0.1, fc: 0.5, v_s: 0.01, smooth: tanh, fs: 0.6, v_st: 0.1,
                           offset: 0}, Ir: 1.0e-4, gr: 100, carried: false}

A joint's ``<dynamics damping friction>`` are the defaults of its viscous ``b`` and Coulomb
``fc`` (N·m·s/rad and N·m, smooth sign tanh over v_s = 0.01 rad/s); the overlay's
``joints.<name>.friction`` keys replace them one by one (:mod:`.drives`).

An IMU's ``link`` is any URDF link (a link merged by a fixed joint included); without
``link`` the IMU's ``frame_id`` is looked up among the URDF links, so an IMU whose frame
is a URDF link needs only ``name`` and ``frame_id``.
"""
from __future__ import annotations

import io
import math
import os
import re
from contextlib import redirect_stderr
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..core.errors import MechanismError
from ..core.names import topic_problem
from ..planar.mechanism_yaml import load_yaml
from .drives import build_drives, parse_drives
from .model import LoopJoint, PointContact, SpatialImu, SpatialModel

__all__ = ['load_spatial', 'parse_urdf', 'load_overlay', 'rpy_matrix', 'origin_matrix']

_MOVABLE = {'revolute': 'revolute', 'continuous': 'revolute', 'prismatic': 'prismatic'}
_REFUSED = {
    'planar': 'planar joints are not supported; write them as two prismatic + one revolute',
}
_LOOP_TYPES = ('revolute', 'prismatic', 'spherical', 'fixed')
_OVERLAY_KEYS = {'gravity', 'actuators', 'q0', 'limits', 'loops', 'imus', 'joints',
                 'floating_base', 'base_link', 'contacts'}


def rpy_matrix(rpy: Any) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes x, y, z) → rotation matrix ``Rz Ry Rx``."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def origin_matrix(xyz: Any = None, rpy: Any = None) -> np.ndarray:
    """A URDF ``<origin xyz rpy>`` as a 4x4 homogeneous transform."""
    T = np.eye(4)
    if rpy is not None:
        T[:3, :3] = rpy_matrix(rpy)
    if xyz is not None:
        T[:3, 3] = [float(v) for v in xyz]
    return T


def _urdf_origin(origin: Any) -> np.ndarray:
    if origin is None:
        return np.eye(4)
    return origin_matrix(origin.xyz, origin.rpy)


@dataclass
class _Body:
    """Mass properties accumulated in one tree link's frame while fixed joints merge."""

    mass: float = 0.0
    first: np.ndarray = None    # type: ignore[assignment]  # m * com
    second: np.ndarray = None   # type: ignore[assignment]  # inertia about the frame origin

    def __post_init__(self) -> None:
        self.first = np.zeros(3)
        self.second = np.zeros((3, 3))

    def add(self, mass: float, com: np.ndarray, I_com: np.ndarray) -> None:
        """Add a rigid body given in this frame (parallel-axis theorem)."""
        self.mass += mass
        self.first += mass * com
        self.second += I_com + mass * (float(com @ com) * np.eye(3) - np.outer(com, com))

    def com_inertia(self) -> tuple[float, np.ndarray, np.ndarray]:
        if self.mass <= 0.0:
            return 0.0, np.zeros(3), self.second.copy()
        c = self.first / self.mass
        I_c = self.second - self.mass * (float(c @ c) * np.eye(3) - np.outer(c, c))
        return self.mass, c, 0.5 * (I_c + I_c.T)


def _read_source(source: str | bytes | os.PathLike) -> tuple[bytes, str]:
    """(URDF bytes, name for messages). A str that starts with '<' is URDF text."""
    if isinstance(source, bytes):
        return source, '<robot_description>'
    if isinstance(source, str) and source.lstrip().startswith('<'):
        return source.encode('utf-8'), '<robot_description>'
    path = Path(source)
    try:
        return path.read_bytes(), str(path)
    except OSError as exc:
        raise MechanismError(f'cannot read the URDF: {exc.strerror or exc}',
                             source=str(path)) from None


#: Largest URDF accepted (bytes) and most joints (tree and loop, fixed included): bounds
#: checked before any model is allocated (issue 26). The estimator's factor graph holds
#: every joint at every tick of its window and its dense solves grow with the square of
#: the joint count: a 1000-joint URDF made the node grow past 24 GB. 256 joints cover
#: arms, humanoids and hands with room to spare, and stay within a few GB.
MAX_URDF_BYTES = 8 * 1024 * 1024
MAX_JOINTS = 256


def _safe_tree(data: bytes, name: str) -> Any:
    """The XML root, parsed without a DTD: no entity expansion, no external resolution,
    no network, whatever the lxml version (issue 26). A ``<!DOCTYPE>`` is refused."""
    from lxml import etree
    if len(data) > MAX_URDF_BYTES:
        raise MechanismError(f'the URDF is {len(data)} bytes, more than the '
                             f'{MAX_URDF_BYTES} this package reads (a robot description '
                             'with meshes by reference is far smaller)', source=name)
    if re.search(rb'<!\s*DOCTYPE', data[:65536], re.IGNORECASE):
        raise MechanismError('a URDF with a <!DOCTYPE> (entities, external files) is not '
                             'accepted: write the values out', source=name)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                             dtd_validation=False, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except Exception as exc:  # noqa: BLE001 - lxml.etree.XMLSyntaxError, ValueError...
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MechanismError(f'not a valid URDF: {msg}', source=name) from None
    tree = root.getroottree()
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
        raise MechanismError('a URDF with a <!DOCTYPE> (entities, external files) is not '
                             'accepted: write the values out', source=name)
    count = sum(1 for _ in root.iter('joint'))
    if count > MAX_JOINTS:
        raise MechanismError(f'{count} joints, more than the {MAX_JOINTS} this package '
                             'supports (the estimator holds every joint at every tick of its '
                             'window; memory grows with the square of the joint count)',
                             source=name)
    return root


def _parse_xml(data: bytes, name: str) -> Any:
    from urdf_parser_py.urdf import URDF  # ROS's parser; import cost paid on first load only
    from urdf_parser_py.xml_reflection.core import Path as ReflPath
    from lxml import etree
    root = _safe_tree(data, name)
    noise = io.StringIO()
    try:
        with redirect_stderr(noise):   # urdf_parser_py prints unknown-element chatter
            return URDF.from_xml(root, ReflPath(URDF.XML_REFL.tag,
                                                tree=etree.ElementTree(root)))
    except Exception as exc:  # AssertionError, ValueError, ... from the parser
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MechanismError(f'not a valid URDF: {msg}', source=name) from None


def _inertial(link: Any, name: str = '<urdf>') -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, com, inertia about com) of a URDF link, in the link frame, checked
    physically (:func:`check_inertia`)."""
    ine = link.inertial
    if ine is None or ine.mass is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    where = f'link {link.name!r}'
    try:
        T = _urdf_origin(ine.origin)
        i = ine.inertia
        I_ = np.zeros((3, 3)) if i is None else np.array(
            [[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]], float)
        mass = float(ine.mass)
    except (TypeError, ValueError):
        raise MechanismError('<inertial>: expected numbers', source=name,
                             path=where) from None
    if not np.isfinite(T).all():
        raise MechanismError('<inertial><origin>: not finite', source=name, path=where)
    check_inertia(mass, I_, name, where)
    R = T[:3, :3]
    return mass, T[:3, 3].copy(), R @ I_ @ R.T


def check_inertia(mass: float, inertia: np.ndarray, name: str, where: str) -> None:
    """Issue 26: a link's ``<inertial>`` is physical: finite, mass > 0, the inertia about
    the centre of mass symmetric positive definite and obeying the triangle inequality of
    its principal moments (each at most the sum of the other two, to 1e-9 of the trace):
    a PD inertia that breaks it belongs to no mass distribution.

    :raises MechanismError: naming the file and the link.
    """
    if not (np.isfinite(mass) and np.isfinite(inertia).all()):
        raise MechanismError(f'<inertial>: mass {mass} or inertia not finite', source=name,
                             path=where)
    if not mass > 0:
        raise MechanismError(f'<inertial>: mass must be > 0, got {mass:g} (omit <inertial> '
                             'for a massless link)', source=name, path=where)
    eig = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    scale = max(float(np.abs(eig).max()), 1e-300)
    if eig[0] <= 1e-12 * scale:
        raise MechanismError('<inertia>: not positive definite (principal moments '
                             f'{", ".join(f"{e:.4g}" for e in eig)})', source=name, path=where)
    if eig[2] > eig[0] + eig[1] + 1e-9 * float(eig.sum()):
        raise MechanismError('<inertia>: principal moments '
                             f'{", ".join(f"{e:.4g}" for e in eig)} break the triangle '
                             'inequality (the largest exceeds the sum of the other two)',
                             source=name, path=where)


def parse_urdf(source: str | bytes | os.PathLike) -> tuple[Any, str]:
    """Parse a URDF (path, XML text or bytes) with urdf_parser_py: (robot, source name)."""
    data, name = _read_source(source)
    return _parse_xml(data, name), name


def load_overlay(overlay: str | os.PathLike | Mapping | None) -> tuple[dict, str]:
    """Read the YAML overlay (path or mapping): (dict, source name)."""
    if overlay is None:
        return {}, '<no overlay>'
    if isinstance(overlay, Mapping):
        data, name = dict(overlay), '<overlay>'
    else:
        name = str(overlay)
        try:
            text = Path(overlay).read_text()
        except OSError as exc:
            raise MechanismError(f'cannot read the overlay: {exc.strerror or exc}',
                                 source=name) from None
        try:
            data = load_yaml(text)
        except Exception as exc:  # yaml.YAMLError and DuplicateKeyError
            raise MechanismError(f'invalid YAML: {exc}', source=name) from None
        data = {} if data is None else data
    if not isinstance(data, Mapping):
        raise MechanismError('the overlay must be a mapping', source=name)
    unknown = sorted(set(data) - _OVERLAY_KEYS)
    if unknown:
        raise MechanismError(f'unknown key {unknown[0]!r} (allowed: '
                             f'{", ".join(sorted(_OVERLAY_KEYS))})', source=name, path=unknown[0])
    return dict(data), name


def _vec3(value: Any, where: str, name: str, key: str) -> np.ndarray:
    try:
        v = np.array([float(x) for x in value], float)
    except (TypeError, ValueError):
        v = np.zeros(0)
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise MechanismError(f'expected three finite numbers, got {value!r}', source=name,
                             path=f'{where}.{key}' if where else key)
    return v


def load_spatial(source: str | bytes | os.PathLike,
                 overlay: str | os.PathLike | Mapping | None = None) -> SpatialModel:
    """Build the immutable ``SpatialModel`` of a URDF robot (see the module docstring).

    ``source``: a URDF path, or the URDF text itself (the ``robot_description`` parameter).
    ``overlay``: optional YAML path or mapping with loops, actuators, limits, gravity, q0.
    Raises ``MechanismError`` naming the file and the joint, link or key at fault.
    """
    robot, name = parse_urdf(source)
    extra, oname = load_overlay(overlay)
    links = {lk.name: lk for lk in robot.links}
    if not links:
        raise MechanismError('the URDF has no <link>', source=name)
    seen_joints: set[str] = set()
    for jt in robot.joints:
        where = f'joint {jt.name!r}'
        if jt.name in seen_joints:
            raise MechanismError('duplicate joint name', source=name, path=where)
        seen_joints.add(jt.name)
        if jt.type in _REFUSED:
            raise MechanismError(_REFUSED[jt.type], source=name, path=where)
        if jt.type not in _MOVABLE and jt.type not in ('fixed', 'floating'):
            raise MechanismError(f'unknown joint type {jt.type!r}', source=name, path=where)
        if jt.mimic is not None:
            raise MechanismError(f'mimic joints are not supported (mimics {jt.mimic.joint!r}); '
                                 'model the coupling as a loop or drop the mimic',
                                 source=name, path=where)
        for end in (jt.parent, jt.child):
            if end not in links:
                raise MechanismError(f'names link {end!r}, which the URDF does not define',
                                     source=name, path=where)
    children = {jt.child for jt in robot.joints}
    roots = [lk for lk in links if lk not in children]
    if len(roots) != 1:
        what = 'no root link (every link is a joint child)' if not roots else \
            f'{len(roots)} root links ({", ".join(roots)}); a robot has exactly one'
        raise MechanismError(what, source=name)
    root = roots[0]
    floating, base_joint = _floating(robot, root, links, extra, name, oname)
    if base_joint:                     # the world link and its floating joint are not bodies
        links.pop(root)
        root = next(jt.child for jt in robot.joints if jt.name == base_joint)
    joints_in = [jt for jt in robot.joints if jt.name != base_joint]

    # Spanning tree, depth first (pre-order, document order among siblings, so every
    # subtree is a contiguous range of joints as Pinocchio requires). The first joint
    # (document order) naming a link as its child is its tree joint; any later one closes
    # a kinematic loop.
    by_parent: dict[str, list] = {}
    tree_joint: dict[str, Any] = {}
    urdf_loops: list = []
    for jt in joints_in:
        if jt.child in tree_joint:
            urdf_loops.append(jt)
        else:
            tree_joint[jt.child] = jt
            by_parent.setdefault(jt.parent, []).append(jt)
    where_is: dict[str, tuple[int, np.ndarray]] = {root: (0, np.eye(4))}  # link → (tree link, T)
    bodies = [_Body()]
    link_names = [root]
    tree: list = []                    # movable joints in order, with the T of their parent
    stack = list(reversed(by_parent.get(root, [])))
    while stack:
        jt = stack.pop()
        b, T_p = where_is[jt.parent]
        T = T_p @ _urdf_origin(jt.origin)
        if jt.type == 'fixed':
            where_is[jt.child] = (b, T)
        else:
            where_is[jt.child] = (len(bodies), np.eye(4))
            bodies.append(_Body())
            link_names.append(jt.child)
            tree.append((jt, b, T))
        stack.extend(reversed(by_parent.get(jt.child, [])))
    unreached = [lk for lk in links if lk not in where_is]
    if unreached:
        raise MechanismError(f'link {unreached[0]!r} is not connected to the root {root!r}',
                             source=name)
    if extra.get('base_link') is not None:
        _rebase(str(extra['base_link']), where_is, tree, link_names, oname)
    for lname, (b, T) in where_is.items():
        m, c, I_c = _inertial(links[lname], name)
        R = T[:3, :3]
        bodies[b].add(m, R @ c + T[:3, 3], R @ I_c @ R.T)

    n = len(tree)
    jnames = tuple(jt.name for jt, _, _ in tree)
    jindex = {j: i for i, j in enumerate(jnames)}
    axis = np.zeros((n, 3))
    lower, upper = np.full(n, -np.inf), np.full(n, np.inf)
    vel, eff = np.full(n, np.inf), np.full(n, np.inf)
    for i, (jt, _, _) in enumerate(tree):
        where = f'joint {jt.name!r}'
        axis[i] = _unit(jt.axis, name, where)
        lim = jt.limit
        if lim is not None:
            _check_limit(lim, name, where)
            if lim.velocity is not None:
                vel[i] = float(lim.velocity)
            if lim.effort is not None:
                eff[i] = float(lim.effort)
            if jt.type != 'continuous' and lim.lower is not None and lim.upper is not None \
                    and (lim.lower != 0.0 or lim.upper != 0.0):
                lower[i], upper[i] = float(lim.lower), float(lim.upper)
        elif jt.type in ('revolute', 'prismatic'):
            raise MechanismError(f'a {jt.type} joint needs <limit> (URDF spec)',
                                 source=name, path=where)
        if lower[i] > upper[i]:
            raise MechanismError(f'limit lower {lower[i]} > upper {upper[i]}',
                                 source=name, path=where)

    mass = np.zeros(len(bodies))
    com = np.zeros((len(bodies), 3))
    inertia = np.zeros((len(bodies), 3, 3))
    for b, body in enumerate(bodies):
        mass[b], com[b], inertia[b] = body.com_inertia()

    gravity = np.array([0.0, 0.0, -9.81])
    if 'gravity' in extra:
        gravity = _vec3(extra['gravity'], '', oname, 'gravity')
    _apply_limits(extra.get('limits'), jindex, lower, upper, vel, eff, oname)
    actuated = _actuated(extra.get('actuators'), jindex, n, oname)
    q0 = np.where(np.isfinite(lower) & (lower > 0), lower,
                  np.where(np.isfinite(upper) & (upper < 0), upper, 0.0))
    if extra.get('q0') is not None:
        q0_map = extra['q0']
        if not isinstance(q0_map, Mapping):
            raise MechanismError('expected a mapping joint name → value', source=oname, path='q0')
        for j, v in q0_map.items():
            if j not in jindex:
                raise MechanismError(f'unknown joint {j!r} (tree joints: {", ".join(jnames)})',
                                     source=oname, path=f'q0.{j}')
            try:
                q0[jindex[j]] = float(v)
            except (TypeError, ValueError):
                raise MechanismError(f'expected a number, got {v!r}', source=oname,
                                     path=f'q0.{j}') from None

    loops = [LoopJoint(name=jt.name, type=_MOVABLE.get(jt.type, jt.type),
                       parent=where_is[jt.parent][0],
                       T_parent=where_is[jt.parent][1] @ _urdf_origin(jt.origin),
                       child=where_is[jt.child][0], T_child=where_is[jt.child][1].copy(),
                       axis=_unit(jt.axis, name, f'joint {jt.name!r}'),
                       actuated=False)
             for jt in urdf_loops]
    loops += _overlay_loops(extra.get('loops'), where_is, oname)

    frames = {lname: (b, T.copy()) for lname, (b, T) in where_is.items()}
    for arr in (axis, mass, com, inertia, lower, upper, vel, eff, actuated, q0):
        arr.setflags(write=False)
    drives = parse_drives(extra.get('joints'), jnames,
                          [_urdf_dynamics(jt) for jt, _, _ in tree], oname, name)
    model = SpatialModel(
        source=name, link_names=tuple(link_names), joint_names=jnames,
        joint_type=tuple(_MOVABLE[jt.type] for jt, _, _ in tree),
        parent=_ro(np.array([b for _, b, _ in tree], int)),
        child=_ro(np.arange(1, n + 1)),
        T_home=_ro(np.array([T for _, _, T in tree]).reshape(n, 4, 4)),
        axis=axis, mass=mass, com=com, inertia=inertia, gravity=_ro(gravity),
        lower=lower, upper=upper, velocity_limit=vel, effort_limit=eff,
        actuated=actuated, q0=q0, loops=tuple(loops), frames=frames,
        imus=_overlay_imus(extra.get('imus'), where_is, oname),
        name=str(getattr(robot, 'name', None) or 'robot'),
        drives=drives if any(d is not None for d in drives) else (),
        floating=floating, base_joint=base_joint,
        contacts=_contacts(extra.get('contacts'), where_is, floating, oname))
    build_drives(model, oname)       # refuses carried rotors it cannot model, naming the joint
    return model


def _floating(robot: Any, root: str, links: Mapping[str, Any], extra: Mapping,
              name: str, oname: str) -> tuple[bool, str]:
    """(free base?, name of the URDF floating joint or '') from the URDF and the overlay's
    ``floating_base`` / ``base_link`` (module docstring).

    A ``floating`` joint must leave the root link, be its only joint, have an identity
    ``<origin>`` (the base pose is the state, not a constant) and its root must carry no
    inertia (it is the world). :raises MechanismError: naming the joint or the key.
    """
    fb = extra.get('floating_base')
    if fb is not None and not isinstance(fb, bool):
        raise MechanismError(f'expected true or false, got {fb!r}', source=oname,
                             path='floating_base')
    free = [jt for jt in robot.joints if jt.type == 'floating']
    base_joint = ''
    for jt in free:
        where = f'joint {jt.name!r}'
        from_root = [j.name for j in robot.joints if j.parent == root]
        if jt.parent != root or len(free) > 1:
            raise MechanismError(f'a floating joint must join the root link {root!r} (the '
                                 f'world) to the base; this one joins {jt.parent!r} to '
                                 f'{jt.child!r}', source=name, path=where)
        others = [j for j in from_root if j != jt.name]
        if others:
            raise MechanismError(f'the world link {root!r} of a floating joint must have no '
                                 f'other joint (it also has {", ".join(others)})',
                                 source=name, path=where)
        if _inertial(links[root], name)[0] > 0.0:
            raise MechanismError(f'the world link {root!r} of a floating joint has a mass: '
                                 'put it on the base link', source=name, path=where)
        if not np.allclose(_urdf_origin(jt.origin), np.eye(4), rtol=0.0, atol=1e-12):
            raise MechanismError('a floating joint\'s <origin> must be the identity (the base '
                                 'pose is part of the state q, not a constant offset)',
                                 source=name, path=where)
        if fb is False:
            raise MechanismError(f'floating_base: false, but the URDF has the floating joint '
                                 f'{jt.name!r}', source=oname, path='floating_base')
        base_joint = jt.name
    floating = bool(base_joint) or fb is True
    if extra.get('base_link') is not None and not floating:
        raise MechanismError('base_link names the free base: it needs floating_base: true',
                             source=oname, path='base_link')
    return floating, base_joint


def _rebase(base_link: str, where_is: dict[str, tuple[int, np.ndarray]], tree: list,
            link_names: list[str], name: str) -> None:
    """Make ``base_link`` (the root or a link fixed to it) the frame of tree link 0: the
    frames, joint origins and masses of link 0 are re-expressed in it, in place."""
    if base_link not in where_is or where_is[base_link][0] != 0:
        raise MechanismError(f'{base_link!r} is not the root link {link_names[0]!r} nor a link '
                             'fixed to it: the free base must be the root of the tree',
                             source=name, path='base_link')
    T_inv = np.linalg.inv(where_is[base_link][1])
    for lname, (b, T) in list(where_is.items()):
        if b == 0:
            where_is[lname] = (0, T_inv @ T)
    tree[:] = [(jt, b, T_inv @ T if b == 0 else T) for jt, b, T in tree]
    link_names[0] = base_link


def _contacts(value: Any, where_is: Mapping[str, tuple[int, np.ndarray]], floating: bool,
              name: str) -> tuple[PointContact, ...]:
    """The overlay's ``contacts:``: link or merged-frame names, one point contact at each
    frame's origin (a foot's sole point)."""
    if value is None:
        return ()
    if not floating:
        raise MechanismError('contacts need a free base (floating_base: true)', source=name,
                             path='contacts')
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise MechanismError('expected a list of link names', source=name, path='contacts')
    out: list[PointContact] = []
    for i, c in enumerate(value):
        if not isinstance(c, str) or c not in where_is:
            raise MechanismError(f'unknown link {c!r} (links: {", ".join(where_is)})',
                                 source=name, path=f'contacts[{i}]')
        if any(p.name == c for p in out):
            raise MechanismError(f'duplicate contact {c!r}', source=name, path=f'contacts[{i}]')
        b, T = where_is[c]
        pos = np.array(T[:3, 3], float)
        pos.setflags(write=False)
        out.append(PointContact(name=c, link=b, position=pos))
    return tuple(out)


def _urdf_dynamics(jt: Any) -> tuple[float, float]:
    """(damping, friction) of a URDF joint's ``<dynamics>`` (0 when absent)."""
    d = jt.dynamics
    if d is None:
        return 0.0, 0.0
    return (float(d.damping) if d.damping is not None else 0.0,
            float(d.friction) if d.friction is not None else 0.0)


def _check_limit(lim: Any, name: str, where: str) -> None:
    """Issue 26: a ``<limit>``'s numbers are finite (a NaN bound let every reading
    through the gate), velocity and effort >= 0."""
    for key in ('lower', 'upper', 'velocity', 'effort'):
        v = getattr(lim, key, None)
        if v is None:
            continue
        try:
            ok = math.isfinite(float(v)) and (key in ('lower', 'upper') or float(v) >= 0)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise MechanismError(f'<limit {key}="{v}">: expected a finite number'
                                 + ('' if key in ('lower', 'upper') else ' >= 0'),
                                 source=name, path=where)


def _ro(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _unit(axis: Any, name: str, where: str) -> np.ndarray:
    a = np.array(axis if axis is not None else (1.0, 0.0, 0.0), float)
    norm = float(np.linalg.norm(a))
    if not np.isfinite(norm) or norm < 1e-12:
        raise MechanismError(f'axis {list(a)} is not a direction', source=name, path=where)
    return a / norm


def _apply_limits(value: Any, jindex: Mapping[str, int], lower: np.ndarray,
                  upper: np.ndarray, vel: np.ndarray, eff: np.ndarray, name: str) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise MechanismError('expected a mapping joint name → limits', source=name, path='limits')
    keys = {'lower': lower, 'upper': upper, 'velocity': vel, 'effort': eff}
    for j, lim in value.items():
        path = f'limits.{j}'
        if j not in jindex:
            raise MechanismError(f'unknown joint {j!r}', source=name, path=path)
        if not isinstance(lim, Mapping):
            raise MechanismError('expected a mapping with lower/upper/velocity/effort',
                                 source=name, path=path)
        for k, v in lim.items():
            if k not in keys:
                raise MechanismError(f'unknown key {k!r} (allowed: {", ".join(keys)})',
                                     source=name, path=f'{path}.{k}')
            try:
                x = float(v)
            except (TypeError, ValueError):
                x = math.nan
            # issue 26: a NaN bound let a 1e6 rad reading through the gate
            if not math.isfinite(x) or (k in ('velocity', 'effort') and x <= 0) \
                    or isinstance(v, bool):
                bound = '' if k in ('lower', 'upper') else ' > 0'
                raise MechanismError(f'expected a finite number{bound}, got {v!r}',
                                     source=name, path=f'{path}.{k}')
            keys[k][jindex[j]] = x
        i = jindex[j]
        if not lower[i] < upper[i]:
            raise MechanismError(f'lower {lower[i]:g} is not below upper {upper[i]:g}',
                                 source=name, path=path)


def _actuated(value: Any, jindex: Mapping[str, int], n: int, name: str) -> np.ndarray:
    act = np.ones(n, bool)
    if value is None:
        return act
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise MechanismError('expected a list of joint names', source=name, path='actuators')
    act[:] = False
    for i, j in enumerate(value):
        if j not in jindex:
            raise MechanismError(f'unknown joint {j!r} (tree joints: {", ".join(jindex)})',
                                 source=name, path=f'actuators[{i}]')
        act[jindex[j]] = True
    return act


def _origin(value: Any, name: str, path: str) -> np.ndarray:
    if value is None:
        return np.eye(4)
    if not isinstance(value, Mapping) or set(value) - {'xyz', 'rpy'}:
        raise MechanismError('expected {xyz: [x, y, z], rpy: [r, p, y]}', source=name, path=path)
    xyz = _vec3(value['xyz'], path, name, 'xyz') if 'xyz' in value else None
    rpy = _vec3(value['rpy'], path, name, 'rpy') if 'rpy' in value else None
    return origin_matrix(xyz, rpy)


def _check_entry(entry: Any, allowed: set[str], name: str, path: str) -> None:
    """An overlay list entry must be a mapping of ``allowed`` keys (error names the key)."""
    if not isinstance(entry, Mapping):
        raise MechanismError('expected a mapping', source=name, path=path)
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise MechanismError(f'unknown key {unknown[0]!r} (allowed: '
                             f'{", ".join(sorted(allowed))})', source=name,
                             path=f'{path}.{unknown[0]}')


def _overlay_loops(value: Any, where_is: Mapping[str, tuple[int, np.ndarray]],
                   name: str) -> list[LoopJoint]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise MechanismError('expected a list of loop joints', source=name, path='loops')
    allowed = {'name', 'type', 'parent', 'child', 'axis', 'origin_parent', 'origin_child',
               'actuated'}
    out = []
    for i, lp in enumerate(value):
        path = f'loops[{i}]'
        _check_entry(lp, allowed, name, path)
        for k in ('parent', 'child'):
            if k not in lp:
                raise MechanismError(f'missing key {k!r}', source=name, path=path)
            if lp[k] not in where_is:
                raise MechanismError(f'unknown link {lp[k]!r}', source=name, path=f'{path}.{k}')
        typ = lp.get('type', 'revolute')
        if typ not in _LOOP_TYPES:
            raise MechanismError(f'unknown type {typ!r} (allowed: {", ".join(_LOOP_TYPES)})',
                                 source=name, path=f'{path}.type')
        bp, Tp = where_is[lp['parent']]
        bc, Tc = where_is[lp['child']]
        if bp == bc:                   # issue 26: a loop joint must join two bodies
            raise MechanismError(f'parent {lp["parent"]!r} and child {lp["child"]!r} are the '
                                 'same rigid body: a loop joint must join two bodies',
                                 source=name, path=path)
        ax = _vec3(lp.get('axis', (0.0, 0.0, 1.0)), path, name, 'axis')
        out.append(LoopJoint(
            name=str(lp.get('name', f'loop{i}')), type=typ,
            parent=bp, T_parent=Tp @ _origin(lp.get('origin_parent'), name,
                                              f'{path}.origin_parent'),
            child=bc, T_child=Tc @ _origin(lp.get('origin_child'), name, f'{path}.origin_child'),
            axis=_unit(ax, name, f'{path}.axis'), actuated=bool(lp.get('actuated', False))))
    return out


def _overlay_imus(value: Any, where_is: Mapping[str, tuple[int, np.ndarray]],
                  name: str) -> tuple[SpatialImu, ...]:
    """The overlay's ``imus:`` list (module docstring)."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise MechanismError('expected a list of IMUs', source=name, path='imus')
    allowed = {'name', 'link', 'origin', 'frame_id', 'topic', 'gyro_range', 'accel_range'}
    out: list[SpatialImu] = []
    for i, item in enumerate(value):
        path = f'imus[{i}]'
        _check_entry(item, allowed, name, path)
        if 'name' not in item:
            raise MechanismError("missing key 'name'", source=name, path=path)
        nm = str(item['name'])
        if any(s.name == nm for s in out):
            raise MechanismError(f'duplicate IMU name {nm!r}', source=name, path=f'{path}.name')
        frame_id = str(item.get('frame_id', item.get('link', nm)))
        link = str(item.get('link', frame_id))
        if link not in where_is:
            raise MechanismError(f'unknown link {link!r} (links: {", ".join(where_is)})',
                                 source=name, path=f'{path}.link' if 'link' in item
                                 else f'{path}.frame_id')
        ranges = []
        for key, default in (('gyro_range', 1.0e3), ('accel_range', 1.0e4)):
            try:
                r = float(item.get(key, default))
            except (TypeError, ValueError):
                r = math.nan
            if not r > 0:
                raise MechanismError(f'expected a positive number, got {item.get(key)!r}',
                                     source=name, path=f'{path}.{key}')
            ranges.append(r)
        topic = str(item.get('topic', f'imu/{nm}'))
        problem = topic_problem(topic)
        if problem:
            raise MechanismError(problem, source=name,
                                 path=f'{path}.topic' if 'topic' in item else f'{path}.name')
        b, T = where_is[link]
        Tm = T @ _origin(item.get('origin'), name, f'{path}.origin')
        Tm.setflags(write=False)
        out.append(SpatialImu(name=nm, link=b, T_mount=Tm, frame_id=frame_id,
                              topic=topic,
                              gyro_range=ranges[0], accel_range=ranges[1]))
    return tuple(out)
