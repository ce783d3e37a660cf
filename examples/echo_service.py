"""A small RPC service built on trocket.remoting alone: no topics, no messages.

    .venv/bin/python examples/echo_service.py serve HOST:PORT [--serialize JSON|ROCKETMQ]
    .venv/bin/python examples/echo_service.py call HOST:PORT [--body TEXT] [--ext k=v ...]
                                                    [--serialize JSON|ROCKETMQ] [--count N]

The server answers request code 100 (ECHO) with code 0 (SUCCESS), the same body
and the same ext fields; any other code gets RocketMQ's REQUEST_CODE_NOT_SUPPORTED.
``--serialize`` on ``serve`` is the header serialization the server uses for the
calls it makes itself (none here); answers always use the serialization of the
request they answer. Ctrl-C (SIGINT) or SIGTERM stops ``serve`` cleanly: it stops
accepting, lets in-flight calls finish, closes its connections, says so in one line and
exits 0, as ``trocket broker`` does.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time

import trio

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
    print(f"echo service stopped ({signal.Signals(signum).name})", flush=True)


INTERRUPTED = 130  # the shell's exit status for a command stopped by SIGINT


async def call(addr: str, body: bytes, ext: dict[str, str], stype: SerializeType, count: int) -> int:
    """Make ``count`` calls; Ctrl-C cancels them (the client closes cleanly) and
    the exit status is 130. SIGINT is received as a signal, not as a
    KeyboardInterrupt, which trio would raise in whatever task runs at that moment."""
    status = INTERRUPTED
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def calls() -> None:
                nonlocal status
                status = await _calls(addr, body, ext, stype, count)
                nursery.cancel_scope.cancel()

            nursery.start_soon(calls)
            await anext(aiter(signals))
            nursery.cancel_scope.cancel()
    if status == INTERRUPTED:
        print("interrupted", file=sys.stderr)
    return status


async def _calls(addr: str, body: bytes, ext: dict[str, str], stype: SerializeType, count: int) -> int:
    async with RemotingClient(ClientConfig()) as client:
        for _ in range(count):
            request = RemotingCommand.request(ECHO, body=body, ext_fields=dict(ext) or None, serialize_type=stype)
            start = time.perf_counter()
            response = await client.invoke_sync(addr, request, timeout=3)
            ms = (time.perf_counter() - start) * 1000
            print(
                f"code={response.code} opaque={response.opaque} ext={response.ext_fields} "
                f"body={response.body!r} ({ms:.2f} ms)",
                flush=True,
            )
            if response.code != SUCCESS:
                return 1
    return 0


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
    try:
        if args.command == "serve":
            trio.run(serve, args.address)
            return 0
        ext = dict(kv.split("=", 1) for kv in args.ext)
        return trio.run(call, args.address, args.body.encode(), ext, SerializeType[args.serialize], args.count)
    except BaseException as exc:  # a CLI: one line, not a traceback
        if _holds(KeyboardInterrupt, exc):  # Ctrl-C before call() listens for it
            print("interrupted", file=sys.stderr)
            return INTERRUPTED
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        if not isinstance(exc, Exception):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _holds(kind: type[BaseException], exc: BaseException) -> bool:
    """``exc`` is a ``kind`` or an exception group holding one.

    Trio raises Ctrl-C's KeyboardInterrupt in whichever task runs when it comes: in the
    connection's reader it tears the connection down, and the call waiting on it fails
    with a "closed locally" error beside it in the group. That error is a consequence:
    the user interrupted."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(kind)[0] is not None
    return isinstance(exc, kind)


if __name__ == "__main__":
    sys.exit(main())
