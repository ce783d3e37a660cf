"""Client-management bodies: heartbeats as the C++ and JS clients send them, consumer
lists, lock bodies; lenient where real clients need it, typed errors otherwise."""

from __future__ import annotations

import json

import pytest

from trocket.codecs.bodies.client import (
    BodyDecodeError,
    ConsumeFromWhere,
    ConsumerData,
    ConsumerListByGroupResponseBody,
    ConsumeType,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    ProducerData,
    SubscriptionData,
    UnlockBatchRequestBody,
    build_subscription,
)
from trocket.codecs.errors import CodecError

# REAL-CLIENTS.md §4.2, byte for byte (jsoncpp FastWriter: sorted keys, trailing newline)
CPP_CONSUMER = (
    b'{"clientID":"11238-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,'
    b'"consumeType":1,"groupName":"G","messageModel":1,"subscriptionDataSet":[{"subString":"*",'
    b'"subVersion":"1795258936519","topic":"%RETRY%G"},{"subString":"*","subVersion":"1795258936520",'
    b'"topic":"PeerTopic"}]}]}\n'
)
CPP_PRODUCER = b'{"clientID":"11238-127.0.0.1@DEFAULT","producerDataSet":[{"groupName":"P"}]}\n'
CPP_PULL_CONSUMER = (
    b'{"clientID":"11239-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,'
    b'"consumeType":0,"groupName":"PG","messageModel":1}]}\n'
)
JS_CONSUMER = (
    b'{"clientID":"192.0.2.2@11847","consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_PASSIVELY",'
    b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":'
    b'[{"topic":"PeerTopic","subString":"*","classFilterMode":false,"tagsSet":[],"codeSet":[],'
    b'"subVersion":1795258953515}],"unitMode":false}],"producerDataSet":[]}'
)


def test_cpp_consumer_heartbeat():
    hb = HeartbeatData.decode(CPP_CONSUMER)
    assert hb.client_id == "11238-127.0.0.1@DEFAULT"
    assert hb.producers == []
    (c,) = hb.consumers
    assert c.group_name == "G"
    assert c.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert c.message_model is MessageModel.CLUSTERING
    assert c.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert c.unit_mode is False
    assert [(s.topic, s.sub_string, s.sub_version) for s in c.subscriptions] == [
        ("%RETRY%G", "*", 1795258936519),
        ("PeerTopic", "*", 1795258936520),
    ]
    assert c.subscriptions[0].tags_set == [] and c.subscriptions[0].expression_type == "TAG"


def test_cpp_producer_and_pull_consumer_heartbeats():
    hb = HeartbeatData.decode(CPP_PRODUCER)
    assert hb.producers == [ProducerData("P")] and hb.consumers == []
    hb = HeartbeatData.decode(CPP_PULL_CONSUMER)
    (c,) = hb.consumers
    assert c.consume_type is ConsumeType.CONSUME_ACTIVELY and c.subscriptions == []


def test_js_consumer_heartbeat_names_numbers_and_extra_keys():
    hb = HeartbeatData.decode(JS_CONSUMER)
    assert hb.client_id == "192.0.2.2@11847"
    (c,) = hb.consumers
    assert (c.consume_type, c.message_model, c.consume_from_where) == (
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    )
    (s,) = c.subscriptions
    assert s == SubscriptionData("PeerTopic", "*", [], [], 1795258953515, "TAG", False)


@pytest.mark.parametrize(
    "value, expected",
    [
        (4, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
        ("4", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
        ("CONSUME_FROM_TIMESTAMP", ConsumeFromWhere.CONSUME_FROM_TIMESTAMP),
        (None, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET),
    ],
)
def test_enum_forms(value, expected):
    obj = {"clientID": "c", "consumerDataSet": [{"groupName": "G", "consumeFromWhere": value}]}
    assert HeartbeatData.decode(json.dumps(obj).encode()).consumers[0].consume_from_where is expected


def test_consume_type_type_cn_aliases():
    for name, expected in [("PUSH", ConsumeType.CONSUME_PASSIVELY), ("PULL", ConsumeType.CONSUME_ACTIVELY)]:
        obj = {"clientID": "c", "consumerDataSet": [{"groupName": "G", "consumeType": name}]}
        assert HeartbeatData.decode(json.dumps(obj)).consumers[0].consume_type is expected


def test_null_arrays_and_unit_mode_strings():
    obj = {
        "clientID": "c",
        "consumerDataSet": [{"groupName": "G", "subscriptionDataSet": None, "unitMode": "true"}],
        "producerDataSet": None,
    }
    hb = HeartbeatData.decode(json.dumps(obj))
    assert hb.consumers[0].subscriptions == [] and hb.consumers[0].unit_mode is True
    assert hb.producers == []


@pytest.mark.parametrize(
    "body, needle",
    [
        (b"", "empty"),
        (b"not json", "not JSON"),
        (b"[1,2]", "not a JSON object"),
        (b'{"consumerDataSet":[]}', "clientID is missing"),
        (b'{"clientID":"c","consumerDataSet":{}}', "consumerDataSet is not an array"),
        (b'{"clientID":"c","consumerDataSet":[{"consumeType":1}]}', "consumerDataSet[0].groupName is missing"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":7}]}', "ordinal 7"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","messageModel":"CLUSTER"}]}', "unknown MessageModel"),
        (
            b'{"clientID":"c","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T","subVersion":"x"}]}]}',
            "consumerDataSet[0].subscriptionDataSet[0].subVersion is not an integer",
        ),
        (b'{"clientID":"c","producerDataSet":[5]}', "producerDataSet[0] is not a JSON object"),
        (b'{"clientID":["c"]}', "clientID is not a string"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","unitMode":"maybe"}]}', "unitMode is not a boolean"),
        (b"\xff\xfe", "UTF-8"),
    ],
)
def test_malformed_heartbeats_raise_typed_errors(body, needle):
    with pytest.raises(BodyDecodeError) as info:
        HeartbeatData.decode(body)
    assert needle in str(info.value)
    assert isinstance(info.value, CodecError)


def test_heartbeat_encodes_like_fastjson_and_round_trips():
    hb = HeartbeatData(
        "c1",
        [ProducerData("P")],
        [ConsumerData("G", subscriptions=[SubscriptionData("T", "a || b", ["a", "b"], [97, 98], 5)])],
    )
    data = hb.encode()
    assert data.startswith(b'{"clientID":"c1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",')
    assert b'"consumeType":"CONSUME_PASSIVELY"' in data and b'"producerDataSet":[{"groupName":"P"}]' in data
    assert HeartbeatData.decode(data) == hb


def test_subscription_tags_from_sub_string():
    sub = SubscriptionData("T", "TagA || TagB ||  TagA")
    assert sub.effective_tags() == ["TagA", "TagB"]
    # Java String.hashCode
    assert sub.effective_codes() == [2598919, 2598920]
    assert SubscriptionData("T", "*").effective_tags() == []
    built = build_subscription("T", " x ||y ")
    assert (built.tags_set, built.code_set) == (["x", "y"], [120, 121])
    assert build_subscription("T", "").sub_string == "*"
    assert build_subscription("T", "a > 1", "SQL92").tags_set == []
    # a non-ASCII tag hashes over UTF-16 and may be negative
    assert SubscriptionData("T", "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9").effective_codes()[0] < 0


def test_consumer_list_body():
    body = ConsumerListByGroupResponseBody(["11238-127.0.0.1@DEFAULT", "192.0.2.2@11847"])
    assert body.encode() == b'{"consumerIdList":["11238-127.0.0.1@DEFAULT","192.0.2.2@11847"]}'
    assert ConsumerListByGroupResponseBody.decode(body.encode()) == body
    with pytest.raises(BodyDecodeError):
        ConsumerListByGroupResponseBody.decode(b'{"consumerIdList":[1]}')


def test_lock_bodies():
    cpp = (
        b'{"clientId":"11238-127.0.0.1@DEFAULT","consumerGroup":"G","mqSet":[{"brokerName":"broker-a",'
        b'"queueId":0,"topic":"T"},{"brokerName":"broker-a","queueId":1,"topic":"T"},'
        b'{"brokerName":"broker-a","queueId":"1","topic":"T"}]}\n'
    )
    req = LockBatchRequestBody.decode(cpp)
    assert req.consumer_group == "G" and req.client_id == "11238-127.0.0.1@DEFAULT"
    assert req.mq_set == [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)]  # a set
    assert LockBatchRequestBody.decode(req.encode()) == req
    assert b"onlyThisBroker" not in req.encode()
    un = UnlockBatchRequestBody.decode(cpp)
    assert isinstance(un, UnlockBatchRequestBody) and un.mq_set == req.mq_set

    resp = LockBatchResponseBody([MessageQueue("T", "broker-a", 1)])
    assert resp.encode() == b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":1,"topic":"T"}]}'
    assert LockBatchResponseBody.decode(resp.encode()) == resp
    assert LockBatchResponseBody().encode() == b'{"lockOKMQSet":[]}'


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b'{"clientId":"c","mqSet":[]}',
        b'{"consumerGroup":"G","clientId":"c","mqSet":[{"topic":"T","queueId":0}]}',
        b'{"consumerGroup":"G","clientId":"c","mqSet":[{"topic":"T","brokerName":"b","queueId":1.5}]}',
        b'{"consumerGroup":"G","clientId":"c","mqSet":[{"topic":"T","brokerName":"b","queueId":4294967296}]}',
        b'{"consumerGroup":"G","clientId":"c","mqSet":"T"}',
    ],
)
def test_malformed_lock_bodies(body):
    with pytest.raises(BodyDecodeError):
        LockBatchRequestBody.decode(body)


def test_message_queue_order_and_hash():
    a, b, c = MessageQueue("A", "b1", 2), MessageQueue("A", "b2", 0), MessageQueue("B", "b0", 0)
    assert sorted([c, b, a]) == [a, b, c]
    assert len({a, MessageQueue("A", "b1", 2)}) == 1
