"""Admin and query codes: 17, 28, 29, 30, 31, 33, 215."""

from __future__ import annotations

import json
import os
import time

import trio

from trocket.codecs.bodies.fastjson import loads
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    SearchOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.message.record import decode_record

from ..waiting import wait_until
from .conftest import held_count_reaches


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
        async def routed() -> RemotingCommand | None:
            rr = await route(c, ns, "AdminT")
            return rr if rr.code == 0 else None

        rr = await wait_until(routed, 3, interval=0.05)
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
            # the store's millisecond clock moves on: the next message has a later stamp
            await wait_until(lambda: time.time_ns() // 1_000_000 > stamps[-1], 1, interval=0.001)
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


def delete_topic(topic: str) -> RemotingCommand:
    return RemotingCommand.request(215, DeleteTopicRequestHeader(topic=topic))


async def test_delete_topic_in_broker(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        cq_dir = broker.store.config.consume_queue_dir
        assert (await c.invoke_sync(addr, create_topic("DelT", 4))).code == 0
        for qid in (0, 0, 0, 1):
            assert (await c.invoke_sync(addr, wire.send_v1("DelT", b"old", queue_id=qid))).code == 0
        await c.invoke_sync(addr, wire.send_v1("Other", b"o"))
        await c.invoke_sync(addr, RemotingCommand.request(15, ext_fields={
            "consumerGroup": "CG", "topic": "DelT", "queueId": "0", "commitOffset": "3"}))
        assert {"DelT", "Other"} <= set(os.listdir(cq_dir))
        registrations = broker.registrations

        async with trio.open_nursery() as nursery:
            held: list[RemotingCommand] = []

            async def hold() -> None:  # a pull held on the topic while it is deleted
                held.append(await c.invoke_sync(addr, wire.pull("DelT", 0, 3, suspend_ms=1000), 5))

            nursery.start_soon(hold)
            await held_count_reaches(broker, 1)
            r = await c.invoke_sync(addr, delete_topic("DelT"))
            assert r.code == 0 and r.remark is None, r.remark
        # the held pull, resumed when it times out, finds no topic (as Java re-runs it)
        assert held[0].code == 17 and "DelT" in held[0].remark

        # config gone (persisted), queues and files gone, other topics untouched
        assert broker.topics.select("DelT") is None
        on_disk = json.loads((tmp_path / "store" / "config" / "topics.json").read_text())
        assert "DelT" not in on_disk["topicConfigTable"] and "Other" in on_disk["topicConfigTable"]
        assert "DelT" not in broker.store.topics()
        assert "DelT" not in os.listdir(cq_dir) and "Other" in os.listdir(cq_dir)
        assert not [n for n in os.listdir(cq_dir) if n.startswith(".")]
        assert broker.store.get_max_offset("DelT", 0) == 0
        # consumer offsets stay, as in 4.9
        assert broker.offsets.query_offset("CG", "DelT", 0) == 3
        # registered again with the name server
        await wait_until(lambda: broker.registrations != registrations, 3, interval=0.02)

        # a send right after: auto-created again, queues start at 0
        r = await c.invoke_sync(addr, wire.send_v1("DelT", b"new", queue_id=0))
        assert r.code == 0 and r.ext_fields["queueOffset"] == "0"
        assert broker.topics.select("DelT").write_queue_nums == 4
        pulled = await c.invoke_sync(addr, wire.pull("DelT", 0, 0, suspend_ms=0))
        assert pulled.code == 0 and b"new" in pulled.body and b"old" not in pulled.body
        # deleting an unknown topic is SUCCESS, as Java
        assert (await c.invoke_sync(addr, delete_topic("NeverWas"))).code == 0


async def test_delete_topic_refusals(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_x", "RMQ_SYS_TRANS_HALF_TOPIC"):
            r = await c.invoke_sync(addr, delete_topic(topic))
            assert r.code == 1 and r.remark == f"The topic[{topic}] is conflict with system topic.", r.remark
        assert broker.topics.select("TBW102") is not None
        r = await c.invoke_sync(addr, RemotingCommand.request(215, ext_fields={"topic": " "}))
        assert r.code == 1 and r.remark == "The specified topic is blank."
        r = await c.invoke_sync(addr, RemotingCommand.request(215, ext_fields={}))
        assert r.code == 1 and "topic" in r.remark
