"""Bad bytes close only the connection they came on, with a logged diagnosis;
healthy connections carry on (checked with concurrent calls)."""

from __future__ import annotations

import logging
import struct

import pytest
import trio

from trocket.codecs.errors import FrameTooLargeError, HeaderDecodeError, NotRocketMQError
from trocket.remoting import (
    ChannelEventListener,
    RemotingCommandDecodeError,
    RemotingFrameError,
)

from .conftest import client_of, request, server_config, serving


class Recorder(ChannelEventListener):
    def __init__(self):
        self.events = []

    def on_channel_connect(self, addr, conn):
        self.events.append(("connect", addr))

    def on_channel_close(self, addr, conn):
        self.events.append(("close", addr))

    def on_channel_exception(self, addr, conn, error):
        self.events.append(("exception", error))

    def on_channel_idle(self, addr, conn):
        self.events.append(("idle", addr))


def _frame_with_header(header: bytes) -> bytes:
    return struct.pack(">iI", 4 + len(header), len(header)) + header


TLS_HELLO = bytes.fromhex("16030100a5010000a10303") + b"\x00" * 40
CASES = [
    ("junk length", b"\x00\x00\x00\x01zz", RemotingFrameError, None, "impossible frame length"),
    ("oversized", b"\x7f\xff\xff\xf0abcd", RemotingFrameError, FrameTooLargeError, "exceeds the maximum"),
    ("tls on plain port", TLS_HELLO, RemotingFrameError, NotRocketMQError, "TLS"),
    ("http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", RemotingFrameError, NotRocketMQError, "HTTP/1.x"),
    ("http2", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", RemotingFrameError, NotRocketMQError, "HTTP/2"),
    ("bad json header", _frame_with_header(b"{not json"), RemotingCommandDecodeError, HeaderDecodeError, "does not parse"),
    ("bad serialize type", struct.pack(">iI", 8, 0x05000004) + b"abcd", RemotingCommandDecodeError, HeaderDecodeError, "unknown serialize type"),
]


@pytest.mark.parametrize("name,payload,kind,cause,diagnosis", CASES, ids=[c[0] for c in CASES])
async def test_bad_input_closes_only_that_connection(name, payload, kind, cause, diagnosis, caplog):
    caplog.set_level(logging.INFO, logger="trocket.remoting")
    recorder = Recorder()
    async with serving(listener=recorder) as server, client_of() as client:
        addr = server.address
        host, port = addr.rsplit(":", 1)
        done = 0

        async def healthy(i: int) -> None:
            nonlocal done
            for j in range(30):
                body = b"%d-%d" % (i, j)
                assert (await client.invoke_sync(addr, request(body=body))).body == body
                await trio.sleep(0)
            done += 1

        async with trio.open_nursery() as nursery:
            for i in range(4):
                nursery.start_soon(healthy, i)
            bad = await trio.open_tcp_stream(host, int(port))
            await bad.send_all(payload)
            with trio.fail_after(5):
                try:
                    while await bad.receive_some(1024):
                        pass  # the server closes: EOF (or a reset)
                except trio.BrokenResourceError:
                    pass
            await bad.aclose()
        assert done == 4
        errors = [e[1] for e in recorder.events if e[0] == "exception"]
        assert len(errors) == 1 and isinstance(errors[0], kind)
        if cause is not None:
            assert isinstance(errors[0].__cause__, cause)
        assert any(diagnosis in r.getMessage() and "closing connection" in r.getMessage() for r in caplog.records)
        assert server.stats.decode_errors == 1
        # the healthy client's connection survived
        conn = client.connection_for(addr)
        assert conn is not None and conn.is_active
        assert len(server.connections) == 1


async def test_frame_limit_is_configurable():
    async with serving(server_config(max_frame_length=1024)) as server, client_of() as client:
        assert (await client.invoke_sync(server.address, request(body=b"a" * 500))).body == b"a" * 500
        from trocket.remoting import RemotingConnectionClosedError

        with pytest.raises(RemotingConnectionClosedError):
            await client.invoke_sync(server.address, request(body=b"a" * 2000), timeout=5)
        assert server.stats.decode_errors == 1
        assert (await client.invoke_sync(server.address, request(body=b"b"))).body == b"b"
