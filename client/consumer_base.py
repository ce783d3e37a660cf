"""What push and lite-pull consumers share: consume results, where a new queue starts,
the user's callback (async or plain), retry-topic bookkeeping, and
:class:`ConsumerBase` (instance, handle methods, offset store, rebalancer, lifecycle).

Java: ``ConsumeConcurrentlyStatus`` / ``ConsumeOrderlyStatus`` (one enum here),
``ConsumeFromWhere`` + ``RebalancePushImpl.computePullFromWhere``,
``ConsumeMessageConcurrentlyService.resetRetryAndNamespace``.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, Union

import contextlib
from collections.abc import Iterator

import attrs
import trio

from trocket.codecs.bodies.client import ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue
from trocket.codecs.bodies.running import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
)
from trocket.codecs.message.message import MessageExt
from trocket.codecs.message.properties import PROPERTY_CONSUME_START_TIMESTAMP, PROPERTY_RETRY_TOPIC
from trocket.codecs.names import RETRY_GROUP_TOPIC_PREFIX, validate_group
from trocket.codecs.namespace import without_namespace, wrap_namespace
from trocket.remoting import ServiceContextManager

from .config import ClientConfig
from .errors import BrokerResponseError, ClientConnectError, ClientError, ClientStateError
from .instance import ClientInstance
from .message import PullResult
from .consumer_pull import FLAG_COMMIT_OFFSET
from .offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from .rebalance import Rebalancer
from .rebalance_strategy import AllocateAveragely, AllocateStrategy
from .route import MASTER_ID

__all__ = [
    "ConsumeResult",
    "ConsumeFrom",
    "Listener",
    "parse_consume_from",
    "make_invoker",
    "listener_caller",
    "takes_context",
    "ConsumeContext",
    "ACK_ALL",
    "reset_retry_topic",
    "start_offset",
    "OffsetCalls",
    "InstanceOffsets",
    "consumer_ids",
    "parse_timestamp",
    "ConsumerBase",
    "ConsumerOptions",
]

log = logging.getLogger(__name__)


class ConsumeResult(enum.Enum):
    """What a callback answers. ``None`` (returning nothing) counts as SUCCESS; an
    exception as RECONSUME_LATER. For an orderly consumer RECONSUME_LATER means
    ``SUSPEND_CURRENT_QUEUE_A_MOMENT``: the same message again after a pause."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    #: orderly only (``ConsumeOrderlyStatus.COMMIT`` / ``ROLLBACK``): with the context's
    #: ``auto_commit`` off, COMMIT commits every message consumed since the last commit
    #: and ROLLBACK consumes them all again after the suspend time; with it on (the
    #: default) both are taken as SUCCESS, as Java's (which warns)
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"


class ConsumeFrom(enum.Enum):
    """Where a queue the group has no offset for starts (``ConsumeFromWhere``)."""

    LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    TIMESTAMP = ConsumeFromWhere.CONSUME_FROM_TIMESTAMP


def parse_consume_from(value: ConsumeFrom | str) -> ConsumeFrom:
    if isinstance(value, ConsumeFrom):
        return value
    try:
        return ConsumeFrom[value.upper()]
    except KeyError:
        raise ValueError(f"consume_from must be one of last, first, timestamp; not {value!r}") from None


@attrs.define(slots=True, kw_only=True)
class ConsumerOptions:
    """Knobs both consumers have (times in seconds); each consumer's options class adds
    its own and sets Java's defaults."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from: ConsumeFrom = attrs.field(default=ConsumeFrom.LAST, converter=parse_consume_from)
    #: for ConsumeFrom.TIMESTAMP: a datetime, epoch seconds or ``yyyyMMddHHmmss``; default half an hour ago
    consume_timestamp: Any = None
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    broker_suspend_s: float = 15.0
    #: a pull's call timeout (``CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND``)
    pull_timeout_s: float = 30.0
    rebalance_interval_s: float = 20.0
    #: broadcasting: the local offset files' root (default ``~/.trocket_offsets``)
    offset_dir: str | None = None
    #: ``namespace`` (Java's ``NamespaceUtil``): the group and topics go on the wire as
    #: ``<namespace>%<name>``; what the consumer hands back names them as given
    namespace: str | None = None
    #: message trace (``enableMsgTrace``): SubBefore / SubAfter records in ``trace_topic``
    #: (``customizedTraceTopic``), in Java's format, written in batches (:mod:`.trace`):
    #: per callback (push), per pull's found messages (lite pull, as Java's)
    trace: bool = False
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    #: clustering: how the group's clients split the queues
    #: (``allocateMessageQueueStrategy``; :mod:`.rebalance_strategy`)
    allocate_strategy: AllocateStrategy = attrs.field(factory=AllocateAveragely)

    def __attrs_post_init__(self) -> None:
        for name in ("pull_batch_size", "pull_threshold_for_queue"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")


#: the ack index meaning "every message of the batch" (Java's ``Integer.MAX_VALUE``)
ACK_ALL = 2**31 - 1


@attrs.define(slots=True, kw_only=True)
class ConsumeContext:
    """What a two-argument listener, ``listener(msgs, context)``, is given besides the
    batch, and may set: Java's ``ConsumeConcurrentlyContext`` / ``ConsumeOrderlyContext``."""

    #: the queue the batch comes from
    mq: MessageQueue
    #: concurrent consumption, on SUCCESS: messages ``[0, ack_index]`` are consumed, the
    #: later ones failed (sent back as with RECONSUME_LATER); default: all consumed
    ack_index: int = ACK_ALL
    #: concurrent consumption: the delay level failed messages are sent back with
    #: (``delayLevelWhenNextConsume``): 0 the broker decides (3 + reconsume times),
    #: -1 straight to the DLQ, N > 0 that level of the broker's ``messageDelayLevel``
    delay_level_when_next_consume: int = 0
    #: orderly consumption, on RECONSUME_LATER: the pause before the queue is consumed
    #: again (``suspendCurrentQueueTimeMillis``, kept within 0.01-30 s as Java);
    #: None: the consumer's ``suspend_orderly_s``
    suspend_current_queue_time_s: float | None = None
    #: orderly consumption (``ConsumeOrderlyContext.autoCommit``, set per call): True
    #: commits the batch on SUCCESS; False leaves the offset until the listener answers
    #: COMMIT (ROLLBACK: everything since the last commit is consumed again)
    auto_commit: bool = True


#: a one-message listener, ``listener(msg)``, or a batch listener, ``listener(msgs, context)``
Listener = Union[
    Callable[[MessageExt], Union[ConsumeResult, None, Awaitable[Union[ConsumeResult, None]]]],
    Callable[[list[MessageExt], ConsumeContext], Union[ConsumeResult, None, Awaitable[Union[ConsumeResult, None]]]],
]
#: ``await invoke(msgs, context)``: a listener's result for a batch, never raising
Invoker = Callable[[list[MessageExt], "ConsumeContext | None"], Awaitable[ConsumeResult]]


@contextlib.contextmanager
def start_errors_unwrapped() -> Iterator[None]:
    """Around a consumer's nursery in ``run``: a single :class:`~.errors.ClientError`
    (a start refused by a broker, such as a SQL92 expression it does not accept) leaves
    as itself, not wrapped in the nursery's ExceptionGroup, so ``async with consumer``
    raises what the caller can catch."""
    try:
        yield
    except BaseExceptionGroup as group:
        match, rest = group.split(ClientError)
        if match is not None and rest is None:
            leaves = list(_leaves(match))
            if len(leaves) == 1:
                raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


def takes_context(listener: Callable[..., Any]) -> bool:
    """True for a batch listener: one whose call needs two positional arguments
    (``(msgs, context)``); a listener of one required argument gets one message."""
    try:
        params = inspect.signature(listener).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: one message
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.kind in positional and p.default is inspect.Parameter.empty]
    return len(required) >= 2 or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


def _is_async(listener: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(getattr(listener, "__call__", None))


def listener_caller(listener: Listener) -> Callable[[list[MessageExt], "ConsumeContext | None"], Awaitable[Any]]:
    """``await call(msgs, context)``: the listener's own answer (exceptions raised):
    async listeners in this task, plain ones in a worker thread; a one-message listener
    gets ``msgs[0]`` (its batches are of one), a batch listener the list and the context."""
    is_async = _is_async(listener)
    batch = takes_context(listener)

    async def call(msgs: list[MessageExt], context: ConsumeContext | None) -> Any:
        args: tuple[Any, ...] = (msgs, context) if batch else (msgs[0],)
        if is_async:
            return await listener(*args)  # type: ignore[misc,operator]
        return await trio.to_thread.run_sync(functools.partial(listener, *args))  # type: ignore[arg-type]

    return call


def make_invoker(listener: Listener, limiter: trio.CapacityLimiter, *, orderly: bool = False) -> Invoker:
    """``await invoke(msgs, context)`` -> a :class:`ConsumeResult` for the batch, never
    raising (but for cancellation): the listener called as :func:`listener_caller` does
    (inlined: this runs per message), holding a token of ``limiter`` (the bound on
    callbacks in flight); an exception is RECONSUME_LATER. COMMIT and ROLLBACK are
    orderly answers: a concurrent listener's is RECONSUME_LATER, with a warning."""
    is_async = _is_async(listener)
    batch = takes_context(listener)

    async def invoke(msgs: list[MessageExt], context: ConsumeContext | None) -> ConsumeResult:
        try:
            async with limiter:
                if batch:
                    args: tuple[Any, ...] = (msgs, context)
                else:
                    args = (msgs[0],)
                if is_async:
                    result: Any = await listener(*args)  # type: ignore[misc,operator]
                else:
                    result = await trio.to_thread.run_sync(functools.partial(listener, *args))  # type: ignore[arg-type]
        except trio.Cancelled:
            raise
        except Exception:  # noqa: BLE001 - the user's failure is a RECONSUME_LATER
            first = msgs[0]
            log.warning("consume callback failed on %s (queue %d offset %d, %d messages); reconsume later",
                        first.topic, first.queue_id, first.queue_offset, len(msgs), exc_info=True)
            return ConsumeResult.RECONSUME_LATER
        if result is None or result is ConsumeResult.SUCCESS:
            return ConsumeResult.SUCCESS
        if result is ConsumeResult.RECONSUME_LATER:
            return result
        if result is ConsumeResult.COMMIT or result is ConsumeResult.ROLLBACK:
            if orderly:
                return result
            log.warning("consume callback returned %s, an orderly consumer's answer; reconsume later", result.name)
            return ConsumeResult.RECONSUME_LATER
        log.warning("consume callback returned %r, neither a ConsumeResult nor None; reconsume later", result)
        return ConsumeResult.RECONSUME_LATER

    return invoke


def reset_retry_topic(msg: MessageExt, group: str, now_ms: int, namespace: str | None = None) -> None:
    """``resetRetryAndNamespace``: a message pulled from ``%RETRY%<group>`` shows its real
    topic (``RETRY_TOPIC``), and the topic without the consumer's ``namespace``; every
    message gets ``CONSUME_START_TIME``."""
    real = msg.properties.get(PROPERTY_RETRY_TOPIC)
    if real is not None and msg.topic == RETRY_GROUP_TOPIC_PREFIX + group:
        msg.topic = real
    if namespace:
        msg.topic = without_namespace(msg.topic, namespace)
    msg.properties[PROPERTY_CONSUME_START_TIMESTAMP] = str(now_ms)


class OffsetCalls(Protocol):
    """The broker calls :func:`start_offset` needs (bound to a queue's broker)."""

    async def max_offset(self, mq: MessageQueue) -> int: ...
    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int: ...


class InstanceOffsets:
    """Offset calls through a :class:`~trocket.client.instance.ClientInstance`, at the
    master of each queue's broker: :class:`OffsetCalls` and the offset store's
    :class:`~trocket.client.offset_store.BrokerOffsetCalls`."""

    def __init__(self, inst: ClientInstance) -> None:
        self.inst = inst

    async def _addr(self, mq: MessageQueue) -> str:
        """The master (``findBrokerAddressInPublish``, as ``MQAdminImpl``'s offset calls)."""
        addr = self.inst.master_addr(mq.broker_name)
        if addr is None:
            await self.inst.update_route(mq.topic)
            addr = self.inst.master_addr(mq.broker_name)
        if addr is None:
            raise ClientError(f"no address for broker {mq.broker_name}")
        return addr

    async def _offset_addr(self, mq: MessageQueue) -> str:
        """The master, else (route fetched again) any broker of the name: a slave keeps
        the group's offsets too (``RemoteBrokerOffsetStore``: ``findBrokerAddressInSubscribe``
        with the master's id, only-this first, then not)."""
        found = self.inst.find_in_subscribe(mq.broker_name, MASTER_ID, only_this=True)
        if found is None:
            await self.inst.update_route(mq.topic)
            found = self.inst.find_in_subscribe(mq.broker_name, MASTER_ID)
        if found is None:
            raise ClientError(f"no address for broker {mq.broker_name}")
        return found[0]

    async def _at_offset_broker(self, mq: MessageQueue, call: Callable[[str], Awaitable[Any]]) -> Any:
        """``call(addr)`` at :meth:`_offset_addr`; when that broker cannot be reached, the
        route fetched again and, if it names another broker now (the master gone, its
        slave left), once more there."""
        addr = await self._offset_addr(mq)
        try:
            return await call(addr)
        except ClientConnectError:
            await self.inst.update_route(mq.topic)
            again = await self._offset_addr(mq)
            if again == addr:
                raise
            return await call(again)

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        return await self._at_offset_broker(mq, lambda addr: self.inst.api.query_consumer_offset(addr, group, mq))

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        await self._at_offset_broker(mq, lambda addr: self.inst.api.update_consumer_offset(addr, group, mq, offset))

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.inst.api.get_max_offset(await self._addr(mq), mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.inst.api.get_min_offset(await self._addr(mq), mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.inst.api.search_offset(await self._addr(mq), mq, timestamp_ms)


async def consumer_ids(inst: ClientInstance, group: str, topic: str) -> list[str]:
    """``findConsumerIdList``: the group's client ids, from one broker of ``topic``
    (the next one when a broker fails; the route fetched again when all failed, so a
    dead master the cached route still names costs one retry, not a route poll). When
    the broker does not list this client yet (the topic's broker was unknown at the
    last heartbeat), heartbeat and ask again."""
    try:
        ids = await _consumer_ids_once(inst, group, topic)
    except BrokerResponseError:  # SYSTEM_ERROR "no consumer for this group"
        ids = []
    except ClientError:
        await inst.update_route(topic)
        ids = await _consumer_ids_once(inst, group, topic)
    if inst.client_id not in ids:
        await inst.send_heartbeat()
        ids = await _consumer_ids_once(inst, group, topic)
    return ids


async def _consumer_ids_once(inst: ClientInstance, group: str, topic: str) -> list[str]:
    """Every broker of the name in turn, master first (a slave lists the group too:
    consumers heartbeat to every broker)."""
    route = await inst.route(topic)
    last: Exception | None = None
    for name in sorted(bd.broker_name for bd in route.broker_datas):
        for _broker_id, addr in sorted(inst.brokers.get(name, {}).items()):
            try:
                return await inst.api.get_consumer_list(addr, group)
            except BrokerResponseError:
                raise
            except ClientError as exc:
                last = exc
    if last is not None:
        raise last
    return []


def parse_timestamp(value: str | int | float | _dt.datetime) -> int:
    """A consume timestamp as epoch milliseconds: a datetime, epoch seconds, or Java's
    ``yyyyMMddHHmmss`` text (local time, as ``UtilAll.parseDate``)."""
    if isinstance(value, _dt.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)):
        return int(value * 1000)
    return int(_dt.datetime.strptime(value, "%Y%m%d%H%M%S").timestamp() * 1000)


async def start_offset(
    mq: MessageQueue, stored: int, where: ConsumeFrom, timestamp_ms: int, calls: OffsetCalls
) -> int:
    """``computePullFromWhere``: the group's stored offset when there is one (>= 0),
    else by ``where``. A retry topic starts at 0 (LAST) or its end (TIMESTAMP), as Java."""
    if stored >= 0:
        return stored
    retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
    if where is ConsumeFrom.FIRST:
        return 0
    if where is ConsumeFrom.LAST:
        return 0 if retry else await calls.max_offset(mq)
    if retry:
        return await calls.max_offset(mq)
    return await calls.search_offset(mq, timestamp_ms)


class ConsumerBase(ServiceContextManager):
    """What both consumers share: the instance they run on (their own, or a shared one),
    the ConsumerHandle methods the instance calls, the offset store, the rebalancer;
    ``async with`` comes from :class:`~trocket.remoting.ServiceContextManager`.
    Subclasses define ``run``, ``aclose``, ``consumer_data`` and ``subscribed_topics``."""

    kind = "consumer"

    def __init__(
        self,
        group: str,
        namesrv: str | list[str] | None,
        instance: ClientInstance | None,
        client_config: ClientConfig | None,
    ) -> None:
        validate_group(group)
        #: the group as the brokers see it (in the namespace, once the subclass set its options)
        self.group = group
        self.namespace: str | None = None
        if instance is None and client_config is None and namesrv is None:
            raise ValueError(f"a {type(self).__name__} needs namesrv, client_config or instance")
        self._own_instance = instance is None
        self._instance = instance
        self._client_config = client_config or (ClientConfig(namesrv=namesrv) if namesrv is not None else None)
        self._store: OffsetStore | None = None
        self._rebalancer: Rebalancer | None = None
        self._nursery: trio.Nursery | None = None
        self._closing = False
        self._timestamp_ms = 0
        #: wall clock (epoch ms) the consumer started at (``consumerStartTimestamp``)
        self._start_ms = 0
        #: ``pullFromWhichNodeTable``: the broker id each queue's last pull answer suggested
        self._pull_from_which: dict[MessageQueue, int] = {}

    def _set_namespace(self, namespace: str | None) -> None:
        """Wrap the group in ``namespace`` (Java's ``start``); the subclass calls it once
        its options are set."""
        self.namespace = namespace or None
        self.group = wrap_namespace(self.namespace, self.group)

    def _wire_topic(self, topic: str) -> str:
        return wrap_namespace(self.namespace, topic)

    def _wire_mq(self, mq: MessageQueue) -> MessageQueue:
        """``queueWithNamespace``: a queue the user named, as the brokers know it."""
        if not self.namespace:
            return mq
        return MessageQueue(wrap_namespace(self.namespace, mq.topic), mq.broker_name, mq.queue_id)

    def _user_mq(self, mq: MessageQueue) -> MessageQueue:
        """A queue as the user names it (its topic without the namespace)."""
        if not self.namespace:
            return mq
        return MessageQueue(without_namespace(mq.topic, self.namespace), mq.broker_name, mq.queue_id)

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientStateError(f"the {self.kind} is not started")
        return self._instance

    @property
    def client_id(self) -> str:
        if self._instance is not None:
            return self._instance.client_id
        assert self._client_config is not None
        return self._client_config.client_id

    # -- ConsumerHandle ------------------------------------------------------------------

    def on_route_changed(self, topic: str, queues: list[MessageQueue]) -> None:
        return None  # the next rebalance reads the instance's route

    def on_consumer_ids_changed(self) -> None:
        if self._rebalancer is not None and not self._closing:
            self._rebalancer.wakeup()

    async def running_info(self) -> bytes:
        raise NotImplementedError

    def _running_properties(self, options: Any, consume_type: ConsumeType) -> dict[str, str]:
        """GET_CONSUMER_RUNNING_INFO's properties: Java's ``MixAll.object2Properties`` of
        the consumer (here its options, by name), the start time, and what
        ``MQClientInstance.consumerRunningInfo`` adds (name servers, consume type, version)."""
        props = {name: str(getattr(options, name)) for name in attrs.fields_dict(type(options))}
        props.update({
            "consumerGroup": self.group,
            PROP_CONSUMER_START_TIMESTAMP: str(self._start_ms),
            PROP_NAMESERVER_ADDR: ";".join(self.instance.config.namesrv),
            PROP_CONSUME_TYPE: consume_type.name,
            PROP_CLIENT_VERSION: "V4_9_8",
        })
        return props

    async def consume_directly(self, msg: MessageExt, broker_name: str | None) -> bytes:
        raise NotImplementedError

    async def reset_offset(self, topic: str, timestamp: int, body: bytes) -> None:
        raise NotImplementedError

    def offset_table(self, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the offset store's table, of ``topic`` (all
        when blank). Java answers a lite pull consumer with an empty map; this one gives
        its offsets too."""
        store = self._store
        if store is None:
            return {}
        blank = not topic.strip()
        return {mq: offset for mq, offset in store.table().items() if blank or mq.topic == topic}

    # -- start and stop --------------------------------------------------------------------

    async def _start_common(
        self,
        nursery: trio.Nursery,
        *,
        model: MessageModel,
        offset_dir: str | None,
        consume_timestamp: Any,
        topics: Callable[[], list[str]],
        apply: Callable[[str, set[MessageQueue]], Awaitable[None]],
        rebalance_interval: float,
        strategy: AllocateStrategy,
        truncate_unsubscribed: bool = False,
    ) -> ClientInstance:
        """Start the own instance (if any), the offset store, register, learn the routes
        and heartbeat (so the brokers list this client before the first rebalance)."""
        if self._own_instance:
            assert self._client_config is not None
            self._instance = ClientInstance(self._client_config)
            await nursery.start(self._instance.run)
        inst = self.instance
        self._nursery = nursery
        self._start_ms = int(time.time() * 1000)
        self._timestamp_ms = (
            parse_timestamp(consume_timestamp)
            if consume_timestamp is not None
            else int(time.time() * 1000) - 30 * 60 * 1000  # Java: half an hour ago
        )
        if model is MessageModel.CLUSTERING:
            self._store = RemoteBrokerOffsetStore(self.group, InstanceOffsets(inst))
        else:
            self._store = LocalFileOffsetStore(self.group, inst.client_id, offset_dir)
        await self._store.load()
        inst.register_consumer(self)  # type: ignore[arg-type]
        for topic in topics():
            try:
                await inst.update_route(topic)
            except ClientError as exc:
                log.warning("route of %s not found at start: %s", topic, exc)
        try:
            await self._check_client_config(inst)
        except ClientError:
            inst.consumers.pop(self.group, None)
            raise
        await inst.send_heartbeat()
        self._rebalancer = Rebalancer(
            client_id=inst.client_id,
            model=model,
            topics=topics,
            queues_of=inst.subscribe_queues,
            consumer_ids=lambda topic: consumer_ids(inst, self.group, topic),
            apply=apply,
            interval=rebalance_interval,
            group=self.group,
            strategy=strategy,
            owned_topics=(lambda: {mq.topic for mq in self._owned_queues()}) if truncate_unsubscribed else None,
        )
        return inst

    async def _check_client_config(self, inst: ClientInstance) -> None:
        """``MQClientInstance.checkClientInBroker``: each SQL92 subscription is shown to one
        broker of its topic (CHECK_CLIENT_CONFIG) before the first heartbeat, so a bad
        expression, or a broker without ``enablePropertyFilter``, fails the start with
        the broker's code and remark (:class:`~.errors.BrokerResponseError`)."""
        for sub in self.consumer_data().subscriptions:  # type: ignore[attr-defined]
            if sub.is_tag_type:
                continue
            route = inst.routes.get(sub.topic)
            addr = None
            if route is not None:
                for bd in route.broker_datas:
                    addr = inst.broker_addr(bd.broker_name)
                    if addr is not None:
                        break
            if addr is not None:
                await inst.api.check_client_config(addr, self.group, inst.client_id, sub)

    async def _finish(self, *, commit: bool, extra: Callable[[], Awaitable[None]] | None = None) -> None:
        """Shielded end of a graceful close: commit the owned queues' offsets, ``extra``
        (unlocks), unregister, close the own instance, cancel the nursery."""
        inst = self._instance
        with trio.CancelScope(shield=True):
            if inst is not None and inst.running:
                if commit and self._store is not None:
                    with trio.move_on_after(5):
                        await self._store.persist_all(self._owned_queues())
                if extra is not None:
                    with trio.move_on_after(3):
                        await extra()
                with trio.move_on_after(3):
                    await inst.unregister_consumer(self.group)
                if self._own_instance:
                    with trio.move_on_after(5):
                        await inst.aclose()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    def _owned_queues(self) -> list[MessageQueue]:
        raise NotImplementedError

    async def _pull(self, mq: MessageQueue, header: Any, timeout: float) -> PullResult | None:
        """One PULL_MESSAGE (``pullKernelImpl``) at the broker the last answer for ``mq``
        suggested (the master at first), else another of its name: a slave once the
        master is gone (``findBrokerAddressInSubscribe``; the route fetched again when
        the name is unknown). To a slave without the commit-offset bit, as Java. None
        after any failure (logged; the route is fetched again in the background, so a
        dead master the name server dropped is left at once): the caller waits."""
        inst = self.instance
        try:
            which = self._pull_from_which.get(mq, MASTER_ID)
            found = inst.find_in_subscribe(mq.broker_name, which)
            if found is None:
                await inst.update_route(mq.topic)
                found = inst.find_in_subscribe(mq.broker_name, which)
                if found is None:
                    raise ClientError(f"no address for broker {mq.broker_name}")
            addr, slave = found
            if slave and header.sysFlag & FLAG_COMMIT_OFFSET:
                header = attrs.evolve(header, sysFlag=header.sysFlag & ~FLAG_COMMIT_OFFSET)
            result = await inst.api.pull_message(addr, header, timeout)
        except Exception as exc:  # noqa: BLE001 - any failure: the loop waits and pulls again
            log.info("pull of %s failed: %s", mq, exc)
            inst.refresh_soon(mq.topic)
            return None
        self._pull_from_which[mq] = result.suggest_which_broker_id  # updatePullFromWhichNode
        return result

    async def start_offset_of(self, mq: MessageQueue, consume_from: ConsumeFrom) -> int:
        """Where a newly owned queue starts: the stored offset, else ``consume_from``
        (``removeDirtyOffset`` + ``computePullFromWhere``)."""
        assert self._store is not None
        self._store.remove(mq)
        stored = await self._store.read_store(mq)
        return await start_offset(mq, stored, consume_from, self._timestamp_ms, InstanceOffsets(self.instance))

    def _abort(self) -> None:
        self._closing = True
