"""``trocket admin`` commands an operator runs against brokers (mqadmin's ``clusterList``,
``brokerStatus``, ``topicStatus``, ...): the cluster with its TPS, a broker's figures.

    trocket admin cluster
    trocket admin broker stats [-b ADDR | -c CLUSTER] [--all]
    trocket admin broker producers [-b ADDR | -c CLUSTER]
    trocket admin broker clean unused-topics|expired-queues|expired-commitlog [-b ADDR | -c CLUSTER]
    trocket admin topic stats -t TOPIC
    trocket admin group ...                 (trocket/cli_groups.py)
    trocket admin msg ...                   (trocket/cli_msg.py)

Tables, or JSON with ``--json``; one ``trocket: error: ...`` line and exit 1 on errors.
The helpers (``-n``, ``--timeout``, tables, the client instance) are
:mod:`trocket.cli_client`'s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from trocket.cli_client import _broker_runtimes, _instance, _namesrv_arg, _run_trio, _table
from trocket.exit_codes import EXIT_FAIL, EXIT_OK

__all__ = ["add_admin_commands", "first_tps"]


def add_admin_commands(asub: Any, topic_sub: Any) -> None:
    """Add ``cluster``, ``broker ...``, ``group ...`` to the ``admin`` subparsers
    ``asub`` and ``stats`` to the ``topic`` subparsers ``topic_sub``."""
    cluster = asub.add_parser("cluster", help="clusters and brokers: addresses, version, TPS in and out (like mqadmin clusterList)")
    _namesrv_arg(cluster)
    cluster.add_argument("--json", action="store_true")
    cluster.set_defaults(run=lambda args: _run_trio(_cluster, args))

    broker = asub.add_parser("broker", help="a broker's figures")
    bsub = broker.add_subparsers(dest="broker_command", metavar="COMMAND", required=True)
    stats = bsub.add_parser(
        "stats", help="put/get TPS, totals, latency, disk (like mqadmin brokerStatus)",
        description="A broker's runtime figures (GET_BROKER_RUNTIME_INFO): TPS over 10/60/600 s, "
        "messages today and yesterday, put latency, disk, queues. --all prints every key as mqadmin brokerStatus.",
    )
    _namesrv_arg(stats)
    _target_args(stats)
    stats.add_argument("--all", action="store_true", help="every runtime key, sorted (mqadmin brokerStatus)")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(run=lambda args: _run_trio(_broker_stats, args))

    config = bsub.add_parser("config", help="a broker's configuration: get, or set the keys that change live")
    csub = config.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    get = csub.add_parser("get", help="every key and value (mqadmin getBrokerConfig)")
    _namesrv_arg(get)
    _target_args(get)
    get.add_argument("--key", "-k", action="append", default=[], metavar="KEY", help="only these keys (repeatable)")
    get.add_argument("--json", action="store_true")
    get.set_defaults(run=lambda args: _run_trio(_config_get, args))
    cset = csub.add_parser(
        "set", help="change keys that change live, on every master (mqadmin updateBrokerConfig)",
        description="KEY=VALUE pairs (Java's broker.conf names), applied at once and written to the broker's "
        "config file. A key that cannot change while the broker runs is refused and nothing changes.",
    )
    _namesrv_arg(cset)
    _target_args(cset)
    cset.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
    cset.add_argument("--json", action="store_true")
    cset.set_defaults(run=lambda args: _run_trio(_config_set, args))

    perm = bsub.add_parser(
        "write-perm", help="drain a broker (off: no new sends routed to it) or undo it, on every name server "
        "(mqadmin wipeWritePerm / addWritePerm)",
    )
    _namesrv_arg(perm)
    perm.add_argument("state", choices=("off", "on"))
    perm.add_argument("--broker-name", "-B", required=True, metavar="NAME")
    perm.add_argument("--json", action="store_true")
    perm.set_defaults(run=lambda args: _run_trio(_write_perm, args))

    prods = bsub.add_parser(
        "producers", help="every producer connected to the brokers, by group (mqadmin producer)",
        description="GET_ALL_PRODUCER_INFO of each master (of --cluster, or --broker): group, client, its "
        "address, language, version and last heartbeat.",
    )
    _namesrv_arg(prods)
    _target_args(prods)
    prods.add_argument("--json", action="store_true")
    prods.set_defaults(run=lambda args: _run_trio(_producers, args))

    clean = bsub.add_parser(
        "clean", help="the store's cleaning, now (mqadmin cleanUnusedTopic / cleanExpiredCQ / deleteExpiredCommitLog)",
        description="unused-topics: drop the consume queues of topics with no config. expired-queues: drop the "
        "consume queues whose messages have all left the commit log. expired-commitlog: the next 20 retention "
        "passes (every cleanResourceInterval) delete the commit-log segments older than fileReservedTime "
        "whatever the hour (deleteWhen). On every master (of --cluster), or --broker.",
    )
    clean.add_argument("what", choices=sorted(_CLEAN_CALLS))
    _namesrv_arg(clean)
    _target_args(clean)
    clean.add_argument("--json", action="store_true")
    clean.set_defaults(run=lambda args: _run_trio(_clean, args))

    from trocket.cli_groups import add_group_commands

    add_group_commands(asub)

    from trocket.cli_msg import add_msg_commands

    add_msg_commands(asub)

    tstats = topic_sub.add_parser("stats", help="a topic's queues: min/max offsets, last store time, put TPS")
    _namesrv_arg(tstats)
    tstats.add_argument("--topic", "-t", required=True)
    tstats.add_argument("--json", action="store_true")
    tstats.set_defaults(run=lambda args: _run_trio(_topic_stats, args))


def _target_args(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--broker", "-b", metavar="ADDR", help="this broker only")
    where.add_argument("--cluster", "-c", help="every broker of this cluster (default: every broker)")


def first_tps(text: str | None) -> float | None:
    """The first figure of a ``putTps``-style value (``"2.5 1.0 0.3"``: the last 10 s);
    None when the broker has not sampled long enough (Java's empty parts)."""
    if not text:
        return None
    head = text.split(" ")[0]
    try:
        return float(head) if head else None
    except ValueError:
        return None


def _tps_list(text: str | None) -> list[float | None]:
    parts = (text or "").split(" ")
    out: list[float | None] = []
    for part in (parts + ["", "", ""])[:3]:
        try:
            out.append(float(part) if part else None)
        except ValueError:
            out.append(None)
    return out


# -- cluster ------------------------------------------------------------------------------


def _int(table: dict[str, str], key: str) -> int | None:
    try:
        return int(table[key])
    except (KeyError, ValueError):
        return None


async def _cluster(args: argparse.Namespace) -> int:
    rows = []
    async with _instance(args) as inst:
        for cname, name, bid, addr, rt, error in await _broker_runtimes(inst):
            put_now, put_morning = _int(rt, "msgPutTotalTodayNow"), _int(rt, "msgPutTotalTodayMorning")
            get_now, get_morning = _int(rt, "msgGetTotalTodayNow"), _int(rt, "msgGetTotalTodayMorning")
            earliest = _int(rt, "earliestMessageTimeStamp")
            rows.append({
                "cluster": cname, "broker": name, "id": bid, "addr": addr,
                "version": rt.get("brokerVersionDesc"),
                "putTps": first_tps(rt.get("putTps")), "getTps": first_tps(rt.get("getTransferedTps")),
                "putToday": None if put_now is None or put_morning is None else put_now - put_morning,
                "getToday": None if get_now is None or get_morning is None else get_now - get_morning,
                "hours": round((time.time() * 1000 - earliest) / 3_600_000, 2) if earliest and earliest > 0 else None,
                "diskRatio": float(rt["commitLogDiskRatio"]) if "commitLogDiskRatio" in rt else None,
                **_half_messages(rt),
                "error": error,
            })
    if args.json:
        print(json.dumps(rows))
    if not rows:  # an empty table would read as success
        print(f"trocket: error: no broker is registered with the name servers {args.namesrv} (is a broker running "
              f"with -n {args.namesrv}?)", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        return EXIT_OK
    print(_table(
        ["cluster", "broker", "id", "address", "version", "in tps", "out tps", "in today", "out today", "hours", "disk",
         "half msgs", "oldest half"],
        [[r["cluster"], r["broker"], r["id"], r["addr"], r["version"] if not r["error"] else r["error"],
          _fmt_tps(r["putTps"]), _fmt_tps(r["getTps"]), r["putToday"], r["getToday"], r["hours"],
          f"{r['diskRatio']:.4f}" if r["diskRatio"] is not None else None, r["halfPending"], r["halfOldest"]]
         for r in rows],
    ))
    if any(r["putTps"] is None and not r["error"] for r in rows):
        print("\n(TPS is sampled every second: a broker shows it 10 s after it started)")
    return EXIT_OK if not any(r["error"] for r in rows) else EXIT_FAIL


def _fmt_tps(value: float | None) -> str | None:
    return None if value is None else f"{value:.2f}"


def _half_messages(rt: dict[str, str]) -> dict[str, str | None]:
    """Transactions' half messages not ended yet on a broker, and the oldest one's age
    (a trocket broker's runtime figures; a Java broker has none)."""
    age = rt.get("transactionHalfOldestAgeMs")
    oldest = None if age is None else "-" if age == "-1" else f"{int(age) / 1000:.1f} s"
    return {"halfPending": rt.get("transactionHalfPending"), "halfOldest": oldest}


# -- broker stats ----------------------------------------------------------------------


async def _broker_stats(args: argparse.Namespace) -> int:
    docs = []
    async with _instance(args) as inst:
        for cname, name, bid, addr, rt, error in await _broker_runtimes(inst, args.cluster, args.broker):
            if error is not None:
                docs.append({"addr": addr, "broker": name, "error": error})
                continue
            docs.append({"addr": addr, "broker": name, "cluster": cname, "id": bid, "runtime": rt})
    if args.json:
        print(json.dumps(docs if args.all else [_summary(d) for d in docs]))
        return EXIT_OK if not any("error" in d for d in docs) else EXIT_FAIL
    for i, doc in enumerate(docs):
        if i:
            print()
        if "error" in doc:
            print(f"{doc['addr']}: {doc['error']}")
            continue
        if args.all:
            for key, value in sorted(doc["runtime"].items()):
                print(f"{key:<40} {value}")
            continue
        s = _summary(doc)
        print(f"broker {s['broker']} {s['addr']} ({s['version']}), up {s['runtime']}")
        print(_table(["figure", "value"], [[k, v] for k, v in s["figures"].items()]))
    return EXIT_OK if not any("error" in d for d in docs) else EXIT_FAIL


def _summary(doc: dict) -> dict:
    if "error" in doc:
        return doc
    rt = doc["runtime"]

    def tps(key: str) -> str:
        return " / ".join("-" if v is None else f"{v:.2f}" for v in _tps_list(rt.get(key)))

    def delta(now: str, then: str) -> int | None:
        a, b = _int(rt, now), _int(rt, then)
        return None if a is None or b is None else a - b

    figures = {
        "put tps (10 s / 60 s / 600 s)": tps("putTps"),
        "get tps (10 s / 60 s / 600 s)": tps("getTransferedTps"),
        "pulls found tps": tps("getFoundTps"),
        "pulls missed tps": tps("getMissTps"),
        "messages in today": delta("msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
        "messages out today": delta("msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
        "messages in yesterday": delta("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning"),
        "messages out yesterday": delta("msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning"),
        "put failures": rt.get("putMessageFailedTimes"),
        "put latency p99 / p99.9 (ms)": f"{rt.get('putLatency99', '-')} / {rt.get('putLatency999', '-')}",
        "longest put (ms)": rt.get("putMessageEntireTimeMax"),
        "commit log (min .. max offset)": f"{rt.get('commitLogMinOffset')} .. {rt.get('commitLogMaxOffset')}",
        "earliest message": rt.get("earliestMessageTimeStamp"),
        "disk": rt.get("commitLogDirCapacity"),
        "disk used ratio": rt.get("commitLogDiskRatio"),
        "not flushed yet": rt.get("remainHowManyDataToFlush"),
        "sends waiting": f"{rt.get('sendThreadPoolQueueSize')} of {rt.get('sendThreadPoolQueueCapacity')}",
        "pulls held": rt.get("pullRequestHeldNow"),
        "connections": rt.get("connections"),
    }
    if "brokerRole" in rt:
        figures["role"] = rt["brokerRole"]
    if "haSlaveFallBehind" in rt:
        figures["slave behind (bytes)"] = rt["haSlaveFallBehind"]
    return {"addr": doc["addr"], "broker": doc["broker"], "version": rt.get("brokerVersionDesc"),
            "runtime": rt.get("runtime"), "figures": figures}


# -- topic stats ------------------------------------------------------------------------


async def _topic_stats(args: argparse.Namespace) -> int:
    from trocket.client import ClientError, NoRouteError

    rows = []
    tps_rows = []
    async with _instance(args) as inst:
        route = await inst.api.get_route(args.topic)
        if route is None:
            raise NoRouteError(f"no route for topic {args.topic}: the name servers do not know it")
        for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
            addr = bd.master_addr
            if addr is None:
                continue
            table = await inst.api.get_topic_stats(addr, args.topic)
            for mq, off in sorted(table.offset_table.items()):
                rows.append({"broker": mq.broker_name, "queue": mq.queue_id, "minOffset": off.min_offset,
                             "maxOffset": off.max_offset, "lastUpdate": off.last_update_timestamp})
            try:
                data = await inst.api.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", args.topic)
                tps_rows.append({"broker": bd.broker_name, "putTpsMinute": data.stats_minute.tps,
                                 "putsLastHour": data.stats_hour.sum, "putsLastDay": data.stats_day.sum})
            except ClientError:  # nothing put on that broker since it started
                tps_rows.append({"broker": bd.broker_name, "putTpsMinute": 0.0, "putsLastHour": 0, "putsLastDay": 0})
    if args.json:
        print(json.dumps({"topic": args.topic, "queues": rows, "brokers": tps_rows}))
        return EXIT_OK
    print(_table(["broker", "queue", "min offset", "max offset", "last update"],
                 [[r["broker"], r["queue"], r["minOffset"], r["maxOffset"], _when(r["lastUpdate"])] for r in rows]))
    print()
    print(_table(["broker", "put tps (1 min)", "puts last hour", "puts last day"],
                 [[r["broker"], f"{r['putTpsMinute']:.2f}", r["putsLastHour"], r["putsLastDay"]] for r in tps_rows]))
    return EXIT_OK


def _when(ms: int) -> str | None:
    if not ms or ms <= 0:
        return None
    secs, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(secs)) + f".{millis:03d}"


# -- broker config and permissions ------------------------------------------------------


async def _config_targets(inst, args: argparse.Namespace) -> list[tuple[str, str]]:
    """(broker name, address): ``--broker``, else every master (of ``--cluster``)."""
    from trocket.cli_client import _masters

    if args.broker:
        return [("-", args.broker)]
    return [(name, addr) for _c, name, addr in await _masters(inst, args.cluster)]


async def _config_get(args: argparse.Namespace) -> int:
    docs = []
    async with _instance(args) as inst:
        for name, addr in await _config_targets(inst, args):
            props, version = await inst.api.get_broker_config(addr)
            if args.key:
                missing = [k for k in args.key if k not in props]
                if missing:
                    raise ValueError(f"{addr} has no key {', '.join(missing)}")
                props = {k: props[k] for k in args.key}
            docs.append({"broker": name, "addr": addr, "version": version, "config": props})
    if args.json:
        print(json.dumps(docs))
        return EXIT_OK
    for i, doc in enumerate(docs):
        if i:
            print()
        if len(docs) > 1:
            print(f"== {doc['broker']} {doc['addr']}")
        for key, value in sorted(doc["config"].items()):
            print(f"{key}={value}")
    return EXIT_OK


async def _config_set(args: argparse.Namespace) -> int:
    changes: dict[str, str] = {}
    for pair in args.pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{pair!r} is not KEY=VALUE")
        changes[key.strip()] = value.strip()
    rows = []
    async with _instance(args) as inst:
        for name, addr in await _config_targets(inst, args):
            await inst.api.update_broker_config(addr, changes)
            props, _ = await inst.api.get_broker_config(addr)
            rows.append({"broker": name, "addr": addr, "config": {k: props.get(k) for k in changes}})
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"update broker config success, {r['addr']}: "
                  + ", ".join(f"{k}={v}" for k, v in r["config"].items()))
    return EXIT_OK


async def _write_perm(args: argparse.Namespace) -> int:
    rows = []
    async with _instance(args) as inst:
        for ns in inst.config.namesrv:
            count = await inst.api.set_write_perm_of_broker(ns, args.broker_name, args.state == "on")
            rows.append({"namesrv": ns, "topics": count})
    if args.json:
        print(json.dumps({"broker": args.broker_name, "writable": args.state == "on", "namesrv": rows}))
    else:
        verb = "add" if args.state == "on" else "wipe"
        for r in rows:
            print(f"{verb} write perm of broker[{args.broker_name}] in name server[{r['namesrv']}]: "
                  f"{r['topics']} topic(s)")
        if args.state == "off":
            print("\n(a broker registering again restores its own permissions: set brokerPermission=4 to keep it "
                  "read-only: trocket admin broker config set brokerPermission=4)")
    return EXIT_OK


#: ``trocket admin broker clean WHAT`` -> its ClientAPI call, given the API and an address
_CLEAN_CALLS: dict[str, Callable[[Any, str], Awaitable[None]]] = {
    "unused-topics": lambda api, addr: api.clean_unused_topic(addr),
    "expired-queues": lambda api, addr: api.clean_expired_consume_queue(addr),
    "expired-commitlog": lambda api, addr: api.delete_expired_commit_log(addr),
}


async def _producers(args: argparse.Namespace) -> int:
    rows = []
    async with _instance(args) as inst:
        now = int(time.time() * 1000)
        for name, addr in await _config_targets(inst, args):
            table = await inst.api.get_all_producer_info(addr)
            for group in sorted(table.data):
                for p in table.data[group]:
                    rows.append({"broker": name, "addr": addr, "group": group, "clientId": p.client_id,
                                 "remote": p.remote_ip.lstrip("/"), "language": p.language, "version": p.version,
                                 "lastHeartbeatMs": p.last_update_timestamp,
                                 "heartbeatAgeS": round((now - p.last_update_timestamp) / 1000, 1)})
    if args.json:
        print(json.dumps(rows))
    elif not rows:
        print("no producer is connected")
    else:
        print(_table(["broker", "group", "client id", "address", "language", "version", "heartbeat"],
                     [[r["broker"], r["group"], r["clientId"], r["remote"], r["language"], r["version"],
                       f"{r['heartbeatAgeS']} s ago"] for r in rows]))
    return EXIT_OK


async def _clean(args: argparse.Namespace) -> int:
    done = []
    async with _instance(args) as inst:
        call = _CLEAN_CALLS[args.what]
        for name, addr in await _config_targets(inst, args):
            await call(inst.api, addr)
            done.append({"broker": name, "addr": addr})
    if args.json:
        print(json.dumps({"clean": args.what, "brokers": done}))
    else:
        for d in done:
            print(f"{args.what}: {d['addr']} success")
    return EXIT_OK
