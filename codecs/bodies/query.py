"""QUERY_CONSUME_QUEUE's body (RocketMQ 4.9.8's ``QueryConsumeQueueResponseBody`` of
``ConsumeQueueData``), written as its fastjson writes it: properties sorted, nulls left
out. The consume-queue extension fields (``extendDataJson``, ``bitMap``, ``msg``) stay
null here: trocket keeps no ``ConsumeQueueExt``, so ``eval`` is always false.
"""

from __future__ import annotations

from typing import Any

import attrs

from .client import SubscriptionData
from .fastjson import Bean, dumps_bytes
from .route import parse_body, read_bool, read_int, read_list, read_object, read_str

__all__ = ["ConsumeQueueData", "QueryConsumeQueueResponseBody"]


@attrs.define(slots=True, frozen=True)
class ConsumeQueueData:
    """One consume-queue entry: the message's commit-log offset and size, its tags code."""

    physic_offset: int
    physic_size: int
    tags_code: int
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    def to_json(self) -> Bean:
        return Bean(bitMap=self.bit_map, eval=self.eval, extendDataJson=self.extend_data_json, msg=self.msg,
                    physicOffset=self.physic_offset, physicSize=self.physic_size, tagsCode=self.tags_code)

    @classmethod
    def from_json(cls, obj: dict[str, Any], where: str) -> ConsumeQueueData:
        return cls(
            read_int(obj, "physicOffset", where, 0), read_int(obj, "physicSize", where, 0),
            read_int(obj, "tagsCode", where, 0), read_str(obj, "extendDataJson", where, required=False),
            read_str(obj, "bitMap", where, required=False), read_bool(obj, "eval", where),
            read_str(obj, "msg", where, required=False),
        )


@attrs.define(slots=True)
class QueryConsumeQueueResponseBody:
    """A queue's min and max offsets and entries from an index; with a consumer group,
    its subscription to the topic (null and ``filterData`` ``"G@T is not online!"`` when
    none of its consumers is online)."""

    queue_data: list[ConsumeQueueData] | None = None
    max_queue_index: int = 0
    min_queue_index: int = 0
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(
            filterData=self.filter_data,
            maxQueueIndex=self.max_queue_index,
            minQueueIndex=self.min_queue_index,
            queueData=None if self.queue_data is None else [d.to_json() for d in self.queue_data],
            subscriptionData=None if self.subscription_data is None else self.subscription_data.to_json(),
        ))

    @classmethod
    def from_body(cls, data: bytes | str) -> QueryConsumeQueueResponseBody:
        where = "QueryConsumeQueueResponseBody"
        obj = read_object(parse_body(data, where), where)
        raw = obj.get("queueData")
        queue_data = None
        if raw is not None:
            queue_data = [
                ConsumeQueueData.from_json(read_object(item, f"{where}.queueData[{i}]"), f"{where}.queueData[{i}]")
                for i, item in enumerate(read_list(raw, f"{where}.queueData"))
            ]
        sub = obj.get("subscriptionData")
        return cls(
            queue_data, read_int(obj, "maxQueueIndex", where, 0), read_int(obj, "minQueueIndex", where, 0),
            None if sub is None else SubscriptionData.from_json(sub, f"{where}.subscriptionData"),
            read_str(obj, "filterData", where, required=False),
        )
