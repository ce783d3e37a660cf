"""The pure-JavaScript RocketMQ client (npm ``ali-ons`` 3.12.0) against ``trocket broker``.

One broker for the module, behind a counting relay; every client runs in its own node
process (tests/acceptance/js/*.js, JSON result on stdout). What is checked:

1. the JS producer (SEND_MESSAGE_V2, 310) sends 1,000 messages with distinct bodies
   (every 10th 5 KiB, which ali-ons deflates), tags, keys and user properties: every send
   SEND_OK with the offset msgId of the stored record; a JS push consumer then reads
   them all exactly once, intact, with the msgIds the sends gave; closing it commits its
   offsets (UPDATE_CONSUMER_OFFSET 15), so a second start of the group reads only what
   was produced since;
2. cross-client: the C++ client's messages (tests/acceptance/scripts/produce.py, 5 KiB
   bodies compressed at level 5 among them) read by the JS consumer, and the JS
   producer's read by the C++ push consumer (skipped without the ``rocketmq`` wheel);
3. retry: the JS handler refuses two messages once (returning ``Consumer.ACTION_RETRY``
   and throwing); ali-ons sends CONSUMER_SEND_MSG_BACK (36) and each comes back from
   ``%RETRY%<group>`` with reconsumeTimes 1, RETRY_TOPIC and ORIGIN_MESSAGE_ID, then is
   acknowledged; nothing else is delivered twice;
4. idle: the push consumer of (1) idles 17 s after consuming; the relay sees about one
   PULL_MESSAGE per queue per 15 s (suspended pulls), not a hot loop.

Producers run in parallel, then the consumers of (1)-(3) in parallel; the whole module
takes ~35 s.
"""

from __future__ import annotations

import math
import time
from collections import Counter

import pytest
from acc_spec import digest, js_message_of, message_of, parse_uid
from acc_tools import (
    RawClient,
    finish_client_script,
    finish_js_script,
    group_by,
    start_client_script,
    start_js_script,
)

COUNT = 1000
BASIC_TOPIC, BASIC_MODE, BASIC_GROUP = "JsBasic", "jsbasic", "CG_js_basic"
#: produced after the first consumer of BASIC_GROUP closed: all a second start may read
NEW_COUNT = 20
#: JS -> C++
TO_CPP_TOPIC, TO_CPP_MODE, TO_CPP_GROUP, TO_CPP_COUNT = "JsToCpp", "jscross", "CG_cpp_from_js", 300
#: C++ -> JS: produce.py modes (sync sends, and 5 KiB bodies the C++ client deflates)
FROM_CPP_TOPICS = {"sync": "CppToJs", "large": "CppToJsLarge"}
FROM_CPP_COUNT, FROM_CPP_GROUP = 200, "CG_js_from_cpp"
RETRY_TOPIC, RETRY_MODE, RETRY_GROUP, RETRY_COUNT = "JsRetry", "jsretry", "CG_js_retry", 50
#: uid -> how the handler refuses its first delivery (jsretry-00020 is a 5 KiB one)
RETRY_PLAN = {"jsretry-00007": "action", "jsretry-00020": "throw"}
#: a refused message is back within this many seconds: delay level 3 (10 s, when the
#: broker delays retries as Java does) plus slack, well under ali-ons' 30 s route refresh
#: (what it took when %RETRY%<group> had no route right after the first heartbeat)
RETRY_WITHIN = 25.0
JS_TOPICS = (BASIC_TOPIC, TO_CPP_TOPIC, RETRY_TOPIC)
QUEUES_PER_TOPIC = 4
#: idle past one suspend timeout (15 s), so every held pull is seen answered and re-sent
IDLE_SECONDS = 17.0
SUSPEND_SECONDS = 15.0
UPDATE_CONSUMER_OFFSET, CONSUMER_SEND_MSG_BACK = 15, 36


def offset_msg_id(port: int, phy: int) -> str:
    """hex-upper(STOREHOST 127.0.0.1:port + PHYSICALOFFSET): what ali-ons shows as msgId."""
    return f"7F000001{port:08X}{phy:016X}"


@pytest.fixture(scope="module")
def broker(js_proxied_broker):
    """The module's broker, with the JS topics created (ali-ons has no TBW102 fallback:
    an unknown topic is "No topic route info", so they are created first, as
    ``mqadmin updateTopic`` would)."""
    with RawClient(js_proxied_broker.addr) as raw:
        for topic in JS_TOPICS:
            raw.create_topic(topic, QUEUES_PER_TOPIC)
    return js_proxied_broker


def _js_produce(broker, mode: str, topic: str, count: int, start: int = 0):
    home = broker.tmp / f"js-produce-{mode}-{start}"
    return start_js_script("produce.js", ["--namesrv", broker.namesrv, "--mode", mode, "--topic", topic,
                                          "--count", str(count), "--start", str(start), "--deadline", "50"], home)


def _js_consume(broker, group: str, topics, expect: int, *, idle: float, timeout: float = 45.0, retry: str = "",
                quiet: float = 8.0):
    home = broker.tmp / f"js-consume-{group}-{time.monotonic_ns()}"
    args = ["--namesrv", broker.namesrv, "--group", group, "--topics", ",".join(topics), "--expect", str(expect),
            "--timeout", str(timeout), "--idle", str(idle), "--quiet", str(quiet),
            "--deadline", str(timeout + idle + 20)]
    if retry:
        args += ["--retry", retry]
    return start_js_script("consume.js", args, home)


def _collect(procs: dict, broker) -> dict:
    """name -> (kind, proc, home, timeout): results by name, failures in ``_failures``."""
    results, failures = {}, {}
    for name, (kind, proc, home, timeout) in procs.items():
        try:
            if kind == "js":
                results[name] = finish_js_script(proc, name, timeout, broker)
            else:
                results[name] = finish_client_script(proc, name, home, timeout, broker)
        except AssertionError as exc:
            failures[name] = str(exc)
    results["_failures"] = failures
    return results


def _result(results: dict, name: str) -> dict:
    if name in results["_failures"]:
        pytest.fail(f"{name}:\n{results['_failures'][name]}")
    return results[name]


@pytest.fixture(scope="module")
def produced(broker, rocketmq_wheel_status):
    """All producers at once: JS (basic, to-C++, retry) and, with the wheel, C++."""
    t0 = time.monotonic()
    procs = {
        "js-basic": ("js", _js_produce(broker, BASIC_MODE, BASIC_TOPIC, COUNT), None, 60),
        "js-to-cpp": ("js", _js_produce(broker, TO_CPP_MODE, TO_CPP_TOPIC, TO_CPP_COUNT), None, 60),
        "js-retry": ("js", _js_produce(broker, RETRY_MODE, RETRY_TOPIC, RETRY_COUNT), None, 60),
    }
    if rocketmq_wheel_status[0]:
        for mode, topic in FROM_CPP_TOPICS.items():
            home = broker.tmp / f"cpp-produce-{mode}"
            proc = start_client_script("produce.py", ["--namesrv", broker.namesrv, "--mode", mode, "--topic", topic,
                                                      "--count", str(FROM_CPP_COUNT)], home)
            procs[f"cpp-{mode}"] = ("cpp", proc, home, 90)
    results = _collect(procs, broker)
    results["_wall"] = time.monotonic() - t0
    return results


@pytest.fixture(scope="module")
def consumed(broker, produced, rocketmq_wheel_status):
    """All consumers at once: JS basic (then idle 17 s), JS retry, and with the wheel
    JS reading the C++ messages and C++ reading the JS ones."""
    t0 = time.monotonic()
    procs = {
        "js-basic": ("js", _js_consume(broker, BASIC_GROUP, [BASIC_TOPIC], COUNT, idle=IDLE_SECONDS), None, 100),
        # a retried message may come back only after its delay level's time (level 3:
        # 10 s), with nothing new arriving meanwhile: no early "quiet" give-up
        "js-retry": ("js", _js_consume(broker, RETRY_GROUP, [RETRY_TOPIC], RETRY_COUNT, idle=3, quiet=RETRY_WITHIN,
                                       retry=",".join(f"{u}:{h}" for u, h in RETRY_PLAN.items())), None, 100),
    }
    if rocketmq_wheel_status[0]:
        procs["js-from-cpp"] = ("js", _js_consume(broker, FROM_CPP_GROUP, list(FROM_CPP_TOPICS.values()),
                                                  FROM_CPP_COUNT * len(FROM_CPP_TOPICS), idle=1), None, 100)
        home = broker.tmp / "cpp-consume-from-js"
        proc = start_client_script("consume.py", ["--namesrv", broker.namesrv, "--kind", "push", "--group",
                                                  TO_CPP_GROUP, "--topics", TO_CPP_TOPIC, "--expect",
                                                  str(TO_CPP_COUNT), "--timeout", "45", "--idle", "1"], home)
        procs["cpp-from-js"] = ("cpp", proc, home, 100)
    results = _collect(procs, broker)
    results["_wall"] = time.monotonic() - t0
    return results


def cpp_offset_msg_id(msg_id: str) -> str:
    """An offset msg id as rocketmq-client-cpp 1.2.x shows it: it writes the STOREHOST
    IPv4 bytes in little-endian order (127.0.0.1 -> 0100007F; its UNIQ_KEYs start the
    same way); port and commit-log offset as everyone else."""
    return "".join(msg_id[i:i + 2] for i in (6, 4, 2, 0)) + msg_id[8:]


def check_deliveries(messages: list[dict], want: dict[str, dict], *, topic_of, reconsume: bool = True,
                     acks: dict | None = None, msg_id_key: str = "msg_id", msg_id_of=lambda i: i) -> list[str]:
    """Every wanted uid exactly once, intact (topic, tags, keys, body, user properties,
    reconsumeTimes 0; queue offset and msg id as the send results gave)."""
    problems: list[str] = []
    got = Counter(m["uid"] for m in messages)
    missing = sorted(set(want) - set(got))
    dups = sorted(u for u, n in got.items() if n > 1)
    unknown = sorted(u for u in got if u not in want)
    if missing:
        problems.append(f"{len(missing)} missing, e.g. {missing[:5]}")
    if dups:
        problems.append(f"{len(dups)} delivered more than once, e.g. {[(u, got[u]) for u in dups[:5]]}")
    if unknown:
        problems.append(f"{len(unknown)} unexpected uids, e.g. {unknown[:5]}")
    for m in messages:
        spec = want.get(m["uid"])
        if spec is None:
            continue
        diffs = []
        if m["topic"] != topic_of(spec):
            diffs.append(f"topic {m['topic']!r}")
        if m["tags"] != spec["tags"]:
            diffs.append(f"tags {m['tags']!r} != {spec['tags']!r}")
        if m["keys"] != spec["keys"]:
            diffs.append(f"keys {m['keys']!r} != {spec['keys']!r}")
        if m["sha1"] != digest(spec["body"]) or m["len"] != len(spec["body"]):
            diffs.append(f"body differs (len {m['len']} vs {len(spec['body'])})")
        if m["props"] != spec["props"]:
            diffs.append(f"props {m['props']!r} != {spec['props']!r}")
        if reconsume and m["reconsume_times"] != 0:
            diffs.append(f"reconsume_times {m['reconsume_times']}")
        ack = (acks or {}).get(m["uid"])
        if ack is not None:
            if m[msg_id_key] != msg_id_of(ack["msg_id"]):
                diffs.append(f"{msg_id_key} {m[msg_id_key]} != send result msgId {ack['msg_id']}")
            if int(m["queue_offset"]) != int(ack["offset"]):
                diffs.append(f"queue offset {m['queue_offset']} != send result {ack['offset']}")
        if diffs:
            problems.append(f"{m['uid']}: " + "; ".join(diffs))
    return problems[:40]


def js_want(mode: str, count: int, start: int = 0) -> dict[str, dict]:
    return {s["uid"]: s for s in (js_message_of(mode, i) for i in range(start, start + count))}


# -- 1. producer, push consumer, committed offsets -----------------------------------------


def test_js_producer_send_v2(broker, produced, figures):
    r = _result(produced, "js-basic")
    figures.append(
        f"JS produce: {COUNT} msgs (SEND_MESSAGE_V2) in {r['seconds']:.2f} s "
        f"({COUNT / max(r['seconds'], 1e-9):.0f}/s, start {r['start_seconds']:.2f} s), errors {r['error_count']}; "
        f"all producers in parallel: {produced['_wall']:.1f} s wall")
    assert not r["errors"], r["errors"][:10]
    assert broker.proxy.requests_of(310), "no SEND_MESSAGE_V2 seen by the relay"
    assert not broker.proxy.requests_of(10, "PG_" + BASIC_MODE), "ali-ons sent SEND_MESSAGE (10)?"
    want = js_want(BASIC_MODE, COUNT)
    # spec.js and acc_spec.js_message_of agree on every body
    drift = [u for u, s in r["sent"].items() if s["sha1"] != digest(want[u]["body"])]
    assert not drift, f"spec.js and acc_spec.py disagree on {len(drift)} bodies, e.g. {drift[:3]}"
    acked = r["acked"]
    assert len(acked) == COUNT
    bad = {u: a for u, a in acked.items() if a["status"] != "SEND_OK"}
    assert not bad, list(bad.items())[:5]
    ids = [a["msg_id"] for a in acked.values()]
    assert len(set(ids)) == COUNT and all(isinstance(i, str) and len(i) == 32 for i in ids), ids[:3]

    # the stored records: each send's msgId is its record's offset msg id
    # (STOREHOST = the advertised relay address + PHYSICALOFFSET), queue id and offset agree
    records = {}
    with RawClient(broker.addr) as raw:
        for q in range(QUEUES_PER_TOPIC):
            for rec in raw.pull_queue(BASIC_TOPIC, q):
                records[rec["props"]["uid"]] = rec
    assert len(records) == COUNT
    problems = []
    for uid, a in acked.items():
        rec, spec = records[uid], want[uid]
        if a["msg_id"] != offset_msg_id(rec["store_port"], rec["phy"]):
            problems.append(f"{uid}: msgId {a['msg_id']} is not the record's offset msg id "
                            f"{offset_msg_id(rec['store_port'], rec['phy'])}")
        if int(a["queue_id"]) != rec["queue_id"] or int(a["offset"]) != rec["queue_offset"]:
            problems.append(f"{uid}: send result queue {a['queue_id']}@{a['offset']} != "
                            f"record {rec['queue_id']}@{rec['queue_offset']}")
        if rec["plain"] != spec["body"]:
            problems.append(f"{uid}: stored body differs")
        if rec["store_port"] != broker.proxy.port:
            problems.append(f"{uid}: STOREHOST port {rec['store_port']} is not the advertised {broker.proxy.port}")
        props = rec["props"]
        if props.get("TAGS") != spec["tags"] or props.get("KEYS") != spec["keys"] or "UNIQ_KEY" in props:
            problems.append(f"{uid}: stored properties {props}")
        large = len(spec["body"]) >= 4096
        if large and not (rec["sysflag"] & 1 and rec["body"][:2] == b"\x78\x9c"):
            problems.append(f"{uid}: 5 KiB body not stored deflated (sysflag {rec['sysflag']:#x}, {rec['body'][:2]!r})")
        if not large and rec["sysflag"] & 1:
            problems.append(f"{uid}: small body flagged compressed")
    assert not problems, "\n".join(problems[:30])
    per_queue = Counter(rec["queue_id"] for rec in records.values())
    assert len(per_queue) == QUEUES_PER_TOPIC, per_queue


def test_js_push_consumer_exactly_once(broker, produced, consumed, figures):
    acked = _result(produced, "js-basic")["acked"]
    r = _result(consumed, "js-basic")
    figures.append(
        f"JS push consumer: {len(r['messages'])} msgs in {r['t_done'] - r['t_started']:.2f} s "
        f"(ready after {r['t_ready'] - r['t_started']:.2f} s); consumers in parallel: {consumed['_wall']:.1f} s wall")
    assert not r["errors"], r["errors"][:10]
    problems = check_deliveries(r["messages"], js_want(BASIC_MODE, COUNT), topic_of=lambda s: BASIC_TOPIC,
                                acks=acked)
    assert r["completed"], f"only {len({m['uid'] for m in r['messages']})} of {COUNT} arrived\n" + "\n".join(problems)
    assert not problems, "\n".join(problems)
    assert all(not m["via_retry"] and m["queue_topic"] == BASIC_TOPIC for m in r["messages"])
    assert r["received_during_idle"] == len(r["messages"])


def test_js_offsets_committed_and_second_start_reads_only_new(broker, produced, consumed, figures):
    r = _result(consumed, "js-basic")
    proxy = broker.proxy
    commits = proxy.requests_of(UPDATE_CONSUMER_OFFSET, BASIC_GROUP)
    at_close = proxy.requests_of(UPDATE_CONSUMER_OFFSET, BASIC_GROUP, since=r["t_idle_end"])
    # close() commits every queue (4 + the retry queue), the 5 s timer did before
    assert len(at_close) >= QUEUES_PER_TOPIC, (len(commits), len(at_close))
    with RawClient(broker.addr) as raw:
        committed = {q: raw.consumer_offset(BASIC_GROUP, BASIC_TOPIC, q) for q in range(QUEUES_PER_TOPIC)}
        max_offsets = {q: raw.max_offset(BASIC_TOPIC, q) for q in range(QUEUES_PER_TOPIC)}
    assert committed == max_offsets, f"committed {committed}, queues end at {max_offsets}"

    # new messages, then the group starts again: it reads those, nothing old
    p = finish_js_script(_js_produce(broker, BASIC_MODE, BASIC_TOPIC, NEW_COUNT, start=COUNT), "produce.js", 60, broker)
    assert not p["errors"] and len(p["acked"]) == NEW_COUNT, p["errors"][:5]
    t0 = time.monotonic()
    again = finish_js_script(_js_consume(broker, BASIC_GROUP, [BASIC_TOPIC], NEW_COUNT, idle=3), "consume.js", 90,
                             broker)
    figures.append(
        f"JS consumer restart: committed offsets {committed} (UPDATE_CONSUMER_OFFSET: {len(commits)} from the "
        f"group, {len(at_close)} at close); second start read {len(again['messages'])} msgs "
        f"({NEW_COUNT} new) in {time.monotonic() - t0:.1f} s")
    assert not again["errors"], again["errors"][:10]
    old = sorted({m["uid"] for m in again["messages"]} - set(js_want(BASIC_MODE, NEW_COUNT, COUNT)))
    assert not old, f"the second start read {len(old)} old messages again, e.g. {old[:5]}"
    problems = check_deliveries(again["messages"], js_want(BASIC_MODE, NEW_COUNT, COUNT),
                                topic_of=lambda s: BASIC_TOPIC, acks=p["acked"])
    assert again["completed"] and not problems, "\n".join(problems)


# -- 2. cross-client ---------------------------------------------------------------------


def test_cpp_producer_to_js_consumer(broker, rocketmq_wheel, produced, consumed, figures):
    acks = {}
    for mode in FROM_CPP_TOPICS:
        p = _result(produced, f"cpp-{mode}")
        assert not p["errors"] and len(p["acked"]) == FROM_CPP_COUNT, p["errors"][:5]
        acks.update(p["acked"])
    r = _result(consumed, "js-from-cpp")
    figures.append(f"C++ -> JS: {len(r['messages'])} msgs ({FROM_CPP_COUNT} of them 5 KiB, deflated by the C++ "
                   f"client) read in {r['t_done'] - r['t_started']:.2f} s")
    assert not r["errors"], r["errors"][:10]
    want = {}
    for mode in FROM_CPP_TOPICS:
        for i in range(FROM_CPP_COUNT):
            spec = message_of(mode, i)
            want[spec["uid"]] = spec
    # the C++ client's app msgId is its UNIQ_KEY; ali-ons shows the offset msgId
    problems = check_deliveries(r["messages"], want, topic_of=lambda s: FROM_CPP_TOPICS[parse_uid(s["uid"])[0]],
                                acks=acks, msg_id_key="uniq_key")
    assert r["completed"], f"only {len({m['uid'] for m in r['messages']})} of {len(want)} arrived\n" + "\n".join(problems)
    assert not problems, "\n".join(problems)
    large = [m for m in r["messages"] if parse_uid(m["uid"])[0] == "large"]
    assert large and all(m["sysflag"] & 1 for m in large), "the C++ 5 KiB bodies were not stored compressed"
    assert all(m["msg_id"] == offset_msg_id(broker.proxy.port, m["commit_log_offset"]) for m in r["messages"])


def test_js_producer_to_cpp_consumer(broker, rocketmq_wheel, produced, consumed, figures):
    p = _result(produced, "js-to-cpp")
    assert not p["errors"] and len(p["acked"]) == TO_CPP_COUNT, p["errors"][:5]
    r = _result(consumed, "cpp-from-js")
    figures.append(f"JS -> C++: {len(r['messages'])} msgs ({TO_CPP_COUNT // 10} of them 5 KiB, deflated by ali-ons) "
                   f"read by the C++ push consumer in {r['t_done'] - r['t_started']:.2f} s")
    assert not r["errors"], r["errors"][:10]
    # no UNIQ_KEY from ali-ons: the C++ client's msgId is then the offset msgId, the one
    # JS's send result gave (with the C++ client's byte order for the IP)
    problems = check_deliveries(r["messages"], js_want(TO_CPP_MODE, TO_CPP_COUNT), topic_of=lambda s: TO_CPP_TOPIC,
                                acks=p["acked"], msg_id_of=cpp_offset_msg_id)
    assert r["completed"], f"only {len({m['uid'] for m in r['messages']})} of {TO_CPP_COUNT} arrived\n" + "\n".join(problems)
    assert not problems, "\n".join(problems)


# -- 3. retry ------------------------------------------------------------------------------


def test_js_retry_comes_back_from_retry_topic(broker, produced, consumed, figures):
    p = _result(produced, "js-retry")
    assert not p["errors"] and len(p["acked"]) == RETRY_COUNT, p["errors"][:5]
    r = _result(consumed, "js-retry")
    assert not r["errors"], r["errors"][:10]
    assert r["refused"] == RETRY_PLAN, r["refused"]
    want = js_want(RETRY_MODE, RETRY_COUNT)
    by_uid = group_by(r["messages"], lambda m: m["uid"])
    assert r["completed"], f"incomplete: {len(by_uid)} of {RETRY_COUNT} uids; refused ones seen: " + str(
        {u: [(m["reconsume_times"], m["via_retry"]) for m in by_uid.get(u, [])] for u in RETRY_PLAN})
    # every other message exactly once, intact, as sent
    others = [m for m in r["messages"] if m["uid"] not in RETRY_PLAN]
    problems = check_deliveries(others, {u: s for u, s in want.items() if u not in RETRY_PLAN},
                                topic_of=lambda s: RETRY_TOPIC, acks=p["acked"])
    assert not problems, "\n".join(problems)
    delays = []
    retry_topic = f"%RETRY%{RETRY_GROUP}"
    for uid, how in RETRY_PLAN.items():
        got = sorted(by_uid[uid], key=lambda m: m["n"])
        assert len(got) == 2, f"{uid} ({how}) delivered {len(got)} times: {[(m['reconsume_times'], m['via_retry']) for m in got]}"
        first, again = got
        assert first["reconsume_times"] == 0 and not first["via_retry"] and first["refused"] == how
        assert first["msg_id"] == p["acked"][uid]["msg_id"]
        assert again["via_retry"], f"{uid}: the second delivery did not come from {retry_topic}"
        assert again["reconsume_times"] == 1, again
        assert again["retry_topic"] == RETRY_TOPIC and again["topic"] == RETRY_TOPIC, again
        assert again["origin_msg_id"] == first["msg_id"], again
        assert again["msg_id"] != first["msg_id"] and again["queue_id"] == 0
        spec = want[uid]
        assert (again["sha1"], again["len"], again["tags"], again["keys"], again["props"]) == (
            digest(spec["body"]), len(spec["body"]), spec["tags"], spec["keys"], spec["props"])
        delays.append(again["t"] - first["t"])
        assert delays[-1] < RETRY_WITHIN, f"{uid} came back only after {delays[-1]:.1f} s"
    # ali-ons gave them back with CONSUMER_SEND_MSG_BACK (not its fallback of re-sending
    # them itself); the broker stored exactly those two copies on the retry topic
    backs = broker.proxy.answers_of(CONSUMER_SEND_MSG_BACK, RETRY_GROUP)
    assert sorted(rc for _, _, rc in backs) == [0] * len(RETRY_PLAN), backs
    with RawClient(broker.addr) as raw:
        copies = raw.pull_queue(retry_topic, 0)
    assert len(copies) == len(RETRY_PLAN), [c["props"].get("uid") for c in copies]
    for c in copies:
        assert c["reconsume"] == 1 and c["props"]["RETRY_TOPIC"] == RETRY_TOPIC and c["props"]["ORIGIN_MESSAGE_ID"]
    figures.append(
        f"JS retry: {len(RETRY_PLAN)} refused ({', '.join(RETRY_PLAN.values())}), "
        f"{len(backs)} CONSUMER_SEND_MSG_BACK answered 0, back from {retry_topic} with reconsumeTimes 1 after "
        + ", ".join(f"{d:.2f} s" for d in delays))


# -- 4. idle -------------------------------------------------------------------------------


def test_js_idle_push_consumer_does_not_hot_loop(broker, consumed, figures):
    r = _result(consumed, "js-basic")
    proxy = broker.proxy
    queues = QUEUES_PER_TOPIC + 1  # and %RETRY%<group>
    since = r["t_done"] + 1.0  # the last FOUND answers are re-pulled (and held) at once
    until = r["t_idle_end"]
    window = until - since
    pulls = proxy.pulls(BASIC_GROUP, since, until)
    during = proxy.pulls(BASIC_GROUP, r["t_started"], r["t_done"])
    allowed = queues * (math.ceil(window / SUSPEND_SECONDS) + 1) + 5
    codes = proxy.code_counts(since, until)
    held = sorted(tr - tq for tq, tr, rc in proxy.pull_answers(BASIC_GROUP) if rc == 19 and since <= tr <= until)
    held_txt = (f"{len(held)} answered 19 after {held[0]:.1f}-{held[-1]:.1f} s held") if held else "none answered 19"
    figures.append(
        f"JS idle push consumer: {during} pulls while consuming; idle {window:.1f} s: {pulls} PULL_MESSAGE "
        f"({pulls / window:.2f}/s, {queues} queues, limit {allowed}), {held_txt}; "
        f"all requests while idle (every client): {dict(sorted(codes.items()))}")
    assert window > SUSPEND_SECONDS, window
    assert pulls <= allowed, f"hot loop: {pulls} pulls in {window:.1f} s idle ({queues} queues)"
    # long polling: each queue's pull was held ~suspendTimeoutMillis, answered 19 and re-sent
    assert len(held) >= queues - 1, f"only {len(held)} held pulls answered in {window:.1f} s ({queues} queues)"
    assert all(SUSPEND_SECONDS - 1.5 <= h <= SUSPEND_SECONDS + 1.5 for h in held), held
