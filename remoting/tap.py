"""The capture tap: records every frame an endpoint sends or receives.

Pass a sink as ``tap=`` to a server or client. :class:`FileTap` appends records in
the native capture format (:mod:`trocket.codecs.capture`) to a file;
:class:`MemoryTap` keeps them in a list (tests, tools). A sink (:class:`TapSink`) has
``record(...)`` (one frame), ``record_batch(...)`` (many frames of one connection) and
``flush()``, all called from the endpoint's event loop.

What a connection records how: its reader records the frames it received in one read and
the frames it sent while handling them (the answers of inline processors) with ONE
``record_batch`` call when it has handled them (or before it awaits a handler), in the
order they came and went, with two timestamps: the read's for the frames received, the
call's for the frames sent (their write follows at once: the answers of a read go out
together when it has been handled). A received frame is passed as the payload the
decoder yields (no copy to put its length back; the sink writes it). Frames sent outside
that stretch (handlers that answer later, a client's requests) go one by one through
``record``, each with its own time.

FileTap never blocks the event loop on the disk, and costs the loop as little as it can:
``record_batch`` has :func:`~trocket.codecs.capture.encode_record_batch` (compiled in the
codec accelerator) build every record's head from the connection's cached fields (conn id,
addresses) and appends the heads and the frames (``bytes``, by reference: no copy) to a
list, in the loop's thread: no lock, no queue put, no thread wake-up per frame (``record``
does the same for one frame with one ``struct.pack``). Once that list holds ``flush_bytes`` (256 KiB), the loop
hands it to a writer thread (one deque append and one wake-up per chunk) and starts a new
one; the writer joins each chunk and writes it with one ``os.write`` (which releases the
GIL). So that a quiet connection's frames still reach the disk within ``flush_interval``
(1 s), the writer asks the loop, through trio's ``run_sync_soon``, to hand over records
that have waited half that long; ``flush()`` hands over at once. Outside a trio loop
(tests, tools recording from plain code) there is no loop to ask, so every call's records
are handed over as they come. Its cost on the broker's produce path
(``benchmarks/capture_tap.py``, ``benchmarks/instructions.py --tap``): see the README.

The buffer is bounded (``max_buffer_bytes``, 64 MiB by default, counting the records not
handed over yet and the chunks the writer has not written): when a slow disk lets it fill, new records
are dropped and counted (:attr:`FileTap.dropped`), never queued without bound and never
waited for; :meth:`FileTap.summary` says how many, and ``trocket broker --tap`` prints it
on exit. Only whole records are ever written, so a reader can follow the file while it grows.
``close()`` hands over what is left, waits for the writer and closes the file.

Rotation (``rotate_bytes``): the first file is ``path``; once it holds that many
bytes the writer continues in ``path.1``, then ``path.2``, ... each a complete
capture with its own file header, cut only between records. Reading ``path``,
``path.1``, ``path.2`` in order gives the whole session.

``record``, ``record_batch``, ``flush`` and ``close`` must come from one thread (the event
loop's); the writer thread is the only other one.
"""

from __future__ import annotations

import collections
import logging
import os
import struct
import threading
import time
from typing import Callable, Protocol

import trio

from trocket.codecs.capture import (
    BATCH_PAYLOAD,
    FILE_HEADER,
    CaptureRecord,
    Direction,
    Role,
    connection_head,
    encode_record_batch,
)

__all__ = [
    "TapSink", "TapRecorder", "FileTap", "MemoryTap", "RecordEachFrame", "rotated_paths", "PAYLOAD", "check_sink",
]

log = logging.getLogger("trocket.remoting.tap")

_unpack_length = struct.Struct(">I").unpack_from  # a record's length field
_LENGTH = struct.Struct(">I")

#: ``record_batch`` item kind bit: the data is a frame's payload, without its 4-byte length
#: field (what a frame decoder yields); the sink puts the length back. Without it the data
#: is a whole frame. The kind's bit 0 is the direction (0 received, 1 sent).
PAYLOAD = BATCH_PAYLOAD


class TapSink(Protocol):
    """What an endpoint calls, from its event loop; neither may block or raise."""

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
        """One frame, whole (length prefix included), as ``bytes`` (a sink may keep it).
        FileTap and MemoryTap also take ``flags`` (the capture format's, e.g. RAW)."""

    def record_batch(
        self,
        received_ns: int,
        sent_ns: int,
        connection_id: int,
        local_address: str,
        remote_address: str,
        role: int,
        items: list,
    ) -> None:
        """Frames of one connection, in order: ``items`` is flat, ``[kind, data, kind,
        data, ...]``, ``kind`` the direction (0 received, 1 sent), plus :data:`PAYLOAD`
        when ``data`` is the frame without its 4-byte length field. The received frames'
        timestamp is ``received_ns``, the sent ones' ``sent_ns``. The same records as one
        ``record`` per frame, byte for byte. A sink may keep the ``data`` but not the list
        (the caller reuses it)."""

    def flush(self) -> None: ...


#: capture directions (see :mod:`trocket.codecs.capture`); a read's received frames go to
#: the sink as payloads (:data:`PAYLOAD`: the sink writes their length field)
SENT = 1
RECEIVED_PAYLOAD = 0 | PAYLOAD
#: items (two per frame) a reader's batch holds before it is recorded mid-stretch
BATCH_ITEMS = 1024


class TapRecorder:
    """One connection's frames on their way to the endpoint's sink (see the module
    docstring): the reader's stretch -- what it received in a read and what was sent
    while it handled it -- as one ``record_batch``; anything sent outside a stretch alone.

    The reader calls :meth:`begin` when a read arrives, appends each received payload to
    :attr:`batch` as ``RECEIVED_PAYLOAD, payload`` (two appends, no call per frame), and
    calls :meth:`end` when it has handled the read or before it awaits; the outbox calls
    :meth:`sent` for every frame it takes."""

    __slots__ = ("sink", "connection_id", "local_address", "remote_address", "role", "batch", "read_ns", "_items")

    def __init__(self, sink: TapSink, connection_id: int, local_address: str, remote_address: str, role: int) -> None:
        self.sink = sink
        self.connection_id = connection_id
        self.local_address = local_address
        self.remote_address = remote_address
        self.role = role
        #: the reader's current stretch (``[kind, data, ...]``), None outside one
        self.batch: list | None = None
        self.read_ns = 0  # when the stretch's data was read: its received frames' timestamp
        self._items: list = []

    def begin(self) -> list:
        """A read arrived: a stretch starts; returns its list."""
        self.read_ns = time.time_ns()
        self.batch = items = self._items
        return items

    def resume(self) -> list:
        """The reader goes on with its read after an await: the stretch's list again
        (its received frames keep the read's timestamp)."""
        self.batch = items = self._items
        return items

    def end(self) -> None:
        """The stretch ends (handled, or the reader awaits): record it, in order, with
        one call (received at the read, sent now); sends record themselves from now on."""
        self.batch = None
        self._record(self._items)

    def sent(self, frame: bytes) -> None:
        batch = self.batch
        if batch is not None and len(batch) < BATCH_ITEMS:
            batch.append(SENT)  # recorded with what the reader received
            batch.append(frame)
        elif batch is None:
            self.sink.record(time.time_ns(), self.connection_id, self.local_address, self.remote_address, SENT, self.role, frame)
        else:  # a full stretch: record it so far, and go on with this frame
            self._record(batch)
            batch.append(SENT)
            batch.append(frame)

    def _record(self, items: list) -> None:
        if items:
            self.sink.record_batch(
                self.read_ns, time.time_ns(), self.connection_id, self.local_address, self.remote_address,
                self.role, items,
            )
            items.clear()


def check_sink(tap: object) -> None:
    """Refuse, when an endpoint is made, a sink that lacks what connections call (a
    ``record``-only sink subclasses :class:`RecordEachFrame`)."""
    missing = [name for name in ("record", "record_batch", "flush") if not callable(getattr(tap, name, None))]
    if missing:
        raise TypeError(
            f"tap {tap!r} lacks {', '.join(missing)} (see trocket.remoting.tap.TapSink; "
            "a record-only sink can subclass RecordEachFrame)"
        )


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
    """Append records to ``path`` (header written if the file is new) through a writer
    thread; see the module docstring for the hand-over, the buffer bound and rotation."""

    __slots__ = (
        "path", "current_path", "_rotate_bytes", "_file_index", "_fd", "_size", "_chunk_bytes", "_max_buffer",
        "_interval", "_parts", "_pending", "_room", "_addresses", "_eager", "_token", "_chunks", "_handed", "_handed_records",
        "_drained", "_last_handover", "_handover_asked", "_wake", "_closing", "_closed", "written",
        "dropped", "lost", "errors", "_thread",
    )

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
        self._chunk_bytes = flush_bytes
        self._max_buffer = max_buffer_bytes
        self._interval = flush_interval
        # The loop's side: the parts of the records not handed over yet (head, frame, head,
        # frame, ...), their size, and the size they may reach before record() takes its
        # slow path (hand over, check the bound, drop); -1 sends every record there
        # (closing, or no event loop: hand over each record).
        self._parts: list[bytes] = []
        self._pending = 0
        self._room = -1
        # conn id -> local, remote, and its connection_head: pack, tail, the head's size
        self._addresses: dict[int, tuple[str, str, Callable[..., bytes], bytes, int]] = {}
        self._eager: bool | None = None  # None until the first record says whether a trio loop records
        self._token: trio.lowlevel.TrioToken | None = None
        # The hand-over: (parts, records, bytes), appended by the loop, popped by the
        # writer; each byte counter has one writer (handed: the loop; drained: the writer).
        self._chunks: collections.deque[tuple[list[bytes], int, int]] = collections.deque()
        self._handed = 0
        self._handed_records = 0
        self._drained = 0
        self._last_handover = time.monotonic()
        self._handover_asked = False
        self._wake = threading.Event()
        self._closing = False
        self._closed = False
        #: records written to disk / dropped (buffer full); ``records``: accepted
        self.written = 0
        self.dropped = 0
        #: records lost to write errors (a full disk), and the number of failed writes
        self.lost = 0
        self.errors = 0
        self._thread = threading.Thread(target=self._writer, name=f"tap-writer {self.path}", daemon=True)
        self._thread.start()

    # -- the event loop's side ---------------------------------------------------------

    # KI protection (free: trio marks the code objects): a Ctrl-C in a trio loop waits for
    # the next checkpoint rather than land between a record's head and its frame.
    @trio.lowlevel.enable_ki_protection
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
        """Record one frame (``bytes``: kept by reference until written)."""
        cached = self._addresses.get(connection_id)
        if cached is not None and cached[0] == local_address and cached[1] == remote_address and type(frame) is bytes:
            n = cached[4] + len(frame)
            pending = self._pending + n
            if pending <= self._room:
                self._pending = pending
                parts = self._parts
                parts.append(cached[2](n - 4, direction, role, flags, timestamp_ns, cached[3]))
                parts.append(frame)
                return
        if self._closing:
            return
        if type(frame) is not bytes:
            frame = bytes(frame)  # the caller may reuse its buffer
        cached = self._connection(connection_id, local_address, remote_address)
        n = cached[4] + len(frame)
        self._accept([cached[2](n - 4, direction, role, flags, timestamp_ns, cached[3]), frame], n)

    @trio.lowlevel.enable_ki_protection
    def record_batch(
        self,
        received_ns: int,
        sent_ns: int,
        connection_id: int,
        local_address: str,
        remote_address: str,
        role: int,
        items: list,
    ) -> None:
        """Record a connection's frames, in order (see :meth:`TapSink.record_batch`)."""
        cached = self._addresses.get(connection_id)
        if cached is None or cached[0] != local_address or cached[1] != remote_address:
            if self._closing:
                return
            cached = self._connection(connection_id, local_address, remote_address)
        new: list[bytes] = []
        total = encode_record_batch(cached[3], received_ns, sent_ns, role, items, new)
        pending = self._pending + total
        if pending <= self._room:
            self._pending = pending
            self._parts += new
        elif new and not self._closing:
            self._accept(new, total)

    def _connection(self, connection_id: int, local_address: str, remote_address: str) -> tuple:
        """The cached fields of a connection (made on its first record, or when its
        addresses change): local, remote, pack of a whole head, tail (conn id and
        addresses), the head's size."""
        cached = self._addresses.get(connection_id)
        if cached is None or cached[0] != local_address or cached[1] != remote_address:
            if len(self._addresses) >= 4096:  # connections come and go: a bounded cache
                self._addresses.clear()
            pack, tail = connection_head(connection_id, local_address, remote_address)
            cached = (local_address, remote_address, pack, tail, len(tail) + 16)
            self._addresses[connection_id] = cached
        return cached

    @trio.lowlevel.enable_ki_protection
    def _accept(self, new: list[bytes], total: int) -> None:
        """The slow path of both record calls: ``new`` (head, frame, head, frame, ...;
        ``total`` bytes) did not fit in the room left, or there is no room yet (the first
        record, no loop, closing). Hand over a full chunk, then keep the records the
        bound has room for and drop (and count) the others."""
        if self._closing:
            return
        if self._eager is None:
            try:
                self._token = trio.lowlevel.current_trio_token()
                self._eager = False
            except RuntimeError:  # not in a trio loop: nobody to ask for hand-overs
                self._eager = True
        if self._parts and self._pending + total > self._chunk_bytes:
            self._hand_over()
        space = self._max_buffer - (self._handed - self._drained)
        if self._pending + total > space:
            kept: list[bytes] = []
            total = 0
            for i in range(0, len(new), 2):
                n = len(new[i]) + len(new[i + 1])
                if self._pending + total + n > space:
                    self.dropped += 1
                else:
                    kept += new[i : i + 2]
                    total += n
            new = kept
        self._pending += total
        self._parts += new
        if self._eager:
            self._hand_over()
        else:
            self._room = min(space, max(self._chunk_bytes, self._pending))

    @property
    def records(self) -> int:
        """Records accepted (each two parts: head, frame), written or still to write."""
        return self._handed_records + len(self._parts) // 2

    @trio.lowlevel.enable_ki_protection
    def _hand_over(self) -> None:
        """Give the recorded parts to the writer and start anew (the loop's thread only)."""
        self._handover_asked = False
        parts = self._parts
        if not parts:
            return
        self._parts = []
        count = len(parts) // 2
        self._handed_records += count
        self._handed += self._pending
        self._chunks.append((parts, count, self._pending))
        self._pending = 0
        self._last_handover = time.monotonic()
        if not (self._closing or self._eager):
            self._room = min(self._chunk_bytes, self._max_buffer - (self._handed - self._drained))
        self._wake.set()

    def flush(self) -> None:
        """Hand what is recorded to the writer now (does not wait for the disk)."""
        if self._token is None and self._eager is False:  # the loop we knew ended: a new one?
            try:
                self._token = trio.lowlevel.current_trio_token()
            except RuntimeError:
                pass
        self._hand_over()

    def close(self) -> None:
        """Write everything recorded, stop the writer, close the file (waits)."""
        if self._closed:
            return
        self._closing = True
        self._room = -1
        self._hand_over()
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
        half = self._interval / 2
        while True:
            self._wake.wait(half)
            self._wake.clear()
            closing = self._closing  # read before writing: chunks after it are written next
            self._write_chunks()
            if closing:
                self._write_chunks()
                return
            if self._parts and not self._handover_asked and time.monotonic() - self._last_handover >= half:
                self._ask_handover()

    def _ask_handover(self) -> None:
        """Records have waited in the loop's buffer for half the flush interval: ask the
        loop to hand them over (it wakes us when it has)."""
        token = self._token
        if token is None:
            return
        self._handover_asked = True
        try:
            token.run_sync_soon(self._hand_over)
        except trio.RunFinishedError:  # the loop is gone: close() or flush() hands over
            self._token = None

    def _write_chunks(self) -> None:
        chunks = self._chunks
        while chunks:
            parts, count, size = chunks.popleft()
            self._write_chunk(b"".join(parts), count)
            del parts
            self._drained += size

    def _write_chunk(self, chunk: bytes, count: int) -> None:
        limit = self._rotate_bytes
        if limit is None or self._size + len(chunk) <= limit:
            self._write(chunk, count)
            return
        view = memoryview(chunk)
        start = 0
        while start < len(chunk):
            end, k = _whole_records(view, start, limit - self._size, self._size <= len(FILE_HEADER))
            if k:
                self._write(view[start:end], k)
                start = end
            if start < len(chunk):
                self._rotate()

    def _rotate(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._file_index += 1
        try:
            self._open(f"{self.path}.{self._file_index}")
        except OSError as exc:
            self.errors += 1
            self._size = 0  # what comes is lost (counted) until the next rotation tries again
            log.warning("tap: cannot open %s.%d: %s", self.path, self._file_index, exc)

    def _open(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.current_path = path
        self._size = os.fstat(self._fd).st_size
        if self._size == 0:
            os.write(self._fd, FILE_HEADER)
            self._size = len(FILE_HEADER)

    def _write(self, data: bytes | bytearray | memoryview, count: int) -> None:
        if self._fd is None:
            self.lost += count
            return
        before = self._size
        view = memoryview(data)
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


def _whole_records(view: memoryview, start: int, room: int, at_least_one: bool) -> tuple[int, int]:
    """The end offset and number of the whole records from ``start`` that fit in ``room``
    bytes (the first one even if it does not, when ``at_least_one``)."""
    pos, k, end = start, 0, len(view)
    while pos < end:
        size = 4 + _unpack_length(view, pos)[0]
        if pos + size - start > room and not (at_least_one and k == 0):
            break
        pos += size
        k += 1
    return pos, k


class RecordEachFrame:
    """``record_batch`` as one ``record`` call per frame: for a sink that only needs
    ``record`` (subclass it, as :class:`MemoryTap` does)."""

    def record_batch(self, received_ns, sent_ns, connection_id, local_address, remote_address, role, items) -> None:
        it = iter(items)
        for kind, data in zip(it, it):
            frame = _LENGTH.pack(len(data)) + data if kind & PAYLOAD else data
            ts = sent_ns if kind & 1 else received_ns
            self.record(ts, connection_id, local_address, remote_address, kind & 1, role, frame)  # type: ignore[attr-defined]


class MemoryTap(RecordEachFrame):
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
