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

from collections.abc import Container, Iterable, Iterator, MutableMapping
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


def decode_properties(text: str) -> dict[str, str]:
    """Parse a message's properties string exactly as 4.9.8's
    ``string2messageProperties`` does (into a ``HashMap``: :meth:`JavaHashMap.from_properties`):
    ``k\\x01v`` items split on ``\\x02``; an item with an empty key or value (or no
    ``\\x01``) is skipped; a repeated key keeps its first place and its last value."""
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split("\x02"):
        key, _, value = item.partition("\x01")
        if key and value:  # no separator leaves value empty too
            result[key] = value
    return result


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


#: (capacity, *keys in insertion order) -> :class:`JavaHashMap`'s order; bounded likewise
_MAP_ORDERS: dict[tuple, tuple[str, ...]] = {}


def _bucket_order(keys: Iterable[str], capacity: int) -> tuple[str, ...]:
    """``keys`` (in insertion order) by bucket of a ``capacity``-wide table."""
    mask = capacity - 1
    # sorted() is stable, so keys sharing a bucket keep their insertion order.
    return tuple(sorted(keys, key=lambda k: _spread(k) & mask))


def _map_order(items: dict[str, str], capacity: int) -> tuple[str, ...]:
    """The keys of ``items`` (in insertion order) in the order of a HashMap of
    ``capacity`` buckets; cached per capacity and key sequence (a broker rewrites the
    same few property sets message after message)."""
    shape = (capacity, *items)
    order = _MAP_ORDERS.get(shape)
    if order is None:
        order = _bucket_order(items, capacity)
        if len(_MAP_ORDERS) >= _MAX_ORDERS:
            _MAP_ORDERS.clear()
        _MAP_ORDERS[shape] = order
    return order


def hashmap_properties(items: dict[str, str], capacity: int) -> str:
    """``messageProperties2String`` of a HashMap of ``capacity`` buckets (a power of
    two) holding ``items``, given in insertion order: ``k\\x01v`` items joined by
    ``\\x02``, in the map's iteration order."""
    return "\x02".join([f"{k}\x01{items[k]}" for k in _map_order(items, capacity)])


def _order(keys: tuple[str, ...]) -> tuple[str, ...]:
    order = _ORDERS.get(keys)
    if order is None:
        order = _bucket_order(keys, hashmap_capacity(len(keys)))
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


class JavaHashMap(MutableMapping[str, str]):
    """A ``java.util.HashMap<String, String>`` as RocketMQ's broker uses one for a
    message's properties: iteration (and :meth:`to_properties`) in HashMap order.

    The model: keys in insertion order (a put of a present key keeps its place; a key
    removed and put again goes to the end, as to the tail of its bucket), and the table's
    capacity, which doubles while the size passes 3/4 of it and never shrinks. The order
    is then by bucket, insertion order within one (treeified buckets, 8 keys in one
    bucket of a 64-wide table, are not modelled). :meth:`from_properties` parses as
    ``MessageDecoder.string2messageProperties``; :meth:`to_properties` writes as
    ``messageProperties2String`` (4.9.8: no trailing separator)."""

    __slots__ = ("_items", "_capacity")

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items: dict[str, str] = {}
        self._capacity = 16
        for k, v in items:
            self[k] = v

    @classmethod
    def from_properties(cls, text: str) -> JavaHashMap:
        """``string2messageProperties`` (:func:`decode_properties`)."""
        items = decode_properties(text)
        m = cls.__new__(cls)
        m._items = items
        m._capacity = hashmap_capacity(len(items))  # (no key removed: the size is the largest it was)
        return m

    def copy(self) -> JavaHashMap:
        m = JavaHashMap.__new__(JavaHashMap)
        m._items = dict(self._items)
        m._capacity = self._capacity
        return m

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __setitem__(self, key: str, value: str) -> None:
        items = self._items
        items[key] = value
        if len(items) > self._capacity * 3 // 4:
            self._capacity *= 2

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    # the MutableMapping mixins' get / pop / in go through __getitem__ and KeyError: these
    # are the dict's own (a send's properties meet them on the broker's send path)
    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._items.get(key, default)

    def pop(self, key: str, *default: str | None) -> str | None:  # type: ignore[override]
        return self._items.pop(key, *default)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(_map_order(self._items, self._capacity))

    def to_properties(self, *, without: Container[str] = ()) -> str:
        """``messageProperties2String`` (``without``: keys left out, the others' order
        unchanged)."""
        items = self._items
        if not without:
            return hashmap_properties(items, self._capacity)
        return "\x02".join([f"{k}\x01{items[k]}" for k in _map_order(items, self._capacity) if k not in without])

    def __repr__(self) -> str:
        return f"JavaHashMap({{{', '.join(f'{k!r}: {v!r}' for k, v in self.items())}}}, capacity={self._capacity})"


from .accel import accelerated  # noqa: E402

java_string_hash = accelerated(java_string_hash)
decode_properties = accelerated(decode_properties)
hashmap_properties = accelerated(hashmap_properties)
