"""RPC hooks (both sides) and channel events (connect, close, idle, exception)."""

from __future__ import annotations

import pytest
import trio

from trocket.remoting import ClientConfig

from ..waiting import wait_until
from .conftest import client_of, request, server_config, serving
from .test_bad_input import Recorder


class Tracing:
    def __init__(self):
        self.calls = []

    def do_before_request(self, addr, req):
        self.calls.append(("before", req.code))

    def do_after_response(self, addr, req, resp):
        self.calls.append(("after", req.code, None if resp is None else resp.code))


async def test_hooks_run_before_and_after_on_both_sides():
    server_hook, client_hook = Tracing(), Tracing()
    async with serving(hooks=[server_hook]) as server, client_of(hooks=[client_hook]) as client:
        await client.invoke_sync(server.address, request())
        await (await client.invoke_async(server.address, request()))
        assert client_hook.calls == [("before", 100), ("after", 100, 0)] * 2
        assert server_hook.calls == [("before", 100), ("after", 100, 0)] * 2


async def test_failing_client_hook_fails_the_call():
    class Refuse:
        def do_before_request(self, addr, req):
            raise PermissionError("not today")

        def do_after_response(self, addr, req, resp):
            pass

    async with serving() as server, client_of(hooks=[Refuse()]) as client:
        with pytest.raises(PermissionError):
            await client.invoke_sync(server.address, request())


async def test_connect_and_close_events_on_both_sides():
    srec, crec = Recorder(), Recorder()
    async with serving(listener=srec) as server:
        async with client_of(listener=crec) as client:
            await client.invoke_sync(server.address, request())
            caddr = client.connection_for(server.address).local_address
        await wait_until(lambda: ("close", caddr) in srec.events, 2)
    assert crec.events == [("connect", server.address), ("close", server.address)]
    assert srec.events == [("connect", caddr), ("close", caddr)]


async def test_idle_connections_are_closed(idle_jump_clock):
    srec = Recorder()
    async with serving(server_config(idle_timeout=0.3), listener=srec) as server:
        async with client_of(ClientConfig(idle_timeout=None)) as client:
            await client.invoke_sync(server.address, request())
            conn = client.connection_for(server.address)
            start = trio.current_time()
            with trio.fail_after(3):
                await conn.wait_closed()
            assert 0.3 <= trio.current_time() - start <= 0.3 + 1e-9
            assert [e[0] for e in srec.events] == ["connect", "idle", "close"]
            # the client reconnects transparently
            assert (await client.invoke_sync(server.address, request(body=b"x"))).body == b"x"


def test_default_idle_timeout_is_120_seconds():
    from trocket.remoting import ServerConfig

    assert ServerConfig().idle_timeout == ClientConfig().idle_timeout == 120.0
    assert (ServerConfig().async_permits, ServerConfig().oneway_permits) == (64, 256)
    assert (ClientConfig().async_permits, ClientConfig().oneway_permits) == (65535, 65535)
    assert ClientConfig().connect_timeout == 3.0 and ClientConfig().scan_interval == 1.0
