"""The capture tap: records every frame an endpoint sends or receives.

Pass a sink as ``tap=`` to a server or client. :class:`FileTap` appends records in
the native capture format (:mod:`trocket.codecs.capture`) to a file;
:class:`MemoryTap` keeps them in a list (tests, tools). A sink is anything with
``record(...)`` and ``flush()``.

FileTap buffers records in memory and writes them with one ``os.write`` when the
buffer passes ``flush_bytes``, at every response-table scan (1 s by default) and on
close: a write to the page cache is short enough for the event loop, and batching
keeps the cost per frame to one encode and one append. Only whole records are ever
written, so a reader can follow the file while it grows.
"""

from __future__ import annotations

import os

from typing import Protocol

from trocket.codecs.capture import (
    FILE_HEADER,
    CaptureRecord,
    Direction,
    Role,
    encode_record_fields,
)

__all__ = ["TapSink", "FileTap", "MemoryTap"]


class TapSink(Protocol):
    def record(
        self,
        timestamp_ns: int,
        connection_id: int,
        local_address: str,
        remote_address: str,
        direction: int,
        role: int,
        frame: bytes,
    ) -> None:
        """One frame, whole (length prefix included); must not block or raise."""

    def flush(self) -> None: ...


class FileTap:
    """Append records to ``path``, writing the file header if the file is new."""

    def __init__(self, path: str | os.PathLike, *, flush_bytes: int = 256 * 1024) -> None:
        self.path = os.fspath(path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size == 0:
            self._write(FILE_HEADER)
        self._buf = bytearray()
        self._flush_bytes = flush_bytes
        self.records = 0
        self.errors = 0

    def record(
        self,
        timestamp_ns: int,
        connection_id: int,
        local_address: str,
        remote_address: str,
        direction: int,
        role: int,
        frame: bytes,
    ) -> None:
        if self._fd is None:
            return
        self._buf += encode_record_fields(
            timestamp_ns, connection_id, local_address, remote_address, direction, role, frame
        )
        self.records += 1
        if len(self._buf) >= self._flush_bytes:
            self.flush()

    def flush(self) -> None:
        if self._buf and self._fd is not None:
            data, self._buf = self._buf, bytearray()
            self._write(data)

    def _write(self, data: bytes | bytearray) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError:
            self.errors += 1  # a full disk must not take the connection down

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FileTap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MemoryTap:
    """Keep records in ``self.records`` (bounded by ``limit``; the rest are counted)."""

    def __init__(self, limit: int = 1_000_000) -> None:
        self.records: list[CaptureRecord] = []
        self.limit = limit
        self.dropped = 0

    def record(self, timestamp_ns, connection_id, local_address, remote_address, direction, role, frame) -> None:
        if len(self.records) >= self.limit:
            self.dropped += 1
            return
        self.records.append(
            CaptureRecord(
                timestamp_ns, connection_id, local_address, remote_address, Direction(direction), bytes(frame), Role(role)
            )
        )

    def flush(self) -> None:
        pass



