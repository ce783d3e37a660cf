"""The reader reads what arrived while it handled the last read without waiting
(``FIONREAD``; ``Connection._read_loop``), and still stops reading the moment its
connection is closed or told to stop reading by a processor it ran: requests that came
after are never dispatched (as when it waited for them, a cancellation point)."""

from __future__ import annotations

import select
import socket
import threading

import pytest
import trio

from trocket.codecs.command import RemotingCommand
from trocket.codecs.serialize import encode_command

from .conftest import serving

STOP = 41
AFTER = 42


def _frame(code: int, opaque: int) -> bytes:
    req = RemotingCommand.request(code, body=b"x")
    req.opaque = opaque
    return encode_command(req)


@pytest.mark.parametrize("how", ["close", "stop_reading"])
async def test_requests_after_a_close_by_the_processor_are_not_dispatched(how):
    """The processor of request 1 holds the reader (synchronously) while request 2
    arrives, then closes the connection: request 2 is in the socket when the reader
    looks, and must not run."""
    seen: list[int] = []
    entered = threading.Event()
    sent = threading.Event()

    def stop(conn, req):
        seen.append(req.opaque)
        entered.set()
        assert sent.wait(5)
        # request 2 is in the socket now: readable while the reader is in here
        assert select.select([conn.stream.socket.fileno()], [], [], 5)[0]
        conn.close() if how == "close" else conn.stop_reading()
        return RemotingCommand.response(0)

    def after(conn, req):
        seen.append(req.opaque)
        return RemotingCommand.response(0)

    async with serving() as server:
        server.register_processor(STOP, stop, inline=True)
        server.register_processor(AFTER, after, inline=True)
        host, port = server.address.rsplit(":", 1)

        def peer() -> None:
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.sendall(_frame(STOP, 1))
                assert entered.wait(5)  # the reader is inside request 1's processor
                s.sendall(_frame(AFTER, 2))
                sent.set()
                s.settimeout(5)
                try:
                    while s.recv(65536):
                        pass
                except OSError:
                    pass

        with trio.fail_after(10):
            await trio.to_thread.run_sync(peer)
    assert seen == [1]


async def test_data_already_there_is_read_at_once():
    """Pipelined requests that arrive while the reader is busy are all answered, in order."""
    seen: list[int] = []
    entered = threading.Event()
    arrived = threading.Event()

    def slow(conn, req):
        seen.append(req.opaque)
        if req.opaque == 1:
            entered.set()
            assert arrived.wait(5)
        return RemotingCommand.response(0)

    async with serving() as server:
        server.register_processor(STOP, slow, inline=True)
        host, port = server.address.rsplit(":", 1)

        def peer() -> int:
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.sendall(_frame(STOP, 1))
                assert entered.wait(5)  # the reader is busy with request 1: the rest wait in the socket
                for i in range(2, 12):
                    s.sendall(_frame(STOP, i))
                arrived.set()
                got = b""
                while got.count(b'"code":0') < 11:
                    data = s.recv(65536)
                    if not data:
                        break
                    got += data
                return got.count(b'"code":0')

        with trio.fail_after(10):
            assert await trio.to_thread.run_sync(peer) == 11
    assert seen == list(range(1, 12))


async def _exchange(server, batches: list[list[bytes]]) -> int:
    """Send each batch of frames in one write and read its answers before the next."""
    host, port = server.address.rsplit(":", 1)
    sock = trio.socket.socket()
    await sock.connect((host, int(port)))
    answered = 0
    with sock, trio.fail_after(5):
        for batch in batches:
            await sock.send(b"".join(batch))
            got = b""
            while got.count(b'"code":0') < len(batch):
                got += await sock.recv(65536)
            answered += got.count(b'"code":0')
    return answered


async def test_one_request_in_flight_is_read_without_asking_for_more(monkeypatch):
    """A peer with one request in flight sends nothing more before its answer: after a
    read of one frame the reader waits for readability at once, without the FIONREAD
    that would always say 0; after a read of several frames it asks."""
    import trocket.remoting.connection as connection

    asked: list[int] = []
    real = connection.bytes_waiting

    def counting(fd, answer):
        asked.append(fd)
        return real(fd, answer)

    monkeypatch.setattr(connection, "bytes_waiting", counting)

    def answer(conn, req):
        return RemotingCommand.response(0)

    async with serving() as server:
        server.register_processor(STOP, answer, inline=True)
        assert await _exchange(server, [[_frame(STOP, i)] for i in range(6)]) == 6
        assert asked == []
        assert await _exchange(server, [[_frame(STOP, i) for i in range(6)]]) == 6
        assert asked  # (once, unless the six arrived in two reads)
