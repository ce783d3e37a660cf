"""``trocket admin msg``: find stored messages (mqadmin's ``queryMsgByKey``,
``queryMsgById``, ``queryMsgByUniqueKey``, ``queryMsgByOffset``) and show one.

    trocket admin msg query -t TOPIC --key K [--begin T] [--end T] [--max N]
    trocket admin msg query -t TOPIC --unique-key ID
    trocket admin msg query --id OFFSET_MSG_ID            (-t TOPIC: also as a unique key)
    trocket admin msg query -t TOPIC --queue Q --offset N [--broker-name B]
    trocket admin msg show ID [-t TOPIC]
    trocket admin msg trace MSG_ID [--trace-topic T]     (trocket/cli_trace.py)

A query by key asks every broker of the topic's route (the master, else a slave) for
what its index holds (QUERY_MESSAGE) and keeps the messages whose keys really match (an
index answers hash collisions too), as Java's ``MQAdminImpl.queryMessage``; by unique
key the same with Java's unique-key flag, from a second before the time the id carries
and the oldest match kept. An offset message id names the broker and the commit-log
offset: that broker is asked for the record (VIEW_MESSAGE_BY_ID); an id that is not
one, with ``-t``, is looked up as a unique key (Java's ``viewMessage(topic, id)``). By
queue offset: the consume-queue entry (QUERY_CONSUME_QUEUE), then the record.

Tables, or JSON with ``--json``; a query that finds nothing is an error (exit 1), as
are an empty key and a time range that ends before it begins.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from trocket.cli_client import _instance, _namesrv_arg, _run_trio, _table
from trocket.codecs.java_ints import INT64_MAX
from trocket.exit_codes import EXIT_OK

__all__ = ["add_msg_commands"]

#: the body bytes a table or ``msg show`` previews
PREVIEW = 120
#: mqadmin's queryMsgByKey: 64 messages (``maxNum``), the broker caps at ``maxMsgsNumBatch``
DEFAULT_MAX = 64


def add_msg_commands(asub: Any) -> None:
    msg = asub.add_parser("msg", help="find stored messages by key, id, unique key or queue offset; show one")
    msub = msg.add_subparsers(dest="msg_command", metavar="COMMAND", required=True)
    query = msub.add_parser(
        "query", help="messages by key, unique key, id or queue offset (mqadmin queryMsgBy*)",
        description="By key (-t, --key): every broker of the topic is asked what its index holds for the key in "
        "[--begin, --end] (default: all time), hash collisions dropped. By unique key (-t, --unique-key): the "
        "producer's message id. By id (--id): the broker's offset message id (with -t, an id that is not one is "
        "taken as a unique key). By queue offset (-t, --queue, --offset).",
    )
    _namesrv_arg(query)
    query.add_argument("--topic", "-t")
    what = query.add_mutually_exclusive_group(required=True)
    what.add_argument("--key", "-k", help="a KEYS entry of the message")
    what.add_argument("--unique-key", "-u", metavar="ID", help="the producer's message id (UNIQ_KEY)")
    what.add_argument("--id", "-i", metavar="ID", help="the broker's offset message id (SendResult.offsetMsgId)")
    what.add_argument("--offset", "-o", type=int, metavar="N", help="the message at this queue offset (with --queue)")
    query.add_argument("--queue", "-q", type=int, metavar="Q", help="with --offset: the queue id")
    query.add_argument("--broker-name", "-B", metavar="NAME", help="with --offset: the broker of the queue")
    query.add_argument("--begin", metavar="T", help="key: stored at or after T (ms since the epoch, or "
                       "'YYYY-MM-DD HH:MM:SS[.mmm]' local time; default 0)")
    query.add_argument("--end", metavar="T", help="key: stored at or before T (default: now)")
    query.add_argument("--max", type=int, default=DEFAULT_MAX, metavar="N",
                       help=f"key: messages per broker at most (default {DEFAULT_MAX}; the broker caps it)")
    query.add_argument("--json", action="store_true")
    query.set_defaults(run=lambda a: _run_trio(_query, a))

    show = msub.add_parser("show", help="one message: properties, store and born times and hosts, body preview")
    _namesrv_arg(show)
    show.add_argument("id", metavar="ID", help="offset message id, or (with -t) unique key")
    show.add_argument("--topic", "-t", help="look the id up as a unique key when it is no offset message id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=lambda a: _run_trio(_show, a))

    from trocket.cli_trace import add_trace_command

    add_trace_command(msub)


# -- helpers -----------------------------------------------------------------------------


def _when(ms: int) -> str | None:
    if not ms or ms <= 0:
        return None
    secs, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(secs)) + f".{millis:03d}"


def _preview(body: bytes, n: int = PREVIEW) -> str:
    head = body[:n]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + head.hex() + ("..." if len(body) > n else "")
    return text + ("..." if len(body) > n else "")


def _doc(m, broker: str | None = None, *, full: bool = False) -> dict:
    doc = {
        "broker": broker, "topic": m.topic, "queue": m.queue_id, "queueOffset": m.queue_offset,
        "msgId": m.msg_id, "uniqKey": m.unique_key, "keys": " ".join(m.keys) or None, "tags": m.tags,
        "storeTime": m.store_timestamp, "size": len(m.body), "body": _preview(m.body),
    }
    if full:
        doc.update({
            "bornTime": m.born_timestamp, "bornHost": str(m.born_host), "storeHost": str(m.store_host),
            "commitLogOffset": m.commit_log_offset, "storeSize": m.store_size, "sysFlag": m.sys_flag,
            "reconsumeTimes": m.reconsume_times, "bodyCRC": m.body_crc, "flag": m.flag,
            "properties": dict(m.properties), "body": _preview(m.body, 1024),
        })
    return doc


def _route_addrs(route) -> list[tuple[str, str]]:
    """(broker name, address) of each broker of a route: the master, else a slave
    (Java's ``BrokerData.selectBrokerAddr``)."""
    out = []
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        addr = bd.master_addr or next((a for _i, a in sorted(bd.broker_addrs.items())), None)
        if addr is not None:
            out.append((bd.broker_name, addr))
    return out


async def _route(inst, topic: str):
    from trocket.client import NoRouteError

    route = await inst.api.get_route(topic)
    if route is None:
        raise NoRouteError(f"no route for topic {topic}: the name servers do not know it")
    return route


def _unique_begin(uniq: str) -> int:
    """``getNearlyTimeFromID(id) - 1000``, 0 when the id carries no time."""
    from trocket.codecs.errors import MessageIdError
    from trocket.codecs.message.msgid import decode_unique_id

    try:
        approx = decode_unique_id(uniq, now_ms=int(time.time() * 1000)).approx_time_ms
    except MessageIdError:
        return 0
    return max(0, (approx or 0) - 1000)


async def _by_key(inst, topic: str, key: str, max_num: int, begin: int, end: int, *, unique: bool) -> list[tuple[str, Any]]:
    """``MQAdminImpl.queryMessage``: every broker of the route asked, collisions dropped;
    by unique key only the oldest match."""
    from trocket.client import ClientError

    found: list[tuple[str, Any]] = []
    errors = []
    brokers = _route_addrs(await _route(inst, topic))
    for name, addr in brokers:
        try:
            messages, _ts, _phy = await inst.api.query_message(addr, topic, key, max_num, begin, end, unique=unique)
        except ClientError as exc:
            errors.append(f"{name} {addr}: {exc}")
            continue
        for m in messages:
            if unique:
                if m.client_msg_id == key:
                    found.append((name, m))
            elif m.topic == topic and key in m.keys:
                found.append((name, m))
    if errors and len(errors) == len(brokers):
        raise ValueError("no broker answered: " + "; ".join(errors))
    if unique and found:
        found = [min(found, key=lambda item: item[1].store_timestamp)]
    found.sort(key=lambda item: (item[1].store_timestamp, item[0]))
    return found


async def _by_offset_id(inst, msg_id: str) -> tuple[str, Any]:
    from trocket.codecs.message.msgid import decode_offset_msg_id

    oid = decode_offset_msg_id(msg_id)
    addr = str(oid.host)
    return addr, await inst.api.view_message(addr, oid.offset)


async def _by_id(inst, msg_id: str, topic: str | None) -> list[tuple[str, Any]]:
    """Java's ``viewMessage(topic, msgId)``: an offset message id first, else (with a
    topic) a unique key."""
    from trocket.codecs.errors import MessageIdError

    try:
        return [await _by_offset_id(inst, msg_id)]
    except MessageIdError:
        if topic is None:
            raise ValueError(f"{msg_id!r} is no offset message id; give -t TOPIC to look it up as a unique key") from None
    return await _by_key(inst, topic, msg_id, 32, _unique_begin(msg_id), INT64_MAX, unique=True)


async def _by_queue_offset(inst, args: argparse.Namespace) -> list[tuple[str, Any]]:
    brokers = _route_addrs(await _route(inst, args.topic))
    if args.broker_name is not None:
        brokers = [(n, a) for n, a in brokers if n == args.broker_name]
        if not brokers:
            raise ValueError(f"broker {args.broker_name!r} is not in {args.topic}'s route")
    elif len(brokers) > 1:
        raise ValueError(f"{args.topic} is on {len(brokers)} brokers ({', '.join(n for n, _ in brokers)}): "
                         "say which with --broker-name")
    name, addr = brokers[0]
    body = await inst.api.query_consume_queue(addr, args.topic, args.queue, args.offset, 1)
    if not body.queue_data:
        raise ValueError(f"{args.topic} queue {args.queue} of {name} has no offset {args.offset} "
                         f"(it holds {body.min_queue_index}..{body.max_queue_index - 1})")
    return [(name, await inst.api.view_message(addr, body.queue_data[0].physic_offset))]


# -- commands ----------------------------------------------------------------------------


async def _query(args: argparse.Namespace) -> int:
    from trocket.cli_groups import parse_time

    needs_topic = args.key is not None or args.unique_key is not None or args.offset is not None
    if needs_topic and not args.topic:
        raise ValueError("--topic is needed with --key, --unique-key and --offset")
    if args.offset is not None and args.queue is None:
        raise ValueError("--offset needs --queue")
    for name in ("key", "unique_key", "id"):
        value = getattr(args, name)
        if value is not None and not value.strip():
            raise ValueError(f"--{name.replace('_', '-')} is empty")
    if args.key is not None and " " in args.key:
        raise ValueError(f"--key {args.key!r} holds a space: KEYS entries are space-separated, query one at a time")
    begin = parse_time(args.begin) if args.begin else 0
    end = parse_time(args.end) if args.end else int(time.time() * 1000) + 1000
    if end < begin:
        raise ValueError(f"the time range ends ({end}) before it begins ({begin})")
    if args.max < 1:
        raise ValueError("--max must be at least 1")
    async with _instance(args) as inst:
        if args.key is not None:
            found = await _by_key(inst, args.topic, args.key, args.max, begin, end, unique=False)
            what = f"key {args.key!r} on {args.topic}"
        elif args.unique_key is not None:
            found = await _by_key(inst, args.topic, args.unique_key, 32, _unique_begin(args.unique_key), INT64_MAX,
                                  unique=True)
            what = f"unique key {args.unique_key} on {args.topic}"
        elif args.id is not None:
            found = await _by_id(inst, args.id, args.topic)
            what = f"id {args.id}"
        else:
            found = await _by_queue_offset(inst, args)
            what = f"{args.topic} queue {args.queue} offset {args.offset}"
    docs = [_doc(m, broker) for broker, m in found]
    if not docs:
        raise ValueError(f"no message found for {what}")
    if args.json:
        print(json.dumps({"query": what, "messages": docs}))
    else:
        print(_table(
            ["broker", "queue", "offset", "msg id", "unique key", "keys", "tags", "stored", "body"],
            [[d["broker"], d["queue"], d["queueOffset"], d["msgId"], d["uniqKey"], d["keys"], d["tags"],
              _when(d["storeTime"]), d["body"]] for d in docs],
        ))
    return EXIT_OK


async def _show(args: argparse.Namespace) -> int:
    if not args.id.strip():
        raise ValueError("the id is empty")
    async with _instance(args) as inst:
        found = await _by_id(inst, args.id, args.topic)
    if not found:
        raise ValueError(f"no message {args.id}" + (f" on {args.topic}" if args.topic else ""))
    broker, m = found[0]
    doc = _doc(m, broker, full=True)
    if args.json:
        print(json.dumps(doc))
        return EXIT_OK
    rows = [
        ["topic", doc["topic"]], ["queue", doc["queue"]], ["queue offset", doc["queueOffset"]],
        ["msg id", doc["msgId"]], ["unique key", doc["uniqKey"]], ["keys", doc["keys"]], ["tags", doc["tags"]],
        ["born", f"{_when(doc['bornTime'])} from {doc['bornHost']}"],
        ["stored", f"{_when(doc['storeTime'])} at {doc['storeHost']} (broker {broker})"],
        ["commit-log offset", doc["commitLogOffset"]], ["store size", doc["storeSize"]],
        ["reconsume times", doc["reconsumeTimes"]], ["sys flag", doc["sysFlag"]], ["body CRC", doc["bodyCRC"]],
        ["body", f"{doc['size']} bytes"],
    ]
    print(_table(["field", "value"], rows))
    print()
    print(_table(["property", "value"], [[k, v] for k, v in sorted(doc["properties"].items())]))
    print()
    print(doc["body"])
    return EXIT_OK
