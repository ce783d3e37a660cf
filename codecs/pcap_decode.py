"""Packet bytes -> TCP segments: link layers, IPv4/IPv6, TCP. Pure, per packet, so packets
can be decoded independently (in parallel) before they are grouped by connection.

Link types (``linktype``, as pcap's LINKTYPE_ values): Ethernet (1, with 802.1Q/802.1ad
VLAN tags), Linux cooked SLL (113) and SLL2 (276), raw IP (101, and DLT_RAW's 12 and 14
as some files write it), IPv4 (228), IPv6 (229), BSD loopback NULL (0) and LOOP (108).

:func:`decode_packet` returns a :class:`TcpSegment`, ``None`` for a packet that is not
TCP over IP (ARP, UDP, ...: ignored silently), or a :class:`PacketProblem` for one it must
report: an IP fragment (fragments are reported, not reassembled), a header cut short by
the snaplen, a malformed header. Ethernet padding is dropped by the IP lengths.
"""

from __future__ import annotations

import ipaddress
import struct

import attrs

from .pcap import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    RawPacket,
)

__all__ = [
    "FIN",
    "SYN",
    "RST",
    "PSH",
    "ACK",
    "TcpSegment",
    "PacketProblem",
    "decode_packet",
    "format_endpoint",
    "ipv6_text",
    "ETHERTYPE_IPV4",
    "ETHERTYPE_IPV6",
    "RAW_LINKTYPES",
    "TCP_HEADER",
]

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
_ETH_VLAN = (0x8100, 0x88A8, 0x9100)
#: raw IP: LINKTYPE_RAW, and DLT_RAW's values 12 and 14 as some writers put it in files
RAW_LINKTYPES = (LINKTYPE_RAW, 12, 14)
_AF_INET6_BSD = (10, 24, 28, 30)  # Linux, NetBSD/OpenBSD, FreeBSD, macOS
_IPV6_EXT = (0, 43, 60, 51, 135, 139, 140)  # hop-by-hop, routing, dest opts, AH, mobility, HIP, shim6
_IPV6_FRAGMENT = 44

#: ports, sequence and acknowledgement numbers, data offset, flags
TCP_HEADER = struct.Struct(">HHIIBB")
# IPv4 (version/ihl, total length, flags/fragment, protocol, addresses) + the TCP fields
_FAST_V4 = struct.Struct(">BxHxxHxBxx4s4sHHIIBB")


@attrs.frozen(slots=True)
class TcpSegment:
    """One TCP segment. ``src``/``dst`` are ``host:port`` (``[v6]:port`` for IPv6, as
    remoting formats addresses). ``length`` is the payload length the IP header
    announces; ``payload`` may be shorter when the snaplen cut the packet
    (``truncated``)."""

    timestamp_ns: int
    src: str
    dst: str
    seq: int
    ack: int
    flags: int
    payload: bytes
    length: int
    file_offset: int = 0

    @property
    def truncated(self) -> bool:
        return len(self.payload) < self.length


@attrs.frozen(slots=True)
class PacketProblem:
    """A packet the decoder had to skip or could read only in part."""

    file_offset: int
    timestamp_ns: int
    what: str


def ipv6_text(ip: bytes) -> str:
    """A 16-byte IPv6 address as ``socket.inet_ntop`` (glibc) writes it, as remoting sees
    peers: RFC 5952's compressed form (what ``ipaddress`` writes), except that an
    IPv4-mapped (``::ffff:a.b.c.d``) or IPv4-compatible address (six zero words, then a
    non-zero one: ``::a.b.c.d``) keeps its dotted tail."""
    if ip[:10] == _ZERO10:
        tail = ip[10:12]
        if tail == b"\xff\xff":
            return f"::ffff:{ip[12]}.{ip[13]}.{ip[14]}.{ip[15]}"
        if tail == b"\0\0" and ip[12:14] != b"\0\0":
            return f"::{ip[12]}.{ip[13]}.{ip[14]}.{ip[15]}"
    return str(ipaddress.IPv6Address(ip))


_ZERO10 = bytes(10)


def format_endpoint(ip: bytes, port: int) -> str:
    """``host:port`` as remoting writes it (``[v6]:port`` for IPv6)."""
    key = (ip, port)
    text = _ENDPOINTS.get(key)
    if text is None:
        if len(ip) == 4:
            text = f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
        else:
            text = f"[{ipv6_text(ip)}]:{port}"
        if len(_ENDPOINTS) >= 65536:
            _ENDPOINTS.clear()
        _ENDPOINTS[key] = text
    return text


_ENDPOINTS: dict[tuple[bytes, int], str] = {}  # a capture holds few endpoints, seen again and again
_endpoint = format_endpoint


def _ip_offset(linktype: int, data: bytes) -> tuple[int, int] | None:
    """(offset of the IP header, IP version or 0 when unknown) for a link type."""
    if linktype == LINKTYPE_ETHERNET:
        pos = 12
        if len(data) < 14:
            return None
        etype = (data[12] << 8) | data[13]
        while etype in _ETH_VLAN:
            pos += 4
            if len(data) < pos + 2:
                return None
            etype = (data[pos] << 8) | data[pos + 1]
        pos += 2
    elif linktype == LINKTYPE_LINUX_SLL:
        if len(data) < 16:
            return None
        etype = (data[14] << 8) | data[15]
        pos = 16
    elif linktype == LINKTYPE_LINUX_SLL2:
        if len(data) < 20:
            return None
        etype = (data[0] << 8) | data[1]
        pos = 20
    elif linktype in RAW_LINKTYPES:
        return (0, 0)
    elif linktype == LINKTYPE_IPV4:
        return (0, 4)
    elif linktype == LINKTYPE_IPV6:
        return (0, 6)
    elif linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        if len(data) < 4:
            return None
        fam = struct.unpack_from(">I" if linktype == LINKTYPE_LOOP else "<I", data)[0]
        if fam > 0xFFFF:  # NULL is host order: a big-endian writer
            fam = struct.unpack_from(">I", data)[0]
        if fam == 2:
            return (4, 4)
        if fam in _AF_INET6_BSD:
            return (4, 6)
        return None
    else:
        raise ValueError(linktype)
    if etype == ETHERTYPE_IPV4:
        return (pos, 4)
    if etype == ETHERTYPE_IPV6:
        return (pos, 6)
    return None


def decode_packet(packet: RawPacket) -> TcpSegment | PacketProblem | None:
    """The TCP segment in ``packet``, a problem to report, or None (not TCP over IP)."""
    data = packet.data
    off = packet.file_offset
    ts = packet.timestamp_ns
    try:
        found = _ip_offset(packet.linktype, data)
    except ValueError:
        return PacketProblem(off, ts, f"unsupported link type {packet.linktype}")
    if found is None:
        if packet.truncated and len(data) < 20:
            return PacketProblem(off, ts, "link-layer header cut short by the snaplen")
        return None
    pos, version = found
    if pos >= len(data):
        return PacketProblem(off, ts, "packet cut short before its IP header")
    if version == 0:
        version = data[pos] >> 4
    if version == 4 and len(data) >= pos + 40 and data[pos] == 0x45:
        # the common case in one unpack: IPv4 without options, TCP
        _, total, frag, proto, src_ip, dst_ip, sport, dport, seq, ack, doff, flags = _FAST_V4.unpack_from(data, pos)
        if proto == 6 and not frag & 0x3FFF and total >= 40:
            hlen = (doff >> 4) * 4
            ip_end = pos + total
            start = pos + 20 + hlen
            if hlen >= 20 and start <= ip_end and len(data) >= start:
                return TcpSegment(ts, _endpoint(src_ip, sport), _endpoint(dst_ip, dport), seq, ack, flags,
                                  data[start:ip_end], ip_end - start, off)
    # the IP layer's end: bytes after it (Ethernet padding) are not payload
    if version == 4:
        if len(data) < pos + 20:
            return PacketProblem(off, ts, "IPv4 header cut short by the snaplen")
        b0 = data[pos]
        if b0 >> 4 != 4:
            return PacketProblem(off, ts, f"bad IPv4 version nibble {b0 >> 4}")
        ihl = (b0 & 0x0F) * 4
        total = (data[pos + 2] << 8) | data[pos + 3]
        if ihl < 20 or total < ihl:
            return PacketProblem(off, ts, f"bad IPv4 header (ihl {ihl}, total length {total})")
        if data[pos + 9] != 6:
            return None
        frag = (data[pos + 6] << 8) | data[pos + 7]
        src_ip = data[pos + 12 : pos + 16]
        dst_ip = data[pos + 16 : pos + 20]
        if frag & 0x3FFF:  # MF or a fragment offset
            return PacketProblem(
                off, ts, f"IPv4 fragment {ipaddress.IPv4Address(src_ip)} -> {ipaddress.IPv4Address(dst_ip)} (fragments are not reassembled)"
            )
        tcp = pos + ihl
        ip_end = pos + total if total else len(data)  # 0: a TSO-offloaded capture
    elif version == 6:
        if len(data) < pos + 40:
            return PacketProblem(off, ts, "IPv6 header cut short by the snaplen")
        plen = (data[pos + 4] << 8) | data[pos + 5]
        nxt = data[pos + 6]
        src_ip = data[pos + 8 : pos + 24]
        dst_ip = data[pos + 24 : pos + 40]
        ip_end = pos + 40 + plen if plen else len(data)  # 0: a jumbogram (or offload)
        tcp = pos + 40
        while nxt != 6:
            if nxt == _IPV6_FRAGMENT:
                return PacketProblem(off, ts, f"IPv6 fragment {format_endpoint(src_ip, 0)[:-2]} (fragments are not reassembled)")
            if nxt not in _IPV6_EXT:
                return None  # UDP, ICMPv6, no next header, ESP, ...
            if len(data) < tcp + 2:
                return PacketProblem(off, ts, "IPv6 extension header cut short by the snaplen")
            hlen = (data[tcp + 1] + 2) * 4 if nxt == 51 else (data[tcp + 1] + 1) * 8
            nxt = data[tcp]
            tcp += hlen
    else:
        return PacketProblem(off, ts, f"bad IP version {version}")
    if len(data) < tcp + 20:
        if ip_end < tcp + 20:
            return PacketProblem(off, ts, "malformed TCP header (IP length too short)")
        return PacketProblem(off, ts, "TCP header cut short by the snaplen")
    sport, dport, seq, ack, doff, flags = TCP_HEADER.unpack_from(data, tcp)
    hlen = (doff >> 4) * 4
    if hlen < 20 or tcp + hlen > ip_end:
        return PacketProblem(off, ts, f"malformed TCP header (data offset {hlen})")
    start = tcp + hlen
    if len(data) < start:
        return PacketProblem(off, ts, "TCP options cut short by the snaplen")
    length = ip_end - start
    payload = data[start : min(ip_end, len(data))]
    return TcpSegment(ts, format_endpoint(src_ip, sport), format_endpoint(dst_ip, dport), seq, ack, flags, payload, length, off)
