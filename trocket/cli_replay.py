"""``trocket replay`` and ``trocket capture proxy``.

    trocket replay FILE... --target HOST:PORT [--target CAPTURED=HOST:PORT]
                   [--speed 1|N|max] [--conn C] [--rewrite topic=OLD:NEW] [--timeout S]
    trocket capture proxy --listen HOST:PORT --upstream HOST:PORT --out FILE

Exit status of replay: 0 when every answer matched (under the rule table of
:mod:`trocket.conformance.rules`), 1 on any unexpected difference, unanswered request,
or a target that could not be reached or answered garbage, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
from typing import TYPE_CHECKING

from trocket.exit_codes import EXIT_FAIL, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    import ssl


def _hostport(text: str) -> tuple[str, int]:
    from trocket.broker.config import BrokerConfigError, parse_hostport

    try:
        return parse_hostport(text)
    except BrokerConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _target(text: str) -> tuple[str | None, tuple[str, int]]:
    captured, sep, new = text.rpartition("=")
    return (captured if sep else None, _hostport(new))


def add_replay_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="replay a captured session against a live server and compare the answers",
        description="Send the captured requests of each connection to a live server on fresh "
        "connections (captured order and causality kept), match the answers by opaque and compare "
        "them field by field (code, remark, ext fields, body). Fields that legitimately change "
        "(message ids, offsets, timestamps, addresses) are ignored by a per-code rule table "
        "(README: Capturing and replay). Exit status 1 on any unexpected difference.",
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="capture file(s): native (tap, proxy) or pcap/pcapng; FILE FILE.1 FILE.2 ... (a rotated "
                   "tap) are one recording")
    p.add_argument(
        "--target", action="append", type=_target, required=True, metavar="[CAPTURED=]HOST:PORT",
        help="where to send: HOST:PORT for every connection, or CAPTURED=HOST:PORT for the connections "
        "that went to server address CAPTURED (repeatable)",
    )
    p.add_argument("--speed", default="max", metavar="1|N|max",
                   help="1: the client's pacing; N: N times faster; max: as fast as causality allows (default)")
    p.add_argument("--conn", action="append", metavar="C", help="replay only connection C (repeatable)")
    p.add_argument("--rewrite", action="append", default=[], metavar="KIND=OLD:NEW",
                   help="topic=OLD:NEW or group=OLD:NEW: rename in the requests sent and the answers expected")
    p.add_argument("--timeout", type=float, default=5.0, metavar="S",
                   help="seconds beyond the captured latency before a request counts as unanswered (default 5)")
    p.add_argument("--show", type=int, default=5, metavar="N", help="differences to print in full (default 5)")
    p.set_defaults(run=run_replay_command)


def run_replay_command(args: argparse.Namespace) -> int:
    import trio

    from trocket.codecs.errors import CodecError
    from trocket.conformance.replay import Report, load_session, parse_speed, replay, server_roles, settled
    from trocket.progress import ProgressLine
    from trocket.conformance.rules import Rewriter
    from trocket.conformance.sources import read_frames
    from trocket.interrupt import Stop, stop_on_signal

    try:
        speed = parse_speed(args.speed)
        rewriter = Rewriter.parse(args.rewrite)
    except ValueError as exc:
        print(f"trocket replay: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    default = None
    mapping: dict[str, tuple[str, int]] = {}
    for captured, addr in args.target:
        if captured is None:
            default = addr
        else:
            mapping[captured] = addr

    records = []
    incomplete = False
    # connection ids are per recording: files of one recording (FILE, FILE.1, ... from
    # --tap-rotate-mb) share them, other files get their own
    tags = {path: re.sub(r"\.\d+$", "", path) for path in args.files}
    for path in args.files:
        try:
            read = read_frames(path, file_tag=tags[path] if len(set(tags.values())) > 1 else None)
        except (OSError, CodecError) as exc:
            print(f"trocket replay: error: {path}: {exc}", file=sys.stderr)
            incomplete = True
            continue
        records += read.frames
        if not read.complete:
            incomplete = True
            shown = read.problems[:5]
            print(f"trocket replay: {path} is incomplete ({len(read.problems)} problem(s)); replaying what was "
                  "read:", file=sys.stderr)
            for problem in shown:
                print(f"    {problem}", file=sys.stderr)
    conns = None
    if args.conn:
        conns = {c for c in args.conn} | {int(c) for c in args.conn if c.isdigit()}
    session = load_session(records, connections=conns)
    if not session.connections:
        print("trocket replay: error: no client requests in the capture", file=sys.stderr)
        return EXIT_FAIL
    unmapped = sorted({s for s in session.servers.values() if s not in mapping} if default is None else set())
    if unmapped:
        print(f"trocket replay: error: no --target for server(s) {', '.join(unmapped)}", file=sys.stderr)
        return EXIT_USAGE

    def target(server: str) -> tuple[str, int]:
        return mapping.get(server, default)  # type: ignore[return-value]

    roles = server_roles(session)
    problems = trio.run(_check_targets, roles, target)
    if problems:
        for line in problems:
            print(f"trocket replay: error: {line}", file=sys.stderr)
        hint = " ".join(f"--target {server}=HOST:PORT" for server in sorted(roles))
        print(f"trocket replay: give each captured server its own target ({', '.join(f'{s} was a {r}' for s, r in sorted(roles.items()))}): {hint}", file=sys.stderr)
        return EXIT_FAIL

    n = sum(len(x) for x in session.connections.values())
    print(f"replaying {n} requests on {len(session.connections)} connections "
          f"(speed {args.speed}){' with rewrites' if rewriter else ''}")
    servers = sorted(set(session.servers.values()))
    if len(servers) > 1 and default is not None and not mapping:
        print(f"note: the capture talked to {len(servers)} servers ({', '.join(servers)}), all replayed to "
              f"{default[0]}:{default[1]}; --target CAPTURED=HOST:PORT maps each (a broker and its name server)",
              file=sys.stderr)
    if session.skipped:
        print(f"note: {session.skipped} broker registration requests (REGISTER_BROKER/UNREGISTER_BROKER) "
              "not replayed", file=sys.stderr)
    report = Report()
    progress = ProgressLine(n, label="settled", unit="req/s")

    async def run() -> Stop:
        exchanges = session.exchanges

        async def show_progress() -> None:
            while True:
                progress.update(sum(1 for e in exchanges if settled(e)))
                await trio.sleep(0.2)

        async with stop_on_signal() as stop, trio.open_nursery() as nursery:
            nursery.start_soon(show_progress)
            await replay(session, target, speed=speed, timeout=args.timeout, rewriter=rewriter, report=report)
            nursery.cancel_scope.cancel()
        return stop

    stop = trio.run(run)
    progress.close(clear=True)
    print(report.table())
    by_field = report.difference_table()
    if by_field:
        print()
        print(by_field)
    details = report.details(args.show)
    if details:
        print()
        print(details)
    for err in report.errors:
        print(f"trocket replay: {err}", file=sys.stderr)
    if session.undecodable or session.raw:
        print(f"note: {session.undecodable} undecodable frames and {session.raw} raw records skipped",
              file=sys.stderr)
    ok = report.ok and not incomplete and not stop.interrupted
    verdict = f"INTERRUPTED by {signal.Signals(stop.signum).name}" if stop.interrupted else "OK" if ok else "FAILED"
    print(f"{verdict}: {len(report.differences)} differing, {len(report.unanswered)} unanswered, "
          f"{len(report.errors)} connection errors in {report.elapsed:.2f} s")
    return EXIT_OK if ok else EXIT_FAIL


async def _check_targets(roles: dict[str, str], target) -> list[str]:
    """Every target asked one question at once (2 s at most): what is wrong, one line each."""
    import trio

    from trocket.conformance.replay import probe

    problems: list[str] = []

    async def check(server: str, role: str) -> None:
        host, port = target(server)
        problem = await probe(host, port, role)
        if problem is not None:
            problems.append(f"target {host}:{port} (for the {role} the capture talked to at {server}): {problem}")

    async with trio.open_nursery() as nursery:
        for server, role in sorted(roles.items()):
            nursery.start_soon(check, server, role)
    return sorted(problems)


def add_proxy_command(capture_sub: argparse._SubParsersAction) -> None:
    p = capture_sub.add_parser(
        "proxy",
        help="a transparent TCP proxy that records every frame in both directions",
        description="Forward every byte between clients and an upstream server unchanged, recording "
        "each frame (and, flagged RAW, bytes that are no frames) in the native capture format. "
        "Point a broker's --advertise at the proxy so routes lead clients through it. "
        "Flushed at least every second and completely on SIGINT/SIGTERM.",
    )
    p.add_argument("--listen", type=_hostport, required=True, metavar="HOST:PORT")
    p.add_argument("--upstream", type=_hostport, required=True, metavar="HOST:PORT")
    p.add_argument("--out", required=True, metavar="FILE", help="capture file (appended to)")
    t = p.add_argument_group("TLS (the proxy ends TLS on either side and records the frames inside)")
    t.add_argument("--tls-cert", metavar="PEM", help="clients connect with TLS: the proxy's certificate chain")
    t.add_argument("--tls-key", metavar="PEM", help="its private key")
    t.add_argument("--upstream-tls", action="store_true", help="connect to the upstream with TLS")
    t.add_argument("--upstream-trust", metavar="PEM",
                   help="verify the upstream's certificate against these CAs (default: any, as RocketMQ's client)")
    p.set_defaults(run=run_proxy_command)


def run_proxy_command(args: argparse.Namespace) -> int:
    from trocket.remoting.tls import TlsSettings

    try:
        tls = TlsSettings(
            server_mode="enforcing" if args.tls_cert else "disabled", server_cert=args.tls_cert, server_key=args.tls_key,
            enable=args.upstream_tls or bool(args.upstream_trust), client_auth_server=bool(args.upstream_trust),
            client_trust_cert=args.upstream_trust,
        )
        listen_ssl, upstream_ssl = tls.server_context(), tls.client_context()
    except (OSError, ValueError) as exc:
        print(f"trocket capture proxy: error: {exc}", file=sys.stderr)
        return 1
    return _main_proxy(args.listen, args.upstream, args.out, listen_ssl=listen_ssl, upstream_ssl=upstream_ssl)


def _main_proxy(listen: tuple[str, int], upstream: tuple[str, int], out: str, *,
                listen_ssl: ssl.SSLContext | None = None, upstream_ssl: ssl.SSLContext | None = None) -> int:
    """Record through a :class:`~trocket.conformance.proxy.CaptureProxy` into ``out`` until
    SIGINT/SIGTERM: the capture written out, a summary line, then the exit status of the
    one Ctrl-C rule (``trocket/interrupt.py``: 130 or 143); 1 when it cannot listen or
    the capture lost records."""
    import trio

    from trocket import interrupt
    from trocket.conformance.proxy import CaptureProxy
    from trocket.remoting.tap import FileTap

    async def serve() -> CaptureProxy:
        proxy = CaptureProxy(listen, upstream, tap, listen_ssl=listen_ssl, upstream_ssl=upstream_ssl)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                await nursery.start(proxy.serve)
                print(f"trocket capture proxy: {listen[0]}:{proxy.port} -> {upstream[0]}:{upstream[1]}, "
                      "recording", file=sys.stderr, flush=True)
                async for signum in signals:
                    interrupt.note(signum)  # flushed and reported, then the exit status is 130 or 143
                    break
                nursery.cancel_scope.cancel()
        return proxy

    try:
        tap = FileTap(out, flush_interval=0.5)
    except OSError as exc:
        print(f"trocket capture proxy: error: cannot open {out}: {exc}", file=sys.stderr)
        return 1
    status = 0
    proxy = None
    try:
        proxy = trio.run(serve)
    except BaseException as exc:  # noqa: BLE001 - unwrap trio's exception groups
        if interrupt.is_interrupt(exc):  # before the signal receiver was up: still flushed
            interrupt.note(signal.SIGINT)
            return 0
        leaf = exc
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        if not isinstance(leaf, OSError):
            raise
        print(f"trocket capture proxy: error: {leaf.strerror or leaf}", file=sys.stderr)
        status = 1
    finally:
        tap.close()
    if proxy is not None:
        print(f"trocket capture proxy: {proxy.connections} connections, {proxy.frames} frames, "
              f"{proxy.raw_records} raw records; {tap.summary()}", file=sys.stderr)
    return status if not (tap.dropped or tap.lost) else 1
