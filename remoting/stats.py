"""The counters of an endpoint (:attr:`RemotingEndpoint.stats
<trocket.remoting.endpoint.RemotingEndpoint.stats>`)."""

from __future__ import annotations

import attrs

__all__ = ["RemotingStats"]


@attrs.define(slots=True)
class RemotingStats:
    """Counters an operator (or a test) can read; plain ints, no locking needed."""

    dropped_responses: int = 0  # responses matching no pending call (late or unknown)
    busy_replies: int = 0  # SYSTEM_BUSY answers (processor full or rejecting)
    not_supported_replies: int = 0
    processor_errors: int = 0
    decode_errors: int = 0  # connections closed for undecodable bytes
    expired_by_scan: int = 0
    connections_opened: int = 0
    connections_closed: int = 0
