"""Garbage in, problems out: no input makes the packet decoder or the capture reader raise
(except CaptureFormatError for a file that is no capture at all), whatever the format."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trocket.codecs.capture import CaptureProblem, CaptureRecord
from trocket.codecs.capture_files import CaptureFile
from trocket.codecs.errors import CaptureFormatError
from trocket.codecs.pcap import LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_NULL, LINKTYPE_RAW, RawPacket
from trocket.codecs.pcap_decode import PacketProblem, TcpSegment, decode_packet
from trocket.codecs.pcap_write import PcapngWriter, PcapWriter, TcpFlow
from trocket.codecs.tcp_frames import FRAME, FrameSplitter

from .test_tcp_connection import CLIENT, SERVER, T0, request, response

LINKTYPES = [LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW, LINKTYPE_NULL, 228, 229, 108, 12]


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(LINKTYPES), st.binary(max_size=120), st.integers(0, 200))
def test_any_packet_bytes_decode_or_report(linktype, data, extra):
    got = decode_packet(RawPacket(0, 0, linktype, data, len(data) + extra))
    assert got is None or isinstance(got, (TcpSegment, PacketProblem))
    if isinstance(got, TcpSegment):
        assert len(got.payload) <= got.length


def _session_pcap(fmt: str) -> bytes:
    w = PcapWriter(nanos=True)
    f = TcpFlow(w, CLIENT, SERVER, mss=64)
    recs = f.handshake(T0)
    for i in range(4):
        recs += f.send(T0 + i, "client", request(i, b"q" * 50)) + f.send(T0 + i, "server", response(i))
    recs += f.close(T0 + 100)
    if fmt == "pcap":
        return w.header() + b"".join(recs)
    if fmt == "native":
        from trocket.codecs.capture import FILE_HEADER, encode_record
        from trocket.codecs.capture_files import read_capture

        records, _ = read_capture(io.BytesIO(w.header() + b"".join(recs)))
        return FILE_HEADER + b"".join(map(encode_record, records))
    ng = PcapngWriter()
    from trocket.codecs.pcap import PacketReader

    out = ng.section() + ng.interface(LINKTYPE_ETHERNET, tsresol=9)
    for p in PacketReader(io.BytesIO(w.header() + b"".join(recs))):
        out += ng.packet(0, p.timestamp_ns, p.data)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["pcap", "pcapng", "native"]), st.data())
def test_mutated_captures_never_raise(fmt, data):
    blob = bytearray(_session_pcap(fmt))
    for _ in range(data.draw(st.integers(1, 12))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        pos = data.draw(st.integers(0, len(blob) - 1))
        if kind == "flip":
            blob[pos] ^= data.draw(st.integers(1, 255))
        elif kind == "cut":
            del blob[pos:]
        elif kind == "insert":
            blob[pos:pos] = data.draw(st.binary(min_size=1, max_size=40))
        else:
            del blob[pos : pos + data.draw(st.integers(1, 40))]
        if not blob:
            break
    try:
        capture = CaptureFile(io.BytesIO(bytes(blob)))
    except CaptureFormatError:
        return
    items = list(capture)
    assert all(isinstance(i, (CaptureRecord, CaptureProblem)) for i in items)
    for r in (i for i in items if isinstance(i, CaptureRecord)):
        if r.raw:  # a RAW record holds bytes that are not a frame, by the format (a flip can set the flag)
            assert r.frame
        else:
            assert int.from_bytes(r.frame[:4], "big") == len(r.frame) - 4


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=20), st.booleans())
def test_splitter_on_noise_yields_only_whole_frames(chunks, synced):
    sp = FrameSplitter(synced=synced)
    out = []
    off = 0
    for c in chunks:
        out += sp.data(off, c, 0)
        off += len(c)
    out += sp.finish()
    for item in out:
        if item[0] == FRAME:
            frame = item[2]
            assert int.from_bytes(frame[:4], "big") == len(frame) - 4 and frame[4] in (0, 1)
