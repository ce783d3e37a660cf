"""``trocket consume``: a push consumer on the command line (like RocketMQ's
``mqadmin consumeMessage`` and ``kafka-console-consumer``).

::

    trocket consume --namesrv 127.0.0.1:9876 --topic T --group G [--count N]
                    [--from first|last] [--tag X] [--quiet]

Prints one line per message (topic, queue, offset, msgId, tags, keys, a body preview),
or with ``--quiet`` a progress line on stderr (when it is a terminal) and a summary.
Exits after ``--count`` messages or on Ctrl-C; either way the consumer shuts down
gracefully, so the group's offsets are committed (exactly the messages printed: a
message past the count is left unconsumed, for the next run).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from trocket.argtypes import positive_int
from trocket.cli_client import add_client_security_arguments, client_config
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
    p.add_argument("--namesrv", "-n", default="127.0.0.1:9876", metavar="ADDR",
                   help="name servers, host:port[;host:port...] (default 127.0.0.1:9876)")
    p.add_argument("--topic", "-t", required=True)
    p.add_argument("--group", "-g", required=True, help="consumer group")
    p.add_argument("--count", type=positive_int, default=None, metavar="N",
                   help="stop after N messages (default: run until Ctrl-C)")
    p.add_argument("--from", dest="from_", choices=("first", "last"), default="last",
                   help="where a queue the group has no offset for starts (default last; a broker answers 0 "
                   "for a new group while the queue's first message is still stored, as Java's does)")
    p.add_argument("--tag", default="*", metavar="X", help="tag expression: X, 'A || B' or * (default)")
    p.add_argument("--quiet", action="store_true", help="no message lines: a progress line and a summary")
    p.add_argument("--json", action="store_true", help="one JSON object per message instead of a text line")
    add_client_security_arguments(p)
    p.set_defaults(run=_run_consume)


def _preview(body: bytes) -> str:
    head = body[:PREVIEW]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + head.hex() + ("..." if len(body) > PREVIEW else "")
    return text + ("..." if len(body) > PREVIEW else "")


def _line(msg, as_json: bool) -> str:
    fields = {
        "topic": msg.topic,
        "queue": msg.queue_id,
        "offset": msg.queue_offset,
        "msgId": msg.client_msg_id,
        "tags": msg.tags,
        "keys": " ".join(msg.keys) or None,
        "reconsumeTimes": msg.reconsume_times,
        "size": len(msg.body),
        "body": _preview(msg.body),
    }
    if as_json:
        return json.dumps(fields, ensure_ascii=False)
    return (f"{msg.topic} queue={msg.queue_id} offset={msg.queue_offset} msgId={fields['msgId']} "
            f"tags={msg.tags or '-'} keys={fields['keys'] or '-'} body={fields['body']!r}")


async def _consume(args: argparse.Namespace) -> int:
    import trio

    from trocket.client.consumer import ConsumeResult, PushConsumer
    from trocket.client.instance import ClientInstance
    from trocket.client.subscription import build as build_subscription
    from trocket.codecs.names import validate_group

    if args.count is not None and args.count < 1:
        raise ValueError("--count must be at least 1")
    validate_group(args.group)
    build_subscription(args.topic, args.tag)  # the topic's name and the tag expression
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
    async with ClientInstance(client_config(args)) as inst:
        await inst.route(args.topic)  # a clear error now rather than waiting for a topic that is not there
        consumer = PushConsumer(
            args.group, subscriptions={args.topic: args.tag}, listener=listener, instance=inst,
            consume_from=args.from_, max_concurrency=1, await_termination_s=0.5,
        )
        stop = await _run_until_done(consumer, done)
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


async def _run_until_done(consumer, done) -> Stop:
    """Run ``consumer`` until ``done`` is set or SIGINT/SIGTERM arrives; then its
    graceful close (offsets committed; a second signal cuts it short)."""
    from trocket.interrupt import stop_on_signal

    async with stop_on_signal(graceful=done.set) as stop:
        async with consumer:
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
