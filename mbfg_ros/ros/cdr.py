"""The node's sensor input read straight from its serialised bytes (issue 24).

``take_message(raw=True)`` hands the CDR bytes of a message (~3 µs) where rclpy's
deserialisation into a Python message costs 4-15 µs more and the conversion then reads
it field by field; these readers put a ``sensor_msgs/JointState``, ``sensor_msgs/Imu`` or
``rosgraph_msgs/Clock`` into numpy arrays in a few calls (:class:`JointStateFields`,
:class:`ImuFields`), which :mod:`.conversions` turns into records exactly as it does a
deserialised message (the same doubles, so live and replay stay bit-identical). A
JointState whose layout (size, frame_id length, names, counts) was seen before is read in
one ``struct`` call (:class:`JointStateLayout`).

The format (OMG DDS-XTypes 1.3 §7.4.3.4-5, plain CDR of final types, what ROS 2's rmws
send): a 4-byte encapsulation header, the representation id big-endian (``00 01``: CDR_LE,
XCDR1 little-endian, what Fast DDS and Cyclone DDS send) and two option bytes; then the
data, each primitive aligned to its size *relative to the data start* (after the header);
a string is a uint32 length that counts its NUL, the bytes and the NUL; a sequence a
uint32 count and its elements. Padding bytes are not read (serialisers leave them
uninitialised).

Only XCDR1 little-endian is read here: any other representation (:class:`Unsupported`:
big-endian, XCDR2, whose string sequences carry a length header) is for the caller to
deserialise through rclpy instead. Bytes that do not hold a whole message (truncated,
counts beyond the end, a name that is not UTF-8) raise :class:`Malformed`, never
anything else.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from operator import itemgetter
from typing import Callable

import numpy as np

from ..core.bounded import remember

__all__ = ['Malformed', 'Unsupported', 'JointStateFields', 'ImuFields', 'IMU_DOUBLES',
           'JointStateParser', 'JointStateLayout', 'read_imu', 'read_clock',
           'encapsulation']

NS = 1_000_000_000

_HEADER = 4                                   # encapsulation header bytes
_XCDR1_LE = b'\x00\x01'
_STAMP_LEN = struct.Struct('<iII')            # sec, nanosec, frame_id length
_U32 = struct.Struct('<I')
_CLOCK = struct.Struct('<iI')

IMU_DOUBLES = 37
"""sensor_msgs/Imu after its header: orientation (4), orientation_covariance (9),
angular_velocity (3) and its covariance (9), linear_acceleration (3) and its covariance
(9), contiguous float64 in that order."""


class Malformed(ValueError):
    """Bytes that are not a whole message of the expected type."""


class Unsupported(ValueError):
    """An encapsulation these readers do not read (big-endian, delimited XCDR2...)."""


def encapsulation(buf: bytes) -> None:
    """Checks that ``buf`` is XCDR1 little-endian.

    :raises Unsupported: another representation. :raises Malformed: no header.
    """
    if len(buf) < _HEADER:
        raise Malformed(f'{len(buf)} bytes: no encapsulation header')
    if buf[:2] != _XCDR1_LE:
        raise Unsupported(f'encapsulation {buf[:2].hex()}')


def _aligned(o: int, a: int) -> int:
    """Absolute offset ``o`` moved up to a multiple of ``a`` relative to the data start."""
    return o + (-(o - _HEADER) % a)


def _stamp(buf: bytes) -> tuple[int, int, int]:
    """(sec, nanosec, offset after header.frame_id) of a message starting with a
    std_msgs/Header."""
    if len(buf) < _HEADER + 12:
        raise Malformed(f'{len(buf)} bytes: truncated header')
    sec, nanosec, flen = _STAMP_LEN.unpack_from(buf, _HEADER)
    end = _HEADER + 12 + flen
    if end > len(buf):
        raise Malformed(f'frame_id of {flen} bytes beyond the end ({len(buf)} bytes)')
    return sec, nanosec, end


@dataclass(frozen=True, slots=True)
class JointStateFields:
    """A sensor_msgs/JointState as read from its bytes: ``stamp`` (sec, nanosec) as sent,
    ``name`` the joint names, the three float64 sequences as owned arrays (any lengths: the
    conversion checks them)."""

    stamp: tuple[int, int]
    name: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass(frozen=True, slots=True)
class ImuFields:
    """A sensor_msgs/Imu as read from its bytes: ``stamp`` (sec, nanosec) and ``values``,
    the :data:`IMU_DOUBLES` float64 after the header (an owned, writable array)."""

    stamp: tuple[int, int]
    values: np.ndarray


@dataclass(frozen=True, eq=False)
class JointStateLayout:
    """Where the stamp and the values of a JointState sit in its bytes, learnt from a
    message :class:`JointStateParser` read (issue 24): a message of the same ``size``, with
    the same frame_id length, the same names (their lengths and bytes) and the same value
    counts holds them at the same offsets, so one ``struct`` call reads them (:meth:`read`)
    as Python floats, where the parser's field by field reading costs ~2 µs. ``unpack``
    reads from byte 4: sec, nanosec, the frame_id length, the name count, each name's
    length and bytes (without the NUL, as the parser reads them), then per sequence its
    count and values; ``shape_of`` picks from that tuple what must equal ``shape`` (all but
    the stamp and the values: padding and frame_id bytes are not read, as by the parser);
    ``starts`` is the index of each sequence's first value in it. ``source``: what the
    parser read of the message it was learnt from (frame_id length, names, their lengths,
    each sequence's count offset, values offset and count), by which it tells a message
    it parses has this layout without unpacking it again."""

    size: int
    names: tuple[str, ...]
    counts: tuple[int, int, int]
    shape: tuple
    unpack: Callable[[bytes, int], tuple]
    shape_of: Callable[[tuple], tuple]
    starts: tuple[int, int, int]
    source: tuple

    def read(self, buf: bytes) -> tuple | None:
        """The unpacked tuple (class docstring) of the JointState in ``buf`` if it has this
        layout (XCDR1 little-endian, the same size, frame_id length, names and counts),
        else None."""
        if len(buf) != self.size or not buf.startswith(_XCDR1_LE):
            return None
        values = self.unpack(buf, 4)
        return values if self.shape_of(values) == self.shape else None


def _layout(size: int, flen: int, names_at: int, names: tuple[str, ...],
            lengths: tuple[int, ...], sequences: list[tuple[int, int, int]]
            ) -> JointStateLayout:
    """The :class:`JointStateLayout` of a message of ``size`` bytes whose frame_id is
    ``flen`` bytes, whose names (string lengths ``lengths``, NUL counted) start at
    ``names_at``, and ``sequences`` (offset of the count, offset of the values, count) of
    position, velocity and effort."""
    fmt = [f'<iII{names_at - _HEADER - 12}xI']     # sec, nanosec, frame_id length, count
    shape, fixed = [flen, len(names)], [2, 3]
    o, index = names_at + 4, 4
    for name, n in zip(names, lengths):
        pad = -(o - _HEADER) % 4
        fmt.append(f'{pad}xI{max(n - 1, 0)}s{min(n, 1)}x')
        shape += [n, name.encode()]
        fixed += [index, index + 1]
        o, index = o + pad + 4 + n, index + 2
    starts = []
    for count_at, values_at, count in sequences:
        fmt.append(f'{count_at - o}xI{values_at - count_at - 4}x{count}d')
        shape.append(count)
        fixed.append(index)
        starts.append(index + 1)
        o, index = values_at + 8 * count, index + 1 + count
    return JointStateLayout(size, names, tuple(c for _, _, c in sequences), tuple(shape),
                            struct.Struct(''.join(fmt)).unpack_from, itemgetter(*fixed),
                            tuple(starts), (flen, names, lengths, tuple(sequences)))


class JointStateParser:
    """Reads JointState bytes (:meth:`__call__`). Remembers the name section of the last
    message (its bytes and decoded names): names rarely change, so a message whose bytes
    start with the same section costs no string decoding. Remembers the
    :class:`JointStateLayout` of the messages it read, one per message size (at most
    :attr:`LAYOUTS`: two publishers of different joints on one topic keep theirs):
    :meth:`layout` finds the one a message has."""

    LAYOUTS = 16

    def __init__(self) -> None:
        self._section = b''                      # count + strings of the last names
        self._names: tuple[str, ...] = ()
        self._lengths: tuple[int, ...] = ()      # their string lengths (NUL counted)
        self._layouts: dict[int, JointStateLayout] = {}

    def layout(self, buf: bytes) -> JointStateLayout | None:
        """The remembered layout of a message of ``len(buf)`` bytes (None: none; the
        caller's :meth:`JointStateLayout.read` tells whether ``buf`` has it)."""
        return self._layouts.get(len(buf))

    def _names_at(self, buf: bytes, o: int) -> tuple[tuple[str, ...], int]:
        """(names, offset after them) of the string sequence at ``o`` (4-aligned)."""
        section = self._section
        if section and buf.startswith(section, o):
            return self._names, o + len(section)
        size = len(buf)
        if o + 4 > size:
            raise Malformed(f'{size} bytes: truncated before the names')
        (count,) = _U32.unpack_from(buf, o)
        if count > (size - o - 4) // 4:
            raise Malformed(f'{count} names in {size} bytes')
        start, p = o, o + 4
        names, lengths = [], []
        for _ in range(count):
            p = _aligned(p, 4)
            if p + 4 > size:
                raise Malformed(f'name {len(names)} truncated ({size} bytes)')
            (n,) = _U32.unpack_from(buf, p)
            p += 4
            if n > size - p:
                raise Malformed(f'name {len(names)} of {n} bytes beyond the end')
            try:
                names.append(buf[p:p + n - 1].decode() if n else '')
            except UnicodeDecodeError:
                raise Malformed(f'name {len(names)} is not UTF-8') from None
            lengths.append(n)
            p += n
        self._section, self._names = bytes(buf[start:p]), tuple(names)
        self._lengths = tuple(lengths)
        return self._names, p

    def __call__(self, buf: bytes) -> JointStateFields:
        """The fields of the JointState in ``buf``.

        :raises Unsupported: not XCDR1 little-endian.
        :raises Malformed: bytes that do not hold a whole JointState.
        """
        encapsulation(buf)
        sec, nanosec, o = _stamp(buf)
        flen, names_at = o - _HEADER - 12, _aligned(o, 4)
        names, o = self._names_at(buf, names_at)
        size = len(buf)
        arrays, sequences = [], []
        unpack, frombuffer = _U32.unpack_from, np.frombuffer
        for field in _JS_ARRAYS:
            o += -(o - _HEADER) % 4                             # _aligned(o, 4), inline
            if o + 4 > size:
                raise Malformed(f'{size} bytes: truncated before {field}')
            (count,) = unpack(buf, o)
            count_at = o
            o += 4
            if count:
                o += -(o - _HEADER) % 8
                if count > (size - o) // 8:
                    raise Malformed(f'{field}: {count} values beyond the end ({size} bytes)')
                arrays.append(frombuffer(buf, _F8LE, count, o).astype(np.float64))
            else:
                arrays.append(_EMPTY)
            sequences.append((count_at, o, count))
            o += 8 * count
        known = self._layouts.get(size)
        # the same frame_id length, names and sequences at the same size: the same layout
        # (what its read() would tell, from the values parsed here)
        if known is None or known.source != (flen, names, self._lengths, tuple(sequences)):
            remember(self._layouts, size,
                     _layout(size, flen, names_at, names, self._lengths,
                             sequences), self.LAYOUTS)
        return JointStateFields((sec, nanosec), names, *arrays)


_JS_ARRAYS = ('position', 'velocity', 'effort')
_F8LE = np.dtype('<f8')
_EMPTY = np.zeros(0)
_EMPTY.setflags(write=False)


def read_imu(buf: bytes) -> ImuFields:
    """The fields of the Imu in ``buf`` (:class:`ImuFields`).

    :raises Unsupported: not XCDR1 little-endian.
    :raises Malformed: bytes that do not hold a whole Imu.
    """
    encapsulation(buf)
    sec, nanosec, o = _stamp(buf)
    o = _aligned(o, 8)
    if o + 8 * IMU_DOUBLES > len(buf):
        raise Malformed(f'{len(buf)} bytes: truncated Imu')
    return ImuFields((sec, nanosec),
                     np.frombuffer(buf, '<f8', IMU_DOUBLES, o).astype(np.float64))


def read_clock(buf: bytes) -> int:
    """The time of the rosgraph_msgs/Clock in ``buf``, integer nanoseconds.

    :raises Unsupported: not XCDR1 little-endian.
    :raises Malformed: fewer than its 8 bytes.
    """
    encapsulation(buf)
    if len(buf) < _HEADER + 8:
        raise Malformed(f'{len(buf)} bytes: truncated Clock')
    sec, nanosec = _CLOCK.unpack_from(buf, _HEADER)
    return sec * NS + nanosec
