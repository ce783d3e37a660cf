"""SEND's failure answers, through the wire, each from a real condition where one exists:
the flush-timeout answer of a SYNC_FLUSH broker and the store-error -> response-code
mapping (``SendProcessor._put_error``, Java's ``handlePutMessageResult``)."""

from __future__ import annotations

import os
import threading

import trio

from trocket.broker.store import MessageStore, PutMessageError
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.message.record import decode_records

MESSAGE_ILLEGAL = 13
SYSTEM_ERROR = 1
SERVICE_NOT_AVAILABLE = 14
FLUSH_DISK_TIMEOUT = 10


async def test_sync_flush_late_answers_flush_disk_timeout_with_the_message_id(tmp_path, wire, logical_clock):
    """The flush is made late by a stalled fsync at the store's one seam for it
    (``FlushService.flush_hook``, run in the flush thread before the real flush): the
    broker's own ``syncFlushTimeout`` (5 s, the default) then runs out, on the logical
    clock, and the answer is FLUSH_DISK_TIMEOUT with the message's id and queue offset,
    as Java's (the message is stored; only its durability is late)."""
    disk = threading.Event()
    async with wire.running_broker(tmp_path, flush="sync") as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v1("FT", b"first", properties=wire.props()))
        assert r.code == 0
        broker.store.flush_service.flush_hook = lambda: disk.wait(30)
        try:
            t0 = trio.current_time()
            r = await c.invoke_sync(addr, wire.send_v1("FT", b"late", queue_id=0, properties=wire.props()))
            assert broker.config.sync_flush_timeout_ms == 5000
            assert abs(trio.current_time() - t0 - 5.0) < 1e-9  # the timeout, exactly
            assert r.code == FLUSH_DISK_TIMEOUT, r.remark
            assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("0", "1")
            phys = decode_offset_msg_id(r.ext_fields["msgId"]).offset
            # WAIT=false: answered at once, flushed or not
            r2 = await c.invoke_sync(addr, wire.send_v1("FT", b"nowait", properties=wire.props(WAIT="false")))
            assert r2.code == 0 and r2.ext_fields["queueOffset"] == "2"
        finally:
            disk.set()
        resp = await c.invoke_sync(addr, wire.pull("FT", sys_flag=4))
        msgs = decode_records(resp.body)
        assert [m.body for m in msgs] == [b"first", b"late", b"nowait"]
        assert msgs[1].commit_log_offset == phys
        # the disk is back: the next send is durable in time again
        r = await c.invoke_sync(addr, wire.send_v1("FT", b"ok", properties=wire.props()))
        assert r.code == 0


async def test_oversized_properties_are_message_illegal(tmp_path, wire):
    """PROPERTIES_SIZE_EXCEEDED (more than 32767 bytes) -> 13 MESSAGE_ILLEGAL."""
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        props = wire.props(tags="t", big="x" * 32_800)
        r = await c.invoke_sync(addr, wire.send_v1("PS", b"x", properties=props))
        assert r.code == MESSAGE_ILLEGAL
        assert r.remark.startswith("the message is illegal, maybe msg body or properties length not matched.")
        # the stored string's length: CLUSTER=DefaultCluster added, WAIT=true and the
        # trailing separator gone (Java checks what it would store)
        stored = len(props.encode()) + len("\x02CLUSTER\x01DefaultCluster") - len("\x02WAIT\x01true\x02")
        assert f"properties are {stored} bytes, more than 32767" in r.remark
        assert r.ext_fields == {}
        assert broker.store.get_max_offset("PS", 0) == 0
        r = await c.invoke_sync(addr, wire.send_v1("PS", b"x", properties=wire.props(big="x" * 32_000)))
        assert r.code == 0


async def test_body_at_the_limit_is_stored_one_byte_more_is_message_illegal(tmp_path, wire):
    """4.9.8 limits the body: one of exactly ``maxMessageSize`` bytes is stored although
    its record, with topic and properties, is larger (the Java reference suite's
    test_biggest_message_and_one_byte_more); one byte more is MESSAGE_ILLEGAL."""
    limit = 64 * 1024
    async with wire.running_broker(tmp_path, max_message_size=limit) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v1("SL", b"x" * limit, properties=wire.props(big="p" * 20_000)))
        assert r.code == 0, r.remark
        r = await c.invoke_sync(addr, wire.send_v1("SL", b"x" * (limit + 1), properties=wire.props()))
        assert r.code == MESSAGE_ILLEGAL
        assert f"above the maximum of {limit}" in r.remark and r.remark.startswith("the message is illegal")
        assert broker.store.get_max_offset("SL", 0) == 1


async def test_segment_that_cannot_be_created_is_system_error(tmp_path, wire):
    """CREATE_MAPEDFILE_FAILED -> SYSTEM_ERROR with Java's remark. The condition: a
    directory in the way of the next commit-log segment's file (the tests run as root,
    for whom a read-only directory is writable)."""
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        seg = broker.store.config.commit_log_segment_size
        blocker = os.path.join(broker.store.config.commit_log_dir, f"{seg:020d}")
        os.mkdir(blocker)
        body = b"y" * 100_000
        with trio.fail_after(10):
            for _ in range(seg // len(body) + 2):
                r = await c.invoke_sync(addr, wire.send_v1("SEG", body, properties=wire.props()))
                if r.code != 0:
                    break
        assert r.code == SYSTEM_ERROR
        assert r.remark == "create mapped file failed, server is busy or broken."
        assert r.ext_fields == {}
        # the broker lives on: the way cleared, the next send opens the segment
        os.rmdir(blocker)
        r = await c.invoke_sync(addr, wire.send_v1("SEG", b"after", properties=wire.props()))
        assert r.code == 0
        assert decode_offset_msg_id(r.ext_fields["msgId"]).offset == seg


async def test_store_shut_down_is_service_not_available(tmp_path, wire):
    """SERVICE_NOT_AVAILABLE (the store shut down under a running broker) -> 14."""
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        assert (await c.invoke_sync(addr, wire.send_v1("SD", b"x", properties=wire.props()))).code == 0
        await trio.to_thread.run_sync(broker.store.shutdown)
        for req in (wire.send_v1("SD", b"x", properties=wire.props()),
                    wire.send_v2("SD", b"x", properties="WAIT\x01true"),
                    wire.send_v2("SD", b"\x00\x00\x00\x05junk", code=320)):
            r = await c.invoke_sync(addr, req)
            assert r.code == SERVICE_NOT_AVAILABLE, (r.code, r.remark)
            assert r.remark.startswith("service not available now.") and "message store has been shut down" in r.remark


async def test_unmapped_store_error_is_system_error_unknown(tmp_path, wire, monkeypatch):
    """Any other store refusal -> SYSTEM_ERROR "UNKNOWN_ERROR: <what the store said>".
    No real condition makes the store raise a status the broker does not map, so a
    store whose put raises the base error stands in for one."""
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr

        def put(*_a, **_k):
            raise PutMessageError("the disk said no")

        monkeypatch.setattr(MessageStore, "put_message", put)  # the class: its instances have slots
        monkeypatch.setattr(MessageStore, "put_send", put)
        monkeypatch.setattr(MessageStore, "put_messages", put)
        r = await c.invoke_sync(addr, wire.send_v1("UE", b"x", properties=wire.props()))
        assert (r.code, r.remark, r.ext_fields) == (SYSTEM_ERROR, "UNKNOWN_ERROR: the disk said no", {})
        r = await c.invoke_sync(addr, wire.send_v2("UE", b"\x00\x00\x00\x05junk", code=320))
        assert (r.code, r.remark) == (SYSTEM_ERROR, "UNKNOWN_ERROR: the disk said no")


def _ext_of(request) -> dict[str, str]:
    """A request's ext fields as they go on the wire (its header object encoded)."""
    from trocket.codecs.serialize import decode_command, encode_command

    return dict(decode_command(encode_command(request)[4:]).ext_fields)


async def test_properties_that_are_not_utf8_are_message_illegal(tmp_path, wire, raw):
    """Properties holding a lone surrogate (valid JSON, ``\\ud800``, but no UTF-8: our
    own client refuses to encode it, so the frames are written raw) -> 13 MESSAGE_ILLEGAL
    for V1 and V2 headers; nothing stored; the connection serves on."""
    bad = wire.props(tags="t") + "odd\x01\ud800\x02"
    async with wire.running_broker(tmp_path) as broker:
        host, port = broker.broker_addr.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        buf = bytearray()
        v1 = _ext_of(wire.send_v1("PU", b"x", properties=""))
        v2 = _ext_of(wire.send_v2("PU", b"x", properties=""))
        for opaque, (code, ext) in enumerate([(10, {**v1, "properties": bad}), (310, {**v2, "i": bad})], 1):
            await stream.send_all(raw.frame(code, ext, opaque, b"x"))
            r, _ = await raw.read(stream, buf)
            assert r.opaque == opaque
            assert r.code == MESSAGE_ILLEGAL, r.remark
            assert r.remark.startswith("the message is illegal") and "properties are not valid UTF-8" in r.remark
        assert broker.store.get_max_offset("PU", 0) == 0
        await stream.send_all(raw.frame(310, {**v2, "i": wire.props(tags="t")}, 9, b"x"))
        r, _ = await raw.read(stream, buf)
        assert (r.opaque, r.code) == (9, 0), r.remark
        assert broker.store.get_max_offset("PU", 0) == 1
        await stream.aclose()
