"""``trocket admin group ...``: consumer groups, as an operator sees them (mqadmin's
``consumerProgress``, ``consumerConnection``, ``updateSubGroup``, ``resetOffsetByTime``).

    trocket admin group list [-b ADDR | -c CLUSTER]
    trocket admin group describe -g G
    trocket admin group offsets|lag -g G -t T
    trocket admin group connections -g G [--producer]
    trocket admin group status -g G -t T [--client ID]
    trocket admin group reset -g G -t T (--timestamp T | --offset N | --to earliest|latest)
    trocket admin group update -g G [--retry-queues N] [--retry-max N] [--consume on|off] ...
    trocket admin group delete -g G [--remove-offset]

``lag``/``offsets`` exit 1, naming the queues, when a queue's offsets cannot be read (its
master down, a call failing), and say so when the group does not exist (no broker has a
subscription group or offsets for it): no figure is shown as a lag it is not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from trocket.cli_client import _brokers, _instance, _masters, _namesrv_arg, _run_trio, _table
from trocket.exit_codes import EXIT_FAIL, EXIT_OK

__all__ = ["add_group_commands", "parse_time"]


def add_group_commands(asub: Any) -> None:
    group = asub.add_parser("group", help="consumer groups: list, describe, lag, connections, reset, update, delete")
    gsub = group.add_subparsers(dest="group_command", metavar="COMMAND", required=True)

    lst = gsub.add_parser("list", help="every subscription group of the brokers, with its config")
    _namesrv_arg(lst)
    where = lst.add_mutually_exclusive_group()
    where.add_argument("--broker", "-b", metavar="ADDR", help="this broker only")
    where.add_argument("--cluster", "-c", help="the masters of this cluster (default: every master)")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(run=lambda a: _run_trio(_list, a))

    desc = gsub.add_parser("describe", help="a group's config, clients and progress on every topic it consumes")
    _namesrv_arg(desc)
    desc.add_argument("--group", "-g", required=True)
    desc.add_argument("--json", action="store_true")
    desc.set_defaults(run=lambda a: _run_trio(_describe, a))

    for name, helptext in (("offsets", "per queue: broker offset, consumer offset, lag"),
                           ("lag", "total lag of the group on the topic, per broker")):
        g = gsub.add_parser(name, help=helptext)
        _namesrv_arg(g)
        g.add_argument("--group", "-g", required=True)
        g.add_argument("--topic", "-t", required=True)
        g.add_argument("--json", action="store_true")
        g.set_defaults(run=lambda a, name=name: _run_trio(_offsets if name == "offsets" else _lag, a))

    conns = gsub.add_parser("connections", help="the clients of a consumer (or producer) group (mqadmin consumerConnection)")
    _namesrv_arg(conns)
    conns.add_argument("--group", "-g", required=True)
    conns.add_argument("--producer", action="store_true", help="a producer group (mqadmin producerConnection; needs -t)")
    conns.add_argument("--topic", "-t", help="for --producer: a topic the group sends to (whose brokers are asked)")
    conns.add_argument("--json", action="store_true")
    conns.set_defaults(run=lambda a: _run_trio(_connections, a))

    status = gsub.add_parser(
        "status", help="the offsets each online client of the group holds for a topic (mqadmin getConsumerStatus)",
        description="The topic's broker asks every client of the group online (INVOKE_BROKER_TO_GET_CONSUMER_STATUS) "
        "for the offsets it holds in memory, before it commits them.",
    )
    _namesrv_arg(status)
    status.add_argument("--group", "-g", required=True)
    status.add_argument("--topic", "-t", required=True)
    status.add_argument("--client", "-i", metavar="ID", help="only this client id")
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=lambda a: _run_trio(_status, a))

    reset = gsub.add_parser(
        "reset", help="move a group's offsets on a topic: to a time, an offset, the earliest or the latest",
        description="--timestamp and --to go through the broker (INVOKE_BROKER_TO_RESET_OFFSET): it sets the "
        "offsets and tells the group's online clients, which re-consume from there. --offset sets every queue "
        "of the topic to N (clamped to the queue's range) and is refused while clients are online (they keep "
        "their own offsets).",
    )
    _namesrv_arg(reset)
    reset.add_argument("--group", "-g", required=True)
    reset.add_argument("--topic", "-t", required=True)
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--timestamp", metavar="T", help="ms since the epoch, or 'YYYY-MM-DD HH:MM:SS[.mmm]' (local time)")
    to.add_argument("--offset", type=int, metavar="N", help="this queue offset on every queue")
    to.add_argument("--to", choices=("earliest", "latest"), help="the first message still stored, or the end")
    reset.add_argument("--json", action="store_true")
    reset.set_defaults(run=lambda a: _run_trio(_reset, a))

    upd = gsub.add_parser("update", help="create or change a group's config on every master (mqadmin updateSubGroup)")
    _namesrv_arg(upd)
    upd.add_argument("--group", "-g", required=True)
    upd.add_argument("--cluster", "-c", help="only this cluster's masters")
    upd.add_argument("--consume", choices=("on", "off"), help="consumeEnable")
    upd.add_argument("--broadcast", choices=("on", "off"), help="consumeBroadcastEnable")
    upd.add_argument("--from-min", choices=("on", "off"), help="consumeFromMinEnable")
    upd.add_argument("--notify", choices=("on", "off"), help="notifyConsumerIdsChangedEnable")
    upd.add_argument("--retry-queues", type=int, metavar="N", help="retryQueueNums")
    upd.add_argument("--retry-max", type=int, metavar="N", help="retryMaxTimes")
    upd.add_argument("--broker-id", type=int, metavar="ID", help="brokerId")
    upd.add_argument("--slow-broker-id", type=int, metavar="ID", help="whichBrokerWhenConsumeSlowly")
    upd.add_argument("--json", action="store_true")
    upd.set_defaults(run=lambda a: _run_trio(_update, a))

    dele = gsub.add_parser("delete", help="delete a group's config from every master (mqadmin deleteSubGroup)")
    _namesrv_arg(dele)
    dele.add_argument("--group", "-g", required=True)
    dele.add_argument("--cluster", "-c", help="only this cluster's masters")
    dele.add_argument("--remove-offset", action="store_true", help="also drop its consumer offsets")
    dele.add_argument("--json", action="store_true")
    dele.set_defaults(run=lambda a: _run_trio(_delete, a))


def parse_time(text: str) -> int:
    """Epoch ms from ``text``: digits (ms), or a local ``YYYY-MM-DD HH:MM:SS[.mmm]``."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    main, _, frac = text.partition(".")
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
        try:
            base = time.mktime(time.strptime(main, fmt))
        except ValueError:
            continue
        millis = int(frac[:3].ljust(3, "0")) if frac.isdigit() else 0
        if frac and not frac.isdigit():
            break
        return int(base) * 1000 + millis
    raise ValueError(f"--timestamp {text!r} is neither ms since the epoch nor 'YYYY-MM-DD HH:MM:SS[.mmm]'")


def _on_off(value: str | None) -> bool | None:
    return None if value is None else value == "on"


# -- list / describe -------------------------------------------------------------------


async def _group_tables(inst, cluster: str | None = None, broker: str | None = None) -> list[tuple[str, str, Any]]:
    """(broker name, address, SubscriptionGroupWrapper or error text) of every master."""
    from trocket.client import ClientError

    targets = [("-", "-", broker)] if broker else await _masters(inst, cluster)
    out = []
    for _cname, name, addr in targets:
        try:
            out.append((name, addr, await inst.api.get_subscription_groups(addr)))
        except ClientError as exc:
            out.append((name, addr, exc.summary))
    return out


async def _route_masters(inst, topic: str) -> list[tuple[str, str]]:
    """(broker name, master address) of each broker of ``topic``'s route with a master
    online, in the route's order (none when the name servers do not know the topic)."""
    route = await inst.api.get_route(topic)
    return [(bd.broker_name, bd.master_addr) for bd in (route.broker_datas if route else []) if bd.master_addr]


def _config_doc(c) -> dict:
    return {"group": c.group_name, "consumeEnable": c.consume_enable, "consumeBroadcastEnable": c.consume_broadcast_enable,
            "consumeFromMinEnable": c.consume_from_min_enable, "retryQueueNums": c.retry_queue_nums,
            "retryMaxTimes": c.retry_max_times, "brokerId": c.broker_id,
            "whichBrokerWhenConsumeSlowly": c.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": c.notify_consumer_ids_changed_enable}


async def _list(args: argparse.Namespace) -> int:
    async with _instance(args) as inst:
        tables = await _group_tables(inst, args.cluster, args.broker)
    rows, errors = [], []
    for name, addr, table in tables:
        if isinstance(table, str):
            errors.append({"broker": name, "addr": addr, "error": table})
            continue
        for group, c in sorted(table.table.items()):
            rows.append({"broker": name, "addr": addr, **_config_doc(c)})
    if args.json:
        print(json.dumps({"groups": rows, "errors": errors}))
    else:
        yes = lambda v: "yes" if v else "no"  # noqa: E731
        print(_table(["group", "broker", "consume", "broadcast", "retry queues", "retry max", "notify"],
                     [[r["group"], r["broker"], yes(r["consumeEnable"]), yes(r["consumeBroadcastEnable"]),
                       r["retryQueueNums"], r["retryMaxTimes"], yes(r["notifyConsumerIdsChangedEnable"])] for r in rows]))
        for e in errors:
            print(f"{e['broker']} {e['addr']}: {e['error']}")
    return EXIT_OK if not errors else EXIT_FAIL


async def _describe(args: argparse.Namespace) -> int:
    from trocket.client import BrokerResponseError, ClientError
    from trocket.codecs.codes import ResponseCode

    group = args.group
    doc: dict[str, Any] = {"group": group, "configs": [], "clients": [], "queues": [], "errors": [], "consumeTps": 0.0}
    seen_clients: set[tuple[str, str]] = set()
    exists = False
    async with _instance(args) as inst:
        for name, addr, table in await _group_tables(inst):
            if isinstance(table, str):
                doc["errors"].append(f"{name} {addr}: {table}")
                continue
            config = table.table.get(group)
            if config is not None:
                exists = True
                doc["configs"].append({"broker": name, **_config_doc(config)})
            try:
                conn = await inst.api.get_consumer_connections(addr, group)
                exists = True
                doc["model"] = conn.message_model.name if conn.message_model is not None else None
                doc["consumeType"] = conn.consume_type.name if conn.consume_type is not None else None
                doc["subscriptions"] = sorted(f"{t}: {s.sub_string}" for t, s in conn.subscriptions.items())
                for c in conn.connections:
                    if (c.client_id, c.client_addr) not in seen_clients:
                        seen_clients.add((c.client_id, c.client_addr))
                        doc["clients"].append({"clientId": c.client_id, "addr": c.client_addr,
                                               "language": c.language, "version": c.version})
            except BrokerResponseError as exc:
                if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    doc["errors"].append(f"{name} {addr}: {exc.summary}")
            try:
                stats = await inst.api.get_consume_stats(addr, group)
            except ClientError as exc:
                doc["errors"].append(f"{name} {addr}: {exc.summary}")
                continue
            doc["consumeTps"] += stats.consume_tps
            for mq, w in sorted(stats.offset_table.items()):
                exists = True
                doc["queues"].append({"topic": mq.topic, "broker": mq.broker_name, "queue": mq.queue_id,
                                      "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
                                      "lag": w.broker_offset - w.consumer_offset, "lastTimestamp": w.last_timestamp})
    doc["exists"] = exists
    doc["lag"] = sum(q["lag"] for q in doc["queues"])
    if args.json:
        print(json.dumps(doc))
        return EXIT_OK if exists and not doc["errors"] else EXIT_FAIL
    if not exists:
        print(f"consumer group {group} does not exist: no broker has a subscription group, offsets or clients for it")
        return EXIT_FAIL
    for c in doc["configs"][:1]:
        print(f"group {group}: consume {'on' if c['consumeEnable'] else 'off'}, broadcast "
              f"{'on' if c['consumeBroadcastEnable'] else 'off'}, retry queues {c['retryQueueNums']}, "
              f"retry max {c['retryMaxTimes']}")
    if doc["clients"]:
        print(f"\n{len(doc['clients'])} client(s) online ({doc.get('consumeType')}, {doc.get('model')}): "
              + ", ".join(doc.get("subscriptions", [])))
        print(_table(["client id", "address", "language", "version"],
                     [[c["clientId"], c["addr"], c["language"], c["version"]] for c in doc["clients"]]))
    else:
        print("\nno client online")
    if doc["queues"]:
        print()
        print(_table(["topic", "broker", "queue", "broker offset", "consumer offset", "lag", "last consumed"],
                     [[q["topic"], q["broker"], q["queue"], q["brokerOffset"], q["consumerOffset"], q["lag"],
                       _when(q["lastTimestamp"])] for q in doc["queues"]]))
    print(f"\ntotal lag {doc['lag']}, consume tps {doc['consumeTps']:.2f}")
    for e in doc["errors"]:
        print(f"could not read {e}")
    return EXIT_OK if not doc["errors"] else EXIT_FAIL


def _when(ms: int) -> str | None:
    if not ms or ms <= 0:
        return None
    secs, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(secs)) + f".{millis:03d}"


# -- offsets / lag ------------------------------------------------------------------


async def _progress(args: argparse.Namespace) -> dict:
    """Per queue of the topic: the broker's max offset, the group's committed offset
    (None: none committed; read from the broker's offset table, GET_ALL_CONSUMER_OFFSET,
    where QUERY_CONSUMER_OFFSET would answer 0) and the lag, or the error that kept them
    from being read; whether the group exists (a subscription group or offsets anywhere)."""
    from trocket.client import ClientError, NoRouteError

    rows: list[dict] = []
    exists = False
    key = f"{args.topic}@{args.group}"
    async with _instance(args) as inst:
        route = await inst.api.get_route(args.topic)
        if route is None:
            raise NoRouteError(f"no route for topic {args.topic}: the name servers do not know it")
        tables: dict[str, Any] = {}  # broker name -> its offsets of the group on the topic, or the error
        for bd in route.broker_datas:
            addr = bd.master_addr
            if addr is None:
                tables[bd.broker_name] = f"broker {bd.broker_name} has no master online"
                continue
            try:
                tables[bd.broker_name] = (await inst.api.get_all_consumer_offsets(addr)).get(key)
                if tables[bd.broker_name] is not None or args.group in (await inst.api.get_subscription_groups(addr)).table:
                    exists = True
            except ClientError as exc:
                tables[bd.broker_name] = exc.summary
        for mq in sorted(await inst.subscribe_queues(args.topic)):
            row: dict[str, Any] = {"topic": mq.topic, "broker": mq.broker_name, "queue": mq.queue_id,
                                   "brokerOffset": None, "consumerOffset": None, "lag": None, "error": None}
            rows.append(row)
            committed = tables.get(mq.broker_name)
            if isinstance(committed, str):
                row["error"] = committed
                continue
            addr = inst.master_addr(mq.broker_name)
            try:
                row["brokerOffset"] = await inst.api.get_max_offset(addr, mq)
            except ClientError as exc:
                row["error"] = exc.summary
                continue
            offset = (committed or {}).get(mq.queue_id)
            if offset is not None and offset >= 0:
                row["consumerOffset"] = offset
                row["lag"] = max(0, row["brokerOffset"] - offset)
    failed = [r for r in rows if r["error"]]
    uncommitted = [r for r in rows if not r["error"] and r["consumerOffset"] is None]
    return {"group": args.group, "topic": args.topic, "exists": exists, "rows": rows, "failed": failed,
            "uncommitted": len(uncommitted),
            "lag": sum(r["lag"] for r in rows if r["lag"] is not None), "complete": not failed and not uncommitted}


def _problems(p: dict) -> list[str]:
    """What keeps the lag from being the group's lag (each an exit status of 1)."""
    out = []
    if not p["exists"] and not p["failed"]:
        out.append(f"consumer group {p['group']} does not exist: no broker has a subscription group or offsets "
                   f"for it (a lag would be every message of {p['topic']})")
    for r in p["failed"]:
        out.append(f"cannot read the offsets of {r['topic']} {r['broker']} queue {r['queue']}: {r['error']}")
    if p["failed"]:
        out.append(f"the lag of {len(p['rows']) - len(p['failed'])} of {len(p['rows'])} queues is {p['lag']}; "
                   "the total is not known")
    return out


def _notes(p: dict) -> list[str]:
    if p["exists"] and p["uncommitted"]:
        return [f"group {p['group']} has committed no offset on {p['uncommitted']} of the {len(p['rows'])} queues of "
                f"{p['topic']} yet: no lag is shown for them (a new consumer starts where it is told to)"]
    return []


def _finish(p: dict, problems: list[str], what: str) -> int:
    """The problems on stderr (exit 1), the notes, then the total when it is one."""
    for line in problems:
        print(f"trocket: {line}", file=sys.stderr)
    for line in _notes(p):
        print(f"\n{line}")
    if not problems:
        over = f" over the {len(p['rows']) - p['uncommitted']} queue(s) with an offset" if p["uncommitted"] else ""
        print(f"\n{what} {p['lag']}{over}")
    return EXIT_FAIL if problems else EXIT_OK


async def _offsets(args: argparse.Namespace) -> int:
    p = await _progress(args)
    problems = _problems(p)
    if args.json:
        print(json.dumps({**p, "problems": problems} if problems else p["rows"]))
        return EXIT_FAIL if problems else EXIT_OK
    if p["exists"] or p["failed"]:
        print(_table(["topic", "broker", "queue", "broker offset", "consumer offset", "lag"],
                     [[r["topic"], r["broker"], r["queue"], r["brokerOffset"], r["consumerOffset"],
                       "unknown" if r["error"] else r["lag"]] for r in p["rows"]]))
    return _finish(p, problems, f"group {args.group} on {args.topic}: total lag")


async def _lag(args: argparse.Namespace) -> int:
    p = await _progress(args)
    problems = _problems(p)
    per_broker: dict[str, dict] = {}
    for r in p["rows"]:
        acc = per_broker.setdefault(r["broker"], {"brokerOffset": 0, "consumerOffset": 0, "lag": 0, "unreadable": 0})
        if r["error"]:
            acc["unreadable"] += 1
            continue
        acc["brokerOffset"] += r["brokerOffset"]
        if r["lag"] is not None:
            acc["consumerOffset"] += r["consumerOffset"]
            acc["lag"] += r["lag"]
    doc = {"group": args.group, "topic": args.topic, "exists": p["exists"], "complete": p["complete"],
           "lag": p["lag"] if not problems else None, "brokers": per_broker, "problems": problems,
           "notes": _notes(p)}
    if args.json:
        print(json.dumps(doc))
        return EXIT_FAIL if problems else EXIT_OK
    if p["exists"] or p["failed"]:
        print(_table(["broker", "broker offset", "consumer offset", "lag", "queues unreadable"],
                     [[b, v["brokerOffset"], v["consumerOffset"], v["lag"], v["unreadable"]]
                      for b, v in sorted(per_broker.items())]))
    return _finish(p, problems, "total lag")


# -- connections ---------------------------------------------------------------------


async def _connections(args: argparse.Namespace) -> int:
    from trocket.client import BrokerResponseError, ClientError

    rows, errors, info = [], [], {}
    seen: set[tuple[str, str]] = set()
    async with _instance(args) as inst:
        if args.producer:
            if not args.topic:
                raise ValueError("--producer needs --topic: producers are known to the brokers they send to")
            targets = await _route_masters(inst, args.topic)
        else:
            targets = [(name, addr) for _c, name, bid, addr in await _brokers(inst)]
        for name, addr in targets:
            try:
                if args.producer:
                    found = (await inst.api.get_producer_connections(addr, args.group)).connections
                else:
                    conn = await inst.api.get_consumer_connections(addr, args.group)
                    found = conn.connections
                    info = {"consumeType": conn.consume_type.name if conn.consume_type else None,
                            "messageModel": conn.message_model.name if conn.message_model else None,
                            "consumeFromWhere": conn.consume_from_where.name if conn.consume_from_where else None,
                            "subscriptions": {t: s.sub_string for t, s in conn.subscriptions.items()}}
            except BrokerResponseError:
                continue  # not on that broker
            except ClientError as exc:
                errors.append(f"{name} {addr}: {exc.summary}")
                continue
            for c in found:
                if (c.client_id, c.client_addr) not in seen:
                    seen.add((c.client_id, c.client_addr))
                    rows.append({"clientId": c.client_id, "addr": c.client_addr, "language": c.language,
                                 "version": c.version, "broker": name})
    kind = "producer" if args.producer else "consumer"
    if args.json:
        print(json.dumps({"group": args.group, "kind": kind, "clients": rows, **info, "errors": errors}))
    else:
        if not rows:
            print(f"no client of {kind} group {args.group} is connected")
        else:
            if info:
                subs = ", ".join(f"{t} ({e})" for t, e in sorted(info["subscriptions"].items()))
                print(f"{info['consumeType']}, {info['messageModel']}, {info['consumeFromWhere']}; subscribes to {subs}")
            print(_table(["client id", "address", "language", "version"],
                         [[r["clientId"], r["addr"], r["language"], r["version"]] for r in rows]))
        for e in errors:
            print(f"could not ask {e}")
    return EXIT_OK if rows and not errors else EXIT_FAIL


# -- reset ---------------------------------------------------------------------------


async def _reset(args: argparse.Namespace) -> int:
    from trocket.client import BrokerResponseError, NoRouteError
    from trocket.codecs.codes import ResponseCode

    rows = []
    async with _instance(args) as inst:
        route = await inst.api.get_route(args.topic)
        if route is None:
            raise NoRouteError(f"no route for topic {args.topic}: the name servers do not know it")
        masters = [(bd.broker_name, bd.master_addr) for bd in sorted(route.broker_datas, key=lambda b: b.broker_name)]
        if any(addr is None for _, addr in masters):
            down = [name for name, addr in masters if addr is None]
            raise ValueError(f"broker(s) {', '.join(down)} of {args.topic} have no master online: nothing reset")
        if args.offset is not None:
            return await _reset_to_offset(inst, args, masters)
        timestamp = -1 if args.to == "latest" else 0 if args.to == "earliest" else parse_time(args.timestamp)
        for name, addr in masters:
            try:
                table = await inst.api.reset_offset(addr, args.topic, args.group, timestamp, force=True)
            except BrokerResponseError as exc:
                if exc.code == ResponseCode.SYSTEM_ERROR and "not exist" in (exc.remark or ""):
                    raise ValueError(f"nothing reset: {name} {addr}: {exc.remark}") from None
                raise
            for mq, offset in sorted(table.items()):
                rows.append({"topic": mq.topic, "broker": mq.broker_name, "queue": mq.queue_id, "offset": offset})
    if args.json:
        print(json.dumps({"group": args.group, "topic": args.topic, "timestamp": timestamp, "queues": rows}))
    else:
        print(_table(["topic", "broker", "queue", "new offset"], [[r["topic"], r["broker"], r["queue"], r["offset"]] for r in rows]))
        print(f"\ngroup {args.group} on {args.topic} reset ({'latest' if timestamp == -1 else timestamp}); "
              "online clients were told to re-consume from there")
    return EXIT_OK


async def _reset_to_offset(inst, args: argparse.Namespace, masters: list[tuple[str, str]]) -> int:
    from trocket.client import BrokerResponseError
    from trocket.codecs.bodies.client import MessageQueue

    for name, addr in masters:
        try:
            conn = await inst.api.get_consumer_connections(addr, args.group)
        except BrokerResponseError:
            continue
        if conn.connections:
            raise ValueError(f"{len(conn.connections)} client(s) of {args.group} are online at {name}: they keep "
                             "their own offsets and would write them back; stop them, or use --timestamp/--to")
    rows = []
    route = await inst.api.get_route(args.topic)
    for name, addr in masters:
        qd = next((q for q in route.queue_datas if q.broker_name == name), None)
        for queue_id in range(qd.read_queue_nums if qd is not None else 0):
            mq = MessageQueue(args.topic, name, queue_id)
            low, high = await inst.api.get_min_offset(addr, mq), await inst.api.get_max_offset(addr, mq)
            offset = min(max(args.offset, low), high)
            await inst.api.update_consumer_offset(addr, args.group, mq, offset)
            rows.append({"topic": args.topic, "broker": name, "queue": queue_id, "offset": offset})
    if args.json:
        print(json.dumps({"group": args.group, "topic": args.topic, "queues": rows}))
    else:
        print(_table(["topic", "broker", "queue", "new offset"], [[r["topic"], r["broker"], r["queue"], r["offset"]] for r in rows]))
    return EXIT_OK


# -- update / delete ------------------------------------------------------------------


async def _update(args: argparse.Namespace) -> int:
    import attrs

    from trocket.codecs.bodies.groups import SubscriptionGroupConfig
    from trocket.codecs.names import validate_group

    validate_group(args.group)
    for name in ("retry_queues", "retry_max"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} cannot be negative")
    changes = {k: v for k, v in {
        "consume_enable": _on_off(args.consume), "consume_broadcast_enable": _on_off(args.broadcast),
        "consume_from_min_enable": _on_off(args.from_min), "notify_consumer_ids_changed_enable": _on_off(args.notify),
        "retry_queue_nums": args.retry_queues, "retry_max_times": args.retry_max, "broker_id": args.broker_id,
        "which_broker_when_consume_slowly": args.slow_broker_id,
    }.items() if v is not None}
    rows = []
    async with _instance(args) as inst:
        for name, addr, table in await _group_tables(inst, args.cluster):
            if isinstance(table, str):
                raise ValueError(f"{name} {addr}: {table}")
            current = table.table.get(args.group) or SubscriptionGroupConfig(args.group)
            config = attrs.evolve(current, **changes)
            await inst.api.update_subscription_group(addr, config)
            rows.append({"broker": name, "addr": addr, **_config_doc(config)})
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"updated subscription group {args.group} at {r['addr']} ({r['broker']}): "
                  + ", ".join(f"{k}={v}" for k, v in r.items() if k not in ("broker", "addr", "group")))
    return EXIT_OK


async def _delete(args: argparse.Namespace) -> int:
    rows = []
    async with _instance(args) as inst:
        for _c, name, addr in await _masters(inst, args.cluster):
            await inst.api.delete_subscription_group(addr, args.group, remove_offset=args.remove_offset)
            rows.append({"broker": name, "addr": addr})
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"deleted subscription group {args.group} at {r['addr']} ({r['broker']})"
                  + (" with its offsets" if args.remove_offset else ""))
    return EXIT_OK


async def _status(args: argparse.Namespace) -> int:
    """As DefaultMQAdminExt.getConsumeStatus: the first broker of the topic's route with a
    master asks the clients (each answers for every broker's queues)."""
    async with _instance(args) as inst:
        masters = await _route_masters(inst, args.topic)
        if not masters:
            raise ValueError(f"topic {args.topic!r} has no route with a master")
        table = await inst.api.get_consumer_status(masters[0][1], args.topic, args.group, args.client)
    rows = [{"clientId": cid, "broker": mq.broker_name, "queue": mq.queue_id, "offset": offset}
            for cid in sorted(table)
            for mq, offset in sorted(table[cid].items(), key=lambda item: (item[0].broker_name, item[0].queue_id))]
    if args.json:
        print(json.dumps({"group": args.group, "topic": args.topic, "offsets": rows}))
    elif not rows:
        print(f"no client of {args.group} holds offsets of {args.topic}")
    else:
        print(_table(["client id", "broker", "queue", "offset"],
                     [[r["clientId"], r["broker"], r["queue"], r["offset"]] for r in rows]))
    return EXIT_OK
