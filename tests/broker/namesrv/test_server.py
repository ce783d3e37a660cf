"""A real NameServer on 127.0.0.1 (port 0), a broker registering through BrokerOuterAPI,
and clients asking it what real RocketMQ clients ask."""

from __future__ import annotations

import struct

import pytest
import trio

from trocket.cli_broker import run_namesrv
from trocket.broker.namesrv import NameServer, NamesrvConfig
from trocket.broker.outer_api import BROKER_VERSION, BrokerOuterAPI, BrokerOuterAPIError, topic_config_wrapper_of
from trocket.codecs.bodies.namesrv import (
    ClusterInfo,
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
)
from trocket.codecs.bodies.route import TopicRouteData
from trocket.codecs.command import LanguageCode, RemotingCommand
from trocket.codecs.serialize import encode_command
from trocket.remoting import ClientConfig, RemotingClient

from ...waiting import wait_until

BROKER = "127.0.0.1:10911"
HA = "127.0.0.1:10912"


def config(**kw) -> NamesrvConfig:
    kw.setdefault("listen_port", 0)
    return NamesrvConfig(**kw)


def topics(counter: int = 1) -> TopicConfigSerializeWrapper:
    """What a 4.9.8 broker registers: its defaults, its topics, and the retry topic a
    consumer's heartbeat (or send-back) created."""
    return TopicConfigSerializeWrapper.of(
        [
            TopicConfig("TBW102", 8, 8, 7),
            TopicConfig("SELF_TEST_TOPIC", 1, 1),
            TopicConfig("PeerTopic", 4, 4),
            TopicConfig("%RETRY%G", 1, 1),
        ],
        counter=counter,
        timestamp=1700000000000,
    )


async def route(client: RemotingClient, ns: NameServer, topic: str, **kw) -> RemotingCommand:
    return await client.invoke_sync(ns.address, RemotingCommand.request(105, ext_fields={"topic": topic}, **kw), 3)


async def register(api: BrokerOuterAPI, counter: int = 1, **kw):
    kw.setdefault("broker_addr", BROKER)
    kw.setdefault("broker_name", "broker-a")
    kw.setdefault("broker_id", 0)
    return await api.register_broker_all(
        "DefaultCluster", kw.pop("broker_addr"), kw.pop("broker_name"), kw.pop("broker_id"), HA,
        kw.pop("wrapper", None) or topics(counter), **kw,
    )


@pytest.fixture
async def ns():
    async with NameServer(config()) as server:
        yield server


@pytest.fixture
async def client():
    async with RemotingClient(ClientConfig()) as c:
        yield c


@pytest.fixture
async def broker_client():
    """The broker's own remoting client (its connection carries the registration)."""
    async with RemotingClient(ClientConfig()) as c:
        yield c


@pytest.fixture
def api(broker_client, ns):
    return BrokerOuterAPI(broker_client, ns.address)


ROUTE_PEER = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)


async def test_register_then_route_body_is_exact(ns, api, client):
    results = await register(api)
    assert len(results) == 1
    assert results[0].master_addr is None and results[0].kv_table == {}
    response = await route(client, ns, "PeerTopic")
    assert response.code == 0
    assert response.body == ROUTE_PEER
    # the header a real client reads: JSON, extFields present, no remark
    frame = encode_command(response)
    header = (
        b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":%d,'
        b'"serializeTypeCurrentRPC":"JSON","version":409}' % response.opaque
    )
    assert frame == struct.pack(">ii", 4 + len(header) + len(ROUTE_PEER), len(header)) + header + ROUTE_PEER


async def test_cpp_style_request_gets_the_same_answer(ns, api, client):
    await register(api)
    response = await route(
        client, ns, "PeerTopic", language=LanguageCode.CPP, version=63,
    )
    assert response.code == 0 and response.body == ROUTE_PEER


async def test_unknown_topic_is_topic_not_exist(ns, api, client):
    await register(api)
    response = await route(client, ns, "NoSuchTopic")
    assert response.code == 17
    assert response.remark == (
        "No topic route info in name server for the topic: NoSuchTopic\n"
        "See http://rocketmq.apache.org/docs/faq/ for further details."
    )
    assert response.body == b""
    assert response.ext_fields == {}


async def test_retry_and_default_topic_routes(ns, api, client):
    await register(api)
    retry = TopicRouteData.from_body((await route(client, ns, "%RETRY%G")).body)
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in retry.queue_datas] == [
        ("broker-a", 1, 1, 6)
    ]
    assert retry.broker_datas[0].master_addr == BROKER
    tbw = TopicRouteData.from_body((await route(client, ns, "TBW102")).body)
    assert tbw.queue_datas[0].perm == 7 and tbw.queue_datas[0].write_queue_nums == 8
    # a retry topic the broker created later (new data version) is routed after it re-registers
    assert (await route(client, ns, "%RETRY%H")).code == 17
    later = topics(counter=2)
    later.topic_config_table["%RETRY%H"] = TopicConfig("%RETRY%H", 1, 1)
    await register(api, wrapper=later)
    assert (await route(client, ns, "%RETRY%H")).code == 0


async def test_cluster_info_and_topic_list(ns, api, client):
    await register(api)
    await register(api, broker_addr="127.0.0.1:20911", broker_name="broker-b")
    response = await client.invoke_sync(ns.address, RemotingCommand.request(106), 3)
    assert response.code == 0
    assert response.body == (
        b'{"brokerAddrTable":{"broker-b":{"brokerAddrs":{0:"127.0.0.1:20911"},"brokerName":"broker-b",'
        b'"cluster":"DefaultCluster"},"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-b","broker-a"]}}'
    )
    info = ClusterInfo.from_body(response.body)
    assert set(info.broker_addr_table) == {"broker-a", "broker-b"}
    response = await client.invoke_sync(ns.address, RemotingCommand.request(206), 3)
    assert response.code == 0
    assert set(TopicList.from_body(response.body).topic_list) == {"TBW102", "SELF_TEST_TOPIC", "PeerTopic", "%RETRY%G"}
    # both brokers serve PeerTopic, in HashMap order of their names
    peer = TopicRouteData.from_body((await route(client, ns, "PeerTopic")).body)
    assert [b.broker_name for b in peer.broker_datas] == ["broker-b", "broker-a"]


async def test_all_topic_list_can_be_disabled(client):
    async with NameServer(config(enable_all_topic_list=False)) as ns:
        response = await client.invoke_sync(ns.address, RemotingCommand.request(206), 3)
        assert (response.code, response.remark) == (1, "disable")


async def test_unregister(ns, api, client):
    await register(api)
    await api.unregister_broker_all("DefaultCluster", BROKER, "broker-a", 0)
    assert (await route(client, ns, "PeerTopic")).code == 17
    info = ClusterInfo.from_body((await client.invoke_sync(ns.address, RemotingCommand.request(106), 3)).body)
    assert info == ClusterInfo()


async def test_broker_silent_past_the_expiry_is_dropped(client, broker_client, autojump_clock):
    async with NameServer(config(broker_expiry=0.3, scan_interval=0.05)) as ns:
        api = BrokerOuterAPI(broker_client, ns.address)
        await register(api)
        assert (await route(client, ns, "PeerTopic")).code == 0
        # re-registering keeps it alive past one expiry period
        for _ in range(4):
            await trio.sleep(0.1)  # logical time (autojump): the expiry is what this checks
            await register(api)
        assert (await route(client, ns, "PeerTopic")).code == 0
        await wait_until(lambda: not ns.route_info.broker_live_table, 5)
        assert (await route(client, ns, "PeerTopic")).code == 17
        # the name server closed the broker's connection, as Java's scan does
        await wait_until(lambda: broker_client.connection_for(ns.address) is None, 5)
        # and the broker comes back with its next registration
        await register(api)
        assert (await route(client, ns, "PeerTopic")).code == 0


async def test_scan_with_a_fake_now(ns, api, client):
    await register(api)
    rim = ns.route_info
    assert rim.scan_not_active(trio.current_time() + 119) == []
    assert rim.scan_not_active(trio.current_time() + 121) == [BROKER]
    assert (await route(client, ns, "PeerTopic")).code == 17


async def test_broker_connection_closing_drops_its_routes(ns, api, broker_client, client):
    await register(api)
    assert (await route(client, ns, "PeerTopic")).code == 0
    broker_client.close_connection(ns.address)
    await wait_until(lambda: not ns.route_info.broker_live_table, 5)
    assert (await route(client, ns, "PeerTopic")).code == 17
    # a client's connection closing does not
    await register(api)
    closed = ns.remoting.stats.connections_closed
    client.close_connection(ns.address)
    await wait_until(lambda: ns.remoting.stats.connections_closed > closed, 5)  # the name server saw it close
    assert BROKER in ns.route_info.broker_live_table


async def test_malformed_register_body_is_an_error_and_the_connection_stays(ns, api, broker_client, client):
    await register(api)
    conn = broker_client.connection_for(ns.address)
    header_ext = {
        "brokerName": "broker-x", "brokerAddr": "127.0.0.1:30911", "clusterName": "DefaultCluster",
        "haServerAddr": "", "brokerId": "0", "compressed": "false", "bodyCrc32": "0",
    }
    for body in (b"{nope", b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"x"}}}}'):
        request = RemotingCommand.request(103, ext_fields=dict(header_ext), body=body, version=BROKER_VERSION)
        response = await broker_client.invoke_sync(ns.address, request, 3)
        assert response.code == 1
        assert response.remark.startswith("Failed to decode RegisterBrokerBody: BodyDecodeError: ")
    # compressed flag on a JSON body
    request = RemotingCommand.request(
        103, ext_fields=dict(header_ext, compressed="true"), body=b"{}", version=BROKER_VERSION
    )
    assert (await broker_client.invoke_sync(ns.address, request, 3)).code == 1
    # a CRC that does not match
    request = RemotingCommand.request(103, ext_fields=dict(header_ext, bodyCrc32="12345"), body=b"{}", version=BROKER_VERSION)
    response = await broker_client.invoke_sync(ns.address, request, 3)
    assert (response.code, response.remark) == (1, "crc32 not match")
    # a header missing a required field
    request = RemotingCommand.request(103, ext_fields={"brokerName": "x"}, version=BROKER_VERSION)
    response = await broker_client.invoke_sync(ns.address, request, 3)
    assert response.code == 1 and "brokerAddr" in response.remark
    # nothing registered, same connection, the real broker still routed
    assert "broker-x" not in ns.route_info.broker_addr_table
    assert broker_client.connection_for(ns.address) is conn and conn.is_active
    assert (await route(broker_client, ns, "PeerTopic")).body == ROUTE_PEER
    assert BROKER in ns.route_info.broker_live_table


async def test_bad_route_request_and_unknown_code(ns, client):
    response = await client.invoke_sync(ns.address, RemotingCommand.request(105, ext_fields={}), 3)
    assert response.code == 1 and "topic" in response.remark
    response = await client.invoke_sync(ns.address, RemotingCommand.request(12345), 3)
    assert response.code == 3  # REQUEST_CODE_NOT_SUPPORTED


async def test_compressed_registration_and_old_brokers(ns, api, client, broker_client):
    await register(api, compressed=True)
    assert (await route(client, ns, "PeerTopic")).body == ROUTE_PEER
    # a broker older than V3_0_11 sends the bare TopicConfigSerializeWrapper
    body = topics().to_body()
    ext = {
        "brokerName": "broker-old", "brokerAddr": "127.0.0.1:40911", "clusterName": "DefaultCluster",
        "haServerAddr": "", "brokerId": "0",
    }
    response = await client.invoke_sync(ns.address, RemotingCommand.request(103, ext_fields=ext, body=body, version=30), 3)
    assert response.code == 0
    peer = TopicRouteData.from_body((await route(client, ns, "PeerTopic")).body)
    assert {b.broker_name for b in peer.broker_datas} == {"broker-a", "broker-old"}


async def test_slave_registration_learns_its_master(ns, api, client):
    await register(api)
    results = await register(api, broker_addr="127.0.0.1:10921", broker_id=1)
    assert results[0].master_addr == BROKER
    assert results[0].ha_server_addr == HA
    peer = TopicRouteData.from_body((await route(client, ns, "PeerTopic")).body)
    assert peer.broker_datas[0].broker_addrs == {0: BROKER, 1: "127.0.0.1:10921"}


async def test_register_with_several_name_servers_one_dead(broker_client, client):
    async with NameServer(config()) as ns1, NameServer(config()) as ns2:
        dead = NameServer(config())
        async with dead:
            dead_addr = dead.address
        api = BrokerOuterAPI(broker_client, f"{ns1.address};{dead_addr};{ns2.address}")
        with trio.fail_after(5):
            results = await register(api, timeout=2)
        assert len(results) == 2
        for ns in (ns1, ns2):
            assert (await route(client, ns, "PeerTopic")).body == ROUTE_PEER
        # unregister goes on past the dead one too
        await api.unregister_broker_all("DefaultCluster", BROKER, "broker-a", 0, timeout=1)
        for ns in (ns1, ns2):
            assert (await route(client, ns, "PeerTopic")).code == 17


async def test_oneway_registration(ns, api, client):
    assert await register(api, oneway=True) == []
    await wait_until(lambda: BROKER in ns.route_info.broker_live_table, 5)
    assert (await route(client, ns, "PeerTopic")).body == ROUTE_PEER


async def test_register_error_answer_raises_in_register_broker(ns, api):
    from trocket.codecs.headers.namesrv import RegisterBrokerRequestHeader

    header = RegisterBrokerRequestHeader(
        brokerName="b", brokerAddr="h:1", clusterName="C", haServerAddr="", brokerId=0, bodyCrc32=99
    )
    with pytest.raises(BrokerOuterAPIError) as info:
        await api.register_broker(ns.address, header, b"{}", 3)
    assert info.value.code == 1 and info.value.remark == "crc32 not match"


async def test_query_data_version(ns, api, client):
    await register(api, counter=3)
    ext = {"brokerName": "broker-a", "brokerAddr": BROKER, "clusterName": "DefaultCluster", "brokerId": "0"}
    same = DataVersion(1700000000000, 3).to_body()
    response = await client.invoke_sync(ns.address, RemotingCommand.request(322, ext_fields=ext, body=same), 3)
    assert response.code == 0 and response.ext_fields == {"changed": "false"}
    assert DataVersion.from_body(response.body) == DataVersion(1700000000000, 3)
    newer = DataVersion(1700000000000, 4).to_body()
    response = await client.invoke_sync(ns.address, RemotingCommand.request(322, ext_fields=ext, body=newer), 3)
    assert response.ext_fields == {"changed": "true"}


async def test_wrapper_from_the_store_topic_config_manager(tmp_path, ns, api, client):
    from trocket.broker.store.topic_config import TopicConfigManager

    mgr = TopicConfigManager.open(str(tmp_path))
    mgr.create_in_send_back("%RETRY%G", 1, 6)
    wrapper = topic_config_wrapper_of(mgr)
    assert wrapper.data_version == DataVersion(mgr.data_version_timestamp, mgr.data_version_counter)
    await register(api, wrapper=wrapper)
    for topic in ("TBW102", "%RETRY%G", "SELF_TEST_TOPIC", "broker-a", "DefaultCluster"):
        assert (await route(client, ns, topic)).code == 0, topic


async def test_run_namesrv_until_cancelled_logs_its_shutdown(client, caplog):
    """``trocket namesrv``'s runner: serves, and says when it has shut down."""
    caplog.set_level("INFO", logger="trocket.broker")
    async with trio.open_nursery() as nursery:
        ns = await nursery.start(run_namesrv, ("127.0.0.1", 0))
        assert ns.port > 0 and ns.address == f"127.0.0.1:{ns.port}"
        assert (await route(client, ns, "T")).code == 17
        nursery.cancel_scope.cancel()
    messages = [r.getMessage() for r in caplog.records]
    assert f"The Name Server {ns.address} shut down" in messages


def test_config_defaults():
    cfg = NamesrvConfig()
    assert (cfg.listen_host, cfg.listen_port, cfg.broker_expiry, cfg.scan_interval) == ("127.0.0.1", 9876, 120.0, 10.0)
    with pytest.raises(ValueError):
        NamesrvConfig(broker_expiry=0)


async def test_delete_topic_in_namesrv_drops_the_route(ns, api, client):
    await register(api)
    assert (await route(client, ns, "PeerTopic")).code == 0
    request = RemotingCommand.request(216, ext_fields={"topic": "PeerTopic"})
    response = await client.invoke_sync(ns.address, request, 3)
    assert response.code == 0 and response.remark is None and response.ext_fields == {}
    assert (await route(client, ns, "PeerTopic")).code == 17
    assert "PeerTopic" not in ns.route_info.get_all_topic_list().topic_list
    # the same registration again (same data version) does not bring it back, as Java
    await register(api)
    assert (await route(client, ns, "PeerTopic")).code == 17
    # an unknown topic: SUCCESS too; a request without a topic: SYSTEM_ERROR
    response = await client.invoke_sync(ns.address, RemotingCommand.request(216, ext_fields={"topic": "Nope"}), 3)
    assert response.code == 0
    response = await client.invoke_sync(ns.address, RemotingCommand.request(216, ext_fields={}), 3)
    assert response.code == 1 and "topic" in response.remark
