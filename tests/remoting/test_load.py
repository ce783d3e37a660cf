"""Load: 10,000 async calls on one connection, 1,000 connections, a flood
against a slow processor with bounded memory."""

from __future__ import annotations

import resource

import pytest
import trio

from trocket.codecs.command import RemotingCommand
from trocket.remoting import ClientConfig, RemotingClient, SysResponseCode

from ..waiting import wait_until
from .conftest import ECHO, client_of, request, server_config, serving


async def test_ten_thousand_concurrent_async_calls_on_one_connection():
    async with serving(server_config(processor_queue=20_000)) as server, client_of() as client:
        n = 10_000
        done = trio.Event()
        results = []

        def cb(fut):
            results.append(fut)
            if len(results) == n:
                done.set()

        for i in range(n):
            await client.invoke_async(server.address, request(body=b"%d" % i), timeout=30, callback=cb)
        with trio.fail_after(30):
            await done.wait()
        assert all(f.exception is None for f in results)
        assert sorted(int(f.response.body) for f in results) == list(range(n))
        assert len(client.connections) == 1 and len(client.connection_for(server.address).responses) == 0
        assert client.invoker.async_permits.value == client.config.async_permits


async def test_a_thousand_connections_from_one_process():
    n = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * n + 200  # both ends live in this process
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"fd limit {hard} < {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    async with serving(server_config(backlog=n)) as server:
        clients = [RemotingClient(ClientConfig(scan_interval=5)) for _ in range(n)]
        ok = 0
        async with trio.open_nursery() as nursery:
            for c in clients:
                await nursery.start(c.run)

            async def call(c, i):
                nonlocal ok
                resp = await c.invoke_sync(server.address, request(body=b"%d" % i), timeout=30)
                assert resp.body == b"%d" % i
                ok += 1

            with trio.fail_after(60):
                async with trio.open_nursery() as calls:
                    for i, c in enumerate(clients):
                        calls.start_soon(call, c, i)
                assert ok == n and len(server.connections) == n
                for c in clients:
                    await c.aclose(0)
        await wait_until(lambda: not server.connections, 10)


async def test_flooding_a_slow_processor_keeps_memory_bounded():
    release = trio.Event()
    active = 0

    async def slow(conn, req):
        nonlocal active
        active += 1
        await release.wait()
        active -= 1
        return RemotingCommand.response(0)

    cfg = server_config(outbound_max_frames=64, outbound_max_bytes=64 * 1024)
    async with serving(cfg) as server, client_of(ClientConfig(outbound_max_frames=64)) as client:
        entry = server.register_processor(5, slow, limit=4, queue=16)
        n = 3000
        codes = []
        refused, answered = trio.Event(), trio.Event()

        def callback(f):
            codes.append(f.response.code)
            if len(codes) == n - 20:
                refused.set()
            if len(codes) == n:
                answered.set()

        body = b"p" * 1024
        for _ in range(n):
            fut = await client.invoke_async(server.address, request(5, body=body), timeout=30, callback=callback)
        with trio.fail_after(30):
            await refused.wait()
        # at most limit + queue admitted at any time; everything else was told SYSTEM_BUSY at once
        assert entry.pending == 20 and active == 4
        assert codes.count(SysResponseCode.SYSTEM_BUSY) == n - 20
        (sconn,) = server.connections
        assert len(sconn.outbox.frames) <= 64
        release.set()
        with trio.fail_after(10):
            await answered.wait()
        assert codes.count(0) == 20
        assert fut.done()


async def test_a_peer_that_never_reads_is_pushed_back_not_buffered():
    async with serving(server_config(outbound_max_frames=32, outbound_max_bytes=32 * 1024)) as server:
        from trocket.codecs.serialize import encode_command

        frame = encode_command(RemotingCommand.request(100, body=b"r" * 4096))
        host, port = server.address.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        sent = 0
        with trio.move_on_after(1.5):
            while True:
                await stream.send_all(frame * 16)
                sent += 16
        (sconn,) = server.connections
        # the server stopped reading once its answers could not be written:
        # what it holds is bounded by its outbound queue, not by what we sent
        assert sconn.outbox.nbytes <= 32 * 1024 + len(frame)
        assert sent < 200_000
        await stream.aclose()


async def test_shutdown_is_prompt_while_a_peer_floods_without_pause():
    # The reader reads without waiting while data keeps coming; it must still take
    # cancellation, so a peer that never pauses cannot hold a shutdown up. The flood
    # comes from another process, so the socket never drains.
    import subprocess
    import sys

    from trocket.codecs.serialize import encode_command

    frame = encode_command(RemotingCommand.request(ECHO, body=b"x" * 64, oneway=True))
    code = (
        "import socket, sys\n"
        f"s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
        f"burst = bytes.fromhex({frame.hex()!r}) * 512\n"
        "try:\n"
        "    while True: s.sendall(burst)\n"
        "except OSError: pass\n"
    )
    flooding = trio.Event()
    handled = 0

    async def count(conn, req):
        nonlocal handled
        handled += 1
        if handled == 4 * 512:  # four bursts read and dispatched: the flood is on
            flooding.set()

    async with serving() as server:
        server.register_processor(ECHO, count)
        flooder = subprocess.Popen([sys.executable, "-c", code, str(server.port)])
        try:
            with trio.fail_after(30):
                await flooding.wait()
            with trio.fail_after(5):
                await server.shutdown(deadline=1.0)
        finally:
            flooder.kill()
            flooder.wait()
        assert server.stats.connections_closed >= 1
