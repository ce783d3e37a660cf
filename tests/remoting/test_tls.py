"""TLS on trio's SSLStream: server modes disabled / permissive / enforcing."""

from __future__ import annotations

import ssl

import pytest
import trio
import trustme

from trocket.remoting import (
    ClientConfig,
    RemotingConnectError,
    RemotingConnectionClosedError,
    RemotingError,
    TlsMode,
)

from .conftest import client_of, request, server_config, serving


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture(scope="module")
def server_ctx(ca):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
    return ctx


@pytest.fixture(scope="module")
def client_ctx(ca):
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ca.configure_trust(ctx)
    return ctx


async def _echo_ok(client, addr):
    for body in (b"a", b"b" * 70000):  # one small, one bigger than a TLS record
        assert (await client.invoke_sync(addr, request(body=body), timeout=5)).body == body
    fut = await client.invoke_async(addr, request(body=b"async"))
    assert (await fut).body == b"async"


async def test_enforcing_accepts_tls_and_refuses_plain(server_ctx, client_ctx):
    async with serving(server_config(tls_mode=TlsMode.ENFORCING, handshake_timeout=2), ssl_context=server_ctx) as server:
        async with client_of(ssl_context=client_ctx) as client:
            await _echo_ok(client, server.address)
            assert client.connection_for(server.address).tls
            (sconn,) = server.connections
            assert sconn.tls
        async with client_of() as plain:
            with pytest.raises((RemotingConnectionClosedError, RemotingError)):
                await plain.invoke_sync(server.address, request(), timeout=3)
        assert server.tls_handshake_failures == 1


async def test_permissive_serves_tls_and_plain_on_one_port(server_ctx, client_ctx):
    async with serving(server_config(tls_mode=TlsMode.PERMISSIVE), ssl_context=server_ctx) as server:
        async with client_of(ssl_context=client_ctx) as tls_client, client_of() as plain_client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_echo_ok, tls_client, server.address)
                nursery.start_soon(_echo_ok, plain_client, server.address)
            assert sorted(c.tls for c in server.connections) == [False, True]


async def test_disabled_mode_sees_a_tls_client_as_bad_input(client_ctx):
    async with serving() as server:
        async with client_of(ClientConfig(connect_timeout=2), ssl_context=client_ctx) as client:
            with pytest.raises(RemotingConnectError):
                await client.invoke_sync(server.address, request())
        assert server.stats.decode_errors == 1


async def test_client_rejects_an_untrusted_certificate(server_ctx):
    other = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    other.configure_trust(ctx)
    async with serving(server_config(tls_mode=TlsMode.ENFORCING), ssl_context=server_ctx) as server:
        async with client_of(ssl_context=ctx) as client:
            with pytest.raises(RemotingConnectError, match="TLS handshake"):
                await client.invoke_sync(server.address, request())


def test_tls_mode_needs_a_context():
    from trocket.remoting import RemotingServer

    with pytest.raises(ValueError):
        RemotingServer(server_config(tls_mode=TlsMode.ENFORCING))
