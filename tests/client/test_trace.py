"""Message trace in trocket's client (issue 25): Pub records from a producer and
SubBefore / SubAfter from a push consumer with ``trace=True``, in Java's format, in the
broker's trace topic (``traceTopicEnable``); a trace topic that cannot be written costs
the user's messages nothing."""

from __future__ import annotations

import trio

from trocket.client.consumer import ConsumeResult, PushConsumer
from trocket.client.consumer_lite import PullConsumer
from trocket.client.message import new_message
from trocket.client.producer import Producer
from trocket.client.trace import TraceBean, TraceContext, TraceType, decode, encode
from trocket.codecs.headers import CreateTopicRequestHeader

from .conftest import running_broker


def test_encode_is_javas_format():
    pub = TraceContext(TraceType.Pub, "PG", timestamp=1700000000000, cost_time=3, beans=[TraceBean(
        topic="T", msg_id="ID1", offset_msg_id="OFF1", tags="TagA", keys="k1 k2", store_host="127.0.0.1:10911",
        body_length=5)])
    data, keys = encode(pub)
    assert data == ("Pub\x011700000000000\x01DefaultRegion\x01PG\x01T\x01ID1\x01TagA\x01k1 k2\x01127.0.0.1:10911\x01"
                    "5\x013\x010\x01OFF1\x01true\x02")
    assert keys == ["ID1", "k1", "k2"]
    after = TraceContext(TraceType.SubAfter, "CG", timestamp=1700000000001, cost_time=7, success=False,
                         request_id="R", context_code=4, beans=[TraceBean(msg_id="ID1", keys=None)])
    assert encode(after)[0] == "SubAfter\x01R\x01ID1\x017\x01false\x01null\x014\x011700000000001\x01CG\x02"
    records = decode(data + encode(after)[0])
    assert [(r.trace_type, r.msg_id, r.success) for r in records] == [("Pub", "ID1", True), ("SubAfter", "ID1", False)]
    assert records[0].offset_msg_id == "OFF1" and records[1].context_code == 4


async def read_traces(ns: str, topic: str = "RMQ_SYS_TRACE_TOPIC", want: int = 3, timeout: float = 10) -> list:
    got = []
    async with PullConsumer("TraceReader", ns, auto_commit=False) as reader:
        queues = await reader.fetch_queues(topic)
        await reader.assign(queues)
        for mq in queues:
            await reader.seek(mq, 0)
        with trio.move_on_after(timeout):
            while len(got) < want:
                for m in await reader.poll(timeout=0.5):
                    got.extend((r, m.keys) for r in decode(m.body.decode()))
    return got


async def test_producer_and_consumer_write_java_traces(tmp_path):
    async with running_broker(tmp_path, trace_topic_enable=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        consumed = trio.Event()
        async with Producer("TracePG", ns, trace=True) as producer:
            result = await producer.send(new_message("TraceT", b"traced", tags="TagT", keys="traceKey"))
            # Java's MessageType from the message: Delay_Msg (3) with a delay level or a start time
            delayed, timed = new_message("TraceT", b"d"), new_message("TraceT", b"t")
            delayed.delay_time_level = 1
            timed.properties["__STARTDELIVERTIME"] = "1700000000000"
            typed = {(await producer.send(m)).msg_id for m in (delayed, timed)}

            async def on_message(msg):
                consumed.set()
                return ConsumeResult.SUCCESS

            async with PushConsumer("TraceCG", ns, {"TraceT": "*"}, on_message, consume_from="first", trace=True):
                with trio.fail_after(10):
                    await consumed.wait()
        records = await read_traces(ns, want=5)
        pubs = [(r.msg_type, r.tags) for r, _ in records if r.msg_id in typed and r.trace_type == "Pub"]
        assert pubs == [(3, "null"), (3, "null")]
        mine = [(r, keys) for r, keys in records if r.msg_id == result.msg_id]
        kinds = {r.trace_type: r for r, _ in mine}
        assert sorted(kinds) == ["Pub", "SubAfter", "SubBefore"]
        pub = kinds["Pub"]
        assert (pub.group, pub.topic, pub.tags, pub.keys, pub.offset_msg_id, pub.success, pub.msg_type) == (
            "TracePG", "TraceT", "TagT", "traceKey", result.offset_msg_id, True, 0)
        assert kinds["SubBefore"].group == "TraceCG" and kinds["SubAfter"].success is True
        assert kinds["SubBefore"].request_id == kinds["SubAfter"].request_id != ""
        # indexed as Java's: by the message id and its keys
        assert all(result.msg_id in keys and "traceKey" in keys for _, keys in mine)


async def test_a_message_with_its_trace_switch_off_has_no_consume_records(tmp_path):
    """Java's consume hook skips a message whose ``TRACE_ON`` property is ``false``: no
    SubBefore or SubAfter for it (its Pub stays: the send hook looks only at the
    broker's answer)."""
    async with running_broker(tmp_path, trace_topic_enable=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        got: list[bytes] = []
        both = trio.Event()
        async with Producer("TraceOffPG", ns, trace=True) as producer:
            off = new_message("TraceOffT", b"off", keys="kOff")
            off.properties["TRACE_ON"] = "false"
            sent_off = await producer.send(off)
            sent_on = await producer.send(new_message("TraceOffT", b"on", keys="kOn"))

            async def on_message(msg):
                got.append(msg.body)
                if len(got) == 2:
                    both.set()
                return ConsumeResult.SUCCESS

            async with PushConsumer("TraceOffCG", ns, {"TraceOffT": "*"}, on_message, consume_from="first", trace=True):
                with trio.fail_after(10):
                    await both.wait()
        records = [r for r, _ in await read_traces(ns)]
        kinds = {(r.msg_id, r.trace_type) for r in records}
        assert {(sent_on.msg_id, k) for k in ("Pub", "SubBefore", "SubAfter")} <= kinds
        assert (sent_off.msg_id, "Pub") in kinds
        assert not {(sent_off.msg_id, k) for k in ("SubBefore", "SubAfter")} & kinds


async def test_an_unwritable_trace_topic_loses_no_user_message(tmp_path):
    """No trace topic and no auto-create: every trace send fails, every send succeeds."""
    async with running_broker(tmp_path, auto_create_topic=False) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with Producer("TracePG2", ns, trace=True) as producer:
            header = CreateTopicRequestHeader(topic="UserT", defaultTopic="TBW102", readQueueNums=4, writeQueueNums=4,
                                              perm=6, topicFilterType="SINGLE_TAG", topicSysFlag=0, order=False)
            await producer.instance.api.create_topic(broker.broker_addr, header)
            with trio.fail_after(10):
                while await producer.instance.update_route("UserT") is None:
                    await trio.sleep(0.05)
            results = [await producer.send(new_message("UserT", f"m{i}".encode())) for i in range(20)]
            assert all(r.ok for r in results)
            tracer = producer.tracer
            assert tracer is not None
        assert tracer.appended == 20 and tracer.sent == 0 and tracer.failed >= 1


def test_pub_record_is_encode_of_a_pub_context():
    from trocket.client.trace import pub_record

    ctx = TraceContext(TraceType.Pub, "G", timestamp=5, region_id="R", cost_time=2, success=False, beans=[TraceBean(
        topic="T", msg_id="M", offset_msg_id="O", tags=None, keys="a b", store_host="h:1", body_length=9, msg_type=3)])
    assert pub_record(5, "R", "G", "T", "M", None, "a b", "h:1", 9, 2, 3, "O", False) == encode(ctx)[0]


class _Sink:
    """Stands for the dispatcher's trace producer: keeps (virtual time, body, keys) of
    each trace message."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, str, list[str]]] = []

    async def send(self, msg, timeout=None):
        self.sent.append((trio.current_time(), msg.body.decode(), msg.properties["KEYS"].split(" ")))


async def test_a_segment_goes_when_full_or_500_ms_after_its_first_record(mock_clock):
    """Java's TraceDataSegment: records gather until ~118 KB (sent at once, however young)
    or until 500 ms after the segment's first record; each record once, in order; the
    trace message's keys are its records' ids and keys, once each; past 2048 records not
    yet sent, a record is dropped and counted."""
    from trocket.client.trace import MAX_MSG_SIZE, QUEUE_SIZE, TraceDispatcher, pub_record
    from trio.testing import wait_all_tasks_blocked

    dispatcher = TraceDispatcher(None, "G")
    sink = dispatcher._producer = _Sink()

    def record(i: int) -> tuple[str, str, str | None]:
        msg_id = f"{i:032X}"
        return pub_record(i, "R", "G", "T" * 200, msg_id, None, "k1 k2", "h:1", 9, 1, 0, "O", True), msg_id, "k1 k2"

    full, size = 0, 0  # the records that fill a segment
    while size < MAX_MSG_SIZE - 10_000:
        size += len(record(full)[0])
        full += 1
    async with trio.open_nursery() as nursery:
        nursery.start_soon(dispatcher._dispatch)
        for i in range(full + 1):
            dispatcher.append_record(*record(i))
        await wait_all_tasks_blocked()
        assert [(t, len(decode(body))) for t, body, _ in sink.sent] == [(0, full)]  # full: no wait
        mock_clock.jump(0.49)
        await wait_all_tasks_blocked()
        assert len(sink.sent) == 1  # the next one's first record came at 0
        mock_clock.jump(0.02)
        await wait_all_tasks_blocked()
        assert [len(decode(body)) for _, body, _ in sink.sent] == [full, 1]
        assert sorted(sink.sent[1][2]) == sorted([record(full)[1], "k1", "k2"])
        nursery.cancel_scope.cancel()
    assert [r.timestamp for _, body, _ in sink.sent for r in decode(body)] == list(range(full + 1))
    for i in range(QUEUE_SIZE + 5):  # no task sends now
        dispatcher.append_record(*record(i))
    assert dispatcher.dropped == 5 and dispatcher.appended == full + 1 + QUEUE_SIZE
    await dispatcher.flush()
    assert sum(len(decode(body)) for _, body, _ in sink.sent) == full + 1 + QUEUE_SIZE
    dispatcher.append_record(*record(0))  # room again
    assert dispatcher.dropped == 5


async def test_many_records_split_by_their_keys(tmp_path):
    """1,500 records of long batch ids: their keys would pass the broker's 32 KiB of
    properties in one trace message; they go in several, none refused."""
    async with running_broker(tmp_path, trace_topic_enable=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with Producer("TracePG3", ns, trace=True) as producer:
            tracer = producer.tracer
            assert tracer is not None
            from trocket.client.trace import pub_record

            for i in range(1500):
                msg_id = ",".join(f"{i:08d}{j:024X}" for j in range(3))  # a batch's ids
                tracer.append_record(pub_record(i, "R", "G", "T", msg_id, None, "k", "h:1", 1, 1, 0, "O", True),
                                     msg_id, "k")
            await tracer.flush()
        assert tracer.failed == 0 and tracer.sent >= 4, (tracer.sent, tracer.failed)
        records = await read_traces(ns, want=1500)
        assert len(records) == 1500


async def test_admin_msg_trace_prints_the_timeline(tmp_path):
    """``trocket admin msg trace MSG_ID``: the trace topic queried by the message id (the
    broker's index), mqadmin QueryMsgTraceById's table; --json has every record."""
    import json
    import os
    import sys
    from pathlib import Path

    trocket = [str(Path(sys.executable).with_name("trocket"))]
    async with running_broker(tmp_path, trace_topic_enable=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        consumed = trio.Event()
        async with Producer("TracePG4", ns, trace=True) as producer:
            result = await producer.send(new_message("TraceT4", b"traced", tags="TagT", keys="k4"))

            async def on_message(msg):
                consumed.set()
                return ConsumeResult.SUCCESS

            async with PushConsumer("TraceCG4", ns, {"TraceT4": "*"}, on_message, consume_from="first", trace=True):
                with trio.fail_after(10):
                    await consumed.wait()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with trio.fail_after(60):
            while True:  # the index is built off the send path: a moment after the store
                done = await trio.run_process([*trocket, "admin", "msg", "trace", result.msg_id, "-n", ns, "--json"],
                                              capture_stdout=True, capture_stderr=True, check=False, env=env)
                doc = json.loads(done.stdout) if done.returncode == 0 else {"records": []}
                if {r["type"] for r in doc["records"]} == {"Pub", "SubBefore", "SubAfter"}:
                    break
                await trio.sleep(0.2)
        pub = next(r for r in doc["records"] if r["type"] == "Pub")
        assert (pub["group"], pub["topic"], pub["tags"], pub["keys"], pub["offsetMsgId"]) == (
            "TracePG4", "TraceT4", "TagT", "k4", result.offset_msg_id)
        table = await trio.run_process([*trocket, "admin", "msg", "trace", result.msg_id, "-n", ns],
                                       capture_stdout=True, capture_stderr=True, check=False, env=env)
        rows = [line.split() for line in table.stdout.decode().splitlines() if line.strip()]
        assert rows[0] == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
        assert rows[1][0:2] == ["Pub", "TracePG4"] and rows[1][-1] == "success"
        assert ["Sub", "TraceCG4"] in [r[0:2] for r in rows] and rows[-1][-1] == "success"
        missing = await trio.run_process([*trocket, "admin", "msg", "trace", "00" * 16, "-n", ns],
                                         capture_stdout=True, capture_stderr=True, check=False, env=env)
        assert missing.returncode == 1 and b"no trace record" in missing.stderr


async def test_a_traced_batch_and_a_namespace(tmp_path):
    """A batch listener with ``trace=True``: a SubBefore and a SubAfter per message of
    the batch, one request id for the call; with a namespace, Pub and Sub records name
    the topic and group without it (Java's trace hooks)."""
    async with running_broker(tmp_path, trace_topic_enable=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        got = trio.Event()
        sizes = []
        async with Producer("TracePB", ns, trace=True, namespace="tns") as producer:
            results = [await producer.send_orderly(new_message("TraceB", b"b%d" % i), key="q") for i in range(3)]

            async def on_batch(msgs, context):
                sizes.append(len(msgs))
                if sum(sizes) >= 3:
                    got.set()

            async with PushConsumer("TraceBG", ns, {"TraceB": "*"}, on_batch, consume_from="first", trace=True,
                                    consume_batch_max_size=8, namespace="tns"):
                with trio.fail_after(10):
                    await got.wait()
        ids = {r.msg_id for r in results}
        records = [r for r, _ in await read_traces(ns, want=9) if r.msg_id in ids]
        by_kind: dict[str, list] = {}
        for r in records:
            by_kind.setdefault(r.trace_type, []).append(r)
        assert {k: len(v) for k, v in by_kind.items()} == {"Pub": 3, "SubBefore": 3, "SubAfter": 3}
        assert {(r.group, r.topic) for r in by_kind["Pub"]} == {("TracePB", "TraceB")}
        assert {r.group for r in by_kind["SubBefore"] + by_kind["SubAfter"]} == {"TraceBG"}
        assert sizes == [3]  # one queue, all there before the start: one call, one request id
        assert len({r.request_id for r in by_kind["SubBefore"] + by_kind["SubAfter"]}) == 1


def test_end_transaction_is_javas_format():
    """``TraceDataEncoder``'s EndTransaction: type, time, region, group, topic, msgId, tags,
    keys, store host, msgType (Trans_msg_Commit, 2), transactionId, state name, fromCheck."""
    from trocket.client.trace import end_transaction_context

    ctx = end_transaction_context("PG", "T", "ID1", "TagA", None, "127.0.0.1:10911", "ID1", "ROLLBACK_MESSAGE",
                                  True, None)
    ctx.timestamp = 1700000000000
    data, keys = encode(ctx)
    assert data == ("EndTransaction\x011700000000000\x01DefaultRegion\x01PG\x01T\x01ID1\x01TagA\x01null\x01"
                    "127.0.0.1:10911\x012\x01ID1\x01ROLLBACK_MESSAGE\x01true\x02")
    assert keys == ["ID1"]
    (r,) = decode(data)
    assert (r.trace_type, r.timestamp, r.group, r.topic, r.msg_id, r.tags, r.store_host, r.msg_type) == (
        "EndTransaction", 1700000000000, "PG", "T", "ID1", "TagA", "127.0.0.1:10911", 2)
    assert (r.transaction_id, r.transaction_state, r.from_transaction_check) == ("ID1", "ROLLBACK_MESSAGE", True)


async def test_a_transaction_producer_traces_its_ends_and_admin_msg_trace_shows_them(tmp_path):
    """``TransactionProducer(trace=True)``: the prepared send's Pub (Trans_Msg_Half, 1),
    then an EndTransaction record per END_TRANSACTION (Java's EndTransactionTraceHookImpl):
    the local answer (fromTransactionCheck false) and a check's answer (true), with the
    broker's address and the message's tags and keys; ``trocket admin msg trace`` lists them."""
    import json
    import os
    import sys
    from pathlib import Path

    from trocket.client import LocalTransactionState, TransactionProducer

    class Listener:
        async def execute(self, msg, arg):
            return LocalTransactionState.UNKNOW if msg.body == b"later" else LocalTransactionState.COMMIT_MESSAGE

        async def check(self, msg):
            return LocalTransactionState.COMMIT_MESSAGE

    async with running_broker(tmp_path, trace_topic_enable=True, transaction_timeout_ms=0,
                              transaction_check_interval_ms=3_600_000) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with TransactionProducer("TracePT", ns, Listener(), trace=True, namespace="tns") as producer:
            now = await producer.send_in_transaction(new_message("TraceX", b"now", tags="TagX", keys="kx"))
            later = await producer.send_in_transaction(new_message("TraceX", b"later", tags="TagY"))
            with trio.fail_after(5):
                while not broker.ctx.producers.channels("tns%TracePT"):
                    await trio.sleep(0.02)
            assert await broker.transactions.check() == 1
            with trio.fail_after(5):
                while producer.checks_answered < 1:
                    await trio.sleep(0.02)
        ids = {now.msg_id, later.msg_id}
        records = [r for r, _ in await read_traces(ns, want=5) if r.msg_id in ids]
        ends = sorted(((r.msg_id, r.transaction_state, r.from_transaction_check) for r in records
                       if r.trace_type == "EndTransaction"), key=lambda e: (e[0] != now.msg_id, e[2]))
        assert ends == [(now.msg_id, "COMMIT_MESSAGE", False), (later.msg_id, "UNKNOW", False),
                        (later.msg_id, "COMMIT_MESSAGE", True)]
        first = next(r for r in records if r.trace_type == "EndTransaction" and r.msg_id == now.msg_id)
        assert (first.group, first.topic, first.tags, first.keys, first.store_host, first.msg_type,
                first.transaction_id) == ("TracePT", "TraceX", "TagX", "kx", broker.broker_addr, 2, now.msg_id)
        assert {r.msg_type for r in records if r.trace_type == "Pub"} == {1}
        trocket = [str(Path(sys.executable).with_name("trocket"))]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with trio.fail_after(60):
            while True:  # the index is built off the send path: a moment after the store
                done = await trio.run_process([*trocket, "admin", "msg", "trace", later.msg_id, "-n", ns, "--json"],
                                              capture_stdout=True, capture_stderr=True, check=False, env=env)
                doc = json.loads(done.stdout) if done.returncode == 0 else {"records": []}
                if [r["type"] for r in doc["records"]].count("EndTransaction") == 2:
                    break
                await trio.sleep(0.2)
        assert [(r["transactionState"], r["fromTransactionCheck"]) for r in doc["records"]
                if r["type"] == "EndTransaction"] == [("UNKNOW", False), ("COMMIT_MESSAGE", True)]
        table = await trio.run_process([*trocket, "admin", "msg", "trace", later.msg_id, "-n", ns],
                                       capture_stdout=True, capture_stderr=True, check=False, env=env)
        rows = [line.split() for line in table.stdout.decode().splitlines() if line.strip()]
        assert ["#Type", "#ProducerGroup", "#ClientHost", "#EndTime", "#State", "#FromCheck"] in rows
        assert [(r[1], r[-2], r[-1]) for r in rows if r[0] == "EndTransaction"] == [
            ("TracePT", "UNKNOW", "false"), ("TracePT", "COMMIT_MESSAGE", "true")]


async def test_a_lite_pull_consumer_traces_each_pull(tmp_path):
    """``PullConsumer(trace=True)``: as Java's DefaultLitePullConsumer (the
    ConsumeMessageTraceHookImpl run in pullSyncImpl), a SubBefore and a SubAfter per pulled
    message, one request id per pull, success, return type 0; the group without the
    namespace."""
    async with running_broker(tmp_path, trace_topic_enable=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with Producer("TracePL", ns, namespace="tns") as producer:
            results = [await producer.send(new_message("TraceL", b"l%d" % i, keys=f"lk{i}")) for i in range(4)]
        got = []
        async with PullConsumer("TraceLG", ns, trace=True, consume_from="first", namespace="tns") as consumer:
            consumer.subscribe("TraceL")
            with trio.fail_after(10):
                while len(got) < 4:
                    got += await consumer.poll(timeout=0.5)
            tracer = consumer.tracer
            assert tracer is not None
        assert tracer.appended == 8 and tracer.failed == 0
        ids = {r.msg_id for r in results}
        records = [r for r, _ in await read_traces(ns, want=8) if r.msg_id in ids]
        before = {r.msg_id: r for r in records if r.trace_type == "SubBefore"}
        after = {r.msg_id: r for r in records if r.trace_type == "SubAfter"}
        assert set(before) == set(after) == ids and len(records) == 8
        assert {(r.group, r.success, r.context_code) for r in after.values()} == {("TraceLG", True, 0)}
        assert {r.group for r in before.values()} == {"TraceLG"}
        assert all(before[i].request_id == after[i].request_id != "" for i in ids)
        assert {before[r.msg_id].keys for r in results} == {f"lk{i}" for i in range(4)}
