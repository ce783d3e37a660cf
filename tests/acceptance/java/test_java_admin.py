"""Java's DefaultMQAdminExt and mqadmin's sub-commands against ``trocket broker`` and the
Java broker (src/AdminScenarios.java), over one "world": a topic with 8 keyed
messages, its producer online, a consumer group that consumed them all and is online.

Every scenario runs against both brokers: issue 22 (index and query by key, statistics,
consumer-group administration, broker config at runtime) made trocket's answer them."""

from __future__ import annotations

import re

import pytest

from java_tools import on_both

pytestmark = pytest.mark.usefixtures("java_bundle")


# -- DefaultMQAdminExt ----------------------------------------------------------------------


@on_both()
def test_admin_topic_create_list_delete(scenario):
    r = scenario("admin_topic")
    assert r == {"routeQueues": 8, "inTopicList": True, "routeAfterDelete": -1, "inTopicListAfterDelete": False}


@on_both()
def test_admin_cluster_info(scenario, peer):
    r = scenario("admin_cluster")
    assert r == {"master": peer.addr, "cluster": "DefaultCluster", "clusterBrokers": ["broker-a"]}


def _keys(table) -> set[str]:
    """Runtime-info keys, the one naming the broker's own commit-log path generalized
    (``commitLogDiskRatio_<path>``)."""
    return {"commitLogDiskRatio_<path>" if k.startswith("commitLogDiskRatio_") else k for k in table}


@on_both()
def test_admin_runtime_stats_has_javas_keys(scenario, java_reference):
    """GET_BROKER_RUNTIME_INFO: every key Java's broker gives (mqadmin's clusterList dies
    on a missing putTps), the message counts real."""
    table = scenario("admin_runtime_stats")["table"]
    missing = sorted(_keys(java_reference("admin_runtime_stats")["table"]) - _keys(table))
    assert missing == []
    assert int(table["msgPutTotalTodayNow"]) >= 8


@on_both()
def test_admin_topic_stats(scenario):
    r = scenario("admin_topic_stats")
    assert r == {"queues": {"0": 2, "1": 2, "2": 2, "3": 2}, "messages": 8}


@on_both()
def test_admin_consume_stats(scenario):
    r = scenario("admin_consume_stats")
    assert r == {"queues": 4, "brokerOffsets": 8, "consumerOffsets": 8, "diff": 0}


@on_both()
def test_admin_consumer_connection(scenario):
    r = scenario("admin_consumer_connection")
    assert r["connections"] == 1 and r["languages"] == ["JAVA"]
    assert len(r["subscriptions"]) == 2 and any(s.startswith("%RETRY%") for s in r["subscriptions"])
    assert (r["consumeType"], r["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")


@on_both()
def test_admin_producer_connection(scenario):
    assert scenario("admin_producer_connection") == {"connections": 1}


@on_both()
def test_admin_view_message_by_offset_id(scenario):
    r = scenario("admin_view_message")
    assert (r["body"], r["keys"]) == ("world 3", "admk3")
    assert r["uniqKey"] == r["expectedUniqKey"]


@on_both()
def test_admin_query_by_key(scenario):
    assert scenario("admin_query_by_key") == {"bodies": ["world 5"]}


@on_both()
def test_admin_query_by_unique_key(scenario):
    assert scenario("admin_query_by_unique_key") == {"body": "world 6"}


@on_both()
def test_admin_offsets_min_max_search(scenario):
    """min/max offsets and SEARCH_OFFSET_BY_TIMESTAMP: from before the first message 0;
    from the future, Java answers the last message's offset (1 a queue here), not the
    max offset."""
    r = scenario("admin_search_offset")
    assert r == {"min0": 0, "min1": 0, "min2": 0, "min3": 0, "maxOffsets": 8, "searchFromStart": 0,
                 "searchFromFuture": 4}


@on_both()
def test_admin_earliest_message_time(scenario):
    r = scenario("admin_earliest_time")
    assert r["worldStart"] <= r["earliest"] <= r["now"], r


@on_both()
def test_admin_reset_offset_by_timestamp(scenario):
    assert scenario("admin_reset_offset") == {"queues": 4, "offsetsSum": 0}


@on_both()
def test_admin_subscription_group(scenario):
    assert scenario("admin_sub_group") == {"retryMaxTimes": 3, "presentAfterDelete": False}


@on_both()
def test_admin_broker_config(scenario):
    r = scenario("admin_broker_config")
    assert (r["brokerName"], r["brokerClusterName"], r["maxMessageSize"]) == ("broker-a", "DefaultCluster", "4194304")
    assert r["fileReservedTimeAfter"] == "49"


# -- mqadmin --------------------------------------------------------------------------------


def mqadmin(scenario, name: str) -> tuple[str, dict]:
    """The command's output (it must not have failed) and the world's names."""
    r = scenario(f"mqadmin_{name}")
    assert not r["failed"], f"mqadmin {name} failed:\n{r.get('error')}\noutput:\n{r['output']}"
    return r["output"], r.get("world", {})


@on_both()
def test_mqadmin_update_topic(scenario, peer):
    r = scenario("mqadmin_updateTopic")
    assert not r["failed"], r.get("error")
    assert f"create topic to {peer.addr} success." in r["output"]
    assert r["routeQueues"] == 4


@on_both()
def test_mqadmin_delete_topic(scenario):
    r = scenario("mqadmin_deleteTopic")
    assert not r["failed"], r.get("error")
    topic = r["args"][r["args"].index("-t") + 1]
    assert f"delete topic [{topic}] from cluster [DefaultCluster] success." in r["output"]
    assert f"delete topic [{topic}] from NameServer success." in r["output"]
    assert r["routeQueues"] == -1


@on_both()
def test_mqadmin_topic_list(scenario):
    out, world = mqadmin(scenario, "topicList")
    assert world["topic"] in out.split()


@on_both()
def test_mqadmin_topic_route(scenario, peer):
    out, _ = mqadmin(scenario, "topicRoute")
    assert '"brokerName":"broker-a"' in out and f'"{peer.addr}"' in out and '"writeQueueNums":4' in out


def _rows(out: str, first: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split()[:1] == [first]]


@on_both()
def test_mqadmin_topic_status(scenario):
    out, _ = mqadmin(scenario, "topicStatus")
    rows = _rows(out, "broker-a")
    assert sorted((int(r[1]), int(r[2]), int(r[3])) for r in rows) == [(q, 0, 2) for q in range(4)]


@on_both()
def test_mqadmin_cluster_list(scenario, peer):
    out, _ = mqadmin(scenario, "clusterList")
    rows = _rows(out, "DefaultCluster")
    assert [r[1:4] for r in rows] == [["broker-a", "0", peer.addr]], out
    assert "null" not in out, out  # the TPS and load columns, from the runtime info


@on_both()
def test_mqadmin_broker_status(scenario, java_reference):
    out, _ = mqadmin(scenario, "brokerStatus")
    keys = _keys(line.split(":")[0].strip() for line in out.splitlines() if ":" in line)
    want = _keys(java_reference("admin_runtime_stats")["table"])
    assert sorted(want - keys) == []


@on_both()
def test_mqadmin_get_broker_config(scenario):
    out, _ = mqadmin(scenario, "getBrokerConfig")
    conf = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in out.splitlines() if "=" in line)}
    assert conf.get("brokerName") == "broker-a" and conf.get("maxMessageSize") == "4194304", out[:2000]


@on_both()
def test_mqadmin_update_broker_config(scenario, peer):
    out, _ = mqadmin(scenario, "updateBrokerConfig")
    assert f"update broker config success, {peer.addr}" in out


@on_both()
def test_mqadmin_consumer_progress(scenario):
    out, world = mqadmin(scenario, "consumerProgress")
    rows = _rows(out, world["topic"])
    assert sorted((int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows) == [(q, 2, 2, 0) for q in range(4)]
    assert "Diff Total: 0" in out


@on_both()
def test_mqadmin_consumer_connection(scenario):
    out, world = mqadmin(scenario, "consumerConnection")
    assert re.search(r"^\S+@\S+\s+127\.0\.0\.1:\d+\s+JAVA\s+V4_9_8$", out, re.M), out
    assert "MessageModel: CLUSTERING" in out and f"%RETRY%{world['consumerGroup']}" in out


@on_both()
def test_mqadmin_producer_connection(scenario):
    out, _ = mqadmin(scenario, "producerConnection")
    assert re.search(r"^0001\s+\S+@\S+\s+127\.0\.0\.1:\d+\s+JAVA\s+V4_9_8$", out, re.M), out


def _message_track(out: str, world: dict) -> None:
    assert f"MessageTrack [consumerGroup={world['consumerGroup']}, trackType=CONSUMED" in out, out


@on_both()
def test_mqadmin_query_msg_by_id(scenario):
    out, world = mqadmin(scenario, "queryMsgById")
    assert "Keys:                [admk1]" in out and f"Topic:               {world['topic']}" in out
    _message_track(out, world)


@on_both()
def test_mqadmin_query_msg_by_key(scenario):
    out, world = mqadmin(scenario, "queryMsgByKey")
    assert world["msgIds"][2] in out.split()


@on_both()
def test_mqadmin_query_msg_by_unique_key(scenario):
    out, world = mqadmin(scenario, "queryMsgByUniqueKey")
    assert "Keys:                [admk2]" in out
    _message_track(out, world)


@on_both()
def test_mqadmin_query_msg_by_offset(scenario):
    out, world = mqadmin(scenario, "queryMsgByOffset")
    assert "Keys:                [admk0]" in out and f"OffsetID:            {world['offsetMsgIds'][0]}" in out
    _message_track(out, world)


@on_both()
def test_mqadmin_reset_offset_by_time(scenario):
    out, _ = mqadmin(scenario, "resetOffsetByTime")
    rows = _rows(out, "broker-a")
    assert sorted((int(r[1]), int(r[2])) for r in rows) == [(q, 2) for q in range(4)], out


@on_both()
def test_mqadmin_update_sub_group(scenario, peer):
    out, _ = mqadmin(scenario, "updateSubGroup")
    assert f"create subscription group to {peer.addr} success." in out


@on_both()
def test_mqadmin_delete_sub_group(scenario, peer):
    out, _ = mqadmin(scenario, "deleteSubGroup")
    assert re.search(rf"delete subscription group \[\S+\] from broker \[{re.escape(peer.addr)}\] in cluster "
                     r"\[DefaultCluster\] success\.", out), out


@on_both()
def test_mqadmin_stats_all(scenario):
    """statsAll -t: the topic's consumer group, nothing accumulated. (The TPS and 24-hour
    counts come from per-minute samples: not yet there seconds after the sends.)"""
    out, world = mqadmin(scenario, "statsAll")
    rows = _rows(out, world["topic"])
    assert len(rows) == 1 and rows[0][1] == world["consumerGroup"], out
    assert rows[0][2] == "0", out
