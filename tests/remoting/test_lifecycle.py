"""The connection lifecycle: its states and transitions, why it closed, what pending
calls are told (the cause chained), one way to answer, the response table, and
connection failures logged with their addresses and without flooding the log."""

from __future__ import annotations

import logging
import socket
import struct

import pytest
import trio
import trio.testing

from trocket.codecs.command import RemotingCommand
from trocket.codecs.errors import FrameError
from trocket.remoting import (
    ClientConfig,
    RemotingConnectionClosedError,
    RemotingFrameError,
    RemotingShutdownError,
    SysResponseCode,
)
from trocket.remoting.response import ResponseFuture, ResponseTable
from trocket.remoting.state import CloseReason, ConnectionStateError, ConnState, check_transition

from ..waiting import wait_until
from .conftest import client_of, request, server_config, serving
from .test_bad_input import Recorder
from .test_hooks_events import Tracing

_LINGER_0 = struct.pack("ii", 1, 0)  # close() sends a RST


# -- states and transitions ----------------------------------------------------------------

LEGAL = {
    (ConnState.OPEN, ConnState.DRAINING),
    (ConnState.OPEN, ConnState.CLOSING),
    (ConnState.DRAINING, ConnState.CLOSING),
    (ConnState.CLOSING, ConnState.CLOSED),
}


@pytest.mark.parametrize("old", list(ConnState))
@pytest.mark.parametrize("new", list(ConnState))
def test_the_transition_table(old, new):
    if (old, new) in LEGAL:
        assert check_transition(old, new) is new
    else:
        with pytest.raises(ConnectionStateError, match=f"from {old.name} to {new.name}"):
            check_transition(old, new)


def test_the_lifecycle_alone_without_io():
    """The connection's state machine as a plain object (no socket, no trio): a graceful
    close drains, the first close reason wins, the description says why."""
    from trocket.remoting.state import Lifecycle

    life = Lifecycle()
    assert (life.state, life.reason, life.description) == (ConnState.OPEN, None, "open")
    assert life.drain() and life.state is ConnState.DRAINING and not life.drain()
    assert life.description == "draining"
    error = ConnectionResetError(104, "reset")
    assert life.close(CloseReason.IO_ERROR, error)
    assert not life.close("too late")  # the first reason wins
    assert (life.state, life.reason, life.cause, life.detail) == (ConnState.CLOSING, CloseReason.IO_ERROR, error, None)
    assert life.description == "failed: [Errno 104] reset"
    life.to(ConnState.CLOSED)
    with pytest.raises(ConnectionStateError):
        life.to(ConnState.OPEN)
    other = Lifecycle()
    assert other.close("enough") and (other.reason, other.detail) == (CloseReason.LOCAL, "enough")
    assert other.description == "closed locally: enough"


async def test_close_goes_open_closing_closed_and_illegal_moves_raise():
    async with serving() as server, client_of() as client:
        await client.invoke_sync(server.address, request())
        conn = client.connection_for(server.address)
        assert conn.state is ConnState.OPEN and conn.is_active and not conn.closed
        with pytest.raises(ConnectionStateError):
            conn.life.to(ConnState.CLOSED)  # not without CLOSING
        conn.close("enough")
        assert conn.state is ConnState.CLOSING and not conn.is_active
        assert (conn.close_reason, conn.close_detail) == (CloseReason.LOCAL, "enough")
        conn.close(CloseReason.IDLE)  # closing twice: nothing changes
        assert conn.close_reason is CloseReason.LOCAL
        with trio.fail_after(5):
            await conn.wait_closed()
        assert conn.state is ConnState.CLOSED and conn.closed
        assert conn.close_description == "closed locally: enough"
        for state in ConnState:
            with pytest.raises(ConnectionStateError):
                conn.life.to(state)  # CLOSED is final
        conn.stop_reading()  # too late to drain: nothing happens
        assert conn.state is ConnState.CLOSED


async def test_peer_close_and_graceful_shutdown_reasons():
    server_conns = []

    async def remember(conn, req):
        server_conns.append(conn)
        return RemotingCommand.response(0)

    async with serving() as server:
        server.register_processor(5, remember)
        async with client_of() as client:
            await client.invoke_sync(server.address, request(5))
        with trio.fail_after(5):
            await server_conns[0].wait_closed()
        assert server_conns[0].close_reason is CloseReason.PEER  # the client closed gracefully
        async with client_of() as client:
            await client.invoke_sync(server.address, request(5))
            conn = client.connection_for(server.address)
            seen = []
            server_conns[1].stop_reading()
            seen.append(server_conns[1].state)
            with trio.fail_after(5):
                await server_conns[1].wait_closed()
                await conn.wait_closed()
            assert seen == [ConnState.DRAINING]
            assert server_conns[1].close_reason is CloseReason.GRACEFUL
            assert conn.close_reason is CloseReason.PEER


async def test_idle_close_reason(idle_jump_clock):
    # the 30 s of idleness pass at once once the loopback round trip is done
    async with serving(server_config(idle_timeout=None)) as server, client_of(ClientConfig(idle_timeout=30.0)) as client:
        await client.invoke_sync(server.address, request())
        conn = client.connection_for(server.address)
        start = trio.current_time()
        with trio.fail_after(60):
            await conn.wait_closed()
        assert conn.close_reason is CloseReason.IDLE
        assert 30.0 <= trio.current_time() - start < 31.0


# -- what pending calls are told ---------------------------------------------------------


async def _serve_once(listener: trio.SocketListener, reply) -> None:
    stream = await listener.accept()
    await stream.receive_some(65536)  # the request
    await reply(stream)


async def _pending_call_error(reply) -> RemotingConnectionClosedError:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    async with trio.open_nursery() as nursery, client_of() as client:
        nursery.start_soon(_serve_once, listener, reply)
        with trio.fail_after(5), pytest.raises(RemotingConnectionClosedError) as info:
            await client.invoke_sync(f"127.0.0.1:{port}", request(), timeout=5)
        nursery.cancel_scope.cancel()
    await listener.aclose()
    return info.value


async def test_a_reset_by_the_peer_is_the_cause_of_the_pending_calls_error():
    async def reset(stream: trio.SocketStream) -> None:
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_0)
        stream.socket.close()

    error = await _pending_call_error(reset)
    assert not isinstance(error, RemotingShutdownError)
    assert isinstance(error.__cause__, ConnectionResetError)
    assert "failed: [Errno" in str(error) and "reset" in str(error).lower()


async def test_bad_input_is_the_cause_of_the_pending_calls_error():
    async def junk(stream: trio.SocketStream) -> None:
        await stream.send_all(b"\x00\x00\x00\x01zz")
        await trio.sleep_forever()  # the client closes

    error = await _pending_call_error(junk)
    assert isinstance(error.__cause__, RemotingFrameError)
    assert isinstance(error.__cause__.__cause__, FrameError)
    assert "closed on bad input" in str(error)


async def test_shutdown_errors_chain_no_cause_and_say_shut_down():
    gate = trio.Event()

    async def hold(conn, req):
        await gate.wait()

    async with serving() as server:
        server.register_processor(6, hold)
        async with client_of() as client:
            await client.invoke_sync(server.address, request())
            conn = client.connection_for(server.address)
            fut = await client.invoke_async(server.address, request(6), timeout=30)
            await client.aclose(deadline=0)
            with pytest.raises(RemotingShutdownError):
                fut.result()
            assert conn.closed and conn.close_reason in (CloseReason.SHUTDOWN, CloseReason.LOCAL)
        gate.set()


# -- one way to answer ---------------------------------------------------------------------


async def test_answer_later_from_a_handler_runs_the_after_response_hook():
    hook = Tracing()
    release, deferred_done = trio.Event(), trio.Event()

    async def answer_later(conn, req):
        await release.wait()
        assert await conn.answer(req, RemotingCommand.response(0, body=b"later"))

    async def deferred(conn, req):
        conn.start_handler(answer_later, conn, req)
        deferred_done.set()
        return None  # answered later

    async with serving(hooks=[hook]) as server, client_of() as client:
        server.register_processor(11, deferred)
        fut = await client.invoke_async(server.address, request(11))
        with trio.fail_after(5):
            await deferred_done.wait()
        await trio.testing.wait_all_tasks_blocked()  # the dispatch is over
        assert hook.calls == [("before", 11)]  # no after-response for "no answer yet"
        release.set()
        with trio.fail_after(5):
            resp = await fut
        assert resp.body == b"later"
        assert hook.calls == [("before", 11), ("after", 11, 0)]


async def test_answer_turns_a_raising_hook_or_an_unencodable_response_into_system_error():
    class Refuse(Tracing):
        def do_after_response(self, addr, req, resp):
            if req.code == 12:
                raise PermissionError("not this one")

    async def unencodable(conn, req):
        return RemotingCommand.response(0, remark="x" * (1 << 24))  # past the 24-bit header length

    async with serving(hooks=[Refuse()]) as server, client_of() as client:
        server.register_processor(12, lambda conn, req: RemotingCommand.response(0))
        server.register_processor(13, unencodable)
        resp = await client.invoke_sync(server.address, request(12))
        assert resp.code == SysResponseCode.SYSTEM_ERROR and "PermissionError: not this one" in resp.remark
        resp = await client.invoke_sync(server.address, request(13))
        assert resp.code == SysResponseCode.SYSTEM_ERROR and resp.remark.startswith("response does not encode")
        assert server.stats.processor_errors == 1


async def test_an_unencodable_answer_without_hooks_is_system_error():
    """The answer path without response hooks (an inline processor's command finished and
    encoded in place) answers SYSTEM_ERROR too when the command does not encode, and the
    connection serves the next request."""
    async with serving() as server, client_of() as client:
        server.register_processor(13, lambda conn, req: RemotingCommand.response(0, remark="x" * (1 << 24)), inline=True)
        server.register_processor(14, lambda conn, req: RemotingCommand.response(0, body=req.body), inline=True)
        resp = await client.invoke_sync(server.address, request(13))
        assert resp.code == SysResponseCode.SYSTEM_ERROR and resp.remark.startswith("response does not encode")
        resp = await client.invoke_sync(server.address, RemotingCommand.request(14, body=b"next"))
        assert resp.code == 0 and resp.body == b"next"


async def test_answer_to_a_oneway_request_sends_nothing_and_closed_connections_drop():
    answers = []
    done = trio.Event()

    async def record(conn, req):
        answers.append(await conn.answer(req, RemotingCommand.response(0)))
        conn.close()
        answers.append(await conn.answer(RemotingCommand.request(1), RemotingCommand.response(0)))
        done.set()

    async with serving() as server, client_of() as client:
        server.register_processor(14, record)
        await client.invoke_oneway(server.address, request(14))
        with trio.fail_after(5):
            await done.wait()
    assert answers == [False, False]


# -- the response table --------------------------------------------------------------------


async def test_response_table_methods():
    table = ResponseTable()
    futs = [ResponseFuture(i, RemotingCommand.request(1), "a:1", 1.0 + i, table) for i in range(3)]
    for fut in futs:
        table.add(fut)
    assert len(table) == 3 and 1 in table and 7 not in table and bool(table)
    assert table.pop(1) is futs[1] and table.pop(1) is None and len(table) == 2
    futs[2].set_exception(RuntimeError("x"))  # a finishing future leaves its table
    assert 2 not in table and len(table) == 1
    assert set(table.futures()) == {futs[0]}
    expired = table.expire(trio.current_time() + 1.5)  # futs[0]'s deadline is +1 s
    assert expired == 1 and len(table) == 0 and isinstance(futs[0].exception, Exception)
    table.add(f := ResponseFuture(9, RemotingCommand.request(1), "a:1", 5.0, table))
    assert table.fail_all(lambda fut: RemotingConnectionClosedError(f"gone {fut.opaque}")) == 1
    assert str(f.exception) == "gone 9" and not table


# -- failures logged with addresses, and not one line each ---------------------------------


async def test_a_flood_of_resets_logs_addresses_a_few_lines_and_a_summary(mock_clock, caplog):
    mock_clock.rate = 1.0  # real time, plus the jumps this test makes
    caplog.set_level(logging.INFO, logger="trocket.remoting")
    n = 5000  # as many as the report that found the defect
    recorder = Recorder()
    async with serving(listener=recorder) as server:
        host, port = "127.0.0.1", server.port
        burst = server.io_log.burst
        for _ in range(n):
            sock = trio.socket.socket()
            await sock.connect((host, port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_0)
            sock.close()
        await wait_until(lambda: server.stats.connections_closed >= n, 30)
        failures = [e for e in recorder.events if e[0] == "exception"]
        assert len(failures) == n  # every one of them a reset seen by the reader
        lines = [r.getMessage() for r in caplog.records if "receive failed" in r.getMessage()]
        assert len(lines) == burst
        for line in lines:
            assert "? -> ?" not in line and f"127.0.0.1:{port} -> 127.0.0.1:" in line, line
        assert server.io_log.suppressed == n - burst
        mock_clock.jump(server.io_log.interval)  # the interval ends: the scan summarises
        await wait_until(lambda: not server.io_log.suppressed, 10)
        summaries = [r.getMessage() for r in caplog.records if "suppressed" in r.getMessage()]
        assert summaries == [f"{n - burst} more connection failure messages suppressed in the last 10 s"]


async def test_rate_limited_log_bursts_then_summarises_each_interval(autojump_clock, caplog):
    from trocket.remoting.ratelog import RateLimitedLog

    caplog.set_level(logging.INFO, logger="t.ratelog")
    rlog = RateLimitedLog(logging.getLogger("t.ratelog"), burst=2, interval=10.0, what="resets")
    assert [rlog.log(logging.INFO, "reset %d", i) for i in range(5)] == [True, True, False, False, False]
    assert rlog.flush() == 0 and rlog.suppressed == 3  # the interval is not over yet
    await trio.sleep(10)
    assert rlog.flush() == 3 and rlog.suppressed == 0 and rlog.flush() == 0
    assert rlog.log(logging.INFO, "reset %d", 5)  # a new interval, a new burst
    await trio.sleep(3)
    assert rlog.log(logging.INFO, "reset %d", 6) and not rlog.log(logging.INFO, "reset %d", 7)
    await trio.sleep(7)
    assert rlog.log(logging.INFO, "reset %d", 8)  # the next interval summarises the last one first
    assert [r.getMessage() for r in caplog.records] == [
        "reset 0", "reset 1", "3 more resets suppressed in the last 10 s",
        "reset 5", "reset 6", "1 more resets suppressed in the last 10 s", "reset 8",
    ]


async def test_keyed_rate_limited_log_one_line_per_key_and_interval(autojump_clock, caplog):
    """One line per key and minute, whatever the other keys do; a key's next line says
    how many it held back; past ``max_keys`` the keys whose minute is over are forgotten."""
    from trocket.remoting.ratelog import KeyedRateLimitedLog

    caplog.set_level(logging.INFO, logger="t.keyed")
    klog = KeyedRateLimitedLog(logging.getLogger("t.keyed"), interval=60.0, max_keys=2)
    msg = "refused %s; %d more"
    assert [klog.log("a", logging.WARNING, msg, "a") for _ in range(3)] == [True, False, False]
    assert klog.log("b", logging.WARNING, msg, "b")
    await trio.sleep(59)
    assert not klog.log("a", logging.WARNING, msg, "a")
    await trio.sleep(1)
    assert klog.log("a", logging.WARNING, msg, "a")  # its minute is over: one line, 3 held back
    assert klog.log("c", logging.WARNING, msg, "c")  # a third key: "b", whose minute is over, forgotten
    assert set(klog._keys) == {"a", "c"}
    assert [r.getMessage() for r in caplog.records] == [
        "refused a; 0 more", "refused b; 0 more", "refused a; 3 more", "refused c; 0 more",
    ]
