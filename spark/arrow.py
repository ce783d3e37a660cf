"""Columns to Arrow record batches to Parquet: how the tables leave the executors.

Each stretch of frames (:mod:`trocket.spark.stretch`) writes its ``frames`` and its
``calls`` as its own Parquet part files with pyarrow, straight from the Python worker:
handing rows to the JVM (``createDataFrame``, ``mapInArrow``) and letting Spark write
them cost more than the decoding itself, and on a 2-core machine that JVM work competes
with the Python workers for the same cores. Rows are transposed into columns once per
batch (``zip(*rows)``, C-level) and each column becomes one Arrow array.
"""

from __future__ import annotations

import itertools
import os
import posixpath

from .calls import CALL_FIELDS
from .rows import FRAME_FIELDS
from .storage import LOCAL, Storage, filesystem

__all__ = [
    "BATCH_ROWS", "schema_of", "frames_schema", "calls_schema", "frames_file_schema", "calls_file_schema", "record_batch",
    "frames_file_batch", "calls_file_batch", "PartWriter", "write_parquet", "partition_dir",
]

BATCH_ROWS = 16384

_SCHEMAS: dict = {}


def schema_of(fields: tuple[tuple[str, str], ...]):
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "long": pa.int64(),
        "int": pa.int32(),
        "double": pa.float64(),
        "boolean": pa.bool_(),
        "map<string,string>": pa.map_(pa.string(), pa.string()),
    }
    return pa.schema([pa.field(name, types[t]) for name, t in fields])


def frames_schema():
    """The Arrow schema of ``frames`` (:data:`trocket.spark.rows.FRAME_FIELDS`)."""
    if "frames" not in _SCHEMAS:
        _SCHEMAS["frames"] = schema_of(FRAME_FIELDS)
    return _SCHEMAS["frames"]


def calls_schema():
    """The Arrow schema of ``calls`` (:data:`trocket.spark.calls.CALL_FIELDS`)."""
    if "calls" not in _SCHEMAS:
        _SCHEMAS["calls"] = schema_of(CALL_FIELDS)
    return _SCHEMAS["calls"]



def frames_file_schema():
    """The schema of a ``frames`` part file: the rows' columns but ``capture`` (the
    table is partitioned by it: ``frames/capture=NAME/``), a ``ts`` TIMESTAMP beside
    ``ts_ns``, and the client's and server's ip and port apart."""
    if "frames_file" not in _SCHEMAS:
        import pyarrow as pa

        fields = [f for f in frames_schema() if f.name != "capture"]
        names = [f.name for f in fields]
        fields.insert(names.index("ts_ns") + 1, pa.field("ts", pa.timestamp("us", tz="UTC")))
        for side in ("server", "client"):  # each after its address column
            at = [f.name for f in fields].index(side) + 1
            fields[at:at] = [pa.field(f"{side}_ip", pa.string()), pa.field(f"{side}_port", pa.int32())]
        _SCHEMAS["frames_file"] = pa.schema(fields)
    return _SCHEMAS["frames_file"]


def calls_file_schema():
    """The schema of a ``calls`` part file: the rows' columns and a ``request_ts``
    TIMESTAMP (the response's time for an orphan response)."""
    if "calls_file" not in _SCHEMAS:
        import pyarrow as pa

        fields = list(calls_schema())
        at = [f.name for f in fields].index("response_ts_ns") + 1
        fields.insert(at, pa.field("ts", pa.timestamp("us", tz="UTC")))
        _SCHEMAS["calls_file"] = pa.schema(fields)
    return _SCHEMAS["calls_file"]


def _timestamps(ts_ns):
    import numpy as np
    import pyarrow as pa

    ns = ts_ns.to_numpy(zero_copy_only=False) if ts_ns.null_count == 0 else ts_ns.fill_null(0).to_numpy()
    return pa.array(np.asarray(ns, dtype=np.int64) // 1000, type=pa.timestamp("us", tz="UTC"), mask=ts_ns.is_null().to_numpy(zero_copy_only=False) if ts_ns.null_count else None)


def _host_port(addresses):
    """(ip, port) columns of ``host:port`` / ``[v6]:port`` strings, split once per
    distinct address (a batch holds few)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(addresses)
    hosts, ports = [], []
    for text in enc.dictionary.to_pylist():
        host, _, port = (text or "").rpartition(":")
        hosts.append(host[1:-1] if host.startswith("[") else host)
        ports.append(int(port) if port.isdigit() else None)
    idx = enc.indices
    return pa.array(hosts, pa.string()).take(idx), pa.array(ports, pa.int32()).take(idx)


def frames_file_batch(batch):
    """A ``frames`` row batch (:func:`frames_schema`) as its part file holds it."""
    import pyarrow as pa

    cols = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
    cols["ts"] = _timestamps(cols["ts_ns"])
    for side in ("client", "server"):
        cols[f"{side}_ip"], cols[f"{side}_port"] = _host_port(cols[side])
    schema = frames_file_schema()
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


def calls_file_batch(batch):
    """A ``calls`` row batch as its part file holds it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
    cols["ts"] = _timestamps(pc.coalesce(cols["request_ts_ns"], cols["response_ts_ns"]))
    schema = calls_file_schema()
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


#: characters Hive (and Spark, ``ExternalCatalogUtils.escapePathName``) escape in a
#: partition directory's value
_ESCAPED = frozenset('"#%\'*/:=?\\\x7f{[]^') | frozenset(chr(c) for c in range(1, 32))


def partition_dir(column: str, value: str) -> str:
    """``column=value`` with the value escaped as Spark writes partition directories."""
    return column + "=" + "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def _map_array(col, type_):
    # offsets + flat keys + flat values: several times faster than pa.array over a
    # list of item lists
    import pyarrow as pa

    offsets = [0]
    mask = []
    total = 0
    for m in col:
        if m:
            total += len(m)
        offsets.append(total)
        mask.append(m is None)
    present = [m for m in col if m]
    keys = pa.array(list(itertools.chain.from_iterable(present)), pa.string())
    values = pa.array(list(itertools.chain.from_iterable(m.values() for m in present)), pa.string())
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, values, type=type_, mask=pa.array(mask))


def record_batch(columns, schema):
    """One ``pyarrow.RecordBatch`` of ``columns`` (sequences in ``schema`` order)."""
    import pyarrow as pa

    arrays = []
    for col, field in zip(columns, schema):
        if pa.types.is_map(field.type):
            arrays.append(_map_array(col, field.type))
        else:
            arrays.append(pa.array(col, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class PartWriter:
    """One Parquet part file ``directory/part``, written under a hidden name and renamed
    when complete: a retried or failed task never leaves half a file where Spark reads
    (it skips names starting with a dot), and a retry of the same part replaces it whole.
    ``directory``: a local path or a URI, reached through ``storage``
    (:mod:`trocket.spark.storage`)."""

    def __init__(self, directory: str, part: str, schema, storage: Storage = LOCAL) -> None:
        import pyarrow.parquet as pq

        self._fs, d = filesystem(directory, storage)
        self.final = posixpath.join(d, part)
        self._tmp = posixpath.join(d, f".{part}.{os.getpid()}.tmp")
        self._writer = pq.ParquetWriter(self._tmp, schema, compression="snappy", filesystem=self._fs)
        self.rows = 0

    def write(self, batch) -> None:
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def close(self) -> int:
        self._writer.close()
        self._fs.move(self._tmp, self.final)
        return self.rows

    def abort(self) -> None:
        self._writer.close()
        try:
            self._fs.delete_file(self._tmp)
        except OSError:
            pass


def write_parquet(rows, directory: str, part: str, schema=None, batch_rows: int = BATCH_ROWS, storage: Storage = LOCAL) -> int:
    """Write row tuples as one Parquet part file (``frames`` rows by default); the row count."""
    schema = schema if schema is not None else frames_schema()
    writer = PartWriter(directory, part, schema, storage)
    chunk: list[tuple] = []
    try:
        for row in rows:
            chunk.append(row)
            if len(chunk) >= batch_rows:
                writer.write(record_batch(list(zip(*chunk)), schema))
                chunk = []
        if chunk:
            writer.write(record_batch(list(zip(*chunk)), schema))
    except BaseException:
        writer.abort()
        raise
    return writer.close()
