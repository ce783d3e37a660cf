"""Echo benchmark of trocket.remoting against a raw-trio floor.

    .venv/bin/python benchmarks/remoting_echo.py                 # both sides, 2 processes
    .venv/bin/python benchmarks/remoting_echo.py --serve H:P     # only the echo server
    .venv/bin/python benchmarks/remoting_echo.py --target H:P    # only the client, against
                                                                 # any echo server (code 100)
    .venv/bin/python benchmarks/remoting_echo.py --floor-serve H:P   # the floor for a real client

The plain command starts the framework echo server and a raw trio echo server
(no framing, no codecs: it sends back the bytes it reads, or swallows them for
the oneway floor) in child processes, then measures from this process, for JSON
and ROCKETMQ headers: sync with 1 and 8 callers, async pipelined with 64 and 256
in flight, and oneway. Each figure is printed next to the raw floor of the same
shape and byte sizes (1 / 8 / 64 / 256 messages in flight, or a one-way stream)
and their ratio. The floor writes as the framework does: the messages a read of
answers makes room for go out in one write, the one-way stream in writes of 64; so
with many in flight it is a byte-moving floor the framework, which decodes, dispatches
and encodes every message in Python, stays far below.

The same server also serves the echo as a typed service (``remoting.Service``: a
custom header class ``EchoHeader`` decoded and encoded by its generated codec, a
handler, a ``Stub`` on the calling side), on code 101 with the same bytes on the
wire; each shape is measured that way too (``--no-typed`` leaves it out).
``typed cost`` is the plain processor path's rate over the typed one (e.g. 1.05x: the
typed path takes 5% longer per call). Throughput on a shared machine moves with
its load, so each path's CPU time per call is printed too, of this process (``cli
µs``) and of the spawned server (``srv µs``, from /proc; ``-`` with ``--target``):
``cpu cost`` is the typed path's CPU per call, both sides together, over the plain
path's, the steadier measure of what typing costs.
"""

from __future__ import annotations

import argparse
import array
import os
import pathlib
import re
import struct
import subprocess
import sys
import time

import attrs
import trio

from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.custom_header import field, header
from trocket.codecs.serialize import encode_command
from trocket.remoting.fdio import bytes_waiting, read_into, write_all
from trocket.remoting import (
    ClientConfig,
    Method,
    RemotingClient,
    RemotingServer,
    Reply,
    ServerConfig,
    Service,
    Stub,
    parse_address,
)

ECHO_CODE = 100


# -- the typed service: the same exchange through remoting's Service and Stub ------------------


@header
class EchoHeader:
    """What the raw requests carry as ext fields: {"key": "benchmark", "n": "1"}."""

    key: str = field("str", required=True)
    n: int = field("int", required=True)


TYPED_ECHO = Method(101, request=EchoHeader, response=EchoHeader)


class EchoStub(Stub):
    echo = TYPED_ECHO


def typed_echo(header: EchoHeader, body: bytes) -> Reply[EchoHeader]:
    return Reply(header, body)


def typed_service(inline: bool) -> Service:
    service = Service()
    if inline:
        service.add(TYPED_ECHO, typed_echo, inline=True)
    else:
        async def typed_echo_async(header: EchoHeader, body: bytes) -> Reply[EchoHeader]:
            return typed_echo(header, body)

        service.add(TYPED_ECHO, typed_echo_async, limit=1024)
    return service


# -- servers ----------------------------------------------------------------------------


def echo_processor(conn, request: RemotingCommand) -> RemotingCommand:
    return RemotingCommand.response(0, body=request.body, ext_fields=request.ext_fields)


async def serve_framework(addr: str, inline: bool) -> None:
    host, port = parse_address(addr)
    server = RemotingServer(ServerConfig(listen_host=host, listen_port=port, processor_queue=100_000))
    if inline:
        server.register_processor(ECHO_CODE, echo_processor, inline=True)
    else:
        async def echo_async(conn, request):
            return echo_processor(conn, request)

        server.register_processor(ECHO_CODE, echo_async, limit=1024)
    typed_service(inline).register(server)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        print(f"listening on {server.address}", flush=True)


async def _raw_handler(stream: trio.SocketStream) -> None:
    try:
        first = await stream.receive_some(1)
        sink = first == b"S"
        while True:
            data = await stream.receive_some(256 * 1024)
            if not data:
                return
            if not sink:
                await stream.send_all(data)
    except trio.BrokenResourceError:
        pass


async def serve_raw(addr: str) -> None:
    host, port = parse_address(addr)
    listeners = await trio.open_tcp_listeners(port, host=host)
    h, p = listeners[0].socket.getsockname()[:2]
    print(f"listening on {h}:{p}", flush=True)
    await trio.serve_listeners(_raw_handler, listeners)


_JSON_CODE = re.compile(rb'"code":-?[0-9]+')
_JSON_FLAG = re.compile(rb'"flag":([0-9]+)')
_U32 = struct.Struct(">I")


def floor_answer(buf: bytearray, pos: int, size: int) -> bytes | bytearray | None:
    """The floor server's answer to the whole request frame at ``buf[pos:pos + size]``
    (length prefix included): the frame itself made a response -- code 0, the response
    flag set, the header's other fields, ext fields and body as they came (what
    ``echo_processor`` answers) -- or None for a oneway request (nothing copied).
    ROCKETMQ headers are patched in place (code and flag are fixed-size fields), and so
    are JSON ones: a one-digit flag gets the response bit, the code's digits become "0"
    and spaces (any other shape is rewritten by regular expression, the lengths
    recomputed)."""
    (mark,) = _U32.unpack_from(buf, pos + 4)
    if mark >> 24 == SerializeType.ROCKETMQ:
        (flag,) = _U32.unpack_from(buf, pos + 17)  # after code (2), language (1), version (2), opaque (4)
        if flag & 2:
            return None
        frame = buf[pos : pos + size]
        frame[8:10] = b"\0\0"
        _U32.pack_into(frame, 17, flag | 1)
        return frame
    header_len = mark & 0xFFFFFF
    start, stop = pos + 8, pos + 8 + header_len
    at = buf.find(b'"flag":', start, stop) + 7
    code = buf.find(b'"code":', start, stop) + 7
    if at >= 7 and code >= 7 and 48 <= buf[at] <= 57 and not 48 <= buf[at + 1] <= 57:  # a one-digit flag
        if buf[at] - 48 & 2:  # oneway
            return None
        frame = buf[pos : pos + size]
        frame[at - pos] = 48 + ((buf[at] - 48) | 1)
        end = code
        while 48 <= buf[end] <= 57 or buf[end] == 45:  # the code's digits: "0" and spaces, same length
            end += 1
        frame[code - pos : end - pos] = b"0".ljust(end - code)
        return frame
    header = bytes(buf[start:stop])  # any other shape: rewritten, the lengths recomputed
    found = _JSON_FLAG.search(header)
    flag = int(found.group(1)) if found else 0
    if flag & 2:
        return None
    header = _JSON_FLAG.sub(b'"flag":%d' % (flag | 1), _JSON_CODE.sub(b'"code":0', header, 1), 1)
    body = buf[stop : pos + size]
    return b"".join([_U32.pack(4 + len(header) + len(body)), _U32.pack(len(header) | (mark & 0xFF000000)),
                     header, body])


async def _floor_handler(stream: trio.SocketStream) -> None:
    """Per connection, the framework's own I/O, as its reader does it (``remoting.fdio``:
    after a read that did not fill the buffer and suggests more is coming -- several
    frames, a frame begun, or itself found by asking -- ask whether more is there, then
    read it at once; else wait for readiness, with no read that fails; answers are held
    while more bytes wait, then written at once, the run of reads' answers in one write)
    around :func:`floor_answer` for every whole frame."""
    fd = stream.socket.fileno()
    chunk = bytearray(256 * 1024)
    bufs, view = (chunk,), memoryview(chunk)
    waiting = array.array("i", [0])
    buf = bytearray()
    held: list = []
    drained = False
    probe = False  # the last read suggests more is coming (the reader's condition)
    try:
        while True:
            found = probe and drained and bytes_waiting(fd, waiting)  # (more waiting: read it now)
            if not found:
                if held:  # the run of reads ends
                    data = b"".join(held)
                    held.clear()
                    await write_all(fd, data)
                if drained:
                    await trio.lowlevel.wait_readable(fd)
            n = await read_into(fd, bufs)
            if not n:
                return
            drained = n < len(chunk)
            buf += view[:n]
            pos, end = 0, len(buf)
            frames = 0
            while end - pos >= 4:
                size = 4 + _U32.unpack_from(buf, pos)[0]
                if end - pos < size:
                    break
                answer = floor_answer(buf, pos, size)
                if answer is not None:
                    held.append(answer)
                pos += size
                frames += 1
            del buf[:pos]
            probe = frames > 1 or len(buf) > 0 or found
    except OSError:
        pass


async def serve_floor(addr: str) -> None:
    """The floor for a real client (``vs_java.py``'s echo part): RocketMQ frames read,
    each answered without a codec or a dispatcher (:func:`floor_answer`)."""
    host, port = parse_address(addr)
    listeners = await trio.open_tcp_listeners(port, host=host)
    h, p = listeners[0].socket.getsockname()[:2]
    print(f"listening on {h}:{p}", flush=True)
    await trio.serve_listeners(_floor_handler, listeners)


# -- raw floor ---------------------------------------------------------------------------


async def raw_floor(addr: str, request: bytes, response_size: int, depth: int, seconds: float) -> float:
    """Messages/s keeping ``depth`` request-sized messages in flight, each answered by
    ``response_size`` bytes (the echo server sends back what it reads, so we write
    requests padded or cut to the response size to keep the sizes of the real run).

    Pipelined as the framework pipelines: every message a read of answers makes room
    for goes out in one write (the framework's writer sends what its callers queued
    meanwhile together), so the floor pays per write and per read, not per message."""
    host, port = parse_address(addr)
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(b"E")
    msg = request[:response_size].ljust(response_size, b"\0") if len(request) != response_size else request
    size = len(msg)
    free = depth  # messages that may be sent now
    room = trio.Event()
    done = 0
    received = 0

    async def receiver() -> None:
        nonlocal done, received, free
        while True:
            data = await stream.receive_some(256 * 1024)
            if not data:
                return
            received += len(data)
            n, received = divmod(received, size)
            if n:
                done += n
                free += n
                room.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        start = time.perf_counter()
        end = start + seconds
        sent = 0
        while time.perf_counter() < end:
            while not free:
                room = trio.Event()
                await room.wait()
            k, free = free, 0
            await stream.send_all(msg * k)
            sent += k
        while done < sent:
            await trio.sleep(0.001)
        elapsed = time.perf_counter() - start
        nursery.cancel_scope.cancel()
    await stream.aclose()
    return done / elapsed


async def raw_oneway_floor(addr: str, request: bytes, seconds: float) -> float:
    """Messages/s of a one-way stream written as the framework's run sends it: 64
    messages, then a pass through trio's run loop (here: one write of the 64)."""
    host, port = parse_address(addr)
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(b"S")
    burst = request * 64
    start = time.perf_counter()
    end = start + seconds
    n = 0
    while time.perf_counter() < end:
        await stream.send_all(burst)
        n += 64
    elapsed = time.perf_counter() - start
    await stream.aclose()
    return n / elapsed


# -- framework client --------------------------------------------------------------------


@attrs.frozen
class Run:
    """One measured run: calls completed, over how long, and the client's CPU time."""

    calls: int
    seconds: float
    cpu: float  # this process's CPU seconds over the run

    @property
    def rate(self) -> float:
        return self.calls / self.seconds


class _Clock:
    """Wall and CPU time from the start of a run's timed part."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def run(self, calls: int) -> Run:
        return Run(calls, time.perf_counter() - self.wall, time.process_time() - self.cpu)


def make_request(stype: SerializeType, body_size: int) -> RemotingCommand:
    return RemotingCommand.request(
        ECHO_CODE,
        body=b"x" * body_size,
        ext_fields={"key": "benchmark", "n": "1"},
        serialize_type=stype,
    )


async def run_sync(addr: str, stype, body_size: int, callers: int, seconds: float) -> Run:
    async with RemotingClient(ClientConfig()) as client:
        await client.invoke_sync(addr, make_request(stype, body_size))  # connect
        count = 0
        end = time.perf_counter() + seconds

        async def caller() -> None:
            nonlocal count
            while time.perf_counter() < end:
                await client.invoke_sync(addr, make_request(stype, body_size), 10)
                count += 1

        clock = _Clock()
        async with trio.open_nursery() as nursery:
            for _ in range(callers):
                nursery.start_soon(caller)
        return clock.run(count)


async def run_async(addr: str, stype, body_size: int, depth: int, seconds: float) -> Run:
    async with RemotingClient(ClientConfig(async_permits=depth)) as client:
        await client.invoke_sync(addr, make_request(stype, body_size))
        completed = 0
        failed = 0

        def callback(fut) -> None:
            nonlocal completed, failed
            if fut.exception is None:
                completed += 1
            else:
                failed += 1

        clock = _Clock()
        end = clock.wall + seconds
        sent = 0
        while time.perf_counter() < end:
            await client.invoke_async(addr, make_request(stype, body_size), 30, callback)
            sent += 1
        while completed + failed < sent:
            await trio.sleep(0.001)
        if failed:
            print(f"  ({failed} async calls failed)", file=sys.stderr)
        return clock.run(completed)


async def run_oneway(addr: str, stype, body_size: int, seconds: float) -> Run:
    async with RemotingClient(ClientConfig()) as client:
        await client.invoke_sync(addr, make_request(stype, body_size))
        clock = _Clock()
        end = clock.wall + seconds
        n = 0
        while time.perf_counter() < end:
            for _ in range(64):
                await client.invoke_oneway(addr, make_request(stype, body_size), 30)
            n += 64
        # the server reads a connection in order: when this answer comes back,
        # every oneway request before it has been read and processed
        await client.invoke_sync(addr, make_request(stype, body_size), 60)
        return clock.run(n)


# -- typed client: the same shapes through a Stub ------------------------------------------------

ECHO_HEADER = EchoHeader(key="benchmark", n=1)


async def run_sync_typed(addr: str, stype, body_size: int, callers: int, seconds: float) -> Run:
    async with RemotingClient(ClientConfig()) as client:
        echo = EchoStub(client, addr, timeout=10, serialize_type=stype).echo
        await echo(ECHO_HEADER, b"x" * body_size)  # connect
        count = 0
        end = time.perf_counter() + seconds

        async def caller() -> None:
            nonlocal count
            while time.perf_counter() < end:
                await echo(ECHO_HEADER, b"x" * body_size)
                count += 1

        clock = _Clock()
        async with trio.open_nursery() as nursery:
            for _ in range(callers):
                nursery.start_soon(caller)
        return clock.run(count)


async def run_async_typed(addr: str, stype, body_size: int, depth: int, seconds: float) -> Run:
    async with RemotingClient(ClientConfig(async_permits=depth)) as client:
        echo = EchoStub(client, addr, timeout=30, serialize_type=stype).echo
        await echo(ECHO_HEADER, b"x" * body_size)
        completed = 0
        failed = 0

        def callback(fut) -> None:
            nonlocal completed, failed
            try:
                fut.result()
            except Exception:  # noqa: BLE001 - counted and reported
                failed += 1
            else:
                completed += 1

        clock = _Clock()
        end = clock.wall + seconds
        sent = 0
        while time.perf_counter() < end:
            await echo.invoke_async(ECHO_HEADER, b"x" * body_size, callback=callback)
            sent += 1
        while completed + failed < sent:
            await trio.sleep(0.001)
        if failed:
            print(f"  ({failed} typed async calls failed)", file=sys.stderr)
        return clock.run(completed)


async def run_oneway_typed(addr: str, stype, body_size: int, seconds: float) -> Run:
    async with RemotingClient(ClientConfig()) as client:
        echo = EchoStub(client, addr, timeout=30, serialize_type=stype).echo
        await echo(ECHO_HEADER, b"x" * body_size)
        clock = _Clock()
        end = clock.wall + seconds
        n = 0
        while time.perf_counter() < end:
            for _ in range(64):
                await echo.invoke_oneway(ECHO_HEADER, b"x" * body_size)
            n += 64
        await echo(ECHO_HEADER, b"x" * body_size, timeout=60)  # every oneway before it was processed
        return clock.run(n)


SHAPES = [("sync, 1 in flight", "sync", 1), ("sync, 8 callers", "sync", 8),
          ("async, 64 in flight", "async", 64), ("async, 256 in flight", "async", 256),
          ("oneway", "oneway", 0)]


async def client_side(
    target: str, raw: str | None, seconds: float, body_size: int, stypes, rounds: int, typed: bool
) -> None:
    """Each figure is the best of ``rounds`` runs, framework, typed and floor
    alternating, so a burst of load elsewhere on the machine hits every side of a
    ratio alike."""
    for stype in stypes:
        req = make_request(stype, body_size)
        req_frame = encode_command(req)
        resp = RemotingCommand.response(0, body=req.body, ext_fields=req.ext_fields)
        resp.opaque = 123456
        resp.serialize_type = stype
        resp_size = len(encode_command(resp))
        for label, kind, n in SHAPES:
            best: dict[str, Best] = {"raw": Best(), "typed": Best()}
            floor = None
            for _ in range(rounds):
                for path in ("raw", "typed") if typed else ("raw",):
                    if kind == "sync":
                        run = run_sync_typed if path == "typed" else run_sync
                        args = (target, stype, body_size, n, seconds)
                    elif kind == "async":
                        run = run_async_typed if path == "typed" else run_async
                        args = (target, stype, body_size, n, seconds)
                    else:
                        run = run_oneway_typed if path == "typed" else run_oneway
                        args = (target, stype, body_size, seconds)
                    before = server_cpu()
                    result = await run(*args)
                    after = server_cpu()
                    best[path].add(result, None if before is None or after is None else after - before)
                if raw is not None:
                    if kind == "oneway":
                        f = await raw_oneway_floor(raw, req_frame, seconds)
                    else:
                        f = await raw_floor(raw, req_frame, resp_size, n, seconds)
                    floor = f if floor is None else max(floor, f)
            rate = best["raw"].rate
            ratio = f"{rate / floor:6.2f}" if floor else "     -"
            floor_s = f"{floor:12,.0f}" if floor else "           -"
            line = f"{stype.name:9} {label:22} {rate:12,.0f} {floor_s} {ratio} {best['raw'].cpu_text()}"
            if typed:
                t = best["typed"]
                line += f" {t.rate:12,.0f} {rate / t.rate:9.3f}x {t.cpu_text()} {t.cost_text(best['raw'])}"
            print(line, flush=True)


@attrs.define
class Best:
    """The best of a figure's runs: the highest rate, the least CPU per call."""

    rate: float = 0.0
    client_us: float = float("inf")
    server_us: float | None = None

    def add(self, run: Run, server_cpu: float | None) -> None:
        self.rate = max(self.rate, run.rate)
        self.client_us = min(self.client_us, run.cpu / run.calls * 1e6)
        if server_cpu is not None:
            us = server_cpu / run.calls * 1e6
            self.server_us = us if self.server_us is None else min(self.server_us, us)

    def cpu_text(self) -> str:
        server = "     -" if self.server_us is None else f"{self.server_us:6.1f}"
        return f"{self.client_us:6.1f} {server}"

    def cost_text(self, raw: Best) -> str:
        """Typed CPU per call over raw, both sides together."""
        if self.server_us is None or raw.server_us is None:
            return f"{self.client_us / raw.client_us:8.3f}x"
        return f"{(self.client_us + self.server_us) / (raw.client_us + raw.server_us):8.3f}x"


#: The spawned framework server's pid, for its CPU time (None with --target).
SERVER_PID: int | None = None


def server_cpu() -> float | None:
    """CPU seconds the spawned framework server has used (Linux /proc), or None."""
    if SERVER_PID is None:
        return None
    try:
        fields = pathlib.Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spawn(args: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", metavar="HOST:PORT", help="run only the framework echo server")
    parser.add_argument("--raw-serve", metavar="HOST:PORT", help="run only the raw trio echo server")
    parser.add_argument("--floor-serve", metavar="HOST:PORT",
                        help="run only the frame-answering floor server (for real clients: vs_java.py)")
    parser.add_argument("--target", metavar="HOST:PORT", help="run only the client, against this echo server")
    parser.add_argument("--raw-target", metavar="HOST:PORT", help="with --target: a raw echo server for the floor")
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement (default 1)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating framework/floor runs per figure, best kept (default 3)")
    parser.add_argument("--body-size", type=int, default=128, help="request body bytes (default 128)")
    parser.add_argument("--serialize", choices=["JSON", "ROCKETMQ", "both"], default="both")
    parser.add_argument("--processor", choices=["inline", "task"], default="inline",
                        help="how the echo server runs its processor (default inline)")
    parser.add_argument("--no-typed", dest="typed", action="store_false",
                        help="leave out the typed-service figures (they need the server of this script)")
    args = parser.parse_args(argv)
    if args.serve:
        trio.run(serve_framework, args.serve, args.processor == "inline")
        return
    if args.raw_serve:
        trio.run(serve_raw, args.raw_serve)
        return
    if args.floor_serve:
        trio.run(serve_floor, args.floor_serve)
        return
    stypes = [SerializeType.JSON, SerializeType.ROCKETMQ] if args.serialize == "both" else [SerializeType[args.serialize]]
    procs = []
    try:
        target, raw = args.target, args.raw_target
        if target is None:
            global SERVER_PID
            proc, target = _spawn(["--serve", "127.0.0.1:0", "--processor", args.processor])
            procs.append(proc)
            SERVER_PID = proc.pid
            proc, raw = _spawn(["--raw-serve", "127.0.0.1:0"])
            procs.append(proc)
        print(f"trocket remoting echo, body {args.body_size} B, best of {args.rounds} x {args.seconds:g} s per figure "
              f"(framework, {'typed, ' if args.typed else ''}floor alternating), "
              f"server processor {args.processor}, client and servers in separate processes")
        typed_head = f" {'typed/s':>12} {'typed cost':>10} {'cli µs':>6} {'srv µs':>6} {'cpu cost':>9}" if args.typed else ""
        print(f"{'serialize':9} {'shape':22} {'requests/s':>12} {'raw floor/s':>12} {'ratio':>6} "
              f"{'cli µs':>6} {'srv µs':>6}{typed_head}")
        trio.run(client_side, target, raw, args.seconds, args.body_size, stypes, args.rounds, args.typed)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
