"""A PushConsumer answers the broker's forwarded admin calls (what mqadmin
``consumerStatus`` and ``consumeMessage`` send): GET_CONSUMER_RUNNING_INFO (307) with
Java's ``ConsumerRunningInfo`` and CONSUME_MESSAGE_DIRECTLY (309), through a real trocket
broker on loopback."""

from __future__ import annotations

import time

import pytest
import trio

from trocket.client.config import ClientConfig
from trocket.client.consumer import ConsumeResult, PushConsumer
from trocket.client.errors import BrokerResponseError
from trocket.client.instance import ClientInstance
from trocket.client.message import Message
from trocket.client.producer import Producer
from trocket.codecs.bodies.client import MessageQueue
from trocket.codecs.bodies.fastjson import loads
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader

from .conftest import running_broker


async def test_running_info_and_consume_directly_through_the_broker(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        seen: list[bytes] = []
        four = trio.Event()

        async def on_message(msg):
            seen.append(msg.body)
            if {b"m0", b"m1", b"m2", b"m3"} <= set(seen):
                four.set()
            if msg.body == b"boom":
                raise RuntimeError("the callback failed")
            return ConsumeResult.RECONSUME_LATER if msg.body == b"later" else ConsumeResult.SUCCESS

        async with Producer("AP", ns) as producer:
            sent = [await producer.send(Message("AT", f"m{i}".encode())) for i in range(4)]
            later = await producer.send(Message("AT", b"later"))
            boom = await producer.send(Message("AT", b"boom"))
        async with PushConsumer("AG", ns, {"AT": "*"}, on_message, consume_from="first",
                                max_concurrency=7) as consumer, \
                ClientInstance(ClientConfig(namesrv=ns)) as admin:
            with trio.fail_after(10):
                await four.wait()
                while not {b"later", b"boom"} <= set(seen):
                    await trio.sleep(0.02)
            # the sampler's pass (every 10 s in the background) run now
            stats = consumer.consume_stats
            stats.sample(int(time.time() * 1000), hour=True)
            addr = broker.broker_addr
            r = await admin.api.invoke(addr, RemotingCommand.request(307, GetConsumerRunningInfoRequestHeader(
                consumerGroup="AG", clientId=consumer.client_id, jstackEnable=False)))
            assert r.code == 0, r.remark
            info = loads(r.body)
            props = info["properties"]
            assert props["consumerGroup"] == "AG"
            assert props["PROP_CONSUMEORDERLY"] == "false"
            assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
            assert props["PROP_THREADPOOL_CORE_SIZE"] == "7"
            assert props["PROP_NAMESERVER_ADDR"] == ns
            assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 0
            assert sorted(s["topic"] for s in info["subscriptionSet"]) == ["%RETRY%AG", "AT"]
            table = {MessageQueue.from_key(k): v for k, v in info["mqTable"].items()}
            owned = set(consumer.assignment())
            assert set(table) == owned
            name = broker.config.broker_name
            committed = sum(table[MessageQueue("AT", name, q)]["commitOffset"] for q in range(4))
            assert committed >= 4  # consumed offsets the consumer holds in memory
            pq = table[MessageQueue("AT", name, sent[0].queue.queue_id)]
            assert pq["droped"] is False and pq["lastPullTimestamp"] > 0 and pq["lastConsumeTimestamp"] > 0
            # per subscribed topic, Java's ConsumeStatus from the sampled windows: 4 OK and
            # 2 failed (RECONSUME_LATER, an exception) on AT; nothing yet on the retry topic
            status = info["statusTable"]
            assert set(status) == {"AT", "%RETRY%AG"}
            assert status["%RETRY%AG"] == {"pullRT": 0.0, "pullTPS": 0.0, "consumeRT": 0.0, "consumeOKTPS": 0.0,
                                           "consumeFailedTPS": 0.0, "consumeFailedMsgs": 0}
            at, ok = status["AT"], stats.topic("AT").consume_ok.minute
            seconds = (ok[-1][0] - ok[0][0]) / 1000
            assert at["consumeOKTPS"] == pytest.approx(4 / seconds)
            assert at["consumeFailedTPS"] == pytest.approx(2 / seconds) and at["consumeFailedMsgs"] == 2
            assert at["pullTPS"] == pytest.approx(6 / seconds) and at["pullRT"] >= 0 and at["consumeRT"] >= 0

            async def direct(offset_msg_id: str) -> dict:
                r = await admin.api.invoke(addr, RemotingCommand.request(309, ConsumeMessageDirectlyResultRequestHeader(
                    consumerGroup="AG", clientId=consumer.client_id, msgId=offset_msg_id)))
                assert r.code == 0, r.remark
                return loads(r.body)

            n = len(seen)
            ok = await direct(sent[1].offset_msg_id)
            assert (ok["consumeResult"], ok["order"], ok["autoCommit"]) == ("CR_SUCCESS", False, True)
            assert seen[n] == b"m1"  # the listener got the message again
            assert (await direct(later.offset_msg_id))["consumeResult"] == "CR_LATER"
            failed = await direct(boom.offset_msg_id)
            assert failed["consumeResult"] == "CR_THROW_EXCEPTION" and "the callback failed" in failed["remark"]


async def test_lite_consumer_running_info_and_no_consume_directly(tmp_path):
    """A PullConsumer answers GET_CONSUMER_RUNNING_INFO as Java's lite consumer (its
    options and subscriptions, CONSUME_ACTIVELY, no queue table) and refuses
    CONSUME_MESSAGE_DIRECTLY with SYSTEM_ERROR: it has no listener to give it to."""
    from trocket.client import PullConsumer

    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with Producer("LP", ns) as producer:
            sent = await producer.send(Message("LT", b"x"))
        async with PullConsumer("LG", ns, consume_from="first", pull_batch_size=7) as consumer, \
                ClientInstance(ClientConfig(namesrv=ns)) as admin:
            consumer.subscribe("LT", "TagA || TagB")
            with trio.fail_after(10):
                while not consumer.assignment():
                    await trio.sleep(0.05)
            addr = broker.broker_addr
            r = await admin.api.invoke(addr, RemotingCommand.request(307, GetConsumerRunningInfoRequestHeader(
                consumerGroup="LG", clientId=consumer.client_id, jstackEnable=False)))
            assert r.code == 0, r.remark
            info = loads(r.body)
            props = info["properties"]
            assert (props["consumerGroup"], props["PROP_CONSUME_TYPE"], props["pull_batch_size"]) == \
                ("LG", "CONSUME_ACTIVELY", "7")
            assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 0 and props["PROP_NAMESERVER_ADDR"] == ns
            assert [(s["topic"], s["subString"]) for s in info["subscriptionSet"]] == [("LT", "TagA || TagB")]
            assert info["mqTable"] == {}
            r = await admin.api.invoke(addr, RemotingCommand.request(309, ConsumeMessageDirectlyResultRequestHeader(
                consumerGroup="LG", clientId=consumer.client_id, msgId=sent.offset_msg_id)))
            assert r.code == 1 and "CONSUME_MESSAGE_DIRECTLY" in r.remark, (r.code, r.remark)


async def test_consumer_status_through_the_broker(tmp_path):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (mqadmin getConsumerStatus): the broker asks the
    consumer GET_CONSUMER_STATUS_FROM_CLIENT and it answers the offsets it holds."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        seen: list[bytes] = []
        four = trio.Event()

        async def on_message(msg):
            seen.append(msg.body)
            if len(seen) >= 4:
                four.set()
            return ConsumeResult.SUCCESS

        async with Producer("SP", ns) as producer:
            for i in range(4):
                await producer.send(Message("ST", f"m{i}".encode()))
        async with PushConsumer("SG", ns, {"ST": "*"}, on_message, consume_from="first") as consumer, \
                ClientInstance(ClientConfig(namesrv=ns)) as admin:
            with trio.fail_after(10):
                await four.wait()
            addr = broker.broker_addr
            status = await admin.api.get_consumer_status(addr, "ST", "SG")
            assert list(status) == [consumer.client_id]
            held = consumer.offset_table("ST")
            assert status[consumer.client_id] == held and sum(held.values()) == 4
            assert {mq.topic for mq in held} == {"ST"}
            assert await admin.api.get_consumer_status(addr, "ST", "SG", "not-this-one") == {}
            # the topic it does not consume: an empty table from the client
            assert await admin.api.get_consumer_status(addr, "Nope", "SG") == {consumer.client_id: {}}
        with pytest.raises(BrokerResponseError, match=r"No Any Consumer online in the consumer group: \[SG\]"):
            await admin_status(broker)


async def admin_status(broker):
    async with ClientInstance(ClientConfig(namesrv=";".join(broker.namesrv_addrs))) as admin:
        await admin.api.get_consumer_status(broker.broker_addr, "ST", "SG")
