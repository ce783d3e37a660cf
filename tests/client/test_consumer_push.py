"""PushConsumer end to end against an in-process trocket broker (real sockets, real store)."""

from __future__ import annotations

import time

import trio

from trocket.client.config import ClientConfig
from trocket.client.consumer import ConsumeResult, MessageModel, PushConsumer
from trocket.client.instance import ClientInstance
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import SendMessageRequestHeaderV2
from trocket.codecs.message.properties import encode_properties
from trocket.codecs.message.record import decode_record

from .conftest import running_broker


def dead_letters(broker, group: str) -> list:
    """The messages in the broker's ``%DLQ%<group>`` (read from its store)."""
    got = broker.store.get_message(group, f"%DLQ%{group}", 0, 0, 32)
    if got is None or not getattr(got, "buffers", None):
        return []
    try:
        return [decode_record(buf, decompress=False)[0] for buf in got.buffers]
    finally:
        got.release()


async def raw_send(inst: ClientInstance, topic: str, body: bytes, *, queue_id: int, tags: str | None = None,
                   props: dict[str, str] | None = None) -> None:
    """SEND_MESSAGE_V2 straight to the broker (until the Producer lands)."""
    p = {"WAIT": "true", **(props or {})}
    if tags:
        p["TAGS"] = tags
    h = SendMessageRequestHeaderV2(
        a="PG", b=topic, c="TBW102", d=4, e=queue_id, f=0, g=1_700_000_000_000, h=0, i=encode_properties(p), j=0,
        k=False, m=False,
    )
    route = await inst.update_route("TBW102")
    addr = route.broker_datas[0].broker_addrs[0]
    resp = await inst.api.invoke(addr, RemotingCommand.request(310, h, body=body))
    assert resp.code == 0, resp.remark


async def test_push_consumer_receives_every_message_in_queue_order(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        got: list[tuple[int, int, bytes]] = []
        done = trio.Event()

        async def on_message(msg):
            got.append((msg.queue_id, msg.queue_offset, msg.body))
            if len(got) == 40:
                done.set()
            return ConsumeResult.SUCCESS

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            for i in range(40):
                await raw_send(inst, "PT", f"m{i}".encode(), queue_id=i % 4, tags="A" if i % 2 else "B")
            async with PushConsumer("CG1", ns, {"PT": "*"}, on_message, consume_from="first") as consumer:
                with trio.fail_after(10):
                    await done.wait()
                assert len(consumer.assignment()) == 5  # 4 queues + the retry queue
        assert sorted(b for _, _, b in got) == sorted(f"m{i}".encode() for i in range(40))
        for q in range(4):
            offs = [o for qq, o, _ in got if qq == q]
            assert offs == sorted(offs) == list(range(10))
        # committed at shutdown: the broker holds offset 10 for every queue
        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            route = await inst.update_route("PT")
            addr = route.broker_datas[0].broker_addrs[0]
            from trocket.codecs.bodies.client import MessageQueue
            name = route.broker_datas[0].broker_name
            for q in range(4):
                assert await inst.api.query_consumer_offset(addr, "CG1", MessageQueue("PT", name, q)) == 10


async def test_aclose_cancel_callbacks_leaves_stuck_messages_unconsumed_and_quiet(tmp_path, caplog):
    """``aclose(cancel_callbacks=True)``: a callback in flight is cancelled at once (no
    ``await_termination_s`` wait, no warning); offsets are committed up to the stuck
    message, which a later consumer of the group gets again."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        handled: list[bytes] = []
        stuck = trio.Event()

        async def on_message(msg):
            if msg.body == b"m3":
                stuck.set()
                await trio.sleep_forever()
            handled.append(msg.body)
            return ConsumeResult.SUCCESS

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            for i in range(6):
                await raw_send(inst, "CC", f"m{i}".encode(), queue_id=0)
            consumer = PushConsumer("CGC", ns, {"CC": "*"}, on_message, consume_from="first",
                                    max_concurrency=1, await_termination_s=30)
            async with consumer:
                with trio.fail_after(10):
                    await stuck.wait()
                with trio.fail_after(5):  # far below await_termination_s: nothing waited for
                    await consumer.aclose(cancel_callbacks=True)
        assert handled == [b"m0", b"m1", b"m2"]
        assert "callbacks still running" not in caplog.text

        again: list[bytes] = []
        done = trio.Event()

        async def on_again(msg):
            again.append(msg.body)
            if len(again) == 3:
                done.set()
            return ConsumeResult.SUCCESS

        async with PushConsumer("CGC", ns, {"CC": "*"}, on_again, max_concurrency=1) as consumer:
            with trio.fail_after(10):
                await done.wait()
        assert again == [b"m3", b"m4", b"m5"]


async def test_reset_by_timestamp_while_consuming_re_consumes_from_there(tmp_path):
    """INVOKE_BROKER_TO_RESET_OFFSET while the push consumer runs: the broker tells it
    (RESET_CONSUMER_CLIENT_OFFSET), it drops what it cached and pulls again from the
    reset point; the offsets it commits afterwards do not undo the reset."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        got: list[bytes] = []
        counted = trio.Event()
        want = 40

        async def on_message(msg):
            nonlocal counted
            got.append(msg.body)
            if len(got) >= want:
                counted.set()
            return ConsumeResult.SUCCESS

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            for i in range(20):
                await raw_send(inst, "RP", f"a{i}".encode(), queue_id=i % 2)
            # nearer the b's than the a's: Java's search by time answers the nearer neighbour
            await trio.sleep(0.3)
            middle = int(time.time() * 1000)
            await trio.sleep(0.01)
            for i in range(20):
                await raw_send(inst, "RP", f"b{i}".encode(), queue_id=i % 2)
            async with PushConsumer("RG", ns, {"RP": "*"}, on_message, consume_from="first") as consumer:
                with trio.fail_after(10):
                    await counted.wait()
                await consumer.commit()
                assert sorted(got) == sorted([f"a{i}".encode() for i in range(20)] + [f"b{i}".encode() for i in range(20)])
                before = len(got)
                want, counted = before + 20, trio.Event()
                addr = broker.broker_addr
                table = await inst.api.reset_offset(addr, "RP", "RG", middle)
                assert {mq.queue_id: offset for mq, offset in table.items()} == {0: 10, 1: 10, 2: 0, 3: 0}
                with trio.fail_after(10):
                    await counted.wait()
                assert sorted(got[before:]) == sorted(f"b{i}".encode() for i in range(20))
                await consumer.commit()
            for q in range(2):
                assert broker.offsets.query_offset("RG", "RP", q) == 20


async def test_suspend_resume_and_unsubscribe(tmp_path):
    """``suspend()`` stops pulling until ``resume()``; ``unsubscribe(topic)`` gives the
    topic's queues up at once (the rebalance it starts) while the other topic goes on."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        got: list[bytes] = []
        arrived = trio.Event()

        async def on_message(msg):
            got.append(msg.body)
            arrived.set()

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            await raw_send(inst, "SU1", b"first", queue_id=0)
            await raw_send(inst, "SU2", b"other", queue_id=0)
            async with PushConsumer("SUG", ns, {"SU1": "*", "SU2": "*"}, on_message, consume_from="first",
                                    broker_suspend_s=0.5) as consumer:
                with trio.fail_after(10):
                    while len(got) < 2:
                        arrived = trio.Event()
                        await arrived.wait()
                consumer.suspend()
                assert consumer.suspended
                # the pulls in flight (0.5 s long polls) end; a pull on its way to the broker
                # shows nowhere, so this one waits for a while
                await trio.sleep(1.0)
                await raw_send(inst, "SU1", b"while suspended", queue_id=0)
                await trio.sleep(2.0)  # a while in which a suspended consumer must not take it
                assert b"while suspended" not in got
                consumer.resume()
                with trio.fail_after(10):
                    while b"while suspended" not in got:
                        arrived = trio.Event()
                        await arrived.wait()
                consumer.unsubscribe("SU1")
                with trio.fail_after(10):
                    while any(mq.topic == "SU1" for mq in consumer.assignment()):
                        await trio.sleep(0.05)
                assert any(mq.topic == "SU2" for mq in consumer.assignment())
                await raw_send(inst, "SU1", b"after unsubscribe", queue_id=0)
                await raw_send(inst, "SU2", b"still subscribed", queue_id=0)
                with trio.fail_after(10):
                    while b"still subscribed" not in got:
                        arrived = trio.Event()
                        await arrived.wait()
                await trio.sleep(1.0)  # a while in which nothing of the dropped topic may come
                assert b"after unsubscribe" not in got


async def test_max_reconsume_times_sends_the_message_to_the_dlq(tmp_path):
    """A message whose callback keeps failing is consumed 1 + ``max_reconsume_times``
    times (the original, then each retry), then the broker puts it in ``%DLQ%<group>``."""
    # short delay levels: retries come back in 0.1 s, not 10 s, 30 s...
    async with running_broker(tmp_path, message_delay_level=" ".join(["100ms"] * 18)) as broker:
        ns = ";".join(broker.namesrv_addrs)
        tries: list[int] = []

        async def on_message(msg):
            tries.append(msg.reconsume_times)
            return ConsumeResult.RECONSUME_LATER

        def dlq() -> list:
            return dead_letters(broker, "DG")

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            await raw_send(inst, "DT", b"poison", queue_id=0)
            async with PushConsumer("DG", ns, {"DT": "*"}, on_message, consume_from="first",
                                    max_reconsume_times=2):
                with trio.fail_after(120):
                    while not dlq():
                        await trio.sleep(0.2)
                await trio.sleep(1.0)  # a while in which no more tries may come (retries are 0.1 s apart)
        assert tries == [0, 1, 2]
        (dead,) = dlq()
        # as Java's broker: the DLQ copy counts the last failure too
        assert dead.body == b"poison" and dead.reconsume_times == 3


async def test_consume_timeout_sends_a_stuck_message_back_and_moves_on(tmp_path):
    """A callback that never returns: after ``consume_timeout_s`` the message is sent
    back (cleanExpiredMsg), the queue's offset passes it, and its retry copy is consumed."""
    async with running_broker(tmp_path, message_delay_level=" ".join(["100ms"] * 18)) as broker:
        ns = ";".join(broker.namesrv_addrs)
        calls: list[tuple[bytes, int]] = []
        retried = trio.Event()

        async def on_message(msg):
            calls.append((msg.body, msg.reconsume_times))
            if msg.body == b"stuck" and msg.reconsume_times == 0:
                await trio.sleep_forever()
            if msg.body == b"stuck":
                retried.set()

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            await raw_send(inst, "TT", b"stuck", queue_id=0)
            await raw_send(inst, "TT", b"next", queue_id=0)
            async with PushConsumer("TG", ns, {"TT": "*"}, on_message, consume_from="first", queue_parallelism=2,
                                    consume_timeout_s=1.0, persist_interval_s=0.2) as consumer:
                with trio.fail_after(20):
                    await retried.wait()
                mq = next(mq for mq in consumer.assignment() if mq.topic == "TT" and mq.queue_id == 0)
                assert consumer._store.read_memory(mq) == 2  # passed over "stuck" and "next"
                await consumer.aclose(cancel_callbacks=True)
        assert (b"stuck", 0) in calls and (b"next", 0) in calls and (b"stuck", 1) in calls


async def test_batch_listener_gets_up_to_n_messages_of_one_queue_in_order(tmp_path):
    """``consume_batch_max_size=4``: a batch listener gets lists of at most 4 messages,
    each of one queue, in offset order; every message once; offsets committed."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        batches: list[list[tuple[int, int]]] = []
        contexts = []
        done = trio.Event()

        async def on_batch(msgs, context):
            batches.append([(m.queue_id, m.queue_offset) for m in msgs])
            contexts.append(context.mq)
            if sum(map(len, batches)) == 20:
                done.set()
            return ConsumeResult.SUCCESS

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            for i in range(20):
                await raw_send(inst, "BT", b"m%d" % i, queue_id=i % 2)
            async with PushConsumer("BG", ns, {"BT": "*"}, on_batch, consume_from="first",
                                    consume_batch_max_size=4) as consumer:
                with trio.fail_after(10):
                    await done.wait()
                await consumer.commit()
                committed = {mq.queue_id: consumer._store.read_memory(mq) for mq in consumer.assignment()
                             if mq.topic == "BT"}
        assert all(1 <= len(b) <= 4 for b in batches) and max(map(len, batches)) == 4
        for b, mq in zip(batches, contexts):
            assert {q for q, _ in b} == {mq.queue_id} and mq.topic == "BT"
            offs = [o for _, o in b]
            assert offs == list(range(offs[0], offs[0] + len(offs)))
        assert sorted(p for b in batches for p in b) == sorted((q, o) for q in range(2) for o in range(10))
        assert committed == {0: 10, 1: 10, 2: 0, 3: 0}


async def test_batch_ack_index_and_reconsume_later_send_back_the_rest(tmp_path):
    """On SUCCESS with ``context.ack_index = 1`` the batch's first two messages are
    consumed and the others sent back (they come again from the retry topic, once
    more); RECONSUME_LATER sends the whole batch back (Java's processConsumeResult)."""
    async with running_broker(tmp_path, message_delay_level=" ".join(["100ms"] * 18)) as broker:
        ns = ";".join(broker.namesrv_addrs)
        seen: list[tuple[bytes, int]] = []
        first_batch: list[bytes] = []

        async def on_batch(msgs, context):
            seen.extend((m.body, m.reconsume_times) for m in msgs)
            if all(m.reconsume_times == 0 for m in msgs) and not first_batch:
                first_batch.extend(m.body for m in msgs)
                context.ack_index = 1
                return ConsumeResult.SUCCESS
            if any(m.body == b"fail" and m.reconsume_times == 0 for m in msgs):
                return ConsumeResult.RECONSUME_LATER
            return ConsumeResult.SUCCESS

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            for body in (b"a", b"b", b"c", b"d"):
                await raw_send(inst, "AT", body, queue_id=0)
            async with PushConsumer("AG", ns, {"AT": "*"}, on_batch, consume_from="first",
                                    consume_batch_max_size=4) as consumer:
                with trio.fail_after(20):
                    while {b for b, r in seen if r == 1} != {b"c", b"d"}:
                        await trio.sleep(0.05)
                await raw_send(inst, "AT", b"fail", queue_id=1)
                await raw_send(inst, "AT", b"fail", queue_id=1)
                with trio.fail_after(20):
                    while sum(1 for b, r in seen if b == b"fail" and r == 1) < 2:
                        await trio.sleep(0.05)
                await trio.sleep(0.5)  # a while in which nothing more may be consumed
                assert consumer.stats.reconsume_later >= 4
        assert first_batch == [b"a", b"b", b"c", b"d"]
        assert sorted(seen) == sorted([(b"a", 0), (b"b", 0), (b"c", 0), (b"d", 0), (b"c", 1), (b"d", 1),
                                       (b"fail", 0), (b"fail", 0), (b"fail", 1), (b"fail", 1)])


async def test_orderly_batch_is_given_again_whole_after_reconsume_later(tmp_path):
    """Orderly with batches: RECONSUME_LATER gives the same batch again (in order, each
    message's reconsume count up by one) before later messages of the queue."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        calls: list[list[tuple[bytes, int]]] = []
        done = trio.Event()

        async def on_batch(msgs, context):
            calls.append([(m.body, m.reconsume_times) for m in msgs])
            if len(calls) == 1:
                return ConsumeResult.RECONSUME_LATER
            if sum(len(c) for c in calls[1:]) == 6:
                done.set()
            return ConsumeResult.SUCCESS

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            for i in range(6):
                await raw_send(inst, "OT", b"o%d" % i, queue_id=0)
            async with PushConsumer("OG", ns, {"OT": "*"}, on_batch, consume_from="first", orderly=True,
                                    consume_batch_max_size=3, suspend_orderly_s=0.1):
                with trio.fail_after(15):
                    await done.wait()
        assert calls[0] == [(b"o0", 0), (b"o1", 0), (b"o2", 0)]
        assert calls[1] == [(b"o0", 1), (b"o1", 1), (b"o2", 1)]
        assert [b for c in calls[1:] for b, _ in c] == [b"o%d" % i for i in range(6)]


async def test_batch_size_needs_a_batch_listener(tmp_path):
    import pytest

    from trocket.client.consumer_base import takes_context
    from trocket.client.errors import ClientStateError

    assert takes_context(lambda msgs, context: None)
    assert not takes_context(lambda msg: None)
    assert not takes_context(lambda msg, extra=None: None)
    with pytest.raises(ValueError, match="at most 1024"):
        PushConsumer("G", "127.0.0.1:1", {"T": "*"}, lambda msg: None, consume_batch_max_size=1025)
    consumer = PushConsumer("G", "127.0.0.1:1", {"T": "*"}, lambda msg: None, consume_batch_max_size=2)
    with pytest.raises(ClientStateError, match="batch listener"):
        await consumer.run()


async def test_delay_level_when_next_consume_picks_the_level_or_the_dlq(tmp_path):
    """``context.delay_level_when_next_consume``: 1 brings the message back after level 1
    (100 ms here, where the broker's own choice, level 3, is 30 s); -1 puts it in
    ``%DLQ%<group>`` at once, never consumed again."""
    levels = " ".join(["100ms", "100ms"] + ["30s"] * 16)
    async with running_broker(tmp_path, message_delay_level=levels) as broker:
        ns = ";".join(broker.namesrv_addrs)
        seen: list[tuple[bytes, int]] = []

        async def on(msgs, context):
            (msg,) = msgs
            seen.append((msg.body, msg.reconsume_times))
            if msg.reconsume_times == 0:
                context.delay_level_when_next_consume = 1 if msg.body == b"soon" else -1
                return ConsumeResult.RECONSUME_LATER
            return ConsumeResult.SUCCESS

        def dlq() -> list:
            return dead_letters(broker, "LG")

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            await raw_send(inst, "LT", b"soon", queue_id=0)
            await raw_send(inst, "LT", b"dead", queue_id=1)
            async with PushConsumer("LG", ns, {"LT": "*"}, on, consume_from="first"):
                with trio.fail_after(10):
                    while (b"soon", 1) not in seen or not dlq():
                        await trio.sleep(0.05)
                await trio.sleep(0.5)  # a while in which nothing more may be consumed
        assert sorted(seen) == [(b"dead", 0), (b"soon", 0), (b"soon", 1)]
        (dead,) = dlq()
        assert dead.body == b"dead"


async def test_orderly_context_sets_the_queue_pause(tmp_path):
    """Orderly RECONSUME_LATER with ``context.suspend_current_queue_time_s = 0.3``: the
    message comes again after about 0.3 s, not the consumer's ``suspend_orderly_s`` (5 s)."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        times: list[float] = []

        async def on(msgs, context):
            times.append(trio.current_time())
            if len(times) == 1:
                context.suspend_current_queue_time_s = 0.3
                return ConsumeResult.RECONSUME_LATER
            return ConsumeResult.SUCCESS

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            await raw_send(inst, "ST", b"o", queue_id=0)
            async with PushConsumer("SG", ns, {"ST": "*"}, on, consume_from="first", orderly=True,
                                    suspend_orderly_s=5.0):
                with trio.fail_after(4):
                    while len(times) < 2:
                        await trio.sleep(0.02)
        assert 0.25 <= times[1] - times[0] < 2.0, times


async def test_orderly_auto_commit_off_commit_and_rollback(tmp_path):
    """Java's ``ConsumeOrderlyContext.setAutoCommit(false)`` (processConsumeResult, 4.9.8):
    SUCCESS leaves the offset where it was, COMMIT moves it past everything consumed since
    the last commit, ROLLBACK gives all of those back, consumed again after the suspend
    time; with auto_commit on, COMMIT is taken as SUCCESS (it commits what is pending
    too). The group's offset at the broker is read at the start of every call."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        # (auto_commit, answer) for each call, in order
        plan = [
            (False, ConsumeResult.SUCCESS),   # m0
            (False, ConsumeResult.SUCCESS),   # m1
            (False, ConsumeResult.ROLLBACK),  # m2: m0, m1, m2 again after 0.3 s
            (False, ConsumeResult.SUCCESS),   # m0
            (False, ConsumeResult.COMMIT),    # m1: commits up to 2
            (False, ConsumeResult.SUCCESS),   # m2
            (True, ConsumeResult.COMMIT),     # m3: as SUCCESS, commits m2 and m3: 4
            (False, ConsumeResult.SUCCESS),   # m4: not committed
        ]
        calls: list[tuple[bytes, int, float]] = []
        ready, done = trio.Event(), trio.Event()
        box: dict = {}

        async def on(msgs, context):
            await ready.wait()
            await box["consumer"].commit()
            committed = broker.offsets.query_offset("ACG", "ACT", 0)
            calls.append((msgs[0].body, committed, trio.current_time()))
            if len(calls) > len(plan):
                await trio.sleep_forever()  # past the plan: cancelled at shutdown
            auto, answer = plan[len(calls) - 1]
            context.auto_commit = auto
            context.suspend_current_queue_time_s = 0.3
            if len(calls) == len(plan):
                done.set()
            return answer

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            for i in range(6):
                await raw_send(inst, "ACT", f"m{i}".encode(), queue_id=0)
            async with PushConsumer("ACG", ns, {"ACT": "*"}, on, consume_from="first", orderly=True,
                                    suspend_orderly_s=5.0) as consumer:
                box["consumer"] = consumer
                ready.set()
                with trio.fail_after(10):
                    await done.wait()
                    while len(calls) <= len(plan):  # the call after m4's: m5, offset still 4
                        await trio.sleep(0.02)
                await consumer.aclose(cancel_callbacks=True)
        bodies = [c[0] for c in calls]
        assert bodies == [b"m0", b"m1", b"m2", b"m0", b"m1", b"m2", b"m3", b"m4", b"m5"], bodies
        assert [c[1] for c in calls] == [-1, -1, -1, -1, -1, 2, 2, 4, 4], calls  # -1: none committed yet
        assert calls[3][2] - calls[2][2] >= 0.25  # the rollback's suspend time
        assert broker.offsets.query_offset("ACG", "ACT", 0) == 4  # m4 answered SUCCESS without auto_commit


async def test_orderly_max_reconsume_times_sends_the_message_to_the_dlq_and_moves_on(tmp_path):
    """Orderly ``checkReconsumeTimes``: a message failing ``max_reconsume_times`` (2)
    suspensions goes to ``%DLQ%<group>`` through the retry topic, and the queue moves on
    to the next message; without the option (-1) orderly retries without limit."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        calls: list[tuple[bytes, int]] = []
        done = trio.Event()

        async def on(msg):
            calls.append((msg.body, msg.reconsume_times))
            if msg.body == b"next":
                done.set()
                return ConsumeResult.SUCCESS
            return ConsumeResult.RECONSUME_LATER

        def dlq() -> list:
            return dead_letters(broker, "QG")

        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            await raw_send(inst, "QT", b"poison", queue_id=0)
            await raw_send(inst, "QT", b"next", queue_id=0)
            async with PushConsumer("QG", ns, {"QT": "*"}, on, consume_from="first", orderly=True,
                                    suspend_orderly_s=0.05, max_reconsume_times=2) as consumer:
                with trio.fail_after(15):
                    await done.wait()
                    while not dlq():
                        await trio.sleep(0.05)
                assert consumer._max_reconsume_times() == 2
        assert calls == [(b"poison", 0), (b"poison", 1), (b"poison", 2), (b"next", 0)]
        (dead,) = dlq()
        assert dead.body == b"poison"
    unlimited = PushConsumer("G", "127.0.0.1:1", {"T": "*"}, on, orderly=True)
    assert unlimited._max_reconsume_times() == 2**31 - 1
    assert PushConsumer("G", "127.0.0.1:1", {"T": "*"}, on)._max_reconsume_times() == 16
