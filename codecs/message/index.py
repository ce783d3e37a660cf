"""The index file's entries, written from commit-log records (RocketMQ 4.9.8's
``IndexFile.putKey`` as ``IndexService.buildIndex`` calls it for each record).

An index file is a 40-byte header (begin/end store timestamps, begin/end commit-log
offsets as ``long``; slots used, entries as ``int``; big-endian), ``slot_num`` 4-byte
slots, then ``index_num`` 20-byte entries: the key's hash (``int``), the record's
commit-log offset (``long``), its store time in seconds after the file's first
(``int``), the previous entry of the same slot (``int``). Entry 0 is never used.

A key is ``<topic>#<key>``, hashed as Java's ``String.hashCode`` made non-negative
(``Math.abs``; ``Integer.MIN_VALUE`` reads 0). A record gets its ``UNIQ_KEY`` and each
space-separated ``KEYS`` entry indexed (the properties as :func:`.get_property` reads
them), a rolled-back transaction record nothing.

Everything here works on buffers the caller maps (the store's files): no I/O. The
header is also kept in a list of six ints (the order above), which the caller reads;
each put updates it and writes it back to the buffer, as Java's header is written on
every put, so a killed process leaves a file whose header matches its entries.
:func:`index_records` is compiled (a twin in ``codecs/_accel.pyx``): the index reads
every record the broker stores, and in Python it cost a third of the send path's CPU.
"""

from __future__ import annotations

import struct

from ..java_hashmap import java_string_hash
from ..java_ints import INT32_MAX
from .properties import get_property
from .record import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, Buffer, dispatch_fields, peek_record
from .sysflag import TRANSACTION_ROLLBACK_TYPE

__all__ = [
    "INDEX_HEADER_SIZE",
    "INDEX_SLOT_SIZE",
    "INDEX_ENTRY_SIZE",
    "INDEX_DONE",
    "INDEX_FULL",
    "INDEX_BLANK",
    "index_key_hash",
    "index_records",
    "put_index_key",
    "write_index_header",
]

INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")

#: :func:`index_records` stopped at ``limit`` or after ``max_records``
INDEX_DONE = 0
#: the index file cannot take the next record's keys (a new file takes them)
INDEX_FULL = 1
#: the next record is the segment's blank tail (the next segment follows)
INDEX_BLANK = 2


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``Math.abs(key.hashCode())``, 0 for MIN_VALUE."""
    h = java_string_hash(key)
    if h & 0x80000000:
        h = (1 << 32) - h
        if h & 0x80000000:  # Math.abs(Integer.MIN_VALUE) stays negative
            return 0
    return h


def write_index_header(index: Buffer, header: list[int]) -> None:
    """The six header fields into the file's first 40 bytes."""
    _HEADER.pack_into(index, 0, *header)


def put_index_key(index: Buffer, slot_num: int, index_num: int, header: list[int],
                  key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
    """``putKey``: one entry for ``key_hash`` (from :func:`index_key_hash`); False when
    the file is full. ``header`` is updated and written back."""
    count = header[5]
    if count >= index_num:
        return False
    slot_at = INDEX_HEADER_SIZE + (key_hash % slot_num) * INDEX_SLOT_SIZE
    entry_at = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE + count * INDEX_ENTRY_SIZE
    (prev,) = _SLOT.unpack_from(index, slot_at)
    if prev >= count:
        if prev == count:  # a put cut short (the process killed) after its slot: its
            prev = _ENTRY.unpack_from(index, entry_at)[3]  # entry is replaced, chain kept
        if prev <= 0 or prev >= count:
            prev = 0
    elif prev < 0:
        prev = 0
    begin = header[0]
    diff = 0 if begin <= 0 else min(INT32_MAX, max(0, (store_timestamp - begin) // 1000))
    _ENTRY.pack_into(index, entry_at, key_hash, phy_offset, diff, prev)
    _SLOT.pack_into(index, slot_at, count)
    if count <= 1:
        header[2] = phy_offset
        header[0] = store_timestamp
    if prev == 0:
        header[4] += 1
    header[5] = count + 1
    header[3] = phy_offset
    header[1] = store_timestamp
    _HEADER.pack_into(index, 0, *header)
    return True


def _keys(topic: str, props: str) -> list[str]:
    out = []
    uniq = get_property(props, "UNIQ_KEY")
    if uniq:
        out.append(f"{topic}#{uniq}")
    keys = get_property(props, "KEYS")
    if keys:
        out.extend(f"{topic}#{key}" for key in keys.split(" ") if key)
    return out


def index_records(log: Buffer, pos: int, limit: int, index: Buffer, slot_num: int,
                  index_num: int, header: list[int], max_records: int) -> tuple[int, int, int, int]:
    """Index the records of ``log`` (a commit-log segment) from ``pos`` (a record
    boundary) up to ``limit``, each under its own commit-log offset, at most
    ``max_records`` of them, into ``index`` (a file of ``slot_num`` slots and
    ``index_num`` entries, its ``header`` list). Returns ``(pos, records, keys,
    status)``: where it stopped, the records read (rolled-back ones too), the keys put,
    and :data:`INDEX_DONE`, :data:`INDEX_FULL` (the record at ``pos`` has keys that do not
    fit; a file with no entry yet takes what fits and drops the rest) or
    :data:`INDEX_BLANK`. A record that is not whole and valid raises, as
    :func:`.dispatch_fields` does."""
    records = keys_put = 0
    while records < max_records and pos + 8 <= limit:
        total, magic = peek_record(log, pos)
        if magic == BLANK_MAGIC_CODE:
            return pos, records, keys_put, INDEX_BLANK
        if magic != MESSAGE_MAGIC_CODE or total <= 0 or pos + total > limit:
            dispatch_fields(log, pos)  # raises, naming what is wrong
            raise ValueError(f"record at {pos} is not whole before {limit}")
        _total, topic, _q, _qo, phy, sys_flag, store_ts, props = dispatch_fields(log, pos)
        if sys_flag & TRANSACTION_ROLLBACK_TYPE != TRANSACTION_ROLLBACK_TYPE and props:
            keys = _keys(topic, props)
            if header[5] + len(keys) > index_num and header[5] > 1:
                return pos, records, keys_put, INDEX_FULL
            for key in keys:
                if not put_index_key(index, slot_num, index_num, header, index_key_hash(key), phy, store_ts):
                    break
                keys_put += 1
        records += 1
        pos += total
    return pos, records, keys_put, INDEX_DONE


from ..accel import accelerated  # noqa: E402

index_records = accelerated(index_records)
