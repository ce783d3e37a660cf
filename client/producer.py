"""Producer: RocketMQ 4.9's ``DefaultMQProducer`` on trio (Java: ``DefaultMQProducerImpl``,
``MQClientAPIImpl.sendMessage`` / ``processSendResponse``, ``Validators.checkMessage``).

::

    async with Producer("PG", namesrv="127.0.0.1:9876") as producer:
        result = await producer.send(new_message("TopicTest", b"hello", tags="TagA"))

Behaviour, as Java's where it has one:

- Route: the topic's publish info from the instance (cached, polled every 30 s, refreshed in
  the background after a failure); a topic the name servers do not know is sent through
  TBW102's route (``c``/``d`` of the header name TBW102 and 4 queues: the broker creates it).
- Queue selection: round robin over the writable queues, avoiding the broker that failed
  last and brokers in latency fault (:mod:`.fault`; on by default here, off in Java).
- Retries: ``retries`` (2) more attempts for a sync send, each on another broker where there
  is one, after a connection failure, a timeout of that attempt, or the answers Java retries
  (TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, NO_PERMISSION, NO_BUYER_ID,
  NOT_IN_CURRENT_UNIT). SYSTEM_BUSY is not retried (Java neither): :class:`BrokerBusyError`.
- ONE budget per send (``send_timeout``, 3 s): the route lookup, every attempt and the wait
  come out of it; when it runs out, :class:`SendTimeoutError` lists every attempt (broker,
  queue, the answer or the cause, its time). Other failures raise the last one's type with
  the same list.
- ``send_async`` runs the same send (retries included: Java retries async sends too, with
  ``retryTimesWhenSendAsyncFailed``) as a task, bounded by ``max_async_in_flight``;
  ``send_oneway`` sends once and waits for nothing; ``send_orderly`` picks the queue with a
  selector or a sharding key (Java's ``SelectMessageQueueByHash``) and does not retry
  elsewhere (the queue is the point); ``send_batch`` sends SEND_BATCH_MESSAGE requests of at
  most ``max_message_size`` bytes each, split as needed.
- Hot path: ``UNIQ_KEY`` set once per message, properties encoded once per send (not per
  attempt), bodies of ``compress_over`` (4 KiB) or more zlib-compressed at level 5 with the
  COMPRESSED sysflag, the topic checked by the codecs' cached name check, SEND_MESSAGE_V2
  with the hand-written header codec, no per-message logs.
"""

from __future__ import annotations

import logging
import os
import random
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from trocket.codecs.bodies.client import MessageQueue
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import decode_header
from trocket.codecs.errors import CodecError, InvalidNameError
from trocket.codecs.headers import SendMessageRequestHeaderV2, SendMessageResponseHeader
from trocket.codecs.java_hashmap import java_string_hash
from trocket.codecs.message import UniqueIdGenerator, encode_batch_message, encode_properties
from trocket.codecs.message.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MESSAGE_TYPE,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from trocket.codecs.message.sysflag import COMPRESSED_FLAG
from trocket.codecs.namespace import without_namespace, wrap_namespace
from trocket.codecs.names import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    is_not_allowed_send_topic,
    validate_group,
    validate_topic,
)
from trocket.remoting import ServiceContextManager

from .api import response_error, target_name, vip_channel_addr
from .config import ClientConfig
from .errors import (
    Attempt,
    BrokerResponseError,
    ClientConnectError,
    ClientError,
    ClientStateError,
    ClientTimeoutError,
    MessageRefusedError,
    NoRouteError,
    SendTimeoutError,
)
from .fault import LatencyFaultTolerance, select_queue
from .futures import SendFuture
from .request_reply import RequestFuture, prepare_request
from .instance import ClientInstance, ProducerHandle
from .message import Message, MessageExt, SendResult, SendStatus
from .trace import TraceDispatcher, pub_record

__all__ = ["Producer", "ProducerConfig", "SendFuture", "select_by_hash"]

log = logging.getLogger(__name__)

_new = object.__new__

#: answers Java's ``DefaultMQProducer.retryResponseCodes`` retries on another broker
RETRY_CODES = frozenset(
    int(c)
    for c in (
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    )
)
_STATUS = {
    int(ResponseCode.SUCCESS): SendStatus.SEND_OK,
    int(ResponseCode.FLUSH_DISK_TIMEOUT): SendStatus.FLUSH_DISK_TIMEOUT,
    int(ResponseCode.FLUSH_SLAVE_TIMEOUT): SendStatus.FLUSH_SLAVE_TIMEOUT,
    int(ResponseCode.SLAVE_NOT_AVAILABLE): SendStatus.SLAVE_NOT_AVAILABLE,
}
_MESSAGE_ILLEGAL = int(ResponseCode.MESSAGE_ILLEGAL)
_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
_SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
_SEND_REPLY_V2 = int(RequestCode.SEND_REPLY_MESSAGE_V2)
#: ``MixAll.REPLY_MESSAGE_FLAG``: the MSG_TYPE of a reply (request-reply), sent as 325
REPLY_MESSAGE_FLAG = "reply"
#: the batch request's own properties (``MessageBatch``: WAIT of its first message)
_BATCH_PROPS = {True: "WAIT\x01true", False: "WAIT\x01false"}

Selector = Callable[[list[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(queues: list[MessageQueue], msg: Message, key: Any) -> MessageQueue:
    """``SelectMessageQueueByHash``: ``abs(key.hashCode()) % len(queues)`` with Java's
    ``String.hashCode`` (so Java and trocket producers pick the same queue for a key)."""
    h = java_string_hash(str(key))
    if h >= 0x8000_0000:
        h = abs(h - 0x1_0000_0000)
    return queues[h % len(queues)]


#: a start time a message waits for (checked by ``sendKernelImpl`` beside the delay level)
_START_DELIVER_TIME = "__STARTDELIVERTIME"


def _msg_type(props: dict[str, str]) -> int:
    """The trace's ``MessageType`` ordinal of a send, from the message's properties as
    ``sendKernelImpl`` reads them: Delay_Msg (3) with a delay level or a start time, else
    Trans_Msg_Half (1) for a prepared send, else Normal_Msg (0)."""
    if PROPERTY_DELAY_TIME_LEVEL in props or _START_DELIVER_TIME in props:
        return 3
    return 1 if props.get(PROPERTY_TRANSACTION_PREPARED) == "true" else 0


@attrs.define(slots=True, frozen=True, kw_only=True)
class ProducerConfig:
    """``DefaultMQProducer``'s options (seconds, bytes)."""

    send_timeout: float = 3.0  # sendMsgTimeout
    retries: int = 2  # retryTimesWhenSendFailed
    async_retries: int = 2  # retryTimesWhenSendAsyncFailed
    max_message_size: int = 4 * 1024 * 1024  # maxMessageSize
    compress_over: int = 4096  # compressMsgBodyOverHowmuch
    compress_level: int = 5  # compressMsgBodyLevel (rocketmq.message.compressLevel)
    default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC  # createTopicKey
    default_topic_queue_nums: int = 4  # defaultTopicQueueNums
    retry_another_broker_when_not_store_ok: bool = False
    #: broker answers retried on another queue (``retryResponseCodes``; Java's six by default)
    retry_response_codes: frozenset[int] = attrs.field(default=RETRY_CODES, converter=lambda v: frozenset(map(int, v)))
    #: latency fault tolerance (``sendLatencyFaultEnable``; Java's default is off)
    latency_fault: bool = True
    #: async sends in flight at once; past it ``send_async`` waits (within its budget)
    max_async_in_flight: int = 10_000
    #: pause before retrying the same broker after a connection failure, when there is no
    #: other (doubles per attempt; within the budget). Java retries at once.
    reconnect_backoff: float = 0.1
    #: message trace (``enableMsgTrace``): a Pub record per send in ``trace_topic``, in
    #: Java's format, written in batches by a background task (:mod:`.trace`)
    trace: bool = False
    #: ``customizedTraceTopic``
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    #: ``namespace`` (Java's ``NamespaceUtil``): topics and the group go on the wire as
    #: ``<namespace>%<name>``; results name the topic as given
    namespace: str | None = None


@attrs.define(slots=True)
class _Progress:
    """The attempts of one send so far, and what the next must know."""

    attempts: list[Attempt] = attrs.field(factory=list)
    last_error: ClientError | None = None
    last_broker: str | None = None
    kept: SendResult | None = None


@attrs.define(slots=True)
class _Prepared:
    """A message made ready to send once: what every attempt reuses."""

    topic: str
    body: bytes
    sys_flag: int
    properties: str
    msg_id: str
    flag: int
    reconsume_times: int = 0  # Java sends reconsumeTimes 0 for a plain send
    max_reconsume_times: int | None = None
    #: the request code: SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, SEND_REPLY_MESSAGE_V2 for a reply
    code: int = _SEND_V2
    #: the topic as the user named it, when a namespace made ``topic`` differ
    user_topic: str | None = None
    #: the message's own properties (``msg.properties``), which the trace's Pub record
    #: reads as Java's send hook reads the message (None for a batch: no tags, no keys)
    message_properties: dict[str, str] | None = None


class Producer(ServiceContextManager):
    """A producer group's sender (see the module docstring).

    ``Producer(group, namesrv)`` makes its own :class:`ClientInstance`; pass ``instance=``
    to share one (it must be running). Options: the fields of :class:`ProducerConfig`.
    """

    #: what answers the broker's transaction checks for the group (a
    #: :class:`~trocket.client.transaction.TransactionProducer`); None: they are dropped
    _transaction_handle: ProducerHandle | None = None

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        *,
        instance: ClientInstance | None = None,
        client_config: ClientConfig | None = None,
        **options: Any,
    ) -> None:
        try:
            validate_group(group)
        except InvalidNameError as exc:
            raise ValueError(f"producer group {group!r}: {exc}") from None
        self.config = ProducerConfig(**options)
        #: the group as the brokers see it (wrapped in the namespace, as Java's ``start``)
        self.group = wrap_namespace(self.config.namespace, group)
        self._namespace = self.config.namespace or None
        if self.config.send_timeout <= 0 or self.config.retries < 0 or self.config.max_message_size <= 0:
            raise ValueError("send_timeout and max_message_size must be positive, retries >= 0")
        self._own_instance = instance is None
        if instance is None:
            if client_config is None:
                if namesrv is None:
                    raise ValueError("a producer needs namesrv=, client_config= or instance=")
                client_config = ClientConfig(namesrv=namesrv)
            instance = ClientInstance(client_config)
        self.instance = instance
        #: every request goes through the instance's typed API (its remoting client's calls)
        self._api = instance.api
        #: sends go to each broker's VIP channel, its port - 2 (``sendMessageWithVIPChannel``)
        self._vip = instance.config.vip_channel_enabled
        self.faults = LatencyFaultTolerance(self.config.latency_fault)
        self._ids = UniqueIdGenerator(
            ip=instance.config.client_ip, pid=os.getpid(), class_loader_hash=random.getrandbits(32)
        )
        self._async_slots = trio.Semaphore(self.config.max_async_in_flight)
        self._drained: trio.Event | None = None  # set by aclose: the last async send ended
        self._nursery: trio.Nursery | None = None
        self._running = False
        #: the run's clock (:meth:`run` sets it): ``trio.current_time()`` is two Python
        #: calls more, and a send reads the time three times
        self._now: Callable[[], float] = trio.current_time
        #: the trace dispatcher while ``trace`` is on and the producer runs
        self.tracer: TraceDispatcher | None = None
        self._trace_group = without_namespace(self.group, self._namespace)

    # -- lifecycle ----------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            if self._own_instance:
                await nursery.start(self.instance.run)
            self.instance.check_running()
            self.instance.register_producer(self.group, self._transaction_handle)
            if self.config.trace:
                self.tracer = await nursery.start(TraceDispatcher(self.instance, self.group, self.config.trace_topic).run)
            self._nursery = nursery
            self._now = trio.lowlevel.current_clock().current_time
            self._running = True
            task_status.started(self)
            await trio.sleep_forever()

    async def aclose(self) -> None:
        """Let async sends in flight finish (up to ``send_timeout``), unregister the group
        (UNREGISTER_CLIENT), stop the instance if it is this producer's own."""
        if not self._running:
            return
        self._running = False
        if self._async_slots.value < self.config.max_async_in_flight:
            self._drained = trio.Event()
            with trio.move_on_after(self.config.send_timeout):
                await self._drained.wait()
        if self.tracer is not None:
            with trio.move_on_after(self.config.send_timeout):
                await self.tracer.flush()
        try:
            if self._own_instance:
                await self.instance.aclose()
            else:
                await self.instance.unregister_producer(self.group)
        finally:
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()

    def _abort(self) -> None:
        self._running = False

    def _check_running(self) -> None:
        if not self._running:
            raise ClientStateError(f"producer {self.group} is not running (use `async with`)")

    # -- checks and preparation ---------------------------------------------------------

    def _refuse(self, topic: str, why: str) -> MessageRefusedError:
        return MessageRefusedError(f"message to {topic!r} refused: {why}", code=_MESSAGE_ILLEGAL, remark=why)

    def _check_topic(self, topic: str) -> None:
        try:
            validate_topic(topic)
        except InvalidNameError as exc:
            raise self._refuse(topic, str(exc)) from None
        if is_not_allowed_send_topic(topic):
            raise self._refuse(topic, f"Sending message to topic[{topic}] is forbidden.")

    def _check(self, msg: Message) -> None:
        """``Validators.checkMessage``."""
        if not isinstance(msg, Message):
            raise TypeError(f"expected a Message, got {type(msg).__name__}")
        self._check_topic(msg.topic)
        body = msg.body
        if body is None:
            raise self._refuse(msg.topic, "the message body is null")
        if not body:
            raise self._refuse(msg.topic, "the message body length is zero")
        if len(body) > self.config.max_message_size:
            raise self._refuse(
                msg.topic, f"the message body size over max value, MAX: {self.config.max_message_size} (got {len(body)})"
            )

    def _prepare(self, msg: Message) -> _Prepared:
        self._check(msg)
        props = msg.properties
        msg_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if msg_id is None:
            msg_id = props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self._ids.next_id(int(time.time() * 1000))
        body = bytes(msg.body)
        sys_flag = 0
        if len(body) >= self.config.compress_over:
            body = zlib.compress(body, self.config.compress_level)
            sys_flag |= COMPRESSED_FLAG
        try:
            text = encode_properties(props)
        except TypeError as exc:
            raise self._refuse(msg.topic, f"property values must be strings: {exc}") from None
        prepared = _Prepared(msg.topic, body, sys_flag, text, msg_id, msg.flag, message_properties=props)
        if self._namespace:
            prepared.topic = wrap_namespace(self._namespace, msg.topic)
            prepared.user_topic = msg.topic
        if PROPERTY_MESSAGE_TYPE in props and props[PROPERTY_MESSAGE_TYPE] == REPLY_MESSAGE_FLAG:
            prepared.code = _SEND_REPLY_V2  # a reply goes as SEND_REPLY_MESSAGE_V2, as Java's
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            prepared.reconsume_times = int(props.get(PROPERTY_RECONSUME_TIME) or 0)
            max_times = props.get(PROPERTY_MAX_RECONSUME_TIMES)
            prepared.max_reconsume_times = int(max_times) if max_times else None
        return prepared

    # -- the send loop ------------------------------------------------------------------

    async def _publish_info(self, topic: str, begin: float, deadline: float):
        """The topic's publish info: the instance's, else looked up within the budget.
        (The hot paths read ``instance.publish`` themselves first: a coroutine less per
        message while the route is known.)"""
        info = self.instance.publish.get(topic)
        if info is not None and info.ok:
            return info
        remaining = deadline - self._now()
        if remaining <= 0:
            raise SendTimeoutError(f"send to {topic}: no time left for the route lookup", elapsed=self._now() - begin)
        cfg = self.config
        try:
            return await self.instance.publish_info(
                topic, self.group, timeout=remaining,
                default_topic=cfg.default_topic, default_queue_nums=cfg.default_topic_queue_nums,
            )
        except ClientTimeoutError as exc:
            raise SendTimeoutError(
                f"send to {topic}: the route lookup used the {(deadline - begin) * 1000:.0f} ms budget",
                attempts=exc.attempts, elapsed=self._now() - begin,
            ) from exc

    def _request(self, p: _Prepared, mq: MessageQueue, batch: bool = False) -> RemotingCommand:
        # the header by slot stores: its constructor's fifteen keywords cost ~4x as much
        cfg = self.config
        header = _new(SendMessageRequestHeaderV2)
        header.a = self.group
        header.b = p.topic
        header.c = cfg.default_topic
        header.d = cfg.default_topic_queue_nums
        header.e = mq.queue_id
        header.f = p.sys_flag
        header.g = int(time.time() * 1000)
        header.h = p.flag
        header.i = p.properties
        header.j = p.reconsume_times
        header.k = self.instance.config.unit_mode
        header.l = p.max_reconsume_times
        header.m = batch
        header.n = mq.broker_name
        header.bname = None
        return self._api.request(p.code, header, p.body)

    @staticmethod
    def _result(
        response: RemotingCommand, status: SendStatus, mq: MessageQueue, msg_id: str, user_topic: str | None = None,
    ) -> SendResult:
        """The result of an answered send; its queue names ``user_topic`` (the topic
        without its namespace, as Java's ``processSendResponse``) when given."""
        ext = response.ext_fields or {}
        header = decode_header(SendMessageResponseHeader, ext)
        if user_topic is None and header.queueId == mq.queue_id:
            queue = mq  # (frozen) the queue it was sent to, as a rule
        else:
            queue = MessageQueue(user_topic or mq.topic, mq.broker_name, header.queueId)
        return SendResult(  # positional: keywords cost a third more (status, msg_id, offset_msg_id, ...)
            status, msg_id, header.msgId, queue, header.queueOffset, header.transactionId,
            ext.get("MSG_REGION", "DefaultRegion"), ext.get("TRACE_ON") != "false",
        )

    def _judge(
        self, p: _Prepared, mq: MessageQueue, addr: str, t0: float, response: RemotingCommand | None,
        failure: ClientError | None, progress: _Progress, begin: float, *, retry: bool = True,
    ) -> SendResult | None:
        """One attempt's outcome (the broker's ``response``, or the ``failure`` of the
        call, as the API named it): the result to return, or ``None`` to try again (the
        attempt, to ``mq`` at ``addr``, recorded in ``progress``); raises the final error
        of an answer that is not retried. Updates the latency fault table
        (``updateFaultItem``)."""
        took = self._now() - t0
        broker = mq.broker_name
        if failure is not None:
            self.faults.update(broker, took, isolation=True)
            progress.last_error = failure
            outcome = failure.attempts[0].outcome if failure.attempts else failure.summary
            progress.attempts.append(Attempt(target_name(addr, mq), outcome, took))
            progress.last_broker = broker
            self.instance.refresh_soon(p.topic)
            return None
        assert response is not None
        status = _STATUS.get(response.code)
        if status is not None:
            self.faults.update(broker, took)
            try:
                result = self._result(response, status, mq, p.msg_id, p.user_topic)
            except CodecError as exc:  # stored, says the code; where, the header cannot say
                outcome = f"{status.value} with a bad header: {exc}"
                progress.attempts.append(Attempt(target_name(addr, mq), outcome, took))
                raise BrokerResponseError(
                    f"send to {p.topic}: the broker's {status.value} answer does not decode: {exc}",
                    code=response.code, remark=response.remark, attempts=progress.attempts,
                    elapsed=self._now() - begin,
                ) from exc
            if self.tracer is not None:
                self._trace_pub(p, mq, addr, result, took)
            if status is SendStatus.SEND_OK or not self.config.retry_another_broker_when_not_store_ok:
                return result
            progress.kept = result
            progress.attempts.append(Attempt(target_name(addr, mq), status.value, took))
            progress.last_broker = broker
            return None
        self.faults.update(broker, took, isolation=True)
        error = response_error(f"send to {p.topic}", response)
        progress.attempts.append(Attempt(target_name(addr, mq), error.summary.partition(": ")[2], took))
        if response.code in self.config.retry_response_codes and retry:
            progress.last_error = error
            progress.last_broker = broker
            return None
        raise type(error)(
            error.summary, code=error.code, remark=error.remark, attempts=progress.attempts,
            elapsed=self._now() - begin,
        )

    def _trace_pub(self, p: _Prepared, mq: MessageQueue, addr: str, result: SendResult, took: float) -> None:
        """``SendMessageTraceHookImpl``: a Pub record for an answered send (Java skips one
        whose answer has no region or says the broker's trace is off), encoded at once
        (:func:`~.trace.pub_record`) into the dispatcher's segment: the few microseconds
        a traced send costs. Tags, keys and the type come from the message's properties,
        as the hook reads the message (a batch has none of them)."""
        if result.region_id is None or not result.trace_on or p.topic == self.config.trace_topic:
            return
        props = p.message_properties
        if props is None:
            tags = keys = None
            msg_type = 0
        else:
            tags = props.get(PROPERTY_TAGS)
            keys = props.get(PROPERTY_KEYS)
            msg_type = _msg_type(props)
        cost = int(took * 1000)
        data = pub_record(
            # Java's trace hook names the group and topic without the namespace
            int(time.time() * 1000) - cost, result.region_id, self._trace_group, p.user_topic or p.topic,
            result.msg_id, tags, keys, addr, len(p.body), cost, msg_type, result.offset_msg_id,
            result.status is SendStatus.SEND_OK,
        )
        self.tracer.append_record(data, result.msg_id, keys)  # type: ignore[union-attr]

    @staticmethod
    def _exhausted(p: _Prepared, begin: float, deadline: float, progress: _Progress) -> SendResult:
        """No attempt left (or no time): a kept not-OK result, else the final error."""
        if progress.kept is not None:
            return progress.kept
        attempts, last_error = progress.attempts, progress.last_error
        elapsed = trio.current_time() - begin
        if elapsed >= deadline - begin or isinstance(last_error, ClientTimeoutError) or last_error is None:
            raise SendTimeoutError(
                f"send to {p.topic} ran out of its {(deadline - begin) * 1000:.0f} ms budget",
                attempts=attempts, elapsed=elapsed,
            ) from last_error
        summary = f"send to {p.topic} failed after {len(attempts)} attempt(s): {last_error.summary}"
        if isinstance(last_error, BrokerResponseError):
            raise type(last_error)(
                summary, code=last_error.code, remark=last_error.remark, attempts=attempts, elapsed=elapsed
            ) from last_error
        raise type(last_error)(summary, attempts=attempts, elapsed=elapsed) from last_error

    async def _send_loop(
        self, p: _Prepared, begin: float, deadline: float, retries: int, *,
        batch: bool = False, queue: MessageQueue | None = None,
        progress: _Progress | None = None,
    ) -> SendResult:
        """``sendDefaultImpl``: attempts until one succeeds, the retries or the budget end
        (``progress`` carries attempts an async send already made)."""
        info = None
        if queue is None:
            info = self.instance.publish.get(p.topic)
            if info is None or not info.ok:
                info = await self._publish_info(p.topic, begin, deadline)
        api = self._api
        if progress is None:
            progress = _Progress()
        attempts = progress.attempts
        while len(attempts) <= retries:
            now = self._now()
            remaining = deadline - now
            if remaining <= 0:
                break
            if queue is not None:
                mq = queue
            else:
                mq = select_queue(info, self.faults, progress.last_broker)
                n = len(attempts)
                if n and mq.broker_name == progress.last_broker and isinstance(progress.last_error, _CONNECT_ERRORS):
                    # nowhere else to go: give the broker a moment to come back
                    pause = min(self.config.reconnect_backoff * 2 ** (n - 1), remaining / 2)
                    await trio.sleep(pause)
                    now = self._now()
                    remaining = deadline - now
            addr = self.instance.master_addr(mq.broker_name)
            if self._vip and addr is not None:
                addr = vip_channel_addr(addr)
            if addr is None:
                attempts.append(Attempt(target_name(addr, mq), "no master address in the route", 0.0))
                progress.last_error = NoRouteError(f"no master address for broker {mq.broker_name}")
                progress.last_broker = mq.broker_name
                self.instance.refresh_soon(p.topic)
                continue
            try:
                response = await api.invoke(addr, self._request(p, mq, batch), remaining, queue=mq, begin=now)
            except ClientError as failure:
                self._judge(p, mq, addr, now, None, failure, progress, begin)
                continue
            result = self._judge(p, mq, addr, now, response, None, progress, begin, retry=queue is None)
            if result is not None:
                return result
        return self._exhausted(p, begin, deadline, progress)

    # -- the send API -------------------------------------------------------------------

    async def send(
        self, msg: Message, *, queue: MessageQueue | None = None, timeout: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer (sync), with retries, within one budget;
        to ``queue`` when given (of the message's topic; no retry elsewhere, as Java's
        ``send(msg, mq)``)."""
        self._check_running()
        begin = self._now()
        deadline = begin + (timeout or self.config.send_timeout)
        if queue is not None and queue.topic != msg.topic:
            raise ValueError(f"the queue's topic {queue.topic!r} is not the message's {msg.topic!r}")
        p = self._prepare(msg)
        if queue is None:
            return await self._send_loop(p, begin, deadline, self.config.retries)
        if self._namespace:  # Java's queueWithNamespace
            queue = MessageQueue(p.topic, queue.broker_name, queue.queue_id)
        await self._publish_info(p.topic, begin, deadline)  # the broker's address
        return await self._send_loop(p, begin, deadline, 0, queue=queue)

    async def send_async(
        self,
        msg: Message,
        callback: Callable[[SendResult | None, BaseException | None], Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> SendFuture:
        """Start a send; returns a :class:`SendFuture` once it is under way. A message that
        fails the checks raises here; everything later goes to the future and callback."""
        self._check_running()
        begin = self._now()
        deadline = begin + (timeout or self.config.send_timeout)
        p = self._prepare(msg)
        slots = self._async_slots
        try:
            slots.acquire_nowait()
        except trio.WouldBlock:
            with trio.move_on_at(deadline):
                await slots.acquire()
            if self._now() >= deadline:
                raise SendTimeoutError(
                    f"send to {p.topic}: {self.config.max_async_in_flight} async sends still in flight",
                    elapsed=self._now() - begin,
                ) from None
        fut = SendFuture(callback)
        # the hot path: route and connection at hand -> one remoting async call whose
        # callback judges the answer; anything else (first send, a retry) -> a task
        info = self.instance.publish.get(p.topic)
        connected = False
        if info is not None and info.ok:
            mq = select_queue(info, self.faults, None)
            addr = self.instance.master_addr(mq.broker_name)
            if self._vip and addr is not None:
                addr = vip_channel_addr(addr)
            connected = addr is not None and self._api.is_connected(addr)
        if connected:
            await self._attempt_async(p, begin, deadline, fut, mq, addr)
        else:
            assert self._nursery is not None
            self._nursery.start_soon(self._run_async, p, begin, deadline, fut, None)
        # a trio checkpoint (as every trio async call): a loop of sends that never waits
        # would otherwise starve the send tasks and the rest of the program
        await trio.lowlevel.checkpoint()
        return fut

    async def _attempt_async(
        self, p: _Prepared, begin: float, deadline: float, fut: SendFuture, mq: MessageQueue, addr: str
    ) -> None:
        """First attempt of an async send without a task: the call's callback judges the
        answer (on the connection's reader) and hands a retry to :meth:`_run_async`."""
        progress = _Progress()
        t0 = self._now()

        def judged(response: RemotingCommand | None, failure: ClientError | None) -> None:
            try:
                result = self._judge(p, mq, addr, t0, response, failure, progress, begin)
                if result is None and (
                    len(progress.attempts) > self.config.async_retries or self._now() >= deadline
                ):
                    result = self._exhausted(p, begin, deadline, progress)
            except Exception as error:  # a ClientError; anything else is a bug, still the caller's to see
                self._finish_async(fut, None, error)
                return
            if result is not None:
                self._finish_async(fut, result, None)
                return
            try:  # retry in a task (the producer's nursery)
                assert self._nursery is not None
                self._nursery.start_soon(self._run_async, p, begin, deadline, fut, progress)
            except RuntimeError:  # the nursery is closed: the producer is gone
                self._finish_async(fut, None, ClientStateError(f"producer {self.group} closed before the send ended"))

        try:  # its deadline kept though nobody awaits it (the deadline wheel's 5 ms)
            await self._api.invoke_async(addr, self._request(p, mq), deadline - t0, judged, queue=mq, begin=t0)
        except ClientError as failure:
            judged(None, failure)
        except BaseException:  # cancelled while waiting for a permit: free the slot, then go
            self._finish_async(fut, None, ClientStateError("the send was cancelled"))
            raise

    async def _run_async(
        self, p: _Prepared, begin: float, deadline: float, fut: SendFuture, progress: _Progress | None
    ) -> None:
        try:
            result = await self._send_loop(p, begin, deadline, self.config.async_retries, progress=progress)
        except ClientError as exc:
            self._finish_async(fut, None, exc)
        except Exception as exc:  # a bug: still the caller's to see
            self._finish_async(fut, None, exc)
        except BaseException:  # cancelled: the producer is closing
            self._finish_async(fut, None, ClientStateError(f"producer {self.group} closed before the send ended"))
            raise
        else:
            self._finish_async(fut, result, None)

    def _finish_async(self, fut: SendFuture, result: SendResult | None, error: BaseException | None) -> None:
        try:
            fut._finish(result, error)
        finally:
            slots = self._async_slots
            slots.release()
            if self._drained is not None and slots.value == self.config.max_async_in_flight:
                self._drained.set()

    async def send_oneway(self, msg: Message, *, timeout: float | None = None) -> None:
        """Send once with the oneway flag; nothing comes back (errors only for what fails
        here: checks, route, connection)."""
        self._check_running()
        begin = self._now()
        deadline = begin + (timeout or self.config.send_timeout)
        p = self._prepare(msg)
        info = self.instance.publish.get(p.topic)
        if info is None or not info.ok:
            info = await self._publish_info(p.topic, begin, deadline)
        mq = select_queue(info, self.faults, None)
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            raise NoRouteError(f"no master address for broker {mq.broker_name}")
        if self._vip:
            addr = vip_channel_addr(addr)
        try:
            await self._api.invoke_oneway(
                addr, self._request(p, mq), max(deadline - self._now(), 0.001),
                queue=mq, begin=begin,
            )
        except ClientError:
            self.faults.update(mq.broker_name, 0.0, isolation=True)
            raise
        # a oneway send that the socket takes at once never waits: yield here (a trio
        # checkpoint), or a loop of them starves every other task, the writer included
        await trio.lowlevel.checkpoint()

    async def send_orderly(
        self, msg: Message, selector: Selector | None = None, arg: Any = None, *,
        key: str | None = None, timeout: float | None = None,
    ) -> SendResult:
        """Send to the queue ``selector(queues, msg, arg)`` picks, or the one ``key`` hashes
        to (:func:`select_by_hash`): messages of one key stay in order. No retry on another
        queue (Java's ``sendSelectImpl``), so an error means the message was not stored
        there; the caller decides."""
        self._check_running()
        if (selector is None) == (key is None):
            raise ValueError("send_orderly needs a selector or a key (one of them)")
        begin = self._now()
        deadline = begin + (timeout or self.config.send_timeout)
        p = self._prepare(msg)
        info = await self._publish_info(p.topic, begin, deadline)
        if selector is None:
            selector, arg = select_by_hash, key
        queues = list(info.queues)
        if self._namespace:  # the selector sees the topic as the user named it (Java's sendSelectImpl)
            queues = [MessageQueue(msg.topic, q.broker_name, q.queue_id) for q in queues]
        mq = selector(queues, msg, arg)
        if not isinstance(mq, MessageQueue) or mq not in queues:
            raise ValueError(f"the selector returned {mq!r}, not one of the topic's queues")
        if self._namespace:
            mq = MessageQueue(p.topic, mq.broker_name, mq.queue_id)
        return await self._send_loop(p, begin, deadline, 0, queue=mq)

    # -- request-reply ------------------------------------------------------------------

    async def request(self, msg: Message, *, timeout: float | None = None) -> MessageExt:
        """``request(msg, timeout)``: send ``msg`` as a request (:mod:`.request_reply`) and
        return its reply. :class:`RequestTimeoutError` when the request was sent but no
        reply came within ``timeout`` (``send_timeout`` by default, one budget for the
        send and the wait); the send's error when it could not be sent."""
        fut = await self._start_request(msg, timeout, None)
        table = self.instance.requests
        try:
            with trio.move_on_at(fut.deadline):
                return await fut.wait()
        finally:
            table.pop(fut.correlation_id)
        raise fut.timed_out(msg.topic)

    async def request_async(
        self, msg: Message, callback: Callable[[MessageExt | None, BaseException | None], Any] | None = None, *,
        timeout: float | None = None,
    ) -> RequestFuture:
        """``request(msg, callback, timeout)``: start a request; returns its
        :class:`RequestFuture` (``await`` it for the reply) once sent; ``callback`` gets
        ``(reply, error)`` once -- :class:`RequestTimeoutError` after ``timeout``."""
        fut = await self._start_request(msg, timeout, callback)
        assert self._nursery is not None
        self._nursery.start_soon(self._expire_request, fut, msg.topic)
        return fut

    async def _start_request(self, msg: Message, timeout: float | None, callback: Any) -> RequestFuture:
        """``prepareSendRequest`` and the send (async); the future is in the instance's
        table. A send that fails completes the future with its error."""
        self._check_running()
        timeout = timeout or self.config.send_timeout
        begin = self._now()
        deadline = begin + timeout
        instance = self.instance
        correlation_id = prepare_request(msg, instance.client_id, timeout)
        topic = wrap_namespace(self._namespace, msg.topic)
        if topic not in instance.routes:
            # the broker pushes the reply over this client's connection, found by its
            # heartbeat: tell every broker of the route about us first (Java's way)
            await self._publish_info(topic, begin, deadline)
            await instance.send_heartbeat()
        fut = RequestFuture(correlation_id, callback, deadline, int(timeout * 1000))
        instance.requests.add(fut)

        def sent(result: SendResult | None, error: BaseException | None) -> None:
            if error is not None and not fut.done():
                instance.requests.pop(correlation_id)
                fut.send_failed(error)

        try:
            await self.send_async(msg, sent, timeout=max(deadline - self._now(), 0.001))
        except BaseException:
            instance.requests.pop(correlation_id)
            raise
        return fut

    async def _expire_request(self, fut: RequestFuture, topic: str) -> None:
        """An async request's deadline (Java: ``RequestFutureHolder``'s scan)."""
        try:
            with trio.move_on_at(fut.deadline):
                await fut.wait_done()
        finally:
            if not fut.done():
                self.instance.requests.pop(fut.correlation_id)
                fut._finish(None, fut.timed_out(topic))

    # -- batches ------------------------------------------------------------------------

    def _batch_entries(self, msgs: Sequence[Message]) -> tuple[str, bool, list[tuple[bytes, str]]]:
        """``DefaultMQProducer.batch`` checks; each entry encoded once with its unique key."""
        if not msgs:
            raise ValueError("send_batch needs at least one message")
        topic = msgs[0].topic
        wait = msgs[0].wait_store_msg_ok
        entries: list[tuple[bytes, str]] = []
        limit = self.config.max_message_size
        for i, msg in enumerate(msgs):
            self._check(msg)
            if msg.topic != topic:
                raise self._refuse(msg.topic, f"a batch has one topic: message {i} is for {msg.topic!r}, not {topic!r}")
            if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise self._refuse(topic, "retry group topic is not supported for batching")
            if msg.properties.get(PROPERTY_DELAY_TIME_LEVEL) not in (None, "0"):
                raise self._refuse(topic, f"message {i}: TimeDelayLevel is not supported for batching")
            if msg.wait_store_msg_ok != wait:
                raise self._refuse(topic, f"message {i}: waitStoreMsgOK differs within the batch")
            props = msg.properties
            msg_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if msg_id is None:
                msg_id = props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self._ids.next_id(int(time.time() * 1000))
            entry = encode_batch_message(msg)
            if len(entry) > limit:
                raise self._refuse(
                    topic, f"message {i} alone is {len(entry)} bytes as a batch entry, over the maximum {limit}"
                )
            entries.append((entry, msg_id))
        return topic, wait, entries

    def split_batch(self, msgs: Sequence[Message]) -> list[list[int]]:
        """The message indexes of each request :meth:`send_batch` would send."""
        _, _, entries = self._batch_entries(msgs)
        return [[i for i, _ in chunk] for chunk in self._chunks(entries)]

    def _chunks(self, entries: list[tuple[bytes, str]]) -> list[list[tuple[int, tuple[bytes, str]]]]:
        limit = self.config.max_message_size
        chunks: list[list[tuple[int, tuple[bytes, str]]]] = []
        current: list[tuple[int, tuple[bytes, str]]] = []
        size = 0
        for i, entry in enumerate(entries):
            if current and size + len(entry[0]) > limit:
                chunks.append(current)
                current, size = [], 0
            current.append((i, entry))
            size += len(entry[0])
        if current:
            chunks.append(current)
        return chunks

    async def send_batch(self, msgs: Sequence[Message], *, timeout: float | None = None) -> list[SendResult]:
        """Send messages of one topic as SEND_BATCH_MESSAGE requests of at most
        ``max_message_size`` bytes (split as needed; one result per request, its
        ``msg_id`` the comma-joined unique keys). One budget for the whole call."""
        self._check_running()
        begin = self._now()
        deadline = begin + (timeout or self.config.send_timeout)
        topic, wait, entries = self._batch_entries(msgs)
        wire_topic = wrap_namespace(self._namespace, topic)
        results = []
        for chunk in self._chunks(entries):
            body = b"".join(e[0] for _, e in chunk)
            ids = ",".join(e[1] for _, e in chunk)
            p = _Prepared(wire_topic, body, 0, _BATCH_PROPS[wait], ids, 0, code=_SEND_BATCH,
                          user_topic=topic if wire_topic != topic else None)
            results.append(await self._send_loop(p, begin, deadline, self.config.retries, batch=True))
        return results


_CONNECT_ERRORS = (ClientConnectError,)
