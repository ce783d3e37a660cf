"""Transactional sends per second: the Java 4.9.8 ``TransactionMQProducer`` against
``trocket broker`` and against the Java 4.9.8 broker, side by side (issue 23).

    .venv/bin/python benchmarks/transactions.py                          # 1 and 8 threads, 3 rounds of 10 s
    .venv/bin/python benchmarks/transactions.py --threads 1,8,32 --seconds 10 --rounds 5
    .venv/bin/python benchmarks/transactions.py --threads 32 --broker-pythonpath /tmp/base/pkg   # another tree's broker

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

``--instructions``: what one transaction costs the trocket broker in instructions, under
valgrind's callgrind, steady on a loaded machine (no Java, no timing). A broker in the
script's own process gets, through its endpoint's dispatch as a connection's reader
would hand them (``send_path.py``'s ``endpoint``), a prepared SEND_MESSAGE_V2 and then a
oneway END_TRANSACTION (commit) per transaction, JSON headers as the Java client sends
them, its properties (TAGS, WAIT, TRAN_MSG, PGROUP, a new UNIQ_KEY each) in Java's
order; the answers are drained. Run with ``--warm`` and ``--warm + --transactions``
transactions; the difference of the two totals over ``--transactions`` is the
instructions per transaction: the prepared send (half message), the END (reading the
half message back, the committed message and the op record stored) and the answer, and
the harness's few steps. trio's clock stands still meanwhile (no timer of the broker
fires: how many would depend on how slowly callgrind runs). Each END is ended alone (in the real benchmark the ENDs of
one read are ended together). ``--end rollback`` ends each with a rollback (no committed
message), ``--end none`` sends no END (the prepared sends alone): the differences are
what the committed message and the END cost. ``--compare DIR`` measures another tree too (a folder
holding it as the ``trocket`` package), ``--keep DIR`` keeps the callgrind output (for
``callgrind_annotate --inclusive=yes``):

    .venv/bin/python benchmarks/transactions.py --instructions --compare /tmp/base/pkg --keep /tmp/tx-cg
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio
import trio.testing

HERE = Path(__file__).resolve().parent
ACCEPTANCE = HERE.parent / "tests" / "acceptance"
for _p in (HERE, ACCEPTANCE, ACCEPTANCE / "java"):
    sys.path.insert(0, str(_p))

from acc_tools import RawClient  # noqa: E402
from broker_produce import cpu_seconds, start_broker, stop_broker  # noqa: E402
from instructions import callgrind_total  # noqa: E402
from send_path import endpoint  # noqa: E402
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


# -- --instructions -------------------------------------------------------------------------

TX_TOPIC, TX_GROUP = "TxPath", "TxPathGroup"
_UNIQ = "7F00000100002A9F0000000000000000"  # (a placeholder: each transaction's own replaces it)


def _prepare_payload() -> bytes:
    """The prepared send as the Java client frames it (JSON header, SendMessageRequestHeaderV2's
    short names), without its length prefix, ``_UNIQ`` standing for the unique key."""
    from trocket.codecs.command import RemotingCommand, SerializeType
    from trocket.codecs.java_hashmap import JavaHashMap
    from trocket.codecs.serialize import encode_command

    props = JavaHashMap((("TAGS", "TagB"), ("WAIT", "true"), ("TRAN_MSG", "true"), ("PGROUP", TX_GROUP),
                         ("UNIQ_KEY", _UNIQ))).to_properties()
    ext = {"a": TX_GROUP, "b": TX_TOPIC, "c": "TBW102", "d": "4", "e": "1", "f": "4", "g": "1700000000000",
           "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
    cmd = RemotingCommand(code=310, ext_fields=ext, body=b"x" * 128, serialize_type=SerializeType.JSON)
    return encode_command(cmd)[4:]


def _end_header_template() -> bytes:
    """END_TRANSACTION's JSON header (oneway, commit) as a %-template of the half
    message's queue offset, its commit-log offset and its unique key (twice)."""
    return (b'{"code":37,"extFields":{"commitLogOffset":"%d","commitOrRollback":"8","fromTransactionCheck":"false",'
            b'"msgId":"%s","producerGroup":"' + TX_GROUP.encode() + b'","tranStateTableOffset":"%d",'
            b'"transactionId":"%s"},"flag":2,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON",'
            b'"version":395}')


#: ``--end``: what ends each transaction (END_TRANSACTION's commitOrRollback), or no END
_END_KINDS = {"commit": b"8", "rollback": b"12", "none": None}


async def _transactions(n: int, end_kind: str = "commit") -> None:
    """``n`` transactions through the endpoint's dispatch (see the module docstring)."""
    from trocket.broker.transaction import HALF_TOPIC, OP_TOPIC
    from trocket.codecs.serialize import decode_command

    async with endpoint() as (controller, dispatch, drain):
        controller.topics.create_in_send(TX_TOPIC, "TBW102", 4, 0)
        store = controller.store
        prepare = _prepare_payload()
        uniq = _UNIQ.encode()
        kind = _END_KINDS[end_kind]
        end = _end_header_template().replace(b'"commitOrRollback":"8"', b'"commitOrRollback":"%s"' % (kind or b"8"))
        pack = struct.Struct(">I").pack
        for i in range(n):
            key = b"7F00000100002A9F%016X" % i
            where = store.max_phy_offset  # where the half message goes (nothing else is stored)
            if dispatch(decode_command(prepare.replace(uniq, key))) is not None:
                raise RuntimeError("the prepared send did not complete on the reader")
            if kind is not None:
                header = end % (where, key, i, key)
                dispatch(decode_command(pack(len(header)) + header))
            if i & 31 == 31:
                drain()
        committed = sum(store.get_max_offset(TX_TOPIC, q) for q in range(4))
        halves, ops = store.get_max_offset(HALF_TOPIC, 0), store.get_max_offset(OP_TOPIC, 0)
        ended = 0 if kind is None else n
        if halves != n or ops != ended or committed != (n if kind == b"8" else 0):
            raise RuntimeError(f"{n} transactions: {halves} half messages, {committed} committed, {ops} op records")


def _transactions_total(pythonpath: str, n: int, keep: str, label: str, end_kind: str) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")  # (the same dict layouts in every run)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    # once outside valgrind first: bytecode caches written now, not in one measured run only
    subprocess.run([sys.executable, __file__, "--instructions-child", "1", "--end", end_kind], env=env, check=True)
    with tempfile.TemporaryDirectory(prefix="trocket-txcg-") as tmp:
        out = os.path.join(keep or tmp, f"callgrind.{label}.{n}.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
             "--instructions-child", str(n), "--end", end_kind],
            env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir(),
        )
        return callgrind_total(out)


def instructions(args: argparse.Namespace) -> None:
    trees = [("this tree", "")] + ([(f"compared ({args.compare})", args.compare)] if args.compare else [])
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    figures: dict[str, list[float]] = {name: [] for name, _ in trees}
    for r in range(args.rounds):
        for k, (name, path) in enumerate(trees):
            label = f"{'this' if k == 0 else 'compared'}.r{r + 1}"
            short = _transactions_total(path, args.warm, args.keep, label, args.end)
            long = _transactions_total(path, args.warm + args.transactions, args.keep, label, args.end)
            figures[name].append((long - short) / args.transactions)
            print(f"{name:40s} {figures[name][-1]:10,.0f} instructions/transaction", flush=True)
    if args.compare:
        low = {name: min(values) for name, values in figures.items()}
        ratio = low["this tree"] / low[trees[1][0]]
        print(f"this tree / compared = {ratio:.3f} (lowest of {args.rounds} round(s) each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,8", help="producer threads, comma-separated (default 1,8)")
    parser.add_argument("--seconds", type=int, default=10, help="timed seconds per run (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3; --instructions: 1)")
    parser.add_argument("--size", type=int, default=128, help="body bytes (default 128)")
    parser.add_argument("--broker-pythonpath", metavar="DIR", default=None,
                        help="run another tree's trocket broker (a folder holding it as the `trocket` package)")
    parser.add_argument("--instructions", action="store_true", help="the broker's instructions per transaction")
    parser.add_argument("--transactions", type=int, default=2000, help="--instructions: measured (default 2000)")
    parser.add_argument("--warm", type=int, default=1000, help="--instructions: the shorter run's (default 1000)")
    parser.add_argument("--compare", metavar="DIR", default="", help="--instructions: another tree too")
    parser.add_argument("--keep", metavar="DIR", default="", help="--instructions: keep callgrind's output in DIR")
    parser.add_argument("--end", choices=sorted(_END_KINDS), default="commit",
                        help="--instructions: how each transaction ends (none: the prepared sends alone)")
    parser.add_argument("--instructions-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.instructions_child is not None:
        # trio's clock stands still: no timer of the broker (its persisting, statistics
        # and check loops) fires while the transactions run, as their number would
        # depend on how long callgrind takes (that would not cancel out)
        trio.run(_transactions, args.instructions_child, args.end, clock=trio.testing.MockClock())
        return
    if args.instructions:
        if "--rounds" not in sys.argv:
            args.rounds = 1
        instructions(args)
        return
    bundle, why = find_bundle()
    if bundle is None:
        sys.exit(f"transactions.py: {why}")
    threads = [int(t) for t in args.threads.split(",")]
    work = Path(tempfile.mkdtemp(prefix="trocket-txbench-"))
    classes, _ = compile_programs(bundle)
    trocket, trocket_addr = start_broker(
        str(work / "trocket-store"), "async", str(work / "trocket.log"), extra_args=("--segment-size", "64m"),
        pythonpath=args.broker_pythonpath,
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
