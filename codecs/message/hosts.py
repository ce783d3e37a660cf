"""Socket addresses as RocketMQ writes them: 4 or 16 IP bytes then an ``i32`` port.

Records (BORNHOST, STOREHOST) and offset message ids carry addresses this way. Java
reads 16 bytes of an IPv4-mapped address (``::ffff:a.b.c.d``) back as an
``Inet4Address``, and parses such a string to one too, so both directions here map it to
plain IPv4 (4 bytes, ``"a.b.c.d"``). Conversions are cached: a broker sees few distinct
hosts and asks again and again.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import NamedTuple

from ..errors import MessageEncodeError

__all__ = ["HostAddress", "bytes_to_ip", "ip_to_bytes", "is_ipv6"]


class HostAddress(NamedTuple):
    """An IP address (text, no host names) and a port, like Java's ``InetSocketAddress``."""

    ip: str
    port: int

    def __str__(self) -> str:
        # RemotingHelper.parseSocketAddressAddr style: "ip:port" (no brackets for v6).
        return f"{self.ip}:{self.port}"


@lru_cache(maxsize=1024)
def ip_to_bytes(ip: str) -> bytes:
    """The 4 (IPv4) or 16 (IPv6) bytes of ``ip``; :class:`MessageEncodeError` if not an IP."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        raise MessageEncodeError(f"not an IP address: {ip!r}") from None
    if addr.version == 6 and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.packed
    return addr.packed


@lru_cache(maxsize=1024)
def bytes_to_ip(raw: bytes) -> str:
    """Text form of 4 or 16 address bytes (IPv4-mapped IPv6 comes back as IPv4)."""
    if len(raw) == 4:
        return "%d.%d.%d.%d" % (raw[0], raw[1], raw[2], raw[3])
    addr = ipaddress.IPv6Address(raw)
    mapped = addr.ipv4_mapped
    return str(mapped) if mapped is not None else str(addr)


def is_ipv6(ip: str) -> bool:
    """Whether ``ip`` needs the 16-byte (``*_V6_FLAG``) layout."""
    return len(ip_to_bytes(ip)) == 16
