"""Consumer-group administration against a real broker: subscription-group configs
(200, 201, 207) persisted and honoured by pull and send-back, connections (203, 204),
who consumes a topic (300), offset cloning (314), the reset (222 -> 220 to the online
clients), calls forwarded to a client (307, 309), every producer (328), the clients'
offsets (223 -> 221 to the online clients), correction offsets (308)."""

from __future__ import annotations

import json
import os
import time

import trio

from trocket.codecs.bodies.client import (
    ConsumerData,
    HeartbeatData,
    MessageModel,
    MessageQueue,
    ProducerData,
    SubscriptionData,
)
from trocket.codecs.bodies.groups import (
    ConsumerConnection,
    GetConsumerStatusBody,
    GroupList,
    ProducerConnection,
    ProducerTableInfo,
    QueryCorrectionOffsetBody,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from trocket.codecs.command import LanguageCode, RemotingCommand
from trocket.codecs.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryCorrectionOffsetHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.message.record import decode_record
from trocket.remoting import ClientConfig, RemotingClient

from ..waiting import wait_until


def update_group(config: SubscriptionGroupConfig) -> RemotingCommand:
    return RemotingCommand.request(200, body=config.to_body())


def heartbeat(client_id: str, group: str, topics=("GT",), *, model=MessageModel.CLUSTERING, producer: str | None = None):
    data = HeartbeatData(
        client_id,
        producers=[ProducerData(producer)] if producer else [],
        consumers=[ConsumerData(group, message_model=model, subscriptions=[SubscriptionData(t) for t in topics])],
    )
    return RemotingCommand.request(34, body=data.encode(), language=LanguageCode.JAVA, version=409)


def commit(group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    return RemotingCommand.request(15, UpdateConsumerOffsetRequestHeader(
        consumerGroup=group, topic=topic, queueId=queue_id, commitOffset=offset))


async def groups_of(c, addr) -> SubscriptionGroupWrapper:
    r = await c.invoke_sync(addr, RemotingCommand.request(201))
    assert r.code == 0
    return SubscriptionGroupWrapper.from_body(r.body)


async def test_subscription_groups_created_listed_deleted_and_persisted(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        table = await groups_of(c, addr)
        assert "TOOLS_CONSUMER" in table.table and "G1" not in table.table  # Java's built-in groups
        version = table.counter
        r = await c.invoke_sync(addr, update_group(SubscriptionGroupConfig("G1", retry_queue_nums=3, retry_max_times=5)))
        assert r.code == 0, r.remark
        table = await groups_of(c, addr)
        assert table.table["G1"].retry_queue_nums == 3 and table.counter == version + 1
        # bad input: a clear error, nothing changed
        for body, remark in [
            (b"{not json", "does not decode"),
            (b'{"groupName":"G1","retryQueueNums":"three"}', "retryQueueNums"),
            (b'{"groupName":"G1","consumeEnable":"maybe"}', "consumeEnable"),
            (b'{"retryQueueNums":2}', "groupName"),
            (b'{"groupName":"bad/name"}', "illegal characters"),
            (b'{"groupName":"G1","retryMaxTimes":-1}', "cannot be negative"),
        ]:
            r = await c.invoke_sync(addr, RemotingCommand.request(200, body=body))
            assert r.code == 1 and remark in r.remark, (body, r.remark)
        assert (await groups_of(c, addr)).table["G1"] == SubscriptionGroupConfig("G1", retry_queue_nums=3, retry_max_times=5)
        # a pull by an unknown group creates it (autoCreateSubscriptionGroup), persisted later
        await c.invoke_sync(addr, wire.send_v1("GT", b"x", properties=wire.props()))
        assert (await c.invoke_sync(addr, wire.pull("GT", group="Auto", sys_flag=4))).code == 0
        assert "Auto" in (await groups_of(c, addr)).table
        # 207 with its offsets
        assert (await c.invoke_sync(addr, commit("G2", "GT", 0, 1))).code == 0
        r = await c.invoke_sync(addr, update_group(SubscriptionGroupConfig("G2")))
        r = await c.invoke_sync(addr, RemotingCommand.request(207, DeleteSubscriptionGroupRequestHeader(groupName="G2", removeOffset=True)))
        assert r.code == 0
        assert "G2" not in (await groups_of(c, addr)).table and broker.offsets.query_offset("G2", "GT", 0) == -1
        r = await c.invoke_sync(addr, RemotingCommand.request(207, DeleteSubscriptionGroupRequestHeader(groupName="Never")))
        assert r.code == 0  # as Java: nothing to delete is no error
    # a restart keeps them (Auto was persisted at shutdown)
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        table = await groups_of(c, broker.broker_addr)
        assert table.table["G1"].retry_max_times == 5 and "Auto" in table.table and "G2" not in table.table
    saved = json.loads((tmp_path / "store" / "config" / "subscriptionGroup.json").read_text())
    assert saved["subscriptionGroupTable"]["G1"]["retryQueueNums"] == 3


async def test_consume_enable_broadcast_and_auto_create_are_honoured(tmp_path, wire):
    async with wire.running_broker(tmp_path, auto_create_subscription_group=False) as broker, wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, wire.send_v1("GT", b"x", properties=wire.props()))
        r = await c.invoke_sync(addr, wire.pull("GT", group="Unknown", sys_flag=4))
        assert r.code == 26 and r.remark.startswith("subscription group [Unknown] does not exist")
        assert (await c.invoke_sync(addr, update_group(SubscriptionGroupConfig("Known")))).code == 0
        assert (await c.invoke_sync(addr, wire.pull("GT", group="Known", sys_flag=4))).code == 0
        # a CID_RMQ_SYS_ group is always created
        assert (await c.invoke_sync(addr, wire.pull("GT", group="CID_RMQ_SYS_X", sys_flag=4))).code == 0
        # consumeEnable off: NO_PERMISSION; back on: served
        await c.invoke_sync(addr, update_group(SubscriptionGroupConfig("Known", consume_enable=False)))
        r = await c.invoke_sync(addr, wire.pull("GT", group="Known", sys_flag=4))
        assert (r.code, r.remark) == (16, "subscription group no permission, Known")
        await c.invoke_sync(addr, update_group(SubscriptionGroupConfig("Known")))
        assert (await c.invoke_sync(addr, wire.pull("GT", group="Known", sys_flag=4))).code == 0
        # a broadcasting group whose config forbids it (its registered subscription is used)
        await c.invoke_sync(addr, update_group(SubscriptionGroupConfig("Bc", consume_broadcast_enable=False)))
        assert (await c.invoke_sync(addr, heartbeat("bc-1", "Bc", model=MessageModel.BROADCASTING))).code == 0
        r = await c.invoke_sync(addr, wire.pull("GT", group="Bc", sys_flag=0, subscription=None))
        assert (r.code, r.remark) == (16, "the consumer group[Bc] can not consume by broadcast way")
        # a send-back of an unknown group
        phys = decode_offset_msg_id(
            (await c.invoke_sync(addr, wire.send_v1("GT", b"y", properties=wire.props()))).ext_fields["msgId"]).offset
        r = await c.invoke_sync(addr, RemotingCommand.request(36, ext_fields={"offset": str(phys), "group": "Unknown", "delayLevel": "0"}))
        assert r.code == 26 and r.remark.startswith("subscription group not exist, Unknown")


async def test_retry_queue_nums_and_retry_max_times_drive_send_back(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, update_group(SubscriptionGroupConfig("R3", retry_queue_nums=3, retry_max_times=1)))
        assert (await c.invoke_sync(addr, heartbeat("r-1", "R3"))).code == 0
        tc = broker.topics.select("%RETRY%R3")
        assert (tc.read_queue_nums, tc.write_queue_nums) == (3, 3)
        sent = await c.invoke_sync(addr, wire.send_v1("GT", b"z", properties=wire.props()))
        phys = decode_offset_msg_id(sent.ext_fields["msgId"]).offset

        def back(offset: int, group: str) -> RemotingCommand:  # an old client: the group's retryMaxTimes counts
            return RemotingCommand.request(36, ext_fields={"offset": str(offset), "group": group, "delayLevel": "0",
                                                           "maxReconsumeTimes": "99"}, version=63)

        for _ in range(12):
            assert (await c.invoke_sync(addr, back(phys, "R3"))).code == 0
        held = broker.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 2)  # level 3
        queues = set()
        for offset in range(held):
            entry = broker.store.get_queue_entry("SCHEDULE_TOPIC_XXXX", 2, offset)
            msg, _ = decode_record(broker.store.select_one_message_by_offset(entry[0]))
            queues.add(int(msg.properties["REAL_QID"]))
        assert queues <= {0, 1, 2} and len(queues) > 1  # random among the group's 3 retry queues
        # a message consumed once already: retryMaxTimes 1 reached -> the dead letter queue
        retried = broker.store.get_queue_entry("SCHEDULE_TOPIC_XXXX", 2, 0)
        assert (await c.invoke_sync(addr, back(retried[0], "R3"))).code == 0
        assert broker.store.get_max_offset("%DLQ%R3", 0) == 1
        # retryQueueNums 0: nothing is kept for a retry
        await c.invoke_sync(addr, update_group(SubscriptionGroupConfig("R0", retry_queue_nums=0)))
        assert (await c.invoke_sync(addr, back(phys, "R0"))).code == 0
        assert broker.topics.select("%RETRY%R0") is None and broker.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 2) == held


async def test_connections_consume_by_who_and_clone(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        assert (await c.invoke_sync(addr, heartbeat("cid-1", "CG", ("GT", "Other"), producer="PG1"))).code == 0
        r = await c.invoke_sync(addr, RemotingCommand.request(203, GetConsumerConnectionListRequestHeader(consumerGroup="CG")))
        conn = ConsumerConnection.from_body(r.body)
        assert [(x.client_id, x.language, x.version) for x in conn.connections] == [("cid-1", "JAVA", 409)]
        assert set(conn.subscriptions) == {"GT", "Other"} and conn.message_model is MessageModel.CLUSTERING
        r = await c.invoke_sync(addr, RemotingCommand.request(203, GetConsumerConnectionListRequestHeader(consumerGroup="Off")))
        assert (r.code, r.remark) == (206, "the consumer group[Off] not online")
        r = await c.invoke_sync(addr, RemotingCommand.request(204, GetProducerConnectionListRequestHeader(producerGroup="PG1")))
        assert [x.client_id for x in ProducerConnection.from_body(r.body).connections] == ["cid-1"]
        r = await c.invoke_sync(addr, RemotingCommand.request(204, GetProducerConnectionListRequestHeader(producerGroup="PG2")))
        assert (r.code, r.remark) == (1, "the producer group[PG2] not exist")
        # 300: the group online on the topic and one with offsets on it
        await c.invoke_sync(addr, wire.send_v1("GT", b"x", properties=wire.props()))
        assert (await c.invoke_sync(addr, commit("Offline", "GT", 0, 1))).code == 0
        r = await c.invoke_sync(addr, RemotingCommand.request(300, QueryTopicConsumeByWhoRequestHeader(topic="GT")))
        assert sorted(GroupList.from_body(r.body).groups) == ["CG", "Offline"]
        # 314: Offline's offsets copied to Copy
        r = await c.invoke_sync(addr, RemotingCommand.request(314, CloneGroupOffsetRequestHeader(
            srcGroup="Offline", destGroup="Copy", topic="GT")))
        assert r.code == 0 and broker.offsets.query_offset("Copy", "GT", 0) == 1


async def test_reset_offset_with_nobody_and_with_a_client_online(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        stamps = []
        for i in range(6):
            r = await c.invoke_sync(addr, wire.send_v1("RT", b"m%d" % i, queue_id=0, properties=wire.props()))
            stamps.append(broker.store.get_message_store_timestamp("RT", 0, i))
            await trio.sleep(0.01)
        for q in range(4):
            await c.invoke_sync(addr, commit("RG", "RT", q, broker.store.get_max_offset("RT", q)))

        def reset(timestamp: int, group: str = "RG", force: bool = True) -> RemotingCommand:
            return RemotingCommand.request(222, ResetOffsetRequestHeader(topic="RT", group=group, timestamp=timestamp, isForce=force))

        # nobody online: the broker moves the offsets itself (Java would answer CONSUMER_NOT_ONLINE)
        r = await c.invoke_sync(addr, reset(stamps[2]))
        assert r.code == 0, r.remark
        table = ResetOffsetBody.from_body(r.body).offset_table
        assert table[MessageQueue("RT", broker.config.broker_name, 0)] == 2
        assert broker.offsets.query_offset("RG", "RT", 0) == 2
        # not forced: an offset only moves back
        r = await c.invoke_sync(addr, reset(-1, force=False))
        assert ResetOffsetBody.from_body(r.body).offset_table[MessageQueue("RT", broker.config.broker_name, 0)] == 2
        # unknown group / topic
        r = await c.invoke_sync(addr, reset(0, group="Nobody"))
        assert (r.code, r.remark) == (1, "THe consumer group <Nobody> not exist")
        r = await c.invoke_sync(addr, RemotingCommand.request(222, ResetOffsetRequestHeader(topic="Nope", group="RG", timestamp=0, isForce=True)))
        assert r.code == 1 and "no topic in this broker. topic=Nope" in r.remark

        # a client online gets RESET_CONSUMER_CLIENT_OFFSET with the table
        notices: list[RemotingCommand] = []
        got = trio.Event()

        async def on_reset(conn, request):
            notices.append(request)
            got.set()

        async with RemotingClient(ClientConfig()) as peer:
            peer.register_processor(220, on_reset)
            assert (await peer.invoke_sync(addr, heartbeat("peer-1", "RG", ("RT",)), 5)).code == 0
            r = await c.invoke_sync(addr, reset(-1))
            assert r.code == 0
            with trio.fail_after(5):
                await got.wait()
        (notice,) = notices
        assert notice.is_oneway and notice.ext_fields["group"] == "RG" and notice.ext_fields["timestamp"] == "-1"
        body = ResetOffsetBody.from_body(notice.body).offset_table
        assert body[MessageQueue("RT", broker.config.broker_name, 0)] == 6
        # with a client online the client moves its offsets (as Java): the broker's stay
        assert broker.offsets.query_offset("RG", "RT", 0) == 2


async def test_running_info_and_consume_directly_are_forwarded(tmp_path, wire, logical_clock):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        sent = await c.invoke_sync(addr, wire.send_v1("FT", b"direct", properties=wire.props()))
        msg_id = sent.ext_fields["msgId"]
        seen: list[RemotingCommand] = []

        async def running_info(conn, request):
            seen.append(request)
            return request.make_response(0, body=b'{"properties":{"consumerGroup":"FG"}}')

        async def consume_directly(conn, request):
            seen.append(request)
            msg, _ = decode_record(request.body)
            return request.make_response(0, body=json.dumps({"body": msg.body.decode()}).encode())

        async def silent(conn, request):
            await trio.sleep_forever()

        async with RemotingClient(ClientConfig()) as peer:
            peer.register_processor(307, running_info)
            peer.register_processor(309, consume_directly)
            assert (await peer.invoke_sync(addr, heartbeat("peer-f", "FG", ("FT",)), 5)).code == 0
            r = await c.invoke_sync(addr, RemotingCommand.request(307, GetConsumerRunningInfoRequestHeader(
                consumerGroup="FG", clientId="peer-f", jstackEnable=False)))
            assert (r.code, r.body) == (0, b'{"properties":{"consumerGroup":"FG"}}')
            r = await c.invoke_sync(addr, RemotingCommand.request(309, ConsumeMessageDirectlyResultRequestHeader(
                consumerGroup="FG", clientId="peer-f", msgId=msg_id)))
            assert r.code == 0 and json.loads(r.body) == {"body": "direct"}
            assert seen[1].ext_fields["brokerName"] == broker.config.broker_name
            r = await c.invoke_sync(addr, RemotingCommand.request(307, GetConsumerRunningInfoRequestHeader(
                consumerGroup="FG", clientId="someone-else")))
            assert (r.code, r.remark) == (1, "The Consumer <FG> <someone-else> not online")
        # a client that does not answer: CONSUME_MSG_TIMEOUT after 10 s
        async with RemotingClient(ClientConfig()) as mute:
            mute.register_processor(307, silent)
            assert (await mute.invoke_sync(addr, heartbeat("mute", "MG", ("FT",)), 5)).code == 0
            r = await c.invoke_sync(addr, RemotingCommand.request(307, GetConsumerRunningInfoRequestHeader(
                consumerGroup="MG", clientId="mute")), 30)
            assert r.code == 207 and r.remark.startswith("consumer <MG> <mute> Timeout:")


async def test_slave_refuses_group_changes_and_copies_the_masters(tmp_path, wire):
    async with wire.running_broker(tmp_path / "m", ha_listen=("127.0.0.1", 0)) as master, wire.client() as c:
        maddr = master.broker_addr
        assert (await c.invoke_sync(maddr, update_group(SubscriptionGroupConfig("Synced", retry_max_times=7)))).code == 0
        async with wire.running_broker(
            tmp_path / "s", namesrv_addrs=master.namesrv.address, broker_role="SLAVE", slave_sync_interval_ms=100,
        ) as slave:
            saddr = slave.broker_addr
            r = await c.invoke_sync(saddr, update_group(SubscriptionGroupConfig("X")))
            assert r.code == 1 and r.remark.startswith("Can't modify topic or subscription group from slave broker")
            r = await c.invoke_sync(saddr, RemotingCommand.request(207, DeleteSubscriptionGroupRequestHeader(groupName="Synced")))
            assert r.code == 1

            async def synced():
                return (await groups_of(c, saddr)).table.get("Synced")

            copied = await wait_until(synced, 10, interval=0.1)
            assert copied.retry_max_times == 7


async def test_all_producer_info(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, RemotingCommand.request(328))
        assert (r.code, ProducerTableInfo.from_body(r.body).data) == (0, {})
        before = int(time.time() * 1000)
        assert (await c.invoke_sync(addr, heartbeat("cid-p", "CG", producer="PA"))).code == 0
        async with RemotingClient(ClientConfig()) as other:
            assert (await other.invoke_sync(addr, heartbeat("cid-q", "CG", producer="PA"), 5)).code == 0
            assert (await other.invoke_sync(addr, heartbeat("cid-q", "CG", producer="PB"), 5)).code == 0
            r = await c.invoke_sync(addr, RemotingCommand.request(328))
        assert r.code == 0, r.remark
        data = ProducerTableInfo.from_body(r.body).data
        assert {g: sorted(p.client_id for p in ps) for g, ps in data.items()} == {"PA": ["cid-p", "cid-q"], "PB": ["cid-q"]}
        for p in data["PA"] + data["PB"]:
            assert p.remote_ip.startswith("/127.0.0.1:") and (p.language, p.version) == ("JAVA", 409)
            assert before - 1000 <= p.last_update_timestamp <= int(time.time() * 1000) + 1000


async def test_consumer_status_asks_each_online_client(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        name = broker.config.broker_name

        def answering(offset: int):
            async def on_status(conn, request):
                h = request.ext_fields
                assert (h["topic"], h["group"]) == ("ST", "SG") and "clientAddr" not in h
                body = GetConsumerStatusBody({MessageQueue("ST", name, 0): offset, MessageQueue("ST", name, 1): offset + 1})
                return request.make_response(0, body=body.to_body())
            return on_status

        async def failing(conn, request):
            return request.make_response(1, "no")

        def status(client: str | None = None, group: str = "SG") -> RemotingCommand:
            return RemotingCommand.request(223, GetConsumerStatusRequestHeader(topic="ST", group=group, clientAddr=client))

        async with RemotingClient(ClientConfig()) as one, RemotingClient(ClientConfig()) as two, \
                RemotingClient(ClientConfig()) as bad:
            one.register_processor(221, answering(5))
            two.register_processor(221, answering(9))
            bad.register_processor(221, failing)
            for peer, cid in ((one, "c-one"), (two, "c-two"), (bad, "c-bad")):
                assert (await peer.invoke_sync(addr, heartbeat(cid, "SG", ("ST",)), 5)).code == 0
            r = await c.invoke_sync(addr, status())
            assert r.code == 0, r.remark
            table = GetConsumerStatusBody.from_body(r.body).consumer_table
            assert table == {
                "c-one": {MessageQueue("ST", name, 0): 5, MessageQueue("ST", name, 1): 6},
                "c-two": {MessageQueue("ST", name, 0): 9, MessageQueue("ST", name, 1): 10},
            }  # the client that failed is left out, as Java leaves it
            r = await c.invoke_sync(addr, status("c-two"))
            assert list(GetConsumerStatusBody.from_body(r.body).consumer_table) == ["c-two"]
            r = await c.invoke_sync(addr, status("nobody"))
            assert (r.code, GetConsumerStatusBody.from_body(r.body).consumer_table) == (0, {})
        r = await c.invoke_sync(addr, status(group="Offline"))
        assert (r.code, r.remark) == (1, "No Any Consumer online in the consumer group: [Offline]")
        r = await c.invoke_sync(addr, RemotingCommand.request(223, ext_fields={"topic": "ST"}))
        assert r.code == 1 and "group" in r.remark


async def test_query_correction_offset(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for q in (0, 1, 2):
            for _ in range(10):
                assert (await c.invoke_sync(addr, wire.send_v1("CT", b"m", queue_id=q))).code == 0
        for group, offsets in (("A", (3, 8, 5)), ("B", (6, 2, 5)), ("C", (1, 1, 1))):
            for q, offset in enumerate(offsets):
                assert (await c.invoke_sync(addr, commit(group, "CT", q, offset))).code == 0
        assert (await c.invoke_sync(addr, commit("A", "Other", 0, 0))).code == 0

        async def correction(compare: str, filters: str | None = None) -> dict[int, int]:
            r = await c.invoke_sync(addr, RemotingCommand.request(308, QueryCorrectionOffsetHeader(
                filterGroups=filters, compareGroup=compare, topic="CT")))
            assert r.code == 0, r.remark
            return QueryCorrectionOffsetBody.from_body(r.body).correction_offsets

        assert await correction("A") == {0: 1, 1: 1, 2: 1}  # the least of all, A among them
        # C left out: the least of A and B; A is behind it nowhere, B's queue 1 is the least
        assert await correction("A", "C") == {0: 3, 1: 2, 2: 5}
        # compared with C (behind both everywhere): no queue needs correcting
        assert await correction("C", "C") == {0: 3, 1: 2, 2: 5}  # a filtered group is not compared
        assert await correction("B", "C,A") == {0: 6, 1: 2, 2: 5}
        assert await correction("Nobody", "C") == {0: 3, 1: 2, 2: 5}
        # the filter removes nothing from the broker's offsets (Java's does: its live key set)
        assert broker.offsets.query_offset("C", "CT", 0) == 1
        r = await c.invoke_sync(addr, RemotingCommand.request(308, ext_fields={"topic": "CT"}))
        assert r.code == 1 and "compareGroup" in r.remark


async def test_query_correction_offset_of_a_group_behind_the_queues_minimum(tmp_path, wire):
    """An offset below the queue's minimum (its messages expired) is not counted, so a
    group left there is behind every counted one: ``Long.MAX_VALUE``, no correction."""
    async with wire.running_broker(tmp_path, commit_log_segment_size=64 * 1024, delete_when="99") as broker, \
            wire.client() as c:
        addr = broker.broker_addr
        for _ in range(40):
            assert (await c.invoke_sync(addr, wire.send_v1("CT", b"x" * 4000, queue_id=0))).code == 0
        first = broker.store.commit_log.files.files[0]
        old = time.time() - 100 * 3600
        os.utime(first.path, (old, old))
        assert broker.store.delete_expired(force=True, used_ratio=10).commit_log_segments == 1
        assert broker.store.get_min_offset("CT", 0) > 2
        assert (await c.invoke_sync(addr, commit("Late", "CT", 0, 2))).code == 0
        assert (await c.invoke_sync(addr, commit("Fast", "CT", 0, 30))).code == 0
        r = await c.invoke_sync(addr, RemotingCommand.request(308, QueryCorrectionOffsetHeader(
            compareGroup="Late", topic="CT")))
        assert QueryCorrectionOffsetBody.from_body(r.body).correction_offsets == {0: 2**63 - 1}
        r = await c.invoke_sync(addr, RemotingCommand.request(308, QueryCorrectionOffsetHeader(
            compareGroup="Fast", topic="CT")))
        assert QueryCorrectionOffsetBody.from_body(r.body).correction_offsets == {0: 30}
