"""Pull headers: PULL_MESSAGE (11) request and response (Java 4.9.8).

The request's wire order is fixed by 4.9.8's ``PullMessageRequestHeader.encode``
(FastCodesHeader), as the golden ROCKETMQ frame shows: the class's own fields, then the
inherited ``bname``. 5.x adds ``maxMsgBytes``, ``lo``, ``ns``, ``nsd``, ``oway`` (request)
and ``offsetDelta``, ``topicSysFlag``, ``groupSysFlag``, ``forbiddenType`` (response);
they are not 4.9.8 fields and are ignored like any unknown ext field.
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = ["PullMessageRequestHeader", "PullMessageResponseHeader"]


@header(java_fast_codes=True)
class PullMessageRequestHeader:
    consumerGroup: str = field("str", required=True)
    topic: str = field("str", required=True)
    queueId: int = field("int", required=True)
    queueOffset: int = field("long", required=True)
    maxMsgNums: int = field("int", required=True)
    sysFlag: int = field("int", required=True)
    commitOffset: int = field("long", required=True)
    suspendTimeoutMillis: int = field("long", required=True)
    subscription: str | None = field("str")
    subVersion: int = field("long", required=True)
    expressionType: str | None = field("str")
    bname: str | None = field("str")


@header(java_fast_codes=True)
class PullMessageResponseHeader:
    suggestWhichBrokerId: int = field("long", required=True)
    nextBeginOffset: int = field("long", required=True)
    minOffset: int = field("long", required=True)
    maxOffset: int = field("long", required=True)
