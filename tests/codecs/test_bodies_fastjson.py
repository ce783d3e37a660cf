import pytest
from hypothesis import given
from hypothesis import strategies as st

from trocket.codecs.bodies.fastjson import Bean, BodyDecodeError, dumps, loads


def route_data():
    return Bean(
        brokerDatas=[Bean(brokerAddrs={0: "127.0.0.1:10911"}, brokerName="broker-a", cluster="DefaultCluster")],
        filterServerTable={},
        orderTopicConf=None,
        queueDatas=[Bean(brokerName="broker-a", perm=6, readQueueNums=4, topicSysFlag=0, writeQueueNums=4)],
    )


def test_route_data_as_the_java_name_server_writes_it():
    assert dumps(route_data()) == (
        '{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
        '"filterServerTable":{},'
        '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )


def test_reads_unquoted_numeric_keys_back_as_ints():
    back = loads(dumps(route_data()).encode())
    assert back["brokerDatas"][0]["brokerAddrs"] == {0: "127.0.0.1:10911"}


def test_numbers_inside_strings_are_left_alone():
    text = '{"a":"x,1:y",1:"{2:3}",-5:[1,2]}'
    assert loads(text) == {"a": "x,1:y", 1: "{2:3}", -5: [1, 2]}


def test_plain_json_still_parses():
    assert loads(b'{"consumerIdList":["a","b"]}') == {"consumerIdList": ["a", "b"]}


def test_map_keys_in_hashmap_order_and_nulls_dropped():
    # Integer keys hash to themselves: buckets 1, 2, 17 -> 1 in a 16-slot table
    assert dumps({17: "c", 2: "b", 1: "a", 3: None}) == '{17:"c",1:"a",2:"b"}'
    assert dumps({"k2": "v", "k1": "v"}) == '{"k1":"v","k2":"v"}'


def test_strings_escaped_like_fastjson():
    assert dumps(["a\x01\x0b/"]) == '["a\\u0001\\u000B/"]'


@pytest.mark.parametrize("bad", [b"{", b"\xff", b"{1:}", b"nope"])
def test_bad_bodies(bad):
    with pytest.raises(BodyDecodeError):
        loads(bad)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=6) | st.integers(0, 2**40), inner, max_size=4),
    max_leaves=12,
)


def _drop_null_values(v):
    if isinstance(v, dict):
        return {k: _drop_null_values(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_null_values(x) for x in v]
    return v


@given(json_values)
def test_round_trip(value):
    assert loads(dumps(value)) == _drop_null_values(value)
