"""One pass over a stretch of frames: the work of the executors, without Spark.

A stretch is what one task decodes: a native range, or a partition of whole pcap
connections. Its ``frames`` rows (:func:`trocket.spark.rows.frame_row`) are, in one
pass: written as a Parquet part of ``frames``; paired into calls
(:class:`trocket.spark.calls.Pairer`) written as a Parquet part of ``calls``; counted
into a :class:`trocket.spark.summary.Tally`. What leaves the task is the tally and the
stretch's *records* for the second step: the leftovers (calls not closed in the
stretch) and one marker per connection seen, keyed by (connection, capture order), so
that one sorted shuffle brings each connection's leftovers together
(:func:`resolve_records`).

The single-process baseline of ``benchmarks/spark_analyze.py`` runs these same
functions over the whole capture as one stretch.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterable, Iterator

from .arrow import BATCH_ROWS, PartWriter, calls_schema, frames_schema, record_batch
from .calls import Pairer, leftover_order, pair_leftovers
from .summary import Tally

__all__ = ["decode_stretch", "resolve_records", "TALLY_KEY", "record_partition"]

#: key prefix of the records that carry a tally (no connection starts with NUL)
TALLY_KEY = "\x00tally "
_FIRST = (-1, "", -1)  # sorts before every leftover of a connection


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

    def __init__(self, directory: str, part: str, tally: Tally) -> None:
        self._dir = directory
        self._part = part
        self._tally = tally
        self._writer: PartWriter | None = None

    def write(self, rows: list[tuple]) -> None:
        if not rows:
            return
        if self._writer is None:
            self._writer = PartWriter(self._dir, self._part, calls_schema())
        cols = list(zip(*rows))
        self._writer.write(record_batch(cols, calls_schema()))
        self._tally.count_calls(cols[5], cols[6], cols[8], cols[10], cols[11])

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()


def decode_stretch(
    rows: Iterable[tuple], frames_dir: str, calls_dir: str, part: str, batch_rows: int = BATCH_ROWS
) -> list[tuple]:
    """Write ``frames_dir/part.parquet`` and ``calls_dir/part.parquet`` from ``rows``;
    returns the records for :func:`resolve_records`: (key, value) pairs, the tally's
    among them."""
    tally = Tally()
    pairer = Pairer()
    schema = frames_schema()
    connections: set[str] = set()
    with _NoGc():
        frames = PartWriter(frames_dir, f"{part}.parquet", schema)
        calls = _Calls(calls_dir, f"{part}.parquet", tally)
        try:
            chunk: list[tuple] = []
            for row in rows:
                chunk.append(row)
                kind = row[7]
                if kind == "request":
                    pairer.request(row)
                elif kind == "response":
                    pairer.response(row)
                if len(chunk) >= batch_rows:
                    _frames_batch(chunk, frames, schema, tally, connections)
                    chunk = []
                    calls.write(pairer.calls)
                    pairer.calls = []
            if chunk:
                _frames_batch(chunk, frames, schema, tally, connections)
            calls.write(pairer.calls)
            pairer.calls = []
        except BaseException:
            frames.abort()
            calls.abort()
            raise
        if frames.rows:
            frames.close()
        else:
            frames.abort()
        calls.close()
        records: list[tuple] = [((c, _FIRST), None) for c in connections]
        records.extend(((r[3], leftover_order(r)), r) for r in pairer.leftovers())
        records.append(((TALLY_KEY + part, _FIRST), tally.compact()))
    return records


def _frames_batch(chunk: list[tuple], writer: PartWriter, schema, tally: Tally, connections: set[str]) -> None:
    cols = list(zip(*chunk))
    writer.write(record_batch(cols, schema))
    tally.count_frames(cols[7], cols[9], cols[8])
    connections.update(cols[3])


def resolve_records(records: Iterable[tuple], calls_dir: str, part: str) -> Tally:
    """The second step over records sorted by key: each connection's leftovers paired
    (:func:`trocket.spark.calls.pair_leftovers`) and written as ``calls_dir/part.parquet``,
    connections counted, and the tallies merged into the one returned."""
    tally = Tally()
    with _NoGc():
        calls = _Calls(calls_dir, f"{part}.parquet", tally)
        try:
            batch: list[tuple] = []
            for key, group in itertools.groupby(records, key=lambda kv: kv[0][0]):
                if key.startswith(TALLY_KEY):
                    for _, t in group:
                        tally.merge(t)
                    continue
                tally.connections += 1
                for call in pair_leftovers(r for _, r in group if r is not None):
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
    """The partition of a record: by connection (tallies spread by their part name)."""
    import zlib

    def part(key) -> int:
        return zlib.crc32(key[0].encode("utf-8", "surrogatepass")) % n

    return part


def sorted_records(records: Iterable[tuple]) -> Iterator[tuple]:
    """Records in key order (what the sorted shuffle gives a task); for the baseline."""
    return iter(sorted(records, key=lambda kv: kv[0]))
