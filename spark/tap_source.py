"""A Spark Structured Streaming source over a folder of native captures that grow:
what ``trocket broker --tap FILE --tap-rotate-mb N`` writes (``FILE``, ``FILE.1``,
``FILE.2``, ... each appended to until the next one starts).

A PySpark data source (``spark.readStream.format("trocket-tap")``, option ``path``):

- the *offset* is, per file, the byte position up to which its records have been read
  (always a record boundary: a tap writes whole records, but a reader may see the last
  one half written, and it waits for the rest); Spark keeps the offsets of every
  micro-batch in the query's checkpoint, so a restarted query reads on from where the
  last committed batch ended, never twice;
- :meth:`TapStreamReader.latestOffset` lists the folder (names starting with ``.`` or
  ``_`` skipped, files that are no native capture skipped), takes the files in rotation
  order (``FILE`` before ``FILE.1`` before ``FILE.10``) and hops over the new record
  lengths of each (:func:`trocket.spark.native.scan_records`), at most ``maxBytesPerBatch``
  in all (a restart with a backlog catches up in batches of that size, oldest files
  first);
- :meth:`TapStreamReader.partitions` cuts each file's new bytes into ranges on record
  boundaries: of about ``splitBytes``, or less when the batch's new bytes would then
  fill fewer ranges than the ``slots`` Spark runs at once (then into about ``slots``
  equal ranges, at least :data:`MIN_SPLIT_BYTES` each: a batch of 6 MB on two slots is
  two ranges of 3 MB, not 4 + 2, so that both slots finish together), and :meth:`TapStreamReader.read` reads, decodes
  (:func:`trocket.spark.native.read_native_range`: the batch job's reader and decoder),
  pairs and counts a range in an executor (:func:`trocket.spark.live_tally.tally_range`)
  and yields one row for it: the file, the range, its frames, and ``partial``, the
  pickled (tally, leftovers) the follower merges (:mod:`trocket.spark.follow`). No
  frame row crosses into the JVM: what leaves an executor is a range's tally.

A file whose records cannot be hopped (an impossible length: garbled) stays at its
last good boundary; the offset names it under ``"bad"`` with the reason, which the
follower reports. A file that disappears is dropped from the offset. (This module needs PySpark.)
"""

from __future__ import annotations

import os
import sys


import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadMaxBytes, SupportsTriggerAvailableNow

from .inputs import NATIVE_MAGIC, rotation_key

__all__ = ["SCHEMA", "TapSource", "TapStreamReader", "rotation_key", "list_captures", "SOURCE_NAME"]

SOURCE_NAME = "trocket-tap"
#: the smallest range a batch is cut into to fill the slots (a task costs a few ms)
MIN_SPLIT_BYTES = 256 << 10
#: a row per range read: the file, the range, its frames, the pickled (tally, leftovers)
SCHEMA = "capture string, start long, end long, frames long, partial binary"
_SCHEMA = pa.schema([("capture", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("frames", pa.int64()), ("partial", pa.binary())])


def list_captures(directory: str) -> list[tuple[str, int]]:
    """(name, size) of the native captures in ``directory``, in rotation order."""
    out = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for e in entries:
        if e.name.startswith((".", "_")) or not e.is_file():
            continue
        try:
            size = e.stat().st_size
            if size < len(NATIVE_MAGIC):
                continue  # a file just created: its header is not there yet
            with open(e.path, "rb") as f:
                if f.read(len(NATIVE_MAGIC)) != NATIVE_MAGIC:
                    continue
        except OSError:
            continue
        out.append((e.name, size))
    out.sort(key=lambda t: rotation_key(t[0]))
    return out


class TapStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader (see the module docstring). Offsets: ``{"files": {name: byte
    offset}, "bad": {name: reason}}``. The read limit is ``maxBytesPerBatch`` bytes
    (Spark may ask for all that is there); with ``Trigger.AvailableNow`` the files' sizes
    when the query starts are the target."""

    def __init__(self, options) -> None:
        self.path = os.path.abspath(options["path"])
        self.split_bytes = int(options.get("splitBytes", 8 << 20))
        self.slots = max(1, int(options.get("slots", 1)))
        self.max_bytes = int(options.get("maxBytesPerBatch", 256 << 20))
        self.target: dict[str, int] | None = None

    def initialOffset(self) -> dict:
        return {"files": {}, "bad": {}}

    def getDefaultReadLimit(self):
        return ReadMaxBytes(self.max_bytes)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = dict(list_captures(self.path))

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        from .native import file_header_end, scan_records

        start = start or self.initialOffset()
        files: dict = {}
        bad = dict(start.get("bad", {}))
        budget = limit.max_bytes if isinstance(limit, ReadMaxBytes) else (self.max_bytes if limit is None else 1 << 62)
        for name, size in list_captures(self.path):
            at = start["files"].get(name)
            if self.target is not None:
                if name not in self.target:  # came after the query started
                    if at is not None:
                        files[name] = at
                    continue
                size = min(size, self.target[name])
            if at is not None and (budget <= 0 or size <= at or name in bad):
                files[name] = at
                continue
            with open(os.path.join(self.path, name), "rb") as f:
                if at is None:
                    at = file_header_end(f, name, lambda p: None)
                    if at is None:
                        continue  # no valid header (yet): looked at again next time
                if budget <= 0 or size <= at:
                    files[name] = at
                    continue
                scan = scan_records(f, at, size, stop=at + budget)
            if scan.bad_length is not None:
                bad[name] = f"impossible record length {scan.bad_length} at offset {scan.end}: the rest is not read"
            budget -= scan.end - at
            files[name] = scan.end
        return {"files": files, "bad": {k: v for k, v in bad.items() if k in files}}

    def partitions(self, start: dict, end: dict):
        from .native import file_header_end, scan_records

        spans = []  # (path, name, from, to) of each file's new bytes
        for name, stop in sorted(end["files"].items(), key=lambda kv: rotation_key(kv[0])):
            path = os.path.join(self.path, name)
            at = start.get("files", {}).get(name) if start else None
            if at is None:
                try:
                    with open(path, "rb") as f:
                        at = file_header_end(f, name, lambda p: None)
                except OSError:
                    continue
            if at is not None and stop > at:
                spans.append((path, name, at, stop))
        new_bytes = sum(stop - at for _, _, at, stop in spans)
        split = max(MIN_SPLIT_BYTES, min(self.split_bytes, -(-new_bytes // self.slots)))
        parts = []
        for path, name, at, stop in spans:
            n = stop - at  # in about n / split equal ranges, none over splitBytes
            pieces = max(1, round(n / split), -(-n // self.split_bytes))
            try:
                with open(path, "rb") as f:
                    cuts = scan_records(f, at, stop, -(-n // pieces)).cuts
            except OSError:
                continue
            bounds = [at, *(c for c in cuts if c < stop), stop]
            parts.extend(InputPartition((path, name, a, b, 0)) for a, b in zip(bounds, bounds[1:]))
        return parts

    def read(self, partition):
        import pickle

        import pyarrow as pa

        from .live_tally import tally_range
        from .native import read_native_range

        path, name, start, end, _ = partition.value

        def problem(p) -> None:
            print(f"trocket analyze --follow: {p.text}", file=sys.stderr)

        tally, leftovers = tally_range(read_native_range(partition.value, problem))
        blob = pickle.dumps((tally, leftovers), protocol=5)
        frames = sum(v[0] for v in tally.io.values())
        yield pa.RecordBatch.from_pydict(
            {"capture": [name], "start": [start], "end": [end], "frames": [frames], "partial": [blob]}, schema=_SCHEMA
        )

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        pass


class TapSource(DataSource):
    """The ``trocket-tap`` data source (streaming reads only)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> TapStreamReader:
        return TapStreamReader(self.options)
