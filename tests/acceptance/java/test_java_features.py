"""Features other issues brought to trocket's broker, run with the real Java client against
both brokers (src/FeatureScenarios.java): transactions and request-reply (issue 23),
SQL92 filters and message trace (issue 25). All have landed: no trocket run is xfail (the
trocket broker runs with ``enablePropertyFilter=true`` and ``traceTopicEnable=true``, as the
Java one); the Java broker's SQL92 run is when its own filter registration is missing. (ACL, issue 24, runs on brokers with aclEnable of their own: test_java_acl.py.)"""

from __future__ import annotations

import pytest

from java_tools import on_both

pytestmark = pytest.mark.usefixtures("java_bundle")


@on_both()
def test_transaction_commit_and_rollback(scenario):
    r = scenario("transaction")
    assert (r["commitStatus"], r["commitState"]) == ("SEND_OK", "COMMIT_MESSAGE")
    assert (r["rollbackStatus"], r["rollbackState"]) == ("SEND_OK", "ROLLBACK_MESSAGE")
    assert r["visible"] == ["commit"]


@on_both()
def test_request_reply(scenario):
    assert scenario("request_reply") == {"reply": "re: ping"}


@on_both()
def test_sql92_filter(scenario, peer):
    r = scenario("sql92")
    if peer.kind == "java" and r != {"got": [6, 7, 8, 9]} and not _java_filter_registered(peer, "_sqlG,"):
        # seen about once in five runs: Java's broker took the consumer's subscription
        # (broker.log: "subscription changed ... SQL92") but its ConsumerFilterManager never
        # registered the filter (filter.log has no "New consumer filter registered" for the
        # group), so every pull of the scenario's 20 s got FILTER_DATA_NOT_EXIST / NOT_LATEST
        pytest.xfail("Java 4.9.8's broker never registered the SQL92 consumer filter (its filter.log)")
    assert r == {"got": [6, 7, 8, 9]}


def _java_filter_registered(peer, group_suffix: str) -> bool:
    """Whether the Java broker's filter.log records a consumer filter registered for a
    group whose name ends with ``group_suffix`` (its ``consumerGroup=...,`` field)."""
    log = peer.store / "logs" / "rocketmqlogs" / "filter.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return any("New consumer filter registered" in line and group_suffix in line for line in text.splitlines())


@on_both()
def test_message_trace(scenario, peer):
    r = scenario("trace")
    assert r["consumed"] is True
    assert r["traceKinds"] == ["Pub", "SubAfter", "SubBefore"]
    # the Java client's records, read by trocket admin msg trace (the broker's index of
    # the trace messages' keys, then the records about the id)
    import json
    import subprocess
    import time

    from acc_tools import trocket_command

    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run([*trocket_command(), "admin", "msg", "trace", r["msgId"], "-n", peer.namesrv, "--json"],
                              capture_output=True, text=True, timeout=60)
        kinds = {rec["type"] for rec in json.loads(done.stdout)["records"]} if done.returncode == 0 else set()
        if kinds == {"Pub", "SubBefore", "SubAfter"} or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert kinds == {"Pub", "SubBefore", "SubAfter"}, done.stderr
