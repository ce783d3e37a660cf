"""Issue 7's group test: 10,000 messages from 4 producers (async sends) consumed by a
clustering group of push consumers while a third joins and one leaves: nothing lost, each
queue's order kept by each owner, duplicates only on queues that changed hands (counted,
reported: the new owner starts at the last committed offset, up to a second old here).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import trio

from trocket.client.consumer import PushConsumer
from trocket.client.message import new_message
from trocket.client.producer import Producer

from .conftest import running_broker

TOTAL = 10_000
PRODUCERS = 4
TOPIC = "GroupT"


async def test_group_of_push_consumers_with_join_and_leave(tmp_path):
    async with running_broker(tmp_path, default_topic_queue_nums=8) as broker:
        ns = ";".join(broker.namesrv_addrs)
        deliveries: list[tuple[str, int, int, int, bytes]] = []  # consumer, queue, epoch, offset, body
        epoch: dict[tuple[str, int], int] = defaultdict(int)
        unique: set[bytes] = set()
        progress = trio.Condition()

        def make(name: str) -> PushConsumer:
            def on_assignment(mq, owned):
                if owned and mq.topic == TOPIC:
                    epoch[name, mq.queue_id] += 1

            async def on_message(msg):
                deliveries.append((name, msg.queue_id, epoch[name, msg.queue_id], msg.queue_offset, msg.body))
                unique.add(msg.body)
                async with progress:
                    progress.notify_all()

            return PushConsumer("GroupCG", ns, {TOPIC: "*"}, on_message, consume_from="first",
                                on_assignment=on_assignment, persist_interval_s=1.0)

        async def produce(p: int) -> None:
            async with Producer(f"PG{p}", ns, default_topic_queue_nums=8) as producer:
                for i in range(TOTAL // PRODUCERS):
                    await producer.send_async(new_message(TOPIC, f"{p}:{i}".encode()))

        async def wait_for(n: int) -> None:
            async with progress:
                while len(unique) < n:
                    await progress.wait()

        with trio.fail_after(90):
            async with trio.open_nursery() as producers:
                async with make("c1") as c1, make("c2") as c2:
                    for p in range(PRODUCERS):
                        producers.start_soon(produce, p)
                    await wait_for(TOTAL * 3 // 10)
                    async with make("c3") as c3:
                        await wait_for(TOTAL * 6 // 10)
                        await c1.aclose()  # leaves mid-stream: commits, unregisters
                        await wait_for(TOTAL)
                        owned = {c.client_id: c.assignment() for c in (c2, c3)}
        assert len(unique) == TOTAL  # nothing lost
        assert unique == {f"{p}:{i}".encode() for p in range(PRODUCERS) for i in range(TOTAL // PRODUCERS)}
        mine = [sorted(mq.queue_id for mq in mqs if mq.topic == TOPIC) for mqs in owned.values()]
        assert sorted(q for m in mine for q in m) == list(range(8))  # the two left share every queue
        # order: each owner got each queue's messages in offset order in each ownership
        by_session: dict[tuple[str, int, int], list[int]] = defaultdict(list)
        for name, q, ep, off, _ in deliveries:
            by_session[name, q, ep].append(off)
        for key, offs in by_session.items():
            assert offs == sorted(set(offs)), f"{key}: out of order"
        # duplicates: only on queues that more than one consumer owned
        counts = Counter((q, off) for _, q, _, off, _ in deliveries)
        dups = {k: c for k, c in counts.items() if c > 1}
        owners = defaultdict(set)
        for name, q, *_ in deliveries:
            owners[q].add(name)
        assert all(len(owners[q]) > 1 for q, _ in dups)
        print(f"\n{len(deliveries)} deliveries of {TOTAL} messages: {sum(dups.values()) - len(dups)} duplicates "
              f"on {len({q for q, _ in dups})} handed-over queues; owners per queue "
              f"{ {q: sorted(o) for q, o in sorted(owners.items())} }")
