"""Every captured payload byte fed to the TCP reassembly is accounted for: in a frame, a
retransmitted copy, or lost with a reported problem (``ByteCounts``), whatever the
segments' order, duplication, loss or garbage."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.pcap import PacketReader
from trocket.codecs.pcap_decode import TcpSegment, decode_packet
from trocket.codecs.pcap_write import PcapWriter, TcpFlow
from trocket.codecs.tcp_connection import ConnectionTracker, connection_key

from .test_tcp_connection import CLIENT, SERVER, T0, request, response


def _segments(mss: int, with_handshake: bool) -> list[TcpSegment]:
    import io

    w = PcapWriter(nanos=True)
    f = TcpFlow(w, CLIENT, SERVER, mss=mss)
    recs = f.handshake(T0) if with_handshake else []
    for i in range(6):
        recs += f.send(T0 + 10 * i, "client", request(i, b"q" * (30 + 40 * i))) + f.send(T0 + 10 * i + 5, "server", response(i))
    recs += f.send(T0 + 90, "client", b"\x00\x00\x01\x00\x00\x00\x00\x10" + b"{" * 40)  # a frame cut short
    segs = [decode_packet(p) for p in PacketReader(io.BytesIO(w.header() + b"".join(recs)))]
    return [s for s in segs if isinstance(s, TcpSegment)]


@settings(max_examples=300, deadline=None)
@given(st.integers(20, 200), st.booleans(), st.integers(0, 2**32 - 1), st.data())
def test_payload_bytes_are_all_accounted_for(mss, handshake, seed, data):
    segs = _segments(mss, handshake)
    rng = random.Random(seed)
    mutated = []
    for seg in segs:
        roll = rng.random()
        if roll < 0.1:
            continue  # lost
        mutated.append(seg)
        if roll < 0.25:
            mutated.append(seg)  # retransmitted
    for _ in range(data.draw(st.integers(0, 4))):  # some reordering
        if len(mutated) > 2:
            i = rng.randrange(len(mutated) - 1)
            mutated[i], mutated[i + 1] = mutated[i + 1], mutated[i]
    if data.draw(st.booleans()) and mutated:  # garbage in one segment
        i = rng.randrange(len(mutated))
        s = mutated[i]
        if s.payload:
            garbled = bytes(b ^ 0x5A for b in s.payload)
            mutated[i] = TcpSegment(s.timestamp_ns, s.src, s.dst, s.seq, s.ack, s.flags, garbled, s.length, s.file_offset)
    tracker = ConnectionTracker()
    for seg in mutated:
        tracker.feed(seg)
    tracker.finish()
    counts = tracker.byte_counts()
    assert counts.payload == sum(len(s.payload) for s in mutated)
    assert counts.buffered == 0
    assert counts.unaccounted == 0, counts
    assert counts.frames + counts.duplicates + counts.problems == counts.payload


def test_a_clean_session_is_all_frames_and_ending_one_lets_the_next_piece_start_fresh():
    segs = _segments(64, True)
    body = [s for s in segs if not s.payload.startswith(b"\x00\x00\x01\x00")]  # without the cut frame
    tracker = ConnectionTracker()
    half = len(body) // 2
    for seg in body[:half]:
        tracker.feed(seg)
    key = connection_key(CLIENT, SERVER)
    conn = tracker.open_connection(key)
    assert conn is not None and conn.continues(body[half])
    # a segment far from where the bytes stand does not carry them on
    far = body[half]
    far = TcpSegment(far.timestamp_ns, far.src, far.dst, (far.seq + (1 << 24)) % (1 << 32), far.ack, far.flags, far.payload, far.length)
    assert not conn.continues(far)
    for seg in body[half:]:
        tracker.feed(seg)
    tracker.finish()
    counts = tracker.byte_counts()
    assert counts.frames == counts.payload - counts.duplicates and counts.problems == 0
    tracker.end(key)
    assert tracker.open_connection(key) is None
