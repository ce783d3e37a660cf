"""Client produce benchmark: the trocket producer side by side with the C++ client.

    .venv/bin/python benchmarks/client_produce.py                 # everything, ~1 min
    .venv/bin/python benchmarks/client_produce.py --seconds 2     # shorter windows
    .venv/bin/python benchmarks/client_produce.py --no-cpp        # trocket only
    .venv/bin/python benchmarks/client_produce.py --rounds 3      # alternate sides 3 times, best of each
    .venv/bin/python benchmarks/client_produce.py --trace --no-cpp --rounds 3   # trocket with trace on vs off

One ``trocket broker`` child process (``ASYNC_FLUSH``, fresh temporary store, embedded
name server) serves every run; each workload writes its own topic, created by a first
send before its window. 128-byte bodies, ``--warmup`` seconds untimed then ``--seconds``
timed. Workloads (as issue 7 names them):

* ``sync x1`` / ``sync x16``: 1 / 16 concurrent senders, each waiting for its answer;
* ``async 256``: 256 sends in flight (a new one as each answer comes back);
* ``oneway``: one sender, no answers (the TPS the client can put on the wire);
* ``batch 32``: one sender of 32-message batches (TPS counts messages);
* ``e2e``: produce -> consume latency (p50/p99) at a steady ~1,000 msg/s, consumed by a
  trocket :class:`~trocket.client.consumer.PushConsumer` (async callback); latency from
  the send's start to the message in the callback.

trocket runs as trio tasks of this process (one :class:`~trocket.client.producer.Producer`);
the C++ client (librocketmq from PyPI ``rocketmq``) as native threads of a child process,
``benchmarks/cpp_producer.c`` (one C++ producer per run; ``--cpp-driver python`` runs it
from Python threads of this file instead, ``--cpp MODE``, which take turns on the GIL
and make the C++ side slower than it is). Both share the machine's cores with the broker,
so the broker's CPU per message (``/proc``) is printed too. The last lines are the ratios
trocket / C++ per workload (issue 7's goal: >= 1 for sync x16 and async). ``--trace``
adds trocket's producer with message trace on (``Producer(trace=True)``: a Pub record per
answered send, batched into the trace topic by a background task) beside it, and the
ratios traced / plain (issue 25's goal: sends at most 10% slower).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

BODY_SIZE = 128
WORKLOADS = ("sync x1", "sync x16", "async 256", "oneway", "batch 32")
CPP_MODES = {"sync x1": "sync1", "sync x16": "sync16", "async 256": "async", "oneway": "oneway", "batch 32": "batch"}


def topic_of(name: str, side: str) -> str:
    return f"Bench_{side}_" + name.replace(" ", "_")


# -- the C++ side (a child process: it loads librocketmq) ------------------------------


def cpp_child(args: argparse.Namespace) -> int:
    from rocketmq.client import Message, Producer

    from broker_produce import percentile

    mode = args.cpp
    producer = Producer(f"BenchCpp_{mode}", timeout=10000)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    body = b"b" * BODY_SIZE

    def message() -> Message:
        m = Message(args.topic)
        m.set_tags("bench")
        m.set_body(body)
        return m

    producer.send_sync(message())  # the route, before the clock starts
    stop = threading.Event()
    window = [float("inf"), float("inf")]
    counts: list[int] = []
    lat: list[list[float]] = []
    errors = [0]
    clock = time.perf_counter

    def in_window(t0: float, t1: float) -> bool:
        return window[0] <= t0 and t1 <= window[1]

    def waiting_sender(i: int, send, per: int) -> None:
        """``send()`` in a loop, each waiting for its answer; ``per`` messages a call."""
        mine = lat[i]
        n = 0
        while not stop.is_set():
            t0 = clock()
            try:
                send()
            except Exception:  # noqa: BLE001
                errors[0] += 1
                continue
            t1 = clock()
            if in_window(t0, t1):
                mine.append(t1 - t0)
                n += per
        counts[i] = n

    def sync_sender(i: int) -> None:
        msg = message()
        waiting_sender(i, lambda: producer.send_sync(msg), 1)

    def batch_sender(i: int) -> None:
        msgs = [message() for _ in range(32)]
        waiting_sender(i, lambda: producer.send_batch(msgs), 32)

    def oneway_sender(i: int) -> None:
        msg = message()
        n = 0
        while not stop.is_set():
            t0 = clock()
            producer.send_oneway(msg)
            if in_window(t0, clock()):
                n += 1
        counts[i] = n

    def async_sender(i: int) -> None:
        slots = threading.Semaphore(256)
        msg = message()
        mine = lat[i]
        done = [0]

        def ok_cb(t0: float):
            def cb(_result) -> None:
                t1 = clock()
                if in_window(t0, t1):
                    mine.append(t1 - t0)
                    done[0] += 1
                slots.release()
            return cb

        def err_cb(_exc) -> None:
            errors[0] += 1
            slots.release()

        while not stop.is_set():
            slots.acquire()
            producer.send_async(msg, ok_cb(clock()), err_cb)
        for _ in range(256):
            slots.acquire(timeout=10)
        counts[i] = done[0]

    target, threads = {
        "sync1": (sync_sender, 1), "sync16": (sync_sender, 16), "batch": (batch_sender, 1),
        "oneway": (oneway_sender, 1), "async": (async_sender, 1),
    }[mode]
    counts.extend([0] * threads)
    lat.extend([] for _ in range(threads))
    workers = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    time.sleep(args.warmup)
    window[0] = clock()
    print("start", flush=True)
    time.sleep(args.seconds)
    window[1] = clock()
    print("end", flush=True)
    stop.set()
    for w in workers:
        w.join(20)
    allv = [x for xs in lat for x in xs]
    print(json.dumps({"count": sum(counts), "errors": errors[0], "seconds": window[1] - window[0],
                      "p50_ms": 1000 * percentile(allv, 50), "p99_ms": 1000 * percentile(allv, 99)}), flush=True)
    producer.shutdown()
    return 0


#: The workloads as ``cpp_producer.c`` arguments.
NATIVE_ARGS = {
    "sync x1": ("--mode", "sync", "--threads", "1"), "sync x16": ("--mode", "sync", "--threads", "16"),
    "async 256": ("--mode", "async", "--inflight", "256"), "oneway": ("--mode", "oneway"),
    "batch 32": ("--mode", "batch", "--batch", "32"),
}


def run_cpp(namesrv: str, pid: int, name: str, warmup: float, seconds: float) -> dict:
    import broker_produce as bp

    common = ["--namesrv", namesrv, "--topic", topic_of(name, "cpp"), "--warmup", str(warmup), "--seconds", str(seconds)]
    if bp.CPP_DRIVER == "native":
        argv = [bp.native_producer(), *NATIVE_ARGS[name], "--body", str(BODY_SIZE), *common]
    else:
        argv = [sys.executable, os.path.abspath(__file__), "--cpp", CPP_MODES[name], *common]
    return bp.child_window(argv, pid, f"the C++ run {name} ({bp.CPP_DRIVER} driver)", wait_s=60)


# -- the trocket side -------------------------------------------------------------------


async def run_trocket(namesrv: str, pid: int, name: str, warmup: float, seconds: float, trace: bool = False) -> dict:
    import trio

    from broker_produce import cpu_per_message, cpu_seconds, percentile
    from trocket.client import ClientError, new_message
    from trocket.client.producer import Producer

    topic = topic_of(name, "py")
    window = [float("inf"), float("inf")]
    lat: list[float] = []
    count = [0]
    errors = [0]
    clock = time.perf_counter

    def message():
        return new_message(topic, b"b" * BODY_SIZE, tags="bench")

    group = f"BenchPy_{name.replace(' ', '_')}{'_traced' if trace else ''}"
    async with Producer(group, namesrv, send_timeout=10, trace=trace) as producer:
        await producer.send(message())  # the topic and its route, before the clock starts
        stop = trio.Event()

        async def waiting_sender(send, per: int) -> None:
            """``await send()`` in a loop; ``per`` messages a call."""
            while not stop.is_set():
                t0 = clock()
                try:
                    await send()
                except ClientError:
                    errors[0] += 1
                    continue
                t1 = clock()
                if window[0] <= t0 and t1 <= window[1]:
                    lat.append(t1 - t0)
                    count[0] += per

        async def sync_sender() -> None:
            await waiting_sender(lambda: producer.send(message()), 1)

        async def batch_sender() -> None:
            await waiting_sender(lambda: producer.send_batch([message() for _ in range(32)]), 32)

        async def oneway_sender() -> None:
            while not stop.is_set():
                t0 = clock()
                await producer.send_oneway(message())
                if window[0] <= t0 and clock() <= window[1]:
                    count[0] += 1

        async def async_sender() -> None:
            slots = trio.Semaphore(256)

            def done(t0: float):
                def cb(result, error) -> None:
                    slots.release()
                    if error is not None:
                        errors[0] += 1
                        return
                    t1 = clock()
                    if window[0] <= t0 and t1 <= window[1]:
                        lat.append(t1 - t0)
                        count[0] += 1
                return cb

            while not stop.is_set():
                await slots.acquire()
                await producer.send_async(message(), done(clock()))
            for _ in range(256):
                await slots.acquire()

        if name.startswith("sync x"):  # "sync xN": N senders, each waiting for its answer
            senders = [sync_sender] * int(name[len("sync x"):])
        else:
            senders = {"batch 32": [batch_sender], "oneway": [oneway_sender], "async 256": [async_sender]}[name]
        async with trio.open_nursery() as nursery:
            for s in senders:
                nursery.start_soon(s)
            await trio.sleep(warmup)
            window[0] = clock()
            cpu0 = cpu_seconds(pid)
            await trio.sleep(seconds)
            window[1] = clock()
            cpu1 = cpu_seconds(pid)
            stop.set()
    tracer = producer.tracer
    res = {"count": count[0], "errors": errors[0], "seconds": window[1] - window[0],
           "trace_dropped": tracer.dropped if tracer is not None else 0,
           "p50_ms": 1000 * percentile(lat, 50), "p99_ms": 1000 * percentile(lat, 99)}
    res["tps"] = res["count"] / res["seconds"]
    res.update(cpu_per_message(cpu0, cpu1, res["count"]))
    return res


async def run_e2e(namesrv: str, seconds: float, rate: float = 1000.0) -> dict:
    """Produce at ``rate`` msg/s (sync, paced) while a trocket PushConsumer (async
    callback) consumes; latency = the callback's receipt - the send's start (stamped in
    the body)."""
    import trio

    from broker_produce import percentile
    from trocket.client import new_message
    from trocket.client.consumer import PushConsumer
    from trocket.client.producer import Producer

    topic = "Bench_e2e"
    lat: list[float] = []

    async def on_message(m) -> None:
        if m.body[:1] != b"w":
            lat.append((time.perf_counter_ns() - int(m.body[:20])) / 1e9)

    async with Producer("BenchE2E", namesrv, send_timeout=10) as producer:
        await producer.send(new_message(topic, b"warm"))
        async with PushConsumer("BenchE2ECG", namesrv, {topic: "*"}, on_message) as consumer:
            with trio.fail_after(10):  # a topic made a moment ago reaches the name server a little later
                while not any(mq.topic == topic for mq in consumer.assignment()):
                    await trio.sleep(0.05)
            await trio.sleep(0.3)
            gap = 1.0 / rate
            t_next = time.perf_counter()
            end = t_next + seconds
            sent = 0
            while time.perf_counter() < end:
                await producer.send(new_message(topic, b"%020d" % time.perf_counter_ns() + b"b" * (BODY_SIZE - 20)))
                sent += 1
                t_next += gap
                delay = t_next - time.perf_counter()
                if delay > 0:
                    await trio.sleep(delay)
            with trio.move_on_after(5):
                while len(lat) < sent:
                    await trio.sleep(0.05)
    return {"sent": sent, "received": len(lat), "p50_ms": 1000 * percentile(lat, 50), "p99_ms": 1000 * percentile(lat, 99)}


# -- main ----------------------------------------------------------------------------------


def line(side: str, name: str, r: dict) -> str:
    lat = f"p50 {r['p50_ms']:6.2f} ms  p99 {r['p99_ms']:6.2f} ms" if r.get("p50_ms") else " " * 32
    return (f"{side:8} {name:10} {r['tps']:9,.0f} msg/s  {lat}  broker {r['cpu_us']:5.1f} us/msg"
            + (f"  errors {r['errors']}" if r["errors"] else "")
            + (f"  trace records dropped {r['trace_dropped']}" if r.get("trace_dropped") else ""))


def keep_best(results: dict, key: tuple[str, str], r: dict) -> None:
    if key not in results or r["tps"] > results[key]["tps"]:
        results[key] = r


async def main(args: argparse.Namespace) -> None:
    import trio

    from broker_produce import free_port, start_broker, stop_broker

    cpp_ok = not args.no_cpp
    if cpp_ok:
        probe = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True)
        if probe.returncode:
            print(f"C++ client unavailable: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
            cpp_ok = False
    namesrv = f"127.0.0.1:{free_port()}"
    results: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="trocket-client-bench-") as tmp:
        proc, _addr = start_broker(os.path.join(tmp, "store"), "async", os.path.join(tmp, "broker.log"),
                                   namesrv_listen=namesrv)
        try:
            print(f"trocket broker pid {proc.pid}, name server {namesrv}; 128-byte bodies, "
                  f"{args.warmup} s warm-up + {args.seconds} s per run", flush=True)
            for name in WORKLOADS:
                if args.only and name not in args.only:
                    continue
                for _ in range(args.rounds):  # alternate the sides; keep each side's best run
                    r = await run_trocket(namesrv, proc.pid, name, args.warmup, args.seconds)
                    keep_best(results, ("trocket", name), r)
                    print(line("trocket", name, r), flush=True)
                    if args.trace:
                        r = await run_trocket(namesrv, proc.pid, name, args.warmup, args.seconds, trace=True)
                        keep_best(results, ("traced", name), r)
                        print(line("traced", name, r), flush=True)
                    if cpp_ok:
                        r = await trio.to_thread.run_sync(run_cpp, namesrv, proc.pid, name, args.warmup, args.seconds)
                        keep_best(results, ("cpp", name), r)
                        print(line("cpp", name, r), flush=True)
            if not args.only or "e2e" in args.only:
                e2e = await run_e2e(namesrv, args.seconds)
                print(f"trocket  e2e        {e2e['sent']} sent, {e2e['received']} consumed at ~1,000 msg/s: "
                      f"produce->consume p50 {e2e['p50_ms']:.2f} ms  p99 {e2e['p99_ms']:.2f} ms", flush=True)
        except BaseException:
            with open(os.path.join(tmp, "broker.log")) as f:
                print("broker log tail:\n" + "".join(f.readlines()[-15:]), file=sys.stderr)
            raise
        finally:
            stop_broker(proc)
    if args.trace:
        print(f"\nratios trocket traced / plain (TPS{', best of %d runs each' % args.rounds if args.rounds > 1 else ''}):")
        for name in WORKLOADS:
            a, b = results.get(("traced", name)), results.get(("trocket", name))
            if a and b and b["tps"]:
                print(f"  {name:10} {a['tps'] / b['tps']:5.2f}x")
    if cpp_ok:
        print(f"\nratios trocket / C++ (TPS{', best of %d runs each' % args.rounds if args.rounds > 1 else ''}):")
        for name in WORKLOADS:
            a, b = results.get(("trocket", name)), results.get(("cpp", name))
            if a and b and b["tps"]:
                print(f"  {name:10} {a['tps'] / b['tps']:5.2f}x")


def parse() -> argparse.Namespace:
    import broker_produce

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--no-cpp", action="store_true", help="trocket only")
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs per workload and side, alternating; the ratios use each side's best (a busy machine)")
    ap.add_argument("--only", action="append", help="a workload name (repeatable), or e2e")
    ap.add_argument("--trace", action="store_true", help="also trocket with message trace on (Producer(trace=True))")
    broker_produce.add_cpp_driver_option(ap)
    # the C++ child
    ap.add_argument("--cpp", help=argparse.SUPPRESS)
    ap.add_argument("--namesrv", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    return ap.parse_args()


if __name__ == "__main__":
    arguments = parse()
    if arguments.cpp:
        sys.exit(cpp_child(arguments))
    import trio

    import broker_produce

    broker_produce.CPP_DRIVER = arguments.cpp_driver

    trio.run(main, arguments)
