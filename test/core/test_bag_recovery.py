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

import struct

import pytest

from mbfg_ros.core.bag import BagError, BagWriter, read_messages, typestore
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
