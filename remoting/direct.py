"""A plain-TCP socket read and written without trio's per-call checkpoints (the HA
connections of broker/ha use it), with :mod:`.fdio`'s primitives as a connection's
reader and outbox use them.

An HA connection makes a few such calls per replicated batch (a frame down, an 8-byte
report up), and on a SYNC_MASTER each is on a send's critical path: a write that the
socket takes whole costs one ``writev``; a read waits for readability only after a read
that did not fill the buffer (the socket is then almost surely drained).
"""

from __future__ import annotations

import trio

from .fdio import read_into, writev_nowait

__all__ = ["DirectSocket", "StreamSocket", "direct_or_stream"]

_wait_readable = trio.lowlevel.wait_readable
_checkpoint = trio.lowlevel.checkpoint


class DirectSocket:
    __slots__ = ("stream", "fd", "_bufs", "_view", "_drained")

    def __init__(self, stream: trio.SocketStream, receive_size: int) -> None:
        self.stream = stream
        self.fd = stream.socket.fileno()
        buf = bytearray(receive_size)
        self._bufs = (buf,)
        self._view = memoryview(buf)
        self._drained = True

    async def receive(self) -> memoryview:
        """The next bytes (empty: the peer closed), as a view of this socket's buffer:
        valid until the next call."""
        fd = self.fd
        if self._drained:
            await _wait_readable(fd)
        else:
            await _checkpoint()  # a busy peer must not starve the other tasks
        try:
            n = await read_into(fd, self._bufs)
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        self._drained = n < len(self._bufs[0])
        return self._view[:n]

    def send_nowait(self, *parts: bytes | memoryview) -> bytes | memoryview:
        """Write what the socket takes of ``parts`` now (one ``writev``, no checkpoint);
        returns the rest, empty when it took everything (the usual case): give it to
        :meth:`send_rest`."""
        try:
            n = writev_nowait(self.fd, parts)
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        total = sum(len(p) for p in parts) if len(parts) > 1 else len(parts[0])
        if n == total:
            return b""
        return b"".join(parts)[n:] if len(parts) > 1 else memoryview(parts[0])[n:]

    async def send_rest(self, rest: bytes | memoryview) -> None:
        """What :meth:`send_nowait` left, waiting for room (``send_all``)."""
        await self.stream.send_all(rest)

    async def send(self, *parts: bytes | memoryview) -> None:
        """Write ``parts`` in order: one ``writev`` when the socket takes them (the
        usual case, no checkpoint); the rest through ``send_all``, which waits for room."""
        rest = self.send_nowait(*parts)
        if rest:
            await self.send_rest(rest)


class StreamSocket:
    """:class:`DirectSocket`'s interface over any trio stream (TLS): every read and write
    goes through the stream. :meth:`send_nowait` writes nothing and returns all it was
    given, so callers hand it to :meth:`send_rest` as they do a full socket's rest."""

    __slots__ = ("stream", "_size")

    def __init__(self, stream: trio.abc.Stream, receive_size: int) -> None:
        self.stream = stream
        self._size = receive_size

    async def receive(self) -> memoryview:
        try:
            return memoryview(await self.stream.receive_some(self._size))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc

    def send_nowait(self, *parts: bytes | memoryview) -> bytes | memoryview:
        return b"".join(parts) if len(parts) > 1 else parts[0]

    async def send_rest(self, rest: bytes | memoryview) -> None:
        await self.stream.send_all(rest)

    async def send(self, *parts: bytes | memoryview) -> None:
        await self.stream.send_all(self.send_nowait(*parts))


def direct_or_stream(stream: trio.abc.Stream, receive_size: int) -> DirectSocket | StreamSocket:
    """A :class:`DirectSocket` for a plain TCP stream, a :class:`StreamSocket` for any
    other (TLS)."""
    if isinstance(stream, trio.SocketStream):
        return DirectSocket(stream, receive_size)
    return StreamSocket(stream, receive_size)
