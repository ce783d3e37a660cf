"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

RocketMQ 4.9's ``SendMessageProcessor`` + ``AbstractSendMessageProcessor.msgCheck``:

1. decode the header; malformed -> SYSTEM_ERROR. The processor reads V1's field names:
   :func:`~trocket.codecs.headers.fast.command_send_fields` gives the eleven fields the
   send path reads, of either header version, as one plain tuple in ``SendFields``
   order, unpacked where they are read (its compiled twin hands over the tuple the
   header decoder read in its pass over the header, with no header object and no ext
   fields dict; the rare paths name them, ``SendFields._make``);
2. checks, in Java's order, each with Java's code and remark: broker write permission
   (NO_PERMISSION), topic name (SYSTEM_ERROR, ``TopicValidator`` remark), send-forbidden
   system topics (NO_PERMISSION), topic config -- auto-created from the default topic
   (``TBW102``, the header's ``defaultTopic``/``defaultTopicQueueNums``) or, for
   ``%RETRY%<group>``, with 1 queue perm 6; otherwise TOPIC_NOT_EXIST -- then the queue
   id (SYSTEM_ERROR);
3. the properties string is stored as Java's broker stores it
   (:func:`~trocket.codecs.message.properties.send_properties`, compiled): the
   client's string parsed, ``CLUSTER=<cluster>`` put, ``WAIT`` dropped (4.9.1+), written
   in Java's ``HashMap`` order; a batch's header properties, appended to every entry's
   own, get ``CLUSTER`` and keep ``WAIT``, as 4.9.8's batch encoder. A body larger than
   ``max_message_size`` is MESSAGE_ILLEGAL before any work;
4. the pre-put step (:mod:`trocket.broker.pre_put`: dead letter, half message, delay), then the put
   (the store prepares the record outside its append lock; a slave's store refuses:
   SERVICE_NOT_AVAILABLE with Java's remark);
5. SUCCESS with a ``SendMessageResponseHeader`` -- ``msgId`` (the offset message id;
   comma-joined for a batch), ``queueId``, ``queueOffset`` (the first one for a batch)
   -- plus ``MSG_REGION`` and ``TRACE_ON``, in declaration order (the bytes the real
   clients are tested with; a Java broker writes HashMap order).

Every refusal is a typed error of :mod:`trocket.broker.errors` (Java's code and remark),
raised and answered by remoting; failed puts are counted.

One answer path. A stored send is answered by :meth:`SendProcessor._finish` --
counting it, then SUCCESS as a :class:`~trocket.remoting.PreparedResponse` that writes
its frame from a template (:func:`~trocket.codecs.send_response.encode_send_ok`, no
command made, unless a response hook must see one) or, for the other statuses, a
command. When is what varies:

* at once (ASYNC_FLUSH, or the producer does not wait: WAIT=false): returned;
* later, when the put left something to wait for (:class:`_Later`): the name servers
  knowing a topic this send created (Java's ``createTopicInSendMessageMethod``
  registers before it answers), the group commit (SYNC_FLUSH), the slave
  (SYNC_MASTER). The processor returns ``None`` -- remoting counts the send as pending
  against the registration's capacity until it is answered -- and a handler task of
  the connection waits and answers; except the common SYNC_MASTER case, which needs
  no task (below).

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
with bit 0 clear, since each entry's own body is plain.

Transactional (prepared) messages -- ``TRAN_MSG`` true or a prepared sysflag -- are
stored as half messages by the pre-put step (:func:`~trocket.broker.pre_put.half_step`,
:mod:`trocket.broker.transaction`); the answer names the half record's msgId and queue
offset and the queue the producer addressed, as Java's, and END_TRANSACTION ends them.

Order and concurrency: the processor runs *inline* on the connection's reader, so the
sends of one connection are stored in the order they arrived -- as Java's single send
thread stores them. (Run as one trio task each, they were stored in whatever order trio
first ran the tasks, and it reverses batches of runnable tasks at random: pipelined
``send_oneway_orderly`` / async sends of the C++ client came out of order.) Everything
up to and including the put is synchronous and short (the store prepares the record
outside its append lock). At most ``send_concurrency + send_queue_capacity`` sends wait
for their answer at once (remoting's admission of the inline registration); past that
SYSTEM_BUSY at once (with an ``extFields`` object, which the C++ client needs).

SYNC_MASTER (:mod:`trocket.broker.ha`): a send whose producer waits (WAIT, default
true) is answered SLAVE_NOT_AVAILABLE (11) at once when no slave is connected or it lags
more than ``haSlaveFallbehindMax``; otherwise the processor submits (end offset,
callback) to :class:`~trocket.broker.ha.transfer.GroupTransferService` and returns --
no task waits. The service calls back, in commit-log order, once a slave
acknowledgement covers the end (or with FLUSH_SLAVE_TIMEOUT, 12, after
``syncFlushTimeout``); the callback queues the answer, and at the end of the service's
pass every answer it completed is written right there, one write per connection (a
task takes over a connection's rest only when its outbox is full). With SYNC_FLUSH too,
the send is submitted at once and a task awaits the group commit and then the transfer
(already under way), so both are awaited at once. Anything unexpected a send raises is
answered by the endpoint (SYSTEM_ERROR, see :mod:`trocket.broker.processors`).
"""

from __future__ import annotations

import functools
import logging
import random
import zlib
from collections import deque
from collections.abc import Awaitable

import trio

from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.errors import CustomHeaderError, InvalidNameError
from trocket.codecs.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from trocket.codecs.headers.fast import SendFields, command_send_fields
from trocket.codecs.errors import MessageEncodeError
from trocket.codecs.java_hashmap import JavaHashMap
from trocket.codecs.message.properties import (
    PROPERTY_CLUSTER,
    get_property,
    send_properties,
)
from trocket.codecs.message.hosts import HostAddress
from trocket.codecs.message.sysflag import COMPRESSED_FLAG, MULTI_TAGS_FLAG
from trocket.codecs.names import RETRY_GROUP_TOPIC_PREFIX, is_not_allowed_send_topic, validate_topic
from trocket.codecs.send_response import SendResponseTemplate, encode_send_ok
from trocket.remoting import Connection, ProcessorEntry, error_reply

from ..context import BrokerContext
from ..errors import (
    BrokerError,
    MessageRejectedError,
    NoPermissionError,
    PutFailedError,
    PutRefusedError,
    TopicNotExistError,
    put_refused,
)
from ..pre_put import pre_put
from ..store import BatchInner, FlushMode, PutMessageError, PutResult, PutStatus
from ..store.messages import message_inner
from ..store.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from . import APPLY_TOPIC_URL, decode_request_header, host_address, suggest_todo, topic_config_string
from .client import register_now

__all__ = ["SendProcessor", "register"]

log = logging.getLogger(__name__)

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
_BORN_HOSTS_MAX = 4096
_PROPS_NOT_UTF8 = "properties are not valid UTF-8"
_new = object.__new__


def _positive_int(text: str) -> bool:
    try:
        return int(text) > 0
    except ValueError:
        return False


@functools.lru_cache(maxsize=64)
def batch_properties(props: str, cluster: str) -> bytes:
    """A batch's header properties as 4.9.8 appends them to every entry's: parsed,
    ``CLUSTER`` put (``WAIT`` kept), written in HashMap order (nearly always the same
    few strings: cached)."""
    m = JavaHashMap.from_properties(props)
    m[PROPERTY_CLUSTER] = cluster
    return m.to_properties().encode("utf-8")


class _SendOk:
    """A stored send's SUCCESS, as remoting sends it: the frame from the template when no
    response hook must see a command (:class:`~trocket.remoting.PreparedResponse`)."""

    __slots__ = ("result",)

    result: PutResult

    def frame_for(self, request: RemotingCommand) -> bytes | None:
        r = self.result
        # (a single put's id is made by the commit log: read without the property)
        return encode_send_ok(
            _OK_TEMPLATE, request.serialize_type, request.opaque, r._msg_id or r.msg_id, r.queue_id, r.queue_offset
        )

    def command(self) -> RemotingCommand:
        r = self.result
        return _OK_TEMPLATE.command(0, r.msg_id, r.queue_id, r.queue_offset, id_is_plain=True)


class _Later:
    """A stored send whose answer waits: for the name servers to know the topic it
    created (``created``), for the group commit (``flush``), for the slave (``replica``)."""

    __slots__ = ("result", "created", "flush", "replica")

    def __init__(self, result: PutResult, created: str | None, flush: bool, replica: bool) -> None:
        self.result = result
        self.created = created
        self.flush = flush
        self.replica = replica


class _Replica:
    """A transfer completion a handler task awaits (a send that also waits for the
    group commit, or for a topic's registration first)."""

    __slots__ = ("event", "ok")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.ok = False

    def set(self, ok: bool) -> None:
        self.ok = ok
        self.event.set()


class SendProcessor:
    """The send processor (one per broker); ``process_request`` is what remoting calls."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.store = ctx.store
        self.topics = ctx.topics
        self.max_message_size = ctx.config.max_message_size
        #: the CLUSTER property every stored message gets
        self.cluster = ctx.config.cluster
        #: the pre-put step (broker/pre_put.py): dead letter, delay
        self.pre_put = pre_put(ctx)
        #: the store's flush mode is fixed when it opens
        self._sync_flush = ctx.store.config.flush_mode is FlushMode.SYNC
        self._random = random.Random()
        #: topic names that passed the name checks, each with whether it starts with
        #: one of the pre-put step's topic prefixes (bounded: cleared past the bound)
        self._checked_topics: dict[str, bool] = {}
        #: each peer's BORNHOST by its address (bounded: cleared when it grows past the bound)
        self._born_hosts: dict[str, HostAddress] = {}
        #: SYNC_MASTER: the HA transfer service sends are handed to (None: no waiting on a slave)
        self.transfer = ctx.ha.transfer if ctx.ha is not None and ctx.config.is_sync_master else None
        #: answers the transfer service completed in its current pass, written at its end
        self._replicated_ready: list[tuple[Connection, RemotingCommand, PutResult]] = []
        #: connections whose outbox was full: a task writes their answers, in order
        self._answers: dict[Connection, deque] = {}
        if self.transfer is not None:
            self.transfer.add_pass_listener(self._write_replicated)
        #: the registration (set by :func:`register`): its count of sends waiting for
        #: their answer is :attr:`pending`
        self.entry: ProcessorEntry | None = None
        # counters for GET_BROKER_RUNTIME_INFO
        self.put_messages = 0
        self.put_bytes = 0
        self.put_failures = 0

    @property
    def pending(self) -> int:
        """Sends stored and waiting for their answer (flush, slave, registration)."""
        return self.entry.pending if self.entry is not None else 0

    # -- entry ---------------------------------------------------------------------------

    def process_request(self, conn: Connection, request: RemotingCommand) -> _SendOk | RemotingCommand | None:
        """Inline on the connection's reader: decode, check, put (the pre-put step
        included), then the answer now, or ``None`` when it is given later (what the put
        left to wait for, :meth:`_answer_later`). A refusal is raised, and remoting
        answers it."""
        code = request.code
        try:
            # the send headers' fast codec called directly; a header that does not decode
            # goes the shared way (decode_request_header), which raises Java's answer
            try:
                fields = command_send_fields(request, code != _SEND_MESSAGE)
            except CustomHeaderError:
                decode_request_header(
                    SendMessageRequestHeader if code == _SEND_MESSAGE else SendMessageRequestHeaderV2, request
                )
                raise
            # msgCheck's common case inline: a topic checked before, its config there,
            # write permission on broker and topic, a legal queue id; anything else goes
            # to _msg_check, which checks in Java's order and raises Java's refusal
            topic, _, _, queue_id, sys_flag, born_timestamp, flag, props, reconsume_times, _, batch = fields
            created = None
            prefixed = self._checked_topics.get(topic)
            tc = self.topics.select(topic)
            if (
                prefixed is None or tc is None or not self.config.broker_permission & tc.perm & PERM_WRITE
                or (queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums)
            ):
                tc, created = self._msg_check(conn, fields)
                prefixed = topic.startswith(self.pre_put.topic_prefixes)
            if code == _SEND_BATCH_MESSAGE or batch:
                header = SendFields._make(fields)
                result = self._put_batch(conn, request, header, tc)
                wait = get_property(header.properties, "WAIT")
            else:
                # a single message, inline (no call and no result tuple per send): stored
                # by its fields (store.put_send: no message object), unless the pre-put
                # step may rewrite it (_put_rewritten); WAIT is read by the same parse
                # that writes the stored properties
                body = request.body
                if len(body) > self.max_message_size:
                    raise self._illegal(f"message body is {len(body)} bytes, above the maximum of {self.max_message_size}")
                props = props or ""
                if queue_id < 0:
                    queue_id = self._pick_queue(queue_id, tc)
                if tc.topic_filter_type == "MULTI_TAG":
                    sys_flag |= MULTI_TAGS_FLAG
                try:
                    props_bytes, tags_code, wait = send_properties(props, self.cluster)
                except MessageEncodeError:
                    raise self._illegal(_PROPS_NOT_UTF8) from None
                addr = conn.remote_address
                try:
                    born_host = self._born_hosts[addr]  # (a dict hit: a third of an lru_cache call)
                except KeyError:
                    born_host = self._born_host(addr)
                pre_put = self.pre_put
                # PrePut.may_rewrite, inline: most sends skip the step without a call
                rewrite = prefixed or sys_flag & pre_put.sys_flags
                if not rewrite:
                    for name in pre_put.property_names:
                        if name in props:
                            rewrite = True
                            break
                if rewrite:
                    result = self._put_rewritten(
                        fields, body, queue_id, flag, props_bytes, sys_flag, born_timestamp, born_host,
                        reconsume_times or 0, tags_code,
                    )
                else:
                    try:
                        result = self.store.put_send(
                            topic, body, queue_id, flag, props_bytes, sys_flag, born_timestamp, born_host,
                            reconsume_times or 0, tags_code,
                        )
                    except PutMessageError as exc:
                        raise put_refused(exc, self.max_message_size) from None
        except PutRefusedError:
            self.put_failures += 1
            raise
        flush = replica = False
        # the producer waits for the store: the WAIT property, default true (Boolean.parseBoolean;
        # the Java producer always sends WAIT=true)
        if wait is None or wait == "true" or wait.lower() == "true":
            transfer = self.transfer
            if transfer is not None:
                if transfer.slave_ok(result.end_offset):
                    replica = True
                else:
                    result.status = PutStatus.SLAVE_NOT_AVAILABLE  # stored, not replicated
            if self._sync_flush and self.store.flush_service.flushed_offset < result.end_offset:
                flush = True
        if created is None and not flush and not replica:
            return self._finish(result)
        self._answer_later(conn, request, _Later(result, created, flush, replica))
        return None

    # -- answers ---------------------------------------------------------------------------

    def _finish(self, result: PutResult) -> _SendOk | RemotingCommand:
        """The answer of a stored send (the one place sends are counted as put)."""
        status = result.status
        if status is _PUT_OK:
            self.put_messages += result.msg_count
            self.put_bytes += result.wrote_bytes
            ok = _new(_SendOk)  # (no __init__ call per send)
            ok.result = result
            return ok
        code = _STATUS_CODES.get(status)
        if code is None:  # the store raises for the failures; be safe anyway
            self.put_failures += 1
            return error_reply(PutFailedError(status.value))
        self.put_messages += result.msg_count
        self.put_bytes += result.wrote_bytes
        # the header's fields, then _OK_EXT; encoded from a template (codecs.send_response)
        # (the store's offset message ids are upper hex, comma-joined for a batch)
        return _OK_TEMPLATE.command(code, result.msg_id, result.queue_id, result.queue_offset, id_is_plain=True)

    def _answer_later(self, conn: Connection, request: RemotingCommand, later: _Later) -> None:
        """Answer once what ``later`` waits for is done. A SYNC_MASTER send that waits
        only for the slave needs no task: the transfer service's callback answers it at
        the end of its pass (:meth:`_write_replicated`). Everything else: a handler task
        of the connection (counted in flight: a graceful close or shutdown drains it).
        A send is submitted to the transfer service here, in commit-log order, unless it
        first waits for its topic's registration."""
        replica = None
        if later.replica and later.created is None:
            transfer = self.transfer
            assert transfer is not None
            if not later.flush:
                transfer.submit(later.result.end_offset, self._replicated, (conn, request, later.result))
                return
            replica = _Replica()
            transfer.submit(later.result.end_offset, _Replica.set, replica)
        conn.start_handler(self._wait_then_answer, conn, request, later, replica)

    async def _wait_then_answer(
        self, conn: Connection, request: RemotingCommand, later: _Later, replica: _Replica | None
    ) -> None:
        result = later.result
        if later.created is not None:
            await register_now(self.ctx, later.created)
            if later.replica:
                replica = _Replica()
                self.transfer.submit(result.end_offset, _Replica.set, replica)  # type: ignore[union-attr]
        if later.flush and not await self.store.flush_service.wait_flushed(result.end_offset):
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
        if replica is not None:
            await replica.event.wait()
            if not replica.ok:
                result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
        await conn.answer(request, self._finish(result))

    # -- SYNC_MASTER: answers the transfer service completes (no task) ----------------------

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
                    outcome = conn.answer_soon(request, self._finish(result))
                except Exception:  # one answer that fails must not lose the others
                    log.exception("answering a replicated send failed")
                    continue
                if outcome.__class__ is bool:
                    continue
                backlog[conn] = queue = deque()
                try:
                    conn.start_handler(self._answer_queued, conn, queue, outcome)
                except Exception:  # the connection is gone: nobody to answer
                    outcome.close()  # type: ignore[union-attr]
                    del backlog[conn]
        finally:
            for conn, was in corked.items():
                conn.uncork(was)

    async def _answer_queued(self, conn: Connection, queue: deque, first: Awaitable[bool]) -> None:
        try:
            await first
            while queue:
                request, result = queue.popleft()
                await conn.answer(request, self._finish(result))
        finally:
            queue.clear()
            if self._answers.get(conn) is queue:
                del self._answers[conn]

    # -- checks (AbstractSendMessageProcessor.msgCheck) ------------------------------------

    def _msg_check(self, conn: Connection, fields: tuple) -> tuple[TopicConfig, str | None]:
        """The topic's config, and the topic's name if this send created it (``fields``:
        :func:`~trocket.codecs.headers.fast.decode_send_fields`' tuple)."""
        config = self.config
        topic, _, _, queue_id, _, _, _, _, _, _, _ = fields
        if not config.broker_permission & PERM_WRITE:
            raise NoPermissionError(f"the broker[{config.advertised_addr().rpartition(':')[0]}] sending message is forbidden")
        checked = self._checked_topics
        if topic not in checked:
            try:
                validate_topic(topic)
            except InvalidNameError as exc:
                raise BrokerError(str(exc)) from None
            if is_not_allowed_send_topic(topic):
                raise NoPermissionError(f"Sending message to topic[{topic}] is forbidden.")
            if len(checked) >= _CHECKED_TOPICS_MAX:
                checked.clear()
            checked[topic] = topic.startswith(self.pre_put.topic_prefixes)
        created = None
        tc = self.topics.select(topic)
        if tc is None:
            tc = self._create_topic(conn, SendFields._make(fields))
            if tc is None:
                raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!{suggest_todo(APPLY_TOPIC_URL)}")
            created = topic
        # queue_id >= max(write, read), without max()'s argument parsing
        if queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums:
            raise BrokerError(
                f"request queueId[{queue_id}] is illegal, {topic_config_string(tc)} Producer: {conn.remote_address}"
            )
        if not tc.perm & PERM_WRITE:
            raise NoPermissionError(f"the topic[{topic}] sending message is forbidden")
        return tc, created

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
        return tc

    def _pick_queue(self, queue_id: int, tc: TopicConfig) -> int:
        if queue_id < 0:
            return self._random.randrange(max(1, tc.write_queue_nums))
        return queue_id

    def _born_host(self, addr: str) -> HostAddress:
        """A peer's BORNHOST (:func:`host_address`), remembered for its next sends."""
        hosts = self._born_hosts
        if len(hosts) >= _BORN_HOSTS_MAX:
            hosts.clear()
        hosts[addr] = host = host_address(addr)
        return host

    def _illegal(self, detail: str) -> MessageRejectedError:
        return MessageRejectedError(detail, self.max_message_size)

    # -- single message --------------------------------------------------------------------

    def _put_rewritten(
        self, fields: tuple, body: bytes | bytearray | memoryview, queue_id: int, flag: int,
        props_bytes: bytes, sys_flag: int, born_timestamp: int, born_host: HostAddress, reconsume_times: int,
        tags_code: int,
    ) -> PutResult:
        """Store a single message the pre-put step may rewrite (dead letter, half message,
        delay: :mod:`trocket.broker.pre_put`), as a message object; the result names
        the queue the producer addressed. ``fields``: the send header's, the rest as
        :meth:`process_request` prepared them."""
        pre_put = self.pre_put
        msg = message_inner(
            fields[0], body, queue_id, flag, props_bytes, sys_flag, born_timestamp, born_host, reconsume_times,
            tags_code,
        )
        stored = pre_put.rewrite(msg, SendFields._make(fields))
        try:
            result = self.store.put_message(stored)
        except PutMessageError as exc:
            raise put_refused(exc, self.max_message_size) from None
        if stored is not msg:
            for after_put in pre_put.after_put:  # (a half message: kept for its END)
                after_put(msg, stored, result)
            result.queue_id = msg.queue_id  # a different record (delay, half): the addressed queue
        return result

    # -- batch ---------------------------------------------------------------------------------

    def _put_batch(
        self, conn: Connection, request: RemotingCommand, header: SendFields, tc: TopicConfig
    ) -> PutResult:
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise BrokerError(f"batch request does not support retry group {topic}", code=int(ResponseCode.MESSAGE_ILLEGAL))
        body = request.body
        if len(body) > self.max_message_size:
            raise self._illegal(f"batch body is {len(body)} bytes, above the maximum of {self.max_message_size}")
        sys_flag = header.sysFlag
        if sys_flag & COMPRESSED_FLAG:
            # the C++ client deflates batch bodies >= 4 KiB; the entries inside are plain
            inflater = zlib.decompressobj()
            try:
                body = inflater.decompress(body, self.max_message_size + 1)
            except zlib.error as exc:
                raise self._illegal(f"compressed batch body does not inflate: {exc}") from None
            if len(body) > self.max_message_size or inflater.unconsumed_tail:
                raise self._illegal(f"batch body inflates past the maximum of {self.max_message_size}")
            if not inflater.eof:
                raise self._illegal("compressed batch body is truncated")
            sys_flag &= ~COMPRESSED_FLAG
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        props = header.properties or ""
        level = get_property(props, "DELAY")
        if level is not None and _positive_int(level):
            raise self._illegal(f"a batch cannot be delayed (DELAY={level})")
        try:
            props_bytes = batch_properties(props, self.cluster)
        except UnicodeEncodeError:
            raise self._illegal(_PROPS_NOT_UTF8) from None
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
            return self.store.put_messages(batch)
        except PutMessageError as exc:
            raise put_refused(exc, self.max_message_size) from None


def register(ctx: BrokerContext) -> SendProcessor:
    """Register 10, 310 and 320 on ``ctx.server``; returns the processor (for stats)."""
    proc = SendProcessor(ctx)
    # Inline (arrival order, see the module docstring); at most send_concurrency +
    # send_queue_capacity sends wait for their answer at once.
    proc.entry = ctx.server.register_processor(
        (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE),
        proc,
        inline=True,
        limit=ctx.config.send_concurrency,
        queue=ctx.config.send_queue_capacity,
    )
    return proc
