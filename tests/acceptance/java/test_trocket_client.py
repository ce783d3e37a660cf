"""trocket's own client against the Java 4.9.8 name server and broker (issue 28, item 2),
and against ``trocket broker`` in the same test: the producer (every mode, TBW102
auto-create), the push consumer (clustering, broadcasting, orderly with the broker's
locks, RECONSUME_LATER), the lite pull consumer, the blocking facade, and
``trocket send / consume / admin``."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import trio

from acc_tools import BrokerProcess, RawClient, trocket_command
from java_tools import Peer, on_both, route_queue_datas, wait_for
from trocket.client import (
    BlockingProducer,
    BlockingPullConsumer,
    BrokerResponseError,
    ClientConfig,
    ConsumeResult,
    MessageSelector,
    MessageModel,
    Producer,
    PullConsumer,
    PushConsumer,
    SendStatus,
    new_message,
)
from trocket.codecs.codes import RequestCode, ResponseCode

pytestmark = pytest.mark.usefixtures("java_bundle", "runs_in_background", "background_outcome")

#: short client timers: a test should not wait for a 20 s rebalance
FAST = {"rebalance_interval_s": 2.0}

#: test name -> its body, for the tests whose bodies mostly wait (a retry's 10 s, a dead
#: letter's), and whether it waits for the Java runner first: see background_outcome
BACKGROUND: dict[str, tuple[Callable[[Peer, str], Awaitable[None]], bool]] = {}


def background(test: str, *, after_runner: bool = False):
    """``@background("test_x")``: the decorated ``async def body(peer, broker)`` is the body
    of ``test_x``, which takes its outcome from :func:`background_outcome`.
    ``after_runner=True``: the body starts once the Java runner against its broker has
    ended (a body that adds a broker to the name server the runner's scenarios share,
    whose cluster-wide calls would meet it)."""

    def register(body):
        BACKGROUND[test] = (body, after_runner)
        return body

    return register


@pytest.fixture(scope="module")
def background_outcome(request):
    """The BACKGROUND bodies of the selected tests, each against its broker, started when
    this module starts (after the brokers and the Java runners), in threads of their own
    (a ``trio.run`` each): their waits overlap the other tests. ``outcome(test, broker)``
    waits for the body's end and re-raises what it raised (its failed assertion)."""
    wanted = {(item.originalname, item.callspec.params["broker"]) for item in request.session.items
              if item.originalname in BACKGROUND and hasattr(item, "callspec")}
    peers = {broker: request.getfixturevalue(f"{broker}_peer") for _, broker in wanted}
    scenario_runs = request.getfixturevalue("scenario_runs")

    def run(test: str, broker: str) -> None:
        body, after_runner = BACKGROUND[test]
        if after_runner:
            scenario_runs(peers[broker]).wait_done(240)
        trio.run(body, peers[broker], broker)

    with concurrent.futures.ThreadPoolExecutor(max(1, len(wanted)), thread_name_prefix="background") as pool:
        futures = {(test, broker): pool.submit(run, test, broker) for test, broker in sorted(wanted)}

        def outcome(test: str, broker: str) -> None:
            futures[test, broker].result(timeout=240)

        yield outcome


def unique(broker: str, what: str) -> str:
    return f"tc{broker[0]}_{what}_{uuid.uuid4().hex[:8]}"


def route_queues(peer, topic: str) -> int:
    """Write queues of ``topic`` in the name server's route (-1: no route)."""
    datas = route_queue_datas(peer.namesrv, topic)
    return datas[0]["writeQueueNums"] if datas else -1


def create_topic(peer, topic: str, queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC at the broker, then wait for the name server's route."""
    with RawClient(peer.hostport) as broker:
        broker.create_topic(topic, queues)
    assert wait_for(lambda: route_queues(peer, topic) == queues, 15, 0.1), f"no route of {topic} with {queues} queues"


async def read_topic(peer, topic: str, want: int, timeout: float = 15.0) -> list:
    """Every message of ``topic`` from offset 0 (a lite pull consumer, assigned)."""
    got = []
    async with PullConsumer(unique("x", "reader"), peer.namesrv, auto_commit=False) as reader:
        queues = await reader.fetch_queues(topic)
        await reader.assign(queues)
        for mq in queues:
            await reader.seek(mq, 0)
        with trio.move_on_after(timeout):
            while len(got) < want:
                got += await reader.poll(timeout=0.5)
    return got


async def admin_step(java_bundle, java_classes, tmp_path, peer, scenario: str, **params: str) -> dict:
    """One mqadmin scenario of the Java runner (``Scenarios.java``) against ``peer``, in a
    worker thread: what it printed and whether it failed."""
    import functools

    from java_tools import run_step

    return await trio.to_thread.run_sync(functools.partial(
        run_step, java_bundle, java_classes, tmp_path / scenario, scenario, namesrv=peer.namesrv, broker=peer.addr,
        **params))


# -- the producer -----------------------------------------------------------------------------


@on_both()
async def test_producer_every_mode_auto_creates_and_round_trips(peer, broker):
    """sync, async, oneway, orderly, batch to a topic nobody made: TBW102's route, the
    broker creates it with the producer's 4 queues; every message read back intact, the
    results' ids and positions naming the stored records."""
    topic = unique(broker, "send")
    sent: dict[str, tuple[str, str]] = {}  # msg id -> (mode, body)
    results = []

    def msg(mode: str, i: int):
        return new_message(topic, f"{mode}-{i}-\u00fc", tags=f"Tag_{mode}", keys=[f"k_{mode}_{i}", "kk"],
                           properties={"mode": mode, "uni": "\u00fc\u20ac"})

    async with Producer(unique(broker, "P"), peer.namesrv) as producer:
        for i in range(3):
            r = await producer.send(msg("sync", i))
            results.append(r)
            sent[r.msg_id] = ("sync", f"sync-{i}-\u00fc")
        futures = []
        for i in range(3):
            futures.append(await producer.send_async(msg("async", i)))
        for i, fut in enumerate(futures):
            r = await fut
            results.append(r)
            sent[r.msg_id] = ("async", f"async-{i}-\u00fc")
        for i in range(3):
            m = msg("oneway", i)
            await producer.send_oneway(m)
        for i in range(3):
            r = await producer.send_orderly(msg("orderly", i), key="one-key")
            results.append(r)
            sent[r.msg_id] = ("orderly", f"orderly-{i}-\u00fc")
        batch = await producer.send_batch([msg("batch", i) for i in range(3)])
    assert all(r.status is SendStatus.SEND_OK for r in results + batch)
    assert len({r.queue.queue_id for r in results if sent[r.msg_id][0] == "orderly"}) == 1
    # (Java's broker registers a topic it auto-creates oneway: the route comes a moment later)
    assert wait_for(lambda: route_queues(peer, topic) == 4, 15, 0.1), route_queues(peer, topic)

    got = await read_topic(peer, topic, 15)
    assert len(got) == 15
    by_id = {m.client_msg_id: m for m in got}  # UNIQ_KEY (msg_id is the offset message id)
    assert Counter(m.properties["mode"] for m in got) == {"sync": 3, "async": 3, "oneway": 3, "orderly": 3,
                                                           "batch": 3}
    for m in got:
        mode = m.properties["mode"]
        assert m.tags == f"Tag_{mode}" and m.properties["uni"] == "\u00fc\u20ac"
        assert list(m.keys)[1:] == ["kk"], m.keys
    for r in results:
        m = by_id[r.msg_id]
        assert m.body.decode() == sent[r.msg_id][1]
        assert (m.queue_id, m.queue_offset) == (r.queue.queue_id, r.queue_offset)
        assert m.msg_id == r.offset_msg_id


@on_both()
async def test_producer_namespace_wraps_the_topic_on_the_wire(peer, broker):
    """``namespace="nsX"`` (issue 25): sync, orderly (the selector sees the topic as the
    user named it), to an explicit queue, and batch sends of ``T`` are stored in
    ``nsX%T``; every result names ``T``."""
    topic = unique(broker, "nsT")
    wire = f"nsX%{topic}"
    create_topic(peer, wire, 2)
    seen_by_selector = []

    def selector(queues, msg, arg):
        seen_by_selector.extend(q.topic for q in queues)
        return queues[1]

    async with Producer(unique(broker, "nsP"), peer.namesrv, namespace="nsX") as producer:
        assert producer.group.startswith("nsX%")
        r1 = await producer.send(new_message(topic, "plain"))
        r2 = await producer.send_orderly(new_message(topic, "orderly"), selector)
        r3 = await producer.send(new_message(topic, "to-queue"), queue=r2.queue)
        (r4,) = await producer.send_batch([new_message(topic, f"b{i}") for i in range(2)])
    assert {r.queue.topic for r in (r1, r2, r3, r4)} == {topic}
    assert set(seen_by_selector) == {topic}
    assert (r2.queue.queue_id, r3.queue.queue_id) == (1, 1)
    got = await read_topic(peer, wire, 5)
    assert sorted(m.body.decode() for m in got) == ["b0", "b1", "orderly", "plain", "to-queue"]
    assert {m.topic for m in got} == {wire}


SEND_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})


@attrs.define(slots=True)
class SendAnswers:
    """An RPC hook (Java's ``RPCHook``): (broker address, response code) of every send."""

    seen: list[tuple[str | None, int | None]] = attrs.field(factory=list)

    def do_after_response(self, remote_addr, request, response) -> None:
        if request.code in SEND_CODES:
            self.seen.append((remote_addr, None if response is None else response.code))


@background("test_producer_retries_on_the_other_broker_group", after_runner=True)
async def _producer_retries_on_the_other_broker_group(peer, broker):
    """Retries (``retryTimesWhenSendFailed``): the topic is routed over the session's broker
    group and a second one (a ``trocket broker`` registered with the same name server);
    once the producer holds that route, the second group's topic is made read-only
    (UPDATE_AND_CREATE_TOPIC with perm 4): its sends answer NO_PERMISSION, which the
    producer retries on the session's broker. Every sync send is SEND_OK from there, within
    the send budget, and the second group stores none of them."""
    topic, other_name = unique(broker, "retry"), f"rt-{broker}"
    tmp = Path(tempfile.mkdtemp(prefix="tc-retry-"))
    # a cluster of its own and no TBW102: the name server shared with the other tests routes
    # nothing else of theirs to this broker (their auto-created topics, cluster-wide admin calls)
    conf = tmp / "broker.conf"
    conf.write_text("brokerClusterName=RetryCluster\nautoCreateTopicEnable=false\n")
    other = BrokerProcess(tmp / "store", tmp / "broker.log",
                          extra=["-c", str(conf), "-n", peer.namesrv, "--broker-name", other_name])
    other_addr = "{}:{}".format(*other.addr)
    try:
        await trio.to_thread.run_sync(other.start)
        for addr in (peer.hostport, other.addr):
            with RawClient(addr) as c:
                c.create_topic(topic, 4)

        def routed() -> set[str]:
            return {q["brokerName"] for q in route_queue_datas(peer.namesrv, topic)}

        assert await trio.to_thread.run_sync(wait_for, lambda: len(routed()) == 2, 15, 0.1), routed()
        (own_name,) = routed() - {other_name}
        assert other_name not in {q["brokerName"] for q in route_queue_datas(peer.namesrv, "TBW102")}
        # Java's defaults (no latency fault table: plain round robin); no route poll while
        # the test runs: the route the producer holds keeps the other group writable
        config = ClientConfig(namesrv=peer.namesrv, poll_namesrv_interval=600.0)
        answers = SendAnswers()
        async with Producer(unique(broker, "rtP"), client_config=config, latency_fault=False) as producer:
            producer.instance.remoting.register_rpc_hook(answers)
            first = [await producer.send(new_message(topic, f"a{i}")) for i in range(8)]
            assert Counter(r.queue.broker_name for r in first) == {own_name: 4, other_name: 4}
            with RawClient(other.addr) as c:
                c.create_topic(topic, 4, perm=4)
                stored = [c.max_offset(topic, q) for q in range(4)]
            assert {q.broker_name for q in producer.instance.publish[topic].queues} == {own_name, other_name}
            answers.seen.clear()
            t0 = trio.current_time()
            second = [await producer.send(new_message(topic, f"b{i}")) for i in range(8)]
            took = trio.current_time() - t0
        assert [r.status for r in second] == [SendStatus.SEND_OK] * 8
        assert {r.queue.broker_name for r in second} == {own_name}, [r.queue for r in second]
        refused = [a for a in answers.seen if a[0] == other_addr]
        # round robin over 8 queues, 4 of them the other group's: some first attempts went there
        assert refused and set(refused) == {(other_addr, ResponseCode.NO_PERMISSION)}, answers.seen  # each retried
        assert len(answers.seen) == 8 + len(refused), answers.seen
        assert took < producer.config.send_timeout, took
        with RawClient(other.addr) as c:
            assert [c.max_offset(topic, q) for q in range(4)] == stored
        await trio.to_thread.run_sync(other.stop)
        # it unregistered: the shared name server routes nothing more to it
        assert await trio.to_thread.run_sync(wait_for, lambda: routed() == {own_name}, 10, 0.1), routed()
    finally:
        other.kill()
        shutil.rmtree(tmp, ignore_errors=True)


@on_both()
async def test_consumers_namespace(peer, broker):
    """Push and lite consumers with ``namespace="nsY"`` (issue 25) read what a producer of
    that namespace sent to ``T`` (stored in ``nsY%T``), and see ``T``: in messages, in a
    message back from ``%RETRY%nsY%<group>`` after RECONSUME_LATER (at delay level 1, 1 s:
    the 10 s default has its own test), in the lite consumer's queues and assignment."""
    topic, group = unique(broker, "nsC"), unique(broker, "nsG")
    create_topic(peer, f"nsY%{topic}", 2)
    create_topic(peer, f"%RETRY%nsY%{group}", 1)
    seen: list[tuple[str, str, int]] = []

    async def on(msgs, context):
        (msg,) = msgs
        seen.append((msg.topic, msg.body.decode(), msg.reconsume_times))
        if msg.body == b"again" and msg.reconsume_times == 0:
            context.delay_level_when_next_consume = 1
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS

    async with PushConsumer(group, peer.namesrv, {topic: "*"}, on, consume_from="first", namespace="nsY",
                            **FAST) as consumer:
        assert consumer.group == f"nsY%{group}"
        async with Producer(unique(broker, "nsP"), peer.namesrv, namespace="nsY") as producer:
            await producer.send(new_message(topic, "once"))
            await producer.send(new_message(topic, "again"))
        with trio.fail_after(30):
            while len(seen) < 3:
                await trio.sleep(0.1)
        assert {mq.topic for mq in consumer.assignment()} == {topic, f"%RETRY%{group}"}
    assert sorted(seen) == [(topic, "again", 0), (topic, "again", 1), (topic, "once", 0)]
    async with PullConsumer(group + "L", peer.namesrv, namespace="nsY", auto_commit=False) as lite:
        queues = await lite.fetch_queues(topic)
        assert {mq.topic for mq in queues} == {topic} and len(queues) == 2
        await lite.assign(queues)
        for mq in queues:
            await lite.seek(mq, 0)
        got = []
        with trio.fail_after(15):
            while len(got) < 2:
                got += await lite.poll(timeout=0.5)
        assert lite.assignment() == queues
        assert sorted((m.topic, m.body.decode()) for m in got) == [(topic, "again"), (topic, "once")]


@on_both()
async def test_vip_channel_sends_and_offsets_go_to_port_minus_2(peer, broker):
    """``ClientConfig(vip_channel_enabled=True)`` (issue 25; Java's
    ``sendMessageWithVIPChannel``): sends and the offset calls reach the broker's VIP
    channel, its port - 2, and work there; without it nothing connects to that port."""
    from trocket.client.api import vip_channel_addr
    from trocket.client.config import ClientConfig

    topic = unique(broker, "vip")
    create_topic(peer, topic, 1)
    vip = vip_channel_addr(peer.addr)
    config = ClientConfig(namesrv=peer.namesrv, vip_channel_enabled=True)
    async with Producer(unique(broker, "vipP"), client_config=config) as producer:
        results = [await producer.send(new_message(topic, f"v{i}")) for i in range(3)]
        await producer.send_oneway(new_message(topic, "v3"))
        assert producer.instance.api.is_connected(vip)
    assert [r.queue_offset for r in results] == [0, 1, 2]
    group = unique(broker, "vipG")
    lite_config = ClientConfig(namesrv=peer.namesrv, vip_channel_enabled=True)
    async with PullConsumer(group, client_config=lite_config, auto_commit=False) as consumer:
        (mq,) = await consumer.fetch_queues(topic)
        await consumer.assign([mq])
        await consumer.seek_to_begin(mq)  # GET_MIN_OFFSET at the VIP channel
        got = []
        with trio.fail_after(15):
            while len(got) < 4:
                got += await consumer.poll(timeout=0.5)
        await consumer.commit()  # UPDATE_CONSUMER_OFFSET at the VIP channel
        assert await consumer.committed(mq) == 4
        assert consumer.instance.api.is_connected(vip)
    async with Producer(unique(broker, "vipP"), peer.namesrv) as plain:
        await plain.send(new_message(topic, "plain"))
        assert not plain.instance.api.is_connected(vip)


# -- the push consumer ----------------------------------------------------------------------------


async def _wait_balanced(consumers, topic: str, queues: int, timeout: float = 20.0) -> None:
    with trio.fail_after(timeout):
        while True:
            owned = [{mq for mq in c.assignment() if mq.topic == topic} for c in consumers]
            if all(owned) and sum(map(len, owned)) == queues and len(set().union(*owned)) == queues:
                return
            await trio.sleep(0.1)


@on_both()
async def test_push_clustering_two_consumers_share_the_queues(peer, broker):
    topic, group = unique(broker, "clu"), unique(broker, "cluG")
    create_topic(peer, topic)
    got: dict[int, list[str]] = defaultdict(list)

    def listener(k):
        def on(msg):
            got[k].append(msg.body.decode())
        return on

    async with PushConsumer(group, peer.namesrv, {topic: "*"}, listener(0), consume_from="first", **FAST) as c0, \
            PushConsumer(group, peer.namesrv, {topic: "*"}, listener(1), consume_from="first", **FAST) as c1:
        await _wait_balanced([c0, c1], topic, 4)
        async with Producer(unique(broker, "cluP"), peer.namesrv) as producer:
            for i in range(40):
                await producer.send(new_message(topic, f"m{i}"))
        with trio.move_on_after(15):
            while len(got[0]) + len(got[1]) < 40:
                await trio.sleep(0.1)
        await trio.sleep(0.3)
    everything = got[0] + got[1]
    assert sorted(everything) == sorted(f"m{i}" for i in range(40)), Counter(everything).most_common(3)
    assert got[0] and got[1]


@on_both()
async def test_push_broadcasting_every_consumer_gets_everything(peer, broker, tmp_path):
    topic, group = unique(broker, "bc"), unique(broker, "bcG")
    create_topic(peer, topic)
    got: dict[int, set[str]] = defaultdict(set)
    kw = dict(consume_from="first", message_model=MessageModel.BROADCASTING, offset_dir=str(tmp_path), **FAST)
    async with PushConsumer(group, peer.namesrv, {topic: "*"}, lambda m: got[0].add(m.body), **kw), \
            PushConsumer(group, peer.namesrv, {topic: "*"}, lambda m: got[1].add(m.body), **kw):
        async with Producer(unique(broker, "bcP"), peer.namesrv) as producer:
            for i in range(20):
                await producer.send(new_message(topic, f"m{i}"))
        with trio.move_on_after(15):
            while len(got[0]) < 20 or len(got[1]) < 20:
                await trio.sleep(0.1)
    assert len(got[0]) == len(got[1]) == 20


@on_both()
async def test_push_orderly_with_broker_locks(peer, broker):
    """Two orderly consumers: each queue locked at the broker by one of them, every key's
    messages consumed in the order sent."""
    topic, group = unique(broker, "ord"), unique(broker, "ordG")
    create_topic(peer, topic)
    seen: list[tuple[str, int]] = []

    def on(msg):
        seen.append((msg.properties["key"], int(msg.properties["seq"])))

    kw = dict(consume_from="first", orderly=True, lock_interval_s=2.0, **FAST)
    async with PushConsumer(group, peer.namesrv, {topic: "*"}, on, **kw) as c0, \
            PushConsumer(group, peer.namesrv, {topic: "*"}, on, **kw) as c1:
        await _wait_balanced([c0, c1], topic, 4, timeout=30)
        async with Producer(unique(broker, "ordP"), peer.namesrv) as producer:
            for seq in range(8):
                for key in ("a", "b", "c", "d", "e", "f"):
                    await producer.send_orderly(new_message(topic, f"{key}{seq}", properties={"key": key, "seq": str(seq)}),
                                                key=key)
        with trio.move_on_after(20):
            while len(seen) < 48:
                await trio.sleep(0.1)
    per_key: dict[str, list[int]] = defaultdict(list)
    for key, seq in seen:
        per_key[key].append(seq)
    assert {k: v for k, v in per_key.items() if v != list(range(8))} == {}
    assert len(per_key) == 6


@background("test_push_reconsume_later_comes_back_from_retry")
async def _reconsume_later_comes_back_from_retry(peer, broker):
    """RECONSUME_LATER once: back from %RETRY%<group> after delay level 3 (10 s) with
    reconsume_times 1, the same msg id, topic and properties."""
    topic, group = unique(broker, "rl"), unique(broker, "rlG")
    create_topic(peer, topic)
    create_topic(peer, f"%RETRY%{group}", 1)  # its route known at start: the delay is the broker's
    deliveries = []

    def on(msg):
        deliveries.append((trio.current_time(), msg))
        return ConsumeResult.RECONSUME_LATER if len(deliveries) == 1 else ConsumeResult.SUCCESS

    async def on_async(msg):
        return on(msg)

    async with PushConsumer(group, peer.namesrv, {topic: "*"}, on_async, consume_from="first", **FAST) as consumer:
        with trio.fail_after(20):
            while not any(mq.topic.startswith("%RETRY%") for mq in consumer.assignment()):
                await trio.sleep(0.1)
        async with Producer(unique(broker, "rlP"), peer.namesrv) as producer:
            r = await producer.send(new_message(topic, "again", tags="TagR", properties={"color": "red"}))
        with trio.move_on_after(30):
            while len(deliveries) < 2:
                await trio.sleep(0.1)
    assert len(deliveries) == 2
    (t0, first), (t1, second) = deliveries
    assert 9.0 <= t1 - t0 <= 13.0, t1 - t0
    assert (first.reconsume_times, second.reconsume_times) == (0, 1)
    assert first.client_msg_id == second.client_msg_id == r.msg_id
    assert (second.topic, second.body, second.tags, second.properties["color"]) == (topic, b"again", "TagR", "red")


@on_both()
def test_push_reconsume_later_comes_back_from_retry(background_outcome, broker):
    """(Its body, ``_reconsume_later_comes_back_from_retry``, runs from the module's start.)"""
    background_outcome("test_push_reconsume_later_comes_back_from_retry", broker)


@background("test_push_batch_and_delay_level_when_next_consume")
async def _batch_and_delay_level_when_next_consume(peer, broker):
    """A batch listener (issue 25): ``consume_batch_max_size=8`` hands the queue's
    messages over in batches; ``context.delay_level_when_next_consume`` = 1 brings a
    failed message back from %RETRY% after level 1 (1 s; the broker's choice, level 3,
    is 10 s), -1 sends it straight to %DLQ%<group>, never consumed again."""
    topic, group = unique(broker, "dl"), unique(broker, "dlG")
    create_topic(peer, topic, 1)
    create_topic(peer, f"%RETRY%{group}", 1)
    deliveries: list[tuple[float, bytes, int]] = []
    sizes: list[int] = []

    async def on(msgs, context):
        sizes.append(len(msgs))
        failed = False
        for msg in msgs:
            deliveries.append((trio.current_time(), msg.body, msg.reconsume_times))
        for i, msg in enumerate(msgs):
            if msg.reconsume_times == 0 and msg.body in (b"soon", b"dead"):
                context.ack_index = i - 1  # the ones before are consumed
                context.delay_level_when_next_consume = 1 if msg.body == b"soon" else -1
                failed = True
                break
        return ConsumeResult.SUCCESS if not failed or context.ack_index >= 0 else ConsumeResult.RECONSUME_LATER

    async with Producer(unique(broker, "dlP"), peer.namesrv) as producer:
        for i in range(5):
            await producer.send(new_message(topic, f"ok{i}"))
    async with PushConsumer(group, peer.namesrv, {topic: "*"}, on, consume_from="first",
                            consume_batch_max_size=8, **FAST):
        with trio.fail_after(20):
            while sum(1 for d in deliveries if d[1].startswith(b"ok")) < 5:
                await trio.sleep(0.1)
        async with Producer(unique(broker, "dlP"), peer.namesrv) as producer:
            await producer.send(new_message(topic, "soon"))
        with trio.fail_after(20):
            while not any(b == b"soon" and r == 1 for _, b, r in deliveries):
                await trio.sleep(0.1)
        async with Producer(unique(broker, "dlP"), peer.namesrv) as producer:
            await producer.send(new_message(topic, "dead"))
        await trio.sleep(4.0)
    assert max(sizes) == 5  # the five sent before the start came as one batch
    soon = [(t, r) for t, b, r in deliveries if b == b"soon"]
    assert [r for _, r in soon] == [0, 1]
    assert 0.5 <= soon[1][0] - soon[0][0] <= 6.0, soon
    assert [(b, r) for _, b, r in deliveries if b == b"dead"] == [(b"dead", 0)]
    dlq = f"%DLQ%{group}"
    assert wait_for(lambda: route_queues(peer, dlq) > 0, 20, 0.2), f"no route of {dlq}"
    (dead,) = await read_topic(peer, dlq, 1)
    assert dead.body == b"dead"


@on_both()
def test_push_batch_and_delay_level_when_next_consume(background_outcome, broker):
    """(Its body, ``_batch_and_delay_level_when_next_consume``, runs from the module's start.)"""
    background_outcome("test_push_batch_and_delay_level_when_next_consume", broker)


@background("test_push_orderly_max_reconsume_times_dead_letters")
async def _orderly_max_reconsume_times_dead_letters(peer, broker):
    """Orderly with ``max_reconsume_times=0`` (issue 25; Java's checkReconsumeTimes): a
    message that fails goes to the retry topic with reconsumeTimes = the limit, which the
    broker turns into %DLQ%<group> (``reconsumeTimes >= maxReconsumeTimes``), and the
    queue moves on. (Java's broker keeps the copy's DELAY, level 3: it reaches the DLQ
    10 s later; trocket's stores it there at once.)"""
    topic, group = unique(broker, "odl"), unique(broker, "odlG")
    create_topic(peer, topic, 1)
    create_topic(peer, f"%RETRY%{group}", 1)
    calls: list[tuple[str, int]] = []

    async def on(msg):
        calls.append((msg.body.decode(), msg.reconsume_times))
        return ConsumeResult.SUCCESS if msg.body == b"next" else ConsumeResult.RECONSUME_LATER

    async with Producer(unique(broker, "odlP"), peer.namesrv) as producer:
        await producer.send(new_message(topic, "poison"))
        await producer.send(new_message(topic, "next"))
    async with PushConsumer(group, peer.namesrv, {topic: "*"}, on, consume_from="first", orderly=True,
                            suspend_orderly_s=0.1, max_reconsume_times=0, **FAST):
        with trio.fail_after(30):
            while ("next", 0) not in calls:
                await trio.sleep(0.1)
    assert calls == [("poison", 0), ("next", 0)]
    dlq = f"%DLQ%{group}"
    assert wait_for(lambda: route_queues(peer, dlq) > 0, 20, 0.2), f"no route of {dlq}"
    (dead,) = await read_topic(peer, dlq, 1, timeout=30)
    assert dead.body == b"poison"


@on_both()
def test_push_orderly_max_reconsume_times_dead_letters(background_outcome, broker):
    """(Its body, ``_orderly_max_reconsume_times_dead_letters``, runs from the module's start.)"""
    background_outcome("test_push_orderly_max_reconsume_times_dead_letters", broker)


# -- the lite pull consumer and the blocking facade --------------------------------------------


@on_both()
async def test_sql92_selectors_push_and_lite_pull(peer, broker):
    """MessageSelector.by_sql (issue 25) on both brokers (each with enablePropertyFilter):
    the push and the lite pull consumer get exactly the matching messages; a bad
    expression fails the start with the broker's SUBSCRIPTION_PARSE_FAILED and Java's
    parser message."""
    topic, group = unique(broker, "sql"), unique(broker, "sqlG")
    create_topic(peer, topic)
    async with Producer(unique(broker, "sqlP"), peer.namesrv) as producer:
        for i in range(20):
            await producer.send(new_message(topic, f"m{i}", tags="T" if i % 2 else "U", properties={"a": str(i)}))
    want = sorted(f"m{i}" for i in range(20) if i > 10 and i % 2)
    got: list[str] = []
    sel = MessageSelector.by_sql("a > 10 AND TAGS = 'T'")
    async with PushConsumer(group, peer.namesrv, {topic: sel}, lambda m: got.append(m.body.decode()),
                            consume_from="first", **FAST):
        with trio.move_on_after(15):
            while len(got) < len(want):
                await trio.sleep(0.1)
        await trio.sleep(0.5)
    assert sorted(got) == want
    pulled: list[str] = []
    async with PullConsumer(group + "L", peer.namesrv, consume_from="first", **FAST) as lite:
        lite.subscribe(topic, MessageSelector.by_sql("a IN ('3', '4') OR a BETWEEN 18 AND 30"))
        with trio.move_on_after(15):
            while len(pulled) < 4:
                pulled += [m.body.decode() for m in await lite.poll(timeout=0.5)]
    assert sorted(pulled) == ["m18", "m19", "m3", "m4"]
    with pytest.raises(BrokerResponseError) as info:
        async with PushConsumer(group + "B", peer.namesrv, {topic: MessageSelector.by_sql("a >")}, lambda m: None):
            pass
    assert info.value.code == 23
    assert info.value.remark.startswith('org.apache.rocketmq.filter.parser.ParseException: Encountered "<EOF>" at line 1')


@on_both()
async def test_message_trace_from_trocket_clients(peer, broker, java_bundle, java_classes, tmp_path):
    """Producer and PushConsumer with trace=True (issue 25): Pub, SubBefore and SubAfter
    records in RMQ_SYS_TRACE_TOPIC on both brokers; mqadmin QueryMsgTraceById finds them by
    the message id (each broker's index of the trace message's keys)."""
    from trocket.client.trace import decode

    topic, group = unique(broker, "trc"), unique(broker, "trcG")
    create_topic(peer, topic)
    consumed = trio.Event()

    async def on_message(m) -> None:  # async: a plain callback runs in a worker thread, off trio
        consumed.set()

    async with Producer(unique(broker, "trcP"), peer.namesrv, trace=True) as producer:
        result = await producer.send(new_message(topic, "traced", tags="TagT", keys="trcKey"))
        async with PushConsumer(group, peer.namesrv, {topic: "*"}, on_message, consume_from="first",
                                trace=True, **FAST):
            with trio.fail_after(60):  # a loaded machine: rebalance, first pull
                await consumed.wait()
    kinds: set[str] = set()
    async with PullConsumer(unique(broker, "trcR"), peer.namesrv, auto_commit=False) as reader:
        queues = await reader.fetch_queues("RMQ_SYS_TRACE_TOPIC")
        await reader.assign(queues)
        for mq in queues:
            await reader.seek(mq, 0)
        with trio.move_on_after(60):
            while len(kinds) < 3:
                for m in await reader.poll(timeout=0.5):
                    kinds.update(r.trace_type for r in decode(m.body.decode()) if r.msg_id == result.msg_id)
    assert sorted(kinds) == ["Pub", "SubAfter", "SubBefore"]
    # mqadmin finds the trace by the message id (the index: query by key, on both brokers)
    from java_tools import run_step

    out = run_step(java_bundle, java_classes, tmp_path / "mqadmin", "query_msg_trace", namesrv=peer.namesrv,
                   broker=peer.addr, msgId=result.msg_id)
    assert not out["failed"], out
    rows = [line.split() for line in out["output"].splitlines() if line.strip()]
    # mqadmin's table: a Pub row for the producer group, a Sub row (SubBefore + SubAfter
    # merged) for the consumer group, both "success"
    assert any(r[0] == "Pub" and r[1] == producer.group and r[-1] == "success" for r in rows), rows
    assert any(r[0] == "Sub" and r[1] == group and r[-1] == "success" for r in rows), rows


@on_both()
async def test_mqadmin_consumer_status_and_consume_directly(peer, broker, java_bundle, java_classes, tmp_path):
    """mqadmin ``consumerStatus -i`` (GET_CONSUMER_RUNNING_INFO 307) and ``queryMsgById
    -g -d`` (CONSUME_MESSAGE_DIRECTLY 309) against a running trocket PushConsumer; its
    ``#Consumer RT&TPS#`` rows (the statusTable) once the consumer's sampler has seen the
    20 messages consumed (every 10 s, as Java's ConsumerStatsManager)."""
    topic, group = unique(broker, "cst"), unique(broker, "cstG")
    create_topic(peer, topic)
    seen: list[str] = []
    consumed = trio.Event()

    async def on(msg):
        seen.append(msg.body.decode())
        if len(seen) >= 20:
            consumed.set()

    async with Producer(unique(broker, "cstP"), peer.namesrv) as producer:
        result = await producer.send(new_message(topic, "status"))
        for i in range(19):
            await producer.send(new_message(topic, f"more{i}"))
    async with PushConsumer(group, peer.namesrv, {topic: "*"}, on, consume_from="first", **FAST) as consumer:
        with trio.fail_after(60):
            await consumed.wait()
            while consumer.consume_stats.status(topic).consume_ok_tps == 0:  # the next 10 s pass
                await trio.sleep(0.2)

        out = await admin_step(java_bundle, java_classes, tmp_path, peer, "consumer_status", group=group,
                               clientId=consumer.client_id)
        assert not out["failed"], out
        text = out["output"]
        assert "#Consumer Properties#" in text and "#Consumer Subscription#" in text, text
        assert "PROP_CONSUME_TYPE" in text and "CONSUME_PASSIVELY" in text, text
        assert topic in text and f"%RETRY%{group}" in text, text
        assert "#Consumer MQ Detail#" in text, text
        # #Consumer RT&TPS#: topic, pull RT, pull TPS, consume RT, OK TPS, failed TPS, failed msgs
        rates = text.split("#Consumer RT&TPS#", 1)[1].splitlines()
        rows = {r.split()[0]: r.split()[1:] for r in rates if r.strip() and not r.startswith("#")
                and r.split()[0] in (topic, f"%RETRY%{group}")}
        assert set(rows) == {topic, f"%RETRY%{group}"}, text
        assert float(rows[topic][1]) > 0 and float(rows[topic][3]) > 0, rows  # pull TPS, consume OK TPS
        assert float(rows[topic][4]) == 0 and rows[topic][5] == "0", rows  # nothing failed
        assert [float(v) for v in rows[f"%RETRY%{group}"]] == [0.0] * 6, rows
        n = len(seen)
        out = await admin_step(java_bundle, java_classes, tmp_path, peer, "consume_directly", group=group,
                               clientId=consumer.client_id, msgId=result.offset_msg_id)
        assert not out["failed"], out
        assert "consumeResult=CR_SUCCESS" in out["output"], out  # None is SUCCESS in trocket
        assert seen[n:] == ["status"]


@on_both()
async def test_pull_consumer_queue_change_listener_and_admin_calls(peer, broker, java_bundle, java_classes, tmp_path):
    """The lite consumer (issue 25): a queue-change listener is told when its topic
    grows from 4 to 8 queues (not at start); mqadmin ``consumerStatus -i`` reads its
    GET_CONSUMER_RUNNING_INFO (CONSUME_ACTIVELY, its subscription); ``queryMsgById -d``
    (CONSUME_MESSAGE_DIRECTLY) is refused, a lite consumer having no listener."""
    topic, group = unique(broker, "qc"), unique(broker, "qcG")
    create_topic(peer, topic, 4)
    changes: list[tuple[str, set]] = []
    async with Producer(unique(broker, "qcP"), peer.namesrv) as producer:
        result = await producer.send(new_message(topic, "direct"))
    async with PullConsumer(group, peer.namesrv, consume_from="first", topic_metadata_check_interval_s=0.3,
                            **FAST) as consumer:
        consumer.subscribe(topic)
        consumer.register_topic_message_queue_change_listener(topic, lambda t, qs: changes.append((t, qs)))
        got = []
        with trio.fail_after(15):
            while not got:
                got += await consumer.poll(timeout=0.5)
        await trio.sleep(1.0)
        assert changes == []  # the queues as at start: nothing to report
        await trio.to_thread.run_sync(create_topic, peer, topic, 8)
        with trio.fail_after(15):
            while not changes:
                await trio.sleep(0.1)
        (t, queues), = changes
        assert t == topic and sorted(mq.queue_id for mq in queues) == list(range(8))

        out = await admin_step(java_bundle, java_classes, tmp_path, peer, "consumer_status", group=group,
                               clientId=consumer.client_id)
        assert not out["failed"], out
        text = out["output"]
        assert "#Consumer Properties#" in text and "CONSUME_ACTIVELY" in text and topic in text, text
        out = await admin_step(java_bundle, java_classes, tmp_path, peer, "consume_directly", group=group,
                               clientId=consumer.client_id, msgId=result.offset_msg_id)
        assert "consumeResult=" not in out["output"], out  # (the push consumer's test finds CR_SUCCESS)


@on_both()
async def test_pull_consumer_subscribe_assign_seek_commit(peer, broker):
    topic, group = unique(broker, "lp"), unique(broker, "lpG")
    create_topic(peer, topic, 2)
    async with Producer(unique(broker, "lpP"), peer.namesrv) as producer:
        for q in range(2):
            for i in range(5):
                await producer.send_orderly(new_message(topic, f"q{q}-{i}"), selector=lambda mqs, m, arg: mqs[arg], arg=q)
    # subscribe: the group's rebalance gives it both queues
    got = []
    async with PullConsumer(group + "s", peer.namesrv, consume_from="first", **FAST) as sub:
        sub.subscribe(topic)
        with trio.move_on_after(15):
            while len(got) < 10:
                got += await sub.poll(timeout=0.5)
    assert sorted(m.body.decode() for m in got) == sorted(f"q{q}-{i}" for q in range(2) for i in range(5))
    # assign + seek + commit; the committed offsets read back from the broker by a new consumer
    async with PullConsumer(group, peer.namesrv, auto_commit=False) as consumer:
        queues = sorted(await consumer.fetch_queues(topic), key=lambda mq: mq.queue_id)
        await consumer.assign(queues)
        await consumer.seek(queues[0], 2)
        await consumer.seek(queues[1], 0)
        seen = []
        with trio.move_on_after(15):
            while len(seen) < 8:
                seen += [(m.queue_id, m.queue_offset) for m in await consumer.poll(timeout=0.5)]
        await consumer.commit()
    assert sorted(seen) == [(0, 2), (0, 3), (0, 4)] + [(1, i) for i in range(5)]
    async with PullConsumer(group, peer.namesrv, auto_commit=False) as again:
        assert [await again.committed(mq) for mq in queues] == [5, 5]


@on_both()
def test_blocking_facade(peer, broker):
    topic = unique(broker, "blk")
    create_topic(peer, topic)
    with BlockingProducer(unique(broker, "blkP"), peer.namesrv) as producer:
        results = [producer.send(new_message(topic, f"b{i}", tags="TagB")) for i in range(5)]
    assert all(r.status is SendStatus.SEND_OK for r in results)
    with BlockingPullConsumer(unique(broker, "blkG"), peer.namesrv, consume_from="first", **FAST) as consumer:
        consumer.subscribe(topic, "TagB")
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 5 and time.monotonic() < deadline:
            got += consumer.poll(timeout=0.5)
    assert sorted(m.body for m in got) == [f"b{i}".encode() for i in range(5)]
    assert {m.client_msg_id for m in got} == {r.msg_id for r in results}


# -- trocket send / consume / admin --------------------------------------------------------------


def trocket(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``trocket ARGS`` (a 10 s budget per call or send: the suite runs four JVMs on a
    loaded machine, and this test is about what the commands do, not their speed)."""
    budget = ["--timeout", "10"] if args[0] in ("send", "admin") else []
    return subprocess.run([*trocket_command(), *args, *budget], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@on_both()
def test_cli_send_consume_admin(peer, broker):
    ns = peer.namesrv
    topic, group = unique(broker, "cli"), unique(broker, "cliG")
    r = trocket("admin", "topic", "create", "-n", ns, "-t", topic, "--queues", "4", "--cluster", "DefaultCluster",
                "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    assert wait_for(lambda: route_queues(peer, topic) == 4, 15, 0.1), "the created topic has no route"

    r = trocket("send", "-n", ns, "-t", topic, "--body", "hello", "--tag", "TagC", "--keys", "k1", "-p", "color=red",
                "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    one = json.loads(r.stdout)
    r = trocket("send", "-n", ns, "-t", topic, "--count", "20", "--size", "64", "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    summary = json.loads(r.stdout)
    assert summary.get("sent") == 20 and not summary.get("failed"), summary

    r = trocket("consume", "-n", ns, "-t", topic, "-g", group, "--count", "21", "--from", "first", "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 21
    hello = [m for m in lines if m.get("tags") == "TagC"]
    assert len(hello) == 1 and hello[0]["msgId"] == one["msgId"], (hello, one)

    r = trocket("admin", "topic", "list", "-n", ns, "--json")
    assert r.returncode == 0 and topic in r.stdout, r.stderr + r.stdout
    r = trocket("admin", "topic", "route", "-n", ns, "-t", topic, "--json")
    assert r.returncode == 0 and peer.addr in r.stdout, r.stderr + r.stdout
    r = trocket("admin", "group", "offsets", "-n", ns, "-g", group, "-t", topic, "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    rows = json.loads(r.stdout)
    assert sorted((row["queue"], row["consumerOffset"], row["lag"]) for row in rows if row["topic"] == topic) == \
        sorted((q, sum(1 for m in lines if m["queue"] == q), 0) for q in range(4)), rows
    r = trocket("admin", "group", "lag", "-n", ns, "-g", group, "-t", topic, "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads(r.stdout)["lag"] == 0, r.stdout
    r = trocket("admin", "cluster", "-n", ns, "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    brokers = json.loads(r.stdout)
    assert [(b["cluster"], b["broker"], b["addr"], b["error"]) for b in brokers] == \
        [("DefaultCluster", "broker-a", peer.addr, None)], brokers
    r = trocket("admin", "topic", "delete", "-n", ns, "-t", topic, "--cluster", "DefaultCluster", "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    assert route_queues(peer, topic) == -1


@on_both()
def test_producer_retries_on_the_other_broker_group(background_outcome, broker):
    """(Its body, ``_producer_retries_on_the_other_broker_group``, runs once the Java runner
    against the broker ended; its outcome is awaited last, the other tests overlapping it.)"""
    background_outcome("test_producer_retries_on_the_other_broker_group", broker)
