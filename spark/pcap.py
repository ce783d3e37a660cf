"""pcap and pcapng captures in Spark, through the codecs' one capture reader.

1. one task per file cuts it into ranges on packet-record boundaries
   (:func:`trocket.codecs.pcap.split_ranges`, headers only);
2. the ranges are read in parallel: each packet decoded to a TCP segment
   (:func:`trocket.codecs.capture_files.packet_range_items`), keyed by its address pair
   (unordered) and its place among the captures (the file's first packet time, file
   index, file offset);
3. a shuffle groups each address pair in one partition, sorted: file by file in the
   order the files were captured, whatever the order they were named in;
4. per address pair, :class:`trocket.codecs.tcp_connection.ConnectionTracker`
   reassembles both directions and splits frames (gaps, resyncs, foreign streams
   become problems); a file's segments carry on the previous file's connection only
   when its bytes continue, else a new connection starts (never a silent drop); every
   frame becomes a ``frames`` row (:func:`trocket.spark.rows.frame_row`).

The sorted shuffle streams each partition in key order, so an executor holds one
connection's out-of-order buffer at a time, never a whole partition.
"""

from __future__ import annotations

import itertools
import zlib
from collections import Counter
from collections.abc import Iterator

from trocket.codecs.capture import CaptureProblem, CaptureRecord, Direction
from trocket.codecs.capture_files import packet_range_items
from trocket.codecs.errors import CodecError
from trocket.codecs.pcap import PacketReader, split_ranges
from trocket.codecs.pcap_decode import TcpSegment
from trocket.codecs.tcp_connection import ConnectionTracker

from .problems import Problem
from .rows import TO_CLIENT, TO_SERVER, frame_row
from .storage import LOCAL, Storage, StorageError, file_size, open_input

__all__ = ["pcap_stretches", "plan_pcap", "read_pcap_range", "reassemble_connection"]


def plan_pcap(capture, split_bytes: int, problem, storage: Storage = LOCAL) -> list[tuple]:
    """(path, name, file index, first packet's time, PacketRange) of one file's ranges
    (its path or URI reached through ``storage``); a file that cannot be read is a problem."""
    path, name, index = capture.path, capture.name, capture.index
    try:
        with open_input(path, storage) as f:
            ranges = split_ranges(f, split_bytes)
            size = file_size(f)
            first_ts = 0
            if ranges:
                reader = PacketReader(f, range_=ranges[0])
                first = next(iter(reader), None)
                first_ts = first.timestamp_ns if first is not None else 0
    except (OSError, StorageError, CodecError) as exc:
        kind = "bad-file" if isinstance(exc, CodecError) else "unreadable"
        problem(Problem(kind, name, f"{name}: {exc}"))
        return []
    end = ranges[-1].end if ranges else 0
    if end < size:  # split_ranges stops where a record is cut off or garbled
        problem(Problem("truncated-file", name, f"{name}: the capture is cut off or garbled at offset {end} ({size - end} bytes not read)"))
    return [(path, name, index, first_ts, r) for r in ranges]


def read_pcap_range(item: tuple, problem, storage: Storage = LOCAL) -> Iterator[tuple]:
    """((address pair, file's first time, file index, file offset), (file index, name,
    segment)) of one range's TCP segments: sorted by that key, a connection's segments
    come file by file, the files in the order they were captured, each in capture order."""
    path, name, index, first_ts, rng = item
    with open_input(path, storage) as f:
        for seg in packet_range_items(f, rng):
            if type(seg) is TcpSegment:
                src, dst = seg.src, seg.dst
                key = f"{src}|{dst}" if src <= dst else f"{dst}|{src}"
                yield (key, first_ts, index, seg.file_offset), (index, name, seg)
            else:
                where = f" (file offset {seg.file_offset})" if seg.file_offset is not None else ""
                problem(Problem(seg.kind, name, f"{name}: {seg.what}{where}"))


class _Piece:
    """One capture's part of one connection: the pcap ``connection_id`` of its frames
    (the file offset of its first segment in that capture) and the piece it carries on."""

    __slots__ = ("capture", "cid", "prev", "label", "first_ts", "last_ts")

    def __init__(self, capture: str, cid: int, prev: tuple | None, ts: int) -> None:
        self.capture = capture
        self.cid = cid
        self.prev = prev
        self.label: str | None = None
        self.first_ts = ts
        self.last_ts = ts

    def marker(self, key: str) -> tuple:
        a, b = key.split("|")
        return ("piece", self.label or f"{a}<->{b}", self.capture, self.cid, self.prev, self.first_ts, self.last_ts)


def reassemble_connection(segments, problem, since_ns=None, until_ns=None, pieces=None, account=None) -> Iterator[tuple]:
    """``frames`` rows of one address pair's segments, given file by file (files in
    capture order, :func:`read_pcap_range`'s key), each file's in capture order.

    A file's segments that carry on the bytes where the previous file left the
    connection (:meth:`TcpConnection.continues`) are fed to the same connection: a
    stitched stream, whose pieces keep their own capture and ``connection_id``; otherwise
    the previous connection is finished and the file's segments start a new one. Every
    piece is appended to ``pieces`` (its marker, see :class:`_Piece`); ``account`` gets
    each capture's bytes (``stream``, ``duplicate``, ``problem``, ``filtered``,
    ``carried``)."""
    offset = 0  # of the segment being fed: a connection it starts is known by it
    tracker = ConnectionTracker()
    by_cid: dict[int, _Piece] = {}  # tracker connection id -> its current piece
    all_pieces: list[_Piece] = []
    seqs: dict[int, int] = {}
    name = ""
    index = None
    key = None
    start_counts = tracker.byte_counts()
    counts = account if account is not None else Counter()

    def rows(items) -> Iterator[tuple]:
        for item in items:
            if type(item) is CaptureRecord:
                cid = item.connection_id
                piece = by_cid.get(cid)
                if piece is None:  # started and finished by one segment
                    piece = by_cid[cid] = _Piece(name, offset, None, item.timestamp_ns)
                    all_pieces.append(piece)
                if piece.label is None:
                    piece.label = f"{item.remote_address}->{item.local_address}"
                ts = item.timestamp_ns
                if (since_ns is not None and ts < since_ns) or (until_ns is not None and ts >= until_ns):
                    counts[(name, "filtered")] += len(item.frame)
                    continue
                # pcap convention: the server is the recorder (local = server)
                seq = seqs.get(cid, 0) + 1  # frame index within the stream (orders equal timestamps)
                seqs[cid] = seq
                yield frame_row(
                    piece.capture, piece.cid, seq, ts, item.remote_address, item.local_address,
                    TO_SERVER if item.direction == Direction.RECEIVED else TO_CLIENT, item.frame,
                )  # fmt: skip
            else:
                problem(Problem(item.kind, name, _problem_text(item, name)))

    def close_piece() -> None:
        nonlocal start_counts
        now = tracker.byte_counts()
        d = now - start_counts
        counts[(name, "duplicate")] += d.duplicates
        counts[(name, "problem")] += d.problems
        counts[(name, "carried")] += d.buffered
        start_counts = now

    for seg_index, seg_name, seg in segments:
        if seg_index != index:
            if index is None:
                src, dst = seg.src, seg.dst
                key = (src, dst) if src <= dst else (dst, src)
            else:
                conn = tracker.open_connection(key)
                if conn is None or not conn.continues(seg):
                    # not this connection's next bytes (or it ended): finished, and the
                    # key forgotten, so this file's segments start a connection of their own
                    yield from rows(tracker.end(key))
                close_piece()
            index, name = seg_index, seg_name
            conn = tracker.open_connection(key)
            if conn is not None:  # carried on from the previous file: a new piece of it
                prev = by_cid[conn.connection_id]
                piece = by_cid[conn.connection_id] = _Piece(name, seg.file_offset, (prev.capture, prev.cid), seg.timestamp_ns)
                piece.label = prev.label
                all_pieces.append(piece)
        counts[(name, "stream")] += len(seg.payload)
        offset = seg.file_offset
        items = tracker.feed(seg)
        conn = tracker.open_connection(key)
        if conn is not None:
            piece = by_cid.get(conn.connection_id)
            if piece is None:  # a connection that started in this file, with this segment
                piece = by_cid[conn.connection_id] = _Piece(name, offset, None, seg.timestamp_ns)
                all_pieces.append(piece)
            piece.last_ts = seg.timestamp_ns
        if items:
            yield from rows(items)
    if index is not None:
        yield from rows(tracker.finish())
        close_piece()
    if pieces is not None and key is not None:
        text_key = f"{key[0]}|{key[1]}"
        pieces.extend(p.marker(text_key) for p in all_pieces)


def _problem_text(p: CaptureProblem, name: str) -> str:
    if p.connection is not None:
        return f"{p.connection.replace(' -> ', '->')}: {p.what}"
    return f"{name}: {p.what}"


def _partition_of(n: int):
    def part(key) -> int:
        return zlib.crc32(key[0].encode()) % n

    return part


def pcap_stretches(sc, files, split_bytes, acc, since_ns, until_ns, decode, storage: Storage = LOCAL):
    """The RDD of every pcap/pcapng file's stretch records: ``decode(index, rows,
    pieces, account)`` (:func:`trocket.spark.stretch.decode_stretch`) run on each
    partition of whole connections; the files reached through ``storage``."""
    import math

    n_ranges = max(1, sum(math.ceil(c.size / split_bytes) for c in files))
    n_groups = max(2, sc.defaultParallelism)

    def plan(capture):
        found: list = []
        out = plan_pcap(capture, split_bytes, found.append, storage)
        if found:
            acc.add(frozenset(found))
        return out

    def read(it):
        found: list = []
        for rng in it:
            yield from read_pcap_range(rng, found.append, storage)
        if found:
            acc.add(frozenset(found))

    def reassemble(i, it):
        found: list = []
        pieces: list = []
        account: Counter = Counter()

        def rows():
            for _, group in itertools.groupby(it, key=lambda kv: kv[0][0]):  # lazily, one address pair at a time
                yield from reassemble_connection((value for _, value in group), found.append, since_ns, until_ns, pieces, account)

        records = decode(i, rows(), pieces, account)
        if found:
            acc.add(frozenset(found))
        return records

    ranges = sc.parallelize(files, len(files)).flatMap(plan)
    if n_ranges > 1:
        ranges = ranges.repartition(n_ranges)
    segments = ranges.mapPartitions(read)
    grouped = segments.repartitionAndSortWithinPartitions(n_groups, _partition_of(n_groups))
    return grouped.mapPartitionsWithIndex(reassemble)
