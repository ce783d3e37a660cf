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

    cluster = await run("admin", "cluster", "-n", ns, "--json")
    rows = json.loads(cluster.stdout)
    assert len(rows) == 1 and rows[0]["putToday"] == 300 and rows[0]["getToday"] == 0
    assert rows[0]["putTps"] > 0 and rows[0]["getTps"] == 0.0 and rows[0]["error"] is None
    table = await run("admin", "cluster", "-n", ns)
    assert "in tps" in table.stdout and f"127.0.0.1:{broker.port}" in table.stdout

    stats = await run("admin", "broker", "stats", "-n", ns, "--json")
    (doc,) = json.loads(stats.stdout)
    figures = doc["figures"]
    assert figures["messages in today"] == 300 and figures["put failures"] == "0"
    assert float(figures["put tps (10 s / 60 s / 600 s)"].split(" / ")[0]) > 0
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
