"""The committed corpus decodes, and the pcap of each session (tcpdump) holds the same
frames as the native capture of it (the broker's tap): one reader, two formats."""

from __future__ import annotations

from collections import defaultdict

import pytest

from trocket.codecs.capture import FLAG_RAW, Direction, Role, decode_record, encode_record, CaptureRecord
from trocket.codecs.serialize import decode_command
from trocket.conformance.sources import read_frames

from .conftest import CAPTURES

SESSIONS = sorted({p.stem for p in CAPTURES.glob("*.trkcap")} & {p.stem for p in CAPTURES.glob("*.pcap")})


def test_every_session_is_committed_in_both_formats():
    assert {"cpp-produce-pull", "js-produce-consume"} <= set(SESSIONS)


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.trkcap")) + sorted(CAPTURES.glob("*.pcap")),
                         ids=lambda p: p.name)
def test_committed_capture_reads_completely_and_every_frame_decodes(path):
    read = read_frames(str(path))
    assert read.complete, [str(p) for p in read.problems]
    assert len(read.frames) > 20
    for f in read.frames:
        assert not f.raw
        decode_command(f.frame[4:])


def _by_stream(frames):
    streams = defaultdict(list)
    for f in frames:
        streams[(f.client, f.server, f.from_client)].append(f.frame)
    return dict(streams)


@pytest.mark.parametrize("name", SESSIONS)
def test_pcap_and_native_capture_of_one_session_hold_the_same_frames(name):
    native = _by_stream(read_frames(str(CAPTURES / f"{name}.trkcap")).frames)
    pcap = _by_stream(read_frames(str(CAPTURES / f"{name}.pcap")).frames)
    assert set(native) == set(pcap)
    for key in native:
        assert native[key] == pcap[key], key


def test_raw_flag_round_trips_and_raw_records_may_be_short():
    rec = CaptureRecord(1, 2, "a:1", "b:2", Direction.RECEIVED, b"GE", Role.SERVER, FLAG_RAW)
    data = encode_record(rec)
    back, end = decode_record(data)
    assert back == rec and end == len(data) and back.raw


def test_golden_frames_of_the_corpus_are_current_and_conform(tmp_path):
    from trocket.conformance.corpus_golden import DEFAULT_GOLDEN, main as extract
    from trocket.conformance.golden import check_dir

    assert extract([str(CAPTURES), str(tmp_path)]) == 0
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(DEFAULT_GOLDEN) for p in DEFAULT_GOLDEN.rglob("*") if p.is_file())
    assert made == committed
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (DEFAULT_GOLDEN / rel).read_bytes(), rel
    results = list(check_dir(DEFAULT_GOLDEN))
    assert len(results) >= 30 and all(r.ok for r in results), [r.problems for r in results if not r.ok]
    assert any(r.entry.fields.get("reencodes") is False for r in results)  # the C++ client's JSON
