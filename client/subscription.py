"""Subscription expressions: ``"*"``, ``"TagA || TagB"`` or a :class:`MessageSelector`
(``MessageSelector.by_sql("a > 5")``) -> ``SubscriptionData``.

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

import attrs

from trocket.codecs.bodies.client import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    SUB_ALL,
    SubscriptionData,
    build_subscription,
)
from trocket.codecs.message.message import MessageExt
from trocket.codecs.names import RETRY_GROUP_TOPIC_PREFIX, validate_topic

__all__ = [
    "MessageSelector",
    "SubscriptionData",
    "build",
    "retry_topic",
    "retry_subscription",
    "filter_by_tags",
    "SUB_ALL",
]


@attrs.frozen(slots=True)
class MessageSelector:
    """Java's ``MessageSelector``: what a consumer subscribes with, a tag expression or a
    SQL92 one (``by_sql("a > 5 AND TAGS IN ('A', 'B')")``). A SQL92 selector needs a
    broker with ``enablePropertyFilter=true``; the consumer checks it with the brokers
    when it starts (CHECK_CLIENT_CONFIG), so a bad expression fails the start with the
    broker's remark."""

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """``MessageSelector.bySql``."""
        return cls(EXPRESSION_TYPE_SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str | None) -> MessageSelector:
        """``MessageSelector.byTag``: ``"*"``, ``"TagA || TagB"``; blank is ``*``."""
        return cls(EXPRESSION_TYPE_TAG, tag if tag and tag.strip() else SUB_ALL)

    @property
    def is_sql(self) -> bool:
        return self.expression_type != EXPRESSION_TYPE_TAG


def build(topic: str, expression: str | MessageSelector | None, *, version: int | None = None) -> SubscriptionData:
    """``FilterAPI.buildSubscriptionData(topic, subString)``: blank or ``*`` subscribes to
    every tag; otherwise tags split on ``||`` and trimmed, with their Java hash codes. A
    SQL92 :class:`MessageSelector` is kept as it is (``FilterAPI.build``: the broker
    parses it).

    ``topic`` is checked by the name rules (:class:`~trocket.codecs.errors.InvalidNameError`);
    an expression made only of separators (``"||"``) is a ``ValueError``.
    """
    validate_topic(topic)
    if isinstance(expression, MessageSelector):
        if expression.is_sql:
            if not expression.expression:
                raise ValueError(f"Expression can't be null! {expression.expression_type}")  # FilterAPI.build
            sub = build_subscription(topic, expression.expression, expression.expression_type)
            sub.sub_version = int(time.time() * 1000) if version is None else version
            return sub
        expression = expression.expression
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
