"""``trocket consume``: a push consumer on the command line (like RocketMQ's
``mqadmin consumeMessage`` and ``kafka-console-consumer``).

::

    trocket consume --namesrv 127.0.0.1:9876 --topic T --group G [--count N]
                    [--from first|last|timestamp:T|offset:N] [--tag X | --sql EXPR] [--quiet] [--json]
                    [--namespace NS] [--vip-channel]

``--sql "a > 5 AND TAGS IN ('A', 'B')"`` subscribes with a SQL92 selector (the broker
needs ``enablePropertyFilter=true``; a bad expression is refused at start with the
broker's remark). ``--namespace NS`` consumes ``NS%T`` as group ``NS%G`` (Java's
namespace; lines name the topic without it); ``--vip-channel`` talks to each broker's
VIP channel (its port - 2; pulls stay on the main port, as Java's).

Prints one line per message (topic, queue, offset, msgId, tags, keys, born and store
times, user properties, a body preview; ``--json``: every field, all properties),
or with ``--quiet`` a progress line on stderr (when it is a terminal) and a summary.
Exits after ``--count`` messages or on Ctrl-C; either way the consumer shuts down
gracefully, so the group's offsets are committed (exactly the messages printed: a
message past the count is left unconsumed, for the next run).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import signal
import sys
import time

from trocket.argtypes import NAMESRV_HELP, namesrv_default, positive_int
from trocket.cli_client import add_client_knob_arguments, add_client_security_arguments, client_config
from trocket.interrupt import Stop
from trocket.progress import ProgressLine

__all__ = ["add_consume_command"]

PREVIEW = 64


def add_consume_command(sub) -> None:
    p = sub.add_parser(
        "consume",
        help="consume messages with a push consumer",
        description="Consume a topic as a clustering push consumer of GROUP: print each message "
        "(or, with --quiet, a progress line and a summary); stop after --count messages or on "
        "Ctrl-C with the group's offsets committed.",
    )
    p.add_argument("--namesrv", "-n", default=namesrv_default(), metavar="ADDR", help=NAMESRV_HELP)
    p.add_argument("--topic", "-t", required=True)
    p.add_argument("--group", "-g", required=True, help="consumer group")
    p.add_argument("--count", type=positive_int, default=None, metavar="N",
                   help="stop after N messages (default: run until Ctrl-C)")
    p.add_argument("--from", dest="from_", type=parse_start, default=("last", None),
                   metavar="first|last|timestamp:T|offset:N",
                   help="first / last: where a queue the group has no offset for starts (default last; a broker "
                   "answers 0 for a new group while the queue's first message is still stored, as Java's does). "
                   "timestamp:T (Unix seconds or milliseconds, ISO 8601, or yyyyMMddHHmmss local time) or offset:N "
                   "move the group's offset of every queue there first (as mqadmin resetOffsetByTime)")
    select = p.add_mutually_exclusive_group()
    select.add_argument("--tag", default="*", metavar="X", help="tag expression: X, 'A || B' or * (default)")
    select.add_argument("--sql", metavar="EXPR",
                        help="SQL92 selector on the message's properties, e.g. \"a > 5 AND TAGS = 'A'\" "
                        "(the broker needs enablePropertyFilter=true)")
    p.add_argument("--quiet", action="store_true", help="no message lines: a progress line and a summary")
    p.add_argument("--json", action="store_true", help="one JSON object per message instead of a text line")
    add_client_knob_arguments(p)
    add_client_security_arguments(p)
    p.set_defaults(run=_run_consume)


def parse_start(text: str) -> tuple[str, int | None]:
    """``first``, ``last``, ``timestamp:T`` (-> epoch ms) or ``offset:N``."""
    kind, _, value = text.partition(":")
    kind = kind.strip().lower()
    if kind in ("first", "last") and not value:
        return kind, None
    if kind == "offset":
        try:
            n = int(value)
        except ValueError:
            n = -1
        if n < 0:
            raise argparse.ArgumentTypeError(f"offset:{value}: N must be an offset, 0 or more")
        return "offset", n
    if kind == "timestamp":
        return "timestamp", _timestamp_ms(value)
    raise argparse.ArgumentTypeError(f"{text!r}: first, last, timestamp:T or offset:N")


def _timestamp_ms(text: str) -> int:
    from trocket.client.consumer_base import parse_timestamp

    text = text.strip()
    if text.isdigit() and len(text) == 14:  # Java's yyyyMMddHHmmss, local time
        return parse_timestamp(text)
    if text.isdigit():
        n = int(text)
        return n if len(text) >= 13 else n * 1000  # milliseconds, or seconds
    try:
        t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"timestamp:{text}: Unix seconds or milliseconds, ISO 8601 or yyyyMMddHHmmss") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return int(t.timestamp() * 1000)


def _time(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds."""
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _preview(body: bytes) -> str:
    head = body[:PREVIEW]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + head.hex() + ("..." if len(body) > PREVIEW else "")
    return text + ("..." if len(body) > PREVIEW else "")


def _line(msg, as_json: bool) -> str:
    from trocket.codecs.message import SYSTEM_PROPERTY_NAMES

    user = {k: v for k, v in msg.properties.items() if k not in SYSTEM_PROPERTY_NAMES}
    fields = {
        "topic": msg.topic,
        "queue": msg.queue_id,
        "offset": msg.queue_offset,
        "msgId": msg.client_msg_id,
        "offsetMsgId": msg.msg_id,
        "tags": msg.tags,
        "keys": " ".join(msg.keys) or None,
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "bornHost": str(msg.born_host),
        "storeHost": str(msg.store_host),
        "reconsumeTimes": msg.reconsume_times,
        "properties": dict(msg.properties),
        "size": len(msg.body),
        "body": _preview(msg.body),
    }
    if as_json:
        return json.dumps(fields, ensure_ascii=False)
    props = " ".join(f"{k}={v}" for k, v in user.items())
    return (f"{msg.topic} queue={msg.queue_id} offset={msg.queue_offset} msgId={fields['msgId']} "
            f"tags={msg.tags or '-'} keys={fields['keys'] or '-'} born={_time(msg.born_timestamp)} "
            f"stored={_time(msg.store_timestamp)}{' props=' + props if props else ''} body={fields['body']!r}")


async def _consume(args: argparse.Namespace) -> int:
    import trio

    from trocket.client.consumer import ConsumeResult, PushConsumer
    from trocket.client.instance import ClientInstance
    from trocket.client.subscription import MessageSelector
    from trocket.client.subscription import build as build_subscription
    from trocket.codecs.names import validate_group
    from trocket.codecs.namespace import wrap_namespace

    if args.count is not None and args.count < 1:
        raise ValueError("--count must be at least 1")
    validate_group(args.group)
    selector = args.tag if args.sql is None else MessageSelector.by_sql(args.sql)
    build_subscription(args.topic, selector)  # the topic's name and the expression
    done = trio.Event()
    count = 0
    progress = ProgressLine(args.count, label="consumed") if args.quiet else None
    out = sys.stdout

    async def listener(msg):
        nonlocal count
        if args.count is not None and count >= args.count:
            await trio.sleep_forever()  # past the count: cancelled at shutdown, left unconsumed
        count += 1
        if progress is not None:
            progress.update(count)
        else:
            out.write(_line(msg, args.json) + "\n")
        if args.count is not None and count >= args.count:
            done.set()
        return ConsumeResult.SUCCESS

    begin = time.perf_counter()
    start, value = args.from_
    # the names as the brokers know them (``NS%name`` with --namespace)
    wire_topic, wire_group = wrap_namespace(args.namespace, args.topic), wrap_namespace(args.namespace, args.group)
    async with ClientInstance(client_config(args)) as inst:
        await inst.route(wire_topic)  # a clear error now rather than waiting for a topic that is not there
        if value is not None:
            await _move_offsets(inst, wire_group, wire_topic, start, value)
        consumer = PushConsumer(
            args.group, subscriptions={args.topic: selector}, listener=listener, instance=inst,
            consume_from=start if value is None else "last", max_concurrency=1, await_termination_s=0.5,
            namespace=args.namespace,
        )
        stop = await _run_until_done(consumer, done, lambda: _check_access(inst, wire_topic))
    elapsed = time.perf_counter() - begin
    if progress is not None:
        progress.update(count, force=True)
        progress.close()
    out.flush()
    if args.quiet or args.count is None or stop.interrupted:
        why = f"; interrupted by {signal.Signals(stop.signum).name}" if stop.interrupted else ""
        print(f"consumed {count} messages from {args.topic} as {args.group} in {elapsed:.2f} s "
              f"({count / max(elapsed, 1e-9):,.0f} msg/s); offsets committed{why}",
              file=sys.stderr if not args.quiet else sys.stdout)
    return 0


async def _move_offsets(inst, group: str, topic: str, start: str, value: int) -> None:
    """The group's offset of every queue of ``topic`` set to the first message stored
    at or after ``value`` ms (``timestamp``), or to offset ``value`` kept within what
    the queue holds (``offset``): where the consumer then starts."""
    for mq in await inst.subscribe_queues(topic):
        addr = inst.master_addr(mq.broker_name)
        if addr is None:
            raise ValueError(f"no live master for {mq.broker_name}: cannot move {group}'s offsets")
        if start == "timestamp":
            offset = await inst.api.search_offset(addr, mq, value)
        else:
            low, high = await inst.api.get_min_offset(addr, mq), await inst.api.get_max_offset(addr, mq)
            offset = min(max(value, low), high)
        await inst.api.update_consumer_offset(addr, group, mq, offset)


async def _check_access(inst, topic: str) -> None:
    """The consumer's heartbeat (just registered) sent to every master of ``topic`` and
    awaited: a broker that refuses it -- ACL: a wrong key, no SUB on the topic or the
    group -- refuses every pull too, which a consumer only logs (as Java's does), so the
    command reports the refusal (:class:`~trocket.client.errors.BrokerResponseError`:
    code and remark) and exits 1 instead of waiting in silence."""
    data = inst.heartbeat_data()
    addrs = {inst.master_addr(mq.broker_name) for mq in await inst.subscribe_queues(topic)}
    for addr in sorted(a for a in addrs if a is not None):
        await inst.api.heartbeat(addr, data)


async def _run_until_done(consumer, done, check=None) -> Stop:
    """Run ``consumer`` until ``done`` is set or SIGINT/SIGTERM arrives; then its
    graceful close (offsets committed; a second signal cuts it short). ``check``: a
    coroutine function awaited once the consumer started (its error ends the run)."""
    from trocket.interrupt import stop_on_signal

    async with stop_on_signal(graceful=done.set) as stop:
        async with consumer:
            if check is not None:
                await check()
            await done.wait()
            # callbacks past --count wait for this: cancelled, their messages unconsumed
            await consumer.aclose(cancel_callbacks=True)
    return stop


def _run_consume(args: argparse.Namespace) -> int:
    import trio

    from trocket.client.errors import ClientError
    from trocket.codecs.errors import InvalidNameError

    try:
        return trio.run(_consume, args)
    except (ClientError, InvalidNameError, ValueError) as exc:
        print(f"trocket: error: {exc}", file=sys.stderr)
        return 1
