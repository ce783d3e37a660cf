"""``trocket replay`` as a command: the table, the exit status, and bad input (a target
that is down, a file that is no capture, a capture cut short) without tracebacks."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from trocket.cli import main
from trocket.conformance.replay import load_session
from trocket.conformance.sources import read_frames

from ..waiting import listening, wait_until_sync
from .conftest import CAPTURES, NAMESRV_CODES, free_port

CPP = CAPTURES / "cpp-produce-pull.trkcap"


def _targets(path, broker: str, namesrv: str) -> list[str]:
    session = load_session(read_frames(str(path)).frames)
    targets = set()
    for conn, exchanges in session.connections.items():
        ns = any(e.request.code in NAMESRV_CODES for e in exchanges)
        targets.add(f"{session.servers[conn]}={namesrv if ns else broker}")
    return [x for t in sorted(targets) for x in ("--target", t)]


@pytest.fixture
def broker(tmp_path):
    port, ns = free_port(), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "trocket", "broker", "--listen", f"127.0.0.1:{port}",
                             "--namesrv-listen", f"127.0.0.1:{ns}", "--store", str(tmp_path / "store"), "--segment-size", "32m",
                             "--log-level", "WARNING"], stderr=subprocess.PIPE, text=True)

    def started() -> bool:
        assert proc.poll() is None, "the broker exited"
        return listening(port)

    wait_until_sync(started, 30, interval=0.05, what="the broker listens")
    yield f"127.0.0.1:{port}", f"127.0.0.1:{ns}"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)


def test_replay_prints_the_table_and_exits_0_when_everything_matches(broker, capsys):
    rc = main(["replay", str(CPP), *_targets(CPP, *broker)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "SEND_MESSAGE" in out and "PULL_MESSAGE" in out and "OK: 0 differing, 0 unanswered" in out


def test_replay_of_a_pcap_with_speed_and_a_rewrite(broker, capsys):
    pcap = CAPTURES / "js-produce-consume.pcap"
    rc = main(["replay", str(pcap), *_targets(pcap, *broker), "--speed", "20",
               "--rewrite", "topic=CapJs:CapJsAgain"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "SEND_MESSAGE_V2" in out and "(speed 20) with rewrites" in out


def test_a_target_that_is_down_fails_at_once_with_the_target_hint(capsys):
    t0 = time.monotonic()
    rc = main(["replay", str(CPP), "--target", "127.0.0.1:1", "--timeout", "1"])
    cap = capsys.readouterr()
    assert rc == 1 and time.monotonic() - t0 < 5
    assert "target 127.0.0.1:1 (for the broker the capture talked to at 127.0.0.1:44323): cannot connect" in cap.err
    assert "(for the name server the capture talked to at 127.0.0.1:54999)" in cap.err
    assert "--target 127.0.0.1:44323=HOST:PORT --target 127.0.0.1:54999=HOST:PORT" in cap.err
    assert "replaying" not in cap.out and "Traceback" not in cap.err


def test_a_target_of_the_wrong_kind_fails_at_once(broker, capsys):
    """Every captured connection sent to the broker: the name server's questions would
    each wait out their timeout; the check finds it in one request."""
    rc = main(["replay", str(CPP), "--target", broker[0]])
    cap = capsys.readouterr()
    assert rc == 1 and "replaying" not in cap.out
    assert f"target {broker[0]} (for the name server the capture talked to at 127.0.0.1:54999): does not answer " \
           "GET_BROKER_CLUSTER_INFO" in cap.err and "not a name server" in cap.err, cap.err


def test_differences_are_tabled_by_code_and_field(broker, capsys):
    """A second replay into the same broker finds the first one's messages: its
    differences by code and field, each line clipped (no whole message list)."""
    assert main(["replay", str(CPP), *_targets(CPP, *broker)]) == 0
    capsys.readouterr()
    rc = main(["replay", str(CPP), *_targets(CPP, *broker), "--show", "50"])
    out = capsys.readouterr().out
    assert rc == 1
    header = next(line for line in out.splitlines() if line.split()[:3] == ["code", "name", "field"])
    assert header.split() == ["code", "name", "field", "answers", "example"]
    rows = out.split(header, 1)[1].strip().split("\n\n")[0].splitlines()
    assert any(" PULL_MESSAGE " in row for row in rows), out
    assert all(len(line) <= 200 for line in out.splitlines()), max(out.splitlines(), key=len)


def test_a_file_that_is_no_capture_and_a_cut_capture(tmp_path, capsys):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello, this is not a capture")
    assert main(["replay", str(junk), "--target", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert "unknown capture file type" in err and "Traceback" not in err



def test_a_cut_capture_replays_what_was_read(broker, tmp_path, capsys):
    cut = tmp_path / "cut.trkcap"
    data = CPP.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    rc = main(["replay", str(cut), *_targets(CPP, *broker), "--timeout", "1"])
    cap = capsys.readouterr()
    assert rc == 1 and "is incomplete" in cap.err and "replaying" in cap.out


def test_missing_target_for_a_captured_server_is_a_usage_error(capsys):
    session = load_session(read_frames(str(CPP)).frames)
    one = sorted(set(session.servers.values()))[0]
    assert main(["replay", str(CPP), "--target", f"{one}=127.0.0.1:1"]) == 2
    assert "no --target for server(s)" in capsys.readouterr().err


def test_a_rotated_tap_replays_as_one_recording(broker, tmp_path, capsys):
    """The corpus capture cut into FILE, FILE.1, FILE.2 (as --tap-rotate-mb writes them):
    connections that span the files stay whole."""
    from trocket.codecs.capture import encode_record, iter_records
    from trocket.remoting.tap import rotated_paths

    with open(CPP, "rb") as f:
        records = list(iter_records(f))
    base = tmp_path / "rot.trkcap"
    header = CPP.read_bytes()[:16]
    thirds = [records[: len(records) // 3], records[len(records) // 3 : 2 * len(records) // 3],
              records[2 * len(records) // 3 :]]
    for i, part in enumerate(thirds):
        path = base if i == 0 else tmp_path / f"rot.trkcap.{i}"
        path.write_bytes(header + b"".join(encode_record(r) for r in part))
    files = rotated_paths(base)
    assert len(files) == 3
    rc = main(["replay", *files, *_targets(CPP, *broker)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "replaying 23 requests on 4 connections" in out


def test_conn_selects_connections(broker, capsys):
    session = load_session(read_frames(str(CPP)).frames)
    sends = next(c for c, ex in session.connections.items() if any(e.request.code == 10 for e in ex))
    rc = main(["replay", str(CPP), *_targets(CPP, *broker), "--conn", str(sends)])
    out = capsys.readouterr().out
    assert rc == 0, out
    n = len(session.connections[sends])
    assert f"replaying {n} requests on 1 connections" in out and "PULL_MESSAGE" not in out


def test_a_pcap_of_traffic_that_is_not_rocketmq(tmp_path, capsys):
    from trocket.codecs.pcap_write import PcapWriter, TcpFlow

    w = PcapWriter()
    flow = TcpFlow(w, "10.0.0.1:40000", "10.0.0.2:80")
    records = flow.handshake(0) + flow.send(1000, "client", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    records += flow.send(2000, "server", b"HTTP/1.1 200 OK\r\n\r\n") + flow.close(3000)
    path = tmp_path / "http.pcap"
    path.write_bytes(w.header() + b"".join(records))
    rc = main(["replay", str(path), "--target", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert "is incomplete" in err and "no client requests in the capture" in err
