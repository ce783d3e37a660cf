"""The Prometheus endpoint (broker/metrics.py): rocketmq-exporter's names and labels
from the one broker snapshot (the values GET_BROKER_RUNTIME_INFO gives), scraped with a
real HTTP client while sends and pulls run; the name server's endpoint."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request

import pytest
import trio

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from trocket.broker.metrics import namesrv_endpoint  # noqa: E402
from trocket.broker.namesrv.server import NamesrvConfig, NameServer  # noqa: E402
from trocket.broker.snapshot import runtime_table  # noqa: E402
from trocket.codecs.command import RemotingCommand  # noqa: E402
from trocket.codecs.headers import UpdateConsumerOffsetRequestHeader  # noqa: E402

from ..waiting import wait_until  # noqa: E402
from .test_controller import read_lines_until  # noqa: E402
from .test_groups import heartbeat  # noqa: E402

EXPORTER_NAMES = {
    "rocketmq_broker_tps", "rocketmq_broker_qps", "rocketmq_producer_tps", "rocketmq_producer_message_size",
    "rocketmq_producer_offset", "rocketmq_producer_count", "rocketmq_topic_retry_offset", "rocketmq_topic_dlq_offset", "rocketmq_consumer_tps",
    "rocketmq_group_consume_tps", "rocketmq_consumer_message_size", "rocketmq_consumer_offset",
    "rocketmq_send_back_nums", "rocketmq_group_get_latency_by_storetime", "rocketmq_group_diff",
    "rocketmq_group_retrydiff", "rocketmq_group_dlqdiff", "rocketmq_group_count",
    "rocketmq_brokeruntime_msg_put_total_today_now", "rocketmq_brokeruntime_pmdt_0ms",
    "rocketmq_brokeruntime_pmdt_10stomore", "rocketmq_brokeruntime_put_tps10", "rocketmq_brokeruntime_getfound_tps600",
    "rocketmq_brokeruntime_commitlogdir_capacity_free", "rocketmq_brokeruntime_commitlog_maxoffset",
    "rocketmq_brokeruntime_earliest_message_timestamp", "rocketmq_brokeruntime_put_latency_99",
}


async def _scrape(port: int) -> dict[str, list]:
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
            return r.read().decode()

    text = await trio.to_thread.run_sync(get)
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _one(families: dict[str, list], name: str, **labels: str) -> float:
    found = [s.value for s in families[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, families.get(name))
    return found[0]


async def test_endpoint_during_a_load_run(tmp_path, wire):
    async with wire.running_broker(tmp_path, metrics_listen=("127.0.0.1", 0)) as broker, wire.client() as c:
        addr = broker.broker_addr
        port = broker.metrics.port
        sent = 0
        scrapes = []
        done = trio.Event()

        async def sender(q: int) -> None:
            nonlocal sent
            for i in range(150):
                r = await c.invoke_sync(addr, wire.send_v2("MetT", b"m" * 64, queue_id=q, properties=wire.props(keys=f"k{i}")))
                assert r.code == 0
                sent += 1
                await trio.sleep(0.002)  # a second or so of load

        async def scraper() -> None:
            while not done.is_set():
                scrapes.append((sent, await _scrape(port)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(scraper)
            async with trio.open_nursery() as senders:
                for q in range(4):
                    senders.start_soon(sender, q)
            done.set()
        during = [fams for n, fams in scrapes if 0 < n < 600]
        assert len(during) >= 2, [n for n, _ in scrapes]  # scraped while the sends ran, every scrape whole
        for _n, fams in scrapes:
            assert EXPORTER_NAMES <= set(fams)

        # a group that consumed part of it, online with a producer on the same client
        assert (await c.invoke_sync(addr, heartbeat("C1", "MetG", ("MetT",), producer="MetP"))).code == 0
        r = await c.invoke_sync(addr, wire.pull("MetT", 0, 0, group="MetG", sys_flag=4))
        assert r.code == 0
        await c.invoke_sync(addr, RemotingCommand.request(15, UpdateConsumerOffsetRequestHeader(
            consumerGroup="MetG", topic="MetT", queueId=0, commitOffset=100)))

        async def fresh() -> dict[str, list] | None:  # a snapshot after the commit (scrapes reuse one for 1 s)
            fams = await _scrape(port)
            offsets = fams.get("rocketmq_consumer_offset", [])
            return fams if any(s.labels.get("group") == "MetG" for s in offsets) else None

        fams = await wait_until(fresh, 10, interval=0.05, what="a scrape with MetG's committed offset")
        name, cluster = broker.config.broker_name, broker.config.cluster
        assert _one(fams, "rocketmq_producer_offset", cluster=cluster, broker=name, topic="MetT") == 600
        assert _one(fams, "rocketmq_consumer_offset", cluster=cluster, broker=name, topic="MetT", group="MetG") == 100
        assert _one(fams, "rocketmq_group_diff", group="MetG", topic="MetT", countOfOnlineConsumers="1", msgModel="1") == 500
        assert _one(fams, "rocketmq_producer_count", cluster=cluster, broker=name, group="MetP") == 1
        assert _one(fams, "rocketmq_group_get_latency_by_storetime", topic="MetT", group="MetG") > 0
        table = runtime_table(broker.snapshot())
        rt = {"cluster": cluster, "brokerIP": addr, "broker_version": "409", "boottime": table["bootTimestamp"]}
        assert _one(fams, "rocketmq_brokeruntime_msg_put_total_today_now", **rt) == 600 == int(table["msgPutTotalTodayNow"])
        assert _one(fams, "rocketmq_brokeruntime_commitlog_maxoffset", **rt) == int(table["commitLogMaxOffset"])
        assert _one(fams, "rocketmq_brokeruntime_put_message_average_size", **rt) == float(table["putMessageAverageSize"])
        assert _one(fams, "rocketmq_brokeruntime_msg_gettotal_today_now", **rt) == 32  # one pull of 32
        mine = {"cluster": cluster, "broker": name, "brokerIP": addr}
        assert _one(fams, "trocket_remoting_connections", **mine) >= 1
        assert _one(fams, "trocket_system_busy_replies", **mine) == 0
        assert 0 < _one(fams, "trocket_store_disk_used_ratio", **mine) < 1
        assert _one(fams, "trocket_index_keys", **mine) >= 600  # each message's KEYS entry
        # the embedded name server's figures too
        assert _one(fams, "trocket_namesrv_brokers") == 1
        assert _one(fams, "trocket_namesrv_broker_last_update_age_seconds", broker=name, brokerIP=addr) >= 0
        assert broker.metrics.scrapes >= broker.metrics.snapshots > 0


async def test_scrapes_close_together_share_one_snapshot(tmp_path, wire):
    async with wire.running_broker(tmp_path, metrics_listen=("127.0.0.1", 0)) as broker:
        endpoint = broker.metrics
        results = []
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(lambda: _scrape_into(endpoint.port, results))
        assert len(results) == 4 and endpoint.snapshots == 1


async def _scrape_into(port: int, results: list) -> None:
    results.append(await _scrape(port))


async def test_name_server_endpoint(tmp_path, wire):
    ns = NameServer(NamesrvConfig(listen_port=0))
    async with trio.open_nursery() as nursery:
        await nursery.start(ns.serve)
        endpoint = namesrv_endpoint(ns, "127.0.0.1", 0)
        await nursery.start(endpoint.run)
        async with wire.running_broker(tmp_path, namesrv_addrs=ns.address):
            await wait_until(lambda: ns.route_info.broker_live_table, 5, what="the broker registered")
            fams = await _scrape(endpoint.port)
        assert _one(fams, "trocket_namesrv_brokers", namesrv=ns.address) == 1
        assert _one(fams, "trocket_namesrv_topics", namesrv=ns.address) >= 1
        nursery.cancel_scope.cancel()


async def test_a_stuck_scraper_holds_up_no_send(tmp_path, wire):
    """A scraper that connects and never finishes its request, and one that never reads
    its answer: sends go on at their pace and another scrape is answered meanwhile."""
    async with wire.running_broker(tmp_path, metrics_listen=("127.0.0.1", 0)) as broker, wire.client() as c:
        port = broker.metrics.port
        half = await trio.open_tcp_stream("127.0.0.1", port)
        await half.send_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # no blank line: the request never ends
        deaf = await trio.open_tcp_stream("127.0.0.1", port)
        await deaf.send_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 50)  # answers it never reads
        with trio.fail_after(10):
            for i in range(200):
                r = await c.invoke_sync(broker.broker_addr, wire.send_v2("StuckT", b"x", properties=wire.props(keys=f"k{i}")))
                assert r.code == 0

            async def all_sent() -> dict[str, list] | None:  # past the snapshot the deaf scraper's requests made
                fams = await _scrape(port)
                puts = _one(fams, "rocketmq_brokeruntime_msg_put_total_today_now", cluster=broker.config.cluster)
                return fams if puts >= 200 else None

            fams = await wait_until(all_sent, 10, interval=0.05, what="a scrape counting the 200 sends")
        assert _one(fams, "rocketmq_brokeruntime_msg_put_total_today_now", cluster=broker.config.cluster) == 200
        assert broker.metrics.scrapes >= 1
        await half.aclose()
        await deaf.aclose()


@pytest.mark.parametrize("command", [
    ["broker", "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0", "--segment-size", "32m"],
    ["namesrv", "--listen", "127.0.0.1:0"],
])
def test_the_command_line_serves_metrics(tmp_path, command):
    """``trocket broker|namesrv --metrics HOST:PORT``, scraped over HTTP, then SIGINT."""
    store = ["--store", str(tmp_path / "st")] if command[0] == "broker" else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "trocket", *command, *store, "--metrics", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        lines = read_lines_until(proc, "boot success", 30)
        port = int(re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", "".join(lines)).group(1))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            names = {f.name for f in text_string_to_metric_families(r.read().decode())}
        assert ("rocketmq_brokeruntime_put_tps10" in names) == (command[0] == "broker")
        assert "trocket_namesrv_brokers" in names
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out.decode()  # SIGINT: 130 after the clean shutdown (the Ctrl-C rule)


async def test_the_snapshots_tables_are_gathered_in_turns(tmp_path, wire):
    """take_snapshot_tables: the same rows as a snapshot taken at once, gathered a few
    at a time while other tasks run (a scrape of a broker with many topics and groups
    does not hold up its sends for the whole walk)."""
    from trocket.broker.snapshot import take_snapshot_tables

    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for t in range(12):
            assert (await c.invoke_sync(addr, wire.send_v2(f"TurnT{t}", b"x", queue_id=0))).code == 0
            await c.invoke_sync(addr, RemotingCommand.request(15, UpdateConsumerOffsetRequestHeader(
                consumerGroup=f"TurnG{t % 3}", topic=f"TurnT{t}", queueId=0, commitOffset=0)))
        at_once = broker.snapshot(tables=True)
        turns = 0
        done = False

        async def other_task() -> None:
            nonlocal turns
            while not done:
                turns += 1
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_task)
            await trio.lowlevel.checkpoint()
            before = turns
            snap = await take_snapshot_tables(broker.ctx, broker.stats, boot_timestamp=broker.boot_timestamp,
                                              rows_per_turn=2)
            during = turns - before
            done = True
        def rows(s):  # what does not move with the clock (the latencies and TPS do)
            return ([(t.topic, t.max_offset) for t in s.topics],
                    [(g.group, g.topic, g.broker_offset, g.consumer_offset, g.diff) for g in s.groups])

        assert rows(snap) == rows(at_once)
        assert len(snap.groups) == 12 and sum(t.topic.startswith("TurnT") for t in snap.topics) == 12
        assert during >= (len(snap.topics) + len(snap.groups)) // 2 - 1  # the other task ran every 2 rows
