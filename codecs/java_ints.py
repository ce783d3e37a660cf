"""Java's integer bounds: ``Integer.MIN_VALUE`` / ``MAX_VALUE`` and ``Long``'s.

The one home of these numbers: header parsing (``custom_header``), bodies, SQL92
literals and the broker's "no value" sentinels (``Long.MAX_VALUE``) all use them."""

from __future__ import annotations

__all__ = ["INT32_MIN", "INT32_MAX", "INT64_MIN", "INT64_MAX"]

#: ``Integer.MIN_VALUE``, ``Integer.MAX_VALUE``
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: ``Long.MIN_VALUE``, ``Long.MAX_VALUE``
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
