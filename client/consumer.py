"""PushConsumer: messages pushed to a callback, pulled by long polling underneath.

Java: ``DefaultMQPushConsumer`` / ``DefaultMQPushConsumerImpl`` with
``ConsumeMessageConcurrentlyService`` and ``ConsumeMessageOrderlyService``.

What runs, in the consumer's nursery:

- a rebalance loop (:class:`~trocket.client.rebalance.Rebalancer`): at start, on the
  broker's NOTIFY_CONSUMER_IDS_CHANGED and every 20 s; clustering splits the queues
  among the group's clients (allocate-averagely), broadcasting takes them all;
- per owned queue, a long-polling pull loop (suspend 15 s, 32 messages a pull) into
  the queue's :class:`~trocket.client.process_queue.ProcessQueue`, with Java's flow
  control: it waits while the queue holds more than ``pull_threshold_for_queue``
  messages or ``pull_threshold_size_mib`` MiB of bodies, or (concurrently) spans more
  than ``max_span`` offsets;
- per owned queue, consume tasks that hand messages to the callback, one at a time (or
  batches of up to ``consume_batch_max_size`` to a batch listener), in queue order (``queue_parallelism`` > 1 lets a queue's messages run side by side, as
  Java's concurrent service does, giving up their order); all callbacks of the consumer
  share ``max_concurrency`` slots; plain functions run in worker threads;
- offsets: the smallest offset not yet consumed of each queue is committed every 5 s and
  at shutdown (clustering: to the broker; broadcasting: a local file);
- orderly: every queue is locked at the broker (LOCK_BATCH_MQ) before it is pulled and
  consumed, relocked every 20 s, unlocked when given up or at shutdown.

Results: SUCCESS (or ``None``) moves the offset; RECONSUME_LATER (or an exception)
sends the message back (CONSUMER_SEND_MSG_BACK; the broker's delay level for its
``reconsumeTimes`` applies, and after ``max_reconsume_times`` it goes to the DLQ); when
the send-back fails the message is re-sent to ``%RETRY%<group>`` (Java's fallback), and
if that fails too it is consumed again here after 5 s. Broadcasting drops a failed
message (as Java). Orderly: RECONSUME_LATER retries the same message after
``suspend_orderly_s``, keeping the queue's order.

At-least-once: when a queue moves to another client, the new owner starts at the last
committed offset, so messages the old owner consumed after its last commit, or was
consuming while it let go, are delivered again. Shutdown stops pulling, lets callbacks
in flight finish (up to ``await_termination_s``), commits, unlocks and unregisters.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

from trocket.codecs.bodies.client import (
    ConsumerData,
    ConsumeType,
    LockBatchRequestBody,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from trocket.codecs.bodies.groups import ResetOffsetBody
from trocket.codecs.bodies.running import (
    PROP_CONSUME_ORDERLY,
    PROP_THREADPOOL_CORE_SIZE,
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ProcessQueueInfo,
)
from trocket.codecs.headers import ConsumerSendMsgBackRequestHeader
from trocket.codecs.message.message import Message, MessageExt
from trocket.codecs.namespace import without_namespace
from trocket.codecs.message.properties import (
    PROPERTY_CONSUME_START_TIMESTAMP,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
)

from . import subscription as subs
from .config import ClientConfig
from .consumer_base import (
    ConsumeFrom,
    ConsumerBase,
    ConsumerOptions,
    ConsumeResult,
    Listener,
    ConsumeContext,
    make_invoker,
    listener_caller,
    takes_context,
    reset_retry_topic,
    start_errors_unwrapped,
)
from .consume_stats import ConsumerStatsManager
from .consumer_pull import process_pull_result, pull_header
from .errors import ClientError, ClientStateError
from .instance import ClientInstance
from .message import PullStatus
from .process_queue import ProcessQueue
from .trace import TraceDispatcher, traced_invoker

__all__ = ["PushConsumer", "PushConsumerOptions", "ConsumeResult", "ConsumeContext", "ConsumeFrom", "MessageModel", "ConsumerStats"]

log = logging.getLogger(__name__)

#: ``PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION``
PULL_DELAY_ON_ERROR_S = 3.0
#: ``PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL``
PULL_DELAY_ON_FLOW_CONTROL_S = 0.05
#: a suspended consumer's queues look again this often (Java: 1 s)
PULL_DELAY_WHEN_SUSPENDED_S = 1.0
#: a failed message whose send-back failed is consumed again after this (Java: 5 s)
RECONSUME_LOCAL_DELAY_S = 5.0
#: after OFFSET_ILLEGAL the queue is dropped and its offset corrected after this (Java: 10 s)
OFFSET_ILLEGAL_DELAY_S = 10.0


def _suspend_time(context: ConsumeContext | None, default_s: float) -> float:
    """An orderly queue's pause after RECONSUME_LATER: the context's
    ``suspend_current_queue_time_s`` or ``default_s``, within Java's 10 ms - 30 s."""
    chosen = default_s if context is None or context.suspend_current_queue_time_s is None \
        else context.suspend_current_queue_time_s
    return min(max(chosen, 0.01), 30.0)


@attrs.define(slots=True, kw_only=True)
class PushConsumerOptions(ConsumerOptions):
    """A push consumer's knobs; defaults are ``DefaultMQPushConsumer``'s (times in s);
    the common ones are :class:`~trocket.client.consumer_base.ConsumerOptions`'."""

    orderly: bool = False
    #: callbacks in flight at once (``consumeThreadMax``)
    max_concurrency: int = 20
    #: callbacks in flight per queue; 1 keeps each queue's order
    queue_parallelism: int = 1
    #: messages of one queue a batch listener, ``listener(msgs, context)``, gets at once
    #: (``consumeMessageBatchMaxSize``); its result applies to the whole batch
    consume_batch_max_size: int = 1
    pull_threshold_size_mib: float = 100
    #: messages cached for all the owned queues together (``pullThresholdForTopic``):
    #: each queue's limit becomes this over the queues owned (at least 1), replacing
    #: ``pull_threshold_for_queue``; -1: off
    pull_threshold_for_topic: int = -1
    #: MiB of bodies cached for all the owned queues together
    #: (``pullThresholdSizeForTopic``), divided likewise; -1: off
    pull_threshold_size_for_topic_mib: int = -1
    #: a pause after each pull that found messages (``pullInterval``; 0: pull again at once)
    pull_interval_s: float = 0.0
    #: concurrent consumption: stop pulling while a queue's cached offsets span more than this
    max_span: int = 2000
    #: offsets committed this often; None: the client config's ``persist_offset_interval`` (5 s)
    persist_interval_s: float | None = None
    lock_interval_s: float = 20.0
    #: deliveries of a failing message before the DLQ (``maxReconsumeTimes``); -1 (the
    #: default): 16 for concurrent consumption, no limit for orderly, as Java
    max_reconsume_times: int = -1
    #: a message whose callback started longer ago than this is sent back (delay level 3)
    #: and passed over, checked this often (``consumeTimeout``, 15 min; concurrent only)
    consume_timeout_s: float = 15 * 60.0
    suspend_orderly_s: float = 1.0
    #: shutdown waits this long for callbacks in flight before cancelling them
    await_termination_s: float = 10.0

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.consume_timeout_s <= 0:
            raise ValueError(f"consume_timeout_s must be positive, not {self.consume_timeout_s}")
        for name in ("max_concurrency", "queue_parallelism", "consume_batch_max_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.pull_threshold_for_topic != -1 and not 1 <= self.pull_threshold_for_topic <= 6553500:
            raise ValueError(f"pull_threshold_for_topic must be -1 or within 1-6553500, not {self.pull_threshold_for_topic}")
        if self.pull_threshold_size_for_topic_mib != -1 and not 1 <= self.pull_threshold_size_for_topic_mib <= 102400:
            raise ValueError("pull_threshold_size_for_topic_mib must be -1 or within 1-102400, not "
                             f"{self.pull_threshold_size_for_topic_mib}")
        if not 0 <= self.pull_interval_s <= 65.535:
            raise ValueError(f"pull_interval_s must be within 0-65.535, not {self.pull_interval_s}")
        if self.consume_batch_max_size > 1024:  # Java's checkConfig
            raise ValueError(f"consume_batch_max_size must be at most 1024, not {self.consume_batch_max_size}")
        if self.orderly and self.queue_parallelism != 1:
            raise ValueError("an orderly consumer consumes one message of a queue at a time (queue_parallelism=1)")


@attrs.define(slots=True)
class ConsumerStats:
    """Counters (cumulative)."""

    pulls: int = 0
    pulled: int = 0
    consumed: int = 0
    reconsume_later: int = 0
    sent_back: int = 0
    resent_to_retry: int = 0
    flow_controlled: int = 0
    pull_errors: int = 0
    rebalances: int = 0


@attrs.define(slots=True, eq=False)
class _Owned:
    mq: MessageQueue
    pq: ProcessQueue
    pull_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)


class PushConsumer(ConsumerBase):
    """``async with PushConsumer(group, namesrv, {"Topic": "*"}, listener) as c: ...``

    ``listener(msg)`` is an async or plain function returning a :class:`ConsumeResult`
    (``None`` = SUCCESS; an exception = RECONSUME_LATER). Subscriptions may also be
    added with :meth:`subscribe` before the consumer starts. ``instance`` shares a
    running :class:`~trocket.client.instance.ClientInstance`; otherwise the consumer
    makes its own from ``namesrv`` and ``client_config`` options. ``on_assignment(mq,
    owned)`` is told of every queue taken (True, before its first message) and given up
    (False, once no new callback of it can start) -- Java's ``MessageQueueListener``.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | list[str] | None = None,
        subscriptions: Mapping[str, str | subs.MessageSelector] | None = None,
        listener: Listener | None = None,
        *,
        instance: ClientInstance | None = None,
        client_config: ClientConfig | None = None,
        options: PushConsumerOptions | None = None,
        on_assignment: Callable[[MessageQueue, bool], None] | None = None,
        **option_kw: Any,
    ) -> None:
        super().__init__(group, namesrv, instance, client_config)
        if options is not None and option_kw:
            raise TypeError("give either options= or option keywords, not both")
        self.options = options or PushConsumerOptions(**option_kw)
        self._set_namespace(self.options.namespace)
        self._started = False
        self._resumed = trio.Event()  # unset while suspended
        self._resumed.set()
        self._retry_sub: SubscriptionData | None = None
        self._subs: dict[str, SubscriptionData] = {}
        for topic, expression in (subscriptions or {}).items():
            self.subscribe(topic, expression)
        self._listener = listener
        self._on_assignment = on_assignment
        self._owned: dict[MessageQueue, _Owned] = {}
        self._limiter = trio.CapacityLimiter(self.options.max_concurrency)
        self._invoke = None
        self._takes_context = False
        #: each queue's flow-control limits now: the options', or the topic-wide ones
        #: divided over the queues owned (:meth:`_divide_thresholds`)
        self._queue_threshold = self.options.pull_threshold_for_queue
        self._queue_threshold_bytes = int(self.options.pull_threshold_size_mib * 1024 * 1024)
        self._rebalance_lock = trio.Lock()
        self._retry_producer = None
        self.stats = ConsumerStats()
        #: per-topic pull and consume rates (Java's ``ConsumerStatsManager``): the
        #: ``statusTable`` of GET_CONSUMER_RUNNING_INFO
        self.consume_stats = ConsumerStatsManager()
        #: the trace dispatcher while ``trace`` is on and the consumer runs
        self.tracer: TraceDispatcher | None = None

    # -- configuration ------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | subs.MessageSelector = "*") -> None:
        """Subscribe to ``topic`` with ``"*"``, ``"TagA || TagB"`` or a
        :class:`~.subscription.MessageSelector` (``MessageSelector.by_sql("a > 5")``: the
        broker evaluates it on each message's properties), before or after start."""
        topic = self._wire_topic(topic)
        self._subs[topic] = subs.build(topic, expression)
        if self._started:
            assert self._instance is not None
            self._instance.heartbeat_now()
            self._rebalancer.wakeup()  # type: ignore[union-attr]

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``: the next rebalance (started now) gives up its queues
        and the brokers stop listing it for this client (Java's ``unsubscribe``)."""
        if self._subs.pop(self._wire_topic(topic), None) is not None and self._started:
            assert self._instance is not None
            self._instance.heartbeat_now()
            self._rebalancer.wakeup()  # type: ignore[union-attr]

    def suspend(self) -> None:
        """Stop pulling (every queue's next pull waits; what is cached is still consumed)
        until :meth:`resume` (Java's ``suspend``)."""
        if self._resumed.is_set():
            self._resumed = trio.Event()

    def resume(self) -> None:
        """Pull again after :meth:`suspend`."""
        self._resumed.set()

    @property
    def suspended(self) -> bool:
        return not self._resumed.is_set()

    def register_listener(self, listener: Listener) -> Listener:
        """Set the callback (usable as a decorator)."""
        if self._started:
            raise ClientStateError("set the listener before the consumer starts")
        self._listener = listener
        return listener

    def assignment(self) -> list[MessageQueue]:
        """The queues this consumer owns now (named without the namespace)."""
        return sorted(map(self._user_mq, self._owned))

    def cached(self) -> dict[MessageQueue, tuple[int, int]]:
        """Per owned queue: messages pulled and not yet consumed, and their body bytes
        (what flow control limits)."""
        return {self._user_mq(mq): (o.pq.msg_count, o.pq.msg_size) for mq, o in sorted(self._owned.items())}

    def _topics(self) -> list[str]:
        topics = list(self._subs)
        if self.options.message_model is MessageModel.CLUSTERING:
            topics.append(subs.retry_topic(self.group))
        return topics

    def _sub_of(self, topic: str) -> SubscriptionData:
        sub = self._subs.get(topic)
        if sub is None:  # the retry topic
            if self._retry_sub is None:
                self._retry_sub = subs.retry_subscription(self.group)
            sub = self._retry_sub
        return sub

    # -- ConsumerHandle (the instance calls these) --------------------------------------

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=self.options.message_model,
            consume_from_where=self.options.consume_from.value,
            subscriptions=[self._sub_of(t) for t in self._topics()],
        )

    def subscribed_topics(self) -> Iterable[str]:
        return self._topics()

    # -- lifecycle ----------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Start, report started, and consume until :meth:`aclose` (or cancellation)."""
        if self._started:
            raise ClientStateError("a PushConsumer starts once")
        if self._listener is None:
            raise ClientStateError("no listener: pass one or call register_listener before starting")
        if not self._subs:
            raise ClientStateError("no subscription: pass subscriptions or call subscribe before starting")
        self._started = True
        self._invoke = make_invoker(self._listener, self._limiter, orderly=self.options.orderly)
        self._takes_context = takes_context(self._listener)
        if self.options.consume_batch_max_size > 1 and not self._takes_context:
            raise ClientStateError(
                "consume_batch_max_size > 1 needs a batch listener, listener(msgs, context): "
                "a listener of one argument is given one message at a time")
        opts = self.options
        with start_errors_unwrapped():
            async with trio.open_nursery() as nursery:
                await self._start_common(
                    nursery,
                    model=opts.message_model,
                    offset_dir=opts.offset_dir,
                    consume_timestamp=opts.consume_timestamp,
                    topics=self._topics,
                    apply=self._apply_allocation,
                    rebalance_interval=opts.rebalance_interval_s,
                    strategy=opts.allocate_strategy,
                    truncate_unsubscribed=True,
                )
                assert self._rebalancer is not None
                if opts.trace:
                    self.tracer = await nursery.start(TraceDispatcher(self.instance, self.group, opts.trace_topic).run)
                    # Java's trace hook names the group without the namespace
                    self._invoke = traced_invoker(self._invoke, self.tracer, without_namespace(self.group))
                await self._rebalancer.rebalance_once()
                nursery.start_soon(self._rebalancer.run, False)
                nursery.start_soon(self._persist_loop)
                nursery.start_soon(self.consume_stats.run)
                if not opts.orderly:
                    nursery.start_soon(self._clean_expired_loop)
                if opts.orderly and opts.message_model is MessageModel.CLUSTERING:
                    nursery.start_soon(self._lock_loop)
                task_status.started(self)
                await trio.sleep_forever()

    async def aclose(self, *, cancel_callbacks: bool = False) -> None:
        """Graceful shutdown: stop pulling, finish callbacks in flight (up to
        ``await_termination_s``), commit offsets, unlock queues, unregister.

        ``cancel_callbacks=True`` cancels the callbacks in flight at once instead of
        waiting for them (a caller that has what it wants, such as ``trocket consume
        --count``): their messages stay unconsumed, so the committed offsets stop
        before them and they are delivered again later."""
        if self._closing or not self._started:
            return
        with trio.move_on_after(self.options.await_termination_s):
            await self._rebalance_lock.acquire()  # no queue taken after this (released by nobody: closing)
        self._closing = True
        owned = list(self._owned.values())
        for o in owned:
            o.pull_scope.cancel()
            o.pq.closing = True
            o.pq.wake()
        if cancel_callbacks:
            for o in owned:
                o.scope.cancel()
        else:
            with trio.move_on_after(self.options.await_termination_s) as waited:
                for o in owned:
                    await o.done.wait()
            if waited.cancelled_caught:
                log.warning("consumer %s: callbacks still running after %.1f s are cancelled", self.group,
                            self.options.await_termination_s)
                for o in owned:
                    o.scope.cancel()

        async def unlock_and_stop_producer() -> None:
            if self.options.orderly and self.options.message_model is MessageModel.CLUSTERING:
                await self._unlock(list(self._owned), oneway=False)
            if self._retry_producer is not None:
                await self._retry_producer.aclose()
            if self.tracer is not None:
                with trio.move_on_after(3):
                    await self.tracer.flush()

        await self._finish(commit=True, extra=unlock_and_stop_producer)

    def _owned_queues(self) -> list[MessageQueue]:
        return list(self._owned)

    # -- rebalance ----------------------------------------------------------------------

    async def _apply_allocation(self, topic: str, allocated: set[MessageQueue]) -> None:
        """``updateProcessQueueTableInRebalance``."""
        async with self._rebalance_lock:
            if self._closing:
                return
            self.stats.rebalances += 1
            now = trio.current_time()
            for mq, o in list(self._owned.items()):
                if mq.topic != topic:
                    continue
                if mq not in allocated or o.pq.pull_expired(now):
                    await self._give_up(o)
            orderly_locking = self.options.orderly and self.options.message_model is MessageModel.CLUSTERING
            for mq in sorted(allocated):
                if mq in self._owned:
                    continue
                pq = ProcessQueue()
                if orderly_locking:
                    locked = await self._lock([mq])
                    if mq not in locked:
                        continue  # another client still holds it; next round
                    pq.set_locked(True, trio.current_time())
                assert self._store is not None
                try:
                    offset = await self.start_offset_of(mq, self.options.consume_from)
                except ClientError as exc:
                    log.warning("start offset of %s unknown (%s); next rebalance retries", mq, exc)
                    if orderly_locking:
                        await self._unlock([mq], oneway=True)
                    continue
                self._store.update(mq, offset)
                o = _Owned(mq, pq)
                self._owned[mq] = o
                if self._on_assignment is not None:
                    self._on_assignment(self._user_mq(mq), True)
                assert self._nursery is not None
                self._nursery.start_soon(self._queue_main, o, offset)
            self._divide_thresholds()

    def _divide_thresholds(self) -> None:
        """``RebalancePushImpl.messageQueueChanged``: the topic-wide limits, when set,
        divided over every queue owned now (each at least 1)."""
        opts, owned = self.options, len(self._owned)
        if not owned:
            return
        if opts.pull_threshold_for_topic != -1:
            self._queue_threshold = max(1, opts.pull_threshold_for_topic // owned)
        if opts.pull_threshold_size_for_topic_mib != -1:
            self._queue_threshold_bytes = max(1, opts.pull_threshold_size_for_topic_mib // owned) * 1024 * 1024

    async def _give_up(self, o: _Owned) -> None:
        """``removeUnnecessaryMessageQueue``: stop, commit what was consumed, unlock."""
        o.pq.dropped = True
        o.pull_scope.cancel()
        o.pq.wake()
        self._owned.pop(o.mq, None)
        if self._on_assignment is not None:
            self._on_assignment(self._user_mq(o.mq), False)
        assert self._store is not None
        try:
            await self._store.persist(o.mq)
        except ClientError as exc:
            log.warning("offset of %s not committed when giving it up: %s", o.mq, exc)
        self._store.remove(o.mq)
        if self.options.orderly and self.options.message_model is MessageModel.CLUSTERING:
            with trio.move_on_after(1):  # let the message in the callback finish first
                await o.done.wait()
            await self._unlock([o.mq], oneway=True)

    # -- the broker's requests ------------------------------------------------------------

    async def running_info(self) -> bytes:
        """GET_CONSUMER_RUNNING_INFO: Java's ``ConsumerRunningInfo`` (what mqadmin
        ``consumerStatus`` prints): the options as properties, the subscriptions and
        each owned queue's cache, and per subscribed topic (the retry topic too) its pull
        and consume rates (``statusTable``, :mod:`.consume_stats`)."""
        opts = self.options
        props = self._running_properties(opts, ConsumeType.CONSUME_PASSIVELY)
        props[PROP_CONSUME_ORDERLY] = str(opts.orderly).lower()
        props[PROP_THREADPOOL_CORE_SIZE] = str(opts.max_concurrency)
        # the per-queue limits in force (Java's messageQueueChanged sets them on the consumer)
        props["pull_threshold_for_queue"] = str(self._queue_threshold)
        props["pull_threshold_size_mib"] = str(self._queue_threshold_bytes / (1024 * 1024))
        store = self._store
        now_wall, now_trio = time.time(), trio.current_time()

        def wall_ms(t: float) -> int:
            return int((now_wall - (now_trio - t)) * 1000) if t else 0

        table = {}
        for mq, o in self._owned.items():
            pq = o.pq
            table[mq] = ProcessQueueInfo(
                commit_offset=store.read_memory(mq) if store is not None else -1,
                cached_msg_min_offset=pq.min_cached_offset,
                cached_msg_max_offset=max(pq.queue_offset_max, 0) if pq.msg_count else 0,
                cached_msg_count=pq.msg_count,
                cached_msg_size_mib=pq.msg_size // (1024 * 1024),
                locked=pq.locked,
                last_lock_timestamp=wall_ms(pq.last_lock_time),
                dropped=pq.dropped,
                last_pull_timestamp=wall_ms(pq.last_pull_time),
                last_consume_timestamp=pq.last_consume_ms,
            )
        subs_ = list(self._subs.values()) + ([self._retry_sub] if self._retry_sub is not None else [])
        status = {sub.topic: self.consume_stats.status(sub.topic) for sub in subs_}
        return ConsumerRunningInfo(properties=props, subscriptions=subs_, mq_table=table, status_table=status).encode()

    async def consume_directly(self, msg: MessageExt, broker_name: str | None) -> bytes:
        """CONSUME_MESSAGE_DIRECTLY: hand ``msg`` to the listener once, outside the
        queues (no offset moves, nothing is sent back), and say what it returned
        (Java's ``consumeMessageDirectly``)."""
        listener = self._listener
        if listener is None:
            raise NotImplementedError
        reset_retry_topic(msg, self.group, int(time.time() * 1000), self.namespace)
        begin = time.monotonic()
        remark = None
        call = listener_caller(listener)
        context = ConsumeContext(mq=MessageQueue(msg.topic, broker_name or "", msg.queue_id))
        try:
            result = await call([msg], context)
        except Exception as exc:  # noqa: BLE001 - reported to the admin, as Java does
            outcome, remark = CMResult.CR_THROW_EXCEPTION, "".join(traceback.format_exception(exc))
        else:
            # as the queues treat it: None is SUCCESS here (Java's null would be CR_RETURN_NULL)
            if result is None or result is ConsumeResult.SUCCESS:
                outcome = CMResult.CR_SUCCESS
            elif self.options.orderly and result is ConsumeResult.COMMIT:
                outcome = CMResult.CR_COMMIT
            elif self.options.orderly and result is ConsumeResult.ROLLBACK:
                outcome = CMResult.CR_ROLLBACK
            else:
                outcome = CMResult.CR_LATER
        return ConsumeMessageDirectlyResult(
            order=self.options.orderly, auto_commit=context.auto_commit, consume_result=outcome, remark=remark,
            spent_time_ms=int((time.monotonic() - begin) * 1000),
        ).encode()

    async def reset_offset(self, topic: str, timestamp: int, body: bytes) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (Java's ``MQClientInstance.resetOffset``): every
        queue of the table this consumer owns is dropped (what it cached is discarded,
        a callback in flight does not move the offset), its offset set to the table's
        and committed, and it is pulled again from there at once. Queues it does not
        own only get the offset recorded (the broker holds it for their owners)."""
        table = ResetOffsetBody.from_body(body).offset_table
        async with self._rebalance_lock:
            if self._closing:
                return
            store = self._store
            assert store is not None and self._nursery is not None
            for mq, offset in sorted(table.items()):
                if mq.topic != topic:
                    continue
                old = self._owned.pop(mq, None)
                if old is not None:
                    old.pq.dropped = True
                    old.pull_scope.cancel()
                    old.pq.wake()
                store.update(mq, offset)
                if old is None:
                    continue
                try:
                    await store.persist(mq)
                except ClientError as exc:
                    log.warning("reset offset of %s to %d not committed: %s", mq, offset, exc)
                pq = ProcessQueue()
                if old.pq.locked:
                    pq.set_locked(True, trio.current_time())
                o = _Owned(mq, pq)
                self._owned[mq] = o
                self._nursery.start_soon(self._queue_main, o, offset)
                log.info("%s: %s reset to offset %d (timestamp %d)", self.group, mq, offset, timestamp)

    # -- one queue ----------------------------------------------------------------------

    async def _queue_main(self, o: _Owned, offset: int) -> None:
        try:
            with o.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pull_loop, o, offset)
                    consume = self._consume_orderly if self.options.orderly else self._consume_concurrently
                    for _ in range(self.options.queue_parallelism):
                        nursery.start_soon(consume, o)
        finally:
            o.done.set()

    async def _pull_loop(self, o: _Owned, offset: int) -> None:
        opts = self.options
        mq, pq = o.mq, o.pq
        sub = self._sub_of(mq.topic)
        clustering = opts.message_model is MessageModel.CLUSTERING
        interval = opts.pull_interval_s
        store = self._store
        assert store is not None
        topic_stats = self.consume_stats.topic(mq.topic)
        pull_rt, pull_tps = topic_stats.pull_rt, topic_stats.pull_tps
        with o.pull_scope:
            while not pq.dropped:
                pq.last_pull_time = trio.current_time()  # Java: at every pullMessage, flow-controlled or not
                if not self._resumed.is_set():  # suspended: look again every second (Java's delay)
                    with trio.move_on_after(PULL_DELAY_WHEN_SUSPENDED_S):
                        await self._resumed.wait()
                    continue
                if (
                    pq.msg_count > self._queue_threshold
                    or pq.msg_size > self._queue_threshold_bytes
                    or (not opts.orderly and pq.max_span > opts.max_span)
                ):
                    self.stats.flow_controlled += 1
                    await trio.sleep(PULL_DELAY_ON_FLOW_CONTROL_S)
                    continue
                if opts.orderly and clustering and not pq.locked:
                    await trio.sleep(PULL_DELAY_ON_ERROR_S)
                    continue
                commit = store.read_memory(mq) if clustering else 0
                header = pull_header(
                    self.group, mq, offset, sub,
                    max_nums=opts.pull_batch_size,
                    commit_offset=commit,
                    suspend_ms=int(opts.broker_suspend_s * 1000),
                )
                self.stats.pulls += 1
                begin = time.monotonic()
                result = await self._pull(mq, header, opts.pull_timeout_s)
                if result is None:
                    self.stats.pull_errors += 1
                    await trio.sleep(PULL_DELAY_ON_ERROR_S)
                    continue
                if pq.dropped:
                    return
                status = result.status
                if status is PullStatus.FOUND:
                    pull_rt.value += int((time.monotonic() - begin) * 1000)  # incPullRT
                    pull_rt.times += 1
                    result = process_pull_result(result, sub)
                    offset = result.next_begin_offset
                    if result.messages:
                        pull_tps.value += len(result.messages)  # incPullTPS
                        pull_tps.times += 1
                        self.stats.pulled += pq.put(result.messages)
                        if interval:
                            await trio.sleep(interval)
                    elif pq.msg_count == 0:
                        store.update(mq, offset, increase_only=True)
                elif status is PullStatus.NO_NEW_MSG or status is PullStatus.NO_MATCHED_MSG:
                    offset = result.next_begin_offset
                    if pq.msg_count == 0:  # correctTagsOffset
                        store.update(mq, offset, increase_only=True)
                else:  # OFFSET_ILLEGAL
                    log.warning("pull offset %d of %s is illegal; moving to %d", offset, mq,
                                result.next_begin_offset)
                    pq.dropped = True
                    pq.wake()
                    await trio.sleep(OFFSET_ILLEGAL_DELAY_S)
                    store.update(mq, result.next_begin_offset)
                    try:
                        await store.persist(mq)
                    except ClientError:
                        pass
                    if self._owned.get(mq) is o:
                        del self._owned[mq]  # the next rebalance takes it again at the new offset
                    return

    def _running(self, o: _Owned) -> bool:
        return not o.pq.dropped and not self._closing

    async def _consume_concurrently(self, o: _Owned) -> None:
        """``ConsumeMessageConcurrentlyService``: batches of up to
        ``consume_batch_max_size`` messages of the queue to the listener; its result (and
        the context's ``ack_index``) says which of them are consumed (``processConsumeResult``)."""
        pq, mq = o.pq, o.mq
        invoke = self._invoke
        assert invoke is not None
        store = self._store
        assert store is not None
        clustering = self.options.message_model is MessageModel.CLUSTERING
        batch_size = self.options.consume_batch_max_size
        with_context = self._takes_context  # a one-message listener has no context: none is made
        namespace = self.namespace
        topic_stats = self.consume_stats.topic(mq.topic)
        consume_rt, consume_ok, consume_failed = topic_stats.consume_rt, topic_stats.consume_ok, topic_stats.consume_failed
        while True:
            await pq.wait_pending()
            if not self._running(o):
                return
            msgs = pq.take(batch_size)
            if not msgs:
                continue
            now_ms = int(time.time() * 1000)
            for msg in msgs:
                reset_retry_topic(msg, self.group, now_ms, namespace)
            context = ConsumeContext(mq=mq) if with_context else None
            result = await invoke(msgs, context)
            consume_rt.value += int(time.time() * 1000) - now_ms  # incConsumeRT
            consume_rt.times += 1
            if pq.dropped:
                return  # given up: the new owner consumes from the committed offset
            size = len(msgs)
            if result is ConsumeResult.SUCCESS:
                ack = size - 1 if context is None else max(-1, min(context.ack_index, size - 1))
                consume_ok.value += ack + 1  # incConsumeOKTPS
                consume_ok.times += 1
            else:
                ack = -1
            consume_failed.value += size - ack - 1  # incConsumeFailedTPS (0 too on SUCCESS, as Java)
            consume_failed.times += 1
            self.stats.consumed += ack + 1
            done = msgs
            if ack + 1 < size:
                self.stats.reconsume_later += size - ack - 1
                if clustering:
                    back_failed = []
                    delay_level = 0 if context is None else context.delay_level_when_next_consume
                    for msg in msgs[ack + 1:]:
                        if not await self._send_back(mq, msg, delay_level):
                            msg.reconsume_times += 1
                            back_failed.append(msg)
                    if back_failed:  # they stay cached: the offset does not pass them
                        failed_ids = {id(m) for m in back_failed}
                        done = [m for m in msgs if id(m) not in failed_ids]
                        self._nursery.start_soon(self._reconsume_later, pq, back_failed)  # type: ignore[union-attr]
            offset = pq.remove(done)
            if offset >= 0:
                store.update(mq, offset, increase_only=True)

    async def _reconsume_later(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        await trio.sleep(RECONSUME_LOCAL_DELAY_S)
        if not pq.dropped:
            pq.give_back(msgs)

    async def _consume_orderly(self, o: _Owned) -> None:
        """``ConsumeMessageOrderlyService``: batches of up to ``consume_batch_max_size``
        in queue order, one batch of the queue at a time, each answer handled as
        ``processConsumeResult``. With the context's ``auto_commit`` (the default):
        SUCCESS (and COMMIT / ROLLBACK, taken as it) commits the batch, RECONSUME_LATER
        gives it back to be consumed again after the pause. Without it: SUCCESS leaves
        the batch consumed but uncommitted, COMMIT commits all of those, ROLLBACK gives
        them all back and pauses, RECONSUME_LATER gives back just the batch."""
        pq, mq = o.pq, o.mq
        invoke = self._invoke
        assert invoke is not None
        store = self._store
        assert store is not None
        locking = self.options.message_model is MessageModel.CLUSTERING
        batch_size = self.options.consume_batch_max_size
        with_context = self._takes_context  # a one-message listener has no context: none is made
        namespace = self.namespace
        #: consumed, not committed (Java's ``consumingMsgOrderlyTreeMap`` past its batch)
        uncommitted: list[MessageExt] = []
        topic_stats = self.consume_stats.topic(mq.topic)
        consume_rt, consume_ok, consume_failed = topic_stats.consume_rt, topic_stats.consume_ok, topic_stats.consume_failed
        while True:
            await pq.wait_pending()
            if not self._running(o):
                return
            if locking and (not pq.locked or pq.lock_expired(trio.current_time())):
                locked = await self._lock([mq])  # tryLockLaterAndReconsume
                if mq not in locked:
                    await trio.sleep(self.options.suspend_orderly_s)
                continue
            msgs = pq.take(batch_size)
            if not msgs:
                continue
            now_ms = int(time.time() * 1000)
            for msg in msgs:
                reset_retry_topic(msg, self.group, now_ms, namespace)
            context = ConsumeContext(mq=mq) if with_context else None
            pq.consuming = True
            try:
                result = await invoke(msgs, context)
            finally:
                pq.consuming = False
            consume_rt.value += int(time.time() * 1000) - now_ms  # incConsumeRT
            consume_rt.times += 1
            if pq.dropped:
                return
            auto_commit = context is None or context.auto_commit
            if auto_commit and result is not ConsumeResult.SUCCESS and result is not ConsumeResult.RECONSUME_LATER:
                log.warning("an orderly consumer with auto_commit answered %s: taken as SUCCESS (%s)", result.name, mq)
                result = ConsumeResult.SUCCESS
            if result is ConsumeResult.SUCCESS:
                self.stats.consumed += len(msgs)
                consume_ok.value += len(msgs)  # incConsumeOKTPS
                consume_ok.times += 1
                uncommitted.extend(msgs)
                if auto_commit:
                    self._commit_orderly(mq, pq, uncommitted)
                    uncommitted.clear()
            elif result is ConsumeResult.COMMIT:
                uncommitted.extend(msgs)
                self._commit_orderly(mq, pq, uncommitted)
                uncommitted.clear()
            elif result is ConsumeResult.ROLLBACK:
                pq.give_back(uncommitted + msgs)
                uncommitted.clear()
                await trio.sleep(_suspend_time(context, self.options.suspend_orderly_s))
            else:
                self.stats.reconsume_later += len(msgs)
                consume_failed.value += len(msgs)  # incConsumeFailedTPS
                consume_failed.times += 1
                if await self._check_reconsume_times(msgs):
                    pq.give_back(msgs)
                    await trio.sleep(_suspend_time(context, self.options.suspend_orderly_s))
                else:  # every message went to the DLQ: consumed, committed now (auto_commit) or with the next COMMIT
                    uncommitted.extend(msgs)
                    if auto_commit:
                        self._commit_orderly(mq, pq, uncommitted)
                        uncommitted.clear()

    def _commit_orderly(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """``ProcessQueue.commit`` + ``updateOffset``: ``msgs`` leave the cache and the
        queue's offset moves past them."""
        offset = pq.remove(msgs)
        if offset >= 0:
            assert self._store is not None
            self._store.update(mq, offset)

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """Orderly ``checkReconsumeTimes``: a message failed ``max_reconsume_times`` times
        already goes to the broker's retry topic at that count, which the broker turns
        into the DLQ; the others count one more failure. True when the batch must be
        consumed again (a message below the limit, or one that could not be sent)."""
        limit = self._max_reconsume_times()
        suspend = False
        for msg in msgs:
            if msg.reconsume_times >= limit:
                msg.properties[PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times)
                try:
                    await self._resend_to_retry(msg, msg.reconsume_times)
                    self.stats.resent_to_retry += 1
                    continue
                except ClientError as exc:
                    log.warning("message %s over max_reconsume_times could not be sent to the DLQ (%s); "
                                "consuming it again", msg.msg_id, exc)
            suspend = True
            msg.reconsume_times += 1
        return suspend

    # -- send back ----------------------------------------------------------------------

    async def _send_back(self, mq: MessageQueue, msg: MessageExt, delay_level: int = 0) -> bool:
        """CONSUMER_SEND_MSG_BACK; on failure the Java fallback (a new message to
        ``%RETRY%<group>``). False when both failed."""
        inst = self.instance
        addr = inst.master_addr(mq.broker_name)
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=self.group,
            delayLevel=delay_level,
            originMsgId=msg.client_msg_id,  # Java: MessageClientExt.getMsgId, the UNIQ_KEY
            originTopic=self._wire_topic(msg.topic),  # Java: withNamespace before sending back
            unitMode=False,
            maxReconsumeTimes=self._max_reconsume_times(),
            bname=mq.broker_name,
        )
        try:
            if addr is None:
                raise ClientError(f"no address for broker {mq.broker_name}")
            await inst.api.send_back(addr, header)
            self.stats.sent_back += 1
            return True
        except ClientError as exc:
            log.info("send back of %s failed (%s); re-sending it to the retry topic", msg.msg_id, exc)
        try:
            await self._resend_to_retry(msg)
            self.stats.resent_to_retry += 1
            return True
        except ClientError as exc:
            log.warning("message %s could not be sent back nor re-sent (%s); consuming it again locally",
                        msg.msg_id, exc)
            return False

    def _max_reconsume_times(self) -> int:
        """``getMaxReconsumeTimes``: the option, or for -1, 16 (concurrent) or no limit
        (orderly: Java's ``Integer.MAX_VALUE``)."""
        value = self.options.max_reconsume_times
        if value != -1:
            return value
        return 2**31 - 1 if self.options.orderly else 16

    async def _resend_to_retry(self, msg: MessageExt, reconsume_time: int | None = None) -> None:
        """A copy of ``msg`` sent to ``%RETRY%<group>`` (delay level 3 + retries), its
        ``RECONSUME_TIME`` one more than the message's (Java's fallback of a failed
        send-back), or ``reconsume_time`` (the orderly consumer's ``sendMessageBack``)."""
        from .producer import Producer

        if self._retry_producer is None:
            producer = Producer("CLIENT_INNER_PRODUCER", instance=self.instance)
            assert self._nursery is not None
            await self._nursery.start(producer.run)
            self._retry_producer = producer
        new = Message(subs.retry_topic(self.group), msg.body, msg.flag, dict(msg.properties))
        props = new.properties
        if not props.get(PROPERTY_ORIGIN_MESSAGE_ID, "").strip():
            props[PROPERTY_ORIGIN_MESSAGE_ID] = msg.client_msg_id
        props[PROPERTY_RETRY_TOPIC] = self._wire_topic(msg.topic)
        props[PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times + 1 if reconsume_time is None else reconsume_time)
        props[PROPERTY_MAX_RECONSUME_TIMES] = str(self._max_reconsume_times())
        props.pop(PROPERTY_TRANSACTION_PREPARED, None)
        new.delay_time_level = 3 + msg.reconsume_times
        await self._retry_producer.send(new)

    # -- offsets and locks --------------------------------------------------------------

    async def _clean_expired_loop(self) -> None:
        """Every ``consume_timeout_s``, :meth:`_clean_expired` on each owned queue."""
        while not self._closing:
            await trio.sleep(self.options.consume_timeout_s)
            for o in list(self._owned.values()):
                if self._closing:
                    return
                if not o.pq.dropped:
                    await self._clean_expired(o)

    async def _clean_expired(self, o: _Owned) -> None:
        """Java's ``ProcessQueue.cleanExpiredMsg``: up to 16 times, while the first cached
        message's callback started more than ``consume_timeout_s`` ago, send it back
        (delay level 3) and forget it, so the queue's offset can pass it. The callback
        itself runs on (as in Java); its result, when it comes, is handled as usual."""
        pq, store = o.pq, self._store
        assert store is not None
        limit_ms = self.options.consume_timeout_s * 1000
        for _ in range(16):
            msg = pq.first_cached()
            started = msg.properties.get(PROPERTY_CONSUME_START_TIMESTAMP) if msg is not None else None
            if msg is None or not started or time.time() * 1000 - int(started) <= limit_ms:
                return
            log.warning("consume of %s (queue %s offset %d) has run over %.0f s; sending it back",
                        msg.msg_id, o.mq, msg.queue_offset, self.options.consume_timeout_s)
            if not await self._send_back(o.mq, msg, delay_level=3):
                return  # kept: the next round tries again (Java: the exception is logged)
            if pq.first_cached() is msg:
                offset = pq.remove([msg])
                if offset >= 0:
                    store.update(o.mq, offset, increase_only=True)

    async def _persist_loop(self) -> None:
        assert self._store is not None
        interval = self.options.persist_interval_s or self.instance.config.persist_offset_interval
        while not self._closing:
            await trio.sleep(interval)
            if not self._closing:
                await self._store.persist_all(self._owned)

    async def commit(self) -> None:
        """Commit the consumed offsets now (else every ``persist_interval_s``)."""
        assert self._store is not None
        await self._store.persist_all(self._owned)

    def _by_broker(self, mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
        out: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            out.setdefault(mq.broker_name, []).append(mq)
        return out

    async def _lock(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ at each queue's broker; the queues locked for us."""
        inst = self.instance
        locked: set[MessageQueue] = set()
        for broker, group_mqs in self._by_broker(mqs).items():
            addr = inst.master_addr(broker)
            if addr is None:
                continue
            body = LockBatchRequestBody(self.group, inst.client_id, group_mqs)
            try:
                locked.update(await inst.api.lock_batch(addr, body))
            except Exception as exc:  # noqa: BLE001 - ClientError or an answer that does not decode
                log.info("lock of %d queues at %s failed: %s", len(group_mqs), broker, exc)
        return locked

    async def _unlock(self, mqs: list[MessageQueue], *, oneway: bool) -> None:
        inst = self.instance
        for broker, group_mqs in self._by_broker(mqs).items():
            addr = inst.master_addr(broker)
            if addr is None:
                continue
            try:
                await inst.api.unlock_batch(addr, UnlockBatchRequestBody(self.group, inst.client_id, group_mqs), oneway=oneway)
            except Exception as exc:  # noqa: BLE001
                log.info("unlock at %s failed: %s", broker, exc)

    async def _lock_loop(self) -> None:
        """``lockMQPeriodically``: relock every owned queue; a refusal unlocks it here."""
        while not self._closing:
            await trio.sleep(self.options.lock_interval_s)
            owned = dict(self._owned)
            locked = await self._lock(list(owned))
            now = trio.current_time()
            for mq, o in owned.items():
                o.pq.set_locked(mq in locked, now)
