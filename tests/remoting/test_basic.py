"""The service basics: echo in three invocation styles, both serializations,
system replies, processors (async, blocking, inline, default), both directions."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from trocket.codecs.command import RPC_RESPONSE, RemotingCommand, SerializeType
from trocket.remoting import SysResponseCode

from ..waiting import wait_until
from .conftest import FAIL, Gate, client_of, request, server_config, serving


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_sync_async_oneway_echo(stype):
    seen = []
    arrived = trio.Event()

    async def record(conn, req):
        seen.append(req)
        arrived.set()

    async with serving() as server, client_of() as client:
        server.register_processor(7, record)
        addr = server.address
        resp = await client.invoke_sync(addr, request(body=b"hello", ext_fields={"k": "v"}, serialize_type=stype))
        assert (resp.code, resp.body, resp.ext_fields) == (0, b"hello", {"k": "v"})
        assert resp.serialize_type == stype  # answered in the request's serialization
        assert resp.flag & RPC_RESPONSE

        fut = await client.invoke_async(addr, request(body=b"async", serialize_type=stype))
        resp = await fut
        assert resp.body == b"async" and fut.done() and fut.result() is resp

        await client.invoke_oneway(addr, request(7, body=b"one", serialize_type=stype))
        with trio.fail_after(5):
            await arrived.wait()
        assert seen[0].is_oneway and seen[0].body == b"one"
        assert len(client.connections) == 1  # one connection, reused
        assert server.stats.dropped_responses == client.stats.dropped_responses == 0


async def test_unknown_code_is_request_code_not_supported():
    async with serving() as server, client_of() as client:
        resp = await client.invoke_sync(server.address, request(4242))
        assert resp.code == SysResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert resp.remark == " request type 4242 not supported"
        # oneway to an unknown code: no answer at all
        await client.invoke_oneway(server.address, request(4242))
        assert (await client.invoke_sync(server.address, request(body=b"x"))).body == b"x"
        assert client.stats.dropped_responses == 0
        assert server.stats.not_supported_replies == 2


async def test_processor_exception_is_system_error_and_connection_stays_up():
    async def boom(conn, req):
        raise KeyError("nope")

    async with serving() as server, client_of() as client:
        server.register_processor(FAIL, boom)
        resp = await client.invoke_sync(server.address, request(FAIL))
        assert resp.code == SysResponseCode.SYSTEM_ERROR
        assert resp.remark.startswith("KeyError: 'nope', boom(test_basic.py:")
        conn = client.connection_for(server.address)
        assert (await client.invoke_sync(server.address, request(body=b"ok"))).body == b"ok"
        assert client.connection_for(server.address) is conn and conn.is_active
        await client.invoke_oneway(server.address, request(FAIL))  # oneway: no answer
        assert (await client.invoke_sync(server.address, request(body=b"ok"))).body == b"ok"
        assert client.stats.dropped_responses == 0


async def test_processor_full_answers_system_busy_at_once():
    gate = Gate()
    async with serving() as server, client_of() as client:
        server.register_processor(5, gate, limit=1, queue=1)
        addr = server.address
        held = [await client.invoke_async(addr, request(5), timeout=10) for _ in range(2)]
        await gate.wait_arrivals(1)
        with trio.fail_after(2):
            resp = await client.invoke_sync(addr, request(5))
        assert resp.code == SysResponseCode.SYSTEM_BUSY
        assert resp.remark == "[OVERLOAD]system busy, start flow control for a while"
        assert server.stats.busy_replies == 1
        gate.release.set()
        assert [(await f).code for f in held] == [0, 0]
        assert gate.arrived == 2  # the queued one ran after the first


async def test_rejecting_processor_answers_system_busy():
    class Rejecting:
        def __init__(self):
            self.reject = True

        def reject_request(self):
            return self.reject

        async def process_request(self, conn, req):
            return RemotingCommand.response(0)

    proc = Rejecting()
    async with serving() as server, client_of() as client:
        server.register_processor(6, proc)
        resp = await client.invoke_sync(server.address, request(6))
        assert resp.code == SysResponseCode.SYSTEM_BUSY and resp.remark.startswith("[REJECTREQUEST]")
        proc.reject = False
        assert (await client.invoke_sync(server.address, request(6))).code == 0


async def test_blocking_processor_runs_in_threads_under_its_limit():
    main = threading.get_ident()
    lock = threading.Lock()
    running = [0, 0]  # now, max
    release = threading.Event()

    def blocking(conn, req):
        assert threading.get_ident() != main
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        release.wait(10)  # a slow processor: busy until the test has seen the limit reached
        with lock:
            running[0] -= 1
        return RemotingCommand.response(0, body=req.body)

    async with serving() as server, client_of() as client:
        entry = server.register_processor(8, blocking, limit=2, queue=100)
        futs = [await client.invoke_async(server.address, request(8, body=b"%d" % i)) for i in range(6)]
        try:
            await wait_until(lambda: entry.pending == 6 and running[0] >= 2, 5)  # all admitted, two running
            await trio.testing.wait_all_tasks_blocked()  # the other four wait for the limit, not a thread
            assert running[0] == 2
        finally:
            release.set()
        assert [(await f).body for f in futs] == [b"%d" % i for i in range(6)]
        assert running[1] == 2


async def test_inline_and_default_processors():
    def inline_echo(conn, req):
        return RemotingCommand.response(0, body=req.body + b"!")

    async def default(conn, req):
        return RemotingCommand.response(0, remark=f"default {req.code}")

    async with serving() as server, client_of() as client:
        server.register_processor(9, inline_echo, inline=True)
        server.register_default_processor(default)
        assert (await client.invoke_sync(server.address, request(9, body=b"a"))).body == b"a!"
        assert (await client.invoke_sync(server.address, request(777))).remark == "default 777"


async def test_requests_on_one_connection_are_processed_concurrently():
    gate = Gate()
    async with serving() as server, client_of() as client:
        server.register_processor(5, gate)
        held = await client.invoke_async(server.address, request(5, body=b"held"), timeout=10)
        await gate.wait_arrivals(1)
        # a long-held request does not block the others; answers come out of order
        for i in range(20):
            assert (await client.invoke_sync(server.address, request(body=b"%d" % i))).body == b"%d" % i
        assert not held.done()
        gate.release.set()
        assert (await held).body == b"held"


async def test_processor_answers_later_with_answer():
    later = []
    arrived = trio.Event()

    async def deferred(conn, req):
        later.append((conn, req))
        arrived.set()
        return None

    async with serving() as server, client_of() as client:
        server.register_processor(11, deferred)
        fut = await client.invoke_async(server.address, request(11, body=b"q"))
        with trio.fail_after(5):
            await arrived.wait()
        conn, req = later[0]
        assert await conn.answer(req, RemotingCommand.response(0, body=b"later"))
        assert (await fut).body == b"later"


async def test_server_calls_client_over_the_same_connection():
    conns = []

    async def hello(conn, req):
        conns.append(conn)
        return RemotingCommand.response(0)

    async def client_side(conn, req):
        return RemotingCommand.response(0, body=b"from client " + req.body)

    async with serving() as server, client_of() as client:
        server.register_processor(12, hello)
        client.register_processor(13, client_side)
        await client.invoke_sync(server.address, request(12))
        conn = conns[0]
        resp = await server.invoke_sync(conn, request(13, body=b"q"), 5)
        assert resp.body == b"from client q"
        fut = await server.invoke_async(conn, request(13, body=b"a"), 5)
        assert (await fut).body == b"from client a"
        assert (await client.invoke_sync(server.address, request(body=b"still"))).body == b"still"


async def test_remote_address_is_cached_per_connection():
    async with serving() as server, client_of() as client:
        await client.invoke_sync(server.address, request())
        conn = client.connection_for(server.address)
        assert conn.remote_address == server.address
        (sconn,) = server.connections
        assert sconn.remote_address == conn.local_address
        assert sconn.local_address == conn.remote_address


async def test_system_replies_carry_no_ext_fields_by_default_like_java():
    async with serving() as server, client_of() as client:
        resp = await client.invoke_sync(f"127.0.0.1:{server.port}", RemotingCommand.request(4242), timeout=3)
    assert resp.code == 3 and resp.ext_fields is None


async def test_system_replies_can_carry_an_empty_ext_fields_object():
    async with serving(server_config(system_reply_ext_fields=True)) as server, client_of() as client:
        resp = await client.invoke_sync(f"127.0.0.1:{server.port}", RemotingCommand.request(4242), timeout=3)
    assert resp.code == 3 and resp.ext_fields == {}
