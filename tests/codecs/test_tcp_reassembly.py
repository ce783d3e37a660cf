"""One direction's TCP reassembly (codecs/tcp_reassembly.py): order, duplicates, overlaps,
holes, limits, wraparound; hypothesis for any segmentation, reordering and duplication."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.pcap_decode import ACK, FIN, PSH, SYN, TcpSegment
from trocket.codecs.tcp_reassembly import CONFLICT, DATA, GAP, StreamReassembler, seq_diff

MOD = 1 << 32


def seg(seq: int, payload: bytes = b"", flags: int = ACK | PSH, *, length: int | None = None, ts: int = 0) -> TcpSegment:
    return TcpSegment(ts, "1.1.1.1:1", "2.2.2.2:2", seq % MOD, 0, flags, payload, len(payload) if length is None else length)


def run(r: StreamReassembler, segs, *, finish=True):
    events = []
    for s in segs:
        events += r.feed(s)
    if finish:
        events += r.finish()
    return events


def stream_of(events) -> bytes:
    return b"".join(e[2] for e in events if e[0] == DATA)


def kinds(events, kind):
    return [(e[1], e[2]) for e in events if e[0] == kind]


def test_seq_diff_wraps():
    assert seq_diff(5, 2**32 - 5) == 10
    assert seq_diff(2**32 - 5, 5) == -10
    assert seq_diff(7, 7) == 0


def test_in_order_with_syn():
    r = StreamReassembler()
    ev = run(r, [seg(999, flags=SYN), seg(1000, b"abc"), seg(1003, b"def")])
    assert [(e[0], e[1], e[2]) for e in ev] == [(DATA, 0, b"abc"), (DATA, 3, b"def")]
    assert r.syn_seen and r.isn == 999


def test_without_syn_starts_at_first_seen_seq():
    r = StreamReassembler()
    ev = run(r, [seg(5000, b"xy"), seg(5002, b"z")])
    assert stream_of(ev) == b"xyz" and not r.syn_seen
    assert ev[0][1] == 0


def test_bare_ack_does_not_start_the_stream():
    r = StreamReassembler()
    run(r, [seg(77, b"", ACK)], finish=False)
    assert not r.started
    assert stream_of(run(r, [seg(100, b"data")])) == b"data"


def test_retransmission_and_duplicates_dropped():
    r = StreamReassembler()
    ev = run(r, [seg(0, flags=SYN), seg(1, b"hello"), seg(1, b"hello"), seg(3, b"llo w"), seg(6, b" world"), seg(1, b"he")])
    assert stream_of(ev) == b"hello world"
    assert not kinds(ev, CONFLICT) and not kinds(ev, GAP)


def test_out_of_order_buffered_then_delivered():
    r = StreamReassembler()
    ev = run(r, [seg(0, flags=SYN), seg(7, b"world"), seg(6, b" "), seg(1, b"hello")], finish=False)
    assert stream_of(ev) == b"hello world"
    assert r.buffered_bytes == 0


def test_overlap_first_copy_wins_and_differences_are_reported():
    r = StreamReassembler()
    ev = run(r, [seg(0, flags=SYN), seg(5, b"EFGH"), seg(3, b"cdXY"), seg(1, b"ab")])
    # first copy of bytes 4..7 is "EFGH": the later "XY" at 4..5 loses and differs
    assert stream_of(ev) == b"abcdEFGH"
    assert kinds(ev, CONFLICT) == [(4, 2)]


def test_retransmission_with_different_bytes_is_reported():
    r = StreamReassembler()
    ev = run(r, [seg(0, flags=SYN), seg(1, b"abcdef"), seg(3, b"cXe")])
    assert stream_of(ev) == b"abcdef"
    assert kinds(ev, CONFLICT) == [(2, 3)]


def test_hole_reported_at_finish_never_filled():
    r = StreamReassembler()
    ev = run(r, [seg(0, flags=SYN), seg(1, b"abc"), seg(10, b"jkl")])
    assert stream_of(ev) == b"abcjkl"
    assert kinds(ev, GAP) == [(3, 6)]
    # the data after the hole keeps its true offset
    assert [e[1] for e in ev if e[0] == DATA] == [0, 9]


def test_peer_ack_past_a_hole_declares_it_after_the_grace():
    r = StreamReassembler(ack_grace_ns=100)
    ev = run(r, [seg(0, flags=SYN), seg(1, b"abc"), seg(10, b"jkl")], finish=False)
    assert stream_of(ev) == b"abc"
    # a capture may list the ack a little before the data it acknowledges
    assert r.acked(13, ts_ns=1000) == []
    ev = r.feed(seg(4, b"def", ts=1050))
    assert stream_of(ev) == b"def" and not kinds(ev, GAP)
    # still missing 100 ns after the ack: lost
    ev = r.acked(13, ts_ns=1120)
    assert kinds(ev, GAP) == [(6, 3)] and stream_of(ev) == b"jkl"
    # an ack for bytes never seen at all (a lost tail) is a gap too, at the next event
    assert r.acked(20, ts_ns=2000) == []
    assert kinds(r.acked(20, ts_ns=2100), GAP) == [(12, 7)]
    # and a late copy of the lost bytes is a retransmission: dropped
    assert r.feed(seg(14, b"nopqrs", ts=3000)) == []


def test_ack_of_fin_is_not_a_gap():
    r = StreamReassembler()
    run(r, [seg(0, flags=SYN), seg(1, b"abc", ACK | FIN)], finish=False)
    assert r.fin_abs == 3
    assert r.acked(5, 0) == []
    assert kinds(r.finish(), GAP) == []


def test_buffer_limit_declares_the_hole():
    r = StreamReassembler(max_buffer_bytes=10)
    ev = run(r, [seg(0, flags=SYN), seg(1, b"a"), seg(5, b"eeee"), seg(9, b"iiii"), seg(13, b"mmmm")], finish=False)
    assert kinds(ev, GAP) == [(1, 3)]
    assert stream_of(ev) == b"aeeeeiiiimmmm"


def test_segment_count_limit():
    r = StreamReassembler(max_segments=3)
    ev = run(r, [seg(0, flags=SYN)] + [seg(10 + 2 * i, b"x") for i in range(4)], finish=False)
    assert kinds(ev, GAP) == [(0, 9)]


def test_snaplen_cut_segment_leaves_a_hole_a_retransmission_may_fill():
    r = StreamReassembler()
    ev = run(r, [seg(0, flags=SYN), seg(1, b"ab", length=5), seg(3, b"cde"), seg(6, b"f")])
    assert stream_of(ev) == b"abcdef" and not kinds(ev, GAP)
    r = StreamReassembler()
    ev = run(r, [seg(0, flags=SYN), seg(1, b"ab", length=5), seg(6, b"f")])
    assert stream_of(ev) == b"abf" and kinds(ev, GAP) == [(2, 3)]


def test_wraparound():
    isn = MOD - 3
    r = StreamReassembler()
    ev = run(r, [seg(isn, flags=SYN), seg(isn + 1, b"ab"), seg(isn + 5, b"ef"), seg(isn + 3, b"cd"), seg(isn + 7, b"gh")])
    assert stream_of(ev) == b"abcdefgh"
    assert [e[1] for e in ev if e[0] == DATA] == [0, 2, 4, 6]


def test_offsets_grow_past_4_gib():
    r = StreamReassembler()
    run(r, [seg(0, flags=SYN)], finish=False)
    chunk = b"z" * 65536
    pos = 1
    total = 0
    for _ in range(2**32 // 65536 + 3):
        r.feed(seg(pos, chunk))
        pos += len(chunk)
        total += len(chunk)
    assert r.next_abs == total > 2**32


def test_syn_retransmitted_and_data_in_syn():
    r = StreamReassembler()
    ev = run(r, [seg(10, b"fast", SYN), seg(10, b"fast", SYN), seg(15, b"open")])
    assert stream_of(ev) == b"fastopen"


# -- properties ---------------------------------------------------------------------------


@st.composite
def segmented(draw):
    data = draw(st.binary(min_size=1, max_size=400))
    isn = draw(st.one_of(st.integers(0, MOD - 1), st.integers(MOD - 300, MOD - 1)))
    cuts = sorted(draw(st.sets(st.integers(1, len(data) - 1), max_size=30)) if len(data) > 1 else [])
    bounds = [0, *cuts, len(data)]
    pieces = [(a, data[a:b]) for a, b in zip(bounds, bounds[1:])]
    # retransmissions: copies, possibly spanning several pieces (same bytes: no conflict)
    extra = draw(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(1, 50)), max_size=10))
    pieces += [(a, data[a : a + n]) for a, n in extra]
    order = draw(st.permutations(pieces))
    return data, isn, order


@settings(max_examples=300, deadline=None)
@given(segmented())
def test_any_segmentation_reordering_duplication_reassembles(case):
    data, isn, order = case
    r = StreamReassembler()
    events = r.feed(seg(isn, flags=SYN))
    for off, piece in order:
        events += r.feed(seg(isn + 1 + off, piece))
    events += r.finish()
    assert stream_of(events) == data
    assert not kinds(events, GAP) and not kinds(events, CONFLICT)
    offs = [e[1] for e in events if e[0] == DATA]
    assert offs == sorted(offs)


@settings(max_examples=200, deadline=None)
@given(segmented(), st.data())
def test_a_missing_piece_is_a_gap_at_its_offset(case, draw):
    data, isn, order = case
    pieces = sorted({(off, len(p)) for off, p in order})
    # the bytes only one piece covers can be lost by dropping that piece
    lost_off, lost_len = draw.draw(st.sampled_from(pieces))
    covered = set()
    for off, p in order:
        if (off, len(p)) != (lost_off, lost_len):
            covered.update(range(off, off + len(p)))
    missing = sorted(set(range(len(data))) - covered)
    r = StreamReassembler()
    events = r.feed(seg(isn, flags=SYN))
    for off, piece in order:
        if (off, len(piece)) != (lost_off, lost_len):
            events += r.feed(seg(isn + 1 + off, piece))
    events += r.finish()
    got = bytearray()
    gap_bytes = []
    pos = 0
    for e in events:
        assert e[0] != CONFLICT
        assert e[1] == pos  # data and gaps tile the stream in order
        if e[0] == DATA:
            got += e[2]
            pos += len(e[2])
        else:
            gap_bytes += range(e[1], e[1] + e[2])
            pos += e[2]
    # a gap at the very end is invisible (nothing after it says it was there)
    tail = len(data)
    while missing and missing[-1] == tail - 1:
        tail -= 1
        missing.pop()
    assert gap_bytes == missing
    lost = set(missing)
    assert bytes(got) == bytes(b for i, b in enumerate(data[:tail]) if i not in lost)
