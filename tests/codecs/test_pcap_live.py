"""Real pcaps: tcpdump on loopback around a ``trocket broker`` subprocess, read back with the
one capture reader; counts checked against what was sent. The traffic comes from raw
sockets (JSON and ROCKETMQ frames, one frame spanning many segments) and from the real C++
client (PyPI ``rocketmq``). Skips, saying why, where tcpdump is missing or cannot capture
(it needs root or CAP_NET_RAW); the C++ test also where the client's wheel cannot load.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from trocket.codecs.capture import CaptureRecord, Direction, Role
from trocket.codecs.capture_files import CaptureFile
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.frame import FrameDecoder
from trocket.codecs.pcap import LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, PacketReader
from trocket.codecs.serialize import decode_command, encode_command

ACCEPTANCE = Path(__file__).resolve().parents[1] / "acceptance"
if str(ACCEPTANCE) not in sys.path:
    sys.path.insert(0, str(ACCEPTANCE))
if str(ACCEPTANCE / "scripts") not in sys.path:
    sys.path.insert(0, str(ACCEPTANCE / "scripts"))

from acc_tools import BrokerProcess, run_client_script  # noqa: E402

pytestmark = pytest.mark.slow

GET_ROUTEINFO_BY_TOPIC = 105


@contextmanager
def tcpdump(path: Path, ports: list[int], iface: str = "lo"):
    """A real tcpdump writing ``path`` while the block runs; yields the lines it printed
    (after the block, its counts of packets captured and dropped)."""
    exe = shutil.which("tcpdump")
    if exe is None:
        pytest.skip("tcpdump is not installed (apt install tcpdump)")
    expr = " or ".join(f"tcp port {p}" for p in ports)
    # -B: a 16 MiB kernel buffer, so a loaded machine does not drop the 300 KB bursts
    proc = subprocess.Popen(
        [exe, "-i", iface, "-B", "16384", "--immediate-mode", "-U", "-n", "-w", str(path), expr],
        stderr=subprocess.PIPE, text=True,
    )
    ready = threading.Event()
    lines: list[str] = []

    def watch():
        for line in proc.stderr:
            lines.append(line)
            if "listening on" in line:
                ready.set()
        ready.set()

    threading.Thread(target=watch, daemon=True).start()
    if not ready.wait(15) or proc.poll() is not None:
        proc.kill()
        proc.wait()
        pytest.skip(f"tcpdump cannot capture on {iface} here: {''.join(lines).strip()[-300:]}")
    try:
        yield lines
    finally:
        # the last packets through the kernel's buffer (immediate mode: no block timeout);
        # tcpdump says nothing per packet written, so there is no event to wait on
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def recv_frame(sock: socket.socket, decoder: FrameDecoder) -> bytes:
    while True:
        frame = decoder.next_frame()
        if frame is not None:
            return frame
        data = sock.recv(1 << 16)
        assert data, "the server closed the connection"
        decoder.feed(data)


def raw_session(addr: tuple[str, int], n: int, big: int = 300_000) -> tuple[str, list[RemotingCommand], list[RemotingCommand]]:
    """``n`` GET_ROUTEINFO_BY_TOPIC requests on one connection, alternating JSON and
    ROCKETMQ headers, the last one with a ``big`` body (300 KB: many segments); returns
    the client's address, the requests and the responses."""
    requests, responses = [], []
    with socket.create_connection(addr, timeout=10) as sock:
        client = "%s:%d" % sock.getsockname()[:2]
        decoder = FrameDecoder()
        for i in range(n):
            body = b"B" * big if i == n - 1 else b""
            req = RemotingCommand.request(GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": f"NoSuchTopic{i}"}, opaque=1000 + i,
                                          body=body, serialize_type=SerializeType(i % 2))
            sock.sendall(encode_command(req))
            requests.append(req)
            responses.append(decode_command(recv_frame(sock, decoder)))
    return client, requests, responses


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(tmp_path / "store", tmp_path / "broker.log")
    yield b
    if b.alive():
        b.stop()


def read_all(path: Path):
    with open(path, "rb") as f:
        capture = CaptureFile(f)
        records = list(capture.records_only())
    return capture, records


@pytest.mark.parametrize("iface", ["lo", "any"])
def test_tcpdump_of_raw_frames(tmp_path, broker, iface):
    pcap = tmp_path / "raw.pcap"
    n = 12
    with tcpdump(pcap, [broker.namesrv_port], iface) as tcpdump_said:
        broker.start()
        # on "any" libpcap's ring slots are sized for a 64 KiB MTU: loopback's larger GSO
        # packets are lost to the capture (the reader reports them as gaps, rightly)
        client, requests, responses = raw_session(("127.0.0.1", broker.namesrv_port), n, 300_000 if iface == "lo" else 30_000)
    capture, records = read_all(pcap)
    assert capture.format == "pcap"
    assert capture.problems == [] and capture.complete, (capture.problems, "".join(tcpdump_said[-4:]))
    with open(pcap, "rb") as f:
        linktypes = {p.linktype for p in PacketReader(f)}
    assert linktypes <= ({LINKTYPE_ETHERNET} if iface == "lo" else {LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2})
    server = f"127.0.0.1:{broker.namesrv_port}"
    mine = [r for r in records if r.remote_address == client]
    assert {(r.local_address, r.role) for r in mine} == {(server, Role.SERVER)}
    sent = [decode_command(r.payload) for r in mine if r.direction == Direction.RECEIVED]
    got = [decode_command(r.payload) for r in mine if r.direction == Direction.SENT]
    assert [(c.code, c.opaque, c.serialize_type, c.ext_fields, len(c.body)) for c in sent] == [
        (c.code, c.opaque, c.serialize_type, c.ext_fields, len(c.body)) for c in requests
    ]
    assert sent[-1].body == requests[-1].body  # on lo: 300 KB across many segments, byte for byte
    assert [(c.code, c.opaque, c.remark) for c in got] == [(c.code, c.opaque, c.remark) for c in responses]
    assert len({r.connection_id for r in mine}) == 1


def test_pcapng_from_tshark_reads_the_same(tmp_path, broker):
    editcap = shutil.which("editcap")
    if editcap is None:
        pytest.skip("editcap (wireshark's tshark / wireshark-common) is not installed")
    pcap = tmp_path / "raw.pcap"
    with tcpdump(pcap, [broker.namesrv_port]):
        broker.start()
        raw_session(("127.0.0.1", broker.namesrv_port), 4)
    ng = tmp_path / "raw.pcapng"
    subprocess.run([editcap, "-F", "pcapng", str(pcap), str(ng)], check=True, capture_output=True)
    a_cap, a = read_all(pcap)
    b_cap, b = read_all(ng)
    assert b_cap.format == "pcapng" and b_cap.complete and a_cap.complete
    assert a == b and len(a) >= 8  # our 4 + 4, and the broker registering itself


def test_cli_reads_a_real_pcap_with_a_missing_segment(tmp_path, broker, capsys):
    """Drop one packet of the big frame from a real capture: the CLI reports the gap,
    shows the rest and exits non-zero."""
    pcap = tmp_path / "raw.pcap"
    with tcpdump(pcap, [broker.namesrv_port]):
        broker.start()
        raw_session(("127.0.0.1", broker.namesrv_port), 6)
    data = pcap.read_bytes()
    with open(pcap, "rb") as f:
        packets = list(PacketReader(f))
    big = max(packets, key=lambda p: len(p.data))
    cut = data[: big.file_offset] + data[big.file_offset + 16 + len(big.data) :]
    torn = tmp_path / "torn.pcap"
    torn.write_bytes(cut)
    from trocket.cli import main

    capsys.readouterr()
    rc = main(["capture", "stats", "--json", str(torn)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["complete"] is False
    assert doc["problems_by_kind"].get("gap") == 1
    # the big sixth request lost a segment: five arrive whole (and the broker registering)
    assert doc["requests_by_code"]["105"] == 5
    assert doc["pairs"] and sum(doc["unanswered_by_code"].values()) == 0


def _cpp_client_loads() -> tuple[bool, str]:
    r = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True, timeout=60)
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]


def test_tcpdump_of_the_cpp_client_producing(tmp_path, broker):
    ok, why = _cpp_client_loads()
    if not ok:
        pytest.skip(f"the rocketmq wheel (C++ client) cannot load: {why}")
    pcap = tmp_path / "cpp.pcap"
    count = 20
    with tcpdump(pcap, [broker.port, broker.namesrv_port]):
        broker.start()
        result = run_client_script("produce.py", ["--namesrv", broker.namesrv, "--mode", "sync", "--count", str(count)],
                                   tmp_path / "client", broker=broker)
    assert result["error_count"] == 0 and len(result["acked"]) == count
    capture, records = read_all(pcap)
    assert capture.problems == [] and capture.complete
    sends, answers = {}, {}
    for r in records:
        cmd = decode_command(r.payload)
        if r.direction == Direction.RECEIVED and cmd.code in (10, 310) and not cmd.is_response:
            ext = cmd.ext_fields or {}
            assert ext.get("topic", ext.get("b")) == result["topic"]
            sends[(r.connection_id, cmd.opaque)] = cmd
        elif r.direction == Direction.SENT and cmd.is_response:
            answers[(r.connection_id, cmd.opaque)] = cmd
    assert len(sends) == count
    replies = [answers[key] for key in sends]
    assert all(c.code == 0 for c in replies)
    # each captured send carries the message id the client reported (UNIQ_KEY), and its
    # captured answer the queue offset the client reported
    captured = set()
    for key, reply in zip(sends, replies):
        ext = sends[key].ext_fields or {}
        props = dict(kv.split("\x01", 1) for kv in ext.get("properties", ext.get("i", "")).split("\x02") if "\x01" in kv)
        captured.add((props["UNIQ_KEY"], int(reply.ext_fields["queueOffset"])))
    assert captured == {(a["msg_id"], a["offset"]) for a in result["acked"].values()}
    assert all(r.local_address == f"127.0.0.1:{broker.port}" for r in records if r.local_address.endswith(f":{broker.port}"))
    assert isinstance(records[0], CaptureRecord)
