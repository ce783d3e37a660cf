"""Replication between two controllers in one process (real TCP, real stores): the
fast checks of the send path's hand-off, the slave's append and refusal, the sync codes."""

from __future__ import annotations

import trio

from trocket.broker.ha.protocol import HEADER, OFFSET
from trocket.codecs.codes import ResponseCode
from trocket.codecs.headers import SendMessageResponseHeader, decode_header

from ..conftest import Wire, client, running_broker

TOPIC = "HaTopic"


async def wait_until(pred, timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not pred():
            await trio.sleep(0.01)


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
                # the route shows both
                from trocket.codecs.headers.namesrv import GetRouteInfoRequestHeader  # noqa: F401
                # topic config and offsets synced
                r = await c.invoke_sync(master.broker_addr, Wire.pull(TOPIC, 1, 0, group="G1", commit_offset=3, sys_flag=5, suspend_ms=0))
                master.offsets.commit_offset("G1", TOPIC, 1, 7)
                await wait_until(lambda: slave.offsets.query_offset("G1", TOPIC, 1) == 7)
                await wait_until(lambda: slave.topics.select(TOPIC) is not None)


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


async def test_bad_input_on_ha_port(tmp_path):
    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        port = master.ha.server.port
        async with client() as c:
            await c.invoke_sync(master.broker_addr, Wire.send_v2(TOPIC, b"x", properties=Wire.props()))
        end = master.store.max_phy_offset
        # junk
        s = await trio.open_tcp_stream("127.0.0.1", port)
        await s.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        with trio.fail_after(5):
            data = b""
            while True:
                chunk = await s.receive_some(100)
                if not chunk:
                    break
                data += chunk
        assert data[:12] == HEADER.pack(end, 0)
        await s.aclose()
        # an offset beyond the log
        s = await trio.open_tcp_stream("127.0.0.1", port)
        await s.send_all(OFFSET.pack(end + 1))
        with trio.fail_after(5):
            assert (await s.receive_some(100)) == HEADER.pack(end, 0)
            assert (await s.receive_some(100)) == b""
        await s.aclose()
        # a good slave, then a second one
        s1 = await trio.open_tcp_stream("127.0.0.1", port)
        await s1.send_all(OFFSET.pack(0))
        with trio.fail_after(5):
            got = await s1.receive_some(65536)
        off, size = HEADER.unpack_from(got)
        assert off == 0 and size == end
        s2 = await trio.open_tcp_stream("127.0.0.1", port)
        await s2.send_all(OFFSET.pack(0))
        with trio.fail_after(5):
            assert (await s2.receive_some(100)) == b""
        await s2.aclose()
        # an ack of bytes never sent
        await s1.send_all(OFFSET.pack(end + 100))
        with trio.fail_after(5):
            while await s1.receive_some(100):
                pass
        await s1.aclose()
        assert master.ha.server.rejected == 4
        async with client() as c:  # still serving
            r = await c.invoke_sync(master.broker_addr, Wire.pull(TOPIC, 0, 0, suspend_ms=0, sys_flag=4))
            assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND)
