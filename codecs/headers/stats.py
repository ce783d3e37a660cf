"""Statistics headers (Java 4.9.8): VIEW_BROKER_STATS_DATA (315), GET_BROKER_CONSUME_STATS
(317), GET_CONSUME_STATS (208), GET_TOPIC_STATS_INFO (202), QUERY_CONSUME_TIME_SPAN (303).

``GetConsumeStatsInBrokerHeader``'s field is Java's ``boolean isOrder``: remoting
names ext fields after the Java fields, so the wire name is ``isOrder``.
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = [
    "ViewBrokerStatsDataRequestHeader",
    "GetConsumeStatsInBrokerHeader",
    "GetConsumeStatsRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "QueryConsumeTimeSpanRequestHeader",
]


@header
class ViewBrokerStatsDataRequestHeader:
    """``statsName`` is a ``Stats`` name (``TOPIC_PUT_NUMS``, ``GROUP_GET_NUMS``, ...),
    ``statsKey`` its key (``topic``, ``topic@group``, the cluster for ``BROKER_*``)."""

    statsName: str = field("str", required=True)
    statsKey: str = field("str", required=True)


@header
class GetConsumeStatsInBrokerHeader:
    isOrder: bool = field("bool", required=True, default=False)


@header
class GetConsumeStatsRequestHeader:
    consumerGroup: str = field("str", required=True)
    topic: str | None = field("str")


@header
class GetTopicStatsInfoRequestHeader:
    topic: str = field("str", required=True)


@header
class QueryConsumeTimeSpanRequestHeader:
    topic: str = field("str", required=True)
    group: str = field("str", required=True)
