"""Consumer-group administration headers (Java 4.9.8): DELETE_SUBSCRIPTIONGROUP (207),
GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204),
QUERY_TOPIC_CONSUME_BY_WHO (300), CLONE_GROUP_OFFSET (314), INVOKE_BROKER_TO_RESET_OFFSET
(222) and RESET_CONSUMER_CLIENT_OFFSET (220, the same ``ResetOffsetRequestHeader``),
GET_CONSUMER_RUNNING_INFO (307), CONSUME_MESSAGE_DIRECTLY (309), GET_ALL_PRODUCER_INFO (328,
no fields), INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) and GET_CONSUMER_STATUS_FROM_CLIENT
(221, the same ``GetConsumerStatusRequestHeader``), QUERY_CORRECTION_OFFSET (308).

Java's primitive ``boolean`` fields without ``@CFNotNull`` (``removeOffset``,
``offline``, ``jstackEnable``) are optional on the wire and false when absent;
``ResetOffsetRequestHeader.isForce`` is a ``@CFNotNull boolean`` named ``isForce``.
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = [
    "DeleteSubscriptionGroupRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "CloneGroupOffsetRequestHeader",
    "ResetOffsetRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "ConsumeMessageDirectlyResultRequestHeader",
    "GetAllProducerInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "QueryCorrectionOffsetHeader",
]


@header
class DeleteSubscriptionGroupRequestHeader:
    groupName: str = field("str", required=True)
    removeOffset: bool | None = field("bool")


@header
class GetConsumerConnectionListRequestHeader:
    consumerGroup: str = field("str", required=True)


@header
class GetProducerConnectionListRequestHeader:
    producerGroup: str = field("str", required=True)


@header
class QueryTopicConsumeByWhoRequestHeader:
    topic: str = field("str", required=True)


@header
class CloneGroupOffsetRequestHeader:
    srcGroup: str = field("str", required=True)
    destGroup: str = field("str", required=True)
    topic: str | None = field("str")
    offline: bool | None = field("bool")


@header
class ResetOffsetRequestHeader:
    """``timestamp`` -1 means the queues' max offsets ("now")."""

    topic: str = field("str", required=True)
    group: str = field("str", required=True)
    timestamp: int = field("long", required=True)
    isForce: bool = field("bool", required=True, default=False)


@header
class GetConsumerRunningInfoRequestHeader:
    consumerGroup: str = field("str", required=True)
    clientId: str = field("str", required=True)
    jstackEnable: bool | None = field("bool")


@header
class ConsumeMessageDirectlyResultRequestHeader:
    consumerGroup: str = field("str", required=True)
    clientId: str | None = field("str")
    msgId: str | None = field("str")
    brokerName: str | None = field("str")


@header
class GetAllProducerInfoRequestHeader:
    """No fields (Java's class declares none)."""


@header
class GetConsumerStatusRequestHeader:
    """``clientAddr`` (a client id, despite its name) narrows 223 to one client."""

    topic: str = field("str", required=True)
    group: str = field("str", required=True)
    clientAddr: str | None = field("str")


@header
class QueryCorrectionOffsetHeader:
    """``filterGroups``: comma-separated groups left out of the minimum."""

    filterGroups: str | None = field("str")
    compareGroup: str = field("str", required=True)
    topic: str = field("str", required=True)
