"""The executors' work without Spark: one pass per stretch, leftovers paired across
stretches, tallies merged, exact percentiles from histograms (trocket.spark.stretch,
calls, summary)."""

from __future__ import annotations

import json
import os
import random
from collections import Counter

import pytest

from trocket.spark import synth
from trocket.spark.calls import ANSWERED, ORPHAN, UNANSWERED, C, Pairer, pair_leftovers
from trocket.spark.native import plan_native, read_native_range
from trocket.spark.rows import TO_CLIENT, TO_SERVER, F
from trocket.spark.stretch import decode_stretch, resolve_records, sorted_records
from trocket.spark.summary import PERCENTILES, Tally, buckets, build_summary, select_latencies

pytest.importorskip("pyarrow")


def _analyze_without_spark(path: str, out, split_bytes: int) -> tuple[dict, int]:
    frames_dir, calls_dir = out / "frames", out / "calls"
    frames_dir.mkdir()
    calls_dir.mkdir()
    problems: list = []
    records = []
    plan = plan_native(path, os.path.basename(path), split_bytes, problems.append)
    for rng in plan.ranges:
        account: Counter = Counter()
        records.extend(decode_stretch(read_native_range(rng, problems.append, account=account), str(frames_dir), str(calls_dir),
                                      f"p{rng[2]}", account=account))  # fmt: skip
    # the second step as the shuffle gives it: one task per address pair hash, sorted
    tally = Tally()
    spans = {os.path.basename(path): (plan.first_ts, plan.last_ts)}
    for i in range(2):
        mine = [r for r in records if hash(r[0][0]) % 2 == i]
        tally.merge(resolve_records(sorted_records(mine), str(calls_dir), f"r{i}", spans))
    targets = tally.latency_targets()
    files = [str(calls_dir / f) for f in sorted(os.listdir(calls_dir)) if f.endswith(".parquet")]
    selected = select_latencies(files, {c: {b for _, b, _ in found} for c, found in targets.items()})
    return build_summary(tally, selected, [os.path.basename(path)], sorted(p.text for p in problems)), len(plan.ranges)


@pytest.mark.parametrize("split_bytes", [1 << 40, 16 * 1024])
def test_stretches_give_the_ground_truth_whole_or_in_many_ranges(tmp_path, split_bytes):
    path = str(tmp_path / "s.cap")
    truth = synth.write_native(path, 4000, seed=5)
    summary, n_ranges = _analyze_without_spark(path, tmp_path, split_bytes)
    assert n_ranges == 1 if split_bytes > 1e9 else n_ranges > 20
    truth = json.loads(json.dumps(truth))
    truth.pop("torn_connections", None)
    by_capture = summary.pop("bytes_by_capture")
    assert summary == {**truth, "complete": True, "incomplete_captures": []}
    (b,) = by_capture.values()
    assert b["frames"] == truth["frames"] and b["stream"] == b["frame"] > 0 and b["unaccounted"] == 0


def _row(kind: str, direction: str, opaque: int, ts: int, code: int = 11, conn: str = "c->s") -> tuple:
    client, server = conn.split("->")
    return ("cap", 1, ts, ts, conn, client, server, direction, kind, "JSON", code, "X", opaque, 0, "JAVA", 1,
            30, 20, 2, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None)  # fmt: skip


def test_fifo_pairing_per_key_and_what_is_left():
    p = Pairer()
    p.response(_row("response", TO_CLIENT, 9, 1, code=0))  # before any request: left over
    p.request(_row("request", TO_SERVER, 1, 2))
    p.request(_row("request", TO_SERVER, 1, 3))  # the same opaque again, still outstanding
    p.request(_row("request", TO_CLIENT, 1, 4, code=40))  # the other side's opaque 1: another key
    p.response(_row("response", TO_CLIENT, 1, 5, code=0))  # answers the request at ts 2
    assert [(c[C.STATUS], c[C.REQ_TS], c[C.RESP_TS]) for c in p.calls] == [(ANSWERED, 2, 5)]
    assert p.calls[0][C.LATENCY] == 3 / 1e6
    left = sorted((r[F.TS], r[F.KIND]) for r in p.leftovers())
    assert left == [(1, "response"), (3, "request"), (4, "request")]


def test_leftovers_pair_across_stretches():
    rows = [
        _row("response", TO_CLIENT, 7, 10, code=0),  # orphan: nothing before it
        _row("request", TO_SERVER, 8, 11),  # answered in a later stretch
        _row("response", TO_CLIENT, 8, 20, code=0),
        _row("request", TO_SERVER, 9, 21),  # never answered
    ]
    calls = list(pair_leftovers(rows))
    assert sorted((c[C.STATUS], c[C.OPAQUE]) for c in calls) == [(ANSWERED, 8), (ORPHAN, 7), (UNANSWERED, 9)]
    answered = next(c for c in calls if c[C.STATUS] == ANSWERED)
    assert (answered[C.REQ_TS], answered[C.RESP_TS]) == (11, 20)
    orphan = next(c for c in calls if c[C.STATUS] == ORPHAN)
    assert orphan[C.DIRECTION] == TO_SERVER and orphan[C.REQ_TS] is None and orphan[C.RESP_TS] == 10


def test_buckets_are_monotonic_and_exact_below_2us():
    np = pytest.importorskip("numpy")
    values = np.array(sorted({0, 1, 5, 2047, 2048, 2049, 3000, 4095, 4096, 10**6, 10**6 + 1, 2**40, 2**40 + 7, -5, -1}))
    b = buckets(values)
    assert list(b) == sorted(b)
    small = values[(values >= 0) & (values < 2048)]
    assert list(buckets(small)) == list(small)


def test_percentiles_from_histograms_are_exact(tmp_path):
    """Many tallies merged, values found in the Parquet parts: the figures numpy's
    default (and Spark's ``percentile``) give, to the 6 decimals of summary.json."""
    from trocket.spark.stretch import _Calls

    rng = random.Random(3)
    tallies = []
    everything: dict[int, list[int]] = {11: [], 310: []}
    for part in range(5):
        tally = Tally()
        rows = []
        for i in range(3000):
            code = 11 if i % 3 else 310
            lat = int(rng.lognormvariate(14, 1.2)) if i % 97 else rng.randrange(0, 3000)
            everything[code].append(lat)
            q = _row("request", TO_SERVER, i, 1_000_000 + i, code=code)
            s = _row("response", TO_CLIENT, i, 1_000_000 + i + lat, code=0)
            from trocket.spark.calls import answered

            rows.append(answered(q, s))
        calls = _Calls(str(tmp_path), f"p{part}.parquet", tally)
        calls.write(rows)
        calls.close()
        tallies.append(tally.compact())
    merged = Tally()
    for t in tallies:
        merged.merge(t)
    targets = merged.latency_targets()
    files = [str(tmp_path / f) for f in sorted(os.listdir(tmp_path))]
    selected = select_latencies(files, {c: {b for _, b, _ in found} for c, found in targets.items()})
    summary = build_summary(merged, selected, [], [])
    for code, values in everything.items():
        ms = sorted(v / 1e6 for v in values)
        want = {name: round(synth.percentile(ms, q), 6) for name, q in PERCENTILES}
        want["max"] = round(ms[-1], 6)
        assert summary["latency_ms_by_code"][str(code)] == want
