"""Every call ends with exactly one outcome: response, timeout, connection failure
or cancellation; permits and opaques are freed whatever the outcome."""

from __future__ import annotations

import pytest
import trio

from trocket.remoting import (
    ClientConfig,
    RemotingCancelledError,
    RemotingConnectionClosedError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
    next_opaque,
)

from trocket.remoting.deadlines import RESOLUTION

from ..waiting import wait_until
from .conftest import Gate, client_of, request, serving


async def test_timeout_carries_address_and_elapsed_and_late_response_is_dropped(idle_jump_clock):
    gate = Gate()
    async with serving() as server, client_of() as client:
        server.register_processor(5, gate)
        addr = server.address
        with pytest.raises(RemotingTimeoutError) as info:
            await client.invoke_sync(addr, request(5), timeout=0.2)
        err = info.value
        assert err.address == addr and 0.2 <= err.elapsed <= 0.2 + RESOLUTION and err.timeout == 0.2
        conn = client.connection_for(addr)
        assert len(conn.responses) == 0  # the opaque is free
        gate.release.set()
        # the late answer arrives, matches nothing, is counted and dropped
        await wait_until(lambda: client.stats.dropped_responses, 5)
        assert (await client.invoke_sync(addr, request(body=b"after"))).body == b"after"


async def test_async_callback_runs_once_and_late_response_is_not_delivered(idle_jump_clock):
    gate = Gate()
    outcomes = []
    async with serving() as server, client_of() as client:
        server.register_processor(5, gate)
        fut = await client.invoke_async(server.address, request(5), timeout=0.2, callback=outcomes.append)
        with pytest.raises(RemotingTimeoutError):
            await fut
        assert 0.2 <= fut.elapsed <= 0.2 + RESOLUTION
        gate.release.set()
        await wait_until(lambda: client.stats.dropped_responses, 5)
        assert outcomes == [fut] and isinstance(fut.exception, RemotingTimeoutError)
        assert fut.response is None


async def test_scan_expires_calls_nobody_awaits(idle_jump_clock):
    gate = Gate()
    outcomes = []
    called = trio.Event()

    def callback(fut):
        outcomes.append(fut)
        called.set()

    async with serving() as server, client_of(ClientConfig(scan_interval=0.05, async_permits=1)) as client:
        server.register_processor(5, gate)
        await client.invoke_async(server.address, request(5), timeout=0.1, callback=callback)
        with trio.fail_after(3):
            await called.wait()
        assert isinstance(outcomes[0].exception, RemotingTimeoutError)
        assert client.stats.expired_by_scan == 1
        # expired by the first scan at or after its deadline (scans every 0.05 s)
        assert 0.1 <= outcomes[0].exception.elapsed <= 0.15 + 1e-9
        # its permit came back: with a single permit, a new async call goes through
        fut = await client.invoke_async(server.address, request(body=b"x"), timeout=2)
        assert (await fut).body == b"x"
        gate.release.set()


async def test_too_many_async_requests_is_distinct_from_timeout():
    gate = Gate()
    async with serving() as server, client_of(ClientConfig(async_permits=2)) as client:
        server.register_processor(5, gate)
        held = [await client.invoke_async(server.address, request(5), timeout=10) for _ in range(2)]
        with pytest.raises(RemotingTooManyRequestsError) as info:
            await client.invoke_async(server.address, request(5), timeout=0.1)
        assert info.value.kind == "async" and info.value.permits == 2
        assert not isinstance(info.value, RemotingTimeoutError)
        gate.release.set()
        for f in held:
            await f
        # permits are back
        assert (await (await client.invoke_async(server.address, request(body=b"y")))).body == b"y"


async def test_too_many_oneway_requests():
    async with serving() as server, client_of(ClientConfig(oneway_permits=1)) as client:
        addr = server.address
        await client.invoke_sync(addr, request())
        # a oneway send in progress holds the only permit (as one stuck on a full socket would)
        client.invoker.oneway_permits.acquire_nowait()
        with pytest.raises(RemotingTooManyRequestsError) as info:
            await client.invoke_oneway(addr, request(), 0.05)
        assert info.value.kind == "oneway" and info.value.permits == 1
        client.invoker.oneway_permits.release()
        await client.invoke_oneway(addr, request(), 0.05)
        assert client.invoker.oneway_permits.value == 1


async def test_cancelling_a_caller_frees_its_opaque_and_permit():
    gate = Gate()
    async with serving() as server, client_of(ClientConfig(async_permits=1)) as client:
        server.register_processor(5, gate)
        addr = server.address
        await client.invoke_sync(addr, request())
        conn = client.connection_for(addr)
        with trio.move_on_after(0.1) as scope:
            await client.invoke_sync(addr, request(5), timeout=10)
        assert scope.cancelled_caught and len(conn.responses) == 0

        fut = await client.invoke_async(addr, request(5), timeout=10)
        with trio.move_on_after(0.1):
            await fut
        assert isinstance(fut.exception, RemotingCancelledError) and len(conn.responses) == 0
        # the single permit is free again
        fut2 = await client.invoke_async(addr, request(body=b"z"), timeout=2)
        assert (await fut2).body == b"z"

        # cancelled while waiting for a permit: nothing leaks either
        fut3 = await client.invoke_async(addr, request(5), timeout=10)
        with trio.move_on_after(0.1):
            await client.invoke_async(addr, request(5), timeout=10)
        assert fut3.cancel() and len(conn.responses) == 0
        gate.release.set()
        assert (await (await client.invoke_async(addr, request(body=b"w")))).body == b"w"


async def test_closed_connection_fails_all_pending_calls_at_once():
    gate = Gate()
    async with serving() as server, client_of() as client:
        server.register_processor(5, gate)
        addr = server.address
        futs = [await client.invoke_async(addr, request(5), timeout=30) for _ in range(5)]
        await gate.wait_arrivals(5)
        (sconn,) = server.connections
        with trio.fail_after(2):  # long before their 30 s timeout
            sconn.close()
            for f in futs:
                with pytest.raises(RemotingConnectionClosedError):
                    await f
        gate.release.set()
        # a new connection is made on the next call
        assert (await client.invoke_sync(addr, request(body=b"again"))).body == b"again"


def test_opaque_is_process_wide_and_wraps_as_int32():
    import trocket.remoting.invoker as ep

    a, b = next_opaque(), next_opaque()
    assert b == a + 1
    saved = ep._opaque_counter
    try:
        import itertools

        ep._opaque_counter = itertools.count(2**31 - 1)
        assert next_opaque() == 2**31 - 1
        assert next_opaque() == -(2**31)
    finally:
        ep._opaque_counter = saved
