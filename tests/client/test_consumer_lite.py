"""PullConsumer (lite pull): subscribe or assign, poll, commit, seek."""

from __future__ import annotations

import pytest
import trio

from trocket.client.consumer_lite import PullConsumer
from trocket.client.errors import ClientStateError
from trocket.client.message import new_message
from trocket.client.producer import Producer

from .conftest import running_broker


async def produce(ns: str, topic: str, n: int, start: int = 0) -> None:
    async with Producer("PG", ns) as producer:
        for i in range(start, start + n):
            await producer.send(new_message(topic, f"m{i}".encode(), tags="even" if i % 2 == 0 else "odd"))


async def poll_until(consumer: PullConsumer, n: int) -> list:
    got = []
    with trio.fail_after(10):
        while len(got) < n:
            got.extend(await consumer.poll(timeout=1))
    return got


async def test_subscribe_poll_commit_and_resume(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await produce(ns, "LT", 30)
        async with PullConsumer("LCG", ns, consume_from="first", auto_commit=False) as c:
            c.subscribe("LT", "even")
            got = await poll_until(c, 15)
            assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(0, 30, 2))
            for q in {m.queue_id for m in got}:  # each queue's messages in order
                offs = [m.queue_offset for m in got if m.queue_id == q]
                assert offs == sorted(offs)
            queues = c.assignment()
            # the consumed offsets move past the odd messages too (the pulls that found
            # nothing matching say how far), once those pulls came back
            with trio.fail_after(10):
                while True:
                    assert await c.poll(timeout=0.05) == []
                    await c.commit()
                    if sum([await c.committed(mq) for mq in queues]) == 30:
                        break
        await produce(ns, "LT", 10, start=30)
        async with PullConsumer("LCG", ns, consume_from="first") as c:
            c.subscribe("LT", "*")
            got = await poll_until(c, 10)
            assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(30, 40))
            assert await c.poll(timeout=0.3) == []


async def test_assign_and_seek(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await produce(ns, "ST", 20)
        async with PullConsumer("SCG", ns, consume_from="first") as c:
            queues = await c.fetch_queues("ST")
            await c.assign(queues[:1])
            with pytest.raises(ClientStateError):
                c.subscribe("ST")
            mq = queues[0]
            got = await poll_until(c, 5)
            assert {m.queue_id for m in got} == {mq.queue_id}
            await c.seek(mq, 2)
            again = await poll_until(c, 3)
            assert again[0].queue_offset == 2 and [m.body for m in again] == [m.body for m in got[2:2 + len(again)]]
            await c.seek_to_end(mq)
            assert await c.poll(timeout=0.3) == []
            with pytest.raises(ClientStateError):
                await c.seek(queues[1], 0)


async def test_pause_resume_offset_for_timestamp_and_unsubscribe(tmp_path):
    """``pause`` stops a queue's pulls until ``resume``; ``offset_for_timestamp`` finds
    where messages stored after a time begin; ``unsubscribe`` drops the topic's queues."""
    import time

    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        # offset_for_timestamp answers the stored message nearest in time (Java 4.9.8): the
        # time taken is far from the first eight (0.5 s; the store's clock is the wall
        # clock) and near the next ones (the same producer sends them at once)
        async with Producer("PG", ns) as producer:
            for i in range(16):
                if i == 8:
                    await trio.sleep(0.5)  # not time.sleep: the broker runs in this trio run
                    between = int(time.time() * 1000)
                await producer.send(new_message("LPZ", f"m{i}".encode(), tags="even" if i % 2 == 0 else "odd"))
        async with PullConsumer("LPG", ns, consume_from="first", auto_commit=False) as c:
            queues = await c.fetch_queues("LPZ")
            c.pause(queues)
            assert all(c.is_paused(mq) for mq in queues)
            await c.assign(queues)
            assert await c.poll(timeout=2) == []  # nothing pulled while paused
            c.resume(queues[:1])
            got = await poll_until(c, 4)
            assert {m.queue_id for m in got} == {queues[0].queue_id}
            c.resume(queues)
            got += await poll_until(c, 16 - len(got))
            assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(16))
            for mq in queues:
                later = sorted(m.queue_offset for m in got if m.queue_id == mq.queue_id
                               and int(m.body[1:]) >= 8)
                assert await c.offset_for_timestamp(mq, between) == later[0]
        async with PullConsumer("LPU", ns, consume_from="first", auto_commit=False) as c:
            c.subscribe("LPZ")
            await poll_until(c, 16)
            c.unsubscribe("LPZ")
            assert c.assignment() == []
            await produce(ns, "LPZ", 4, start=16)
            assert await c.poll(timeout=2) == []
