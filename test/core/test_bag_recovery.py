"""Damaged-bag recovery counts exactly (issue 29): an MCAP bag cut at a known record gives
back every message before the cut, and only those.

The old check (``500 < len(got) < 2000``) let a recovery that dropped its last readable
message pass (1180 of 1181). Here the cut is placed from the bytes of the file, found
independently of the reader: message k carries the position ``1000 + k``, whose float64
bytes occur once in the file; in a sensor_msgs/JointState with one name and no velocity or
effort, the record ends 16 bytes after it (two empty sequence lengths), where the next
record's opcode (0x05, Message) starts.
"""
from __future__ import annotations

import shutil
import struct

import pytest

from mbfg_ros.core.bag import BagError, BagWriter, bag_topics, read_messages, typestore
from mbfg_ros.ros import conversions as cv

JS = cv.TYPES['JointState']
COUNT = 300
K = 123           # the message at the cut


def stamp(k: int) -> int:
    return 10**9 + k * 10**7


@pytest.fixture(scope='module')
def bag_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp('bag') / 'b'
    kit = cv.rosbags_kit(typestore())
    with BagWriter(path, 'mcap') as w:
        for k in range(COUNT):
            w.write('/joint_states', JS, stamp(k),
                    cv.joint_state_msg(kit, stamp(k), ['crank'], [1000.0 + k]))
    f = next(path.glob('*.mcap'))
    return f.name, f.read_bytes()


def record_end(data: bytes, k: int) -> int:
    """Offset just past message k's record."""
    marker = struct.pack('<d', 1000.0 + k)
    assert data.count(marker) == 1
    end = data.find(marker) + 8 + 4 + 4
    assert data[end] == 0x05            # the next message record starts here
    return end


def salvage(tmp_path, name: str, data: bytes) -> tuple[list, str]:
    bag = tmp_path / 'cut'
    bag.mkdir()
    (bag / name).write_bytes(data)
    got = []
    with pytest.raises(BagError, match='before the damage') as err:
        for m in read_messages(bag, {'/joint_states': JS}):
            got.append(m)
    return got, str(err.value)


@pytest.mark.parametrize('cut, expect', [
    ('after', K + 1),             # the file ends exactly after message K: it is readable
    ('one short', K),             # its last byte is missing
    ('inside', K),                # cut in the middle of its payload
])
def test_a_bag_cut_at_a_known_record_yields_exactly_the_messages_before_it(
        bag_bytes, tmp_path, cut, expect):
    name, data = bag_bytes
    end = record_end(data, K)
    at = {'after': end, 'one short': end - 1, 'inside': end - 12}[cut]
    got, why = salvage(tmp_path, name, data[:at])
    assert len(got) == expect
    assert f'read {expect} messages before the damage' in why
    assert [m.log_ns for m in got] == [stamp(k) for k in range(expect)]
    assert [float(m.msg.position[0]) for m in got] == [1000.0 + k for k in range(expect)]


def test_a_bag_cut_after_its_first_message_yields_that_one(bag_bytes, tmp_path):
    name, data = bag_bytes
    got, why = salvage(tmp_path, name, data[:record_end(data, 0)])
    assert [float(m.msg.position[0]) for m in got] == [1000.0]
    assert 'read 1 messages before the damage' in why


# ------------------------------------------- a recording of two topics over several chunks
N = 300
WIDE = 1000       # zeros before the marker: 8 kB per JointState, the file spans 3 chunks
IMU = cv.TYPES['Imu']


@pytest.fixture(scope='module')
def wide_bag(tmp_path_factory):
    """JointState k (stamp(k), position [0]*WIDE + [1000 + k]) then Imu k (stamp(k) + 1 ns,
    gyro z = k), k < N: rosbags writes it in three MCAP chunks."""
    path = tmp_path_factory.mktemp('wide') / 'b'
    kit = cv.rosbags_kit(typestore())
    with BagWriter(path, 'mcap') as w:
        for k in range(N):
            w.write('/joint_states', JS, stamp(k), cv.joint_state_msg(
                kit, stamp(k), ['crank'], [0.0] * WIDE + [1000.0 + k]))
            w.write('/imu', IMU, stamp(k) + 1, cv.imu_msg(kit, stamp(k) + 1, 'imu',
                                                         [0.0, 0.0, float(k)], [0.0] * 3))
        assert w.count == 2 * N
    f = next(path.glob('*.mcap'))
    data = f.read_bytes()
    assert _chunks(data) == 3
    return f.name, data, path


def _chunks(data: bytes) -> int:
    """Top-level Chunk records (opcode 0x06) of an intact MCAP file."""
    pos, n = 8, 0
    while pos + 9 <= len(data):
        n += data[pos] == 0x06
        pos += 9 + int.from_bytes(data[pos + 1:pos + 9], 'little')
    return n


def _cut_bag(tmp_path, name: str, data: bytes, k: int):
    """The bag cut just after JointState k (in the last chunk for k > 2 N / 3)."""
    bag = tmp_path / 'cut'
    bag.mkdir()
    (bag / name).write_bytes(data[:record_end(data, k)])
    return bag


def _read(source, wanted) -> tuple[list, str]:
    got = []
    with pytest.raises(BagError, match='before the damage') as err:
        for m in read_messages(source, wanted):
            got.append(m)
    return got, str(err.value)


def test_a_two_topic_bag_cut_in_a_later_chunk_yields_both_topics_in_log_order(
        wide_bag, tmp_path):
    name, data, _ = wide_bag
    k = 250
    bag = _cut_bag(tmp_path, name, data, k)
    got, why = _read(bag, {'/joint_states': JS, '/imu': IMU})
    # JointState 0..k and Imu 0..k-1, alternating by stamp, across the chunk boundaries
    assert len(got) == 2 * k + 1 and f'read {2 * k + 1} messages' in why
    assert [m.log_ns for m in got] == sorted([stamp(i) for i in range(k + 1)]
                                             + [stamp(i) + 1 for i in range(k)])
    assert [m.topic for m in got[:2]] == ['/joint_states', '/imu']
    assert [m.msgtype for m in got[:2]] == [JS, IMU]
    assert [float(m.msg.position[-1]) for m in got[::2]] == [1000.0 + i for i in range(k + 1)]
    assert [m.msg.angular_velocity.z for m in got[1::2]] == list(map(float, range(k)))
    # one topic of the two: the other is skipped, not a reason to stop
    got, _ = _read(bag, {'/imu': IMU})
    assert [m.topic for m in got] == ['/imu'] * k
    assert bag_topics(bag) == {'/joint_states': JS, '/imu': IMU}


def test_a_damaged_mcap_file_is_salvaged_by_its_own_path_and_beside_a_stray_file(
        wide_bag, tmp_path):
    name, data, _ = wide_bag
    bag = _cut_bag(tmp_path, name, data, 10)
    got, _ = _read(bag / name, {'/imu': IMU})
    assert len(got) == 10
    (bag / '0_not_mcap.mcap').write_bytes(b'garbage, not an MCAP file')
    got, _ = _read(bag, {'/imu': IMU})
    assert len(got) == 10


def test_a_corrupt_message_before_the_cut_ends_the_salvage_with_an_error(wide_bag, tmp_path):
    """Nothing ends silently: the messages before the corrupt one, then the BagError."""
    name, data, _ = wide_bag
    k = 100
    start = data.find(struct.pack('<d', 1000.0 + k)) - 8 * WIDE     # JointState k's floats
    i = data.rfind(struct.pack('<I', WIDE + 1), start - 8, start)   # its position count
    assert i > 0
    bad = data[:i] + struct.pack('<I', 2 ** 31 - 1) + data[i + 4:record_end(data, 200)]
    bag = tmp_path / 'corrupt'
    bag.mkdir()
    (bag / name).write_bytes(bad)
    got, why = _read(bag, {'/joint_states': JS, '/imu': IMU})
    assert len(got) == 2 * k and f'read {2 * k} messages before the damage' in why


def test_a_damaged_bag_without_the_expected_topics_says_what_it_has(wide_bag, tmp_path):
    name, data, _ = wide_bag
    bag = _cut_bag(tmp_path, name, data, 5)
    with pytest.raises(BagError, match=rf'^{bag}: topic /imu has type {IMU}, expected {JS}$'):
        list(read_messages(bag, {'/imu': JS}))
    with pytest.raises(BagError, match=rf'^{bag}: none of the expected topics /a, /b; the bag '
                                       rf'has: /imu \({IMU}\), /joint_states \({JS}\)$'):
        list(read_messages(bag, {'/a': JS, '/b': IMU}))
    with pytest.raises(BagError, match='no such bag'):
        bag_topics(tmp_path / 'missing')


def test_an_intact_bag_with_a_corrupt_message_says_how_many_were_read(wide_bag, tmp_path):
    """rosbags opens it (summary and footer intact); reading stops at the corrupt message."""
    name, data, original = wide_bag
    k = 100
    start = data.find(struct.pack('<d', 1000.0 + k)) - 8 * WIDE
    i = data.rfind(struct.pack('<I', WIDE + 1), start - 8, start)
    bag = tmp_path / 'corrupt'
    shutil.copytree(original, bag)
    (bag / name).write_bytes(data[:i] + struct.pack('<I', 2 ** 31 - 1) + data[i + 4:])
    got = []
    with pytest.raises(BagError, match=rf'^{bag}: unreadable after {2 * k} messages '
                                       r'\(truncated or corrupt\? (?!NoneType)\w+: '):
        for m in read_messages(bag, {'/joint_states': JS, '/imu': IMU}):
            got.append(m)
    assert len(got) == 2 * k and got[-1].topic == '/imu'
