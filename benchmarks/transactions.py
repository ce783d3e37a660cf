"""Transactional sends per second: the Java 4.9.8 ``TransactionMQProducer`` against
``trocket broker`` and against the Java 4.9.8 broker, side by side (issue 23).

    .venv/bin/python benchmarks/transactions.py                          # 1 and 8 threads, 3 rounds of 10 s
    .venv/bin/python benchmarks/transactions.py --threads 1,8,32 --seconds 10 --rounds 5

One transaction is ``sendMessageInTransaction``: the prepared send (sync; the broker
stores the half message), a local transaction that commits at once, END_TRANSACTION
(oneway; the broker stores the real message and the op record). The same Java program
drives both brokers (tests/acceptance/java/src/TxnTool.java, mode ``bench``: THREADS
threads of one producer, 128-byte bodies, a 1 s warm-up untimed, a fresh topic per
run). Both brokers run once for the whole benchmark (warmed up by one untimed run each:
a cold JVM broker answers "broker busy" at first), each in its own process with its
defaults (ASYNC_FLUSH, ASYNC_MASTER; 64 MiB commit-log segments; the Java broker with a
1 GiB heap, G1, as run-broker.sh), and the runs interleave (trocket, Java, trocket, Java, ...) so that load
from elsewhere on the machine hits both alike. After each run the topic's queues are
read (GET_MAX_OFFSET): every transaction counted must have been committed.

Prints each run's transactions per second and each broker's CPU (user + system, from
``/proc``) per committed transaction, then per thread count the medians over ``--rounds``
and the ratios trocket / Java (the issue's goal: >= 1.0 for the rate). Needs the Java
bundle and a JDK, as tests/acceptance/java does (its ``java_tools``).
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
for _p in (HERE, ACCEPTANCE, ACCEPTANCE / "java"):
    sys.path.insert(0, str(_p))

from acc_tools import RawClient  # noqa: E402
from broker_produce import cpu_seconds, start_broker, stop_broker  # noqa: E402
from java_tools import (  # noqa: E402
    JavaBroker,
    JavaNameServer,
    compile_programs,
    find_bundle,
    finish_program,
    hostport,
    start_program,
)

QUEUES = 4
#: the producer JVM: the full JIT and room (the tests' small JVMs would measure the JIT)
CLIENT_JVM = ["-Xms1g", "-Xmx1g", "-XX:+UseG1GC"]


class BenchJavaBroker(JavaBroker):
    """The Java broker with run-broker.sh's heap and collector (1 GiB, G1)."""

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("-server") + 1
        return [*cmd[:i], "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxDirectMemorySize=1g",
                *(a for a in cmd[i:] if not a.startswith(("-Xm", "-XX:")))]


def _committed(addr: tuple[str, int], topic: str) -> int:
    with RawClient(addr) as c:
        return sum(c.max_offset(topic, q) for q in range(QUEUES))


def _run(bundle, classes: Path, kind: str, namesrv: str, addr: tuple[str, int], threads: int, seconds: int,
         size: int, n: int, home: Path, broker_pid: int) -> tuple[float, int, int, float]:
    """One run: (transactions per second, sent, committed, the broker's CPU per committed
    transaction in µs: user + system over the whole program, its warm-up second too, which
    the committed count includes)."""
    topic = f"TxBench_{kind}_{threads}_{n}"
    with RawClient(addr) as c:
        c.create_topic(topic, queues=QUEUES)
    time.sleep(0.5)  # the name server learns the topic's route
    cpu0 = sum(cpu_seconds(broker_pid))
    proc = start_program(bundle, classes, "TxnTool",
                         ["bench", namesrv, topic, f"bench_{kind}_{n}", str(threads), str(seconds), str(size)],
                         home=home, jvm=CLIENT_JVM)
    lines = finish_program(proc, seconds + 120)
    result = next((line for line in lines if line.startswith("RESULT ")), None)
    if result is None:
        raise RuntimeError(f"no RESULT from the {kind} run: {lines}")
    fields = dict(item.split("=", 1) for item in result.split()[1:])
    if int(fields["errors"]):
        print(f"  ({kind}: {fields['errors']} transactions failed)")
    cpu = sum(cpu_seconds(broker_pid)) - cpu0
    time.sleep(0.5)
    committed = _committed(addr, topic)
    return float(fields["tx_per_s"]), int(fields["sent"]), committed, cpu * 1e6 / max(committed, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,8", help="producer threads, comma-separated (default 1,8)")
    parser.add_argument("--seconds", type=int, default=10, help="timed seconds per run (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--size", type=int, default=128, help="body bytes (default 128)")
    args = parser.parse_args()
    bundle, why = find_bundle()
    if bundle is None:
        sys.exit(f"transactions.py: {why}")
    threads = [int(t) for t in args.threads.split(",")]
    work = Path(tempfile.mkdtemp(prefix="trocket-txbench-"))
    classes, _ = compile_programs(bundle)
    trocket, trocket_addr = start_broker(
        str(work / "trocket-store"), "async", str(work / "trocket.log"), extra_args=("--segment-size", "64m"),
    )
    ns = JavaNameServer(bundle, work / "java-namesrv")
    java = BenchJavaBroker(bundle, work / "java-broker", ns.addr)
    try:
        ns.start()
        ns.wait_ready()
        java.start()
        java.wait_ready()
        with open(work / "trocket.log") as f:
            namesrv = next(line for line in f if "boot success" in line).rsplit(" name server is ", 1)[1].strip()
        peers = {"trocket": (namesrv, hostport(trocket_addr), trocket.pid),
                 "java": (ns.addr, hostport(java.addr), java.proc.pid)}
        time.sleep(2)  # the Java broker's first registration
        n = 0
        for kind in ("trocket", "java"):  # warm-up (a cold JVM broker answers "broker busy" at first)
            n += 1
            ns_addr, addr, pid = peers[kind]
            _run(bundle, classes, kind, ns_addr, addr, max(threads), 3, args.size, n, work / "logs", pid)
        tps: dict[tuple[str, int], list[float]] = {}
        cpus: dict[tuple[str, int], list[float]] = {}
        for r in range(args.rounds):
            for t in threads:
                for kind in ("trocket", "java"):
                    n += 1
                    ns_addr, addr, pid = peers[kind]
                    rate, sent, committed, cpu = _run(bundle, classes, kind, ns_addr, addr, t, args.seconds,
                                                      args.size, n, work / "logs", pid)
                    tps.setdefault((kind, t), []).append(rate)
                    cpus.setdefault((kind, t), []).append(cpu)
                    flag = "" if committed >= sent else f"  (only {committed} committed!)"
                    print(f"round {r + 1} {kind:8s} threads={t:<3d} {rate:>9,.0f} tx/s  sent={sent} "
                          f"committed={committed}  broker CPU {cpu:5.1f} us/tx{flag}", flush=True)
        print(f"\nmedians of {args.rounds} rounds, {args.seconds} s each, {args.size}-byte bodies:")
        print(f"{'threads':>8s} {'trocket tx/s':>14s} {'java tx/s':>12s} {'trocket/java':>13s}"
              f" {'CPU us/tx trocket':>18s} {'java':>6s} {'trocket/java':>13s}")
        for t in threads:
            a = statistics.median(tps[("trocket", t)])
            b = statistics.median(tps[("java", t)])
            ca = statistics.median(cpus[("trocket", t)])
            cb = statistics.median(cpus[("java", t)])
            print(f"{t:>8d} {a:>14,.0f} {b:>12,.0f} {a / b if b else float('nan'):>13.2f}"
                  f" {ca:>18.1f} {cb:>6.1f} {ca / cb if cb else float('nan'):>13.2f}")
    finally:
        stop_broker(trocket)
        java.stop()
        ns.stop()
        print(f"\n(logs and stores in {work}; remove it when done)", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
