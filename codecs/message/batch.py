"""Batch bodies (``MessageDecoder.encodeMessages`` / ``decodeMessages``, 4.9.8).

A batch body is messages back to back, each::

    TOTALSIZE i32 | MAGICCODE i32 | BODYCRC i32 | FLAG i32 | BODYLEN i32 | BODY
    | PROPLEN i16 | PROPERTIES (UTF-8)

with ``TOTALSIZE = 22 + BODYLEN + PROPLEN``. Java's ``encodeMessage`` writes 0 for both
MAGICCODE and BODYCRC (the C++ client too); the broker computes each body's CRC itself.
Topic, queue and the rest come from the send request's header, not from the body.

Java's readers ignore TOTALSIZE, MAGICCODE and BODYCRC and trust the lengths. The
decoder here checks every length against the buffer and, by default, that TOTALSIZE
matches (``check_total_size=False`` to accept what Java would). Anything malformed raises
:class:`MessageDecodeError`; nothing else escapes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ..errors import MessageDecodeError
from ..errors import MessageEncodeError
from .message import Message
from .properties import decode_properties_bytes, encode_properties_bytes

__all__ = [
    "BATCH_HEADER_SIZE",
    "BatchEntry",
    "batch_message_size",
    "decode_batch",
    "encode_batch",
    "encode_batch_message",
    "iter_batch",
    "iter_batch_entries",
]

_HEAD = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_I16 = struct.Struct(">h")
#: Fixed bytes of one batch entry: 5 ``i32`` before the body and the ``i16`` PROPLEN.
BATCH_HEADER_SIZE = _HEAD.size + _I16.size


def _byte_view(data: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def batch_message_size(body_len: int, properties_len: int) -> int:
    """TOTALSIZE of one batch entry."""
    return BATCH_HEADER_SIZE + body_len + properties_len


def encode_batch_message(message: Message, *, java_order: bool = False) -> bytes:
    """``MessageDecoder.encodeMessage``: one entry (MAGICCODE and BODYCRC 0)."""
    props = encode_properties_bytes(message.properties, java_order=java_order)
    body = message.body
    try:
        head = _HEAD.pack(BATCH_HEADER_SIZE + len(body) + len(props), 0, 0, message.flag, len(body))
        props_len = _I16.pack(len(props))
    except struct.error as exc:
        raise MessageEncodeError(f"batch entry does not fit Java ints: {exc}") from None
    return b"".join((head, body, props_len, props))  # one copy of the body


def encode_batch(messages: Iterable[Message], *, java_order: bool = False) -> bytes:
    """``MessageDecoder.encodeMessages``: the entries back to back."""
    return b"".join([encode_batch_message(m, java_order=java_order) for m in messages])


class BatchEntry(NamedTuple):
    """One entry as views into the batch body, for a broker that copies bytes verbatim."""

    offset: int  #: where the entry starts in the body
    total_size: int
    magic_code: int
    body_crc: int
    flag: int
    body: memoryview
    properties: memoryview  #: raw UTF-8, exactly as sent


def iter_batch_entries(
    data: bytes | bytearray | memoryview, *, check_total_size: bool = True
) -> Iterator[BatchEntry]:
    """Walk a batch body without copying: one :class:`BatchEntry` per message."""
    view = _byte_view(data)
    end = len(view)
    pos = 0
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            raise MessageDecodeError(
                f"batch entry at {pos} truncated: {end - pos} bytes left, "
                f"an entry needs at least {BATCH_HEADER_SIZE}"
            )
        total, magic, crc, flag, body_len = _HEAD.unpack_from(view, pos)
        body_start = pos + _HEAD.size
        if body_len < 0 or body_len > end - body_start - _I16.size:
            raise MessageDecodeError(
                f"batch entry at {pos}: body length {body_len} does not fit the "
                f"{end - body_start - _I16.size} bytes left"
            )
        props_at = body_start + body_len
        (props_len,) = _I16.unpack_from(view, props_at)
        props_start = props_at + _I16.size
        if props_len < 0 or props_len > end - props_start:
            raise MessageDecodeError(
                f"batch entry at {pos}: properties length {props_len} does not fit the "
                f"{end - props_start} bytes left"
            )
        next_pos = props_start + props_len
        if check_total_size and total != next_pos - pos:
            raise MessageDecodeError(
                f"batch entry at {pos}: TOTALSIZE {total} but the entry is {next_pos - pos} bytes"
            )
        yield BatchEntry(
            pos, total, magic, crc, flag, view[body_start:props_at], view[props_start:next_pos]
        )
        pos = next_pos


def iter_batch(
    data: bytes | bytearray | memoryview, *, topic: str = "", check_total_size: bool = True
) -> Iterator[Message]:
    """``MessageDecoder.decodeMessages`` lazily: :class:`Message` objects (``topic`` given)."""
    for entry in iter_batch_entries(data, check_total_size=check_total_size):
        yield Message(
            topic,
            bytes(entry.body),
            entry.flag,
            decode_properties_bytes(entry.properties),
        )


def decode_batch(
    data: bytes | bytearray | memoryview, *, topic: str = "", check_total_size: bool = True
) -> list[Message]:
    """``MessageDecoder.decodeMessages``: every message of a batch body."""
    return list(iter_batch(data, topic=topic, check_total_size=check_total_size))
