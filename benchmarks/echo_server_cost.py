"""The echo server's own cost per request, with its I/O: instructions (callgrind) or
system calls (strace), under a client in another process.

    .venv/bin/python benchmarks/echo_server_cost.py --callers 8
    .venv/bin/python benchmarks/echo_server_cost.py --inflight 64 --serialize json
    .venv/bin/python benchmarks/echo_server_cost.py --oneway --callers 8 --strace
    .venv/bin/python benchmarks/echo_server_cost.py --callers 1 --server-pythonpath /tmp/base/pkg

The server is ``remoting_echo.py --serve`` (the inline echo processor), run under
``valgrind --tool=callgrind --instr-atstart=no`` (or, with ``--strace``, natively, with
``strace -c -f`` attached for the measured requests only); this process warms it up
with 500 requests, turns counting on, sends ``--messages`` requests in the chosen shape
(``--callers`` sync callers on one connection, ``--inflight N`` async calls from one
task, or ``--oneway`` requests from ``--callers`` tasks and one sync request after
them), turns counting off and prints the server's figure per request. Requests carry
the Java echo client's four ext fields and a 128-byte body (``vs_java.py``'s shape).

Unlike ``instructions.py --part echo`` (client and server in one process, its
scheduling seeded) this counts the server alone, and how requests bunch into reads
is the machine's: under callgrind the server runs ~50x slower than the client, so
reads carry more requests than natively (sync callers: up to all of them). Under
strace the server runs near its native speed; system calls move with the load.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import trio

from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.remoting import ClientConfig, RemotingClient

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from instructions import JAVA_EXT, callgrind_total  # noqa: E402

ECHO_CODE = 100


async def drive(addr: str, n: int, callers: int, inflight: int, oneway: bool, stype: SerializeType) -> None:
    """``n`` echo requests in the chosen shape (see the module docstring)."""
    config = ClientConfig(async_permits=inflight, default_timeout=120) if inflight else ClientConfig(default_timeout=120)
    async with RemotingClient(config) as client:

        def request(body: bytes = b"b" * 128) -> RemotingCommand:
            return RemotingCommand.request(ECHO_CODE, body=body, ext_fields=dict(JAVA_EXT), serialize_type=stype)

        await client.invoke_sync(addr, request(), 120)  # connected
        if inflight:
            done = [0]

            def counted(fut) -> None:
                done[0] += 1

            for _ in range(n):
                await client.invoke_async(addr, request(), 120, counted)
            while done[0] < n:
                await trio.sleep(0.001)
            return
        left = [n]

        async def caller() -> None:
            while left[0] > 0:
                left[0] -= 1
                if oneway:
                    await client.invoke_oneway(addr, request(), 120)
                else:
                    await client.invoke_sync(addr, request(), 120)

        async with trio.open_nursery() as nursery:
            for _ in range(callers):
                nursery.start_soon(caller)
        if oneway:  # the server has read every oneway request before it answers this
            await client.invoke_sync(addr, request(b""), 120)


def start_server(args: argparse.Namespace, out: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)
    if args.server_pythonpath:
        env["PYTHONPATH"] = args.server_pythonpath
    server = [sys.executable, os.path.join(HERE, "remoting_echo.py"), "--serve", "127.0.0.1:0"]
    if not args.strace:
        server = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", *server]
    # SIGINT as it should be (a background job of a script starts with it ignored, and
    # then neither Python nor callgrind would end on it and write the counts)
    return subprocess.Popen(server, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            cwd=tempfile.gettempdir(), text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def stop(proc: subprocess.Popen) -> None:
    """SIGINT (under callgrind the counts are written as the server exits: slowly on a
    loaded machine), then kill if it has not ended within two minutes."""
    proc.send_signal(signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(120)
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def parse_strace(path: str) -> dict[str, int]:
    """``strace -c``'s table: calls per system call."""
    calls: dict[str, int] = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
            if m and m.group(2) != "total":
                calls[m.group(2)] = int(m.group(1))
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--callers", type=int, default=8, help="sync (or oneway) callers on one connection (default 8)")
    parser.add_argument("--inflight", type=int, default=0, metavar="N", help="async calls from one task, N in flight")
    parser.add_argument("--oneway", action="store_true", help="oneway requests from --callers tasks")
    parser.add_argument("--serialize", choices=("rocketmq", "json"), default="rocketmq")
    parser.add_argument("--messages", type=int, default=3000, help="measured requests (default 3000)")
    parser.add_argument("--strace", action="store_true", help="system calls (strace -c) instead of instructions")
    parser.add_argument("--server-pythonpath", default="", help="the server's PYTHONPATH (another tree)")
    parser.add_argument("--keep", metavar="DIR", default="", help="keep the callgrind output in DIR")
    args = parser.parse_args()
    stype = SerializeType.JSON if args.serialize == "json" else SerializeType.ROCKETMQ
    shape = (f"async inflight={args.inflight}" if args.inflight
             else f"{'oneway' if args.oneway else 'sync'} callers={args.callers}")
    with tempfile.TemporaryDirectory(prefix="trocket-srvcost-") as tmp:
        out = os.path.join(tmp, "server.out")
        proc = start_server(args, out)
        tracer = None
        try:
            line = proc.stdout.readline().strip()
            if not line.startswith("listening on "):
                raise SystemExit(f"server did not start: {line!r}")
            addr = line.removeprefix("listening on ")
            trio.run(drive, addr, 500, args.callers, args.inflight, args.oneway, stype)
            if args.strace:
                tracer = subprocess.Popen(["strace", "-c", "-f", "-o", os.path.join(tmp, "strace"), "-p", str(proc.pid)],
                                          stderr=subprocess.DEVNULL)
                time.sleep(1)  # attached
            else:
                subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True)
            trio.run(drive, addr, args.messages, args.callers, args.inflight, args.oneway, stype)
            if tracer is not None:
                tracer.send_signal(signal.SIGINT)
                tracer.wait(30)
            else:
                subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, capture_output=True)
        finally:
            if tracer is not None and tracer.poll() is None:
                tracer.kill()
            stop(proc)
        head = f"server  {args.serialize.upper():8s} {shape:20s}"
        if args.strace:
            calls = parse_strace(os.path.join(tmp, "strace"))
            total = sum(calls.values())
            each = "  ".join(f"{name} {count / args.messages:.2f}"
                             for name, count in sorted(calls.items(), key=lambda kv: -kv[1]) if count >= args.messages / 100)
            print(f"{head} {total / args.messages:6.2f} syscalls/request ({each})", flush=True)
        else:
            print(f"{head} {callgrind_total(out) / args.messages:10,.0f} instructions/request (the server's, with I/O)",
                  flush=True)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                os.replace(out, os.path.join(args.keep, os.path.basename(out)))


if __name__ == "__main__":
    main()
