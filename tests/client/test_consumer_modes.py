"""Push consumer modes end to end: broadcasting (local offsets), orderly (broker locks,
a failed message blocks its queue until it succeeds, unlock at shutdown),
RECONSUME_LATER (back after the broker's retry delay; the retry-topic fallback when the
send-back fails), tag filters."""

from __future__ import annotations

from collections import defaultdict

import pytest
import trio

from trocket.client.config import ClientConfig
from trocket.client.consumer import ConsumeResult, MessageModel, PushConsumer
from trocket.client.errors import BrokerResponseError
from trocket.client.instance import ClientInstance
from trocket.client.message import new_message
from trocket.client.producer import Producer
from trocket.codecs.bodies.client import LockBatchRequestBody

from ..waiting import wait_until
from .conftest import running_broker


async def send_all(ns: str, topic: str, n: int, *, tags=lambda i: None, key=None) -> None:
    async with Producer("PG", ns) as producer:
        for i in range(n):
            msg = new_message(topic, f"m{i}".encode(), tags=tags(i), properties={"seq": str(i)})
            if key is None:
                await producer.send(msg)
            else:
                await producer.send_orderly(msg, key=key(i))


class Collector:
    def __init__(self, want: int, result=lambda msg: ConsumeResult.SUCCESS) -> None:
        self.msgs = []
        self.seen = []  # (queue, offset, body, reconsume times) when delivered
        self.want = want
        self.done = trio.Event()
        self.result = result

    async def __call__(self, msg):
        self.msgs.append(msg)
        self.seen.append((msg.queue_id, msg.queue_offset, msg.body, msg.reconsume_times))
        if len({m.body for m in self.msgs}) >= self.want:
            self.done.set()
        return self.result(msg)


async def test_broadcasting_every_consumer_gets_everything_and_resumes_from_its_file(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await send_all(ns, "BT", 20)
        a, b = Collector(20), Collector(20)
        opts = dict(message_model=MessageModel.BROADCASTING, consume_from="first", offset_dir=str(tmp_path / "off"))
        cfg_a = ClientConfig(namesrv=ns, instance_name="bcast-a")
        async with PushConsumer("BCG", subscriptions={"BT": "*"}, listener=a, client_config=cfg_a, **opts), \
                PushConsumer("BCG", subscriptions={"BT": "*"}, listener=b, client_config=ClientConfig(namesrv=ns, instance_name="bcast-b"), **opts):
            with trio.fail_after(10):
                await a.done.wait()
                await b.done.wait()
        assert sorted(m.body for m in a.msgs) == sorted(m.body for m in b.msgs) == sorted(f"m{i}".encode() for i in range(20))
        assert list((tmp_path / "off").rglob("offsets.json"))  # offsets kept locally
        # a restarts with the same client id: it resumes after what it consumed
        await send_all(ns, "BT", 25)  # m0..m24 again: 25 more messages
        again = Collector(25)
        async with PushConsumer("BCG", subscriptions={"BT": "*"}, listener=again, client_config=ClientConfig(namesrv=ns, instance_name="bcast-a"), **opts) as c:
            with trio.fail_after(10):
                await again.done.wait()
            # caught up: a pull held at the end of each of its queues, all it pulled consumed
            await wait_until(lambda: broker.pull_hold.held_count >= len(c.assignment())
                             and not any(n for n, _ in c.cached().values()), 10)
        assert len(again.msgs) == 25  # none of the first 20 again


async def test_orderly_locks_blocks_on_failure_and_unlocks(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await send_all(ns, "OT", 40, key=lambda i: f"k{i % 4}")
        failed_once: set[bytes] = set()

        def result(msg):
            if msg.body in (b"m5", b"m10") and msg.body not in failed_once:
                failed_once.add(msg.body)
                return ConsumeResult.RECONSUME_LATER
            return ConsumeResult.SUCCESS

        c = Collector(40, result)
        async with PushConsumer("OCG", ns, {"OT": "*"}, c, orderly=True, consume_from="first",
                                suspend_orderly_s=0.2) as consumer:
            with trio.fail_after(15):
                await c.done.wait()
            client_id = consumer.client_id
            queues = [mq for mq in consumer.assignment() if mq.topic == "OT"]
            async with ClientInstance(ClientConfig(namesrv=ns)) as other:
                addr = consumer.instance.master_addr(queues[0].broker_name)
                assert await other.api.lock_batch(addr, LockBatchRequestBody("OCG", other.client_id, queues)) == []
        per_queue = defaultdict(list)
        for q, off, body, times in c.seen:
            per_queue[q].append((off, body, times))
        for q, seen in per_queue.items():
            offsets = [o for o, _, _ in seen]
            # in order; a failed message comes again at once (before anything after it)
            assert offsets == sorted(offsets)
            for body in (b"m5", b"m10"):
                again = [(o, r) for o, b, r in seen if b == body]
                if again:
                    assert [r for _, r in again] == [0, 1]
        assert len(c.msgs) == 42
        # unlocked at shutdown: another client locks them at once
        async with ClientInstance(ClientConfig(namesrv=ns)) as other:
            assert sorted(await other.api.lock_batch(addr, LockBatchRequestBody("OCG", other.client_id, queues))) == sorted(queues)
        assert client_id != other.client_id


async def test_reconsume_later_comes_back_after_the_retry_delay(tmp_path):
    # level 3 (the first retry's) is 1 s here
    async with running_broker(tmp_path, message_delay_level="1s 1s 1s 2s 2s") as broker:
        ns = ";".join(broker.namesrv_addrs)
        await send_all(ns, "RT", 4, tags=lambda i: "TagA")
        first_seen: dict[bytes, float] = {}
        m2_offset: list[int] = []
        back: dict[bytes, tuple[float, int, str]] = {}
        done = trio.Event()

        async def listener(msg):
            now = trio.current_time()
            if msg.body not in first_seen:
                first_seen[msg.body] = now
                if msg.body == b"m2":
                    m2_offset.append(msg.commit_log_offset)
                return ConsumeResult.RECONSUME_LATER if msg.body in (b"m1", b"m2") else None
            back[msg.body] = (now - first_seen[msg.body], msg.reconsume_times, msg.topic)
            if len(back) == 2:
                done.set()

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            real_send_back = inst.api.send_back

            async def failing_send_back(addr, header, timeout=None):
                if header.offset in m2_offset:
                    raise BrokerResponseError("refused for the test", code=1)
                return await real_send_back(addr, header, timeout)

            inst.api.send_back = failing_send_back  # m2 takes the fallback path
            async with PushConsumer("RCG", subscriptions={"RT": "TagA"}, listener=listener, instance=inst,
                                    consume_from="first") as consumer:
                with trio.fail_after(20):
                    await done.wait()
                stats = consumer.stats
        assert set(back) == {b"m1", b"m2"}
        for body, (delay, times, topic) in back.items():
            assert delay >= 0.9 and times == 1 and topic == "RT"
        assert (stats.reconsume_later, stats.sent_back, stats.resent_to_retry) == (2, 1, 1)


@pytest.mark.parametrize("limit,count_limit,size_mib", [
    (10, 10, 100),  # by messages (pullThresholdForQueue)
    (20, 1000, 2000 / (1024 * 1024)),  # by body bytes (pullThresholdSizeForQueue): 100-byte bodies
])
async def test_flow_control_bounds_what_a_queue_caches(tmp_path, limit, count_limit, size_mib):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with Producer("PG", ns) as producer:
            for i in range(60):
                await producer.send_orderly(new_message("FT", b"x" * 100), key="one-queue")
        release = trio.Event()
        seen = []
        all_seen = trio.Event()
        peak = 0

        async def slow(msg):
            seen.append(msg.queue_offset)
            if len(seen) == 60:
                all_seen.set()
            await release.wait()

        async with PushConsumer("FCG", ns, {"FT": "*"}, slow, consume_from="first",
                                pull_threshold_for_queue=count_limit, pull_threshold_size_mib=size_mib,
                                pull_batch_size=4) as consumer:
            def flow_controlled() -> bool:
                nonlocal peak
                peak = max([peak] + [n for n, _ in consumer.cached().values()])
                return consumer.stats.flow_controlled >= 5

            await wait_until(flow_controlled, 10)  # noting the most it held meanwhile
            peak = max([peak] + [n for n, _ in consumer.cached().values()])
            assert limit < peak <= limit + 4  # stops pulling past the threshold (one pull may cross it)
            assert consumer.stats.pulled == peak
            release.set()
            with trio.fail_after(10):
                await all_seen.wait()
        assert seen == list(range(60))


@pytest.mark.parametrize("body_size,option,value,low,high", [
    # 20 messages for the topic over 5 queues (4 + the retry queue): 4 a queue
    (100, "pull_threshold_for_topic", 20, 4, 8),
    # 1 MiB over 5 queues is below 1 MiB a queue: 1 MiB (Java's max(1, ...)), 16 bodies of 64 KiB
    (64 * 1024, "pull_threshold_size_for_topic_mib", 1, 16, 20),
])
async def test_topic_flow_control_is_divided_over_the_owned_queues(tmp_path, body_size, option, value, low, high):
    """``pullThresholdForTopic`` / ``pullThresholdSizeForTopic``: the queue's limit is the
    topic's over the queues owned (RebalancePushImpl.messageQueueChanged), where the
    per-queue defaults (1000 messages, 100 MiB) would let all 60 in."""
    import os

    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with Producer("PG", ns, compress_over=10 * 1024 * 1024) as producer:
            for _ in range(60):
                await producer.send_orderly(new_message("FTT", os.urandom(body_size)), key="one-queue")
        release = trio.Event()
        peak = 0

        async def slow(msg):
            await release.wait()

        async with PushConsumer("FTG", ns, {"FTT": "*"}, slow, consume_from="first", pull_batch_size=4,
                                **{option: value}) as consumer:
            def flow_controlled() -> bool:
                nonlocal peak
                peak = max([peak] + [n for n, _ in consumer.cached().values()])
                return consumer.stats.flow_controlled >= 5

            await wait_until(flow_controlled, 10)
            peak = max([peak] + [n for n, _ in consumer.cached().values()])
            assert len(consumer.assignment()) == 5
            assert low < peak <= high, peak
            from trocket.codecs.bodies.fastjson import loads

            props = loads(await consumer.running_info())["properties"]  # the limits in force
            limits = (props["pull_threshold_for_queue"], props["pull_threshold_size_mib"])
            assert limits == (("4", "100.0") if option == "pull_threshold_for_topic" else ("1000", "1.0"))
            release.set()


async def test_pull_interval_spaces_the_pulls_that_found_messages(tmp_path):
    """``pull_interval_s=0.4`` with 2 messages a pull: 10 messages of one queue come in 5
    pulls at least 0.4 s apart (the pause follows a pull that found messages)."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with Producer("PG", ns) as producer:
            for i in range(10):
                await producer.send_orderly(new_message("PIT", b"%d" % i), key="one-queue")
        times: list[float] = []

        async def on(msg):
            times.append(trio.current_time())

        async with PushConsumer("PIG", ns, {"PIT": "*"}, on, consume_from="first", pull_batch_size=2,
                                pull_interval_s=0.4) as consumer:
            with trio.fail_after(10):
                while len(times) < 10:
                    await trio.sleep(0.02)
            assert consumer.stats.pulled == 10
        assert times[-1] - times[0] >= 4 * 0.4 - 0.05, times
    with pytest.raises(ValueError, match="pull_interval_s"):
        PushConsumer("G", "127.0.0.1:1", {"T": "*"}, on, pull_interval_s=70)
    with pytest.raises(ValueError, match="pull_threshold_for_topic"):
        PushConsumer("G", "127.0.0.1:1", {"T": "*"}, on, pull_threshold_for_topic=0)
