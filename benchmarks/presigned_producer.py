"""A fixed offered load of SEND_MESSAGE_V2 requests, signed once: ACL's cost on the broker.

Run by ``broker_produce.py --part acl --generator presigned`` in its own process, one
window per run:

    .venv/bin/python benchmarks/presigned_producer.py --addr 127.0.0.1:10911 --rate 20000 --batch 16 \\
        --warmup 1 --seconds 5 [--access-key AK --secret-key SK]

The requests (ROCKETMQ headers, ``broker_produce.send_request``'s 128-byte messages to
its four queues) are encoded once, signed once as Java's ``AclClientRPCHook`` signs them
when ``--access-key`` is given: what is signed is the ext fields (the header's fields,
the born timestamp among them) and the body, not the opaque, so one signed frame per
queue serves every send with its opaque patched in. The generator's work per message is
then the same, and small, whether the broker checks the signature or not.

The load is open: every ``batch / rate`` seconds one write of ``batch`` frames, whatever
the answers do (a generator that was not scheduled makes up for at most 50 ms of writes;
at most ``--max-inflight`` unanswered: past it the generator waits; either way the rate
it reached falls short, which the figures show). So a broker with ACL and one
without see the same requests arrive in the same groups at the same pace; the broker's
CPU per message is what differs.

It prints ``start`` and ``end`` around the timed window (the caller samples the
broker's CPU there) and then one JSON line: ``count`` (successful answers received in
the window), ``seconds``, ``errors``, ``sent``, ``rate`` (offered), the latency of the
answers (``p50_ms``, ``p99_ms``) and the first error's code and remark.
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


def run(addr: str, rate: float, batch: int, warmup: float, seconds: float, max_inflight: int,
        access_key: str | None, secret_key: str | None) -> dict:
    host, _, port = addr.rpartition(":")
    templates = frames(access_key, secret_key)
    chunk = bytearray(b"".join(templates[i % QUEUES] for i in range(batch)))
    offsets = []
    pos = 0
    for i in range(batch):
        offsets.append(pos + _OPAQUE_AT)
        pos += len(templates[i % QUEUES])
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    answers = Answers(batch)
    period = batch / rate
    opaque = 0
    inflight = 0
    sent = 0
    start = time.monotonic()
    timed_at, end_at = start + warmup, start + warmup + seconds
    due = start
    while True:
        now = time.monotonic()
        if now >= end_at:
            break
        if not answers.timed and now >= timed_at:
            answers.timed = True
            sent = 0
            print("start", flush=True)
        if now < due or inflight + batch > max_inflight:
            wait = max(0.0, min(due - now, end_at - now)) if inflight + batch <= max_inflight else end_at - now
            if select.select([sock], [], [], wait)[0]:
                inflight -= answers.feed(sock.recv(1 << 20), time.monotonic())
            continue
        for at in offsets:
            _OPAQUE.pack_into(chunk, at, opaque)
            opaque += 1
        answers.sent_at.append(now)
        sock.sendall(chunk)
        inflight += batch
        sent += batch
        due += period
        if due < now - _CATCH_UP:  # far behind (this process or the broker starved): that much is not made up
            due = now
    print("end", flush=True)
    sock.close()
    return {
        "count": answers.ok, "seconds": seconds, "errors": answers.errors, "sent": sent, "rate": rate,
        "batch": batch, "signed": access_key is not None,
        "p50_ms": 1000 * percentile(answers.latencies, 50), "p99_ms": 1000 * percentile(answers.latencies, 99),
        "first_error": answers.first_error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addr", required=True, help="the broker, HOST:PORT")
    parser.add_argument("--rate", type=float, required=True, help="messages offered per second")
    parser.add_argument("--batch", type=int, default=1, help="frames per write (default 1)")
    parser.add_argument("--warmup", type=float, default=1.0, help="untimed seconds first (default 1)")
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds (default 5)")
    parser.add_argument("--max-inflight", type=int, default=4096,
                        help="unanswered requests at most; past it the generator waits (default 4096)")
    parser.add_argument("--access-key", default=None, help="sign every request with this account")
    parser.add_argument("--secret-key", default=None)
    args = parser.parse_args()
    print(json.dumps(run(args.addr, args.rate, args.batch, args.warmup, args.seconds, args.max_inflight,
                         args.access_key, args.secret_key)), flush=True)


if __name__ == "__main__":
    main()
