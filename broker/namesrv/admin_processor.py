"""The name server's administration codes (RocketMQ 4.9.8's ``DefaultRequestProcessor``):

=====  ===================================  ==========================================
code   request                              answer
=====  ===================================  ==========================================
100    PUT_KV_CONFIG                        SUCCESS (persisted in ``kvConfig.json``)
101    GET_KV_CONFIG                        SUCCESS + ``value``, or QUERY_NOT_FOUND
                                            "No config item, Namespace: N Key: K"
102    DELETE_KV_CONFIG                     SUCCESS (a missing key too)
219    GET_KVLIST_BY_NAMESPACE              SUCCESS + KVTable, or QUERY_NOT_FOUND
                                            "No config item, Namespace: N"
224    GET_TOPICS_BY_CLUSTER                SUCCESS + TopicList (an unknown cluster:
                                            an empty one)
304    GET_SYSTEM_TOPIC_LIST_FROM_NS        SUCCESS + TopicList (cluster and broker
                                            names, a broker's address)
311    GET_UNIT_TOPIC_LIST                  SUCCESS + TopicList: the unit topics
312    GET_HAS_UNIT_SUB_TOPIC_LIST          SUCCESS + TopicList: the topics a unit-mode
                                            group subscribes
313    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST   SUCCESS + TopicList: those of 312 that are
                                            not unit topics (311-313: ``topicSysFlag``
                                            of a topic's first broker, as Java reads it)
205    WIPE_WRITE_PERM_OF_BROKER            SUCCESS + ``wipeTopicCount``: the broker's
                                            queues lose their write bit in every route
327    ADD_WRITE_PERM_OF_BROKER             SUCCESS + ``addTopicCount``: read + write again
319    GET_NAMESRV_CONFIG                   SUCCESS + ``key=value`` lines
318    UPDATE_NAMESRV_CONFIG                SUCCESS; NO_PERMISSION for a black-listed
                                            key or one that cannot change live,
                                            SYSTEM_ERROR for an unknown key or value
=====  ===================================  ==========================================

205/327 are how an operator drains a broker (mqadmin ``wipeWritePerm``): producers stop
choosing its queues at their next route refresh while consumers drain it; a broker that
registers again restores its own permissions, as with Java. UPDATE_NAMESRV_CONFIG changes
``orderMessageEnable`` (routes then carry the topic's ``ORDER_TOPIC_CONFIG`` entry),
``productEnvName`` and ``clusterTest`` (kept, as Java's); the other keys are fixed while
the name server runs. Changes are written to the name server's config file when it has
one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs
import trio

from trocket.codecs.bodies.namesrv import KVTable
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers.config import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from trocket.remoting import Connection, RemotingEndpoint

from ..config import parse_properties, update_properties_file
from .kv_config import KVConfigManager
from .replies import answer, decode_request_header

if TYPE_CHECKING:
    from .route_info import RouteInfoManager

__all__ = ["NamesrvAdminProcessor", "NamesrvSettings", "NAMESRV_BLACK_LIST", "NAMESRV_LIVE_KEYS"]

log = logging.getLogger(__name__)

#: ``NamesrvConfig.configBlackList``'s default
NAMESRV_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath"})
#: the keys UPDATE_NAMESRV_CONFIG changes -> NamesrvSettings' field
NAMESRV_LIVE_KEYS = {"orderMessageEnable": "order_message_enable", "productEnvName": "product_env_name",
                     "clusterTest": "cluster_test"}


@attrs.define(slots=True)
class NamesrvSettings:
    """What a name server shows in GET_NAMESRV_CONFIG and changes with UPDATE_NAMESRV_CONFIG."""

    listen_port: int = 9876
    kv_config_path: str | None = None
    config_store_path: str | None = None
    product_env_name: str = "center"
    cluster_test: bool = False
    order_message_enable: bool = False

    def properties(self) -> dict[str, str]:
        b = lambda v: "true" if v else "false"  # noqa: E731
        return {
            "listenPort": str(self.listen_port), "kvConfigPath": self.kv_config_path or "",
            "configStorePath": self.config_store_path or "", "productEnvName": self.product_env_name,
            "clusterTest": b(self.cluster_test), "orderMessageEnable": b(self.order_message_enable),
        }


class _Refused(Exception):
    pass


class NamesrvAdminProcessor:
    def __init__(self, route_info: RouteInfoManager, kv: KVConfigManager, settings: NamesrvSettings) -> None:
        self.route_info = route_info
        self.kv = kv
        self.settings = settings

    def register_on(self, endpoint: RemotingEndpoint) -> None:
        for code, handler in (
            (RequestCode.PUT_KV_CONFIG, self.put_kv_config),
            (RequestCode.GET_KV_CONFIG, self.get_kv_config),
            (RequestCode.DELETE_KV_CONFIG, self.delete_kv_config),
            (RequestCode.GET_KVLIST_BY_NAMESPACE, self.get_kv_list_by_namespace),
            (RequestCode.GET_TOPICS_BY_CLUSTER, self.get_topics_by_cluster),
            (RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, self.get_system_topic_list),
            (RequestCode.GET_UNIT_TOPIC_LIST, self.get_unit_topic_list),
            (RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, self.get_has_unit_sub_topic_list),
            (RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, self.get_has_unit_sub_un_unit_topic_list),
            (RequestCode.WIPE_WRITE_PERM_OF_BROKER, self.wipe_write_perm_of_broker),
            (RequestCode.ADD_WRITE_PERM_OF_BROKER, self.add_write_perm_of_broker),
            (RequestCode.GET_NAMESRV_CONFIG, self.get_namesrv_config),
            (RequestCode.UPDATE_NAMESRV_CONFIG, self.update_namesrv_config),
        ):
            endpoint.register_processor(code, handler)

    # -- KV config ---------------------------------------------------------------------

    async def put_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(PutKVConfigRequestHeader, request)
        await trio.to_thread.run_sync(self.kv.put, header.namespace, header.key, header.value)
        return answer(ResponseCode.SUCCESS)

    async def get_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetKVConfigRequestHeader, request)
        value = self.kv.get(header.namespace, header.key)
        if value is None:
            return answer(ResponseCode.QUERY_NOT_FOUND,
                             f"No config item, Namespace: {header.namespace} Key: {header.key}")
        return answer(ResponseCode.SUCCESS, header=GetKVConfigResponseHeader(value=value))

    async def delete_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(DeleteKVConfigRequestHeader, request)
        await trio.to_thread.run_sync(self.kv.delete, header.namespace, header.key)
        return answer(ResponseCode.SUCCESS)

    async def get_kv_list_by_namespace(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetKVListByNamespaceRequestHeader, request)
        table = self.kv.namespace(header.namespace)
        if table is None:
            return answer(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")
        return answer(ResponseCode.SUCCESS, body=KVTable(table).to_body())

    # -- topics and permissions ----------------------------------------------------------

    async def get_topics_by_cluster(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetTopicsByClusterRequestHeader, request)
        return answer(ResponseCode.SUCCESS, body=self.route_info.get_topics_by_cluster(header.cluster).to_body())

    async def get_system_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return answer(ResponseCode.SUCCESS, body=self.route_info.get_system_topic_list().to_body())

    async def get_unit_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return answer(ResponseCode.SUCCESS, body=self.route_info.get_unit_topics().to_body())

    async def get_has_unit_sub_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return answer(ResponseCode.SUCCESS, body=self.route_info.get_has_unit_sub_topic_list().to_body())

    async def get_has_unit_sub_un_unit_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return answer(ResponseCode.SUCCESS, body=self.route_info.get_has_unit_sub_un_unit_topic_list().to_body())

    async def wipe_write_perm_of_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(WipeWritePermOfBrokerRequestHeader, request)
        count = self.route_info.wipe_write_perm_of_broker(header.brokerName)
        log.info("wipe write perm of broker[%s], client: %s, %d", header.brokerName, conn.remote_address, count)
        return answer(ResponseCode.SUCCESS, header=WipeWritePermOfBrokerResponseHeader(wipeTopicCount=count))

    async def add_write_perm_of_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(AddWritePermOfBrokerRequestHeader, request)
        count = self.route_info.add_write_perm_of_broker(header.brokerName)
        log.info("add write perm of broker[%s], client: %s, %d", header.brokerName, conn.remote_address, count)
        return answer(ResponseCode.SUCCESS, header=AddWritePermOfBrokerResponseHeader(addTopicCount=count))

    # -- the name server's configuration ---------------------------------------------------

    async def get_namesrv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in self.settings.properties().items())
        return answer(ResponseCode.SUCCESS, body=text.encode("utf-8"))

    async def update_namesrv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        log.info("updateConfig called by %s", conn.remote_address)
        try:
            changes = self._parse((request.body or b"").decode("utf-8"))
        except _Refused as exc:
            return answer(ResponseCode.NO_PERMISSION, str(exc))
        except (UnicodeDecodeError, ValueError) as exc:
            return answer(ResponseCode.SYSTEM_ERROR, str(exc))
        for field, value in changes.values():
            setattr(self.settings, field, value)
        shown = self.settings.properties()
        path = self.settings.config_store_path
        if path:
            await trio.to_thread.run_sync(update_properties_file, path, {k: shown[k] for k in changes})
        return answer(ResponseCode.SUCCESS)

    @staticmethod
    def _parse(text: str) -> dict[str, tuple[str, object]]:
        entries = parse_properties(text)
        if not entries:
            raise ValueError("no key=value in the request")
        out: dict[str, tuple[str, object]] = {}
        for _lineno, key, value in entries:
            if key in NAMESRV_BLACK_LIST:
                raise _Refused("Can not update config in black list.")
            field = NAMESRV_LIVE_KEYS.get(key)
            if field is None:
                if key in NamesrvSettings().properties():
                    raise _Refused(f"{key} cannot change while the name server runs; the keys that can: "
                                   f"{', '.join(sorted(NAMESRV_LIVE_KEYS))}")
                raise ValueError(f"{key}: unknown key")
            if field == "product_env_name":
                out[key] = (field, value.strip())
            else:
                text_value = value.strip().lower()
                if text_value not in ("true", "false"):
                    raise ValueError(f"{key}: expected true or false, got {value!r}")
                out[key] = (field, text_value == "true")
        return out
