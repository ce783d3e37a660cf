"""RocketMQ's HA wire format (``HAConnection`` / ``HAService.HAClient``, 4.9.x).

Two raw byte streams on one TCP connection, no framing beyond this:

* slave -> master: 8-byte big-endian offsets, the slave's commit-log max offset, sent
  on connect, after every write and every ``haSendHeartbeatInterval`` when idle; the
  master reads only the last whole 8 bytes it has;
* master -> slave: frames of a 12-byte header -- 8-byte physical offset, 4-byte body
  size -- and that many commit-log bytes (at most ``haTransferBatchSize``, never across
  a segment); a header with size 0 is a heartbeat.

trocket's master adds one thing a Java slave reads as an ordinary mismatch: before it
drops a slave that reports an offset beyond the master's log, it sends a size-0
header carrying its own max offset, so a trocket slave can stop with both offsets.
"""

from __future__ import annotations

import struct

__all__ = [
    "HEADER",
    "HEADER_SIZE",
    "OFFSET",
    "HAError",
    "HAProtocolError",
    "SlaveAheadError",
]

#: a slave's report: the max commit-log offset it holds
OFFSET = struct.Struct(">q")
#: a master's frame header: physical offset, body size
HEADER = struct.Struct(">qi")
HEADER_SIZE = HEADER.size  # 12


class HAError(Exception):
    """Base of replication's errors: a failed HA connection, never the broker's."""


class HAProtocolError(HAError):
    """The peer broke the HA protocol (junk, an impossible offset): that connection is
    closed, the broker keeps serving."""


class SlaveAheadError(HAError):
    """A slave's commit log is longer than its master's: it cannot follow that master
    (it would have to drop data), so replication stops."""

    def __init__(self, slave_offset: int, master_offset: int, master: str) -> None:
        super().__init__(
            f"slave commit log ends at {slave_offset}, beyond its master {master}'s end "
            f"{master_offset}: refusing to follow (move the slave's store aside or bring "
            "the master's back)"
        )
        self.slave_offset = slave_offset
        self.master_offset = master_offset
