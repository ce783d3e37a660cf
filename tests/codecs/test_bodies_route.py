"""Route and name server bodies: exact bytes as RocketMQ 4.9.8 writes them, lenient reads."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trocket.codecs.bodies.fastjson import BodyDecodeError
from trocket.codecs.bodies.namesrv import (
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    RegisterBrokerResult,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
)
from trocket.codecs.bodies.route import BrokerData, QueueData, TopicRouteData, java_map_order


def java_bucket(s: str, capacity: int) -> int:
    """An independent String.hashCode -> HashMap bucket, to check the orders against."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def single_route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})],
    )


ROUTE_BODY = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)


# -- TopicRouteData ------------------------------------------------------------------------


def test_route_body_exactly_as_the_java_name_server_writes_it():
    assert single_route().to_body() == ROUTE_BODY


def test_route_body_with_master_slave_order_conf_and_filter_servers():
    route = TopicRouteData(
        queue_datas=[QueueData("broker-a", 8, 8, 7, 0)],
        broker_datas=[BrokerData("C", "broker-a", {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"})],
        filter_server_table={"10.0.0.1:10911": ["10.0.0.1:30000"]},
        order_topic_conf="broker-a:8",
    )
    assert route.to_body() == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"C"}],'
        b'"filterServerTable":{"10.0.0.1:10911":["10.0.0.1:30000"]},'
        b'"orderTopicConf":"broker-a:8",'
        b'"queueDatas":[{"brokerName":"broker-a","perm":7,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
    )


def test_route_reads_fastjson_and_plain_json():
    assert TopicRouteData.from_body(ROUTE_BODY) == single_route()
    plain = ROUTE_BODY.replace(b"{0:", b'{"0":')
    assert json.loads(plain)  # really plain JSON
    assert TopicRouteData.from_body(plain) == single_route()
    assert TopicRouteData.from_body(plain.decode()) == single_route()


def test_route_reads_the_pre_4_9_3_flag_name_and_numeric_strings():
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"a:1"},"brokerName":"b","cluster":"c"}],'
        b'"queueDatas":[{"brokerName":"b","perm":"6","readQueueNums":2,"topicSynFlag":3,"writeQueueNums":2}]}'
    )
    route = TopicRouteData.from_body(body)
    assert route.queue_datas == [QueueData("b", 2, 2, 6, 3)]
    assert route.filter_server_table == {}
    assert route.order_topic_conf is None


def test_route_master_addr():
    assert single_route().broker_datas[0].master_addr == "127.0.0.1:10911"
    assert BrokerData("c", "b", {1: "x:1"}).master_addr is None


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (b"\xff", "UTF-8"),
        (b'{"queueDatas":', "TopicRouteData"),
        (b"[]", "TopicRouteData: expected an object, got an array"),
        (b'{"queueDatas":{}}', "TopicRouteData.queueDatas: expected an array"),
        (b'{"queueDatas":[{"perm":6}]}', "TopicRouteData.queueDatas[0].brokerName: missing"),
        (b'{"queueDatas":[{"brokerName":"b","readQueueNums":"x"}]}', "queueDatas[0].readQueueNums: expected an integer"),
        (b'{"queueDatas":[{"brokerName":"b","perm":true}]}', "queueDatas[0].perm: expected an integer"),
        (b'{"queueDatas":[{"brokerName":7}]}', "queueDatas[0].brokerName: expected a string"),
        (b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"master":"a:1"}}]}', "brokerDatas[0].brokerAddrs: key 'master'"),
        (b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":[]}]}', "brokerDatas[0].brokerAddrs: expected an object"),
        (b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:5}}]}', "brokerDatas[0].brokerAddrs[0]: expected a string"),
        (b'{"filterServerTable":{"a:1":"x"}}', "filterServerTable['a:1']: expected an array"),
    ],
)
def test_route_errors_name_what_is_wrong(body, names):
    with pytest.raises(BodyDecodeError) as info:
        TopicRouteData.from_body(body)
    assert names in str(info.value)


def test_java_map_order_matches_hashmap_buckets():
    names = ["broker-a", "broker-b", "broker-c", "broker-d", "broker-z"]
    for capacity in (16, 128):
        expected = sorted(names, key=lambda n: java_bucket(n, capacity))
        assert java_map_order(names, capacity) == expected
    # "b2" is in bucket 0 of a 16-slot table, "b1" in 15; 15 and 16 of a 128-slot one
    assert java_map_order(["b1", "b2"]) == ["b2", "b1"]
    assert java_map_order(["b1", "b2"], 128) == ["b1", "b2"]
    # Long keys hash to themselves
    assert java_map_order([17, 1, 2]) == [17, 1, 2]
    assert java_map_order([2, 1]) == [1, 2]


# -- name server bodies --------------------------------------------------------------------


def wrapper() -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper.of(
        [TopicConfig("TBW102", 8, 8, 7), TopicConfig("%RETRY%G", 1, 1, 6, topic_sys_flag=0)],
        counter=2,
        timestamp=1700000000123,
    )


TC_TBW102 = (
    b'{"order":false,"perm":7,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"TBW102","topicSysFlag":0,"writeQueueNums":8}'
)
TC_RETRY = (
    b'{"order":false,"perm":6,"readQueueNums":1,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"%RETRY%G","topicSysFlag":0,"writeQueueNums":1}'
)
# a 2048-slot ConcurrentHashMap: TBW102 in bucket 1675, %RETRY%G in 1610
WRAPPER_JSON = (
    b'{"dataVersion":{"counter":2,"timestamp":1700000000123},'
    b'"topicConfigTable":{"%RETRY%G":' + TC_RETRY + b',"TBW102":' + TC_TBW102 + b"}}"
)


def test_topic_config_wrapper_exact_bytes():
    assert java_bucket("%RETRY%G", 2048) < java_bucket("TBW102", 2048)
    assert wrapper().to_body() == WRAPPER_JSON
    assert TopicConfigSerializeWrapper.from_body(WRAPPER_JSON) == wrapper()


def test_register_broker_body_exact_bytes():
    body = RegisterBrokerBody(wrapper(), []).to_body()
    assert body == b'{"filterServerList":[],"topicConfigSerializeWrapper":' + WRAPPER_JSON + b"}"
    assert RegisterBrokerBody.from_body(body) == RegisterBrokerBody(wrapper(), [])


def java_compressed(version: bytes, topics: list[str], filters: bytes) -> bytes:
    """The compressed form, built by hand the way RegisterBrokerBody.encode(true) does."""
    out = struct.pack(">i", len(version)) + version + struct.pack(">i", len(topics))
    for t in topics:
        out += struct.pack(">i", len(t.encode())) + t.encode()
    out += struct.pack(">i", len(filters)) + filters
    return zlib.compress(out, 9)


def test_register_broker_body_compressed_form():
    raw = java_compressed(
        b'{"counter":2,"timestamp":1700000000123}',
        ["TBW102 8 8 7 SINGLE_TAG", "%RETRY%G 1 1 6 SINGLE_TAG"],
        b'["127.0.0.1:30000"]',
    )
    body = RegisterBrokerBody.from_body(raw, compressed=True)
    assert body.filter_server_list == ["127.0.0.1:30000"]
    assert body.topic_config_wrapper == wrapper()
    # our compressed encoding inflates to the same layout
    ours = zlib.decompress(RegisterBrokerBody(wrapper(), ["127.0.0.1:30000"]).to_body(compress=True))
    assert ours.startswith(b'\x00\x00\x00\x27{"counter":2,"timestamp":1700000000123}\x00\x00\x00\x02')
    assert b"\x00\x00\x00\x17TBW102 8 8 7 SINGLE_TAG" in ours
    assert ours.endswith(b'\x00\x00\x00\x13["127.0.0.1:30000"]')


def test_compressed_form_drops_sys_flag_and_order_like_java():
    w = TopicConfigSerializeWrapper.of([TopicConfig("T", 2, 2, 6, "MULTI_TAG", 3, True)])
    back = RegisterBrokerBody.from_body(RegisterBrokerBody(w).to_body(True), True)
    assert back.topic_config_wrapper.topic_config_table["T"] == TopicConfig("T", 2, 2, 6, "MULTI_TAG", 0, False)


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        (b"not zlib", "does not inflate"),
        (zlib.compress(b"\x00\x00"), "dataVersion length needs 4 bytes"),
        (zlib.compress(b"\x00\x00\x00\x09{}"), "dataVersion needs 9 bytes"),
        (zlib.compress(b"\x00\x00\x00\x02{}\xff\xff\xff\xff"), "negative topic config count"),
        (zlib.compress(b"\x00\x00\x00\x02{}\x00\x00\x00\x01\x00\x00\x00\x03a b"), "topic config 0"),
        (java_compressed(b"{}", ["T x 1 6 SINGLE_TAG"], b"[]"), "not an integer"),
        (java_compressed(b"{}", ["T 1 1 6 ODD"], b"[]"), "filter type 'ODD'"),
        (java_compressed(b"{}", [], b"{}"), "filterServerList: expected an array"),
    ],
)
def test_compressed_errors(raw, names):
    with pytest.raises(BodyDecodeError) as info:
        RegisterBrokerBody.from_body(raw, compressed=True)
    assert names in str(info.value)


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (b'{"topicConfigSerializeWrapper":[]}', "RegisterBrokerBody.topicConfigSerializeWrapper: expected an object"),
        (
            b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":6}}}}',
            "topicConfigTable['T'].topicName: missing",
        ),
        (b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":"x"}}}', "dataVersion.counter"),
        (b'{"filterServerList":[1]}', "RegisterBrokerBody.filterServerList[0]: expected a string"),
        (b"{nope", "RegisterBrokerBody"),
    ],
)
def test_register_body_errors(body, names):
    with pytest.raises(BodyDecodeError) as info:
        RegisterBrokerBody.from_body(body)
    assert names in str(info.value)


def test_wrapper_from_store_topic_configs():
    from trocket.broker.store.topic_config import TopicConfig as StoreTopicConfig

    w = TopicConfigSerializeWrapper.of([StoreTopicConfig("T", 4, 4)], counter=1, timestamp=5)
    assert w.topic_config_table == {"T": TopicConfig("T", 4, 4)}
    assert w.data_version == DataVersion(5, 1)


def test_cluster_info_exact_bytes():
    # brokerAddrTable is a HashMap(128): b1 (bucket 15) before b2 (16); the cluster's
    # HashSet of names has 16 slots: b2 (0) before b1 (15)
    info = ClusterInfo(
        {"b2": BrokerData("C", "b2", {0: "h:2"}), "b1": BrokerData("C", "b1", {0: "h:1"})},
        {"C": ["b1", "b2"]},
    )
    assert info.to_body() == (
        b'{"brokerAddrTable":{"b1":{"brokerAddrs":{0:"h:1"},"brokerName":"b1","cluster":"C"},'
        b'"b2":{"brokerAddrs":{0:"h:2"},"brokerName":"b2","cluster":"C"}},'
        b'"clusterAddrTable":{"C":["b2","b1"]}}'
    )
    back = ClusterInfo.from_body(info.to_body())
    assert back.broker_addr_table == info.broker_addr_table
    assert {k: set(v) for k, v in back.cluster_addr_table.items()} == {"C": {"b1", "b2"}}
    assert ClusterInfo().to_body() == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'


def test_cluster_info_errors():
    with pytest.raises(BodyDecodeError, match=r"clusterAddrTable\['C'\]: expected an array"):
        ClusterInfo.from_body(b'{"clusterAddrTable":{"C":"b"}}')
    with pytest.raises(BodyDecodeError, match=r"brokerAddrTable\['b'\].brokerName: missing"):
        ClusterInfo.from_body(b'{"brokerAddrTable":{"b":{}}}')


def test_topic_list_exact_bytes():
    assert TopicList(["TBW102", "T", "%RETRY%G"]).to_body() == b'{"topicList":["T","%RETRY%G","TBW102"]}'
    assert TopicList(["T"], "h:1").to_body() == b'{"brokerAddr":"h:1","topicList":["T"]}'
    assert TopicList.from_body(b'{"brokerAddr":"h:1","topicList":["T"]}') == TopicList(["T"], "h:1")
    with pytest.raises(BodyDecodeError, match="TopicList.topicList"):
        TopicList.from_body(b'{"topicList":"T"}')


def test_kv_table_data_version_and_register_result():
    assert KVTable({"T": "broker-a:8"}).to_body() == b'{"table":{"T":"broker-a:8"}}'
    assert KVTable.from_body(b'{"table":{"T":"broker-a:8"}}').table == {"T": "broker-a:8"}
    assert DataVersion(7, 3).to_body() == b'{"counter":3,"timestamp":7}'
    result = RegisterBrokerResult.from_response("h:10912", "h:10911", b'{"table":{"a":"b"}}')
    assert result == RegisterBrokerResult("h:10912", "h:10911", {"a": "b"})
    assert RegisterBrokerResult.from_response(None, None, b"") == RegisterBrokerResult()


# -- round trips ---------------------------------------------------------------------------

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
nums = st.integers(0, 2**31 - 1)
queue_datas = st.builds(QueueData, names, nums, nums, st.integers(0, 15), nums)
broker_datas = st.builds(
    BrokerData,
    st.none() | names,
    names,
    st.dictionaries(st.integers(0, 2**40), names, max_size=3),
)
routes = st.builds(
    TopicRouteData,
    st.lists(queue_datas, max_size=3),
    st.lists(broker_datas, max_size=3),
    st.dictionaries(names, st.lists(names, max_size=2), max_size=2),
    st.none() | names,
)


def plain_json(route: TopicRouteData) -> str:
    return json.dumps(
        {
            "brokerDatas": [
                {"brokerAddrs": {str(k): v for k, v in bd.broker_addrs.items()}, "brokerName": bd.broker_name,
                 "cluster": bd.cluster}
                for bd in route.broker_datas
            ],
            "filterServerTable": route.filter_server_table,
            "orderTopicConf": route.order_topic_conf,
            "queueDatas": [
                {"brokerName": q.broker_name, "perm": q.perm, "readQueueNums": q.read_queue_nums,
                 "topicSysFlag": q.topic_sys_flag, "writeQueueNums": q.write_queue_nums}
                for q in route.queue_datas
            ],
        }
    )


@given(routes)
def test_route_round_trip(route):
    assert TopicRouteData.from_body(route.to_body()) == route
    assert TopicRouteData.from_body(plain_json(route)) == route


topic_configs = st.builds(
    TopicConfig,
    names.filter(lambda s: " " not in s),
    nums,
    nums,
    st.integers(0, 15),
    st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    nums,
    st.booleans(),
)
wrappers = st.builds(
    TopicConfigSerializeWrapper.of,
    st.lists(topic_configs, max_size=4),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
)


@given(wrappers, st.lists(names, max_size=3))
def test_register_body_round_trip(w, filters):
    body = RegisterBrokerBody(w, filters)
    assert RegisterBrokerBody.from_body(body.to_body()) == body
    back = RegisterBrokerBody.from_body(body.to_body(compress=True), compressed=True)
    assert back.filter_server_list == filters
    assert back.topic_config_wrapper.data_version == w.data_version
    for name, tc in w.topic_config_table.items():
        assert back.topic_config_wrapper.topic_config_table[name] == TopicConfig(
            name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_filter_type
        )


@given(
    st.dictionaries(names, broker_datas, max_size=3),
    st.dictionaries(names, st.lists(names, max_size=3, unique=True), max_size=3),
    st.lists(names, max_size=5, unique=True),
)
def test_cluster_info_and_topic_list_round_trip(brokers, clusters, topics):
    info = ClusterInfo.from_body(ClusterInfo(brokers, clusters).to_body())
    assert info.broker_addr_table == brokers
    assert {k: sorted(v) for k, v in info.cluster_addr_table.items()} == {k: sorted(v) for k, v in clusters.items()}
    assert sorted(TopicList.from_body(TopicList(topics).to_body()).topic_list) == sorted(topics)
