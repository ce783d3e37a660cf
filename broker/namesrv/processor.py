"""The name server's request processors (RocketMQ 4.9.8's ``DefaultRequestProcessor``).

=====  ===================================  ==========================================
code   request                              answer
=====  ===================================  ==========================================
103    REGISTER_BROKER                      SUCCESS + haServerAddr/masterAddr (a slave's
                                            master); SYSTEM_ERROR "crc32 not match" or
                                            for a header/body that does not decode
104    UNREGISTER_BROKER                    SUCCESS
105    GET_ROUTEINFO_BY_TOPIC               SUCCESS + TopicRouteData body, or
                                            TOPIC_NOT_EXIST (17) with Java's remark
106    GET_BROKER_CLUSTER_INFO              SUCCESS + ClusterInfo body
206    GET_ALL_TOPIC_LIST_FROM_NAMESERVER   SUCCESS + TopicList body
216    DELETE_TOPIC_IN_NAMESRV              SUCCESS (the topic's route is gone; an
                                            unknown topic too)
322    QUERY_DATA_VERSION                   SUCCESS + ``changed`` + the name server's
                                            DataVersion of that broker (if any)
=====  ===================================  ==========================================

The administration codes (KV config, permissions, the name server's configuration) are
:mod:`.admin_processor`'s; other codes get remoting's REQUEST_CODE_NOT_SUPPORTED. Every
answer carries an ``extFields`` object (real clients need one) and the name server's
version (:mod:`.replies`); errors are answers, never a closed connection.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from trocket.codecs.bodies.fastjson import BodyDecodeError
from trocket.codecs.bodies.namesrv import DataVersion, KVTable, RegisterBrokerBody, TopicConfigSerializeWrapper
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers.namesrv import (
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from trocket.codecs.message.crc import body_crc

from trocket.remoting import Connection, RemotingEndpoint

from .kv_config import NAMESPACE_ORDER_TOPIC_CONFIG
from .replies import NAMESRV_VERSION, answer, decode_request_header, error_answer
from .route_info import RouteInfoManager

if TYPE_CHECKING:
    from .admin_processor import NamesrvSettings
    from .kv_config import KVConfigManager

__all__ = [
    "NamesrvProcessor",
    "NO_TOPIC_ROUTE_REMARK",
    "FAQ_APPLY_TOPIC_URL",
    "V3_0_11",
    "NAMESRV_VERSION",
    "topic_not_exist_remark",
]

log = logging.getLogger(__name__)

#: ``FAQUrl.APPLY_TOPIC_URL`` (4.9.8).
FAQ_APPLY_TOPIC_URL = "http://rocketmq.apache.org/docs/faq/"
NO_TOPIC_ROUTE_REMARK = "No topic route info in name server for the topic: "

#: ``MQVersion.Version.V3_0_11.ordinal()``: brokers from this version on send a
#: RegisterBrokerBody (with filter servers); older ones a bare TopicConfigSerializeWrapper.
V3_0_11 = 37


def topic_not_exist_remark(topic: str) -> str:
    """The remark of a TOPIC_NOT_EXIST answer: Java's text plus ``FAQUrl.suggestTodo``."""
    return f"{NO_TOPIC_ROUTE_REMARK}{topic}\nSee {FAQ_APPLY_TOPIC_URL} for further details."


class NamesrvProcessor:
    """The processors for one :class:`RouteInfoManager`; :meth:`register_on` installs
    them on a remoting endpoint."""

    def __init__(
        self, route_info: RouteInfoManager, *, enable_all_topic_list: bool = True,
        kv: KVConfigManager | None = None, settings: NamesrvSettings | None = None,
    ) -> None:
        self.route_info = route_info
        self.enable_all_topic_list = enable_all_topic_list
        #: the KV configuration: a registering broker gets its ORDER_TOPIC_CONFIG namespace
        self.kv = kv
        #: ``orderMessageEnable``: routes carry their topic's ORDER_TOPIC_CONFIG entry
        self.settings = settings

    def register_on(self, endpoint: RemotingEndpoint) -> None:
        endpoint.register_processor(RequestCode.REGISTER_BROKER, self.register_broker)
        endpoint.register_processor(RequestCode.UNREGISTER_BROKER, self.unregister_broker)
        endpoint.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, self.get_route_info_by_topic)
        endpoint.register_processor(RequestCode.GET_BROKER_CLUSTER_INFO, self.get_broker_cluster_info)
        endpoint.register_processor(
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self.get_all_topic_list_from_nameserver
        )
        endpoint.register_processor(RequestCode.QUERY_DATA_VERSION, self.query_broker_topic_config)
        endpoint.register_processor(RequestCode.DELETE_TOPIC_IN_NAMESRV, self.delete_topic_in_namesrv)

    # -- 216 ---------------------------------------------------------------------------

    async def delete_topic_in_namesrv(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """``deleteTopicInNamesrv``: drop the topic's queue datas (a broker registering
        it again brings it back, as with Java)."""
        header = decode_request_header(DeleteTopicFromNamesrvRequestHeader, request)
        self.route_info.delete_topic(header.topic)
        return answer(ResponseCode.SUCCESS)

    # -- 103 ---------------------------------------------------------------------------

    async def register_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(RegisterBrokerRequestHeader, request)
        body = request.body or b""
        if header.bodyCrc32 and body_crc(body) != header.bodyCrc32:
            log.warning("receive registerBroker request, crc32 not match, from %s", conn.remote_address)
            return answer(ResponseCode.SYSTEM_ERROR, "crc32 not match")

        filter_servers: list[str] | None = None
        try:
            if request.version >= V3_0_11:
                if body:
                    reg = RegisterBrokerBody.from_body(body, header.compressed)
                else:
                    reg = RegisterBrokerBody()
                wrapper = reg.topic_config_wrapper
                filter_servers = reg.filter_server_list
            else:
                wrapper = TopicConfigSerializeWrapper.from_body(body) if body else TopicConfigSerializeWrapper()
        except BodyDecodeError as exc:
            log.warning("REGISTER_BROKER from %s: bad body: %s", conn.remote_address, exc)
            return error_answer(exc, "Failed to decode RegisterBrokerBody")

        result = self.route_info.register_broker(
            header.clusterName,
            header.brokerAddr,
            header.brokerName,
            header.brokerId,
            header.haServerAddr,
            wrapper,
            filter_servers,
            conn,
        )
        # the body: the order-topic KV namespace, when there is one (Java's)
        order = self.kv.namespace(NAMESPACE_ORDER_TOPIC_CONFIG) if self.kv is not None else None
        return answer(
            ResponseCode.SUCCESS,
            header=RegisterBrokerResponseHeader(haServerAddr=result.ha_server_addr, masterAddr=result.master_addr),
            body=KVTable(order).to_body() if order is not None else b"",
        )

    # -- 104 ---------------------------------------------------------------------------

    async def unregister_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(UnregisterBrokerRequestHeader, request)
        self.route_info.unregister_broker(header.clusterName, header.brokerAddr, header.brokerName, header.brokerId)
        return answer(ResponseCode.SUCCESS)

    # -- 105 ---------------------------------------------------------------------------

    async def get_route_info_by_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetRouteInfoRequestHeader, request)
        route = self.route_info.pickup_topic_route_data(header.topic)
        if route is None:
            return answer(ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(header.topic))
        if self.settings is not None and self.settings.order_message_enable and self.kv is not None:
            route.order_topic_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, header.topic)
        return answer(ResponseCode.SUCCESS, body=route.to_body())

    # -- 106, 206 ----------------------------------------------------------------------

    async def get_broker_cluster_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return answer(ResponseCode.SUCCESS, body=self.route_info.get_all_cluster_info().to_body())

    async def get_all_topic_list_from_nameserver(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if not self.enable_all_topic_list:
            return answer(ResponseCode.SYSTEM_ERROR, "disable")
        return answer(ResponseCode.SUCCESS, body=self.route_info.get_all_topic_list().to_body())

    # -- 322 ---------------------------------------------------------------------------

    async def query_broker_topic_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """``queryBrokerTopicConfig``: has the broker's topic-config version changed
        since it last registered? An unchanged answer also counts as a heartbeat."""
        ext = request.ext_fields or {}
        broker_addr = ext.get("brokerAddr")
        if broker_addr is None:
            return answer(ResponseCode.SYSTEM_ERROR, "QueryDataVersionRequestHeader.brokerAddr: missing")
        try:
            version = DataVersion.from_body(request.body) if request.body else DataVersion()
        except BodyDecodeError as exc:
            return error_answer(exc)
        route_info = self.route_info
        changed = route_info.is_broker_topic_config_changed(str(broker_addr), version)
        if not changed:
            route_info.update_broker_info_update_timestamp(str(broker_addr))
        current = route_info.query_broker_topic_config(str(broker_addr))
        response = answer(ResponseCode.SUCCESS, body=current.to_body() if current is not None else b"")
        response.ext_fields = {"changed": "true" if changed else "false"}
        return response
