"""Shared helpers: real servers and clients on 127.0.0.1, port 0."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from trocket.codecs.command import RemotingCommand
from trocket.remoting import ClientConfig, RemotingClient, RemotingServer, ServerConfig

ECHO = 100
SLOW = 101
FAIL = 102


async def echo(conn, request: RemotingCommand) -> RemotingCommand:
    return RemotingCommand.response(0, body=request.body, ext_fields=request.ext_fields)


@pytest.fixture
def idle_jump_clock() -> trio.testing.MockClock:
    """Virtual time for tests about time over real sockets: it stands still while
    anything happens and jumps to the next deadline once nothing happened for 0.1 s
    of real time (loopback I/O is long done by then). pytest-trio runs a test with
    the clock a fixture returns. Plain ``autojump_clock`` would jump while a
    loopback round trip is still in flight."""
    return trio.testing.MockClock(autojump_threshold=0.1)


def server_config(**kw) -> ServerConfig:
    kw.setdefault("listen_host", "127.0.0.1")
    kw.setdefault("listen_port", 0)
    return ServerConfig(**kw)


@asynccontextmanager
async def serving(config: ServerConfig | None = None, *, echo_processor: bool = True, **kw):
    server = RemotingServer(config or server_config(), **kw)
    if echo_processor:
        server.register_processor(ECHO, echo)
    async with server:
        yield server


@asynccontextmanager
async def client_of(config: ClientConfig | None = None, **kw):
    async with RemotingClient(config or ClientConfig(), **kw) as client:
        yield client


def request(code: int = ECHO, body: bytes = b"", **kw) -> RemotingCommand:
    return RemotingCommand.request(code, body=body, **kw)


class Gate:
    """A processor that holds every request until released (counts arrivals)."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.arrived = 0
        self.arrival = trio.Event()
        self.finished = 0

    async def __call__(self, conn, request):
        self.arrived += 1
        self.arrival.set()
        self.arrival = trio.Event()
        await self.release.wait()
        self.finished += 1
        return RemotingCommand.response(0, body=request.body)

    async def wait_arrivals(self, n: int) -> None:
        with trio.fail_after(10):
            while self.arrived < n:
                await self.arrival.wait()
