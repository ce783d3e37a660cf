"""Query codes against a real broker: QUERY_MESSAGE 12 by key and by unique key (time
range, max count, not found), QUERY_CONSUME_QUEUE 321, GET_EARLIEST_MSG_STORETIME 32, and
the index settings (messageIndexEnable off: nothing indexed, nothing found)."""

from __future__ import annotations

import time

from trocket.codecs.bodies.query import QueryConsumeQueueResponseBody
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import decode_header
from trocket.codecs.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    QueryConsumeQueueRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
)
from trocket.codecs.message import iter_records
from trocket.codecs.message.sysflag import TRANSACTION_ROLLBACK_TYPE

from ..waiting import wait_until

FAR = 2**62


def _query(topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = FAR, unique: bool = False) -> RemotingCommand:
    h = QueryMessageRequestHeader(topic=topic, key=key, maxNum=max_num, beginTimestamp=begin, endTimestamp=end)
    return RemotingCommand.request(12, h, ext_fields={"_UNIQUE_KEY_QUERY": "true"} if unique else None)


async def _indexed(broker) -> None:
    store = broker.store
    await wait_until(lambda: store.index.next_offset >= store.commit_log.max_offset, what="the index caught up")


async def test_query_message_by_key_and_unique_key(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        before = int(time.time() * 1000) - 1
        for i in range(10):
            props = wire.props(keys=f"order-{i} batch-A", UNIQ_KEY=f"AC11000100002A9F0000000000{i:06d}")
            assert (await c.invoke_sync(addr, wire.send_v2("QT", b"body %d" % i, queue_id=i % 2, properties=props))).code == 0
        await c.invoke_sync(addr, wire.send_v2("Other", b"x", properties=wire.props(keys="order-3")))
        await _indexed(broker)

        r = await c.invoke_sync(addr, _query("QT", "order-3"))
        assert r.code == 0 and r.remark is None
        found = list(iter_records(r.body))
        assert [m.body for m in found] == [b"body 3"] and found[0].topic == "QT"
        h = decode_header(QueryMessageResponseHeader, r.ext_fields)
        assert h.indexLastUpdatePhyoffset == broker.store.index.files[-1].end_phy_offset
        assert h.indexLastUpdateTimestamp >= before

        # one key, many messages: oldest first, maxNum of the newest
        r = await c.invoke_sync(addr, _query("QT", "batch-A", max_num=4))
        assert [m.body for m in iter_records(r.body)] == [b"body %d" % i for i in range(6, 10)]
        r = await c.invoke_sync(addr, _query("QT", "batch-A"))
        assert len(list(iter_records(r.body))) == 10

        # by unique key: the broker takes defaultQueryMaxNum whatever maxNum says
        r = await c.invoke_sync(addr, _query("QT", "AC11000100002A9F0000000000000005", max_num=0, unique=True))
        assert [m.body for m in iter_records(r.body)] == [b"body 5"]
        r = await c.invoke_sync(addr, _query("QT", "AC11000100002A9F0000000000000005", max_num=0))
        assert r.code == 22  # maxNum 0 without the flag

        # not found: another topic's key, a time range before the messages, reversed, an empty key
        for req in (_query("Nope", "order-3"), _query("QT", "order-3", begin=0, end=before - 10_000),
                    _query("QT", "order-3", begin=FAR, end=0), _query("QT", "")):
            r = await c.invoke_sync(addr, req)
            assert (r.code, r.remark) == (22, "can not find message, maybe time range not correct")
            assert int(r.ext_fields["indexLastUpdatePhyoffset"]) > 0


async def test_rolled_back_and_unkeyed_messages_are_not_indexed(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, wire.send_v2("QT", b"plain", properties=wire.props()))
        await c.invoke_sync(addr, wire.send_v1("QT", b"rolled", properties=wire.props(keys="rb"),
                                              sys_flag=TRANSACTION_ROLLBACK_TYPE))
        await _indexed(broker)
        assert broker.store.index.keys_indexed == 0
        assert (await c.invoke_sync(addr, _query("QT", "rb"))).code == 22


async def test_index_off(tmp_path, wire):
    async with wire.running_broker(tmp_path, message_index_enable=False) as broker, wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, wire.send_v2("QT", b"k", properties=wire.props(keys="k1")))
        assert broker.store.index is None
        r = await c.invoke_sync(addr, _query("QT", "k1"))
        assert r.code == 22 and r.ext_fields["indexLastUpdatePhyoffset"] == "0"


async def test_query_consume_queue_and_earliest_store_time(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        results = []
        for i in range(5):
            r = await c.invoke_sync(addr, wire.send_v2("CQ", b"m%d" % i, queue_id=1, properties=wire.props(tags="TagA")))
            results.append(r)

        def cq(index: int, count: int, group: str | None = None, queue_id: int = 1, topic: str = "CQ") -> RemotingCommand:
            return RemotingCommand.request(321, QueryConsumeQueueRequestHeader(
                topic=topic, queueId=queue_id, index=index, count=count, consumerGroup=group))

        r = await c.invoke_sync(addr, cq(1, 3, group="G"))
        assert r.code == 0
        body = QueryConsumeQueueResponseBody.from_body(r.body)
        assert (body.min_queue_index, body.max_queue_index) == (0, 5)
        assert body.subscription_data is None and body.filter_data == "G@CQ is not online!"
        entries = [(d.physic_offset, d.physic_size) for d in body.queue_data]
        assert len(entries) == 3 and entries == sorted(entries)
        assert entries[0] == broker.store.get_queue_entry("CQ", 1, 1)[:2]
        assert body.queue_data[0].tags_code == broker.store.get_queue_entry("CQ", 1, 1)[2]
        assert b'"eval":false' in r.body and b"bitMap" not in r.body  # fastjson: nulls left out
        body = QueryConsumeQueueResponseBody.from_body((await c.invoke_sync(addr, cq(3, 10))).body)
        assert len(body.queue_data) == 2 and body.filter_data is None  # to the queue's end; no group
        r = await c.invoke_sync(addr, cq(7, 1))
        assert (r.code, r.remark) == (0, "Index 7 of 1@CQ is not exist!")
        body = QueryConsumeQueueResponseBody.from_body(r.body)  # Java's has none: its client's NPE
        assert (body.max_queue_index, body.queue_data) == (5, None)
        r = await c.invoke_sync(addr, cq(0, 1, topic="NoSuch"))
        assert (r.code, r.remark) == (1, "1@NoSuch is not exist!")

        async def earliest(topic: str, queue_id: int) -> int:
            r = await c.invoke_sync(addr, RemotingCommand.request(32, GetEarliestMsgStoretimeRequestHeader(topic=topic, queueId=queue_id)))
            assert r.code == 0
            return decode_header(GetEarliestMsgStoretimeResponseHeader, r.ext_fields).timestamp

        first = broker.store.get_message_store_timestamp("CQ", 1, 0)
        assert await earliest("CQ", 1) == first > 0
        assert await earliest("CQ", 0) == -1 and await earliest("NoSuch", 0) == -1
