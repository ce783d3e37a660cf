"""pcap and pcapng captures in Spark, through the codecs' one capture reader.

1. one task per file cuts it into ranges on packet-record boundaries
   (:func:`trocket.codecs.pcap.split_ranges`, headers only);
2. the ranges are read in parallel: each packet decoded to a TCP segment
   (:func:`trocket.codecs.capture_files.packet_range_items`), keyed by its connection
   (the unordered address pair) and its place in the capture (file index, file offset);
3. a shuffle groups each connection in one partition, sorted into capture order;
4. per connection, :class:`trocket.codecs.tcp_connection.ConnectionTracker` reassembles
   both directions and splits frames (gaps, resyncs, foreign streams become problems),
   and every frame becomes a ``frames`` row (:func:`trocket.spark.rows.frame_row`).

The sorted shuffle streams each partition in key order, so an executor holds one
connection's out-of-order buffer at a time, never a whole partition.
"""

from __future__ import annotations

import itertools
import os
import zlib
from collections.abc import Iterator

from trocket.codecs.capture import CaptureProblem, CaptureRecord, Direction
from trocket.codecs.capture_files import packet_range_items
from trocket.codecs.errors import CodecError
from trocket.codecs.pcap import split_ranges
from trocket.codecs.pcap_decode import TcpSegment
from trocket.codecs.tcp_connection import ConnectionTracker

from .rows import TO_CLIENT, TO_SERVER, frame_row

__all__ = ["pcap_rows", "plan_pcap", "read_pcap_range", "reassemble_connection"]


def plan_pcap(path: str, name: str, index: int, split_bytes: int, problem) -> list[tuple]:
    """(path, name, file index, PacketRange) of one file; a file that cannot be read is a problem."""
    try:
        with open(path, "rb") as f:
            ranges = split_ranges(f, split_bytes)
            size = os.fstat(f.fileno()).st_size
    except (OSError, CodecError) as exc:
        problem(f"{name}: {exc}")
        return []
    end = ranges[-1].end if ranges else 0
    if end < size:  # split_ranges stops where a record is cut off or garbled
        problem(f"{name}: the capture is cut off or garbled at offset {end} ({size - end} bytes not read)")
    return [(path, name, index, r) for r in ranges]


def read_pcap_range(item: tuple, problem) -> Iterator[tuple]:
    """((connection key, file index, file offset), segment) of one range's TCP segments."""
    path, name, index, rng = item
    with open(path, "rb") as f:
        for seg in packet_range_items(f, rng):
            if type(seg) is TcpSegment:
                src, dst = seg.src, seg.dst
                key = f"{src}|{dst}" if src <= dst else f"{dst}|{src}"
                yield (key, index, seg.file_offset), (name, seg)
            else:
                problem(f"{name}: {seg.what}" + (f" (file offset {seg.file_offset})" if seg.file_offset is not None else ""))


def _problem_text(p: CaptureProblem, name: str) -> str:
    if p.connection is not None:
        return f"{p.connection.replace(' -> ', '->')}: {p.what}"
    return f"{name}: {p.what}"


def reassemble_connection(segments, problem, since_ns=None, until_ns=None) -> Iterator[tuple]:
    """``frames`` rows of one connection's segments, given in capture order."""
    tracker = ConnectionTracker(id_factory=lambda key, n: n + 1)
    name = ""
    seq = 0

    def rows(items) -> Iterator[tuple]:
        nonlocal seq
        for item in items:
            if type(item) is CaptureRecord:
                ts = item.timestamp_ns
                if (since_ns is not None and ts < since_ns) or (until_ns is not None and ts >= until_ns):
                    continue
                # pcap convention: the server is the recorder (local = server)
                seq += 1  # frame index within the connection (orders equal timestamps)
                yield frame_row(
                    name, seq, ts, item.remote_address, item.local_address,
                    TO_SERVER if item.direction == Direction.RECEIVED else TO_CLIENT, item.frame,
                )  # fmt: skip
            else:
                problem(_problem_text(item, name))

    for name, seg in segments:
        yield from rows(tracker.feed(seg))
    yield from rows(tracker.finish())


def _partition_of(n: int):
    def part(key) -> int:
        return zlib.crc32(key[0].encode()) % n

    return part


def pcap_rows(sc, files, split_bytes, acc, since_ns, until_ns):
    """The RDD of ``frames`` rows of every pcap/pcapng file."""
    import math

    n_ranges = max(1, sum(math.ceil(size / split_bytes) for _, _, size in files))
    n_groups = max(2, sc.defaultParallelism)

    def plan(item):
        (path, name, size), index = item
        found: list[str] = []
        out = plan_pcap(path, name, index, split_bytes, found.append)
        if found:
            acc.add(frozenset(found))
        return out

    def read(it):
        found: list[str] = []
        for rng in it:
            yield from read_pcap_range(rng, found.append)
        if found:
            acc.add(frozenset(found))

    def reassemble(it):
        found: list[str] = []
        for _, group in itertools.groupby(it, key=lambda kv: kv[0][0]):  # lazily, one connection at a time
            yield from reassemble_connection((value for _, value in group), found.append, since_ns, until_ns)
        if found:
            acc.add(frozenset(found))

    ranges = sc.parallelize(list(zip(files, range(len(files)))), len(files)).flatMap(plan)
    if n_ranges > 1:
        ranges = ranges.repartition(n_ranges)
    segments = ranges.mapPartitions(read)
    grouped = segments.repartitionAndSortWithinPartitions(n_groups, _partition_of(n_groups))
    return grouped.mapPartitions(reassemble)
