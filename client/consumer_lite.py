"""PullConsumer: the caller drives the loop with :meth:`PullConsumer.poll`.

Java: ``DefaultLitePullConsumer`` / ``DefaultLitePullConsumerImpl``. Either
:meth:`~PullConsumer.subscribe` (the group's queues are split among its clients by the
same rebalance as the push consumer: allocate-averagely, at start, on
NOTIFY_CONSUMER_IDS_CHANGED and every 20 s) or :meth:`~PullConsumer.assign` (exactly
these queues, no group balancing). Either way a background long-polling pull loop per
queue fills a cache bounded per queue (``pull_threshold_for_queue`` messages) and in all
(``pull_threshold_for_all``); :meth:`~PullConsumer.poll` hands out one pull's messages
(in each queue's order) and counts them consumed; :meth:`~PullConsumer.commit` sends
the consumed offsets to the broker (``commitSync``), and with ``auto_commit`` (default)
``poll`` does so every ``auto_commit_interval_s`` and :meth:`~PullConsumer.aclose` at
the end. :meth:`~PullConsumer.seek` moves a queue's next offset (what is cached for it
is dropped). Broadcasting keeps offsets in a local file, as the push consumer.
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Union

import attrs
import trio

from trocket.codecs.bodies.client import ConsumerData, ConsumeType, MessageModel, MessageQueue, SubscriptionData
from trocket.codecs.bodies.running import ConsumerRunningInfo
from trocket.codecs.namespace import without_namespace

from . import subscription as subs
from .config import ClientConfig
from .consumer_base import ConsumerBase, ConsumerOptions, InstanceOffsets, start_errors_unwrapped
from .consumer_pull import process_pull_result, pull_header
from .errors import ClientError, ClientStateError
from .instance import ClientInstance
from .message import MessageExt, PullStatus
from .process_queue import ProcessQueue
from .route import subscribe_queues
from .trace import TraceDispatcher, trace_pulled

__all__ = ["PullConsumer", "PullConsumerOptions", "QueueChangeListener"]

log = logging.getLogger(__name__)

#: ``TopicMessageQueueChangeListener.onChanged(topic, queues)``
QueueChangeListener = Callable[[str, set[MessageQueue]], Union[None, Awaitable[None]]]

_DELAY_ON_ERROR_S = 3.0
_DELAY_ON_FLOW_CONTROL_S = 0.05
#: a paused queue looks again this often (Java: PULL_TIME_DELAY_MILLS_WHEN_PAUSE, 1 s)
_DELAY_WHEN_PAUSED_S = 1.0


@attrs.define(slots=True, kw_only=True)
class PullConsumerOptions(ConsumerOptions):
    """``DefaultLitePullConsumer``'s knobs (times in seconds); the common ones are
    :class:`~trocket.client.consumer_base.ConsumerOptions`'."""

    auto_commit: bool = True
    auto_commit_interval_s: float = 5.0
    pull_batch_size: int = 10
    pull_threshold_for_all: int = 10_000
    broker_suspend_s: float = 20.0
    poll_timeout_s: float = 5.0
    #: how often the queues of topics with a change listener are fetched again and
    #: compared (``topicMetadataCheckIntervalMillis``, 30 s; the first after 10 s)
    topic_metadata_check_interval_s: float = 30.0


@attrs.define(slots=True, eq=False)
class _Session:
    """One queue from the moment it is taken (or sought) until it is dropped."""

    mq: MessageQueue
    pq: ProcessQueue
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)


class PullConsumer(ConsumerBase):
    """``async with PullConsumer(group, namesrv) as c: c.subscribe(...); await c.poll()``."""

    def __init__(
        self,
        group: str,
        namesrv: str | list[str] | None = None,
        *,
        instance: ClientInstance | None = None,
        client_config: ClientConfig | None = None,
        options: PullConsumerOptions | None = None,
        **option_kw: Any,
    ) -> None:
        super().__init__(group, namesrv, instance, client_config)
        if options is not None and option_kw:
            raise TypeError("give either options= or option keywords, not both")
        self.options = options or PullConsumerOptions(**option_kw)
        self._set_namespace(self.options.namespace)
        self._subs: dict[str, SubscriptionData] = {}
        self._assigned: set[MessageQueue] | None = None  # assign mode
        self._sessions: dict[MessageQueue, _Session] = {}
        self._ready: deque[tuple[_Session, list[MessageExt]]] = deque()
        self._cached = 0
        self._lot = trio.lowlevel.ParkingLot()
        self._space = trio.lowlevel.ParkingLot()
        self._lock = trio.Lock()
        self._running = False
        self._last_commit = 0.0
        self._paused: set[MessageQueue] = set()
        self._unpaused = trio.lowlevel.ParkingLot()
        #: ``topicMessageQueueChangeListenerMap`` and ``messageQueuesForTopic``
        self._queue_listeners: dict[str, QueueChangeListener] = {}
        self._known_queues: dict[str, set[MessageQueue] | None] = {}
        #: the trace dispatcher while ``trace`` is on and the consumer runs
        self.tracer: TraceDispatcher | None = None

    # -- what to consume ----------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | subs.MessageSelector = "*") -> None:
        """Consume ``topic`` (``"*"``, ``"TagA || TagB"`` or a
        :class:`~.subscription.MessageSelector`, e.g. ``MessageSelector.by_sql("a > 5")``)
        with the group's rebalance."""
        if self._assigned is not None:
            raise ClientStateError("subscribe and assign are exclusive (as DefaultLitePullConsumer)")
        topic = self._wire_topic(topic)
        self._subs[topic] = subs.build(topic, expression)
        if self._running:
            self.instance.heartbeat_now()
            assert self._rebalancer is not None
            self._rebalancer.wakeup()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``: its queues are dropped now, with what is cached and
        not polled (Java's ``unsubscribe``; offsets consumed since the last commit are not
        committed)."""
        topic = self._wire_topic(topic)
        if self._subs.pop(topic, None) is None:
            return
        if self._assigned is not None:
            self._assigned = {mq for mq in self._assigned if mq.topic != topic}
        for mq, s in list(self._sessions.items()):
            if mq.topic == topic:
                self._drop(s)
        if self._running:
            self.instance.heartbeat_now()

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling ``queues`` until :meth:`resume` (what is cached is still polled);
        kept across seeks and rebalances (Java's ``pause``)."""
        self._paused.update(map(self._wire_mq, queues))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """Pull ``queues`` again after :meth:`pause`."""
        self._paused.difference_update(map(self._wire_mq, queues))
        self._unpaused.unpark_all()

    def is_paused(self, mq: MessageQueue) -> bool:
        return self._wire_mq(mq) in self._paused

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """``offsetForTimestamp``: the broker's offset of ``mq`` for a store time
        (SEARCH_OFFSET_BY_TIMESTAMP); :meth:`seek` to it to consume from then."""
        return await InstanceOffsets(self.instance).search_offset(self._wire_mq(mq), timestamp_ms)

    def register_topic_message_queue_change_listener(self, topic: str, listener: QueueChangeListener) -> None:
        """``listener(topic, queues)`` is called when ``topic``'s readable queues change
        (Java's ``TopicMessageQueueChangeListener``): they are fetched from the name
        server at start (or now, when running) and again every
        ``topic_metadata_check_interval_s``, and a set unlike the last one is reported.
        A listener registered again for a topic replaces the earlier one. It runs in the
        trio thread (an async one is awaited) and must not block."""
        if not topic or listener is None:
            raise ValueError("a topic and a listener are needed")
        self._queue_listeners[self._wire_topic(topic)] = listener
        if self._running:
            assert self._nursery is not None
            self._nursery.start_soon(self._fetch_known_queues, self._wire_topic(topic))

    async def _fetch_queues_now(self, topic: str) -> set[MessageQueue] | None:
        """``fetchMessageQueues``: the topic's readable queues from a fresh route
        (None when the name servers do not know it)."""
        route = await self.instance.update_route(topic)
        return None if route is None else set(subscribe_queues(topic, route))

    async def _fetch_known_queues(self, topic: str) -> None:
        try:
            self._known_queues[topic] = await self._fetch_queues_now(topic)
        except ClientError as exc:
            log.info("queues of %s not fetched: %s", topic, exc)

    async def _queue_change_loop(self) -> None:
        """``fetchTopicMessageQueuesAndCompare``, 10 s after start and every interval."""
        interval = self.options.topic_metadata_check_interval_s
        await trio.sleep(min(10.0, interval))
        while True:
            for topic, listener in list(self._queue_listeners.items()):
                try:
                    new = await self._fetch_queues_now(topic)
                except ClientError as exc:
                    log.info("queues of %s not fetched: %s", topic, exc)
                    continue
                old = self._known_queues.get(topic)
                if new is not None and old is not None and new and new == old:  # Java's isSetEqual
                    continue
                if new is None and old is None:
                    continue
                self._known_queues[topic] = new
                try:
                    result = listener(without_namespace(topic, self.namespace),
                                      {self._user_mq(mq) for mq in new or ()})
                    if inspect.isawaitable(result):
                        await result
                except Exception:  # noqa: BLE001 - the user's listener must not end the loop
                    log.exception("queue change listener of %s failed", topic)
            await trio.sleep(interval)

    async def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly ``queues`` (no group balancing)."""
        if self._subs and self._assigned is None:
            raise ClientStateError("subscribe and assign are exclusive (as DefaultLitePullConsumer)")
        self._assigned = set(map(self._wire_mq, queues))
        for mq in self._assigned:
            if mq.topic not in self._subs:
                self._subs[mq.topic] = subs.build(mq.topic, "*")
        if self._running:
            async with self._lock:
                await self._set_queues(None, self._assigned)

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """``fetchMessageQueues``: the topic's readable queues."""
        return sorted(map(self._user_mq, await self.instance.subscribe_queues(self._wire_topic(topic))))

    def assignment(self) -> list[MessageQueue]:
        return sorted(map(self._user_mq, self._sessions))

    # -- ConsumerHandle -----------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=self.options.message_model,
            consume_from_where=self.options.consume_from.value,
            subscriptions=list(self._subs.values()),
        )

    def subscribed_topics(self) -> Iterable[str]:
        return list(self._subs)

    # -- lifecycle ----------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        if self._running or self._closing:
            raise ClientStateError("a PullConsumer starts once")
        opts = self.options
        with start_errors_unwrapped():
            async with trio.open_nursery() as nursery:
                await self._start_common(
                    nursery,
                    model=opts.message_model,
                    offset_dir=opts.offset_dir,
                    consume_timestamp=opts.consume_timestamp,
                    topics=lambda: [] if self._assigned is not None else list(self._subs),
                    apply=self._apply_allocation,
                    rebalance_interval=opts.rebalance_interval_s,
                    strategy=opts.allocate_strategy,
                )
                assert self._rebalancer is not None
                if opts.trace:
                    self.tracer = await nursery.start(TraceDispatcher(self.instance, self.group, opts.trace_topic).run)
                self._running = True
                self._last_commit = trio.current_time()
                if self._assigned is not None:
                    await self._set_queues(None, self._assigned)
                elif self._subs:
                    await self._rebalancer.rebalance_once()
                for topic in list(self._queue_listeners):
                    await self._fetch_known_queues(topic)
                nursery.start_soon(self._rebalancer.run, False)
                nursery.start_soon(self._queue_change_loop)
                task_status.started(self)
                await trio.sleep_forever()

    async def aclose(self) -> None:
        """Stop pulling; commit (with ``auto_commit``); the traces queued sent; unregister; close."""
        if self._closing or not self._running:
            return
        self._closing = True
        for s in self._sessions.values():
            s.scope.cancel()
        self._lot.unpark_all()
        await self._finish(commit=self.options.auto_commit, extra=self._flush_traces)
        self._running = False

    async def _flush_traces(self) -> None:
        if self.tracer is not None:
            await self.tracer.flush()

    def _owned_queues(self) -> list[MessageQueue]:
        return list(self._sessions)

    # -- the broker's requests ------------------------------------------------------------

    async def running_info(self) -> bytes:
        """GET_CONSUMER_RUNNING_INFO, as ``DefaultLitePullConsumerImpl.consumerRunningInfo``:
        the options as properties and the subscriptions (Java's lite consumer lists no
        queues). CONSUME_MESSAGE_DIRECTLY stays unanswered (a SYSTEM_ERROR): a lite
        consumer has no listener to give the message to (Java's fails too)."""
        props = self._running_properties(self.options, ConsumeType.CONSUME_ACTIVELY)
        return ConsumerRunningInfo(properties=props, subscriptions=list(self._subs.values())).encode()

    # -- queues -------------------------------------------------------------------------

    async def _apply_allocation(self, topic: str, allocated: set[MessageQueue]) -> None:
        async with self._lock:
            if self._assigned is None and not self._closing:
                # a rebalance that raced an unsubscribe takes nothing of the topic
                await self._set_queues(topic, allocated if topic in self._subs else set())

    async def _set_queues(self, topic: str | None, wanted: set[MessageQueue]) -> None:
        """Drop sessions (of ``topic``, or all) not in ``wanted``; start the new ones."""
        assert self._store is not None
        for mq, s in list(self._sessions.items()):
            if (topic is None or mq.topic == topic) and mq not in wanted:
                self._drop(s)
                try:
                    await self._store.persist(mq)
                except ClientError as exc:
                    log.warning("offset of %s not committed when giving it up: %s", mq, exc)
                self._store.remove(mq)
        for mq in sorted(wanted):
            if mq in self._sessions:
                continue
            try:
                offset = await self.start_offset_of(mq, self.options.consume_from)
            except ClientError as exc:
                log.warning("start offset of %s unknown (%s); retried at the next rebalance", mq, exc)
                continue
            self._start_session(mq, offset)

    def _start_session(self, mq: MessageQueue, offset: int) -> None:
        assert self._store is not None and self._nursery is not None
        self._store.update(mq, offset)
        s = _Session(mq, ProcessQueue())
        self._sessions[mq] = s
        self._nursery.start_soon(self._pull_loop, s, offset)

    def _drop(self, s: _Session) -> None:
        s.pq.dropped = True
        s.scope.cancel()
        if self._sessions.get(s.mq) is s:
            del self._sessions[s.mq]
        self._cached -= s.pq.msg_count
        s.pq.clear()
        self._space.unpark_all()

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """The next :meth:`poll` of ``mq`` starts at ``offset`` (what was cached is dropped)."""
        mq = self._wire_mq(mq)
        async with self._lock:
            s = self._sessions.get(mq)
            if s is None:
                raise ClientStateError(f"{mq} is not assigned to this consumer; seek an assigned queue")
            self._drop(s)
            self._start_session(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await InstanceOffsets(self.instance).min_offset(self._wire_mq(mq)))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await InstanceOffsets(self.instance).max_offset(self._wire_mq(mq)))

    # -- pulling ------------------------------------------------------------------------

    async def _pull_loop(self, s: _Session, offset: int) -> None:
        opts = self.options
        mq, pq = s.mq, s.pq
        sub = self._subs.get(mq.topic)
        if sub is None:  # unsubscribed before this task began
            return
        namespace = self.namespace
        with s.scope:
            while not pq.dropped:
                if mq in self._paused:
                    with trio.move_on_after(_DELAY_WHEN_PAUSED_S):
                        await self._unpaused.park()
                    continue
                if pq.msg_count > opts.pull_threshold_for_queue or self._cached > opts.pull_threshold_for_all:
                    with trio.move_on_after(_DELAY_ON_FLOW_CONTROL_S * 20):
                        await self._space.park()
                    continue
                header = pull_header(self.group, mq, offset, sub, max_nums=opts.pull_batch_size,
                                     suspend_ms=int(opts.broker_suspend_s * 1000))
                result = await self._pull(mq, header, opts.pull_timeout_s)
                if result is None:
                    await trio.sleep(_DELAY_ON_ERROR_S)
                    continue
                if pq.dropped:
                    return
                if result.status is PullStatus.OFFSET_ILLEGAL:
                    log.warning("pull offset %d of %s is illegal; moving to %d", offset, mq, result.next_begin_offset)
                offset = result.next_begin_offset
                msgs = process_pull_result(result, sub).messages if result.status is PullStatus.FOUND else []
                if msgs and self.tracer is not None:  # Java's hook in pullSyncImpl, names without the namespace
                    trace_pulled(self.tracer, without_namespace(self.group), msgs)
                if namespace:  # the user sees the topic without it
                    for msg in msgs:
                        msg.topic = without_namespace(msg.topic, namespace)
                added = pq.put(msgs) if msgs else 0
                if added:
                    self._cached += added
                    self._ready.append((s, pq.take(added)))
                    self._lot.unpark_all()
                elif pq.msg_count == 0 and result.status is not PullStatus.OFFSET_ILLEGAL:
                    # nothing (matching) up to here and nothing unpolled: consumed up to
                    # here (the push consumer's correctTagsOffset; Java's lite leaves it)
                    assert self._store is not None
                    self._store.update(mq, offset, increase_only=True)

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """The messages of one pull (one queue, in order), waiting up to ``timeout``
        (``poll_timeout_s``) for some; ``[]`` when none came."""
        if not self._running:
            raise ClientStateError("the consumer is not running (use `async with`)")
        if self.options.auto_commit and trio.current_time() - self._last_commit >= self.options.auto_commit_interval_s:
            await self.commit()
        with trio.move_on_after(self.options.poll_timeout_s if timeout is None else timeout):
            while True:
                while self._ready:
                    s, msgs = self._ready.popleft()
                    if s.pq.dropped:
                        continue
                    offset = s.pq.remove(msgs)
                    self._cached -= len(msgs)
                    self._space.unpark_all()
                    assert self._store is not None
                    if offset >= 0:
                        self._store.update(s.mq, offset)
                    return msgs
                if self._closing:
                    return []
                await self._lot.park()
        return []

    async def commit(self) -> None:
        """``commitSync``: send every owned queue's consumed offset to the broker (or the
        local file when broadcasting)."""
        assert self._store is not None
        self._last_commit = trio.current_time()
        await self._store.persist_all(list(self._sessions))

    async def committed(self, mq: MessageQueue) -> int:
        """The offset the group has stored for ``mq`` (-1: none)."""
        assert self._store is not None
        return await self._store.read_store(self._wire_mq(mq))
