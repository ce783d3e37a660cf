"""Bounds no peer can push a server past: bytes held in unfinished frames (across all
connections), the time a frame may take to arrive, the connections served at once, and
a loopback default for where a server listens."""

from __future__ import annotations

import struct

import trio

from trocket.codecs.serialize import encode_command
from trocket.remoting import ChannelEventListener, CloseReason, RemotingFrameError, ServerConfig

from ..waiting import wait_until
from .conftest import client_of, request, server_config, serving


def _frame_head(length: int) -> bytes:
    """The first bytes of a frame of ``length`` bytes: the length and a JSON protocol word."""
    return struct.pack(">iI", length, 2)


async def _eof(stream: trio.SocketStream) -> bool:
    """True once the server closed the connection (its reads end)."""
    try:
        while await stream.receive_some(65536):
            pass
    except trio.BrokenResourceError:
        pass
    return True


def test_a_server_listens_on_loopback_unless_told_otherwise():
    assert ServerConfig().listen_host == "127.0.0.1"


async def test_unfinished_frames_past_the_budget_close_the_largest_holders_first():
    """Three peers start frames they do not finish (30, 20 and 10 KiB so far) against a
    48 KiB budget: the largest holder is closed, BAD_INPUT with a RemotingFrameError,
    and the others fit and still finish their frames and get answers."""
    cfg = server_config(max_partial_bytes=48 * 1024, frame_timeout=None)
    async with serving(cfg) as server:
        host, port = server.address.rsplit(":", 1)
        streams = [await trio.open_tcp_stream(host, int(port)) for _ in range(3)]
        answer = encode_command(request(body=b"x" * (64 * 1024)))
        sizes = [30 * 1024, 20 * 1024, 10 * 1024]
        for stream, size in zip(streams, sizes):
            await stream.send_all(answer[:size])
            await wait_until(lambda: server.partial_bytes >= size, what="the server to hold the partial frame")
            await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(10):
            assert await _eof(streams[0])
        assert server.partial_bytes == sizes[1] + sizes[2] <= cfg.max_partial_bytes
        assert len(server.connections) == 2  # the two that fit are still served
        for stream, size in zip(streams[1:], sizes[1:]):
            await stream.send_all(answer[size:])  # finish the frame: answered
            got = b""
            with trio.fail_after(10):
                while len(got) < 4 or len(got) < 4 + struct.unpack(">i", got[:4])[0]:
                    got += await stream.receive_some(1 << 20)
        await wait_until(lambda: server.partial_bytes == 0, what="the finished frames to leave the budget")
        for stream in streams:
            await stream.aclose()


async def test_a_frame_trickled_slower_than_frame_timeout_is_closed(idle_jump_clock):
    """Slowloris: a peer sends a frame's length and then a byte now and then, each
    within the idle timeout; the frame is not finished within ``frame_timeout``, so the
    connection is closed (BAD_INPUT, a RemotingFrameError naming the timeout)."""
    closed: list = []

    class Listener(ChannelEventListener):
        def on_channel_close(self, addr, conn):
            closed.append((conn.close_reason, conn.close_cause))

    cfg = server_config(frame_timeout=5.0, idle_timeout=2.0, scan_interval=0.5)
    async with serving(cfg, listener=Listener()) as server:
        host, port = server.address.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        await stream.send_all(_frame_head(1000))
        with trio.fail_after(60):
            while not closed:
                await trio.sleep(1.0)  # logical time: within the 2 s idle timeout each time
                try:
                    await stream.send_all(b"z")
                except trio.BrokenResourceError:
                    break
            await wait_until(lambda: closed, what="the connection to close")
        reason, cause = closed[0]
        assert reason is CloseReason.BAD_INPUT
        assert isinstance(cause, RemotingFrameError) and "within 5.0 s" in str(cause)
        assert trio.current_time() >= 5.0  # not before the frame's time was up
        await stream.aclose()


async def test_connections_past_max_connections_are_refused_and_the_rest_served():
    """With ``max_connections=2`` a third connection is closed at once (counted), the
    two served keep working, and once one ends a new one is served again."""
    async with serving(server_config(max_connections=2)) as server:
        host, port = server.address.rsplit(":", 1)
        async with client_of() as first, client_of() as second:
            for c in (first, second):
                assert (await c.invoke_sync(server.address, request(body=b"hi"))).body == b"hi"
            third = await trio.open_tcp_stream(host, int(port))
            with trio.fail_after(10):
                assert await _eof(third)
            assert server.refused_connections == 1
            await third.aclose()
            assert (await first.invoke_sync(server.address, request(body=b"still"))).body == b"still"
        await wait_until(lambda: not server.connections, what="the two clients' connections to end")
        async with client_of() as again:
            assert (await again.invoke_sync(server.address, request(body=b"again"))).body == b"again"
        assert server.refused_connections == 1


async def test_connections_past_max_connections_per_host_are_refused_and_logged_once(caplog):
    """With ``max_connections_per_host=2`` a third and fourth connection from 127.0.0.1
    are closed at once and counted, with one log line for the host; the two served keep
    working, and once they end the host is served again."""
    caplog.set_level("WARNING", logger="trocket.remoting")
    async with serving(server_config(max_connections_per_host=2)) as server:
        host, port = server.address.rsplit(":", 1)
        async with client_of() as first, client_of() as second:
            for c in (first, second):
                assert (await c.invoke_sync(server.address, request(body=b"hi"))).body == b"hi"
            assert server.serving_per_host == {"127.0.0.1": 2}
            for _ in range(2):
                extra = await trio.open_tcp_stream(host, int(port))
                with trio.fail_after(10):
                    assert await _eof(extra)
                await extra.aclose()
            assert server.refused_connections_per_host == 2 and server.refused_connections == 0
            lines = [r.getMessage() for r in caplog.records if "max_connections_per_host" in r.getMessage()]
            assert lines == ["refused connections from 127.0.0.1: 2 served from that host already "
                             "(max_connections_per_host); 0 more refused since the last line"]
            assert (await first.invoke_sync(server.address, request(body=b"still"))).body == b"still"
        await wait_until(lambda: not server.serving_per_host, what="the host's count to drop to none")
        async with client_of() as again:
            assert (await again.invoke_sync(server.address, request(body=b"again"))).body == b"again"
        assert server.refused_connections_per_host == 2


def test_max_connections_per_host_is_generous_by_default():
    assert ServerConfig().max_connections_per_host == 1000
