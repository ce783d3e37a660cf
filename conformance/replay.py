"""Replay a captured session against a live server and compare the answers.

``trocket replay FILE --target HOST:PORT`` (see :mod:`trocket.cli_replay`). The
capture (native or pcap, one reader API) is cut into *exchanges*: each request a
client sent, with the response the server gave to it (matched by connection and
opaque), if any. Each captured connection is replayed on a fresh TCP connection
to the target, its requests in their captured order, each with a fresh opaque
(mapped back to the captured one to match the answer).

Pacing: ``speed=1`` keeps the client's pacing, ``N`` runs N times faster, ``None``
("max") as fast as possible. In every mode the capture's causality is kept: a
request is sent only once every response the capture shows arriving before that
request was sent (on any connection) has arrived in the replay, or has timed out.
So a consumer's pull that followed a producer's acknowledged send still follows
it, while requests the client pipelined stay pipelined.

Answers are compared field by field with :func:`~trocket.conformance.rules.compare_responses`
under the per-code rule table of :mod:`trocket.conformance.rules`. The result
(:class:`Report`) counts, per request code, requests sent, answers matched,
answers differing and requests left unanswered, and keeps every difference.

A target that is down, closes, or answers with bytes that are no frames: the
connection's remaining requests count as unanswered, the error is kept in
``Report.errors``, and the other connections go on (partial results).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import trio

from trocket.codecs.codes import request_code_name
from trocket.codecs.command import RemotingCommand
from trocket.codecs.errors import CodecError
from trocket.codecs.frame import FrameDecoder
from trocket.codecs.serialize import decode_command, encode_command

from .rules import SKIPPED_CODES, Difference, Rewriter, compare_responses, rule_for

__all__ = ["Exchange", "Session", "load_session", "CodeStats", "Report", "replay", "run_replay"]


@attrs.define(slots=True, eq=False)
class Exchange:
    """One captured request, the captured answer, and (after replay) the new one."""

    conn: Any  # the capture's connection key
    request_ts: float  # seconds
    request: RemotingCommand
    response: RemotingCommand | None = None  # captured
    response_ts: float | None = None
    got: RemotingCommand | None = None  # replayed
    sent_at: float | None = None  # trio clock
    first_sent_at: float | None = None
    retries: int = 0  # re-sent while unsettled (see Rule.settle)
    error: str | None = None
    diffs: list[Difference] = attrs.Factory(list)

    @property
    def expects_answer(self) -> bool:
        return self.response is not None


@attrs.define(slots=True)
class Session:
    """Exchanges by connection (in captured order), and the server each talked to."""

    connections: dict[Any, list[Exchange]] = attrs.Factory(dict)
    servers: dict[Any, str] = attrs.Factory(dict)  # conn -> the captured server address
    clients: dict[Any, str] = attrs.Factory(dict)
    undecodable: int = 0  # frames that did not decode (skipped)
    raw: int = 0  # raw (non-frame) records skipped
    orphan_responses: int = 0  # answers to requests the capture does not hold (or skipped ones)
    skipped: int = 0  # requests of SKIPPED_CODES left out

    @property
    def exchanges(self) -> list[Exchange]:
        return sorted((e for ex in self.connections.values() for e in ex), key=lambda e: e.request_ts)


def load_session(
    records: Iterable[Any], *, connections: set | None = None, skip_codes: frozenset[int] = SKIPPED_CODES
) -> Session:
    """Cut frame records into exchanges.

    A record needs ``conn``, ``ts`` (seconds), ``from_client`` (True when the client
    sent it), ``server``, ``client``, ``frame`` (length prefix included) and ``raw``;
    :func:`~trocket.conformance.sources.read_frames` gives that view of every
    capture format. Requests the server sends its clients, and the clients' answers
    to them, are left out: a replay plays the client's part only.
    """
    session = Session()
    pending: dict[Any, dict[int, Exchange]] = defaultdict(dict)
    for rec in records:
        if connections is not None and rec.conn not in connections:
            continue
        if rec.raw:
            session.raw += 1
            continue
        try:
            cmd = decode_command(rec.frame[4:])
        except CodecError:
            session.undecodable += 1
            continue
        conn = rec.conn
        if conn not in session.connections:
            session.connections[conn] = []
            session.servers[conn] = rec.server
            session.clients[conn] = rec.client
        if rec.from_client and not cmd.is_response:
            if cmd.code in skip_codes:
                session.skipped += 1
                continue
            ex = Exchange(conn, rec.ts, cmd)
            session.connections[conn].append(ex)
            if not cmd.is_oneway:
                pending[conn][cmd.opaque] = ex
        elif not rec.from_client and cmd.is_response:
            ex = pending[conn].pop(cmd.opaque, None)
            if ex is None:
                session.orphan_responses += 1
            else:
                ex.response, ex.response_ts = cmd, rec.ts
    for conn in [c for c, ex in session.connections.items() if not ex]:
        del session.connections[conn]
    return session


# -- the report -----------------------------------------------------------------------------


@attrs.define(slots=True)
class CodeStats:
    sent: int = 0
    matched: int = 0
    differing: int = 0
    unanswered: int = 0
    no_answer_expected: int = 0


@attrs.define(slots=True)
class Report:
    by_code: dict[int, CodeStats] = attrs.Factory(lambda: defaultdict(CodeStats))
    differences: list[Exchange] = attrs.Factory(list)
    unanswered: list[Exchange] = attrs.Factory(list)
    errors: list[str] = attrs.Factory(list)
    not_sent: int = 0
    elapsed: float = 0.0
    start_ts: float = 0.0  # the capture time of the first request (details show times after it)

    @property
    def ok(self) -> bool:
        return not self.differences and not self.unanswered and not self.errors and not self.not_sent

    def table(self) -> str:
        """Per request code: sent, matched, differing, unanswered, and "no answer" (sent
        without a captured answer to compare with: oneway, or still pending when the
        capture ended)."""
        rows = [("code", "name", "sent", "matched", "differing", "unanswered", "no answer")]
        total = CodeStats()
        for code in sorted(self.by_code):
            s = self.by_code[code]
            rows.append((str(code), request_code_name(code), str(s.sent), str(s.matched), str(s.differing),
                         str(s.unanswered), str(s.no_answer_expected)))
            total.sent += s.sent
            total.matched += s.matched
            total.differing += s.differing
            total.unanswered += s.unanswered
            total.no_answer_expected += s.no_answer_expected
        rows.append(("", "total", str(total.sent), str(total.matched), str(total.differing), str(total.unanswered),
                     str(total.no_answer_expected)))
        widths = [max(len(r[i]) for r in rows) for i in range(7)]
        return "\n".join(
            "  ".join(c.rjust(w) if i != 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows
        )

    def difference_table(self) -> str:
        """The differing answers by request code and field: how many, and one example
        (a field that differs in every answer of a code stands out at once)."""
        counts: dict[tuple[int, str], list] = {}
        for ex in self.differences:
            for d in ex.diffs:
                entry = counts.setdefault((ex.request.code, d.field), [0, d])
                entry[0] += 1
        if not counts:
            return ""
        rows = [("code", "name", "field", "answers", "example")]
        for (code, field), (n, d) in sorted(counts.items()):
            rows.append((str(code), request_code_name(code), field, str(n),
                         _clip(f"expected {d.expected!r}, got {d.got!r}", 80)))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        return "\n".join("  ".join([r[0].rjust(widths[0]), r[1].ljust(widths[1]), r[2].ljust(widths[2]),
                                    r[3].rjust(widths[3]), r[4]]).rstrip() for r in rows)

    def details(self, limit: int = 5) -> str:
        out = []
        for ex in self.differences[:limit]:
            code = ex.request.code
            out.append(
                f"conn {ex.conn} request {request_code_name(code)} ({code}) opaque {ex.request.opaque} "
                f"at +{ex.request_ts - self.start_ts:.3f} s: {len(ex.diffs)} difference(s)"
            )
            if ex.request.ext_fields:
                out.append(f"    request ext: {_clip(repr(ex.request.ext_fields))}")
            out.extend(f"    {_clip(str(d))}" for d in ex.diffs)
        if len(self.differences) > limit:
            out.append(f"... and {len(self.differences) - limit} more differing answers")
        for ex in self.unanswered[:limit]:
            code = ex.request.code
            why = f": {ex.error}" if ex.error else ""
            out.append(f"conn {ex.conn} request {request_code_name(code)} ({code}) opaque {ex.request.opaque}: "
                       f"no answer{why}")
        if len(self.unanswered) > limit:
            out.append(f"... and {len(self.unanswered) - limit} more unanswered requests")
        return "\n".join(out)


def _clip(text: str, width: int = 160) -> str:
    """One line of at most ``width`` characters (a message list or a body would fill the screen)."""
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 3] + "..."


# -- replay -----------------------------------------------------------------------------------


class _Progress:
    """Captured answers, in captured arrival order, that are settled in the replay
    (answered or given up on); ``prefix`` = how many from the start are settled."""

    def __init__(self, answered: list[Exchange]) -> None:
        self.times = [e.response_ts for e in answered]
        self.index = {id(e): i for i, e in enumerate(answered)}
        self.done = [False] * len(answered)
        self.prefix = 0
        self.changed = trio.Event()

    def needed_before(self, ts: float) -> int:
        return bisect.bisect_left(self.times, ts)

    def settle(self, ex: Exchange) -> None:
        i = self.index.get(id(ex))
        if i is None or self.done[i]:
            return
        self.done[i] = True
        while self.prefix < len(self.done) and self.done[self.prefix]:
            self.prefix += 1
        self.changed.set()
        self.changed = trio.Event()

    def is_settled(self, ex: Exchange) -> bool:
        i = self.index.get(id(ex))
        return i is None or self.done[i]

    async def wait_for(self, n: int) -> None:
        while self.prefix < n:
            await self.changed.wait()


async def replay(
    session: Session,
    target: Callable[[str], tuple[str, int]],
    *,
    speed: float | None = None,
    timeout: float = 5.0,
    rewriter: Rewriter | None = None,
    max_frame_length: int = 16 * 1024 * 1024,
    report: Report | None = None,
) -> Report:
    """Replay ``session``; ``target(captured_server_address)`` says where each
    connection goes. ``timeout``: how much longer than the capture an answer may
    take before its request counts as unanswered. ``report``: filled in place, also
    when the replay is cancelled (the exchanges settled so far)."""
    rewriter = rewriter or Rewriter()
    report = Report() if report is None else report
    all_ex = session.exchanges
    answered = sorted((e for e in all_ex if e.expects_answer), key=lambda e: e.response_ts)
    progress = _Progress(answered)
    start_ts = all_ex[0].request_ts if all_ex else 0.0
    t0 = trio.current_time()

    async def one_connection(conn: Any, exchanges: list[Exchange]) -> None:
        host, port = target(session.servers[conn])
        where = f"{host}:{port}"
        waiting: dict[int, Exchange] = {}  # fresh opaque -> exchange

        def give_up(ex: Exchange, why: str) -> None:
            if ex.error is None:
                ex.error = why
            progress.settle(ex)

        try:
            with trio.fail_after(max(timeout, 1.0)):
                stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            why = "timed out" if isinstance(exc, trio.TooSlowError) else (getattr(exc, "strerror", None) or exc)
            report.errors.append(f"conn {conn}: cannot connect to {where}: {why}")
            for ex in exchanges:
                give_up(ex, f"cannot connect to {where}")
            return
        broken: list[str] = []
        async with stream, trio.open_nursery() as nursery:

            async def reader() -> None:
                decoder = FrameDecoder(max_frame_length)
                try:
                    while True:
                        data = await stream.receive_some(65536)
                        if not data:
                            if waiting:
                                broken.append(f"conn {conn}: {where} closed the connection with "
                                              f"{len(waiting)} answer(s) outstanding")
                            return
                        decoder.feed(data)
                        while (payload := decoder.next_frame()) is not None:
                            cmd = decode_command(payload)
                            if not cmd.is_response:
                                continue  # the server asking the client something: not ours to answer
                            ex = waiting.pop(cmd.opaque, None)
                            if ex is not None:
                                ex.got = cmd
                                if not resend_if_unsettled(ex):
                                    progress.settle(ex)
                except CodecError as exc:
                    broken.append(f"conn {conn}: {where} answered with bytes that are no RocketMQ frame: {exc}")
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    broken.append(f"conn {conn}: connection to {where} failed: {exc}")
                finally:
                    for ex in list(waiting.values()):
                        give_up(ex, broken[-1] if broken else "connection closed")
                    waiting.clear()
                    nursery.cancel_scope.cancel()

            async def watchdog() -> None:
                while True:
                    await trio.sleep(0.1)
                    now = trio.current_time()
                    for op, ex in list(waiting.items()):
                        latency = (ex.response_ts or 0) - ex.request_ts
                        if speed:
                            latency /= speed
                        if ex.sent_at is not None and now > ex.sent_at + max(latency, 0) + timeout:
                            del waiting[op]
                            give_up(ex, f"no answer within {max(latency, 0) + timeout:.1f} s")

            next_opaque = itertools.count(1)
            send_lock = trio.Lock()

            async def send(ex: Exchange) -> bool:
                opaque = next(next_opaque)
                cmd = attrs.evolve(rewriter.command(ex.request), opaque=opaque)
                if ex.expects_answer:
                    waiting[opaque] = ex
                ex.sent_at = trio.current_time()
                try:
                    async with send_lock:
                        await stream.send_all(encode_command(cmd))
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    broken.append(f"conn {conn}: sending to {where} failed: {exc}")
                    waiting.pop(opaque, None)
                    return False
                return True

            def resend_if_unsettled(ex: Exchange) -> bool:
                rule = rule_for(ex.request.code)
                if not rule.settle or ex.response is None:
                    return False
                if ex.first_sent_at is None:
                    ex.first_sent_at = ex.sent_at
                if trio.current_time() - ex.first_sent_at > rule.settle:
                    return False
                if not compare_responses(ex.request.code, ex.response, ex.got, rewriter):
                    return False

                async def again() -> None:
                    await trio.sleep(0.05)
                    ex.retries += 1
                    if not await send(ex):
                        progress.settle(ex)

                nursery.start_soon(again)
                return True

            nursery.start_soon(reader)
            nursery.start_soon(watchdog)
            for i, ex in enumerate(exchanges):
                if speed:
                    await trio.sleep_until(t0 + (ex.request_ts - start_ts) / speed)
                await progress.wait_for(progress.needed_before(ex.request_ts))
                if not await send(ex):
                    ex.sent_at = None
                    for rest in exchanges[i:]:
                        give_up(rest, "not sent: the connection failed")
                    break
            while any(e.expects_answer and e.sent_at is not None and not progress.is_settled(e) for e in exchanges):
                await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
        for ex in exchanges:
            if ex.got is None:
                give_up(ex, "not sent: the connection failed" if ex.sent_at is None else "no answer")
        report.errors.extend(dict.fromkeys(broken))

    finished = False
    try:
        async with trio.open_nursery() as nursery:
            for conn, exchanges in session.connections.items():
                nursery.start_soon(one_connection, conn, exchanges)
        finished = True
    finally:
        _tally(report, all_ex, rewriter, finished, trio.current_time() - t0, start_ts)
    return report


def _tally(report: Report, all_ex: list[Exchange], rewriter: Rewriter, finished: bool, elapsed: float,
           start_ts: float) -> None:
    """Count every exchange into ``report``; an interrupted replay counts only the
    exchanges it settled (sent, and answered when an answer was expected)."""
    report.elapsed = elapsed
    report.start_ts = start_ts
    for ex in all_ex:
        if not finished and (ex.sent_at is None or (ex.expects_answer and ex.got is None)):
            continue
        stats = report.by_code[ex.request.code]
        if ex.sent_at is None:
            report.not_sent += 1
            if ex.expects_answer:
                stats.unanswered += 1
                report.unanswered.append(ex)
            continue
        stats.sent += 1
        if not ex.expects_answer:
            stats.no_answer_expected += 1
        elif ex.got is None:
            stats.unanswered += 1
            report.unanswered.append(ex)
        else:
            ex.diffs = compare_responses(ex.request.code, ex.response, ex.got, rewriter)
            if ex.diffs:
                stats.differing += 1
                report.differences.append(ex)
            else:
                stats.matched += 1


#: requests only a name server answers: a connection that sent one talked to a name server
NAMESRV_CODES = frozenset({101, 103, 104, 105, 106, 206, 219, 224})
#: the question :func:`probe` asks each kind of server (one any such server answers)
_PROBES = {"name server": 106, "broker": 28}  # GET_BROKER_CLUSTER_INFO, GET_BROKER_RUNTIME_INFO


def server_roles(session: Session) -> dict[str, str]:
    """Captured server address -> ``"name server"`` or ``"broker"`` (by what was asked)."""
    roles: dict[str, str] = {}
    for conn, exchanges in session.connections.items():
        server = session.servers[conn]
        if any(e.request.code in NAMESRV_CODES for e in exchanges):
            roles[server] = "name server"
        else:
            roles.setdefault(server, "broker")
    return roles


def settled(ex: Exchange) -> bool:
    """The exchange is done with: answered, given up on, or sent with no answer due."""
    return ex.got is not None or ex.error is not None or (ex.sent_at is not None and not ex.expects_answer)


async def probe(host: str, port: int, role: str, timeout: float = 2.0) -> str | None:
    """Connect and ask one harmless question a ``role`` server answers; None when it
    did, else what went wrong (a replay to a wrong target would otherwise wait out
    every request's timeout). Any answer but REQUEST_CODE_NOT_SUPPORTED counts: a
    broker with ACL refuses the unsigned question, and is still a broker."""
    code = _PROBES[role]
    name = request_code_name(code)
    try:
        with trio.fail_after(timeout):
            stream = await trio.open_tcp_stream(host, port)
            async with stream:
                await stream.send_all(encode_command(RemotingCommand.request(code, opaque=1)))
                decoder = FrameDecoder(16 * 1024 * 1024)
                while (payload := decoder.next_frame()) is None:
                    data = await stream.receive_some(65536)
                    if not data:
                        return f"closed the connection without answering {name}: is it a RocketMQ {role}?"
                    decoder.feed(data)
    except trio.TooSlowError:
        return f"no answer to {name} within {timeout:g} s: is it a RocketMQ {role}?"
    except OSError as exc:
        cause = exc.__cause__  # trio's "all attempts to connect ... failed" holds the reasons
        if isinstance(cause, BaseExceptionGroup) and isinstance(cause.exceptions[0], OSError):
            exc = cause.exceptions[0]
        return f"cannot connect: {(exc.strerror or str(exc)).lower()}"
    except CodecError as exc:
        return f"answered with bytes that are no RocketMQ frame ({exc}): is it a RocketMQ {role}?"
    answer = decode_command(payload)
    if answer.code == 3:  # REQUEST_CODE_NOT_SUPPORTED
        return f"does not answer {name} ({(answer.remark or '').strip()}): not a {role}"
    return None


def parse_speed(text: str) -> float | None:
    """``max`` -> None; ``1``, ``10``, ``0.5`` -> a positive factor."""
    if text.strip().lower() == "max":
        return None
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"bad speed {text!r}: a positive number or 'max'")
    return value


def run_replay(session: Session, target, **options) -> Report:
    """:func:`replay` from synchronous code."""
    return trio.run(lambda: replay(session, target, **options))
