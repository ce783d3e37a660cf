"""The body CRC RocketMQ stores in every record (``UtilAll.crc32``).

``java.util.zip.CRC32`` is the same CRC-32 as :func:`zlib.crc32`; RocketMQ keeps its low
31 bits (``(int) (crc.getValue() & 0x7FFFFFFF)``) so the value is a non-negative ``int``.
It covers the body bytes as stored, i.e. the compressed bytes of a compressed body.
"""

from __future__ import annotations

import zlib

__all__ = ["body_crc"]


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """``UtilAll.crc32(body)``: CRC-32 of ``body`` masked to 31 bits (``0`` for an empty body)."""
    return zlib.crc32(body) & 0x7FFFFFFF
