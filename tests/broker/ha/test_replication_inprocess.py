"""Replication between two controllers in one process (real TCP, real stores): the
fast checks of the send path's hand-off, the slave's append and refusal, the sync codes."""

from __future__ import annotations

import functools
import struct
from contextlib import asynccontextmanager, contextmanager

import pytest
import trio
import trio.testing

from trocket.broker.ha.protocol import HEADER, OFFSET
from trocket.codecs.bodies.route import TopicRouteData
from trocket.broker.store import TopicConfig
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.message.record import decode_records
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import decode_header
from trocket.codecs.headers import (
    DeleteTopicRequestHeader,
    GetRouteInfoRequestHeader,
    SendMessageResponseHeader,
)

from ...waiting import wait_until
from ..conftest import Wire, broker_config, client, running_broker

TOPIC = "HaTopic"


def cq_entries(store, topic, queue_id):
    out = []
    n = store.get_max_offset(topic, queue_id)
    for i in range(n):
        out.append(store.get_queue_entry(topic, queue_id, i))
    return out


async def test_sync_master_replicates_and_slave_refuses(tmp_path):
    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        ns = master.namesrv.address
        async with running_broker(
            tmp_path / "s", broker_role="SLAVE", namesrv_addrs=ns, slave_sync_interval_ms=200,
        ) as slave:
            assert slave.config.broker_id == 1
            await wait_until(lambda: master.ha.transfer.connections == 1)
            async with client() as c:
                props = Wire.props(tags="A")
                acks = []
                for i in range(50):
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"m%d" % i, queue_id=i % 4, properties=props))
                    assert r.code == ResponseCode.SUCCESS, r
                    acks.append(decode_header(SendMessageResponseHeader, r.ext_fields))
                # acknowledged = already on the slave
                end = master.store.max_phy_offset
                assert slave.store.max_phy_offset == end
                mv = master.store.commit_log.get_message(0, end)
                sv = slave.store.commit_log.get_message(0, end)
                assert bytes(mv) == bytes(sv)
                for q in range(4):
                    assert cq_entries(master.store, TOPIC, q) == cq_entries(slave.store, TOPIC, q)
                # the slave refuses sends with Java's code and remark
                r = await c.invoke_sync(slave.broker_addr, Wire.send_v2(TOPIC, b"x", properties=props))
                assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
                assert "messages are put to the slave" in r.remark
                # and serves pulls
                r = await c.invoke_sync(slave.broker_addr, Wire.pull(TOPIC, 0, 0, suspend_ms=0, sys_flag=4))
                assert r.code == ResponseCode.SUCCESS
                # the route shows both: the slave as broker id 1 of the same broker name
                await wait_until(lambda: slave.topics.select(TOPIC) is not None)
                await slave.register_broker_all()
                want = [{0: master.broker_addr, 1: slave.broker_addr}]

                async def routed_to_both() -> bool:
                    route = await c.invoke_sync(ns, RemotingCommand.request(
                        RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=TOPIC)))
                    return route.code == ResponseCode.SUCCESS and [
                        bd.broker_addrs for bd in TopicRouteData.from_body(route.body).broker_datas
                    ] == want

                await wait_until(routed_to_both, 10, interval=0.02)  # the master registers a new topic within ~50 ms
                # topic config and offsets synced
                r = await c.invoke_sync(master.broker_addr, Wire.pull(TOPIC, 1, 0, group="G1", commit_offset=3, sys_flag=5, suspend_ms=0))
                master.offsets.commit_offset("G1", TOPIC, 1, 7)
                await wait_until(lambda: slave.offsets.query_offset("G1", TOPIC, 1) == 7)
                await wait_until(lambda: slave.topics.select(TOPIC) is not None)
                # delay offsets: a level-1 (1 s) message delivered on the master; the slave's
                # schedule never delivers, it copies the master's offsets
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"later", properties=Wire.props(DELAY="1")))
                assert r.code == ResponseCode.SUCCESS
                await wait_until(lambda: master.schedule.offset_table().get(1) == 1)
                await wait_until(lambda: slave.schedule.offset_table().get(1) == 1)
                assert slave.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 0) == 1


async def test_the_sends_of_a_read_go_to_the_slave_when_the_read_is_handled(tmp_path):
    """A send stored inline by a connection's reader is shipped to the slave by that
    reader once its read is handled (remoting's call_after_read), not by a turn of the
    HA writer task: one chunk per read, the writer's chunks only for what else stores."""
    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        async with running_broker(tmp_path / "s", broker_role="SLAVE", namesrv_addrs=master.namesrv.address) as slave:
            await wait_until(lambda: master.ha.transfer.connections == 1)
            (conn,) = master.ha.server.slaves
            async with client() as c:
                props = Wire.props(tags="A")
                for i in range(20):
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"m%d" % i, queue_id=0, properties=props))
                    assert r.code == ResponseCode.SUCCESS, r
            assert slave.store.max_phy_offset == master.store.max_phy_offset
            # the first send creates the topic and is stored by a handler task (registration
            # first): the writer's; each later one is its own read, shipped by its reader
            assert conn.pushed_chunks >= 19
            assert conn.written_chunks <= 1


async def test_a_push_whose_write_fails_ends_that_connection_and_the_send_still_completes(tmp_path, caplog):
    """The reader's push meets a broken socket: that HA connection ends (logged), the
    slave reconnects from its real end, and the SYNC send waiting on it is answered
    SUCCESS once the new connection brings its message."""
    import logging

    from trocket.remoting.direct import DirectSocket

    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        async with running_broker(tmp_path / "s", broker_role="SLAVE", namesrv_addrs=master.namesrv.address) as slave:
            slave.ha.client.reconnect_delay = 0.1
            await wait_until(lambda: master.ha.transfer.connections == 1)
            (conn,) = master.ha.server.slaves

            class BrokenOnce(type(conn.sock)):  # its next write fails, as on a reset
                __slots__ = ()

                def send_nowait(self, *parts):
                    self.__class__ = DirectSocket
                    raise trio.BrokenResourceError("connection reset by peer")

            conn.sock.__class__ = BrokenOnce
            caplog.set_level(logging.INFO, logger="trocket.broker.ha")
            async with client() as c:
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"after", queue_id=0,
                                                                         properties=Wire.props(tags="A")))
                assert r.code == ResponseCode.SUCCESS, r
            assert slave.store.max_phy_offset == master.store.max_phy_offset
            assert slave.ha.client.connects == 2 and conn not in master.ha.server.slaves
            assert "writing to slave" in caplog.text and "connection reset by peer" in caplog.text


async def test_sync_master_counts_each_message_of_an_acknowledged_batch(tmp_path):
    """Answers completed by the slave's acknowledgement go out from the send template;
    GET_BROKER_RUNTIME_INFO's put counters still count a batch's messages, not its send."""
    from trocket.codecs.message.batch import encode_batch
    from trocket.codecs.message.message import Message

    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        async with running_broker(tmp_path / "s", broker_role="SLAVE", namesrv_addrs=master.namesrv.address):
            await wait_until(lambda: master.ha.transfer.connections == 1)
            async with client() as c:
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"one", properties=Wire.props(tags="A")))
                assert r.code == ResponseCode.SUCCESS, r
                batch = encode_batch([Message(TOPIC, b"b%d" % i, 0, {"TAGS": "B"}) for i in range(3)])
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, batch, code=320, batch=True))
                assert r.code == ResponseCode.SUCCESS, r
                assert r.ext_fields["msgId"].count(",") == 2  # the batch's three ids
                assert master.ha.transfer.completed == 2  # both answered by acknowledgements
                assert master.send_processor.put_messages == 4
                assert master.send_processor.put_bytes == master.store.max_phy_offset


async def test_sync_master_without_slave_fails_fast(tmp_path):
    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        async with client() as c:
            with trio.fail_after(2):
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"x", properties=Wire.props()))
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
            h = decode_header(SendMessageResponseHeader, r.ext_fields)
            assert h.msgId  # stored, answered with its header as Java's
    async with running_broker(tmp_path / "a") as master:
        async with client() as c:
            r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"x", properties=Wire.props()))
            assert r.code == ResponseCode.SUCCESS


async def _closed(s: trio.SocketStream) -> bytes:
    """What the master sent before it closed the connection."""
    data = b""
    with trio.fail_after(5):
        while chunk := await s.receive_some(65536):
            data += chunk
    await s.aclose()
    return data


async def test_bad_input_on_ha_port(tmp_path):
    """What is not a slave is closed at once and never waited for: an HTTP request or
    a TLS ClientHello (whose last 8 bytes could read as offset 0), junk that is not
    offsets within the log, an offset beyond the log (the one case told the master's
    end: a slave ahead of this master), an acknowledgement of bytes never sent."""
    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        port = master.ha.server.port
        async with client() as c:
            await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"x", properties=Wire.props()))
        end = master.store.max_phy_offset
        for preface in (
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 501,  # a ClientHello, zeros at its end
            OFFSET.pack(end) + OFFSET.pack(3),  # offsets going backwards
            OFFSET.pack(-1),
        ):
            s = await trio.open_tcp_stream("127.0.0.1", port)
            await s.send_all(preface)
            assert await _closed(s) == b""
            assert master.ha.transfer.connections == 0
        # an offset beyond the log: told where the master ends
        s = await trio.open_tcp_stream("127.0.0.1", port)
        await s.send_all(OFFSET.pack(end + 1))
        assert await _closed(s) == HEADER.pack(end, 0)
        # a good slave; an ack of bytes never sent closes it
        s1 = await trio.open_tcp_stream("127.0.0.1", port)
        await s1.send_all(OFFSET.pack(0))
        with trio.fail_after(5):
            got = await s1.receive_some(65536)
        off, size = HEADER.unpack_from(got)
        assert off == 0 and size == end
        await s1.send_all(OFFSET.pack(end + 100))
        await _closed(s1)
        assert master.ha.server.rejected == 6
        async with client() as c:  # still serving
            r = await c.invoke_sync(master.broker_addr, Wire.pull(TOPIC, 0, 0, suspend_ms=0, sys_flag=4))
            assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND)


async def test_an_impostor_never_evicts_the_slave_nor_is_waited_for(tmp_path):
    """A real slave follows a SYNC_MASTER; a connection that says nothing (or only
    junk) while it is there is not counted as a slave -- SYNC sends are answered once
    the real slave has their bytes, not after FLUSH_SLAVE_TIMEOUT -- and a second real
    slave is served beside the first (Java's master serves every slave), SYNC waiting
    for the one ahead."""
    async with running_broker(
        tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0), sync_flush_timeout_ms=60_000,
    ) as master:
        async with running_broker(
            tmp_path / "s", broker_role="SLAVE", ha_master_address=("127.0.0.1", master.ha.server.port),
            namesrv_addrs=[master.namesrv.address],
        ):
            await wait_until(lambda: master.ha.transfer.connections == 1)
            silent = await trio.open_tcp_stream("127.0.0.1", master.ha.server.port)
            await trio.testing.wait_all_tasks_blocked()
            assert master.ha.transfer.connections == 1  # the silent one is no slave
            async with client() as c:
                with trio.fail_after(10):  # well within the 60 s FLUSH_SLAVE_TIMEOUT
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"after", properties=Wire.props()))
                assert r.code == ResponseCode.SUCCESS
            async with running_broker(
                tmp_path / "s2", broker_role="SLAVE", ha_master_address=("127.0.0.1", master.ha.server.port),
                namesrv_addrs=[master.namesrv.address],
            ) as second:
                await wait_until(lambda: master.ha.transfer.connections == 2)
                async with client() as c:
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"two", properties=Wire.props()))
                    assert r.code == ResponseCode.SUCCESS
                await wait_until(lambda: second.store.max_phy_offset == master.store.max_phy_offset)
            await wait_until(lambda: master.ha.transfer.connections == 1)
            await silent.aclose()


async def test_ha_allowed_slaves_refuses_other_hosts(tmp_path):
    """``haAllowedSlaves`` (trocket's): a connection from another host is closed at once."""
    async with running_broker(
        tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0), ha_allowed_slaves="10.9.9.9",
    ) as master:
        s = await trio.open_tcp_stream("127.0.0.1", master.ha.server.port)
        await s.send_all(OFFSET.pack(0))
        assert await _closed(s) == b""
        assert master.ha.server.rejected == 1 and master.ha.transfer.connections == 0


async def _fake_slave(port: int, offset: int = 0) -> trio.SocketStream:
    """A slave that reports ``offset`` once and never acknowledges anything after."""
    s = await trio.open_tcp_stream("127.0.0.1", port)
    await s.send_all(OFFSET.pack(offset))
    return s


async def test_flush_slave_timeout_and_sync_flush_together(tmp_path):
    async with running_broker(
        tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0), flush="SYNC",
        sync_flush_timeout_ms=300,
    ) as master:
        silent = await _fake_slave(master.ha.server.port)
        try:
            await wait_until(lambda: master.ha.transfer.connections == 1)
            async with client() as c:
                t0 = trio.current_time()
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"x", properties=Wire.props()))
                waited = trio.current_time() - t0
                assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, r
                assert 0.25 <= waited < 3
                assert decode_header(SendMessageResponseHeader, r.ext_fields).msgId
                # WAIT=false: answered at once, neither flush nor slave awaited
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"y", properties=Wire.props(WAIT="false")))
                assert r.code == ResponseCode.SUCCESS
        finally:
            await silent.aclose()
        # a real slave: sync flush and replication both awaited, concurrently
        async with running_broker(
            tmp_path / "s", broker_role="SLAVE", ha_master_address=("127.0.0.1", master.ha.server.port),
            namesrv_addrs=master.namesrv.address,
        ) as slave:
            await wait_until(lambda: master.ha.transfer.connections == 1)
            async with client() as c:
                async def one(i):
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"z%d" % i, queue_id=i % 4, properties=Wire.props()))
                    assert r.code == ResponseCode.SUCCESS, r

                async with trio.open_nursery() as n:
                    for i in range(200):
                        n.start_soon(one, i)
            assert master.store.flushed_offset >= master.store.max_phy_offset
            assert slave.store.max_phy_offset == master.store.max_phy_offset
            t = master.ha.transfer
            assert t.completed >= 200 and t.acks_used < t.completed  # many per acknowledgement


async def test_empty_slave_starts_at_masters_last_segment(tmp_path):
    # 1 MiB segments (conftest): ~1.5 MiB of messages before the slave comes
    async with running_broker(tmp_path / "m", ha_listen=("127.0.0.1", 0)) as master:
        async with client() as c:
            async def burst(first, n):
                for i in range(first, first + n):
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"%05d" % i + b"p" * 1000, queue_id=0, properties=Wire.props()))
                    assert r.code == ResponseCode.SUCCESS

            await burst(0, 1500)
            segment = master.store.config.commit_log_segment_size
            last_start = master.store.max_phy_offset // segment * segment
            assert last_start > 0
            async with running_broker(
                tmp_path / "s", broker_role="SLAVE", ha_master_address=("127.0.0.1", master.ha.server.port),
                namesrv_addrs=master.namesrv.address,
            ) as slave:
                await burst(1500, 100)
                await wait_until(lambda: slave.store.max_phy_offset == master.store.max_phy_offset)
                assert slave.store.min_phy_offset == last_start
                end = master.store.max_phy_offset
                assert bytes(slave.store.commit_log.get_message(last_start, end - last_start)) == bytes(
                    master.store.commit_log.get_message(last_start, end - last_start))
                # queue offsets as on the master: the slave's queue starts where its log does
                assert slave.store.get_max_offset(TOPIC, 0) == 1600
                first = slave.store.get_min_offset(TOPIC, 0)
                assert first > 0
                assert slave.store.get_queue_entry(TOPIC, 0, first) == master.store.get_queue_entry(TOPIC, 0, first)


@contextmanager
def two_stores(tmp_path):
    """A master store with 3 messages on queue 0 and an empty slave store:
    (master, slave, the master's log bytes)."""
    from trocket.broker.store import MessageInner, MessageStore, StoreConfig

    m = MessageStore.open(StoreConfig(store_dir=str(tmp_path / "m"), commit_log_segment_size=1 << 20))
    s = MessageStore.open(StoreConfig(store_dir=str(tmp_path / "s"), commit_log_segment_size=1 << 20))
    try:
        for i in range(3):
            m.put_message(MessageInner(topic=TOPIC, body=b"b%d" % i, queue_id=0))
        s.set_slave(True)
        yield m, s, bytes(m.commit_log.get_message(0, m.max_phy_offset))
    finally:
        m.shutdown()
        s.shutdown()


def test_append_replicated_refuses_bad_data(tmp_path):
    from trocket.broker.store import MessageInner, ReplicaDataError, SlaveModeError

    with two_stores(tmp_path) as (m, s, data):
        first = m.get_queue_entry(TOPIC, 0, 0)[1]
        with pytest.raises(SlaveModeError):
            s.put_message(MessageInner(topic=TOPIC, body=b"x", queue_id=0))
        with pytest.raises(ReplicaDataError, match="torn"):
            s.append_replicated(0, data[: first + 5])
        with pytest.raises(ReplicaDataError, match="segment boundary"):
            s.append_replicated(first, data[first:])
        bad = bytearray(data)
        bad[first + 4 : first + 8] = b"\0\0\0\0"  # the second record's magic code
        with pytest.raises(ReplicaDataError, match="no whole record"):
            s.append_replicated(0, bad)
        assert s.max_phy_offset == 0 and s.get_max_offset(TOPIC, 0) == 0
        assert s.append_replicated(0, data[:first]) == first
        with pytest.raises(ReplicaDataError, match=f"ends at {first}"):
            s.append_replicated(0, data[:first])  # a duplicate
        assert s.append_replicated(first, data[first:]) == len(data)
        assert [s.get_queue_entry(TOPIC, 0, i) for i in range(3)] == [m.get_queue_entry(TOPIC, 0, i) for i in range(3)]


def test_append_replicated_partial_writes_the_whole_records_and_leaves_the_tail(tmp_path):
    """The HA client's way (``partial=True``): bytes cut anywhere; the whole records at
    the start are written, the end returned says how far, nothing of a torn record is
    written; bad framing is refused even before its record is complete."""
    from trocket.broker.store import ReplicaDataError

    with two_stores(tmp_path) as (m, s, data):
        first = m.get_queue_entry(TOPIC, 0, 0)[1]
        assert s.append_replicated(0, data[:5], partial=True) == 0  # not even a size and a magic code
        assert s.append_replicated(0, data[: first + 5], partial=True) == first
        assert s.max_phy_offset == first
        assert s.append_replicated(first, data[first : first + 40], partial=True) == first  # still torn
        bad = bytearray(data[first:])
        bad[4:8] = b"\0\0\0\0"  # its magic code
        with pytest.raises(ReplicaDataError, match="no whole record"):
            s.append_replicated(first, bad[:12], partial=True)
        assert s.append_replicated(first, data[first:], partial=True) == len(data)
        assert [s.get_queue_entry(TOPIC, 0, i) for i in range(3)] == [m.get_queue_entry(TOPIC, 0, i) for i in range(3)]
        assert bytes(s.commit_log.get_message(0, len(data))) == data


def test_replicated_record_that_does_not_decode_is_cut_back(tmp_path):
    """Framing is checked before the bytes are written (and reported); the decode comes
    after. A record with right framing that does not decode (only a corrupt master log
    has one) cuts the log back to the start of its append: nothing undecodable stays,
    the appends before it stay and are dispatched."""
    from trocket.broker.store import ReplicaDataError

    with two_stores(tmp_path) as (m, s, data):
        first = m.get_queue_entry(TOPIC, 0, 0)[1]
        second = first + m.get_queue_entry(TOPIC, 0, 1)[1]
        misplaced = bytearray(data)
        misplaced[first + 28 : first + 36] = (first + 1).to_bytes(8, "big")  # PHYSICALOFFSET
        with pytest.raises(ReplicaDataError, match=f"says it belongs at {first + 1}"):
            s.append_replicated(0, misplaced)
        assert s.max_phy_offset == 0
        bad = bytearray(data)
        bad[first + 84 : first + 88] = b"\x7f\xff\xff\xff"  # the second record's body length
        with pytest.raises(ReplicaDataError, match="does not decode"):
            s.append_replicated(0, bad)
        assert s.max_phy_offset == 0 and s.get_max_offset(TOPIC, 0) == 0
        # written at once, decoded later: the first append stays, the second is cut
        assert s.append_replicated(0, data[:first], dispatch=False) == first
        assert s.append_replicated(first, bad[first:second], dispatch=False) == second
        assert s.max_phy_offset == second and s.get_max_offset(TOPIC, 0) == 0
        with pytest.raises(ReplicaDataError, match="does not decode"):
            s.dispatch_replicated()
        assert s.max_phy_offset == first and s.get_max_offset(TOPIC, 0) == 1
        assert s.append_replicated(first, data[first:]) == len(data)
        assert [s.get_queue_entry(TOPIC, 0, i) for i in range(3)] == [m.get_queue_entry(TOPIC, 0, i) for i in range(3)]
        assert bytes(s.commit_log.get_message(0, len(data))) == data


def test_replicated_data_gone_before_it_was_decoded_is_refused_and_taken_again(tmp_path):
    """Written, then its segment deleted before the decode (what only a clean-up running
    in between could do): the decode refuses it, nothing of it is dispatched, and the
    same bytes are taken again from the log's end."""
    from trocket.broker.store import ReplicaDataError

    with two_stores(tmp_path) as (m, s, data):
        assert s.append_replicated(0, data, dispatch=False) == len(data)
        s.commit_log.files.delete_all()
        with pytest.raises(ReplicaDataError, match="gone before it was decoded"):
            s.dispatch_replicated()
        assert s.max_phy_offset == 0 and s.get_max_offset(TOPIC, 0) == 0
        assert s.append_replicated(0, data) == len(data)
        assert [s.get_queue_entry(TOPIC, 0, i) for i in range(3)] == [m.get_queue_entry(TOPIC, 0, i) for i in range(3)]
        assert bytes(s.commit_log.get_message(0, len(data))) == data


def test_tags_codes_agree_on_the_master_its_slave_and_after_recovery(tmp_path):
    """Every reader of a record's TAGS takes Java's map reading (the last item with a
    value): the tags code the master's put path gives a consume-queue entry is the one
    its slave's dispatch gives it and its own recovery rebuilds -- TAGS twice included."""
    import shutil

    from trocket.broker.store import MessageStore, StoreConfig, tags_hash
    from trocket.broker.store.messages import message_inner
    from trocket.codecs.message.hosts import HostAddress
    from trocket.codecs.message.properties import get_property

    props = [b"TAGS\x01a\x02TAGS\x01b", b"TAGS\x01a\x02TAGS\x01", b"KEYS\x01k\x02TAGS\x01c\x02WAIT\x01true"]
    expected = [tags_hash(t) for t in ("b", "a", "c")]
    with two_stores(tmp_path) as (m, s, _):
        for raw in props:
            code = tags_hash(get_property(raw.decode(), "TAGS"))  # as the send processor computes it
            m.put_message(message_inner(TOPIC, b"x", 0, 0, raw, 0, 1700000000000, HostAddress("10.0.0.1", 1), 0, code))
        master = [m.get_queue_entry(TOPIC, 0, i) for i in range(3, 6)]
        assert [entry[2] for entry in master] == expected
        s.append_replicated(0, bytes(m.commit_log.get_message(0, m.max_phy_offset)))
        assert [s.get_queue_entry(TOPIC, 0, i) for i in range(3, 6)] == master
        m.abandon()  # a crash that lost the consume queues: recovery rebuilds them
        shutil.rmtree(m.config.consume_queue_dir)
        m = MessageStore.open(StoreConfig(store_dir=str(tmp_path / "m"), commit_log_segment_size=1 << 20))
        try:
            assert m.recovery.redispatched == 6
            assert [m.get_queue_entry(TOPIC, 0, i) for i in range(3, 6)] == master
        finally:
            m.shutdown()


async def test_pull_suggests_the_slave_to_a_slow_consumer(tmp_path):
    from trocket.codecs.headers import PullMessageResponseHeader

    # ratio 0: any read behind the end is "slow"; without slaveReadEnable: always the master
    for read_enable, want in ((True, 1), (False, 0)):
        async with running_broker(
            tmp_path / f"m{read_enable}", slave_read_enable=read_enable, access_message_in_memory_max_ratio=0,
        ) as master:
            async with client() as c:
                for i in range(3):
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"s%d" % i, properties=Wire.props()))
                    assert r.code == ResponseCode.SUCCESS
                r = await c.invoke_sync(master.broker_addr, Wire.pull(TOPIC, 0, 0, max_msgs=1, suspend_ms=0, sys_flag=4))
                assert r.code == ResponseCode.SUCCESS
                assert decode_header(PullMessageResponseHeader, r.ext_fields).suggestWhichBrokerId == want


@asynccontextmanager
async def slave_following(tmp_path, fake_master, *, reconnect_delay: float):
    """A slave broker following ``fake_master`` (a handler serving a local port),
    reconnecting every ``reconnect_delay`` seconds."""
    async with trio.open_nursery() as n:
        listeners = await n.start(functools.partial(trio.serve_tcp, fake_master, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        async with running_broker(tmp_path / "s", broker_role="SLAVE", ha_master_address=("127.0.0.1", port)) as slave:
            slave.ha.client.reconnect_delay = reconnect_delay
            yield slave
        n.cancel_scope.cancel()


async def test_a_slave_serves_a_topic_it_learnt_from_the_records_before_any_sync(tmp_path):
    """A topic created on the master and written a moment ago is readable on the slave as
    soon as its records are there -- the slave learns it from them -- not only after the
    next copy of the master's tables (slave_sync_interval_ms, here an hour): what makes
    every acknowledged message readable after a failover, whatever the timing."""
    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        async with running_broker(
            tmp_path / "s", broker_role="SLAVE", namesrv_addrs=master.namesrv.address,
            slave_sync_interval_ms=3_600_000,
        ) as slave:
            await wait_until(lambda: master.ha.transfer.connections == 1)
            master.topics.update(TopicConfig("Learnt", 8, 8))  # as UPDATE_AND_CREATE_TOPIC makes it
            async with client() as c:
                for q in (0, 5):  # queue 5: beyond Java's default 4, the learnt config grows
                    r = await c.invoke_sync(
                        master.broker_addr, Wire.send_v2("Learnt", b"q%d" % q, queue_id=q, properties=Wire.props())
                    )
                    assert r.code == ResponseCode.SUCCESS, r
                await wait_until(lambda: slave.store.max_phy_offset == master.store.max_phy_offset)
                tc = slave.topics.select("Learnt")
                assert tc is not None and (tc.read_queue_nums, tc.write_queue_nums) == (6, 6)
                for q in (0, 5):
                    r = await c.invoke_sync(slave.broker_addr, Wire.pull("Learnt", q, sys_flag=4, group="Failover"))
                    assert r.code == ResponseCode.SUCCESS, r.remark
                    assert [m.body for m in decode_records(r.body)] == [b"q%d" % q]


async def test_slave_drops_a_master_that_sends_junk_and_reconnects(tmp_path):
    accepted: list[bytes] = []
    closed = trio.Event()

    async def fake_master(stream: trio.SocketStream) -> None:
        first = await stream.receive_some(8)
        accepted.append(first)
        if len(accepted) == 1:
            # a frame at the right offset whose body is no record
            await stream.send_all(HEADER.pack(0, 20) + b"junk" * 5)
            with trio.fail_after(5):
                while await stream.receive_some(100):
                    pass
            closed.set()
        await stream.aclose()

    async with slave_following(tmp_path, fake_master, reconnect_delay=0.1) as slave:
        with trio.fail_after(10):
            await closed.wait()
        await wait_until(lambda: len(accepted) >= 2, 10)
        assert accepted[0] == accepted[1] == OFFSET.pack(0)  # nothing was written
        assert slave.store.max_phy_offset == 0


async def test_a_master_that_sends_the_same_junk_on_every_connection_is_logged_once(tmp_path, caplog):
    """A corrupt record the master streams on every reconnect: the slave refuses it each
    time and retries, and says so once at WARNING (then at DEBUG), not every second."""
    import logging

    connections = 0

    async def fake_master(stream: trio.SocketStream) -> None:
        nonlocal connections
        await stream.receive_some(8)
        connections += 1
        await stream.send_all(HEADER.pack(0, 20) + b"junk" * 5)
        with trio.move_on_after(5):
            while await stream.receive_some(100):
                pass
        await stream.aclose()

    caplog.set_level(logging.DEBUG, logger="trocket.broker.ha")
    async with slave_following(tmp_path, fake_master, reconnect_delay=0.05):
        await wait_until(lambda: connections >= 4, 10)
    refusals = [r for r in caplog.records if "closing the connection to master" in r.getMessage()]
    assert len(refusals) >= 3
    assert [r.levelno for r in refusals[:3]] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    follows = [r.levelno for r in caplog.records if "following master" in r.getMessage()]
    assert follows[:3] == [logging.INFO, logging.DEBUG, logging.DEBUG]


async def test_slave_lagging_past_fallbehind_max_is_not_available(tmp_path):
    async with running_broker(
        tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0), ha_slave_fallbehind_max=1000,
        sync_flush_timeout_ms=300,
    ) as master:
        silent = await _fake_slave(master.ha.server.port)  # connected, acknowledges nothing
        try:
            await wait_until(lambda: master.ha.transfer.connections == 1)
            async with client() as c:
                # within haSlaveFallbehindMax: waits for the slave, then FLUSH_SLAVE_TIMEOUT
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"a" * 100, properties=Wire.props()))
                assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
                # past it: SLAVE_NOT_AVAILABLE at once
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"b" * 2000, properties=Wire.props()))
                t0 = trio.current_time()
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"c", properties=Wire.props()))
                assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
                assert trio.current_time() - t0 < 0.25
        finally:
            await silent.aclose()


async def test_async_master_listens_by_default_and_a_slave_finds_it_through_the_name_server(tmp_path):
    # as Java's master: haListenPort (listen port + 1; port 0 here) without any HA setting
    async with running_broker(tmp_path / "m") as master:
        assert master.config.broker_role == "ASYNC_MASTER" and master.ha.server.port
        async with running_broker(
            tmp_path / "s", broker_role="SLAVE", namesrv_addrs=master.namesrv.address,
        ) as slave:
            async with client() as c:
                for i in range(20):
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"m%d" % i, queue_id=0, properties=Wire.props()))
                    assert r.code == ResponseCode.SUCCESS
            await wait_until(lambda: slave.store.max_phy_offset == master.store.max_phy_offset)
            assert slave.ha.client.master == ("127.0.0.1", master.ha.server.port)
            assert cq_entries(slave.store, TOPIC, 0) == cq_entries(master.store, TOPIC, 0)


async def test_an_implicit_ha_port_in_use_leaves_an_async_master_without_replication(tmp_path):
    from trocket.broker.ha import HAServer, GroupTransferService
    from trocket.broker.store import MessageStore, StoreConfig

    taken = trio.socket.socket()
    await taken.bind(("127.0.0.1", 0))
    taken.listen()
    store = MessageStore.open(StoreConfig(store_dir=str(tmp_path / "m"), commit_log_segment_size=1 << 20))
    try:
        transfer = GroupTransferService(timeout=1, fallbehind_max=1 << 20)
        addr = ("127.0.0.1", taken.getsockname()[1])
        async with trio.open_nursery() as nursery:
            assert await nursery.start(HAServer(store, transfer, addr, required=False).run) == 0
            with pytest.raises(OSError):
                await nursery.start(HAServer(store, transfer, addr).run)
    finally:
        taken.close()
        store.shutdown()


async def test_slave_drops_the_queues_of_a_topic_its_master_deleted(tmp_path):
    async with running_broker(tmp_path / "m") as master:
        async with running_broker(
            tmp_path / "s", broker_role="SLAVE", namesrv_addrs=master.namesrv.address, slave_sync_interval_ms=100,
        ) as slave:
            async with client() as c:
                for topic in ("Doomed", "Kept"):
                    for q in range(2):
                        r = await c.invoke_sync(master.broker_addr, Wire.send_v2(topic, b"x", queue_id=q, properties=Wire.props()))
                        assert r.code == ResponseCode.SUCCESS
                await wait_until(lambda: slave.topics.select("Doomed") is not None and slave.topics.select("Kept") is not None)
                await wait_until(lambda: slave.store.get_max_offset("Doomed", 1) == 1)
                r = await c.invoke_sync(master.broker_addr, RemotingCommand.request(
                    RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic="Doomed")))
                assert r.code == ResponseCode.SUCCESS
                await wait_until(lambda: "Doomed" not in slave.store.queues.topics())
                assert slave.topics.select("Doomed") is None
                assert slave.store.get_max_offset("Doomed", 0) == 0
                assert [slave.store.get_max_offset("Kept", q) for q in range(2)] == [1, 1]


async def test_a_topic_learnt_before_the_table_was_asked_for_goes_when_the_master_deleted_it(tmp_path):
    """The slave learns "Doomed" from its records, the master deletes it, and only then
    does the slave copy the master's table (no periodic copy in between: the interval is
    an hour): the table, asked for after the learning, is the truth, so the topic and its
    queues go. (Kept only if learnt while the table was on its way.)"""
    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        async with running_broker(
            tmp_path / "s", broker_role="SLAVE", namesrv_addrs=master.namesrv.address,
            slave_sync_interval_ms=3_600_000,
        ) as slave:
            await wait_until(lambda: master.ha.transfer.connections == 1)
            await wait_until(lambda: slave.slave_sync.rounds >= 1)  # the first copy, before the topics exist
            async with client() as c:
                for topic in ("Doomed", "Kept"):
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2(topic, b"x", properties=Wire.props()))
                    assert r.code == ResponseCode.SUCCESS
                await wait_until(lambda: slave.store.max_phy_offset == master.store.max_phy_offset)
                assert slave.topics.select("Doomed") is not None  # learnt from the records
                r = await c.invoke_sync(master.broker_addr, RemotingCommand.request(
                    RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic="Doomed")))
                assert r.code == ResponseCode.SUCCESS
                assert await slave.slave_sync.sync_all()
                assert slave.topics.select("Doomed") is None
                assert "Doomed" not in slave.store.queues.topics()
                assert slave.topics.select("Kept") is not None


async def _pipelined_sends(master, n: int) -> list[RemotingCommand]:
    """``n`` sends in one write on a raw connection; their answers, as they arrive."""
    from trocket.codecs.serialize import decode_command, encode_command

    host, port = master.broker_addr.rsplit(":", 1)
    sock = trio.socket.socket()
    await sock.connect((host, int(port)))
    with sock:
        requests = []
        for i in range(n):
            req = Wire.send_v2(TOPIC, b"m%d" % i, queue_id=i % 4, properties=Wire.props())
            req.opaque = 1000 + i
            requests.append(encode_command(req))
        await sock.send(b"".join(requests))  # one read on the master: one batch
        buf = bytearray()
        answers = []
        with trio.fail_after(10):
            while len(answers) < n:
                buf += await sock.recv(65536)
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">I", buf)[0]:
                    size = struct.unpack_from(">I", buf)[0]
                    answers.append(decode_command(bytes(buf[4 : 4 + size])))
                    del buf[: 4 + size]
    return answers


@asynccontextmanager
async def _sync_pair(tmp_path, **master_kw):
    """A SYNC_MASTER (``master_kw`` for its BrokerController) followed by a slave, the
    topic created."""
    from trocket.broker.controller import BrokerController

    master = BrokerController(broker_config(tmp_path / "m", broker_role="SYNC_MASTER"), **master_kw)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        async with running_broker(
            tmp_path / "s", broker_role="SLAVE", ha_master_address=("127.0.0.1", master.ha.server.port),
            namesrv_addrs=master.namesrv.address,
        ):
            await wait_until(lambda: master.ha.transfer.connections == 1)
            async with client() as c:
                r = await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"first", properties=Wire.props()))
                assert r.code == ResponseCode.SUCCESS
            yield master
        nursery.cancel_scope.cancel()


async def test_answers_one_acknowledgement_completes_leave_in_one_write(tmp_path, monkeypatch):
    """A SYNC_MASTER writes the answers an acknowledgement completed at the end of that
    pass, corked: one write per client connection, not one per answer."""
    import trocket.remoting.fdio as fdio

    frames_per_write: list[int] = []
    real_write = fdio._write

    def counting_write(fd, data):
        n, pos, view = 0, 0, memoryview(data)
        while pos + 4 <= len(view):
            pos += 4 + struct.unpack_from(">I", view, pos)[0]
            n += 1
        frames_per_write.append(n)
        return real_write(fd, data)

    async with _sync_pair(tmp_path) as master:
        acks_before = master.ha.transfer.acks_used
        monkeypatch.setattr(fdio, "_write", counting_write)
        n = 8
        answers = await _pipelined_sends(master, n)
        monkeypatch.setattr(fdio, "_write", real_write)
        assert [a.opaque for a in answers] == [1000 + i for i in range(n)]  # in order
        assert all(a.code == ResponseCode.SUCCESS for a in answers)
        assert master.ha.transfer.acks_used - acks_before == 1  # one acknowledgement covered all
        assert n in frames_per_write  # and its answers left in one write


async def test_replicated_answers_wait_for_room_in_order_when_the_outbox_is_full(tmp_path, monkeypatch):
    """An outbox of 2 frames: the third answer of a pass waits for room in a task, the
    later ones queue behind it; all arrive, in order, and none stays counted in flight."""
    from trocket.broker.processors.send import SendProcessor
    from trocket.remoting import ServerConfig

    waited = []
    real = SendProcessor._answer_queued

    async def counting(self, conn, queue, first):
        waited.append(len(queue))
        await real(self, conn, queue, first)

    monkeypatch.setattr(SendProcessor, "_answer_queued", counting)
    cfg = ServerConfig(listen_host="127.0.0.1", listen_port=0, system_reply_ext_fields=True, outbound_max_frames=2)
    async with _sync_pair(tmp_path, server_config=cfg) as master:
        n = 12
        answers = await _pipelined_sends(master, n)
        assert waited  # the outbox was full: a task took over
        assert [a.opaque for a in answers] == [1000 + i for i in range(n)]
        assert all(a.code == ResponseCode.SUCCESS for a in answers)
        await wait_until(lambda: master.send_processor.pending == 0 and not master.send_processor._answers)
