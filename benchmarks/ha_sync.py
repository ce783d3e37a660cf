"""Synchronous double write: what the non-blocking hand-off costs and buys (issue 10).

    .venv/bin/python benchmarks/ha_sync.py                 # 3 rounds of the 3 setups, ~1.5 min
    .venv/bin/python benchmarks/ha_sync.py --seconds 10 --rounds 5
    .venv/bin/python benchmarks/ha_sync.py --setups sync --rounds 1 --py-spy /tmp/prof

Three setups, each a master and a slave ``trocket broker`` in child processes on fresh
temporary stores (the master's embedded name server; the slave follows ``haMasterAddress``):

* ``ASYNC_MASTER`` + slave: a send is answered once stored; the slave follows;
* ``SYNC_MASTER`` + slave: a send is answered once the slave acknowledged it -- the
  send path hands (end offset, deadline) to the transfer service and moves on, the
  answer goes out when the acknowledgement covers it (many per acknowledgement);
* ``SYNC_MASTER`` + slave, blocking (for comparison only: the master runs from
  ``blocking_send.py``): one send task at a time waits for its slave acknowledgement
  before the next send is taken, the pre-4.7 design.

Load: ``broker_produce.py``'s generator -- ``--senders`` trio tasks of this process on
one connection, synchronous SEND_MESSAGE_V2 of 128-byte bodies, ``--warmup`` seconds
untimed, then ``--seconds`` timed. Prints TPS, p50/p99 latency and the master's CPU per
message for each run, then the medians over ``--rounds`` interleaved rounds (A, S, B,
A, S, B, ...: load from elsewhere hits every setup alike) and the ratios SYNC/ASYNC
(goal >= 0.8) and blocking/ASYNC. Every process shares this machine's cores with the
load generator; the slave's CPU per message is printed too.

``--generator cpp`` sends from ``--senders`` threads of one real C++ producer (PyPI
``rocketmq``'s librocketmq, routed by the master's name server; ``--cpp-driver`` as in
``broker_produce.py``: native threads by default) instead: a real client's pacing (its
threads do not answer in lockstep as one trio process's tasks do; a few sends a run
fail in the client itself, see ``benchmarks/cpp_producer.py``).

``--setups`` runs a subset (``async``, ``sync``, ``blocking``);
``--broker-pythonpath DIR`` runs both brokers from another tree (as in
``broker_produce.py``); ``--compare DIR`` runs every setup a second time in each round
from that tree (the same shape), and prints both trees' medians and ratios side by side
-- before/after under one load generator, in one run; ``--py-spy DIR``
records the master's and the slave's stacks over the timed window with ``py-spy record
--format raw`` (collapsed stacks, one file per process and setup; py-spy must be on PATH
or next to this Python).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import trio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import broker_produce  # noqa: E402
from broker_produce import (  # noqa: E402
    BODY,
    cpu_per_message,
    cpu_seconds,
    QUEUES,
    free_port,
    produce_window,
    runtime_info,
    send_request,
    start_broker,
    stop_broker,
)

from trocket.codecs.command import SerializeType  # noqa: E402
from trocket.remoting import ClientConfig, RemotingClient  # noqa: E402

#: the name suffix of the compared tree's runs (``--compare``)
COMPARED = " (compared)"

#: the blocking design's master (the pre-4.7 comparison): trocket broker with its send
#: registration swapped, see blocking_send.py
BLOCKING = (os.path.join(os.path.dirname(os.path.abspath(__file__)), "blocking_send.py"),)

SETUPS = (
    ("ASYNC_MASTER", {"brokerRole": "ASYNC_MASTER"}),
    ("SYNC_MASTER", {"brokerRole": "SYNC_MASTER"}),
    ("SYNC_MASTER blocking", {"brokerRole": "SYNC_MASTER"}),
)


def py_spy(pid: int, out: str, delay: float, seconds: float) -> subprocess.Popen:
    """``py-spy record`` of ``pid`` for ``seconds``, starting ``delay`` seconds from now."""
    exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    cmd = [exe, "record", "--format", "raw", "--rate", "400", "-d", str(max(1, round(seconds))), "-p", str(pid), "-o", out]
    return subprocess.Popen(
        ["sh", "-c", f'sleep {delay}; exec "$@"', "py-spy", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


async def run_setup(
    name: str, conf: dict[str, str], senders: int, warmup: float, seconds: float, profile: str | None = None,
    pythonpath: str | None = None, generator: str = "python",
) -> dict:
    with tempfile.TemporaryDirectory(prefix="trocket-ha-bench-") as tmp:
        ha_port, ns_port = free_port(), free_port()
        os.makedirs(os.path.join(tmp, "m"))
        os.makedirs(os.path.join(tmp, "s"))
        master, addr = start_broker(
            os.path.join(tmp, "m", "store"), "async", os.path.join(tmp, "m", "broker.log"),
            conf={**conf, "haListenPort": str(ha_port)}, namesrv_listen=f"127.0.0.1:{ns_port}",
            pythonpath=pythonpath, **({"launcher": BLOCKING} if name.startswith("SYNC_MASTER blocking") else {}),
        )
        slave = None
        try:
            slave, _ = start_broker(
                os.path.join(tmp, "s", "store"), "async", os.path.join(tmp, "s", "broker.log"),
                conf={"brokerRole": "SLAVE", "haMasterAddress": f"127.0.0.1:{ha_port}",
                      "namesrvAddr": f"127.0.0.1:{ns_port}"},
                pythonpath=pythonpath,
            )
            client = RemotingClient(ClientConfig(default_timeout=10))
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)
                with trio.fail_after(15):
                    while (await runtime_info(client, addr)).get("haConnections") != "1":
                        await trio.sleep(0.05)
                for q in range(QUEUES):
                    await client.invoke_sync(addr, send_request(q, BODY, SerializeType.ROCKETMQ), 10)
                spies = []
                if profile:
                    tag = name.replace(" ", "-").replace("(", "").replace(")", "")
                    spies = [py_spy(p.pid, os.path.join(profile, f"{tag}.{who}.txt"), warmup, seconds)
                             for who, p in (("master", master), ("slave", slave))]
                slave0 = cpu_seconds(slave.pid)
                if generator == "cpp":  # the real C++ client's threads, routed by the master's name server
                    res = await trio.to_thread.run_sync(
                        broker_produce.cpp_window, f"127.0.0.1:{ns_port}", master.pid, senders, warmup, seconds
                    )
                else:
                    res = await produce_window(client, addr, master.pid, senders, warmup, seconds, SerializeType.ROCKETMQ)
                res["slave_cpu_us"] = cpu_per_message(slave0, cpu_seconds(slave.pid), res["count"])["cpu_us"]
                for spy in spies:
                    await trio.to_thread.run_sync(spy.wait)
                info = await runtime_info(client, addr)
                res["behind"] = int(info.get("haSlaveFallBehind", "0"))
                acks = int(info.get("haTransferAcksUsed", "0"))
                res["per_ack"] = int(info.get("haTransferCompleted", "0")) / acks if acks else 0.0
                await client.aclose()
                nursery.cancel_scope.cancel()
        finally:
            if slave is not None:
                stop_broker(slave)
            stop_broker(master)
    print(
        f"{name:33s} senders={senders}  TPS={res['tps']:8.0f}  p50={res['p50_ms']:7.3f} ms  "
        f"p99={res['p99_ms']:7.3f} ms  master CPU={res['cpu_us']:6.1f} us/msg "
        f"(user {res['user_us']:5.1f} + sys {res['sys_us']:5.1f}), slave {res['slave_cpu_us']:5.1f} us/msg  "
        f"({res['count']} msgs in {res['seconds']:.1f} s, errors={res['errors']}, slave behind at end {res['behind']} B"
        + (f", {res['per_ack']:.1f} sends answered per slave acknowledgement)" if res["per_ack"] else ")"),
        flush=True,
    )
    return res


async def main(args: argparse.Namespace) -> None:
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; {args.senders} senders, "
          f"{args.generator} generator", flush=True)
    short = {"ASYNC_MASTER": "async", "SYNC_MASTER": "sync", "SYNC_MASTER blocking": "blocking"}
    setups = [(name, conf) for name, conf in SETUPS if not args.setups or short[name] in args.setups]
    trees = [("", None)] + ([(COMPARED, args.compare)] if args.compare else [])
    runs: dict[str, list[dict]] = {name + tag: [] for name, _ in setups for tag, _ in trees}
    if args.py_spy:
        os.makedirs(args.py_spy, exist_ok=True)
    for r in range(args.rounds):  # interleaved: a burst of load elsewhere hits every setup alike
        print(f"-- round {r + 1}/{args.rounds}", flush=True)
        for name, conf in setups:
            for tag, path in trees:
                runs[name + tag].append(
                    await run_setup(
                        name + tag, conf, args.senders, args.warmup, args.seconds, args.py_spy, path, args.generator
                    )
                )
    print(f"-- medians of {args.rounds} rounds")
    med = {}
    for name, results in runs.items():
        med[name] = {k: statistics.median(x[k] for x in results)
                     for k in ("tps", "p50_ms", "p99_ms", "cpu_us", "slave_cpu_us")}
        m = med[name]
        print(f"{name:33s} TPS={m['tps']:8.0f}  p50={m['p50_ms']:7.3f} ms  p99={m['p99_ms']:7.3f} ms  "
              f"master CPU={m['cpu_us']:6.1f} us/msg  slave CPU={m['slave_cpu_us']:6.1f} us/msg")
    for tag, _ in trees:
        a = med.get("ASYNC_MASTER" + tag, {}).get("tps")
        s = med.get("SYNC_MASTER" + tag, {}).get("tps")
        b = med.get("SYNC_MASTER blocking" + tag, {}).get("tps")
        who = f" {tag.strip()}" if tag else ""
        if a and s:
            ratios = [x["tps"] / y["tps"] for x, y in zip(runs["SYNC_MASTER" + tag], runs["ASYNC_MASTER" + tag])]
            print(f"SYNC/ASYNC TPS ratio{who:11s} = {s / a:.2f}  (goal >= 0.8; per round: "
                  + ", ".join(f"{x:.2f}" for x in ratios) + ")")
        if a and b:
            print(f"blocking/ASYNC TPS ratio{who:7s} = {b / a:.2f}")
        if s and b:
            print(f"SYNC hand-off / blocking{who:7s} = {s / b:.1f}x")
    sync_runs = runs.get("SYNC_MASTER", [])
    if args.generator == "python" and sync_runs:
        per_ack = statistics.median(x["per_ack"] for x in sync_runs)
        if per_ack >= 0.9 * args.senders:
            print(f"(the {args.senders} trio tasks of this process ran in lockstep: {per_ack:.1f} sends answered per "
                  "slave acknowledgement, so nothing overlaps SYNC's round trip; --generator cpp sends from a real "
                  "client's threads)")
    if args.compare:
        for name, _ in setups:
            new = [x["tps"] for x in runs[name]]
            old = [x["tps"] for x in runs[name + COMPARED]]
            print(f"{name:33s} this tree / compared: TPS x{statistics.median(new) / statistics.median(old):.2f} "
                  "(per round: " + ", ".join(f"{n / o:.2f}" for n, o in zip(new, old)) + ")")
    print(f"load average {os.getloadavg()[0]:.1f} at the end (other processes share the cores)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--senders", type=int, default=16)
    ap.add_argument("--generator", choices=("python", "cpp"), default="python",
                    help="the senders: trio tasks of this process (default) or threads of one real C++ "
                         "producer (PyPI rocketmq)")
    broker_produce.add_cpp_driver_option(ap)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    ap.add_argument("--setups", nargs="*", default=None, choices=("async", "sync", "blocking"),
                    help="run only these setups (default: all three)")
    ap.add_argument("--broker-pythonpath", default=None,
                    help="PYTHONPATH of both broker children ('' for none): a tree laid out as the trocket "
                         "package, to compare two brokers under the same load generator")
    ap.add_argument("--compare", default=None, metavar="DIR",
                    help="also run every setup from this tree (laid out as the trocket package), "
                         "interleaved, and print both side by side")
    ap.add_argument("--py-spy", default=None, metavar="DIR",
                    help="record the master's and slave's stacks over the timed window into DIR (py-spy raw)")
    parsed = ap.parse_args()
    broker_produce.BROKER_PYTHONPATH = parsed.broker_pythonpath
    broker_produce.CPP_DRIVER = parsed.cpp_driver
    trio.run(main, parsed)
