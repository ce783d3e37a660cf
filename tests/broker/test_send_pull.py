"""SEND (10/310/320, CPP-style batch) and PULL (11) against a real broker over TCP.

The long-polling tests run on a MockClock (conftest's ``logical_clock``): they assert
the logical time a held pull is answered at, exactly, instead of measuring sleeps."""

from __future__ import annotations

import threading

import trio

from trocket.codecs.message.batch import encode_batch
from trocket.codecs.message.message import Message
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.message.record import decode_record, decode_records

from ..waiting import wait_until
from .conftest import held_count_reaches


def _records(body: bytes):
    return decode_records(body)


async def test_send_v1_v2_then_pull_byte_exact(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        p1 = wire.props(tags="TagA", keys="k1", UNIQ_KEY="0A0B0C0D" * 4, custom="v\u00e9")
        r1 = await c.invoke_sync(addr, wire.send_v1("SP1", b"body-one", properties=p1))
        assert r1.code == 0, r1.remark
        assert r1.ext_fields["queueId"] == "0" and r1.ext_fields["queueOffset"] == "0"
        p2 = "TAGS\x01TagB\x02KEYS\x01k2"  # JS style: no trailing separator, no WAIT/UNIQ_KEY
        r2 = await c.invoke_sync(addr, wire.send_v2("SP1", b"body-two", properties=p2))
        assert r2.code == 0, r2.remark
        assert r2.ext_fields["queueOffset"] == "1"

        resp = await c.invoke_sync(addr, wire.pull("SP1", sys_flag=4))
        assert resp.code == 0 and resp.remark == "FOUND"
        ext = resp.ext_fields
        assert ext == {"suggestWhichBrokerId": "0", "nextBeginOffset": "2", "minOffset": "0", "maxOffset": "2"}
        msgs = _records(resp.body)
        assert [m.body for m in msgs] == [b"body-one", b"body-two"]
        # properties stored as 4.9.8's broker stores them: CLUSTER put, WAIT dropped, in
        # Java's HashMap order (these two strings are what a Java 4.9.8 broker made of
        # p1 and p2); each record ends PROPLEN + PROPERTIES
        stored = [
            "KEYS\x01k1\x02custom\x01v\u00e9\x02UNIQ_KEY\x01" + "0A0B0C0D" * 4
            + "\x02CLUSTER\x01DefaultCluster\x02TAGS\x01TagA",
            "KEYS\x01k2\x02CLUSTER\x01DefaultCluster\x02TAGS\x01TagB",
        ]
        pos = 0
        for m, want in zip(msgs, stored):
            _, end = decode_record(resp.body, pos)
            rec = resp.body[pos:end]
            props = want.encode()
            assert rec.endswith(len(props).to_bytes(2, "big") + props)
            pos = end
        assert msgs[0].properties["custom"] == "v\u00e9" and msgs[0].tags == "TagA"
        assert msgs[0].born_timestamp == 1_700_000_000_123 and msgs[1].born_timestamp == 1_700_000_000_456
        # the send response's msgId is the record's offset id (store host + physical offset)
        for m, r in zip(msgs, (r1, r2)):
            oid = decode_offset_msg_id(r.ext_fields["msgId"])
            assert oid.offset == m.commit_log_offset
            assert f"{m.store_host.ip}:{m.store_host.port}" == addr
            assert (oid.ip, oid.port) == (m.store_host.ip, m.store_host.port)


async def test_batch_320_and_cpp_batch_code_10(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        batch = encode_batch(
            [Message("BT", f"m{i}".encode(), 0, {"TAGS": "t", "UNIQ_KEY": f"{i:032X}", "WAIT": "true"}) for i in range(3)]
        )
        r = await c.invoke_sync(addr, wire.send_v2("BT", batch, code=320, queue_id=1))
        assert r.code == 0, r.remark
        ids = r.ext_fields["msgId"].split(",")
        assert len(ids) == 3 and r.ext_fields["queueOffset"] == "0" and r.ext_fields["queueId"] == "1"
        # the C++ client: code 10, batch "1", header properties only WAIT
        req = wire.send_v1("BT", batch, queue_id=1, properties="WAIT\x01true\x02")
        req.ext_fields = None
        from trocket.codecs.serialize import wire_ext_fields

        ext = wire_ext_fields(req)
        ext["batch"] = "1"
        req.custom_header = None
        req.ext_fields = ext
        r2 = await c.invoke_sync(addr, req)
        assert r2.code == 0, r2.remark
        assert len(r2.ext_fields["msgId"].split(",")) == 3 and r2.ext_fields["queueOffset"] == "3"

        resp = await c.invoke_sync(addr, wire.pull("BT", 1, sys_flag=4))
        msgs = _records(resp.body)
        assert [m.body for m in msgs] == [b"m0", b"m1", b"m2"] * 2
        assert [m.queue_offset for m in msgs] == list(range(6))
        assert all(m.properties["UNIQ_KEY"] == f"{i % 3:032X}" for i, m in enumerate(msgs))
        offsets = [decode_offset_msg_id(x).offset for x in ids]
        assert offsets == [m.commit_log_offset for m in msgs[:3]]


async def test_compressed_body_stored_unchanged(tmp_path, wire):
    import zlib

    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        body = zlib.compress(b"x" * 10000, 5)
        r = await c.invoke_sync(broker.broker_addr, wire.send_v1("ZT", body, sys_flag=1, properties=wire.props()))
        assert r.code == 0
        resp = await c.invoke_sync(broker.broker_addr, wire.pull("ZT", sys_flag=4))
        # raw record: sysflag bit 0 kept, body bytes as sent
        assert body in resp.body
        m = _records(resp.body)[0]
        assert m.body == b"x" * 10000 and m.sys_flag & 1


async def test_tag_filtering(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for i, tag in enumerate(["A", "B", "A", "C", None, "B"]):
            r = await c.invoke_sync(addr, wire.send_v1("TF", f"{i}".encode(), properties=wire.props(tags=tag)))
            assert r.code == 0
        resp = await c.invoke_sync(addr, wire.pull("TF", subscription="A || C", sys_flag=4))
        assert resp.code == 0
        assert [m.body for m in _records(resp.body)] == [b"0", b"2", b"3"]
        assert resp.ext_fields["nextBeginOffset"] == "6"
        # nothing matches from offset 4 on for "C": retry immediately with the offset moved on
        resp = await c.invoke_sync(addr, wire.pull("TF", offset=4, subscription="C", sys_flag=4))
        assert resp.code == 20 and resp.remark == "NO_MATCHED_MESSAGE"
        assert resp.ext_fields["nextBeginOffset"] == "6"
        # "*" gets everything
        resp = await c.invoke_sync(addr, wire.pull("TF", subscription="*", sys_flag=4))
        assert len(_records(resp.body)) == 6


async def test_exact_tag_check_drops_hash_collisions(tmp_path, wire):
    # "Aa" and "BB" have the same Java String.hashCode
    from trocket.broker.store import tags_hash

    assert tags_hash("Aa") == tags_hash("BB")
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for tag in ("Aa", "BB", "Aa"):
            assert (await c.invoke_sync(addr, wire.send_v1("HC", tag.encode(), properties=wire.props(tags=tag)))).code == 0
        resp = await c.invoke_sync(addr, wire.pull("HC", subscription="BB", sys_flag=4))
        assert [m.body for m in _records(resp.body)] == [b"BB"]
        resp = await c.invoke_sync(addr, wire.pull("HC", offset=2, subscription="BB", sys_flag=4))
        assert resp.code == 20 and resp.ext_fields["nextBeginOffset"] == "3"


async def test_pull_without_suspend_answers_19_at_once(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        assert (await c.invoke_sync(addr, wire.send_v1("NS", b"x", properties=wire.props()))).code == 0
        t0 = trio.current_time()
        resp = await c.invoke_sync(addr, wire.pull("NS", offset=1, sys_flag=4, suspend_ms=20000))
        assert trio.current_time() == t0
        assert resp.code == 19 and resp.remark == "OFFSET_OVERFLOW_ONE"
        assert resp.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"}
        # an empty queue with offset 0: 19 too (NO_MESSAGE_IN_QUEUE)
        resp = await c.invoke_sync(addr, wire.pull("NS", queue_id=2, offset=0, sys_flag=4))
        assert resp.code == 19 and resp.remark == "NO_MESSAGE_IN_QUEUE"


async def test_long_polling_woken_by_arrival(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c, wire.client() as producer:
        addr = broker.broker_addr
        assert (await c.invoke_sync(addr, wire.send_v1("LP", b"first", properties=wire.props()))).code == 0
        got = {}

        async def held_pull():
            got["resp"] = await c.invoke_sync(addr, wire.pull("LP", offset=1, suspend_ms=10000), 15)
            got["at"] = trio.current_time()

        async with trio.open_nursery() as n:
            n.start_soon(held_pull)
            await held_count_reaches(broker, 1)
            # the held pull does not block other requests on the same connection
            r = await c.invoke_sync(addr, wire.pull("LP", offset=0, sys_flag=4), 2)
            assert r.code == 0
            await trio.sleep(9.9)  # logical time: short of the 10 s suspend
            assert "resp" not in got
            sent_at = trio.current_time()
            r = await producer.invoke_sync(addr, wire.send_v1("LP", b"second", properties=wire.props()))
            assert r.code == 0
        resp = got["resp"]
        assert resp.code == 0 and [m.body for m in _records(resp.body)] == [b"second"]
        assert got["at"] == sent_at  # answered by the arrival, not by the periodic check
        assert broker.pull_hold.woken_by_arrival >= 1 and broker.pull_hold.held_count == 0


async def test_long_polling_timeout_answers_19_no_hot_loop(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        assert (await c.invoke_sync(addr, wire.send_v1("LT", b"x", properties=wire.props()))).code == 0
        passes0 = broker.pull_hold.passes
        t0 = trio.current_time()
        resp = await c.invoke_sync(addr, wire.pull("LT", offset=1, suspend_ms=700), 5)
        elapsed = trio.current_time() - t0
        assert resp.code == 19 and resp.ext_fields["nextBeginOffset"] == "1"
        assert abs(elapsed - 0.7) < 1e-9  # the suspend deadline, exactly
        # the service slept until the deadline: a handful of passes, not a spin
        assert broker.pull_hold.passes - passes0 < 10
        assert broker.pull_hold.woken_by_timeout == 1


async def test_long_polling_other_tag_does_not_wake(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, wire.send_v1("LG", b"zero", properties=wire.props(tags="other")))
        got = {}

        async def held():
            got["r"] = await c.invoke_sync(addr, wire.pull("LG", offset=1, subscription="want", suspend_ms=5000), 10)
            got["t"] = trio.current_time()

        async with trio.open_nursery() as n:
            n.start_soon(held)
            await held_count_reaches(broker, 1)
            await c.invoke_sync(addr, wire.send_v1("LG", b"other", properties=wire.props(tags="other")))
            await trio.sleep(4.9)  # logical time, less than the periodic check's 5 s
            assert "r" not in got  # still held
            t0 = trio.current_time()
            await c.invoke_sync(addr, wire.send_v1("LG", b"mine", properties=wire.props(tags="want")))
        assert got["r"].code == 0 and [m.body for m in _records(got["r"].body)] == [b"mine"]
        assert got["t"] == t0


async def test_many_held_pulls_woken_in_one_batch(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        results = []

        for q in range(4):
            await c.invoke_sync(addr, wire.send_v1("MB", b"0", queue_id=q, properties=wire.props()))

        async def held(q):
            r = await c.invoke_sync(addr, wire.pull("MB", queue_id=q % 4, offset=1, suspend_ms=8000), 10)
            results.append(r)

        async with trio.open_nursery() as n:
            for i in range(40):
                n.start_soon(held, i)
            await held_count_reaches(broker, 40)
            passes0 = broker.pull_hold.passes
            # a burst of sends to every queue: one coalesced pass (or a few) wakes all
            async with trio.open_nursery() as senders:
                for i in range(200):
                    senders.start_soon(c.invoke_sync, addr, wire.send_v1("MB", b"x", queue_id=i % 4, properties=wire.props()))
        assert len(results) == 40 and all(r.code == 0 for r in results)
        assert broker.pull_hold.passes - passes0 < 40


async def test_commit_offset_flag_stores_group_offset(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for _ in range(3):
            await c.invoke_sync(addr, wire.send_v1("CO", b"x", properties=wire.props()))
        r = await c.invoke_sync(addr, wire.pull("CO", offset=2, sys_flag=4 | 1, commit_offset=2, group="G1"))
        assert r.code == 0
        assert broker.offsets.query_offset("G1", "CO", 0) == 2
        r = await c.invoke_sync(addr, wire.pull("CO", offset=3, sys_flag=4, commit_offset=3, group="G1"))
        assert broker.offsets.query_offset("G1", "CO", 0) == 2  # bit 1 not set: not stored


async def test_cpp_wire_format_ints_flag0_and_extfields(tmp_path, wire, raw):
    """What the C++ client sends: JSON ints in extFields, flag 0 even for oneway, the
    ACL fields; the answer is JSON with an extFields object of strings."""
    async with wire.running_broker(tmp_path) as broker:
        host, port = broker.broker_addr.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        buf = bytearray()
        async with stream:
            ext = {
                "producerGroup": "P", "topic": "CPPT", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                "queueId": 2, "sysFlag": 0, "bornTimestamp": "1700000000000", "flag": 0,
                "properties": "TAGS\x01t\x02UNIQ_KEY\x01ABC\x02WAIT\x01true\x02", "reconsumeTimes": "0",
                "unitMode": "0", "batch": "0",
            }
            await stream.send_all(raw.frame(10, ext, 0, b"cpp-body"))
            resp, header = await raw.read(stream, buf)
            assert resp.code == 0 and resp.opaque == 0 and resp.flag & 1
            assert b'"extFields":{' in header
            assert resp.ext_fields["queueId"] == "2" and resp.ext_fields["queueOffset"] == "0"
            # a pull with ints (sysFlag 4, no suspend) and an error answer: both with extFields
            pull = {"consumerGroup": "G", "topic": "CPPT", "queueId": 2, "queueOffset": "0", "maxMsgNums": 32,
                    "sysFlag": 4, "commitOffset": "0", "subVersion": "0", "suspendTimeoutMillis": "20000",
                    "subscription": "*"}
            await stream.send_all(raw.frame(11, pull, 1))
            resp, header = await raw.read(stream, buf)
            assert resp.code == 0 and decode_records(resp.body)[0].body == b"cpp-body"
            await stream.send_all(raw.frame(10, {**ext, "topic": "bad topic"}, 2, b"x"))
            resp, header = await raw.read(stream, buf)
            assert resp.code == 1 and b'"extFields":{}' in header


async def test_send_busy_answers_system_busy_with_extfields(tmp_path, wire):
    """At most send_concurrency + send_queue_capacity sync-flush sends wait for their
    flush; past that, SYSTEM_BUSY at once, with the remark Java's remoting gives when
    the send pool's queue is full (``NettyRemotingAbstract``: ``[OVERLOAD]``; its
    ``[TIMEOUT_CLEAN_QUEUE]`` is for requests that waited too long in the queue, which
    trocket has no queue for). The flush is held by a stalled fsync (the store's
    ``flush_hook``) so exactly one send waits."""
    disk = threading.Event()
    async with wire.running_broker(tmp_path, send_concurrency=1, send_queue_capacity=0, flush="sync") as broker, \
            wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, wire.send_v1("BZ", b"warm", properties=wire.props()))
        broker.store.flush_service.flush_hook = lambda: disk.wait(30)
        results = []

        async def one():
            results.append(await c.invoke_sync(addr, wire.send_v1("BZ", b"x" * 100, properties=wire.props())))

        try:
            async with trio.open_nursery() as n:
                n.start_soon(one)
                await wait_until(lambda: broker.send_processor.pending >= 1, 5, interval=0.001)
                for _ in range(3):
                    r = await c.invoke_sync(addr, wire.send_v1("BZ", b"y", properties=wire.props()))
                    assert r.code == 2 and r.ext_fields == {}
                    assert r.remark == "[OVERLOAD]system busy, start flow control for a while"
                disk.set()
        finally:
            disk.set()
        assert [r.code for r in results] == [0]
        r = await c.invoke_sync(addr, wire.send_v1("BZ", b"z", properties=wire.props()))
        assert r.code == 0 and r.ext_fields["queueOffset"] == "2"


# -- bad input: RocketMQ's codes and remarks; the connection stays usable ------------------


async def _still_usable(c, addr, wire):
    r = await c.invoke_sync(addr, wire.send_v1("OkTopic", b"ok", properties=wire.props()))
    assert r.code == 0, r.remark


async def test_bad_send_inputs(tmp_path, wire):
    async with wire.running_broker(tmp_path, max_message_size=64 * 1024) as broker, wire.client() as c:
        addr = broker.broker_addr
        cases = [
            (wire.send_v1("bad topic", b"x"), 1, "The specified topic contains illegal characters"),
            (wire.send_v1("", b"x"), 1, "The specified topic is blank."),
            (wire.send_v1("T" * 128, b"x"), 1, "The specified topic is longer than topic max length."),
            (wire.send_v1("SCHEDULE_TOPIC_XXXX", b"x"), 16, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."),
            (wire.send_v1("Big", b"x" * (64 * 1024 + 1)), 13, "the message is illegal, maybe msg body or properties length not matched"),
            (wire.send_v1("QT", b"x", queue_id=4), 1, "request queueId[4] is illegal, TopicConfig [topicName=QT"),
            (wire.send_v2("BT2", b"\x00\x00\x00\x05junk", code=320), 13, "the message is illegal"),
            (wire.send_v1("%RETRY%G", b"x", batch=True), 13, "batch request does not support retry group %RETRY%G"),
        ]
        for req, code, remark in cases:
            r = await c.invoke_sync(addr, req)
            assert r.code == code, (req.custom_header, r.code, r.remark)
            assert remark in r.remark, (r.remark, remark)
            assert r.ext_fields == {}
            await _still_usable(c, addr, wire)
        # the queue-id check needs the topic to exist first: it was auto-created above with 4
        assert broker.topics.select("QT").write_queue_nums == 4


async def test_prepared_send_refused_when_transactions_rejected(tmp_path, wire):
    """``rejectTransactionMessage=true``: a prepared send (TRAN_MSG, or the prepared
    sysflag) is NO_PERMISSION with Java's remark, and nothing is stored."""
    async with wire.running_broker(tmp_path, reject_transaction_message=True) as broker, wire.client() as c:
        addr = broker.broker_addr
        for req in (
            wire.send_v1("TX", b"x", properties="TRAN_MSG\x01true\x02PGROUP\x01PG\x02"),
            wire.send_v1("TX", b"x", properties=wire.props(), sys_flag=4),
        ):
            r = await c.invoke_sync(addr, req)
            assert r.code == 16, (r.code, r.remark)
            assert r.remark == "the broker[127.0.0.1] sending transaction message is forbidden"
            await _still_usable(c, addr, wire)
        assert broker.store.get_max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 0
        assert broker.store.get_max_offset("TX", 0) == 0


async def test_malformed_headers(tmp_path, wire):
    from trocket.codecs.command import RemotingCommand

    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for code, ext, needle in [
            (10, {"producerGroup": "P"}, "the custom field <topic> is null"),
            (310, {"a": "P", "b": "T"}, "the custom field"),
            (11, {"consumerGroup": "G", "topic": "T", "queueId": "zero"}, "queueId"),
            (11, {}, "the custom field <consumerGroup> is null"),
            (30, {"topic": "T"}, "the custom field <queueId> is null"),
            (33, {"offset": "nan"}, "offset"),
        ]:
            r = await c.invoke_sync(addr, RemotingCommand.request(code, ext_fields=ext))
            assert r.code == 1, (code, r.remark)
            assert needle in r.remark and "RemotingCommandException" in r.remark
            await _still_usable(c, addr, wire)


async def test_unknown_topic_with_auto_create_off(tmp_path, wire):
    async with wire.running_broker(tmp_path, auto_create_topic=False) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v1("Nope", b"x"))
        assert r.code == 17
        assert r.remark.startswith("topic[Nope] not exist, apply first please!")
        assert "http://rocketmq.apache.org/docs/faq/" in r.remark
        assert broker.topics.select("Nope") is None
        r = await c.invoke_sync(addr, wire.pull("Nope"))
        assert r.code == 17 and "topic[Nope] not exist" in r.remark
        # the retry topic of a group still appears (1 queue, perm 6)
        r = await c.invoke_sync(addr, wire.send_v1("%RETRY%grp", b"x"))
        assert r.code == 0
        tc = broker.topics.select("%RETRY%grp")
        assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (1, 1, 6)


async def test_bad_pull_inputs(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for _ in range(3):
            await c.invoke_sync(addr, wire.send_v1("PB", b"x", properties=wire.props()))
        r = await c.invoke_sync(addr, wire.pull("PB", group="bad group"))
        assert r.code == 26 and r.remark.startswith("subscription group [bad group] does not exist")
        r = await c.invoke_sync(addr, wire.pull("PB", queue_id=9))
        assert r.code == 1 and "queueId[9] is illegal, topic:[PB] topicConfig.readQueueNums:[4]" in r.remark
        r = await c.invoke_sync(addr, wire.pull("PB", queue_id=-1))
        assert r.code == 1
        # illegal offsets: PULL_OFFSET_MOVED with where to go
        r = await c.invoke_sync(addr, wire.pull("PB", offset=100))
        assert r.code == 21 and r.remark == "OFFSET_OVERFLOW_BADLY"
        assert r.ext_fields["nextBeginOffset"] == "3" and r.ext_fields["maxOffset"] == "3"  # 4.9.8: the max
        r = await c.invoke_sync(addr, wire.pull("PB", offset=-5))
        assert r.code == 21 and r.remark == "OFFSET_TOO_SMALL" and r.ext_fields["nextBeginOffset"] == "0"
        r = await c.invoke_sync(addr, wire.pull("PB", queue_id=3, offset=7, sys_flag=4))
        assert r.code == 21 and r.remark == "NO_MESSAGE_IN_QUEUE"
        r = await c.invoke_sync(addr, wire.pull("PB", subscription="a > 1", expression_type="SQL92"))
        assert r.code == 1 and r.remark == "The broker does not support consumer to filter message by SQL92"
        # no subscription bit and no heartbeat: Java's SUBSCRIPTION_NOT_EXIST (no group info)
        r = await c.invoke_sync(addr, wire.pull("PB", sys_flag=0, subscription=None))
        assert r.code == 24 and r.remark.startswith("the consumer's group info not exist")
        await _still_usable(c, addr, wire)


async def test_held_pulls_dropped_when_connection_closes_and_bounded(tmp_path, wire):
    async with wire.running_broker(tmp_path, max_held_pulls=2) as broker:
        addr = broker.broker_addr
        async with wire.client() as c:
            await c.invoke_sync(addr, wire.send_v1("HD", b"x", properties=wire.props()))
            from trocket.remoting import RemotingConnectionClosedError

            async def held():
                try:
                    await c.invoke_sync(addr, wire.pull("HD", offset=1, suspend_ms=30000), 40)
                except RemotingConnectionClosedError:
                    pass

            async with trio.open_nursery() as n:
                for _ in range(2):
                    n.start_soon(held)
                await held_count_reaches(broker, 2)
                r = await c.invoke_sync(addr, wire.pull("HD", offset=1, suspend_ms=30000))
                assert r.code == 2 and "[PULL_HOLD_FULL]" in r.remark
                c.close_connection(addr)
                await wait_until(lambda: not broker.pull_hold.held_count, 3)


async def test_auto_created_topic_routed_before_the_send_is_answered(tmp_path, wire):
    """Java's ``createTopicInSendMessageMethod`` registers with the name servers before it
    answers: a client asking for the new topic's route right after its first send finds it
    (the trocket PullConsumer's ``fetch_queues`` right after a producer did, once racing)."""
    from trocket.codecs.command import RemotingCommand

    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        for topic in ("AutoA", "AutoB", "AutoC"):
            r = await c.invoke_sync(broker.broker_addr, wire.send_v2(topic, b"first"))
            assert r.code == 0, r.remark
            route = await c.invoke_sync(
                broker.namesrv_addrs[0], RemotingCommand.request(105, ext_fields={"topic": topic})
            )
            assert route.code == 0, route.remark
        # later sends to the now known topic are answered inline as before
        r = await c.invoke_sync(broker.broker_addr, wire.send_v2("AutoA", b"second"))
        assert r.code == 0 and r.ext_fields["queueOffset"] in {"0", "1"}
