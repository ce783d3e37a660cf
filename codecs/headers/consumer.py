"""Client/consumer management headers (Java 4.9.8).

Codes: UNREGISTER_CLIENT 35, CONSUMER_SEND_MSG_BACK 36, GET_CONSUMER_LIST_BY_GROUP 38,
NOTIFY_CONSUMER_IDS_CHANGED 40 (broker -> client).
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = [
    "UnregisterClientRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
]


@header
class UnregisterClientRequestHeader:
    clientID: str = field("str", required=True)
    producerGroup: str | None = field("str")
    consumerGroup: str | None = field("str")


@header
class ConsumerSendMsgBackRequestHeader:
    """``offset`` is the message's commit-log offset; ``unitMode`` is a primitive boolean.

    ``bname``: added for 4.9.x clients by apache/rocketmq#5161 (5.0: #5334).
    """

    offset: int = field("long", required=True)
    group: str = field("str", required=True)
    delayLevel: int = field("int", required=True)
    originMsgId: str | None = field("str")
    originTopic: str | None = field("str")
    unitMode: bool = field("bool", default=False)
    maxReconsumeTimes: int | None = field("int")
    bname: str | None = field("str")


@header
class GetConsumerListByGroupRequestHeader:
    consumerGroup: str = field("str", required=True)


@header
class NotifyConsumerIdsChangedRequestHeader:
    consumerGroup: str = field("str", required=True)
