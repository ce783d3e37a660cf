"""PULL_MESSAGE as a consumer sends it and reads its answer.

Java: ``PullAPIWrapper.pullKernelImpl`` / ``processPullResult`` and
``MQClientAPIImpl.processPullResponse``. The answer's code gives the status
(SUCCESS -> FOUND, PULL_NOT_FOUND -> NO_NEW_MSG, PULL_RETRY_IMMEDIATELY ->
NO_MATCHED_MSG, PULL_OFFSET_MOVED -> OFFSET_ILLEGAL; anything else is a broker error);
a FOUND body is the stored records back to back, decoded by
:func:`trocket.codecs.message.iter_records` (the one record decoder), then filtered by
the exact tag strings (the broker filtered by tag hash only) and given the queue's
``MIN_OFFSET`` / ``MAX_OFFSET`` properties, as Java does.

Difference from Java's push consumer: the subscription expression is always posted
with the pull (sysFlag bit 0x4, as the lite pull consumer does; Java's push consumer
does only with ``postSubscriptionWhenPull``), so a pull never depends on the group's
heartbeat having reached that broker first.
"""

from __future__ import annotations

import enum

import attrs

from trocket.codecs.bodies.client import MessageQueue, SubscriptionData
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.errors import CodecError
from trocket.codecs.headers import PullMessageRequestHeader, PullMessageResponseHeader, decode_header
from trocket.codecs.message import iter_records
from trocket.codecs.message.message import MessageExt
from trocket.codecs.message.properties import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET

from .subscription import filter_by_tags

__all__ = [
    "PullStatus",
    "PullResult",
    "FLAG_COMMIT_OFFSET",
    "FLAG_SUSPEND",
    "FLAG_SUBSCRIPTION",
    "build_sys_flag",
    "pull_request",
    "read_pull_response",
    "PullResponseError",
]

# PullSysFlag
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@attrs.frozen(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = attrs.field(factory=list)


class PullResponseError(Exception):
    """A pull answered with a code that is no pull status (or a body that does not
    decode): ``code`` and ``remark`` are the broker's."""

    def __init__(self, code: int, remark: str | None, mq: MessageQueue) -> None:
        super().__init__(f"pull of {mq.topic}/{mq.broker_name}/{mq.queue_id} failed: code {code} {remark or ''}".rstrip())
        self.code = code
        self.remark = remark
        self.mq = mq


def build_sys_flag(*, commit_offset: bool, suspend: bool, subscription: bool) -> int:
    return (FLAG_COMMIT_OFFSET if commit_offset else 0) | (FLAG_SUSPEND if suspend else 0) | (
        FLAG_SUBSCRIPTION if subscription else 0
    )


def pull_request(
    group: str,
    mq: MessageQueue,
    offset: int,
    sub: SubscriptionData,
    *,
    max_nums: int = 32,
    commit_offset: int = 0,
    suspend_ms: int = 15_000,
    suspend: bool = True,
) -> RemotingCommand:
    """The PULL_MESSAGE request (``pullKernelImpl``); ``commit_offset`` > 0 sets the
    commit-offset bit (clustering)."""
    header = PullMessageRequestHeader(
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
    return RemotingCommand.request(int(RequestCode.PULL_MESSAGE), header)


def read_pull_response(response: RemotingCommand, mq: MessageQueue, sub: SubscriptionData | None) -> PullResult:
    """The :class:`PullResult` of a pull's answer; :class:`PullResponseError` otherwise."""
    status = _STATUS.get(response.code)
    if status is None:
        raise PullResponseError(response.code, response.remark, mq)
    try:
        header = decode_header(PullMessageResponseHeader, response.ext_fields)
    except CodecError as exc:
        raise PullResponseError(response.code, f"bad response header: {exc}", mq) from None
    messages: list[MessageExt] = []
    if status is PullStatus.FOUND:
        try:
            found = list(iter_records(response.body))
        except CodecError as exc:
            raise PullResponseError(response.code, f"body does not decode: {exc}", mq) from None
        messages = filter_by_tags(sub, found)
        lo, hi = str(header.minOffset), str(header.maxOffset)
        for msg in messages:
            props = msg.properties
            props[PROPERTY_MIN_OFFSET] = lo
            props[PROPERTY_MAX_OFFSET] = hi
    return PullResult(status, header.nextBeginOffset, header.minOffset, header.maxOffset, messages)
