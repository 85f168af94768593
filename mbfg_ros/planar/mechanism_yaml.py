"""The mechanism YAML parser: text → the immutable :class:`~mbfg_ros.planar.model.Mechanism`.

Reads the upstream format of seed 000's reference library verbatim
(``parameters``, ``points``, ``planar_bodies``, ``relative_coordinates``;
Listing 1 of seed 000) plus the extensions documented in the README
(gravity, sliders, forces, torques, springs, point masses, actuators, joints,
sensors). Every error names the file and the key (:class:`MechanismError`);
duplicate keys are an error naming both lines.
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from ..core.names import topic_problem
from ..core.errors import ExpressionError, MechanismError
from .expr import evaluate
from .model import (
    GROUND,
    Actuator,
    Body,
    BodyTorque,
    Friction,
    Imu,
    Joint,
    JointLimits,
    Mechanism,
    Point,
    PointForce,
    RelativeCoordinate,
    RotationalSpring,
    Slider,
    Spring,
)

__all__ = ['load_mechanism', 'parse_mechanism', 'load_yaml', 'DuplicateKeyError']


_TOP_KEYS = {'parameters', 'points', 'planar_bodies', 'relative_coordinates', 'gravity',
             'sliders', 'forces', 'torques', 'springs', 'rotational_springs', 'point_masses',
             'actuators', 'joints', 'sensors', 'name', 'description'}


class _Ctx:
    """Parsing context: the file name and the namespace for expressions."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.names: dict[str, float] = {}
        self.refs: dict[str, list[str]] = {}     # 'point'/'body'/'slider' -> names by index

    def error(self, path: str, message: str) -> MechanismError:
        return MechanismError(message, source=self.source, path=path)

    def number(self, value: Any, path: str, extra: Mapping[str, float] | None = None) -> float:
        names = dict(self.names)
        if extra:
            names.update(extra)
        try:
            return evaluate(value, names)
        except ExpressionError as exc:
            raise self.error(path, str(exc)) from None

    def mapping(self, value: Any, path: str, allowed: set[str], required: Sequence[str] = ()
                ) -> dict:
        if not isinstance(value, dict):
            raise self.error(path, f'expected a mapping, got {type(value).__name__}')
        for key in value:
            if key not in allowed:
                raise self.error(f'{path}.{key}' if path else str(key),
                                 f'unknown key {key!r} (allowed: {", ".join(sorted(allowed))})')
        for key in required:
            if key not in value:
                raise self.error(path, f'missing required key {key!r}')
        return value

    def sequence(self, value: Any, path: str) -> list:
        if not isinstance(value, list):
            raise self.error(path, f'expected a list, got {type(value).__name__}')
        return value

    def index(self, value: Any, path: str, count: int, what: str) -> int:
        """A reference to a point, body or slider: its index, or its ``name``."""
        names = self.refs.get(what)
        if isinstance(value, str) and names is not None:
            hits = [k for k, n in enumerate(names) if n == value]
            if len(hits) == 1:
                return hits[0]
            if hits:
                raise self.error(path, f'{what} name {value!r} is ambiguous: {what}s {hits} '
                                 'have it')
            raise self.error(path, f'unknown {what} {value!r} (known: '
                             f'{", ".join(names)}, or an index 0..{count - 1})')
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(path, f'expected a {what} index or name, got {value!r}')
        if not 0 <= value < count:
            raise self.error(path, f'{what} index {value} out of range 0..{count - 1}')
        return value

    def body_ref(self, value: Any, path: str, count: int) -> int:
        if value == 'ground':
            return GROUND
        return self.index(value, path, count, 'body')

    def pair(self, value: Any, path: str) -> tuple[float, float]:
        seq = self.sequence(value, path)
        if len(seq) != 2:
            raise self.error(path, f'expected 2 numbers, got {len(seq)}')
        return (self.number(seq[0], f'{path}[0]'), self.number(seq[1], f'{path}[1]'))

    def name(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(path, f'expected a non-empty name, got {value!r}')
        return value


class DuplicateKeyError(yaml.YAMLError):
    """A mapping repeats a key (YAML 1.2 forbids it; PyYAML would keep the last value)."""

    def __init__(self, key: str, line: int, first: int) -> None:
        super().__init__(f'duplicate key {key!r} (lines {first} and {line}): '
                         'YAML keeps only the last value; remove one')
        self.line = line
        self.first = first


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping, naming both lines."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:          # unhashable key: SafeLoader reports it below
                continue
            if first is not None:
                raise DuplicateKeyError(str(key), line, first)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that also rejects duplicate keys (:class:`DuplicateKeyError`)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)


def load_mechanism(path: str | Path) -> Mechanism:
    """Read a mechanism YAML file and return the (unassembled) :class:`Mechanism`.

    :raises MechanismError: naming the file and YAML path of any problem.
    """
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise MechanismError(f'cannot read file: {exc.strerror}', source=source) from None
    except UnicodeDecodeError as exc:           # issue 26: a binary file
        raise MechanismError(f'not a text file (byte {exc.start} is not UTF-8)',
                             source=source) from None
    return parse_mechanism(text, source=source)


def parse_mechanism(text: str, *, source: str = '<string>') -> Mechanism:
    """Parse mechanism YAML text (see :func:`load_mechanism`)."""
    ctx = _Ctx(source)
    try:
        doc = load_yaml(text)
    except DuplicateKeyError as exc:
        raise ctx.error(f'line {exc.line}', str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = f'line {mark.line + 1}' if mark is not None else 'document'
        raise ctx.error(where, f'invalid YAML: {getattr(exc, "problem", exc)}') from None
    except (RecursionError, MemoryError):       # issue 26: '[' x 10 000
        raise ctx.error('document', 'invalid YAML: nested too deeply') from None
    except ValueError as exc:                   # issue 26: an integer of 5000 digits
        raise ctx.error('document', f'invalid YAML: {exc}') from None
    if not isinstance(doc, dict):
        raise ctx.error('', 'expected a mapping at the top level')
    ctx.mapping(doc, '', _TOP_KEYS, required=('points', 'planar_bodies'))

    params = doc.get('parameters') or {}
    ctx.mapping(params, 'parameters', set(params) if isinstance(params, dict) else set())
    for key, value in params.items():
        ctx.names[str(key)] = ctx.number(value, f'parameters.{key}')
    parameters = dict(ctx.names)

    points = _parse_points(ctx, doc['points'])
    P = len(points)
    bodies = _parse_bodies(ctx, doc['planar_bodies'], points)
    B = len(bodies)
    relative = _parse_relative(ctx, doc.get('relative_coordinates') or [], P, B)
    sliders = _parse_sliders(ctx, doc.get('sliders') or [], points)

    gravity = (0.0, -9.81)
    if 'gravity' in doc:
        gravity = ctx.pair(doc['gravity'], 'gravity')

    forces = []
    for k, item in enumerate(ctx.sequence(doc.get('forces') or [], 'forces')):
        path = f'forces[{k}]'
        ctx.mapping(item, path, {'point', 'body', 'at', 'fx', 'fy'})
        if ('point' in item) == ('body' in item):
            raise ctx.error(path, "give exactly one of 'point' or 'body'")
        fx = ctx.number(item.get('fx', 0.0), f'{path}.fx')
        fy = ctx.number(item.get('fy', 0.0), f'{path}.fy')
        if 'point' in item:
            forces.append(PointForce(fx, fy, point=ctx.index(item['point'], f'{path}.point',
                                                             P, 'point')))
        else:
            at = ctx.pair(item['at'], f'{path}.at') if 'at' in item else (0.0, 0.0)
            forces.append(PointForce(fx, fy, body=ctx.index(item['body'], f'{path}.body', B,
                                                            'body'), at=at))

    torques = []
    for k, item in enumerate(ctx.sequence(doc.get('torques') or [], 'torques')):
        path = f'torques[{k}]'
        ctx.mapping(item, path, {'body', 'torque'}, required=('body', 'torque'))
        torques.append(BodyTorque(ctx.index(item['body'], f'{path}.body', B, 'body'),
                                  ctx.number(item['torque'], f'{path}.torque')))

    springs = []
    for k, item in enumerate(ctx.sequence(doc.get('springs') or [], 'springs')):
        path = f'springs[{k}]'
        ctx.mapping(item, path, {'points', 'k', 'c', 'length'}, required=('points', 'k'))
        pts = _index_list(ctx, item['points'], f'{path}.points', P, 'point', exact=2)
        pa, pb = points[pts[0]], points[pts[1]]
        auto = math.hypot(pb.x - pa.x, pb.y - pa.y)
        length = auto if item.get('length', 'auto') == 'auto' else \
            ctx.number(item['length'], f'{path}.length')
        springs.append(Spring((pts[0], pts[1]), ctx.number(item['k'], f'{path}.k'),
                              ctx.number(item.get('c', 0.0), f'{path}.c'), length))

    partial = Mechanism(source=source, name='', points=points, bodies=bodies, relative=())
    rsprings = []
    for k, item in enumerate(ctx.sequence(doc.get('rotational_springs') or [],
                                          'rotational_springs')):
        path = f'rotational_springs[{k}]'
        ctx.mapping(item, path, {'bodies', 'k', 'c', 'angle'}, required=('bodies', 'k'))
        bb = _body_pair(ctx, item['bodies'], f'{path}.bodies', B)
        auto = partial.body_angle_at_pose(bb[1]) - partial.body_angle_at_pose(bb[0])
        angle = auto if item.get('angle', 'auto') == 'auto' else \
            ctx.number(item['angle'], f'{path}.angle')
        rsprings.append(RotationalSpring(bb, ctx.number(item['k'], f'{path}.k'),
                                         ctx.number(item.get('c', 0.0), f'{path}.c'), angle))

    point_masses = []
    for k, item in enumerate(ctx.sequence(doc.get('point_masses') or [], 'point_masses')):
        path = f'point_masses[{k}]'
        ctx.mapping(item, path, {'point', 'mass'}, required=('point', 'mass'))
        mass = ctx.number(item['mass'], f'{path}.mass')
        if mass < 0:
            raise ctx.error(f'{path}.mass', f'mass must be >= 0, got {mass}')
        point_masses.append((ctx.index(item['point'], f'{path}.point', P, 'point'), mass))

    joints = _parse_joints(ctx, doc.get('joints') or [], B, len(sliders))
    mech = Mechanism(source=source, name=str(doc.get('name', Path(source).stem)),
                     points=points, bodies=bodies, relative=relative, sliders=sliders,
                     gravity=gravity, forces=tuple(forces), torques=tuple(torques),
                     springs=tuple(springs), rotational_springs=tuple(rsprings),
                     point_masses=tuple(point_masses), joints=joints,
                     parameters=parameters)
    actuators = _parse_actuators(ctx, doc.get('actuators') or [], mech)
    sensors = _parse_sensors(ctx, doc.get('sensors') or [], B)
    mech = Mechanism(**{**mech.__dict__, 'actuators': actuators, 'sensors': sensors})
    return mech


def _index_list(ctx: _Ctx, value: Any, path: str, count: int, what: str,
                exact: int | None = None, minimum: int = 0) -> list[int]:
    seq = ctx.sequence(value, path)
    if exact is not None and len(seq) != exact:
        raise ctx.error(path, f'expected {exact} {what} indices, got {len(seq)}')
    if len(seq) < minimum:
        raise ctx.error(path, f'expected at least {minimum} {what} indices, got {len(seq)}')
    out = [ctx.index(v, f'{path}[{k}]', count, what) for k, v in enumerate(seq)]
    if len(set(out)) != len(out):
        raise ctx.error(path, f'repeated {what} index in {out}')
    return out


def _body_pair(ctx: _Ctx, value: Any, path: str, count: int) -> tuple[int, int]:
    seq = ctx.sequence(value, path)
    if len(seq) != 2:
        raise ctx.error(path, f'expected 2 bodies, got {len(seq)}')
    a = ctx.body_ref(seq[0], f'{path}[0]', count)
    b = ctx.body_ref(seq[1], f'{path}[1]', count)
    if a == b:
        raise ctx.error(path, 'the two bodies must differ')
    return a, b


def _parse_points(ctx: _Ctx, value: Any) -> tuple[Point, ...]:
    points = []
    for i, item in enumerate(ctx.sequence(value, 'points')):
        path = f'points[{i}]'
        ctx.mapping(item, path, {'x', 'y', 'fixed', 'name', 'exact'}, required=('x', 'y'))
        x = ctx.number(item['x'], f'{path}.x')
        y = ctx.number(item['y'], f'{path}.y')
        fixed = item.get('fixed', False)
        if not isinstance(fixed, bool):
            raise ctx.error(f'{path}.fixed', f'expected true or false, got {fixed!r}')
        exact = item.get('exact', False)
        if not isinstance(exact, bool):
            raise ctx.error(f'{path}.exact', f'expected true or false, got {exact!r}')
        name = ctx.name(item['name'], f'{path}.name') if 'name' in item else f'p{i}'
        points.append(Point(x, y, fixed, name, exact))
        ctx.names[f'x{i}'] = x
        ctx.names[f'y{i}'] = y
    if not points:
        raise ctx.error('points', 'a mechanism needs at least one point')
    ctx.refs['point'] = [p.name for p in points]
    return tuple(points)


def _parse_bodies(ctx: _Ctx, value: Any, points: Sequence[Point]) -> tuple[Body, ...]:
    bodies = []
    for b, item in enumerate(ctx.sequence(value, 'planar_bodies')):
        path = f'planar_bodies[{b}]'
        ctx.mapping(item, path, {'points', 'length', 'mass', 'I0', 'cog', 'visual', 'name'},
                    required=('points', 'mass', 'I0'))
        pts = _index_list(ctx, item['points'], f'{path}.points', len(points), 'point',
                          minimum=2)
        local = {'index': float(b + 1)}  # upstream: 1-based body index
        for (a, pa), (c, pc) in itertools.combinations(enumerate(pts), 2):
            d = math.hypot(points[pc].x - points[pa].x, points[pc].y - points[pa].y)
            local[f'length{a + 1}{c + 1}'] = d
        auto = local['length12']
        if auto <= 1e-12:
            raise ctx.error(f'{path}.points', 'the first two points coincide')
        if len(pts) == 2 and item.get('length', 'auto') != 'auto':
            length = ctx.number(item['length'], f'{path}.length', local)
            if length <= 0:
                raise ctx.error(f'{path}.length', f'length must be > 0, got {length}')
        else:
            length = auto  # upstream: length is ignored for 3+ point bodies
        local['length'] = length
        mass = ctx.number(item['mass'], f'{path}.mass', local)
        if mass < 0:
            raise ctx.error(f'{path}.mass', f'mass must be >= 0, got {mass}')
        local['mass'] = mass
        I0 = ctx.number(item['I0'], f'{path}.I0', local)
        if I0 < 0:
            raise ctx.error(f'{path}.I0', f'I0 must be >= 0, got {I0}')
        cog = (0.0, 0.0)
        if 'cog' in item:
            seq = ctx.sequence(item['cog'], f'{path}.cog')
            if len(seq) != 2:
                raise ctx.error(f'{path}.cog', f'expected 2 numbers, got {len(seq)}')
            cog = (ctx.number(seq[0], f'{path}.cog[0]', local),
                   ctx.number(seq[1], f'{path}.cog[1]', local))
        # issue 26: the inertia about the centre of mass, I0 - m|cog|^2 (parallel axis), is
        # >= 0 for a physical body; a small relative slack for rounded YAML values
        i_cog = I0 - mass * (cog[0] ** 2 + cog[1] ** 2)
        if i_cog < -1e-9 * max(I0, 1.0):
            raise ctx.error(f'{path}.I0', f'I0 = {I0:g} is below mass*|cog|^2 = '
                            f'{mass * (cog[0] ** 2 + cog[1] ** 2):g}: the inertia about the '
                            'centre of mass would be negative (I0 is about the first point)')
        if len(pts) >= 3:
            p0, p1 = points[pts[0]], points[pts[1]]
            ux, uy = p1.x - p0.x, p1.y - p0.y
            for k in pts[2:]:
                cross = ux * (points[k].y - p0.y) - uy * (points[k].x - p0.x)
                if abs(cross) <= 1e-9 * (ux * ux + uy * uy):
                    raise ctx.error(f'{path}.points',
                                    f'point {k} is colinear with points {pts[0]} and {pts[1]}:'
                                    ' distances cannot make this body rigid')
        name = ctx.name(item['name'], f'{path}.name') if 'name' in item else f'body{b}'
        bodies.append(Body(name, tuple(pts), length, mass, I0, cog))
    if not bodies:
        raise ctx.error('planar_bodies', 'a mechanism needs at least one body')
    ctx.refs['body'] = [b.name for b in bodies]
    return tuple(bodies)


_REL_TYPES = ('RelativeAngleAbsoluteDOF', 'RelativeAngle')


def _parse_relative(ctx: _Ctx, value: Any, P: int, B: int) -> tuple[RelativeCoordinate, ...]:
    out = []
    for k, item in enumerate(ctx.sequence(value, 'relative_coordinates')):
        path = f'relative_coordinates[{k}]'
        ctx.mapping(item, path, {'type', 'points', 'bodies', 'name'}, required=('type',))
        typ = item['type']
        name = ctx.name(item['name'], f'{path}.name') if 'name' in item else f'theta{k}'
        if typ == 'RelativeAngleAbsoluteDOF':
            if 'points' not in item:
                raise ctx.error(path, "missing required key 'points'")
            pts = _index_list(ctx, item['points'], f'{path}.points', P, 'point', exact=2)
            out.append(RelativeCoordinate(name, typ, points=(pts[0], pts[1])))
        elif typ == 'RelativeAngle':
            if 'bodies' not in item:
                raise ctx.error(path, "missing required key 'bodies'")
            out.append(RelativeCoordinate(name, typ,
                                          bodies=_body_pair(ctx, item['bodies'],
                                                            f'{path}.bodies', B)))
        else:
            raise ctx.error(f'{path}.type',
                            f'unknown type {typ!r} (known: {", ".join(_REL_TYPES)})')
    names = [r.name for r in out]
    if len(set(names)) != len(names):
        raise ctx.error('relative_coordinates', f'repeated name in {names}')
    return tuple(out)


def _parse_sliders(ctx: _Ctx, value: Any, points: Sequence[Point]) -> tuple[Slider, ...]:
    out = []
    for k, item in enumerate(ctx.sequence(value, 'sliders')):
        path = f'sliders[{k}]'
        ctx.mapping(item, path, {'point', 'line', 'through', 'name'}, required=('point',))
        p = ctx.index(item['point'], f'{path}.point', len(points), 'point')
        if ('line' in item) == ('through' in item):
            raise ctx.error(path, "give exactly one of 'line' (two point indices) or "
                            "'through' (two [x, y] pairs)")
        line = through = None
        if 'line' in item:
            a, b = _index_list(ctx, item['line'], f'{path}.line', len(points), 'point', exact=2)
            if p in (a, b):
                raise ctx.error(f'{path}.line', 'the slider point cannot define its own line')
            line = (a, b)
            ends = ((points[a].x, points[a].y), (points[b].x, points[b].y))
        else:
            seq = ctx.sequence(item['through'], f'{path}.through')
            if len(seq) != 2:
                raise ctx.error(f'{path}.through', f'expected two [x, y] pairs, got {len(seq)}')
            through = (ctx.pair(seq[0], f'{path}.through[0]'),
                       ctx.pair(seq[1], f'{path}.through[1]'))
            ends = through
        if math.hypot(ends[1][0] - ends[0][0], ends[1][1] - ends[0][1]) <= 1e-12:
            raise ctx.error(path, 'the two points that define the line coincide')
        name = ctx.name(item['name'], f'{path}.name') if 'name' in item else f'slider{k}'
        out.append(Slider(name, p, line, through))
    ctx.refs['slider'] = [sl.name for sl in out]
    return tuple(out)


def _parse_joints(ctx: _Ctx, value: Any, B: int, S: int) -> tuple[Joint, ...]:
    out = []
    for k, item in enumerate(ctx.sequence(value, 'joints')):
        path = f'joints[{k}]'
        ctx.mapping(item, path, {'name', 'type', 'bodies', 'slider', 'offset', 'limits',
                                 'friction'},
                    required=('name', 'type'))
        name = ctx.name(item['name'], f'{path}.name')
        offset = ctx.number(item.get('offset', 0.0), f'{path}.offset')
        limits = _parse_limits(ctx, item.get('limits', {}), f'{path}.limits')
        friction = _parse_friction(ctx, item['friction'], f'{path}.friction') \
            if 'friction' in item else None
        if friction is not None and item['type'] != 'revolute':
            raise ctx.error(f'{path}.friction', 'friction is implemented for revolute joints '
                            'only')
        if item['type'] == 'revolute':
            if 'bodies' not in item:
                raise ctx.error(path, "missing required key 'bodies'")
            out.append(Joint(name, 'revolute',
                             bodies=_body_pair(ctx, item['bodies'], f'{path}.bodies', B),
                             offset=offset, limits=limits, friction=friction))
        elif item['type'] == 'prismatic':
            if 'slider' not in item:
                raise ctx.error(path, "missing required key 'slider'")
            out.append(Joint(name, 'prismatic',
                             slider=ctx.index(item['slider'], f'{path}.slider', S, 'slider'),
                             offset=offset, limits=limits))
        else:
            raise ctx.error(f'{path}.type',
                            f"unknown joint type {item['type']!r} (known: revolute, prismatic)")
    names = [j.name for j in out]
    if len(set(names)) != len(names):
        raise ctx.error('joints', f'repeated joint name in {names}')
    return tuple(out)


def _positive(ctx: _Ctx, value: Any, path: str) -> float:
    v = ctx.number(value, path)
    if not v > 0:
        raise ctx.error(path, f'must be a positive number, got {v!r}')
    return v


def _nonnegative(ctx: _Ctx, value: Any, path: str) -> float:
    v = ctx.number(value, path)
    if not v >= 0:
        raise ctx.error(path, f'must be zero or positive, got {v!r}')
    return v


def _parse_friction(ctx: _Ctx, value: Any, path: str) -> Friction:
    """``friction: {b, fc, v_s, smooth, fs, v_st}`` (each optional; see :class:`Friction`)."""
    ctx.mapping(value, path, {'b', 'fc', 'v_s', 'smooth', 'fs', 'v_st'})
    d = Friction()
    b = _nonnegative(ctx, value.get('b', d.b), f'{path}.b')
    fc = _nonnegative(ctx, value.get('fc', d.fc), f'{path}.fc')
    v_s = _positive(ctx, value.get('v_s', d.v_s), f'{path}.v_s')
    smooth = value.get('smooth', d.smooth)
    if smooth not in ('tanh', 'atan'):
        raise ctx.error(f'{path}.smooth', f'unknown smooth sign {smooth!r} (known: tanh, atan)')
    fs = _nonnegative(ctx, value['fs'], f'{path}.fs') if 'fs' in value else fc
    v_st = _positive(ctx, value.get('v_st', d.v_st), f'{path}.v_st')
    return Friction(b, fc, v_s, smooth, fs, v_st)


def _parse_limits(ctx: _Ctx, value: Any, path: str) -> JointLimits:
    """``limits: {position: [lo, hi], velocity: v, effort: e}`` (each optional)."""
    ctx.mapping(value, path, {'position', 'velocity', 'effort'})
    d = JointLimits()
    pos = d.position
    if 'position' in value:
        pos = ctx.pair(value['position'], f'{path}.position')
        if not pos[0] < pos[1]:
            raise ctx.error(f'{path}.position', f'expected [lower, upper] with lower < upper, '
                            f'got {list(pos)}')
    vel = _positive(ctx, value['velocity'], f'{path}.velocity') if 'velocity' in value \
        else d.velocity
    eff = _positive(ctx, value['effort'], f'{path}.effort') if 'effort' in value else d.effort
    return JointLimits(pos, vel, eff)


def _parse_actuators(ctx: _Ctx, value: Any, mech: Mechanism) -> tuple[Actuator, ...]:
    out = []
    joints = {j.name for j in mech.joints}
    for k, item in enumerate(ctx.sequence(value, 'actuators')):
        path = f'actuators[{k}]'
        ctx.mapping(item, path, {'name', 'coordinate', 'joint', 'Ir', 'gr'}, required=('name',))
        name = ctx.name(item['name'], f'{path}.name')
        if ('coordinate' in item) == ('joint' in item):
            raise ctx.error(path, "give exactly one of 'coordinate' or 'joint'")
        Ir = _nonnegative(ctx, item.get('Ir', 0.0), f'{path}.Ir')
        gr = ctx.number(item.get('gr', 1.0), f'{path}.gr')
        if not math.isfinite(gr) or gr == 0:
            raise ctx.error(f'{path}.gr',
                            f'the gear ratio must be finite and non-zero, got {gr!r}')
        if 'coordinate' in item:
            c = mech.coordinate(item['coordinate'], path=f'{path}.coordinate')
            rotor = _rotor(ctx, mech, _coordinate_bodies(ctx, mech, c, f'{path}.Ir'),
                           f'{path}.Ir') if Ir else None
            if not Ir and c >= mech.n - len(mech.relative):
                try:        # for identification only: the rotor coordinates, when they exist
                    rotor = _rotor(ctx, mech, _coordinate_bodies(ctx, mech, c, f'{path}.Ir'),
                                   f'{path}.Ir', required=False)
                except MechanismError:
                    rotor = None
            out.append(Actuator(name, coordinate=c, Ir=Ir, gr=gr, rotor=rotor))
        else:
            joint = item['joint']
            if joint not in joints:
                raise ctx.error(f'{path}.joint', f'unknown joint {joint!r} '
                                f'(joints: {", ".join(sorted(joints)) or "none"})')
            if mech.joint(joint).type != 'revolute':
                raise ctx.error(f'{path}.joint', f'joint {joint!r} is not revolute; drive a '
                                'prismatic joint through a coordinate instead')
            rotor = _rotor(ctx, mech, mech.joint(joint).bodies, f'{path}.Ir', required=bool(Ir))
            out.append(Actuator(name, joint=joint, Ir=Ir, gr=gr, rotor=rotor))
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise ctx.error('actuators', f'repeated actuator name in {names}')
    return tuple(out)


def _coordinate_bodies(ctx: _Ctx, mech: Mechanism, c: int, path: str) -> tuple[int, int]:
    """The (base, driven) bodies of a relative-angle coordinate, for a rotor on it."""
    base = mech.n - len(mech.relative)
    if c < base:
        raise ctx.error(path, f'a rotor needs a revolute joint or a relative angle; coordinate '
                        f'{mech.coordinate_names[c]!r} is a point coordinate')
    r = mech.relative[c - base]
    if r.bodies is not None:
        return r.bodies
    for b, body in enumerate(mech.bodies):
        if tuple(body.points[:2]) == tuple(r.points):
            return (GROUND, b)
    raise ctx.error(path, f'coordinate {r.name!r} is not the angle of a body (its points are '
                    'not the first two points of one body)')


def _rotor(ctx: _Ctx, mech: Mechanism, bodies: tuple[int, int], path: str,
           required: bool = True) -> tuple[int, int] | None:
    """Coordinates (carrier angle or −1, joint angle) that make ω_r = ω_carrier + gr·φ̇ linear.

    The rotor's kinetic energy is a constant quadratic form only in relative
    coordinates: the joint angle φ (and the carrier's absolute angle when the
    carrier is not the ground) must be coordinates of q. Not ``required`` (no
    ``Ir`` given; identification may still fit one): None when they are missing.
    """
    if not required:
        try:
            return _rotor(ctx, mech, bodies, path)
        except MechanismError:
            return None
    names = ctx.refs.get('body', [])

    def body_name(b: int) -> str:
        return 'ground' if b == GROUND else names[b]

    joint = mech.angle_coordinate(bodies)
    if joint is None:
        raise ctx.error(path, 'a rotor inertia needs the joint angle as a coordinate: add '
                        f'relative_coordinates: {{type: RelativeAngle, bodies: '
                        f'[{body_name(bodies[0])}, {body_name(bodies[1])}]}}')
    if bodies[0] == GROUND:
        return (-1, joint)
    carrier = mech.angle_coordinate((GROUND, bodies[0]))
    if carrier is None:
        raise ctx.error(path, 'a rotor carried by a moving body needs that body\'s absolute '
                        'angle as a coordinate: add relative_coordinates: {type: RelativeAngle, '
                        f'bodies: [ground, {body_name(bodies[0])}]}}')
    return (carrier, joint)


def _parse_sensors(ctx: _Ctx, value: Any, B: int) -> tuple[Imu, ...]:
    out = []
    for k, item in enumerate(ctx.sequence(value, 'sensors')):
        path = f'sensors[{k}]'
        ctx.mapping(item, path, {'name', 'type', 'body', 'point', 'angle', 'frame_id', 'topic',
                                 'gyro_range', 'accel_range'},
                    required=('name', 'type', 'body'))
        if item['type'] != 'imu':
            raise ctx.error(f'{path}.type', f"unknown sensor type {item['type']!r} (known: imu)")
        name = ctx.name(item['name'], f'{path}.name')
        point = ctx.pair(item['point'], f'{path}.point') if 'point' in item else (0.0, 0.0)
        topic = str(item.get('topic', f'imu/{name}'))
        if topic_problem(topic):                    # issue 26: refused here, not by rclpy
            raise ctx.error(f'{path}.topic' if 'topic' in item else f'{path}.name',
                            topic_problem(topic))
        out.append(Imu(name, ctx.index(item['body'], f'{path}.body', B, 'body'), point,
                       ctx.number(item.get('angle', 0.0), f'{path}.angle'),
                       str(item.get('frame_id', name)), topic,
                       _positive(ctx, item.get('gyro_range', Imu.gyro_range),
                                 f'{path}.gyro_range'),
                       _positive(ctx, item.get('accel_range', Imu.accel_range),
                                 f'{path}.accel_range')))
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise ctx.error('sensors', f'repeated sensor name in {names}')
    return tuple(out)
