"""Client processors over real TCP with a real store: heartbeats (C++ and JS bodies),
consumer lists and notices, unregister and connection close, consumer offsets, queue
locks with expiry, send-back to the retry and dead-letter topics, malformed input.
Plus the managers' own logic (expiry, membership changes, locks)."""

from __future__ import annotations

import json
import zlib
from contextlib import asynccontextmanager

import trio
import trio.testing

from trocket.broker.client_manager import ConsumerManager, ProducerManager, RebalanceLockManager
from trocket.broker.config import BrokerConfig
from trocket.broker.context import BrokerContext
from trocket.broker.processors import client as client_proc
from trocket.broker.processors import locks as locks_proc
from trocket.broker.processors import offsets as offsets_proc
from trocket.broker.processors import send_back as send_back_proc
from trocket.broker.schedule import ScheduleMessageService
from trocket.broker.store import (
    ConsumerOffsetManager,
    MessageInner,
    MessageStore,
    StoreConfig,
    TopicConfigManager,
)
from trocket.codecs.bodies.client import (
    ConsumerListByGroupResponseBody,
    LockBatchResponseBody,
    MessageQueue,
    SubscriptionData,
)
from trocket.codecs.command import LanguageCode, RemotingCommand
from trocket.codecs.message.properties import encode_properties_bytes
from trocket.codecs.message.record import decode_record
from trocket.remoting import ChannelEventListener, ClientConfig, RemotingClient, RemotingServer, ServerConfig

from ..waiting import wait_until

CPP_SIGN = {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "HiDgZ3K2u2yGZ0w8kLr5q1Yk3vU="}


def cpp_heartbeat(client_id: str, group: str = "G", topics=("PeerTopic",)) -> bytes:
    subs = [{"subString": "*", "subVersion": "1795258936519", "topic": f"%RETRY%{group}"}]
    subs += [{"subString": "*", "subVersion": "1795258936520", "topic": t} for t in topics]
    body = {
        "clientID": client_id,
        "consumerDataSet": [
            {"consumeFromWhere": 0, "consumeType": 1, "groupName": group, "messageModel": 1, "subscriptionDataSet": subs}
        ],
    }
    return (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode()


def js_heartbeat(client_id: str, group: str = "G", producer: str | None = None) -> bytes:
    body = {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [
                    {"topic": "PeerTopic", "subString": "*", "classFilterMode": False, "tagsSet": [], "codeSet": [],
                     "subVersion": 1795258953515}
                ],
                "unitMode": False,
            }
        ],
        "producerDataSet": [{"groupName": producer}] if producer else [],
    }
    return json.dumps(body).encode()


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@asynccontextmanager
async def broker(tmp_path, **config):
    store = MessageStore.open(
        StoreConfig(store_dir=tmp_path / "store", commit_log_segment_size=1 << 20, consume_queue_entries_per_file=1000)
    )
    topics = TopicConfigManager.open(str(tmp_path / "config"))
    offsets = ConsumerOffsetManager.open(str(tmp_path / "config"))
    # as the broker's: remoting's own answers (SYSTEM_ERROR for a processor that raises)
    # carry an extFields object
    server = RemotingServer(ServerConfig(listen_host="127.0.0.1", listen_port=0, system_reply_ext_fields=True))
    broker_config = BrokerConfig(**config)
    ctx = BrokerContext(
        config=broker_config,
        store=store,
        topics=topics,
        offsets=offsets,
        server=server,
        consumers=ConsumerManager(),
        producers=ProducerManager(),
        locks=RebalanceLockManager(),
        # not running: send-back's retry copies stay on SCHEDULE_TOPIC_XXXX (retry_copies)
        schedule=ScheduleMessageService(store, broker_config),
    )
    for module in (client_proc, offsets_proc, locks_proc, send_back_proc):
        module.register(ctx)
    try:
        async with server:
            yield ctx
    finally:
        store.shutdown()


class Peer:
    """One client process: its own RemotingClient (one connection to the broker),
    recording the NOTIFY_CONSUMER_IDS_CHANGED notices it receives."""

    def __init__(self, client: RemotingClient, addr: str, language=LanguageCode.CPP) -> None:
        self.client = client
        self.addr = addr
        self.language = language
        self.notices: list[RemotingCommand] = []
        self.notice_arrived = trio.Event()
        client.register_processor(40, self._on_notice)

    async def _on_notice(self, conn, request):
        self.notices.append(request)
        self.notice_arrived.set()
        self.notice_arrived = trio.Event()
        return None

    async def call(self, code: int, ext=None, body: bytes = b"", timeout: float = 5) -> RemotingCommand:
        ext = dict(ext or {})
        if self.language is LanguageCode.CPP:
            ext.update(CPP_SIGN)
        # the versions the real clients report (shared/REAL-CLIENTS.md): C++ 63 (V3_1_8),
        # the JS client (language JAVA) 121 (V3_4_9)
        version = 63 if self.language is LanguageCode.CPP else 121
        req = RemotingCommand.request(code, ext_fields=ext, body=body, language=self.language, version=version)
        return await self.client.invoke_sync(self.addr, req, timeout)

    @property
    def conn(self):
        return self.client.connection_for(self.addr)

    async def wait_notices(self, n: int) -> None:
        with trio.fail_after(5):
            while len(self.notices) < n:
                await self.notice_arrived.wait()


async def settle(*peers: Peer) -> None:
    """Every notice the broker queued for ``peers`` so far has been handled: a round trip
    on each one's connection comes back behind them (a connection's outbox is FIFO), and
    their notice processors have run once every task waits."""
    for peer in peers:
        await peer.call(38, {"consumerGroup": "G"})
    await trio.testing.wait_all_tasks_blocked()


@asynccontextmanager
async def peers(ctx, n: int, languages=None):
    languages = languages or [LanguageCode.CPP] * n
    async with trio.open_nursery() as nursery:
        out = []
        for lang in languages[:n]:
            c = RemotingClient(ClientConfig())
            await nursery.start(c.run)
            out.append(Peer(c, ctx.server.address, lang))
        try:
            yield out
        finally:
            for p in out:
                await p.client.aclose()


def consumer_ids(resp: RemotingCommand) -> list[str]:
    assert resp.code == 0, resp.remark
    return ConsumerListByGroupResponseBody.decode(resp.body).consumer_id_list


# -- heartbeats, consumer lists, notices ---------------------------------------------------


async def test_cpp_and_js_heartbeats_register_one_group(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 2, [LanguageCode.CPP, LanguageCode.JAVA]) as (cpp, js):
        resp = await cpp.call(34, body=cpp_heartbeat("11238-127.0.0.1@DEFAULT"))
        assert (resp.code, resp.ext_fields, resp.remark) == (0, {}, None)
        resp = await js.call(34, ext={}, body=js_heartbeat("192.0.2.2@11847", producer="PJ"))
        assert (resp.code, resp.ext_fields) == (0, {})

        ids = consumer_ids(await cpp.call(38, {"consumerGroup": "G"}))
        assert ids == ["11238-127.0.0.1@DEFAULT", "192.0.2.2@11847"]
        assert consumer_ids(await js.call(38, {"consumerGroup": "G"})) == ids

        # the retry topic exists as Java creates it on heartbeat
        tc = ctx.topics.select("%RETRY%G")
        assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag) == (1, 1, 6, 0)
        info = ctx.consumers.group_info("G")
        # the group's subscriptions are the latest heartbeat's (JS had not subscribed
        # its retry topic yet), as in Java
        assert set(info.subscriptions) == {"PeerTopic"}
        assert info.subscriptions["PeerTopic"].sub_version == 1795258953515  # JS's is newer
        assert ctx.consumers.find_channel("G", "11238-127.0.0.1@DEFAULT").language is LanguageCode.CPP
        assert ctx.producers.client_ids("PJ") == ["192.0.2.2@11847"]
        # every member is told, the one that joined too (Java's registerConsumer): the
        # first once for itself, then both when the second joined
        await cpp.wait_notices(2)
        await js.wait_notices(1)


async def test_notify_reaches_the_other_members_when_a_third_joins(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 3) as (a, b, c):
        await a.call(34, body=cpp_heartbeat("A"))
        await b.call(34, body=cpp_heartbeat("B"))
        await a.wait_notices(2)
        await b.wait_notices(1)
        await c.call(34, body=cpp_heartbeat("C"))
        await a.wait_notices(3)
        await b.wait_notices(2)
        await c.wait_notices(1)  # the member that joined is told too, as Java's
        for notice in a.notices + b.notices + c.notices:
            assert notice.code == 40 and notice.ext_fields == {"consumerGroup": "G"}
            assert notice.is_oneway
        # a heartbeat that changes nothing notifies nobody
        await a.call(34, body=cpp_heartbeat("A"))
        assert consumer_ids(await c.call(38, {"consumerGroup": "G"})) == ["A", "B", "C"]
        await settle(a, b, c)
        assert (len(a.notices), len(b.notices), len(c.notices)) == (3, 2, 1)
        # a new subscription is a change too
        await c.call(34, body=cpp_heartbeat("C", topics=("PeerTopic", "Other")))
        await a.wait_notices(4)
        await b.wait_notices(3)
        await c.wait_notices(2)


async def test_notify_can_be_disabled(tmp_path):
    async with broker(tmp_path, notify_consumer_ids_changed=False) as ctx, peers(ctx, 2) as (a, b):
        await a.call(34, body=cpp_heartbeat("A"))
        await b.call(34, body=cpp_heartbeat("B"))
        await b.call(35, {"clientID": "B", "producerGroup": "", "consumerGroup": "G"})
        await settle(a)
        assert a.notices == []


async def test_unregister_client(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 3, [LanguageCode.CPP, LanguageCode.JAVA, LanguageCode.CPP]) as (a, b, p):
        await a.call(34, body=cpp_heartbeat("A"))
        await b.call(34, body=js_heartbeat("B"))
        await p.call(34, body=b'{"clientID":"P1","producerDataSet":[{"groupName":"PG"}]}\n')
        assert ctx.producers.client_ids("PG") == ["P1"]
        n = len(a.notices)

        # CPP: both groups sent, one of them empty
        resp = await b.call(35, {"clientID": "B", "producerGroup": "", "consumerGroup": "G"})
        assert (resp.code, resp.ext_fields) == (0, {})
        assert consumer_ids(await a.call(38, {"consumerGroup": "G"})) == ["A"]
        await a.wait_notices(n + 1)
        # JS: only the producer group, the consumer group absent
        resp = await p.call(35, {"clientID": "P1", "producerGroup": "PG"})
        assert resp.code == 0 and "PG" not in ctx.producers
        # unknown groups, nothing registered, no groups at all: all fine
        assert (await p.call(35, {"clientID": "P1", "producerGroup": "nope", "consumerGroup": "nope"})).code == 0
        assert (await p.call(35, {"clientID": "P1"})).code == 0
        # the last member leaves: the group is gone and 38 answers Java's error
        assert (await a.call(35, {"clientID": "A", "consumerGroup": "G", "producerGroup": ""})).code == 0
        resp = await a.call(38, {"consumerGroup": "G"})
        assert (resp.code, resp.remark, resp.ext_fields, resp.body) == (1, "no consumer for this group, G", {}, b"")
        # missing clientID: a header error, the connection stays up
        resp = await a.call(35, {"consumerGroup": "G"})
        assert resp.code == 1 and "clientID" in resp.remark and resp.ext_fields == {}
        assert a.conn.is_active


async def test_get_consumer_list_of_unknown_group(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        resp = await a.call(38, {"consumerGroup": "nobody"})
        assert (resp.code, resp.remark) == (1, "no consumer for this group, nobody")
        resp = await a.call(38, {})
        assert resp.code == 1 and "consumerGroup" in resp.remark


async def test_connection_close_removes_its_clients_and_notifies(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 2) as (a, b):
        await a.call(34, body=cpp_heartbeat("A"))
        await b.call(
            34, body=b'{"clientID":"B","consumerDataSet":[{"groupName":"G","consumeType":1,"messageModel":1}],'
                     b'"producerDataSet":[{"groupName":"PB"}]}'
        )
        await a.wait_notices(1)
        await b.client.aclose()
        await wait_until(lambda: ctx.consumers.consumer_ids("G") == ["A"] and "PB" not in ctx.producers, 5)
        await a.wait_notices(2)


async def test_expired_clients_are_dropped_and_their_connections_closed(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 2) as (a, b):
        clock = Clock()
        ctx.consumers.clock = ctx.producers.clock = clock
        await a.call(34, body=cpp_heartbeat("A"))
        await b.call(34, body=b'{"clientID":"B","consumerDataSet":[{"groupName":"G"}],"producerDataSet":[{"groupName":"PB"}]}')
        clock.t += 60
        await a.call(34, body=cpp_heartbeat("A"))  # A stays fresh
        clock.t += 61  # B silent for 121 s
        assert client_proc.scan_expired_clients(ctx) == 2  # its consumer and its producer
        assert ctx.consumers.consumer_ids("G") == ["A"] and "PB" not in ctx.producers
        await wait_until(lambda: b.conn is None or not b.conn.is_active, 5)
        assert a.conn.is_active
        assert client_proc.scan_expired_clients(ctx) == 0


async def test_housekeeping_task_runs_the_scan(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        clock = Clock()
        ctx.consumers.clock = clock
        await a.call(34, body=cpp_heartbeat("A"))
        clock.t += 500
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: client_proc.run_housekeeping(ctx, interval=0.01, task_status=task_status))
            await wait_until(lambda: "G" not in ctx.consumers, 5)
            nursery.cancel_scope.cancel()


async def test_check_client_config(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        tag = {"clientId": "c", "group": "G", "subscriptionData": {"topic": "T", "subString": "*", "expressionType": "TAG"}}
        assert (await a.call(46, body=json.dumps(tag).encode())).code == 0
        sql = {"clientId": "c", "group": "G", "subscriptionData": {"topic": "T", "subString": "a>1", "expressionType": "SQL92"}}
        resp = await a.call(46, body=json.dumps(sql).encode())
        assert (resp.code, resp.remark) == (1, "The broker does not support consumer to filter message by SQL92")


# -- offsets ------------------------------------------------------------------------------


async def test_query_and_update_consumer_offset(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 2, [LanguageCode.CPP, LanguageCode.JAVA]) as (cpp, js):
        # a new group on an empty queue: "0" (both clients then start at the queue's start)
        resp = await cpp.call(14, {"consumerGroup": "G", "topic": "T", "queueId": 0})
        assert (resp.code, resp.ext_fields) == (0, {"offset": "0"})
        # a queue with messages, never committed: still 0 while its min offset is 0
        for _ in range(3):
            ctx.store.put_message(MessageInner(topic="T", body=b"x", queue_id=1))
        assert (await js.call(14, {"topic": "T", "consumerGroup": "G", "queueId": 1})).ext_fields == {"offset": "0"}

        # CPP: commitOffset as a string, queueId an int
        resp = await cpp.call(15, {"commitOffset": "2", "consumerGroup": "G", "queueId": 1, "topic": "T"})
        assert (resp.code, resp.ext_fields) == (0, {})
        assert ctx.offsets.query_offset("G", "T", 1) == 2
        assert (await cpp.call(14, {"consumerGroup": "G", "topic": "T", "queueId": 1})).ext_fields == {"offset": "2"}
        # JS: ints, and -1 for "no offset"
        resp = await js.call(15, {"topic": "T", "consumerGroup": "G", "queueId": 1, "commitOffset": -1})
        assert resp.code == 0 and ctx.offsets.query_offset("G", "T", 1) == -1
        # a negative committed offset reads as "none": 0 again (Java's offset >= 0 rule)
        assert (await js.call(14, {"topic": "T", "consumerGroup": "G", "queueId": 1})).ext_fields == {"offset": "0"}
        resp = await js.call(15, {"topic": "T", "consumerGroup": "G", "queueId": 1, "commitOffset": 3})
        assert (await js.call(14, {"topic": "T", "consumerGroup": "G", "queueId": 1})).ext_fields == {"offset": "3"}


async def test_query_offset_not_found_when_the_queue_no_longer_starts_at_zero(tmp_path, monkeypatch):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        monkeypatch.setattr(MessageStore, "get_min_offset", lambda self, topic, queue_id: 7)
        resp = await a.call(14, {"consumerGroup": "G", "topic": "T", "queueId": 0})
        assert (resp.code, resp.remark, resp.ext_fields) == (
            22, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first", {}
        )
        ctx.offsets.commit_offset("G", "T", 0, 9)
        assert (await a.call(14, {"consumerGroup": "G", "topic": "T", "queueId": 0})).ext_fields == {"offset": "9"}


async def test_offset_headers_malformed(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        resp = await a.call(14, {"consumerGroup": "G", "topic": "T"})
        conn = a.conn
        assert resp.code == 1 and "queueId" in resp.remark and resp.ext_fields == {}
        resp = await a.call(15, {"consumerGroup": "G", "topic": "T", "queueId": 0, "commitOffset": "abc"})
        assert resp.code == 1 and "commitOffset" in resp.remark
        resp = await a.call(15, {"consumerGroup": "G", "topic": "T", "queueId": 0, "commitOffset": None})
        assert resp.code == 1  # JS's NaN becomes null: a missing field
        assert (await a.call(14, {"consumerGroup": "G", "topic": "T", "queueId": 0})).code == 0
        assert a.conn is conn and conn.is_active


# -- locks --------------------------------------------------------------------------------


def lock_body(client_id: str, *queue_ids: int, group: str = "G") -> bytes:
    mqs = [{"brokerName": "broker-a", "queueId": q, "topic": "T"} for q in queue_ids]
    return (json.dumps({"clientId": client_id, "consumerGroup": group, "mqSet": mqs}, sort_keys=True) + "\n").encode()


def locked(resp: RemotingCommand) -> list[int]:
    assert (resp.code, resp.ext_fields) == (0, {}), resp.remark
    assert resp.body.startswith(b'{"lockOKMQSet":[')
    return [mq.queue_id for mq in LockBatchResponseBody.decode(resp.body).lock_ok_mq_set]


async def test_lock_and_unlock_batch_with_expiry(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 2) as (a, b):
        clock = Clock()
        ctx.locks.clock = clock
        assert locked(await a.call(41, body=lock_body("A", 0, 1))) == [0, 1]
        assert locked(await b.call(41, body=lock_body("B", 1, 2))) == [2]
        # renewing is fine; another group is independent
        assert locked(await a.call(41, body=lock_body("A", 0, 1))) == [0, 1]
        assert locked(await b.call(41, body=lock_body("B", 0, group="G2"))) == [0]
        # 60 s without renewal: B may take A's queues
        clock.t += 60.5
        assert locked(await b.call(41, body=lock_body("B", 0, 1))) == [0, 1]
        assert locked(await a.call(41, body=lock_body("A", 0, 1))) == []
        # B's queue 2 was not renewed either: A takes it
        assert locked(await a.call(41, body=lock_body("A", 2))) == [2]
        # unlock: only the holder's unlock counts
        resp = await a.call(42, body=lock_body("A", 0, 1))
        assert (resp.code, resp.ext_fields) == (0, {})
        assert ctx.locks.holder("G", MessageQueue("T", "broker-a", 0)) == "B"
        assert (await b.call(42, body=lock_body("B", 0))).code == 0
        assert locked(await a.call(41, body=lock_body("A", 0, 1))) == [0]
        # an empty set locks nothing
        assert locked(await a.call(41, body=lock_body("A"))) == []


async def test_malformed_lock_bodies(tmp_path, caplog):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        for body in (b"", b"{", b'{"clientId":"A","mqSet":[]}', b'{"clientId":"A","consumerGroup":"G","mqSet":[{"topic":"T"}]}'):
            for code, what in ((41, "lock"), (42, "unlock")):
                resp = await a.call(code, body=body)
                assert resp.code == 1 and resp.ext_fields == {}
                assert resp.remark.startswith(f"{what} batch request does not decode: "), resp.remark
        assert not [r for r in caplog.records if r.exc_info]  # the client's error: no traceback logged
        assert locked(await a.call(41, body=lock_body("A", 3))) == [3]


# -- send back ------------------------------------------------------------------------------


def put(ctx, topic="T", body=b"hello", properties=None, sys_flag=0, reconsume_times=0, queue_id=0):
    props = properties if properties is not None else {"KEYS": "k1", "TAGS": "TagA", "UNIQ_KEY": "AC11000100002A9F0000000000000001", "WAIT": "true"}
    return ctx.store.put_message(
        MessageInner(
            topic=topic,
            body=body,
            queue_id=queue_id,
            flag=7,
            properties=props,
            properties_bytes=encode_properties_bytes(props),
            sys_flag=sys_flag,
            born_timestamp=1_700_000_000_123,
            born_host=("10.1.2.3", 40000),
            reconsume_times=reconsume_times,
        )
    )


def read_queue(ctx, topic: str, queue_id: int = 0):
    got = ctx.store.get_message("G", topic, queue_id, 0, 32)
    msgs = [decode_record(buf, decompress=False)[0] for buf in got.buffers]
    got.release()
    return msgs


def retry_copies(ctx, group: str = "G"):
    """The retry copies send-back stored for ``group``: on SCHEDULE_TOPIC_XXXX (queue =
    level - 1) with REAL_TOPIC %RETRY%<group>, until the schedule service delivers them
    (tests/broker/test_schedule.py), in the order they were stored."""
    copies = [
        m
        for level in range(1, ctx.schedule.max_level + 1)
        for m in read_queue(ctx, "SCHEDULE_TOPIC_XXXX", level - 1)
        if m.properties.get("REAL_TOPIC") == f"%RETRY%{group}"
    ]
    return sorted(copies, key=lambda m: m.commit_log_offset)


async def test_send_back_to_retry_topic_then_dlq(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 2, [LanguageCode.CPP, LanguageCode.JAVA]) as (cpp, js):
        original = put(ctx)
        origin_id = original.msg_id
        # CPP: group, delayLevel int, offset string (to the store host)
        resp = await cpp.call(36, {"group": "G", "delayLevel": 0, "offset": str(original.physical_offset)})
        assert (resp.code, resp.ext_fields, resp.remark) == (0, {}, None)
        (r1,) = retry_copies(ctx)
        assert r1.topic == "SCHEDULE_TOPIC_XXXX" and r1.queue_id == 2 and r1.queue_offset == 0  # level 3
        assert (r1.body, r1.flag, r1.reconsume_times) == (b"hello", 7, 1)
        assert (r1.born_timestamp, tuple(r1.born_host)) == (1_700_000_000_123, ("10.1.2.3", 40000))
        assert r1.properties == {
            "KEYS": "k1",
            "TAGS": "TagA",
            "UNIQ_KEY": "AC11000100002A9F0000000000000001",
            "WAIT": "false",
            "RETRY_TOPIC": "T",
            "DELAY": "3",  # 3 + reconsumeTimes
            "ORIGIN_MESSAGE_ID": origin_id,
            "REAL_TOPIC": "%RETRY%G",
            "REAL_QID": "0",
        }
        assert read_queue(ctx, "%RETRY%G") == []  # until level 3's delay has passed
        tc = ctx.topics.select("%RETRY%G")
        assert (tc.write_queue_nums, tc.perm) == (1, 6)
        # the retry copy consumed and failed again (JS: ints, originMsgId, maxReconsumeTimes)
        resp = await js.call(
            36,
            {"offset": r1.commit_log_offset, "group": "G", "delayLevel": 0, "originMsgId": "X",
             "originTopic": "T", "unitMode": False, "maxReconsumeTimes": 2},
        )
        assert resp.code == 0
        r2 = retry_copies(ctx)[1]
        assert r2.reconsume_times == 2
        assert (r2.properties["RETRY_TOPIC"], r2.properties["ORIGIN_MESSAGE_ID"], r2.properties["DELAY"]) == (
            "T", origin_id, "4"
        )
        # reconsumeTimes 2 >= maxReconsumeTimes 2: dead letter
        resp = await js.call(36, {"offset": r2.commit_log_offset, "group": "G", "delayLevel": 0, "maxReconsumeTimes": 2})
        assert resp.code == 0
        (d,) = read_queue(ctx, "%DLQ%G")
        assert d.reconsume_times == 3 and d.body == b"hello"
        assert (d.properties["RETRY_TOPIC"], d.properties["ORIGIN_MESSAGE_ID"], d.properties["DELAY"]) == ("T", origin_id, "0")
        tc = ctx.topics.select("%DLQ%G")
        assert (tc.write_queue_nums, tc.perm) == (1, 6)
        assert len(retry_copies(ctx)) == 2


async def test_send_back_delay_levels_and_default_max(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        m = put(ctx, reconsume_times=5)
        assert (await a.call(36, {"group": "G", "delayLevel": 2, "offset": str(m.physical_offset)})).code == 0
        assert retry_copies(ctx)[-1].properties["DELAY"] == "2"
        assert (await a.call(36, {"group": "G", "delayLevel": 0, "offset": str(m.physical_offset)})).code == 0
        assert retry_copies(ctx)[-1].properties["DELAY"] == "8"
        # 3 + 15 = 18 is the last level; beyond it the level is capped
        m = put(ctx, reconsume_times=15)
        assert (await a.call(36, {"group": "G", "delayLevel": 0, "offset": str(m.physical_offset)})).code == 0
        assert retry_copies(ctx)[-1].properties["DELAY"] == "18"
        # default maxReconsumeTimes is 16
        m = put(ctx, reconsume_times=16)
        assert (await a.call(36, {"group": "G", "delayLevel": 0, "offset": str(m.physical_offset)})).code == 0
        assert read_queue(ctx, "%DLQ%G")[-1].reconsume_times == 17
        # a negative delay level sends it to the DLQ at once
        m = put(ctx)
        assert (await a.call(36, {"group": "G", "delayLevel": -1, "offset": str(m.physical_offset)})).code == 0
        dlq = read_queue(ctx, "%DLQ%G")
        assert len(dlq) == 2 and dlq[-1].reconsume_times == 1


async def test_send_back_keeps_compressed_body_and_existing_origin(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        raw = b"x" * 5000
        packed = zlib.compress(raw, 5)
        m = put(ctx, body=packed, sys_flag=1, properties={"ORIGIN_MESSAGE_ID": "ABC", "RETRY_TOPIC": "Orig"})
        assert (await a.call(36, {"group": "G", "delayLevel": 0, "offset": str(m.physical_offset)})).code == 0
        (r,) = retry_copies(ctx)
        assert r.sys_flag & 1 and r.body == packed
        assert (r.properties["ORIGIN_MESSAGE_ID"], r.properties["RETRY_TOPIC"]) == ("ABC", "Orig")
        got = ctx.store.get_message("G", "SCHEDULE_TOPIC_XXXX", 2, 0, 1)
        assert decode_record(got.buffers[0])[0].body == raw  # clients inflate it as before
        got.release()


async def test_send_back_errors(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        m = put(ctx)
        for offset in (m.physical_offset + 1, 1 << 40, -5):
            resp = await a.call(36, {"group": "G", "delayLevel": 0, "offset": str(offset)})
            assert (resp.code, resp.remark, resp.ext_fields) == (1, f"look message by offset failed, {offset}", {})
        resp = await a.call(36, {"group": "G", "delayLevel": 0})
        assert resp.code == 1 and "offset" in resp.remark
        resp = await a.call(36, {"group": "G", "delayLevel": "x", "offset": "0"})
        assert resp.code == 1 and "delayLevel" in resp.remark
        assert retry_copies(ctx) == []
        assert (await a.call(36, {"group": "G", "delayLevel": 0, "offset": str(m.physical_offset)})).code == 0


async def test_send_back_on_a_read_only_broker(tmp_path):
    async with broker(tmp_path, broker_permission=4) as ctx, peers(ctx, 1) as (a,):
        m = put(ctx)
        resp = await a.call(36, {"group": "G", "delayLevel": 0, "offset": str(m.physical_offset)})
        assert resp.code == 16 and "sending message is forbidden" in resp.remark


# -- malformed bodies -------------------------------------------------------------------------


async def test_malformed_heartbeats_answer_errors_and_keep_the_connection(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        await a.call(38, {"consumerGroup": "G"})
        conn = a.conn
        for body in (b"", b"garbage", b"[]", b'{"consumerDataSet":[]}', b'{"clientID":"A","consumerDataSet":[{"groupName":"G","consumeType":9}]}'):
            resp = await a.call(34, body=body)
            assert resp.code == 1 and resp.remark.startswith("heartbeat body does not decode") and resp.ext_fields == {}
        assert "G" not in ctx.consumers
        assert (await a.call(34, body=cpp_heartbeat("A"))).code == 0
        assert a.conn is conn and conn.is_active
        assert ctx.server.stats.decode_errors == 0


# -- managers, without the network ---------------------------------------------------------------


def test_consumer_manager_membership_and_expiry():
    clock = Clock()
    mgr = ConsumerManager(clock=clock)
    c1, c2 = object(), object()
    subs = [SubscriptionData("T", sub_version=1)]
    assert mgr.register("G", c1, "id-1", subscriptions=subs) is True
    assert mgr.register("G", c1, "id-1", subscriptions=subs) is False  # a refresh
    assert mgr.register("G", c1, "id-1", subscriptions=[SubscriptionData("T", sub_version=2)]) is False  # newer version
    assert mgr.find_subscription("G", "T").sub_version == 2
    assert mgr.register("G", c2, "id-0", subscriptions=subs) is True
    assert mgr.consumer_ids("G") == ["id-0", "id-1"]
    assert mgr.find_subscription("G", "T").sub_version == 2  # an older version does not replace it
    assert mgr.register("G", c2, "id-0", subscriptions=[]) is True  # topic removed
    assert mgr.topic_consumed_by("T") == set()
    # the same client on a second connection is listed once
    c3 = object()
    mgr.register("G", c3, "id-0")
    assert mgr.consumer_ids("G") == ["id-0", "id-1"]
    assert mgr.connection_closed(c3) == ["G"]
    clock.t += 100
    mgr.register("G", c1, "id-1")
    clock.t += 21
    expired = mgr.scan_not_active()
    assert [(g, m.client_id) for g, m in expired] == [("G", "id-0")]
    assert mgr.consumer_ids("G") == ["id-1"]
    assert mgr.unregister("G", c1) is True and "G" not in mgr
    assert mgr.unregister("G", c1) is False
    assert mgr.consumer_ids("G") == [] and mgr.channels("G") == []


def test_producer_manager():
    clock = Clock()
    mgr = ProducerManager(clock=clock)
    p1, p2 = object(), object()
    assert mgr.register("P", p1, "a") is True and mgr.register("P", p1, "a") is False
    mgr.register("P", p2, "b")
    mgr.register("Q", p2, "b")
    assert mgr.find_channel("b") is p2 and mgr.client_ids("P") == ["a", "b"]
    assert sorted(mgr.connection_closed(p2)) == ["P", "Q"] and "Q" not in mgr
    clock.t += 121
    assert [m.client_id for _, m in mgr.scan_not_active()] == ["a"]
    assert mgr.groups() == []


def test_rebalance_lock_manager():
    clock = Clock()
    locks = RebalanceLockManager(clock=clock)
    q = [MessageQueue("T", "b", i) for i in range(3)]
    assert locks.try_lock_batch("G", q[:2], "A") == q[:2]
    assert locks.try_lock_batch("G", q, "B") == [q[2]]
    assert locks.is_locked("G", q[0], "A") and not locks.is_locked("G", q[0], "B")
    clock.t += 59
    assert locks.try_lock("G", q[0], "A")  # renewed
    clock.t += 2
    assert locks.try_lock_batch("G", q, "B") == [q[1], q[2]]  # q1 expired, q0 renewed 2 s ago
    assert locks.unlock_batch("G", q, "A") == [q[0]]
    assert locks.holder("G", q[0]) is None and locks.holder("G", q[1]) == "B"
    assert locks.unlock_batch("nope", q, "A") == []


# -- wiring: the channel listener, the hooks, the heartbeat off the reader -------------------


async def test_channel_listener_fans_out_and_topic_hook(tmp_path):
    """The context's listener is the server's: a closed connection leaves its groups, a
    listener the server had before still gets every event, and topic creations reach
    ``ctx.on_topic_created``."""
    seen = []

    class Plain(ChannelEventListener):
        def on_channel_close(self, remote_addr, conn):
            seen.append(conn)

    async with broker(tmp_path) as ctx, peers(ctx, 2) as (a, b):
        assert ctx.server.listener is ctx.channels
        ctx.channels.add(Plain())
        created = []
        ctx.on_topic_created = created.append
        await a.call(34, body=cpp_heartbeat("A", group="H"))
        await b.call(34, body=cpp_heartbeat("B", group="H"))
        assert created == ["%RETRY%H"]
        await b.client.aclose()
        await wait_until(lambda: ctx.consumers.consumer_ids("H") == ["A"] and seen, 5)
        assert len(seen) == 1
        m = put(ctx)
        assert (await a.call(36, {"group": "H", "delayLevel": -1, "offset": str(m.physical_offset)})).code == 0
        assert created == ["%RETRY%H", "%DLQ%H"]


def test_a_server_listener_given_before_the_context_is_kept(tmp_path):
    class Plain(ChannelEventListener):
        pass

    plain = Plain()
    server = RemotingServer(ServerConfig(listen_host="127.0.0.1", listen_port=0), listener=plain)
    store = MessageStore.open(StoreConfig(store_dir=tmp_path / "store", commit_log_segment_size=1 << 20))
    try:
        ctx = BrokerContext(
            config=BrokerConfig(channel_expired_timeout_ms=7_000, rebalance_lock_max_live_ms=9_000),
            store=store, topics=TopicConfigManager.open(str(tmp_path / "c")),
            offsets=ConsumerOffsetManager.open(str(tmp_path / "c")), server=server,
        )
        assert server.listener is ctx.channels and ctx.channels.listeners == [plain]
        # the default managers follow the configuration
        assert ctx.consumers.channel_expired_timeout == 7.0 and ctx.producers.channel_expired_timeout == 7.0
        assert ctx.locks.max_live_time == 9.0
    finally:
        store.shutdown()


async def test_a_blocked_name_server_does_not_stall_the_connection(tmp_path):
    """A heartbeat that creates a group's retry topic answers only once the broker has
    registered with the name servers (ali-ons looks the route up right after), but that
    wait runs off the connection's reader: a request behind it on the same connection is
    answered at once, and sees the heartbeat's members."""
    release = trio.Event()
    registering = trio.Event()
    calls = []

    async def slow_register():
        calls.append(trio.current_time())
        registering.set()
        await release.wait()

    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        ctx.register_now = slow_register
        answers = {}

        async def call(name, code, ext=None, body=b""):
            answers[name] = await a.call(code, ext, body=body)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "heartbeat", 34, None, cpp_heartbeat("A", group="SLOW"))
            with trio.fail_after(5):
                await registering.wait()
            # the heartbeat now waits for the name server; the same connection still serves
            with trio.fail_after(2):
                await call("list", 38, {"consumerGroup": "SLOW"})
                await call("offset", 14, {"consumerGroup": "SLOW", "topic": "T", "queueId": "0"})
            assert consumer_ids(answers["list"]) == ["A"]
            assert answers["offset"].code == 0
            assert "heartbeat" not in answers  # not answered before the registration
            release.set()
        assert answers["heartbeat"].code == 0
        assert ctx.topics.select("%RETRY%SLOW") is not None
        # a second heartbeat finds the topic: answered inline, no registration
        assert (await a.call(34, body=cpp_heartbeat("A", group="SLOW"))).code == 0
        assert len(calls) == 1


async def test_heartbeat_answers_system_error_when_creating_the_retry_topic_fails(tmp_path):
    async with broker(tmp_path) as ctx, peers(ctx, 1) as (a,):
        class BrokenTopics:
            def select(self, topic):
                return None

            def create_in_send_back(self, *args):
                raise OSError("disk on fire")

        ctx.topics = BrokenTopics()
        r = await a.call(34, body=cpp_heartbeat("A", group="BROKEN"))
        assert r.code == 1 and r.remark.startswith("OSError: disk on fire"), r.remark
        assert r.ext_fields is not None
        # the connection still works
        assert (await a.call(38, {"consumerGroup": "BROKEN"})).code == 0
