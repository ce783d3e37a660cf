"""The capture tap: records every frame an endpoint sends or receives.

Pass a sink as ``tap=`` to a server or client. :class:`FileTap` appends records in
the native capture format (:mod:`trocket.codecs.capture`) to a file;
:class:`MemoryTap` keeps them in a list (tests, tools). A sink is anything with
``record(...)`` and ``flush()``.

FileTap never blocks the event loop on the disk: ``record`` encodes the record (the
connection's address fields cached) and appends it to an in-memory queue (a deque,
no lock); a writer thread drains the queue with one ``os.write`` per batch, at least once a
second, sooner when ``flush_bytes`` are waiting or ``flush()`` is called. The queue
is bounded (``max_buffer_bytes``, 64 MiB by default): when a slow disk lets it fill,
new records are dropped and counted (:attr:`FileTap.dropped`), never queued without
bound and never waited for; :meth:`FileTap.summary` says how many, and
``trocket broker --tap`` prints it on exit. Only whole records are ever written, so a
reader can follow the file while it grows.

Rotation (``rotate_bytes``): the first file is ``path``; once it holds that many
bytes the writer continues in ``path.1``, then ``path.2``, ... each a complete
capture with its own file header, cut only between records. Reading ``path``,
``path.1``, ``path.2`` in order gives the whole session.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from typing import Protocol

from trocket.codecs.capture import (
    FILE_HEADER,
    CaptureRecord,
    Direction,
    Role,
    encode_addresses,
    encode_record_with_addresses,
)

__all__ = ["TapSink", "FileTap", "MemoryTap", "rotated_paths"]

log = logging.getLogger("trocket.remoting.tap")


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
        """One frame, whole (length prefix included); must not block or raise.
        FileTap and MemoryTap also take ``flags`` (the capture format's, e.g. RAW)."""

    def flush(self) -> None: ...


def rotated_paths(path: str | os.PathLike) -> list[str]:
    """``path`` and the rotation files after it that exist, in order."""
    base = os.fspath(path)
    paths = [base] if os.path.exists(base) else []
    n = 1
    while os.path.exists(f"{base}.{n}"):
        paths.append(f"{base}.{n}")
        n += 1
    return paths


class FileTap:
    """Append records to ``path`` (header written if the file is new) from a writer
    thread; see the module docstring for the buffer bound and rotation."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        flush_bytes: int = 256 * 1024,
        max_buffer_bytes: int = 64 * 1024 * 1024,
        rotate_bytes: int | None = None,
        flush_interval: float = 1.0,
    ) -> None:
        if rotate_bytes is not None and rotate_bytes <= len(FILE_HEADER):
            raise ValueError(f"rotate_bytes must be more than {len(FILE_HEADER)}")
        self.path = os.fspath(path)
        self.current_path = self.path
        self._rotate_bytes = rotate_bytes
        self._file_index = 0
        self._fd: int | None = None
        self._size = 0
        self._open(self.path)  # errors here (a bad path) are the caller's, at once
        self._flush_bytes = flush_bytes
        self._max_buffer = max_buffer_bytes
        self._interval = flush_interval
        # Lock-free hand-over: deque append/popleft are atomic, and each byte counter
        # has one writer (queued: the recording thread; drained: the writer thread).
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._drained = 0
        self._wake = threading.Event()
        self._addresses: dict[int, tuple[str, str, bytes]] = {}  # conn id -> local, remote, encoded
        self._closing = False
        self._closed = False
        #: records accepted into the buffer / written to disk / dropped (buffer full)
        self.records = 0
        self.written = 0
        self.dropped = 0
        #: records lost to write errors (a full disk), and the number of failed writes
        self.lost = 0
        self.errors = 0
        self._thread = threading.Thread(target=self._writer, name=f"tap-writer {self.path}", daemon=True)
        self._thread.start()

    # -- the event loop's side ---------------------------------------------------------

    def record(
        self,
        timestamp_ns: int,
        connection_id: int,
        local_address: str,
        remote_address: str,
        direction: int,
        role: int,
        frame: bytes,
        flags: int = 0,
    ) -> None:
        if self._closing:
            return
        cached = self._addresses.get(connection_id)
        if cached is None or cached[0] != local_address or cached[1] != remote_address:
            if len(self._addresses) >= 4096:  # connections come and go: a bounded cache
                self._addresses.clear()
            cached = (local_address, remote_address, encode_addresses(local_address, remote_address))
            self._addresses[connection_id] = cached
        data = encode_record_with_addresses(timestamp_ns, connection_id, cached[2], direction, role, frame, flags)
        n = len(data)
        pending = self._queued - self._drained + n
        if pending > self._max_buffer:
            self.dropped += 1
            return
        self._queue.append(data)
        self._queued += n
        self.records += 1
        if pending >= self._flush_bytes and not self._wake.is_set():
            self._wake.set()

    def flush(self) -> None:
        """Ask the writer to write what is queued now (does not wait for it)."""
        self._wake.set()

    def close(self) -> None:
        """Write everything queued, stop the writer, close the file (waits)."""
        if self._closed:
            return
        self._closing = True
        self._wake.set()
        self._thread.join()
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.dropped or self.lost:
            log.warning("%s", self.summary())

    def summary(self) -> str:
        files = self._file_index + 1
        text = f"tap {self.path}: {self.written} frames written"
        if files > 1:
            text += f" in {files} files"
        if self.dropped:
            text += f", {self.dropped} dropped (buffer full: the disk was too slow)"
        if self.lost:
            text += f", {self.lost} lost to {self.errors} failed writes"
        return text

    def __enter__(self) -> FileTap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the writer thread ---------------------------------------------------------------

    def _writer(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            closing = self._closing  # read before draining: records after it are drained next
            self._drain()
            if closing:
                self._drain()
                return

    def _drain(self) -> None:
        queue = self._queue
        batch: list[bytes] = []
        size = 0
        try:
            while True:
                rec = queue.popleft()
                batch.append(rec)
                size += len(rec)
        except IndexError:
            pass
        if batch:
            self._write_batch(batch)
        self._drained += size

    def _write_batch(self, batch: list[bytes]) -> None:
        limit = self._rotate_bytes
        if limit is None:
            self._write(b"".join(batch), len(batch))
            return
        start = 0
        size = self._size
        for i, rec in enumerate(batch):
            if size + len(rec) > limit and size > len(FILE_HEADER):
                if i > start:
                    self._write(b"".join(batch[start:i]), i - start)
                self._rotate()
                start, size = i, self._size
            size += len(rec)
        if start < len(batch):
            self._write(b"".join(batch[start:]), len(batch) - start)

    def _rotate(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._file_index += 1
        try:
            self._open(f"{self.path}.{self._file_index}")
        except OSError as exc:
            self.errors += 1
            log.warning("tap: cannot open %s.%d: %s", self.path, self._file_index, exc)

    def _open(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.current_path = path
        self._size = os.fstat(self._fd).st_size
        if self._size == 0:
            os.write(self._fd, FILE_HEADER)
            self._size = len(FILE_HEADER)

    def _write(self, data: bytes, count: int) -> None:
        if self._fd is None:
            self.lost += count
            return
        view = memoryview(data)
        before = self._size
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
                self._size += written
        except OSError:
            self.errors += 1  # a full disk must not take the connection down
            self.lost += count
            try:  # no half record left behind for readers to trip on
                os.ftruncate(self._fd, before)
                self._size = before
            except OSError:
                pass
            return
        self.written += count


class MemoryTap:
    """Keep records in ``self.records`` (bounded by ``limit``; the rest are counted)."""

    def __init__(self, limit: int = 1_000_000) -> None:
        self.records: list[CaptureRecord] = []
        self.limit = limit
        self.dropped = 0

    def record(
        self, timestamp_ns, connection_id, local_address, remote_address, direction, role, frame, flags=0
    ) -> None:
        if len(self.records) >= self.limit:
            self.dropped += 1
            return
        self.records.append(
            CaptureRecord(
                timestamp_ns, connection_id, local_address, remote_address, Direction(direction), bytes(frame),
                Role(role), flags,
            )
        )

    def flush(self) -> None:
        pass
