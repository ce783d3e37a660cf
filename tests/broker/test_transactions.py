"""Transactional messages in the broker, over real TCP with a real store: half messages,
END_TRANSACTION (commit, rollback, unknown, every refusal with nothing stored), the check
service (checks to a live producer connection, check copies, discards after
``transactionCheckMax``), one end per transaction however its answers race, and the
state rebuilt from the store after a restart.

The check service's loop is slowed to an hour here and each test runs its passes by
hand (``broker.transactions.check()``), with ``transactionTimeOut`` 0: deterministic,
and no sleeping.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.bodies.client import HeartbeatData, ProducerData
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import decode_header, encode_header
from trocket.codecs.headers import (
    CheckTransactionStateRequestHeader,
    DeleteTopicRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeaderV2,
)
from trocket.codecs.message import decode_record
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.message.properties import encode_properties
from trocket.codecs.serialize import encode_command
from trocket.codecs.message.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE
from trocket.codecs.java_hashmap import JavaHashMap
from trocket.broker.transaction import service as transaction_service
from trocket.broker.pre_put import pre_put_map, sent_items
from trocket.broker.store.messages import message_inner
from trocket.broker.transaction.records import committed_message, half_message, origin_offset, read_stored
from trocket.codecs.message.hosts import HostAddress
from trocket.remoting import ClientConfig, RemotingClient

HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
MAX_TIME = "TRANS_CHECK_MAX_TIME_TOPIC"
COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0
_uniq = iter(range(1, 1 << 30))


def _now() -> int:
    return time.time_ns() // 1_000_000


def prepared(topic: str, body: bytes, *, group: str = "PG", queue_id: int = 1, born: int | None = None,
             tran_msg: bool = True, sys_flag: int = TRANSACTION_PREPARED_TYPE, **extra: str) -> RemotingCommand:
    """A prepared send as Java's ``sendMessageInTransaction`` makes it."""
    props = {"KEYS": "k1", "TAGS": "TagA", "WAIT": "true", "UNIQ_KEY": f"U{next(_uniq):08d}", **extra}
    if tran_msg:
        props.update(TRAN_MSG="true", PGROUP=group)
    h = SendMessageRequestHeaderV2(
        a=group, b=topic, c="TBW102", d=4, e=queue_id, f=sys_flag, g=born if born is not None else _now(), h=7,
        i=encode_properties(props), j=0, k=False, m=False,
    )
    return RemotingCommand.request(310, h, body=body)


def end_request(answer_or_check, kind: int, *, group: str = "PG", from_check: bool = False,
                oneway: bool = False) -> RemotingCommand:
    """END_TRANSACTION for a prepared send's answer (its ext fields) or a check's header."""
    if isinstance(answer_or_check, CheckTransactionStateRequestHeader):
        offset, queue_offset = answer_or_check.commitLogOffset, answer_or_check.tranStateTableOffset
        msg_id = answer_or_check.msgId or ""
    else:
        offset = decode_offset_msg_id(answer_or_check["msgId"]).offset
        queue_offset = int(answer_or_check["queueOffset"])
        msg_id = "U"
    h = EndTransactionRequestHeader(
        producerGroup=group, tranStateTableOffset=queue_offset, commitLogOffset=offset, commitOrRollback=kind,
        fromTransactionCheck=from_check, msgId=msg_id,
    )
    return RemotingCommand.request(37, h, oneway=oneway)


def txn_broker(wire, tmp_path, **kw):
    kw.setdefault("transaction_timeout_ms", 0)
    kw.setdefault("transaction_check_interval_ms", 3_600_000)
    return wire.running_broker(tmp_path, **kw)


@asynccontextmanager
async def producer_client(addr: str, group: str = "PG", client_id: str = "127.0.0.1@txn"):
    """A RemotingClient registered as a producer of ``group`` (HEART_BEAT) whose
    CHECK_TRANSACTION_STATE requests arrive on the yielded channel."""
    send, receive = trio.open_memory_channel(100)

    def on_check(conn, request):
        send.send_nowait((decode_header(CheckTransactionStateRequestHeader, request.ext_fields), request))
        return None

    async with RemotingClient(ClientConfig(default_timeout=5.0)) as c:
        c.register_processor(39, on_check, inline=True)
        body = HeartbeatData(client_id=client_id, producers=[ProducerData(group)]).encode()
        r = await c.invoke_sync(addr, RemotingCommand.request(34, body=body), 5)
        assert r.code == 0
        yield c, receive


def stored(broker, topic: str, queue_id: int = 0) -> list:
    """The messages of a queue, decoded."""
    store = broker.store
    out = []
    for i in range(store.get_min_offset(topic, queue_id), store.get_max_offset(topic, queue_id)):
        phys, size, _ = store.get_queue_entry(topic, queue_id, i)
        out.append(decode_record(store.commit_log.get_message(phys, size))[0])
    return out


def visible(broker, topic: str) -> int:
    tc = broker.topics.select(topic)
    return sum(broker.store.get_max_offset(topic, q) for q in range(tc.read_queue_nums)) if tc else 0


# -- half messages -------------------------------------------------------------------------------


#: property keys for the half message's rewrite: the ones it moves or puts, each with a key
#: of the same String.hashCode (one bucket at any capacity: insertion order decides)
_KEYS = ["WAIT", "WAJ5", "CLUSTER", "CLUSTF3", "REAL_TOPIC", "REAL_TOPJ$", "REAL_QID", "REAL_QJ%", "TAGS", "KEYS",
         "UNIQ_KEY", "TRAN_MSG", "PGROUP", *(f"k{i}" for i in range(24))]


@settings(max_examples=80)
@given(st.lists(st.tuples(st.sampled_from(_KEYS), st.sampled_from(["v", "true", "x\x01y"])), max_size=30),
       st.integers(0, 7))
def test_a_sends_half_message_is_the_map_rewrites(items, queue_id):
    """A send's half message made from its header's properties (``sent_items``: no
    HashMap model) has the bytes and properties of the model's rewrite (``pre_put_map``
    then REAL_TOPIC / REAL_QID put: how the send path made it before), whatever the keys
    -- WAIT moved, CLUSTER or REAL_* already there, shared buckets, repeated keys, a
    table grown past 16 and 32."""
    props = "\x02".join(f"{k}\x01{v}" for k, v in items)
    msg = message_inner("TxTopic", b"body", queue_id, 0, b"", 4, 1, HostAddress("127.0.0.1", 9), 0, 0)
    # the model, step by step as 4.9.8's send processor and parseHalfMessageInner put and remove
    model = JavaHashMap.from_properties(props)
    model["CLUSTER"] = "DefaultCluster"
    wait = model.pop("WAIT", None)
    if wait is not None:
        model["WAIT"] = wait
    assert model.to_properties() == pre_put_map(props, "DefaultCluster").to_properties()
    with_real = model.copy()
    with_real["REAL_TOPIC"] = "TxTopic"
    with_real["REAL_QID"] = str(queue_id)
    expected = with_real.to_properties()
    half = half_message(msg, sent_items(props, "DefaultCluster"))
    assert half.properties_bytes == expected.encode()
    msg.properties = model
    before = model.to_properties()
    from_model = half_message(msg)
    assert from_model.properties_bytes == half.properties_bytes
    assert dict(from_model.properties) == dict(half.properties)
    assert model.to_properties() == before  # the message's own map unchanged



async def test_prepared_send_is_a_half_message(tmp_path, wire):
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, prepared("TxTopic", b"hello"))
        assert r.code == 0, r.remark
        # the answer: the half record's id and queue offset, the queue the producer addressed
        assert r.ext_fields["queueId"] == "1"
        assert r.ext_fields["queueOffset"] == "0"
        half = stored(broker, HALF)
        assert len(half) == 1
        h = half[0]
        assert decode_offset_msg_id(r.ext_fields["msgId"]).offset == h.commit_log_offset
        assert h.properties["REAL_TOPIC"] == "TxTopic" and h.properties["REAL_QID"] == "1"
        assert h.properties["TRAN_MSG"] == "true" and h.properties["PGROUP"] == "PG"
        assert h.sys_flag & 0xC == 0  # indexed: its transaction type reset
        assert h.body == b"hello" and h.flag == 7
        assert visible(broker, "TxTopic") == 0  # invisible to consumers

        # the prepared sysflag alone makes a half message too; a plain send does not
        r = await c.invoke_sync(addr, prepared("TxTopic", b"flag only", tran_msg=False))
        assert r.code == 0 and r.ext_fields["queueOffset"] == "1"
        r = await c.invoke_sync(addr, prepared("TxTopic", b"plain", tran_msg=False, sys_flag=0))
        assert r.code == 0
        assert [m.body for m in stored(broker, HALF)] == [b"hello", b"flag only"]
        assert [m.body for m in stored(broker, "TxTopic", 1)] == [b"plain"]


async def test_commit_stores_the_real_message_and_an_op_record(tmp_path, wire):
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"pay 10"))
        r = await c.invoke_sync(addr, end_request(prep.ext_fields, COMMIT))
        assert r.code == 0 and r.remark is None
        [real] = stored(broker, "TxTopic", 1)
        half_offset = decode_offset_msg_id(prep.ext_fields["msgId"]).offset
        assert real.body == b"pay 10" and real.flag == 7 and real.properties["TAGS"] == "TagA"
        assert real.sys_flag & 0xC == TRANSACTION_COMMIT_TYPE
        assert real.prepared_transaction_offset == half_offset
        assert "REAL_TOPIC" not in real.properties and "REAL_QID" not in real.properties
        assert "TRAN_MSG" not in real.properties and real.properties["PGROUP"] == "PG"
        [op] = stored(broker, OP)
        assert op.body == b"0" and op.properties == {"TAGS": "d", "WAIT": "true"}
        assert broker.transactions.commits == 1
        # the properties strings as Java's broker writes them: in HashMap order (a fixed
        # point of its parse and write), the half's with CLUSTER, WAIT and REAL_*; the
        # committed one's that map without REAL_TOPIC, REAL_QID and TRAN_MSG
        half_props = read_stored(broker.store, half_offset).raw_properties.decode()
        half_map = JavaHashMap.from_properties(half_props)
        assert half_map.to_properties() == half_props
        assert {"CLUSTER", "WAIT", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP"} <= set(half_map)
        real_props = read_stored(broker.store, real.commit_log_offset).raw_properties.decode()
        assert real_props == half_map.to_properties(without={"REAL_TOPIC", "REAL_QID", "TRAN_MSG"})


async def test_transactions_end_after_a_topic_delete_removed_the_half_queue(tmp_path, wire):
    """Deleting a topic cleans the consume queues of topics without a config, the half
    topic's among them until a check pass made its config (as Java's): the half queue
    starts again at offset 0, and a transaction prepared then is ended as a new one, not
    refused for the ended transaction that had that offset before."""
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for body in (b"one", b"two"):
            prep = await c.invoke_sync(addr, prepared("TxTopic", body))
            assert (await c.invoke_sync(addr, end_request(prep.ext_fields, COMMIT))).code == 0
        assert broker.topics.select(HALF) is None  # no check pass yet: no config
        assert (await c.invoke_sync(addr, prepared("GoneTopic", b"x", tran_msg=False, sys_flag=0))).code == 0
        r = await c.invoke_sync(addr, RemotingCommand.request(215, DeleteTopicRequestHeader(topic="GoneTopic")))
        assert r.code == 0, r.remark
        assert broker.store.get_max_offset(HALF, 0) == 0  # the half queue went with it

        prep = await c.invoke_sync(addr, prepared("TxTopic", b"three"))
        assert prep.ext_fields["queueOffset"] == "0"  # an offset an ended transaction had
        r = await c.invoke_sync(addr, end_request(prep.ext_fields, COMMIT))
        assert r.code == 0, r.remark
        assert [m.body for m in stored(broker, "TxTopic", 1)] == [b"one", b"two", b"three"]
        # and the check service sees the new queue from its start: nothing pending
        assert await broker.transactions.check() == 0
        assert broker.transactions.half_offset == 1


async def test_rollback_stores_only_the_op_record(tmp_path, wire):
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"undo"))
        r = await c.invoke_sync(addr, end_request(prep.ext_fields, ROLLBACK))
        assert r.code == 0
        assert visible(broker, "TxTopic") == 0
        assert [op.body for op in stored(broker, OP)] == [b"0"]


async def test_oneway_end_as_real_clients_send_it(tmp_path, wire):
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"oneway"))
        await c.invoke_oneway(addr, end_request(prep.ext_fields, COMMIT, oneway=True), 5)
        with trio.fail_after(5):
            while visible(broker, "TxTopic") < 1:
                await trio.sleep(0.01)
        assert [m.body for m in stored(broker, "TxTopic", 1)] == [b"oneway"]


async def test_oneway_ends_of_one_read_end_in_order_and_a_refusal_stops_only_its_own(tmp_path, wire):
    """Several oneway ENDs in one write (one read of the broker: ended together, after
    it): each ends as alone would, in order; a refused one (a second end of the same
    transaction, a wrong group) stores nothing and the others still end."""
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        a, b, d = [(await c.invoke_sync(addr, prepared("TxTopic", body))).ext_fields for body in (b"a", b"b", b"d")]
        ends = [
            end_request(a, COMMIT, oneway=True),
            end_request(a, ROLLBACK, oneway=True),  # already ended: refused
            end_request(b, ROLLBACK, oneway=True),
            end_request(d, COMMIT, group="OtherGroup", oneway=True),  # refused
            end_request(d, COMMIT, oneway=True),
        ]
        host, port = addr.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            await stream.send_all(b"".join(encode_command(e) for e in ends))
            with trio.fail_after(5):
                while len(stored(broker, OP)) < 3:
                    await trio.sleep(0.01)
        assert [m.body for m in stored(broker, "TxTopic", 1)] == [b"a", b"d"]
        assert [op.body for op in stored(broker, OP)] == [b"0", b"1", b"2"]
        t = broker.transactions
        assert (t.commits, t.rollbacks, t.refused) == (2, 1, 2)


async def test_ended_transactions_at_the_check_offset_are_folded_past_fold_at(tmp_path, wire, monkeypatch):
    """What an END holds (``ended``, ``ops``) stays bounded between check passes: past
    FOLD_AT held, an END moves the check offset over the ended head itself; a pending
    transaction at the head stops it, and once ended lets it through."""
    monkeypatch.setattr(transaction_service, "FOLD_AT", 3)
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        t = broker.transactions
        preps = [(await c.invoke_sync(addr, prepared("TxTopic", b"%d" % i))).ext_fields for i in range(12)]
        for prep in preps[1:]:  # the first stays pending: nothing passes it
            assert (await c.invoke_sync(addr, end_request(prep, COMMIT))).code == 0
        assert t.half_offset == 0 and len(t.ended) == 11
        assert (await c.invoke_sync(addr, end_request(preps[0], COMMIT))).code == 0
        assert t.half_offset == 12 and not t.ended and not t.ops and t.op_offset == 12
        again = await c.invoke_sync(addr, end_request(preps[5], ROLLBACK))  # passed: still refused
        assert again.code != 0 and "not pending any more" in again.remark
        assert visible(broker, "TxTopic") == 12 and t.commits == 12


async def test_a_committed_message_with_a_delay_is_delayed(tmp_path, wire):
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"later", DELAY="3"))
        assert visible(broker, "SCHEDULE_TOPIC_XXXX") == 0  # the half message is not delayed
        r = await c.invoke_sync(addr, end_request(prep.ext_fields, COMMIT))
        assert r.code == 0
        assert visible(broker, "TxTopic") == 0
        [delayed] = stored(broker, "SCHEDULE_TOPIC_XXXX", 2)
        assert delayed.properties["REAL_TOPIC"] == "TxTopic" and delayed.sys_flag & 0xC == TRANSACTION_COMMIT_TYPE


# -- the half messages kept for their END ------------------------------------------------------


async def test_an_end_finds_its_half_message_kept_as_it_would_read_it_back(tmp_path, wire):
    """A prepared send's half message is kept for its END (nothing read back): what the
    END checks and the committed record it stores are the same as from the record
    read back, whatever the message's shape (non-ASCII properties, a delay, a first
    half message named, its flag); the END takes it out."""
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        t = broker.transactions
        shapes = [
            prepared("TxTopic", b"plain"),
            prepared("TxTopic", "zürich €".encode(), queue_id=3, KEYS="schlüssel", DELAY="2"),
            prepared("TxTopic", b"", group="PG2", TRAN_PREPARED_QUEUE_OFFSET="0"),
            prepared("TxTopic", b"flag only", tran_msg=False, TAGS="", PGROUP="PG"),
        ]
        for req in shapes:
            ext = (await c.invoke_sync(addr, req)).ext_fields
            offset = decode_offset_msg_id(ext["msgId"]).offset
            kept, read = t.kept[offset], read_stored(broker.store, offset)
            assert kept.queue_offset == read.head.queue_offset == int(ext["queueOffset"])
            assert dict(kept.properties) == read.properties
            assert origin_offset(kept, kept.queue_offset) == origin_offset(read, kept.queue_offset)
            assert committed_message(kept, offset) == committed_message(read, offset)
        assert len(t.kept) == 4 and t.kept_bytes == sum(k.size for k in t.kept.values())
        ext = (await c.invoke_sync(addr, prepared("TxTopic", b"ends"))).ext_fields
        assert (await c.invoke_sync(addr, end_request(ext, COMMIT))).code == 0
        assert len(t.kept) == 4 and visible(broker, "TxTopic") == 1


async def test_a_kept_half_message_is_refused_as_one_read_back(tmp_path, wire):
    """The refusals of a kept half message's END are those of one read back (Java's
    remarks, nothing stored); the END after them reads it back and ends it."""
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        t = broker.transactions
        for wrong, remark in (
            ({"group": "OtherGroup"}, "The producer group wrong"),
            ({"queueOffset": "3"}, "The transaction state table offset wrong"),
        ):
            ext = (await c.invoke_sync(addr, prepared("TxTopic", b"x"))).ext_fields
            assert decode_offset_msg_id(ext["msgId"]).offset in t.kept
            before = broker.store.max_phy_offset
            req = end_request({**ext, "queueOffset": wrong.get("queueOffset", ext["queueOffset"])}, COMMIT,
                              group=wrong.get("group", "PG"))
            r = await c.invoke_sync(addr, req)
            assert (r.code, r.remark) == (1, remark) and broker.store.max_phy_offset == before
            assert (await c.invoke_sync(addr, end_request(ext, COMMIT))).code == 0
        assert not t.kept and visible(broker, "TxTopic") == 2 and t.refused == 2


async def test_half_messages_kept_are_bounded_the_oldest_read_back(tmp_path, wire, monkeypatch):
    """At most PREPARED_KEPT half messages and PREPARED_KEPT_BYTES are kept, the oldest
    dropped first, none larger than PREPARED_KEPT_MAX_SIZE; the END of one not kept
    reads it back and ends it all the same."""
    monkeypatch.setattr(transaction_service, "PREPARED_KEPT", 2)
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        t = broker.transactions
        preps = [(await c.invoke_sync(addr, prepared("TxTopic", b"%d" % i))).ext_fields for i in range(3)]
        offsets = [decode_offset_msg_id(p["msgId"]).offset for p in preps]
        assert list(t.kept) == offsets[1:]
        size = t.kept[offsets[2]].size  # (every one's properties are as long: only bodies differ)
        monkeypatch.setattr(transaction_service, "PREPARED_KEPT", 100)
        monkeypatch.setattr(transaction_service, "PREPARED_KEPT_BYTES", 2 * size + 50)
        monkeypatch.setattr(transaction_service, "PREPARED_KEPT_MAX_SIZE", size + 60)
        preps.append((await c.invoke_sync(addr, prepared("TxTopic", b"m" * 40))).ext_fields)  # pushes one out
        offsets.append(decode_offset_msg_id(preps[-1]["msgId"]).offset)
        assert list(t.kept) == offsets[2:] and t.kept_bytes == 2 * size + 39
        preps.append((await c.invoke_sync(addr, prepared("TxTopic", b"b" * 100))).ext_fields)  # too large
        assert list(t.kept) == offsets[2:]
        for prep in preps:
            assert (await c.invoke_sync(addr, end_request(prep, COMMIT))).code == 0
        assert not t.kept and t.kept_bytes == 0
        bodies = sorted([b"0", b"1", b"2", b"m" * 40, b"b" * 100])
        assert sorted(m.body for m in stored(broker, "TxTopic", 1)) == bodies


# -- refusals: Java's codes and remarks, nothing stored -------------------------------------------


async def test_end_transaction_refusals(tmp_path, wire):
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        plain = await c.invoke_sync(addr, wire.send_v1("TxTopic", b"plain", properties=wire.props()))
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"x"))
        ext = prep.ext_fields
        plain_ext = {"msgId": plain.ext_fields["msgId"], "queueOffset": plain.ext_fields["queueOffset"]}
        mid_record = {"msgId": ext["msgId"][:-4] + "%04X" % (int(ext["msgId"][-4:], 16) + 5), "queueOffset": "0"}
        before = (broker.store.max_phy_offset, visible(broker, "TxTopic"))
        cases = [
            (end_request(plain_ext, COMMIT), "Find prepared transaction message failed"),  # not a half message
            (end_request(mid_record, COMMIT), "Find prepared transaction message failed"),  # no record there
            (end_request(ext, COMMIT, group="OtherGroup"), "The producer group wrong"),
            (end_request({**ext, "queueOffset": "3"}, ROLLBACK), "The transaction state table offset wrong"),
            (end_request(ext, 5), "RemotingCommandException: commitOrRollback field wrong"),
            (RemotingCommand(code=37, ext_fields={
                k: v for k, v in encode_header(end_request(ext, COMMIT).custom_header).items() if k != "producerGroup"
            }),
             "RemotingCommandException: the custom field <producerGroup> is null "
             "(EndTransactionRequestHeader.producerGroup)"),
        ]
        for req, remark in cases:
            r = await c.invoke_sync(addr, req)
            assert (r.code, r.remark) == (1, remark)
            assert r.ext_fields == {}
        assert (broker.store.max_phy_offset, visible(broker, "TxTopic")) == before
        # "unknown" leaves it to the checks: nothing stored (Java answers nothing; here SUCCESS)
        r = await c.invoke_sync(addr, end_request(ext, UNKNOWN))
        assert r.code == 0 and (broker.store.max_phy_offset, visible(broker, "TxTopic")) == before

        # ended once; a second end, either way, is refused and stores nothing
        assert (await c.invoke_sync(addr, end_request(ext, COMMIT))).code == 0
        after = (broker.store.max_phy_offset, visible(broker, "TxTopic"))
        for kind in (COMMIT, ROLLBACK):
            r = await c.invoke_sync(addr, end_request(ext, kind))
            assert r.code == 1
            assert r.remark == "The transaction of this prepared message has already been committed or rolled back"
        assert (broker.store.max_phy_offset, visible(broker, "TxTopic")) == after
        assert broker.transactions.refused == 7  # (the header that does not decode is refused before)


async def test_end_transaction_on_a_slave(tmp_path, wire):
    async with txn_broker(wire, tmp_path, broker_role="SLAVE", ha_master_address="127.0.0.1:1") as broker, \
            wire.client() as c:
        r = await c.invoke_sync(broker.broker_addr, end_request({"msgId": "7F00000100002A9F0000000000000000", "queueOffset": "0"}, COMMIT))
        assert r.code == 11  # SLAVE_NOT_AVAILABLE


# -- the check service ----------------------------------------------------------------------------


async def test_check_asks_a_live_producer_and_its_answer_ends_it(tmp_path, wire):
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"ask me", queue_id=2))
        async with producer_client(addr) as (pc, checks):
            assert await broker.transactions.check() == 1
            with trio.fail_after(5):
                header, request = await checks.receive()
            assert request.is_oneway
            # the body: the half message on its real topic and queue, with its check count
            msg, _ = decode_record(request.body)
            assert (msg.topic, msg.queue_id, msg.body) == ("TxTopic", 2, b"ask me")
            assert msg.properties["TRANSACTION_CHECK_TIMES"] == "1"
            assert header.msgId == header.transactionId == msg.properties["UNIQ_KEY"]
            # the header names the check copy, now at the head of the half queue
            assert header.tranStateTableOffset == 1 == msg.queue_offset
            assert decode_offset_msg_id(header.offsetMsgId).offset == header.commitLogOffset == msg.commit_log_offset
            r = await pc.invoke_sync(addr, end_request(header, COMMIT, from_check=True), 5)
            assert r.code == 0
        assert [m.body for m in stored(broker, "TxTopic", 2)] == [b"ask me"]
        # the producer's own, late, commit of the first half message is refused: ended once
        r = await c.invoke_sync(addr, end_request(prep.ext_fields, COMMIT))
        assert r.code == 1 and "already been committed" in r.remark
        assert visible(broker, "TxTopic") == 1
        # the next pass finds nothing to check and moves the check offsets on
        assert await broker.transactions.check() == 0
        assert broker.transactions.half_offset == 2
        assert broker.offsets.query_offset("CID_RMQ_SYS_TRANS", HALF, 0) == 2
        assert broker.offsets.query_offset("CID_RMQ_SYS_TRANS", OP, 0) == 1


async def test_a_late_end_of_a_checked_transaction_ends_its_live_copy(tmp_path, wire):
    """The producer's commit arrives after a check copied the half message: it ends the
    copy, and the answer to the check is then refused (Java would deliver twice)."""
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"once"))
        async with producer_client(addr) as (pc, checks):
            await broker.transactions.check()
            header, _ = await checks.receive()
            assert (await c.invoke_sync(addr, end_request(prep.ext_fields, COMMIT))).code == 0
            r = await pc.invoke_sync(addr, end_request(header, COMMIT, from_check=True), 5)
            assert r.code == 1 and "already been committed" in r.remark
            assert await broker.transactions.check() == 0  # neither copy is checked again
        assert [m.body for m in stored(broker, "TxTopic", 1)] == [b"once"]
        assert [op.body for op in stored(broker, OP)] == [b"1"]  # the live copy's offset


async def test_young_messages_wait_and_unknown_answers_are_checked_again(tmp_path, wire):
    async with txn_broker(wire, tmp_path, transaction_timeout_ms=60_000) as broker, wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, prepared("TxTopic", b"old", born=_now() - 120_000))
        await c.invoke_sync(addr, prepared("TxTopic", b"young"))
        await c.invoke_sync(addr, prepared("TxTopic", b"old but behind", born=_now() - 120_000))
        async with producer_client(addr) as (pc, checks):
            assert await broker.transactions.check() == 1  # the young one ends the pass
            header, request = await checks.receive()
            assert decode_record(request.body)[0].body == b"old"
            await pc.invoke_oneway(addr, end_request(header, UNKNOWN, from_check=True, oneway=True), 5)
            assert broker.transactions.half_offset == 1
            broker.config.transaction_timeout_ms = 0
            broker.transactions.clock = lambda: _now() + 1  # (a copy stored this ms ends a pass)
            # "young", "old but behind", and the copy of "old" (its answer was "unknown")
            assert await broker.transactions.check() == 3
            broker.transactions.clock = lambda: _now() + 2
            assert await broker.transactions.check() == 3  # the three copies, once each
            got = [decode_record((await checks.receive())[1].body)[0] for _ in range(6)]
            assert [(m.body, m.properties["TRANSACTION_CHECK_TIMES"]) for m in got] == [
                (b"young", "1"), (b"old but behind", "1"), (b"old", "2"),
                (b"young", "2"), (b"old but behind", "2"), (b"old", "3"),
            ]


async def test_discarded_after_check_max_and_late_answers_refused(tmp_path, wire):
    async with txn_broker(wire, tmp_path, transaction_check_max=2) as broker, wire.client() as c:
        addr = broker.broker_addr
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"nobody knows"))
        async with producer_client(addr) as (pc, checks):
            svc = broker.transactions
            for n in range(2):
                svc.clock = lambda n=n: _now() + 10 * (n + 1)
                assert await svc.check() == 1
            _, last = await checks.receive(), await checks.receive()
            svc.clock = lambda: _now() + 100
            assert await svc.check() == 0
            assert svc.discarded == 1
            [gone] = stored(broker, MAX_TIME)
            assert gone.body == b"nobody knows" and gone.properties["TRANSACTION_CHECK_TIMES"] == "2"
            assert gone.properties["REAL_TOPIC"] == "TxTopic"
            assert broker.topics.select(MAX_TIME) is not None
            before = broker.store.max_phy_offset
            for req in (end_request(last[0], COMMIT, from_check=True), end_request(prep.ext_fields, COMMIT)):
                r = await pc.invoke_sync(addr, req, 5)
                assert r.code == 1 and "not pending any more" in r.remark, r.remark
            assert broker.store.max_phy_offset == before and visible(broker, "TxTopic") == 0


async def test_no_producer_connected_counts_the_check(tmp_path, wire):
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        await c.invoke_sync(broker.broker_addr, prepared("TxTopic", b"orphan"))
        assert await broker.transactions.check() == 0
        assert broker.transactions.checks_unrouted == 1
        # the copy counts the check all the same (Java's)
        assert stored(broker, HALF)[-1].properties["TRANSACTION_CHECK_TIMES"] == "1"
        info = broker.runtime_info()
        assert info["transactionHalfPending"] == "1" and int(info["transactionHalfOldestAgeMs"]) >= 0


@pytest.mark.parametrize("offsets", ["kept", "lost"])
async def test_state_is_rebuilt_from_the_store_after_a_restart(tmp_path, wire, offsets):
    """Commits, rollbacks and check copies survive a restart: the check resumes from its
    persisted offsets, and where they were lost (kill -9 before their flush) it goes over
    the queue again; either way nothing ended is checked or ended again, the pending one is."""
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        preps = [await c.invoke_sync(addr, prepared("TxTopic", b"m%d" % i)) for i in range(4)]
        assert (await c.invoke_sync(addr, end_request(preps[0].ext_fields, COMMIT))).code == 0
        assert (await c.invoke_sync(addr, end_request(preps[1].ext_fields, ROLLBACK))).code == 0
        async with producer_client(addr) as (pc, checks):
            assert await broker.transactions.check() == 2  # m2, m3
            h2, _ = await checks.receive()
            assert (await pc.invoke_sync(addr, end_request(h2, COMMIT, from_check=True), 5)).code == 0
        # the pass went up to its own copies (4, 5); the op records before them are folded
        assert (broker.transactions.half_offset, broker.transactions.op_offset) == (4, 2)
    if offsets == "lost":
        (tmp_path / "store" / "config" / "consumerOffset.json").unlink()
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        svc = broker.transactions
        if offsets == "kept":  # read back from consumerOffset.json (group CID_RMQ_SYS_TRANS)
            assert (svc.half_offset, svc.op_offset) == (4, 2)
            assert svc.ended == {4} and svc.latest == {2: 4, 3: 5}
        else:
            assert (svc.half_offset, svc.op_offset) == (0, 0)
            assert svc.ended == {0, 1, 4} and svc.latest == {2: 4, 3: 5}
        addr = broker.broker_addr
        for prep in preps[:3]:  # m0 committed, m1 rolled back, m2 committed after its check
            r = await c.invoke_sync(addr, end_request(prep.ext_fields, COMMIT))
            assert r.code == 1, r.remark
        async with producer_client(addr) as (pc, checks):
            assert await svc.check() == 1  # m3 only, through its live copy
            h3, request = await checks.receive()
            assert decode_record(request.body)[0].body == b"m3"
            assert (await pc.invoke_sync(addr, end_request(h3, COMMIT, from_check=True), 5)).code == 0
        assert sorted(m.body for m in stored(broker, "TxTopic", 1)) == [b"m0", b"m2", b"m3"]


# -- replication ----------------------------------------------------------------------------------


async def test_half_and_op_records_replicate_and_a_slave_never_checks(tmp_path, wire):
    """SYNC_MASTER + slave: the half message, the op record and the committed message are
    on the slave when the sends are answered; the check's offsets reach it with the
    consumer offsets; the slave neither checks nor ends."""
    async with txn_broker(wire, tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0)) as master:
        async with txn_broker(wire, tmp_path / "s", broker_role="SLAVE", namesrv_addrs=master.namesrv.address,
                              slave_sync_interval_ms=200) as slave, wire.client() as c:
            with trio.fail_after(10):
                while master.ha.transfer.connections != 1:
                    await trio.sleep(0.01)
            addr = master.broker_addr
            committed = await c.invoke_sync(addr, prepared("TxTopic", b"kept"))
            pending = await c.invoke_sync(addr, prepared("TxTopic", b"open"))
            assert committed.code == pending.code == 0
            assert (await c.invoke_sync(addr, end_request(committed.ext_fields, COMMIT))).code == 0
            await c.invoke_sync(addr, wire.send_v1("TxTopic", b"after", properties=wire.props(), queue_id=1))
            for topic, q in ((HALF, 0), (OP, 0), ("TxTopic", 1)):
                assert [m.body for m in stored(slave, topic, q)] == [m.body for m in stored(master, topic, q)]
            assert [m.body for m in stored(slave, "TxTopic", 1)] == [b"kept", b"after"]
            assert await master.transactions.check() == 0  # (no producer connected: counted, not sent)
            with trio.fail_after(10):
                while slave.offsets.query_offset("CID_RMQ_SYS_TRANS", HALF, 0) != 2:
                    await trio.sleep(0.05)
            assert slave.transactions.passes == 0 and slave.transactions.half_offset == 0
            r = await c.invoke_sync(slave.broker_addr, end_request(pending.ext_fields, COMMIT))
            assert r.code == 11  # SLAVE_NOT_AVAILABLE


# -- RESUME_CHECK_HALF_MESSAGE (323) ------------------------------------------------------------


def resume(msg_id: str | None) -> RemotingCommand:
    return RemotingCommand.request(323, ext_fields={} if msg_id is None else {"msgId": msg_id})


async def test_resume_check_puts_a_live_half_message_back_as_its_transactions_live_copy(tmp_path, wire):
    """The copy carries TRANSACTION_CHECK_TIMES 0 and names the first half message: the
    checks ask about the copy only, and the producer's END of the first one ends it once."""
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"again", TRANSACTION_CHECK_TIMES="7"))
        r = await c.invoke_sync(addr, resume(prep.ext_fields["msgId"]))
        assert (r.code, r.remark) == (0, None)
        first, copy = stored(broker, HALF)
        assert copy.body == b"again" and copy.queue_id == 0 and copy.queue_offset == 1
        assert copy.properties["TRANSACTION_CHECK_TIMES"] == "0"
        assert copy.properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
        assert copy.properties["REAL_TOPIC"] == "TxTopic" and copy.properties["UNIQ_KEY"] == first.properties["UNIQ_KEY"]
        assert broker.transactions.latest[0] == 1
        async with producer_client(addr) as (pc, checks):
            assert await broker.transactions.check() == 1  # the copy's check only (the first is superseded)
            header, request = await checks.receive()
            msg, _ = decode_record(request.body)
            assert msg.properties["TRANSACTION_CHECK_TIMES"] == "1" and header.tranStateTableOffset == 2
        assert (await c.invoke_sync(addr, end_request(prep.ext_fields, COMMIT))).code == 0
        r = await c.invoke_sync(addr, end_request(header, COMMIT, from_check=True))
        assert r.code == 1 and "already been committed" in r.remark
        assert [m.body for m in stored(broker, "TxTopic", 1)] == [b"again"]


async def test_resume_check_brings_a_discarded_half_message_back(tmp_path, wire):
    """mqadmin's use: a half message the checks gave up on (TRANS_CHECK_MAX_TIME_TOPIC) is
    checked again from 0 and its producer's answer commits it."""
    async with txn_broker(wire, tmp_path, transaction_check_max=1) as broker, wire.client() as c:
        addr = broker.broker_addr
        await c.invoke_sync(addr, prepared("TxTopic", b"revived"))
        svc = broker.transactions
        svc.clock = lambda: _now() + 10
        assert await svc.check() == 0 and svc.discarded == 0  # checked once, nobody to ask
        svc.clock = lambda: _now() + 20
        await svc.check()
        assert svc.discarded == 1
        [gone] = stored(broker, MAX_TIME)
        r = await c.invoke_sync(addr, resume(gone.msg_id))
        assert r.code == 0, r.remark
        assert stored(broker, HALF)[-1].properties["TRANSACTION_CHECK_TIMES"] == "0"
        async with producer_client(addr) as (pc, checks):
            svc.clock = lambda: _now() + 30
            assert await svc.check() == 1
            header, _ = await checks.receive()
            assert (await pc.invoke_sync(addr, end_request(header, COMMIT, from_check=True), 5)).code == 0
        assert [m.body for m in stored(broker, "TxTopic", 1)] == [b"revived"]


async def test_resume_check_refusals(tmp_path, wire):
    """Java's two SYSTEM_ERROR remarks: anything that finds no message (no id, an id that
    is not an offset id, an offset with no message) is the "exception" one; a store that
    refuses the put (a slave's) the "failed" one."""
    thrown = "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."
    async with txn_broker(wire, tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        prep = await c.invoke_sync(addr, prepared("TxTopic", b"x"))
        past_end = prep.ext_fields["msgId"][:-16] + "%016X" % (broker.store.max_phy_offset + 100)
        for msg_id in (None, "", "not-an-id", past_end):
            r = await c.invoke_sync(addr, resume(msg_id))
            assert (r.code, r.remark) == (1, thrown), msg_id
        assert len(stored(broker, HALF)) == 1
        broker.store.set_slave(True)  # the store refuses puts, as a slave's does
        r = await c.invoke_sync(addr, resume(prep.ext_fields["msgId"]))
        assert (r.code, r.remark) == (1, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
        broker.store.set_slave(False)
        assert len(stored(broker, HALF)) == 1
