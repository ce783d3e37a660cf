"""The synthetic generator's ground truth is consistent with itself and with the file."""

from __future__ import annotations

from collections import Counter

from trocket.codecs.capture import read_records
from trocket.codecs.command import RPC_ONEWAY, RPC_RESPONSE
from trocket.codecs.errors import CodecError
from trocket.codecs.serialize import decode_command
from trocket.spark import synth


def test_truth_matches_the_frames_written(tmp_path):
    path = tmp_path / "s.cap"
    truth = synth.write_native(str(path), 2500, seed=5)
    records = read_records(path.read_bytes())
    assert len(records) == truth["frames"] == 2500
    kinds = Counter()
    codes = Counter()
    conns = set()
    for rec in records:
        conns.add((rec.local_address, rec.remote_address))
        try:
            cmd = decode_command(rec.payload)
        except CodecError:
            kinds["error"] += 1
            continue
        if cmd.flag & RPC_RESPONSE:
            kinds["response"] += 1
        else:
            kinds["oneway" if cmd.flag & RPC_ONEWAY else "request"] += 1
            codes[str(cmd.code)] += 1
    assert kinds["request"] + kinds["oneway"] == truth["requests"]
    assert kinds["oneway"] == truth["oneway_requests"] > 0
    assert kinds["response"] == truth["responses"]
    assert kinds["error"] == truth["header_decode_errors"] > 0
    assert dict(codes) == truth["requests_by_code"]
    assert len(conns) == truth["connections"]
    answered = sum(p["count"] for p in truth["pairs"])
    assert truth["requests"] - truth["oneway_requests"] == answered + sum(truth["unanswered_by_code"].values())
    assert truth["responses"] == answered + truth["unmatched_responses"]
    assert truth["unanswered_by_code"].get("11", 0) > 0  # long-polling pulls outlive the capture
    # held polls (suspend flag) apart: the other pulls' latency is milliseconds, the held ones' seconds
    held = truth["held_polls"]["11"]
    assert held["arrival"] > 0 and held["expired"] > 0 and held["unanswered"] > 0
    assert held["calls"] == held["arrival"] + held["expired"] + held["other"] + held["unanswered"]
    assert truth["latency_ms_by_code"]["11"]["p99"] < 100 < 1000 < held["held_ms"]["p95"]
    assert {"0", "17"} <= set(truth["responses_by_code"])
    assert truth["frames_by_serialize"]["JSON"] > 0 and truth["frames_by_serialize"]["ROCKETMQ"] > 0
    assert truth["torn_connections"]


def test_same_seed_same_capture(tmp_path):
    a, b = tmp_path / "a.cap", tmp_path / "b.cap"
    synth.write_native(str(a), 500, seed=9)
    synth.write_native(str(b), 500, seed=9)
    assert a.read_bytes() == b.read_bytes()


def test_percentile_interpolates_like_numpy():
    assert synth.percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert synth.percentile([5.0], 0.99) == 5.0
    assert synth.percentile([0.0, 10.0], 0.95) == 9.5
