"""rosbag2 IO through rosbags: round trips in both storages, and bad bags."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.core.bag import BagError, BagWriter, bag_topics, read_messages, typestore
from mbfg_ros.ros import conversions as cv

JS = cv.TYPES['JointState']


def write_joint_states(path, storage, count=50, compress=''):
    kit = cv.rosbags_kit(typestore())
    with BagWriter(path, storage, compress=compress) as w:
        for k in range(count):
            t = 10**9 + k * 10**7
            w.write('/joint_states', JS, t, cv.joint_state_msg(kit, t, ['crank'], [0.01 * k]))


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_messages_come_back_in_order_with_their_values(tmp_path, storage):
    write_joint_states(tmp_path / 'b', storage)
    assert bag_topics(tmp_path / 'b') == {'/joint_states': JS}
    got = list(read_messages(tmp_path / 'b', {'/joint_states': JS}))
    assert [m.log_ns for m in got] == [10**9 + k * 10**7 for k in range(50)]
    assert [float(m.msg.position[0]) for m in got] == pytest.approx(
        list(np.arange(50) * 0.01))


@pytest.mark.parametrize('storage, compress', [('mcap', 'file'), ('sqlite3', 'file'),
                                               ('sqlite3', 'message')])
def test_a_compressed_bag_reads_back_the_same_messages(tmp_path, storage, compress):
    write_joint_states(tmp_path / 'plain', storage)
    write_joint_states(tmp_path / 'zstd', storage, compress=compress)
    meta = (tmp_path / 'zstd' / 'metadata.yaml').read_text()
    assert f'compression_mode: {compress}' in meta and 'compression_format: zstd' in meta
    plain = list(read_messages(tmp_path / 'plain', {'/joint_states': JS}))
    zstd = list(read_messages(tmp_path / 'zstd', {'/joint_states': JS}))
    assert [(m.log_ns, list(m.msg.position)) for m in zstd] == \
        [(m.log_ns, list(m.msg.position)) for m in plain]


def test_an_unknown_compression_is_refused_naming_the_bag(tmp_path):
    with pytest.raises(BagError, match=r"b: unknown compression 'lz4' \(file or message\)"):
        BagWriter(tmp_path / 'b', 'mcap', compress='lz4')


def test_a_missing_bag_is_named(tmp_path):
    with pytest.raises(BagError, match='nothing.*no such bag'):
        list(read_messages(tmp_path / 'nothing', {'/joint_states': JS}))


def test_a_bag_without_the_expected_topics_lists_what_it_has(tmp_path):
    write_joint_states(tmp_path / 'b', 'mcap')
    with pytest.raises(BagError, match=r'none of the expected topics /imu/x; the bag has: '
                                       r'/joint_states \(sensor_msgs/msg/JointState\)'):
        list(read_messages(tmp_path / 'b', {'/imu/x': cv.TYPES['Imu']}))


def test_an_expected_topic_with_another_type_is_an_error(tmp_path):
    write_joint_states(tmp_path / 'b', 'mcap')
    with pytest.raises(BagError, match='/joint_states has type sensor_msgs/msg/JointState, '
                                       'expected sensor_msgs/msg/Imu'):
        list(read_messages(tmp_path / 'b', {'/joint_states': cv.TYPES['Imu']}))


def test_a_truncated_bag_yields_what_precedes_the_damage_then_raises(tmp_path):
    write_joint_states(tmp_path / 'b', 'mcap', count=2000)
    f = next((tmp_path / 'b').glob('*.mcap'))
    data = f.read_bytes()
    f.write_bytes(data[:len(data) // 2])
    got = []
    with pytest.raises(BagError, match=r'b: .*read \d+ messages before the damage'):
        for m in read_messages(tmp_path / 'b', {'/joint_states': JS}):
            got.append(m)
    assert 500 < len(got) < 2000          # about half the file is still readable
    assert [m.log_ns for m in got] == [10**9 + k * 10**7 for k in range(len(got))]


def test_a_truncated_sqlite3_bag_is_reported(tmp_path):
    write_joint_states(tmp_path / 'b', 'sqlite3', count=2000)
    f = next((tmp_path / 'b').glob('*.db3'))
    data = f.read_bytes()
    f.write_bytes(data[:len(data) // 2])
    with pytest.raises(BagError, match='b: '):
        list(read_messages(tmp_path / 'b', {'/joint_states': JS}))


def test_a_directory_that_is_not_a_bag_is_reported(tmp_path):
    (tmp_path / 'd').mkdir()
    with pytest.raises(BagError, match='not a readable rosbag2'):
        bag_topics(tmp_path / 'd')


def test_the_writer_refuses_to_overwrite_unless_asked(tmp_path):
    write_joint_states(tmp_path / 'b', 'mcap')
    with pytest.raises(BagError, match='output exists'):
        BagWriter(tmp_path / 'b')
    with pytest.raises(BagError, match="unknown storage 'zip'"):
        BagWriter(tmp_path / 'c', 'zip')


def test_the_writer_counts_what_it_wrote(tmp_path):
    kit = cv.rosbags_kit(typestore())
    with BagWriter(tmp_path / 'b') as w:
        assert w.count == 0
        for k in range(3):
            w.write('/joint_states', JS, 10**9 + k, cv.joint_state_msg(kit, 10**9 + k,
                                                                         ['crank'], [k]))
        assert w.count == 3
    assert len(list(read_messages(tmp_path / 'b', {'/joint_states': JS}))) == 3


def test_a_bag_that_cannot_be_created_is_named(tmp_path):
    (tmp_path / 'file').write_text('x')
    with pytest.raises(BagError, match=r'file/b: cannot create bag: \S'):
        with BagWriter(tmp_path / 'file' / 'b'):
            pass


def test_one_topic_of_two_comes_back_with_its_topic_and_type(tmp_path):
    kit = cv.rosbags_kit(typestore())
    imu = cv.TYPES['Imu']
    with BagWriter(tmp_path / 'b') as w:
        for k in range(4):
            w.write('/joint_states', JS, 10**9 + 2 * k,
                    cv.joint_state_msg(kit, 10**9 + 2 * k, ['crank'], [k]))
            w.write('/imu', imu, 10**9 + 2 * k + 1,
                    cv.imu_msg(kit, 10**9 + 2 * k + 1, 'imu', [0, 0, k], [0] * 3))
    got = list(read_messages(tmp_path / 'b', {'/imu': imu}))
    assert [(m.topic, m.msgtype, m.log_ns) for m in got] == [
        ('/imu', imu, 10**9 + 2 * k + 1) for k in range(4)]
    with pytest.raises(BagError, match=r'none of the expected topics /a, /b; the bag has: '
                                       r'/imu \(sensor_msgs/msg/Imu\), /joint_states '):
        list(read_messages(tmp_path / 'b', {'/b': imu, '/a': imu}))


def test_a_bag_with_no_topics_says_it_has_nothing(tmp_path):
    with BagWriter(tmp_path / 'b'):
        pass
    with pytest.raises(BagError, match='none of the expected topics /imu; the bag has: '
                                       'nothing$'):
        list(read_messages(tmp_path / 'b', {'/imu': cv.TYPES['Imu']}))


def test_an_unreadable_bag_names_the_error_it_met(tmp_path):
    (tmp_path / 'd').mkdir()
    with pytest.raises(BagError, match=r'not a readable rosbag2 \((?!NoneType)\w+: '):
        list(read_messages(tmp_path / 'd', {'/imu': cv.TYPES['Imu']}))
