"""``trocket capture proxy``: a transparent TCP proxy that records every frame.

Each accepted connection gets its own upstream connection; bytes are forwarded
as they come, unchanged (the proxy never re-encodes), and, after forwarding, cut
into frames by their length prefix and recorded in the native capture format
(:mod:`trocket.codecs.capture`) through remoting's :class:`~trocket.remoting.tap.FileTap`
(writer thread, flushed at least every second, bounded). The records read as if
the proxy were the server: role SERVER, ``local`` = the proxy's address as the
client saw it, ``remote`` = the client, RECEIVED = client to server.

Bytes that are no frames (an impossible length, a header that does not decode, a
stream that ends inside a frame) are still forwarded and are recorded as they
came with the RAW flag. Once a direction has lost the frame boundaries it stays
raw until the connection ends (no guessing at a resynchronisation).

Half-closes are passed on (EOF one way, the other way keeps flowing); the
connection ends when both directions have ended. The command that runs it (SIGINT/SIGTERM:
stop accepting, close every connection, write out the capture) is
``trocket/cli_replay.py``'s.
"""

from __future__ import annotations

import itertools
import ssl
import sys
import time

import trio

from trocket.codecs.capture import FLAG_RAW, Direction, Role
from trocket.codecs.errors import CodecError
from trocket.codecs.serialize import decode_command
from trocket.remoting.server import open_listeners

__all__ = ["FrameRecorder", "CaptureProxy"]

_MAX_FRAME = 16 * 1024 * 1024
_IO_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class FrameRecorder:
    """One direction of one connection: bytes in, records out (frames or RAW)."""

    __slots__ = ("tap", "conn_id", "local", "remote", "direction", "_buf", "raw_mode", "frames", "raw_records")

    def __init__(self, tap, conn_id: int, local: str, remote: str, direction: Direction) -> None:
        self.tap = tap
        self.conn_id = conn_id
        self.local = local
        self.remote = remote
        self.direction = direction
        self._buf = bytearray()
        self.raw_mode = False
        self.frames = 0
        self.raw_records = 0

    def _emit(self, data: bytes, raw: bool) -> None:
        self.tap.record(time.time_ns(), self.conn_id, self.local, self.remote, self.direction, Role.SERVER, data,
                        FLAG_RAW if raw else 0)
        if raw:
            self.raw_records += 1
        else:
            self.frames += 1

    def feed(self, data: bytes) -> None:
        if self.raw_mode:
            self._emit(bytes(data), True)
            return
        buf = self._buf
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            length = int.from_bytes(buf[pos : pos + 4], "big")
            if length < 4 or length > _MAX_FRAME:
                self.raw_mode = True
                self._emit(bytes(buf[pos:]), True)
                pos = len(buf)
                break
            end = pos + 4 + length
            if end > len(buf):
                break
            frame = bytes(buf[pos:end])
            try:
                decode_command(frame[4:])
                self._emit(frame, False)
            except CodecError:
                self._emit(frame, True)
            pos = end
        del buf[:pos]

    def close(self) -> None:
        """End of the stream: a partial frame left over is recorded raw."""
        if self._buf:
            self._emit(bytes(self._buf), True)
            self._buf.clear()


class CaptureProxy:
    """``listen_ssl``: clients connect with TLS (the proxy ends it and records the frames
    inside); ``upstream_ssl``: the proxy connects to the upstream with TLS. Either, both or
    neither (a broker with ``tls.server.mode=enforcing`` needs ``upstream_ssl``)."""

    def __init__(
        self, listen: tuple[str, int], upstream: tuple[str, int], tap, *,
        listen_ssl: ssl.SSLContext | None = None, upstream_ssl: ssl.SSLContext | None = None,
    ) -> None:
        self.listen = listen
        self.upstream = upstream
        self.tap = tap
        self.listen_ssl = listen_ssl
        self.upstream_ssl = upstream_ssl
        self._ids = itertools.count(1)
        self.connections = 0
        self.active = 0
        self.frames = 0
        self.raw_records = 0
        self.upstream_failures = 0
        self.port: int | None = None

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await open_listeners(self.listen[0], self.listen[1])
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self)
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, client: trio.SocketStream) -> None:
        conn_id = next(self._ids)
        self.connections += 1
        self.active += 1
        try:
            local = _addr(client.socket.getsockname())
            remote = _addr(client.socket.getpeername())
        except OSError:
            self.active -= 1
            await client.aclose()
            return
        try:
            if self.listen_ssl is not None:
                client = await _handshake(trio.SSLStream(client, self.listen_ssl, server_side=True))
            up = await trio.open_tcp_stream(*self.upstream)
            if self.upstream_ssl is not None:
                up = await _handshake(trio.SSLStream(up, self.upstream_ssl, server_hostname=self.upstream[0]))
        except OSError as exc:
            self.upstream_failures += 1
            print(f"trocket capture proxy: connection {conn_id} from {remote}: upstream "
                  f"{self.upstream[0]}:{self.upstream[1]} unreachable: {exc}", file=sys.stderr)
            self.active -= 1
            await client.aclose()
            return
        c2s = FrameRecorder(self.tap, conn_id, local, remote, Direction.RECEIVED)
        s2c = FrameRecorder(self.tap, conn_id, local, remote, Direction.SENT)
        try:
            async with client, up, trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, client, up, c2s, nursery)
                nursery.start_soon(self._pump, up, client, s2c, nursery)
        finally:
            c2s.close()
            s2c.close()
            self.frames += c2s.frames + s2c.frames
            self.raw_records += c2s.raw_records + s2c.raw_records
            self.active -= 1

    @staticmethod
    async def _pump(src: trio.SocketStream, dst: trio.SocketStream, rec: FrameRecorder, nursery) -> None:
        try:
            while True:
                data = await src.receive_some(65536)
                if not data:
                    break
                await dst.send_all(data)
                rec.feed(data)
            try:
                await dst.send_eof()
            except _IO_ERRORS:
                nursery.cancel_scope.cancel()
        except _IO_ERRORS:
            nursery.cancel_scope.cancel()  # one side broke: end the whole connection


async def _handshake(stream: trio.SSLStream) -> trio.SSLStream:
    """A TLS handshake within 10 s; its failure an OSError."""
    try:
        with trio.fail_after(10):
            await stream.do_handshake()
    except (trio.TooSlowError, trio.BrokenResourceError) as exc:
        await trio.aclose_forcefully(stream)
        raise OSError(f"TLS handshake failed: {exc.__cause__ or exc!r}") from exc
    return stream


def _addr(sockname) -> str:
    host, port = sockname[0], sockname[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
