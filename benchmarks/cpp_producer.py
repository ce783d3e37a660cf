"""Sync sends from N threads through ONE C++ producer (PyPI ``rocketmq``): the C++ load
generator of ``broker_produce.py --part senders``.

Run by the benchmark in its own process (it loads librocketmq). After ``--warmup`` seconds
it prints ``start`` (the parent samples the broker's CPU time then), after ``--seconds``
more ``end`` followed by one JSON line: messages sent in the window, errors, and the
window's send latencies' p50/p99 in milliseconds.

A few sends a run (0–64) fail with "No route info of this topic" while the name server
is never asked and answers every route query it gets (seen on a tcpdump of its port).
That is the C++ client's own: threads sharing one producer time out on its transport
mutex ("GetTransport ... get timed_mutex timeout") and report the failed attempts as
missing routes (apache/rocketmq-client-cpp#352, #455). They are counted as errors and
left out of the window's figures.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time

from rocketmq.client import Message, Producer


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--body", type=int, default=128)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    producer = Producer(f"BenchCpp{args.threads}", timeout=10000)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    stop = threading.Event()
    window: list[float] = [math.inf, math.inf]  # [start, end] of the timed window
    lat: list[list[float]] = [[] for _ in range(args.threads)]
    errors = [0] * args.threads
    first_errors: list[str] = []

    def sender(i: int) -> None:
        msg = Message(args.topic)
        msg.set_tags("bench")
        msg.set_body(b"b" * args.body)
        mine = lat[i]
        clock = time.perf_counter
        while not stop.is_set():
            t0 = clock()
            try:
                producer.send_sync(msg)
            except Exception as exc:  # noqa: BLE001
                errors[i] += 1
                if len(first_errors) < 3:
                    first_errors.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            t1 = clock()
            if window[0] <= t0 and t1 <= window[1]:
                mine.append(t1 - t0)

    first = Message(args.topic)  # fetch the route once: threads racing for it fail their first sends
    first.set_body(b"b" * args.body)
    producer.send_sync(first)
    threads = [threading.Thread(target=sender, args=(i,), daemon=True) for i in range(args.threads)]
    for t in threads:
        t.start()
    time.sleep(args.warmup)
    window[0] = time.perf_counter()
    print("start", flush=True)
    time.sleep(args.seconds)
    window[1] = time.perf_counter()
    print("end", flush=True)
    stop.set()
    for t in threads:
        t.join(15)
    allv = [x for xs in lat for x in xs]
    print(json.dumps({
        "count": len(allv), "errors": sum(errors), "first_errors": first_errors, "seconds": window[1] - window[0],
        "p50_ms": 1000 * percentile(allv, 50), "p99_ms": 1000 * percentile(allv, 99),
    }), flush=True)
    producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
