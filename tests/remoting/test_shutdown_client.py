"""Graceful shutdown, and the client's connection table."""

from __future__ import annotations

import pytest
import trio

from trocket.remoting import (
    ClientConfig,
    RemotingClient,
    RemotingConnectError,
    RemotingConnectionClosedError,
    RemotingServer,
    RemotingShutdownError,
)

from .conftest import Gate, client_of, echo, request, server_config


async def test_graceful_shutdown_lets_in_flight_processors_finish():
    gate = Gate()
    server = RemotingServer(server_config())
    server.register_processor(5, gate)
    server.register_processor(100, echo)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        addr = server.address
        async with client_of() as client:
            futs = [await client.invoke_async(addr, request(5, body=b"%d" % i), timeout=10) for i in range(3)]
            await gate.wait_arrivals(3)
            # a call from the server to the client is pending during shutdown
            client_gate = Gate()
            client.register_processor(13, client_gate)
            (sconn,) = server.connections
            pending = await server.invoke_async(sconn, request(13), 10)
            done = trio.Event()

            async def shut():
                await server.shutdown(deadline=5)
                done.set()

            nursery.start_soon(shut)
            with pytest.raises(RemotingShutdownError):  # failed at once, with a clear error
                await pending
            # no new connections are accepted
            async with client_of(ClientConfig(connect_timeout=1)) as other:
                with pytest.raises(RemotingConnectError):
                    await other.invoke_sync(addr, request())
            assert not done.is_set()
            gate.release.set()
            # the in-flight requests are answered before the connection closes
            assert [(await f).body for f in futs] == [b"0", b"1", b"2"]
            with trio.fail_after(5):
                await done.wait()
            client_gate.release.set()
    assert not server.connections


async def test_shutdown_deadline_cancels_stuck_processors():
    started = trio.Event()
    cancelled = []

    async def stuck(conn, req):
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(True)
            raise

    server = RemotingServer(server_config())
    server.register_processor(5, stuck)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        async with client_of() as client:
            fut = await client.invoke_async(server.address, request(5), timeout=10)
            await started.wait()
            t0 = trio.current_time()
            await server.shutdown(deadline=0.2)
            assert 0.15 < trio.current_time() - t0 < 2
            assert cancelled == [True]
            with pytest.raises(RemotingConnectionClosedError):
                await fut


async def test_client_close_fails_pending_calls_with_shutdown_error():
    gate = Gate()
    server = RemotingServer(server_config())
    server.register_processor(5, gate)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        client = RemotingClient()
        await nursery.start(client.run)
        fut = await client.invoke_async(server.address, request(5), timeout=10)
        await gate.wait_arrivals(1)
        await client.aclose(deadline=1)
        with pytest.raises(RemotingShutdownError):
            await fut
        with pytest.raises(RemotingShutdownError):
            await client.invoke_sync(server.address, request())
        gate.release.set()
        await server.shutdown()


async def test_one_connection_per_address_made_lazily_under_a_lock():
    server = RemotingServer(server_config())
    server.register_processor(100, echo)
    async with server, client_of() as client:
        assert client.connection_for(server.address) is None
        conns = []
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(lambda: client.get_connection(server.address))
                nursery.start_soon(lambda: client.invoke_sync(server.address, request()))

            async def grab():
                conns.append(await client.get_connection(server.address))

            for _ in range(5):
                nursery.start_soon(grab)
        assert len(set(conns)) == 1 and len(server.connections) == 1
        assert server.stats.connections_opened == 1


async def test_connect_refused_and_connect_timeout(monkeypatch):
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with client_of(ClientConfig(connect_timeout=0.2)) as client:
        with pytest.raises(RemotingConnectError) as info:
            await client.invoke_sync(f"127.0.0.1:{port}", request())
        assert info.value.address == f"127.0.0.1:{port}"
        with pytest.raises(RemotingConnectError):
            await client.invoke_sync("no-port-here", request())

        async def hang(*a, **k):
            await trio.sleep_forever()

        monkeypatch.setattr(trio, "open_tcp_stream", hang)
        t0 = trio.current_time()
        with pytest.raises(RemotingConnectError, match="timed out"):
            await client.invoke_sync("127.0.0.1:1", request())
        assert trio.current_time() - t0 < 1


def test_parse_address():
    from trocket.remoting import parse_address

    assert parse_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert parse_address("[::1]:10911") == ("::1", 10911)
    with pytest.raises(ValueError):
        parse_address("nohost")


async def test_ipv6_loopback_if_available():
    server = RemotingServer(server_config(listen_host="::1"))
    server.register_processor(100, echo)
    try:
        async with server, client_of() as client:
            assert server.address.startswith("[::1]:")
            assert (await client.invoke_sync(server.address, request(body=b"6"))).body == b"6"
    except OSError:
        pytest.skip("no IPv6 loopback")
