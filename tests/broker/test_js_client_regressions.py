"""Regressions found by the JS-client acceptance tests (tests/acceptance/test_js_client.py,
npm ``ali-ons`` 3.12.0), reproduced here with the frames that client sends."""

from __future__ import annotations

import json

from trocket.codecs.bodies.fastjson import loads
from trocket.codecs.command import LanguageCode, RemotingCommand
from trocket.codecs.message.properties import encode_properties


def js_heartbeat(client_id: str, group: str, topic: str) -> bytes:
    """ali-ons' first heartbeat of a push consumer: enum names, its topic only (it
    subscribes ``%RETRY%<group>`` right after this heartbeat is answered)."""
    return json.dumps({
        "clientID": client_id,
        "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "subscriptionDataSet": [{"topic": topic, "subString": "*", "classFilterMode": False, "tagsSet": [],
                                     "codeSet": [], "subVersion": 1795258953515}],
            "unitMode": False,
        }],
        "producerDataSet": [],
    }).encode()


def js_request(code: int, ext: dict, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(code, ext_fields=ext, body=body, language=LanguageCode.JAVA, version=121)


async def test_new_retry_topic_is_routed_when_the_heartbeat_is_answered(tmp_path, wire):
    """ali-ons asks the name server for ``%RETRY%<group>`` right after its first
    heartbeat is answered, and otherwise refreshes routes only every 30 s. The broker
    created the retry topic on that heartbeat but registered it with the name server
    ~50 ms later, so the client got TOPIC_NOT_EXIST and did not pull its retry queue
    for 30 s: a message given back with ACTION_RETRY came back half a minute late.
    Java registers before answering (createTopicInSendMessageBackMethod)."""
    # the periodic registration must not be what makes the route appear
    async with wire.running_broker(tmp_path, register_interval_ms=600_000) as broker, wire.client() as c:
        addr, ns = broker.broker_addr, broker.namesrv_addrs[0]
        r = await c.invoke_sync(ns, js_request(105, {"topic": "%RETRY%CG_js"}))
        assert r.code == 17  # no such topic yet
        r = await c.invoke_sync(addr, js_request(34, {}, js_heartbeat("192.0.2.2@11847", "CG_js", "JsTopic")))
        assert r.code == 0, r.remark
        r = await c.invoke_sync(ns, js_request(105, {"topic": "%RETRY%CG_js"}))
        assert r.code == 0, f"retry topic not routed right after the heartbeat: {r.code} {r.remark}"
        route = loads(r.body)  # fastjson: unquoted numeric keys, as Java's name server
        assert [q["readQueueNums"] for q in route["queueDatas"]] == [1]
        assert route["brokerDatas"][0]["brokerAddrs"][0] == addr


async def test_new_retry_topic_is_routed_when_the_send_back_is_answered(tmp_path, wire):
    """The same when CONSUMER_SEND_MSG_BACK is what creates the group's retry topic (a
    group that gives a message back before its first heartbeat)."""
    async with wire.running_broker(tmp_path, register_interval_ms=600_000) as broker, wire.client() as c:
        addr, ns = broker.broker_addr, broker.namesrv_addrs[0]
        props = encode_properties({"TAGS": "TagA", "KEYS": "k1"}) + "\x02"
        r = await c.invoke_sync(addr, wire.send_v2("JsTopic", b"hello", properties=props))
        assert r.code == 0, r.remark
        phy = int(r.ext_fields["msgId"][16:], 16)
        r = await c.invoke_sync(addr, js_request(36, {
            "offset": phy, "group": "CG_back", "delayLevel": 0, "originMsgId": r.ext_fields["msgId"],
            "originTopic": "JsTopic", "unitMode": False, "maxReconsumeTimes": 16,
        }))
        assert r.code == 0, r.remark
        r = await c.invoke_sync(ns, js_request(105, {"topic": "%RETRY%CG_back"}))
        assert r.code == 0, f"retry topic not routed right after the send-back: {r.code} {r.remark}"
