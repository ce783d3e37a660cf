"""Transaction and request-reply headers (Java 4.9.8).

Codes: END_TRANSACTION 37 (producer -> broker, oneway from every real client),
CHECK_TRANSACTION_STATE 39 (broker -> producer, oneway), RESUME_CHECK_HALF_MESSAGE 323
(admin -> broker), PUSH_REPLY_MESSAGE_TO_CLIENT 326
(broker -> the requesting client). SEND_REPLY_MESSAGE 324 / SEND_REPLY_MESSAGE_V2 325 carry
the send headers (:mod:`.send`).

``bname`` is the field 4.9.x's ``RpcRequestHeader`` base adds (apache/rocketmq#5161),
declared after the class's own fields. ``commitOrRollback`` is one of the
``MessageSysFlag`` transaction types: 0 (unknown, ``TRANSACTION_NOT_TYPE``), 8 (commit),
12 (rollback); Java's ``checkFields`` refuses anything else ("commitOrRollback field
wrong"), which the broker's processor does here (codecs decode any int).
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = [
    "CheckTransactionStateRequestHeader",
    "EndTransactionRequestHeader",
    "ReplyMessageRequestHeader",
    "ResumeCheckHalfMessageRequestHeader",
]


@header
class EndTransactionRequestHeader:
    """END_TRANSACTION (37): end the half message at ``commitLogOffset`` (its queue
    offset ``tranStateTableOffset`` on the half topic) with ``commitOrRollback``.
    ``fromTransactionCheck`` is a ``Boolean`` defaulting to false (always sent)."""

    producerGroup: str = field("str", required=True)
    tranStateTableOffset: int = field("long", required=True)
    commitLogOffset: int = field("long", required=True)
    commitOrRollback: int = field("int", required=True)
    fromTransactionCheck: bool | None = field("bool", default=False)
    msgId: str = field("str", required=True)
    transactionId: str | None = field("str")
    bname: str | None = field("str")


@header
class CheckTransactionStateRequestHeader:
    """CHECK_TRANSACTION_STATE (39): the broker asks a producer of the half message's
    group how its local transaction ended; the body is the half message as a stored
    record (its real topic and queue, the half copy's offsets)."""

    tranStateTableOffset: int = field("long", required=True)
    commitLogOffset: int = field("long", required=True)
    msgId: str | None = field("str")
    transactionId: str | None = field("str")
    offsetMsgId: str | None = field("str")
    bname: str | None = field("str")


@header
class ReplyMessageRequestHeader:
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): a reply pushed to the client that sent the
    request (``REPLY_TO_CLIENT``); the body is the reply's body. ``unitMode`` is a
    primitive boolean; ``storeTimestamp`` a primitive long (both always sent)."""

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
    bornHost: str = field("str", required=True)
    storeHost: str = field("str", required=True)
    storeTimestamp: int = field("long", default=0)


@header
class ResumeCheckHalfMessageRequestHeader:
    """RESUME_CHECK_HALF_MESSAGE (323): ``msgId`` is an offset message id (the stored
    record's); ``@CFNullable`` in Java, so a request without it decodes."""

    msgId: str | None = field("str")
