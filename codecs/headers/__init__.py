"""Custom command headers: typed views of a command's ext fields (RocketMQ 4.9.8).

A header class is an attrs class declared with :func:`header` / :func:`field`
(:mod:`._spec`); its attribute names are the wire ext-field names (the Java field
names) in Java declaration order. Two paths convert between ext dicts and objects:

* generic (:mod:`.generic`, cattrs): any header class, like Java's reflection path;
* fast (:mod:`.fast`): hand-written, field by field, for the hot headers (send V1/V2,
  send response, pull request/response), like Java's ``FastCodesHeader``.

Both follow the same strict rules and give identical objects, dicts and errors
(``CustomHeaderError(header, field, reason)``); :func:`encode_header` and
:func:`decode_header` pick the fast one when the class has it.

:data:`REQUEST_HEADERS` / :data:`RESPONSE_HEADERS` map request codes (plain ints) to the
header classes of the request and of its response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from ._spec import FieldSpec, field, header, header_fields, is_header_class
from .admin import CreateTopicRequestHeader, DeleteTopicRequestHeader, ViewMessageRequestHeader
from .consumer import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from .fast import FAST_CODECS
from .generic import generic_decode, generic_encode
from .namesrv import (
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from .offset import (
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from .pull import PullMessageRequestHeader, PullMessageResponseHeader
from .send import SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader

__all__ = [
    # API
    "encode_header",
    "decode_header",
    "has_fast_codec",
    "generic_encode",
    "generic_decode",
    "header",
    "field",
    "header_fields",
    "is_header_class",
    "FieldSpec",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "request_header_class",
    "response_header_class",
    # headers
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "SendMessageResponseHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "UpdateConsumerOffsetRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "GetConsumerListByGroupRequestHeader",
    "UnregisterClientRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "GetRouteInfoRequestHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnregisterBrokerRequestHeader",
    "ViewMessageRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteTopicRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
]

T = TypeVar("T")

_FAST_DECODE = {cls: codec.decode for cls, codec in FAST_CODECS.items()}
_FAST_ENCODE = {cls: codec.encode for cls, codec in FAST_CODECS.items()}


def decode_header(cls: type[T], ext: Mapping[str, str] | None) -> T:
    """Decode ext fields into header ``cls``: the fast codec if it has one, else generic.

    Raises :class:`~trocket.codecs.errors.CustomHeaderError` for a missing required field
    or a value that does not parse.
    """
    try:
        decode = _FAST_DECODE[cls]
    except KeyError:
        return generic_decode(cls, ext)
    return decode(ext)


def encode_header(obj: Any) -> dict[str, str]:
    """Encode header ``obj`` into ext fields (declaration order, ``None`` omitted)."""
    try:
        encode = _FAST_ENCODE[obj.__class__]
    except KeyError:
        return generic_encode(obj)
    return encode(obj)


def has_fast_codec(cls: type) -> bool:
    """Whether ``cls`` has a hand-written codec (else the generic path serves it)."""
    return cls in _FAST_DECODE


# -- registry: request code -> header classes --------------------------------------------
# Codes are RocketMQ's RequestCode values as plain ints (codecs/codes.py has the enums).

#: Request code -> header class of the request's ext fields.
REQUEST_HEADERS: Mapping[int, type] = {
    10: SendMessageRequestHeader,  # SEND_MESSAGE
    11: PullMessageRequestHeader,  # PULL_MESSAGE
    14: QueryConsumerOffsetRequestHeader,  # QUERY_CONSUMER_OFFSET
    15: UpdateConsumerOffsetRequestHeader,  # UPDATE_CONSUMER_OFFSET
    17: CreateTopicRequestHeader,  # UPDATE_AND_CREATE_TOPIC
    29: SearchOffsetRequestHeader,  # SEARCH_OFFSET_BY_TIMESTAMP
    30: GetMaxOffsetRequestHeader,  # GET_MAX_OFFSET
    31: GetMinOffsetRequestHeader,  # GET_MIN_OFFSET
    33: ViewMessageRequestHeader,  # VIEW_MESSAGE_BY_ID
    35: UnregisterClientRequestHeader,  # UNREGISTER_CLIENT
    36: ConsumerSendMsgBackRequestHeader,  # CONSUMER_SEND_MSG_BACK
    38: GetConsumerListByGroupRequestHeader,  # GET_CONSUMER_LIST_BY_GROUP
    40: NotifyConsumerIdsChangedRequestHeader,  # NOTIFY_CONSUMER_IDS_CHANGED
    103: RegisterBrokerRequestHeader,  # REGISTER_BROKER
    104: UnregisterBrokerRequestHeader,  # UNREGISTER_BROKER
    105: GetRouteInfoRequestHeader,  # GET_ROUTEINFO_BY_TOPIC
    215: DeleteTopicRequestHeader,  # DELETE_TOPIC_IN_BROKER
    216: DeleteTopicFromNamesrvRequestHeader,  # DELETE_TOPIC_IN_NAMESRV
    310: SendMessageRequestHeaderV2,  # SEND_MESSAGE_V2
    320: SendMessageRequestHeaderV2,  # SEND_BATCH_MESSAGE
}

#: Request code -> header class of the *response* to that request (a response frame's own
#: code is a status, so pair it with its request by opaque first). Codes whose response
#: carries no custom header fields are absent.
RESPONSE_HEADERS: Mapping[int, type] = {
    10: SendMessageResponseHeader,  # SEND_MESSAGE
    11: PullMessageResponseHeader,  # PULL_MESSAGE
    14: QueryConsumerOffsetResponseHeader,  # QUERY_CONSUMER_OFFSET
    29: SearchOffsetResponseHeader,  # SEARCH_OFFSET_BY_TIMESTAMP
    30: GetMaxOffsetResponseHeader,  # GET_MAX_OFFSET
    31: GetMinOffsetResponseHeader,  # GET_MIN_OFFSET
    103: RegisterBrokerResponseHeader,  # REGISTER_BROKER
    310: SendMessageResponseHeader,  # SEND_MESSAGE_V2
    320: SendMessageResponseHeader,  # SEND_BATCH_MESSAGE
}


def request_header_class(code: int) -> type | None:
    """The header class of request ``code``'s ext fields, or ``None`` if not known."""
    return REQUEST_HEADERS.get(int(code))


def response_header_class(request_code: int) -> type | None:
    """The header class of the response to request ``request_code``, or ``None``."""
    return RESPONSE_HEADERS.get(int(request_code))
