"""Consumer building blocks without a broker: allocation, subscriptions, the process
queue's offset rule, offset stores, the pull answer's decoding."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trocket.codecs.bodies.client import MessageQueue
from trocket.codecs.errors import InvalidNameError
from trocket.codecs.java_hashmap import java_string_hash
from trocket.codecs.message.message import MessageExt
from trocket.client.consumer_pull import process_pull_result, pull_header
from trocket.client.message import PullResult, PullStatus
from trocket.client.offset_store import LocalFileOffsetStore, RemoteBrokerOffsetStore
from trocket.client.process_queue import ProcessQueue
from trocket.client.rebalance_strategy import allocate_averagely
from trocket.client.subscription import build, filter_by_tags


def mqs(n: int, topic: str = "T", broker: str = "b") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


# -- allocation ------------------------------------------------------------------------


def test_allocate_averagely_matches_java_blocks():
    # Java: 8 queues, 3 clients -> 3, 3, 2 (consecutive blocks of the sorted queues)
    cids = ["c2", "c0", "c1"]
    got = {c: [mq.queue_id for mq in allocate_averagely(c, list(reversed(mqs(8))), cids)] for c in cids}
    assert got == {"c0": [0, 1, 2], "c1": [3, 4, 5], "c2": [6, 7]}


def test_allocate_averagely_more_clients_than_queues_and_unknown_client():
    cids = [f"c{i}" for i in range(5)]
    got = [allocate_averagely(c, mqs(3), cids) for c in cids]
    assert [[mq.queue_id for mq in g] for g in got] == [[0], [1], [2], [], []]
    assert allocate_averagely("stranger", mqs(3), cids) == []


@pytest.mark.parametrize("n_mq,n_cid", [(1, 1), (4, 2), (7, 3), (16, 5), (3, 7), (32, 32)])
def test_allocate_averagely_partitions(n_mq, n_cid):
    all_mq = mqs(n_mq, broker="a") + mqs(n_mq, broker="b")
    cids = [f"10.0.0.{i}@{i}" for i in range(n_cid)]
    parts = [allocate_averagely(c, all_mq, cids) for c in cids]
    flat = [mq for p in parts for mq in p]
    assert sorted(flat) == sorted(all_mq)  # every queue exactly once
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


# -- subscriptions ---------------------------------------------------------------------


def test_build_subscription_tags_and_codes():
    sub = build("T", " TagA || TagB ||TagA", version=7)
    assert sub.sub_string == " TagA || TagB ||TagA"
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [java_string_hash("TagA"), java_string_hash("TagB")]  # ASCII: positive
    assert sub.sub_version == 7
    for everything in ("*", "", None, "  *  "):
        s = build("T", everything)
        assert (s.sub_string, s.tags_set, s.code_set) == ("*", [], [])


def test_build_subscription_rejects_bad_input():
    with pytest.raises(ValueError):
        build("T", "||")
    with pytest.raises(InvalidNameError):
        build("bad topic!", "*")


def test_filter_by_tags_exact_strings():
    msgs = [MessageExt("T", b"", properties={"TAGS": t}) for t in ("TagA", "TagC", "TagB")]
    msgs.append(MessageExt("T", b""))
    assert [m.tags for m in filter_by_tags(build("T", "TagA||TagB"), msgs)] == ["TagA", "TagB"]
    assert len(filter_by_tags(build("T", "*"), msgs)) == 4


# -- process queue ---------------------------------------------------------------------


def msg(offset: int, body: bytes = b"x") -> MessageExt:
    return MessageExt("T", body, queue_offset=offset)


async def test_process_queue_commit_offset_is_smallest_unfinished():
    pq = ProcessQueue()
    assert pq.remove([msg(0)]) == -1  # nothing cached
    assert pq.put([msg(i, b"ab") for i in range(10, 15)]) == 5
    assert pq.put([msg(12)]) == 0  # a duplicate is not cached twice
    assert (pq.msg_count, pq.msg_size, pq.max_span) == (5, 10, 4)
    taken = pq.take(3)
    assert [m.queue_offset for m in taken] == [10, 11, 12]
    assert pq.remove([taken[1], taken[2]]) == 10  # 10 still in the callback
    assert pq.remove([taken[0]]) == 13
    rest = pq.take(10)
    assert pq.remove(rest) == 15  # nothing left: one past the largest pulled
    assert (pq.msg_count, pq.msg_size) == (0, 0)


async def test_process_queue_give_back_and_wait():
    pq = ProcessQueue()
    got = []

    async def consumer():
        await pq.wait_pending()
        got.extend(pq.take(1))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
        await trio.testing.wait_all_tasks_blocked()
        pq.put([msg(0), msg(1)])
    assert [m.queue_offset for m in got] == [0]
    pq.give_back(got)
    assert [m.queue_offset for m in pq.take(5)] == [0, 1]
    pq.dropped = True
    pq.wake()
    with trio.fail_after(1):
        await pq.wait_pending()  # a dropped queue never blocks


# -- offset stores ---------------------------------------------------------------------


class FakeCalls:
    def __init__(self):
        self.broker: dict[MessageQueue, int] = {}
        self.updates = 0

    async def query_consumer_offset(self, group, mq):
        return self.broker.get(mq)

    async def update_consumer_offset(self, group, mq, offset):
        self.updates += 1
        self.broker[mq] = offset


async def test_remote_store_commits_only_moved_offsets_of_assigned_queues():
    calls = FakeCalls()
    a, b = mqs(2)
    calls.broker[a] = 5
    store = RemoteBrokerOffsetStore("G", calls)
    assert await store.read_store(a) == 5
    assert await store.read_store(b) == -1
    store.update(a, 9)
    store.update(a, 7, increase_only=True)  # never backwards when asked so
    store.update(b, 3)
    await store.persist_all([a, b])
    assert calls.broker == {a: 9, b: 3} and calls.updates == 2
    await store.persist_all([a])  # unchanged: no call; b no longer ours: forgotten
    assert calls.updates == 2 and store.read_memory(b) == -1


async def test_remote_store_commits_one_broker_at_a_time_and_brokers_together(autojump_clock):
    """One update in flight per broker: Java 4.9.8's broker loses one of two racing first
    commits of a group and topic (each makes the topic's table anew)."""

    class SlowCalls(FakeCalls):
        def __init__(self):
            super().__init__()
            self.in_flight: dict[str, int] = {}
            self.most: dict[str, int] = {}
            self.overlapped_brokers = False

        async def update_consumer_offset(self, group, mq, offset):
            self.in_flight[mq.broker_name] = self.in_flight.get(mq.broker_name, 0) + 1
            self.most[mq.broker_name] = max(self.most.get(mq.broker_name, 0), self.in_flight[mq.broker_name])
            self.overlapped_brokers |= len([n for n in self.in_flight.values() if n]) > 1
            await trio.sleep(0.01)  # a slow broker call (virtual time: the autojump clock)
            self.in_flight[mq.broker_name] -= 1
            await super().update_consumer_offset(group, mq, offset)

    calls = SlowCalls()
    queues = mqs(3, broker="a") + mqs(3, broker="b")
    store = RemoteBrokerOffsetStore("G", calls)
    for i, mq in enumerate(queues):
        store.update(mq, 10 + i)
    await store.persist_all(queues)
    assert calls.broker == {mq: 10 + i for i, mq in enumerate(queues)}
    assert calls.most == {"a": 1, "b": 1} and calls.overlapped_brokers


async def test_local_store_round_trip(tmp_path):
    a, b = mqs(2)
    store = LocalFileOffsetStore("G", "127.0.0.1@1", tmp_path)
    store.update(a, 4)
    store.update(b, 6)
    await store.persist_all([a, b])
    store.update(a, 8)
    await store.persist_all([a])
    again = LocalFileOffsetStore("G", "127.0.0.1@1", tmp_path)
    await again.load()
    assert again.table() == {a: 8, b: 6}
    store.path.write_text("not json")  # a torn file: the backup answers
    assert await again.read_store(b) == 6


# -- pull answers ----------------------------------------------------------------------


def test_process_pull_result_filters_by_tag_string_and_marks_offsets():
    msgs = [MessageExt("T", f"b{i}".encode(), properties={"TAGS": t}, queue_offset=i) for i, t in enumerate("ABA")]
    result = process_pull_result(PullResult(PullStatus.FOUND, 3, 0, 9, msgs), build("T", "A"))
    assert [(m.queue_offset, m.properties["MIN_OFFSET"], m.properties["MAX_OFFSET"]) for m in result.messages] == [
        (0, "0", "9"), (2, "0", "9")
    ]
    empty = process_pull_result(PullResult(PullStatus.NO_NEW_MSG, 3, 0, 9), build("T", "A"))
    assert empty.messages == []


def test_pull_header():
    h = pull_header("G", MessageQueue("T", "b", 2), 40, build("T", "A||B", version=1), commit_offset=33)
    assert (h.queueId, h.queueOffset, h.sysFlag, h.commitOffset, h.subscription, h.subVersion) == (2, 40, 0x7, 33, "A||B", 1)
    assert pull_header("G", MessageQueue("T", "b", 2), 0, build("T", "*")).sysFlag == 0x6


# -- rebalancer and bad input ------------------------------------------------------------

from trocket.codecs.bodies.client import MessageModel  # noqa: E402
from trocket.client.consumer import PushConsumer  # noqa: E402
from trocket.client.consumer_lite import PullConsumer  # noqa: E402
from trocket.client.errors import ClientStateError  # noqa: E402
from trocket.client.rebalance import Rebalancer  # noqa: E402


async def test_rebalancer_clustering_broadcasting_and_quick_retry(autojump_clock):
    applied: list[tuple[str, set]] = []
    routes = {"T": mqs(4)}
    calls = 0

    async def queues_of(topic):
        nonlocal calls
        calls += 1
        if topic not in routes:
            raise KeyError(topic)  # no route yet
        return routes[topic]

    async def ids(topic):
        return ["a", "b"]

    async def apply(topic, allocated):
        applied.append((topic, allocated))

    r = Rebalancer(client_id="b", model=MessageModel.CLUSTERING, topics=lambda: ["T", "New"],
                   queues_of=queues_of, consumer_ids=ids, apply=apply, interval=20.0)
    assert await r.rebalance_once() is False  # "New" has no route yet
    assert applied == [("T", set(mqs(4)[2:]))]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(r.run, False)
        await trio.sleep(1.5)  # logical time: an incomplete round is retried within a second, not 20 s
        assert r.rounds == 2
        routes["New"] = mqs(2, topic="New")
        await trio.sleep(1.0)
        assert applied[-1] == ("New", {MessageQueue("New", "b", 1)})
        rounds = r.rounds
        await trio.sleep(10)
        assert r.rounds == rounds  # complete now: the next round in 20 s ...
        r.wakeup()  # ... or at a wakeup
        await trio.testing.wait_all_tasks_blocked()  # the round it woke is done; no time passed
        assert r.rounds == rounds + 1
        nursery.cancel_scope.cancel()
    b = Rebalancer(client_id="z", model=MessageModel.BROADCASTING, topics=lambda: ["T"],
                   queues_of=queues_of, consumer_ids=ids, apply=apply)
    await b.rebalance_once()
    assert applied[-1] == ("T", set(mqs(4)))  # every queue, whoever else is there


async def test_consumers_refuse_bad_input_clearly():
    with pytest.raises(InvalidNameError):
        PushConsumer("bad group!", "127.0.0.1:9876")
    with pytest.raises(InvalidNameError):
        PushConsumer("G", "127.0.0.1:9876", {"bad topic!": "*"})
    with pytest.raises(ValueError, match="names no tag"):
        PushConsumer("G", "127.0.0.1:9876", {"T": "||"})
    with pytest.raises(ValueError, match="queue_parallelism"):
        PushConsumer("G", "127.0.0.1:9876", orderly=True, queue_parallelism=2)
    with pytest.raises(ValueError, match="consume_from"):
        PushConsumer("G", "127.0.0.1:9876", consume_from="middle")
    with pytest.raises(ValueError, match="namesrv"):
        PullConsumer("G")
    with pytest.raises(ClientStateError, match="no listener"):
        await PushConsumer("G", "127.0.0.1:9876", {"T": "*"}).run()
    with pytest.raises(ClientStateError, match="not running"):
        await PullConsumer("G", "127.0.0.1:9876").poll()
