"""Message trace, as the Java 4.9.8 client writes it (``enableMsgTrace``): Pub records for
sends, EndTransaction for a transaction's end, SubBefore / SubAfter for consumption, in ``RMQ_SYS_TRACE_TOPIC`` (or a topic of
your own), in Java's format, so mqadmin ``QueryMsgTraceById`` and the console read them.

* :func:`encode`: ``TraceDataEncoder.encoderFromContextBean`` -- the record's fields joined
  by ``\\x01``, ended by ``\\x02``, in Java's order; the keys to index the trace message by
  (the message id and its keys). :func:`decode` reads them back (``decoderFromTraceDataString``).
* :class:`TraceDispatcher`: ``AsyncTraceDispatcher`` -- :meth:`~TraceDispatcher.append` never
  waits (a bounded queue of 2048 contexts; past it a record is dropped and counted, as
  Java's ``offer`` fails); a task batches the records (up to ~118 KB of data or 24 KB of
  keys, sent as soon as full, else 500 ms after the first) into one message to the trace topic, keyed by every
  message id and key in it (Java caps only the data, and at a high rate of sends
  its keys pass the broker's 32 KiB of properties), sent by the producer group ``_INNER_TRACE_PRODUCER-<group>`` on the same
  client instance. A trace topic that cannot be written (no route, no permission) costs
  the user's messages nothing: the failure is logged and counted, the records dropped.
"""

from __future__ import annotations

import enum
import logging
import time
from collections import deque
from collections.abc import Iterable

import attrs
import trio

from trocket.codecs.message.msgid import UniqueIdGenerator

from .errors import ClientError

__all__ = [
    "DEFAULT_TRACE_TOPIC",
    "pub_record",
    "trace_pulled",
    "traced_invoker",
    "TraceBean",
    "TraceContext",
    "TraceDispatcher",
    "TraceRecord",
    "TraceType",
    "decode",
    "encode",
    "end_transaction_context",
]

log = logging.getLogger(__name__)

DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"
DEFAULT_REGION = "DefaultRegion"
#: AsyncTraceDispatcher's queueSize, maxMsgSize, waitTimeThresholdMil
QUEUE_SIZE = 2048
MAX_MSG_SIZE = 128_000
WAIT_THRESHOLD_S = 0.5
#: the keys of one trace message at most (its KEYS property; properties stop at 32 KiB)
MAX_KEYS_SIZE = 24_000


class TraceType(enum.Enum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


@attrs.define(slots=True)
class TraceBean:
    """``TraceBean``: one message of a trace context."""

    topic: str = ""
    msg_id: str = ""
    offset_msg_id: str = ""
    tags: str | None = None
    keys: str | None = None
    store_host: str = ""
    body_length: int = 0
    msg_type: int = 0  # MessageType ordinal: Normal_Msg 0, Trans_Msg_Half 1, Trans_msg_Commit 2, Delay_Msg 3
    retry_times: int = 0
    store_time: int = 0
    #: EndTransaction only: the transaction id (the message's UNIQ_KEY), the local
    #: transaction state's name (COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW) and whether a
    #: broker's check asked for it
    transaction_id: str | None = None
    transaction_state: str = ""
    from_transaction_check: bool = False


@attrs.define(slots=True)
class TraceContext:
    """``TraceContext``: what one send or one consumption call reports."""

    trace_type: TraceType
    group: str
    timestamp: int = attrs.field(factory=lambda: int(time.time() * 1000))
    region_id: str | None = DEFAULT_REGION
    cost_time: int = 0
    success: bool = True
    request_id: str = ""
    context_code: int = 0  # ConsumeReturnType ordinal: SUCCESS 0, TIME_OUT 1, EXCEPTION 2, RETURNNULL 3, FAILED 4
    beans: list[TraceBean] = attrs.field(factory=list)


def _s(value: object) -> str:
    """Java's ``StringBuilder.append``: null is ``null``, booleans lower case."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def pub_record(
    timestamp: int, region_id: str, group: str, topic: str, msg_id: str, tags: str | None, keys: str | None,
    store_host: str, body_length: int, cost_time: int, msg_type: int, offset_msg_id: str, success: bool,
) -> str:
    """:func:`encode` of a Pub context, in one f-string: what a traced send pays on its
    path (the tests hold the two equal)."""
    return (f"Pub\x01{timestamp}\x01{region_id}\x01{group}\x01{topic}\x01{msg_id}\x01"
            f"{'null' if tags is None else tags}\x01{'null' if keys is None else keys}\x01"
            f"{store_host}\x01{body_length}\x01{cost_time}\x01{msg_type}\x01{offset_msg_id}\x01"
            f"{'true' if success else 'false'}\x02")


#: ``MessageType.Trans_msg_Commit``: every EndTransaction record's type, whatever the state
MSG_TYPE_TRANS_COMMIT = 2


def end_transaction_context(
    group: str, topic: str, msg_id: str, tags: str | None, keys: str | None, broker_addr: str | None,
    transaction_id: str | None, state: str, from_check: bool, region_id: str | None,
) -> TraceContext:
    """``EndTransactionTraceHookImpl.endTransaction``: the EndTransaction context of a
    transaction's end (``group`` and ``topic`` without the namespace; ``state`` the
    LocalTransactionState's name; the message's region, else DefaultRegion)."""
    bean = TraceBean(topic=topic, msg_id=msg_id, tags=tags, keys=keys, store_host=broker_addr,  # type: ignore[arg-type]
                     msg_type=MSG_TYPE_TRANS_COMMIT, transaction_id=transaction_id, transaction_state=state,
                     from_transaction_check=from_check)
    return TraceContext(TraceType.EndTransaction, group, region_id=region_id or DEFAULT_REGION, beans=[bean])


def encode(ctx: TraceContext) -> tuple[str, list[str]]:
    """``TraceDataEncoder.encoderFromContextBean``: (the record data, its keys)."""
    c = CONTENT_SPLITOR
    parts: list[str] = []
    t = ctx.trace_type
    if t is TraceType.Pub:
        b = ctx.beans[0]
        fields = [t.value, ctx.timestamp, ctx.region_id, ctx.group, b.topic, b.msg_id, b.tags, b.keys,
                  b.store_host, b.body_length, ctx.cost_time, b.msg_type, b.offset_msg_id, ctx.success]
        parts.append(c.join(map(_s, fields)) + FIELD_SPLITOR)
    elif t is TraceType.SubBefore:
        for b in ctx.beans:
            fields = [t.value, ctx.timestamp, ctx.region_id, ctx.group, ctx.request_id, b.msg_id, b.retry_times,
                      b.keys]
            parts.append(c.join(map(_s, fields)) + FIELD_SPLITOR)
    elif t is TraceType.SubAfter:
        for b in ctx.beans:
            fields = [t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys, ctx.context_code,
                      ctx.timestamp, ctx.group]
            parts.append(c.join(map(_s, fields)) + FIELD_SPLITOR)
    elif t is TraceType.EndTransaction:
        b = ctx.beans[0]
        fields = [t.value, ctx.timestamp, ctx.region_id, ctx.group, b.topic, b.msg_id, b.tags, b.keys,
                  b.store_host, b.msg_type, b.transaction_id, b.transaction_state, b.from_transaction_check]
        parts.append(c.join(map(_s, fields)) + FIELD_SPLITOR)
    else:
        raise ValueError(f"trace type {t} is not written by this client")
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(b.msg_id)
        if b.keys:
            keys.extend(k for k in b.keys.split(" ") if k)
    return "".join(parts), keys


@attrs.define(slots=True, frozen=True)
class TraceRecord:
    """One decoded record (``decoderFromTraceDataString``'s TraceContext + TraceBean, flat)."""

    trace_type: str
    timestamp: int
    region_id: str
    group: str
    topic: str
    msg_id: str
    tags: str
    keys: str
    store_host: str
    body_length: int
    cost_time: int
    msg_type: int
    offset_msg_id: str
    success: bool
    request_id: str
    retry_times: int
    context_code: int
    transaction_id: str = ""
    transaction_state: str = ""
    from_transaction_check: bool = False


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def decode(data: str) -> list[TraceRecord]:
    """``TraceDataEncoder.decoderFromTraceDataString``: the records of one trace message
    (Pub, SubBefore, SubAfter, EndTransaction; others and short ones skipped)."""
    out = []
    for item in data.split(FIELD_SPLITOR):
        f = item.split(CONTENT_SPLITOR)
        kind = f[0] if f else ""
        blank = dict(timestamp=0, region_id="", group="", topic="", msg_id="", tags="", keys="", store_host="",
                     body_length=0, cost_time=0, msg_type=0, offset_msg_id="", success=True, request_id="",
                     retry_times=0, context_code=0)
        if kind == "Pub" and len(f) >= 13:
            blank.update(timestamp=_int(f[1]), region_id=f[2], group=f[3], topic=f[4], msg_id=f[5], tags=f[6],
                         keys=f[7], store_host=f[8], body_length=_int(f[9]), cost_time=_int(f[10]),
                         msg_type=_int(f[11]))
            if len(f) == 13:  # the old format: success last, no offset id
                blank.update(success=f[12] == "true")
            else:
                blank.update(offset_msg_id=f[12], success=f[13] == "true")
        elif kind == "SubBefore" and len(f) >= 8:
            blank.update(timestamp=_int(f[1]), region_id=f[2], group=f[3], request_id=f[4], msg_id=f[5],
                         retry_times=_int(f[6]), keys=f[7])
        elif kind == "SubAfter" and len(f) >= 6:
            blank.update(request_id=f[1], msg_id=f[2], cost_time=_int(f[3]), success=f[4] == "true", keys=f[5])
            if len(f) >= 7:
                blank.update(context_code=_int(f[6]))
            if len(f) >= 9:
                blank.update(timestamp=_int(f[7]), group=f[8])
        elif kind == "EndTransaction" and len(f) >= 13:
            blank.update(timestamp=_int(f[1]), region_id=f[2], group=f[3], topic=f[4], msg_id=f[5], tags=f[6],
                         keys=f[7], store_host=f[8], msg_type=_int(f[9]), transaction_id=f[10],
                         transaction_state=f[11], from_transaction_check=f[12] == "true")
        else:
            continue
        out.append(TraceRecord(trace_type=kind, **blank))  # type: ignore[arg-type]
    return out


class TraceDispatcher:
    """``AsyncTraceDispatcher`` (see the module docstring): run it in a nursery
    (``await nursery.start(dispatcher.run)``), :meth:`append` from anywhere on the trio
    thread, :meth:`flush` at the owner's close.

    Records gather in a segment (Java's ``TraceDataSegment``): lists of the encoded
    records and of the message ids and keys to index them by, which the trace message
    joins at once; a segment that reaches ~118 KB of data (or 24 KB of keys) is cut and
    sent at once, one that does not 500 ms after its first record. Appending is a few
    list appends and additions: no per-record work is left for the sending task but the
    joins."""

    def __init__(self, instance, group: str, topic: str = DEFAULT_TRACE_TOPIC) -> None:
        self.instance = instance
        self.group = group
        self.topic = topic
        # the segment filling: its records, their ids and keys (space-separated strings),
        # its sizes, and when its first record came (trio time)
        self._data: list[str] = []
        self._keys: list[str] = []
        self._size = 0
        self._keys_size = 0
        self._first = 0.0
        #: full segments waiting to be sent: (records, keys)
        self._ready: deque[tuple[list[str], list[str]]] = deque()
        #: records appended and not yet taken to be sent (at most QUEUE_SIZE)
        self._pending = 0
        self._wake = trio.Event()
        self._sending = trio.Lock()  # a flush at close waits for the segment in flight
        self._producer = None
        self._ids = None
        #: counters: records queued, dropped (queue full), trace messages sent, failed sends
        self.appended = 0
        self.dropped = 0
        self.sent = 0
        self.failed = 0

    def request_id(self) -> str:
        """``MessageClientIDSetter.createUniqID()``: a consumption call's id."""
        if self._ids is None:
            import os
            import random

            self._ids = UniqueIdGenerator(ip=self.instance.config.client_ip, pid=os.getpid(),
                                          class_loader_hash=random.getrandbits(32))
        return self._ids.next_id(int(time.time() * 1000))

    def append(self, ctx: TraceContext) -> None:
        """Queue a context's records (:func:`encode`); never waits."""
        data, _ = encode(ctx)
        for bean in ctx.beans[:1]:
            self.append_record(data, bean.msg_id, bean.keys)

    def append_record(self, data: str, msg_id: str, keys: str | None) -> None:
        """Queue an encoded record and the message it is about; never waits (dropped and
        counted when 2048 are queued, as Java's ``offer`` fails)."""
        if self._pending >= QUEUE_SIZE:
            self.dropped += 1
            return
        self._pending += 1
        self.appended += 1
        records = self._data
        if not records:
            self._first = trio.current_time()
            self._wake.set()  # the sending task times the segment from here
        records.append(data)
        self._keys.append(msg_id)
        self._keys_size += len(msg_id) + 1
        if keys:
            self._keys.append(keys)
            self._keys_size += len(keys) + 1
        self._size += len(data)
        # the keys go into the trace message's KEYS property, which a broker refuses past
        # 32 KiB of properties: a segment ends before that too
        if self._size >= MAX_MSG_SIZE - 10_000 or self._keys_size >= MAX_KEYS_SIZE:
            self._cut()
            self._wake.set()

    def _cut(self) -> None:
        """The segment filling goes to the ready ones; a new one begins."""
        if self._data:
            self._ready.append((self._data, self._keys))
            self._data, self._keys, self._size, self._keys_size = [], [], 0, 0

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        from .producer import Producer

        # no compression: zlib over ~100 KB of trace text would stall the senders sharing
        # this thread for a millisecond at a time
        self._producer = Producer(f"{GROUP_NAME_PREFIX}-{self.group}", instance=self.instance, retries=0,
                                  latency_fault=False, compress_over=MAX_MSG_SIZE * 2)
        async with self._producer:
            task_status.started(self)
            await self._dispatch()

    async def _dispatch(self) -> None:
        """Send each segment when full, else 500 ms after its first record (Java's
        ``sendDataByTimeThreshold``), until cancelled."""
        while True:
            await self._wake.wait()  # a segment began or is full
            self._wake = trio.Event()
            while True:
                await self.flush(cut=False)
                if not self._data:
                    break
                deadline = self._first + WAIT_THRESHOLD_S
                if trio.current_time() >= deadline:
                    self._cut()
                    continue
                with trio.move_on_at(deadline):
                    await self._wake.wait()  # full before its time
                self._wake = trio.Event()

    async def flush(self, *, cut: bool = True) -> None:
        """Send the full segments and (``cut``) the one filling now (after the segment
        the background task may be sending)."""
        async with self._sending:
            if cut:
                self._cut()
            while self._ready:
                records, keys = self._ready.popleft()
                self._pending -= len(records)
                await self._send("".join(records), dict.fromkeys(filter(None, " ".join(keys).split(" "))))

    async def _send(self, data: str, keys: Iterable[str]) -> None:
        from .message import new_message

        producer = self._producer
        if producer is None:
            self.failed += 1
            return
        try:
            await producer.send(new_message(self.topic, data.encode("utf-8"), keys=list(keys)), timeout=5.0)
            self.sent += 1
        except (ClientError, ValueError) as exc:
            self.failed += 1
            log.warning("trace data to %s not sent (%d bytes dropped): %s", self.topic, len(data), exc)


def _sub_before(dispatcher: TraceDispatcher, group: str, msgs) -> tuple[str, list[tuple[TraceBean, str | None]]]:
    """``ConsumeMessageTraceHookImpl.consumeMessageBefore``: a SubBefore record per
    message, one request id for the call; (that id, (bean, region) per message). A
    message whose ``TRACE_ON`` property is ``false`` is left out (Java's "trace switch")."""
    now = int(time.time() * 1000)
    request_id = dispatcher.request_id()
    traced = []  # (bean, region) per message (Java: one context of every bean)
    for msg in msgs:
        props = msg.properties
        if props.get("TRACE_ON") == "false":
            continue
        bean = TraceBean(
            topic=msg.topic, msg_id=msg.client_msg_id or msg.msg_id, tags=msg.tags, keys=props.get("KEYS"),
            store_host=str(msg.store_host),
            body_length=len(msg.body), retry_times=msg.reconsume_times, store_time=msg.store_timestamp,
        )
        # Java's hook takes the stored message's MSG_REGION as it is: null when absent (a
        # 4.9.8 broker stores it only with a send hook of its own)
        region = props.get("MSG_REGION")
        traced.append((bean, region))
        dispatcher.append(TraceContext(TraceType.SubBefore, group, timestamp=now, region_id=region,
                                       request_id=request_id, beans=[bean]))
    return request_id, traced


def _sub_after(dispatcher: TraceDispatcher, group: str, request_id: str, traced: list[tuple[TraceBean, str | None]],
               cost: int, ok: bool, code: int) -> None:
    """``consumeMessageAfter``: a SubAfter record per message of the call."""
    end = int(time.time() * 1000)
    for bean, region in traced:
        dispatcher.append(TraceContext(
            TraceType.SubAfter, group, timestamp=end, region_id=region,
            cost_time=cost, success=ok, request_id=request_id, context_code=code, beans=[bean],
        ))


def trace_pulled(dispatcher: TraceDispatcher, group: str, msgs) -> None:
    """The lite pull consumer's trace (``DefaultLitePullConsumerImpl.pullSyncImpl`` runs
    the hook on each pull's found messages, before they are polled): SubBefore, then at
    once SubAfter, successful, no return type (code 0), cost 0."""
    request_id, traced = _sub_before(dispatcher, group, msgs)
    _sub_after(dispatcher, group, request_id, traced, 0, True, 0)


def traced_invoker(invoke, dispatcher: TraceDispatcher, group: str):
    """``ConsumeMessageTraceHookImpl`` around a push consumer's callback invoker: a
    SubBefore record as the message is handed over, a SubAfter with the cost and the
    outcome once the callback returned (only while trace is on: the plain invoker is
    used otherwise)."""
    from .consumer_base import ConsumeResult

    async def invoke_traced(msgs, context):
        request_id, traced = _sub_before(dispatcher, group, msgs)
        t0 = time.monotonic()
        result = await invoke(msgs, context)
        # Java: success for SUCCESS or (orderly) COMMIT; the return type FAILED (4) for
        # RECONSUME_LATER, SUCCESS (0) otherwise
        ok = result is ConsumeResult.SUCCESS or result is ConsumeResult.COMMIT
        cost = int((time.monotonic() - t0) * 1000) // len(msgs)  # Java: the call's time over the batch's size
        _sub_after(dispatcher, group, request_id, traced, cost, ok,
                   4 if result is ConsumeResult.RECONSUME_LATER else 0)
        return result

    return invoke_traced
