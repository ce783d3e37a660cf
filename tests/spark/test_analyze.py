"""The Spark job on small captures whose answers are known (synthetic ground truth)."""

from __future__ import annotations

import argparse
import json
import os
import shutil

import pytest

from trocket.codecs.pcap_write import PcapWriter, TcpFlow
from trocket.spark.job import analyze
from trocket.spark.summary import SUMMARY_KEYS

from .conftest import summary_without


def test_native_summary_is_the_ground_truth(native_result, captures):
    truth = captures["native_truth"]
    assert list(native_result.summary) == list(SUMMARY_KEYS)
    assert summary_without(native_result.summary, "bytes_by_capture") == {**summary_without(truth, "torn_connections"), "complete": True, "incomplete_captures": []}
    b = native_result.summary["bytes_by_capture"]["synth.cap"]
    assert b["frames"] == truth["frames"] and b["stream"] == b["frame"] > 0 and b["unaccounted"] == 0


def test_summary_json_shape(native_result):
    s = json.loads(json.dumps(native_result.summary))
    for key in ("frames", "requests", "oneway_requests", "responses", "connections", "header_decode_errors", "unmatched_responses"):
        assert type(s[key]) is int
    for key in ("requests_by_code", "responses_by_code", "unanswered_by_code"):
        assert all(k.isdigit() and type(v) is int for k, v in s[key].items())
    assert set(s["frames_by_serialize"]) == {"JSON", "ROCKETMQ"}
    assert all(set(p) == {"request_code", "response_code", "count"} for p in s["pairs"])
    assert all(set(v) == {"p50", "p95", "p99", "max"} for v in s["latency_ms_by_code"].values())


def test_pcap_summary_is_the_same_traffic_with_torn_streams_reported(spark, captures, tmp_path):
    result = analyze(spark, [captures["pcap"]], str(tmp_path), split_bytes=64 * 1024)
    truth = captures["pcap_truth"]
    assert summary_without(result.summary, "stream_problems", "complete", "incomplete_captures", "bytes_by_capture") == summary_without(
        truth, "stream_problems", "torn_connections"
    )
    reported = sorted({p.split(": ", 1)[0] for p in result.summary["stream_problems"]})
    assert reported == truth["stream_problems"]
    assert all("ends inside a frame" in p for p in result.summary["stream_problems"])
    assert result.summary["incomplete_captures"] == ["synth.pcap"]  # partial frames: as `trocket capture show` says
    b = result.summary["bytes_by_capture"]["synth.pcap"]
    # the torn frames' captured halves are problem bytes; every byte is accounted for
    assert b["problem"] == 48 * len(truth["torn_connections"]) and b["unaccounted"] == 0
    assert b["stream"] == b["frame"] + b["duplicate"] + b["problem"]


def test_frames_and_calls_tables(spark, native_result, captures):
    from pyspark.sql import functions as F

    frames = spark.read.parquet(native_result.frames_path)
    calls = spark.read.parquet(native_result.calls_path)
    truth = captures["native_truth"]
    assert frames.count() == truth["frames"]
    for col in ("ts_ns", "connection", "client", "server", "direction", "kind", "serialize", "code", "code_name",
                "opaque", "language", "version", "header_len", "body_len", "remark", "topic", "group", "queue_id", "ext"):  # fmt: skip
        assert col in frames.columns
    by_status = {r[0]: r[1] for r in calls.groupBy("status").count().collect()}
    answered = sum(p["count"] for p in truth["pairs"])
    assert by_status == {
        "answered": answered,
        "unanswered": sum(truth["unanswered_by_code"].values()),
        "orphan_response": truth["unmatched_responses"],
    }
    # the broker's oneway NOTIFY_CONSUMER_IDS_CHANGED counts as a request, never as unanswered
    notify = frames.where(F.col("code_name") == "NOTIFY_CONSUMER_IDS_CHANGED").select("kind", "direction").distinct().collect()
    assert [tuple(r) for r in notify] == [("oneway", "to_client")]
    assert calls.where(F.col("request_code") == 40).count() == 0
    bad = calls.where((F.col("status") == "answered") & ((F.col("latency_ms") <= 0) | F.col("latency_ms").isNull())).count()
    assert bad == 0


def test_since_until(spark, captures, tmp_path, native_result):
    from pyspark.sql import functions as F

    frames = spark.read.parquet(native_result.frames_path)
    ts = sorted(r[0] for r in frames.select("ts_ns").collect())
    lo, hi = ts[1000], ts[2000]
    result = analyze(spark, [captures["native"]], str(tmp_path), since_ns=lo, until_ns=hi)
    assert result.summary["frames"] == frames.where((F.col("ts_ns") >= lo) & (F.col("ts_ns") < hi)).count()


def test_the_progress_says_what_was_done(spark, captures, tmp_path):
    """What an interrupted run prints (trocket/cli_analyze.py): the phase, and the frames
    the finished tasks decoded (an accumulator: no call to the JVM)."""
    from trocket.spark.session import Progress

    progress = Progress(show=False)
    assert progress.so_far() == "while starting"
    progress.start(spark.sparkContext)
    try:
        result = analyze(spark, [captures["native"]], str(tmp_path), split_bytes=16 * 1024, progress=progress)
    finally:
        progress.stop()
    frames = captures["native_truth"]["frames"]
    assert progress.frames.value == result.summary["frames"] == frames
    assert progress.so_far().startswith("while latency percentiles (")
    assert progress.so_far().endswith(f"{frames:,} frames decoded by the tasks that finished)")


def _http_pcap(path: str) -> None:
    w = PcapWriter()
    flow = TcpFlow(w, "10.9.9.9:50000", "10.9.9.1:80")
    data = w.header() + b"".join(flow.handshake(10**18))
    data += b"".join(flow.send(10**18 + 10**6, "client", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 3))
    data += b"".join(flow.send(10**18 + 2 * 10**6, "server", b"HTTP/1.1 200 OK\r\n\r\n"))
    with open(path, "wb") as f:
        f.write(data)


def test_bad_input_is_reported_and_the_rest_analyzed(spark, captures, tmp_path, capsys):
    from trocket.spark.main import add_arguments, run

    d = tmp_path / "in"
    d.mkdir()
    good = str(d / "good.cap")
    shutil.copy(captures["native"], good)
    data = open(captures["native"], "rb").read()
    (d / "truncated.cap").write_bytes(data[: len(data) // 2])
    pdata = open(captures["pcap"], "rb").read()
    (d / "truncated.pcap").write_bytes(pdata[: len(pdata) // 3 + 7])
    (d / "empty.pcap").write_bytes(b"")
    (d / "random.bin").write_bytes(os.urandom(300))
    _http_pcap(str(d / "http.pcap"))
    out = tmp_path / "out"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([good, str(d / "truncated.cap"), str(d / "truncated.pcap"), str(d / "empty.pcap"),
                              str(d / "random.bin"), str(d / "http.pcap"), str(d / "missing.cap"), "--out", str(out), "--quiet"])  # fmt: skip
    rc = run(args, spark=spark)
    assert rc == 1  # a named capture could not be read at all
    summary = json.loads((out / "summary.json").read_text())
    assert summary["captures"] == ["good.cap", "truncated.cap", "truncated.pcap", "empty.pcap", "random.bin", "http.pcap", "missing.cap"]
    problems = summary["stream_problems"]

    def has(prefix: str, text: str) -> bool:
        return any(p.startswith(prefix) and text in p for p in problems)

    assert has("missing.cap:", "no such file")
    assert has("empty.pcap:", "empty file")
    assert has("random.bin:", "not a capture")
    assert has("truncated.cap:", "capture ends inside a record")
    assert has("truncated.pcap:", "")
    assert has("10.9.9.9:50000->10.9.9.1:80:", "HTTP")  # the non-RocketMQ stream, by connection
    truth = captures["native_truth"]
    assert summary["frames"] > truth["frames"] + 500  # good.cap whole, plus the readable halves
    assert summary["complete"] is False
    assert (out / "_SUCCESS").exists() and (out / "frames" / "_SUCCESS").exists()
    report = (out / "report.html").read_text()
    assert "plotly" in report and "src=\"http" not in report  # its JavaScript inline: works offline
    assert "missing.cap: no such file" in report
    printed = capsys.readouterr().out
    assert "problem: " in printed and "frames " in printed and str(out) in printed


def test_views_and_the_interactive_report(spark, native_result, captures):
    import pyarrow.parquet as pq

    from trocket.spark.main import write_report

    out = os.path.dirname(native_result.frames_path)
    write_report(out, native_result.summary)
    truth = captures["native_truth"]
    conv = pq.read_table(os.path.join(out, "views", "conversations.parquet")).to_pylist()
    assert len(conv) == truth["connections"]
    assert sum(r["frames_to_server"] + r["frames_to_client"] for r in conv) == truth["frames"]
    assert sum(r["unanswered"] for r in conv) == sum(truth["unanswered_by_code"].values())
    assert {r["role"] for r in conv} == {"name server", "broker"}
    assert all(r["client_id"] for r in conv if r["role"] == "broker" and r["frames_to_server"] > 20)
    msgs = pq.read_table(os.path.join(out, "views", "messages.parquet"))
    sends_ok = sum(p["count"] for p in truth["pairs"] if p["request_code"] == 310 and p["response_code"] == 0)
    batches_ok = sum(p["count"] for p in truth["pairs"] if p["request_code"] == 320 and p["response_code"] == 0)
    assert sum(msgs["put_messages"].to_pylist()) == sends_ok + 4 * batches_ok  # a synthetic batch holds 4
    io = pq.read_table(os.path.join(out, "views", "io.parquet"))
    assert sum(io["frames"].to_pylist()) == truth["frames"]
    page = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    assert page.count("<script") >= 3 and 'src="http' not in page
    for section in ("IO graph", "Latency by request code", "Held polls", "Slowest calls", "Errors", "Messages by topic",
                    "Conversations", "Client instances", "Captures", "Stream problems"):  # fmt: skip
        assert section in page
    assert "PULL_MESSAGE" in page and "TOPIC_NOT_EXIST" in page


def test_views_spread_over_the_executors_equal_the_views_made_in_one_pass(spark, native_result):
    """The job runs the views' passes over the tables' parts in its executors and merges
    their partial aggregates; the benchmark's baseline runs them in one pass."""
    from trocket.spark.job import map_files, part_files
    from trocket.spark.views import build_views

    out = os.path.dirname(native_result.frames_path)
    assert len(part_files(native_result.frames_path)) > 4  # several parts, several tasks
    shares: list = []

    def spread(fn, files):
        shares.append(len(files))
        return map_files(spark, fn, files)

    apart = build_views(out, native_result.summary, spread)
    one = build_views(out, native_result.summary)
    assert len(shares) == 1  # one job over both tables
    for name, table in one.items():
        if name in ("span", "width_ns") or table is None:
            assert apart[name] == table, name
            continue
        keys = [(c, "ascending") for c in table.column_names if not table.schema.field(c).type.equals("null")]
        assert apart[name].sort_by(keys).to_pylist() == table.sort_by(keys).to_pylist(), name


def test_nothing_readable_gives_an_empty_summary_and_report(spark, tmp_path):
    from trocket.spark.report import build_report

    result = analyze(None, [str(tmp_path / "missing.cap")], str(tmp_path / "out"))  # no Spark needed
    s = result.summary
    assert (s["frames"], s["requests"], s["connections"], s["pairs"], s["latency_ms_by_code"]) == (0, 0, 0, [], {})
    assert s["stream_problems"] == ["missing.cap: no such file"] and s["complete"] is False
    assert spark.read.parquet(result.frames_path).count() == 0 and spark.read.parquet(result.calls_path).count() == 0
    page = build_report(None, s)
    assert "missing.cap: no such file" in page
