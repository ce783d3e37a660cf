"""Request-reply against the in-process broker: ``Producer.request`` answered by a push
consumer that replies with ``send_reply``; the broker's CLUSTER on the request, the
reply stored on ``<cluster>_REPLY_TOPIC``; a reply after the timeout dropped cleanly;
``request_async`` with callbacks; 1,000 requests in flight at once; the blocking facade;
the broker's refusals of replies nobody can take."""

from __future__ import annotations

import threading
import time

import pytest
import trio

from trocket.client import (
    BlockingProducer,
    ClientError,
    ConsumeResult,
    Producer,
    PushConsumer,
    RequestTimeoutError,
    create_reply_message,
    new_message,
    send_reply,
)
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import SendMessageRequestHeaderV2
from trocket.codecs.message.properties import encode_properties

from ..broker.conftest import client as raw_client
from ..waiting import wait_until
from .conftest import running_broker

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


class Responder:
    """A push consumer of ``topic`` answering ``re:<body>`` after ``delay`` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.requests = []
        self.errors: list[BaseException] = []
        self.replier: Producer | None = None

    async def __call__(self, msg):
        self.requests.append(msg)
        if self.delay:
            await trio.sleep(self.delay)
        try:
            await send_reply(self.replier, msg, b"re:" + msg.body)
        except ClientError as exc:
            self.errors.append(exc)
        return ConsumeResult.SUCCESS


async def _responding(nursery, namesrv: str, topic: str, responder: Responder, group: str = "RpcResponders"):
    replier = Producer(f"{group}_replier", namesrv)
    await nursery.start(replier.run)
    responder.replier = replier
    consumer = PushConsumer(group, namesrv, {topic: "*"}, responder, consume_from="first", max_concurrency=64,
                            queue_parallelism=64)
    await nursery.start(consumer.run)
    return replier, consumer


async def test_request_and_reply(broker, namesrv):
    responder = Responder()
    async with trio.open_nursery() as nursery:
        replier, consumer = await _responding(nursery, namesrv, "Rpc", responder)
        async with Producer("RpcRequesters", namesrv) as requester:
            reply = await requester.request(new_message("Rpc", b"2+2", tags="math"), timeout=10)
            assert reply.body == b"re:2+2"
            assert reply.topic == REPLY_TOPIC
            props = reply.properties
            assert props["MSG_TYPE"] == "reply" and props["REPLY_TO_CLIENT"] == requester.instance.client_id
            assert props["TTL"] == "10000" and "ARRIVE_TIME" in props and "PUSH_REPLY_TIME" in props
            assert len(requester.instance.requests) == 0
            # the request as the responder got it: the broker added CLUSTER
            [req] = responder.requests
            assert req.properties["CLUSTER"] == "DefaultCluster"
            assert req.properties["CORRELATION_ID"] == props["CORRELATION_ID"]
        await consumer.aclose()
        await replier.aclose()
    # the reply is stored on the cluster's reply topic too (storeReplyMessageEnable)
    assert broker.store.get_max_offset(REPLY_TOPIC, 0) == 1


async def test_a_late_reply_is_dropped_and_request_async(broker, namesrv):
    responder = Responder(delay=0.6)
    async with trio.open_nursery() as nursery:
        replier, consumer = await _responding(nursery, namesrv, "RpcSlow", responder)
        async with Producer("RpcSlowRequesters", namesrv) as requester:
            t0 = trio.current_time()
            with pytest.raises(RequestTimeoutError, match=r"send request message to <RpcSlow> OK, but wait reply "
                                                          r"message timeout, 300 ms"):
                await requester.request(new_message("RpcSlow", b"late"), timeout=0.3)
            assert trio.current_time() - t0 < 0.5
            # the reply comes anyway: dropped, the responder's send still succeeds
            await wait_until(lambda: len(responder.requests) == 1 and broker.store.get_max_offset(REPLY_TOPIC, 0) == 1,
                             5, what="the late reply")
            assert responder.errors == [] and len(requester.instance.requests) == 0
            got: list = []
            fut = await requester.request_async(new_message("RpcSlow", b"async"), lambda r, e: got.append((r, e)),
                                                timeout=5)
            reply = await fut
            assert reply.body == b"re:async" and got == [(reply, None)]
            fut = await requester.request_async(new_message("RpcSlow", b"too late"), lambda r, e: got.append((r, e)),
                                                timeout=0.2)
            with pytest.raises(RequestTimeoutError):
                await fut
            assert isinstance(got[-1][1], RequestTimeoutError) and got[-1][0] is None
        await consumer.aclose()
        await replier.aclose()


async def test_a_thousand_requests_in_flight(broker, namesrv):
    responder = Responder()
    async with trio.open_nursery() as nursery:
        replier, consumer = await _responding(nursery, namesrv, "RpcMany", responder)
        async with Producer("RpcManyRequesters", namesrv) as requester:
            await requester.request(new_message("RpcMany", b"warm-up"), timeout=10)
            futs = [await requester.request_async(new_message("RpcMany", b"q%d" % i), timeout=30) for i in range(1000)]
            assert len(requester.instance.requests) > 0  # really in flight together
            replies = [await f for f in futs]
            assert [r.body for r in replies] == [b"re:q%d" % i for i in range(1000)]
            assert len(requester.instance.requests) == 0
        await consumer.aclose()
        await replier.aclose()


def test_create_reply_message_needs_the_cluster():
    msg = new_message("T", b"x")
    with pytest.raises(ClientError, match=r"property\[CLUSTER\] is null"):
        create_reply_message(msg, b"y")
    msg.properties.update(CLUSTER="C1", CORRELATION_ID="c", REPLY_TO_CLIENT="me", TTL="3000")
    reply = create_reply_message(msg, "ok")
    assert reply.topic == "C1_REPLY_TOPIC" and reply.body == b"ok"
    assert reply.properties == {"MSG_TYPE": "reply", "CORRELATION_ID": "c", "REPLY_TO_CLIENT": "me", "TTL": "3000"}


# -- the broker's answers to replies nobody can take ---------------------------------------------


def _reply_request(props: dict[str, str], code: int = 325) -> RemotingCommand:
    h = SendMessageRequestHeaderV2(
        a="G", b=REPLY_TOPIC, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0,
        i=encode_properties(props), j=0, k=False, m=False,
    )
    return RemotingCommand.request(code, h.to_v1() if code == 324 else h, body=b"answer")


async def test_reply_refusals(broker):
    async with raw_client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, _reply_request({"MSG_TYPE": "reply", "CORRELATION_ID": "x"}))
        assert (r.code, r.remark) == (1, "reply message properties[REPLY_TO_CLIENT] is null")
        assert r.ext_fields["queueId"] == "0" and r.ext_fields["MSG_REGION"] == "DefaultRegion"  # stored all the same
        r = await c.invoke_sync(addr, _reply_request({"MSG_TYPE": "reply", "REPLY_TO_CLIENT": "nobody@0"}, code=324))
        assert (r.code, r.remark) == (1, "push reply message fail, channel of <nobody@0> not found.")
        r = await c.invoke_sync(addr, RemotingCommand.request(325, ext_fields={"a": "G", "b": "T"}))
        assert r.code == 1 and "RemotingCommandException" in r.remark  # a malformed header
    assert broker.store.get_max_offset(REPLY_TOPIC, 0) == 2


# -- the blocking facade ----------------------------------------------------------------------------


def test_blocking_request(tmp_path):
    ready = threading.Event()
    box: dict = {}

    async def main():
        async with running_broker(tmp_path) as broker:
            ns = ";".join(broker.namesrv_addrs)
            responder = Responder()
            async with trio.open_nursery() as nursery:
                replier, consumer = await _responding(nursery, ns, "RpcBlocking", responder)
                box["ns"] = ns
                box["stop"] = trio.Event()
                box["token"] = trio.lowlevel.current_trio_token()
                ready.set()
                await box["stop"].wait()
                await consumer.aclose()
                await replier.aclose()

    t = threading.Thread(target=trio.run, args=(main,), daemon=True)
    t.start()
    assert ready.wait(10)
    try:
        with BlockingProducer("RpcBlockingRequesters", box["ns"]) as producer:
            reply = producer.request(new_message("RpcBlocking", b"ping"), timeout=10)
            assert reply.body == b"re:ping"
    finally:
        trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
        t.join(10)
