"""The name server's administration codes against a real NameServer: the KV config (100,
101, 102, 219, persisted), topics by cluster (224), system topics (304), unit topics
(311-313), draining a broker's write permission (205, 327) and the name server's own
config (318, 319)."""

from __future__ import annotations

import json

from trocket.broker.namesrv import NameServer, NamesrvConfig
from trocket.codecs.bodies.namesrv import KVTable, TopicList
from trocket.codecs.bodies.route import TopicRouteData
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    AddWritePermOfBrokerRequestHeader,
    DeleteKVConfigRequestHeader,
    GetKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)

from .test_server import api, broker_client, client, register  # noqa: F401  (fixtures)


async def call(client, ns, code: int, header=None, body: bytes = b"") -> RemotingCommand:
    return await client.invoke_sync(ns.address, RemotingCommand.request(code, header, body=body), 3)


async def test_kv_config_put_get_delete_list_and_persisted(client, tmp_path):  # noqa: F811
    path = tmp_path / "kvConfig.json"
    async with NameServer(NamesrvConfig(listen_port=0, kv_config_path=str(path))) as ns:
        r = await call(client, ns, 100, PutKVConfigRequestHeader(namespace="ORDER_TOPIC_CONFIG", key="OT", value="broker-a:4"))
        assert r.code == 0
        await call(client, ns, 100, PutKVConfigRequestHeader(namespace="NS", key="k", value="v"))
        r = await call(client, ns, 101, GetKVConfigRequestHeader(namespace="NS", key="k"))
        assert (r.code, r.ext_fields["value"]) == (0, "v")
        r = await call(client, ns, 101, GetKVConfigRequestHeader(namespace="NS", key="nope"))
        assert (r.code, r.remark) == (22, "No config item, Namespace: NS Key: nope")
        r = await call(client, ns, 219, GetKVListByNamespaceRequestHeader(namespace="NS"))
        assert KVTable.from_body(r.body).table == {"k": "v"}
        r = await call(client, ns, 219, GetKVListByNamespaceRequestHeader(namespace="None"))
        assert (r.code, r.remark) == (22, "No config item, Namespace: None")
        r = await client.invoke_sync(ns.address, RemotingCommand.request(100, ext_fields={"namespace": "NS"}), 3)
        assert r.code == 1  # key and value missing: the header does not decode
        assert json.loads(path.read_text())["configTable"]["NS"] == {"k": "v"}
        r = await call(client, ns, 102, DeleteKVConfigRequestHeader(namespace="NS", key="k"))
        assert r.code == 0
        assert (await call(client, ns, 101, GetKVConfigRequestHeader(namespace="NS", key="k"))).code == 22
    # a new name server on the same file has the order-topic config
    async with NameServer(NamesrvConfig(listen_port=0, kv_config_path=str(path))) as ns:
        r = await call(client, ns, 101, GetKVConfigRequestHeader(namespace="ORDER_TOPIC_CONFIG", key="OT"))
        assert r.ext_fields["value"] == "broker-a:4"


async def test_topics_by_cluster_system_topics_and_write_permission(client, broker_client, tmp_path):  # noqa: F811
    from trocket.broker.outer_api import BrokerOuterAPI

    async with NameServer(NamesrvConfig(listen_port=0)) as ns:
        api = BrokerOuterAPI(broker_client, ns.address)
        await register(api)
        r = await call(client, ns, 224, GetTopicsByClusterRequestHeader(cluster="DefaultCluster"))
        assert sorted(TopicList.from_body(r.body).topic_list) == ["%RETRY%G", "PeerTopic", "SELF_TEST_TOPIC", "TBW102"]
        r = await call(client, ns, 224, GetTopicsByClusterRequestHeader(cluster="Other"))
        assert TopicList.from_body(r.body).topic_list == []
        r = await call(client, ns, 304)
        system = TopicList.from_body(r.body)
        assert sorted(system.topic_list) == ["DefaultCluster", "broker-a"] and system.broker_addr == "127.0.0.1:10911"

        r = await call(client, ns, 205, WipeWritePermOfBrokerRequestHeader(brokerName="broker-a"))
        assert (r.code, r.ext_fields["wipeTopicCount"]) == (0, "4")
        route = TopicRouteData.from_body((await client.invoke_sync(ns.address, RemotingCommand.request(
            105, ext_fields={"topic": "PeerTopic"}), 3)).body)
        assert route.queue_datas[0].perm == 4  # read only: producers stop choosing it
        r = await call(client, ns, 327, AddWritePermOfBrokerRequestHeader(brokerName="broker-a"))
        assert (r.code, r.ext_fields["addTopicCount"]) == (0, "4")
        route = TopicRouteData.from_body((await client.invoke_sync(ns.address, RemotingCommand.request(
            105, ext_fields={"topic": "PeerTopic"}), 3)).body)
        assert route.queue_datas[0].perm == 6
        r = await call(client, ns, 205, WipeWritePermOfBrokerRequestHeader(brokerName="nobody"))
        assert r.ext_fields["wipeTopicCount"] == "0"


async def test_namesrv_config_get_and_update(client, broker_client, tmp_path):  # noqa: F811
    from trocket.broker.outer_api import BrokerOuterAPI

    store = tmp_path / "namesrv.properties"
    store.write_text("# the operator's notes\nproductEnvName=center\n")
    async with NameServer(NamesrvConfig(listen_port=0, config_store_path=str(store))) as ns:
        r = await call(client, ns, 319)
        props = dict(line.split("=", 1) for line in r.body.decode().splitlines())
        assert props["orderMessageEnable"] == "false" and props["listenPort"] == str(ns.port)
        for body, code, remark in [
            (b"kvConfigPath=/tmp/x", 16, "Can not update config in black list."),
            (b"listenPort=1", 16, "listenPort cannot change while the name server runs"),
            (b"nope=1", 1, "nope: unknown key"),
            (b"orderMessageEnable=maybe", 1, "expected true or false"),
        ]:
            r = await call(client, ns, 318, body=body)
            assert r.code == code and remark in r.remark, (body, r.remark)
        assert (await call(client, ns, 318, body=b"orderMessageEnable=true\nproductEnvName=test\n")).code == 0
        props = dict(line.split("=", 1) for line in (await call(client, ns, 319)).body.decode().splitlines())
        assert (props["orderMessageEnable"], props["productEnvName"]) == ("true", "test")
        assert store.read_text() == "# the operator's notes\nproductEnvName=test\norderMessageEnable=true\n"
        # orderMessageEnable: a route carries its topic's ORDER_TOPIC_CONFIG entry
        await call(client, ns, 100, PutKVConfigRequestHeader(namespace="ORDER_TOPIC_CONFIG", key="PeerTopic",
                                                             value="broker-a:4"))
        await register(BrokerOuterAPI(broker_client, ns.address))
        route = TopicRouteData.from_body((await client.invoke_sync(ns.address, RemotingCommand.request(
            105, ext_fields={"topic": "PeerTopic"}), 3)).body)
        assert route.order_topic_conf == "broker-a:4"


async def test_unit_topic_lists_by_topic_sys_flag(client, broker_client):  # noqa: F811
    """311 / 312 / 313 pick topics by the ``topicSysFlag`` their broker registered: unit
    (bit 0), subscribed by a unit-mode group (bit 1), and the second without the first;
    a topic on two brokers is judged by the queue data of the broker first in Java's
    HashMap order of their names, as Java iterates them."""
    from trocket.broker.outer_api import BrokerOuterAPI
    from trocket.codecs.bodies.namesrv import TopicConfig, TopicConfigSerializeWrapper

    def wrapper(*flags: tuple[str, int]) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper.of(
            [TopicConfig(name, 4, 4, topic_sys_flag=flag) for name, flag in flags], counter=1, timestamp=1700000000000
        )

    async with NameServer(NamesrvConfig(listen_port=0)) as ns:
        await register(BrokerOuterAPI(broker_client, ns.address), wrapper=wrapper(
            ("Plain", 0), ("Unit", 1), ("UnitSub", 2), ("%RETRY%UnitG", 2), ("Both", 3), ("Mixed", 0)))
        await register(BrokerOuterAPI(broker_client, ns.address), broker_addr="127.0.0.1:10921", broker_name="broker-b",
                       wrapper=wrapper(("Mixed", 1)))  # Mixed: broker-b's flag 1 counts (first in HashMap order)
        lists = {}
        for code in (311, 312, 313):
            r = await call(client, ns, code)
            assert r.code == 0
            lists[code] = sorted(TopicList.from_body(r.body).topic_list)
        assert lists == {311: ["Both", "Mixed", "Unit"], 312: ["%RETRY%UnitG", "Both", "UnitSub"], 313: ["%RETRY%UnitG", "UnitSub"]}


#: every code whose processor decodes a custom header, and a header it cannot decode
#: (a numeric field that is not a number, or a required field missing)
BAD_HEADERS = {
    100: {"namespace": "n"}, 101: {"namespace": "n"}, 102: {"namespace": "n"}, 219: {},
    224: {}, 205: {}, 327: {}, 103: {"brokerId": "x"}, 104: {"brokerId": "x"}, 105: {}, 216: {},
}


async def test_a_header_that_does_not_decode_is_answered_as_before(client):  # noqa: F811
    """Whatever the code, a custom header that does not decode gets SYSTEM_ERROR with the
    codec error's type and text as remark, the name server's version (409) and an
    extFields object: the answer the processors built by hand before
    (broker/namesrv/replies.py's decode_request_header raises it now)."""
    from trocket.codecs.custom_header import decode_header
    from trocket.codecs.errors import CodecError

    async with NameServer(NamesrvConfig(listen_port=0)) as ns:
        assert set(BAD_HEADERS) <= set(ns.remoting.processors.by_code)
        for code, ext in BAD_HEADERS.items():
            resp = await client.invoke_sync(ns.address, RemotingCommand.request(code, ext_fields=dict(ext)), 3)
            assert (resp.code, resp.version, resp.ext_fields) == (1, 409, {}), code
            assert resp.remark.startswith("CustomHeaderError: "), (code, resp.remark)
            try:
                decode_header(_CLASS_OF[code], dict(ext))
            except CodecError as exc:
                assert resp.remark == f"{type(exc).__name__}: {exc}", code
            else:
                raise AssertionError(f"{code}: {ext} decodes")


def _class_of() -> dict[int, type]:
    from trocket.codecs.headers.config import (
        AddWritePermOfBrokerRequestHeader, DeleteKVConfigRequestHeader, GetKVConfigRequestHeader,
        GetKVListByNamespaceRequestHeader, GetTopicsByClusterRequestHeader, PutKVConfigRequestHeader,
        WipeWritePermOfBrokerRequestHeader,
    )
    from trocket.codecs.headers.namesrv import (
        DeleteTopicFromNamesrvRequestHeader, GetRouteInfoRequestHeader, RegisterBrokerRequestHeader,
        UnregisterBrokerRequestHeader,
    )

    return {
        100: PutKVConfigRequestHeader, 101: GetKVConfigRequestHeader, 102: DeleteKVConfigRequestHeader,
        219: GetKVListByNamespaceRequestHeader, 224: GetTopicsByClusterRequestHeader,
        205: WipeWritePermOfBrokerRequestHeader, 327: AddWritePermOfBrokerRequestHeader,
        103: RegisterBrokerRequestHeader, 104: UnregisterBrokerRequestHeader, 105: GetRouteInfoRequestHeader,
        216: DeleteTopicFromNamesrvRequestHeader,
    }


_CLASS_OF = _class_of()


#: The request codes Apache RocketMQ 4.9.8's name server serves (``DefaultRequestProcessor``).
JAVA_NAMESRV_CODES = (
    "ADD_WRITE_PERM_OF_BROKER", "DELETE_KV_CONFIG", "DELETE_TOPIC_IN_NAMESRV",
    "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", "GET_BROKER_CLUSTER_INFO", "GET_HAS_UNIT_SUB_TOPIC_LIST",
    "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST", "GET_KVLIST_BY_NAMESPACE", "GET_KV_CONFIG",
    "GET_NAMESRV_CONFIG", "GET_ROUTEINFO_BY_TOPIC", "GET_SYSTEM_TOPIC_LIST_FROM_NS",
    "GET_TOPICS_BY_CLUSTER", "GET_UNIT_TOPIC_LIST", "PUT_KV_CONFIG", "QUERY_DATA_VERSION",
    "REGISTER_BROKER", "UNREGISTER_BROKER", "UPDATE_NAMESRV_CONFIG", "WIPE_WRITE_PERM_OF_BROKER"
)


async def test_serves_every_code_javas_name_server_serves_and_answers_bad_input_without_a_traceback(client, caplog):  # noqa: F811
    """Each of Java's 20 name-server codes is served, and each, sent with no header and
    with bodies that are no such body, is answered with nothing logged with a traceback."""
    from trocket.codecs.codes import RequestCode

    assert len(set(JAVA_NAMESRV_CODES)) == 20
    async with NameServer(NamesrvConfig(listen_port=0)) as ns:
        for name in JAVA_NAMESRV_CODES:
            for body in (b"", b"garbage", b"{}", bytes(64)):
                r = await call(client, ns, int(getattr(RequestCode, name)), body=body)
                assert r.is_response and not (r.code == 3 and "not supported" in (r.remark or "")), name
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert not tracebacks, [(r.getMessage(), r.exc_info[1]) for r in tracebacks]
