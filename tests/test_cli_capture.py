"""``trocket capture show`` and ``trocket capture stats`` on crafted captures of every format,
with bad input: missing, unknown, truncated, torn, foreign."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trocket.cli import main
from trocket.codecs.capture import FILE_HEADER, CaptureRecord, Direction, Role, encode_record
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.pcap_write import PcapWriter, TcpFlow
from trocket.codecs.serialize import encode_command

CLIENT, SERVER = "10.0.0.1:40000", "10.0.0.2:10911"
T0 = 1_700_000_000_000_000_000


def frames():
    """(side, frame) of a small session: a V2 send, its answer, a oneway, an unanswered pull."""
    send = RemotingCommand.request(310, ext_fields={"a": "PG", "b": "TopicA", "e": "2"}, opaque=7, body=b"hello",
                                   serialize_type=SerializeType.ROCKETMQ)
    ok = RemotingCommand.response(0, opaque=7, ext_fields={"msgId": "ABC", "queueOffset": "42"}, serialize_type=SerializeType.ROCKETMQ)
    hb = RemotingCommand.request(34, opaque=8, body=b"{}", oneway=True)
    pull = RemotingCommand.request(11, ext_fields={"consumerGroup": "CG", "topic": "TopicA", "queueId": "1"}, opaque=9)
    busy = RemotingCommand.request(105, ext_fields={"topic": "T2"}, opaque=10)
    busy_answer = RemotingCommand.response(17, "No topic route info in name server for the topic: T2", opaque=10)
    return [("client", send), ("server", ok), ("client", hb), ("client", pull), ("client", busy), ("server", busy_answer)]


def write_pcap(path: Path, *, drop: int | None = None) -> list[bytes]:
    w = PcapWriter(nanos=True)
    f = TcpFlow(w, CLIENT, SERVER, mss=30)
    recs = f.handshake(T0)
    for i, (side, cmd) in enumerate(frames()):
        recs += f.send(T0 + (i + 1) * 1_000_000, side, encode_command(cmd))
    if drop is not None:
        del recs[drop]
    path.write_bytes(w.header() + b"".join(recs))
    return recs


def write_native(path: Path, *, cut: int = 0) -> None:
    data = FILE_HEADER
    for i, (side, cmd) in enumerate(frames()):
        d = Direction.RECEIVED if side == "client" else Direction.SENT
        data += encode_record(CaptureRecord(T0 + (i + 1) * 1_000_000, 5, SERVER, CLIENT, d, encode_command(cmd), Role.SERVER))
    path.write_bytes(data[: len(data) - cut])


def run(capsys, *argv):
    code = main(["capture", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(params=["pcap", "native"])
def capture_file(request, tmp_path):
    path = tmp_path / f"c.{request.param}"
    (write_pcap if request.param == "pcap" else write_native)(path)
    return path, (1 if request.param == "pcap" else 5)


def test_show_one_frame_a_line(capsys, capture_file):
    path, conn = capture_file
    code, out, err = run(capsys, "show", str(path))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 6
    assert lines[0].split() == ["0.000000", str(conn), CLIENT, "->", SERVER, "request", "SEND_MESSAGE_V2(310)", "#7", "RMQ",
                                "producerGroup=PG", "topic=TopicA", "queueId=2", "body=5"]
    assert f"{SERVER} -> {CLIENT}" in lines[1] and "response SUCCESS(0) to SEND_MESSAGE_V2(310)" in lines[1]
    assert "msgId=ABC" in lines[1] and lines[1].split()[0] == "0.001000"
    assert "oneway   HEART_BEAT(34)" in lines[2]
    assert "PULL_MESSAGE(11)" in lines[3] and "consumerGroup=CG" in lines[3]
    assert 'remark="No topic route info' in lines[5] and "TOPIC_NOT_EXIST(17)" in lines[5]


def test_show_json(capsys, capture_file):
    path, conn = capture_file
    code, out, _ = run(capsys, "show", "--json", str(path))
    docs = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(docs) == 6
    for key in ("ts", "conn", "src", "dst", "kind", "code", "opaque", "serialize", "remark", "ext", "body_len"):
        assert all(key in d for d in docs), key
    assert [d["kind"] for d in docs] == ["request", "response", "oneway", "request", "request", "response"]
    # a V2 send's one-letter keys by their field names
    assert docs[0]["serialize"] == "ROCKETMQ" and docs[0]["ext"]["topic"] == "TopicA" and "b" not in docs[0]["ext"]
    assert docs[0]["ext"]["producerGroup"] == "PG" and docs[0]["ext"]["queueId"] == "2"
    assert docs[0]["conn"] == conn and docs[0]["src"] == CLIENT and docs[0]["dst"] == SERVER
    assert docs[0]["ts"] == pytest.approx((T0 + 1_000_000) / 1e9) and docs[0]["body_len"] == 5
    assert docs[1]["request_code"] == 310 and docs[5]["code"] == 17


def test_show_filters(capsys, capture_file):
    path, conn = capture_file
    _, out, _ = run(capsys, "show", "--json", "--code", "310", str(path))
    assert [(d["kind"], d["code"]) for d in map(json.loads, out.splitlines())] == [("request", 310), ("response", 0)]
    _, out, _ = run(capsys, "show", "--json", "--opaque", "10", str(path))
    assert [d["code"] for d in map(json.loads, out.splitlines())] == [105, 17]
    _, out, _ = run(capsys, "show", "--conn", str(conn + 1), str(path))
    assert out == ""
    _, out, _ = run(capsys, "show", "--conn", str(conn), "--code", "11", str(path))
    assert len(out.splitlines()) == 1
    # a code by its name, in any case
    _, by_name, _ = run(capsys, "show", "--json", "--code", "send_message_v2", str(path))
    _, by_number, _ = run(capsys, "show", "--json", "--code", "310", str(path))
    assert by_name == by_number and by_name


def test_show_a_mistyped_code_name_gets_the_nearest():
    done = subprocess.run([str(Path(sys.executable).with_name("trocket")), "capture", "show", "--code", "SEND_MESAGE_V2", "x"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("usage: trocket capture show ")
    assert done.stderr.strip().endswith("argument --code: 'SEND_MESAGE_V2' is no request code (did you mean "
                                        "SEND_MESSAGE_V2 or SEND_MESSAGE or SEND_REPLY_MESSAGE_V2?)"), done.stderr


def test_stats(capsys, capture_file):
    path, conn = capture_file
    code, out, _ = run(capsys, "stats", "--json", str(path))
    doc = json.loads(out)
    assert code == 0 and doc["complete"]
    assert (doc["frames"], doc["requests"], doc["oneway_requests"], doc["responses"], doc["connections"]) == (6, 3, 1, 2, 1)
    assert doc["requests_by_code"] == {"11": 1, "105": 1, "310": 1}
    assert doc["oneway_requests_by_code"] == {"34": 1}
    assert doc["unanswered_by_code"] == {"11": 1}
    assert doc["pairs"] == [{"request_code": 105, "response_code": 17, "count": 1}, {"request_code": 310, "response_code": 0, "count": 1}]
    assert doc["per_connection"][0]["client"] == CLIENT and doc["per_connection"][0]["server"] == SERVER
    code, out, _ = run(capsys, "stats", str(path))
    assert code == 0
    assert "PULL_MESSAGE (11)" in out and "SEND_MESSAGE_V2 -> SUCCESS" in out
    assert f"{CLIENT} -> {SERVER}" in out


def test_several_files(capsys, tmp_path):
    a, b = tmp_path / "a.pcap", tmp_path / "b.trkcap"
    write_pcap(a)
    write_native(b)
    code, out, _ = run(capsys, "show", str(a), str(b))
    assert code == 0 and len(out.splitlines()) == 12
    assert out.splitlines()[0].split()[1] == "1:1" and out.splitlines()[6].split()[1] == "2:5"
    code, out, _ = run(capsys, "stats", "--json", str(a), str(b))
    doc = json.loads(out)
    assert doc["connections"] == 2 and doc["frames"] == 12 and doc["unanswered_by_code"] == {"11": 2}


def test_torn_pcap_partial_results_and_non_zero_exit(capsys, tmp_path):
    path = tmp_path / "torn.pcap"
    write_pcap(path, drop=5)  # a segment of the first frame (the V2 send)
    code, out, err = run(capsys, "show", str(path))
    assert code == 1
    assert len(out.splitlines()) == 5
    assert "problem: conn 1" in err and "bytes missing at stream offset" in err and "Traceback" not in err
    code, out, _ = run(capsys, "stats", str(path))
    assert code == 1 and "INCOMPLETE" in out and "gap 1" in out


def test_truncated_native(capsys, tmp_path):
    path = tmp_path / "cut.trkcap"
    write_native(path, cut=9)
    code, out, err = run(capsys, "show", str(path))
    assert code == 1 and len(out.splitlines()) == 5
    assert "incomplete record" in err


def test_missing_and_unknown_files(capsys, tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"PK\x03\x04 not a capture")
    good = tmp_path / "good.pcap"
    write_pcap(good)
    code, out, err = run(capsys, "show", str(tmp_path / "nope.pcap"), str(junk), str(good))
    assert code == 1
    assert "nope.pcap: No such file or directory" in err
    assert "junk.bin: unknown capture file type" in err
    assert len(out.splitlines()) == 6  # the good file is still shown
    code, out, err = run(capsys, "stats", str(tmp_path / "empty.pcap"))
    assert code == 1 and "No such file" in err


def test_non_rocketmq_traffic(capsys, tmp_path):
    w = PcapWriter()
    f = TcpFlow(w, CLIENT, "10.0.0.2:443")
    recs = f.handshake(T0) + f.send(T0 + 1, "client", b"\x16\x03\x01\x02\x00" + b"\x01" * 512)
    path = tmp_path / "tls.pcap"
    path.write_bytes(w.header() + b"".join(recs))
    code, out, err = run(capsys, "show", str(path))
    assert code == 1 and out == ""
    assert "TLS" in err and "not RocketMQ" in err


def test_console_script_bad_file_no_traceback(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x00" * 100)
    exe = Path(sys.executable).parent / "trocket"
    r = subprocess.run([str(exe), "capture", "stats", str(junk)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "unknown capture file type" in r.stderr and "Traceback" not in r.stderr


def test_progress_line_on_a_terminal(capsys, tmp_path, monkeypatch):
    import trocket.cli_capture as cc

    path = tmp_path / "c.pcap"
    write_pcap(path)
    monkeypatch.setattr(cc, "_PROGRESS_MIN_BYTES", 0)
    monkeypatch.setattr(cc, "_PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr(cc, "_PROGRESS_RECORDS", 1)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    code, out, err = run(capsys, "stats", str(path))
    assert code == 0 and "c.pcap:" in err and "% of" in err and err.endswith("\r\x1b[K")
    assert "\r" not in out


def test_text_a_terminal_cannot_show_stays_escaped(tmp_path):
    """A JSON header may escape a lone surrogate; a topic may be any Unicode: show prints
    them on any stdout (here ASCII) without a traceback."""
    header = b'{"code":105,"extFields":{"topic":"\\u4e2d\\udfff"},"flag":0,"language":"JAVA","opaque":1,"remark":"r\\udfff","serializeTypeCurrentRPC":"JSON","version":0}'
    frame = len(header).to_bytes(4, "big")
    frame = (4 + len(header)).to_bytes(4, "big") + frame + header
    w = PcapWriter()
    f = TcpFlow(w, CLIENT, SERVER)
    path = tmp_path / "u.pcap"
    path.write_bytes(w.header() + b"".join(f.handshake(T0) + f.send(T0, "client", frame)))
    exe = Path(sys.executable).parent / "trocket"
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}
    for extra in ([], ["--json"]):
        r = subprocess.run([str(exe), "capture", "show", *extra, str(path)], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "\\u4e2d" in r.stdout and "\\udfff" in r.stdout


def test_stats_latency_by_code(capsys, capture_file):
    path, _ = capture_file
    code, out, _ = run(capsys, "stats", "--json", str(path))
    doc = json.loads(out)
    # SEND_MESSAGE_V2 (frame 1 at +1 ms) answered at +2 ms; 105 (frame 5) answered at +6 ms
    assert doc["latency_ms_by_code"] == {"105": {"p50": 1.0, "p95": 1.0, "p99": 1.0, "max": 1.0},
                                         "310": {"p50": 1.0, "p95": 1.0, "p99": 1.0, "max": 1.0}}
    _, out, _ = run(capsys, "show", "--json", "--code", "310", str(path))
    assert [json.loads(line).get("latency_ms") for line in out.splitlines()] == [None, 1.0]
    _, out, _ = run(capsys, "stats", str(path))
    assert "latency (ms) by request code" in out


def test_percentiles_nearest_rank():
    from array import array

    from trocket.conformance.capture_stats import _percentiles

    q = _percentiles(array("q", [i * 1_000_000 for i in range(1, 101)]))
    assert q == {"p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0}
    assert _percentiles(array("q", [3_000_000])) == {"p50": 3.0, "p95": 3.0, "p99": 3.0, "max": 3.0}


def write_native_with_raw(path: Path) -> None:
    """A native capture as a capture proxy writes it: a frame, then bytes that did not
    parse as frames (RAW flag), then a frame again."""
    from trocket.codecs.capture import FLAG_RAW

    ok = encode_command(RemotingCommand.request(105, ext_fields={"topic": "T"}, opaque=1))
    answer = encode_command(RemotingCommand.response(0, opaque=1))
    data = FILE_HEADER
    data += encode_record(CaptureRecord(T0, 5, SERVER, CLIENT, Direction.RECEIVED, ok, Role.SERVER))
    data += encode_record(CaptureRecord(T0 + 1_000_000, 5, SERVER, CLIENT, Direction.RECEIVED, b"GET / HTTP/1.1\r\n", Role.SERVER, FLAG_RAW))
    data += encode_record(CaptureRecord(T0 + 2_000_000, 5, SERVER, CLIENT, Direction.SENT, answer, Role.SERVER))
    path.write_bytes(data)


def test_raw_records_are_shown_as_raw_bytes_and_counted_apart(capsys, tmp_path):
    path = tmp_path / "raw.trkcap"
    write_native_with_raw(path)
    code, out, err = run(capsys, "show", str(path))
    lines = out.splitlines()
    assert code == 0 and err == "" and len(lines) == 3
    assert lines[1].split()[:5] == ["0.001000", "5", CLIENT, "->", SERVER]
    assert "raw bytes (16), not parsed as a frame" in lines[1] and "undecodable" not in out
    assert "response SUCCESS(0) to GET_ROUTEINFO_BY_TOPIC(105)" in lines[2]  # pairing unaffected

    code, out, _ = run(capsys, "show", "--json", str(path))
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["kind"] for d in docs] == ["request", "raw", "response"]
    assert docs[1]["frame_len"] == 16 and docs[1]["code"] is None and "error" not in docs[1]

    code, out, _ = run(capsys, "stats", "--json", str(path))
    doc = json.loads(out)
    assert code == 0
    assert (doc["frames"], doc["raw_records"], doc["raw_bytes"], doc["undecodable"]) == (2, 1, 16, 0)
    assert doc["bytes"] == sum(d["frame_len"] for d in docs if d["kind"] != "raw")
    assert doc["per_connection"][0]["frames"] == 2 and doc["per_connection"][0]["raw_bytes"] == 16
    code, out, _ = run(capsys, "stats", str(path))
    assert "frames: 2 " in out and "raw (not frames): 1 records, 16 bytes" in out


def test_stats_without_raw_records_print_no_raw_line(capsys, tmp_path):
    path = tmp_path / "n.trkcap"
    write_native(path)
    code, out, _ = run(capsys, "stats", str(path))
    assert code == 0 and "raw (not frames)" not in out
    code, out, _ = run(capsys, "stats", "--json", str(path))
    assert json.loads(out)["raw_records"] == 0
