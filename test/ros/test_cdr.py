"""The node's raw CDR readers (mbfg_ros/ros/cdr.py, issue 24) against rclpy's own
serialisation and deserialisation: many random messages, the records they make, and bytes
that are not a message (truncated, corrupted, another encapsulation)."""
from __future__ import annotations

import numpy as np
import pytest

from rclpy.serialization import deserialize_message as deserialize
from rclpy.serialization import serialize_message as serialize
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState

from mbfg_ros.ros import cdr
from mbfg_ros.ros import conversions as cv

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 1e308])


def _values(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=n) * 10.0 ** rng.integers(-3, 4)
    if n and rng.random() < 0.3:
        v[rng.integers(0, n)] = rng.choice(SPECIAL)
    return v


def random_joint_state(rng: np.random.Generator) -> JointState:
    """Names of every length (0-9 characters, non-ASCII too: alignment and UTF-8), each
    array given or empty, now and then a wrong length; a frame_id of any length."""
    n = int(rng.integers(0, 8))
    pool = ['j', 'shoulder_pan_joint', 'é', 'wrist_3', 'ab', 'abc', 'abcd', 'x' * 9, 'crank',
            'coupler_joint', '关节']
    names = list(rng.choice(pool, size=n, replace=rng.random() < 0.1)) if n else []
    msg = JointState()
    msg.header.stamp.sec = int(rng.integers(0, 2**31 - 1))
    msg.header.stamp.nanosec = int(rng.integers(0, 10**9))
    msg.header.frame_id = 'f' * int(rng.integers(0, 12))
    msg.name = [str(x) for x in names]
    for field in ('position', 'velocity', 'effort'):
        if rng.random() < 0.6:
            size = n if rng.random() < 0.9 else int(rng.integers(0, 9))
            setattr(msg, field, _values(rng, size).tolist())
    return msg


def random_imu(rng: np.random.Generator) -> Imu:
    msg = Imu()
    msg.header.stamp.sec = int(rng.integers(0, 2**31 - 1))
    msg.header.stamp.nanosec = int(rng.integers(0, 10**9))
    msg.header.frame_id = 'imu_' * int(rng.integers(0, 5))
    a = _values(rng, 37)
    if rng.random() < 0.5:
        a[4:13] = np.diag(np.abs(a[4:7])).reshape(-1)      # a real covariance now and then
    for at in (4, 16, 28):
        if rng.random() < 0.2:
            a[at] = -1.0                                     # "not provided"
        elif rng.random() < 0.2:
            a[at:at + 9] = 0.0                               # "unknown"
    o, g, f = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    o.x, o.y, o.z, o.w = (float(x) for x in a[0:4])
    g.x, g.y, g.z = (float(x) for x in a[13:16])
    f.x, f.y, f.z = (float(x) for x in a[25:28])
    msg.orientation_covariance = a[4:13]
    msg.angular_velocity_covariance = a[16:25]
    msg.linear_acceleration_covariance = a[28:37]
    return msg


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values and signs (-0.0 too), NaN where the other has NaN."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True) \
        and np.array_equal(np.signbit(a), np.signbit(b))


def _outcome(fn, *args):
    """What a conversion gives: its result, or the rejection's text."""
    try:
        return fn(*args)
    except cv.InputRejected as exc:
        return str(exc)


def _same_record(x, y) -> bool:
    if isinstance(x, str) or isinstance(y, str):
        return x == y
    if len(x) != len(y):
        return False
    for u, v in zip(x, y):
        if isinstance(u, (cv.JointMeasurement, cv.ImuMeasurement)):
            for field in u.__dataclass_fields__:
                p, q = getattr(u, field), getattr(v, field)
                if isinstance(p, np.ndarray) or isinstance(q, np.ndarray):
                    if p is None or q is None or not _same(p, q):
                        return False
                elif p != q:
                    return False
        elif u != v:
            return False
    return True


def test_joint_states_read_from_their_bytes_equal_rclpy_s_deserialisation():
    rng = np.random.default_rng(24)
    parse = cdr.JointStateParser()
    for _ in range(500):
        buf = serialize(random_joint_state(rng))
        got, ref = parse(buf), deserialize(buf, JointState)
        assert got.stamp == (ref.header.stamp.sec, ref.header.stamp.nanosec)
        assert got.name == tuple(ref.name)
        for field in ('position', 'velocity', 'effort'):
            assert _same(getattr(got, field), np.asarray(getattr(ref, field), dtype=float))
            assert getattr(got, field).flags.writeable or getattr(got, field).size == 0


def test_the_same_names_read_again_come_from_the_parser_s_memory_unchanged():
    parse = cdr.JointStateParser()
    msg = JointState(name=['a', 'bb'], position=[1.0, 2.0])
    first = parse(serialize(msg))
    msg.name = ['a', 'bc']                 # same lengths, other text: not the remembered one
    second = parse(serialize(msg))
    assert first.name == ('a', 'bb') and second.name == ('a', 'bc')
    assert parse(serialize(msg)).name == ('a', 'bc')


def test_imus_read_from_their_bytes_equal_rclpy_s_deserialisation():
    rng = np.random.default_rng(7)
    for _ in range(300):
        buf = serialize(random_imu(rng))
        got, ref = cdr.read_imu(buf), deserialize(buf, Imu)
        assert got.stamp == (ref.header.stamp.sec, ref.header.stamp.nanosec)
        assert _same(got.values, cv._imu_values(ref))


def test_clock_read_from_its_bytes():
    msg = Clock()
    msg.clock.sec, msg.clock.nanosec = 1_700_000_000, 123_456_789
    assert cdr.read_clock(serialize(msg)) == 1_700_000_000_123_456_789


def test_records_from_bytes_and_from_messages_are_identical():
    """Live (bytes) and replay (messages) convert through one path: the same records, the
    same rejections, on random messages with unknown, repeated, NaN and missing values."""
    rng = np.random.default_rng(3)
    known = ['shoulder_pan_joint', 'wrist_3', 'crank', 'j', 'é']
    reader = cv.JointStateReader(known)
    parse = cdr.JointStateParser()
    outcomes = set()
    for _ in range(500):
        msg = random_joint_state(rng)
        if rng.random() < 0.1:
            msg.header.stamp.sec = msg.header.stamp.nanosec = 0
        buf = serialize(msg)
        now = int(rng.integers(1, 10**18)) if rng.random() < 0.5 else None
        raw = _outcome(reader, parse(buf), now)
        ref = _outcome(cv.joint_state_to_record, deserialize(buf, JointState), known, now)
        assert _same_record(raw, ref), (msg, raw, ref)
        outcomes.add(raw.split(':')[0] if isinstance(raw, str) else 'ok')
    assert {'ok', 'length_mismatch', 'no_usable_values', 'empty', 'no_stamp'} <= outcomes
    for _ in range(300):
        msg = random_imu(rng)
        buf = serialize(msg)
        raw = _outcome(cv.imu_to_record, cdr.read_imu(buf), 'wrist')
        ref = _outcome(cv.imu_to_record, deserialize(buf, Imu), 'wrist')
        assert _same_record(raw, ref), (msg, raw, ref)


def _expected_imu(msg: Imu) -> dict | str:
    """sensor_msgs/Imu's documented meaning, element by element (independent of
    conversions.py): a part is left out when its covariance[0] is -1 or a value is not
    finite; variances are the covariance diagonal when all nine are finite, not all zero,
    and the diagonal positive; the quaternion normalised (left out below norm 1e-6)."""
    import math

    def variances(cov):
        c = [float(x) for x in cov]
        if not all(math.isfinite(x) for x in c) or not any(c):
            return None
        d = [c[0], c[4], c[8]]
        return d if all(x > 0 for x in d) else None

    def vector(v, cov):
        x = [v.x, v.y, v.z]
        return None if cov[0] == -1.0 or not all(math.isfinite(e) for e in x) else x

    gyro = vector(msg.angular_velocity, msg.angular_velocity_covariance)
    accel = vector(msg.linear_acceleration, msg.linear_acceleration_covariance)
    quat = None
    o = msg.orientation
    q = [o.x, o.y, o.z, o.w]
    if msg.orientation_covariance[0] != -1.0 and all(math.isfinite(e) for e in q):
        norm = math.sqrt(sum(e * e for e in q))
        quat = [e / norm for e in q] if norm > 1e-6 else None
    if gyro is None and accel is None and quat is None:
        return 'no_usable_values'
    return {'gyro': gyro, 'accel': accel, 'orientation': quat,
            'gyro_var': variances(msg.angular_velocity_covariance) if gyro else None,
            'accel_var': variances(msg.linear_acceleration_covariance) if accel else None,
            'orientation_var': variances(msg.orientation_covariance) if quat else None}


def test_imu_records_from_bytes_mean_what_sensor_msgs_imu_says():
    rng = np.random.default_rng(8)
    seen = set()
    for _ in range(400):
        msg = random_imu(rng)
        if rng.random() < 0.2:
            msg.orientation.x, msg.orientation.y = 0.3, -0.4        # a quaternion to use
            msg.orientation.z, msg.orientation.w = 0.1, 0.8
        want = _expected_imu(msg)
        got = _outcome(cv.imu_to_record, cdr.read_imu(serialize(msg)), 'wrist', 7)
        if isinstance(want, str):
            assert isinstance(got, str) and got.startswith(want), (msg, got)
            seen.add(want)
            continue
        rec = got[1]
        for field, value in want.items():
            have = getattr(rec, field)
            seen.add(f'{field}:{value is None}')
            if value is None:
                assert have is None, (field, msg, rec)
            elif field == 'orientation':
                np.testing.assert_allclose(have, value, rtol=1e-15, atol=1e-16)
            else:
                assert have is not None and have.tolist() == value, (field, msg, rec)
    assert len(seen) >= 11, seen            # every part both used and left out, and rejects


def _expected_joint(msg: JointState, known: set, now: int | None) -> tuple | str:
    """sensor_msgs/JointState's meaning, independent of conversions.py: (stamp, kept names,
    position, velocity, effort with NaN for what is not given, unknown names, non-finite
    count), or the rejection's reason."""
    import math

    names = list(msg.name)
    t = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
    if t == 0:
        if now is None:
            return 'no_stamp'
        t = now
    if not names:
        return 'empty'
    if len(set(names)) != len(names):
        return 'repeated_names'
    columns = []
    bad = 0
    for field in ('position', 'velocity', 'effort'):
        values = list(getattr(msg, field))
        if values and len(values) != len(names):
            return 'length_mismatch'
        bad += sum(not math.isfinite(x) for x in values)
        columns.append([x if math.isfinite(x) else math.nan for x in values] if values
                       else [math.nan] * len(names))
    keep = [i for i, n in enumerate(names) if n in known]
    cols = [[c[i] for i in keep] for c in columns]
    if not keep or not any(math.isfinite(x) for c in cols for x in c):
        return 'no_usable_values'
    return (t, tuple(names[i] for i in keep), *cols,
            tuple(n for n in names if n not in known), bad)


def test_joint_state_records_from_bytes_mean_what_sensor_msgs_joint_state_says():
    rng = np.random.default_rng(9)
    known = {'shoulder_pan_joint', 'wrist_3', 'crank', 'j', 'é'}
    reader, parse = cv.JointStateReader(known), cdr.JointStateParser()
    for _ in range(500):
        msg = random_joint_state(rng)
        if rng.random() < 0.1:
            msg.header.stamp.sec = msg.header.stamp.nanosec = 0
        now = 123 if rng.random() < 0.5 else None
        want = _expected_joint(msg, known, now)
        got = _outcome(reader, parse(serialize(msg)), now)
        if isinstance(want, str):
            assert isinstance(got, str) and got.startswith(want), (msg, got)
            continue
        t, rec, unknown, bad = got
        assert (t, rec.names, unknown, bad) == (want[0], want[1], want[5], want[6])
        for have, value in zip((rec.position, rec.velocity, rec.effort), want[2:5]):
            assert _same(have, np.array(value, dtype=float)), (msg, rec)


def test_the_record_values_are_the_message_s_doubles():
    msg = JointState(name=['a', 'b', 'c'], position=[0.5, np.inf, -2.0], effort=[1.0, 2.0, 3.0])
    msg.header.stamp.sec, msg.header.stamp.nanosec = 2, 5
    t, rec, unknown, nonfinite = cv.JointStateReader({'a', 'c'})(
        cdr.JointStateParser()(serialize(msg)))
    assert t == 2_000_000_005 and unknown == ('b',) and nonfinite == 1
    assert rec.names == ('a', 'c')
    assert rec.position.tolist() == [0.5, -2.0] and rec.effort.tolist() == [1.0, 3.0]
    assert np.isnan(rec.velocity).all()


@pytest.mark.parametrize('make, read', [
    (lambda: JointState(name=['shoulder', 'elbow'], position=[0.1, 0.2], velocity=[1.0, 2.0],
                        effort=[3.0, 4.0]), cdr.JointStateParser()),
    (lambda: Imu(), cdr.read_imu), (lambda: Clock(), cdr.read_clock)])
def test_truncated_and_corrupted_bytes_raise_malformed_or_read_a_whole_message(make, read):
    """Every prefix of a message, and random corruptions of it: a :class:`cdr.Malformed`
    (or :class:`cdr.Unsupported` for a changed header), or - when only padding and
    trailing bytes went - what the whole message reads as; never another exception."""
    whole = serialize(make())
    full = read(whole)
    for cut in range(len(whole)):
        try:
            got = read(whole[:cut])
        except cdr.Malformed:
            continue
        assert repr(got) == repr(full), cut
    rng = np.random.default_rng(11)
    for _ in range(2000):
        buf = bytearray(whole)
        for i in rng.integers(0, len(buf), size=int(rng.integers(1, 4))):
            buf[i] = int(rng.integers(0, 256))
        try:
            read(bytes(buf))
        except (cdr.Malformed, cdr.Unsupported):
            pass


def test_huge_counts_are_malformed_not_allocated():
    buf = bytearray(serialize(JointState(name=['a'], position=[1.0])))
    names_at = 4 + 12 + 1                      # header, stamp and frame_id '' (1 byte: NUL)
    names_at += -(names_at - 4) % 4
    buf[names_at:names_at + 4] = (2**32 - 1).to_bytes(4, 'little')
    with pytest.raises(cdr.Malformed, match='names'):
        cdr.JointStateParser()(bytes(buf))


def test_other_encapsulations_are_unsupported():
    buf = bytearray(serialize(Imu()))
    buf[1] = 0                                  # CDR big-endian
    with pytest.raises(cdr.Unsupported):
        cdr.read_imu(bytes(buf))
    with pytest.raises(cdr.Malformed):
        cdr.read_imu(b'\x00')


def test_the_driver_reads_bytes_as_the_message_and_counts_malformed_ones():
    """The node's input path with bytes: the record of the deserialised message; bytes
    that are no message dropped under ``input.dropped.malformed`` with a note, never an
    exception; another encapsulation goes through rclpy's deserialisation."""
    from support.ros_data import fourbar_path, fourbar_system

    from mbfg_ros.ros.driver import EstimatorDriver
    from mbfg_ros.ros.params import parse_estimator

    def driver():
        s = parse_estimator({'mechanism': str(fourbar_path()), 'frequency': 200.0,
                             'lag_duration': 0.1})
        return EstimatorDriver(fourbar_system(), s)

    msg = JointState(name=['crank'], position=[0.3])
    msg.header.stamp.sec = 1
    by_bytes, by_msg = driver(), driver()
    rec = by_bytes.joint_state(serialize(msg))
    assert _same_record((rec,), (by_msg.joint_state(msg),))
    imu = Imu()
    imu.header.stamp.sec = 1
    imu.angular_velocity.z = 0.5
    name = by_bytes.imu_names[0]
    assert _same_record((by_bytes.imu(serialize(imu), name),), (by_msg.imu(imu, name),))
    for junk in (b'', b'\x00\x01\x00\x00\x01', serialize(msg)[:21], b'\x00\x01' + bytes(40)):
        assert by_bytes.joint_state(junk) is None and by_bytes.imu(junk, name) is None
    # b'\x00\x01' + 40 zeros is a JointState (stamp zero: dropped.no_stamp), no Imu
    assert by_bytes.counters['dropped.malformed'] == 7
    assert by_bytes.counters['dropped.no_stamp'] == 1
    assert any(cat.endswith(':malformed') for cat, _ in by_bytes.events)
    values = np.zeros(37)
    values[15] = 0.5                                         # angular_velocity.z
    big_endian = (b'\x00\x00\x00\x00' + (1).to_bytes(4, 'big') + bytes(4)
                  + (1).to_bytes(4, 'big') + bytes(4) + values.astype('>f8').tobytes())
    with pytest.raises(cdr.Unsupported):
        cdr.read_imu(big_endian)
    rec = by_bytes.imu(big_endian, name)                     # rclpy deserialised it
    assert rec is not None and rec.t == 1.0 and rec.gyro.tolist() == [0.0, 0.0, 0.5]


def test_outputs_patched_in_their_bytes_equal_the_messages_built_per_tick():
    """The live node publishes ``~/joint_states``, ``~/state``, ``~/state_stddev`` and the
    command as bytes patched in place (SerialisedEstimateMessages): deserialised, tick after
    tick, they are the messages EstimateMessages builds (what the replay writes)."""
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Float64MultiArray

    from mbfg_ros.core.measurements import Estimate

    joints, coords = ['shoulder', 'elbow', 'wrist'], ['q1', 'q2', 'q3', 'q4']
    raw = cv.SerialisedEstimateMessages(joints, coords, 2)
    ref = cv.EstimateMessages(cv.rclpy_kit(), joints, coords)
    rng = np.random.default_rng(5)
    for k in range(20):
        v = [rng.normal(size=n) for n in (4, 4, 4, 4, 4, 3, 3, 3)]
        v[0][0] = np.nan if k % 3 == 0 else v[0][0]
        est = Estimate(0.0, v[0], v[1], v[2], v[3], v[4], np.zeros(2), v[5], v[6], 0.0)
        t_ns = int(rng.integers(0, 2**31 * 10**9))
        command = rng.normal(size=2) if k % 2 else None
        assert raw.fill(t_ns, est, v[7], command)
        ref.fill(t_ns, est, v[7], command)
        for got, want in ((raw.joints, ref.joints), (raw.state, ref.state),
                          (raw.stddev, ref.stddev)):
            msg = deserialize_message(bytes(got.buf), JointState)
            assert msg.header.stamp == want.header.stamp and msg.name == want.name
            for field in ('position', 'velocity', 'effort'):
                assert _same(getattr(msg, field), getattr(want, field)), field
        cmd = deserialize_message(bytes(raw.command.buf), Float64MultiArray)
        assert _same(cmd.data, ref.command.data) or (command is None and k == 0)
    bad = Estimate(0.0, np.zeros(5), *[np.zeros(4)] * 4, np.zeros(2), *[np.zeros(3)] * 2,
                   0.0)
    assert not raw.fill(0, bad, np.zeros(3), None)      # another size: the caller builds
