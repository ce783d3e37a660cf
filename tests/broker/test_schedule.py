"""Delayed messages (broker/schedule.py): SCHEDULE_TOPIC_XXXX, delay levels, delivery to
the real topic, delayOffset.json across restarts and crashes, send-back's retry delay.

The brokers here run a short delay table ("200ms 500ms 1s", a trocket extension: Java
takes s/m/h/d only) so that level 3 -- a first send-back's level -- is one second, on
a MockClock (conftest's ``logical_clock``): the schedule service reads a
:class:`~trocket.broker.schedule.TrioEpochClock` (see conftest), so a test asserts the
logical time a message is delivered at -- exactly its deliver time -- without waiting."""

from __future__ import annotations

import json
import os

import pytest
import trio

from trocket.broker.config import BrokerConfig, BrokerConfigError, load_properties_file
from trocket.broker.config import DEFAULT_MESSAGE_DELAY_LEVEL, DelayLevelError, parse_delay_levels
from trocket.broker.pre_put import pre_put_map
from trocket.broker.schedule import (
    ScheduleMessageService,
    TrioEpochClock,
    delivered_properties,
    schedule_properties,
)
from trocket.broker.store import ConfigLoadError, MessageInner, MessageStore, StoreConfig
from trocket.broker.store.config import DEFAULT_DELAY_LEVELS_MS
from trocket.codecs.bodies.fastjson import loads
from trocket.codecs.command import RemotingCommand
from trocket.codecs.java_hashmap import JavaHashMap
from trocket.codecs.message.batch import encode_batch
from trocket.codecs.message.message import Message
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.message.properties import encode_properties_bytes
from trocket.codecs.message.record import decode_record, decode_records

from ..waiting import wait_until

SCHEDULE = "SCHEDULE_TOPIC_XXXX"
TABLE = "200ms 500ms 1s"
DELAYS = (200, 500, 1000)


def _records(body: bytes):
    return decode_records(body)


def _raw_records(body: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(body):
        _, end = decode_record(body, pos)
        out.append(body[pos:end])
        pos = end
    return out


def schedule_queue(broker, level: int):
    """(entries, decoded records) of the schedule queue of ``level``."""
    store = broker.store if hasattr(broker, "store") else broker
    qid = level - 1
    n = store.get_max_offset(SCHEDULE, qid)
    entries = [store.get_queue_entry(SCHEDULE, qid, i) for i in range(n)]
    msgs = []
    for phys, size, _tag in entries:
        msgs.append(decode_record(store.commit_log.get_message(phys, size))[0])
    return entries, msgs


async def pull_now(c, addr, wire, topic, queue_id=0, offset=0):
    """A pull that does not wait (no suspend flag): the records found, maybe none."""
    r = await c.invoke_sync(addr, wire.pull(topic, queue_id, offset, sys_flag=4))
    return r, (_records(r.body) if r.code == 0 else [])


async def pull_wait(c, addr, wire, topic, queue_id=0, offset=0, *, within: float = 5.0):
    """Long-poll until something arrives at ``offset`` (fails after ``within`` s)."""
    with trio.fail_after(within):
        while True:
            r = await c.invoke_sync(
                addr, wire.pull(topic, queue_id, offset, sys_flag=6, suspend_ms=int(within * 1000)), within + 2
            )
            if r.code == 0:
                return r, _records(r.body)
            # 19 after the suspend; anything else comes at once and would spin
            assert r.code == 19, (r.code, r.remark)


async def sleep_until_ms(clock, at_ms: int) -> None:
    """Sleep until the schedule service's ``clock`` reads ``at_ms`` (it never lags the
    wall clock, so one sleep may fall short by the real ms the test took)."""
    with trio.fail_after(60):
        while clock() < at_ms:
            await trio.sleep((at_ms - clock()) / 1000)
    assert clock() == at_ms


async def not_before_due(c, addr, wire, broker, topic, queue_id, offset, due_ms):
    """Nothing at ``offset`` 1 ms before ``due_ms``; then it arrives exactly at ``due_ms``
    (by the service's clock). The records that came."""
    clock = broker.schedule.clock
    await sleep_until_ms(clock, due_ms - 1)
    resp, msgs = await pull_now(c, addr, wire, topic, queue_id, offset)
    assert msgs == [], (resp.code, resp.remark)
    _, msgs = await pull_wait(c, addr, wire, topic, queue_id, offset)
    assert clock() == due_ms
    return msgs


def retry_send(wire, topic: str, body: bytes, props: str, reconsume_times: int) -> RemotingCommand:
    req = wire.send_v1(topic, body, properties=props)
    req.custom_header.reconsumeTimes = reconsume_times
    return req


def send_back(offset: int, group: str, delay_level: int = 0, **extra) -> RemotingCommand:
    ext = {"offset": str(offset), "group": group, "delayLevel": str(delay_level), **{k: str(v) for k, v in extra.items()}}
    # as a 4.9.8 client: its maxReconsumeTimes counts (Java reads it from version 3.4.9 on)
    return RemotingCommand.request(36, ext_fields=ext, version=409)


# -- the table ------------------------------------------------------------------------------


def test_parse_delay_levels():
    assert parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL) == DEFAULT_DELAY_LEVELS_MS
    assert len(DEFAULT_DELAY_LEVELS_MS) == 18 and DEFAULT_DELAY_LEVELS_MS[2] == 10_000
    assert parse_delay_levels("100ms 2s 3m 1h 2d") == (100, 2000, 180_000, 3_600_000, 172_800_000)
    assert parse_delay_levels("  1s   0s\t5s ") == (1000, 0, 5000)
    for bad in ("", "   ", "1x", "1.5s", "-1s", "s", "5", "1s,2s", "1S"):
        with pytest.raises(DelayLevelError):
            parse_delay_levels(bad)
    with pytest.raises(DelayLevelError, match=r"level 2 '7q'"):
        parse_delay_levels("1s 7q")


def test_broker_conf_message_delay_level(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("messageDelayLevel = 1s 2s 3s\nflushDelayOffsetInterval=2000\n")
    cfg = load_properties_file(conf)
    assert cfg.message_delay_level == "1s 2s 3s" and cfg.flush_delay_offset_interval_ms == 2000
    assert cfg.store_config().delay_levels_ms == (1000, 2000, 3000)
    conf.write_text("brokerName=b\nmessageDelayLevel=1s 2x\n")
    with pytest.raises(BrokerConfigError, match=r"broker.conf.*messageDelayLevel level 2 '2x'"):
        load_properties_file(conf)


def test_schedule_properties_as_javas_delay_branch():
    """A delayed single send's properties at each step, as Java 4.9.8 made them of the
    same string (a Java program: string2messageProperties, CLUSTER put, WAIT removed and
    put back, REAL_TOPIC and REAL_QID put, messageProperties2String; on delivery read
    and written again): the schedule record keeps WAIT, the delivered copy loses DELAY,
    REAL_TOPIC and REAL_QID (trocket's deliberate difference)."""
    sent = "KEYS\x01k1\x02TAGS\x01TagA\x02UNIQ_KEY\x01" + "0A0B0C0D" * 4 + "\x02DELAY\x012\x02custom\x01v\u00e9\x02WAIT\x01true\x02"
    held = schedule_properties(pre_put_map(sent, "DefaultCluster"), None, "DT", 1)
    java_held = ("REAL_TOPIC\x01DT\x02KEYS\x01k1\x02custom\x01v\u00e9\x02UNIQ_KEY\x01" + "0A0B0C0D" * 4
                 + "\x02CLUSTER\x01DefaultCluster\x02DELAY\x012\x02WAIT\x01true\x02TAGS\x01TagA\x02REAL_QID\x011")
    assert held.to_properties() == java_held
    assert delivered_properties(java_held.encode()) == (
        "KEYS\x01k1\x02custom\x01v\u00e9\x02UNIQ_KEY\x01" + "0A0B0C0D" * 4
        + "\x02CLUSTER\x01DefaultCluster\x02WAIT\x01true\x02TAGS\x01TagA").encode()
    # a clamped level is put again; REAL_* already there (delayed before) keep their place
    again = schedule_properties(JavaHashMap.from_properties("REAL_TOPIC\x01old\x02DELAY\x0199\x02REAL_QID\x019\x02a\x01b"),
                                18, "new", 0)
    assert dict(again) == {"REAL_TOPIC": "new", "DELAY": "18", "REAL_QID": "0", "a": "b"}
    assert delivered_properties(again.to_properties().encode()) == b"a\x01b"
    assert delivered_properties(b"") == b""
    # bytes that are not UTF-8 keep their bytes, the three left out
    assert delivered_properties(b"x\x01\xff\x02DELAY\x011\x02REAL_QID\x010") == b"x\x01\xff"


# -- the put path and delivery -------------------------------------------------------------


async def test_delayed_send_is_held_then_delivered_unchanged(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path, message_delay_level=TABLE) as broker, wire.client() as c:
        addr = broker.broker_addr
        props = wire.props(tags="TagA", keys="k1", UNIQ_KEY="0A0B0C0D" * 4, DELAY="2", custom="v\u00e9")
        r = await c.invoke_sync(addr, wire.send_v1("DT", b"later", queue_id=1, properties=props))
        assert r.code == 0, r.remark
        # Java answers the requested queue, and the schedule record's id and queue offset
        assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("1", "0")
        (entry,), (held,) = schedule_queue(broker, 2)
        assert decode_offset_msg_id(r.ext_fields["msgId"]).offset == held.commit_log_offset == entry[0]
        assert (held.topic, held.queue_id) == (SCHEDULE, 1)
        assert (held.properties["REAL_TOPIC"], held.properties["REAL_QID"], held.properties["DELAY"]) == ("DT", "1", "2")
        assert entry[2] == held.store_timestamp + 500  # tags code = deliver time

        resp, msgs = await pull_now(c, addr, wire, "DT", 1)
        assert resp.code != 0 and msgs == []
        await not_before_due(c, addr, wire, broker, "DT", 1, 0, entry[2])
        resp, msgs = await pull_now(c, addr, wire, "DT", 1)
        (m,) = msgs
        assert (m.topic, m.queue_id, m.queue_offset, m.body) == ("DT", 1, 0, b"later")
        assert m.commit_log_offset > held.commit_log_offset and m.msg_id != held.msg_id
        assert (m.born_timestamp, m.flag, m.reconsume_times, m.sys_flag) == (
            held.born_timestamp, held.flag, held.reconsume_times, held.sys_flag)
        assert "DELAY" not in m.properties and "REAL_TOPIC" not in m.properties and "REAL_QID" not in m.properties
        # the properties string as Java 4.9.8 delivers it (CLUSTER put, WAIT kept, HashMap
        # order; test_schedule_properties_as_javas_delay_branch) minus DELAY, REAL_TOPIC, REAL_QID
        want = ("KEYS\x01k1\x02custom\x01v\u00e9\x02UNIQ_KEY\x01" + "0A0B0C0D" * 4
                + "\x02CLUSTER\x01DefaultCluster\x02WAIT\x01true\x02TAGS\x01TagA").encode()
        assert props == wire.props(tags="TagA", keys="k1", UNIQ_KEY="0A0B0C0D" * 4, DELAY="2", custom="v\u00e9")
        (record,) = _raw_records(resp.body)
        assert record.endswith(len(want).to_bytes(2, "big") + want)
        assert m.tags == "TagA" and m.properties["custom"] == "v\u00e9"
        # tag filtering works on the delivered copy (tags code = TAGS hash again)
        r2 = await c.invoke_sync(addr, wire.pull("DT", 1, subscription="TagB", sys_flag=4))
        assert r2.code != 0 or _records(r2.body) == []


async def test_v2_send_and_compressed_body(tmp_path, wire, logical_clock):
    import zlib

    async with wire.running_broker(tmp_path, message_delay_level=TABLE) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v2("DV2", b"v2", properties="TAGS\x01a\x02DELAY\x011"))
        assert r.code == 0, r.remark
        body = zlib.compress(b"z" * 9000, 5)
        r = await c.invoke_sync(addr, wire.send_v1("DV2", body, sys_flag=1, properties=wire.props(DELAY="1")))
        assert r.code == 0, r.remark
        await wait_until(lambda: broker.store.get_max_offset("DV2", 0) >= 2, 5, interval=0.05)
        _, msgs = await pull_now(c, addr, wire, "DV2")
        assert [m.body for m in msgs] == [b"v2", b"z" * 9000]
        assert msgs[0].properties == {"TAGS": "a", "CLUSTER": "DefaultCluster"} and msgs[1].sys_flag & 1


async def test_order_within_a_level_and_levels_independent(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path, message_delay_level=TABLE) as broker, wire.client() as c:
        addr = broker.broker_addr
        for i in range(5):
            r = await c.invoke_sync(addr, wire.send_v1("OT", f"a{i}".encode(), properties=wire.props(DELAY="3")))
            assert r.code == 0
        r = await c.invoke_sync(addr, wire.send_v1("OT", b"b", properties=wire.props(DELAY="1")))
        assert r.code == 0
        for i in range(5, 8):
            r = await c.invoke_sync(addr, wire.send_v1("OT", f"a{i}".encode(), properties=wire.props(DELAY="3")))
            assert r.code == 0
        (b_entry,), _ = schedule_queue(broker, 1)
        msgs = await not_before_due(c, addr, wire, broker, "OT", 0, 0, b_entry[2])
        assert [m.body for m in msgs] == [b"b"]  # level 1 (200 ms) overtakes level 3 (1 s)
        a_entries, _ = schedule_queue(broker, 3)
        msgs = await not_before_due(c, addr, wire, broker, "OT", 0, 1, a_entries[0][2])
        assert msgs[0].body == b"a0"
        # each of the others when its own time comes (they were sent apart in time)
        offset = 2
        while offset < 9:
            _, got = await pull_wait(c, addr, wire, "OT", offset=offset)
            offset += len(got)
        assert broker.schedule.clock() == a_entries[-1][2]
        _, msgs = await pull_now(c, addr, wire, "OT")
        assert [m.body for m in msgs] == [b"b"] + [f"a{i}".encode() for i in range(8)]
        assert [m.queue_offset for m in msgs] == list(range(9))
        assert broker.schedule.offset_table() == {1: 1, 2: 0, 3: 8}
        # no polling: an idle level read its queue once at start and once per wake-up
        levels = broker.schedule.levels
        passes = {n: st.passes for n, st in levels.items()}
        await trio.sleep(5)  # logical time: five idle seconds are what this checks
        assert {n: st.passes for n, st in levels.items()} == passes
        assert passes[2] == 1 and passes[1] <= 4 and passes[3] <= 12, passes


async def test_levels_beyond_the_last_are_clamped_and_non_levels_ignored(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path, message_delay_level=TABLE) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v1("CT", b"far", properties=wire.props(DELAY="99")))
        assert r.code == 0
        (far,), (held,) = schedule_queue(broker, 3)
        assert held.properties["DELAY"] == "3" and far[2] == held.store_timestamp + 1000
        # no level, 0, negative, not a number: stored on the topic at once
        for i, level in enumerate(("0", "-1", "abc")):
            r = await c.invoke_sync(addr, wire.send_v1("CT", f"now{i}".encode(), properties=wire.props(DELAY=level)))
            assert r.code == 0 and r.ext_fields["queueOffset"] == str(i)
        _, msgs = await pull_now(c, addr, wire, "CT")
        assert [m.body for m in msgs] == [b"now0", b"now1", b"now2"]
        msgs = await not_before_due(c, addr, wire, broker, "CT", 0, 3, far[2])
        assert [m.body for m in msgs] == [b"far"]


async def test_batch_with_delay_refused_and_schedule_topic_not_sendable(tmp_path, wire):
    async with wire.running_broker(tmp_path, message_delay_level=TABLE) as broker, wire.client() as c:
        addr = broker.broker_addr
        batch = encode_batch([Message("BD", b"x", 0, {"WAIT": "true"})])
        r = await c.invoke_sync(addr, wire.send_v2("BD", batch, code=320, properties="DELAY\x012"))
        assert r.code == 13 and "the message is illegal" in r.remark  # MESSAGE_ILLEGAL
        r = await c.invoke_sync(addr, wire.send_v2("BD", batch, code=320, properties="DELAY\x010"))
        assert r.code == 0
        r = await c.invoke_sync(addr, wire.send_v1(SCHEDULE, b"x", properties=wire.props()))
        assert r.code == 16 and r.remark == f"Sending message to topic[{SCHEDULE}] is forbidden."
        assert broker.topics.select(SCHEDULE).read_queue_nums == 18


async def test_prepared_transaction_not_delayed(tmp_path):
    store = MessageStore.open(StoreConfig(store_dir=tmp_path / "s", commit_log_segment_size=1 << 20))
    try:
        svc = ScheduleMessageService(store)
        msg = MessageInner(topic="T", body=b"x", properties={"DELAY": "1"}, sys_flag=0x4)
        assert svc.rewrite(msg) is msg
        committed = MessageInner(topic="T", body=b"x", properties={"DELAY": "1"}, sys_flag=0x8)
        assert svc.rewrite(committed).topic == SCHEDULE
    finally:
        store.shutdown()


async def test_runtime_info_has_schedule_offsets(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path, message_delay_level=TABLE) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v1("RT", b"x", properties=wire.props(DELAY="1")))
        assert r.code == 0
        await pull_wait(c, addr, wire, "RT")
        table = loads((await c.invoke_sync(addr, RemotingCommand.request(28))).body)["table"]
        assert table["scheduleMessageOffset_1"] == "1,1" and table["scheduleMessageOffset_3"] == "0,0"


# -- restarts and crashes -----------------------------------------------------------------------


async def test_restart_keeps_pending_delayed_messages(tmp_path, wire, logical_clock):
    # level 3 is 5 s here: far past what the clean shutdown and the restart take
    # on the logical clock (it jumps while the store's files are closed and opened in
    # worker threads)
    table = "200ms 500ms 5s"
    async with wire.running_broker(tmp_path, message_delay_level=table) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v1("RS", b"early", properties=wire.props(DELAY="1")))
        assert r.code == 0
        await pull_wait(c, addr, wire, "RS")
        for i in range(3):
            r = await c.invoke_sync(addr, wire.send_v1("RS", f"late{i}".encode(), properties=wire.props(DELAY="3")))
            assert r.code == 0
        late, _ = schedule_queue(broker, 3)
        assert [e[2] - m.store_timestamp for e, m in zip(late, _)] == [5_000] * 3
    offsets = json.loads((tmp_path / "store" / "config" / "delayOffset.json").read_text())
    assert offsets == {"offsetTable": {"1": 1, "2": 0, "3": 0}}
    # restarted before the late ones were due; they come once, the early one is not repeated
    async with wire.running_broker(tmp_path, message_delay_level=table) as broker, wire.client() as c:
        addr = broker.broker_addr
        clock = broker.schedule.clock
        assert clock() < late[0][2] - 1, late[0][2] - clock()
        # (the level tasks' first pass read the real clock, before conftest swapped in
        # the trio one: they may come a few real ms late, never early)
        await sleep_until_ms(clock, late[0][2] - 1)
        _, msgs = await pull_now(c, addr, wire, "RS")
        assert [m.body for m in msgs] == [b"early"]
        with trio.fail_after(120):
            while broker.store.get_max_offset("RS", 0) < 4:
                await pull_wait(c, addr, wire, "RS", offset=broker.store.get_max_offset("RS", 0), within=60)
        assert clock() >= late[-1][2]
        _, msgs = await pull_now(c, addr, wire, "RS")
        assert [m.body for m in msgs] == [b"early", b"late0", b"late1", b"late2"]
    offsets = json.loads((tmp_path / "store" / "config" / "delayOffset.json").read_text())
    assert offsets == {"offsetTable": {"1": 1, "2": 0, "3": 3}}


async def test_fastjson_offsets_file_and_out_of_range_offsets(tmp_path, wire, logical_clock):
    path = tmp_path / "store" / "config" / "delayOffset.json"
    os.makedirs(path.parent)
    path.write_text('{"offsetTable":{1:7,3:-2}}')  # Java's fastjson output, offsets past the queues
    async with wire.running_broker(tmp_path, message_delay_level=TABLE) as broker, wire.client() as c:
        assert broker.schedule.offset_table() == {1: 0, 2: 0, 3: 0}
        r = await c.invoke_sync(broker.broker_addr, wire.send_v1("FJ", b"x", properties=wire.props(DELAY="1")))
        assert r.code == 0
        await pull_wait(c, broker.broker_addr, wire, "FJ")
    assert json.loads(path.read_text()) == {"offsetTable": {"1": 1, "2": 0, "3": 0}}
    path.write_text("{not json")
    store = MessageStore.open(wire.broker_config(tmp_path).store_config())
    try:
        with pytest.raises(ConfigLoadError, match="delayOffset.json"):
            ScheduleMessageService(store)
    finally:
        store.shutdown()


async def test_crash_redelivers_at_least_once_and_recovery_recomputes_deliver_times(tmp_path, logical_clock):
    cfg = StoreConfig(store_dir=tmp_path / "s", commit_log_segment_size=1 << 20, delay_levels_ms=DELAYS)
    store = MessageStore.open(cfg)

    conf = BrokerConfig(message_delay_level=TABLE, flush_delay_offset_interval_ms=60_000)
    svc = ScheduleMessageService(store, conf, clock=TrioEpochClock())
    props = {"TAGS": "t", "DELAY": "1"}
    for i in range(3):
        held = svc.rewrite(MessageInner(topic="CR", body=b"%d" % i, properties=props,
                                        properties_bytes=encode_properties_bytes(props)))
        store.put_message(held)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        await wait_until(lambda: store.get_max_offset("CR", 0) >= 3, 5, interval=0.02)
        nursery.cancel_scope.cancel()
    assert svc.offset_table() == {1: 3, 2: 0, 3: 0}
    # nothing flushed, nothing written: a crash now must deliver them again
    assert not os.path.exists(svc.path)
    store.abandon()
    # and the consume queue of the schedule topic is rebuilt from the commit log
    import shutil

    shutil.rmtree(os.path.join(cfg.consume_queue_dir, SCHEDULE))
    store = MessageStore.open(cfg)
    try:
        entries, msgs = schedule_queue(store, 1)
        assert [e[2] for e in entries] == [m.store_timestamp + 200 for m in msgs]
        svc = ScheduleMessageService(store, conf, clock=TrioEpochClock())
        assert svc.offset_table() == {1: 0, 2: 0, 3: 0}
        async with trio.open_nursery() as nursery:
            await nursery.start(svc.run)
            await wait_until(lambda: store.get_max_offset("CR", 0) >= 6, 5, interval=0.02)
            nursery.cancel_scope.cancel()
        got = store.get_message("G", "CR", 0, 0, 32)
        assert [decode_record(b)[0].body for b in got.buffers] == [b"0", b"1", b"2"] * 2  # at least once
        # the periodic write records only what the commit log has flushed
        assert svc.offset_table(durable_only=True)[1] <= 3
        store.flush_service.flush_all_sync()
        assert svc.offset_table(durable_only=True) == {1: 3, 2: 0, 3: 0}
    finally:
        store.shutdown()


# -- send-back: %RETRY% after the level's delay, %DLQ% at once ----------------------------------


async def test_send_back_retry_waits_for_level_3_and_dlq_is_immediate(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path, message_delay_level=TABLE) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v1("SB", b"work", properties=wire.props(tags="T1", keys="k")))
        assert r.code == 0
        origin = r.ext_fields["msgId"]
        phys = decode_offset_msg_id(origin).offset
        r = await c.invoke_sync(addr, send_back(phys, "G", 0))
        assert r.code == 0, r.remark
        # level 3 + reconsumeTimes 0 = 3: on the schedule topic, not on %RETRY%G yet
        (entry,), (held,) = schedule_queue(broker, 3)
        assert (held.properties["REAL_TOPIC"], held.properties["REAL_QID"], held.properties["DELAY"]) == (
            "%RETRY%G", "0", "3")
        assert entry[2] == held.store_timestamp + 1000
        (m,) = await not_before_due(c, addr, wire, broker, "%RETRY%G", 0, 0, entry[2])
        assert (m.body, m.reconsume_times, m.topic) == (b"work", 1, "%RETRY%G")
        assert (m.properties["RETRY_TOPIC"], m.properties["ORIGIN_MESSAGE_ID"], m.tags) == ("SB", origin, "T1")
        assert not {"DELAY", "REAL_TOPIC", "REAL_QID"} & set(m.properties)
        # consumed from the retry queue and failed again: level 3 + 1 = 4 > 3, clamped to 3
        r = await c.invoke_sync(addr, send_back(m.commit_log_offset, "G", 0))
        assert r.code == 0
        _e, held = schedule_queue(broker, 3)
        assert held[-1].properties["DELAY"] == "3" and held[-1].reconsume_times == 2
        _, msgs = await pull_wait(c, addr, wire, "%RETRY%G", offset=1)
        m2 = msgs[0]
        assert m2.reconsume_times == 2 and m2.properties["ORIGIN_MESSAGE_ID"] == origin
        # max reconsume times reached: the dead-letter copy is stored at once, never delayed
        r = await c.invoke_sync(addr, send_back(m2.commit_log_offset, "G", 0, maxReconsumeTimes=2))
        assert r.code == 0
        _, dlq = await pull_now(c, addr, wire, "%DLQ%G")
        assert [(d.body, d.reconsume_times) for d in dlq] == [(b"work", 3)]
        assert dlq[0].properties["DELAY"] == "0"
        # a negative level too
        r = await c.invoke_sync(addr, send_back(phys, "G", -1))
        assert r.code == 0
        _, dlq = await pull_now(c, addr, wire, "%DLQ%G")
        assert len(dlq) == 2
        assert broker.store.get_max_offset(SCHEDULE, 2) == 2


async def test_explicit_send_back_level_and_producer_retry_send(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path, message_delay_level=TABLE) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v1("SL", b"w", properties=wire.props()))
        phys = decode_offset_msg_id(r.ext_fields["msgId"]).offset
        r = await c.invoke_sync(addr, send_back(phys, "G2", 1))  # the consumer's own level: 200 ms
        assert r.code == 0
        assert schedule_queue(broker, 1)[1][0].properties["REAL_TOPIC"] == "%RETRY%G2"
        _, msgs = await pull_wait(c, addr, wire, "%RETRY%G2")
        assert msgs[0].body == b"w"
        # a client whose send-back failed sends the copy itself to %RETRY%<group> with DELAY
        p = wire.props(DELAY="2", RETRY_TOPIC="SL")
        r = await c.invoke_sync(addr, retry_send(wire, "%RETRY%G2", b"again", p, 1))
        assert r.code == 0, r.remark
        assert schedule_queue(broker, 2)[1][0].properties["REAL_TOPIC"] == "%RETRY%G2"
        _, msgs = await pull_wait(c, addr, wire, "%RETRY%G2", offset=1)
        assert msgs[0].body == b"again" and msgs[0].reconsume_times == 1
        # ... but past maxReconsumeTimes such a send goes to the DLQ at once (Java: level 0)
        r = await c.invoke_sync(addr, retry_send(wire, "%RETRY%G2", b"dead", p, 17))
        assert r.code == 0
        _, dlq = await pull_now(c, addr, wire, "%DLQ%G2")
        assert [d.body for d in dlq] == [b"dead"]
        # the limit itself is past it (Java's reconsumeTimes >= maxReconsumeTimes; 16 here,
        # the group's retryMaxTimes): what an orderly consumer's checkReconsumeTimes sends
        r = await c.invoke_sync(addr, retry_send(wire, "%RETRY%G2", b"dead16", p, 16))
        assert r.code == 0
        _, dlq = await pull_now(c, addr, wire, "%DLQ%G2")
        assert [d.body for d in dlq] == [b"dead", b"dead16"]
