"""PULL_MESSAGE as a consumer sends it, and what it does with the answer.

Java: ``PullAPIWrapper.pullKernelImpl`` (the header) and ``processPullResult`` (the
answer, after :meth:`trocket.client.api.ClientAPI.pull_message` decoded it with the one
record decoder): messages are kept only when their TAGS string is subscribed (the
broker filtered by tag hash code only) and get the queue's ``MIN_OFFSET`` /
``MAX_OFFSET`` properties.

Difference from Java's push consumer: the subscription expression is always posted
with the pull (sysFlag bit 0x4, as the lite pull consumer does; Java's push consumer
does only with ``postSubscriptionWhenPull``), so a pull never depends on the group's
heartbeat having reached that broker first.
"""

from __future__ import annotations

from trocket.codecs.bodies.client import MessageQueue, SubscriptionData
from trocket.codecs.headers import PullMessageRequestHeader
from trocket.codecs.message.properties import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET

from .message import PullResult, PullStatus
from .subscription import filter_by_tags

__all__ = ["FLAG_COMMIT_OFFSET", "FLAG_SUSPEND", "FLAG_SUBSCRIPTION", "build_sys_flag", "pull_header", "process_pull_result"]

# PullSysFlag
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4


def build_sys_flag(*, commit_offset: bool, suspend: bool, subscription: bool) -> int:
    return (FLAG_COMMIT_OFFSET if commit_offset else 0) | (FLAG_SUSPEND if suspend else 0) | (
        FLAG_SUBSCRIPTION if subscription else 0
    )


def pull_header(
    group: str,
    mq: MessageQueue,
    offset: int,
    sub: SubscriptionData,
    *,
    max_nums: int = 32,
    commit_offset: int = 0,
    suspend_ms: int = 15_000,
    suspend: bool = True,
) -> PullMessageRequestHeader:
    """The PULL_MESSAGE header; ``commit_offset`` > 0 sets the commit-offset bit
    (clustering: the broker stores it as the group's offset)."""
    return PullMessageRequestHeader(
        consumerGroup=group,
        topic=mq.topic,
        queueId=mq.queue_id,
        queueOffset=offset,
        maxMsgNums=max_nums,
        sysFlag=build_sys_flag(commit_offset=commit_offset > 0, suspend=suspend, subscription=True),
        commitOffset=max(0, commit_offset),
        suspendTimeoutMillis=suspend_ms,
        subscription=sub.sub_string,
        subVersion=sub.sub_version,
        expressionType=sub.expression_type,
    )


def process_pull_result(result: PullResult, sub: SubscriptionData | None) -> PullResult:
    """``processPullResult``: filter FOUND messages by tag string, mark min/max offsets."""
    if result.status is PullStatus.FOUND and result.messages:
        kept = filter_by_tags(sub, result.messages)
        lo, hi = str(result.min_offset), str(result.max_offset)
        for msg in kept:
            props = msg.properties
            props[PROPERTY_MIN_OFFSET] = lo
            props[PROPERTY_MAX_OFFSET] = hi
        result.messages = kept
    return result
