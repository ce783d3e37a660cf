"""End-to-end produce -> consume latency with the trocket PushConsumer.

    .venv/bin/python benchmarks/consumer_latency.py                 # 2,000 messages
    .venv/bin/python benchmarks/consumer_latency.py --count 5000 --senders 4

Starts ``trocket broker`` in a child process (fresh temporary store, embedded name
server), starts a clustering PushConsumer (async callback), then sends ``--count``
128-byte messages with the trocket Producer (``--senders`` concurrent synchronous
senders); each body carries its send time (``time.perf_counter_ns`` of this process) and
the callback records now minus that. Prints p50 / p99 / max in ms and the consumed rate.
The measured path: send -> broker store -> a held long-polling pull woken -> decode ->
callback. ``e2e_latency(namesrv)`` is the same measurement against a running broker, for
``benchmarks/client_produce.py``.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import time

import trio

from trocket.client.consumer import PushConsumer
from trocket.client.message import new_message
from trocket.client.producer import Producer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_STAMP = struct.Struct(">q")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


async def e2e_latency(namesrv: str, *, count: int = 2000, senders: int = 1, topic: str = "BenchE2E",
                      group: str = "BenchE2ECG", body_size: int = 128, timeout: float = 120.0) -> dict:
    """Produce ``count`` messages and time each from send to callback; returns
    ``{"count", "p50_ms", "p99_ms", "max_ms", "consume_rate"}``."""
    latencies: list[float] = []
    done = trio.Event()
    pad = b"x" * max(0, body_size - _STAMP.size)

    async def on_message(msg):
        if len(msg.body) >= _STAMP.size and msg.properties.get("bench") == "e2e":
            latencies.append((time.perf_counter_ns() - _STAMP.unpack_from(msg.body)[0]) / 1e6)
            if len(latencies) >= count:
                done.set()

    with trio.fail_after(timeout):
        async with Producer(f"{group}_PG", namesrv) as producer:
            # make the topic (and its route) exist before the consumer starts at its end
            await producer.send(new_message(topic, b"warm-up"))
            async with PushConsumer(group, namesrv, {topic: "*"}, on_message, consume_from="last") as consumer:
                # a topic made a moment ago reaches the name server a little later
                while not any(mq.topic == topic for mq in consumer.assignment()):
                    await trio.sleep(0.05)
                await trio.sleep(0.2)  # the first pulls held
                begin = time.perf_counter()
                per = count // senders

                async def sender(n: int) -> None:
                    for _ in range(n):
                        body = _STAMP.pack(time.perf_counter_ns()) + pad
                        await producer.send(new_message(topic, body, properties={"bench": "e2e"}))

                async with trio.open_nursery() as nursery:
                    for i in range(senders):
                        nursery.start_soon(sender, per + (1 if i < count % senders else 0))
                await done.wait()
                elapsed = time.perf_counter() - begin
    return {
        "count": len(latencies),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "max_ms": max(latencies),
        "consume_rate": len(latencies) / elapsed,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--senders", type=int, default=1)
    args = ap.parse_args()
    from broker_produce import start_broker, stop_broker

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        ns_port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        proc, _ = start_broker(os.path.join(tmp, "store"), "async", os.path.join(tmp, "broker.log"),
                               namesrv_listen=f"127.0.0.1:{ns_port}")
        try:
            res = trio.run(lambda: e2e_latency(f"127.0.0.1:{ns_port}", count=args.count, senders=args.senders))
        finally:
            stop_broker(proc)
    print(f"end-to-end produce->consume, {res['count']} messages, {args.senders} sync sender(s): "
          f"p50 {res['p50_ms']:.2f} ms  p99 {res['p99_ms']:.2f} ms  max {res['max_ms']:.2f} ms  "
          f"({res['consume_rate']:,.0f} msg/s consumed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
