"""``async with`` a client or server: the body's errors come back as themselves."""

import socket

import pytest
import trio

from trocket.codecs.command import RemotingCommand
from trocket.remoting import RemotingClient, RemotingConnectError

from .conftest import ECHO, client_of, serving


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_connect_error_is_not_wrapped_in_a_group():
    port = _unused_port()
    with pytest.raises(RemotingConnectError) as info:
        async with RemotingClient() as client:
            await client.invoke_sync(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), timeout=2)
    assert f"127.0.0.1:{port}" in str(info.value)


async def test_body_exception_from_inside_a_server_block_is_unwrapped():
    with pytest.raises(KeyError):
        async with serving():
            raise KeyError("mine")


async def test_client_still_works_after_a_caught_error():
    async with serving() as server, client_of() as client:
        with pytest.raises(RemotingConnectError):
            await client.invoke_sync(f"127.0.0.1:{_unused_port()}", RemotingCommand.request(ECHO), timeout=2)
        resp = await client.invoke_sync(f"127.0.0.1:{server.port}", RemotingCommand.request(ECHO, body=b"x"), timeout=2)
        assert resp.body == b"x"


async def test_cancellation_passes_through():
    with trio.move_on_after(0.05) as scope:
        async with RemotingClient():
            await trio.sleep_forever()
    assert scope.cancelled_caught


async def test_an_enclosing_cancel_during_a_clean_exit_still_closes_the_owned_nursery():
    # the body ends normally but its enclosing scope is cancelled: the graceful close
    # is cancelled too, and the client's own nursery must still be exited properly
    async with serving() as server:
        with trio.CancelScope() as scope:
            async with client_of() as client:
                await client.invoke_sync(server.address, RemotingCommand.request(ECHO), timeout=2)
                scope.cancel()
        assert scope.cancelled_caught
        async with client_of() as client:  # trio's state is sound: the next one works
            await client.invoke_sync(server.address, RemotingCommand.request(ECHO), timeout=2)
