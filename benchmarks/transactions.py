"""Transactional sends per second: the Java 4.9.8 ``TransactionMQProducer`` against
``trocket broker`` and against the Java 4.9.8 broker, side by side (issue 23).

    .venv/bin/python benchmarks/transactions.py                          # 1 and 8 threads, 3 rounds of 10 s
    .venv/bin/python benchmarks/transactions.py --threads 1,8,32 --seconds 10 --rounds 5

One transaction is ``sendMessageInTransaction``: the prepared send (sync; the broker
stores the half message), a local transaction that commits at once, END_TRANSACTION
(oneway; the broker stores the real message and the op record). The same Java program
drives both brokers (tests/acceptance/java_txn/TxnTool.java, mode ``bench``: THREADS
threads of one producer, 128-byte bodies, a 1 s warm-up untimed, a fresh topic per
run). Both brokers run once for the whole benchmark (warmed up by one untimed run each:
a cold JVM broker answers "broker busy" at first), each in its own process with its
defaults (ASYNC_FLUSH, ASYNC_MASTER; 64 MiB commit-log segments; the Java broker with a
1 GiB heap), and the runs interleave (trocket, Java, trocket, Java, ...) so that load
from elsewhere on the machine hits both alike. After each run the topic's queues are
read (GET_MAX_OFFSET): every transaction counted must have been committed.

Prints each run's transactions per second, then per thread count the medians over
``--rounds`` and the ratio trocket / Java (the issue's goal: >= 1.0). Needs the Java
distribution (``$TROCKET_ROCKETMQ_JAVA`` or /work/shared/rocketmq-4.9.8) and javac.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ACCEPTANCE = HERE.parent / "tests" / "acceptance"
for _p in (HERE, ACCEPTANCE, ACCEPTANCE / "java_txn"):
    sys.path.insert(0, str(_p))

from acc_tools import RawClient  # noqa: E402
from broker_produce import start_broker, stop_broker  # noqa: E402
from java_rmq import JavaBroker, compile_tool, java_status, run_tool  # noqa: E402

QUEUES = 4


def _committed(addr: tuple[str, int], topic: str) -> int:
    with RawClient(addr) as c:
        return sum(c.max_offset(topic, q) for q in range(QUEUES))


def _run(classes: Path, kind: str, namesrv: str, addr: tuple[str, int], threads: int, seconds: int, size: int,
         n: int, log_dir: Path) -> tuple[float, int, int]:
    """One run: (transactions per second, sent, committed)."""
    topic = f"TxBench_{kind}_{threads}_{n}"
    with RawClient(addr) as c:
        c.create_topic(topic, queues=QUEUES)
    time.sleep(0.5)  # the name server learns the topic's route
    lines = run_tool(classes, ["bench", namesrv, topic, f"bench_{kind}_{n}", str(threads), str(seconds), str(size)],
                     log_dir=log_dir, timeout=seconds + 120, bench=True)
    result = next((line for line in lines if line.startswith("RESULT ")), None)
    if result is None:
        raise RuntimeError(f"no RESULT from the {kind} run: {lines}")
    fields = dict(item.split("=", 1) for item in result.split()[1:])
    if int(fields["errors"]):
        print(f"  ({kind}: {fields['errors']} transactions failed)")
    time.sleep(0.5)
    return float(fields["tx_per_s"]), int(fields["sent"]), _committed(addr, topic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,8", help="producer threads, comma-separated (default 1,8)")
    parser.add_argument("--seconds", type=int, default=10, help="timed seconds per run (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--size", type=int, default=128, help="body bytes (default 128)")
    args = parser.parse_args()
    ok, why = java_status()
    if not ok:
        sys.exit(f"transactions.py: {why}")
    threads = [int(t) for t in args.threads.split(",")]
    work = Path(tempfile.mkdtemp(prefix="trocket-txbench-"))
    classes = compile_tool(work / "classes")
    trocket, trocket_addr = start_broker(
        str(work / "trocket-store"), "async", str(work / "trocket.log"), extra_args=("--segment-size", "64m"),
    )
    java = JavaBroker(work / "java", heap="1g").start()
    try:
        with open(work / "trocket.log") as f:
            namesrv = next(line for line in f if "boot success" in line).rsplit(" name server is ", 1)[1].strip()
        host, _, port = trocket_addr.rpartition(":")
        peers = {"trocket": (namesrv, (host, int(port))), "java": (java.namesrv, java.addr)}
        time.sleep(2)  # the Java broker's first registration
        n = 0
        for kind in ("trocket", "java"):  # warm-up (a cold JVM broker answers "broker busy" at first)
            n += 1
            _run(classes, kind, *peers[kind], max(threads), 3, args.size, n, work / "logs")
        tps: dict[tuple[str, int], list[float]] = {}
        for r in range(args.rounds):
            for t in threads:
                for kind in ("trocket", "java"):
                    n += 1
                    ns, addr = peers[kind]
                    rate, sent, committed = _run(classes, kind, ns, addr, t, args.seconds, args.size, n, work / "logs")
                    tps.setdefault((kind, t), []).append(rate)
                    flag = "" if committed >= sent else f"  (only {committed} committed!)"
                    print(f"round {r + 1} {kind:8s} threads={t:<3d} {rate:>9,.0f} tx/s  sent={sent} "
                          f"committed={committed}{flag}", flush=True)
        print(f"\nmedians of {args.rounds} rounds, {args.seconds} s each, {args.size}-byte bodies:")
        print(f"{'threads':>8s} {'trocket tx/s':>14s} {'java tx/s':>12s} {'trocket/java':>13s}")
        for t in threads:
            a = statistics.median(tps[("trocket", t)])
            b = statistics.median(tps[("java", t)])
            print(f"{t:>8d} {a:>14,.0f} {b:>12,.0f} {a / b if b else float('nan'):>13.2f}")
    finally:
        stop_broker(trocket)
        java.stop()
        print(f"\n(logs and stores in {work}; remove it when done)", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
