"""``trocket admin msg trace MSG_ID``: a message's trace timeline, as mqadmin
``QueryMsgTraceById`` prints it (issue 25).

    trocket admin msg trace MSG_ID [--trace-topic RMQ_SYS_TRACE_TOPIC] [--json]

The trace topic is queried by the message id (QUERY_MESSAGE on every broker of its route:
a trace message is indexed by every message id and key it holds), the records of each
trace message found are decoded (:func:`trocket.client.trace.decode`, Java's
``TraceDataEncoder`` format: written by trocket's client with ``trace=True`` or Java's with
``enableMsgTrace``) and those about ``MSG_ID`` kept. As mqadmin: a Pub row per send
(producer group, the host that wrote the trace, send time, cost, status), then per
consumer group its Sub rows (from SubAfter: consume time, cost, status). A transaction's
EndTransaction records (which mqadmin leaves out) follow the Pub rows: producer group,
host, time, the local transaction state and whether a broker's check asked. ``--json``
gives every record, SubBefore too, in time order. No record found is an error (exit 1).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from trocket.cli_client import _instance, _namesrv_arg, _run_trio
from trocket.exit_codes import EXIT_OK

__all__ = ["add_trace_command"]

#: mqadmin's queryMessage(traceTopic, msgId, 64, 0, now)
MAX_TRACE_MESSAGES = 64


def add_trace_command(msub: Any) -> None:
    p = msub.add_parser(
        "trace", help="a message's trace: Pub, EndTransaction, SubBefore and SubAfter records "
        "(mqadmin QueryMsgTraceById)",
        description="The trace records of MSG_ID (the producer's message id, SendResult.msgId) in the trace topic, "
        "written by trocket's or Java's client with message trace on, as mqadmin QueryMsgTraceById lists them.",
    )
    _namesrv_arg(p)
    p.add_argument("msg_id", metavar="MSG_ID", help="the message id (UNIQ_KEY) the records are about")
    p.add_argument("--trace-topic", default="RMQ_SYS_TRACE_TOPIC", metavar="TOPIC",
                   help="the trace topic (default RMQ_SYS_TRACE_TOPIC)")
    p.add_argument("--json", action="store_true", help="every record as JSON")
    p.set_defaults(run=lambda args: _run_trio(_trace, args))


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _row(*cells: str) -> str:
    """mqadmin's ``%-10s %-20s %-20s %-20s %-10s %-10s``."""
    widths = (10, 20, 20, 20, 10, 10)
    return " ".join(str(c).ljust(w) for c, w in zip(cells, widths))


def _end_row(*cells: str) -> str:
    """An EndTransaction row: mqadmin's widths, the type and state columns wide enough."""
    widths = (15, 20, 20, 20, 17, 10)
    return " ".join(str(c).ljust(w) for c, w in zip(cells, widths))


async def _trace(args: argparse.Namespace) -> int:
    from trocket.cli_msg import _by_key
    from trocket.client.trace import decode

    msg_id = args.msg_id.strip()
    if not msg_id:
        raise ValueError("MSG_ID is empty")
    async with _instance(args) as inst:
        found = await _by_key(inst, args.trace_topic, msg_id, MAX_TRACE_MESSAGES, 0, int(time.time() * 1000),
                              unique=False)
    views = []
    for _broker, m in found:
        for r in decode(m.body.decode("utf-8", "replace")):
            if r.msg_id == msg_id:
                views.append((r, m.born_host.ip))
    if not views:
        raise ValueError(f"no trace record of {msg_id} in {args.trace_topic}")
    if args.json:
        docs = [{"type": r.trace_type, "group": r.group, "clientHost": host, "timestamp": r.timestamp,
                 "costTime": r.cost_time, "success": r.success, "topic": r.topic or None, "tags": r.tags or None,
                 "keys": r.keys or None, "storeHost": r.store_host or None, "offsetMsgId": r.offset_msg_id or None,
                 "requestId": r.request_id or None, "retryTimes": r.retry_times,
                 **({"msgType": r.msg_type, "transactionId": r.transaction_id or None,
                     "transactionState": r.transaction_state, "fromTransactionCheck": r.from_transaction_check}
                    if r.trace_type == "EndTransaction" else {})}
                for r, host in sorted(views, key=lambda v: v[0].timestamp)]
        print(json.dumps({"msgId": msg_id, "records": docs}))
        return EXIT_OK
    lines: list[str] = []
    consumers: dict[str, list[tuple[Any, str]]] = {}
    ends: list[tuple[Any, str]] = []
    for r, host in views:
        if r.trace_type == "Pub":
            lines += [_row("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"),
                      _row("Pub", r.group, host, _when(r.timestamp), f"{r.cost_time}ms",
                           "success" if r.success else "failed"), ""]
        elif r.trace_type == "SubAfter":
            consumers.setdefault(r.group, []).append((r, host))
        elif r.trace_type == "EndTransaction":
            ends.append((r, host))
    if ends:
        lines.append(_end_row("#Type", "#ProducerGroup", "#ClientHost", "#EndTime", "#State", "#FromCheck"))
        for r, host in sorted(ends, key=lambda v: v[0].timestamp):
            lines.append(_end_row("EndTransaction", r.group, host, _when(r.timestamp), r.transaction_state,
                                  "true" if r.from_transaction_check else "false"))
        lines.append("")
    for group, rows in consumers.items():
        lines.append(_row("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"))
        for r, host in rows:
            lines.append(_row("Sub", group, host, _when(r.timestamp), f"{r.cost_time}ms",
                              "success" if r.success else "failed"))
        lines.append("")
    print("\n".join(line.rstrip() for line in lines))
    return EXIT_OK
