"""Remote-address patterns of RocketMQ ACL (Java 4.9.8's ``RemoteAddressStrategyFactory``
and the address helpers of ``AclUtils``), for ``globalWhiteRemoteAddresses`` and an
account's ``whiteRemoteAddress``.

:func:`address_matcher` turns a pattern into a predicate over a client's host (no
port), as Java's factory turns it into a strategy:

- blank: matches nothing; ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: matches every host;
- ``192.168.0.{1,2,3}`` (``{}`` last), ``a,b,c``: one of these hosts;
- ``192.168.*.*``, ``192.168.1.10-20``, ``1050::0005:600:300c:*``: a range in the first
  part that is ``*`` or ``lo-hi`` (the parts after it ignored), IPv4 or IPv6;
- anything else: one IPv4 or IPv6 host.

A pattern Java refuses raises :class:`~.permission.AclConfigError` with Java's text.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from .permission import AclConfigError

__all__ = ["AddressMatcher", "address_matcher", "expand_ip", "host_of", "loopback_only"]

AddressMatcher = Callable[[str], bool]


def host_of(remote_addr: str | None) -> str | None:
    """``PlainAccessValidator.parse``: the host of ``host:port`` (brackets dropped)."""
    if remote_addr is None:
        return None
    host = remote_addr.rpartition(":")[0] if ":" in remote_addr else remote_addr
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def loopback_only(host: str) -> bool:
    """A server bound to ``host`` is reachable from this machine only: a loopback address
    (``127.0.0.0/8``, ``::1``, ``localhost``). The wildcard (``""``, ``0.0.0.0``,
    ``::``), any other address and any other name: reachable from elsewhere."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_v4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
        return True
    except ValueError:
        return False


def _is_v6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
        return True
    except ValueError:
        return False


def expand_ip(address: str, part: int) -> str:
    """``AclUtils.expandIP``: ``::`` widened to ``part`` groups, each padded to 4, upper case."""
    address = address.upper()
    pad = part - address.count(":")
    if pad > 0:
        address = address.replace("::", ":" + ":" * pad)
    return ":".join(group.rjust(4, "0") for group in address.split(":"))


def _never(host: str) -> bool:
    return False


def _always(host: str) -> bool:
    return True


def address_matcher(pattern: object) -> AddressMatcher:
    """The predicate for ``pattern`` (see the module docstring)."""
    text = "" if pattern is None else str(pattern)
    if not text.strip():
        return _never
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _always
    if text.endswith("}"):
        if ":" in text:
            last = [p for p in text.split(":") if p][-1]
        else:
            parts = [p for p in text.split(".") if p]
            if len(parts) < 4:
                raise AclConfigError("MultipleRemoteAddressStrategy has got a/some wrong format IP(s) ")
            last = parts[-1]
        if not last.startswith("{"):
            raise AclConfigError("MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress")
        prefix = text[: text.index("{")]
        return _multiple([prefix + p for p in last[1:-1].split(",") if p])
    if "," in text:
        return _multiple([p for p in text.split(",") if p])
    if "*" in text or "-" in text:
        return _range(text)
    if not (_is_v4(text) or _is_v6(text)):
        raise AclConfigError(f"Netaddress examine Exception netaddress is {text}")
    want = expand_ip(text, 8).upper()
    return lambda host: expand_ip(host, 8).upper() == want


def _multiple(addresses: list[str]) -> AddressMatcher:
    hosts = set()
    for address in addresses:
        if _is_v4(address):
            hosts.add(address)
        elif _is_v6(address):
            hosts.add(expand_ip(address, 8))
        else:
            raise AclConfigError(f"Netaddress examine Exception netaddress is {address}")

    def match(host: str) -> bool:
        return (expand_ip(host, 8) if _is_v6(host) else host) in hosts

    return match


def _scope_error(address: str) -> AclConfigError:
    return AclConfigError(f"Netaddress examine scope Exception netaddress is {address}")


def _bounds(value: str, v6: bool) -> tuple[int, int] | None:
    """A part's range (``*`` or ``lo-hi``), or None for a plain part."""
    top = 0xFFFF if v6 else 255
    if value == "*":
        return 0, top
    if "-" in value:
        if value.startswith("-"):
            raise AclConfigError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value} ")
        try:
            lo_text, hi_text = [p for p in value.split("-") if p][:2]
            lo, hi = int(lo_text, 16 if v6 else 10), int(hi_text, 16 if v6 else 10)
        except ValueError:
            raise AclConfigError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value} ") from None
        if not (0 <= lo <= hi <= top):
            raise AclConfigError(
                f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {lo} , end is {hi}"
            )
        return lo, hi
    return None


def _range(text: str) -> AddressMatcher:
    if ":" in text:
        return _range_v6(text)
    parts = [p for p in text.split(".") if p]
    if len(parts) != 4:
        raise _scope_error(text)
    for index in (1, 2, 3):
        bounds = _bounds(parts[index].strip(), False)
        if bounds is not None and bounds[1] > 0:
            break
    else:
        raise _scope_error(text)
    for part in parts[:index]:
        if not part.strip().isdigit() or int(part) > 255:
            raise _scope_error(text)
    head = "".join(p.strip() + "." for p in parts[:index])
    lo, hi = bounds

    def match(host: str) -> bool:
        if not _is_v4(host) or not host.startswith(head):
            return False
        octets = host.split(".")
        return lo <= int(octets[index]) <= hi

    return match


def _range_v6(text: str) -> AddressMatcher:
    asterisk, minus = text.find("*"), text.find("-")
    if asterisk > -1 and asterisk != len(text) - 1:
        raise _scope_error(text)
    parts = [p for p in text.split(":") if p]
    for i in range(1, len(parts)):
        bounds = _bounds(parts[i].strip(), True)
        if bounds is not None and bounds[1] > 0:
            break
    else:
        raise _scope_error(text)
    if "*" in text and "-" in text:
        last = text.rindex(":")
        head = expand_ip(text[: text[:last].rindex(":")], 6)
    elif "*" not in text and "-" not in text:
        head = expand_ip(text, 8)
    else:
        head = expand_ip(text[: text.rindex(":")], 7)
    del minus
    index = len([p for p in head.split(":") if p])
    lo, hi = bounds

    def match(host: str) -> bool:
        if not _is_v6(host):
            return False
        full = expand_ip(host, 8).upper()
        if not full.startswith(head):
            return False
        return lo <= int(full[5 * index: 5 * index + 4], 16) <= hi

    return match
