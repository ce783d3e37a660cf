"""The allocation strategies give Java 4.9.8's allocation for the same inputs.

``data/allocate_vectors.json`` was printed by Java's own classes
(``tests/acceptance/scripts/AllocateVectors.java``, run against
``shared/rocketmq-4.9.8``); the last test runs that program again when Java is here
and checks the file is what it prints, so the vectors can be regenerated:
``java ... AllocateVectors > tests/client/data/allocate_vectors.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trocket.client.rebalance_strategy import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateByMachineRoom,
    AllocateConsistentHash,
    AllocateMachineRoomNearby,
    AllocateStrategy,
)
from trocket.codecs.bodies.client import MessageQueue

from ..java_vectors import java_prints

VECTORS = Path(__file__).resolve().parent / "data" / "allocate_vectors.json"
CASES = json.loads(VECTORS.read_text())


def mq(row) -> MessageQueue:
    return MessageQueue(row[0], row[1], row[2])


def strategy_of(case) -> AllocateStrategy:
    name, params = case["strategy"], case["params"]
    if name == "AVG":
        return AllocateAveragely()
    if name == "AVG_BY_CIRCLE":
        return AllocateAveragelyByCircle()
    if name == "CONSISTENT_HASH":
        return AllocateConsistentHash(params["virtual_nodes"])
    if name == "CONFIG":
        return AllocateByConfig([mq(r) for r in params["queues"]])
    if name == "MACHINE_ROOM":
        return AllocateByMachineRoom(params["consumer_idcs"])
    inner = {"AVG": AllocateAveragely(), "AVG_BY_CIRCLE": AllocateAveragelyByCircle(),
             "CONSISTENT_HASH": AllocateConsistentHash()}[name.removeprefix("MACHINE_ROOM_NEARBY-")]
    # the resolver of AllocateVectors.java: broker "<room>@<name>", client "<room>@<id>"
    return AllocateMachineRoomNearby(inner, lambda q: q.broker_name.split("@")[0], lambda cid: cid.split("@")[0])


def test_the_vectors_cover_every_strategy():
    assert {c["strategy"] for c in CASES} == {
        "AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG", "MACHINE_ROOM", "MACHINE_ROOM_NEARBY-AVG",
        "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE", "MACHINE_ROOM_NEARBY-CONSISTENT_HASH"}


@pytest.mark.parametrize("case", CASES, ids=[f"{c['case']}-{c['strategy']}-{c['params'].get('virtual_nodes', '')}"
                                             for c in CASES])
def test_strategy_allocates_as_java(case):
    strategy = strategy_of(case)
    assert isinstance(strategy, AllocateStrategy)
    assert strategy.name == case["strategy"]
    queues = [mq(r) for r in case["queues"]]
    assert queues == sorted(queues)  # as RebalanceImpl hands them over, and Python sorts them alike
    got = {cid: strategy.allocate("G", cid, queues, case["cids"]) for cid in case["cids"]}
    assert got == {cid: [mq(r) for r in rows] for cid, rows in case["allocation"].items()}


def test_a_client_the_broker_does_not_list_gets_nothing_and_empty_input_is_an_error():
    queues = [MessageQueue("T", "b", i) for i in range(4)]
    for strategy in (AllocateAveragely(), AllocateAveragelyByCircle(), AllocateConsistentHash(),
                     AllocateByMachineRoom({"b"})):
        assert strategy.allocate("G", "stranger", queues, ["a", "b"]) == []
        with pytest.raises(ValueError):
            strategy.allocate("G", "a", [], ["a"])
    with pytest.raises(ValueError):
        AllocateConsistentHash(-1)


def test_vectors_file_is_what_java_prints():
    """Java's classes, run now, print exactly the committed vectors."""
    assert json.loads(java_prints("AllocateVectors")) == CASES


async def test_push_and_lite_consumers_use_the_strategy_they_are_given(tmp_path):
    """Two push consumers of one group with ``AllocateAveragelyByCircle`` split 8 queues
    round robin (the first client id takes 0, 2, 4, 6), where the default would give
    blocks; a lite consumer with ``AllocateByConfig`` owns exactly its configured queues."""
    import trio

    from trocket.client import PullConsumer, PushConsumer
    from trocket.client.config import ClientConfig
    from trocket.client.instance import ClientInstance

    from trocket.codecs.headers import CreateTopicRequestHeader

    from ..waiting import wait_until
    from .conftest import running_broker

    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            await inst.api.create_topic(broker.broker_addr, CreateTopicRequestHeader(
                topic="RT", defaultTopic="TBW102", readQueueNums=8, writeQueueNums=8, perm=6,
                topicFilterType="SINGLE_TAG", topicSysFlag=0, order=False))
            await wait_until(lambda: inst.update_route("RT"), 10, interval=0.05)
        configs = [ClientConfig(namesrv=ns, instance_name=f"circle{i}") for i in range(2)]
        strategy = AllocateAveragelyByCircle()
        async with PushConsumer("RG", listener=lambda m: None, subscriptions={"RT": "*"}, client_config=configs[0],
                                allocate_strategy=strategy, rebalance_interval_s=0.5) as c0, \
                PushConsumer("RG", listener=lambda m: None, subscriptions={"RT": "*"}, client_config=configs[1],
                             allocate_strategy=strategy, rebalance_interval_s=0.5) as c1:
            first, second = sorted((c0, c1), key=lambda c: c.client_id)
            with trio.fail_after(20):
                while [sorted(mq.queue_id for mq in c.assignment() if mq.topic == "RT") for c in (first, second)] \
                        != [[0, 2, 4, 6], [1, 3, 5, 7]]:
                    await trio.sleep(0.1)
        fixed = [MessageQueue("RT", broker.config.broker_name, q) for q in (1, 6)]
        async with PullConsumer("RL", ns, allocate_strategy=AllocateByConfig(fixed)) as lite:
            lite.subscribe("RT")
            with trio.fail_after(10):
                while lite.assignment() != fixed:
                    await trio.sleep(0.05)
