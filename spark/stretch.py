"""One pass over a stretch of frames: the work of the executors, without Spark.

A stretch is what one task decodes: a native range, or a partition of whole pcap
connections. Its ``frames`` rows (:func:`trocket.spark.rows.frame_row`) are, in one
pass: written as a Parquet part of ``frames``; paired into calls
(:class:`trocket.spark.calls.Pairer`) written as a Parquet part of ``calls``; counted
into a :class:`trocket.spark.summary.Tally`. What leaves the task is the tally and the
stretch's *records* for the second step: the leftovers (calls not closed in the
stretch) and markers of the connection pieces seen, keyed by (address pair, capture
order), so that one sorted shuffle brings each address pair's pieces and leftovers
together (:func:`resolve_records`): the pieces are resolved into streams
(:mod:`trocket.spark.streams`), the leftovers paired by stream.

The single-process baseline of ``benchmarks/spark_analyze.py`` runs these same
functions over the whole capture as one stretch.
"""

from __future__ import annotations

import gc
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator

from .arrow import (
    BATCH_ROWS,
    PartWriter,
    calls_file_batch,
    calls_file_schema,
    calls_schema,
    frames_file_batch,
    frames_file_schema,
    frames_schema,
    partition_dir,
    record_batch,
)
from .calls import C, Pairer, leftover_order, pair_leftovers
from .rows import F
from .storage import LOCAL, Storage, join, make_dirs
from .streams import Streams
from .summary import Tally

__all__ = ["decode_stretch", "resolve_records", "TALLY_KEY", "record_partition"]

#: key prefix of the records that carry a tally (no connection starts with NUL)
TALLY_KEY = "\x00tally "
_FIRST = (-1, "", -1, -1)  # sorts before every leftover of an address pair: the markers


class _NoGc:
    """Python's cyclic GC off while a stretch runs: the decoder allocates millions of
    small containers that reference counting frees, and a generation scan over a full
    batch of rows cost as much as building the Arrow arrays (measured: 4.4 against
    11 µs a frame for the Arrow step)."""

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self._was:
            gc.enable()


class _Calls:
    """The calls part of a task, opened at its first row (a stretch that pairs nothing
    writes no file)."""

    def __init__(self, directory: str, part: str, tally: Tally, storage: Storage = LOCAL) -> None:
        self._dir = directory
        self._part = part
        self._tally = tally
        self._storage = storage
        self._writer: PartWriter | None = None

    def write(self, rows: list[tuple]) -> None:
        if not rows:
            return
        if self._writer is None:
            self._writer = PartWriter(self._dir, self._part, calls_file_schema(), self._storage)
        cols = list(zip(*rows))
        batch = record_batch(cols, calls_schema())
        self._writer.write(calls_file_batch(batch))
        self._tally.count_calls(cols[C.STATUS], cols[C.REQ_CODE], cols[C.RESP_CODE], cols[C.REQ_TS], cols[C.RESP_TS],
                                cols[C.LONG_POLL], cols[C.HOLD_OUTCOME])  # fmt: skip

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()


class _Frames:
    """The frames parts of a task: one per capture (the table is partitioned by it),
    each opened at its first row; per (capture, connection id) piece, the first and
    last times and the frames seen (the stream markers)."""

    def __init__(self, directory: str, part: str, tally: Tally, storage: Storage = LOCAL) -> None:
        self._dir = directory
        self._part = part
        self._tally = tally
        self._storage = storage
        self._writers: dict[str, PartWriter] = {}
        self.pieces: dict[tuple, list] = {}  # (capture, cid, connection) -> [first, last, n]

    def write(self, chunk: list[tuple]) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        cols = list(zip(*chunk))
        batch = record_batch(cols, frames_schema())
        captures = set(cols[F.CAPTURE])
        if len(captures) == 1:
            parts = [(cols[F.CAPTURE][0], batch)]
        else:
            table = pa.Table.from_batches([batch])
            parts = [(c, table.filter(pc.equal(table["capture"], c)).combine_chunks().to_batches()[0]) for c in sorted(captures)]
        for capture, b in parts:
            writer = self._writers.get(capture)
            if writer is None:
                d = join(self._dir, partition_dir("capture", capture))
                make_dirs(d, self._storage)
                writer = self._writers[capture] = PartWriter(d, self._part, frames_file_schema(), self._storage)
            writer.write(frames_file_batch(b))
        self._tally.count_frames(cols[F.KIND], cols[F.CODE], cols[F.SERIALIZE])
        agg = pa.Table.from_batches([batch.select(["capture", "connection_id", "connection", "ts_ns", "frame_len"])]).group_by(
            ["capture", "connection_id", "connection"]
        ).aggregate([("ts_ns", "min"), ("ts_ns", "max"), ("frame_len", "sum"), ("frame_len", "count")])
        count = self._tally.bytes
        for capture, cid, conn, lo, hi, nbytes, n in zip(*(agg.column(i).to_pylist() for i in range(7))):
            got = self.pieces.get((capture, cid, conn))
            if got is None:
                self.pieces[(capture, cid, conn)] = [lo, hi, n]
            else:
                got[0] = min(got[0], lo)
                got[1] = max(got[1], hi)
                got[2] += n
            count[(capture, "frames")] += n
            count[(capture, "frame")] += nbytes

    def close(self) -> None:
        for w in self._writers.values():
            w.close()

    def abort(self) -> None:
        for w in self._writers.values():
            w.abort()


def decode_stretch(
    rows: Iterable[tuple], frames_dir: str, calls_dir: str, part: str, fmt: str = "native", *,
    pieces: list | None = None, account: Counter | None = None, batch_rows: int = BATCH_ROWS, storage: Storage = LOCAL,
) -> list[tuple]:  # fmt: skip
    """Write ``frames_dir/capture=NAME/part.parquet`` (one per capture met) and
    ``calls_dir/part.parquet`` from ``rows``; returns the records for
    :func:`resolve_records`: (key, value) pairs, the tally's among them. ``fmt``: the
    captures' format (``native`` or ``pcap``: how their pieces are stitched); ``pieces``:
    the pcap reassembly's piece markers (filled while ``rows`` is read); ``account``:
    the readers' byte counts by (capture, what), merged into the tally; ``storage``: how
    the folders (local paths or URIs) are reached."""
    tally = Tally()
    pairer = Pairer()
    with _NoGc():
        frames = _Frames(frames_dir, f"{part}.parquet", tally, storage)
        calls = _Calls(calls_dir, f"{part}.parquet", tally, storage)
        try:
            chunk: list[tuple] = []
            for row in rows:
                kind = row[F.KIND]
                if kind == "request":
                    pairer.request(row)
                elif kind == "response":
                    q = pairer.response(row)
                    if q is not None and row[F.TOPIC] is None:
                        # the response carries its request's topic, group and queue
                        row = (*row[: F.TOPIC], q[F.TOPIC], q[F.GROUP], q[F.QUEUE_ID], *row[F.QUEUE_ID + 1 :])
                chunk.append(row)
                if len(chunk) >= batch_rows:
                    frames.write(chunk)
                    chunk = []
                    calls.write(pairer.calls)
                    pairer.calls = []
            if chunk:
                frames.write(chunk)
            calls.write(pairer.calls)
            pairer.calls = []
        except BaseException:
            frames.abort()
            calls.abort()
            raise
        frames.close()
        calls.close()
        if account:
            tally.bytes.update(account)
        records: list[tuple] = [
            ((conn, _FIRST), ("frames", capture, cid, fmt, lo, hi, n)) for (capture, cid, conn), (lo, hi, n) in frames.pieces.items()
        ]
        records.extend(((m[1], _FIRST), m) for m in pieces or ())
        records.extend(((r[F.CONNECTION], leftover_order(r)), r) for r in pairer.leftovers())
        records.append(((TALLY_KEY + part, _FIRST), tally.compact()))
    return records


def resolve_records(records: Iterable[tuple], calls_dir: str, part: str, spans: dict | None = None, storage: Storage = LOCAL) -> Tally:
    """The second step over records sorted by key, one address pair at a time: its
    pieces resolved into streams (:class:`trocket.spark.streams.Streams`; ``spans``:
    the native captures' (first, last) times), its leftovers paired by stream
    (:func:`trocket.spark.calls.pair_leftovers`) and written as ``calls_dir/part.parquet``,
    streams with frames counted as connections, and the tallies merged into the one
    returned."""
    tally = Tally()
    with _NoGc():
        calls = _Calls(calls_dir, f"{part}.parquet", tally, storage)
        try:
            batch: list[tuple] = []
            for key, group in itertools.groupby(records, key=lambda kv: kv[0][0]):
                if key.startswith(TALLY_KEY):
                    for _, t in group:
                        tally.merge(t)
                    continue
                streams = Streams(spans)
                leftovers = []
                for (_, order), value in group:
                    if order == _FIRST:
                        streams.add(value)
                    else:
                        leftovers.append(value)
                with_frames = {streams.stream_of(c, cid) for c, cid in streams.frames}
                tally.connections += len(with_frames)
                for call in pair_leftovers(leftovers, streams.stream_of):
                    batch.append(call)
                    if len(batch) >= BATCH_ROWS:
                        calls.write(batch)
                        batch = []
            calls.write(batch)
        except BaseException:
            calls.abort()
            raise
        calls.close()
    return tally.compact()


def record_partition(n: int):
    """The partition of a record: by address pair (tallies spread by their part name)."""
    import zlib

    def part(key) -> int:
        return zlib.crc32(key[0].encode("utf-8", "surrogatepass")) % n

    return part


def sorted_records(records: Iterable[tuple]) -> Iterator[tuple]:
    """Records in key order (what the sorted shuffle gives a task); for the baseline."""
    return iter(sorted(records, key=lambda kv: kv[0]))
