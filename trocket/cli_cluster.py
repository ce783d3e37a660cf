"""``trocket cluster up`` and ``trocket cluster status``: a local multi-process cluster in
one command, and what its brokers say about themselves.

    trocket cluster up [--namesrvs 2] [--brokers 2] [--slaves 1] [--store DIR] [--segment-size 64m]
    trocket cluster status [-n ADDR] [--json]

``up`` starts the name servers, then each broker group's master and its slaves (broker
names broker-a, broker-b, ...; ids 0, 1, ...; ASYNC_MASTER and SLAVE), every process a
``trocket namesrv`` / ``trocket broker`` of its own on free loopback ports, its store
under DIR/<broker>-<id>, its output in DIR/logs/<name>.log. It prints the addresses and a
``NAMESRV_ADDR=...`` line to export, then waits: Ctrl-C (or SIGTERM) stops the brokers
(slaves first) and then the name servers, each cleanly, and exits 130 (143); a process
that dies meanwhile is reported and the rest keep running.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import string
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs

from trocket.argtypes import NAMESRV_HELP, namesrv_default, non_negative_int, positive_float, positive_int
from trocket.exit_codes import EXIT_FAIL, EXIT_OK

__all__ = ["add_cluster_commands"]


def add_cluster_commands(sub: Any) -> None:
    cluster = sub.add_parser("cluster", help="a local multi-process cluster: up, status")
    csub = cluster.add_subparsers(dest="cluster_command", metavar="COMMAND", required=True)
    up = csub.add_parser(
        "up", help="start name servers and broker groups (masters and slaves) as local processes",
        description="Start a local cluster: name servers, then broker groups of a master and its slaves, each a "
        "process on free loopback ports, logs in DIR/logs. Prints the addresses and a NAMESRV_ADDR line; "
        "Ctrl-C stops them all cleanly.",
    )
    up.add_argument("--namesrvs", type=positive_int, default=1, metavar="N", help="name servers (default 1)")
    up.add_argument("--brokers", type=positive_int, default=1, metavar="N", help="broker groups (default 1)")
    up.add_argument("--slaves", type=non_negative_int, default=0, metavar="N", help="slaves per group (default 0)")
    up.add_argument("--store", default="./trocket-cluster", metavar="DIR",
                    help="stores and logs (default ./trocket-cluster)")
    up.add_argument("--segment-size", default="64m", metavar="SIZE",
                    help="each broker's commit-log segment size (default 64m: two are made at once per broker)")
    up.add_argument("--cluster", default="DefaultCluster", metavar="NAME", help="cluster name (default DefaultCluster)")
    up.add_argument("--boot-timeout", type=positive_float, default=60.0, metavar="S",
                    help="how long each process may take to start (default 60 s)")
    up.set_defaults(run=_run_up)

    status = csub.add_parser("status", help="every broker's role, offsets and replication lag")
    status.add_argument("--namesrv", "-n", default=namesrv_default(), metavar="ADDR", help=NAMESRV_HELP)
    status.add_argument("--timeout", type=positive_float, default=3.0, metavar="S", help="per call (default 3 s)")
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=_run_status)


# -- up ------------------------------------------------------------------------------------


@attrs.define(slots=True)
class Member:
    """One process of the cluster."""

    name: str  # namesrv-1, broker-a-0 ...
    role: str  # NAMESRV, ASYNC_MASTER, SLAVE
    addr: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen | None = None
    reported: bool = False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _trocket() -> list[str]:
    """This trocket, as a command: ``-I`` keeps the current directory (a checkout, whose
    ``codecs/`` would shadow the standard library's) off ``sys.path``."""
    return [sys.executable, "-I", "-m", "trocket"]


def plan(args: argparse.Namespace, store: Path) -> list[Member]:
    """The processes to start, name servers first, each group's master before its slaves."""
    logs = store / "logs"
    members = []
    for i in range(args.namesrvs):
        addr = f"127.0.0.1:{_free_port()}"
        members.append(Member(f"namesrv-{i + 1}", "NAMESRV", addr, ["namesrv", "--listen", addr],
                              logs / f"namesrv-{i + 1}.log"))
    namesrv = ";".join(m.addr for m in members)
    names = string.ascii_lowercase
    for g in range(args.brokers):
        broker_name = f"broker-{names[g % 26]}{g // 26 or ''}"
        ha = f"127.0.0.1:{_free_port()}"
        for bid in range(args.slaves + 1):
            addr = f"127.0.0.1:{_free_port()}"
            role = "ASYNC_MASTER" if bid == 0 else "SLAVE"
            argv = ["broker", "--listen", addr, "-n", namesrv, "--broker-name", broker_name, "--broker-id", str(bid),
                    "--cluster", args.cluster, "--role", role, "--store", str(store / f"{broker_name}-{bid}"),
                    "--segment-size", args.segment_size]
            argv += ["--ha-listen", ha] if bid == 0 else ["--master-ha", ha]
            members.append(Member(f"{broker_name}-{bid}", role, addr, argv, logs / f"{broker_name}-{bid}.log"))
    return members


def _start(member: Member, env: dict[str, str]) -> None:
    member.log.parent.mkdir(parents=True, exist_ok=True)
    with open(member.log, "ab") as log:
        member.proc = subprocess.Popen([*_trocket(), *member.argv], stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=env, start_new_session=True)


def _booted(member: Member) -> bool:
    try:
        return b"boot success" in member.log.read_bytes()
    except OSError:
        return False


async def _wait_booted(member: Member, timeout: float) -> None:
    import trio

    with trio.move_on_after(timeout):
        while not _booted(member):
            if member.proc is not None and member.proc.poll() is not None:
                break
            await trio.sleep(0.05)
    if not _booted(member):
        tail = member.log.read_text(errors="replace").strip().splitlines()[-3:] if member.log.exists() else []
        why = f"exited with {member.proc.returncode}" if member.proc and member.proc.poll() is not None else \
            f"did not start within {timeout:g} s"
        raise ValueError(f"{member.name} ({member.addr}) {why}; {member.log}:\n  " + "\n  ".join(tail))


def _stop_all(members: list[Member], timeout: float = 30.0) -> None:
    """SIGINT to the brokers (slaves first), then the name servers; each waited for
    (``timeout``), then killed."""
    slaves = [m for m in members if m.role == "SLAVE"]
    masters = [m for m in members if m.role.endswith("MASTER")]
    for group in (slaves, masters, [m for m in members if m.role == "NAMESRV"]):
        for m in group:
            if m.proc is not None and m.proc.poll() is None:
                m.proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        for m in group:
            if m.proc is None:
                continue
            try:
                m.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait()


def _run_up(args: argparse.Namespace) -> int:
    import trio

    from trocket.interrupt import stop_on_signal

    store = Path(args.store).resolve()
    members = plan(args, store)
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    env["PYTHONUNBUFFERED"] = "1"
    namesrv = ";".join(m.addr for m in members if m.role == "NAMESRV")

    async def run() -> int:
        async with stop_on_signal():
            for kind in ("NAMESRV", "ASYNC_MASTER", "SLAVE"):
                batch = [m for m in members if m.role == kind]
                for m in batch:
                    _start(m, env)
                async with trio.open_nursery() as nursery:
                    for m in batch:
                        nursery.start_soon(_wait_booted, m, args.boot_timeout)
            print(_table(["name", "role", "address", "pid", "log"],
                         [[m.name, m.role, m.addr, m.proc.pid if m.proc else "-", m.log] for m in members]))
            print(f"\nNAMESRV_ADDR={namesrv}")
            print(f"export NAMESRV_ADDR='{namesrv}'   # then: trocket send -t T --body hi; trocket cluster status",
                  flush=True)
            print("Ctrl-C stops the cluster.", file=sys.stderr, flush=True)
            while True:
                for m in members:
                    if m.proc is not None and m.proc.poll() is not None and not m.reported:
                        m.reported = True
                        print(f"trocket cluster: {m.name} ({m.addr}) exited with {m.proc.returncode}; see {m.log}",
                              file=sys.stderr, flush=True)
                await trio.sleep(0.5)
        return EXIT_OK

    try:
        return trio.run(run)
    except BaseException as exc:
        from trocket.interrupt import is_interrupt

        leaf = exc
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        if isinstance(leaf, (ValueError, OSError)) and not is_interrupt(exc):
            print(f"trocket cluster: error: {leaf}", file=sys.stderr)
            return EXIT_FAIL
        raise
    finally:
        _stop_all(members)
        stopped = [f"{m.name} {m.proc.returncode}" for m in members if m.proc is not None]
        if stopped:
            print(f"trocket cluster: stopped ({', '.join(stopped)})", file=sys.stderr)


# -- status --------------------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    from trocket.cli_client import _table as table

    return table(headers, rows)


async def _status(args: argparse.Namespace) -> int:
    from trocket.cli_client import _broker_runtimes
    from trocket.client import ClientConfig, ClientInstance

    rows: list[dict[str, Any]] = []
    async with ClientInstance(ClientConfig(namesrv=args.namesrv, call_timeout=args.timeout)) as inst:
        for cname, name, bid, addr, rt, error in await _broker_runtimes(inst):
            rows.append({"cluster": cname, "broker": name, "id": bid, "addr": addr,
                         "role": rt.get("brokerRole"), "maxOffset": _int(rt.get("commitLogMaxOffset")),
                         "minOffset": _int(rt.get("commitLogMinOffset")),
                         "haSlaveFallBehind": _int(rt.get("haSlaveFallBehind")),
                         "haConnected": rt.get("haConnected"), "error": error})
    masters = {(r["cluster"], r["broker"]): r for r in rows if r["id"] == 0}
    for r in rows:
        master = masters.get((r["cluster"], r["broker"]))
        if r["id"] != 0 and master is not None and None not in (master["maxOffset"], r["maxOffset"]):
            r["behindMaster"] = max(0, master["maxOffset"] - r["maxOffset"])
        elif r["id"] != 0:
            r["behindMaster"] = None
    if args.json:
        print(json.dumps(rows))
    if not rows:
        print(f"trocket: error: no broker is registered with the name servers {args.namesrv}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        return EXIT_OK

    def ha(r: dict[str, Any]) -> str:
        if r["error"]:
            return r["error"]
        if r["id"] == 0:
            lag = r["haSlaveFallBehind"]
            return "no slave connected" if lag is None else f"slaves behind by {lag:,} B"
        behind = r.get("behindMaster")
        link = "connected" if r["haConnected"] == "true" else "not connected"
        return f"{link}, behind by {behind:,} B" if behind is not None else f"{link}, master unknown"

    print(_table(["cluster", "broker", "id", "address", "role", "max offset", "replication"],
                 [[r["cluster"], r["broker"], r["id"], r["addr"], r["role"], r["maxOffset"], ha(r)] for r in rows]))
    return EXIT_OK


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _run_status(args: argparse.Namespace) -> int:
    from trocket.cli_client import _run_trio

    return _run_trio(_status, args)
