"""The one capture reader (codecs/capture_files.py): native, pcap and pcapng alike, bad
files as problems, and the piecewise (Spark) path giving the same records."""

from __future__ import annotations

import io
from collections import defaultdict

import pytest

from trocket.codecs.capture import FILE_HEADER, CaptureProblem, CaptureRecord, Direction, Role, encode_record
from trocket.codecs.capture_files import CaptureFile, detect_format, packet_range_items, read_capture
from trocket.codecs.errors import CaptureFormatError
from trocket.codecs.pcap import LINKTYPE_LINUX_SLL2, split_ranges
from trocket.codecs.pcap_decode import TcpSegment
from trocket.codecs.pcap_write import build_tcp_packet
from trocket.codecs.pcap_write import PcapngWriter, PcapWriter, TcpFlow
from trocket.codecs.tcp_connection import ConnectionTracker, connection_key

from .test_tcp_connection import CLIENT, SERVER, T0, request, response

SERVER2 = "10.0.0.2:9876"


class Pipe:
    """Only ``read``: no seek, no tell (stdin, a socket)."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._f.read(min(n, 1000) if n > 0 else n)


def two_connections(writer) -> tuple[bytes, list[tuple]]:
    """Packet records of two interleaved connections and the records a server tap would
    have written for them: (conn, local, remote, direction, frame, ts)."""
    f1 = TcpFlow(writer, CLIENT, SERVER, mss=90)
    f2 = TcpFlow(writer, "10.0.0.5:41000", SERVER2, mss=60)
    recs = f1.handshake(T0) + f2.handshake(T0 + 10)
    expected = []
    for i in range(6):
        for conn, flow, srv, cli in ((1, f1, SERVER, CLIENT), (2, f2, SERVER2, "10.0.0.5:41000")):
            ts = T0 + 1000 * (i + 1) + conn * 100
            req, resp = request(i * 10 + conn, b"b" * (i * 40), i % 2), response(i * 10 + conn, (i + 1) % 2)
            recs += flow.send(ts, "client", req)
            expected.append((conn, srv, cli, Direction.RECEIVED, req, ts))
            recs += flow.send(ts + 50, "server", resp)
            expected.append((conn, srv, cli, Direction.SENT, resp, ts + 50))
    recs += f1.close(T0 + 10**6) + f2.close(T0 + 10**6 + 10)
    return b"".join(recs), expected


def shape(records):
    return [(r.connection_id, r.local_address, r.remote_address, r.direction, r.frame, r.timestamp_ns) for r in records]


def native_file(expected) -> bytes:
    return FILE_HEADER + b"".join(
        encode_record(CaptureRecord(ts, conn, local, remote, d, frame, Role.SERVER)) for conn, local, remote, d, frame, ts in expected
    )


def test_detect_format():
    assert detect_format(FILE_HEADER[:8]) == "trocket"
    assert detect_format(PcapWriter().header()[:8]) == "pcap"
    assert detect_format(PcapWriter(nanos=True, endian=">").header()[:8]) == "pcap"
    assert detect_format(PcapngWriter().section()[:8]) == "pcapng"
    with pytest.raises(CaptureFormatError, match="empty"):
        detect_format(b"")
    with pytest.raises(CaptureFormatError, match="unknown capture file type"):
        detect_format(b"PK\x03\x04zip!")


@pytest.mark.parametrize("fmt", ["pcap", "pcap-ns-be", "pcapng", "native"])
def test_every_format_gives_the_same_records(fmt):
    if fmt == "native":
        _, expected = two_connections(PcapWriter(nanos=True))
        data = native_file(expected)
    elif fmt == "pcapng":
        ng = PcapngWriter(endian=">")
        w = PcapWriter(LINKTYPE_LINUX_SLL2, nanos=True)
        body, expected = two_connections(w)
        # re-wrap the pcap records as pcapng enhanced packets on an SLL2 interface
        data = ng.section() + ng.interface(LINKTYPE_LINUX_SLL2, tsresol=9)
        from trocket.codecs.pcap import PacketReader

        for p in PacketReader(io.BytesIO(w.header() + body)):
            data += ng.packet(0, p.timestamp_ns, p.data)
    else:
        w = PcapWriter(nanos=True, endian=">" if fmt == "pcap-ns-be" else "<")
        body, expected = two_connections(w)
        data = w.header() + body
    capture = CaptureFile(io.BytesIO(data))
    assert capture.format == {"native": "trocket", "pcap-ns-be": "pcap"}.get(fmt, fmt)
    records = list(capture.records_only())
    assert capture.problems == [] and capture.complete
    assert shape(records) == expected
    assert all(r.role == Role.SERVER for r in records)
    assert capture.position == len(data)


def test_pipe_without_seek():
    w = PcapWriter(nanos=True)
    body, expected = two_connections(w)
    records, problems = read_capture(Pipe(w.header() + body))
    assert problems == [] and shape(records) == expected
    records, problems = read_capture(Pipe(native_file(expected)))
    assert problems == [] and shape(records) == expected


def test_native_truncated_and_garbled():
    _, expected = two_connections(PcapWriter(nanos=True))
    data = native_file(expected)
    capture = CaptureFile(io.BytesIO(data[:-7]))
    records = list(capture.records_only())
    assert shape(records) == expected[:-1]
    [problem] = capture.problems
    assert problem.kind == "truncated-file" and not capture.complete
    assert "incomplete record" in str(problem) and str(problem).startswith("file: ")
    garbled = data[:16] + b"\xff\xff\xff\xff" + data[20:]
    capture = CaptureFile(io.BytesIO(garbled))
    assert list(capture.records_only()) == []
    assert [p.kind for p in capture.problems] == ["bad-file"]


def test_truncated_pcap_keeps_what_was_read():
    w = PcapWriter(nanos=True)
    body, expected = two_connections(w)
    data = w.header() + body
    cut = len(data) * 2 // 3
    capture = CaptureFile(io.BytesIO(data[:cut]))
    items = list(capture)
    records = [i for i in items if isinstance(i, CaptureRecord)]
    kinds = [i.kind for i in items if isinstance(i, CaptureProblem)]
    assert 0 < len(records) < len(expected)
    assert shape(records) == expected[: len(records)]
    assert "truncated-file" in kinds and not capture.complete


def test_gap_in_pcap_is_reported_with_connection_and_offset():
    w = PcapWriter(nanos=True)
    f = TcpFlow(w, CLIENT, SERVER, mss=50)
    recs = f.handshake(T0)
    frames = [request(i, b"z" * 120) for i in range(4)]
    for i, fr in enumerate(frames):
        recs += f.send(T0 + i * 10**6, "client", fr)
    per_frame = -(-len(frames[0]) // 50)
    lost = recs.pop(3 + per_frame + 2)  # the third segment of the second request
    assert len(lost) > 50
    capture = CaptureFile(io.BytesIO(w.header() + b"".join(recs)))
    records = list(capture.records_only())
    assert [r.frame for r in records] == [frames[0], frames[2], frames[3]]
    [gap] = capture.problems
    offset = len(frames[0]) + 100
    assert gap.kind == "gap" and gap.connection_id == 1 and gap.stream_offset == offset
    assert f"50 bytes missing at stream offset {offset}" in str(gap) and not capture.complete


def test_unknown_and_empty_files_are_typed_errors():
    with pytest.raises(CaptureFormatError):
        CaptureFile(io.BytesIO(b""))
    with pytest.raises(CaptureFormatError):
        CaptureFile(io.BytesIO(b"\x89PNG\r\n\x1a\n...."))
    with pytest.raises(CaptureFormatError, match="too short"):
        CaptureFile(io.BytesIO(PcapWriter().header()[:10]))


def test_packet_problems_come_out_as_problems():
    w = PcapWriter(nanos=True)
    frag = bytearray(build_tcp_packet(CLIENT, SERVER, 1, 1, 0x10, b"x"))
    frag[14 + 6] = 0x20  # MF
    capture = CaptureFile(io.BytesIO(w.header() + w.record(T0, bytes(frag))))
    assert list(capture.records_only()) == []
    [p] = capture.problems
    assert p.kind == "bad-packet" and "fragment" in p.what and p.file_offset == 24


@pytest.mark.parametrize("target", [1, 700, 5000])
def test_piecewise_path_matches_the_sequential_reader(target):
    """What Spark does: ranges read independently, segments grouped by connection key,
    each group reassembled in capture order with an id from its key."""
    w = PcapWriter(nanos=True)
    body, expected = two_connections(w)
    data = w.header() + body
    ranges = split_ranges(io.BytesIO(data), target)
    groups: dict = defaultdict(list)
    for r in ranges:
        for item in packet_range_items(io.BytesIO(data), r):
            assert isinstance(item, TcpSegment)
            groups[connection_key(item.src, item.dst)].append(item)
    first_seen = sorted(groups, key=lambda k: groups[k][0].file_offset)
    records = []
    for key, segs in groups.items():
        segs.sort(key=lambda s: s.file_offset)
        tracker = ConnectionTracker(id_factory=lambda k, n: first_seen.index(k) + 1)
        for s in segs:
            records += [i for i in tracker.feed(s) if isinstance(i, CaptureRecord)]
        records += [i for i in tracker.finish() if isinstance(i, CaptureRecord)]
    assert sorted(shape(records), key=lambda t: (t[5], t[0])) == sorted(expected, key=lambda t: (t[5], t[0]))
