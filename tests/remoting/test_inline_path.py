"""The reader's path for inline synchronous processors (``_dispatch_soon`` /
``Connection.answer_soon``): no coroutine per frame, and still every guarantee of the
general path -- arrival order, hooks on both sides of the processor, SYSTEM_ERROR for a
processor or hook that raises, backpressure when the outbox is full, one write for the
answers of one read batch -- and, on the calling side, one write for the requests of the
callers one read woke."""

from __future__ import annotations

import logging
import socket
import struct

import trio
import trio.testing

from trocket.codecs.command import RPC_RESPONSE, RemotingCommand
from trocket.codecs.serialize import decode_command, encode_command
from trocket.remoting import CloseReason, SysResponseCode

from ..waiting import wait_until
from .conftest import client_of, request, server_config, serving

INLINE = 40


class Recorder:
    def __init__(self, fail_after: bool = False) -> None:
        self.events: list[tuple[str, int, int | None]] = []
        self.fail_after = fail_after

    def do_before_request(self, remote_addr, req) -> None:
        self.events.append(("before", req.opaque, None))

    def do_after_response(self, remote_addr, req, resp) -> None:
        self.events.append(("after", req.opaque, None if resp is None else resp.code))
        if self.fail_after and req.body == b"bad hook":
            raise RuntimeError("hook refused")


async def test_pipelined_inline_requests_answered_in_order_with_hooks():
    order: list[bytes] = []
    hook = Recorder()

    def inline(conn, req):
        order.append(req.body)
        if req.is_oneway:
            return None
        return RemotingCommand.response(0, body=req.body)

    async with serving(hooks=[hook]) as server, client_of() as client:
        server.register_processor(INLINE, inline, inline=True)
        futs = [await client.invoke_async(server.address, request(INLINE, body=b"%d" % i)) for i in range(200)]
        assert [(await f).body for f in futs] == [b"%d" % i for i in range(200)]
        await client.invoke_oneway(server.address, request(INLINE, body=b"one"))
        assert (await client.invoke_sync(server.address, request(INLINE, body=b"last"))).body == b"last"
    assert order == [b"%d" % i for i in range(200)] + [b"one", b"last"]
    # each request: before, then after with the answer's code (None for the oneway)
    assert len(hook.events) == 2 * 202
    for before, after in zip(hook.events[::2], hook.events[1::2]):
        assert before[0] == "before" and after[0] == "after" and before[1] == after[1]
    assert [e[2] for e in hook.events[1::2]] == [0] * 200 + [None, 0]


async def test_inline_processor_that_raises_is_system_error_with_traceback(caplog):
    def inline(conn, req):
        if req.body == b"boom":
            raise KeyError("nope")
        return RemotingCommand.response(0, body=req.body)

    async with serving() as server, client_of() as client:
        server.register_processor(INLINE, inline, inline=True)
        with caplog.at_level(logging.WARNING, logger="trocket.remoting.endpoint"):
            resp = await client.invoke_sync(server.address, request(INLINE, body=b"boom"))
        assert resp.code == SysResponseCode.SYSTEM_ERROR and "KeyError" in resp.remark
        records = [r for r in caplog.records if "processor for code" in r.getMessage()]
        assert records and records[0].exc_info and records[0].exc_info[0] is KeyError
        assert server.stats.processor_errors == 1
        assert (await client.invoke_sync(server.address, request(INLINE, body=b"ok"))).body == b"ok"


async def test_inline_answer_refused_by_a_hook_is_system_error():
    hook = Recorder(fail_after=True)

    def inline(conn, req):
        return RemotingCommand.response(0, body=req.body)

    async with serving(hooks=[hook]) as server, client_of() as client:
        server.register_processor(INLINE, inline, inline=True)
        resp = await client.invoke_sync(server.address, request(INLINE, body=b"bad hook"))
        assert resp.code == SysResponseCode.SYSTEM_ERROR and "hook refused" in resp.remark
        assert (await client.invoke_sync(server.address, request(INLINE, body=b"fine"))).body == b"fine"


async def test_inline_answers_wait_for_room_when_the_outbox_is_full(monkeypatch):
    """Big answers to a peer that reads slowly: the outbox (2 frames) fills, the reader
    waits for room (backpressure) and every answer still arrives whole and in order."""
    import trocket.remoting.connection as connection

    big = 1024 * 1024
    waited = []
    real_send_answer = connection.Connection.send_answer

    async def counting_send_answer(self, frame):
        waited.append(len(frame))
        return await real_send_answer(self, frame)

    monkeypatch.setattr(connection.Connection, "send_answer", counting_send_answer)

    def inline(conn, req):
        return RemotingCommand.response(0, body=req.body * big)

    cfg = server_config(outbound_max_frames=2, outbound_max_bytes=big)
    async with serving(cfg) as server:
        server.register_processor(INLINE, inline, inline=True)
        host, port = server.address.rsplit(":", 1)
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        await sock.connect((host, int(port)))
        n = 12
        frames = b"".join(encode_command(request(INLINE, body=bytes([65 + i]), opaque=i)) for i in range(n))
        await sock.send(frames)
        # the server fills the socket and its outbox, then waits for room
        await wait_until(lambda: waited, 20)
        await trio.testing.wait_all_tasks_blocked()
        got = bytearray()
        answers = []
        with trio.fail_after(20):
            while len(answers) < n:
                got += await sock.recv(65536)
                while len(got) >= 4:
                    (length,) = struct.unpack(">I", got[:4])
                    if len(got) < 4 + length:
                        break
                    answers.append(decode_command(bytes(got[4 : 4 + length])))
                    del got[: 4 + length]
        sock.close()
    assert [a.opaque for a in answers] == list(range(n))
    assert [a.body for a in answers] == [bytes([65 + i]) * big for i in range(n)]
    assert waited  # some answers did wait for room


async def test_a_peer_that_resets_while_the_writer_waits_for_room_fails_that_connection_alone(caplog):
    """Answers the peer does not read fill the socket, so the connection's writer waits
    for room; the peer's reset ends that wait: the connection closes (IO_ERROR, logged),
    nothing escapes the writer, and the server goes on answering others."""
    big = 1024 * 1024

    def inline(conn, req):
        return RemotingCommand.response(0, body=req.body * big)

    caplog.set_level(logging.INFO, logger="trocket")
    async with serving(server_config(outbound_max_frames=64, outbound_max_bytes=64 * big)) as server:
        server.register_processor(INLINE, inline, inline=True)
        host, port = server.address.rsplit(":", 1)
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        await sock.connect((host, int(port)))
        await sock.send(b"".join(encode_command(request(INLINE, body=b"x", opaque=i)) for i in range(8)))
        # 8 MiB of answers: the socket is full, the writer waits
        await wait_until(lambda: any(c.outbox.writing for c in server.connections), 10)
        (conn,) = server.connections
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset, with the answers unread
        with trio.fail_after(10):
            await conn.wait_closed()
        assert conn.close_reason == CloseReason.IO_ERROR
        # the writer's send or the reader's receive, whichever the reset reaches first
        assert any(" send failed" in r.getMessage() or " receive failed" in r.getMessage() for r in caplog.records)
        async with client_of() as client:
            resp = await client.invoke_sync(server.address, request(INLINE, body=b"y"))
        assert resp.body == b"y" * big


async def test_answers_of_one_read_batch_go_out_in_one_write(monkeypatch):
    """Frames that arrive in one read are answered with one write (flush consolidation)."""
    import trocket.remoting.fdio as fdio

    writes: list[int] = []
    real_write = fdio._write

    def counting_write(fd, data):
        writes.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(fdio, "_write", counting_write)

    def inline(conn, req):
        return RemotingCommand.response(0, body=req.body)

    async with serving() as server:
        server.register_processor(INLINE, inline, inline=True)
        host, port = server.address.rsplit(":", 1)
        sock = trio.socket.socket()
        await sock.connect((host, int(port)))
        one = [encode_command(request(INLINE, body=b"x", opaque=i)) for i in range(10)]
        await sock.send(b"".join(one))
        got = bytearray()
        answers = []
        with trio.fail_after(5):
            while len(answers) < 10:
                got += await sock.recv(65536)
                while len(got) >= 4 and len(got) >= 4 + struct.unpack(">I", got[:4])[0]:
                    length = struct.unpack(">I", got[:4])[0]
                    answers.append(decode_command(bytes(got[4 : 4 + length])))
                    del got[: 4 + length]
        sock.close()
    assert [a.opaque for a in answers] == list(range(10))
    total = sum(len(encode_command(a)) for a in answers)
    assert writes == [total]


async def test_callers_woken_by_one_read_send_their_next_requests_in_one_write(monkeypatch):
    """A read that completes several calls leaves the next writes to the writer: the
    callers' follow-up requests leave in one write, not the first alone then the rest."""
    import trocket.remoting.fdio as fdio

    writes: list[int] = []
    real_write = fdio._write
    real_send_all = trio.SocketStream.send_all

    def counting_write(fd, data):
        writes.append(len(data))
        return real_write(fd, data)

    async def counting_send_all(self, data):
        writes.append(len(data))
        return await real_send_all(self, data)

    monkeypatch.setattr(fdio, "_write", counting_write)
    monkeypatch.setattr(trio.SocketStream, "send_all", counting_send_all)

    callers = 4
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    marks: list[int] = []

    async def read_frames(sock, buf: bytearray, n: int) -> list[RemotingCommand]:
        out = []
        while len(out) < n:
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                length = struct.unpack(">I", buf[:4])[0]
                out.append(decode_command(bytes(buf[4 : 4 + length])))
                del buf[: 4 + length]
            if len(out) < n:
                buf += await sock.recv(65536)
        return out

    async def raw_server():
        sock, _ = await listener.accept()
        buf = bytearray()
        for _ in range(2):
            reqs = await read_frames(sock, buf, callers)
            marks.append(len(writes))
            answers = [RemotingCommand.response(0, body=r.body, opaque=r.opaque) for r in reqs]
            for a in answers:
                a.flag |= 1
            await sock.send(b"".join(encode_command(a) for a in answers))  # one segment
        sock.close()

    async def caller(client, i):
        await client.invoke_sync(f"127.0.0.1:{port}", request(INLINE, body=b"a%d" % i))
        await client.invoke_sync(f"127.0.0.1:{port}", request(INLINE, body=b"b%d" % i))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery, client_of() as client:
            nursery.start_soon(raw_server)
            async with trio.open_nursery() as callers_nursery:
                for i in range(callers):
                    callers_nursery.start_soon(caller, client, i)
    listener.close()
    assert len(marks) == 2
    assert marks[1] - marks[0] == 1  # the second round's 4 requests: one write


class OwnFrame:
    """A PreparedResponse: its own frame (body ``own:...``) or, when a response hook must
    see a command or a body starting ``cmd`` makes ``frame_for`` decline, the same
    answer as one (body ``usual:...``)."""

    def __init__(self, body: bytes, frames: list[bytes]) -> None:
        self.body = body
        self.frames = frames

    def frame_for(self, req: RemotingCommand) -> bytes | None:
        if self.body.startswith(b"cmd"):
            return None
        answer = RemotingCommand.response(0, body=b"own:" + self.body)
        answer.opaque, answer.flag, answer.serialize_type = req.opaque, answer.flag | RPC_RESPONSE, req.serialize_type
        self.frames.append(self.body)
        return encode_command(answer)

    def command(self) -> RemotingCommand:
        return RemotingCommand.response(0, body=b"usual:" + self.body)


class BeforeOnly:
    """A request-only hook (access control's kind): it must not cost the fast path."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def do_before_request(self, remote_addr, req) -> None:
        self.seen.append(req.body)


async def test_a_prepared_response_writes_its_own_frame_unless_a_response_hook_must_see_a_command():
    """A processor's :class:`~trocket.remoting.PreparedResponse` goes out as the frame it
    encodes itself when no response hook is registered -- a request-only hook does not
    count -- and as its command when one is (the hook sees that command), for the
    answers given at once and later alike; one whose ``frame_for`` declines (None) goes
    as its command."""
    frames: list[bytes] = []

    def own_frame(conn, req):
        if req.is_oneway:
            return None
        if req.body.startswith(b"later"):
            conn.start_handler(conn.answer, req, OwnFrame(req.body, frames))
            return None
        return OwnFrame(req.body, frames)

    for hooks, kind in (([], b"own:"), ([BeforeOnly()], b"own:"), ([Recorder()], b"usual:")):
        frames.clear()
        async with serving(hooks=hooks) as server, client_of() as client:
            server.register_processor(INLINE, own_frame, inline=True)
            bodies = [b"0", b"1", b"later2"]
            answers = [await client.invoke_sync(server.address, request(INLINE, body=b)) for b in bodies]
            await client.invoke_oneway(server.address, request(INLINE, body=b"one"))
            declined = await client.invoke_sync(server.address, request(INLINE, body=b"cmd"))
            last = await client.invoke_sync(server.address, request(INLINE, body=b"last"))
        assert [a.body for a in answers + [last]] == [kind + b for b in (*bodies, b"last")]
        assert declined.body == b"usual:cmd"
        assert frames == ([] if kind == b"usual:" else [*bodies, b"last"])
        if hooks and isinstance(hooks[0], BeforeOnly):
            assert hooks[0].seen == [*bodies, b"one", b"cmd", b"last"]
        if hooks and isinstance(hooks[0], Recorder):
            # the hook saw every answer as a command, and the oneway request's None
            assert [e[2] for e in hooks[0].events[1::2]] == [0, 0, 0, None, 0, 0]


async def test_call_after_read_runs_once_per_read_after_its_answers_are_written(monkeypatch):
    """``call_after_read`` (Netty's channelReadComplete): what the inline processor of
    every request of one read queues runs once that read's frames are handled and their
    answers written, in the reader's task; outside a reader it schedules nothing."""
    import trocket.remoting.fdio as fdio
    from trocket.remoting import call_after_read

    events: list[str] = []
    real_write = fdio._write

    def recording_write(fd, data):
        events.append("write")
        return real_write(fd, data)

    monkeypatch.setattr(fdio, "_write", recording_write)
    queued = [False]

    def after() -> None:
        queued[0] = False
        events.append("after")

    def failing() -> None:
        raise RuntimeError("after-read failure")

    def inline(conn, req):
        events.append("request")
        if not queued[0]:
            queued[0] = call_after_read(after)
            assert queued[0]
            if req.body == b"fail":
                assert call_after_read(failing)
        return RemotingCommand.response(0, body=req.body)

    async def waits(conn, req):  # makes the reader wait in the middle of its read
        events.append("waits")
        await trio.sleep(0)
        return RemotingCommand.response(0, body=req.body)

    assert not call_after_read(after)  # this task is no reader
    async with serving() as server:
        server.register_processor(INLINE, inline, inline=True)
        server.register_processor(INLINE + 1, waits, inline=True)
        host, port = server.address.rsplit(":", 1)
        sock = trio.socket.socket()
        await sock.connect((host, int(port)))

        async def exchange(bodies: list) -> None:
            await sock.send(b"".join(
                encode_command(request(*(b if isinstance(b, tuple) else (INLINE, b)), opaque=i))
                for i, b in enumerate(bodies)
            ))
            got = bytearray()
            answers = 0
            with trio.fail_after(5):
                while answers < len(bodies):
                    got += await sock.recv(65536)
                    while len(got) >= 4 and len(got) >= 4 + struct.unpack(">I", got[:4])[0]:
                        del got[: 4 + struct.unpack(">I", got[:4])[0]]
                        answers += 1
            await wait_until(lambda: events and events[-1] == "after", 5)

        await exchange([b"x"] * 5)  # one segment: one read
        assert events == ["request"] * 5 + ["write", "after"]
        events.clear()
        await exchange([b"fail", b"y"])  # a failing call is logged; the others still run
        assert events == ["request", "request", "write", "after"]
        events.clear()
        # a request that makes the reader wait ends the stretch: what was queued runs
        # before the wait (before any other task), the rest of the read queues anew
        await exchange([b"x", (INLINE + 1, b"w"), b"z"])
        assert events == ["request", "after", "waits", "request", "write", "after"]
        assert (await client_call(server, b"still serving")) == b"still serving"
        sock.close()


async def client_call(server, body: bytes) -> bytes:
    async with client_of() as client:
        return (await client.invoke_sync(server.address, request(INLINE, body=body))).body
