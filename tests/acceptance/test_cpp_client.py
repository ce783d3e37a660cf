"""The C++ RocketMQ client (PyPI ``rocketmq`` 0.4.4) against ``trocket broker``.

One broker for the module, behind a counting relay. 1,000 messages are produced with
every mode the wrapper has -- sync, async (callbacks), oneway, orderly by sharding key,
oneway orderly, batch (``send_batch``) and 5 KiB bodies the client compresses -- each mode to its own
topic, in parallel processes. Then the push consumer, the pull consumer and an orderly
push consumer read them back: every message exactly once with its body, tags, keys and
properties; per sharding key in order; and an idle push consumer does not hot-loop.
"""

from __future__ import annotations

import math
import time
from collections import Counter

import pytest
from acc_spec import SHARDS, TOPICS, digest, message_of, parse_uid
from acc_tools import RawClient, finish_client_script, group_by, run_client_script, start_client_script

COUNT = 1000
MODES = ("sync", "async", "oneway", "batch", "large", "orderly", "oneway_orderly")
ORDERLY_MODES = ("orderly", "oneway_orderly")
ONEWAY_MODES = ("oneway", "oneway_orderly")
PUSH_MODES = ("sync", "async", "oneway", "batch", "large")
#: the push consumer stays idle past one suspend timeout, so every held pull is seen
#: answered (19 after ~15 s) and re-sent exactly once, not in a loop
IDLE_SECONDS = 17.0
SUSPEND_SECONDS = 15.0
QUEUES_PER_TOPIC = 4


def expected(modes) -> dict[str, dict]:
    out = {}
    for mode in modes:
        for i in range(COUNT):
            spec = message_of(mode, i)
            out[spec["uid"]] = spec
    return out


@pytest.fixture(scope="module")
def produced(proxied_broker):
    """Run the six producers (one process per mode, all at once); mode -> result."""
    broker = proxied_broker
    procs = {}
    t0 = time.monotonic()
    for mode in MODES:
        home = broker.tmp / f"client-produce-{mode}"
        procs[mode] = (start_client_script("produce.py", ["--namesrv", broker.namesrv, "--mode", mode,
                                                          "--count", str(COUNT)], home), home)
    results, failures = {}, {}
    for mode, (proc, home) in procs.items():
        try:
            results[mode] = finish_client_script(proc, f"produce.py --mode {mode}", home, 120, broker)
        except AssertionError as exc:
            failures[mode] = str(exc)
    results["_wall"] = time.monotonic() - t0
    results["_failures"] = failures
    return results


def check_messages(result: dict, modes, produced: dict) -> list[str]:
    """Every expected message exactly once, intact; returns the problems found."""
    want = expected(modes)
    problems: list[str] = []
    got = Counter(m["uid"] for m in result["messages"])
    missing = sorted(set(want) - set(got))
    dups = sorted(u for u, n in got.items() if n > 1)
    unknown = sorted(u for u in got if u not in want)
    if missing:
        by_mode = Counter(parse_uid(u)[0] for u in missing)
        problems.append(f"{len(missing)} missing ({dict(by_mode)}), e.g. {missing[:5]}")
    if dups:
        problems.append(f"{len(dups)} delivered more than once, e.g. {[(u, got[u]) for u in dups[:5]]}")
    if unknown:
        problems.append(f"{len(unknown)} unexpected uids, e.g. {unknown[:5]}")
    for m in result["messages"]:
        spec = want.get(m["uid"])
        if spec is None:
            continue
        mode = parse_uid(m["uid"])[0]
        diffs = []
        if m["topic"] != spec["topic"]:
            diffs.append(f"topic {m['topic']!r}")
        if m["tags"] != spec["tags"]:
            diffs.append(f"tags {m['tags']!r} != {spec['tags']!r}")
        if m["keys"] != spec["keys"]:
            diffs.append(f"keys {m['keys']!r} != {spec['keys']!r}")
        if m["sha1"] != digest(spec["body"]) or m["len"] != len(spec["body"]):
            diffs.append(f"body differs (len {m['len']} vs {len(spec['body'])})")
        if m["props"] != spec["props"]:
            diffs.append(f"props {m['props']!r} != {spec['props']!r}")
        if m["reconsume_times"] != 0:
            diffs.append(f"reconsume_times {m['reconsume_times']}")
        ack = produced.get(mode, {}).get("acked", {}).get(m["uid"])
        if ack is not None and mode != "batch":
            if ack["msg_id"] and m["msg_id"] != ack["msg_id"]:
                diffs.append(f"msg id {m['msg_id']} != send result {ack['msg_id']}")
            if m["queue_offset"] != ack["offset"]:
                diffs.append(f"queue offset {m['queue_offset']} != send result {ack['offset']}")
        if diffs:
            problems.append(f"{m['uid']}: " + "; ".join(diffs))
    return problems[:40]


def test_produce_every_mode(produced, figures):
    failures = produced["_failures"]
    assert not failures, "\n\n".join(f"{m}: {e}" for m, e in failures.items())
    problems = []
    for mode in MODES:
        r = produced[mode]
        figures.append(
            f"produce {mode:8s}: {COUNT} msgs in {r['seconds']:.2f} s ({COUNT / max(r['seconds'], 1e-9):.0f}/s), "
            f"acked {len(r['acked'])}, errors {r['error_count']}")
        if r["error_count"]:
            problems.append(f"{mode}: {r['error_count']} errors, e.g. {r['errors'][:3]}")
        if mode not in ONEWAY_MODES and len(r["acked"]) != COUNT:
            problems.append(f"{mode}: {len(r['acked'])} of {COUNT} acknowledged")
        bad = [(u, a) for u, a in r["acked"].items() if a["status"] != 0]
        if bad:
            problems.append(f"{mode}: non-OK send status, e.g. {bad[:3]}")
        if mode in ("sync", "large", "async", "orderly"):
            # each (queue offset) is reported once per queue; msg ids are the UNIQ_KEYs
            ids = [a["msg_id"] for a in r["acked"].values()]
            if len(set(ids)) != len(ids) or not all(len(i) == 32 for i in ids):
                problems.append(f"{mode}: msg ids not 32-hex and distinct, e.g. {ids[:3]}")
    figures.append(f"produce all modes in parallel: {produced['_wall']:.2f} s wall")
    assert not problems, "\n".join(problems)


def test_compressed_bodies_stored_with_sysflag_bit0(proxied_broker, produced):
    """5 KiB bodies: the client deflates them (zlib level 5) and sets SYSFLAG bit 0; the
    stored records keep both, and the body CRC covers the compressed bytes."""
    with RawClient(proxied_broker.addr) as raw:
        large = [rec for q in range(QUEUES_PER_TOPIC) for rec in raw.pull_queue(TOPICS["large"], q)]
        small = [rec for q in range(QUEUES_PER_TOPIC) for rec in raw.pull_queue(TOPICS["sync"], q)]
    assert len(large) == COUNT, f"{len(large)} records in {TOPICS['large']}"
    for rec in large:
        spec = message_of("large", parse_uid(rec["props"]["uid"])[1])
        assert rec["sysflag"] & 1, f"{rec['props']['uid']}: SYSFLAG {rec['sysflag']:#x} without the compressed bit"
        assert rec["body"][:2] == b"\x78\x5e", f"{rec['props']['uid']}: not a level-5 zlib stream: {rec['body'][:4]!r}"
        assert len(rec["body"]) < len(spec["body"])
        assert rec["plain"] == spec["body"]
    assert len(small) == COUNT
    for rec in small:
        assert not rec["sysflag"] & 1, rec["props"]["uid"]
        assert rec["body"] == message_of("sync", parse_uid(rec["props"]["uid"])[1])["body"]


def _idle_figures(broker, result, group, queues, figures, label):
    """PULL_MESSAGE requests from ``group`` while the push consumer sat idle, as counted
    by the relay; returns (pulls, window seconds, allowed)."""
    proxy = broker.proxy
    since = result["t_done"] + 1.0  # the last FOUND answers are re-pulled (and held) at once
    until = result["t_idle_end"]
    window = until - since
    pulls = proxy.pulls(group, since, until)
    during = proxy.pulls(group, result["t_started"], result["t_done"])
    # each queue has one held pull; it is answered (and re-sent) at most once per
    # suspend timeout, plus slack for queues whose timeout falls in the window
    allowed = queues * (math.ceil(window / SUSPEND_SECONDS) + 1) + 5
    codes = proxy.code_counts(since, until)
    # held pulls answered PULL_NOT_FOUND (19) inside the window: how long they were held
    held = sorted(tr - tq for tq, tr, rc in proxy.pull_answers(group) if rc == 19 and since <= tr <= until)
    held_txt = (f"{len(held)} answered 19 after {held[0]:.1f}-{held[-1]:.1f} s held (median "
                f"{held[len(held) // 2]:.1f} s)") if held else "none answered 19"
    figures.append(
        f"{label}: {len(result['messages'])} msgs in {result['t_done'] - result['t_started']:.2f} s "
        f"({during} pulls while consuming); idle {window:.1f} s: {pulls} PULL_MESSAGE "
        f"({pulls / window:.2f}/s, {queues} queues, limit {allowed}), {held_txt}; "
        f"all requests while idle: {dict(sorted(codes.items()))}")
    return pulls, window, allowed, held


def test_push_consumer(proxied_broker, produced, figures):
    broker = proxied_broker
    group = "CG_acc_push"
    topics = [TOPICS[m] for m in PUSH_MODES]
    n = COUNT * len(PUSH_MODES)
    result = run_client_script(
        "consume.py",
        ["--namesrv", broker.namesrv, "--kind", "push", "--group", group, "--topics", ",".join(topics),
         "--expect", str(n), "--timeout", "60", "--idle", str(IDLE_SECONDS)],
        broker.tmp / "client-push", timeout=120, broker=broker)
    assert not result["errors"], result["errors"]
    queues = len(topics) * QUEUES_PER_TOPIC + 1  # and %RETRY%<group>
    pulls, window, allowed, held = _idle_figures(broker, result, group, queues, figures, "push consumer")
    problems = check_messages(result, PUSH_MODES, produced)
    assert result["completed"], f"only {len(result['messages'])} of {n} arrived (60 s timeout or 8 s with nothing new)\n" + "\n".join(problems)
    assert not problems, "\n".join(problems)
    assert result["received_during_idle"] == len(result["messages"])
    assert pulls <= allowed, f"hot loop: {pulls} pulls in {window:.1f} s idle ({queues} queues)"
    # long polling: every queue's pull was held ~suspendTimeoutMillis, then answered
    # 19 and re-sent -- not answered at once (a hot loop) nor left to the client's 30 s
    assert len(held) >= queues // 2, f"only {len(held)} held pulls answered in {window:.1f} s ({queues} queues)"
    assert all(SUSPEND_SECONDS - 1.5 <= h <= SUSPEND_SECONDS + 1.5 for h in held), held


def test_pull_consumer(proxied_broker, produced, figures):
    broker = proxied_broker
    group = "CG_acc_pull"
    topics = [TOPICS[m] for m in MODES]
    n = COUNT * len(MODES)
    result = run_client_script(
        "consume.py",
        ["--namesrv", broker.namesrv, "--kind", "pull", "--group", group, "--topics", ",".join(topics),
         "--expect", str(n), "--timeout", "60"],
        broker.tmp / "client-pull", timeout=120, broker=broker)
    pulls = broker.proxy.pulls(group)
    figures.append(
        f"pull consumer: {len(result['messages'])} msgs in {result['t_done'] - result['t_started']:.2f} s, "
        f"{result['rounds']} rounds, {pulls} PULL_MESSAGE")
    assert not result["errors"], result["errors"]
    problems = check_messages(result, MODES, produced)
    assert result["completed"], f"only {len(result['messages'])} of {n} arrived (60 s timeout or 8 s with nothing new)\n" + "\n".join(problems)
    assert not problems, "\n".join(problems)
    # the wrapper walks the queues synchronously: ~ messages/32 FOUND + one NOT_FOUND per
    # queue per round; a broker that suspended these pulls would make this crawl
    assert pulls < n // 32 * 2 + len(topics) * QUEUES_PER_TOPIC * (result["rounds"] + 2) + 50, pulls


def test_orderly_push_consumer(proxied_broker, produced, figures):
    """Orderly push consumer over the orderly topics (sync ``send_orderly`` and
    ``send_oneway_orderly``): per sharding key, one queue and arrival in send order."""
    broker = proxied_broker
    group = "CG_acc_orderly"
    topics = [TOPICS[m] for m in ORDERLY_MODES]
    n = COUNT * len(ORDERLY_MODES)
    result = run_client_script(
        "consume.py",
        ["--namesrv", broker.namesrv, "--kind", "orderly", "--group", group, "--topics", ",".join(topics),
         "--expect", str(n), "--timeout", "60", "--idle", "3"],
        broker.tmp / "client-orderly", timeout=120, broker=broker)
    assert not result["errors"], result["errors"]
    queues = len(topics) * QUEUES_PER_TOPIC + 1
    pulls, window, allowed, _ = _idle_figures(broker, result, group, queues, figures, "orderly push consumer")
    problems = check_messages(result, ORDERLY_MODES, produced)
    order_problems = []
    by_key = group_by(result["messages"], lambda m: (m["topic"], int(m["props"].get("shard", -1))))
    for (topic, shard), msgs in sorted(by_key.items()):
        msgs.sort(key=lambda m: m["n"])  # arrival order
        seqs = [int(m["props"]["seq"]) for m in msgs]
        if seqs != sorted(seqs):
            bad = next(i for i in range(1, len(seqs)) if seqs[i] < seqs[i - 1])
            order_problems.append(
                f"{topic} shard {shard}: out of order at arrival {bad}: seq {seqs[max(0, bad - 3):bad + 3]}")
        qids = {m["queue_id"] for m in msgs}
        if len(qids) != 1:
            order_problems.append(f"{topic} shard {shard}: spread over queues {sorted(qids)}")
        offsets = [m["queue_offset"] for m in msgs]
        if offsets != sorted(offsets):
            order_problems.append(f"{topic} shard {shard}: queue offsets not increasing in arrival order")
    assert result["completed"], (
        f"only {len(result['messages'])} of {n} arrived (60 s timeout or 8 s with nothing new)\n"
        + "\n".join(problems + order_problems))
    assert not problems, "\n".join(problems)
    assert len(by_key) == SHARDS * len(ORDERLY_MODES)
    assert not order_problems, "\n".join(order_problems[:20])
    assert pulls <= allowed, f"hot loop: {pulls} pulls in {window:.1f} s idle ({queues} queues)"
