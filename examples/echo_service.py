"""A small RPC service built on trocket.remoting alone: no topics, no messages.

    .venv/bin/python examples/echo_service.py serve HOST:PORT [--serialize JSON|ROCKETMQ]
    .venv/bin/python examples/echo_service.py call HOST:PORT [--body TEXT] [--ext k=v ...]
                                                    [--serialize JSON|ROCKETMQ] [--count N]

The server answers request code 100 (ECHO) with code 0 (SUCCESS), the same body
and the same ext fields; any other code gets RocketMQ's REQUEST_CODE_NOT_SUPPORTED.
``--serialize`` on ``serve`` is the header serialization the server uses for the
calls it makes itself (none here); answers always use the serialization of the
request they answer. ``call`` prints one line per call and a summary (calls, errors,
latency percentiles). Both follow trocket's Ctrl-C rule (``trocket.interrupt``, as
every ``trocket`` command): Ctrl-C (SIGINT) stops ``call`` at once with the summary so
far, and ``serve`` cleanly (it stops accepting, lets in-flight calls finish, closes its
connections and says so in one line); no traceback, exit status 130 (143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time

import trio

from trocket import interrupt
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.remoting import ClientConfig, RemotingClient, RemotingServer, ServerConfig, parse_address

ECHO = 100
SUCCESS = 0


def echo(conn, request: RemotingCommand) -> RemotingCommand:
    """Never blocks, so it runs inline on the connection's reader."""
    return RemotingCommand.response(SUCCESS, body=request.body, ext_fields=request.ext_fields)


async def serve(addr: str) -> None:
    """Serve until SIGINT or SIGTERM, then shut down gracefully."""
    host, port = parse_address(addr)
    server = RemotingServer(ServerConfig(listen_host=host, listen_port=port))
    server.register_processor(ECHO, echo, inline=True)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with server:  # leaving the block shuts the server down gracefully
            print(f"echo service listening on {server.address}", flush=True)
            signum = await anext(aiter(signals))
    interrupt.note(signum)  # the exit status: 130 or 143
    print(f"echo service stopped ({signal.Signals(signum).name})", flush=True)


async def call(addr: str, body: bytes, ext: dict[str, str], stype: SerializeType, count: int) -> int:
    """Make ``count`` calls, then print a summary; Ctrl-C cancels them (the client
    closes cleanly) and the summary says how far they got."""
    latencies: list[float] = []
    errors = 0
    begin = time.perf_counter()
    async with interrupt.stop_on_signal() as stop, RemotingClient(ClientConfig()) as client:
        for _ in range(count):
            request = RemotingCommand.request(ECHO, body=body, ext_fields=dict(ext) or None, serialize_type=stype)
            start = time.perf_counter()
            response = await client.invoke_sync(addr, request, timeout=3)
            ms = (time.perf_counter() - start) * 1000
            latencies.append(ms)
            print(
                f"code={response.code} opaque={response.opaque} ext={response.ext_fields} "
                f"body={response.body!r} ({ms:.2f} ms)",
                flush=True,
            )
            if response.code != SUCCESS:
                errors += 1
                break
    latencies.sort()
    pct = (lambda q: latencies[min(len(latencies) - 1, round(q * (len(latencies) - 1)))]) if latencies else (lambda q: 0.0)
    why = f"; interrupted by {signal.Signals(stop.signum).name}" if stop.interrupted else ""
    print(f"{len(latencies)} of {count} calls, {errors} failed in {time.perf_counter() - begin:.2f} s: "
          f"p50 {pct(0.5):.2f} ms, p99 {pct(0.99):.2f} ms{why}", file=sys.stderr, flush=True)
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="run the echo server")
    p_serve.add_argument("address", metavar="HOST:PORT")
    p_serve.add_argument("--serialize", choices=["JSON", "ROCKETMQ"], default="JSON")
    p_call = sub.add_parser("call", help="call an echo server")
    p_call.add_argument("address", metavar="HOST:PORT")
    p_call.add_argument("--body", default="hello")
    p_call.add_argument("--ext", action="append", default=[], metavar="KEY=VALUE")
    p_call.add_argument("--serialize", choices=["JSON", "ROCKETMQ"], default="JSON")
    p_call.add_argument("--count", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return interrupt.run(_run, args)  # Ctrl-C: 130, SIGTERM: 143, no traceback


def _run(args: argparse.Namespace) -> int:
    try:
        if args.command == "serve":
            trio.run(serve, args.address)
            return 0
        ext = dict(kv.split("=", 1) for kv in args.ext)
        return trio.run(call, args.address, args.body.encode(), ext, SerializeType[args.serialize], args.count)
    except Exception as exc:  # a CLI: one line, not a traceback
        while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
