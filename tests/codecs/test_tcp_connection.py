"""TCP connections -> frames (codecs/tcp_connection.py, tcp_frames.py): crafted packet
sequences with reordering, duplicates, gaps, mid-stream starts, foreign traffic, port reuse."""

from __future__ import annotations

import io
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.capture import CaptureProblem, CaptureRecord, Direction, Role
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.pcap import PacketReader
from trocket.codecs.pcap_decode import ACK, PSH, RST, decode_packet
from trocket.codecs.pcap_write import PcapWriter, TcpFlow
from trocket.codecs.serialize import encode_command
from trocket.codecs.tcp_connection import ConnectionTracker, connection_key
from trocket.codecs.tcp_frames import FRAME, PROBLEM, FrameSplitter, plausible_frame_at

CLIENT, SERVER = "10.0.0.1:40000", "10.0.0.2:10911"
T0 = 1_700_000_000_000_000_000


def request(opaque: int, body: bytes = b"", serialize: int = 0, code: int = 310) -> bytes:
    ext = {"a": "PG", "b": "TopicA", "e": str(opaque % 4)} if code == 310 else {"topic": "TopicA"}
    return encode_command(RemotingCommand.request(code, ext_fields=ext, opaque=opaque, body=body, serialize_type=SerializeType(serialize)))


def response(opaque: int, serialize: int = 0) -> bytes:
    return encode_command(RemotingCommand.response(0, opaque=opaque, ext_fields={"msgId": f"ID{opaque}"}, serialize_type=SerializeType(serialize)))


def session(n: int = 6, *, mss: int = 100, isn: int = 1000, body: int = 250, flow: TcpFlow | None = None, handshake: bool = True, close: bool = True):
    """(pcap packet records, the frames each side sent in order)."""
    w = PcapWriter(nanos=True)
    f = flow or TcpFlow(w, CLIENT, SERVER, client_isn=isn, server_isn=isn * 7, mss=mss)
    recs = f.handshake(T0) if handshake else []
    sent = {"client": [], "server": []}
    for i in range(n):
        req, resp = request(i, bytes([i]) * (body + i), i % 2), response(i, i % 2)
        sent["client"].append(req)
        sent["server"].append(resp)
        recs += f.send(T0 + (i + 1) * 1000, "client", req)
        recs += f.send(T0 + (i + 1) * 1000 + 500, "server", resp)
    if close:
        recs += f.close(T0 + 10**6)
    return recs, sent


def segments(recs: list[bytes]):
    w = PcapWriter(nanos=True)
    return [decode_packet(p) for p in PacketReader(io.BytesIO(w.header() + b"".join(recs)))]


def track(recs: list[bytes], tracker: ConnectionTracker | None = None):
    t = tracker or ConnectionTracker()
    items = []
    for s in segments(recs):
        items += t.feed(s)
    items += t.finish()
    records = [i for i in items if isinstance(i, CaptureRecord)]
    problems = [i for i in items if isinstance(i, CaptureProblem)]
    return records, problems


def sent_by(records, direction):
    return [r.frame for r in records if r.direction == direction]


def test_clean_session_server_side_convention():
    recs, sent = session()
    records, problems = track(recs)
    assert problems == []
    assert sent_by(records, Direction.RECEIVED) == sent["client"]
    assert sent_by(records, Direction.SENT) == sent["server"]
    assert {(r.connection_id, r.local_address, r.remote_address, r.role) for r in records} == {(1, SERVER, CLIENT, Role.SERVER)}
    # a frame's time is the time of the segment that completed it
    assert records[0].timestamp_ns == T0 + 1000 and records[1].timestamp_ns == T0 + 1500


def test_reordered_and_duplicated_packets():
    recs, sent = session(8, mss=40)
    rng = random.Random(7)
    shuffled = recs[:3]
    body = recs[3:]
    for i in range(0, len(body), 5):  # reorder inside windows of five packets
        window = body[i : i + 5]
        rng.shuffle(window)
        shuffled += window
    shuffled += [recs[5], recs[9], recs[3]]  # late duplicates
    records, problems = track(shuffled)
    assert problems == []
    assert sent_by(records, Direction.RECEIVED) == sent["client"]
    assert sent_by(records, Direction.SENT) == sent["server"]


def test_gap_loses_one_frame_and_the_rest_is_resynchronised():
    recs, sent = session(6, mss=100, body=250)
    # the client's third request spans packets; drop one in its middle
    req2 = sent["client"][2]
    target = None
    for i, s in enumerate(segments(recs)):
        if s.src == CLIENT and s.payload and req2[150:160] in s.payload:
            target = i
    assert target is not None
    records, problems = track(recs[:target] + recs[target + 1 :])
    assert sent_by(records, Direction.RECEIVED) == sent["client"][:2] + sent["client"][3:]
    assert sent_by(records, Direction.SENT) == sent["server"]
    gaps = [p for p in problems if p.kind == "gap"]
    assert len(gaps) == 1
    g = gaps[0]
    assert g.connection_id == 1 and g.direction == Direction.RECEIVED
    assert "missing" in g.what and "the frame at offset" in g.what
    assert "conn 1 (10.0.0.1:40000 -> 10.0.0.2:10911)" in str(g)


def test_gap_offset_is_exact():
    recs, sent = session(3, mss=100, body=250)
    segs = segments(recs)
    client_data = [(i, s) for i, s in enumerate(segs) if s.src == CLIENT and s.payload]
    drop_index, drop_seg = client_data[4]
    offset = sum(len(s.payload) for _, s in client_data[:4])
    records, problems = track(recs[:drop_index] + recs[drop_index + 1 :])
    [gap] = [p for p in problems if p.kind == "gap"]
    assert gap.stream_offset == offset and f"{len(drop_seg.payload)} bytes missing at stream offset {offset}" in gap.what


def test_capture_starting_mid_stream_resynchronises():
    recs, sent = session(5, mss=60, body=100)
    segs = segments(recs)
    # start the capture at the client's second data segment (inside its first request)
    first = [i for i, s in enumerate(segs) if s.src == CLIENT and s.payload][1]
    records, problems = track(recs[first:])
    assert sent_by(records, Direction.RECEIVED) == sent["client"][1:]
    assert sent_by(records, Direction.SENT)[-4:] == sent["server"][1:]
    assert records[0].local_address == SERVER  # decided by the first frame: a request
    skipped = [p for p in problems if p.kind == "resync"]
    assert skipped and "bytes skipped" in skipped[0].what


def test_mid_stream_first_frame_a_response_makes_its_sender_the_server():
    w = PcapWriter()
    f = TcpFlow(w, "10.0.0.1:9000", "10.0.0.2:50000")  # ports say nothing useful here
    recs = f.send(T0, "server", response(1)) + f.send(T0 + 10, "client", request(2))
    records, problems = track(recs)
    assert problems == []
    assert records[0].local_address == "10.0.0.2:50000" and records[0].direction == Direction.SENT
    assert records[1].direction == Direction.RECEIVED
    assert records[0].remote_address == "10.0.0.1:9000"


def test_non_rocketmq_streams_are_reported_not_framed():
    w = PcapWriter()
    f = TcpFlow(w, CLIENT, "10.0.0.2:80")
    recs = f.handshake(T0) + f.send(T0 + 1, "client", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") + f.send(T0 + 2, "server", b"HTTP/1.1 200 OK\r\n\r\nhello")
    records, problems = track(recs)
    assert records == []
    assert {p.kind for p in problems} == {"not-rocketmq"}
    g = PcapWriter()
    f = TcpFlow(g, CLIENT, SERVER, mss=1400)
    noise = random.Random(1).randbytes(200_000).replace(b"\x00", b"\x07")
    records, problems = track(f.handshake(T0) + f.send(T0 + 1, "client", noise))
    assert records == [] and [p.kind for p in problems] == ["not-rocketmq"]


def test_garbage_between_frames_is_skipped_and_reported():
    w = PcapWriter()
    f = TcpFlow(w, CLIENT, SERVER)
    a, b = request(1), request(2)
    recs = f.handshake(T0) + f.send(T0 + 1, "client", a + b"\xff\xfe garbage \x01" + b)
    records, problems = track(recs)
    assert [r.frame for r in records] == [a, b]
    assert [p.kind for p in problems] == ["bad-frame", "resync"]
    assert problems[1].stream_offset == len(a) and "12 bytes skipped" in problems[1].what


def test_snaplen_truncated_packets():
    recs, sent = session(4, mss=200, body=300)
    w = PcapWriter(nanos=True, snaplen=14 + 40 + 60)
    cut = []
    for s in segments(recs):
        from trocket.codecs.pcap_write import build_tcp_packet

        cut.append(w.record(s.timestamp_ns, build_tcp_packet(s.src, s.dst, s.seq, s.ack, s.flags, s.payload)))
    records, problems = track(cut)
    kinds = {p.kind for p in problems}
    assert "truncated-packet" in kinds and "gap" in kinds
    assert len(records) < len(sent["client"]) + len(sent["server"])
    for r in records:  # whatever came through is a whole, true frame
        assert r.frame in sent["client"] + sent["server"]


def test_stream_ending_inside_a_frame():
    recs, sent = session(2, mss=50, body=200, close=False)
    records, problems = track(recs[:-2])
    assert [p.kind for p in problems] == ["partial-frame"]
    assert "ends inside a frame" in problems[0].what


def test_reset_finishes_the_connection():
    w = PcapWriter()
    f = TcpFlow(w, CLIENT, SERVER, mss=50)
    req = request(1, b"x" * 100)
    recs = f.handshake(T0) + f.send(T0 + 1, "client", req)[:2]
    recs.append(w.tcp(T0 + 2, SERVER, CLIENT, f.seq["server"], 0, RST | ACK))
    records, problems = track(recs)
    assert records == [] and [p.kind for p in problems] == ["partial-frame"]


def test_wraparound_inside_frames():
    recs, sent = session(6, mss=70, isn=2**32 - 200)
    records, problems = track(recs)
    assert problems == []
    assert sent_by(records, Direction.RECEIVED) == sent["client"]


def test_ipv6_connection():
    w = PcapWriter()
    f = TcpFlow(w, "[fd00::1]:40000", "[fd00::2]:10911")
    a, b = request(1), response(1)
    records, problems = track(f.handshake(T0) + f.send(T0, "client", a) + f.send(T0, "server", b))
    assert problems == [] and [(r.local_address, r.remote_address) for r in records] == [("[fd00::2]:10911", "[fd00::1]:40000")] * 2


def test_connections_numbered_in_first_seen_order_and_port_reuse():
    w = PcapWriter()
    f1 = TcpFlow(w, "10.0.0.1:5000", SERVER)
    f2 = TcpFlow(w, "10.0.0.3:6000", SERVER)
    recs = f1.handshake(T0) + f2.handshake(T0 + 1)
    recs += f2.send(T0 + 2, "client", request(1)) + f1.send(T0 + 3, "client", request(2))
    recs += f1.close(T0 + 4)
    f3 = TcpFlow(w, "10.0.0.1:5000", SERVER, client_isn=99999)  # the same port pair again
    recs += f3.handshake(T0 + 5) + f3.send(T0 + 6, "client", request(3))
    records, problems = track(recs)
    assert problems == []
    assert [(r.connection_id, r.remote_address) for r in records] == [(2, "10.0.0.3:6000"), (1, "10.0.0.1:5000"), (3, "10.0.0.1:5000")]


def test_id_factory_for_partial_readers():
    recs, _ = session(2)
    ids = []

    def factory(key, incarnation):
        ids.append((key, incarnation))
        return 4242

    records, _ = track(recs, ConnectionTracker(id_factory=factory))
    assert {r.connection_id for r in records} == {4242}
    assert ids == [(connection_key(CLIENT, SERVER), 0)]


def test_plausible_frame_header():
    f = request(5)
    assert plausible_frame_at(f, 0) is True
    assert plausible_frame_at(f[:10], 0) is None
    assert plausible_frame_at(b"\x00\x00\x00\x10\x02\x00\x00\x04" + b"x" * 12, 0) is False  # type 2
    assert plausible_frame_at(b"\x00\x00\x00\x10\x00\x00\x00\x0c" + b"{not json!!}", 0) is False
    assert plausible_frame_at(b"\x00\x00\x00\x10\x00\x00\x00\x20" + b"{" * 12, 0) is False  # header > frame


def test_splitter_unsynced_start_finds_the_first_frame():
    a, b = request(1), request(2)
    sp = FrameSplitter(synced=False)
    out = sp.data(0, a[17:] + b, 0) + sp.finish()
    assert [o[2] for o in out if o[0] == FRAME] == [b]
    assert [(o[1], o[2]) for o in out if o[0] == PROBLEM] == [(0, "resync")]


# -- property: any segmentation and reordering of a session gives its frames -------------


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 200), st.randoms(use_true_random=False), st.integers(0, 3))
def test_any_packetisation_gives_the_frames(isn, mss, rng, dups):
    recs, sent = session(5, mss=mss, isn=isn, body=rng.randint(0, 400))
    head, body, tail = recs[:3], recs[3:-3], recs[-3:]
    window = rng.randint(1, 8)
    out = []
    for i in range(0, len(body), window):
        part = body[i : i + window]
        rng.shuffle(part)
        out += part
    for _ in range(dups):
        out.insert(rng.randint(0, len(out)), rng.choice(body))
    records, problems = track(head + out + tail)
    assert problems == []
    assert sent_by(records, Direction.RECEIVED) == sent["client"]
    assert sent_by(records, Direction.SENT) == sent["server"]
