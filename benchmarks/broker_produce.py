"""Broker produce/consume benchmark.

    .venv/bin/python benchmarks/broker_produce.py              # everything, ~40 s
    .venv/bin/python benchmarks/broker_produce.py --seconds 2  # shorter runs

For each flush mode (timed ``ASYNC_FLUSH``, then ``SYNC_FLUSH`` with group commit) it
starts ``trocket broker`` in a child process on a fresh temporary store (embedded name
server, port 0), then from this process:

* produces 128-byte messages (SEND_MESSAGE_V2, properties ``TAGS``/``WAIT``) with 1, 8
  and 32 concurrent senders spread over 4 connections, each sender waiting for its
  answer before the next send (synchronous sends, as a real producer's ``send()``),
  for ``--seconds`` each; prints TPS, mean latency and the share of wall time the
  broker spent inside the commit log's append lock (GET_BROKER_RUNTIME_INFO's
  ``putMessageLockTimeNanosTotal`` before/after);
* then drains everything just produced with PULL_MESSAGE (32 per pull, one puller per
  queue over the 4 connections) and prints the consume TPS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import trio

from trocket.codecs.bodies.fastjson import loads
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from trocket.remoting import ClientConfig, RemotingClient

TOPIC = "BenchTopic"
QUEUES = 4
CONNECTIONS = 4
BODY = b"b" * 128
PROPS = "TAGS\x01bench\x02WAIT\x01true\x02"


def start_broker(store: str, flush: str, log_path: str) -> tuple[subprocess.Popen, str]:
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "trocket.broker.main", "broker",
            "--store", store, "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0",
            "--flush", flush, "--log-level", "INFO",
        ],
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log_path) as f:
            for line in f:
                if "boot success" in line:
                    addr = line.split("The broker[", 1)[1].split("]", 1)[0].split(", ", 1)[1]
                    return proc, addr
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("broker did not start:\n" + open(log_path).read())


def stop_broker(proc: subprocess.Popen) -> None:
    proc.send_signal(2)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    r = await client.invoke_sync(addr, RemotingCommand.request(28), 5)
    return loads(r.body)["table"]


def send_request(queue_id: int) -> RemotingCommand:
    h = SendMessageRequestHeaderV2(
        a="BenchProducer", b=TOPIC, c="TBW102", d=QUEUES, e=queue_id, f=0,
        g=int(time.time() * 1000), h=0, i=PROPS, j=0, k=False,
    )
    return RemotingCommand.request(310, h, body=BODY)


async def produce(clients: list[RemotingClient], addr: str, senders: int, seconds: float) -> dict:
    count = 0
    errors = 0
    latency = 0.0
    stop_at = trio.current_time() + seconds

    async def sender(i: int) -> None:
        nonlocal count, errors, latency
        client = clients[i % len(clients)]
        q = i % QUEUES
        while trio.current_time() < stop_at:
            t0 = trio.current_time()
            r = await client.invoke_sync(addr, send_request(q), 10)
            latency += trio.current_time() - t0
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
    return {
        "tps": count / elapsed,
        "count": count,
        "errors": errors,
        "latency_ms": 1000 * latency / max(1, count + errors),
        "lock_share": lock_ns / (elapsed * 1e9),
        "lock_us_per_msg": lock_ns / max(1, count) / 1000,
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


async def main(seconds: float) -> None:
    print(f"trocket broker benchmark: {len(BODY)}-byte bodies, {QUEUES} queues, {seconds:.0f} s per produce run, "
          f"broker in a child process (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    for flush in ("async", "sync"):
        await bench_mode(flush, seconds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0, help="duration of each produce run (default 4)")
    args = parser.parse_args()
    trio.run(main, args.seconds)
