"""Name server headers (Java 4.9.8, ``...protocol.header.namesrv`` and ``GetRouteInfo``).

Codes: REGISTER_BROKER 103, UNREGISTER_BROKER 104, GET_ROUTEINFO_BY_TOPIC 105,
DELETE_TOPIC_IN_NAMESRV 216.
5.x additions (``heartbeatTimeoutMillis``, ``enableActingMaster``,
``acceptStandardJsonOnly``) are not 4.9.8 fields.
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = [
    "DeleteTopicFromNamesrvRequestHeader",
    "GetRouteInfoRequestHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnregisterBrokerRequestHeader",
]


@header
class DeleteTopicFromNamesrvRequestHeader:
    topic: str = field("str", required=True)


@header
class GetRouteInfoRequestHeader:
    topic: str = field("str", required=True)


@header
class RegisterBrokerRequestHeader:
    """``compressed`` is a primitive boolean; ``bodyCrc32`` is ``Integer bodyCrc32 = 0``."""

    brokerName: str = field("str", required=True)
    brokerAddr: str = field("str", required=True)
    clusterName: str = field("str", required=True)
    haServerAddr: str = field("str", required=True)
    brokerId: int = field("long", required=True)
    compressed: bool = field("bool", default=False)
    bodyCrc32: int | None = field("int", default=0)


@header
class RegisterBrokerResponseHeader:
    haServerAddr: str | None = field("str")
    masterAddr: str | None = field("str")


@header
class UnregisterBrokerRequestHeader:
    brokerName: str = field("str", required=True)
    brokerAddr: str = field("str", required=True)
    clusterName: str = field("str", required=True)
    brokerId: int = field("long", required=True)
