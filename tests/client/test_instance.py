"""The client core against a real broker: heartbeats and registration as the broker sees
them, consumers' notices, broker -> client requests, the route poll, and the typed broker
calls consumers use."""

from __future__ import annotations

import attrs
import pytest
import trio

from trocket.client import ClientConfig, ClientInstance, MessageQueue, NoRouteError, new_message
from trocket.client.producer import Producer
from trocket.codecs.bodies.client import (
    ConsumerData,
    LockBatchRequestBody,
    UnlockBatchRequestBody,
    build_subscription,
)
from trocket.codecs.command import RemotingCommand

from ..waiting import wait_until
from .conftest import fake_server, route_body


@attrs.define
class FakeConsumer:
    """A ConsumerHandle that records what the instance hands it."""

    group: str
    topic: str
    notices: int = 0
    routes: list = attrs.field(factory=list)
    changed: trio.Event = attrs.field(factory=trio.Event)
    supported: bool = True

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, subscriptions=[build_subscription(self.topic, "*")])

    def subscribed_topics(self):
        return [self.topic]

    def on_route_changed(self, topic, queues) -> None:
        self.routes.append((topic, queues))

    def on_consumer_ids_changed(self) -> None:
        self.notices += 1
        self.changed.set()

    async def running_info(self) -> bytes:
        if not self.supported:
            raise NotImplementedError
        return b'{"properties":{}}'

    async def consume_directly(self, msg, broker_name):
        raise NotImplementedError

    async def reset_offset(self, topic, timestamp, body):
        raise NotImplementedError

    def offset_table(self, topic):
        return {}


def client_id_of(inst: ClientInstance) -> str:
    return inst.client_id


async def test_client_id_is_ip_at_instance():
    cfg = ClientConfig(namesrv="127.0.0.1:9876", client_ip="10.1.2.3", instance_name="I1", unit_name="U")
    assert cfg.client_id == "10.1.2.3@I1@U"
    auto = ClientConfig(namesrv="127.0.0.1:9876", client_ip="10.1.2.3")
    assert auto.client_id.startswith("10.1.2.3@") and "#" in auto.instance_name  # pid#nanotime
    with pytest.raises(ValueError, match="host:port"):
        ClientConfig(namesrv="a;b:x")


async def test_producer_heartbeat_and_unregister_as_the_broker_sees_them(broker, namesrv):
    producers = broker.ctx.producers
    async with Producer("HbPG", namesrv) as producer:
        await producer.send(new_message("HbT", b"x"))  # learns the broker
        await wait_until(lambda: "HbPG" in producers, 5)
        assert producers.client_ids("HbPG") == [producer.instance.client_id]
    # UNREGISTER_CLIENT on close
    await wait_until(lambda: "HbPG" not in producers or not producers.client_ids("HbPG"), 5)


async def test_consumers_registered_notified_and_unregistered(broker, namesrv):
    async with Producer("Warm", namesrv) as producer:
        await producer.send(new_message("CT", b"x"))
    addr = broker.broker_addr
    async with ClientInstance(ClientConfig(namesrv=namesrv)) as one, ClientInstance(ClientConfig(namesrv=namesrv)) as two:
        c1 = FakeConsumer("CG", "CT")
        one.register_consumer(c1)
        # the broker registers the topic its first send created soon after; then the
        # instance has the broker table, and c1 gets the queues
        await wait_until(lambda: one.update_route("CT"), 5, interval=0.02)
        assert c1.routes and len(c1.routes[-1][1]) == 4
        assert await one.send_heartbeat() == 1
        assert await one.api.get_consumer_list(addr, "CG") == [one.client_id]
        c2 = FakeConsumer("CG", "CT")
        two.register_consumer(c2)
        await two.update_route("CT")
        await two.send_heartbeat()
        with trio.fail_after(5):  # NOTIFY_CONSUMER_IDS_CHANGED reached c1 through the instance
            await c1.changed.wait()
        assert sorted(await one.api.get_consumer_list(addr, "CG")) == sorted([one.client_id, two.client_id])
        await two.unregister_consumer("CG")
        assert await one.api.get_consumer_list(addr, "CG") == [one.client_id]


async def test_broker_requests_reach_the_consumer_or_get_java_answers():
    conns = []

    async def heartbeat(conn, request):
        conns.append(conn)
        return request.make_response(0)

    async with fake_server({34: heartbeat, 105: lambda c, r: r.make_response(0, body=route_body({"b": "x:1"}))}) as srv:
        async with ClientInstance(ClientConfig(namesrv=srv)) as inst:
            inst.brokers["b"] = {0: srv}
            handle = FakeConsumer("G", "T")
            inst.register_consumer(handle)
            await inst.send_heartbeat()
            server_conn = conns[-1]

            async def ask(code: int, group: str, key: str = "consumerGroup") -> RemotingCommand:
                req = RemotingCommand.request(code, ext_fields={key: group, "clientId": inst.client_id})
                return await server_conn.invoke_sync(req, 3)

            ok = await ask(307, "G")
            assert ok.code == 0 and ok.body == b'{"properties":{}}'
            unknown = await ask(307, "Nobody")
            assert unknown.code == 1 and unknown.remark == "The Consumer Group <Nobody> not exist in this consumer"
            handle.supported = False
            refused = await ask(307, "G")
            assert refused.code == 1 and "not supported" in refused.remark
            reset = await ask(220, "G", key="group")
            assert reset.code == 1 and "RESET_CONSUMER_CLIENT_OFFSET is not supported" in reset.remark
            notice = RemotingCommand.request(40, ext_fields={"consumerGroup": "G"}, oneway=True)
            await server_conn.invoke_oneway(notice, 3)
            with trio.fail_after(5):
                await handle.changed.wait()


async def test_route_poll_refreshes_interesting_topics():
    asked = []

    async def route(conn, request):
        asked.append(request.ext_fields["topic"])
        return request.make_response(0, body=route_body({"b": "127.0.0.1:1"}), ext_fields={})

    async with fake_server({105: route}) as ns:
        cfg = ClientConfig(namesrv=ns, poll_namesrv_interval=0.05)
        async with ClientInstance(cfg) as inst:
            inst.register_consumer(FakeConsumer("G", "Polled"))
            await wait_until(lambda: asked.count("Polled") >= 3, 5)
            assert inst.master_addr("b") == "127.0.0.1:1"


async def test_consumer_calls_against_the_broker(broker, namesrv):
    async with Producer("ApiPG", namesrv) as producer:
        for i in range(5):
            await producer.send_orderly(new_message("ApiT", b"m%d" % i), key="k")
        inst = producer.instance
        await wait_until(lambda: inst.update_route("ApiT"), 5, interval=0.02)
        addr = inst.master_addr("broker-a")
        maxes = {mq: await inst.api.get_max_offset(addr, mq) for mq in await inst.subscribe_queues("ApiT")}
        assert sorted(maxes.values()) == [0, 0, 0, 5]  # one key, one queue
        mq = max(maxes, key=maxes.get)
        assert await inst.api.get_min_offset(addr, mq) == 0
        assert await inst.api.search_offset(addr, mq, 0) == 0
        await inst.api.update_consumer_offset(addr, "ApiCG", mq, 3)
        assert await inst.api.query_consumer_offset(addr, "ApiCG", mq) == 3
        locked = await inst.api.lock_batch(addr, LockBatchRequestBody("ApiCG", inst.client_id, [mq]))
        assert locked == [mq]
        await inst.api.unlock_batch(addr, UnlockBatchRequestBody("ApiCG", inst.client_id, [mq]))
        with pytest.raises(NoRouteError):
            await inst.route("NoSuchTopicAnywhere")
    assert isinstance(mq, MessageQueue)


async def test_brokers_gone_from_every_route_are_forgotten():
    brokers = {"a": "127.0.0.1:1", "b": "127.0.0.1:2"}

    async def route(conn, request):
        return request.make_response(0, body=route_body(dict(brokers)), ext_fields={})

    async with fake_server({105: route}) as ns:
        cfg = ClientConfig(namesrv=ns, poll_namesrv_interval=0.05)
        async with ClientInstance(cfg) as inst:
            inst.register_consumer(FakeConsumer("G", "T"))
            await inst.update_route("T")
            assert set(inst.brokers) == {"a", "b"}
            del brokers["a"]  # broker a left the cluster
            await wait_until(lambda: "a" not in inst.brokers, 5)
            assert set(inst.brokers) == {"b"} and inst.master_addr("a") is None


async def test_an_answer_that_does_not_decode_is_a_typed_error():
    from trocket.client import BrokerResponseError

    async def junk(conn, request):
        return request.make_response(0, body=b"{not json", ext_fields={})

    async with fake_server({105: junk, 106: junk}) as ns:
        async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
            with pytest.raises(BrokerResponseError, match="route of T: the answer does not decode"):
                await inst.update_route("T")
            with pytest.raises(BrokerResponseError, match="cluster info: the answer does not decode"):
                await inst.api.get_cluster_info()
