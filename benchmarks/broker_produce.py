"""Broker produce/consume benchmark.

    .venv/bin/python benchmarks/broker_produce.py                  # everything, ~2 min
    .venv/bin/python benchmarks/broker_produce.py --seconds 2      # shorter runs
    .venv/bin/python benchmarks/broker_produce.py --part rollover  # only the rollover runs
    .venv/bin/python benchmarks/broker_produce.py --part senders   # issue 12's producer load
    .venv/bin/python benchmarks/broker_produce.py --part senders --generator cpp --senders 4
    .venv/bin/python benchmarks/broker_produce.py --part acl --senders 1,16 --rounds 3  # ACL's cost
    .venv/bin/python benchmarks/broker_produce.py --part acl --generator java --rounds 5  # ... under the Java producer
    .venv/bin/python benchmarks/broker_produce.py --part acl --generator presigned --rounds 5  # ... at a fixed offered load

For each flush mode (timed ``ASYNC_FLUSH``, then ``SYNC_FLUSH`` with group commit) it
starts ``trocket broker`` in a child process on a fresh temporary store (embedded name
server, port 0), then from this process:

* produces 128-byte messages (SEND_MESSAGE_V2, properties ``TAGS``/``WAIT``) with 1, 8
  and 32 concurrent senders spread over 4 connections, each sender waiting for its
  answer before the next send (synchronous sends, as a real producer's ``send()``),
  for ``--seconds`` each; prints TPS, mean and p99 latency and the share of wall time
  the broker spent inside the commit log's append lock (GET_BROKER_RUNTIME_INFO's
  ``putMessageLockTimeNanosTotal`` before/after);
* then drains everything just produced with PULL_MESSAGE (32 per pull, one puller per
  queue over the 4 connections) and prints the consume TPS.

Senders (``--part senders``), the load of a real producer (issue 12): one ``ASYNC_FLUSH``
broker per load generator; for 1, 4 and 16 senders sharing ONE connection, synchronous
SEND_MESSAGE_V2 sends of 128-byte bodies (ROCKETMQ header serialization unless
``--serialize json``), ``--warmup`` seconds untimed, then ``--seconds`` timed. Prints TPS,
p50/p99 latency and the broker's CPU time per message: user+sys of the broker process
from ``/proc/PID/stat`` over the timed window only, divided by the messages sent in it.
Two load generators: trio tasks of this process on one :class:`RemotingClient`
(``python``), and N threads through one real C++ producer (``cpp``), which routes
through the embedded name server. The C++ producer is the library inside PyPI's
``rocketmq`` (librocketmq), driven from native threads by ``benchmarks/cpp_producer.c``
(``--cpp-driver native``, the default; built with ``$CC`` on first use), as Java's
producer threads send, or from Python threads through the package's binding
(``benchmarks/cpp_producer.py``, ``--cpp-driver python``): those take turns on the GIL,
which costs the generator 20 to 30 µs more CPU per send here. Every run prints the
generator's own CPU per message too (``client CPU``): the two cores are shared, so a
busier client leaves the broker less. The Python generator shares the 2 cores and may
be the limit itself; the broker's CPU per message is the figure that compares.
``--broker-pythonpath DIR`` runs the broker from another tree (laid out as the
``trocket`` package in ``DIR``) under the same load generator, for before/after runs;
``--compare DIR --rounds N`` runs the python generator against both brokers, one window
each in turn per round, and prints the medians and the TPS ratio (before/after in one
run); ``--codecs both`` runs each senders run twice, the broker with pure-Python codecs
(``TROCKET_PURE=1``) and with the compiled accelerator; ``benchmarks/instructions.py``
gives the steadier instruction count per message. ``--keys`` gives the python
generator's messages a unique key (``UNIQ_KEY``, as a real producer's) and a ``KEYS``
entry each: what the broker's index (``messageIndexEnable``) stores; ``--index`` runs
them against two brokers of this tree, the index on and off, in turn every round (the
index's cost per message, side by side):

    .venv/bin/python benchmarks/broker_produce.py --part senders --generator python --keys --index --rounds 5

Floor (``--part floor``): what the C++ client gets from the fastest responders of the
broker's shape, beside ``trocket broker`` under the same client and load. The floor is
``benchmarks/floor_responder.py``: it answers every send with a canned success answer
of trocket's exact shape (the opaque patched in) and everything else with code 0, in
four loops (``--floor-modes``): a blocking thread per connection, a plain ``epoll``
loop, trio's ``SocketStream`` (``trio``), and trio with the syscalls made directly as
trocket's connection makes them (``trio-fd``). The C++ client finds the floor through
a real ``trocket broker`` whose embedded name server advertises the floor's port
(``--advertise``). For each ``--senders`` count and ``--rounds`` round, each floor
mode, then ``trocket broker`` (and with ``--compare DIR`` the broker of the tree laid
out as the ``trocket`` package in ``DIR``: before/after) run one window each, in turn
(every other round in reverse order) so that the machine's drift hits all alike; prints
TPS, p50/p99 and the responder's CPU per message (user + sys from ``/proc``), then the
medians. ``--floor-modes ''`` leaves the floors out (a before/after of brokers only).

    .venv/bin/python benchmarks/broker_produce.py --part floor --senders 4,16 --seconds 3 --rounds 2 --compare /tmp/base

Rollover (``--part rollover``): a send that rolls the commit log over to a new segment
runs on its connection's reader. With the next segment made ahead
(``allocateMappedFileAhead=true``, the default) it takes a ready file; without, it
creates and reserves the file itself. Four ``ASYNC_FLUSH`` brokers, each given a
``broker.conf``: segments of ``--rollover-segment`` bytes (16 MiB: a rollover every
~1000 sends of ``--rollover-body``-byte messages, 16 KiB) or of 1 GiB (none in the run), each with
allocation ahead on and off; ``--rollover-senders`` senders on one connection. Prints
p50/p99/max send latency per run, the latency of the sends that rolled the log over
(their record opens a segment: the offset in their msgId), and per setting p99 with
rollovers / p99 without and the rolling sends' median / p50 without. (A run has
hundreds of sends per rollover, so its p99 barely moves either way; the rolling sends'
own latency is where creating the segment inline shows.)
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from pathlib import Path

import trio

from trocket.codecs.acl import ACCESS_KEY, SIGNATURE, AclSigningHook
from trocket.codecs.bodies.fastjson import loads
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from trocket.remoting import ClientConfig, RemotingClient

ACCEPTANCE = Path(__file__).resolve().parent.parent / "tests" / "acceptance"
TOPIC = "BenchTopic"
QUEUES = 4
CONNECTIONS = 4
BODY = b"b" * 128
PROPS = "TAGS\x01bench\x02WAIT\x01true\x02"


def start_broker(
    store: str, flush: str, log_path: str, conf: dict[str, str] | None = None,
    namesrv_listen: str = "127.0.0.1:0", extra_args: tuple[str, ...] = (), listen: str = "127.0.0.1:0",
    pythonpath: str | None = None, launcher: tuple[str, ...] = ("-m", "trocket"),
) -> tuple[subprocess.Popen, str]:
    """Start ``trocket broker`` (with a broker.conf holding ``conf`` when given, and
    ``extra_args`` on its command line; ``pythonpath``: as ``--broker-pythonpath``, for
    this broker only; ``launcher``: what Python runs, given ``broker`` and the
    arguments, e.g. ``blocking_send.py``)."""
    extra: list[str] = list(extra_args)
    if conf:
        conf_path = os.path.join(os.path.dirname(log_path), "broker.conf")
        with open(conf_path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
        extra += ["-c", conf_path]
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [
            sys.executable, *launcher, "broker", *extra,
            "--store", store, "--listen", listen, "--namesrv-listen", namesrv_listen,
            "--flush", flush, "--log-level", "INFO",
        ],
        stdout=log, stderr=subprocess.STDOUT, env=broker_env(pythonpath), cwd=tempfile.gettempdir(),
    )
    return proc, wait_for_boot(proc, log_path)


def wait_for_boot(proc: subprocess.Popen, log_path: str, timeout: float = 30) -> str:
    """The address a broker child says in its log it serves on ("boot success"); kills
    it and raises with the log if it exits or does not say so within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log_path) as f:
            for line in f:
                if "boot success" in line:
                    return line.split("The broker[", 1)[1].split("]", 1)[0].split(", ", 1)[1]
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("broker did not start:\n" + open(log_path).read())


async def send_burst(
    client: RemotingClient, addr: str, senders: int, count: int,
    serialize_type: SerializeType = SerializeType.JSON,
) -> None:
    """``count`` synchronous sends (:func:`send_request`) from ``senders`` tasks sharing
    ``client``'s one connection; raises on a failed send."""
    left = [count]

    async def sender(i: int) -> None:
        while left[0] > 0:
            left[0] -= 1
            r = await client.invoke_sync(addr, send_request(i % QUEUES, BODY, serialize_type), 60)
            if r.code != 0:
                raise RuntimeError(f"send failed: {r.code} {r.remark}")

    async with trio.open_nursery() as nursery:
        for i in range(senders):
            nursery.start_soon(sender, i)


#: ``--broker-pythonpath``: the broker child's PYTHONPATH (None: inherited), to run
#: another tree's broker against the same load generator (before/after comparisons)
BROKER_PYTHONPATH: str | None = None


#: ``--codecs``: the broker child's TROCKET_PURE (None: inherited; True: pure-Python
#: codecs; False: the compiled accelerator)
BROKER_PURE: bool | None = None


def broker_env(pythonpath: str | None = None) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if pythonpath is not None:
        env.pop("TROCKET_PURE", None)
        env["PYTHONPATH"] = pythonpath
        return env
    if BROKER_PURE is not None:
        env.pop("TROCKET_PURE", None)
        if BROKER_PURE:
            env["TROCKET_PURE"] = "1"
    if BROKER_PYTHONPATH is not None:
        env.pop("PYTHONPATH", None)
        if BROKER_PYTHONPATH:
            env["PYTHONPATH"] = BROKER_PYTHONPATH
    return env


def stop_broker(proc: subprocess.Popen) -> None:
    proc.send_signal(2)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    r = await client.invoke_sync(addr, RemotingCommand.request(28), 5)
    return loads(r.body)["table"]


#: ``--keys``: every message with a unique key and a KEYS entry (the index's input)
KEYS = False
_key_counter = itertools.count()
_KEY_PREFIX = f"7F000001{os.getpid() & 0xFFFF:04X}B2C3D4E5"


def _props() -> str:
    if not KEYS:
        return PROPS
    n = next(_key_counter)
    return f"{PROPS}UNIQ_KEY\x01{_KEY_PREFIX}{n:012X}\x02KEYS\x01order-{n}\x02"


def send_request(
    queue_id: int, body: bytes = BODY, serialize_type: SerializeType = SerializeType.JSON
) -> RemotingCommand:
    h = SendMessageRequestHeaderV2(
        a="BenchProducer", b=TOPIC, c="TBW102", d=QUEUES, e=queue_id, f=0,
        g=int(time.time() * 1000), h=0, i=_props(), j=0, k=False,
    )
    return RemotingCommand.request(310, h, body=body, serialize_type=serialize_type)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of process ``pid`` so far (``/proc/PID/stat``), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_ns(pid: int) -> int:
    """CPU time of process ``pid``'s threads so far, in ns (``/proc/PID/task/*/schedstat``:
    the scheduler's own count, where ``/proc/PID/stat`` rounds to clock ticks of 10 ms; a
    thread that ends between two samples takes its time with it)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def cpu_per_message(cpu0: tuple[float, float], cpu1: tuple[float, float], count: int) -> dict:
    user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    n = max(1, count)
    return {"cpu_us": 1e6 * (user + system) / n, "user_us": 1e6 * user / n, "sys_us": 1e6 * system / n}


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``; 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def physical_offset(msg_id: str) -> int:
    """The commit-log offset in an offset message id (host, port, then 8-byte offset)."""
    return int(msg_id[-16:], 16)


async def produce(
    clients: list[RemotingClient],
    addr: str,
    senders: int,
    seconds: float,
    body: bytes = BODY,
    segment: int = 0,
) -> dict:
    """Synchronous sends for ``seconds``. With ``segment``, the latencies of the sends
    whose record opened a commit-log segment (the ones that rolled the log over) are
    collected apart too."""
    count = 0
    errors = 0
    latencies: list[float] = []
    rolled: list[float] = []
    stop_at = trio.current_time() + seconds

    async def sender(i: int) -> None:
        nonlocal count, errors
        client = clients[i % len(clients)]
        q = i % QUEUES
        while trio.current_time() < stop_at:
            t0 = trio.current_time()
            r = await client.invoke_sync(addr, send_request(q, body), 10)
            latencies.append(trio.current_time() - t0)
            if segment and r.code == 0 and physical_offset(r.ext_fields["msgId"]) % segment == 0:
                rolled.append(latencies[-1])
            if r.code == 0:
                count += 1
            else:
                errors += 1

    before = await runtime_info(clients[0], addr)
    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(senders):
            nursery.start_soon(sender, i)
    elapsed = time.perf_counter() - t0
    after = await runtime_info(clients[0], addr)
    lock_ns = int(after["putMessageLockTimeNanosTotal"]) - int(before["putMessageLockTimeNanosTotal"])
    max_offset = int(after["commitLogMaxOffset"])
    return {
        "tps": count / elapsed,
        "count": count,
        "errors": errors,
        "latency_ms": 1000 * sum(latencies) / max(1, len(latencies)),
        "p50_ms": 1000 * percentile(latencies, 50),
        "p99_ms": 1000 * percentile(latencies, 99),
        "max_ms": 1000 * max(latencies, default=0.0),
        "rolled_ms": [1000 * x for x in rolled],
        "lock_share": lock_ns / (elapsed * 1e9),
        "lock_us_per_msg": lock_ns / max(1, count) / 1000,
        "start_offset": int(before["commitLogMaxOffset"]),
        "end_offset": max_offset,
    }


async def consume(clients: list[RemotingClient], addr: str) -> dict:
    total = 0
    nbytes = 0

    async def puller(q: int) -> None:
        nonlocal total, nbytes
        client = clients[q % len(clients)]
        offset = 0
        while True:
            h = PullMessageRequestHeader(
                consumerGroup="BenchConsumer", topic=TOPIC, queueId=q, queueOffset=offset, maxMsgNums=32,
                sysFlag=4, commitOffset=0, suspendTimeoutMillis=0, subscription="*", subVersion=0,
            )
            r = await client.invoke_sync(addr, RemotingCommand.request(11, h), 10)
            if r.code != 0:
                return
            offset = int(r.ext_fields["nextBeginOffset"])
            nbytes += len(r.body)
            total += offset - int(h.queueOffset)

    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for q in range(QUEUES):
            nursery.start_soon(puller, q)
    elapsed = time.perf_counter() - t0
    return {"tps": total / elapsed, "count": total, "mb_s": nbytes / elapsed / 1e6}


async def bench_mode(flush: str, seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        proc, addr = start_broker(os.path.join(tmp, "store"), flush, os.path.join(tmp, "broker.log"))
        try:
            clients = [RemotingClient(ClientConfig(default_timeout=10)) for _ in range(CONNECTIONS)]
            async with trio.open_nursery() as nursery:
                for c in clients:
                    await nursery.start(c.run)
                # warm up: create the topic, open every connection
                for c in clients:
                    for q in range(QUEUES):
                        await c.invoke_sync(addr, send_request(q), 10)
                label = "timed (ASYNC_FLUSH)" if flush == "async" else "sync (SYNC_FLUSH)"
                for senders in (1, 8, 32):
                    res = await produce(clients, addr, senders, seconds)
                    print(
                        f"produce  flush={label:20s} senders={senders:3d} conns={CONNECTIONS}  "
                        f"TPS={res['tps']:9.0f}  mean latency={res['latency_ms']:6.2f} ms  "
                        f"p99={res['p99_ms']:6.2f} ms  "
                        f"append-lock share={100 * res['lock_share']:5.2f}% "
                        f"({res['lock_us_per_msg']:.2f} us/msg)  errors={res['errors']}",
                        flush=True,
                    )
                res = await consume(clients, addr)
                print(
                    f"consume  flush={label:20s} pullers={QUEUES} conns={CONNECTIONS}  "
                    f"TPS={res['tps']:9.0f}  ({res['count']} messages, {res['mb_s']:.1f} MB/s)",
                    flush=True,
                )
                for c in clients:
                    await c.aclose()
                nursery.cancel_scope.cancel()
        finally:
            stop_broker(proc)


async def bench_rollover_run(
    segment: int, ahead: bool, seconds: float, senders: int, body: bytes
) -> dict:
    """One ASYNC_FLUSH broker with ``segment``-byte commit-log segments."""
    conf = {"mappedFileSizeCommitLog": str(segment), "allocateMappedFileAhead": str(ahead).lower()}
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        proc, addr = start_broker(
            os.path.join(tmp, "store"), "async", os.path.join(tmp, "broker.log"), conf
        )
        try:
            client = RemotingClient(ClientConfig(default_timeout=10))
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)
                for q in range(QUEUES):  # warm up: topic, connection, first segment
                    await client.invoke_sync(addr, send_request(q, body), 10)
                res = await produce([client], addr, senders, seconds, body, segment)
                await client.aclose()
                nursery.cancel_scope.cancel()
        finally:
            stop_broker(proc)
    res["rollovers"] = res["end_offset"] // segment - res["start_offset"] // segment
    return res


async def bench_rollover(seconds: float, senders: int, segment: int, body_size: int) -> None:
    body = b"r" * body_size
    print(
        f"rollover: {body_size}-byte bodies, {senders} sender(s) on 1 connection, ASYNC_FLUSH, "
        f"{seconds:.0f} s per run; segments of {segment} bytes vs 1 GiB",
        flush=True,
    )
    for ahead in (True, False):
        label = "on " if ahead else "off"
        runs: dict[int, dict] = {}
        for size in (segment, 1 << 30):
            res = runs[size] = await bench_rollover_run(size, ahead, seconds, senders, body)
            rolled = res["rolled_ms"]
            print(
                f"rollover allocate-ahead={label} segment={size:>10d} B  "
                f"rollovers={res['rollovers']:4d}  sends={res['count']:6d}  TPS={res['tps']:7.0f}  "
                f"p50={res['p50_ms']:6.3f} ms  p99={res['p99_ms']:6.3f} ms  max={res['max_ms']:7.3f} ms  "
                + (f"rolling sends: median={percentile(rolled, 50):6.3f} ms max={max(rolled):7.3f} ms  "
                   if rolled else "")
                + f"errors={res['errors']}",
                flush=True,
            )
        with_r, without = runs[segment], runs[1 << 30]
        rolled = with_r["rolled_ms"]
        print(
            f"rollover allocate-ahead={label} p99 with rollovers / without = "
            f"{with_r['p99_ms'] / max(without['p99_ms'], 1e-9):.2f}"
            + (f";  rolling sends' median / p50 without = "
               f"{percentile(rolled, 50) / max(without['p50_ms'], 1e-9):.2f}" if rolled else ""),
            flush=True,
        )


SENDER_COUNTS = (1, 4, 16)


def senders_line(gen: str, senders: int, res: dict) -> str:
    codecs = "" if BROKER_PURE is None else ("codecs=pure      " if BROKER_PURE else "codecs=compiled  ")
    return (
        f"senders  gen={gen:6s} senders={senders:3d} conns=1  {codecs}TPS={res['tps']:8.0f}  "
        f"p50={res['p50_ms']:6.3f} ms  p99={res['p99_ms']:6.3f} ms  "
        f"broker CPU={res['cpu_us']:6.1f} us/msg (user {res['user_us']:5.1f} + sys {res['sys_us']:5.1f})  "
        + (f"client CPU={res['gen_cpu_us']:6.1f} us/msg  " if "gen_cpu_us" in res else "")
        + f"({res['count']} msgs in {res['seconds']:.1f} s, "
        f"errors={res['errors']})"
    )


async def produce_window(
    client: RemotingClient, addr: str, pid: int, senders: int, warmup: float, seconds: float,
    serialize_type: SerializeType,
) -> dict:
    """``senders`` trio tasks sending synchronously through ``client`` (one connection):
    ``warmup`` seconds untimed, then ``seconds`` over which messages, latencies and the
    broker's CPU time are counted."""
    count = errors = 0
    latencies: list[float] = []
    timed = False
    stop = False
    async def sender(i: int) -> None:
        nonlocal count, errors
        q = i % QUEUES
        clock = trio.current_time
        while not stop:
            req = send_request(q, BODY, serialize_type)
            t0 = clock()
            r = await client.invoke_sync(addr, req, 10)
            if timed:
                latencies.append(clock() - t0)
                if r.code == 0:
                    count += 1
                else:
                    errors += 1

    async with trio.open_nursery() as nursery:
        for i in range(senders):
            nursery.start_soon(sender, i)
        await trio.sleep(warmup)
        cpu0, t0 = cpu_seconds(pid), time.perf_counter()
        timed = True
        await trio.sleep(seconds)
        timed = False
        cpu1, t1 = cpu_seconds(pid), time.perf_counter()
        stop = True
    elapsed = t1 - t0
    return {
        "tps": count / elapsed, "count": count, "errors": errors, "seconds": elapsed,
        "p50_ms": 1000 * percentile(latencies, 50), "p99_ms": 1000 * percentile(latencies, 99),
        **cpu_per_message(cpu0, cpu1, count),
    }


async def bench_senders_python(
    warmup: float, seconds: float, serialize_type: SerializeType, counts: tuple[int, ...] = SENDER_COUNTS
) -> None:
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        proc, addr = start_broker(os.path.join(tmp, "store"), "async", os.path.join(tmp, "broker.log"))
        try:
            client = RemotingClient(ClientConfig(default_timeout=10))
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)
                for q in range(QUEUES):  # warm up: topic, connection
                    await client.invoke_sync(addr, send_request(q, BODY, serialize_type), 10)
                for senders in counts:
                    res = await produce_window(client, addr, proc.pid, senders, warmup, seconds, serialize_type)
                    print(senders_line("python", senders, res), flush=True)
                await client.aclose()
                nursery.cancel_scope.cancel()
        finally:
            stop_broker(proc)


async def bench_senders_compare(
    warmup: float, seconds: float, serialize_type: SerializeType, counts: tuple[int, ...], rounds: int,
    compare: str | None = None, *, index: bool = False,
) -> None:
    """The python generator against two brokers running throughout, one window each per
    sender count and round, in turn (every other round in reverse order); prints each
    window, the medians and the TPS ratio per round: a before/after under one load
    generator, in one run. The two: this tree's broker and the broker of the tree in
    ``compare``; with ``index``, this tree's broker with ``messageIndexEnable=true``
    (``index-on``) and ``=false`` (``index-off``): the index's cost per message."""
    trees: list[tuple[str, str | None, dict[str, str] | None]]
    if index:
        trees = [("index-on", None, {"messageIndexEnable": "true"}), ("index-off", None, {"messageIndexEnable": "false"})]
    else:
        trees = [("trocket", None, None), ("compared", compare, None)]
    results: dict[tuple[int, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        procs: list[subprocess.Popen] = []
        try:
            brokers = []
            for label, tree, conf in trees:
                os.makedirs(os.path.join(tmp, label))
                proc, addr = start_broker(
                    os.path.join(tmp, label, "store"), "async", os.path.join(tmp, label, "broker.log"),
                    conf=conf, pythonpath=tree,
                )
                procs.append(proc)
                brokers.append((label, addr, proc.pid))
            client = RemotingClient(ClientConfig(default_timeout=10))
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)
                for _, addr, _ in brokers:
                    for q in range(QUEUES):  # warm up: topic, connection
                        await client.invoke_sync(addr, send_request(q, BODY, serialize_type), 10)
                for r in range(rounds):
                    for senders in counts:
                        for label, addr, pid in brokers if r % 2 == 0 else brokers[::-1]:
                            res = await produce_window(client, addr, pid, senders, warmup, seconds, serialize_type)
                            results.setdefault((senders, label), []).append(res)
                            print(f"round={r} {label:9s} " + senders_line("python", senders, res), flush=True)
                await client.aclose()
                nursery.cancel_scope.cancel()
        finally:
            for proc in procs:
                stop_broker(proc)
    print(f"medians over {rounds} round(s) (load {os.getloadavg()[0]:.2f}):", flush=True)
    (a, _, _), (b, _, _) = trees
    for senders in counts:
        new, old = results[(senders, a)], results[(senders, b)]
        med = {label: (statistics.median(x["tps"] for x in runs), statistics.median(x["cpu_us"] for x in runs))
               for label, runs in ((a, new), (b, old))}
        for label, (tps, cpu) in med.items():
            print(f"senders  gen=python senders={senders:3d}  {label:9s} TPS={tps:8.0f}  broker CPU={cpu:6.1f} us/msg",
                  flush=True)
        print(f"senders  gen=python senders={senders:3d}  {a} / {b}: TPS x{med[a][0] / med[b][0]:.2f} "
              "(per round: " + ", ".join(f"{x['tps'] / y['tps']:.2f}" for x, y in zip(new, old)) + "), "
              f"CPU per message x{med[a][1] / med[b][1]:.3f} (per round: "
              + ", ".join(f"{x['cpu_us'] / y['cpu_us']:.3f}" for x, y in zip(new, old)) + ")", flush=True)


ACL_YML = """\
accounts:
  - accessKey: benchProducer
    secretKey: bench-secret-key
    defaultTopicPerm: DENY
    topicPerms:
      - {topic}=PUB
  - accessKey: benchAdmin
    secretKey: bench-admin-key
    admin: true
"""
#: the account the Java generator's set-up (topic, offsets) signs with
ACL_ADMIN = ("benchAdmin", "bench-admin-key")


def start_acl_brokers(tmp: str, procs: list[subprocess.Popen]) -> list[tuple[str, subprocess.Popen, str, str]]:
    """The acl part's two brokers of this tree under ``tmp``, ``acl-off`` and ``acl-on``
    (``--acl``: :data:`ACL_YML`): (label, process, address, log path) each; every process
    started is appended to ``procs`` (the caller stops them)."""
    acl_path = os.path.join(tmp, "plain_acl.yml")
    with open(acl_path, "w") as f:
        f.write(ACL_YML.format(topic=TOPIC))
    out = []
    for label, extra in (("acl-off", ()), ("acl-on", ("--acl", acl_path))):
        os.makedirs(os.path.join(tmp, label))
        log_path = os.path.join(tmp, label, "broker.log")
        proc, addr = start_broker(os.path.join(tmp, label, "store"), "async", log_path, extra_args=extra)
        procs.append(proc)
        out.append((label, proc, addr, log_path))
    return out


class _SignOnlyHook:
    """The generator's work of signing a request (``AclSigningHook``'s own), the fields it
    added dropped again."""

    __slots__ = ("signing",)

    def __init__(self, access_key: str, secret: str) -> None:
        self.signing = AclSigningHook(access_key, secret)

    def do_before_request(self, remote_addr, request) -> None:
        before = request.ext_fields
        self.signing.do_before_request(remote_addr, request)
        if before is None:
            request.ext_fields = None
        else:
            del before[ACCESS_KEY], before[SIGNATURE]


async def bench_acl(
    warmup: float, seconds: float, serialize_type: SerializeType, counts: tuple[int, ...], rounds: int,
) -> None:
    """ACL's cost (issue 24): two brokers of this tree running throughout, one without ACL
    and one with ``--acl`` (an account allowed to publish the topic), the python generator
    signing every send for the second (``AclSigningHook``); one window each per sender count
    and round, in turn; prints each window, the medians and the broker CPU per message
    with ACL / without. (Signing costs the generator, not the broker: its CPU is apart.
    The generator of the broker without ACL computes the same signature and drops it
    (:class:`_SignOnlyHook`), so both brokers see requests arrive at the same pace: a
    slower generator would hand the broker shorter runs of reads, each paying its
    syscalls, and charge that to ACL.)"""
    results: dict[tuple[int, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        procs: list[subprocess.Popen] = []
        try:
            brokers = []
            for label, proc, addr, _ in start_acl_brokers(tmp, procs):
                hooks = [AclSigningHook("benchProducer", "bench-secret-key") if label == "acl-on"
                         else _SignOnlyHook("benchProducer", "bench-secret-key")]
                brokers.append((label, addr, proc.pid, RemotingClient(ClientConfig(default_timeout=10), hooks=hooks)))
            async with trio.open_nursery() as nursery:
                for _, addr, _, client in brokers:
                    await nursery.start(client.run)
                    for q in range(QUEUES):  # warm up: topic, connection
                        r = await client.invoke_sync(addr, send_request(q, BODY, serialize_type), 10)
                        assert r.code == 0, r.remark
                for r in range(rounds):
                    for senders in counts:
                        for label, addr, pid, client in brokers if r % 2 == 0 else brokers[::-1]:
                            res = await produce_window(client, addr, pid, senders, warmup, seconds, serialize_type)
                            results.setdefault((senders, label), []).append(res)
                            print(f"round={r} {label:8s} " + senders_line("python", senders, res), flush=True)
                for *_, client in brokers:
                    await client.aclose()
                nursery.cancel_scope.cancel()
        finally:
            for proc in procs:
                stop_broker(proc)
    print(f"medians over {rounds} round(s) (load {os.getloadavg()[0]:.2f}):", flush=True)
    for senders in counts:
        med = {label: (statistics.median(x["tps"] for x in results[(senders, label)]),
                       statistics.median(x["cpu_us"] for x in results[(senders, label)]))
               for label in ("acl-off", "acl-on")}
        for label, (tps, cpu) in med.items():
            print(f"acl  senders={senders:3d}  {label:8s} TPS={tps:8.0f}  broker CPU={cpu:6.1f} us/msg", flush=True)
        print(f"acl  senders={senders:3d}  broker CPU per message with ACL / without: "
              f"x{med['acl-on'][1] / med['acl-off'][1]:.3f}", flush=True)


def bench_acl_java(seconds: float, counts: tuple[int, ...], rounds: int) -> None:
    """ACL's cost with the Java 4.9.8 producer as the load (``--generator java``): the same
    program (tests/acceptance/java/src/AclProducerBench.java: ``DefaultMQProducer`` with
    ``AclClientRPCHook``, N sync-sending threads) against two brokers of this tree, one
    with ``--acl`` and one without (which ignores the signature): the same client work at
    the same pace for both, one window each per sender count and round, in turn (every
    other round in reverse order). A window's broker CPU per message is the broker's
    user + system time over the whole program (its 1 s warm-up too) divided by the
    messages stored meanwhile. Needs the Java bundle (``../shared/rocketmq-4.9.8``) and a
    JDK, as tests/acceptance/java does."""
    sys.path[:0] = [str(ACCEPTANCE), str(ACCEPTANCE / "java")]
    from acc_tools import RawClient
    from java_tools import compile_programs, find_bundle, finish_program, hostport, start_program

    bundle, why = find_bundle()
    if bundle is None:
        sys.exit(f"broker_produce.py --part acl --generator java: {why}")
    classes, _ = compile_programs(bundle)
    results: dict[tuple[int, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        procs: list[subprocess.Popen] = []
        try:
            brokers = []
            for label, proc, addr, log_path in start_acl_brokers(tmp, procs):
                with open(log_path) as f:
                    namesrv = next(line for line in f if "boot success" in line).rsplit(" name server is ", 1)[1]
                raw = RawClient(hostport(addr), acl=ACL_ADMIN)  # (signed: the broker without ACL ignores it)
                raw.create_topic(TOPIC, queues=QUEUES)
                brokers.append((label, namesrv.strip(), proc.pid, raw))
            time.sleep(1)  # the name servers learn the topic
            for r in range(-1, rounds):  # round -1: warm-up, not counted
                for senders in counts:
                    for label, namesrv, pid, raw in brokers if r % 2 == 0 else brokers[::-1]:
                        stored0 = sum(raw.max_offset(TOPIC, q) for q in range(QUEUES))
                        cpu0 = cpu_seconds(pid)
                        program = start_program(bundle, classes, "AclProducerBench",
                                                [namesrv, TOPIC, str(senders), str(int(seconds)), str(len(BODY)),
                                                 "benchProducer", "bench-secret-key"], home=Path(tmp) / "java")
                        lines = finish_program(program, seconds + 120)
                        cpu1 = cpu_seconds(pid)
                        stored = sum(raw.max_offset(TOPIC, q) for q in range(QUEUES)) - stored0
                        result = next((line for line in lines if line.startswith("RESULT ")), f"RESULT none {lines}")
                        cpu = cpu_per_message(cpu0, cpu1, stored)["cpu_us"]
                        if r >= 0:
                            results.setdefault((senders, label), []).append(cpu)
                        print(f"{'warm-up' if r < 0 else f'round={r}'} {label:8s} senders={senders:3d} "
                              f"{result[7:]}  stored={stored}  broker CPU={cpu:6.1f} us/msg", flush=True)
            for *_, raw in brokers:
                raw.close()
        finally:
            for proc in procs:
                stop_broker(proc)
    print(f"medians over {rounds} round(s) (load {os.getloadavg()[0]:.2f}):", flush=True)
    for senders in counts:
        off, on = results[(senders, "acl-off")], results[(senders, "acl-on")]
        print(f"acl  senders={senders:3d}  java generator  broker CPU acl-off {statistics.median(off):6.1f} "
              f"acl-on {statistics.median(on):6.1f} us/msg: with ACL / without x"
              f"{statistics.median(on) / statistics.median(off):.3f} (per round: "
              + ", ".join(f"{b / a:.3f}" for a, b in zip(off, on)) + ")", flush=True)


#: the presigned generator's arms: (label, broker, signed)
PRESIGNED_ARMS = (("off", "acl-off", False), ("off+sig", "acl-off-2", True), ("on", "acl-on", True))


def parse_loads(text: str) -> tuple[tuple[float, int], ...]:
    """``--loads``: comma-separated ``RATExBATCH`` (messages a second, frames per write)."""
    out = []
    for item in text.split(","):
        rate, _, batch = item.partition("x")
        out.append((float(rate), int(batch or 1)))
    return tuple(out)


def bench_acl_presigned(warmup: float, seconds: float, loads: tuple[tuple[float, int], ...], rounds: int) -> None:
    """ACL's cost at a fixed offered load (``--generator presigned``): three brokers of this
    tree at once, and ``benchmarks/presigned_producer.py`` as the load, one process per
    window, offering every broker the same requests at the same moments (encoded and
    signed once, their opaque patched per send, written ``batch`` at a time every
    ``batch / rate`` seconds whatever the answers do). The arms: ``off`` a broker without
    ACL sent unsigned requests (what a deployment without ACL sees), ``off+sig`` a second
    broker without ACL sent the signed ones (it decodes the two extra fields and ignores
    them), ``on`` the broker with ACL sent the signed ones. All three run in the same
    window, so the machine's other load hits them alike; prints each window, the medians,
    and the broker CPU per message of ``on`` against each (per round, and the median)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "presigned_producer.py")
    results: dict[tuple[int, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        procs: list[subprocess.Popen] = []
        try:
            brokers = {label: (addr, proc.pid) for label, proc, addr, _ in start_acl_brokers(tmp, procs)}
            os.makedirs(os.path.join(tmp, "acl-off-2"))
            proc, addr = start_broker(os.path.join(tmp, "acl-off-2", "store"), "async",
                                      os.path.join(tmp, "acl-off-2", "broker.log"))
            procs.append(proc)
            brokers["acl-off-2"] = (addr, proc.pid)
            arms = sorted(PRESIGNED_ARMS, key=lambda arm: arm[2])  # the generator lists unsigned targets first
            argv = [sys.executable, script, "--access-key", "benchProducer", "--secret-key", "bench-secret-key"]
            for _, broker, signed in arms:
                argv += ["--signed-addr" if signed else "--addr", brokers[broker][0]]
            pids = [brokers[broker][1] for _, broker, _ in arms]
            for r in range(-1, rounds):  # round -1: warm-up (and the topic created), not counted
                for i, (rate, batch) in enumerate(loads):
                    res = multi_window(argv + ["--rate", str(rate), "--batch", str(batch), "--warmup", str(warmup),
                                               "--seconds", str(seconds)], pids, seconds + 30)
                    for (arm, _, _), fig in zip(arms, res["targets"]):
                        if r >= 0:
                            results.setdefault((i, arm), []).append(fig)
                        print(f"{'warm-up' if r < 0 else f'round={r}'} {arm:8s} rate={rate:6.0f}x{batch:<3d} "
                              f"TPS={fig['tps']:8.0f}  p50={fig['p50_ms']:6.3f} ms  p99={fig['p99_ms']:6.3f} ms  "
                              f"broker CPU={fig['cpu_us']:6.2f} us/msg (user {fig['user_us']:5.2f} + sys "
                              f"{fig['sys_us']:5.2f})  errors={fig['errors']}"
                              + (f" first: {fig['first_error']}" if fig["first_error"] else ""), flush=True)
                    print(f"{'':8s} client CPU={res['gen_cpu_us']:5.2f} us/msg (all brokers' messages)", flush=True)
        finally:
            for proc in procs:
                stop_broker(proc)
    print(f"medians over {rounds} round(s) (load {os.getloadavg()[0]:.2f}):", flush=True)
    for i, (rate, batch) in enumerate(loads):
        cpu = {arm: [x["cpu_us"] for x in results[(i, arm)]] for arm, _, _ in PRESIGNED_ARMS}
        tps = {arm: statistics.median(x["tps"] for x in results[(i, arm)]) for arm, _, _ in PRESIGNED_ARMS}
        print(f"acl  presigned rate={rate:.0f}x{batch}  broker CPU " + "  ".join(
            f"{arm} {statistics.median(v):6.2f} us/msg (TPS {tps[arm]:.0f})" for arm, v in cpu.items()), flush=True)
        for base in ("off", "off+sig"):
            per_round = [b / a for a, b in zip(cpu[base], cpu["on"])]
            print(f"acl  presigned rate={rate:.0f}x{batch}  with ACL / {base}: x{statistics.median(per_round):.3f} "
                  f"(median of the rounds' ratios; rounds {min(per_round):.3f}-{max(per_round):.3f}: "
                  + ", ".join(f"{x:.3f}" for x in per_round) + ")", flush=True)


def multi_window(argv: list[str], pids: list[int], wait_s: float) -> dict:
    """Run ``benchmarks/presigned_producer.py`` (``argv``) against several brokers at once
    (``pids``, in the order of its targets): as :func:`child_window`, each broker's CPU
    sampled at ``start`` and ``end``; each target's figures get ``tps`` and its broker's
    CPU per message, the result the generator's own CPU per message over all of them."""
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
    assert child.stdout is not None
    cpu0 = cpu1 = [(0.0, 0.0)] * len(pids)
    gen0 = gen1 = (0.0, 0.0)
    result: dict = {}
    ns0 = ns1 = [0] * len(pids)
    for line in child.stdout:
        if line.startswith("start"):
            ns0, cpu0, gen0 = [cpu_ns(p) for p in pids], [cpu_seconds(p) for p in pids], cpu_seconds(child.pid)
        elif line.startswith("end"):
            ns1, cpu1, gen1 = [cpu_ns(p) for p in pids], [cpu_seconds(p) for p in pids], cpu_seconds(child.pid)
        elif line.startswith("{"):
            result = json.loads(line)
    child.wait(wait_s)
    if not result:
        raise RuntimeError(f"benchmarks/presigned_producer.py failed (exit {child.returncode})")
    for fig, c0, c1, n0, n1 in zip(result["targets"], cpu0, cpu1, ns0, ns1):
        fig["tps"] = fig["count"] / result["seconds"]
        fig.update(cpu_per_message(c0, c1, fig["count"]))  # user / sys: clock ticks
        fig["cpu_us"] = (n1 - n0) / 1000 / max(1, fig["count"])  # the total: the scheduler's ns
    result["gen_cpu_us"] = cpu_per_message(gen0, gen1, sum(f["count"] for f in result["targets"]))["cpu_us"]
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_window(argv: list[str], pid: int, what: str, wait_s: float = 30) -> dict:
    """Run a load-generating child (``argv``) that prints ``start`` and ``end`` around its
    timed window and then its figures as one JSON line; the broker's (``pid``) CPU time
    is sampled at ``start`` and ``end``, and so is the child's own. Returns the figures with
    ``tps``, the broker's CPU per message and the child's (``gen_cpu_us``) added."""
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
    assert child.stdout is not None
    cpu0 = cpu1 = gen0 = gen1 = (0.0, 0.0)
    result: dict = {}
    for line in child.stdout:
        if line.startswith("start"):
            cpu0, gen0 = cpu_seconds(pid), cpu_seconds(child.pid)
        elif line.startswith("end"):
            cpu1, gen1 = cpu_seconds(pid), cpu_seconds(child.pid)
        elif line.startswith("{"):
            result = json.loads(line)
    child.wait(wait_s)
    if not result:
        raise RuntimeError(f"{what} failed (exit {child.returncode})")
    count = result["count"]
    result["tps"] = count / result["seconds"]
    result.update(cpu_per_message(cpu0, cpu1, count))
    result["gen_cpu_us"] = cpu_per_message(gen0, gen1, count)["cpu_us"]
    return result


#: ``--cpp-driver``: how the C++ client is driven: ``native`` (from C threads:
#: ``cpp_producer.c``) or ``python`` (its PyPI binding, from Python threads, which take
#: turns on the GIL: ``cpp_producer.py``)
CPP_DRIVER = "native"


def native_producer() -> str:
    """``benchmarks/cpp_producer.c`` built against the ``rocketmq`` wheel's librocketmq
    (with ``$CC``, default ``cc``), into a cache under the temporary directory keyed by
    the source and the library; the executable's path."""
    import hashlib

    import rocketmq  # the wheel that carries librocketmq.so

    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "cpp_producer.c")
    lib_dir = os.path.dirname(os.path.abspath(rocketmq.__file__))
    lib = os.path.join(lib_dir, "librocketmq.so")
    with open(src, "rb") as f:
        key = hashlib.sha256(f.read() + lib.encode() + str(os.stat(lib).st_mtime_ns).encode()).hexdigest()[:16]
    exe = os.path.join(tempfile.gettempdir(), "trocket-bench-cpp", f"cpp_producer-{key}")
    if not os.path.exists(exe):
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        cc = os.environ.get("CC", "cc")
        tmp = f"{exe}.{os.getpid()}.tmp"  # another run may be building it too
        subprocess.run([cc, "-O2", "-o", tmp, src, lib, f"-Wl,-rpath,{lib_dir}", "-lpthread", "-lm"], check=True)
        os.replace(tmp, exe)
    return exe


def add_cpp_driver_option(parser: argparse.ArgumentParser) -> None:
    """``--cpp-driver``, for every benchmark that runs the C++ client (the caller puts
    the parsed value in :data:`CPP_DRIVER`)."""
    parser.add_argument("--cpp-driver", choices=("native", "python"), default="native",
                        help="the C++ client's senders: native threads of benchmarks/cpp_producer.c, built "
                             "with $CC (default), or threads of its Python binding, which take turns on the GIL")


def cpp_argv(namesrv: str, threads: int, warmup: float, seconds: float) -> list[str]:
    """The command of the C++ client with ``threads`` senders of :data:`TOPIC`, driven as
    :data:`CPP_DRIVER` says; it prints ``start``, ``end`` and its figures (one JSON line)."""
    args = ["--namesrv", namesrv, "--topic", TOPIC, "--threads", str(threads),
            "--body", str(len(BODY)), "--warmup", str(warmup), "--seconds", str(seconds)]
    if CPP_DRIVER == "native":
        return [native_producer(), *args]
    return [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpp_producer.py"), *args]


def cpp_window(namesrv: str, pid: int, threads: int, warmup: float, seconds: float) -> dict:
    """The C++ client with ``threads`` senders (:func:`cpp_argv`; see :func:`child_window`)."""
    return child_window(cpp_argv(namesrv, threads, warmup, seconds), pid, f"the C++ client ({CPP_DRIVER} driver)")


async def bench_senders_cpp(warmup: float, seconds: float, counts: tuple[int, ...] = SENDER_COUNTS) -> None:
    namesrv = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        proc, addr = start_broker(
            os.path.join(tmp, "store"), "async", os.path.join(tmp, "broker.log"), namesrv_listen=namesrv
        )
        try:
            client = RemotingClient(ClientConfig(default_timeout=10))
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)
                for q in range(QUEUES):  # create the topic before the C++ client asks its route
                    await client.invoke_sync(addr, send_request(q), 10)
                await client.aclose()
                nursery.cancel_scope.cancel()
            for threads in counts:
                res = await trio.to_thread.run_sync(cpp_window, namesrv, proc.pid, threads, warmup, seconds)
                print(senders_line("cpp", threads, res), flush=True)
                for err in res.get("first_errors", []):
                    print(f"         error: {err}", flush=True)
        finally:
            stop_broker(proc)


FLOOR_MODES = ("blocking", "epoll", "trio", "trio-fd")


def start_floor(port: int, mode: str) -> subprocess.Popen:
    """``benchmarks/floor_responder.py`` in ``mode`` on ``port``, once it listens."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor_responder.py")
    proc = subprocess.Popen(
        [sys.executable, script, "--port", str(port), "--mode", mode],
        stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir(),
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "listening":
        proc.kill()
        raise RuntimeError(f"floor responder ({mode}) did not start")
    return proc


async def create_topic(addr: str) -> None:
    """Send to every queue of the benchmark topic at ``addr`` (auto-creates it; the
    broker registers it with its name server before answering)."""
    client = RemotingClient(ClientConfig(default_timeout=10))
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        for q in range(QUEUES):
            await client.invoke_sync(addr, send_request(q), 10)
        await client.aclose()
        nursery.cancel_scope.cancel()


async def bench_floor(
    warmup: float, seconds: float, counts: tuple[int, ...], modes: tuple[str, ...], rounds: int,
    compare: str | None,
) -> None:
    """The C++ client against the floor responders and ``trocket broker`` (and, with
    ``compare``, the broker of another tree), alternating within each round.

    The floor gets its routes from a real ``trocket broker`` whose embedded name server
    advertises the floor's port (``--advertise``): the C++ client asks that name server
    for the topic, then heartbeats and sends to the floor."""
    floor_port = free_port()
    floor_ns = f"127.0.0.1:{free_port()}"
    results: dict[tuple[int, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="trocket-bench-") as tmp:
        procs: list[subprocess.Popen] = []
        try:
            listen = f"127.0.0.1:{free_port()}"
            router, _ = start_broker(
                os.path.join(tmp, "router"), "async", os.path.join(tmp, "router.log"), namesrv_listen=floor_ns,
                extra_args=("--advertise", f"127.0.0.1:{floor_port}", "--segment-size", "32m"), listen=listen,
            )
            procs.append(router)
            await create_topic(listen)
            brokers: list[tuple[str, str, int]] = []  # (label, name server, pid)
            trees = [("trocket", None)] + ([("compared", compare)] if compare else [])
            for label, tree in trees:
                ns = f"127.0.0.1:{free_port()}"
                proc, addr = start_broker(
                    os.path.join(tmp, label), "async", os.path.join(tmp, f"{label}.log"), namesrv_listen=ns,
                    pythonpath=tree,
                )
                procs.append(proc)
                await create_topic(addr)
                brokers.append((label, ns, proc.pid))
            runs: list[tuple[str, str | None, int]] = [(f"floor {m}", m, 0) for m in modes]
            runs += [(label, ns, pid) for label, ns, pid in brokers]
            for r in range(rounds):
                for threads in counts:
                    # every other round in reverse order: a run's place in the round
                    # (what ran just before it) must not favour one responder
                    for label, target, pid in runs if r % 2 == 0 else runs[::-1]:
                        if label.startswith("floor "):
                            floor = start_floor(floor_port, target)
                            try:
                                res = await trio.to_thread.run_sync(
                                    cpp_window, floor_ns, floor.pid, threads, warmup, seconds
                                )
                            finally:
                                floor.terminate()
                                floor.wait(10)
                        else:
                            res = await trio.to_thread.run_sync(cpp_window, target, pid, threads, warmup, seconds)
                        results.setdefault((threads, label), []).append(res)
                        print(floor_line(r, threads, label, res), flush=True)
        finally:
            for proc in procs:
                stop_broker(proc)
    print(f"medians over {rounds} round(s) (load {os.getloadavg()[0]:.2f}):", flush=True)
    for threads in counts:
        medians = {
            label: (sorted(x["tps"] for x in runs)[len(runs) // 2], sorted(x["cpu_us"] for x in runs)[len(runs) // 2])
            for (t, label), runs in results.items() if t == threads
        }
        for label, (tps, cpu) in medians.items():
            print(f"floor    senders={threads:3d}  {label:16s} TPS={tps:8.0f}  responder CPU={cpu:6.1f} us/msg", flush=True)
        floors = {label[6:]: m for label, m in medians.items() if label.startswith("floor ")}
        for label, (tps, cpu) in medians.items():
            if floors and not label.startswith("floor "):  # each broker against each floor
                print(f"floor    senders={threads:3d}  {label} vs " + ", ".join(
                    f"{mode}: TPS x{tps / ftps:.2f}, CPU +{cpu - fcpu:.1f} us" for mode, (ftps, fcpu) in floors.items()
                ), flush=True)


def floor_line(r: int, senders: int, label: str, res: dict) -> str:
    return (
        f"floor    round={r} senders={senders:3d}  {label:16s} TPS={res['tps']:8.0f}  "
        f"p50={res['p50_ms']:6.3f} ms  p99={res['p99_ms']:6.3f} ms  "
        f"responder CPU={res['cpu_us']:6.1f} us/msg (user {res['user_us']:5.1f} + sys {res['sys_us']:5.1f})  "
        f"client CPU={res['gen_cpu_us']:6.1f} us/msg  errors={res['errors']}"
    )


async def main(args: argparse.Namespace) -> None:
    seconds = args.seconds
    if args.part in ("all", "senders"):
        ser = SerializeType.ROCKETMQ if args.serialize == "rocketmq" else SerializeType.JSON
        print(f"senders: {len(BODY)}-byte bodies, SEND_MESSAGE_V2, one connection, ASYNC_FLUSH, "
              f"{args.warmup:.0f} s warm-up + {seconds:.0f} s timed per run, python generator "
              f"{ser.name} headers (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)", flush=True)
        global BROKER_PURE
        for pure in {"inherit": (None,), "pure": (True,), "compiled": (False,), "both": (True, False)}[args.codecs]:
            BROKER_PURE = pure
            if args.generator in ("both", "python"):
                if args.compare or args.index:
                    await bench_senders_compare(args.warmup, seconds, ser, args.senders, args.rounds, args.compare,
                                                index=args.index)
                else:
                    await bench_senders_python(args.warmup, seconds, ser, args.senders)
            if args.generator in ("both", "cpp"):
                await bench_senders_cpp(args.warmup, seconds, args.senders)
    if args.part == "acl":
        ser = SerializeType.ROCKETMQ if args.serialize == "rocketmq" else SerializeType.JSON
        print(f"acl: {len(BODY)}-byte bodies, SEND_MESSAGE_V2 ({ser.name}), one connection per broker, ASYNC_FLUSH, "
              f"{args.warmup:.0f} s warm-up + {seconds:.0f} s timed per window (python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs)", flush=True)
        if args.generator in ("both", "python"):
            await bench_acl(args.warmup, seconds, ser, args.senders, args.rounds)
        if args.generator in ("both", "java"):
            bench_acl_java(seconds, args.senders, args.rounds)
        if args.generator == "presigned":
            bench_acl_presigned(args.warmup, seconds, args.loads, args.rounds)
    if args.part == "floor":
        print(f"floor: the C++ client ({CPP_DRIVER} threads, {len(BODY)}-byte bodies, one connection) against minimal responders and "
              f"trocket broker, {args.warmup:.0f} s warm-up + {seconds:.0f} s timed per run "
              f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f})", flush=True)
        await bench_floor(args.warmup, seconds, args.senders, tuple(args.floor_modes.split(",")) if args.floor_modes else (),
                          args.rounds, args.compare)
    if args.part in ("all", "throughput"):
        print(f"trocket broker benchmark: {len(BODY)}-byte bodies, {QUEUES} queues, {seconds:.0f} s per produce run, "
              f"broker in a child process (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
        for flush in ("async", "sync"):
            await bench_mode(flush, seconds)
    if args.part in ("all", "rollover"):
        await bench_rollover(seconds, args.rollover_senders, args.rollover_segment, args.rollover_body)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0, help="duration of each produce run (default 4)")
    parser.add_argument("--part", choices=("all", "throughput", "rollover", "senders", "floor", "acl"), default="all",
                        help="which runs (default all)")
    parser.add_argument("--rollover-segment", type=int, default=16 << 20,
                        help="small commit-log segment size for the rollover runs (default 16 MiB)")
    parser.add_argument("--rollover-body", type=int, default=16384,
                        help="message body size for the rollover runs (default 16384)")
    parser.add_argument("--rollover-senders", type=int, default=1,
                        help="concurrent senders in the rollover runs (default 1)")
    parser.add_argument("--generator", choices=("both", "python", "cpp", "java", "presigned"), default="both",
                        help="load generator(s): of the senders runs python and/or cpp, of the acl part "
                             "python and/or java (default both), or presigned: a fixed offered load of "
                             "requests signed once (benchmarks/presigned_producer.py, --loads)")
    parser.add_argument("--loads", type=parse_loads, default=parse_loads("1000x1,4000x4,8000x16"),
                        help="acl part, presigned generator: comma-separated RATExBATCH, messages a second "
                             "to each of its three brokers, written BATCH frames at a time "
                             "(default 1000x1,4000x4,8000x16)")
    parser.add_argument("--serialize", choices=("rocketmq", "json"), default="rocketmq",
                        help="header serialization of the python generator (default rocketmq)")
    parser.add_argument("--senders", type=lambda t: tuple(int(x) for x in t.split(",")), default=SENDER_COUNTS,
                        help="comma-separated sender counts of the senders runs (default 1,4,16)")
    parser.add_argument("--warmup", type=float, default=1.0,
                        help="untimed seconds before each senders run (default 1)")
    parser.add_argument("--codecs", choices=("inherit", "pure", "compiled", "both"), default="inherit",
                        help="senders runs: the broker's codecs, pure Python (TROCKET_PURE=1) or the compiled "
                             "accelerator; both: each in turn under the same load (default: as inherited)")
    parser.add_argument("--broker-pythonpath", default=None,
                        help="PYTHONPATH of the broker child ('' for none), e.g. a tree laid out as the "
                             "trocket package, to compare two brokers under the same load generator")
    parser.add_argument("--floor-modes", default=",".join(FLOOR_MODES),
                        help="floor part: the floor responders' loops, comma-separated (default all: "
                             + ",".join(FLOOR_MODES) + "; '' for none)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="floor part, and senders part with --compare: rounds (default 1)")
    parser.add_argument("--compare", metavar="DIR", default=None,
                        help="floor part, and the python generator of the senders part: also the broker of the "
                             "tree laid out as the trocket package in DIR, in turn with this tree's in every "
                             "round (before/after under the same load)")
    parser.add_argument("--keys", action="store_true",
                        help="python generator: each message with a unique key and a KEYS entry (what the index stores)")
    parser.add_argument("--index", action="store_true",
                        help="senders part, python generator: this tree's broker with the index on and off "
                             "(messageIndexEnable), in turn every round (use with --keys)")
    add_cpp_driver_option(parser)
    parsed = parser.parse_args()
    KEYS = parsed.keys
    BROKER_PYTHONPATH = parsed.broker_pythonpath
    CPP_DRIVER = parsed.cpp_driver
    trio.run(main, parsed)
