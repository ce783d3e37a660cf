"""Regressions found by the real-client acceptance tests (tests/acceptance, the C++
client of PyPI ``rocketmq`` 0.4.4), reproduced here with the frames that client sends."""

from __future__ import annotations

import threading
import zlib

import pytest
import trio

from trocket.codecs.message.batch import encode_batch
from trocket.codecs.message.message import Message
from trocket.codecs.message.record import decode_records
from trocket.codecs.serialize import wire_ext_fields

from ..waiting import wait_until


def _cpp_batch(wire, topic: str, body: bytes, *, sys_flag: int, queue_id: int = 0):
    """Code 10 with ``batch:"1"`` and header properties ``WAIT=true``, as CPP sends it."""
    req = wire.send_v1(topic, body, queue_id=queue_id, properties="WAIT\x01true\x02", sys_flag=sys_flag)
    ext = wire_ext_fields(req)
    ext["batch"] = "1"
    req.custom_header = None
    req.ext_fields = ext
    return req


def _entries(n: int, size: int) -> list[Message]:
    return [
        Message("CB", (f"m{i}-" + "abcdefghij" * (size // 10)).encode(), 0,
                {"TAGS": "t", "KEYS": f"k{i}", "UNIQ_KEY": f"{i:032X}", "WAIT": "true", "uid": str(i)})
        for i in range(n)
    ]


async def test_cpp_compressed_batch_is_inflated_and_stored_plain(tmp_path, wire):
    """The C++ client deflates a batch body of 4 KiB or more and sets sysFlag bit 0
    (Java clients never compress batches). The broker used to split the zlib stream as
    if it were plain and answered 13 "bad batch body: batch entry at 0: body length
    1093084353 ..." -- every batch above 4 KiB failed."""
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        msgs = _entries(10, 500)
        plain = encode_batch(msgs)
        assert len(plain) >= 4096
        r = await c.invoke_sync(addr, _cpp_batch(wire, "CB", zlib.compress(plain, 5), sys_flag=1, queue_id=2))
        assert r.code == 0, r.remark
        assert r.ext_fields["queueId"] == "2" and r.ext_fields["queueOffset"] == "0"
        assert len(r.ext_fields["msgId"].split(",")) == 10
        # an uncompressed batch after it, same queue
        r2 = await c.invoke_sync(addr, _cpp_batch(wire, "CB", encode_batch(_entries(2, 20)), sys_flag=0, queue_id=2))
        assert r2.code == 0 and r2.ext_fields["queueOffset"] == "10"

        resp = await c.invoke_sync(addr, wire.pull("CB", 2, sys_flag=4))
        assert resp.code == 0
        got = decode_records(resp.body)
        assert len(got) == 12
        for i, (m, sent) in enumerate(zip(got, msgs)):
            assert m.sys_flag & 1 == 0, "each entry's body is plain: bit 0 must be clear"
            assert m.body == sent.body and m.queue_offset == i
            assert m.properties["uid"] == str(i) and m.properties["UNIQ_KEY"] == f"{i:032X}"


async def test_cpp_compressed_batch_bad_streams_are_refused(tmp_path, wire):
    async with wire.running_broker(tmp_path, max_message_size=64 * 1024) as broker, wire.client() as c:
        addr = broker.broker_addr
        good = zlib.compress(encode_batch(_entries(10, 500)), 5)
        cases = {
            "not zlib": b"\x00\x01not a zlib stream" * 10,
            "truncated": good[: len(good) // 2],
            # inflates far past max_message_size: refused without inflating it all
            "bomb": zlib.compress(b"\x00" * (8 << 20), 9),
        }
        for name, body in cases.items():
            r = await c.invoke_sync(addr, _cpp_batch(wire, "CB", body, sys_flag=1))
            assert r.code == 13, (name, r.code, r.remark)
            assert r.ext_fields is not None, name
        # nothing was stored, and the connection still works
        r = await c.invoke_sync(addr, _cpp_batch(wire, "CB", good, sys_flag=1))
        assert r.code == 0 and r.ext_fields["queueOffset"] == "0", r.remark


def _cpp_send_frame(raw, topic: str, seq: int, queue_id: int) -> bytes:
    props = f"KEYS\x01k{seq}\x02TAGS\x01t\x02UNIQ_KEY\x01{seq:032X}\x02WAIT\x01true\x02seq\x01{seq}\x02"
    return raw.frame(10, {
        "producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": "1700000000000", "flag": 0,
        "properties": props, "reconsumeTimes": "0", "unitMode": "0", "batch": "0",
    }, opaque=seq, body=f"body-{seq}".encode())


@pytest.mark.parametrize("flush", ["async", "sync"])
async def test_pipelined_sends_on_one_connection_are_stored_in_arrival_order(tmp_path, wire, raw, flush):
    """``send_oneway_orderly`` (and async sends) put many SEND frames on one connection
    without waiting. They used to be stored in the order trio first ran their tasks --
    trio reverses batches of runnable tasks at random -- e.g. seq 19..22 of one sharding
    key stored as 22, 21, 20, 19. Java's single send thread keeps arrival order."""
    n = 300
    async with wire.running_broker(tmp_path, flush=flush) as broker, wire.client() as c:
        host, port = broker.broker_addr.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        # the topic exists first (its creation is not what is tested)
        r = await c.invoke_sync(broker.broker_addr, wire.send_v1("ORD", b"first", properties=wire.props()))
        assert r.code == 0
        await stream.send_all(b"".join(_cpp_send_frame(raw, "ORD", seq, 1) for seq in range(n)))
        buf = bytearray()
        answers = {}
        with trio.fail_after(20):
            while len(answers) < n:
                cmd, _ = await raw.read(stream, buf)
                answers[cmd.opaque] = cmd
        await stream.aclose()
        assert all(a.code == 0 for a in answers.values()), {a.code for a in answers.values()}
        offsets = [int(answers[seq].ext_fields["queueOffset"]) for seq in range(n)]
        assert offsets == list(range(n)), "queue offsets must follow arrival order"
        got = []
        offset = 0
        while offset < n:
            resp = await c.invoke_sync(broker.broker_addr, wire.pull("ORD", 1, offset, sys_flag=4))
            assert resp.code == 0, resp.remark
            msgs = decode_records(resp.body)
            got += [int(m.properties["seq"]) for m in msgs]
            offset += len(msgs)
        assert got == list(range(n))


async def test_sync_flush_sends_waiting_at_shutdown_are_answered(tmp_path, wire, raw):
    """With sends processed inline, a SYNC_FLUSH send waits for its group commit in a
    task counted in flight on its connection: a graceful shutdown still answers it."""
    n = 20
    disk = threading.Event()
    async with wire.running_broker(tmp_path, flush="sync") as broker:
        broker.store.flush_service.flush_hook = lambda: disk.wait(10)  # a stalled disk
        host, port = broker.broker_addr.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        await stream.send_all(b"".join(_cpp_send_frame(raw, "SHUT", seq, 0) for seq in range(n)))
        try:
            # read and put; now waiting for the flush
            await wait_until(lambda: broker.send_processor.pending >= n, 5, interval=0.001)
            broker.request_shutdown()

            async def refused() -> bool:
                try:
                    await (await trio.open_tcp_stream(host, int(port))).aclose()
                except OSError:
                    return True
                return False

            await wait_until(refused, 5, interval=0.001)  # under way: the listener is closed, they still wait
            assert broker.send_processor.pending == n
        finally:
            disk.set()  # the disk comes back
        buf = bytearray()
        answers = {}
        with trio.fail_after(10):
            while len(answers) < n:
                cmd, _ = await raw.read(stream, buf)
                answers[cmd.opaque] = cmd
        assert sorted(answers) == list(range(n))
        assert all(a.code == 0 for a in answers.values()), [(a.code, a.remark) for a in answers.values()]
        await broker.stopped.wait()
        assert broker.send_processor.pending == 0


async def test_send_and_pull_answers_keep_their_ext_fields_in_order(tmp_path, wire, raw):
    """The send and pull answers are built from their response-header classes; their ext
    fields stay the bytes the real clients were tested against: the header's fields in
    declaration order, then the send's MSG_REGION and TRACE_ON."""
    import json

    async with wire.running_broker(tmp_path) as broker:
        host, port = broker.broker_addr.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        buf = bytearray()
        with trio.fail_after(10):
            await stream.send_all(_cpp_send_frame(raw, "EXT", 1, 0))
            cmd, header = await raw.read(stream, buf)
            assert cmd.code == 0, cmd.remark
            ext = json.loads(header)["extFields"]
            assert list(ext) == ["msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"]
            assert ext["queueId"] == "0" and ext["queueOffset"] == "0"
            assert (ext["MSG_REGION"], ext["TRACE_ON"]) == ("DefaultRegion", "true")
            await stream.send_all(raw.frame(11, {
                "consumerGroup": "CG", "topic": "EXT", "queueId": 0, "queueOffset": "0", "maxMsgNums": 32,
                "sysFlag": 4, "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
                "subVersion": "0", "expressionType": "TAG",
            }, opaque=2))
            cmd, header = await raw.read(stream, buf)
            assert cmd.code == 0, cmd.remark
            ext = json.loads(header)["extFields"]
            assert ext == {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"}
            assert list(ext) == ["suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"]
        await stream.aclose()
