"""Rows to Arrow record batches: how decoded frames leave the Python executors.

Row tuples handed to the JVM one by one (pickled, then converted field by field) cost
more than decoding the frame did; a column-wise Arrow batch (``mapInArrow``) costs a
fraction of it. One batch holds at most ``BATCH_ROWS`` rows, so an executor's Python
side holds one batch at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from .rows import FRAME_FIELDS

__all__ = ["BATCH_ROWS", "arrow_schema", "batches"]

BATCH_ROWS = 8192


def arrow_schema():
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "long": pa.int64(),
        "int": pa.int32(),
        "map<string,string>": pa.map_(pa.string(), pa.string()),
    }
    return pa.schema([pa.field(name, types[t]) for name, t in FRAME_FIELDS])


def batches(rows: Iterable[tuple], batch_rows: int = BATCH_ROWS) -> Iterator:
    """``pyarrow.RecordBatch`` es of ``FRAME_FIELDS`` rows."""
    import pyarrow as pa

    schema = arrow_schema()
    fields = list(schema)
    map_index = [i for i, (_, t) in enumerate(FRAME_FIELDS) if t.startswith("map")]
    chunk: list[tuple] = []

    def map_array(col: tuple, type_):
        # offsets + flat keys + flat values: several times faster than pa.array over
        # a list of item lists
        offsets = [0]
        mask = []
        total = 0
        for m in col:
            if m:
                total += len(m)
            offsets.append(total)
            mask.append(m is None)
        keys = pa.array(list(itertools.chain.from_iterable(m for m in col if m)), pa.string())
        values = pa.array(list(itertools.chain.from_iterable(m.values() for m in col if m)), pa.string())
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, values, type=type_, mask=pa.array(mask))

    def batch(chunk: list[tuple]):
        columns = list(zip(*chunk))
        arrays = []
        for i, field in enumerate(fields):
            col = columns[i]
            arrays.append(map_array(col, field.type) if i in map_index else pa.array(col, type=field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    for row in rows:
        chunk.append(row)
        if len(chunk) >= batch_rows:
            yield batch(chunk)
            chunk = []
    if chunk:
        yield batch(chunk)
