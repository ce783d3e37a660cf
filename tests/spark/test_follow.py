"""``trocket analyze --follow``: the live mode over a folder a tap rotates into.

A synthetic capture cut into rotated files must add up to its ground truth; a real
broker tapping into rotated files is followed, restarted and made to replay a batch,
and nothing is counted twice."""

from __future__ import annotations

import json
import logging
import os
import signal
import struct
import subprocess
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from trocket.codecs.capture import FILE_HEADER, Direction, Role, encode_record_fields
from trocket.spark.follow import STATE_FILE, follow
from trocket.spark.tap_source import TapStreamReader, list_captures, rotation_key

from ..waiting import wait_until_sync
from .conftest import TROCKET, split_native, tapping_broker, wait_quiet


def _rotate(path: str, out_dir: Path, parts: int) -> list[str]:
    """The records of ``path`` in ``parts`` files named as ``--tap-rotate-mb`` names them."""
    return split_native(path, out_dir, parts, name=lambda i: "tap.cap" + (f".{i}" if i else ""))


def _minutes(out: Path, name: str) -> list[dict]:
    return pq.read_table(out / "minutes" / f"{name}.parquet").to_pylist()


def test_rotation_order_and_a_half_written_record(tmp_path):
    assert sorted(["t.cap.10", "t.cap", "t.cap.2", "t.cap.1"], key=rotation_key) == ["t.cap", "t.cap.1", "t.cap.2", "t.cap.10"]
    rec = encode_record_fields(1_767_225_600 * 10**9, 7, "127.0.0.1:1", "127.0.0.1:2", Direction.RECEIVED, Role.SERVER,
                        struct.pack(">II", 4, 0))  # fmt: skip
    (tmp_path / "notes.txt").write_text("not a capture")
    cap = tmp_path / "t.cap"
    cap.write_bytes(FILE_HEADER + rec + rec[:10])  # the tap is writing the second record
    reader = TapStreamReader({"path": str(tmp_path)})
    assert [n for n, _ in list_captures(str(tmp_path))] == ["t.cap"]
    first = reader.latestOffset(reader.initialOffset(), None)
    assert first == {"files": {"t.cap": len(FILE_HEADER) + len(rec)}, "bad": {}}
    with open(cap, "ab") as f:
        f.write(rec[10:])
    assert reader.latestOffset(first, None)["files"] == {"t.cap": len(FILE_HEADER) + 2 * len(rec)}
    parts = reader.partitions(first, reader.latestOffset(first, None))
    assert [p.value[2:4] for p in parts] == [(len(FILE_HEADER) + len(rec), len(FILE_HEADER) + 2 * len(rec))]


def test_rotated_synthetic_tap_adds_up_to_its_ground_truth(spark, captures, tmp_path):
    _rotate(captures["native"], tmp_path / "tap", 4)
    out = tmp_path / "out"
    f = follow(spark, str(tmp_path / "tap"), str(out), once=True, split_bytes=64 * 1024, quiet=True)
    truth = captures["native_truth"]
    io = _minutes(out, "io")
    assert sum(r["frames"] for r in io) == truth["frames"] == f.state.frames
    assert sum(r["decode_errors"] for r in io) == truth["header_decode_errors"]
    assert sum(r["orphan_responses"] for r in io) == truth["unmatched_responses"]
    calls = _minutes(out, "calls")
    answered: dict = {}
    for p in truth["pairs"]:
        answered[p["request_code"]] = answered.get(p["request_code"], 0) + p["count"]
    assert {c: sum(r["calls"] for r in calls if r["request_code"] == c) for c in answered} == answered
    # the capture ends within --expire-s of its unanswered requests: they are still open
    assert sum(r["unanswered"] for r in calls) == 0
    assert len(f.state.pending) == sum(truth["unanswered_by_code"].values())
    held = truth["held_polls"]["11"]
    assert sum(r["held_polls"] for r in calls) == held["calls"] - held["unanswered"]
    assert sum(r["held_arrival"] for r in calls) == held["arrival"]
    # one minute holds the whole capture: its percentiles are the capture's, within a bucket
    assert len({r["minute"] for r in io}) == 1
    for code, lat in truth["latency_ms_by_code"].items():
        (row,) = [r for r in calls if r["request_code"] == int(code)]
        for p in ("p50", "p95", "p99"):
            assert row[f"{p}_ms"] == pytest.approx(lat[p], rel=1e-3), (code, p)
        assert row["max_ms"] == pytest.approx(lat["max"], abs=1e-6)
    status = json.loads((out / "status.json").read_text())
    assert status["frames"] == truth["frames"] and status["problems"] == []
    page = (out / "report.html").read_text()
    assert 'http-equiv="refresh"' in page and "Calls and latency per minute" in page

    again = follow(spark, str(tmp_path / "tap"), str(out), once=True, quiet=True)  # nothing new: nothing merged
    assert again.state.frames == truth["frames"] and again.batches == []


def test_ctrl_c_stops_a_follower_cleanly(spark, captures, tmp_path):
    """Ctrl-C (SIGINT to the main thread, as a terminal sends it) while following: the
    query stops, the pages are written, and follow returns what it counted."""
    _rotate(captures["native"], tmp_path / "tap", 2)
    out = tmp_path / "out"

    def interrupt_after_a_batch(f) -> None:
        def run() -> None:
            wait_until_sync(lambda: f.batches, 120, interval=0.1)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

        threading.Thread(target=run, daemon=True).start()

    f = follow(spark, str(tmp_path / "tap"), str(out), trigger_s=0.5, report_every_s=60, quiet=True, started=interrupt_after_a_batch)
    assert f.interrupted and not f.query.isActive
    assert f.state.frames == captures["native_truth"]["frames"]
    assert json.loads((out / "status.json").read_text())["frames"] == f.state.frames  # written on the way out


def test_a_ctrl_c_whose_keyboard_interrupt_was_lost_still_stops_a_follower(spark, captures, tmp_path):
    """The session's SIGINT handler raises KeyboardInterrupt wherever the main thread is;
    inside a garbage-collection callback (Py4J's finalizer of a JavaObject) Python prints
    it as 'Exception ignored' and goes on (seen: the follower of the test above ran on).
    The handler also counts the signal, and the follower stops on the count."""
    from trocket.spark import session

    _rotate(captures["native"], tmp_path / "tap", 2)

    def lost_interrupt_after_a_batch(f) -> None:
        def run() -> None:
            wait_until_sync(lambda: f.batches, 120, interval=0.1)
            try:
                session._interrupt(signal.SIGINT, None)  # the handler, its exception lost
            except KeyboardInterrupt:
                pass

        threading.Thread(target=run, daemon=True).start()

    before = session.interrupts()
    try:
        f = follow(spark, str(tmp_path / "tap"), str(tmp_path / "out"), trigger_s=0.5, report_every_s=60, quiet=True,
                   started=lost_interrupt_after_a_batch)  # fmt: skip
    finally:
        logging.disable(logging.NOTSET)  # the handler turned logging off, as for a command that stops
    assert session.interrupts() == before + 1
    assert f.interrupted and not f.query.isActive
    assert f.state.frames == captures["native_truth"]["frames"]


# -- a real broker tapping into rotated files -----------------------------------------


def _send(trocket: Path, ns: str, count: int) -> None:
    done = subprocess.run([str(trocket), "send", "-n", ns, "--topic", "LiveTopic", "--count", str(count), "--size", "64", "--json"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


def _sent(out: Path) -> tuple[int, int]:
    """(send calls answered SUCCESS, messages put to LiveTopic) in the follower's tables."""
    calls = _minutes(out, "calls")
    sends = sum(r["calls"] - r["errors"] for r in calls if r["request_code"] in (10, 310, 320))
    put = sum(r["put_messages"] for r in _minutes(out, "messages") if r["topic"] == "LiveTopic")
    return sends, put


def test_follow_a_tapping_broker_across_restarts(spark, tmp_path):
    tap = tmp_path / "tap"
    out = tmp_path / "out"
    with tapping_broker(tmp_path, tap, 0.02) as (ns, _, _):
        _send(TROCKET, ns, 150)
        wait_quiet(tap)
        first = follow(spark, str(tap), str(out), once=True, split_bytes=8 * 1024, quiet=True)
        assert len(list_captures(str(tap))) > 3  # rotated: the batch read several files
        assert _sent(out) == (150, 150)
        assert first.state.frames > 300

        _send(TROCKET, ns, 100)  # the broker goes on; the follower is restarted
        wait_quiet(tap)
        second = follow(spark, str(tap), str(out), once=True, split_bytes=8 * 1024, quiet=True)
        assert second.batches and second.state.batch_id > first.state.batch_id
        assert _sent(out) == (250, 250)
    frames = second.state.frames

    # a follower stopped after merging a batch but before Spark committed it: Spark runs
    # that batch again at the restart; its id says it is merged already
    commits = out / "_checkpoint" / "commits"
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    os.remove(commits / str(last))
    os.remove(commits / f".{last}.crc")  # Hadoop's checksum beside it
    state = json.loads((out / "_checkpoint" / STATE_FILE).read_text())
    assert state["batch_id"] == last
    third = follow(spark, str(tap), str(out), once=True, split_bytes=8 * 1024, quiet=True)
    assert _sent(out) == (250, 250)
    assert (out / "_checkpoint" / "commits" / str(last)).exists()  # the batch ran again, and was committed
    # the broker's shutdown frames (if any reached the tap) are the only new ones
    assert third.state.frames >= frames


def test_follow_arguments(tmp_path, capsys):
    from trocket.spark.main import main

    assert main(["--out", str(tmp_path / "o")]) == 1
    assert "CAPTURE" in capsys.readouterr().err
    assert main(["--follow", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 1
    assert "no such folder" in capsys.readouterr().err
    assert main(["x.cap", "--follow", str(tmp_path), "--out", str(tmp_path / "o")]) == 1
    assert "takes no CAPTURE" in capsys.readouterr().err
    assert main(["x.cap", "--out", "gs://bucket/o"]) == 1  # refused before any JVM starts
    assert "--out gs://bucket/o: gs:// is not read" in capsys.readouterr().err
    assert main(["--follow", "s3://bucket/tap", "--out", str(tmp_path / "o")]) == 1
    assert "only a local folder is followed" in capsys.readouterr().err
    assert main(["--follow", str(tmp_path), "--out", "s3://bucket/o"]) == 1
    assert "--follow writes a local folder" in capsys.readouterr().err


def test_a_batch_is_cut_to_fill_the_slots(tmp_path):
    """A batch's new bytes in ranges of about splitBytes, or, when that would leave slots
    idle, in about as many equal ranges as there are slots (at least MIN_SPLIT_BYTES)."""
    from trocket.spark import synth
    from trocket.spark.tap_source import MIN_SPLIT_BYTES

    synth.write_native(str(tmp_path / "src.cap"), 8000, seed=4)
    _rotate(str(tmp_path / "src.cap"), tmp_path / "tap", 2)
    total = sum(size - len(FILE_HEADER) for _, size in list_captures(str(tmp_path / "tap")))
    assert total > 4 * MIN_SPLIT_BYTES

    def ranges(split: int, slots: int) -> list[int]:
        reader = TapStreamReader({"path": str(tmp_path / "tap"), "splitBytes": str(split), "slots": str(slots)})
        start = reader.initialOffset()
        parts = reader.partitions(start, reader.latestOffset(start, None))
        assert sum(p.value[3] - p.value[2] for p in parts) == total  # every new byte, once
        return [p.value[3] - p.value[2] for p in parts]

    assert len(ranges(64 << 20, 1)) == 2  # one range a file
    two = ranges(64 << 20, 2)  # two files, about half the bytes each: two ranges
    assert len(two) == 2
    four = ranges(64 << 20, 4)
    assert len(four) == 4 and max(four) < 1.2 * total / 4
    assert len(ranges(64 << 20, 1000)) <= total // MIN_SPLIT_BYTES + 2  # no range much under the floor
    assert len(ranges(total // 8, 2)) >= 8  # splitBytes still bounds a range
