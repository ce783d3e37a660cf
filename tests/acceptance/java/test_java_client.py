"""The real Java 4.9.8 client against ``trocket broker`` and the Java broker, scenario by
scenario (src/ClientScenarios.java): the same assertions for both, so a failure on the
trocket run only is where trocket behaves differently from Java."""

from __future__ import annotations

import pytest

from acc_tools import RawClient, decode_records
from java_tools import on_both, wait_for

pytestmark = pytest.mark.usefixtures("java_bundle")

#: client-side properties the Java consumer adds to every delivered message
CLIENT_ADDED = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}
#: what trocket's schedule service drops from a delayed message when it is due, on purpose
#: (broker/schedule.py's "Differences from Java": 4.9.8 delivers them, apache/rocketmq#11037)
DELIBERATE_DELIVERY_DROPS = {"DELAY", "REAL_TOPIC", "REAL_QID"}


def delivered_keys(props: dict) -> set[str]:
    """The properties a delivered message carries but the client's own and trocket's
    deliberate drops: what trocket's delivery is compared with Java's on."""
    return set(props) - CLIENT_ADDED - DELIBERATE_DELIVERY_DROPS


@on_both()
def test_send_modes_keep_body_tags_keys_and_properties(scenario):
    """sync, async, oneway, orderly (selector), batch: every message read back intact; the
    answers' msgId / offsetMsgId / queue / offset name the stored record; the topic was
    auto-created from TBW102 with the client's 4 queues."""
    r = scenario("send_modes")
    assert r["asyncErrors"] == []
    for mode, f in r["modes"].items():
        assert f["problems"] == [], (mode, f["problems"])
        assert f["read"] == f["sent"] == 3, (mode, f)
        want = [] if mode == "oneway" else ["SEND_OK"] * (1 if mode == "batch" else 3)
        assert f["statuses"] == want, (mode, f)
    assert r["routeQueues"] == 4


@on_both()
def test_stored_properties_are_javas(scenario, peer):
    """The properties string each record stores, byte for byte, as Java's broker writes
    it: CLUSTER=<cluster> added and WAIT dropped (4.9.1+), in Java's HashMap order; a
    batch entry: its own properties, then the batch header's with CLUSTER."""
    r = scenario("stored_props")
    stored: dict[int, str] = {}

    def pulled() -> bool:  # (Java's broker answers SEND_OK before its consume queue holds the record)
        with RawClient(peer.hostport) as raw:
            resp, body = raw.pull(r["topic"], r["queueId"], 0)
        assert resp["code"] in (0, 19, 20), resp  # FOUND, or not yet there (NO_NEW_MSG, PULL_NOT_FOUND)
        if resp["code"] == 0:
            stored.update({rec["queue_offset"]: rec["props_raw"].decode("utf-8") for rec in decode_records(body)})
        return all(want["queueOffset"] in stored for want in r["records"])

    wait_for(pulled, 15, 0.1)
    for want in r["records"]:
        assert stored.get(want["queueOffset"]) == want["expectedStored"], (want["what"], want["sentProperties"])


@on_both()
def test_push_clustering_shares_queues_and_messages(scenario):
    r = scenario("push_clustering")
    assert r["balanced"], r
    assert r["unique"] == r["sent"] == 40
    assert r["deliveries"] == r["sent"], f"duplicates: {r}"
    assert all(n > 0 for n in r["perConsumer"].values()), r


@on_both()
def test_push_broadcasting_every_consumer_gets_everything(scenario):
    r = scenario("push_broadcast")
    assert r["c0"] == r["c1"] == r["sent"] == 20


@on_both()
def test_push_orderly_keeps_each_keys_order(scenario):
    r = scenario("push_orderly")
    assert r["balanced"], r
    assert r["violations"] == []
    assert r["unique"] == r["sent"] == 80


@on_both()
def test_tag_filter(scenario):
    r = scenario("tag_filter")
    assert r["got"] == {"TagA": 5, "TagB": 5}


@on_both()
def test_reconsume_later_retries_after_10s_then_dead_letters(scenario, broker, java_reference):
    """RECONSUME_LATER: back from %RETRY% after delay level 3 (10 s), reconsumeTimes 1,
    the same msgId and topic; failing again with maxReconsumeTimes 1: to %DLQ%."""
    r = scenario("reconsume_later")
    assert r["retryQueueOwned"], r
    d = r["deliveries"]
    assert len(d) == 2, [(x["topic"], x["reconsumeTimes"]) for x in d]
    first, second = d
    assert 9.0 <= r["gapsS"][0] <= 13.0, (r["gapsS"], r["retryStoredAfterS"])
    assert [first["reconsumeTimes"], second["reconsumeTimes"]] == [0, 1]
    assert first["msgId"] == second["msgId"] == r["msgId"]
    assert second["topic"] == first["topic"]
    assert (second["body"], second["tags"], second["keys"]) == ("retry me", "TagR", "kR")
    assert second["properties"]["color"] == "red"
    assert r["dlqMaxOffset"] == 1, r["dlqError"]
    if broker == "trocket":
        ref = java_reference("reconsume_later")["deliveries"]
        for got, want in zip(d, ref):
            assert delivered_keys(got["properties"]) == delivered_keys(want["properties"])
        assert second["properties"]["WAIT"] == "false"


@on_both()
def test_delay_levels(scenario, broker, java_reference):
    """Levels 1 and 2 (1 s, 5 s) delivered after their delay, with Java's properties:
    CLUSTER, and WAIT, which Java's schedule path keeps (REAL_TOPIC, REAL_QID, DELAY too,
    which trocket drops on purpose)."""
    r = scenario("delay_levels")["got"]
    assert set(r) == {"1", "2"}
    assert 0.9 <= r["1"]["delayS"] <= 3.0, r["1"]["delayS"]
    assert 4.9 <= r["2"]["delayS"] <= 7.5, r["2"]["delayS"]
    if broker == "java":
        for level, m in r.items():
            assert m["properties"]["DELAY"] == level
            assert m["properties"]["REAL_TOPIC"] == m["topic"]
            assert m["properties"]["REAL_QID"] == str(m["queueId"])
    else:
        ref = java_reference("delay_levels")["got"]
        for level in r:
            assert delivered_keys(r[level]["properties"]) == delivered_keys(ref[level]["properties"])
            assert r[level]["properties"]["WAIT"] == "true"


@on_both()
def test_lite_pull_subscribe_first_message_quickly(scenario):
    """DefaultLitePullConsumer.subscribe: Java's broker notifies the consumer that just
    joined (NOTIFY_CONSUMER_IDS_CHANGED), so it rebalances at once (about 1 s) instead of
    at its 20 s timer."""
    r = scenario("lite_pull_subscribe")
    assert 0 <= r["firstMessageAfterS"] < 5.0, r


@on_both()
def test_lite_pull_assign_seek_commit(scenario, broker):
    r = scenario("lite_pull_assign")
    assert r["got"] == ["0@2", "0@3", "0@4", "1@0", "1@1", "1@2", "1@3", "1@4"]
    assert r["committedLocal"] == {"0": 5, "1": 5}
    if broker == "java" and r["committedBroker"] != {"0": 5, "1": 5}:
        # the reference run only: Java's own client against Java's own broker, which
        # (twice in CI, never against trocket) kept a queue's offset below the commitSync
        # for the scenario's 10 s of the client's 5 s persists ({'0': 0, '1': 5})
        pytest.xfail(f"Java 4.9.8's broker kept {r['committedBroker']} after its own client's commitSync")
    assert r["committedBroker"] == {"0": 5, "1": 5}


@on_both()
def test_deprecated_pull_consumer(scenario):
    r = scenario("pull_consumer")
    assert r["queues"] == 2
    six = ["TagA:p0", "TagB:p1", "TagA:p2", "TagB:p3", "TagA:p4", "TagB:p5"]
    assert r["all"] == {"status": "FOUND", "nextBeginOffset": 6, "minOffset": 0, "maxOffset": 6, "messages": six}
    assert r["fromEnd"] == {"status": "NO_NEW_MSG", "nextBeginOffset": 6, "minOffset": 0, "maxOffset": 6, "messages": []}
    assert r["tagA"] == {"status": "FOUND", "nextBeginOffset": 6, "minOffset": 0, "maxOffset": 6, "messages": six[::2]}
    assert r["beyondEnd"] == {"status": "OFFSET_ILLEGAL", "nextBeginOffset": 6, "minOffset": 0, "maxOffset": 6,
                              "messages": []}
    assert r["emptyQueue"] == {"status": "NO_NEW_MSG", "nextBeginOffset": 0, "minOffset": 0, "maxOffset": 0,
                               "messages": []}
    assert (r["minOffset"], r["maxOffset"]) == (0, 6)
    assert r["storedOffset"] == 4


@on_both()
def test_biggest_message_and_one_byte_more(scenario):
    """4.9.8 limits the body: exactly maxMessageSize (4 MiB) is stored and read back
    whole; one byte more is MESSAGE_ILLEGAL (13)."""
    r = scenario("max_size")
    assert r["fit"] == "SEND_OK", r
    assert r["over"] == "refused" and r["overCode"] == 13, r
    assert r["readStatus"] == "FOUND" and r["readLength"] == 4 * 1024 * 1024 and r["readIntact"], r
    assert r["maxOffset"] == 1


@on_both()
def test_vip_channel(scenario):
    """A producer with vipChannelEnabled sends to the broker's listen port - 2."""
    r = scenario("vip_channel")
    assert r["status"] == "SEND_OK", r
