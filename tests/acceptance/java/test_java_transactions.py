"""Transactions and request-reply with the real Java 4.9.8 client, against ``trocket
broker`` and against the Java 4.9.8 broker: the same program, the same outcome (where
the two brokers differ on purpose, the test says so); trocket's own clients against both;
kill -9 between prepare and commit.

The Java side is ``TxnTool`` (src/TxnTool.java: a ``TransactionMQProducer``, a push
consumer, ``request()`` and a replier), compiled with the suite's other programs. The
brokers here are this module's own, which check every second with a
``transactionTimeOut`` of one second, so a check comes within about two.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import time
from collections import Counter
from pathlib import Path

import attrs
import pytest

from acc_tools import BrokerProcess, RawClient, decode_records
from java_tools import (
    Bundle,
    JavaBroker,
    JavaNameServer,
    Peer,
    finish_program,
    in_thread,
    route_queue_datas,
    start_program,
    wait_for,
)

#: the Java broker boots from the module's start, while the trocket run's tests go
pytestmark = pytest.mark.usefixtures("java_txn_servers")

#: checks every second, a transaction older than a second checked, discarded after 3 checks;
#: the trace topic made (the trace scenario)
CHECK_CONF = {"transactionCheckInterval": "1000", "transactionTimeOut": "1000", "transactionCheckMax": "3",
              "traceTopicEnable": "true"}
HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
MAX_TIME = "TRANS_CHECK_MAX_TIME_TOPIC"


@attrs.define(slots=True, frozen=True)
class Tool:
    """``TxnTool`` runs."""

    bundle: Bundle
    classes: Path

    def start(self, args: list[str], *, home: Path, props: dict[str, str] | None = None):
        return start_program(self.bundle, self.classes, "TxnTool", args, home=home, props=props)

    def run(self, args: list[str], *, home: Path, timeout: float = 120.0) -> list[str]:
        return finish_program(self.start(args, home=home), timeout)


@pytest.fixture(scope="session")
def tool(java_bundle, java_classes) -> Tool:
    return Tool(java_bundle, java_classes)


def trocket_txn_broker(home: Path, conf: dict[str, str] = CHECK_CONF) -> BrokerProcess:
    home.mkdir(parents=True, exist_ok=True)
    (home / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    return BrokerProcess(home / "store", home / "broker.log", extra=["-c", str(home / "broker.conf")])


@pytest.fixture(scope="module", params=["trocket", "java"])
def txn_peer(request, java_bundle, tmp_path_factory):
    """``trocket broker`` and the Java broker in turn, each checking every second."""
    if request.param == "trocket":
        home = tmp_path_factory.mktemp("txn-peer-trocket")
        broker = trocket_txn_broker(home)
        broker.start()
        try:
            yield Peer("trocket", broker.namesrv, f"127.0.0.1:{broker.port}", broker.store, broker.log_tail)
        finally:
            rc = broker.stop()
            assert rc == 130 and "shut down cleanly" in broker.log_text(), broker.log_tail()
        return
    yield request.getfixturevalue("java_txn_servers").result(timeout=120)


@pytest.fixture(scope="module")
def java_txn_servers(java_bundle, tmp_path_factory):
    """The Java name server and broker of txn_peer's java run, booting in a thread from
    the module's first test on (while the trocket run's tests go): a Future of the Peer."""
    home = tmp_path_factory.mktemp("txn-peer-java")
    ns = JavaNameServer(java_bundle, home / "namesrv")
    broker = JavaBroker(java_bundle, home / "broker", ns.addr, CHECK_CONF)

    def boot() -> Peer:
        ns.start()
        ns.wait_ready()
        broker.start()
        broker.wait_ready()
        broker.wait_registered()
        return Peer("java", ns.addr, broker.addr, broker.store, broker.log_tail)

    booting = in_thread(boot)
    try:
        yield booting
    finally:  # (its store is thrown away: no clean shutdown to wait for)
        concurrent.futures.wait([booting])
        broker.kill()
        ns.kill()


def _names(peer: Peer, what: str) -> tuple[str, str, str]:
    tag = f"{what}_{peer.kind}_{os.getpid()}_{time.monotonic_ns() % 10**6}"
    return f"Tx{tag}", f"PG_{tag}", f"CG_{tag}"


def consume(tool: Tool, peer: Peer, topic: str, group: str, count: int, log_dir: Path,
            quiet: int = 1) -> list[tuple[str, int, dict]]:
    """What a Java push consumer gets from ``topic`` (from the first offset): (body,
    sysflag, properties), after ``count`` messages ``quiet`` seconds more. And then the
    topic's queues hold exactly what came: a message the broker should not have stored
    (rolled back, committed twice) fails here, however late its delivery would be."""
    lines = tool.run(["consume", peer.namesrv, topic, group, str(count), "40", str(quiet)], home=log_dir, timeout=90)
    out = []
    for line in lines:
        if line.startswith("MSG "):
            _, body, sys_flag, props = line.split(" ", 3)
            out.append((body, int(sys_flag), json.loads(props)))
    assert lines and lines[-1].startswith("DONE"), lines
    (route,) = route_queue_datas(peer.namesrv, topic)
    with RawClient(peer.hostport) as c:
        stored = sum(c.max_offset(topic, q) for q in range(route["writeQueueNums"]))
    assert stored == len(out), (stored, out)
    return out


def test_java_transaction_producer_outcomes(txn_peer, tool, tmp_path):
    """commit delivered, rollback never, UNKNOW checked back and then delivered (or
    rolled back), a local transaction that throws checked back: once each."""
    peer = txn_peer
    topic, pgroup, cgroup = _names(peer, "outcomes")
    specs = ["commit", "rollback", "unknown:commit", "throw:rollback", "unknown:unknown:commit", "unknown:rollback"]
    lines = tool.run(["txn", peer.namesrv, topic, pgroup, "40", *specs], home=tmp_path, timeout=120)
    sent = [line.split() for line in lines if line.startswith("SENT ")]
    assert [(s[2], s[3]) for s in sent] == [
        ("SEND_OK", "COMMIT_MESSAGE"), ("SEND_OK", "ROLLBACK_MESSAGE"), ("SEND_OK", "UNKNOW"),
        ("SEND_OK", "UNKNOW"), ("SEND_OK", "UNKNOW"), ("SEND_OK", "UNKNOW"),
    ], lines
    assert lines[-1] == "DONE answered=4 pending=4", lines
    checks = [line.split() for line in lines if line.startswith("CHECK ")]
    by_body: dict[str, list[list[str]]] = {}
    for c in checks:
        by_body.setdefault(c[1], []).append(c)
    # checked on its real topic, counting the checks: message 4 needed two
    assert sorted(by_body) == ["m2-unknown:commit", "m3-throw:rollback", "m4-unknown:unknown:commit",
                               "m5-unknown:rollback"], lines
    assert [c[2] for c in by_body["m4-unknown:unknown:commit"][:2]] == ["1", "2"], lines
    assert all(c[3] == topic for c in checks), lines

    got = consume(tool, peer, topic, cgroup, 3, tmp_path)
    assert sorted(b for b, _, _ in got) == ["m0-commit", "m2-unknown:commit", "m4-unknown:unknown:commit"], (got, lines)
    assert all(flag & 0xC == 8 for _, flag, _ in got), got  # TRANSACTION_COMMIT_TYPE
    props = {b: p for b, _, p in got}
    assert props["m0-commit"]["PGROUP"] == pgroup and props["m0-commit"]["KEYS"] == "key0", got
    assert props["m4-unknown:unknown:commit"]["TRANSACTION_CHECK_TIMES"] == "2", (got, lines)
    # what differs on purpose: 4.9.8 leaves its own REAL_TOPIC/REAL_QID/TRAN_MSG in the
    # delivered properties (it builds the stored string before clearing them)
    internal = {"REAL_TOPIC", "REAL_QID", "TRAN_MSG"}
    if peer.kind == "java":
        assert all(internal <= set(p) for p in props.values())
    else:
        assert not any(internal & set(p) for p in props.values())


def test_trocket_transaction_producer_outcomes(txn_peer, tool, tmp_path):
    """trocket's TransactionProducer, the same transactions: the same outcome on both
    brokers (a Java consumer reads them)."""
    peer = txn_peer
    import trio

    from trocket.client import ClientConfig, TransactionProducer, new_message
    from trocket.client import LocalTransactionState as S

    topic, pgroup, cgroup = _names(peer, "tr_outcomes")
    words = {"commit": S.COMMIT_MESSAGE, "rollback": S.ROLLBACK_MESSAGE, "unknown": S.UNKNOW}
    specs = ["commit", "rollback", "unknown:commit", "throw:rollback", "unknown:unknown:commit", "unknown:rollback"]
    checks: dict[str, list[str]] = {}
    final: set[str] = set()

    class Listener:
        async def execute(self, msg, spec):
            if spec.startswith("throw"):
                raise RuntimeError("local transaction failed")
            return words[spec.split(":")[0]]

        def check(self, msg):  # a plain function: a worker thread
            body = msg.body.decode()
            times = checks.setdefault(body, [])
            times.append(msg.properties["TRANSACTION_CHECK_TIMES"])
            parts = body.split("-", 1)[1].split(":")
            answer = parts[min(len(times), len(parts) - 1)]
            if answer != "unknown":
                final.add(body)
            assert msg.topic == topic
            return words[answer]

    async def main():
        config = ClientConfig(namesrv=peer.namesrv, heartbeat_interval=1.0)
        async with TransactionProducer(pgroup, listener=Listener(), client_config=config) as producer:
            results = [await producer.send_in_transaction(new_message(topic, f"m{i}-{spec}"), spec)
                       for i, spec in enumerate(specs)]
            with trio.move_on_after(40):
                while len(final) < 4:
                    await trio.sleep(0.1)
            await trio.sleep(0.5)  # the last answer's END_TRANSACTION is oneway
            return results

    results = trio.run(main)
    assert [r.local_transaction_state for r in results] == [
        S.COMMIT_MESSAGE, S.ROLLBACK_MESSAGE, S.UNKNOW, S.UNKNOW, S.UNKNOW, S.UNKNOW]
    assert sorted(final) == ["m2-unknown:commit", "m3-throw:rollback", "m4-unknown:unknown:commit", "m5-unknown:rollback"]
    assert checks["m4-unknown:unknown:commit"][:2] == ["1", "2"]
    got = consume(tool, peer, topic, cgroup, 3, tmp_path)
    assert sorted(b for b, _, _ in got) == ["m0-commit", "m2-unknown:commit", "m4-unknown:unknown:commit"]


def _trace_shape(fields: list[str], names: dict[str, str]) -> tuple[str, ...]:
    """A trace record's fields with what differs between two runs named: times, costs,
    request ids, and the run's own ids, groups and topic (``names``: value -> label)."""
    varying = {"Pub": {1, 10}, "SubBefore": {1, 4}, "SubAfter": {1, 3, 7}, "EndTransaction": {1}}.get(fields[0], set())
    shape = ["<var>" if i in varying else names.get(f, f) for i, f in enumerate(fields)]
    if fields[0] == "Pub" and len(fields) > 12 and fields[12] not in ("", "null"):
        shape[12] = "<offsetId>"  # (Java's TransactionSendResult has no offset id to name it by)
    return tuple(shape)


def test_trace_of_a_transaction_and_a_lite_pull_consumer_matches_javas(txn_peer, java_classes, tool, tmp_path):
    """The Java client's TransactionMQProducer and DefaultLitePullConsumer with
    enableMsgTrace (src/FeatureScenarios.traceTxnLite) and trocket's TransactionProducer
    and PullConsumer with trace=True, on the same broker: the same records about the
    message -- Pub (Trans_Msg_Half), EndTransaction (Trans_msg_Commit, COMMIT_MESSAGE, not
    from a check), SubBefore, SubAfter -- field for field, but for times, costs, request
    ids and each run's own names and ids. (On these brokers: the suite's shared ones run
    mqadmin cleanUnusedTopic, which empties the half topic's queue, as Java's does.)"""
    peer = txn_peer
    import trio

    from java_tools import run_step
    from trocket.client import LocalTransactionState, PullConsumer, TransactionProducer, new_message
    from trocket.client.trace import CONTENT_SPLITOR, FIELD_SPLITOR

    java = run_step(tool.bundle, java_classes, tmp_path / "java", "trace_txn_lite", namesrv=peer.namesrv,
                    broker=peer.addr)
    assert java["polled"] is True
    java_names = {java["msgId"]: "<id>", java["producerGroup"]: "<producer>", java["consumerGroup"]: "<consumer>",
                  java["topic"]: "<topic>"}
    java_shapes = sorted(_trace_shape(f, java_names) for f in java["records"])
    assert sorted(s[0] for s in java_shapes) == ["EndTransaction", "Pub", "SubAfter", "SubBefore"], java_shapes

    class Commit:
        async def execute(self, msg, arg):
            return LocalTransactionState.COMMIT_MESSAGE

        async def check(self, msg):
            return LocalTransactionState.COMMIT_MESSAGE

    topic, pgroup, cgroup = _names(peer, "trace")
    with RawClient(peer.hostport) as raw:
        raw.create_topic(topic, queues=4)

    async def main():
        seen: list[str] = []
        async with TransactionProducer(pgroup, peer.namesrv, Commit(), trace=True) as producer:
            result = await producer.send_in_transaction(new_message(topic, "traced", tags="TagX", keys="kx"))
            async with PullConsumer(cgroup, peer.namesrv, consume_from="first", trace=True,
                                    rebalance_interval_s=2.0) as lite:
                lite.subscribe(topic)
                with trio.move_on_after(60):
                    while result.msg_id not in seen:
                        seen += [m.client_msg_id for m in await lite.poll(timeout=0.5)]
        assert result.msg_id in seen, result
        records: list[list[str]] = []
        async with PullConsumer(cgroup + "R", peer.namesrv, auto_commit=False) as reader:
            queues = await reader.fetch_queues("RMQ_SYS_TRACE_TOPIC")
            await reader.assign(queues)
            for mq in queues:
                await reader.seek(mq, 0)
            with trio.move_on_after(60):
                while len(records) < 4:
                    for m in await reader.poll(timeout=0.5):
                        for rec in m.body.decode().split(FIELD_SPLITOR):
                            fields = rec.split(CONTENT_SPLITOR)
                            if result.msg_id in fields:
                                records.append(fields)
        return result, records

    result, records = trio.run(main)
    names = {result.msg_id: "<id>", pgroup: "<producer>", cgroup: "<consumer>", topic: "<topic>"}
    assert sorted(_trace_shape(f, names) for f in records) == java_shapes


def test_discarded_after_transaction_check_max(txn_peer, tool, tmp_path):
    """A transaction the producer never decides (every check answered UNKNOW) is checked
    ``transactionCheckMax`` (3) times, then moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` with
    its check count and real topic, and never delivered: the same on both brokers."""
    peer = txn_peer
    topic, pgroup, _ = _names(peer, "discard")
    with RawClient(peer.hostport) as c:
        c.create_topic(topic, queues=4)

    def discarded() -> list[dict]:
        with RawClient(peer.hostport) as c:
            resp, body = c.pull(MAX_TIME, 0, 0, max_msgs=256)
        if resp["code"] != 0 or not body:
            return []
        return [r for r in decode_records(body) if r["props"].get("REAL_TOPIC") == topic]

    # the producer waits (up to 30 s) until the transaction is discarded, then one round of
    # checks more (1.5 s; the brokers check every second): a fourth check would show
    stop = tmp_path / "stop"
    proc = start_program(tool.bundle, tool.classes, "TxnTool", ["txn", peer.namesrv, topic, pgroup, "30", "unknown"],
                         home=tmp_path, props={"txn.stop": str(stop), "txn.linger": "1500"})
    try:
        found = wait_for(discarded, 30)
        stop.touch()
        lines = finish_program(proc, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert [line.split()[2:4] for line in lines if line.startswith("SENT ")] == [["SEND_OK", "UNKNOW"]], lines
    checks = [line.split() for line in lines if line.startswith("CHECK ")]
    assert [c[2] for c in checks] == ["1", "2", "3"], lines
    assert lines[-1] == "DONE answered=0 pending=1", lines
    assert found, f"nothing of {topic} on {MAX_TIME}"
    [gone] = discarded()
    assert gone["body"] == b"m0-unknown" and gone["props"]["TRANSACTION_CHECK_TIMES"] == "3", gone
    assert gone["props"]["PGROUP"] == pgroup, gone
    with RawClient(peer.hostport) as c:
        assert sum(c.max_offset(topic, q) for q in range(4)) == 0


# -- bad input ----------------------------------------------------------------------------------


def _prepared_send(c: RawClient, topic: str, group: str, body: bytes) -> dict:
    props = f"TRAN_MSG\x01true\x02PGROUP\x01{group}\x02UNIQ_KEY\x01U{time.time_ns()}\x02WAIT\x01true"
    resp, _ = c.call(10, {
        "producerGroup": group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
        "queueId": "0", "sysFlag": "4", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
        "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
    }, body)
    assert resp["code"] == 0, resp
    return resp["extFields"]


def _end(c: RawClient, ext: dict, kind: int, group: str, *, offset: int | None = None) -> tuple[int, str | None]:
    if offset is None:
        offset = int(ext["msgId"][-16:], 16)  # the offset message id's commit-log offset
    resp, _ = c.call(37, {
        "producerGroup": group, "tranStateTableOffset": ext["queueOffset"], "commitLogOffset": str(offset),
        "commitOrRollback": str(kind), "fromTransactionCheck": "false", "msgId": "U",
    })
    return resp["code"], resp.get("remark")


def _stored(c: RawClient, topic: str, settle: float = 0.5) -> int:
    """Queue 0's max offset once it has stopped moving (a Java broker builds its consume
    queues a moment after the put)."""
    last, stable_since = c.max_offset(topic, 0), time.monotonic()
    while time.monotonic() - stable_since < settle:
        time.sleep(0.05)
        now = c.max_offset(topic, 0)
        if now != last:
            last, stable_since = now, time.monotonic()
    return last


def test_end_transaction_bad_input(txn_peer, tool):
    """Each refusal with Java's code and remark and nothing stored; where Java fails with
    an exception or accepts what it should not, the test says what trocket does instead."""
    peer = txn_peer
    topic, pgroup, _ = _names(peer, "bad")
    trocket = peer.kind == "trocket"
    with RawClient(peer.hostport) as c:
        plain, _ = c.call(10, {
            "producerGroup": pgroup, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0", "properties": "WAIT\x01true",
        }, b"plain")
        assert plain["code"] == 0
        ext = _prepared_send(c, topic, pgroup, b"tx")

        # not a half message: trocket refuses it by name, 4.9.8 fails on the missing PGROUP
        code, remark = _end(c, plain["extFields"], 8, pgroup)
        assert code == 1
        if trocket:
            assert remark == "Find prepared transaction message failed"
        else:
            assert remark.startswith("java.lang.NullPointerException")
        # no record starts there
        code, remark = _end(c, ext, 8, pgroup, offset=int(ext["msgId"][-16:], 16) + 7)
        assert code == 1 and (remark == "Find prepared transaction message failed" or not trocket), remark
        assert _end(c, ext, 8, "SomeOtherGroup") == (1, "The producer group wrong")
        assert _end(c, {**ext, "queueOffset": "99"}, 12, pgroup) == (1, "The transaction state table offset wrong")
        code, remark = _end(c, ext, 5, pgroup)
        assert code == 1 and "RemotingCommandException: commitOrRollback field wrong" in remark
        assert _stored(c, topic) == 1  # the plain message only

        assert _end(c, ext, 8, pgroup)[0] == 0
        assert _stored(c, topic) == 2
        # ended once: trocket refuses a second end; 4.9.8 commits it again (a duplicate)
        code, remark = _end(c, ext, 8, pgroup)
        if trocket:
            # (which of the two remarks: whether the broker's check passed it meanwhile)
            assert code == 1 and remark in (
                "The transaction of this prepared message has already been committed or rolled back",
                "The prepared message is not pending any more: it was committed or rolled back, or discarded after "
                "3 checks",
            ), remark
            assert _stored(c, topic) == 2
        else:
            assert code == 0 and _stored(c, topic) == 3


# -- kill -9 between prepare and commit -----------------------------------------------------------


def test_kill9_between_prepare_and_commit(tool, tmp_path):
    """The broker dies after the half message is stored and before the producer's commit:
    after the restart the check asks the producer, which says commit; delivered once."""
    broker = trocket_txn_broker(tmp_path / "broker")
    broker.start()
    peer = Peer("trocket", broker.namesrv, f"127.0.0.1:{broker.port}", broker.store, broker.log_tail)
    topic, pgroup, cgroup = _names(peer, "kill9")
    gate = tmp_path / "gate"
    with RawClient(broker.addr) as c:
        c.create_topic(topic)
    proc = tool.start(["txn", broker.namesrv, topic, pgroup, "60", "gate"], home=tmp_path,
                      props={"txn.gate": str(gate)})
    try:
        first = proc.stdout.readline()  # the prepared send is stored and answered
        assert first.strip() == "EXEC m0-gate", first
        with RawClient(broker.addr) as c:
            assert c.max_offset(HALF, 0) == 1
        broker.kill()
        gate.touch()  # the local transaction commits; its END_TRANSACTION finds no broker
        broker.start()
        lines = [first.strip(), *finish_program(proc, 90)]
    finally:
        if proc.poll() is None:
            proc.kill()
    try:
        sent = [line.split() for line in lines if line.startswith("SENT ")]
        assert [(s[2], s[3]) for s in sent] == [("SEND_OK", "COMMIT_MESSAGE")], lines
        checks = [line.split() for line in lines if line.startswith("CHECK ")]
        assert [c[1:3] + c[5:] for c in checks] == [["m0-gate", "1", "commit"]], lines
        assert lines[-1] == "DONE answered=1 pending=1", lines
        got = consume(tool, peer, topic, cgroup, 1, tmp_path)
        assert Counter(b for b, _, _ in got) == Counter({"m0-gate": 1})
    finally:
        rc = broker.stop()
        assert rc == 130, broker.log_tail()  # SIGINT: 130 after the clean shutdown


# -- request-reply --------------------------------------------------------------------------------


def _start_responder(tool: Tool, peer: Peer, topic: str, group: str, log_dir: Path, delay_ms: int = 0,
                     seconds: int = 60):
    """A Java push consumer answering every request of ``topic`` (``re:<body>``), starting
    (:func:`_ready` waits until it has)."""
    with RawClient(peer.hostport) as c:
        c.create_topic(topic, queues=4)
    return tool.start(["respond", peer.namesrv, topic, group, str(seconds), str(delay_ms)], home=log_dir)


def _ready(*procs):
    """Each responder's READY line (their JVMs boot at once)."""
    for proc in procs:
        assert proc.stdout.readline().strip() == "READY"


def test_java_request_reply(txn_peer, tool, tmp_path):
    """The Java client's ``request()`` and ``createReplyMessage`` on both brokers."""
    peer = txn_peer
    topic, pgroup, cgroup = _names(peer, "rpc")
    responder = _start_responder(tool, peer, topic, cgroup, tmp_path)
    try:
        _ready(responder)
        lines = tool.run(["request", peer.namesrv, topic, pgroup, "10000", "3"], home=tmp_path)
    finally:
        responder.kill()
        responder.communicate()
    replies = [line.split(" ", 3) for line in lines if line.startswith("REPLY ")]
    assert [r[2] for r in replies] == ["re:q0", "re:q1", "re:q2"], lines
    props = json.loads(replies[0][3])
    assert props["MSG_TYPE"] == "reply" and "CORRELATION_ID" in props and "PUSH_REPLY_TIME" in props


def test_trocket_request_reply(txn_peer, tool, tmp_path):
    """trocket's ``request()`` answered by the Java responder (and a late answer dropped
    cleanly), then by trocket's ``send_reply``, 1,000 requests in flight at once."""
    peer = txn_peer
    import trio

    from trocket.client import (
        ClientConfig,
        ConsumeResult,
        Producer,
        PushConsumer,
        RequestTimeoutError,
        new_message,
        send_reply,
    )

    topic, pgroup, cgroup = _names(peer, "trpc")
    slow_topic = topic + "Slow"
    responder = _start_responder(tool, peer, topic, cgroup, tmp_path)
    slow = _start_responder(tool, peer, slow_topic, cgroup + "S", tmp_path, delay_ms=1500)

    def config() -> ClientConfig:  # one each: a client id is its instance's (the broker pushes replies by it)
        return ClientConfig(namesrv=peer.namesrv, heartbeat_interval=1.0)

    async def main():
        async with Producer(pgroup, client_config=config()) as requester:
            with trio.fail_after(30):
                while True:  # the Java responder's first rebalance
                    try:
                        reply = await requester.request(new_message(topic, b"hello"), timeout=3)
                        break
                    except RequestTimeoutError:
                        pass
            assert reply.body == b"re:hello" and reply.properties["MSG_TYPE"] == "reply"
            late = 0
            for _ in range(2):
                try:
                    await requester.request(new_message(slow_topic, b"slow"), timeout=1.0)
                except RequestTimeoutError:
                    late += 1
            assert late == 2
            await trio.sleep(2.5)  # the late replies arrive: dropped, nothing raised, nothing kept
            assert len(requester.instance.requests) == 0

            # trocket on the responding side too
            mine = topic + "T"
            replier = Producer(pgroup + "_replier", client_config=config())

            async def answer(msg):
                await send_reply(replier, msg, b"t:" + msg.body)
                return ConsumeResult.SUCCESS

            with RawClient(peer.hostport) as c:
                c.create_topic(mine, queues=4)
            async with replier, PushConsumer(cgroup + "T", client_config=config(), subscriptions={mine: "*"},
                                             listener=answer, consume_from="first", max_concurrency=64,
                                             queue_parallelism=64):
                with trio.fail_after(30):
                    while True:
                        try:
                            await requester.request(new_message(mine, b"warm-up"), timeout=3)
                            break
                        except RequestTimeoutError:
                            pass
                futs = [await requester.request_async(new_message(mine, b"q%d" % i), timeout=60) for i in range(1000)]
                replies = [await f for f in futs]
                assert [r.body for r in replies] == [b"t:q%d" % i for i in range(1000)]

    try:
        _ready(responder, slow)
        trio.run(main)
    finally:
        for proc in (responder, slow):
            proc.kill()
            proc.communicate()
