"""Query headers (Java 4.9.8): QUERY_MESSAGE (12), QUERY_CONSUME_QUEUE (321),
GET_EARLIEST_MSG_STORETIME (32).

A QUERY_MESSAGE by unique key carries the ext field ``_UNIQUE_KEY_QUERY=true``
(``MixAll.UNIQUE_MSG_QUERY_FLAG``) beside the header's; the broker then looks for
``defaultQueryMaxNum`` messages whatever ``maxNum`` says.
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = [
    "UNIQUE_MSG_QUERY_FLAG",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "QueryConsumeQueueRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
]

#: ``MixAll.UNIQUE_MSG_QUERY_FLAG``: the ext field marking a query by unique key.
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


@header
class QueryMessageRequestHeader:
    topic: str = field("str", required=True)
    key: str = field("str", required=True)
    maxNum: int = field("int", required=True)
    beginTimestamp: int = field("long", required=True)
    endTimestamp: int = field("long", required=True)


@header
class QueryMessageResponseHeader:
    indexLastUpdateTimestamp: int = field("long", required=True)
    indexLastUpdatePhyoffset: int = field("long", required=True)


@header
class QueryConsumeQueueRequestHeader:
    """Java's fields are primitives (``int``/``long``), not ``@CFNotNull``: a missing one
    is an error there too (``Integer.parseInt(null)``)."""

    topic: str = field("str", required=True)
    queueId: int = field("int", required=True)
    index: int = field("long", required=True)
    count: int = field("int", required=True)
    consumerGroup: str | None = field("str")


@header
class GetEarliestMsgStoretimeRequestHeader:
    topic: str = field("str", required=True)
    queueId: int = field("int", required=True)


@header
class GetEarliestMsgStoretimeResponseHeader:
    timestamp: int = field("long", required=True)
