"""Statistics: Java's windows (stats items, the store's TPS), the put-time figures, the
runtime-info table mqadmin and rocketmq-exporter parse, and the statistics codes
(315, 317, 208, 202, 303) against a real broker on trio's MockClock."""

from __future__ import annotations

import trio

from trocket.broker.snapshot import runtime_table
from trocket.broker.stats import StatsItem, StoreTps, java_double
from trocket.broker.store.put_times import DISTRIBUTE_NAMES, PutTimes, distribute, put_time_percentile
from trocket.codecs.bodies.client import MessageQueue
from trocket.codecs.bodies.fastjson import loads
from trocket.codecs.bodies.stats import (
    BrokerStatsData,
    ConsumeStats,
    ConsumeStatsList,
    QueryConsumeTimeSpanBody,
    TopicStatsTable,
)
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)

# -- units -------------------------------------------------------------------------------


def test_java_double_matches_java_text():
    assert [java_double(v) for v in (0.0, 2.0, 0.5, 1234.5, 1e7, 12345678.9, 1e-4, -2.5e-5)] == [
        "0.0", "2.0", "0.5", "1234.5", "1.0E7", "1.23456789E7", "1.0E-4", "-2.5E-5",
    ]


def test_stats_item_minute_window_is_javas():
    item = StatsItem()
    item.add(30, 3)
    item.sample(item.minute, 10_000, 10_000)  # first sample: a zero one an interval before
    assert list(item.minute) == [(0, 0, 0), (10_000, 3, 30)]
    snap = item.in_minute()
    assert (snap.sum, snap.tps, snap.avgpt, snap.times) == (30, 3.0, 10.0, 3)
    for t in range(2, 12):  # 7 samples kept: the last minute
        item.add(10, 1)
        item.sample(item.minute, t * 10_000, 10_000)
    assert len(item.minute) == 7
    snap = item.in_minute()
    assert snap.sum == 60 and snap.tps == 1.0 and snap.times == 6


def test_store_tps_needs_its_window_filled():
    tps = StoreTps()
    for second in range(10):
        tps.sample(second * 1000, second * 5)
    assert tps.tps(10) is None and tps.text() == "  "  # Java prints empty parts until then
    tps.sample(10_000, 50)
    assert tps.tps(10) == 5.0
    assert tps.text() == "5.0  "


def test_put_times_distribution_and_percentiles():
    times = PutTimes()
    for ms in (3, 3, 12, 120, 1500):
        times.record_slow(ms * 1_000_000 + 5)
    assert times.max_ms == 1500
    slow = times.take()
    assert times.slow == {} and slow == {3: 2, 12: 1, 120: 1, 1500: 1}
    counts = distribute(100, slow)
    assert dict(zip(DISTRIBUTE_NAMES, counts)) == {
        "[<=0ms]": 95, "[0~10ms]": 2, "[10~50ms]": 1, "[50~100ms]": 0, "[100~200ms]": 1, "[200~500ms]": 0,
        "[500ms~1s]": 0, "[1~2s]": 1, "[2~3s]": 0, "[3~4s]": 0, "[4~5s]": 0, "[5~10s]": 0, "[10s~]": 0,
    }
    # 95 of 100 puts under 1 ms: the median is inside the first bucket (0..1 ms)
    assert 0 < put_time_percentile(100, slow, 0.5) < 1
    assert put_time_percentile(100, slow, 0.99) > 100  # the 99th is the 120 ms put's bucket
    assert put_time_percentile(0, {}, 0.99) == 0.0


# -- a broker ----------------------------------------------------------------------------


def _table(r: RemotingCommand) -> dict[str, str]:
    assert r.code == 0, r.remark
    return loads(r.body)["table"]


async def test_runtime_info_has_every_key_mqadmin_and_the_exporter_read(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        await trio.sleep(5.5)
        for i in range(20):
            assert (await c.invoke_sync(addr, wire.send_v1("Tps", b"x" * 100, queue_id=i % 4, properties=wire.props()))).code == 0
        await trio.sleep(6)  # samples at 1 .. 11 s: 0 before the sends, 20 after
        table = _table(await c.invoke_sync(addr, RemotingCommand.request(28)))
        # rocketmq-exporter's BrokerRuntimeStats parses these as numbers: all present
        for key in (
            "msgPutTotalTodayNow", "msgGetTotalTodayNow", "sendThreadPoolQueueHeadWaitTimeMills",
            "queryThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueSize", "bootTimestamp",
            "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning", "pullThreadPoolQueueSize",
            "commitLogMinOffset", "pullThreadPoolQueueHeadWaitTimeMills", "dispatchMaxBuffer", "brokerVersion",
            "pageCacheLockTimeMills", "commitLogMaxOffset", "getMessageEntireTimeMax", "msgPutTotalTodayMorning",
            "putMessageTimesTotal", "msgGetTotalTodayMorning", "sendThreadPoolQueueSize",
            "startAcceptSendRequestTimeStamp", "putMessageEntireTimeMax", "earliestMessageTimeStamp",
            "remainTransientStoreBufferNumbs", "queryThreadPoolQueueCapacity", "dispatchBehindBytes",
            "putMessageSizeTotal", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity",
            "EndTransactionQueueSize", "EndTransactionThreadPoolQueueCapacity",
        ):
            int(table[key])
        for key in ("consumeQueueDiskRatio", "commitLogDiskRatio", "putMessageAverageSize", "putLatency99", "putLatency999"):
            float(table[key])
        assert float(table["remainHowManyDataToFlush"].split(" ")[0]) >= 0
        assert table["brokerVersion"] == "409"
        # 20 puts in the last 10 s: 2 a second; the 60 and 600 s windows are not filled yet
        assert table["putTps"] == "2.0  "
        assert table["msgPutTotalTodayNow"] == table["putMessageTimesTotal"] == "20"
        size = int(table["putMessageSizeTotal"])  # whole records: 20 of the same size, each above its body
        assert size % 20 == 0 and size > 20 * 100
        assert float(table["putMessageAverageSize"]) == size / 20
        assert table["putMessageDistributeTime"].startswith("[<=0ms]:")
        assert int(table["earliestMessageTimeStamp"]) > 1_600_000_000_000
        assert table["getTransferedTps"] == "0.0  "
        # the exporter and mqadmin clusterList read the first TPS as a double
        assert float(table["putTps"].split(" ")[0]) == 2.0
        snap = broker.snapshot()
        assert runtime_table(snap)["putTps"] == table["putTps"]


async def test_puts_counted_per_topic_and_queue(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        await trio.sleep(1.5)
        for q in range(3):
            await c.invoke_sync(addr, wire.send_v2("Q3", b"y" * 10, queue_id=q, properties=wire.props()))
        broker.stats.refresh()
        assert broker.stats.put_total == 3
        assert broker.stats.item("TOPIC_PUT_NUMS", "Q3").value == 3
        assert broker.stats.item("QUEUE_PUT_NUMS", "Q3@2").value == 1
        # a topic deleted and made again: its new queues count from 0, its stats items
        # stay (Java's default, autoDeleteUnusedStats=false)
        await c.invoke_sync(addr, RemotingCommand.request(215, ext_fields={"topic": "Q3"}))
        await c.invoke_sync(addr, wire.send_v2("Q3", b"y" * 10, queue_id=0, properties=wire.props()))
        broker.stats.refresh()
        assert broker.stats.put_total == 4
        assert broker.stats.item("TOPIC_PUT_NUMS", "Q3").value == 4
        assert broker.stats.item("QUEUE_PUT_NUMS", "Q3@0").value == 2


async def test_view_broker_stats_data_and_consume_stats(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for i in range(6):
            await c.invoke_sync(addr, wire.send_v1("St", b"m%d" % i, queue_id=i % 2, properties=wire.props(tags="a")))
        r = await c.invoke_sync(addr, wire.pull("St", 0, 0, group="SG", sys_flag=4))
        assert r.code == 0
        await c.invoke_sync(addr, RemotingCommand.request(15, UpdateConsumerOffsetRequestHeader(
            consumerGroup="SG", topic="St", queueId=0, commitOffset=3)))
        await trio.sleep(10.5)  # one minute-window sample (every 10 s)

        async def view(name: str, key: str) -> RemotingCommand:
            return await c.invoke_sync(addr, RemotingCommand.request(315, ViewBrokerStatsDataRequestHeader(statsName=name, statsKey=key)))

        data = BrokerStatsData.from_body((await view("TOPIC_PUT_NUMS", "St")).body)
        assert data.stats_minute.sum == 6 and data.stats_minute.tps == 0.6
        data = BrokerStatsData.from_body((await view("GROUP_GET_NUMS", "St@SG")).body)
        assert data.stats_minute.sum == 3 and data.stats_minute.avgpt == 3.0  # one pull of 3
        data = BrokerStatsData.from_body((await view("BROKER_PUT_NUMS", broker.config.cluster)).body)
        assert data.stats_minute.sum == 6
        r = await view("GROUP_GET_NUMS", "St@nobody")
        assert r.code == 1 and r.remark == "The stats <GROUP_GET_NUMS> <St@nobody> not exist"

        # 208: the group's offsets per queue
        r = await c.invoke_sync(addr, RemotingCommand.request(208, GetConsumeStatsRequestHeader(consumerGroup="SG", topic="St")))
        cs = ConsumeStats.from_body(r.body)
        name = broker.config.broker_name
        q0 = cs.offset_table[MessageQueue("St", name, 0)]
        assert (q0.broker_offset, q0.consumer_offset) == (3, 3) and q0.last_timestamp > 0
        assert cs.offset_table[MessageQueue("St", name, 1)].consumer_offset == 0
        assert cs.total_diff == 3  # of its 4 read queues, queue 1 has 3 left
        assert cs.consume_tps == 0.3  # 3 messages pulled in the minute window (10 s so far)

        # 317: every group
        r = await c.invoke_sync(addr, RemotingCommand.request(317, GetConsumeStatsInBrokerHeader(isOrder=False)))
        body = ConsumeStatsList.from_body(r.body)
        assert body.broker_addr == addr and body.total_diff == 3
        groups = {g: stats for m in body.consume_stats_list for g, stats in m.items()}
        # every subscription group: Java's built-in ones (nothing consumed) and SG (its pull made it)
        assert {"SG", "TOOLS_CONSUMER", "SELF_TEST_C_GROUP"} <= set(groups) and groups["TOOLS_CONSUMER"] == []
        assert [cs.total_diff for cs in groups["SG"]] == [3]
        r = await c.invoke_sync(addr, RemotingCommand.request(317, GetConsumeStatsInBrokerHeader(isOrder=True)))
        assert {g: s for m in ConsumeStatsList.from_body(r.body).consume_stats_list for g, s in m.items()}["SG"] == []

        # 202 and 303
        r = await c.invoke_sync(addr, RemotingCommand.request(202, GetTopicStatsInfoRequestHeader(topic="St")))
        table = TopicStatsTable.from_body(r.body).offset_table
        assert table[MessageQueue("St", name, 1)].max_offset == 3
        r = await c.invoke_sync(addr, RemotingCommand.request(202, GetTopicStatsInfoRequestHeader(topic="Nope")))
        assert r.code == 17 and r.remark == "topic[Nope] not exist"
        r = await c.invoke_sync(addr, RemotingCommand.request(303, QueryConsumeTimeSpanRequestHeader(topic="St", group="SG")))
        spans = {s.message_queue.queue_id: s for s in QueryConsumeTimeSpanBody.from_body(r.body).consume_time_span_set}
        assert spans[0].delay_time == 0 and spans[1].delay_time > 0
        assert spans[0].min_timestamp <= spans[0].consume_timestamp == spans[0].max_timestamp


def test_runtime_table_of_a_fresh_snapshot_formats_like_java():
    from trocket.broker.snapshot import BrokerSnapshot

    snap = BrokerSnapshot(cluster="C", broker_name="b", broker_id=0, broker_addr="1.2.3.4:5", version_desc="v",
                          boot_timestamp=1000, now_ms=1000 + 90061_000, put_tps=(None, None, None),
                          get_found_tps=(None,) * 3, get_miss_tps=(None,) * 3, get_transferred_tps=(None,) * 3,
                          put_distribution=(0,) * 13)
    table = runtime_table(snap)
    assert table["runtime"] == "[ 1 days, 1 hours, 1 minutes, 1 seconds ]"
    assert table["putMessageTimesTotal"] == "1"  # Java reports an empty store's total as 1
    assert table["putMessageAverageSize"] == "0.0"
    assert table["getTotalTps"] == "0.0 0.0 0.0"
    assert table["putTps"] == "  "
