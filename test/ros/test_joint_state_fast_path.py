"""The JointState bytes fast path of issue 24 (:meth:`JointStateReader.fast` on a
:class:`~mbfg_ros.ros.cdr.JointStateLayout` the parser learnt) queues what the general path
would, message by message, on every mechanism in config/: the same records bit for bit, the
same counters and notes; it is taken for streams with joints the model does not know (a
gripper's fingers beside the arm, a base's wheels) or only some of its joints, counting and
noting the unknown names as the general path does; and it is never taken for a message the
general path must look at (NaN or infinite values, the unknown joints' too, values out of
limits, repeated or no names, no known name, lengths that do not match the names, no value at
all, a zero stamp, a layout not seen before).

Driver ``fast`` reads the serialised bytes (as the live node takes them); driver ``slow``
the message rclpy deserialises from the same bytes (the general path, as before issue 24's
fast path). Values straddle each mechanism's own joint limits; the names, their order,
the sequences given and the frame_id change mid-stream.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState

from mbfg_ros.loader import load_mechanism
from mbfg_ros.ros import cdr
from mbfg_ros.ros.driver import EstimatorDriver
from mbfg_ros.ros.params import parse_estimator

CONFIG = Path(__file__).resolve().parents[2] / 'config'
SETTINGS = {'estimator.yaml', 'estimator_urdf.yaml', 'forward_command_controller.yaml',
            'simulator_noise.yaml', 'solo12_estimator.yaml'}      # parameter files
OVERLAYS = {'ur5.urdf': 'ur5_sensors.yaml', 'double_pendulum.urdf': 'double_pendulum_dfki.yaml',
            'five_bar.urdf': 'five_bar_loops.yaml', 'fourbar.urdf': 'fourbar_loops.yaml'}
FLOATING = {'solo12.urdf'}              # the floating-base node's robot, not this driver's
MECHANISMS = sorted(
    [(p.name, str(p), '') for p in CONFIG.glob('*.yaml') if p.name not in SETTINGS]
    + [(p.name, str(p), str(CONFIG / 'urdf' / OVERLAYS[p.name]) if p.name in OVERLAYS else '')
       for p in (CONFIG / 'urdf').glob('*.urdf') if p.name not in FLOATING])
T0 = 1_000_000_000


def _driver(source: str, overlay: str) -> EstimatorDriver:
    settings = parse_estimator({'mechanism': source, 'overlay': overlay, 'frequency': 1000.0,
                                'lag_duration': 0.1})
    return EstimatorDriver(load_mechanism(source, overlay), settings, live=True)


def _edge(lo: float, hi: float, rng) -> float:
    """A value near a finite bound of [lo, hi] (inside or out), or a plain one."""
    bounds = [b for b in (lo, hi) if math.isfinite(b)]
    if not bounds or rng.random() < 0.2:
        return float(rng.normal(0.0, 2.0))
    b = float(rng.choice(bounds))
    return b + (abs(b) + 0.1) * float(rng.uniform(-0.05, 0.05))


def _values(limits, n_given: int, rng, clean: bool) -> list[float]:
    lo, hi = limits
    out = []
    for j in range(n_given):
        lo_j = lo[j] if j < len(lo) else -math.inf
        hi_j = hi[j] if j < len(hi) else math.inf
        if clean:       # well inside
            mid = 0.0 if not (math.isfinite(lo_j) and math.isfinite(hi_j)) else (lo_j + hi_j) / 2
            out.append(float(np.clip(mid + rng.normal(0.0, 0.01), lo_j, hi_j)))
            continue
        u = rng.random()
        out.append(math.nan if u < 0.05 else math.inf if u < 0.08 else _edge(lo_j, hi_j, rng))
    return out


FINGERS = ['gripper_left_finger_joint', 'gripper_right_finger_joint']
WHEELS = ['wheel_left_joint', 'wheel_right_joint']


def _insert(names: list[str], others: list[str], rng) -> list[str]:
    """``others`` put at random places among ``names``."""
    out = list(names)
    for name in others:
        out.insert(int(rng.integers(0, len(out) + 1)), name)
    return out


def _subset(names: list[str], rng) -> list[str]:
    """Some of ``names`` (at least one, not all of two or more), in a random order."""
    k = int(rng.integers(1, len(names))) if len(names) > 1 else len(names)
    return [str(x) for x in rng.permutation(names)[:k]]


def _segment(joints: tuple[str, ...], rng) -> dict:
    """A stretch of messages that share names, sequences given and frame_id."""
    names = list(joints)
    u = rng.random()
    if u < 0.1:
        names = names[::-1]                                   # reordered
    elif u < 0.18:
        names = names + ['not_a_joint']                       # an unknown name
    elif u < 0.3:
        names = _insert(names, FINGERS, rng)                  # a gripper's fingers
    elif u < 0.4:
        names = _subset(names, rng)                           # only some joints
    elif u < 0.47:
        names = _insert(_subset(names, rng), WHEELS, rng)     # some, and a base's wheels
    elif u < 0.51 and names:
        names = names + names[:1]                             # repeated
    elif u < 0.54:
        names = []                                            # no names
    elif u < 0.57:
        names = ['not_a_joint']                               # nothing known
    elif u < 0.65:
        names = [str(x) for x in rng.permutation(names)]      # another order
    given = [bool(rng.random() < p) for p in (0.9, 0.5, 0.4)]
    return {'names': names, 'given': given,
            'short': bool(rng.random() < 0.05),               # a sequence one value short
            'frame': str(rng.choice(['', 'base', 'a_longer_frame_id']))}


def _message(seg: dict, limits: dict, k: int, rng, clean: bool) -> JointState:
    names = seg['names']
    msg = JointState(name=names)
    msg.header.frame_id = seg['frame']
    t = T0 + k * 1_000_000
    if rng.random() < 0.02:
        t = 0                                                 # zero stamp: the clock's time
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)
    for field, given, lim in zip(('position', 'velocity', 'effort'), seg['given'],
                                 limits[tuple(names)]):
        if given:
            n = max(0, len(names) - 1) if seg['short'] else len(names)
            setattr(msg, field, _values(lim, n, rng, clean))
    return msg


def _limits(driver: EstimatorDriver, names: tuple[str, ...]) -> tuple:
    """((lower, upper) of position, velocity, effort) of ``names`` as the driver's gate has
    them (an unknown or repeated name: unbounded)."""
    lo, hi, vmax, emax = (a.tolist() for a in driver.gate.arrays(names))
    return (lo, hi), ([-v for v in vmax], vmax), ([-e for e in emax], emax)


def _spy_fast(driver: EstimatorDriver) -> list:
    """What ``driver``'s :meth:`JointStateReader.fast` returns, call by call (None: the
    general path), appended to the list returned."""
    taken: list = []
    reader_fast = driver._joint_reader.fast

    def spy(*args, **kwargs):
        out = reader_fast(*args, **kwargs)
        taken.append(out)
        return out

    driver._joint_reader.fast = spy
    return taken


def _same_record(a, b) -> None:
    if a is None or b is None:
        assert a is None and b is None
        return
    assert type(a) is type(b) and a.t == b.t and a.names == b.names
    for f in ('position', 'velocity', 'effort', 'position_var', 'velocity_var'):
        x, y = getattr(a, f), getattr(b, f)
        if x is None or y is None:
            assert x is None and y is None, f
        else:
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), f


@pytest.mark.parametrize('name, source, overlay', MECHANISMS, ids=[m[0] for m in MECHANISMS])
def test_the_fast_path_queues_what_the_general_path_would(name, source, overlay):
    fast, slow = _driver(source, overlay), _driver(source, overlay)
    taken = _spy_fast(fast)
    rng = np.random.default_rng(sum(map(ord, name)))
    joints = fast.joint_names
    seg, previous, limits = _segment(joints, rng), None, {}
    seen = dict.fromkeys(('fast', 'general', 'fast, unknown names', 'fast, some joints'), 0)
    for k in range(500):
        if rng.random() < 0.08:
            seg = _segment(joints, rng)                       # the names change mid-stream
        key = tuple(seg['names'])
        if key not in limits:
            limits[key] = _limits(fast, key)
        clean = bool(rng.random() < 0.6)
        msg = _message(seg, limits, k, rng, clean)
        buf = serialize_message(msg)
        now = T0 + k * 1_000_000 + 200_000
        before = dict(fast.counters)
        got = fast.joint_state(buf, now)
        want = slow.joint_state(deserialize_message(buf, JointState), now)
        _same_record(got, want)
        assert fast.counters == slow.counters and fast.events == slow.events
        # the fast path only where the general one would have queued the record untouched
        # (the unknown names counted, nothing else)
        unknown = sum(name not in joints for name in key)
        general_clean = (got is not None and fast.counters['queued'] == before['queued'] + 1
                         and fast.counters == {**before, 'received': before['received'] + 1,
                                               'queued': before['queued'] + 1,
                                               'unknown_joint': before['unknown_joint']
                                               + unknown}
                         and msg.header.stamp.sec + msg.header.stamp.nanosec > 0)
        if taken[-1]:
            assert general_clean, (k, seg, msg)
        layout = (key, seg['frame'], tuple(len(getattr(msg, f)) for f in
                                          ('position', 'velocity', 'effort')))
        if general_clean and layout == previous:
            assert taken[-1], (k, seg, msg)                   # a known layout: fast
        previous = layout
        seen['fast' if taken[-1] else 'general'] += 1
        if taken[-1] and unknown:
            seen['fast, unknown names'] += 1
        if taken[-1] and len(got.names) < len(joints):
            seen['fast, some joints'] += 1
    assert _queue(fast) == _queue(slow)
    assert seen['general'] > 20, seen
    if joints:
        assert seen['fast'] > 100, seen
        assert seen['fast, unknown names'] > 4, seen
    if len(joints) > 1:
        assert seen['fast, some joints'] > 4, seen


def _queue(driver: EstimatorDriver) -> list:
    return [(key, rec.t, rec.names, rec.position.tobytes(), rec.velocity.tobytes(),
             rec.effort.tobytes()) for key, rec, _ in sorted(driver._queue, key=lambda e: e[0])]


def test_a_layout_reads_only_messages_of_its_own_layout():
    """Same size, other names, counts, frame_id length or encapsulation: not this layout
    (the general parser reads them, and learns theirs)."""
    def buf(names=('a',), frame='', **values) -> bytes:
        msg = JointState(name=list(names), **values)
        msg.header.frame_id = frame
        msg.header.stamp.sec, msg.header.stamp.nanosec = 3, 4
        return serialize_message(msg)

    parser = cdr.JointStateParser()
    first = buf(position=[1.0, 2.0])
    parser(first)
    layout = parser.layout(first)
    assert layout.names == ('a',) and layout.counts == (2, 0, 0)
    again = buf(position=[5.0, -6.0])
    values = layout.read(again)
    assert values[:2] == (3, 4)
    assert [values[layout.starts[0] + j] for j in range(2)] == [5.0, -6.0]
    others = [buf(names=('b',), position=[1.0, 2.0]),
              buf(position=[1.0], velocity=[2.0]),
              buf(position=[1.0], effort=[2.0]),
              buf(velocity=[1.0, 2.0]),
              buf(frame='x', position=[1.0, 2.0])]
    for other in others:
        assert len(other) == len(first) and parser.layout(other) is layout
        assert layout.read(other) is None
    big_endian = b'\x00\x00' + again[2:]
    assert layout.read(big_endian) is None
    assert layout.read(again + b'\x00' * 8) is None       # another size
    parser(others[1])                                     # learns the new one at that size
    assert parser.layout(first).counts == (1, 1, 0)
    assert parser.layout(first).read(first) is None


def test_a_layout_does_not_read_padding_bytes():
    """Serialisers leave padding uninitialised (rclpy's serialisation of the same message
    gives other padding bytes from call to call): a message differing from the learnt one
    only there has its layout; the names' own bytes do count."""
    msg = JointState(name=['coupler_joint', 'crank'], position=[0.5, -0.25])
    msg.header.stamp.sec = 7
    first = serialize_message(msg)
    parser = cdr.JointStateParser()
    parser(first)
    layout = parser.layout(first)
    at = first.index(b'coupler_joint\x00') + 14            # the two bytes before 'crank'
    other = bytearray(first)
    other[at:at + 2] = b'\xab\xcd'
    values = layout.read(bytes(other))
    assert values is not None and values[:2] == (7, 0)
    assert [values[layout.starts[0] + j] for j in range(2)] == [0.5, -0.25]
    other[at - 3] ^= 1                                     # a name's byte
    assert layout.read(bytes(other)) is None


def test_an_unknown_joints_nonfinite_value_takes_the_general_path():
    """A UR5 stream with a gripper's two fingers: the fast path queues its messages once their
    layout is known, counting and noting the fingers as the general path does; a NaN or an
    infinity in a finger's column (which the general path counts in ``nonfinite_values``,
    though it ignores the column) sends that message the general path's way."""
    source = str(CONFIG / 'urdf' / 'ur5.urdf')
    overlay = str(CONFIG / 'urdf' / 'ur5_sensors.yaml')
    fast, slow = _driver(source, overlay), _driver(source, overlay)
    taken = _spy_fast(fast)
    names = list(fast.joint_names[:3]) + FINGERS + list(fast.joint_names[3:])
    fingers = [names.index(f) for f in FINGERS]
    bad = {3: (0, math.nan), 4: (1, math.inf), 5: (0, -math.inf)}   # message: (finger, value)
    for k in range(8):
        msg = JointState(name=names, position=[0.01 * j for j in range(len(names))],
                         velocity=[0.0] * len(names))
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(T0 + k * 1_000_000, 10**9)
        if k in bad:
            finger, value = bad[k]
            msg.position[fingers[finger]] = value
        buf = serialize_message(msg)
        now = T0 + k * 1_000_000 + 200_000
        got = fast.joint_state(buf, now)
        want = slow.joint_state(deserialize_message(buf, JointState), now)
        _same_record(got, want)
        assert got.names == fast.joint_names
        assert fast.counters == slow.counters and fast.events == slow.events
        assert (taken[-1] is not None) == (k > 0 and k not in bad), k
    assert fast.counters['nonfinite_values'] == len(bad)
    assert fast.counters['unknown_joint'] == 8 * len(FINGERS)
    assert fast.counters['queued'] == 8
    assert [c for c, _ in fast.events] == ['joint_states:unknown'] * 8
    assert _queue(fast) == _queue(slow)
