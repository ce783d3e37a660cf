"""pcap and pcapng files: packet records in, packet records out. Pure: the reader takes a
binary file object (anything with ``read``; ``seek`` only for :func:`split_ranges`), the
writer returns bytes.

What libpcap (``savefile.c``, ``sf-pcap.c``, ``sf-pcapng.c``) reads, read the same way:

- pcap: both byte orders (magic ``a1b2c3d4`` / ``d4c3b2a1``), microsecond and nanosecond
  timestamps (magic ``a1b23c4d``), one link type per file, a 16-byte record header
  (ts_sec, ts_frac, incl_len, orig_len) before each packet.
- pcapng: Section Header, Interface Description (each with its own link type and
  ``if_tsresol``/``if_tsoffset``), Enhanced and Simple Packet blocks, several sections with
  their own byte order; every other block is skipped by its length.

A :class:`RawPacket` carries the file offset of its record, so a large file can be cut into
byte ranges (:func:`split_ranges`) that are read independently (Spark executors) with the
state the reader had at the range's start (:class:`ReaderState`: the format, byte order and
the interfaces seen so far). Link layers, IP and TCP are decoded by :mod:`.pcap_decode`.

A garbled or unknown file raises :class:`CaptureFormatError` at the start; a file cut off
inside a record ends the iteration and sets :attr:`PacketReader.problem` (what was read
before stays good).
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Iterator

import attrs

from .errors import CaptureFormatError

__all__ = [
    "PCAP_MAGIC_US",
    "PCAP_MAGIC_NS",
    "PCAPNG_MAGIC",
    "LINKTYPE_NULL",
    "LINKTYPE_ETHERNET",
    "LINKTYPE_RAW",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_LINUX_SLL2",
    "LINKTYPE_IPV4",
    "LINKTYPE_IPV6",
    "LINKTYPE_LOOP",
    "Interface",
    "ReaderState",
    "RawPacket",
    "PacketRange",
    "PacketReader",
    "sniff_packet_format",
    "split_ranges",
]

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAPNG_MAGIC = 0x0A0D0D0A  # the Section Header Block's type
_BYTE_ORDER_MAGIC = 0x1A2B3C4D

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

#: libpcap's limit for one record (``MAXIMUM_SNAPLEN`` is 262144; allow some slack)
MAX_RECORD = 1 << 20
_CHUNK = 1 << 20

_EPB = 6
_SPB = 3
_IDB = 1
_SHB = PCAPNG_MAGIC
_OPT_TSRESOL = 9
_OPT_TSOFFSET = 14


@attrs.frozen(slots=True)
class Interface:
    """A capture interface: its link type and how its timestamps count."""

    linktype: int
    snaplen: int = 0
    #: timestamp units per second (pcapng ``if_tsresol``; 10**6 for pcap microseconds)
    ts_per_second: int = 1_000_000
    #: seconds added to every timestamp (pcapng ``if_tsoffset``)
    ts_offset: int = 0


@attrs.frozen(slots=True)
class ReaderState:
    """What a reader must know to start reading records in the middle of a file."""

    format: str  # "pcap" or "pcapng"
    endian: str  # "<" or ">"
    interfaces: tuple[Interface, ...]


@attrs.frozen(slots=True)
class RawPacket:
    """One packet record as the file holds it (link-layer bytes, possibly cut by snaplen)."""

    file_offset: int
    timestamp_ns: int
    linktype: int
    data: bytes
    orig_len: int
    interface: int = 0

    @property
    def truncated(self) -> bool:
        return len(self.data) < self.orig_len


@attrs.frozen(slots=True)
class PacketRange:
    """A byte range of a packet file starting on a record boundary, readable on its own."""

    start: int
    end: int  # exclusive; records starting before it belong to the range
    state: ReaderState


def sniff_packet_format(head: bytes) -> str | None:
    """``"pcap"``, ``"pcapng"`` or ``None`` from the first four bytes of a file."""
    if len(head) < 4:
        return None
    be = struct.unpack_from(">I", head)[0]
    le = struct.unpack_from("<I", head)[0]
    if be in (PCAP_MAGIC_US, PCAP_MAGIC_NS) or le in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
        return "pcap"
    if be == PCAPNG_MAGIC:
        return "pcapng"
    return None


def _ts_ns(ts: int, iface: Interface) -> int:
    per = iface.ts_per_second
    if per == 1_000_000_000:
        ns = ts
    elif per == 1_000_000:
        ns = ts * 1000
    else:
        ns = ts * 1_000_000_000 // per
    return ns + iface.ts_offset * 1_000_000_000


def _parse_idb_options(body: bytes, pos: int, end: int, endian: str) -> tuple[int, int]:
    per, offset = 1_000_000, 0
    u16 = struct.Struct(endian + "HH")
    while pos + 4 <= end:
        code, length = u16.unpack_from(body, pos)
        pos += 4
        if code == 0:
            break
        value = body[pos : pos + length]
        pos += (length + 3) & ~3
        if code == _OPT_TSRESOL and length >= 1:
            r = value[0]
            per = 2 ** (r & 0x7F) if r & 0x80 else 10 ** r
            if per == 0 or per > 10**18:
                raise CaptureFormatError(f"pcapng interface with impossible if_tsresol {r:#x}")
        elif code == _OPT_TSOFFSET and length == 8:
            (offset,) = struct.unpack_from(endian + "q", value)
    return per, offset


class PacketReader:
    """Packet records of a pcap or pcapng file, in file order.

    ``PacketReader(stream)`` reads the file header now (raising
    :class:`CaptureFormatError` for an unknown or garbled file); iterating yields
    :class:`RawPacket`. With ``range_`` (from :func:`split_ranges`) the stream is read
    from ``range_.start`` (it must be seekable or already positioned there) and only the
    records that start before ``range_.end`` are yielded.

    A cut-off tail or a garbled record ends the iteration: :attr:`problem` then says
    what and where (``None`` when the file ended cleanly).
    """

    def __init__(self, stream: BinaryIO, *, range_: PacketRange | None = None, chunk_size: int = _CHUNK) -> None:
        self._stream = stream
        self._chunk = chunk_size
        self._buf = b""
        self._pos = 0  # within _buf
        self._base = 0  # file offset of _buf[0]
        self.problem: str | None = None
        self._end: int | None = None
        if range_ is None:
            head = self._read_exact_head(4)
            fmt = sniff_packet_format(head)
            if fmt is None:
                raise CaptureFormatError(f"not a pcap or pcapng file (first bytes {head[:8]!r})")
            self.state = ReaderState(fmt, ">", ())
            if fmt == "pcap":
                self._read_pcap_header()
        else:
            if hasattr(stream, "seek"):
                stream.seek(range_.start)
            self._base = range_.start
            self.state = range_.state
            self._end = range_.end

    # -- buffer ---------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """The file offset of the next record."""
        return self._base + self._pos

    def _fill(self, need: int) -> bool:
        """Make ``need`` bytes available at ``_pos``; False at end of file."""
        while len(self._buf) - self._pos < need:
            chunk = self._stream.read(max(self._chunk, need))
            if not chunk:
                return False
            self._base += self._pos
            self._buf = self._buf[self._pos :] + chunk
            self._pos = 0
        return True

    def _read_exact_head(self, n: int) -> bytes:
        if not self._fill(n):
            have = self._buf[self._pos :]
            raise CaptureFormatError(f"file too short for a capture header ({len(have)} bytes)")
        return self._buf[self._pos : self._pos + n]

    # -- pcap -----------------------------------------------------------------------

    def _read_pcap_header(self) -> None:
        head = self._read_exact_head(24)
        (magic_be,) = struct.unpack_from(">I", head)
        endian = ">" if magic_be in (PCAP_MAGIC_US, PCAP_MAGIC_NS) else "<"
        magic, major, minor, _zone, _sigfigs, snaplen, network = struct.unpack_from(endian + "IHHiIII", head)
        if major != 2:
            raise CaptureFormatError(f"unsupported pcap version {major}.{minor}")
        per = 1_000_000_000 if magic == PCAP_MAGIC_NS else 1_000_000
        # the upper 16 bits of the link-type field may carry FCS information (libpcap)
        iface = Interface(network & 0x03FF_FFFF if network >> 26 else network & 0xFFFF, snaplen, per)
        self.state = ReaderState("pcap", endian, (iface,))
        self._pos += 24

    def _pcap_records(self) -> Iterator[RawPacket]:
        hdr = struct.Struct(self.state.endian + "IIII")
        iface = self.state.interfaces[0]
        per = iface.ts_per_second
        scale = 1_000_000_000 // per
        linktype = iface.linktype
        end = self._end
        while True:
            if end is not None and self.offset >= end:
                return
            if not self._fill(16):
                if len(self._buf) > self._pos:
                    self.problem = f"file ends inside a record header at offset {self.offset}"
                return
            sec, frac, incl, orig = hdr.unpack_from(self._buf, self._pos)
            if incl > MAX_RECORD or frac >= per:
                self.problem = f"garbled pcap record header at offset {self.offset} (length {incl}, fraction {frac})"
                return
            if not self._fill(16 + incl):
                self.problem = (
                    f"file ends inside the packet at offset {self.offset} "
                    f"({16 + incl - (len(self._buf) - self._pos)} bytes missing)"
                )
                return
            start = self._pos
            offset = self._base + start
            data = self._buf[start + 16 : start + 16 + incl]
            self._pos = start + 16 + incl
            yield RawPacket(offset, sec * 1_000_000_000 + frac * scale, linktype, data, max(orig, incl), 0)

    # -- pcapng ---------------------------------------------------------------------

    def _pcapng_records(self) -> Iterator[RawPacket]:
        end = self._end
        while True:
            if end is not None and self.offset >= end:
                return
            if not self._fill(12):
                if len(self._buf) > self._pos:
                    self.problem = f"file ends inside a block header at offset {self.offset}"
                return
            offset = self.offset
            pos = self._pos
            buf = self._buf
            endian = self.state.endian
            if buf[pos : pos + 4] == b"\x0a\x0d\x0d\x0a":
                (bom,) = struct.unpack_from("<I", buf, pos + 8)
                if bom == _BYTE_ORDER_MAGIC:
                    endian = "<"
                elif bom == 0x4D3C2B1A:
                    endian = ">"
                else:
                    self.problem = f"pcapng section header with a bad byte-order magic at offset {offset}"
                    return
            btype, blen = struct.unpack_from(endian + "II", buf, pos)
            if blen < 12 or blen % 4 or blen > MAX_RECORD + 64:
                self.problem = f"garbled pcapng block (type {btype:#x}, length {blen}) at offset {offset}"
                return
            if not self._fill(blen):
                self.problem = f"file ends inside a pcapng block at offset {offset} ({blen - (len(self._buf) - self._pos)} bytes missing)"
                return
            buf = self._buf
            pos = self._pos
            self._pos = pos + blen
            if btype == _EPB:
                if blen < 32:
                    self.problem = f"pcapng enhanced packet block too short at offset {offset}"
                    return
                ifid, ts_hi, ts_lo, cap, orig = struct.unpack_from(endian + "IIIII", buf, pos + 8)
                ifaces = self.state.interfaces
                if ifid >= len(ifaces) or cap > blen - 32:
                    self.problem = f"pcapng packet block with a bad interface {ifid} or length {cap} at offset {offset}"
                    return
                iface = ifaces[ifid]
                data = buf[pos + 28 : pos + 28 + cap]
                yield RawPacket(offset, _ts_ns((ts_hi << 32) | ts_lo, iface), iface.linktype, data, max(orig, cap), ifid)
            elif btype == _SPB:
                ifaces = self.state.interfaces
                if not ifaces:
                    self.problem = f"pcapng simple packet block before any interface at offset {offset}"
                    return
                (orig,) = struct.unpack_from(endian + "I", buf, pos + 8)
                iface = ifaces[0]
                cap = min(orig, blen - 16, iface.snaplen or orig)
                yield RawPacket(offset, 0, iface.linktype, buf[pos + 12 : pos + 12 + cap], max(orig, cap), 0)
            elif btype == _IDB:
                if blen < 20:
                    self.problem = f"pcapng interface block too short at offset {offset}"
                    return
                linktype, _res, snaplen = struct.unpack_from(endian + "HHI", buf, pos + 8)
                per, tsoff = _parse_idb_options(buf, pos + 16, pos + blen - 4, endian)
                iface = Interface(linktype, snaplen, per, tsoff)
                self.state = attrs.evolve(self.state, interfaces=(*self.state.interfaces, iface))
            elif btype == _SHB:
                major = struct.unpack_from(endian + "H", buf, pos + 12)[0]
                if major != 1:
                    self.problem = f"unsupported pcapng version {major} at offset {offset}"
                    return
                self.state = ReaderState("pcapng", endian, ())
            # every other block (name resolution, statistics, custom, ...) is skipped

    def __iter__(self) -> Iterator[RawPacket]:
        if self.state.format == "pcap":
            return self._pcap_records()
        return self._pcapng_records()


def split_ranges(stream: BinaryIO, target_bytes: int) -> list[PacketRange]:
    """Cut a seekable packet file into ranges of about ``target_bytes``, each starting on
    a record boundary with the reader state it needs, by reading only record headers.

    A garbled or cut-off record ends the last range where the reader would stop too.
    """
    stream.seek(0)
    reader = PacketReader(stream)
    ranges: list[PacketRange] = []
    start = reader.offset
    state = reader.state
    # walk records with the reader itself (pcapng state changes matter), resetting
    # the boundary every target_bytes
    for packet in reader:
        if packet.file_offset - start >= target_bytes:
            ranges.append(PacketRange(start, packet.file_offset, state))
            start = packet.file_offset
            state = reader.state
    ranges.append(PacketRange(start, max(reader.offset, start), state))
    return ranges
