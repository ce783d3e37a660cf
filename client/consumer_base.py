"""What push and lite-pull consumers share: consume results, where a new queue starts,
the user's callback (async or plain), and retry-topic bookkeeping.

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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, Union

import trio

from trocket.codecs.bodies.client import ConsumeFromWhere, MessageQueue
from trocket.codecs.message.message import MessageExt
from trocket.codecs.message.properties import PROPERTY_CONSUME_START_TIMESTAMP, PROPERTY_RETRY_TOPIC
from trocket.codecs.names import RETRY_GROUP_TOPIC_PREFIX

from .errors import ClientError

if TYPE_CHECKING:
    from .instance import ClientInstance

__all__ = [
    "ConsumeResult",
    "ConsumeFrom",
    "Listener",
    "parse_consume_from",
    "make_invoker",
    "reset_retry_topic",
    "start_offset",
    "OffsetCalls",
    "InstanceOffsets",
    "consumer_ids",
    "parse_timestamp",
]

log = logging.getLogger(__name__)


class ConsumeResult(enum.Enum):
    """What a callback answers. ``None`` (returning nothing) counts as SUCCESS; an
    exception as RECONSUME_LATER. For an orderly consumer RECONSUME_LATER means
    ``SUSPEND_CURRENT_QUEUE_A_MOMENT``: the same message again after a pause."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


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


Listener = Callable[[MessageExt], Union[ConsumeResult, None, Awaitable[Union[ConsumeResult, None]]]]


def make_invoker(listener: Listener, limiter: trio.CapacityLimiter) -> Callable[[MessageExt], Awaitable[ConsumeResult]]:
    """``await invoke(msg)`` -> a :class:`ConsumeResult`, never raising (but for
    cancellation): async callbacks run in this task, plain ones in a worker thread; both
    hold a token of ``limiter`` (the bound on callbacks in flight)."""
    is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
        getattr(listener, "__call__", None)
    )

    async def invoke(msg: MessageExt) -> ConsumeResult:
        try:
            async with limiter:
                if is_async:
                    result: Any = await listener(msg)  # type: ignore[misc]
                else:
                    result = await trio.to_thread.run_sync(functools.partial(listener, msg))
        except trio.Cancelled:
            raise
        except Exception:  # noqa: BLE001 - the user's failure is a RECONSUME_LATER
            log.warning("consume callback failed on %s (queue %d offset %d); reconsume later",
                        msg.topic, msg.queue_id, msg.queue_offset, exc_info=True)
            return ConsumeResult.RECONSUME_LATER
        if result is None or result is ConsumeResult.SUCCESS:
            return ConsumeResult.SUCCESS
        if result is ConsumeResult.RECONSUME_LATER:
            return result
        log.warning("consume callback returned %r, neither a ConsumeResult nor None; reconsume later", result)
        return ConsumeResult.RECONSUME_LATER

    return invoke


def reset_retry_topic(msg: MessageExt, group: str, now_ms: int) -> None:
    """A message pulled from ``%RETRY%<group>`` shows its real topic (``RETRY_TOPIC``);
    every message gets ``CONSUME_START_TIME``."""
    real = msg.properties.get(PROPERTY_RETRY_TOPIC)
    if real is not None and msg.topic == RETRY_GROUP_TOPIC_PREFIX + group:
        msg.topic = real
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
        addr = self.inst.master_addr(mq.broker_name)
        if addr is None:
            await self.inst.update_route(mq.topic)
            addr = self.inst.master_addr(mq.broker_name)
        if addr is None:
            raise ClientError(f"no address for broker {mq.broker_name}")
        return addr

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        return await self.inst.api.query_consumer_offset(await self._addr(mq), group, mq)

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        await self.inst.api.update_consumer_offset(await self._addr(mq), group, mq, offset)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.inst.api.get_max_offset(await self._addr(mq), mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.inst.api.get_min_offset(await self._addr(mq), mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.inst.api.search_offset(await self._addr(mq), mq, timestamp_ms)


async def consumer_ids(inst: ClientInstance, group: str, topic: str) -> list[str]:
    """``findConsumerIdList``: the group's client ids, from one broker of ``topic``
    (the next one when a broker fails)."""
    route = await inst.route(topic)
    last: Exception | None = None
    for name in sorted(bd.broker_name for bd in route.broker_datas):
        addr = inst.broker_addr(name)
        if addr is None:
            continue
        try:
            return await inst.api.get_consumer_list(addr, group)
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
