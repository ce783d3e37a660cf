"""``trocket admin`` for operators (trocket/cli_admin.py) against a ``trocket broker``
subprocess: the cluster with its TPS, a broker's figures, a topic's queues."""

from __future__ import annotations

import json
import time

import pytest

from .test_cli_send import run


@pytest.mark.slow
async def test_cluster_broker_and_topic_stats(broker_process):
    broker = broker_process(name="ops-stats")
    ns = broker.namesrv
    started = time.monotonic()
    assert (await run("admin", "topic", "create", "-n", ns, "-t", "OpsT", "--queues", "2")).returncode == 0
    early = await run("admin", "cluster", "-n", ns)
    assert early.returncode == 0, early.stderr
    # the broker has sampled its TPS for less than 10 s: shown as "-", and said why
    assert "a broker shows it 10 s after it started" in early.stdout
    import trio

    await trio.sleep(max(0.0, 11.5 - (time.monotonic() - started)))
    sent = await run("send", "-n", ns, "-t", "OpsT", "--count", "300", "--size", "50", "--mode", "async")
    assert sent.returncode == 0, sent.stderr
    sent_at = time.monotonic()

    def within_10_s() -> bool:
        """The sends are in the broker's 10 s TPS window still (on a loaded machine each
        command here takes seconds: past the window a 0 is the right answer)."""
        return time.monotonic() - sent_at < 9.0

    # the broker samples its totals once a second (and shows no 10 s figure before its
    # 11th sample): a read just after the sends may come before the sample that holds
    # them; a second read, a second or more later inside the window, may not
    zero_reads_in_window = 0
    while True:
        in_window = within_10_s()
        cluster = await run("admin", "cluster", "-n", ns, "--json")
        rows = json.loads(cluster.stdout)
        assert len(rows) == 1 and rows[0]["putToday"] == 300 and rows[0]["getToday"] == 0
        assert rows[0]["getTps"] == 0.0 and rows[0]["error"] is None
        if rows[0]["putTps"] > 0 or not in_window:
            break
        zero_reads_in_window += 1
        assert zero_reads_in_window < 2, rows
    table = await run("admin", "cluster", "-n", ns)
    assert "in tps" in table.stdout and f"127.0.0.1:{broker.port}" in table.stdout

    stats = await run("admin", "broker", "stats", "-n", ns, "--json")
    (doc,) = json.loads(stats.stdout)
    figures = doc["figures"]
    assert figures["messages in today"] == 300 and figures["put failures"] == "0"
    tps_10, tps_60, tps_600 = figures["put tps (10 s / 60 s / 600 s)"].split(" / ")
    assert (tps_60, tps_600) == ("-", "-")  # the broker has not run for a minute yet
    if within_10_s():
        assert float(tps_10) > 0, figures
    full = await run("admin", "broker", "stats", "-n", ns, "-b", f"127.0.0.1:{broker.port}", "--all", "--json")
    (doc,) = json.loads(full.stdout)
    assert doc["runtime"]["msgPutTotalTodayNow"] == "300" and "putTps" in doc["runtime"]
    text = await run("admin", "broker", "stats", "-n", ns, "--all")
    assert "msgPutTotalTodayNow" in text.stdout and "300" in text.stdout

    topic = await run("admin", "topic", "stats", "-n", ns, "-t", "OpsT", "--json")
    doc = json.loads(topic.stdout)
    assert sum(q["maxOffset"] for q in doc["queues"]) == 300 and len(doc["queues"]) == 2
    assert doc["brokers"][0]["putTpsMinute"] >= 0
    missing = await run("admin", "topic", "stats", "-n", ns, "-t", "NoSuchTopic")
    assert missing.returncode == 1 and "NoRouteError" in missing.stderr


@pytest.mark.slow
async def test_group_commands(broker_process):
    broker = broker_process(name="ops-groups")
    ns = broker.namesrv
    assert (await run("admin", "topic", "create", "-n", ns, "-t", "GrT", "--queues", "2")).returncode == 0
    assert (await run("send", "-n", ns, "-t", "GrT", "--count", "100", "--size", "20")).returncode == 0
    consumed = await run("consume", "-n", ns, "-t", "GrT", "-g", "GrG", "--count", "40", "--from", "first", "--quiet")
    assert consumed.returncode == 0, consumed.stderr

    lag = await run("admin", "group", "lag", "-n", ns, "-g", "GrG", "-t", "GrT", "--json")
    doc = json.loads(lag.stdout)
    assert lag.returncode == 0 and doc["lag"] == 60 and doc["complete"] and doc["exists"]
    nobody = await run("admin", "group", "lag", "-n", ns, "-g", "Nobody", "-t", "GrT")
    assert nobody.returncode == 1 and "consumer group Nobody does not exist" in nobody.stderr
    assert "total lag" not in nobody.stdout

    described = await run("admin", "group", "describe", "-n", ns, "-g", "GrG", "--json")
    doc = json.loads(described.stdout)
    assert doc["exists"] and doc["lag"] == 60 and doc["clients"] == [] and doc["configs"][0]["retryMaxTimes"] == 16
    listed = await run("admin", "group", "list", "-n", ns, "--json")
    assert "GrG" in {g["group"] for g in json.loads(listed.stdout)["groups"]}

    updated = await run("admin", "group", "update", "-n", ns, "-g", "GrG", "--retry-max", "4", "--consume", "off", "--json")
    assert updated.returncode == 0 and json.loads(updated.stdout)[0]["retryMaxTimes"] == 4
    refused = await run("admin", "group", "update", "-n", ns, "-g", "GrG", "--retry-queues", "-1")
    assert refused.returncode == 1 and "cannot be negative" in refused.stderr
    listed = json.loads((await run("admin", "group", "list", "-n", ns, "--json")).stdout)["groups"]
    assert next(g for g in listed if g["group"] == "GrG")["consumeEnable"] is False  # (pulls refused: test_groups.py)
    assert (await run("admin", "group", "update", "-n", ns, "-g", "GrG", "--consume", "on")).returncode == 0

    # resets: to the earliest, to an offset, to the latest
    reset = await run("admin", "group", "reset", "-n", ns, "-g", "GrG", "-t", "GrT", "--to", "earliest", "--json")
    assert reset.returncode == 0, reset.stderr
    assert {q["offset"] for q in json.loads(reset.stdout)["queues"]} == {0}
    lag = json.loads((await run("admin", "group", "lag", "-n", ns, "-g", "GrG", "-t", "GrT", "--json")).stdout)
    assert lag["lag"] == 100
    reset = await run("admin", "group", "reset", "-n", ns, "-g", "GrG", "-t", "GrT", "--offset", "45", "--json")
    assert [q["offset"] for q in json.loads(reset.stdout)["queues"]] == [45, 45]
    reset = await run("admin", "group", "reset", "-n", ns, "-g", "GrG", "-t", "GrT", "--to", "latest")
    assert reset.returncode == 0 and "new offset" in reset.stdout
    lag = json.loads((await run("admin", "group", "lag", "-n", ns, "-g", "GrG", "-t", "GrT", "--json")).stdout)
    assert lag["lag"] == 0
    bad = await run("admin", "group", "reset", "-n", ns, "-g", "Nobody", "-t", "GrT", "--to", "latest")
    assert bad.returncode == 1 and "not exist" in bad.stderr
    bad = await run("admin", "group", "reset", "-n", ns, "-g", "GrG", "-t", "GrT", "--timestamp", "yesterday")
    assert bad.returncode == 1 and "--timestamp" in bad.stderr

    conns = await run("admin", "group", "connections", "-n", ns, "-g", "GrG")
    assert conns.returncode == 1 and "no client of consumer group GrG is connected" in conns.stdout

    deleted = await run("admin", "group", "delete", "-n", ns, "-g", "GrG", "--remove-offset")
    assert deleted.returncode == 0
    gone = await run("admin", "group", "lag", "-n", ns, "-g", "GrG", "-t", "GrT")
    assert gone.returncode == 1 and "does not exist" in gone.stderr


@pytest.mark.slow
async def test_group_lag_says_when_a_queue_cannot_be_read(broker_process, tmp_path):
    import os
    import signal
    import subprocess

    from .conftest import acceptance_tools

    acc = acceptance_tools()
    port = acc.free_port()
    ns = f"127.0.0.1:{port}"
    namesrv = subprocess.Popen([*acc.trocket_command(), "namesrv", "--listen", ns], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        broker = broker_process(name="ops-down", extra=["-n", ns])
        import trio

        async def routed() -> bool:
            return (await run("admin", "topic", "create", "-n", ns, "-t", "DownT", "--queues", "2")).returncode == 0

        for _ in range(100):
            if await routed():
                break
            await trio.sleep(0.1)
        assert (await run("send", "-n", ns, "-t", "DownT", "--count", "10", "--size", "16")).returncode == 0
        assert (await run("consume", "-n", ns, "-t", "DownT", "-g", "DG", "--count", "10", "--from", "first",
                          "--quiet")).returncode == 0
        os.kill(broker.proc.pid, signal.SIGSTOP)  # the master stops answering; the name server still routes to it
        try:
            lag = await run("admin", "group", "lag", "-n", ns, "-g", "DG", "-t", "DownT", "--timeout", "1", "--json")
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        doc = json.loads(lag.stdout)
        assert lag.returncode == 1 and doc["lag"] is None and not doc["complete"]
        assert any("cannot read the offsets of DownT broker-a queue 0" in p for p in doc["problems"])
        assert any("the total is not known" in p for p in doc["problems"])
        # a topic delete with a master that does not answer deletes nothing anywhere
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            deleted = await run("admin", "topic", "delete", "-n", ns, "-t", "DownT", "--timeout", "1")
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        assert deleted.returncode == 1 and "nothing deleted: broker broker-a" in deleted.stderr
        route = await run("admin", "topic", "route", "-n", ns, "-t", "DownT")
        assert route.returncode == 0 and "broker-a" in route.stdout
    finally:
        namesrv.send_signal(signal.SIGINT)
        namesrv.wait(20)


@pytest.mark.slow
async def test_broker_config_write_perm_and_topic_delete_refusals(broker_process):
    broker = broker_process(name="ops-config")
    ns = broker.namesrv
    got = await run("admin", "broker", "config", "get", "-n", ns, "-k", "maxMessageSize", "--json")
    assert got.returncode == 0 and json.loads(got.stdout)[0]["config"] == {"maxMessageSize": "4194304"}
    done = await run("admin", "broker", "config", "set", "-n", ns, "maxMessageSize=2048", "fileReservedTime=48", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["config"] == {"maxMessageSize": "2048", "fileReservedTime": "48"}
    big = await run("send", "-n", ns, "-t", "CfgT", "--size", "4000")
    assert big.returncode == 1 and "limit 2048B" in big.stderr
    for pair, text in (("listenPort=1", "cannot change while the broker runs"), ("maxMessageSize=big", "expected an integer"),
                       ("nokey", "is not KEY=VALUE")):
        bad = await run("admin", "broker", "config", "set", "-n", ns, pair)
        assert bad.returncode == 1 and text in bad.stderr, bad.stderr
    got = await run("admin", "broker", "config", "get", "-n", ns, "-k", "maxMessageSize")
    assert got.stdout.strip() == "maxMessageSize=2048"
    assert "maxMessageSize=2048" in (broker.store / "config" / "broker.properties").read_text()

    # draining: the name server routes the broker read-only until it registers again
    assert (await run("send", "-n", ns, "-t", "CfgT", "--body", "x")).returncode == 0
    off = await run("admin", "broker", "write-perm", "off", "-n", ns, "-B", "broker-a", "--json")
    assert off.returncode == 0 and json.loads(off.stdout)["namesrv"][0]["topics"] > 0
    route = json.loads((await run("admin", "topic", "route", "-n", ns, "-t", "CfgT", "--json")).stdout)
    assert route["queueDatas"][0]["perm"] == 4
    on = await run("admin", "broker", "write-perm", "on", "-n", ns, "-B", "broker-a")
    assert on.returncode == 0 and "add write perm of broker[broker-a]" in on.stdout

    # a system topic is refused before anything is asked
    for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_trace"):
        refused = await run("admin", "topic", "delete", "-n", ns, "-t", topic)
        assert refused.returncode == 1 and "is a system topic" in refused.stderr
    sent = await run("send", "-n", ns, "-t", "AfterRefusal", "--body", "still auto-created")
    assert sent.returncode == 0, sent.stderr  # TBW102's route is intact


@pytest.mark.slow
async def test_msg_query_and_show(broker_process):
    broker = broker_process(name="ops-msg")
    ns = broker.namesrv
    assert (await run("admin", "topic", "create", "-n", ns, "-t", "MsgT", "--queues", "2")).returncode == 0
    sent = []
    for i in range(3):
        r = await run("send", "-n", ns, "-t", "MsgT", "--keys", f"order-{i} shared", "--tag", "TagM",
                      "--body", f"hello {i}", "--property", "color=blue", "--json")
        assert r.returncode == 0, r.stderr
        sent.append(json.loads(r.stdout))
    import trio

    async def query(*argv: str):
        return await run("admin", "msg", "query", "-n", ns, *argv)

    # the index is built in the background: the first query may come before it
    for _ in range(100):
        by_key = await query("-t", "MsgT", "--key", "order-1", "--json")
        if by_key.returncode == 0:
            break
        await trio.sleep(0.05)
    doc = json.loads(by_key.stdout)
    assert [m["body"] for m in doc["messages"]] == ["hello 1"]
    (m,) = doc["messages"]
    assert (m["msgId"], m["uniqKey"], m["keys"], m["tags"]) == (sent[1]["offsetMsgId"], sent[1]["msgId"], "order-1 shared", "TagM")
    shared = json.loads((await query("-t", "MsgT", "--key", "shared", "--json")).stdout)["messages"]
    assert [m["body"] for m in shared] == ["hello 0", "hello 1", "hello 2"]  # oldest first
    text = await query("-t", "MsgT", "--key", "shared", "--max", "2")
    assert text.returncode == 0 and "hello 2" in text.stdout and "unique key" in text.stdout

    by_uniq = json.loads((await query("-t", "MsgT", "--unique-key", sent[2]["msgId"], "--json")).stdout)["messages"]
    assert [m["body"] for m in by_uniq] == ["hello 2"]
    by_id = json.loads((await query("--id", sent[0]["offsetMsgId"], "--json")).stdout)["messages"]
    assert [m["body"] for m in by_id] == ["hello 0"]
    # an id that is no offset message id: with -t, a unique key (Java's viewMessage(topic, id))
    by_id = json.loads((await query("--id", sent[0]["msgId"], "-t", "MsgT", "--json")).stdout)["messages"]
    assert [m["body"] for m in by_id] == ["hello 0"]
    q = sent[1]["queueId"]
    by_offset = json.loads((await query("-t", "MsgT", "--queue", str(q), "--offset", str(sent[1]["queueOffset"]),
                                        "--json")).stdout)["messages"]
    assert [m["body"] for m in by_offset] == ["hello 1"]

    show = await run("admin", "msg", "show", "-n", ns, sent[2]["offsetMsgId"], "--json")
    doc = json.loads(show.stdout)
    assert doc["properties"]["color"] == "blue" and doc["properties"]["UNIQ_KEY"] == sent[2]["msgId"]
    assert doc["storeTime"] >= doc["bornTime"] > 0 and doc["body"] == "hello 2" and doc["commitLogOffset"] >= 0
    text = await run("admin", "msg", "show", "-n", ns, sent[2]["offsetMsgId"])
    assert "commit-log offset" in text.stdout and "color" in text.stdout and "hello 2" in text.stdout

    # bad input and nothing found: one error line, exit 1
    for argv, message in (
        (("-t", "MsgT", "--key", ""), "--key is empty"),
        (("-t", "MsgT", "--key", "x", "--begin", "2030-01-01 00:00:00", "--end", "2020-01-01 00:00:00"), "ends"),
        (("--key", "x"), "--topic is needed"),
        (("-t", "MsgT", "--key", "no-such-key"), "no message found for key 'no-such-key' on MsgT"),
        (("-t", "MsgT", "--key", "order-1", "--end", "2020-01-01 00:00:00"), "no message found"),
        (("-t", "NoSuchTopic", "--key", "x"), "NoRouteError"),
        (("--id", "ZZZ"), "give -t TOPIC"),
        (("-t", "MsgT", "--queue", str(q), "--offset", "99"), "has no offset 99"),
        (("-t", "MsgT", "--offset", "0"), "--offset needs --queue"),
    ):
        bad = await query(*argv)
        assert bad.returncode == 1 and message in bad.stderr, (argv, bad.stderr)


@pytest.mark.slow
async def test_connections_and_a_reset_by_timestamp_under_a_running_consumer(broker_process):
    """``group connections`` names the running ``trocket consume``; ``group reset
    --timestamp`` moves it back to that time while it runs: it re-consumes from there."""
    import subprocess

    import trio

    from trocket.client.message import new_message
    from trocket.client.producer import Producer

    from .conftest import acceptance_tools

    broker = broker_process(name="ops-reset")
    ns = broker.namesrv
    assert (await run("admin", "topic", "create", "-n", ns, "-t", "RsT", "--queues", "2")).returncode == 0
    async with Producer("RsP", ns) as producer:  # in this process: the gap between the two batches is known
        for _ in range(20):
            await producer.send(new_message("RsT", b"a"))
        await trio.sleep(0.3)  # nearer the b's than the a's: a search by time answers the nearer neighbour
        middle = int(time.time() * 1000)
        await trio.sleep(0.01)
        for _ in range(20):
            await producer.send(new_message("RsT", b"b"))

    consumer = subprocess.Popen(
        [*acceptance_tools().trocket_command(), "consume", "-n", ns, "-t", "RsT", "-g", "RsG", "--count", "60",
         "--from", "first", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    try:
        for _ in range(100):
            conns = await run("admin", "group", "connections", "-n", ns, "-g", "RsG", "--json")
            doc = json.loads(conns.stdout)
            if doc["clients"]:
                break
            await trio.sleep(0.2)
        (client,) = doc["clients"]
        assert conns.returncode == 0 and client["language"] == "PYTHON" and doc["subscriptions"] == {"RsT": "*", "%RETRY%RsG": "*"}
        assert doc["messageModel"] == "CLUSTERING" and doc["consumeType"] == "CONSUME_PASSIVELY"
        text = await run("admin", "group", "connections", "-n", ns, "-g", "RsG")
        assert client["clientId"] in text.stdout and "subscribes to %RETRY%RsG (*), RsT (*)" in text.stdout

        for _ in range(150):  # all 40 consumed and the offsets committed
            lag = json.loads((await run("admin", "group", "lag", "-n", ns, "-g", "RsG", "-t", "RsT", "--json")).stdout)
            if lag["lag"] == 0:
                break
            await trio.sleep(0.2)
        assert lag["lag"] == 0
        reset = await run("admin", "group", "reset", "-n", ns, "-g", "RsG", "-t", "RsT", "--timestamp", str(middle),
                          "--json")
        assert reset.returncode == 0, reset.stderr
        assert sorted(q["offset"] for q in json.loads(reset.stdout)["queues"]) == [10, 10]  # the first b's
        out, err = await trio.to_thread.run_sync(lambda: consumer.communicate(timeout=60))
    finally:
        if consumer.poll() is None:
            consumer.kill()
    assert consumer.returncode == 0, err
    bodies = [json.loads(line)["body"] for line in out.splitlines() if line.startswith("{")]
    assert sorted(bodies[:40]) == ["a"] * 20 + ["b"] * 20 and bodies[40:] == ["b"] * 20


async def test_producers_group_status_and_clean_commands(broker_process):
    """``admin broker producers`` (328), ``admin group status`` (223 -> the consumer's
    221), ``admin broker clean ...`` (316, 306, 329) against a running producer and
    consumer (in this process)."""
    import trio

    from trocket.client.consumer import ConsumeResult, PushConsumer
    from trocket.client.message import new_message
    from trocket.client.producer import Producer

    broker = broker_process(name="ops-status")
    ns = broker.namesrv
    assert (await run("admin", "topic", "create", "-n", ns, "-t", "StT", "--queues", "2")).returncode == 0
    four = trio.Event()
    seen: list[bytes] = []

    async def on_message(msg):
        seen.append(msg.body)
        if len(seen) >= 4:
            four.set()
        return ConsumeResult.SUCCESS

    async with Producer("StP", ns) as producer, \
            PushConsumer("StG", ns, {"StT": "*"}, on_message, consume_from="first") as consumer:
        for _ in range(4):
            await producer.send(new_message("StT", b"s"))
        with trio.fail_after(20):
            await four.wait()
        prods = await run("admin", "broker", "producers", "-n", ns, "--json")
        assert prods.returncode == 0, prods.stderr
        mine = [r for r in json.loads(prods.stdout) if r["group"] == "StP"]
        assert len(mine) == 1 and mine[0]["language"] == "PYTHON" and mine[0]["remote"].startswith("127.0.0.1:")
        assert 0 <= mine[0]["heartbeatAgeS"] < 60
        text = await run("admin", "broker", "producers", "-n", ns)
        assert "StP" in text.stdout and "s ago" in text.stdout

        status = await run("admin", "group", "status", "-n", ns, "-g", "StG", "-t", "StT", "--json")
        assert status.returncode == 0, status.stderr
        rows = json.loads(status.stdout)["offsets"]
        assert {r["clientId"] for r in rows} == {consumer.client_id}
        assert sorted(r["queue"] for r in rows) == [0, 1] and sum(r["offset"] for r in rows) == 4
        text = await run("admin", "group", "status", "-n", ns, "-g", "StG", "-t", "StT")
        assert consumer.client_id in text.stdout
    gone = await run("admin", "group", "status", "-n", ns, "-g", "StG", "-t", "StT")
    assert gone.returncode == 1 and "No Any Consumer online in the consumer group: [StG]" in gone.stderr

    for what in ("unused-topics", "expired-queues", "expired-commitlog"):
        done = await run("admin", "broker", "clean", what, "-n", ns)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{what}: 127.0.0.1:{broker.port} success"
    # the topic (configured, its messages live) is untouched
    stats = json.loads((await run("admin", "topic", "stats", "-n", ns, "-t", "StT", "--json")).stdout)
    assert sum(q["maxOffset"] for q in stats["queues"]) == 4, stats
