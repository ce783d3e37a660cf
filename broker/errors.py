"""The broker's refusals, each a typed error that knows its answer.

Every class names the response code Java's broker answers with; the message is the
remark. A processor raises one and remoting answers it
(:class:`~trocket.remoting.ResponseCodeError`, :func:`~trocket.remoting.error_reply`):
no processor builds a refusal by hand. The refused puts -- what the store did not take
-- are :class:`PutRefusedError`\\ s, counted as failed puts (Java's
``putMessageFailedTimes``); :func:`put_refused` maps a store error to its answer, the
one place a :class:`~trocket.broker.store.PutStatus` becomes a response code.
"""

from __future__ import annotations

from trocket.codecs.codes import ResponseCode
from trocket.remoting import ResponseCodeError

from .store import PutMessageError, PutStatus

__all__ = [
    "BrokerError",
    "FilterDataNotExistError",
    "FilterDataNotLatestError",
    "HeaderError",
    "MessageRejectedError",
    "NoPermissionError",
    "PutFailedError",
    "PutRefusedError",
    "ServiceNotAvailableError",
    "SlaveNotAvailableError",
    "SubscriptionGroupNotExistError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionParseFailedError",
    "SystemBusyError",
    "TopicNotExistError",
    "ConsumerNotOnlineError",
    "ConsumeMsgTimeoutError",
    "put_refused",
]

#: ``PROPERTIES_SIZE_EXCEEDED``'s and ``MESSAGE_ILLEGAL``'s remark in Java 4.9.8's send
#: processor, around the detail trocket adds
_ILLEGAL_REMARK = (
    "the message is illegal, maybe msg body or properties length not matched. "
    "msg body length limit {limit}B, msg properties length limit 32KB. ({detail})"
)
_NOT_AVAILABLE_REMARK = (
    "service not available now. It may be caused by one of the following reasons: "
    "the broker's disk is full, messages are put to the slave, message store has been shut down, etc."
)


class BrokerError(ResponseCodeError):
    """A request the broker refuses; SYSTEM_ERROR unless a subclass says otherwise."""

    code = int(ResponseCode.SYSTEM_ERROR)


class HeaderError(BrokerError):
    """A request's custom header is malformed (Java's ``RemotingCommandException``)."""


class NoPermissionError(BrokerError):
    code = int(ResponseCode.NO_PERMISSION)


class TopicNotExistError(BrokerError):
    code = int(ResponseCode.TOPIC_NOT_EXIST)


class SubscriptionGroupNotExistError(BrokerError):
    code = int(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)


class SubscriptionNotExistError(BrokerError):
    code = int(ResponseCode.SUBSCRIPTION_NOT_EXIST)


class SubscriptionParseFailedError(BrokerError):
    code = int(ResponseCode.SUBSCRIPTION_PARSE_FAILED)


class FilterDataNotExistError(BrokerError):
    code = int(ResponseCode.FILTER_DATA_NOT_EXIST)


class FilterDataNotLatestError(BrokerError):
    code = int(ResponseCode.FILTER_DATA_NOT_LATEST)


class SubscriptionNotLatestError(BrokerError):
    code = int(ResponseCode.SUBSCRIPTION_NOT_LATEST)


class SystemBusyError(BrokerError):
    code = int(ResponseCode.SYSTEM_BUSY)


class SlaveNotAvailableError(BrokerError):
    """What a slave answers a request only a master serves (END_TRANSACTION)."""

    code = int(ResponseCode.SLAVE_NOT_AVAILABLE)


class ConsumerNotOnlineError(BrokerError):
    code = int(ResponseCode.CONSUMER_NOT_ONLINE)


class ConsumeMsgTimeoutError(BrokerError):
    code = int(ResponseCode.CONSUME_MSG_TIMEOUT)


class PutRefusedError(BrokerError):
    """A message the store did not take (counted as a failed put)."""


class PutFailedError(PutRefusedError):
    """The store failed the put (SYSTEM_ERROR: a segment not made, an unknown status)."""


class MessageRejectedError(PutRefusedError):
    """MESSAGE_ILLEGAL, with Java's remark around what is wrong (``detail``)."""

    code = int(ResponseCode.MESSAGE_ILLEGAL)

    def __init__(self, detail: str, max_message_size: int) -> None:
        super().__init__(_ILLEGAL_REMARK.format(limit=max_message_size, detail=detail))
        self.detail = detail


class ServiceNotAvailableError(PutRefusedError):
    """SERVICE_NOT_AVAILABLE (store shut down, a slave's store, disk full), Java's remark."""

    code = int(ResponseCode.SERVICE_NOT_AVAILABLE)

    def __init__(self, remark: str = _NOT_AVAILABLE_REMARK) -> None:
        super().__init__(remark)


def put_refused(exc: PutMessageError, max_message_size: int) -> PutRefusedError:
    """The answer to a put the store refused, by its status (as Java's
    ``handlePutMessageResult``)."""
    status = exc.status
    if status is PutStatus.MESSAGE_ILLEGAL or status is PutStatus.PROPERTIES_SIZE_EXCEEDED:
        return MessageRejectedError(str(exc), max_message_size)
    if status is PutStatus.SERVICE_NOT_AVAILABLE:
        return ServiceNotAvailableError()
    if status is PutStatus.CREATE_MAPEDFILE_FAILED:
        return PutFailedError("create mapped file failed, server is busy or broken.")
    return PutFailedError(f"UNKNOWN_ERROR: {exc}")
