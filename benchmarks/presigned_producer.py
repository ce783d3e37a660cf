"""A fixed offered load of SEND_MESSAGE_V2 requests, signed once, to several brokers at once.

Run by ``broker_produce.py --part acl --generator presigned`` in its own process, one
window per run:

    .venv/bin/python benchmarks/presigned_producer.py --addr 127.0.0.1:10911 \
        --signed-addr 127.0.0.1:10921 --access-key AK --secret-key SK \
        --rate 10000 --batch 16 --warmup 1 --seconds 5

The requests (ROCKETMQ headers, ``broker_produce.send_request``'s 128-byte messages to
its four queues) are encoded once, and for the ``--signed-addr`` brokers signed once as
Java's ``AclClientRPCHook`` signs them: what is signed is the ext fields (the header's
fields, the born timestamp among them) and the body, not the opaque, so one signed frame
per queue serves every send with its opaque patched in. The generator's work per message
is then small and the same for every broker.

The load is open: every ``batch / rate`` seconds one write of ``batch`` frames to each
broker, one broker after the other (who goes first alternates), whatever the answers do
(a generator that was not scheduled makes up for at most 50 ms of writes; at most
``--max-inflight`` unanswered per broker: past it the generator waits; either way the
rate reached falls short, which the figures show). So the brokers see the same requests
arrive in the same groups at the same moments, and whatever else the machine does hits
them alike; each broker's CPU per message is what differs.

It prints ``start`` and ``end`` around the timed window (the caller samples the brokers'
CPU there) and then one JSON line: ``seconds``, ``rate``, ``batch`` and per broker
(``targets``, unsigned ones first) ``count`` (successful answers received in the
window), ``errors``, ``sent``, the latency of the answers (``p50_ms``, ``p99_ms``) and
the first error's code and remark.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker_produce import BODY, QUEUES, percentile, send_request  # noqa: E402

from trocket.codecs.acl import sign_request  # noqa: E402
from trocket.codecs.command import SerializeType  # noqa: E402
from trocket.codecs.serialize import encode_command  # noqa: E402

#: a ROCKETMQ-serialized frame: [total][type|header length] then code (2), language (1),
#: version (2), opaque (4), ...
_OPAQUE_AT = 4 + 4 + 2 + 1 + 2
_FRAME = struct.Struct(">iI")
_CODE_OPAQUE = struct.Struct(">hxxxi")
_OPAQUE = struct.Struct(">i")
#: seconds of sends a starved generator makes up for (batch after batch, each its own
#: write) before it lets them go
_CATCH_UP = 0.05


def frames(access_key: str | None, secret_key: str | None) -> list[bytes]:
    """One encoded request per queue (opaque 0), signed when ``access_key`` is given."""
    out = []
    for q in range(QUEUES):
        cmd = send_request(q, BODY, SerializeType.ROCKETMQ)
        if access_key is not None:
            sign_request(cmd, access_key, secret_key or "")
        out.append(encode_command(cmd))
    return out


class Answers:
    """The answer frames read so far: counts, codes and the latency of each answer (from
    its batch's send time, found by its opaque)."""

    __slots__ = ("rest", "ok", "errors", "first_error", "latencies", "batch", "sent_at", "timed")

    def __init__(self, batch: int) -> None:
        self.rest = b""
        self.ok = 0
        self.errors = 0
        self.first_error: str | None = None
        self.latencies: list[float] = []
        self.batch = batch
        self.sent_at: list[float] = []  # per batch
        self.timed = False

    def feed(self, data: bytes, now: float) -> int:
        """Take ``data`` read at ``now``; the number of complete answers in it."""
        buf = self.rest + data if self.rest else data
        pos, n, end = 0, 0, len(buf)
        while end - pos >= 8:
            total, word = _FRAME.unpack_from(buf, pos)
            if end - pos < 4 + total:
                break
            code, opaque = _CODE_OPAQUE.unpack_from(buf, pos + 8)
            if self.timed:
                if code == 0:
                    self.ok += 1
                    self.latencies.append(now - self.sent_at[opaque // self.batch])
                else:
                    self.errors += 1
            if code != 0 and self.first_error is None:
                self.first_error = f"code {code}: {buf[pos + 8:pos + 4 + total][17:200]!r}"
            pos += 4 + total
            n += 1
        self.rest = buf[pos:]
        return n


class Target:
    """One broker connection: its frames (one batch, opaques patched per write) and answers."""

    __slots__ = ("addr", "signed", "sock", "chunk", "offsets", "answers", "inflight", "sent")

    def __init__(self, addr: str, signed: bool, templates: list[bytes], batch: int) -> None:
        self.addr, self.signed = addr, signed
        self.chunk = bytearray(b"".join(templates[i % QUEUES] for i in range(batch)))
        self.offsets = []
        pos = 0
        for i in range(batch):
            self.offsets.append(pos + _OPAQUE_AT)
            pos += len(templates[i % QUEUES])
        host, _, port = addr.rpartition(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.answers = Answers(batch)
        self.inflight = 0
        self.sent = 0

    def write(self, opaque: int, now: float) -> None:
        chunk = self.chunk
        for at in self.offsets:
            _OPAQUE.pack_into(chunk, at, opaque)
            opaque += 1
        self.answers.sent_at.append(now)
        self.sock.sendall(chunk)
        self.inflight += len(self.offsets)
        self.sent += len(self.offsets)

    def figures(self) -> dict:
        a = self.answers
        return {
            "addr": self.addr, "signed": self.signed, "count": a.ok, "errors": a.errors, "sent": self.sent,
            "p50_ms": 1000 * percentile(a.latencies, 50), "p99_ms": 1000 * percentile(a.latencies, 99),
            "first_error": a.first_error,
        }


def run(targets: list[tuple[str, bool]], rate: float, batch: int, warmup: float, seconds: float,
        max_inflight: int, access_key: str | None, secret_key: str | None) -> dict:
    """The load on every target at once, each write to each target in turn (who goes first
    alternating), so that every broker sees the same requests at the same moments."""
    unsigned, signed = frames(None, None), frames(access_key, secret_key) if access_key is not None else None
    conns = [Target(addr, sign, signed if sign else unsigned, batch) for addr, sign in targets]
    by_sock = {t.sock: t for t in conns}
    socks = list(by_sock)
    period = batch / rate
    opaque = 0
    start = time.monotonic()
    timed, timed_at, end_at = False, start + warmup, start + warmup + seconds
    due = start
    flip = False
    while True:
        now = time.monotonic()
        if now >= end_at:
            break
        if not timed and now >= timed_at:
            timed = True
            for t in conns:
                t.answers.timed = True
                t.sent = 0
            print("start", flush=True)
        full = any(t.inflight + batch > max_inflight for t in conns)
        if now < due or full:
            for sock in select.select(socks, [], [], min(due - now, end_at - now) if not full else end_at - now)[0]:
                t = by_sock[sock]
                t.inflight -= t.answers.feed(sock.recv(1 << 20), time.monotonic())
            continue
        for t in (reversed(conns) if flip else conns):
            t.write(opaque, now)
        flip = not flip
        opaque += batch
        due += period
        if due < now - _CATCH_UP:  # far behind (this process or a broker starved): that much is not made up
            due = now
    print("end", flush=True)
    for t in conns:
        t.sock.close()
    return {"seconds": seconds, "rate": rate, "batch": batch, "targets": [t.figures() for t in conns]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addr", action="append", default=[], help="a broker sent unsigned requests, HOST:PORT "
                        "(repeatable)")
    parser.add_argument("--signed-addr", action="append", default=[],
                        help="a broker sent requests signed with --access-key/--secret-key (repeatable)")
    parser.add_argument("--rate", type=float, required=True, help="messages offered per second, to each broker")
    parser.add_argument("--batch", type=int, default=1, help="frames per write (default 1)")
    parser.add_argument("--warmup", type=float, default=1.0, help="untimed seconds first (default 1)")
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds (default 5)")
    parser.add_argument("--max-inflight", type=int, default=4096,
                        help="unanswered requests per broker at most; past it the generator waits (default 4096)")
    parser.add_argument("--access-key", default=None, help="the account --signed-addr requests are signed with")
    parser.add_argument("--secret-key", default=None)
    args = parser.parse_args()
    if args.signed_addr and args.access_key is None:
        parser.error("--signed-addr needs --access-key")
    targets = [(a, False) for a in args.addr] + [(a, True) for a in args.signed_addr]
    if not targets:
        parser.error("no broker: give --addr or --signed-addr")
    print(json.dumps(run(targets, args.rate, args.batch, args.warmup, args.seconds, args.max_inflight,
                         args.access_key, args.secret_key)), flush=True)


if __name__ == "__main__":
    main()
