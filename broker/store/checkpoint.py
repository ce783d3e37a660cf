"""StoreCheckpoint: how far the commit log and the consume queues are known durable.

Java's file is 4 KiB, big-endian: physicMsgTimestamp ``i64`` at 0 (store time of the
last record flushed in the commit log), logicsMsgTimestamp at 8 (of the last record
whose consume-queue entry is flushed), indexMsgTimestamp at 16. Recovery after a crash
rescans from the last segment whose first record is older than the smaller of the first
two. Here the file also carries, from byte 64, a marker and the commit log's end as of
a clean shutdown (so a clean start need not scan), and a CRC of both parts. It is
replaced atomically (temp file + rename) rather than written through a map.
"""

from __future__ import annotations

import struct
import zlib

import attrs

from .atomic_file import write_atomic

__all__ = ["StoreCheckpoint"]

_FILE_SIZE = 4096
_JAVA = struct.Struct(">qqq")
_EXT = struct.Struct(">4sIq")  # magic, version, clean commit-log end (-1: not clean)
_EXT_AT = 64
_CRC_AT = _EXT_AT + _EXT.size
_MAGIC = b"TRCK"


@attrs.define(slots=True, eq=False)
class StoreCheckpoint:
    path: str
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    #: Commit-log end written at a clean shutdown; -1 otherwise.
    clean_commit_log_end: int = -1

    @classmethod
    def load(cls, path: str) -> StoreCheckpoint:
        """Read the file; a missing, short or corrupt file reads as all zeros."""
        cp = cls(path)
        try:
            with open(path, "rb") as f:
                data = f.read(_FILE_SIZE)
        except FileNotFoundError:
            return cp
        if len(data) < _JAVA.size:
            return cp
        cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = (
            _JAVA.unpack_from(data, 0)
        )
        if len(data) >= _CRC_AT + 4:
            magic, _version, end = _EXT.unpack_from(data, _EXT_AT)
            (crc,) = struct.unpack_from(">I", data, _CRC_AT)
            if magic == _MAGIC and crc == zlib.crc32(data[:_CRC_AT]):
                cp.clean_commit_log_end = end
            elif magic == _MAGIC:  # torn: trust nothing in it
                cp.physic_msg_timestamp = cp.logics_msg_timestamp = cp.index_msg_timestamp = 0
        return cp

    @property
    def min_timestamp(self) -> int:
        """``getMinTimestamp``: the older of the commit-log and consume-queue times,
        minus 3 s as Java does to cover records stored in the same instant."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def flush(self) -> None:
        """Write the file atomically."""
        out = bytearray(_FILE_SIZE)
        _JAVA.pack_into(
            out, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp
        )
        _EXT.pack_into(out, _EXT_AT, _MAGIC, 1, self.clean_commit_log_end)
        struct.pack_into(">I", out, _CRC_AT, zlib.crc32(out[:_CRC_AT]))
        write_atomic(self.path, bytes(out))
