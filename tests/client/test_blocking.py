"""The blocking facade from plain (non-trio) code: produce, push-consume, pull-consume,
errors unchanged. The broker runs in-process in a thread of its own."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import trio

from trocket.client.blocking import BlockingProducer, BlockingPullConsumer, BlockingPushConsumer
from trocket.client.consumer import ConsumeResult
from trocket.client.errors import ClientStateError, MessageRefusedError
from trocket.client.message import new_message

from ..waiting import wait_until_sync
from .conftest import running_broker


@pytest.fixture
def thread_broker(tmp_path: Path):
    """(name server address) of a broker running in a background trio thread."""
    ready = threading.Event()
    box: dict = {}

    async def main():
        async with running_broker(tmp_path) as broker:
            box["ns"] = ";".join(broker.namesrv_addrs)
            box["stop"] = trio.Event()
            box["token"] = trio.lowlevel.current_trio_token()
            ready.set()
            await box["stop"].wait()

    t = threading.Thread(target=trio.run, args=(main,), daemon=True)
    t.start()
    assert ready.wait(10)
    yield box["ns"]
    trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
    t.join(10)


def test_blocking_producer_and_push_consumer(thread_broker):
    ns = thread_broker
    with BlockingProducer("BPG", ns) as producer:
        results = [producer.send(new_message("BT", f"m{i}".encode(), properties={"i": str(i)})) for i in range(10)]
        assert all(r.ok for r in results)
        fut = producer.send_async(new_message("BT", b"m10"))
        assert fut.result(timeout=5).ok
        with pytest.raises(MessageRefusedError):
            producer.send(new_message("BT", b""))  # an empty body: the same typed error as the trio API
    got: list[bytes] = []
    done = threading.Event()
    listener_threads = set()

    def listener(msg):  # a plain function: runs in a worker thread
        listener_threads.add(threading.current_thread().name)
        got.append(msg.body)
        if len(got) == 11:
            done.set()
        return ConsumeResult.SUCCESS

    with BlockingPushConsumer("BCG", ns, {"BT": "*"}, listener, consume_from="first") as consumer:
        assert done.wait(10)
        assert len(consumer.assignment()) == 5
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(11))
    assert threading.current_thread().name not in listener_threads
    with pytest.raises(ClientStateError):
        consumer.commit()


def test_blocking_push_consumer_suspend_resume_unsubscribe(thread_broker):
    """Java's suspend / resume / unsubscribe from plain code: once suspended (and the
    queue's pull in flight has come back) nothing more is pulled, after resume it is; an
    unsubscribed topic's queues are given up. One queue (an orderly key) throughout."""
    ns = thread_broker
    got: list[bytes] = []
    arrived = threading.Semaphore(0)

    def listener(msg):
        got.append(msg.body)
        arrived.release()
        return ConsumeResult.SUCCESS

    with BlockingProducer("BSPG", ns) as producer, \
            BlockingPushConsumer("BSCG", ns, {"BST": "*", "BSU": "*"}, listener, consume_from="first") as consumer:
        producer.send_orderly(new_message("BST", b"first"), key="k")
        assert arrived.acquire(timeout=10) and got == [b"first"]
        consumer.suspend()
        assert consumer.suspended
        # the long poll already held by the broker brings the next message (as Java's)
        producer.send_orderly(new_message("BST", b"in flight"), key="k")
        assert arrived.acquire(timeout=10) and got[-1] == b"in flight"
        producer.send_orderly(new_message("BST", b"while suspended"), key="k")
        assert not arrived.acquire(timeout=2) and got[-1] == b"in flight"
        consumer.resume()
        assert not consumer.suspended
        assert arrived.acquire(timeout=10) and got[-1] == b"while suspended"
        producer.send(new_message("BSU", b"other topic"))  # (the topic exists from now on)
        assert arrived.acquire(timeout=25) and got[-1] == b"other topic"
        assert {"BST", "BSU"} <= {mq.topic for mq in consumer.assignment()}
        consumer.unsubscribe("BSU")
        deadline = time.monotonic() + 10
        while "BSU" in {mq.topic for mq in consumer.assignment()} and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "BSU" not in {mq.topic for mq in consumer.assignment()}
        assert "BST" in {mq.topic for mq in consumer.assignment()}


def test_blocking_pull_consumer(thread_broker):
    ns = thread_broker
    with BlockingProducer("BPG", ns) as producer:
        for i in range(8):
            producer.send(new_message("BPT", f"m{i}".encode()))
    with BlockingPullConsumer("BLCG", ns, consume_from="first") as consumer:
        consumer.subscribe("BPT", "*")
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 8 and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout=1))
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(8))
        consumer.commit()
        mq = consumer.assignment()[0]
        assert consumer.committed(mq) == len([m for m in got if m.queue_id == mq.queue_id])


def _poll_until(consumer, n: int, within: float = 10) -> list:
    got: list = []
    deadline = time.monotonic() + within
    while len(got) < n and time.monotonic() < deadline:
        got.extend(consumer.poll(timeout=0.5))
    return got


def test_blocking_pull_pause_resume_seek_offset_for_timestamp_unsubscribe(thread_broker):
    """The lite consumer's queue controls from plain code: a paused queue is not pulled
    until resumed; seek_to_begin / seek_to_end move it; offset_for_timestamp finds where
    the messages stored after a time begin; unsubscribe drops the topic's queues."""
    ns = thread_broker
    with BlockingProducer("BPG", ns) as producer:
        for i in range(8):
            producer.send(new_message("BPZ", f"m{i}".encode()))
        time.sleep(0.05)  # the store's clock is the wall clock
        between = int(time.time() * 1000)
        time.sleep(0.005)
        for i in range(8, 16):
            producer.send(new_message("BPZ", f"m{i}".encode()))
    with BlockingPullConsumer("BLPG", ns, consume_from="first", auto_commit=False) as consumer:
        queues = consumer.fetch_queues("BPZ")
        consumer.pause(queues)
        assert all(consumer.is_paused(mq) for mq in queues)
        consumer.assign(queues)
        assert consumer.poll(timeout=1.5) == []  # nothing pulled while paused
        consumer.resume(queues[:1])
        assert not consumer.is_paused(queues[0]) and consumer.is_paused(queues[1])
        first = [m for m in _poll_until(consumer, 4)]
        assert {m.queue_id for m in first} == {queues[0].queue_id} and len(first) == 4
        consumer.seek_to_begin(queues[0])
        assert [m.body for m in _poll_until(consumer, 4)] == [m.body for m in first]
        consumer.resume(queues)
        got = first + _poll_until(consumer, 12)
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(16))
        for mq in queues:
            later = sorted(m.queue_offset for m in got if m.queue_id == mq.queue_id and int(m.body[1:]) >= 8)
            assert consumer.offset_for_timestamp(mq, between) == later[0]
        consumer.seek_to_begin(queues[1])
        consumer.seek_to_end(queues[1])
        assert consumer.poll(timeout=0.5) == []
    with BlockingPullConsumer("BLPU", ns, consume_from="first", auto_commit=False) as consumer:
        consumer.subscribe("BPZ")
        assert len(_poll_until(consumer, 16)) == 16
        consumer.unsubscribe("BPZ")
        assert consumer.assignment() == []
        with BlockingProducer("BPG2", ns) as producer:
            producer.send(new_message("BPZ", b"after"))
        assert consumer.poll(timeout=1.5) == []


def test_blocking_queue_change_listener_sees_a_topic_made_after_it(thread_broker):
    """A listener registered before its topic exists is told of the topic's queues once
    a send creates it (Java's isSetEqual: no set, then a set, is a change)."""
    ns = thread_broker
    changes = []
    told = threading.Event()

    def on_change(topic, queues):
        changes.append((topic, sorted(mq.queue_id for mq in queues)))
        told.set()

    with BlockingPullConsumer("BQCG", ns, topic_metadata_check_interval_s=0.2) as consumer:
        consumer.register_topic_message_queue_change_listener("BQT", on_change)
        time.sleep(0.5)  # a while in which nothing may be told: two metadata checks of a missing topic
        assert changes == []
        with BlockingProducer("BQP", ns) as producer:
            producer.send(new_message("BQT", b"x"))
        assert told.wait(10)
    assert changes == [("BQT", [0, 1, 2, 3])]


def test_blocking_start_errors_are_the_trio_ones_and_leave_no_thread():
    before = threading.active_count()
    with pytest.raises(ClientStateError, match="no subscription"):
        BlockingPushConsumer("G", "127.0.0.1:9876", None, lambda msg: None)
    with pytest.raises(ValueError, match="namesrv"):
        BlockingPullConsumer("G")
    # a thread a failed start began has ended: none is left behind
    wait_until_sync(lambda: threading.active_count() == before, 5, what=f"back to {before} threads")
