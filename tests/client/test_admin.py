"""``trocket admin`` against a ``trocket broker`` subprocess: topics, routes, the cluster,
and topic deletion (broker and name server)."""

from __future__ import annotations

import json

import pytest

from ..waiting import wait_until
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
async def test_topic_delete_end_to_end(broker_process):
    broker = broker_process(name="admin-del")
    ns = broker.namesrv
    cq_dir = broker.store / "consumequeue"
    made = await run("admin", "topic", "create", "-n", ns, "-t", "DelTopic", "--queues", "2")
    assert made.returncode == 0, made.stderr
    sent = await run("send", "-n", ns, "-t", "DelTopic", "--count", "10", "--size", "16", "--json")
    assert sent.returncode == 0, sent.stderr
    assert (cq_dir / "DelTopic").is_dir()

    deleted = await run("admin", "topic", "delete", "-n", ns, "-t", "DelTopic", "--json")
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    rows = json.loads(deleted.stdout)
    assert [(r["where"].split()[0], r["ok"]) for r in rows] == [("broker", True), ("namesrv", True)]
    # the route is gone, and so are the consume queue files
    gone = await run("admin", "topic", "route", "-n", ns, "-t", "DelTopic")
    assert gone.returncode == 1 and "NoRouteError" in gone.stderr
    listed = await run("admin", "topic", "list", "-n", ns, "--json")
    assert "DelTopic" not in json.loads(listed.stdout)
    assert not (cq_dir / "DelTopic").exists()
    assert not [p for p in cq_dir.iterdir() if p.name.startswith(".")]

    # a send auto-creates the topic again (from TBW102), its queues starting at 0
    again = await run("send", "-n", ns, "-t", "DelTopic", "--body", "again", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["queueOffset"] == 0
    assert (cq_dir / "DelTopic").is_dir()
    async def routed():
        route = await run("admin", "topic", "route", "-n", ns, "-t", "DelTopic", "--json")
        return route if route.returncode == 0 else None

    route = await wait_until(routed, 10, interval=0.2)  # routed again once the broker has registered
    assert json.loads(route.stdout)["queueDatas"][0]["writeQueueNums"] == 4

    # a system topic is refused before anything is asked of a broker or name server
    refused = await run("admin", "topic", "delete", "-n", ns, "-t", "TBW102", "--json")
    assert refused.returncode == 1 and refused.stdout == ""
    assert "TBW102 is a system topic" in refused.stderr
