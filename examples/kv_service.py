"""A small key-value store on trocket.remoting's typed API: custom headers, typed errors,
and oneway invalidation notices the server pushes to its connected clients.

    .venv/bin/python examples/kv_service.py serve HOST:PORT
    .venv/bin/python examples/kv_service.py put HOST:PORT KEY VALUE [--expect VERSION]
    .venv/bin/python examples/kv_service.py get HOST:PORT KEY
    .venv/bin/python examples/kv_service.py delete HOST:PORT KEY [--expect VERSION]
    .venv/bin/python examples/kv_service.py watch HOST:PORT      # prints invalidations
    (every client command takes --serialize JSON|ROCKETMQ)

Every value has a version, which grows with every change. ``put`` and ``delete`` take
an expected version (compare-and-set: 0 means "absent"); a mismatch is answered
VERSION_CONFLICT (409), a missing key NOT_FOUND (404), both as typed errors. After a
change the server sends every other connected client an INVALIDATED notice (oneway),
so clients that cache values (:class:`KVClient`) drop what went stale. Ctrl-C (SIGINT)
or SIGTERM stops ``serve`` cleanly, and ``watch``; both then exit 130 (SIGTERM: 143), as every
``trocket`` command does (``trocket.interrupt``).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable

import attrs
import trio

from trocket import interrupt
from trocket.codecs.command import SerializeType
from trocket.codecs.custom_header import field, header
from trocket.remoting import (
    Channel,
    ClientConfig,
    Method,
    RemotingClient,
    RemotingError,
    RemotingServer,
    Reply,
    ServerConfig,
    Service,
    ServiceError,
    Stub,
    parse_address,
)

log = logging.getLogger("kv_service")

# -- the contract: headers, calls, errors (what server and clients share) ---------------------


@header
class KeyHeader:
    key: str = field("str", required=True)


@header
class PutHeader:
    key: str = field("str", required=True)
    #: compare-and-set: the version the key must have now (0: it must be absent)
    expectVersion: int | None = field("long")


@header
class DeleteHeader:
    key: str = field("str", required=True)
    expectVersion: int | None = field("long")


@header
class VersionHeader:
    version: int = field("long", required=True)


@header
class InvalidatedHeader:
    key: str = field("str", required=True)
    version: int = field("long", required=True)
    deleted: bool = field("bool", default=False)


GET = Method(200, request=KeyHeader, response=VersionHeader)  # body: the value
PUT = Method(201, request=PutHeader, response=VersionHeader)  # body: the new value
DELETE = Method(202, request=DeleteHeader, response=VersionHeader)
INVALIDATED = Method(210, request=InvalidatedHeader, oneway=True)  # server -> client


class NotFound(ServiceError):
    code = 404


class VersionConflict(ServiceError):
    code = 409


class KVStub(Stub):
    errors = (NotFound, VersionConflict)
    get = GET
    put = PUT
    delete = DELETE


class Notices(Stub):
    """The server's calls to one connected client."""

    invalidated = INVALIDATED


# -- the server ----------------------------------------------------------------------------------


@attrs.define
class Entry:
    version: int
    value: bytes


class KVServer:
    """The store and its handlers, served on ``server``. Notices go out through a
    bounded queue drained by one task (:meth:`push_notices`), so a slow client never
    holds up a put; when the queue is full a notice is dropped, counted and logged (a
    client that misses one keeps a stale value until it reads the key again)."""

    def __init__(self, server: RemotingServer, *, notice_queue: int = 1024, notice_timeout: float = 1.0) -> None:
        self.server = server
        self.entries: dict[str, Entry] = {}
        self.last_version = 0
        self.notice_timeout = notice_timeout
        self._send, self._receive = trio.open_memory_channel(notice_queue)
        self.dropped_notices = 0
        service = Service()
        service.add(GET, self.get, inline=True)
        service.add(PUT, self.put, inline=True, channel=True)
        service.add(DELETE, self.delete, inline=True, channel=True)
        service.register(server)

    # handlers: inline (they never block)

    def get(self, request: KeyHeader, body: bytes) -> Reply[VersionHeader]:
        entry = self.entries.get(request.key)
        if entry is None:
            raise NotFound(f"no key {request.key!r}")
        return Reply(VersionHeader(version=entry.version), entry.value)

    def put(self, request: PutHeader, body: bytes, channel: Channel) -> VersionHeader:
        self._check(request.key, request.expectVersion)
        self.last_version += 1
        self.entries[request.key] = Entry(self.last_version, body)
        self._notify(InvalidatedHeader(key=request.key, version=self.last_version), channel)
        return VersionHeader(version=self.last_version)

    def delete(self, request: DeleteHeader, body: bytes, channel: Channel) -> VersionHeader:
        if request.key not in self.entries:
            raise NotFound(f"no key {request.key!r}")
        self._check(request.key, request.expectVersion)
        del self.entries[request.key]
        self.last_version += 1
        self._notify(InvalidatedHeader(key=request.key, version=self.last_version, deleted=True), channel)
        return VersionHeader(version=self.last_version)

    def _check(self, key: str, expected: int | None) -> None:
        if expected is None:
            return
        entry = self.entries.get(key)
        current = 0 if entry is None else entry.version
        if current != expected:
            raise VersionConflict(f"{key!r} is at version {current}, not {expected}")

    def _notify(self, notice: InvalidatedHeader, origin: Channel) -> None:
        try:
            self._send.send_nowait((notice, origin))
        except trio.WouldBlock:
            self.dropped_notices += 1
            log.warning("notice queue full: invalidation of %r dropped", notice.key)

    async def push_notices(self) -> None:
        """Send each notice to every connected client but the one that made the change."""
        async for notice, origin in self._receive:
            for conn in self.server.connections:
                if conn is origin:
                    continue
                try:
                    await Notices(self.server, conn, timeout=self.notice_timeout).invalidated(notice)
                except RemotingError as exc:  # closed meanwhile, or too slow: its cache expires
                    log.info("notice to %s not sent: %s", conn.remote_address, exc)


async def serve(addr: str, *, task_status: trio.TaskStatus[KVServer] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled (``started`` with the KVServer once listening)."""
    host, port = parse_address(addr)
    server = RemotingServer(ServerConfig(listen_host=host, listen_port=port))
    kv = KVServer(server)
    async with server, trio.open_nursery() as nursery:
        nursery.start_soon(kv.push_notices)
        task_status.started(kv)
        await trio.sleep_forever()


# -- a client that caches --------------------------------------------------------------------------


class KVClient:
    """Typed calls to a KV server, with a local cache of values that the server's
    INVALIDATED notices keep fresh. ``on_notice`` (optional) sees every notice."""

    def __init__(
        self,
        client: RemotingClient,
        address: str,
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        timeout: float = 3.0,
        on_notice: Callable[[InvalidatedHeader], None] | None = None,
    ) -> None:
        self.kv = KVStub(client, address, serialize_type=serialize_type, timeout=timeout)
        self.cache: dict[str, Entry] = {}
        self.on_notice = on_notice
        notices = Service()
        notices.add(INVALIDATED, self._invalidated, inline=True)
        notices.register(client)

    def _invalidated(self, notice: InvalidatedHeader, body: bytes) -> None:
        entry = self.cache.get(notice.key)
        if entry is not None and entry.version < notice.version:
            del self.cache[notice.key]
        if self.on_notice is not None:
            self.on_notice(notice)

    async def get(self, key: str) -> Entry:
        entry = self.cache.get(key)
        if entry is None:
            reply = await self.kv.get(KeyHeader(key=key))
            entry = self.cache[key] = Entry(reply.header.version, reply.body)
        return entry

    async def put(self, key: str, value: bytes, expect: int | None = None) -> int:
        reply = await self.kv.put(PutHeader(key=key, expectVersion=expect), value)
        self.cache[key] = Entry(reply.header.version, value)
        return reply.header.version

    async def delete(self, key: str, expect: int | None = None) -> int:
        self.cache.pop(key, None)
        reply = await self.kv.delete(DeleteHeader(key=key, expectVersion=expect))
        return reply.header.version


# -- command line ----------------------------------------------------------------------------------


async def run_serve(addr: str) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            kv = await nursery.start(serve, addr)
            print(f"kv service listening on {kv.server.address}", flush=True)
            signum = await anext(aiter(signals))
            nursery.cancel_scope.cancel()
    interrupt.note(signum)  # the exit status: 130 or 143
    print(f"kv service stopped ({signal.Signals(signum).name})", flush=True)


async def run_client(args: argparse.Namespace) -> int:
    stype = SerializeType[args.serialize]
    async with RemotingClient(ClientConfig()) as client:
        if args.command == "watch":
            return await _watch(client, args.address, stype)
        kv = KVClient(client, args.address, serialize_type=stype)
        try:
            if args.command == "put":
                version = await kv.put(args.key, args.value.encode(), args.expect)
                print(f"{args.key} = {args.value!r} (version {version})")
            elif args.command == "get":
                entry = await kv.get(args.key)
                print(f"{args.key} = {entry.value.decode(errors='replace')!r} (version {entry.version})")
            else:
                version = await kv.delete(args.key, args.expect)
                print(f"{args.key} deleted (version {version})")
        except (NotFound, VersionConflict) as exc:
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    return 0


async def _watch(client: RemotingClient, addr: str, stype: SerializeType) -> int:
    """Print every invalidation until Ctrl-C (the server notifies the clients it has a
    connection from: connect, and wait)."""

    def show(notice: InvalidatedHeader) -> None:
        what = "deleted" if notice.deleted else "changed"
        print(f"{notice.key} {what} (version {notice.version})", flush=True)

    KVClient(client, addr, serialize_type=stype, on_notice=show)
    await client.get_connection(addr)
    print(f"watching {addr}", flush=True)
    async with interrupt.stop_on_signal():
        await trio.sleep_forever()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the store").add_argument("address", metavar="HOST:PORT")
    for name in ("put", "get", "delete", "watch"):
        p = sub.add_parser(name)
        p.add_argument("address", metavar="HOST:PORT")
        if name != "watch":
            p.add_argument("key")
        if name == "put":
            p.add_argument("value")
        if name in ("put", "delete"):
            p.add_argument("--expect", type=int, metavar="VERSION", help="compare-and-set (0: absent)")
        p.add_argument("--serialize", choices=["JSON", "ROCKETMQ"], default="JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return interrupt.run(_run, args)  # trocket's Ctrl-C rule: 130 (SIGTERM 143), no traceback


def _run(args: argparse.Namespace) -> int:
    try:
        if args.command == "serve":
            trio.run(run_serve, args.address)
            return 0
        return trio.run(run_client, args)
    except Exception as exc:  # a CLI: one line, not a traceback
        while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
