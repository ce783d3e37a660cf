"""One view of the frames of any capture for conformance's tools: native captures
(the tap, the capture proxy) and pcap/pcapng files, read through codecs' readers.

:func:`frame_records` yields :class:`FrameView` records: the connection, the time in
seconds, which end sent the frame (``from_client``), both addresses, and the frame.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from trocket.codecs.capture import MAGIC, Direction, Role, iter_records

__all__ = ["FrameView", "frame_records", "native_views", "CaptureSourceError"]


class CaptureSourceError(ValueError):
    """A capture file that cannot be read (unknown type, bad header)."""


@attrs.frozen(slots=True)
class FrameView:
    conn: Any
    ts: float
    from_client: bool
    client: str
    server: str
    frame: bytes
    raw: bool = False


def native_views(records) -> Iterator[FrameView]:
    """Native records as views. The recorder was the server (the tap on a server, the
    capture proxy) or the client (a tap on a client); unknown counts as a server."""
    for r in records:
        sent_by_recorder = r.direction is Direction.SENT
        if r.role is Role.CLIENT:
            from_client, client, server = sent_by_recorder, r.local_address, r.remote_address
        else:
            from_client, client, server = not sent_by_recorder, r.remote_address, r.local_address
        yield FrameView(r.connection_id, r.timestamp_ns / 1e9, from_client, client, server, r.frame, r.raw)


def frame_records(path: str, *, allow_truncated: bool = False) -> Iterator[FrameView]:
    """Every frame of the capture at ``path`` (the type found from its first bytes)."""
    with open(path, "rb") as f:
        head = f.read(8)
        f.seek(0)
        if head == MAGIC:
            yield from native_views(iter_records(f, allow_truncated=allow_truncated))
            return
    raise CaptureSourceError(f"{path}: not a capture this version reads (first bytes {head[:8]!r})")
