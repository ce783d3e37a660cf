"""Configuration headers (Java 4.9.8): GET_BROKER_CONFIG (26)'s response; the name
server's KV config (PUT_KV_CONFIG 100, GET_KV_CONFIG 101, DELETE_KV_CONFIG 102,
GET_KVLIST_BY_NAMESPACE 219), GET_TOPICS_BY_CLUSTER (224), WIPE_WRITE_PERM_OF_BROKER
(205) and ADD_WRITE_PERM_OF_BROKER (327). UPDATE_BROKER_CONFIG (25),
UPDATE_NAMESRV_CONFIG (318) and GET_NAMESRV_CONFIG (319) carry no header: their
properties travel as the body (``key=value`` lines)."""

from __future__ import annotations

from ..custom_header import field, header

__all__ = [
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
]


@header
class GetBrokerConfigResponseHeader:
    """``version``: the configuration's ``DataVersion`` as JSON."""

    version: str = field("str", required=True)


@header
class PutKVConfigRequestHeader:
    namespace: str = field("str", required=True)
    key: str = field("str", required=True)
    value: str = field("str", required=True)


@header
class GetKVConfigRequestHeader:
    namespace: str = field("str", required=True)
    key: str = field("str", required=True)


@header
class GetKVConfigResponseHeader:
    value: str | None = field("str")


@header
class DeleteKVConfigRequestHeader:
    namespace: str = field("str", required=True)
    key: str = field("str", required=True)


@header
class GetKVListByNamespaceRequestHeader:
    namespace: str = field("str", required=True)


@header
class GetTopicsByClusterRequestHeader:
    cluster: str = field("str", required=True)


@header
class WipeWritePermOfBrokerRequestHeader:
    brokerName: str = field("str", required=True)


@header
class WipeWritePermOfBrokerResponseHeader:
    wipeTopicCount: int = field("int", required=True)


@header
class AddWritePermOfBrokerRequestHeader:
    brokerName: str = field("str", required=True)


@header
class AddWritePermOfBrokerResponseHeader:
    addTopicCount: int = field("int", required=True)
