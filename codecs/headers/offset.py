"""Offset headers (Java 4.9.8): consumer offsets, min/max offset, search by timestamp.

Codes: QUERY_CONSUMER_OFFSET 14, UPDATE_CONSUMER_OFFSET 15, SEARCH_OFFSET_BY_TIMESTAMP 29,
GET_MAX_OFFSET 30, GET_MIN_OFFSET 31. The request headers carry the ``bname`` the 4.9.x
line added to them (apache/rocketmq#4615 for these six codes, backported to 4.9.x by
#5161), after their own fields. 5.x additions (``setZeroIfNotFound``, ``committed``,
``boundaryType``) are not 4.9.8 fields.
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = [
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "UpdateConsumerOffsetRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
]


@header
class QueryConsumerOffsetRequestHeader:
    consumerGroup: str = field("str", required=True)
    topic: str = field("str", required=True)
    queueId: int = field("int", required=True)
    bname: str | None = field("str")


@header
class QueryConsumerOffsetResponseHeader:
    offset: int = field("long", required=True)


@header
class UpdateConsumerOffsetRequestHeader:
    consumerGroup: str = field("str", required=True)
    topic: str = field("str", required=True)
    queueId: int = field("int", required=True)
    commitOffset: int = field("long", required=True)
    bname: str | None = field("str")


@header
class GetMaxOffsetRequestHeader:
    topic: str = field("str", required=True)
    queueId: int = field("int", required=True)
    bname: str | None = field("str")


@header
class GetMaxOffsetResponseHeader:
    offset: int = field("long", required=True)


@header
class GetMinOffsetRequestHeader:
    topic: str = field("str", required=True)
    queueId: int = field("int", required=True)
    bname: str | None = field("str")


@header
class GetMinOffsetResponseHeader:
    offset: int = field("long", required=True)


@header
class SearchOffsetRequestHeader:
    topic: str = field("str", required=True)
    queueId: int = field("int", required=True)
    timestamp: int = field("long", required=True)
    bname: str | None = field("str")


@header
class SearchOffsetResponseHeader:
    offset: int = field("long", required=True)
