"""Native captures cut into ranges on record boundaries, and the inputs' problems (no Spark)."""

from __future__ import annotations

from trocket.codecs.capture import read_records
from trocket.spark import synth
from trocket.spark.inputs import resolve_inputs
from trocket.spark.native import plan_native, read_native_range
from trocket.spark.rows import F


def test_ranges_cover_every_record_once(tmp_path):
    path = str(tmp_path / "a.cap")
    truth = synth.write_native(path, 600, seed=3)
    problems: list = []
    ranges = plan_native(path, "a.cap", 8 * 1024, problems.append).ranges
    assert len(ranges) > 5 and not problems
    assert all(a[3] == b[2] for a, b in zip(ranges, ranges[1:]))  # contiguous
    rows = [r for rng in ranges for r in read_native_range(rng, problems.append)]
    with open(path, "rb") as f:
        records = read_records(f.read())
    assert len(rows) == len(records) == truth["frames"]
    assert [r[F.TS] for r in rows] == [rec.timestamp_ns for rec in records]
    assert [r[F.CONN_ID] for r in rows] == [rec.connection_id for rec in records]
    assert not problems


def test_truncated_tail_is_a_problem_and_the_rest_is_read(tmp_path):
    path = tmp_path / "a.cap"
    synth.write_native(str(path), 200, seed=3)
    data = path.read_bytes()
    cut = tmp_path / "cut.cap"
    cut.write_bytes(data[:-30])
    problems: list = []
    ranges = plan_native(str(cut), "cut.cap", 1 << 20, problems.append).ranges
    rows = [r for rng in ranges for r in read_native_range(rng, problems.append)]
    assert len(rows) == 199
    assert len(problems) == 1 and problems[0].text.startswith("cut.cap: capture ends inside a record")
    assert problems[0].kind == "truncated-file"


def test_since_until_filter_in_the_reader(tmp_path):
    path = str(tmp_path / "a.cap")
    synth.write_native(path, 300, seed=3)
    (rng,) = plan_native(path, "a.cap", 1 << 20, print).ranges
    all_ts = [r[F.TS] for r in read_native_range(rng, print)]
    lo, hi = all_ts[100], all_ts[200]
    kept = [r[F.TS] for r in read_native_range(rng, print, lo, hi)]
    assert kept == [t for t in all_ts if lo <= t < hi]


def test_inputs_missing_empty_and_unknown_files(tmp_path):
    (tmp_path / "empty.cap").write_bytes(b"")
    (tmp_path / "notes.txt").write_bytes(b"hello, not a capture")
    good = tmp_path / "good.cap"
    synth.write_native(str(good), 10)
    inputs = resolve_inputs([str(tmp_path / "missing.cap"), str(tmp_path / "empty.cap"), str(tmp_path / "notes.txt"), str(good)])
    assert inputs.names == ["missing.cap", "empty.cap", "notes.txt", "good.cap"]
    assert [c.name for c in inputs.native] == ["good.cap"]
    assert [(p.kind, p.text) for p in inputs.problems[:2]] == [("missing", "missing.cap: no such file"),
                                                               ("not-capture", "empty.cap: empty file (not a capture)")]  # fmt: skip
    assert inputs.problems[2].text.startswith("notes.txt: not a capture")


def test_folders_are_walked_and_what_is_no_capture_there_skipped(tmp_path):
    caps = tmp_path / "caps"
    (caps / "day1" / "deeper").mkdir(parents=True)
    synth.write_native(str(caps / "day1" / "a.cap"), 10)  # and its a.cap.truth.json
    synth.write_pcap(str(caps / "day1" / "deeper" / "b.pcap"), 10)
    (caps / "day1" / "_SUCCESS").write_bytes(b"")
    (caps / ".hidden.cap").write_bytes(b"x")
    (caps / "empty.cap").write_bytes(b"")
    inputs = resolve_inputs([str(caps)])
    assert inputs.names == ["caps/day1/a.cap", "caps/day1/deeper/b.pcap"]
    assert [(c.name, c.format) for c in inputs.captures] == [("caps/day1/a.cap", "native"), ("caps/day1/deeper/b.pcap", "pcap")]
    assert not inputs.problems
    assert sorted(inputs.skipped) == ["caps/day1/a.cap.truth.json: skipped (not a capture)",
                                      "caps/day1/deeper/b.pcap.truth.json: skipped (not a capture)",
                                      "caps/empty.cap: skipped (an empty file)"]  # fmt: skip


def test_file_uris_are_read_and_other_schemes_reported(tmp_path):
    from urllib.parse import quote

    from trocket.spark.inputs import local_path

    good = tmp_path / "a b.cap"
    synth.write_native(str(good), 10)
    inputs = resolve_inputs([f"file://{quote(str(good))}", f"file://localhost{tmp_path}", "ftp://host/c.cap"])
    assert [(c.name, c.path) for c in inputs.native] == [("a b.cap", str(good)), (f"{tmp_path.name}/a b.cap", str(good))]
    assert [(p.kind, p.text) for p in inputs.problems] == [("unreadable", "c.cap: ftp:// is not read (local paths, file://, "
                                                                          "s3:// or s3a://, and hdfs:// are)")]  # fmt: skip
    assert inputs.names[-1] == "c.cap"
    assert local_path("file:/x/y") == "/x/y" and local_path("rel/x.cap") == "rel/x.cap" and local_path("hdfs://nn/x") is None


def test_a_header_only_native_file_is_a_complete_capture_of_no_frames(tmp_path):
    from trocket.codecs.capture import FILE_HEADER

    p = tmp_path / "h.cap"
    p.write_bytes(FILE_HEADER)
    problems: list = []
    assert plan_native(str(p), "h.cap", 1 << 20, problems.append).ranges == []
    assert problems == []


def test_ranges_are_read_through_a_small_window(tmp_path, monkeypatch):
    """Records straddling the reader's chunks come out whole (the reader never maps a file)."""
    from trocket.spark import native

    path = str(tmp_path / "a.cap")
    synth.write_native(path, 400, seed=4)
    whole = native.plan_native(path, "a.cap", 1 << 20, print)
    rows = [r[F.SEQ] for rng in whole.ranges for r in native.read_native_range(rng, print)]
    monkeypatch.setattr(native, "CHUNK_BYTES", 777)
    small = native.plan_native(path, "a.cap", 16 * 1024, print)
    assert (small.first_ts, small.last_ts) == (whole.first_ts, whole.last_ts)
    assert [r[F.SEQ] for rng in small.ranges for r in native.read_native_range(rng, print)] == rows


def test_a_taps_rotated_files_are_one_capture_and_others_stay_apart(tmp_path):
    """``X``, ``X.1``, ``X.2`` (``--tap-rotate-mb``'s names, times in order) are one
    capture whose frames' seq runs on across the files; files whose times go back, or
    with a number missing, stay captures of their own."""
    import os

    from .conftest import split_native

    path = str(tmp_path / "a.cap")
    synth.write_native(path, 600, seed=3)
    d = tmp_path / "caps"
    files = split_native(path, d, 3, name=lambda i: "tap.cap" + (f".{i}" if i else ""))
    split_native(path, d, 2, name=lambda i: ("back.cap.1", "back.cap")[i])  # .1 holds the earlier records
    split_native(path, d, 2, name=lambda i: ("gap.cap", "gap.cap.2")[i])
    inputs = resolve_inputs([str(d)])
    assert inputs.names == ["caps/back.cap", "caps/back.cap.1", "caps/gap.cap", "caps/gap.cap.2", "caps/tap.cap"]
    assert inputs.rotated == {"caps/tap.cap": ["caps/tap.cap", "caps/tap.cap.1", "caps/tap.cap.2"]}
    tap = [c for c in inputs.captures if c.name == "caps/tap.cap"]
    sizes = [os.path.getsize(f) for f in files]
    assert [(c.path, c.base, c.index) for c in tap] == [(files[0], 0, 4), (files[1], sizes[0], 4), (files[2], sizes[0] + sizes[1], 4)]
    assert [c.index for c in inputs.captures] == [0, 1, 2, 3, 4, 4, 4]

    problems: list = []
    seqs = [r[F.SEQ] for c in tap for rng in plan_native(c.path, c.name, 4096, problems.append, c.base).ranges
            for r in read_native_range(rng, problems.append)]  # fmt: skip
    whole = [r[F.SEQ] for rng in plan_native(path, "a.cap", 4096, problems.append).ranges for r in read_native_range(rng, problems.append)]
    assert not problems and len(seqs) == len(whole) == len(set(seqs)) and seqs == sorted(seqs)
    # a problem in a later file names the capture and the file
    with open(files[1], "ab") as f:
        f.write(b"\x00\x00\x00\x40")
    plan_native(files[1], "caps/tap.cap", 4096, problems.append, sizes[0])
    assert [(p.capture, p.text) for p in problems] == [("caps/tap.cap", "caps/tap.cap (tap.cap.1): capture ends inside a record at offset "
                                                                       f"{sizes[1]} (64 bytes missing)")]  # fmt: skip
