"""Java's ``HashMap`` iteration order, for writing ext fields exactly as RocketMQ does.

RocketMQ keeps a command's ext fields in a ``java.util.HashMap``; both of its
serializers write them in that map's iteration order. To produce the same bytes
from a map we build ourselves (a custom header turned into ext fields), we order
the keys the way HashMap would: by bucket (``spread(hashCode) & (capacity - 1)``),
then by insertion order within a bucket. Capacity starts at 16 and doubles while
``size > 0.75 * capacity``, as HashMap resizes. Buckets that would be treeified
(more than 8 colliding keys in a table of 64 or more) are not modelled: RocketMQ's
headers never come near that.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit int (over UTF-16 code units)."""
    h = 0
    if s.isascii():
        for b in s.encode("ascii"):
            h = (31 * h + b) & 0xFFFFFFFF
        return h
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


@lru_cache(maxsize=4096)
def _spread(key: str) -> int:
    h = java_string_hash(key)
    return h ^ (h >> 16)


def hashmap_capacity(size: int) -> int:
    """Table size of a default-constructed HashMap after ``size`` insertions."""
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def hashmap_order(keys: Iterable[str]) -> list[str]:
    """Return ``keys`` (given in insertion order, no duplicates) in HashMap iteration order."""
    return list(_order(tuple(keys)))


#: Key sequence -> its HashMap order: a header class writes the same few key sets (its
#: fields, less those that are ``None``) command after command. Bounded: cleared when full.
_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}
_MAX_ORDERS = 4096


def _order(keys: tuple[str, ...]) -> tuple[str, ...]:
    order = _ORDERS.get(keys)
    if order is None:
        mask = hashmap_capacity(len(keys)) - 1
        # sorted() is stable, so keys sharing a bucket keep their insertion order.
        order = tuple(sorted(keys, key=lambda k: _spread(k) & mask))
        if len(_ORDERS) >= _MAX_ORDERS:
            _ORDERS.clear()
        _ORDERS[keys] = order
    return order


def hashmap_ordered(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A dict of ``items`` (later duplicates replace earlier ones) in HashMap order."""
    merged = dict(items)
    return hashmap_reordered(merged)


def hashmap_reordered(d: dict[str, str]) -> dict[str, str]:
    """``d`` in HashMap order: ``d`` itself when it is in that order already."""
    keys = tuple(d)
    order = _ORDERS.get(keys)
    if order is None:
        order = _order(keys)
    return d if order == keys else {k: d[k] for k in order}
