"""Echo benchmark of trocket.remoting against a raw-trio floor.

    .venv/bin/python benchmarks/remoting_echo.py                 # both sides, 2 processes
    .venv/bin/python benchmarks/remoting_echo.py --serve H:P     # only the echo server
    .venv/bin/python benchmarks/remoting_echo.py --target H:P    # only the client, against
                                                                 # any echo server (code 100)

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
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import trio

from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.serialize import encode_command
from trocket.remoting import ClientConfig, RemotingClient, RemotingServer, ServerConfig, parse_address

ECHO_CODE = 100


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


def make_request(stype: SerializeType, body_size: int) -> RemotingCommand:
    return RemotingCommand.request(
        ECHO_CODE,
        body=b"x" * body_size,
        ext_fields={"key": "benchmark", "n": "1"},
        serialize_type=stype,
    )


async def run_sync(addr: str, stype, body_size: int, callers: int, seconds: float) -> float:
    async with RemotingClient(ClientConfig()) as client:
        await client.invoke_sync(addr, make_request(stype, body_size))  # connect
        count = 0
        end = time.perf_counter() + seconds

        async def caller() -> None:
            nonlocal count
            while time.perf_counter() < end:
                await client.invoke_sync(addr, make_request(stype, body_size), 10)
                count += 1

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(callers):
                nursery.start_soon(caller)
        return count / (time.perf_counter() - start)


async def run_async(addr: str, stype, body_size: int, depth: int, seconds: float) -> float:
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

        start = time.perf_counter()
        end = start + seconds
        sent = 0
        while time.perf_counter() < end:
            await client.invoke_async(addr, make_request(stype, body_size), 30, callback)
            sent += 1
        while completed + failed < sent:
            await trio.sleep(0.001)
        if failed:
            print(f"  ({failed} async calls failed)", file=sys.stderr)
        return completed / (time.perf_counter() - start)


async def run_oneway(addr: str, stype, body_size: int, seconds: float) -> float:
    async with RemotingClient(ClientConfig()) as client:
        await client.invoke_sync(addr, make_request(stype, body_size))
        start = time.perf_counter()
        end = start + seconds
        n = 0
        while time.perf_counter() < end:
            for _ in range(64):
                await client.invoke_oneway(addr, make_request(stype, body_size), 30)
            n += 64
        # the server reads a connection in order: when this answer comes back,
        # every oneway request before it has been read and processed
        await client.invoke_sync(addr, make_request(stype, body_size), 60)
        return n / (time.perf_counter() - start)


SHAPES = [("sync, 1 in flight", "sync", 1), ("sync, 8 callers", "sync", 8),
          ("async, 64 in flight", "async", 64), ("async, 256 in flight", "async", 256),
          ("oneway", "oneway", 0)]


async def client_side(target: str, raw: str | None, seconds: float, body_size: int, stypes, rounds: int) -> None:
    """Each figure is the best of ``rounds`` runs, framework and floor alternating, so
    a burst of load elsewhere on the machine hits both sides of a ratio alike."""
    rows = []
    for stype in stypes:
        req = make_request(stype, body_size)
        req_frame = encode_command(req)
        resp = RemotingCommand.response(0, body=req.body, ext_fields=req.ext_fields)
        resp.opaque = 123456
        resp.serialize_type = stype
        resp_size = len(encode_command(resp))
        for label, kind, n in SHAPES:
            rate = 0.0
            floor = None
            for _ in range(rounds):
                if kind == "sync":
                    rate = max(rate, await run_sync(target, stype, body_size, n, seconds))
                elif kind == "async":
                    rate = max(rate, await run_async(target, stype, body_size, n, seconds))
                else:
                    rate = max(rate, await run_oneway(target, stype, body_size, seconds))
                if raw is not None:
                    if kind == "oneway":
                        f = await raw_oneway_floor(raw, req_frame, seconds)
                    else:
                        f = await raw_floor(raw, req_frame, resp_size, n, seconds)
                    floor = f if floor is None else max(floor, f)
            rows.append((stype.name, label, rate, floor))
            ratio = f"{rate / floor:6.2f}" if floor else "     -"
            floor_s = f"{floor:12,.0f}" if floor else "           -"
            print(f"{stype.name:9} {label:22} {rate:12,.0f} {floor_s} {ratio}", flush=True)


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
    parser.add_argument("--target", metavar="HOST:PORT", help="run only the client, against this echo server")
    parser.add_argument("--raw-target", metavar="HOST:PORT", help="with --target: a raw echo server for the floor")
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement (default 1)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating framework/floor runs per figure, best kept (default 3)")
    parser.add_argument("--body-size", type=int, default=128, help="request body bytes (default 128)")
    parser.add_argument("--serialize", choices=["JSON", "ROCKETMQ", "both"], default="both")
    parser.add_argument("--processor", choices=["inline", "task"], default="inline",
                        help="how the echo server runs its processor (default inline)")
    args = parser.parse_args(argv)
    if args.serve:
        trio.run(serve_framework, args.serve, args.processor == "inline")
        return
    if args.raw_serve:
        trio.run(serve_raw, args.raw_serve)
        return
    stypes = [SerializeType.JSON, SerializeType.ROCKETMQ] if args.serialize == "both" else [SerializeType[args.serialize]]
    procs = []
    try:
        target, raw = args.target, args.raw_target
        if target is None:
            proc, target = _spawn(["--serve", "127.0.0.1:0", "--processor", args.processor])
            procs.append(proc)
            proc, raw = _spawn(["--raw-serve", "127.0.0.1:0"])
            procs.append(proc)
        print(f"trocket remoting echo, body {args.body_size} B, best of {args.rounds} x {args.seconds:g} s per figure "
              f"(framework and floor alternating), "
              f"server processor {args.processor}, client and servers in separate processes")
        print(f"{'serialize':9} {'shape':22} {'requests/s':>12} {'raw floor/s':>12} {'ratio':>6}")
        trio.run(client_side, target, raw, args.seconds, args.body_size, stypes, args.rounds)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
