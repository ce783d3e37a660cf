"""RocketMQ 4.9.8's mqadmin against ``trocket broker``: what an operator of a Java broker
runs works the same on trocket (issue 22). Each test starts a broker, loads it with
``trocket send`` / ``trocket consume`` and runs a batch of mqadmin commands in one JVM
(:mod:`mqadmin_tools`); skipped, saying why, where Java 17 or the 4.9.8 folder is missing."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from acc_tools import trocket_command
from mqadmin_tools import JavaPushConsumer, java_status, mqadmin

from ..waiting import wait_until_sync

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _java() -> None:
    ok, why = java_status()
    if not ok:
        pytest.skip(f"mqadmin needs Java: {why}")


def trocket(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run([*trocket_command(), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"trocket {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


def _no_exception(text: str) -> None:
    assert "Exception" not in text, text


def test_cluster_list_and_broker_status_show_real_figures(broker_factory):
    broker = broker_factory(name="mqadmin-stats")
    ns = broker.namesrv
    addr = f"127.0.0.1:{broker.port}"
    started = time.monotonic()
    trocket("admin", "topic", "create", "-n", ns, "-t", "MqT", "--queues", "4")
    # putTps' first figure is the last 10 s: the broker samples once a second, so it has
    # one 10 s after start; the sends go in after that, and mqadmin reads within 10 s
    time.sleep(max(0.0, 12 - (time.monotonic() - started)))
    trocket("send", "-n", ns, "-t", "MqT", "--count", "1000", "--size", "100", "--mode", "async")
    trocket("consume", "-n", ns, "-t", "MqT", "-g", "MqG", "--count", "600", "--from", "first", "--quiet")
    cluster, more, status, topic, progress, consume, clone = mqadmin(
        ["clusterList", "-n", ns],
        ["clusterList", "-m", "-n", ns],
        ["brokerStatus", "-b", addr, "-n", ns],
        ["topicStatus", "-t", "MqT", "-n", ns],
        ["consumerProgress", "-g", "MqG", "-n", ns],
        ["brokerConsumeStats", "-b", addr, "-n", ns],
        ["cloneGroupOffset", "-s", "MqG", "-d", "MqClone", "-t", "MqT", "-n", ns],
    )

    # clusterList: "%9.2f(%s,%sms)" of putTps' and getTransferedTps' first figures
    for out in (cluster, more, status, topic, progress, consume, clone):
        _no_exception(out.text)
    row = next(line for line in cluster.out.splitlines() if line.startswith("DefaultCluster"))
    in_tps, out_tps = (float(x) for x in re.findall(r"(\d+\.\d\d)\(\d+,\d+ms\)", row))
    assert in_tps >= 50, row  # 1000 messages within the last 10 s
    assert out_tps >= 30, row  # 600+ delivered within the last 10 s
    assert "trocket" in row and addr in row

    # clusterList -m: msgPutTotalTodayNow - msgPutTotalTodayMorning (the broker started today)
    row = next(line for line in more.out.splitlines() if line.startswith("DefaultCluster"))
    in_yest, out_yest, in_today, out_today = (int(x) for x in row.split()[2:6])
    assert (in_yest, out_yest, in_today) == (0, 0, 1000) and out_today >= 600, row

    # brokerStatus: every key, the ones mqadmin and rocketmq-exporter parse as numbers
    table = dict(re.match(r"(\S+)\s*: ?(.*)$", line).groups() for line in status.out.splitlines() if " : " in line or ": " in line)
    for key in ("msgPutTotalTodayNow", "putMessageTimesTotal", "earliestMessageTimeStamp", "commitLogMaxOffset",
                "sendThreadPoolQueueHeadWaitTimeMills", "getMessageEntireTimeMax", "putMessageEntireTimeMax"):
        int(table[key])
    assert table["msgPutTotalTodayNow"] == "1000"
    assert float(table["putTps"].split(" ")[0]) > 0
    assert float(table["commitLogDiskRatio"]) > 0

    # topicStatus (202): the queues' max offsets add up to what was sent
    maxes = [int(line.split()[3]) for line in topic.out.splitlines() if line.startswith("broker-a")]
    assert len(maxes) == 4 and sum(maxes) == 1000

    # consumerProgress (208) and brokerConsumeStats (317): per queue offsets and the diff
    rows = [line.split() for line in progress.out.splitlines() if line.startswith("MqT")]
    assert len(rows) == 4
    broker_offsets = [int(r[3]) for r in rows]
    consumer_offsets = [int(r[4]) for r in rows]
    assert sum(broker_offsets) == 1000 and 600 <= sum(consumer_offsets) <= 1000
    diff = 1000 - sum(consumer_offsets)
    assert f"Diff Total: {diff}" in progress.out
    assert re.search(r"Consume TPS: \d+\.\d\d", progress.out)
    assert f"Diff Total: {diff}" in consume.out and "MqG" in consume.out

    # cloneGroupOffset (208, then 15 per queue): the new group starts where MqG is
    assert "clone group offset success. srcGroup[MqG], destGroup=[MqClone], topic[MqT]" in clone.out
    lag = json.loads(trocket("admin", "group", "lag", "-n", ns, "-g", "MqClone", "-t", "MqT", "--json").stdout)
    assert lag["lag"] == diff and lag["complete"]


def test_group_administration_and_a_reset_under_a_running_java_consumer(broker_factory):
    broker = broker_factory(name="mqadmin-groups")
    ns = broker.namesrv
    addr = f"127.0.0.1:{broker.port}"
    trocket("admin", "topic", "create", "-n", ns, "-t", "ResetT", "--queues", "2")
    started = time.monotonic()
    trocket("send", "-n", ns, "-t", "ResetT", "--count", "40", "--body", "first")
    # A reset by time goes to the stored message nearest the time (Java's search), so the
    # gap before `middle` must outlast the second send's start-up: three times what the
    # first send took, under any load.
    time.sleep(max(1.2, 3 * (time.monotonic() - started)))
    middle = int(time.time() * 1000)
    trocket("send", "-n", ns, "-t", "ResetT", "--count", "40", "--body", "second")
    consumer = JavaPushConsumer(ns, "ResetT", "JavaG")
    try:
        consumer.wait_for(lambda: len(consumer.consumed) >= 80, 60, "consume the 80 messages")
        assert sorted(consumer.bodies()) == ["first"] * 40 + ["second"] * 40
        consumer.wait_for(lambda: consumer.client_id is not None, 5, "report its client id")

        def committed() -> bool:  # the consumer persists its offsets every second
            done = subprocess.run([*trocket_command(), "admin", "group", "lag", "-n", ns, "-g", "JavaG", "-t", "ResetT",
                                   "--json"], capture_output=True, text=True, timeout=60)
            doc = json.loads(done.stdout)
            return doc["complete"] and doc["lag"] == 0

        consumer.wait_for(committed, 30, "commit its offsets")
        before = len(consumer.consumed)
        (reset, connection, status, update, listing, producer_less) = mqadmin(
            ["resetOffsetByTime", "-g", "JavaG", "-t", "ResetT", "-s", str(middle), "-n", ns],
            ["consumerConnection", "-g", "JavaG", "-n", ns],
            ["consumerStatus", "-g", "JavaG", "-i", consumer.client_id, "-n", ns],
            ["updateSubGroup", "-b", addr, "-g", "AdminG", "-r", "3", "-q", "2", "-n", ns],
            ["getConsumerConfig", "-g", "AdminG", "-n", ns],
            ["producerConnection", "-g", "NoSuchProducer", "-t", "ResetT", "-n", ns],
        )
        # the reset went through the broker to the running consumer: it consumes the
        # second half again (and only that)
        _no_exception(reset.text)
        assert "rollback consumer offset by specified group[JavaG]" in reset.out
        consumer.wait_for(lambda: len(consumer.consumed) >= before + 40, 60, "re-consume from the reset point")
        again = consumer.bodies()[before:]
        assert set(again) == {"second"} and len(again) >= 40
        # 203 and 307 (forwarded to the Java consumer, which answers its running info)
        _no_exception(connection.text)
        assert consumer.client_id in connection.out and "JAVA" in connection.out and "CLUSTERING" in connection.out
        _no_exception(status.text)
        assert "ResetT" in status.out
        # 200 as mqadmin sends it, read back with 201 by getConsumerConfig
        _no_exception(update.text)
        assert "create subscription group to" in update.out and "success" in update.out
        _no_exception(listing.text)
        assert "retryMaxTimes" in listing.out and "3" in listing.out
        assert "not exist" in producer_less.text
    finally:
        consumer.close()


def test_configuration_kv_and_write_permission(broker_factory):
    broker = broker_factory(name="mqadmin-config")
    ns = broker.namesrv
    addr = f"127.0.0.1:{broker.port}"
    trocket("admin", "topic", "create", "-n", ns, "-t", "CfgT", "--queues", "2")
    (get, update, again, bad, kv, kvget, ns_get, ns_update, ns_again, wipe, route, add, kvdel) = mqadmin(
        ["getBrokerConfig", "-b", addr, "-n", ns],
        ["updateBrokerConfig", "-b", addr, "-k", "maxMessageSize", "-v", "65536", "-n", ns],
        ["getBrokerConfig", "-b", addr, "-n", ns],
        ["updateBrokerConfig", "-b", addr, "-k", "listenPort", "-v", "1", "-n", ns],
        ["updateOrderConf", "-t", "CfgT", "-v", "broker-a:2", "-m", "put", "-n", ns],
        ["updateOrderConf", "-t", "CfgT", "-m", "get", "-n", ns],
        ["getNamesrvConfig", "-n", ns],
        ["updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true", "-n", ns],
        ["getNamesrvConfig", "-n", ns],
        ["wipeWritePerm", "-b", "broker-a", "-n", ns],
        ["topicRoute", "-t", "CfgT", "-n", ns],
        ["addWritePerm", "-b", "broker-a", "-n", ns],
        ["updateOrderConf", "-t", "CfgT", "-m", "delete", "-n", ns],
    )
    for out in (get, update, again, kv, kvget, ns_get, ns_update, ns_again, wipe, route, add, kvdel):
        _no_exception(out.text)

    def conf(out) -> dict[str, str]:
        return {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in out.out.splitlines() if "=" in line)}

    assert conf(get)["maxMessageSize"] == "4194304" and conf(get)["brokerName"] == "broker-a"
    assert f"update broker config success, {addr}" in update.out
    assert conf(again)["maxMessageSize"] == "65536"
    assert "CODE: 16" in bad.text and "listenPort cannot change while the broker runs" in bad.text
    assert "update orderConf success. topic=[CfgT], orderConf=[broker-a:2]" in kv.out
    assert "orderConf=[broker-a:2]" in kvget.out
    assert conf(ns_get)["orderMessageEnable"] == "false"
    assert "update name server config success" in ns_update.out
    assert conf(ns_again)["orderMessageEnable"] == "true"
    assert re.search(r"wipe write perm of broker\[broker-a\] in name server\[.+\] OK, \d+", wipe.out)
    # orderMessageEnable on: the route carries the order conf; the queues are read-only
    assert '"orderTopicConf":"broker-a:2"' in route.out and '"perm":4' in route.out
    assert re.search(r"add write perm of broker\[broker-a\] in name server\[.+\] OK, \d+", add.out)
    assert "delete orderConf success. topic=[CfgT]" in kvdel.out


def test_queries_by_key_unique_key_id_and_consume_queue(broker_factory):
    broker = broker_factory(name="mqadmin-query")
    ns = broker.namesrv
    addr = f"127.0.0.1:{broker.port}"
    trocket("admin", "topic", "create", "-n", ns, "-t", "QryT", "--queues", "1")
    sent = [json.loads(trocket("send", "-n", ns, "-t", "QryT", "--keys", f"qk{i} qshared", "--tag", "TagQ",
                               "--body", f"query {i}", "--json").stdout) for i in range(3)]

    def indexed() -> bool:  # the broker's index task, off the send path, has all three
        done = subprocess.run([*trocket_command(), "admin", "msg", "query", "-n", ns, "-t", "QryT", "--key", "qshared",
                               "--json"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        return done.returncode == 0 and len(json.loads(done.stdout)["messages"]) == 3

    wait_until_sync(indexed, 30, interval=0.05, what="the three messages indexed under qshared")
    by_key, shared, by_uniq, by_id, cq, cq_far = mqadmin(
        ["queryMsgByKey", "-t", "QryT", "-k", "qk1", "-n", ns],
        ["queryMsgByKey", "-t", "QryT", "-k", "qshared", "-n", ns],
        ["queryMsgByUniqueKey", "-t", "QryT", "-i", sent[2]["msgId"], "-n", ns],
        ["queryMsgById", "-i", sent[0]["offsetMsgId"], "-n", ns],
        ["queryCq", "-t", "QryT", "-q", "0", "-i", "1", "-c", "5", "-g", "NobodyG", "-b", addr, "-n", ns],
        ["queryCq", "-t", "QryT", "-q", "0", "-i", "9", "-b", addr, "-n", ns],
    )
    for out in (by_key, shared, by_uniq, by_id, cq, cq_far):
        _no_exception(out.text)
    # queryMsgByKey: "%-50s %4d %40d" msgId (the unique key), queue, queue offset
    rows = [line.split() for line in by_key.out.splitlines() if line.startswith(sent[1]["msgId"])]
    assert rows == [[sent[1]["msgId"], "0", "1"]], by_key.out
    assert [line.split()[0] for line in shared.out.splitlines()[1:]] == [s["msgId"] for s in sent], shared.out
    assert "Keys:                [qk2 qshared]" in by_uniq.out and sent[2]["msgId"] in by_uniq.out
    assert "Keys:                [qk0 qshared]" in by_id.out and f"OffsetID:            {sent[0]['offsetMsgId']}" in by_id.out
    # queryCq: the group's subscription is unknown (not online), entries 1 and 2
    assert "NobodyG@QryT is not online!" in cq.out and "max: 3, min: 0" in cq.out
    assert cq.out.count("ConsumeQueueData{physicOffset=") == 2 and "idx: 2" in cq.out
    assert "max: 3, min: 0" in cq_far.out and "ConsumeQueueData" not in cq_far.out
