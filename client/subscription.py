"""Subscription expressions: ``"*"`` or ``"TagA || TagB"`` -> ``SubscriptionData``.

Java: ``FilterAPI.buildSubscriptionData`` (the expression parsed once, on subscribe,
with ``subVersion`` the time of the call) and the client-side tag check of
``PullAPIWrapper.processPullResult`` (the broker filters by tag hash code; the client
keeps only messages whose TAGS string is in the set, so a hash collision never
delivers a foreign tag). The parsing itself is :func:`trocket.codecs.bodies.client.build_subscription`
(the broker reads heartbeats with it): one parser for both ends.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from trocket.codecs.bodies.client import EXPRESSION_TYPE_TAG, SUB_ALL, SubscriptionData, build_subscription
from trocket.codecs.message.message import MessageExt
from trocket.codecs.names import RETRY_GROUP_TOPIC_PREFIX, validate_topic

__all__ = ["SubscriptionData", "build", "retry_topic", "retry_subscription", "filter_by_tags", "SUB_ALL"]


def build(topic: str, expression: str | None, *, version: int | None = None) -> SubscriptionData:
    """``FilterAPI.buildSubscriptionData(topic, subString)``: blank or ``*`` subscribes to
    every tag; otherwise tags split on ``||`` and trimmed, with their Java hash codes.

    ``topic`` is checked by the name rules (:class:`~trocket.codecs.errors.InvalidNameError`);
    an expression made only of separators (``"||"``) is a ``ValueError``.
    """
    validate_topic(topic)
    if expression is not None and expression.strip() and expression.strip() != SUB_ALL:
        if not any(part.strip() for part in expression.split("||")):
            raise ValueError(f"subscription expression {expression!r} names no tag")
    sub = build_subscription(topic, expression, EXPRESSION_TYPE_TAG)
    sub.sub_version = int(time.time() * 1000) if version is None else version
    return sub


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``: ``%RETRY%<group>``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def retry_subscription(group: str) -> SubscriptionData:
    """What a clustering push consumer adds for its group's retry topic (``copySubscription``)."""
    sub = build_subscription(retry_topic(group), SUB_ALL, EXPRESSION_TYPE_TAG)
    sub.sub_version = int(time.time() * 1000)
    return sub


def filter_by_tags(sub: SubscriptionData | None, messages: Iterable[MessageExt]) -> list[MessageExt]:
    """The messages ``sub`` accepts (all of them for ``*`` or an unknown topic)."""
    messages = list(messages)
    if sub is None or not sub.tags_set or sub.class_filter_mode:
        return messages
    tags = set(sub.tags_set)
    return [m for m in messages if m.tags is not None and m.tags in tags]
