"""Several captures of one deployment, given in any order: a connection seen in several
files is one stream only when its bytes continue (pcap) or its files follow each other
(native); captures that reuse addresses stay apart; every byte is accounted for; the
calls reference their frames by a unique key; the exit-status rule."""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys

from trocket.spark import synth
from trocket.spark.job import analyze
from trocket.spark.streams import Streams

from .conftest import TROCKET, split_native, summary_without, tapping_broker

_COUNTS = ("captures", "complete", "incomplete_captures", "stream_problems", "bytes_by_capture", "torn_connections")


def _split_pcap(path: str, out_dir, parts: int) -> list[str]:
    """The packets of ``path`` in ``parts`` files, as a rotating tcpdump writes them;
    each file but the first starts in the middle of a frame."""
    from trocket.codecs.pcap import PacketRange, PacketReader
    from trocket.codecs.pcap_decode import decode_packet
    from trocket.codecs.tcp_frames import plausible_frame_at

    data = open(path, "rb").read()
    header, pos, cuts = data[:24], 24, [24]
    while pos < len(data):
        incl = struct.unpack_from("<I", data, pos + 8)[0]
        pos += 16 + incl
        cuts.append(pos)
    with open(path, "rb") as f:
        state = PacketReader(f).state
        mid_frame = {p.file_offset for p in PacketReader(f, range_=PacketRange(24, len(data), state))
                     if (seg := decode_packet(p)) is not None and seg.payload and plausible_frame_at(seg.payload, 0) is False}  # fmt: skip
    step = len(cuts) // parts
    starts = [24] + [next(c for c in cuts[i * step :] if c in mid_frame) for i in range(1, parts)]
    names = []
    for i in range(parts):
        a, b = starts[i], starts[i + 1] if i < parts - 1 else len(data)
        name = str(out_dir / f"rot{i}.pcap")
        with open(name, "wb") as f:
            f.write(header + data[a:b])
        names.append(name)
    return names


def _counts(summary: dict) -> dict:
    return summary_without(summary, *_COUNTS)


def test_rotated_pcaps_in_any_order_are_the_one_capture(spark, captures, tmp_path):
    files = _split_pcap(captures["pcap"], tmp_path, 5)
    random.Random(3).shuffle(files)
    result = analyze(spark, files, str(tmp_path / "out"), split_bytes=64 * 1024)
    s, truth = result.summary, captures["pcap_truth"]
    assert _counts(s) == _counts(truth)
    assert sorted({p.split(": ", 1)[0] for p in s["stream_problems"]}) == truth["stream_problems"]
    by_capture = s["bytes_by_capture"]
    assert sorted(by_capture) == sorted(os.path.basename(f) for f in files)
    assert all(b["unaccounted"] == 0 for b in by_capture.values())
    assert sum(b["frames"] for b in by_capture.values()) == truth["frames"]
    assert sum(b["carried"] for b in by_capture.values()) == 0
    assert any(b["carried"] for b in by_capture.values())  # frames cut by a rotation, completed in the next file

    # the calls' references to their frames are unique keys: a join finds one frame each
    from pyspark.sql import functions as F

    frames = spark.read.parquet(result.frames_path)
    calls = spark.read.parquet(result.calls_path)
    assert frames.groupBy("capture", "connection_id", "seq").count().where(F.col("count") > 1).count() == 0
    answered = calls.where(F.col("status") == "answered")
    req = frames.select(F.col("capture").alias("request_capture"), F.col("connection_id").alias("request_connection_id"),
                        F.col("seq").alias("request_seq"), F.col("opaque").alias("frame_opaque"))  # fmt: skip
    joined = answered.join(req, ["request_capture", "request_connection_id", "request_seq"])
    assert joined.count() == answered.count() == sum(p["count"] for p in truth["pairs"])
    assert joined.where(F.col("opaque") != F.col("frame_opaque")).count() == 0
    # some calls were answered in the next file: the response's capture differs
    assert answered.where(F.col("request_capture") != F.col("response_capture")).count() > 0


def test_rotated_native_captures_and_captures_that_reuse_addresses(spark, captures, tmp_path):
    """A tap's rotated files in any order are the one capture; two recordings with the
    same addresses and connection ids at the same times (two synthetic seeds) stay apart."""
    files = split_native(captures["native"], tmp_path, 4)
    random.Random(5).shuffle(files)
    other = str(tmp_path / "other.cap")
    other_truth = synth.write_native(other, 1500, seed=12)
    other_pcap = str(tmp_path / "other.pcap")
    synth.write_pcap(other_pcap, 1500, seed=12)
    s = analyze(spark, files, str(tmp_path / "out"), split_bytes=64 * 1024).summary
    truth = captures["native_truth"]
    assert _counts(s) == _counts(truth) and s["complete"]
    both = analyze(spark, [captures["native"], other, captures["pcap"], other_pcap], str(tmp_path / "both")).summary
    assert both["connections"] == 2 * truth["connections"] + 2 * other_truth["connections"]
    assert both["frames"] == 2 * truth["frames"] + 2 * other_truth["frames"]
    assert both["unmatched_responses"] == 2 * truth["unmatched_responses"] + 2 * other_truth["unmatched_responses"]


def test_a_taps_rotated_files_are_one_capture(spark, captures, tmp_path):
    """``--tap-rotate-mb``'s files (``tap.cap``, ``tap.cap.1``, ...), named in any order:
    one capture, whose analysis is the whole capture's ground truth."""
    files = split_native(captures["native"], tmp_path / "tap", 4, name=lambda i: "tap.cap" + (f".{i}" if i else ""))
    random.Random(5).shuffle(files)
    result = analyze(spark, files, str(tmp_path / "out"), split_bytes=16 * 1024)
    s, truth = result.summary, captures["native_truth"]
    assert s["captures"] == ["tap.cap"] and s["complete"]
    assert summary_without(s, "captures", "bytes_by_capture") == {**summary_without(truth, "torn_connections", "captures"),
                                                                  "complete": True, "incomplete_captures": []}  # fmt: skip
    b = s["bytes_by_capture"]["tap.cap"]
    assert b["frames"] == truth["frames"] and b["stream"] == b["frame"] and b["unaccounted"] == 0
    _assert_frame_keys_unique(spark, result)


def _assert_frame_keys_unique(spark, result) -> None:
    from pyspark.sql import functions as F

    frames = spark.read.parquet(result.frames_path)
    assert frames.groupBy("capture", "connection_id", "seq").count().where(F.col("count") > 1).count() == 0
    calls = spark.read.parquet(result.calls_path).where(F.col("status") == "answered")
    keys = frames.select(F.col("capture").alias("request_capture"), F.col("connection_id").alias("request_connection_id"),
                         F.col("seq").alias("request_seq"))  # fmt: skip
    assert calls.join(keys, ["request_capture", "request_connection_id", "request_seq"]).count() == calls.count()


def _concatenated(files: list[str], path) -> str:
    """The records of a tap's rotated ``files`` (in order) in one capture at ``path``."""
    from trocket.codecs.capture import FILE_HEADER

    with open(path, "wb") as out:
        out.write(FILE_HEADER)
        for f in files:
            data = open(f, "rb").read()
            out.write(data[struct.unpack_from(">H", data, 10)[0] :])
    return str(path)


def test_a_tapping_brokers_rotated_files_are_one_capture(spark, tmp_path):
    """A real broker's tap rotated every 20 KiB under a producer and a consumer: the
    files are one capture, with every frame the tap wrote, and its analysis (connections,
    calls, latencies, views) is that of the same records in one file."""
    import re

    import pyarrow.parquet as pq

    from trocket.spark.main import write_report

    tap = tmp_path / "tap"
    with tapping_broker(tmp_path, tap, 0.02) as (ns, _, log):
        for cmd in (["send", "--topic", "Rot", "--count", "300", "--size", "100"],
                    ["consume", "--topic", "Rot", "--group", "RotG", "--count", "300", "--from", "first", "--quiet"]):  # fmt: skip
            done = subprocess.run([str(TROCKET), *cmd, "-n", ns], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr[-2000:]
    written, nfiles = map(int, re.search(r"(\d+) frames written in (\d+) files", log.read_text()).groups())
    files = sorted(map(str, tap.iterdir()), key=lambda p: int(p.rsplit(".", 1)[1]) if p[-1].isdigit() else 0)
    assert nfiles == len(files) > 5

    rotated = analyze(spark, [str(tap)], str(tmp_path / "out"), split_bytes=8 * 1024)
    whole = analyze(spark, [_concatenated(files, tmp_path / "whole.cap")], str(tmp_path / "whole"), split_bytes=8 * 1024)
    s = rotated.summary
    assert s["captures"] == ["tap/broker.cap"] and s["complete"] and s["stream_problems"] == []
    assert s["frames"] == written
    assert summary_without(s, "captures", "bytes_by_capture") == summary_without(whole.summary, "captures", "bytes_by_capture")
    assert s["bytes_by_capture"]["tap/broker.cap"] == whole.summary["bytes_by_capture"]["whole.cap"]
    _assert_frame_keys_unique(spark, rotated)

    # the report: one capture, one conversation per connection, the producer's among them across files
    write_report(str(tmp_path / "out"), s, True, spark)
    views = tmp_path / "out" / "views"
    assert set(pq.read_table(views / "io.parquet").column("capture").to_pylist()) == {"tap/broker.cap"}
    assert pq.read_table(views / "captures.parquet").column("capture").to_pylist() == ["tap/broker.cap"]
    conv = pq.read_table(views / "conversations.parquet").to_pylist()
    assert len(conv) == s["connections"]
    from pyspark.sql import functions as F

    frames = spark.read.parquet(rotated.frames_path)
    spans = frames.groupBy("connection_id").agg(F.min("seq").alias("lo"), F.max("seq").alias("hi")).collect()
    assert any(r.lo < os.path.getsize(files[0]) < r.hi for r in spans)  # a connection cut by the first rotation


def test_native_pieces_stitch_only_across_captures_that_follow_each_other():
    sec = 10**9
    spans = {"a": (0, 100 * sec), "b": (100 * sec, 200 * sec), "c": (50 * sec, 150 * sec)}
    s = Streams(spans)
    for capture, first, last in (("a", 10, 90), ("b", 110, 190), ("c", 60, 140)):
        s.add(("frames", capture, 7, "native", first * sec, last * sec, 3))
    s.add(("frames", "b", 8, "native", 120 * sec, 130 * sec, 1))  # another connection id: its own
    assert s.stream_of("a", 7) == s.stream_of("b", 7) == ("a", 7)
    assert s.stream_of("c", 7) == ("c", 7)  # c overlaps a and b in time: another recording
    assert s.stream_of("b", 8) == ("b", 8)
    assert len(s.streams()) == 3


def _write_bad_captures(d) -> list[str]:
    from trocket.codecs.capture import FILE_HEADER

    synth.write_pcap(str(d / "good.pcap"), 300, seed=2)
    data = open(d / "good.pcap", "rb").read()
    (d / "twenty.cap").write_bytes(FILE_HEADER + b"\x00\x00\x00\x30")  # 20 bytes: a record length, no record
    (d / "short.pcap").write_bytes(data[: len(data) - 100])  # cut inside the last packet
    broken = bytearray(data)
    broken[24 + 8 : 24 + 12] = struct.pack("<I", 1 << 30)  # the first record's length: impossible
    (d / "broken.pcap").write_bytes(bytes(broken))
    return [str(d / n) for n in ("twenty.cap", "short.pcap", "broken.pcap")]


def test_a_capture_not_read_completely_makes_the_run_incomplete(spark, tmp_path, capsys):
    from trocket.spark.main import main_args, run

    bad = _write_bad_captures(tmp_path)
    out = tmp_path / "out"
    rc = run(main_args([*bad, "--out", str(out), "--quiet", "--no-report"]), spark=spark)
    summary = json.loads((out / "summary.json").read_text())
    assert rc == 1 and summary["incomplete_captures"] == ["broken.pcap", "short.pcap", "twenty.cap"]
    assert "INCOMPLETE" in capsys.readouterr().out


def test_relative_out_and_nothing_readable_starts_no_jvm(tmp_path):
    """Nothing readable: the summary and an empty report, exit 1, and no JVM (a Java that
    cannot start would fail the run)."""
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "no-java"), PATH=os.path.dirname(sys.executable))
    (tmp_path / "notes.txt").write_text("not a capture")
    proc = subprocess.run([sys.executable, "-m", "trocket", "analyze", "missing.cap", "notes.txt", "--out", "rel-out", "--quiet"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    summary = json.loads((tmp_path / "rel-out" / "summary.json").read_text())
    assert summary["incomplete_captures"] == ["missing.cap", "notes.txt"] and summary["frames"] == 0
    assert (tmp_path / "rel-out" / "report.html").exists() and (tmp_path / "rel-out" / "_SUCCESS").exists()
    assert "Traceback" not in proc.stderr
