"""pcap / pcapng records and per-packet decoding (codecs/pcap.py, pcap_decode.py, pcap_write.py)."""

from __future__ import annotations

import io
import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.errors import CaptureFormatError
from trocket.codecs.pcap import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    PacketReader,
    RawPacket,
    split_ranges,
)
from trocket.codecs.pcap_decode import ACK, PSH, SYN, PacketProblem, TcpSegment, decode_packet, ipv6_text
from trocket.codecs.pcap_write import PcapngWriter, PcapWriter, build_tcp_packet

C4, S4 = "10.1.2.3:40001", "10.9.8.7:10911"
C6, S6 = "[fe80::1]:40001", "[2001:db8::7]:10911"
T0 = 1_700_000_000_123_456_789


def packets_of(data: bytes) -> tuple[list[RawPacket], PacketReader]:
    reader = PacketReader(io.BytesIO(data))
    return list(reader), reader


@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("nanos", [False, True])
def test_pcap_both_byte_orders_and_resolutions(endian, nanos):
    w = PcapWriter(LINKTYPE_ETHERNET, nanos=nanos, endian=endian)
    data = w.header()
    offsets = []
    for i in range(3):
        offsets.append(len(data))
        data += w.tcp(T0 + i * 1_000_001, C4, S4, 100 + i, 7, ACK | PSH, bytes([i]) * (i + 1))
    packets, reader = packets_of(data)
    assert reader.problem is None
    assert reader.state.format == "pcap" and reader.state.endian == endian
    assert [p.file_offset for p in packets] == offsets
    step = 1 if nanos else 1000
    assert [p.timestamp_ns for p in packets] == [(T0 + i * 1_000_001) // step * step for i in range(3)]
    segs = [decode_packet(p) for p in packets]
    assert [(s.src, s.dst, s.seq, s.ack, s.flags, s.payload) for s in segs] == [
        (C4, S4, 100 + i, 7, ACK | PSH, bytes([i]) * (i + 1)) for i in range(3)
    ]


@pytest.mark.parametrize(
    "linktype", [LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW, 12, 14, LINKTYPE_NULL, LINKTYPE_LOOP]
)
@pytest.mark.parametrize("v6", [False, True])
def test_every_link_type_both_ip_versions(linktype, v6):
    src, dst = (C6, S6) if v6 else (C4, S4)
    w = PcapWriter(linktype)
    data = w.header() + w.tcp(T0, src, dst, 0xFFFFFFF0, 0x10, SYN | ACK, b"") + w.tcp(T0, src, dst, 1, 2, ACK, b"hello")
    packets, _ = packets_of(data)
    assert packets[0].linktype == linktype
    a, b = (decode_packet(p) for p in packets)
    assert (a.src, a.dst, a.seq, a.ack, a.flags, a.payload, a.length) == (src, dst, 0xFFFFFFF0, 0x10, SYN | ACK, b"", 0)
    assert (b.payload, b.length, b.truncated) == (b"hello", 5, False)


@pytest.mark.parametrize("linktype,v6", [(LINKTYPE_IPV4, False), (LINKTYPE_IPV6, True)])
def test_ipv4_and_ipv6_link_types(linktype, v6):
    src, dst = (C6, S6) if v6 else (C4, S4)
    pkt = RawPacket(0, T0, linktype, build_tcp_packet(src, dst, 5, 6, ACK, b"xyz", linktype=linktype), 0)
    seg = decode_packet(pkt)
    assert (seg.src, seg.dst, seg.payload) == (src, dst, b"xyz")


def _eth(payload_ip: bytes, etype: int = 0x0800, vlans: tuple[int, ...] = ()) -> bytes:
    head = b"\x02" * 6 + b"\x04" * 6
    for tpid in vlans:
        head += struct.pack(">HH", tpid, 42)
    return head + struct.pack(">H", etype) + payload_ip


def test_vlan_tags_single_and_double():
    ip = build_tcp_packet(C4, S4, 9, 9, ACK, b"vlan", linktype=LINKTYPE_RAW)
    for vlans in [(0x8100,), (0x88A8, 0x8100), (0x9100, 0x8100)]:
        seg = decode_packet(RawPacket(0, 0, LINKTYPE_ETHERNET, _eth(ip, vlans=vlans), 0))
        assert isinstance(seg, TcpSegment) and seg.payload == b"vlan"


def test_ethernet_padding_is_not_payload():
    ip = build_tcp_packet(C4, S4, 9, 9, ACK, b"", linktype=LINKTYPE_RAW)
    frame = _eth(ip) + b"\x00" * 6  # padded to the 60-byte Ethernet minimum
    seg = decode_packet(RawPacket(0, 0, LINKTYPE_ETHERNET, frame, len(frame)))
    assert seg.payload == b"" and seg.length == 0


def test_ipv4_options_are_skipped():
    ip = bytearray(build_tcp_packet(C4, S4, 9, 9, ACK, b"opts", linktype=LINKTYPE_RAW))
    # add 8 bytes of options (NOP NOP ... END): IHL 7, total length + 8
    ip = ip[:20] + b"\x01\x01\x01\x01\x01\x01\x01\x00" + ip[20:]
    ip[0] = 0x47
    struct.pack_into(">H", ip, 2, len(ip))
    seg = decode_packet(RawPacket(0, 0, LINKTYPE_RAW, bytes(ip), 0))
    assert (seg.src, seg.dst, seg.payload) == (C4, S4, b"opts")


@pytest.mark.parametrize("frag", [0x2000, 0x0010, 0x2010])  # MF; an offset; both
def test_ipv4_fragments_are_reported_not_reassembled(frag):
    ip = bytearray(build_tcp_packet(C4, S4, 9, 9, ACK, b"frag", linktype=LINKTYPE_RAW))
    struct.pack_into(">H", ip, 6, frag)
    got = decode_packet(RawPacket(77, 5, LINKTYPE_RAW, bytes(ip), 0))
    assert isinstance(got, PacketProblem) and "fragment" in got.what and got.file_offset == 77


def _ipv6_with_ext(ext_chain: list[tuple[int, bytes]], payload: bytes = b"ext") -> bytes:
    """An IPv6 packet whose extension headers are ``(type, body)`` in order."""
    base = build_tcp_packet(C6, S6, 9, 9, ACK, payload, linktype=LINKTYPE_RAW)
    fixed, tcp = bytearray(base[:40]), base[40:]
    exts = b""
    types = [t for t, _ in ext_chain] + [6]
    for (t, body), nxt in zip(ext_chain, types[1:]):
        if t == 51:  # AH: length in 4-byte units minus 2
            exts += bytes([nxt, (len(body) + 2) // 4 - 2]) + body
        else:
            exts += bytes([nxt, (len(body) + 2) // 8 - 1]) + body
    fixed[6] = types[0]
    struct.pack_into(">H", fixed, 4, len(exts) + len(tcp))
    return bytes(fixed) + exts + tcp


def test_ipv6_extension_headers():
    pkt = _ipv6_with_ext([(0, b"\x01\x04\x00\x00\x00\x00"), (60, b"\x00" * 14), (51, b"\x00" * 10)])
    seg = decode_packet(RawPacket(0, 0, LINKTYPE_RAW, pkt, 0))
    assert isinstance(seg, TcpSegment) and (seg.src, seg.payload) == (C6, b"ext")


def test_ipv6_fragment_header_is_reported():
    pkt = _ipv6_with_ext([(44, b"\x00\x01\x00\x00\x00\x01")])
    got = decode_packet(RawPacket(0, 0, LINKTYPE_RAW, pkt, 0))
    assert isinstance(got, PacketProblem) and "fragment" in got.what


def test_not_tcp_is_ignored():
    ip = bytearray(build_tcp_packet(C4, S4, 9, 9, ACK, b"x", linktype=LINKTYPE_RAW))
    ip[9] = 17  # UDP
    assert decode_packet(RawPacket(0, 0, LINKTYPE_RAW, bytes(ip), 0)) is None
    arp = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + b"\x00" * 28
    assert decode_packet(RawPacket(0, 0, LINKTYPE_ETHERNET, arp, 0)) is None


def test_unsupported_link_type_is_a_problem():
    got = decode_packet(RawPacket(0, 0, 147, b"\x00" * 60, 60))
    assert isinstance(got, PacketProblem) and "link type 147" in got.what


def test_snaplen_cut_payload_is_flagged_truncated():
    w = PcapWriter(LINKTYPE_ETHERNET, snaplen=14 + 20 + 20 + 10)
    data = w.header() + w.tcp(T0, C4, S4, 1, 1, ACK, b"A" * 100)
    [pkt], _ = packets_of(data)
    assert pkt.truncated
    seg = decode_packet(pkt)
    assert (seg.payload, seg.length, seg.truncated) == (b"A" * 10, 100, True)


def test_snaplen_cut_headers_are_problems():
    w = PcapWriter(LINKTYPE_ETHERNET, snaplen=14 + 10)
    [pkt], _ = packets_of(w.header() + w.tcp(T0, C4, S4, 1, 1, ACK, b"A" * 100))
    got = decode_packet(pkt)
    assert isinstance(got, PacketProblem) and "snaplen" in got.what


def test_truncated_file_keeps_what_was_read():
    w = PcapWriter()
    data = w.header() + b"".join(w.tcp(T0, C4, S4, i, 0, ACK, b"p" * 50) for i in range(4))
    for cut in (len(data) - 1, len(data) - 60, len(data) - 100 - 8):
        packets, reader = packets_of(data[:cut])
        assert len(packets) == 3
        assert reader.problem is not None and "ends inside" in reader.problem


def test_garbled_record_header_stops_with_a_problem():
    w = PcapWriter()
    data = w.header() + w.tcp(T0, C4, S4, 1, 0, ACK, b"ok") + struct.pack("<IIII", 1, 0, 50_000_000, 50_000_000)
    packets, reader = packets_of(data)
    assert len(packets) == 1 and "garbled" in reader.problem


@pytest.mark.parametrize("data", [b"", b"\xd4\xc3", b"GET / HTTP/1.1\r\n", b"TRKCAP\r\n" + b"\x00" * 8])
def test_unknown_file_types(data):
    with pytest.raises(CaptureFormatError):
        PacketReader(io.BytesIO(data))


def test_unsupported_pcap_version():
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 3, 0, 0, 0, 65535, 1)
    with pytest.raises(CaptureFormatError, match="version"):
        PacketReader(io.BytesIO(data))


# -- pcapng -------------------------------------------------------------------------------


@pytest.mark.parametrize("endian", ["<", ">"])
def test_pcapng_interfaces_with_their_own_link_types_and_resolutions(endian):
    ng = PcapngWriter(endian=endian)
    ts = T0
    data = ng.section()
    data += ng.interface(LINKTYPE_ETHERNET)  # microseconds
    data += ng.interface(LINKTYPE_LINUX_SLL2, tsresol=9)  # nanoseconds
    data += ng.interface(LINKTYPE_RAW, tsresol=0x80 | 30, tsoffset=10)  # 2**-30 s, +10 s
    data += ng.block(4, b"\x00" * 8)  # a name resolution block: skipped
    data += ng.packet(0, ts, build_tcp_packet(C4, S4, 1, 0, ACK, b"eth"))
    data += ng.packet(1, ts, build_tcp_packet(C4, S4, 4, 0, ACK, b"sll2", linktype=LINKTYPE_LINUX_SLL2))
    data += ng.packet(2, ts, build_tcp_packet(C6, S6, 8, 0, ACK, b"raw6", linktype=LINKTYPE_RAW))
    data += ng.simple_packet(build_tcp_packet(C4, S4, 12, 0, ACK, b"spb"))
    packets, reader = packets_of(data)
    assert reader.problem is None
    assert [p.linktype for p in packets] == [LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW, LINKTYPE_ETHERNET]
    assert [p.interface for p in packets] == [0, 1, 2, 0]
    assert packets[0].timestamp_ns == ts // 1000 * 1000
    assert packets[1].timestamp_ns == ts
    units = ts * 2**30 // 10**9
    assert packets[2].timestamp_ns == units * 10**9 // 2**30 + 10 * 10**9
    assert abs(packets[2].timestamp_ns - (ts + 10 * 10**9)) < 2
    assert [decode_packet(p).payload for p in packets] == [b"eth", b"sll2", b"raw6", b"spb"]


def test_pcapng_sections_change_byte_order_and_interfaces():
    le, be = PcapngWriter(endian="<"), PcapngWriter(endian=">")
    data = le.section() + le.interface(LINKTYPE_ETHERNET) + le.packet(0, T0, build_tcp_packet(C4, S4, 1, 0, ACK, b"one"))
    data += be.section() + be.interface(LINKTYPE_RAW, tsresol=9) + be.packet(0, T0, build_tcp_packet(C4, S4, 1, 0, ACK, b"two", linktype=LINKTYPE_RAW))
    packets, reader = packets_of(data)
    assert reader.problem is None
    assert [(p.linktype, decode_packet(p).payload) for p in packets] == [(LINKTYPE_ETHERNET, b"one"), (LINKTYPE_RAW, b"two")]
    assert reader.state.endian == ">"


def test_pcapng_packet_for_an_unknown_interface_is_a_problem():
    ng = PcapngWriter()
    data = ng.section() + ng.interface(LINKTYPE_ETHERNET) + ng.packet(0, T0, b"\x00" * 20)
    data = data + ng.block(6, struct.pack("<IIIII", 5, 0, 0, 4, 4) + b"abcd")
    packets, reader = packets_of(data)
    assert len(packets) == 1 and "interface 5" in reader.problem


def test_pcapng_truncated():
    ng = PcapngWriter()
    data = ng.section() + ng.interface(LINKTYPE_ETHERNET) + ng.packet(0, T0, b"\x00" * 60) + ng.packet(0, T0, b"\x01" * 60)
    packets, reader = packets_of(data[:-10])
    assert len(packets) == 1 and "ends inside" in reader.problem


# -- ranges -------------------------------------------------------------------------------


def _reread(data: bytes, target: int) -> list[RawPacket]:
    f = io.BytesIO(data)
    ranges = split_ranges(f, target)
    assert all(a.end == b.start for a, b in zip(ranges, ranges[1:]))
    assert ranges[-1].end == len(data)
    out = []
    for r in ranges:
        out.extend(PacketReader(io.BytesIO(data), range_=r))
    return out


@pytest.mark.parametrize("target", [1, 200, 1000, 10**9])
def test_split_ranges_pcap_read_every_packet_once(target):
    w = PcapWriter(nanos=True)
    data = w.header() + b"".join(w.tcp(T0 + i, C4, S4, i * 10, 0, ACK, b"r" * (i % 50)) for i in range(100))
    whole, _ = packets_of(data)
    assert _reread(data, target) == whole


@pytest.mark.parametrize("target", [1, 300, 10**9])
def test_split_ranges_pcapng_carry_the_interfaces(target):
    ng = PcapngWriter(endian=">")
    data = ng.section() + ng.interface(LINKTYPE_ETHERNET)
    for i in range(30):
        if i == 10:
            data += ng.interface(LINKTYPE_LINUX_SLL, tsresol=9)
        iface = 0 if i < 10 or i % 2 else 1
        data += ng.packet(iface, T0 + i * 1000, build_tcp_packet(C4, S4, i, 0, ACK, b"n" * i, linktype=[LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL][iface]))
    whole, _ = packets_of(data)
    assert len(whole) == 30
    again = _reread(data, target)
    assert again == whole
    assert all(decode_packet(p).seq == i for i, p in enumerate(again))


def test_split_ranges_pcap_cost_grows_with_ranges_not_packets():
    w = PcapWriter()
    data = w.header() + b"".join(w.tcp(T0 + i * 1000, C4, S4, i, 0, ACK, bytes([i % 251]) * (i % 300)) for i in range(3000))
    reads = []

    class Counting(io.BytesIO):
        def read(self, n=-1):
            reads.append(n)
            return super().read(n)

    ranges = split_ranges(Counting(data), len(data) // 4)
    assert 3 <= len(ranges) <= 5 and len(reads) < 40
    whole, _ = packets_of(data)
    again = [p for r in ranges for p in PacketReader(io.BytesIO(data), range_=r)]
    assert again == whole


def test_split_ranges_of_a_cut_file_leave_the_problem_to_the_last_reader():
    w = PcapWriter()
    data = w.header() + b"".join(w.tcp(T0, C4, S4, i, 0, ACK, b"c" * 100) for i in range(50))
    cut = data[:-30]
    ranges = split_ranges(io.BytesIO(cut), 1000)
    readers = [PacketReader(io.BytesIO(cut), range_=r) for r in ranges]
    got = [p for r in readers for p in r]
    assert len(got) == 49
    assert [r.problem is not None for r in readers] == [False] * (len(readers) - 1) + [True]


def test_pcapng_impossible_tsresol_is_a_problem_not_an_exception():
    ng = PcapngWriter()
    data = ng.section() + ng.interface(LINKTYPE_ETHERNET) + ng.packet(0, T0, build_tcp_packet(C4, S4, 1, 0, ACK, b"ok"))
    # an interface block by hand: if_tsresol 25 (10**25 units a second)
    data += ng.block(1, struct.pack("<HHI", LINKTYPE_ETHERNET, 0, 0) + struct.pack("<HH", 9, 1) + b"\x19\x00\x00\x00" + struct.pack("<HH", 0, 0))
    packets, reader = packets_of(data)
    assert len(packets) == 1 and "if_tsresol" in reader.problem


# The words IPv6 addresses are made of, zero most often: runs of zeros and the mapped and
# compatible IPv4 forms are what inet_ntop writes in its own way.
_WORD = st.one_of(st.just(0), st.just(0), st.just(0xFFFF), st.just(1), st.integers(0, 0xFFFF))


@settings(max_examples=2000)
@given(st.lists(_WORD, min_size=8, max_size=8).map(lambda w: struct.pack(">8H", *w)))
def test_ipv6_text_is_inet_ntop(ip: bytes) -> None:
    """codecs writes IPv6 endpoints without the socket module, as remoting's peers read."""
    assert ipv6_text(ip) == socket.inet_ntop(socket.AF_INET6, ip)


@pytest.mark.parametrize("text", ["::", "::1", "::2", "::100", "::1:2", "::1.2.3.4", "::ffff:1.2.3.4", "::ffff:0.0.0.0",
                                  "1::ffff:1:2", "fe80::1:2", "2001:db8::", "1:0:0:2:0:0:0:3", "1:0:2:0:3:0:4:0"])
def test_ipv6_text_of_the_special_forms(text: str) -> None:
    ip = socket.inet_pton(socket.AF_INET6, text)
    assert ipv6_text(ip) == socket.inet_ntop(socket.AF_INET6, ip)
