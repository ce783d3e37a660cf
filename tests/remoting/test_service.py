"""Typed services (remoting.rpc / service / stub) over real sockets: handlers of every
kind, typed answers and errors, both serializations, and one timeout budget per call."""

from __future__ import annotations

import pytest
import trio

from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.custom_header import field, header
from trocket.remoting import (
    Channel,
    ClientConfig,
    RemotingClient,
    Method,
    RemoteBusyError,
    RemoteSystemError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
    Reply,
    ReplyFuture,
    RequestCodeNotSupportedError,
    ResponseCodeError,
    ResponseFuture,
    Service,
    ServiceError,
    Stub,
    error_reply,
)

from .conftest import Gate, client_of, serving


@header
class SumRequest:
    a: int = field("int", required=True)
    b: int = field("long", required=True)
    label: str | None = field("str")


@header
class SumResponse:
    total: int = field("long", required=True)
    label: str | None = field("str")


class Negative(ServiceError):
    code = 400


class Overflow(ServiceError):
    code = 401


SUM = Method(1000, request=SumRequest, response=SumResponse)
SUM_ASYNC = Method(1001, request=SumRequest, response=SumResponse)
SUM_THREAD = Method(1002, request=SumRequest, response=SumResponse)
ECHO_BODY = Method(1003, response=None)  # no header either way: the body alone
PEER = Method(1004, response=SumResponse)
NOTE = Method(1005, request=SumRequest, oneway=True)
HELD = Method(1006, request=SumRequest, response=SumResponse)
MISSING = Method(1999, response=SumResponse)  # served by nobody


def add(req: SumRequest, body: bytes) -> SumResponse | Reply[SumResponse]:
    if req.a < 0 or req.b < 0:
        raise Negative(f"negative operand in {req.a} + {req.b}")
    if req.b > 2**40:
        raise Overflow("too big")
    if req.label == "crash":
        raise ZeroDivisionError("handler bug")
    if req.label == "wrong type":
        return SumRequest(a=1, b=2)  # type: ignore[return-value]
    if body:
        return Reply(SumResponse(total=req.a + req.b, label=req.label), body[::-1])
    return SumResponse(total=req.a + req.b, label=req.label)


class Calc(Stub):
    errors = (Negative, Overflow)
    sum = SUM
    sum_async = SUM_ASYNC
    sum_thread = SUM_THREAD
    echo_body = ECHO_BODY
    peer = PEER
    note = NOTE
    held = HELD
    missing = MISSING


class BareCalc(Stub):
    """Knows the methods but none of the errors."""

    sum = SUM


def make_service(notes: list, gate: Gate | None = None) -> Service:
    service = Service()
    service.add(SUM, add, inline=True)
    service.add(SUM_THREAD, add)  # a plain function, not inline: a worker thread

    @service.handler(SUM_ASYNC, limit=4)
    async def add_async(req: SumRequest, body: bytes) -> SumResponse | Reply[SumResponse]:
        await trio.lowlevel.checkpoint()
        return add(req, body)

    @service.handler(ECHO_BODY, inline=True)
    def echo_body(req: None, body: bytes) -> Reply[None]:
        assert req is None
        return Reply(None, body)

    @service.handler(PEER, channel=True, inline=True)
    def peer(req: None, body: bytes, channel: Channel) -> SumResponse:
        return SumResponse(total=0, label=channel.remote_address)

    @service.handler(NOTE, inline=True)
    def note(req: SumRequest, body: bytes) -> None:
        notes.append((req, body))

    if gate is not None:

        @service.handler(HELD, limit=1, queue=0)
        async def held(req: SumRequest, body: bytes) -> SumResponse:
            await gate(None, RemotingCommand.request(HELD.code))  # counts the arrival, waits for release
            return SumResponse(total=0)

    return service


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_calls_of_every_kind_answer_typed(stype):
    notes: list = []
    async with serving(echo_processor=False) as server, client_of() as client:
        make_service(notes).register(server)
        calc = Calc(client, server.address, serialize_type=stype)
        for call in (calc.sum, calc.sum_async, calc.sum_thread):
            reply = await call(SumRequest(a=2, b=2**40, label="x"))
            assert reply == Reply(SumResponse(total=2 + 2**40, label="x"), b"")
        assert await calc.sum(SumRequest(a=1, b=2), b"abc") == Reply(SumResponse(total=3), b"cba")
        assert await calc.echo_body(None, b"body") == Reply(None, b"body")
        # async: a future now, the reply later; a callback sees it done
        seen: list = []
        future = await calc.sum.invoke_async(SumRequest(a=5, b=6), callback=seen.append)
        assert (await future).header.total == 11
        assert seen == [future] and future.done() and future.result().header.total == 11
        # oneway: the handler gets it, nothing comes back; a later call on the same
        # connection is answered after it was processed
        assert await calc.note(SumRequest(a=7, b=8), b"n") is None
        await calc.sum.invoke_oneway(SumRequest(a=1, b=1))
        await calc.sum(SumRequest(a=0, b=0))
        assert notes == [(SumRequest(a=7, b=8), b"n")]
        # the channel: the connection the request came on
        local = client.connection_for(server.address).local_address
        assert (await calc.peer(None)).header.label == local


async def test_an_async_call_is_its_own_response_future():
    """invoke_async's future is the call's ResponseFuture: the raw response and the
    call's state as any future has them, the typed Reply (or the stub's error) from
    result() and await, the same object to its callback (the first call connects first)."""
    async with serving(echo_processor=False) as server, client_of() as client:
        make_service([]).register(server)
        for calc in (Calc(client, server.address), BareCalc(client, server.address)):
            seen: list = []
            future = await calc.sum.invoke_async(SumRequest(a=5, b=6), b"xy", callback=seen.append)
            assert isinstance(future, ReplyFuture) and isinstance(future, ResponseFuture)
            if not future.done():
                with pytest.raises(RuntimeError, match="not known yet"):
                    future.result()
            assert await future == Reply(SumResponse(total=11), b"yx")
            assert seen == [future] and future.result() == Reply(SumResponse(total=11), b"yx")
            assert future.response.code == 0 and future.exception is None
            assert "opaque=" in repr(future) and "done" in repr(future) and "SumRequest" in repr(future)
        bad = await Calc(client, server.address).sum.invoke_async(SumRequest(a=-1, b=1))
        with pytest.raises(Negative):
            await bad
        with pytest.raises(Negative):
            bad.result()
        # a bare stub knows no error classes: the code and remark come as a ServiceError
        bare = await BareCalc(client, server.address).sum.invoke_async(SumRequest(a=-1, b=1))
        with pytest.raises(ServiceError) as info:
            await bare
        assert type(info.value) is ServiceError and info.value.code == 400


async def test_errors_are_typed():
    async with serving(echo_processor=False) as server, client_of() as client:
        make_service([]).register(server)
        calc = Calc(client, server.address)
        with pytest.raises(Negative) as info:
            await calc.sum(SumRequest(a=-1, b=2))
        assert info.value.code == 400 and info.value.remark == "negative operand in -1 + 2"
        with pytest.raises(Overflow, match="too big"):
            await calc.sum_async(SumRequest(a=1, b=2**41))
        # a stub that does not know the error gets the code and the remark
        with pytest.raises(ServiceError) as info:
            await BareCalc(client, server.address).sum(SumRequest(a=-1, b=2))
        assert type(info.value) is ServiceError and info.value.code == 400 and "negative" in info.value.remark
        # remoting's own answers
        with pytest.raises(RemoteSystemError, match="ZeroDivisionError: handler bug"):
            await calc.sum_thread(SumRequest(a=1, b=2, label="crash"))
        with pytest.raises(RemoteSystemError, match="answered SumRequest"):
            await calc.sum(SumRequest(a=1, b=2, label="wrong type"))
        with pytest.raises(RequestCodeNotSupportedError, match="request type 1999 not supported"):
            await calc.missing(None)
        # a request header that does not decode (sent raw): the field is named
        raw = RemotingCommand.request(SUM.code, ext_fields={"a": "1"})
        response = await client.invoke_sync(server.address, raw)
        with pytest.raises(RemoteSystemError, match=r"SumRequest\.b|<b> is null"):
            calc.sum.reply(response)
        # the stub checks its request's type before anything is sent
        with pytest.raises(TypeError, match="takes a SumRequest"):
            await calc.sum(SumResponse(total=1))  # type: ignore[arg-type]


async def test_busy_is_typed_and_limits_hold():
    gate = Gate()
    async with serving(echo_processor=False) as server, client_of() as client:
        make_service([], gate).register(server)
        calc = Calc(client, server.address)
        first = await calc.held.invoke_async(SumRequest(a=1, b=1))
        await gate.wait_arrivals(1)
        with pytest.raises(RemoteBusyError):
            await calc.held(SumRequest(a=1, b=1))
        gate.release.set()
        assert (await first).header.total == 0


async def test_a_server_pushes_to_its_clients():
    """Endpoints are symmetric: a client serves handlers, the server calls them
    through a stub bound to the connection."""

    class Notices(Stub):
        note = NOTE
        sum = SUM

    notes: list = []
    got = trio.Event()
    client_side = Service()

    @client_side.handler(NOTE, inline=True)
    def note(req: SumRequest, body: bytes) -> None:
        notes.append(req)
        got.set()

    client_side.add(SUM, add, inline=True)
    async with serving() as server, client_of() as client:
        client_side.register(client)
        await client.invoke_sync(server.address, RemotingCommand.request(100))  # connect
        (conn,) = server.connections
        notices = Notices(server, conn, serialize_type=SerializeType.ROCKETMQ)
        await notices.note(SumRequest(a=1, b=2))
        assert (await notices.sum(SumRequest(a=3, b=4))).header.total == 7
        with trio.fail_after(5):
            await got.wait()
        assert notes == [SumRequest(a=1, b=2)]


async def test_a_stub_reconnects_and_an_endpoint_subclass_sees_its_calls():
    """A stub hands its calls to the invoker on the endpoint's open connection: a closed
    one makes the next call of every kind connect again through the endpoint; a client
    subclass that changes a call gets every call of the stub."""
    notes: list = []
    async with serving(echo_processor=False) as server, client_of() as client:
        make_service(notes).register(server)
        calc = Calc(client, server.address)
        assert (await calc.sum(SumRequest(a=1, b=2))).header.total == 3
        for kind in ("sync", "async", "oneway"):
            client.connection_for(server.address).close()
            if kind == "sync":
                assert (await calc.sum(SumRequest(a=2, b=3))).header.total == 5
            elif kind == "async":
                assert (await (await calc.sum.invoke_async(SumRequest(a=3, b=4)))).header.total == 7
            else:
                await calc.note(SumRequest(a=4, b=5))
                assert (await calc.sum(SumRequest(a=0, b=0))).header.total == 0
        assert notes == [(SumRequest(a=4, b=5), b"")]

    class Counting(RemotingClient):
        calls: list[str] = []

        async def invoke_sync(self, addr, request, timeout=None, *, begin=None):
            self.calls.append("sync")
            return await super().invoke_sync(addr, request, timeout, begin=begin)

    async with serving(echo_processor=False) as server, Counting(ClientConfig()) as client:
        make_service([]).register(server)
        calc = Calc(client, server.address)
        for n in range(3):
            assert (await calc.sum(SumRequest(a=n, b=1))).header.total == n + 1
        assert Counting.calls == ["sync"] * 3


@pytest.mark.parametrize("via", ["stub", "client"])
async def test_one_budget_covers_the_permit_and_the_send(via, idle_jump_clock):
    """A oneway call that first waits for a permit, then for room to send, fails when
    its one budget is spent, not after a budget for each."""
    stuck = trio.Event()

    async def never_read(stream):
        stuck.set()
        await trio.sleep_forever()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    address = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    config = ClientConfig(oneway_permits=1, outbound_max_frames=1, outbound_max_bytes=1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, never_read, listeners)
        async with client_of(config) as client:
            calc = Calc(client, address)

            async def fill() -> None:
                """Oneway calls that block in their send, holding the one permit, and
                give it up when their 3 s are spent."""
                while True:
                    with pytest.raises(RemotingTooManyRequestsError):
                        while True:
                            await calc.sum.invoke_oneway(SumRequest(a=1, b=1), b"x" * (4 << 20), timeout=3)

            async with trio.open_nursery() as filling:
                filling.start_soon(fill)
                await stuck.wait()
                await trio.sleep(1)  # a filler's call is blocked in a send by now, until t=3
                begin = trio.current_time()
                with pytest.raises(RemotingTooManyRequestsError):
                    # waits for the permit until t=3, then for room to send: a budget
                    # for each would end at t=7; the one budget ends at t=5
                    if via == "stub":
                        await calc.sum.invoke_oneway(SumRequest(a=1, b=1), timeout=4)
                    else:
                        await client.invoke_oneway(address, RemotingCommand.request(SUM.code), 4)
                assert trio.current_time() - begin == pytest.approx(4, abs=0.2)
                filling.cancel_scope.cancel()
        nursery.cancel_scope.cancel()


async def test_sync_budget(idle_jump_clock):
    gate = Gate()
    async with serving(echo_processor=False) as server, client_of() as client:
        make_service([], gate).register(server)
        calc = Calc(client, server.address)
        begin = trio.current_time()
        with pytest.raises(RemotingTimeoutError):
            await calc.held(SumRequest(a=1, b=1), timeout=2)
        assert trio.current_time() - begin == pytest.approx(2, abs=0.2)
        gate.release.set()


def test_declarations_are_checked():
    with pytest.raises(TypeError, match="not a custom header class"):
        Method(1, request=int)
    with pytest.raises(ValueError, match="oneway method has no response"):
        Method(1, request=SumRequest, response=SumResponse, oneway=True)
    with pytest.raises(TypeError, match="other than 0"):

        class Bad(ServiceError):
            code = 2  # SYSTEM_BUSY is remoting's

    with pytest.raises(ValueError, match="both declare code 400"):

        class Twice(Stub):
            errors = (Negative, type("AlsoBad", (ServiceError,), {"code": 400}))

    service = Service()
    service.add(SUM, add)
    with pytest.raises(ValueError, match="already has a handler"):
        service.add(SUM, add)
    with pytest.raises(ValueError, match="inline handlers are plain functions"):

        @service.handler(SUM_ASYNC, inline=True)
        async def nope(req, body):
            return None

    assert service.methods == [SUM]
    assert Calc._methods["sum"] is SUM and SUM.name == "sum"
    assert repr(SUM) == "Method(1000, request=SumRequest, response=SumResponse)"
    answer = error_reply(Negative("x"))
    assert (answer.code, answer.remark) == (400, "x")
    carried = Negative("y")  # an error that carries its whole answer is answered with it
    carried.response = RemotingCommand(code=400, flag=1, remark="y", version=409, ext_fields={})
    assert error_reply(carried) is carried.response and error_reply(Negative("z")).version == 0
    assert isinstance(Negative("x"), ResponseCodeError) and ServiceError().remark == ""
