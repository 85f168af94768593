"""rosbag2 reading and writing through ``rosbags`` (pure Python, no ROS installation).

:class:`BagWriter` writes MCAP (default) or sqlite3 rosbag2 directories with
the standard message types; :func:`read_messages` yields deserialised
messages of chosen topics in log-time order and turns every foreign failure
(missing path, unreadable metadata, truncated or corrupt storage) into a
:class:`BagError` that names the bag, raised where it happens so the caller
keeps whatever it processed before (rosbags' habit: foreign errors converted
at the boundary).

Messages are rosbags dataclasses: the same attribute names as rclpy
messages, so :mod:`mbfg_ros.ros.conversions` reads both.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple

from .errors import MbfgError

__all__ = ['BagError', 'BagWriter', 'BagMessage', 'bag_topics', 'read_messages', 'typestore']


class BagError(MbfgError):
    """A bag cannot be read or written; the message names the bag and what is wrong."""


def typestore() -> Any:
    """The message type store used for every bag this package reads or writes."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)


class BagMessage(NamedTuple):
    topic: str
    msgtype: str
    log_ns: int
    msg: Any


class BagWriter:
    """Write a rosbag2 directory (``storage`` 'mcap' or 'sqlite3').

    ``with BagWriter(path) as w: w.write('/topic', 'sensor_msgs/msg/JointState', t_ns, msg)``;
    connections are created on first use. An existing ``path`` is refused: to replace
    a bag, write to :func:`~mbfg_ros.core.output.atomic_dir`'s temporary and let it
    swap (issue 26: the old ``overwrite=True`` removed any directory recursively).
    """

    def __init__(self, path: str | Path, storage: str = 'mcap', store: Any = None,
                 compress: str = '') -> None:
        """``compress``: '' (none), 'file' or 'message': rosbag2's zstd compression modes
        ('message' with sqlite3 only); rosbags and ``ros2 bag`` read both."""
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

        self.path = Path(path)
        if storage not in ('mcap', 'sqlite3'):
            raise BagError(f'{self.path}: unknown storage {storage!r} (mcap or sqlite3)')
        if self.path.exists():
            raise BagError(f'{self.path}: output exists (remove it or choose another path)')
        self.store = store if store is not None else typestore()
        plugin = StoragePlugin.MCAP if storage == 'mcap' else StoragePlugin.SQLITE3
        self._writer = Writer(self.path, version=8, storage_plugin=plugin)
        if compress:
            if compress not in ('file', 'message'):
                raise BagError(f'{self.path}: unknown compression {compress!r} (file or '
                               'message)')
            self._writer.set_compression(CompressionMode[compress.upper()],
                                         CompressionFormat.ZSTD)
        self._conns: dict[str, Any] = {}
        self.count = 0

    def __enter__(self) -> 'BagWriter':
        self.open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def open(self) -> None:
        try:
            self._writer.open()
        except Exception as exc:  # noqa: BLE001 - foreign error converted at the boundary
            raise BagError(f'{self.path}: cannot create bag: {exc}') from None

    def write(self, topic: str, msgtype: str, t_ns: int, msg: Any) -> None:
        conn = self._conns.get(topic)
        if conn is None:
            conn = self._conns[topic] = self._writer.add_connection(topic, msgtype,
                                                                    typestore=self.store)
        self._writer.write(conn, int(t_ns), self.store.serialize_cdr(msg, msgtype))
        self.count += 1

    def close(self) -> None:
        self._writer.close()


# ---------------------------------------------------------------- salvage of broken MCAP files
# A recorder that crashed leaves an MCAP file without its summary and footer; rosbags
# refuses it at open. The records before the damage are intact, so they are read here
# sequentially (MCAP spec: magic, then records ``opcode u8, length u64, content``;
# uncompressed chunks are walked into). Compressed chunks cannot be salvaged.

_MAGIC = b'\x89MCAP0\r\n'


def _u(buf: bytes, pos: int, size: int) -> tuple[int, int]:
    if pos + size > len(buf):
        raise EOFError
    return int.from_bytes(buf[pos:pos + size], 'little'), pos + size


def _s(buf: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _u(buf, pos, 4)
    if pos + n > len(buf):
        raise EOFError
    return buf[pos:pos + n], pos + n


def _mcap_records(buf: bytes, pos: int, schemas: dict, channels: dict
                  ) -> Iterator[tuple[str, str, int, bytes]]:
    while pos < len(buf):
        try:
            op, pos = _u(buf, pos, 1)
            length, pos = _u(buf, pos, 8)
        except EOFError:
            return
        body = buf[pos:pos + length]
        complete = len(body) == length
        pos += length
        try:
            if op == 0x03 and complete:                       # Schema
                sid, q = _u(body, 0, 2)
                name, q = _s(body, q)
                schemas[sid] = name.decode()
            elif op == 0x04 and complete:                     # Channel
                cid, q = _u(body, 0, 2)
                sid, q = _u(body, q, 2)
                topic, q = _s(body, q)
                channels[cid] = (topic.decode(), schemas.get(sid, ''))
            elif op == 0x05 and complete:                     # Message
                cid, q = _u(body, 0, 2)
                _, q = _u(body, q, 4)
                log, q = _u(body, q, 8)
                if cid in channels:
                    topic, msgtype = channels[cid]
                    yield topic, msgtype, log, body[q + 8:]
            elif op == 0x06:                                  # Chunk (maybe cut short)
                q = 8 * 3 + 4
                comp, q = _s(body, q)
                if comp:
                    return
                _, q = _u(body, q, 8)
                yield from _mcap_records(body, q, schemas, channels)
                if not complete:
                    return
        except EOFError:
            return
        if not complete:
            return


def _salvage_mcap(path: Path) -> tuple[dict[str, str], list[tuple[str, str, int, bytes]]]:
    files = sorted(path.glob('*.mcap')) if path.is_dir() else [path]
    rows: list[tuple[str, str, int, bytes]] = []
    for f in files:
        buf = f.read_bytes()
        if not buf.startswith(_MAGIC):
            continue
        rows.extend(_mcap_records(buf, len(_MAGIC), {}, {}))
    rows.sort(key=lambda r: r[2])
    return {r[0]: r[1] for r in rows}, rows


def _open_reader(path: Path) -> Any:
    from rosbags.rosbag2 import Reader

    if not path.exists():
        raise BagError(f'{path}: no such bag (expected a rosbag2 directory)')
    try:
        reader = Reader(path)
        reader.open()
    except Exception as exc:  # noqa: BLE001
        detail = ' '.join(str(exc).split())     # one line (issue 26): YAML errors span several
        raise BagError(f'{path}: not a readable rosbag2 ({type(exc).__name__}: {detail})'
                       ) from None
    return reader


def bag_topics(path: str | Path) -> dict[str, str]:
    """``{topic: msgtype}`` of a bag (of its readable part, if its storage is damaged)."""
    path = Path(path)
    try:
        reader = _open_reader(path)
    except BagError:
        topics, rows = _salvage_mcap(path) if path.exists() else ({}, [])
        if not rows:
            raise
        return topics
    try:
        return {c.topic: c.msgtype for c in reader.connections}
    finally:
        reader.close()


def read_messages(path: str | Path, wanted: Mapping[str, str], store: Any = None
                  ) -> Iterator[BagMessage]:
    """Deserialised messages of the topics in ``wanted`` (``{topic: expected msgtype}``).

    :raises BagError: missing or unreadable bag, none of the wanted topics,
        a wanted topic with another type, or storage failing part-way (raised
        at that point: the messages before it have been yielded).
    """
    path = Path(path)
    store = store if store is not None else typestore()
    try:
        reader = _open_reader(path)
    except BagError as exc:
        topics, rows = _salvage_mcap(path) if path.exists() else ({}, [])
        if not rows:
            raise
        yield from _read_salvaged(path, rows, topics, wanted, store, str(exc))
        return
    try:
        conns = []
        for c in reader.connections:
            if c.topic in wanted:
                if c.msgtype != wanted[c.topic]:
                    raise BagError(f'{path}: topic {c.topic} has type {c.msgtype}, expected '
                                   f'{wanted[c.topic]}')
                conns.append(c)
        if not conns:
            have = ', '.join(sorted(f'{c.topic} ({c.msgtype})' for c in reader.connections))
            raise BagError(f'{path}: none of the expected topics '
                           f'{", ".join(sorted(wanted))}; the bag has: {have or "nothing"}')
        it = reader.messages(connections=conns)
        n = 0
        while True:
            try:
                conn, t, raw = next(it)
                msg = store.deserialize_cdr(raw, conn.msgtype)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001
                raise BagError(f'{path}: unreadable after {n} messages (truncated or corrupt? '
                               f'{type(exc).__name__}: {exc})') from None
            n += 1
            yield BagMessage(conn.topic, conn.msgtype, int(t), msg)
    finally:
        try:
            reader.close()
        except Exception:  # noqa: BLE001
            pass


def _check_wanted(path: Path, have: Mapping[str, str], wanted: Mapping[str, str]) -> None:
    for topic, msgtype in have.items():
        if topic in wanted and msgtype != wanted[topic]:
            raise BagError(f'{path}: topic {topic} has type {msgtype}, expected {wanted[topic]}')
    if not any(t in wanted for t in have):
        listing = ', '.join(sorted(f'{t} ({m})' for t, m in have.items()))
        raise BagError(f'{path}: none of the expected topics {", ".join(sorted(wanted))}; '
                       f'the bag has: {listing or "nothing"}')


def _read_salvaged(path: Path, rows: list, topics: Mapping[str, str],
                   wanted: Mapping[str, str], store: Any, why: str) -> Iterator[BagMessage]:
    """Messages of a damaged MCAP bag up to the damage, then a BagError saying so."""
    _check_wanted(path, topics, wanted)
    n = 0
    for topic, msgtype, log, raw in rows:
        if topic not in wanted:
            continue
        try:
            msg = store.deserialize_cdr(raw, msgtype)
        except Exception:  # noqa: BLE001
            break
        n += 1
        yield BagMessage(topic, msgtype, log, msg)
    raise BagError(f'{why}; read {n} messages before the damage (truncated recording?)')
