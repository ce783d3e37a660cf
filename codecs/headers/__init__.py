"""RocketMQ's custom command headers (4.9.8), their hand-written codecs and the
code -> class tables.

Each class is declared with :func:`~trocket.codecs.custom_header.header` /
:func:`~trocket.codecs.custom_header.field` (:mod:`trocket.codecs.custom_header`, the
wire-level machinery, which knows none of these classes); its attribute names are the
wire ext-field names (the Java field names) in Java declaration order. Decode and
encode them with :func:`~trocket.codecs.custom_header.decode_header` /
:func:`~trocket.codecs.custom_header.encode_header`: the hot ones (send V1/V2, send
response, pull request/response) have hand-written codecs (:mod:`.fast`, Java's
``FastCodesHeader`` idea), registered when this package is imported; the others use
the codec generated from their declaration.

:data:`REQUEST_HEADERS` / :data:`RESPONSE_HEADERS` map request codes (plain ints) to the
header classes of the request and of its response.
"""

from __future__ import annotations

from collections.abc import Mapping

from .acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from .admin import CreateTopicRequestHeader, DeleteTopicRequestHeader, ViewMessageRequestHeader
from .config import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    GetBrokerConfigResponseHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from .consumer import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from .groups import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetAllProducerInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    QueryCorrectionOffsetHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
)
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
from .query import (
    UNIQUE_MSG_QUERY_FLAG,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    QueryConsumeQueueRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
)
from .send import SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader
from .stats import (
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from .transaction import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    ReplyMessageRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
)

from . import fast as _fast  # noqa: E402, F401  (registers the hand-written codecs)

__all__ = [
    # code -> class tables
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
    "EndTransactionRequestHeader",
    "CheckTransactionStateRequestHeader",
    "ReplyMessageRequestHeader",
    "ResumeCheckHalfMessageRequestHeader",
    "CreateAccessConfigRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
    "GetBrokerAclConfigResponseHeader",
    # statistics (315, 317, 208, 202, 303)
    "ViewBrokerStatsDataRequestHeader",
    "GetConsumeStatsInBrokerHeader",
    "GetConsumeStatsRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "QueryConsumeTimeSpanRequestHeader",
    # consumer groups (207, 203, 204, 300, 314, 222/220, 307, 309)
    "DeleteSubscriptionGroupRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "CloneGroupOffsetRequestHeader",
    "ResetOffsetRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "ConsumeMessageDirectlyResultRequestHeader",
    "GetAllProducerInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "QueryCorrectionOffsetHeader",
    # configuration (26, 100, 101, 102, 219, 224, 205, 327)
    "GetBrokerConfigResponseHeader",
    "PutKVConfigRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "DeleteKVConfigRequestHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
    "AddWritePermOfBrokerRequestHeader",
    "AddWritePermOfBrokerResponseHeader",
    # queries (12, 321, 32)
    "UNIQUE_MSG_QUERY_FLAG",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "QueryConsumeQueueRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
]

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
    37: EndTransactionRequestHeader,  # END_TRANSACTION
    38: GetConsumerListByGroupRequestHeader,  # GET_CONSUMER_LIST_BY_GROUP
    39: CheckTransactionStateRequestHeader,  # CHECK_TRANSACTION_STATE
    40: NotifyConsumerIdsChangedRequestHeader,  # NOTIFY_CONSUMER_IDS_CHANGED
    50: CreateAccessConfigRequestHeader,  # UPDATE_AND_CREATE_ACL_CONFIG
    51: DeleteAccessConfigRequestHeader,  # DELETE_ACL_CONFIG
    53: UpdateGlobalWhiteAddrsConfigRequestHeader,  # UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
    103: RegisterBrokerRequestHeader,  # REGISTER_BROKER
    104: UnregisterBrokerRequestHeader,  # UNREGISTER_BROKER
    105: GetRouteInfoRequestHeader,  # GET_ROUTEINFO_BY_TOPIC
    215: DeleteTopicRequestHeader,  # DELETE_TOPIC_IN_BROKER
    216: DeleteTopicFromNamesrvRequestHeader,  # DELETE_TOPIC_IN_NAMESRV
    310: SendMessageRequestHeaderV2,  # SEND_MESSAGE_V2
    320: SendMessageRequestHeaderV2,  # SEND_BATCH_MESSAGE
    324: SendMessageRequestHeader,  # SEND_REPLY_MESSAGE
    325: SendMessageRequestHeaderV2,  # SEND_REPLY_MESSAGE_V2
    326: ReplyMessageRequestHeader,  # PUSH_REPLY_MESSAGE_TO_CLIENT
    # statistics
    202: GetTopicStatsInfoRequestHeader,  # GET_TOPIC_STATS_INFO
    208: GetConsumeStatsRequestHeader,  # GET_CONSUME_STATS
    303: QueryConsumeTimeSpanRequestHeader,  # QUERY_CONSUME_TIME_SPAN
    315: ViewBrokerStatsDataRequestHeader,  # VIEW_BROKER_STATS_DATA
    317: GetConsumeStatsInBrokerHeader,  # GET_BROKER_CONSUME_STATS
    # consumer groups
    203: GetConsumerConnectionListRequestHeader,  # GET_CONSUMER_CONNECTION_LIST
    204: GetProducerConnectionListRequestHeader,  # GET_PRODUCER_CONNECTION_LIST
    207: DeleteSubscriptionGroupRequestHeader,  # DELETE_SUBSCRIPTIONGROUP
    220: ResetOffsetRequestHeader,  # RESET_CONSUMER_CLIENT_OFFSET
    222: ResetOffsetRequestHeader,  # INVOKE_BROKER_TO_RESET_OFFSET
    300: QueryTopicConsumeByWhoRequestHeader,  # QUERY_TOPIC_CONSUME_BY_WHO
    307: GetConsumerRunningInfoRequestHeader,  # GET_CONSUMER_RUNNING_INFO
    309: ConsumeMessageDirectlyResultRequestHeader,  # CONSUME_MESSAGE_DIRECTLY
    221: GetConsumerStatusRequestHeader,  # GET_CONSUMER_STATUS_FROM_CLIENT
    223: GetConsumerStatusRequestHeader,  # INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    308: QueryCorrectionOffsetHeader,  # QUERY_CORRECTION_OFFSET
    328: GetAllProducerInfoRequestHeader,  # GET_ALL_PRODUCER_INFO
    323: ResumeCheckHalfMessageRequestHeader,  # RESUME_CHECK_HALF_MESSAGE
    314: CloneGroupOffsetRequestHeader,  # CLONE_GROUP_OFFSET
    # configuration
    100: PutKVConfigRequestHeader,  # PUT_KV_CONFIG
    101: GetKVConfigRequestHeader,  # GET_KV_CONFIG
    102: DeleteKVConfigRequestHeader,  # DELETE_KV_CONFIG
    205: WipeWritePermOfBrokerRequestHeader,  # WIPE_WRITE_PERM_OF_BROKER
    219: GetKVListByNamespaceRequestHeader,  # GET_KVLIST_BY_NAMESPACE
    224: GetTopicsByClusterRequestHeader,  # GET_TOPICS_BY_CLUSTER
    327: AddWritePermOfBrokerRequestHeader,  # ADD_WRITE_PERM_OF_BROKER
    # queries
    12: QueryMessageRequestHeader,  # QUERY_MESSAGE
    32: GetEarliestMsgStoretimeRequestHeader,  # GET_EARLIEST_MSG_STORETIME
    321: QueryConsumeQueueRequestHeader,  # QUERY_CONSUME_QUEUE
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
    52: GetBrokerAclConfigResponseHeader,  # GET_BROKER_CLUSTER_ACL_INFO
    103: RegisterBrokerResponseHeader,  # REGISTER_BROKER
    310: SendMessageResponseHeader,  # SEND_MESSAGE_V2
    320: SendMessageResponseHeader,  # SEND_BATCH_MESSAGE
    26: GetBrokerConfigResponseHeader,  # GET_BROKER_CONFIG
    101: GetKVConfigResponseHeader,  # GET_KV_CONFIG
    205: WipeWritePermOfBrokerResponseHeader,  # WIPE_WRITE_PERM_OF_BROKER
    327: AddWritePermOfBrokerResponseHeader,  # ADD_WRITE_PERM_OF_BROKER
    12: QueryMessageResponseHeader,  # QUERY_MESSAGE
    32: GetEarliestMsgStoretimeResponseHeader,  # GET_EARLIEST_MSG_STORETIME
    324: SendMessageResponseHeader,  # SEND_REPLY_MESSAGE
    325: SendMessageResponseHeader,  # SEND_REPLY_MESSAGE_V2
}


def request_header_class(code: int) -> type | None:
    """The header class of request ``code``'s ext fields, or ``None`` if not known."""
    return REQUEST_HEADERS.get(int(code))


def response_header_class(request_code: int) -> type | None:
    """The header class of the response to request ``request_code``, or ``None``."""
    return RESPONSE_HEADERS.get(int(request_code))
