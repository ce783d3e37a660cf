"""Send headers: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

Java 4.9.8, package ``org.apache.rocketmq.common.protocol.header``. Field order is Java
declaration order; ``bname`` is the field the 4.9.x line inherits from its RPC request
header base (apache/rocketmq#5161, "Support bname in protocol for 4.9.x client"),
declared after the class's own fields as the fast encoders write it.

``unitMode``/``batch`` (V1) and ``k``/``m`` (V2) are primitive ``boolean`` in 4.9.8:
never null, ``false`` by default and therefore always sent.

V2 and the response are Java ``FastCodesHeader`` classes (their fields lead a binary
frame's ext fields); V1 is not (Java writes it through the ext map).
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = ["SendMessageRequestHeader", "SendMessageRequestHeaderV2", "SendMessageResponseHeader"]


@header
class SendMessageRequestHeader:
    """SEND_MESSAGE (10) request; also what V2 converts to (``to_v1``)."""

    producerGroup: str = field("str", required=True)
    topic: str = field("str", required=True)
    defaultTopic: str = field("str", required=True)
    defaultTopicQueueNums: int = field("int", required=True)
    queueId: int = field("int", required=True)
    sysFlag: int = field("int", required=True)
    bornTimestamp: int = field("long", required=True)
    flag: int = field("int", required=True)
    properties: str | None = field("str")
    reconsumeTimes: int | None = field("int")
    unitMode: bool = field("bool", default=False)
    batch: bool = field("bool", default=False)
    maxReconsumeTimes: int | None = field("int")
    bname: str | None = field("str")


@header(java_fast_codes=True)
class SendMessageRequestHeaderV2:
    """SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) request: V1 with one-letter names.

    a producerGroup, b topic, c defaultTopic, d defaultTopicQueueNums, e queueId,
    f sysFlag, g bornTimestamp (long), h flag, i properties, j reconsumeTimes,
    k unitMode, l maxReconsumeTimes ("consumeRetryTimes"), m batch, n brokerName
    (V1's ``bname``). ``bname`` is the inherited base-class field, which the
    V1 <-> V2 conversions leave alone (Java's do too).
    """

    a: str = field("str", required=True)
    b: str = field("str", required=True)
    c: str = field("str", required=True)
    d: int = field("int", required=True)
    e: int = field("int", required=True)
    f: int = field("int", required=True)
    g: int = field("long", required=True)
    h: int = field("int", required=True)
    i: str | None = field("str")
    j: int | None = field("int")
    k: bool = field("bool", default=False)
    l: int | None = field("int")  # noqa: E741 - the wire name
    m: bool = field("bool", default=False)
    n: str | None = field("str")
    bname: str | None = field("str")

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        """``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2(v1)``."""
        return cls(
            a=v1.producerGroup,
            b=v1.topic,
            c=v1.defaultTopic,
            d=v1.defaultTopicQueueNums,
            e=v1.queueId,
            f=v1.sysFlag,
            g=v1.bornTimestamp,
            h=v1.flag,
            i=v1.properties,
            j=v1.reconsumeTimes,
            k=v1.unitMode,
            l=v1.maxReconsumeTimes,
            m=v1.batch,
            n=v1.bname,
        )

    def to_v1(self) -> SendMessageRequestHeader:
        """``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1(this)``."""
        return SendMessageRequestHeader(
            producerGroup=self.a,
            topic=self.b,
            defaultTopic=self.c,
            defaultTopicQueueNums=self.d,
            queueId=self.e,
            sysFlag=self.f,
            bornTimestamp=self.g,
            flag=self.h,
            properties=self.i,
            reconsumeTimes=self.j,
            unitMode=self.k,
            maxReconsumeTimes=self.l,
            batch=self.m,
            bname=self.n,
        )


#: SEND_MESSAGE_V2's one-letter ext keys -> the V1 (Java) field names they stand for
#: (``createSendMessageRequestHeaderV1``), for showing a V2 header by its names
V2_FIELD_NAMES = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
    "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "bname",
}


@header(java_fast_codes=True)
class SendMessageResponseHeader:
    """Response to 10 / 310 / 320: where the message went."""

    msgId: str = field("str", required=True)
    queueId: int = field("int", required=True)
    queueOffset: int = field("long", required=True)
    transactionId: str | None = field("str")
