"""Writing pcap files: the inverse of :mod:`.pcap` and :mod:`.pcap_decode`, for tests and
synthetic captures. Pure: it returns bytes.

- :class:`PcapWriter`: the file header and records (either byte order, micro- or
  nanosecond timestamps, a snaplen that cuts records as tcpdump's ``-s`` does).
- :func:`build_tcp_packet`: Ethernet / SLL / SLL2 / raw / NULL link layer + IPv4 or IPv6
  + TCP bytes from ``host:port`` endpoints, sequence numbers, flags and payload.
- :class:`PcapngWriter`: pcapng blocks (sections, interfaces with their own link types and
  timestamp resolutions, enhanced and simple packets), for tests.
- :class:`TcpFlow`: one connection's packets with its sequence numbers tracked: the
  handshake, data cut into segments, FIN.
"""

from __future__ import annotations

import ipaddress
import struct

from .pcap import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    PCAP_MAGIC_NS,
    PCAP_MAGIC_US,
)
from .pcap_decode import ACK, FIN, PSH, SYN

__all__ = ["PcapWriter", "PcapngWriter", "build_tcp_packet", "TcpFlow"]

_TCP = struct.Struct(">HHIIBB")
_RAW_TYPES = (LINKTYPE_RAW, 12, 14)
_ETH_IPV4 = 0x0800
_ETH_IPV6 = 0x86DD


class PcapWriter:
    """Builds a classic pcap file (microsecond or nanosecond timestamps, either byte order).

    >>> w = PcapWriter(LINKTYPE_RAW)
    >>> len(w.header())
    24
    """

    def __init__(self, linktype: int = LINKTYPE_ETHERNET, *, nanos: bool = False, endian: str = "<", snaplen: int = 262144) -> None:
        self.linktype = linktype
        self.nanos = nanos
        self.endian = endian
        self.snaplen = snaplen
        self._rec = struct.Struct(endian + "IIII")

    def header(self) -> bytes:
        magic = PCAP_MAGIC_NS if self.nanos else PCAP_MAGIC_US
        return struct.pack(self.endian + "IHHiIII", magic, 2, 4, 0, 0, self.snaplen, self.linktype)

    def record(self, timestamp_ns: int, data: bytes, orig_len: int | None = None) -> bytes:
        """One packet record (cut to the snaplen, as tcpdump would)."""
        sec, ns = divmod(timestamp_ns, 1_000_000_000)
        frac = ns if self.nanos else ns // 1000
        cut = data[: self.snaplen]
        return self._rec.pack(sec, frac, len(cut), len(data) if orig_len is None else orig_len) + cut

    def tcp(self, timestamp_ns: int, src: str, dst: str, seq: int, ack: int, flags: int, payload: bytes = b"") -> bytes:
        """One TCP packet record in this file's link type."""
        return self.record(timestamp_ns, build_tcp_packet(src, dst, seq, ack, flags, payload, linktype=self.linktype))


def _split_endpoint(endpoint: str) -> tuple[bytes, int]:
    host, _, port = endpoint.rpartition(":")
    ip = ipaddress.ip_address(host.strip("[]"))
    return ip.packed, int(port)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def build_tcp_packet(
    src: str,
    dst: str,
    seq: int,
    ack: int,
    flags: int,
    payload: bytes = b"",
    *,
    linktype: int = LINKTYPE_ETHERNET,
    window: int = 65535,
    checksums: bool = False,
) -> bytes:
    """The bytes of one TCP packet from ``host:port`` endpoints (IPv4 or ``[v6]:port``),
    with the link layer ``linktype`` asks for (Ethernet, SLL, SLL2, raw, IPv4/IPv6).
    Checksums are computed only when asked (pcap readers, this one included, ignore them)."""
    sip, sport = _split_endpoint(src)
    dip, dport = _split_endpoint(dst)
    if len(sip) != len(dip):
        raise ValueError("src and dst must be the same IP version")
    tcp = bytearray(_TCP.pack(sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags) + struct.pack(">HHH", window, 0, 0))
    if len(sip) == 4:
        ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6, 0, sip, dip))
        if checksums:
            struct.pack_into(">H", ip, 10, _checksum(bytes(ip)))
            pseudo = sip + dip + struct.pack(">BBH", 0, 6, len(tcp) + len(payload))
        etype = _ETH_IPV4
    else:
        ip = bytearray(struct.pack(">IHBB16s16s", 6 << 28, len(tcp) + len(payload), 6, 64, sip, dip))
        if checksums:
            pseudo = sip + dip + struct.pack(">IxxxB", len(tcp) + len(payload), 6)
        etype = _ETH_IPV6
    if checksums:
        struct.pack_into(">H", tcp, 16, _checksum(pseudo + bytes(tcp) + payload))
    packet = bytes(ip) + bytes(tcp) + payload
    if linktype == LINKTYPE_ETHERNET:
        return b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01" + struct.pack(">H", etype) + packet
    if linktype == LINKTYPE_LINUX_SLL:
        return struct.pack(">HHH8sH", 0, 772, 6, b"\x00" * 8, etype) + packet
    if linktype == LINKTYPE_LINUX_SLL2:
        return struct.pack(">HHIHBB8s", etype, 0, 1, 772, 0, 6, b"\x00" * 8) + packet
    if linktype in (*_RAW_TYPES, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return packet
    if linktype == LINKTYPE_NULL:
        return struct.pack("<I", 2 if etype == _ETH_IPV4 else 30) + packet
    if linktype == LINKTYPE_LOOP:
        return struct.pack(">I", 2 if etype == _ETH_IPV4 else 30) + packet
    raise ValueError(f"cannot build packets for link type {linktype}")


class TcpFlow:
    """Packet records of one connection with its sequence numbers kept.

    >>> w = PcapWriter()
    >>> flow = TcpFlow(w, "10.0.0.1:40000", "10.0.0.2:10911")
    >>> records = flow.handshake(0) + flow.send(1000, "client", b"abc") + flow.close(2000)
    >>> len(records)
    6
    """

    def __init__(self, writer: PcapWriter, client: str, server: str, *, client_isn: int = 1000, server_isn: int = 5000, mss: int = 1460) -> None:
        self.writer = writer
        self.client = client
        self.server = server
        self.seq = {"client": client_isn & 0xFFFFFFFF, "server": server_isn & 0xFFFFFFFF}
        self.mss = mss

    def _ends(self, side: str) -> tuple[str, str, str]:
        other = "server" if side == "client" else "client"
        return (self.client, self.server, other) if side == "client" else (self.server, self.client, other)

    def handshake(self, ts: int) -> list[bytes]:
        w, c, s = self.writer, self.seq["client"], self.seq["server"]
        out = [
            w.tcp(ts, self.client, self.server, c, 0, SYN),
            w.tcp(ts + 1000, self.server, self.client, s, c + 1, SYN | ACK),
            w.tcp(ts + 2000, self.client, self.server, c + 1, s + 1, ACK),
        ]
        self.seq = {"client": (c + 1) & 0xFFFFFFFF, "server": (s + 1) & 0xFFFFFFFF}
        return out

    def segments(self, side: str, data: bytes) -> list[tuple[int, bytes]]:
        """``data`` cut into (seq, payload) segments of at most ``mss`` bytes; advances
        the side's sequence number."""
        out = []
        seq = self.seq[side]
        for i in range(0, len(data), self.mss):
            chunk = data[i : i + self.mss]
            out.append((seq, chunk))
            seq = (seq + len(chunk)) & 0xFFFFFFFF
        self.seq[side] = seq
        return out

    def send(self, ts: int, side: str, data: bytes) -> list[bytes]:
        """The records carrying ``data`` from ``side`` ("client" or "server"), in order."""
        src, dst, other = self._ends(side)
        ack = self.seq[other]
        return [self.writer.tcp(ts, src, dst, seq, ack, ACK | PSH, chunk) for seq, chunk in self.segments(side, data)]

    def close(self, ts: int) -> list[bytes]:
        w, c, s = self.writer, self.seq["client"], self.seq["server"]
        out = [
            w.tcp(ts, self.client, self.server, c, s, FIN | ACK),
            w.tcp(ts + 1000, self.server, self.client, s, c + 1, FIN | ACK),
            w.tcp(ts + 2000, self.client, self.server, c + 1, s + 1, ACK),
        ]
        self.seq = {"client": (c + 1) & 0xFFFFFFFF, "server": (s + 1) & 0xFFFFFFFF}
        return out


class PcapngWriter:
    """Builds pcapng blocks: a section header, interfaces (each with its link type and
    timestamp resolution), enhanced and simple packet blocks, any other block."""

    def __init__(self, *, endian: str = "<") -> None:
        self.endian = endian
        self._resol: list[int] = []

    def block(self, btype: int, body: bytes) -> bytes:
        body += b"\x00" * (-len(body) % 4)
        total = 12 + len(body)
        return struct.pack(self.endian + "II", btype, total) + body + struct.pack(self.endian + "I", total)

    def _option(self, code: int, value: bytes) -> bytes:
        return struct.pack(self.endian + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)

    def section(self) -> bytes:
        self._resol = []
        return self.block(0x0A0D0D0A, struct.pack(self.endian + "IHHq", 0x1A2B3C4D, 1, 0, -1))

    def interface(self, linktype: int, *, tsresol: int | None = None, tsoffset: int = 0, snaplen: int = 0) -> bytes:
        """An interface; ``tsresol`` is pcapng's ``if_tsresol`` byte (6 = microseconds,
        the default; 9 = nanoseconds; 0x80 | n = 2**-n seconds)."""
        opts = b""
        if tsresol is not None:
            opts += self._option(9, bytes([tsresol]))
        if tsoffset:
            opts += self._option(14, struct.pack(self.endian + "q", tsoffset))
        if opts:
            opts += self._option(0, b"")
        r = 6 if tsresol is None else tsresol
        self._resol.append(2 ** (r & 0x7F) if r & 0x80 else 10**r)
        return self.block(1, struct.pack(self.endian + "HHI", linktype, 0, snaplen) + opts)

    def packet(self, interface: int, timestamp_ns: int, data: bytes, orig_len: int | None = None) -> bytes:
        """An enhanced packet block; the timestamp in the interface's units."""
        units = timestamp_ns * self._resol[interface] // 1_000_000_000
        return self.block(6, struct.pack(self.endian + "IIIII", interface, units >> 32, units & 0xFFFFFFFF, len(data), len(data) if orig_len is None else orig_len) + data)

    def simple_packet(self, data: bytes, orig_len: int | None = None) -> bytes:
        return self.block(3, struct.pack(self.endian + "I", len(data) if orig_len is None else orig_len) + data)
