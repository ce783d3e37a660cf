from __future__ import annotations

import os

import pytest

from trocket.broker.store import (
    BatchInner,
    GetStatus,
    MessageStore,
    MessageTooLargeError,
    MessageIllegalError,
    PropertiesTooLargeError,
    PutStatus,
    tags_hash,
)
from trocket.codecs.message.batch import encode_batch
from trocket.codecs.message.message import Message
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.message.record import (
    BLANK_MAGIC_CODE,
    decode_record,
    iter_records,
    peek_record,
)
from trocket.codecs.message.sysflag import TRANSACTION_PREPARED_TYPE

from .conftest import msg, small_config


def records(result):
    return list(iter_records(result.joined(), check_crc=True))


def test_round_trip_fields(store, config):
    r = store.put_message(msg(body=b"payload", queue_id=2, tags="TagA", flag=7, reconsume_times=3))
    assert r.ok and r.queue_id == 2 and r.queue_offset == 0 and r.physical_offset == 0
    assert r.wrote_bytes == r.end_offset
    got = store.get_message("G", "T", 2, 0, 32)
    assert got.status is GetStatus.FOUND and got.next_begin_offset == 1
    assert (got.min_offset, got.max_offset) == (0, 1)
    [m] = records(got)
    assert m.body == b"payload" and m.topic == "T" and m.queue_id == 2 and m.flag == 7
    assert m.properties == {"TAGS": "TagA"} and m.reconsume_times == 3
    assert m.queue_offset == 0 and m.commit_log_offset == 0 and m.store_size == r.wrote_bytes
    assert m.store_timestamp == r.store_timestamp and m.born_host == ("10.1.2.3", 40000)
    assert m.store_host == tuple(config.store_host)
    # the offset message id agrees with the record (JS clients correlate by it)
    assert r.msg_id == m.msg_id
    assert decode_offset_msg_id(r.msg_id).offset == 0


def test_message_inner_fast_constructor_equals_the_attrs_one():
    """``message_inner`` (slot stores, the send path's) builds what the keyword
    ``__init__`` builds, every field included."""
    from trocket.broker.store.messages import MessageInner, message_inner
    from trocket.codecs.message.hosts import HostAddress

    host = HostAddress("10.1.2.3", 40000)
    fast = message_inner("T", b"body", 3, 7, b"TAGS\x01a\x02", 4, 1700000000000, host, 2, 97)
    slow = MessageInner(
        topic="T", body=b"body", queue_id=3, flag=7, properties_bytes=b"TAGS\x01a\x02", sys_flag=4,
        born_timestamp=1700000000000, born_host=host, reconsume_times=2, tags_code=97,
    )
    assert fast == slow
    assert [a.name for a in MessageInner.__attrs_attrs__] == [
        "topic", "body", "queue_id", "flag", "properties", "properties_bytes", "sys_flag",
        "born_timestamp", "born_host", "reconsume_times", "prepared_transaction_offset", "tags_code",
    ]  # a new field must be set in message_inner too


def test_append_fields_stores_what_append_message_stores(store):
    """``append_fields`` (a transaction's END: no message object) writes the record
    ``append_message`` writes of the same message, prepared transaction offset included,
    SCHEDULE_TOPIC_XXXX's deliver-time tags code too; nothing is dispatched until
    ``dispatch``; a shut-down store refuses it."""
    from trocket.broker.store import StoreClosedError
    from trocket.broker.store.messages import message_inner
    from trocket.codecs.message.hosts import HostAddress

    host = HostAddress("10.1.2.3", 40000)
    for topic, props in (("T", b"TAGS\x01a"), ("SCHEDULE_TOPIC_XXXX", b"DELAY\x013\x02REAL_TOPIC\x01T")):
        fields = (topic, b"body", 2, 7, props, 8, 1700000000000, host, 1, tags_hash("a"))
        inner = message_inner(*fields)
        inner.prepared_transaction_offset = 4242
        by_message, by_fields = store.append_message(inner), store.append_fields(*fields, 4242)
        assert by_fields.queue_offset == by_message.queue_offset + 1
        assert store.get_max_offset(topic, 2) == 0  # not dispatched yet
        store.dispatch()
        a, b = (decode_record(store.commit_log.get_record(r.physical_offset))[0] for r in (by_message, by_fields))
        assert b.prepared_transaction_offset == 4242 and b.sys_flag == 8 and b.body == b"body"
        for m in (a, b):
            m.queue_offset = m.commit_log_offset = m.store_timestamp = 0
            m.msg_id = ""
        assert a == b
        tag_a, tag_b = (store.get_queue_entry(topic, 2, r.queue_offset)[2] for r in (by_message, by_fields))
        if topic == "T":
            assert tag_a == tag_b == tags_hash("a")
        else:  # the deliver time: store time + level 3's delay (10 s), each its own
            assert tag_b >= by_fields.store_timestamp + 10_000 and tag_a >= by_message.store_timestamp + 10_000
    store.shutdown()
    with pytest.raises(StoreClosedError):
        store.append_fields("T", b"x", 0, 0, b"", 0, 0, host, 0, 0)


def test_put_result_built_by_slot_stores_is_whole(store, config):
    """CommitLog.put_message builds its PutResult with slot stores: every field set,
    equal to the one the attrs __init__ makes."""
    import attrs

    from trocket.broker.store import PutResult, PutStatus

    r = store.put_message(msg(queue_id=1))
    assert [a.name for a in attrs.fields(PutResult)] == [
        "status", "queue_id", "queue_offset", "physical_offset", "wrote_bytes", "store_timestamp",
        "store_host", "msg_count", "record_sizes", "_msg_id",
    ]  # a new field must be set in CommitLog.put_message too
    same = PutResult(
        PutStatus.PUT_OK, 1, 0, r.physical_offset, r.wrote_bytes, r.store_timestamp, config.store_host
    )
    assert r.msg_id == same.msg_id  # computed on read there, eagerly here
    assert r == same


def test_put_result_msg_id_follows_the_store_host(store, config):
    """The message id prefix is cached per store host; the broker changes the host
    after opening the store (its listen port), and the id follows."""
    from trocket.codecs.message.hosts import HostAddress

    first = store.put_message(msg())
    assert decode_offset_msg_id(first.msg_id).port == config.store_host[1]
    store.config.store_host = HostAddress("10.9.8.7", 12345)
    second = store.put_message(msg())
    decoded = decode_offset_msg_id(second.msg_id)
    assert (decoded.ip, decoded.port, decoded.offset) == ("10.9.8.7", 12345, second.physical_offset)


def test_queue_offsets_are_per_queue(store):
    offsets = [store.put_message(msg(queue_id=i % 3)).queue_offset for i in range(9)]
    assert offsets == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert store.put_message(msg(topic="Other", queue_id=0)).queue_offset == 0
    assert store.get_max_offset("T", 1) == 3 and store.get_min_offset("T", 1) == 0


def test_raw_properties_stored_verbatim(store):
    raw = b"TAGS\x01x\x02UNIQ_KEY\x01ABC\x02"  # CPP style, trailing separator
    store.put_message(msg(properties_bytes=raw, properties={"TAGS": "x"}))
    view = store.get_message("G", "T", 0, 0).buffers[0]
    assert bytes(view).endswith(raw)


def test_rollover_writes_blank_filler(tmp_path):
    config = small_config(tmp_path)
    store = MessageStore.open(config)
    body = b"b" * 1000
    results = [store.put_message(msg(body=body)) for _ in range(200)]
    segment = config.commit_log_segment_size
    rolled = [r for r in results if r.physical_offset % segment == 0 and r.physical_offset]
    assert rolled, "expected a roll-over"
    first_in_second = rolled[0]
    prev = results[results.index(first_in_second) - 1]
    blank_at = prev.end_offset
    assert blank_at < segment
    mf = store.commit_log.files.files[0]
    total, magic = peek_record(mf.read_raw(0, segment), blank_at)
    assert magic == BLANK_MAGIC_CODE and total == segment - blank_at
    names = sorted(os.listdir(config.commit_log_dir))
    assert names[:2] == ["00000000000000000000", f"{segment:020d}"]
    # every message is served across segments in order
    seen = []
    offset = 0
    while True:
        got = store.get_message("G", "T", 0, offset, 32)
        if got.status is not GetStatus.FOUND:
            assert got.status is GetStatus.OFFSET_OVERFLOW_ONE
            break
        seen += [m.queue_offset for m in records(got)]
        offset = got.next_begin_offset
    assert seen == list(range(200))
    store.shutdown()


def test_max_message_size(store, config):
    """4.9.8's MessageExtEncoder: ``maxMessageSize`` limits the body; the whole record may
    be 64 KiB more (topic, properties, the fixed fields)."""
    with pytest.raises(MessageTooLargeError) as info:
        store.put_message(msg(body=b"x" * (config.max_message_size + 1)))
    assert info.value.status is PutStatus.MESSAGE_ILLEGAL
    assert str(info.value) == f"message body of {config.max_message_size + 1} bytes exceeds the maximum of {config.max_message_size}"
    assert store.max_phy_offset == 0
    r = store.put_message(msg(body=b"x" * config.max_message_size, properties={"k": "v" * 30000}))
    assert r.status is PutStatus.PUT_OK and r.wrote_bytes > config.max_message_size + 30000
    assert records(store.get_message("G", "T", 0, 0))[0].body == b"x" * config.max_message_size
    with pytest.raises(MessageIllegalError):
        store.put_message(msg(topic="t" * 128))
    with pytest.raises(PropertiesTooLargeError):
        store.put_message(msg(properties={"k": "v" * 40000}))
    assert store.max_phy_offset == r.wrote_bytes  # nothing half-written


def test_batch_records_past_the_limit_and_64k(tmp_path):
    """A batch body within the limit whose records (each with topic, properties and the
    fixed fields) come to more than ``maxMessageSize`` + 64 KiB: MESSAGE_ILLEGAL, nothing
    written (Java's batch encoder has that much room)."""
    config = small_config(tmp_path / "store", commit_log_segment_size=1 << 20)
    store = MessageStore.open(config)
    count = config.max_message_size // 24  # batch entries of 22 bytes + a 2-byte body
    body = encode_batch([Message("ignored", b"bb", 0, {}) for _ in range(count)])
    assert len(body) <= config.max_message_size
    extra = b"CLUSTER\x01DefaultCluster\x02WAIT\x01true"
    with pytest.raises(MessageTooLargeError) as info:
        store.put_messages(BatchInner(topic="T" * 100, body=body, queue_id=0, properties_bytes=extra))
    assert f"exceeds the maximum of {config.max_message_size + 64 * 1024}" in str(info.value)
    assert store.max_phy_offset == 0
    store.shutdown()


def test_batch_put(store):
    messages = [Message("ignored", f"m{i}".encode(), i, {"TAGS": f"t{i % 2}", "KEYS": f"k{i}"}) for i in range(5)]
    store.put_message(msg(queue_id=1))
    r = store.put_messages(
        BatchInner(topic="T", body=encode_batch(messages), queue_id=1, properties_bytes=b"WAIT\x01true")
    )
    assert r.msg_count == 5 and r.queue_offset == 1
    ids = r.msg_id.split(",")
    assert len(ids) == 5 and [decode_offset_msg_id(i).offset for i in ids] == r.physical_offsets
    got = store.get_message("G", "T", 1, 1, 32)
    ms = records(got)
    assert [m.queue_offset for m in ms] == [1, 2, 3, 4, 5]
    assert [m.body for m in ms] == [f"m{i}".encode() for i in range(5)]
    assert [m.flag for m in ms] == [0, 1, 2, 3, 4]
    assert ms[2].properties == {"TAGS": "t0", "KEYS": "k2", "WAIT": "true"}
    assert [m.commit_log_offset for m in ms] == r.physical_offsets
    # tag filtering works on batch entries too
    odd = store.get_message("G", "T", 1, 0, 32, {tags_hash("t1")})
    assert [m.queue_offset for m in records(odd)] == [2, 4]
    with pytest.raises(MessageIllegalError):
        store.put_messages(BatchInner(topic="T", body=b"\x00\x00\x00\x05junk"))


def test_tag_hash_is_java_string_hashcode():
    assert tags_hash(None) == 0 and tags_hash("") == 0
    assert tags_hash("a") == 97
    assert tags_hash("hello") == 99162322
    assert tags_hash("TagA") == 2598919
    assert tags_hash("Hello World") == -862545276  # overflows to a negative int
    assert tags_hash("\u00e9\U0001f600") == ((0xE9 * 31 + 0xD83D) * 31 + 0xDE00)


def test_tag_filter(store):
    for i in range(10):
        store.put_message(msg(tags="A" if i % 3 == 0 else "B"))
    got = store.get_message("G", "T", 0, 0, 32, {tags_hash("A")})
    assert got.status is GetStatus.FOUND
    assert [m.queue_offset for m in records(got)] == [0, 3, 6, 9]
    assert got.next_begin_offset == 10
    assert all(m.properties["TAGS"] == "A" for m in records(got))
    none = store.get_message("G", "T", 0, 0, 32, {tags_hash("C")})
    assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 10
    assert not none.buffers


def test_get_message_statuses(tmp_path):
    config = small_config(tmp_path, consume_queue_entries_per_file=4)
    store = MessageStore.open(config)
    # unknown queue
    r = store.get_message("G", "T", 0, 5)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
    for _ in range(10):
        store.put_message(msg())
    r = store.get_message("G", "T", 0, 10)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 10)
    r = store.get_message("G", "T", 0, 15)
    # 4.9.8 (apache/rocketmq#4215): the max offset, also while the queue starts at 0
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 10)
    # a pull stays within one consume-queue file (getIndexBuffer)
    r = store.get_message("G", "T", 0, 1, 32)
    assert r.status is GetStatus.FOUND and r.next_begin_offset == 4 and len(r.buffers) == 3
    r = store.get_message("G", "T", 0, 0, 2)
    assert r.next_begin_offset == 2 and len(r.buffers) == 2
    # OFFSET_TOO_SMALL / OFFSET_OVERFLOW_BADLY with a non-zero minimum
    cq = store.queues.find("T", 0)
    cq.min_logic_offset = 4 * 20
    r = store.get_message("G", "T", 0, 1)
    assert (r.status, r.next_begin_offset, r.min_offset) == (GetStatus.OFFSET_TOO_SMALL, 4, 4)
    r = store.get_message("G", "T", 0, 99)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 10)
    # OFFSET_FOUND_NULL: the entry's file is gone although the offsets say otherwise
    cq.files.delete_first(1)
    cq.min_logic_offset = 0
    r = store.get_message("G", "T", 0, 1)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_FOUND_NULL, 4)
    store.shutdown()


def test_message_was_removing(tmp_path):
    config = small_config(tmp_path)
    store = MessageStore.open(config)
    for _ in range(200):
        store.put_message(msg(body=b"z" * 1000))
    assert len(store.commit_log.files) >= 3
    # delete the oldest segment under the queue's feet
    store.commit_log.files.delete_first(1)
    first_kept = next(
        i for i in range(200) if store.get_commit_log_offset("T", 0, i) >= store.min_phy_offset
    )
    assert first_kept > 50
    # the whole consume-queue file (50 entries) points into the deleted segment
    r = store.get_message("G", "T", 0, 0, 8)
    assert r.status is GetStatus.MESSAGE_WAS_REMOVING and r.next_begin_offset == 50
    assert not r.buffers
    # the next pull skips the rest of the deleted segment and finds the survivors
    r = store.get_message("G", "T", 0, 50, 8)
    assert r.status is GetStatus.FOUND and r.queue_offsets[0] == first_kept
    store.shutdown()


def test_transfer_limits(tmp_path):
    store = MessageStore.open(small_config(tmp_path, max_transfer_bytes=3000, max_transfer_count=32))
    for _ in range(10):
        store.put_message(msg(body=b"q" * 1000))
    r = store.get_message("G", "T", 0, 0, 32)
    assert len(r.buffers) == 2 and r.next_begin_offset == 2 and r.buffer_total_size <= 3000
    store.shutdown()


def test_prepared_transaction_not_in_queue(store):
    r = store.put_message(msg(sys_flag=TRANSACTION_PREPARED_TYPE))
    assert r.queue_offset == 0 and store.get_max_offset("T", 0) == 0
    assert store.look_message_by_offset(r.physical_offset).sys_flag == TRANSACTION_PREPARED_TYPE
    assert store.put_message(msg()).queue_offset == 0


def test_look_and_select_by_offset(store):
    store.put_message(msg(body=b"first"))
    r = store.put_message(msg(body=b"second"))
    m = store.look_message_by_offset(r.physical_offset)
    assert m.body == b"second" and m.msg_id == r.msg_id
    raw = store.select_one_message_by_offset(r.physical_offset)
    assert decode_record(raw)[0].body == b"second"
    assert store.look_message_by_offset(r.physical_offset + 1) is None
    assert store.look_message_by_offset(10**9) is None


def test_offset_by_time(store, monkeypatch):
    import trocket.broker.store.commit_log as cl

    clock = iter(range(1000, 100000, 10))
    monkeypatch.setattr(cl.time, "time_ns", lambda: next(clock) * 1_000_000)
    for _ in range(20):
        store.put_message(msg())
    # store timestamps are 1000, 1010, ..., 1190
    assert store.get_message_store_timestamp("T", 0, 3) == 1030
    assert store.get_offset_by_time("T", 0, 1050) == 5
    assert store.get_offset_by_time("T", 0, 1052) == 5  # nearer to 1050
    assert store.get_offset_by_time("T", 0, 1058) == 6  # nearer to 1060
    assert store.get_offset_by_time("T", 0, 0) == 0
    assert store.get_offset_by_time("T", 0, 10**7) == 19
    assert store.get_earliest_message_time("T", 0) == 1000


def test_listeners_all_topics_or_one_and_removed_by_equality(store):
    """A listener hears every dispatched message, or with a topic only that topic's; a
    bound method is removed by the one given again (a new object on every read)."""

    class Ear:
        def __init__(self) -> None:
            self.heard: list[tuple[str, int, int]] = []

        def on(self, topic, queue_id, queue_offset, tag, store_ts) -> None:
            self.heard.append((topic, queue_id, queue_offset))

    every, only_b = Ear(), Ear()
    store.add_listener(every.on)
    store.add_listener(only_b.on, "B")
    store.put_message(msg("A"))
    store.put_message(msg("B", queue_id=1))
    assert every.heard == [("A", 0, 0), ("B", 1, 0)]
    assert only_b.heard == [("B", 1, 0)]
    store.remove_listener(every.on)
    store.remove_listener(only_b.on)
    store.put_message(msg("B", queue_id=1))
    assert len(every.heard) == 2 and len(only_b.heard) == 1


def test_a_wake_up_is_called_by_the_next_dispatch_only_and_can_be_cancelled(store):
    """``wake_once``: the next dispatched record calls it (after its consume-queue entry
    is written), the records after it do not; one cancelled before any dispatch is never
    called; a failing one does not break the put."""
    dispatcher = store.dispatcher
    calls: list[int] = []
    dispatcher.wake_once(lambda: calls.append(store.get_max_offset("W", 0)))
    store.put_message(msg("W"))
    store.put_message(msg("W"))
    assert calls == [1]

    def cancelled() -> None:
        calls.append(-1)

    def failing() -> None:
        raise RuntimeError("a broken waiter")

    dispatcher.wake_once(cancelled)
    dispatcher.wake_once(failing)
    dispatcher.cancel_wake(cancelled)
    store.put_message(msg("W"))
    store.put_message(msg("W"))
    assert calls == [1]
    assert store.get_max_offset("W", 0) == 4
