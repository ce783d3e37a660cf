"""Admin headers (Java 4.9.8): UPDATE_AND_CREATE_TOPIC (17), VIEW_MESSAGE_BY_ID (33),
DELETE_TOPIC_IN_BROKER (215)."""

from __future__ import annotations

from ..custom_header import field, header

__all__ = ["CreateTopicRequestHeader", "DeleteTopicRequestHeader", "ViewMessageRequestHeader"]


@header
class CreateTopicRequestHeader:
    """``topicFilterType`` is a ``TopicFilterType`` name (``SINGLE_TAG``/``MULTI_TAG``).

    ``order`` is ``@CFNotNull Boolean order = false``: required on the wire, ``False``
    when constructed. ``attributes`` (``+key=value,...``) came with topic attributes
    (apache/rocketmq#3698, merged to develop in January 2022, before 4.9.3); 5.x's
    ``force`` is not a 4.9.8 field.
    """

    topic: str = field("str", required=True)
    defaultTopic: str = field("str", required=True)
    readQueueNums: int = field("int", required=True)
    writeQueueNums: int = field("int", required=True)
    perm: int = field("int", required=True)
    topicFilterType: str = field("str", required=True)
    topicSysFlag: int | None = field("int")
    order: bool = field("bool", required=True, default=False)
    attributes: str | None = field("str")


@header
class ViewMessageRequestHeader:
    """``offset`` is the commit-log (physical) offset from an offset message id."""

    offset: int = field("long", required=True)


@header
class DeleteTopicRequestHeader:
    topic: str = field("str", required=True)
