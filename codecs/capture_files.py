"""The one capture reader: native trocket captures, pcap and pcapng, all read as
:class:`~trocket.codecs.capture.CaptureRecord` frames plus
:class:`~trocket.codecs.capture.CaptureProblem` reports. Pure: it reads a binary file
object it is given.

    with open(path, "rb") as f:
        capture = CaptureFile(f)          # CaptureFormatError: an unknown file type
        for item in capture:              # records and problems, in capture order
            if isinstance(item, CaptureRecord): ...
        capture.problems                  # every problem seen (also yielded above)
        capture.complete                  # False when something could not be read

The format comes from the first bytes (``TRKCAP\\r\\n``, either pcap magic, pcapng's
section header). A file cut off or garbled part way gives what was read before and a
``truncated-file`` / ``bad-file`` problem, never an exception. For pcaps the layering is
:class:`~.pcap.PacketReader` (records, with file offsets and :func:`~.pcap.split_ranges`)
-> :func:`~.pcap_decode.decode_packet` (TCP segments) -> :class:`~.tcp_connection.ConnectionTracker`
(reassembly and frames, with the server-side convention it documents).
"""

from __future__ import annotations

from typing import BinaryIO, Iterable, Iterator

from .capture import MAGIC, CaptureProblem, CaptureReader, CaptureRecord
from .errors import CaptureFormatError
from .pcap import PacketRange, PacketReader, RawPacket, sniff_packet_format
from .pcap_decode import PacketProblem, TcpSegment, decode_packet
from .tcp_connection import ConnectionTracker, Item

__all__ = ["detect_format", "CaptureFile", "read_capture", "segments_of", "records_from_packets", "packet_range_items", "MAX_PROBLEMS", "INCOMPLETE_KINDS"]

#: problems kept in :attr:`CaptureFile.problems` (all are still yielded and counted)
MAX_PROBLEMS = 10_000
#: problem kinds that make a capture incomplete (``capture show``/``stats`` and ``analyze``
#: exit 1): something in the file could not be read, or stream bytes were lost
INCOMPLETE_KINDS = frozenset({"gap", "truncated-file", "bad-file", "partial-frame", "resync", "not-rocketmq", "bad-frame", "truncated-packet"})
_CHUNK = 1 << 20


def detect_format(head: bytes) -> str:
    """``"trocket"``, ``"pcap"`` or ``"pcapng"`` from a file's first 8 bytes."""
    if head[:8] == MAGIC:
        return "trocket"
    fmt = sniff_packet_format(head[:4])
    if fmt is not None:
        return fmt
    if not head:
        raise CaptureFormatError("empty file: not a capture")
    raise CaptureFormatError(
        f"unknown capture file type (first bytes {head[:8]!r}): expected a trocket capture, pcap or pcapng"
    )


class _Peeked:
    """A read-only stream with its first bytes read ahead (works on pipes too)."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self._head = head
        self._stream = stream

    def read(self, n: int = -1) -> bytes:
        if self._head:
            if n < 0:
                data, self._head = self._head + self._stream.read(), b""
                return data
            data, self._head = self._head[:n], self._head[n:]
            if len(data) < n:
                data += self._stream.read(n - len(data))
            return data
        return self._stream.read(n)


class CaptureFile:
    """Records and problems of one capture file (any of the three formats)."""

    def __init__(self, stream: BinaryIO, *, tracker: ConnectionTracker | None = None) -> None:
        head = stream.read(8)
        self.format = detect_format(head)
        self._stream = _Peeked(head, stream)
        self.problems: list[CaptureProblem] = []
        self.problem_count = 0
        self.records = 0
        self.complete = True
        self._tracker = tracker if tracker is not None else ConnectionTracker()
        self._packets: PacketReader | None = None
        self._native_bytes = 0
        if self.format != "trocket":
            self._packets = PacketReader(self._stream)  # CaptureFormatError for a garbled header

    @property
    def position(self) -> int:
        """Bytes of the file read so far (for a progress bar)."""
        if self._packets is not None:
            return self._packets.offset
        return self._native_bytes

    @property
    def connections(self) -> int:
        """Connections seen in a packet capture (native captures: 0, see the records)."""
        return self._tracker.connections if self._packets is not None else 0

    def _note(self, problem: CaptureProblem) -> CaptureProblem:
        self.problem_count += 1
        if problem.kind in INCOMPLETE_KINDS:
            self.complete = False
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(problem)
        return problem

    def __iter__(self) -> Iterator[Item]:
        source = self._native() if self._packets is None else self._pcap()
        for item in source:
            if type(item) is CaptureRecord:
                self.records += 1
            else:
                self._note(item)
            yield item

    def _native(self) -> Iterator[Item]:
        reader = CaptureReader(expect_header=True)
        stream = self._stream
        while True:
            chunk = stream.read(_CHUNK)
            if not chunk:
                break
            self._native_bytes += len(chunk)
            reader.feed(chunk)
            try:
                yield from reader
            except CaptureFormatError as exc:
                yield CaptureProblem("bad-file", f"{exc}; the rest of the file is not read", file_offset=self._native_bytes - reader.buffered)
                return
        if reader.buffered:
            yield CaptureProblem(
                "truncated-file",
                f"the capture ends with {reader.buffered} bytes of an incomplete record (cut off or still being written)",
                file_offset=self._native_bytes - reader.buffered,
            )

    def _pcap(self) -> Iterator[Item]:
        assert self._packets is not None
        yield from records_from_packets(self._packets, self._tracker)
        if self._packets.problem is not None:
            yield CaptureProblem("truncated-file", self._packets.problem, file_offset=self._packets.offset)
        yield from self._tracker.finish()

    def records_only(self) -> Iterator[CaptureRecord]:
        """Only the records (problems still land in :attr:`problems`)."""
        for item in self:
            if type(item) is CaptureRecord:
                yield item


def segments_of(packets: PacketReader | Iterable[RawPacket]) -> Iterator[TcpSegment | CaptureProblem]:
    """TCP segments of packet records (packets that are not TCP are skipped; bad ones
    become problems). Decoding is per packet: this can run on any subset of packets."""
    for packet in packets:
        seg = decode_packet(packet)
        if seg is None:
            continue
        if type(seg) is PacketProblem:
            kind = "truncated-packet" if "snaplen" in seg.what else "bad-packet"
            yield CaptureProblem(kind, seg.what, seg.timestamp_ns, file_offset=seg.file_offset)
        else:
            yield seg


def records_from_packets(packets: PacketReader | Iterable[RawPacket], tracker: ConnectionTracker) -> Iterator[Item]:
    """Packet records through decoding and the tracker (which is not finished here)."""
    feed = tracker.feed
    for seg in segments_of(packets):
        if type(seg) is TcpSegment:
            items = feed(seg)
            if items:
                yield from items
        else:
            yield seg


def read_capture(stream: BinaryIO) -> tuple[list[CaptureRecord], list[CaptureProblem]]:
    """A whole capture in memory: its records and its problems."""
    capture = CaptureFile(stream)
    records = list(capture.records_only())
    return records, capture.problems


def packet_range_items(stream: BinaryIO, range_: PacketRange) -> Iterator[TcpSegment | CaptureProblem]:
    """Decoded TCP segments (and packet problems) of one range of a packet file, for
    readers that group segments by connection before reassembling (Spark)."""
    reader = PacketReader(stream, range_=range_)
    yield from segments_of(reader)
    if reader.problem is not None:
        yield CaptureProblem("truncated-file", reader.problem, file_offset=reader.offset)
