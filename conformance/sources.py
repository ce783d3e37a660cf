"""Captures as replay reads them: any capture file (native from the tap or the capture
proxy, pcap, pcapng) through codecs' one reader,
:class:`~trocket.codecs.capture_files.CaptureFile`, seen from the client/server angle.

:func:`read_frames` gives :class:`SessionFrame` records (the connection, the time in
seconds, which end sent the frame, both addresses, the frame) and the reader's
problems (gaps, truncation), which replay reports: frames after a gap are still used.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from trocket.codecs.capture import CaptureProblem, CaptureRecord, Direction, Role
from trocket.codecs.capture_files import CaptureFile

__all__ = ["SessionFrame", "session_frames", "read_frames", "CaptureRead"]


@attrs.frozen(slots=True)
class SessionFrame:
    conn: Any
    ts: float
    from_client: bool
    client: str
    server: str
    frame: bytes
    raw: bool = False


def session_frames(records: Iterable[CaptureRecord], *, file_tag: Any = None) -> Iterator[SessionFrame]:
    """Records as session frames. The recorder is the server (the tap on a server, the
    capture proxy, the pcap reader's convention) or the client (a tap on a client);
    unknown counts as a server. ``file_tag``: prefix the connection id with it, so
    connections of several files stay apart."""
    for r in records:
        sent_by_recorder = r.direction is Direction.SENT
        if r.role is Role.CLIENT:
            from_client, client, server = sent_by_recorder, r.local_address, r.remote_address
        else:
            from_client, client, server = not sent_by_recorder, r.remote_address, r.local_address
        conn = r.connection_id if file_tag is None else f"{file_tag}:{r.connection_id}"
        yield SessionFrame(conn, r.timestamp_ns / 1e9, from_client, client, server, r.frame, r.raw)


@attrs.define(slots=True)
class CaptureRead:
    frames: list[SessionFrame]
    problems: list[CaptureProblem]
    complete: bool
    format: str


def read_frames(path: str, *, file_tag: Any = None) -> CaptureRead:
    """Every frame of the capture at ``path``. Raises
    :class:`~trocket.codecs.errors.CaptureFormatError` for an unknown file type and
    OSError for an unreadable file; a capture cut short or with gaps reads as far as
    it goes (``complete`` False, ``problems`` say where)."""
    with open(path, "rb") as f:
        capture = CaptureFile(f)
        frames = list(session_frames(capture.records_only(), file_tag=file_tag))
    return CaptureRead(frames, list(capture.problems), capture.complete, capture.format)
