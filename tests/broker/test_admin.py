"""Admin and query codes: 17, 28, 29, 30, 31, 33."""

from __future__ import annotations

import trio

from trocket.codecs.bodies.fastjson import loads
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    CreateTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    SearchOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.message.record import decode_record


def create_topic(topic: str, queues: int = 8, perm: int = 6, filter_type: str = "SINGLE_TAG") -> RemotingCommand:
    h = CreateTopicRequestHeader(
        topic=topic, defaultTopic="TBW102", readQueueNums=queues, writeQueueNums=queues, perm=perm,
        topicFilterType=filter_type, topicSysFlag=0, order=False,
    )
    return RemotingCommand.request(17, h)


async def route(c, ns: str, topic: str) -> RemotingCommand:
    return await c.invoke_sync(ns, RemotingCommand.request(105, ext_fields={"topic": topic}))


async def test_update_and_create_topic_and_route(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        ns = broker.namesrv_addrs[0]
        r = await c.invoke_sync(addr, create_topic("AdminT", 8))
        assert r.code == 0, r.remark
        tc = broker.topics.select("AdminT")
        assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (8, 8, 6)
        # registered again right after creation: the route shows it at once
        with trio.fail_after(3):
            while (rr := await route(c, ns, "AdminT")).code != 0:
                await trio.sleep(0.05)
        data = loads(rr.body)
        assert data["queueDatas"][0]["writeQueueNums"] == 8
        assert data["brokerDatas"][0]["brokerAddrs"][0] == addr
        # update: fewer queues
        r = await c.invoke_sync(addr, create_topic("AdminT", 2))
        assert r.code == 0 and broker.topics.select("AdminT").write_queue_nums == 2
        # sends to queue 1 work, queue 2 is refused
        assert (await c.invoke_sync(addr, wire.send_v1("AdminT", b"x", queue_id=1))).code == 0
        assert (await c.invoke_sync(addr, wire.send_v1("AdminT", b"x", queue_id=2))).code == 1


async def test_create_topic_bad_input(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for req, remark in [
            (create_topic("bad/topic"), "The specified topic contains illegal characters"),
            (create_topic("TBW102"), "The topic[TBW102] is conflict with system topic."),
            (create_topic("rmq_sys_x"), "conflict with system topic"),
            (create_topic("Zero", 0), "illegal queue numbers"),
            (create_topic("Ft", filter_type="WHAT"), "illegal topicFilterType"),
            (RemotingCommand.request(17, ext_fields={"topic": "NoRest"}), "the custom field"),
        ]:
            r = await c.invoke_sync(addr, req)
            assert r.code == 1 and remark in r.remark, r.remark
        assert (await c.invoke_sync(addr, create_topic("GoodOne"))).code == 0


async def test_runtime_info(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, wire.send_v1("RI", b"x" * 10, properties=wire.props()))
        r = await c.invoke_sync(addr, RemotingCommand.request(28))
        assert r.code == 0
        table = loads(r.body)["table"]
        assert all(isinstance(v, str) for v in table.values())
        assert table["putMessageTimesTotal"] == "1"
        assert int(table["commitLogMaxOffset"]) > 0
        assert "bootTimestamp" in table and "runtime" in table and "brokerVersionDesc" in table


async def test_offsets_min_max_search(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        stamps = []
        for i in range(5):
            await c.invoke_sync(addr, wire.send_v1("OF", f"{i}".encode(), queue_id=1, properties=wire.props()))
            stamps.append(broker.store.get_message_store_timestamp("OF", 1, i))
            await trio.sleep(0.003)
        r = await c.invoke_sync(addr, RemotingCommand.request(30, GetMaxOffsetRequestHeader(topic="OF", queueId=1)))
        assert r.code == 0 and r.ext_fields == {"offset": "5"}
        r = await c.invoke_sync(addr, RemotingCommand.request(31, GetMinOffsetRequestHeader(topic="OF", queueId=1)))
        assert r.code == 0 and r.ext_fields == {"offset": "0"}
        r = await c.invoke_sync(addr, RemotingCommand.request(30, GetMaxOffsetRequestHeader(topic="None", queueId=0)))
        assert r.ext_fields == {"offset": "0"}
        r = await c.invoke_sync(
            addr, RemotingCommand.request(29, SearchOffsetRequestHeader(topic="OF", queueId=1, timestamp=stamps[3]))
        )
        assert r.code == 0 and int(r.ext_fields["offset"]) == 3


async def test_view_message_by_id(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, wire.send_v1("VM", b"first", properties=wire.props()))
        r = await c.invoke_sync(addr, wire.send_v1("VM", b"second", properties=wire.props(tags="t")))
        oid = decode_offset_msg_id(r.ext_fields["msgId"])
        v = await c.invoke_sync(addr, RemotingCommand.request(33, ViewMessageRequestHeader(offset=oid.offset)))
        assert v.code == 0
        msg, end = decode_record(v.body)
        assert end == len(v.body) and msg.body == b"second" and msg.tags == "t"
        v = await c.invoke_sync(addr, RemotingCommand.request(33, ViewMessageRequestHeader(offset=oid.offset + 3)))
        assert v.code == 1 and v.remark == f"can not find message by the offset, {oid.offset + 3}"
        v = await c.invoke_sync(addr, RemotingCommand.request(33, ViewMessageRequestHeader(offset=10**12)))
        assert v.code == 1
