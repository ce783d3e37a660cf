"""Reads and writes on a plain-TCP socket's fd without trio's per-call checkpoints.

``SocketStream.send_all`` / ``receive_some`` pass through trio's run loop on every call,
even when the socket takes or has the bytes at once. A connection's reader and writer
(:mod:`.connection`, :mod:`.outbox`) and the broker's HA links (:mod:`.direct`) instead
try the non-blocking syscall first and wait for readiness only when it would block: a
write the socket takes whole costs one ``write``; a read waits for readability only
after a read that did not fill the buffer (the socket is then almost surely drained).
TLS connections keep trio's streams (the SSL state machine needs them).
"""

from __future__ import annotations

import array
import fcntl
import os
import termios
import threading

import trio

__all__ = ["bytes_waiting", "read_into", "receive_buffer", "write_all", "write_nowait", "writev_nowait"]

_write = os.write
_writev = os.writev
_readv = os.readv
_ioctl = fcntl.ioctl
_FIONREAD = termios.FIONREAD
_wait_readable = trio.lowlevel.wait_readable
_wait_writable = trio.lowlevel.wait_writable

_receive_buffers = threading.local()


def receive_buffer(size: int) -> tuple[bytearray, memoryview]:
    """This thread's receive buffer of ``size`` bytes (made once per thread and size).

    ``os.read(fd, size)`` allocates ``size`` bytes and shrinks them to what arrived:
    with the 256 KiB default, that allocation cost more than the rest of a send's
    receive path. Reading into one reused buffer instead is safe because a reader
    hands what it read to its frame decoder (which copies) before it next awaits,
    and a trio run is one thread."""
    buffers = _receive_buffers.__dict__
    pair = buffers.get(size)
    if pair is None:
        buf = bytearray(size)
        pair = buffers[size] = (buf, memoryview(buf))
    return pair


async def read_into(fd: int, bufs: tuple[bytearray, ...]) -> int:
    """``readv`` into ``bufs``, waiting for readability only when nothing is there;
    the byte count (0: the peer closed). ``OSError`` as the syscall raises it."""
    while True:
        try:
            return _readv(fd, bufs)
        except BlockingIOError:
            await _wait_readable(fd)


def bytes_waiting(fd: int, answer: array.array) -> int:
    """Bytes the socket holds unread (``FIONREAD``; ``answer`` is a one-int array the
    caller keeps, so asking allocates nothing): no EAGAIN exception when it is none."""
    _ioctl(fd, _FIONREAD, answer)
    return answer[0]


def write_nowait(fd: int, data: bytes | memoryview) -> int:
    """Write what the socket takes of ``data`` now; how much (0 when it is full, or
    broken: the writer's next wait reports that)."""
    try:
        return _write(fd, data)
    except OSError:
        return 0


def writev_nowait(fd: int, parts: tuple[bytes | memoryview, ...]) -> int:
    """:func:`write_nowait` for several buffers in one ``writev``; a broken socket
    raises (``OSError``), a full one gives 0."""
    try:
        return _writev(fd, parts)
    except BlockingIOError:
        return 0


async def write_all(fd: int, data: bytes | memoryview) -> None:
    """``send_all`` on a plain TCP fd, as the reader reads: write what the socket takes
    now, and wait for room only when it is full. No pass through trio's run loop when
    the socket takes it all; ``SocketStream.send_all`` makes two per call, whatever
    happens. ``OSError`` as the syscall raises it."""
    while True:
        try:
            n = _write(fd, data)
        except BlockingIOError:
            n = 0
        if n == len(data):
            return
        data = memoryview(data)[n:]
        await _wait_writable(fd)
