"""``trocket admin`` against a ``trocket broker`` subprocess: topics, routes, the cluster,
and the answer of a broker that does not serve a code (topic delete)."""

from __future__ import annotations

import json

import pytest

from .test_cli_send import run


@pytest.mark.slow
async def test_topic_create_list_route_and_cluster(broker_process):
    broker = broker_process(name="admin")
    ns = broker.namesrv
    made = await run("admin", "topic", "create", "-n", ns, "-t", "AdminTopic", "--queues", "3", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)[0]["broker"] == "broker-a"
    listed = await run("admin", "topic", "list", "-n", ns, "--json")
    assert "AdminTopic" in json.loads(listed.stdout)
    route = await run("admin", "topic", "route", "-n", ns, "-t", "AdminTopic", "--json")
    doc = json.loads(route.stdout)
    assert doc["queueDatas"][0]["writeQueueNums"] == 3 and doc["queueDatas"][0]["perm"] == 6
    table = await run("admin", "topic", "route", "-n", ns, "-t", "AdminTopic")
    assert "read queues" in table.stdout and f"127.0.0.1:{broker.port}" in table.stdout
    cluster = await run("admin", "cluster", "-n", ns, "--json")
    rows = json.loads(cluster.stdout)
    assert rows[0]["cluster"] == "DefaultCluster" and rows[0]["addr"] == f"127.0.0.1:{broker.port}"
    assert "trocket" in rows[0]["version"]
    missing = await run("admin", "topic", "route", "-n", ns, "-t", "NoSuchTopic")
    assert missing.returncode == 1 and "NoRouteError" in missing.stderr


@pytest.mark.slow
async def test_topic_delete_reports_each_answer(broker_process):
    broker = broker_process(name="admin-del")
    deleted = await run("admin", "topic", "delete", "-n", broker.namesrv, "-t", "Whatever", "--json")
    rows = json.loads(deleted.stdout)
    assert [r["where"].split()[0] for r in rows] == ["broker", "namesrv"]
    # trocket's broker and name server do not serve DELETE_TOPIC_IN_BROKER / _IN_NAMESRV
    # (yet): each refusal is reported, and the command fails
    assert all("REQUEST_CODE_NOT_SUPPORTED" in r["answer"] for r in rows if not r["ok"])
    assert deleted.returncode == (0 if all(r["ok"] for r in rows) else 1)
