"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

RocketMQ 4.9's ``SendMessageProcessor`` + ``AbstractSendMessageProcessor.msgCheck``:

1. decode the header; malformed -> SYSTEM_ERROR. The processor reads V1's field names:
   :func:`~trocket.codecs.headers.fast.decode_send_fields` gives the eleven fields the
   send path reads, of either header version, as one tuple (its compiled twin builds
   it straight from the ext fields, with no header object);
2. checks, in Java's order, each with Java's code and remark: broker write permission
   (NO_PERMISSION), topic name (SYSTEM_ERROR, ``TopicValidator`` remark), send-forbidden
   system topics (NO_PERMISSION), topic config -- auto-created from the default topic
   (``TBW102``, the header's ``defaultTopic``/``defaultTopicQueueNums``) or, for
   ``%RETRY%<group>``, with 1 queue perm 6; otherwise TOPIC_NOT_EXIST -- then the queue
   id (SYSTEM_ERROR);
3. the properties string is stored verbatim (only TAGS and WAIT are looked up in it);
   a body larger than ``max_message_size`` is MESSAGE_ILLEGAL before any work;
4. put (the store prepares the record outside its append lock; a slave's store refuses:
   SERVICE_NOT_AVAILABLE with Java's remark), then in SYNC_FLUSH mode await the group
   commit, answering FLUSH_DISK_TIMEOUT (10) when it is late; on a SYNC_MASTER, hand
   (end offset, deadline) to the HA transfer service (below);
5. SUCCESS with a ``SendMessageResponseHeader`` -- ``msgId`` (the offset message id;
   comma-joined for a batch), ``queueId``, ``queueOffset`` (the first one for a batch)
   -- plus ``MSG_REGION`` and ``TRACE_ON``, in declaration order (the bytes the real
   clients are tested with; a Java broker writes HashMap order). Answered at once
   (ASYNC_FLUSH, or the producer does not wait) with no RPC hook on the endpoint, the
   processor encodes that answer's frame itself (``_answer_now``:
   :func:`~trocket.codecs.send_response.encode_send_ok`, no command made) and queues
   it with ``Connection.answer_frame_nowait``, in arrival order like any other;
   otherwise it is a command that ``Connection.answer`` finishes (the hooks see it).

Delayed messages: a single send whose properties carry ``DELAY`` (a level above 0) is
stored on ``SCHEDULE_TOPIC_XXXX`` by the broker's schedule service
(:meth:`~trocket.broker.schedule.ScheduleMessageService.rewrite`, the delay branch of
Java's ``CommitLog.putMessage``) and put on its topic when due; the answer names the
requested queue id and the schedule record's msgId and queue offset, as Java's. Not
for a message the retry path sends to the DLQ (Java sets its level to 0). A batch
whose properties carry ``DELAY`` is MESSAGE_ILLEGAL (``asyncPutMessages``). Clients
may not send to ``SCHEDULE_TOPIC_XXXX`` itself (NO_PERMISSION, ``TopicValidator``).

A batch is code 320, or code 10/310 with ``batch`` true -- the C++ client sends
``batch:"1"``, which the header codec reads as true. The C++ client also deflates a
batch body of 4 KiB or more (zlib, ``sysFlag`` bit 0), which no Java client does: such
a body is inflated here (never past ``max_message_size``) and the entries are stored
with bit 0 clear, since each entry's own body is plain. Transactional (prepared)
messages are refused with Java's ``rejectTransactionMessage`` answer: this broker has
no half-message service, and a prepared record would never become visible.

Order and concurrency: the processor runs *inline* on the connection's reader, so the
sends of one connection are stored in the order they arrived -- as Java's single send
thread stores them. (Run as one trio task each, they were stored in whatever order trio
first ran the tasks, and it reverses batches of runnable tasks at random: pipelined
``send_oneway_orderly`` / async sends of the C++ client came out of order.) Everything
up to and including the put is synchronous and short (the store prepares the record
outside its append lock); only a SYNC_FLUSH send waits, for its group commit, in a task
of the connection (counted in-flight, so a shutdown drains it) that answers when the
flush covers it. At most ``send_concurrency + send_queue_capacity`` sends wait at once;
past that SYSTEM_BUSY at once (with an ``extFields`` object, which the C++ client
needs). A send answered later goes out through ``Connection.answer`` like any other
(RPC hooks' ``do_after_response`` see it).

SYNC_MASTER (:mod:`trocket.broker.ha`): a send whose producer waits (WAIT, default
true) is answered SLAVE_NOT_AVAILABLE (11) at once when no slave is connected or it lags
more than ``haSlaveFallbehindMax``; otherwise the processor submits (end offset,
callback) to :class:`~trocket.broker.ha.transfer.GroupTransferService` and returns --
no task waits. The service calls back, in commit-log order, once a slave
acknowledgement covers the end (or with FLUSH_SLAVE_TIMEOUT, 12, after
``syncFlushTimeout``); the callback queues the answer, and at the end of the service's
pass every answer it completed is written right there, one write per connection (a
task takes over a connection's rest only when its outbox is full). With SYNC_FLUSH too, the
flush task awaits the group commit and then the transfer (already under way), so both
are awaited at once. ``replication_blocking_send`` (benchmarks only) instead runs each
send in one serial task that waits for the slave: the pre-4.7 design. Anything unexpected a send raises is
answered by the endpoint (SYSTEM_ERROR, see :mod:`trocket.broker.processors`).
"""

from __future__ import annotations

import logging
import random
import zlib
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import trio

from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from trocket.codecs.message.properties import get_property
from trocket.codecs.message.sysflag import (
    COMPRESSED_FLAG,
    MULTI_TAGS_FLAG,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from trocket.codecs.send_response import SendResponseTemplate, encode_send_ok
from trocket.codecs.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_not_allowed_send_topic,
    validate_topic,
)
from trocket.codecs.errors import CustomHeaderError, InvalidNameError
from trocket.codecs.headers.fast import SendFields, decode_send_fields
from trocket.remoting import Connection

from ..store import (
    BatchInner,
    FlushMode,
    PutMessageError,
    PutResult,
    PutStatus,
    StoreClosedError,
    tags_hash,
)
from ..store.messages import message_inner
from ..store.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from .client import register_now
from . import (
    APPLY_TOPIC_URL,
    HeaderError,
    decode_request_header,
    host_address,
    reply,
    suggest_todo,
    topic_config_string,
)

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["SendProcessor", "register"]

log = logging.getLogger(__name__)

_BUSY_REMARK = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 0ms, size of queue: {}"
#: ``MixAll.DEFAULT_MAX_RECONSUME_TIMES`` / SubscriptionGroupConfig.retryMaxTimes.
MAX_RECONSUME_TIMES = 16
#: what Java's SendMessageProcessor adds to every SUCCESS besides the header (its
#: defaults: ``regionId`` DefaultRegion, ``traceOn`` true)
_OK_EXT = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
_OK_TEMPLATE = SendResponseTemplate(_OK_EXT)
#: the answer's code for each status a stored message can have
_STATUS_CODES = {
    PutStatus.PUT_OK: int(ResponseCode.SUCCESS),
    PutStatus.FLUSH_DISK_TIMEOUT: int(ResponseCode.FLUSH_DISK_TIMEOUT),
    PutStatus.FLUSH_SLAVE_TIMEOUT: int(ResponseCode.FLUSH_SLAVE_TIMEOUT),
    PutStatus.SLAVE_NOT_AVAILABLE: int(ResponseCode.SLAVE_NOT_AVAILABLE),
}
_PUT_OK = PutStatus.PUT_OK
assert _STATUS_CODES[_PUT_OK] == 0
_SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
#: topic names that passed ``validate_topic`` and are not send-forbidden (names only:
#: the topic's config is looked up on every send); cleared when it grows past the bound
_CHECKED_TOPICS_MAX = 4096


def _positive_int(text: str) -> bool:
    try:
        return int(text) > 0
    except ValueError:
        return False


class _Replica:
    """A transfer completion a task awaits (SYNC_FLUSH + SYNC_MASTER, the blocking variant)."""

    __slots__ = ("event", "ok")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.ok = False

    def set(self, ok: bool) -> None:
        self.ok = ok
        self.event.set()


_PROPS_NOT_UTF8 = "properties are not valid UTF-8"


def _waits(props: str) -> bool:
    """Whether the producer waits for the store (the WAIT property, default true); the
    callers skip the call when the string has no WAIT at all."""
    return (get_property(props, "WAIT") or "true").lower() == "true"


class SendProcessor:
    """The send processor (one per broker); ``process_request`` is what remoting calls."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.store = ctx.store
        self.topics = ctx.topics
        #: ScheduleMessageService (delayed messages); None: DELAY is not acted upon
        self.schedule = ctx.schedule
        self.capacity = ctx.config.send_concurrency + ctx.config.send_queue_capacity
        self.pending = 0
        self.max_message_size = ctx.config.max_message_size
        #: the store's flush mode is fixed when it opens
        self._sync_flush = ctx.store.config.flush_mode is FlushMode.SYNC
        self._random = random.Random()
        self._checked_topics: set[str] = set()
        #: a topic this send created (auto-create): answered once the name servers know it
        self._created: str | None = None
        #: SYNC_MASTER: the HA transfer service sends are handed to (None: no waiting on a slave)
        ha = getattr(ctx, "ha", None)
        self.transfer = ha.transfer if ha is not None and ctx.config.is_sync_master else None
        #: answers the transfer service completed in its current pass, written at its end
        self._replicated_ready: list[tuple[Connection, RemotingCommand, PutResult]] = []
        #: connections whose outbox was full: a task writes their answers, in order
        self._answers: dict[Connection, deque] = {}
        if self.transfer is not None:
            self.transfer.add_pass_listener(self._write_replicated)
        #: comparison only: each send awaits the slave in one serial task (pre-4.7 design)
        self.blocking_replication = bool(ctx.config.replication_blocking_send)
        self._serial = trio.Lock()
        # counters for GET_BROKER_RUNTIME_INFO
        self.put_messages = 0
        self.put_bytes = 0
        self.put_failures = 0

    # -- entry ---------------------------------------------------------------------------

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        """Inline on the connection's reader (see the module docstring): the answer, or
        None when a SYNC_FLUSH send answers from its own task once flushed. (Not
        :func:`guarded`: :meth:`_process` answers a malformed header itself, one Python
        call less per send.)"""
        if self.pending >= self.capacity:
            return reply(ResponseCode.SYSTEM_BUSY, _BUSY_REMARK.format(self.pending))
        if self.blocking_replication:
            self.pending += 1
            try:
                conn.start_handler(self._blocking_send, conn, request)
            except BaseException:
                self.pending -= 1
                raise
            return None
        outcome = self._process(conn, request)
        if self._created is not None:
            created, self._created = self._created, None
            self._answer_when_registered(conn, request, outcome, created)
            return None
        if isinstance(outcome, PutResult):
            if self.transfer is not None:
                self._hand_off(conn, request, outcome)
            else:
                self._answer_when_flushed(conn, request, outcome)
            return None
        return outcome

    def _answer_when_registered(self, conn, request: RemotingCommand, outcome, topic: str) -> None:
        """Java's ``createTopicInSendMessageMethod`` registers with the name servers before
        the send is answered, so a client that looks the new topic up right after its send
        finds the route. Rare (a topic's first send): one handler task waits for the
        registration, then answers as :meth:`process_request` would have."""
        self.pending += 1
        try:
            conn.start_handler(self._register_then_answer, conn, request, outcome, topic)
        except BaseException:
            self.pending -= 1
            raise

    async def _register_then_answer(self, conn, request: RemotingCommand, outcome, topic: str) -> None:
        try:
            await register_now(self.ctx, topic)
        finally:
            self.pending -= 1
        if not isinstance(outcome, PutResult):
            await conn.answer(request, outcome)
        elif self.transfer is not None:
            self._hand_off(conn, request, outcome)
        else:
            self.pending += 1
            await self._flush_then_answer(conn, request, outcome)

    def _after_put(self, result: PutResult, wait: bool) -> RemotingCommand | PutResult:
        """The answer now, or the result itself when it must wait for the group commit
        (or, on a SYNC_MASTER, for the slave)."""
        if wait:
            transfer = self.transfer
            if transfer is not None:
                if transfer.slave_ok(result.end_offset):
                    return result
                result.status = PutStatus.SLAVE_NOT_AVAILABLE  # stored, not replicated
                return self._ok(result)
            if self._sync_flush and self.store.flush_service.flushed_offset < result.end_offset:
                return result
        return self._ok(result)

    # -- SYNC_MASTER: the hand-off to the transfer service (never awaited here) ------------

    def _hand_off(self, conn, request: RemotingCommand, result: PutResult) -> None:
        """Give (end offset, deadline) to the transfer service; the answer goes out from
        :meth:`_replicated` when it completes. With SYNC_FLUSH too, a task awaits the
        group commit while the slave catches up: the answer waits for both, concurrently."""
        self.pending += 1
        transfer = self.transfer
        if self._sync_flush and self.store.flush_service.flushed_offset < result.end_offset:
            done = _Replica()
            transfer.submit(result.end_offset, _Replica.set, done)
            try:
                conn.start_handler(self._flush_then_answer, conn, request, result, done)
            except BaseException:
                self.pending -= 1
                raise
            return
        transfer.submit(result.end_offset, self._replicated, (conn, request, result))

    def _replicated(self, answer: tuple[Connection, RemotingCommand, PutResult], ok: bool) -> None:
        """The transfer service's callback: the answer goes out at the end of its pass."""
        if not ok:
            answer[2].status = PutStatus.FLUSH_SLAVE_TIMEOUT
        self._replicated_ready.append(answer)

    def _write_replicated(self) -> None:
        """End of a transfer pass: write every answer it completed, in order, corked per
        connection (one write each). A connection whose outbox is full gets a task that
        waits for room and writes the rest of its answers (later ones queue behind)."""
        ready = self._replicated_ready
        if not ready:
            return
        self._replicated_ready = []
        backlog = self._answers
        corked: dict[Connection, bool] = {}
        try:
            for conn, request, result in ready:
                queue = backlog.get(conn)
                if queue is not None:
                    queue.append((request, result))
                    continue
                if conn not in corked:
                    corked[conn] = conn.cork()
                try:
                    # SUCCESS from the template's bytes, as an ASYNC_MASTER's answer
                    if self._answer_now(conn, request, result):
                        self.pending -= 1
                        continue
                    outcome = conn.answer_soon(request, self._ok(result))
                except Exception:  # one answer that fails must not lose the others
                    log.exception("answering a replicated send failed")
                    outcome = False
                if outcome.__class__ is bool:
                    self.pending -= 1
                    continue
                backlog[conn] = queue = deque()
                try:
                    conn.start_handler(self._answer_queued, conn, queue, outcome)
                except Exception:  # the connection is gone: nobody to answer
                    outcome.close()  # type: ignore[union-attr]
                    del backlog[conn]
                    self.pending -= 1
        finally:
            for conn, was in corked.items():
                conn.uncork(was)

    async def _answer_queued(self, conn, queue: deque, first: Awaitable[bool]) -> None:
        try:
            try:
                await first
            finally:
                self.pending -= 1
            while queue:
                request, result = queue.popleft()
                try:
                    await conn.answer(request, self._ok(result))
                finally:
                    self.pending -= 1
        finally:
            self.pending -= len(queue)
            queue.clear()
            if self._answers.get(conn) is queue:
                del self._answers[conn]

    async def _blocking_send(self, conn, request: RemotingCommand) -> None:
        """For comparison only (``replication_blocking_send``): the pre-4.7 design, one
        send thread that waits for the slave before it takes the next send."""
        try:
            async with self._serial:
                outcome = self._process(conn, request)
                if isinstance(outcome, PutResult):
                    done = _Replica()
                    if self.transfer is not None:
                        self.transfer.submit(outcome.end_offset, _Replica.set, done)
                    else:
                        done.set(True)
                    outcome = await self._wait_then_ok(outcome, done)
                await conn.answer(request, outcome)
        finally:
            self.pending -= 1

    async def _wait_then_ok(self, result: PutResult, done: _Replica | None) -> RemotingCommand:
        if self.store.config.flush_mode is FlushMode.SYNC and not await self.store.flush_service.wait_flushed(result.end_offset):
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
        if done is not None:
            await done.event.wait()
            if not done.ok:
                result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
        return self._ok(result)

    def _answer_when_flushed(self, conn, request: RemotingCommand, result: PutResult) -> None:
        # One of the connection's request handlers: a graceful close or shutdown drains it.
        self.pending += 1
        try:
            conn.start_handler(self._flush_then_answer, conn, request, result)
        except BaseException:
            self.pending -= 1
            raise

    async def _flush_then_answer(self, conn, request: RemotingCommand, result: PutResult, replica: _Replica | None = None) -> None:
        try:
            await conn.answer(request, await self._wait_then_ok(result, replica))
        finally:
            self.pending -= 1

    def _process(self, conn, request: RemotingCommand) -> RemotingCommand | PutResult:
        code = request.code
        # the send headers' fast codec called directly; a header that does not decode
        # goes the shared way (decode_request_header), which gives Java's answer
        try:
            header = decode_send_fields(request.ext_fields, code != _SEND_MESSAGE)
        except CustomHeaderError:
            try:
                decode_request_header(SendMessageRequestHeader if code == _SEND_MESSAGE else SendMessageRequestHeaderV2, request)
            except HeaderError as exc:
                return exc.response
            raise
        problem, topic_config = self._msg_check(conn, header)
        if problem is not None:
            return problem
        if code == _SEND_BATCH_MESSAGE or header.batch:
            return self._send_batch(conn, request, header, topic_config)
        return self._send_one(conn, request, header, topic_config)

    # -- checks (AbstractSendMessageProcessor.msgCheck) ------------------------------------

    def _msg_check(self, conn: Connection, header: SendFields) -> tuple[RemotingCommand | None, TopicConfig | None]:
        config = self.config
        topic = header.topic
        if not config.broker_permission & PERM_WRITE:
            return reply(
                ResponseCode.NO_PERMISSION,
                f"the broker[{config.advertised_addr().rpartition(':')[0]}] sending message is forbidden",
            ), None
        checked = self._checked_topics
        if topic not in checked:
            try:
                validate_topic(topic)
            except InvalidNameError as exc:
                return reply(ResponseCode.SYSTEM_ERROR, str(exc)), None
            if is_not_allowed_send_topic(topic):
                return reply(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."), None
            if len(checked) >= _CHECKED_TOPICS_MAX:
                checked.clear()
            checked.add(topic)
        tc = self.topics.select(topic)
        if tc is None:
            tc = self._create_topic(conn, header)
            if tc is None:
                return reply(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!{suggest_todo(APPLY_TOPIC_URL)}",
                ), None
        queue_id = header.queueId
        # queue_id >= max(write, read), without max()'s argument parsing
        if queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums:
            return reply(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {topic_config_string(tc)} Producer: {conn.remote_address}",
            ), None
        if not tc.perm & PERM_WRITE:
            return reply(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"), None
        return None, tc

    def _create_topic(self, conn: Connection, header: SendFields) -> TopicConfig | None:
        topic = header.topic
        log.warning("the topic %s not exist, producer: %s", topic, conn.remote_address)
        tc = None
        default_topic = header.defaultTopic
        if default_topic:
            tc = self.topics.create_in_send(topic, default_topic, header.defaultTopicQueueNums, 0)
        if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            tc = self.topics.create_in_send_back(topic, 1, PERM_READ | PERM_WRITE, 0)
        if tc is not None:
            log.info("created topic %s (%d queues) on send from %s", topic, tc.write_queue_nums, conn.remote_address)
            self.ctx.topic_created(topic)
            self._created = topic
        return tc

    def _pick_queue(self, queue_id: int, tc) -> int:
        if queue_id < 0:
            return self._random.randrange(max(1, tc.write_queue_nums))
        return queue_id

    # -- single message --------------------------------------------------------------------

    def _send_one(self, conn: Connection, request: RemotingCommand, header: SendFields, tc: TopicConfig) -> RemotingCommand | PutResult:
        body = request.body
        if len(body) > self.max_message_size:
            return self._illegal(f"message body is {len(body)} bytes, above the maximum of {self.max_message_size}")
        sys_flag = header.sysFlag
        props = header.properties or ""
        # the substring tests skip a properties scan for what most messages lack
        if sys_flag & TRANSACTION_ROLLBACK_TYPE == TRANSACTION_PREPARED_TYPE or (
            "TRAN_MSG" in props and (get_property(props, "TRAN_MSG") or "").lower() == "true"
        ):
            return reply(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.advertised_addr().rpartition(':')[0]}] sending transaction message is forbidden",
            )
        topic = header.topic
        queue_id = header.queueId
        if queue_id < 0:
            queue_id = self._pick_queue(queue_id, tc)
        reconsume = header.reconsumeTimes or 0
        to_dlq = False
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            max_times = header.maxReconsumeTimes if header.maxReconsumeTimes is not None else MAX_RECONSUME_TIMES
            if reconsume > max_times:  # handleRetryAndDLQ: off to the dead-letter queue
                topic = DLQ_GROUP_TOPIC_PREFIX + topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
                queue_id = 0
                to_dlq = True  # Java: setDelayTimeLevel(0)
                if self.topics.select(topic) is None:
                    self.topics.create_in_send_back(topic, 1, PERM_READ | PERM_WRITE, 0)
                    self.ctx.topic_created(topic)
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        # _properties, inline (one call less per send; the WAIT rule stays _waits')
        try:
            props_bytes = props.encode("utf-8")
        except UnicodeEncodeError:
            return self._illegal(_PROPS_NOT_UTF8)
        wait = "WAIT" not in props or _waits(props)
        msg = message_inner(
            topic, body, queue_id, header.flag, props_bytes, sys_flag, header.bornTimestamp,
            host_address(conn.remote_address), reconsume, tags_hash(get_property(props, "TAGS")),
        )
        schedule = self.schedule
        delayed = False
        if schedule is not None and not to_dlq and "DELAY" in props and get_property(props, "DELAY") is not None:
            stored = schedule.rewrite(msg)
            delayed = stored is not msg
            msg = stored
        try:
            result = self.store.put_message(msg)
        except StoreClosedError:
            return self._not_available()
        except PutMessageError as exc:
            return self._put_error(exc)
        if delayed:
            result.queue_id = queue_id  # Java answers the requested queue, not the schedule one
        if wait and (self.transfer is not None or self._sync_flush):
            return self._after_put(result, wait)
        # ASYNC_FLUSH, no slave to wait for: answered now
        # (not in the blocking variant: its task answers what _process returns)
        if not self.blocking_replication and self._created is None and self._answer_now(conn, request, result):
            return None
        return self._ok(result)

    # -- batch ---------------------------------------------------------------------------------

    def _send_batch(self, conn: Connection, request: RemotingCommand, header: SendFields, tc: TopicConfig) -> RemotingCommand | PutResult:
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return reply(ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}")
        body = request.body
        if len(body) > self.max_message_size:
            return self._illegal(f"batch body is {len(body)} bytes, above the maximum of {self.max_message_size}")
        sys_flag = header.sysFlag
        if sys_flag & COMPRESSED_FLAG:
            # the C++ client deflates batch bodies >= 4 KiB; the entries inside are plain
            inflater = zlib.decompressobj()
            try:
                body = inflater.decompress(body, self.max_message_size + 1)
            except zlib.error as exc:
                return self._illegal(f"compressed batch body does not inflate: {exc}")
            if len(body) > self.max_message_size or inflater.unconsumed_tail:
                return self._illegal(f"batch body inflates past the maximum of {self.max_message_size}")
            if not inflater.eof:
                return self._illegal("compressed batch body is truncated")
            sys_flag &= ~COMPRESSED_FLAG
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        level = get_property(header.properties, "DELAY")
        if level is not None and _positive_int(level):
            return self._illegal(f"a batch cannot be delayed (DELAY={level})")
        prepared = self._properties(header.properties)
        if isinstance(prepared, RemotingCommand):
            return prepared
        props_bytes, wait = prepared
        batch = BatchInner(
            topic=topic,
            body=body,
            queue_id=self._pick_queue(header.queueId, tc),
            properties_bytes=props_bytes,
            sys_flag=sys_flag,
            born_timestamp=header.bornTimestamp,
            born_host=host_address(conn.remote_address),
            reconsume_times=header.reconsumeTimes or 0,
        )
        try:
            result = self.store.put_messages(batch)
        except StoreClosedError:
            return self._not_available()
        except PutMessageError as exc:
            return self._put_error(exc)
        return self._after_put(result, wait)

    # -- answers -----------------------------------------------------------------------------

    def _ok(self, result) -> RemotingCommand:
        status = result.status
        # an Enum's hash is a Python call and its members cost a lookup each: PUT_OK first
        code = 0 if status is _PUT_OK else _STATUS_CODES.get(status)
        if code is None:  # the store raises for the failures; be safe anyway
            self.put_failures += 1
            return reply(ResponseCode.SYSTEM_ERROR, status.value)
        self.put_messages += result.msg_count
        self.put_bytes += result.wrote_bytes
        # the header's fields, then _OK_EXT; encoded from a template (codecs.send_response)
        # (the store's offset message ids are upper hex, comma-joined for a batch)
        return _OK_TEMPLATE.command(code, result.msg_id, result.queue_id, result.queue_offset, id_is_plain=True)

    def _properties(self, props: str | None) -> tuple[bytes, bool] | RemotingCommand:
        """The properties string as stored (verbatim UTF-8), and whether the producer
        waits for the store (WAIT, default true); or the MESSAGE_ILLEGAL answer."""
        props = props or ""
        try:
            props_bytes = props.encode("utf-8")
        except UnicodeEncodeError:
            return self._illegal(_PROPS_NOT_UTF8)
        return props_bytes, "WAIT" not in props or _waits(props)

    def _answer_now(self, conn: Connection, request: RemotingCommand, result: PutResult) -> bool:
        """Answer a stored message's SUCCESS straight from the template's bytes
        (:func:`~trocket.codecs.send_response.encode_send_ok`: no command made, no
        generic answer path) through :meth:`Connection.answer_frame_nowait`. False
        (nothing sent): answer the usual way -- RPC hooks must see a command, a oneway
        send, a full outbox (that way waits for room), values off the template."""
        if result.status is not _PUT_OK:
            return False
        frame = encode_send_ok(
            _OK_TEMPLATE, request.serialize_type, request.opaque, result.msg_id, result.queue_id, result.queue_offset
        )
        if frame is None or not conn.answer_frame_nowait(request, frame):
            return False
        self.put_messages += result.msg_count  # (a batch's, on a SYNC_MASTER)
        self.put_bytes += result.wrote_bytes
        return True

    def _illegal(self, detail: str) -> RemotingCommand:
        self.put_failures += 1
        return reply(
            ResponseCode.MESSAGE_ILLEGAL,
            "the message is illegal, maybe msg body or properties length not matched. "
            f"msg body length limit {self.max_message_size}B, msg properties length limit 32KB. ({detail})",
        )

    def _not_available(self) -> RemotingCommand:
        self.put_failures += 1
        return reply(
            ResponseCode.SERVICE_NOT_AVAILABLE,
            "service not available now. It may be caused by one of the following reasons: "
            "the broker's disk is full, messages are put to the slave, message store has been shut down, etc.",
        )

    def _put_error(self, exc: PutMessageError) -> RemotingCommand:
        status = exc.status
        if status in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED"):
            return self._illegal(str(exc))
        self.put_failures += 1
        if status == "CREATE_MAPEDFILE_FAILED":
            return reply(ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken.")
        if status == "SERVICE_NOT_AVAILABLE":
            return self._not_available()
        return reply(ResponseCode.SYSTEM_ERROR, f"UNKNOWN_ERROR: {exc}")


def register(ctx: BrokerContext) -> SendProcessor:
    """Register 10, 310 and 320 on ``ctx.server``; returns the processor (for stats)."""
    proc = SendProcessor(ctx)
    # Inline (arrival order, see the module docstring); admission is the processor's own,
    # so SYSTEM_BUSY carries extFields.
    for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        ctx.server.register_processor(int(code), proc, inline=True)
    return proc
