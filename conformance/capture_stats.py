"""What ``trocket capture show`` and ``trocket capture stats`` compute over capture records:
one :class:`FrameView` per frame (decoded header summary, the request a response answers)
and a :class:`CaptureStats` accumulator. A record with the native format's RAW flag
(bytes a capture proxy forwarded without parsing them as frames) is a view of kind
``"raw"``, counted apart from the frames. The reading is :mod:`trocket.codecs.capture_files`
(native captures, pcap, pcapng alike); this module only looks at the records.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from typing import Any

import attrs

from trocket.codecs.capture import CaptureProblem, CaptureRecord, Direction, Role
from trocket.codecs.codes import request_code_name, response_code_name
from trocket.codecs.errors import CodecError
from trocket.codecs.headers.send import V2_FIELD_NAMES
from trocket.codecs.serialize import decode_command

__all__ = ["FrameView", "RequestTracker", "view_record", "CaptureStats", "KEY_FIELDS"]

#: ext fields worth a place on a one-line summary, in display order; SEND_MESSAGE_V2's
#: one-letter names are shown under their V1 names
KEY_FIELDS = (
    "topic", "consumerGroup", "producerGroup", "group", "queueId", "queueOffset", "maxMsgNums",
    "commitOffset", "offset", "msgId", "brokerName", "clientID", "key",
)
_V2_CODES = frozenset({310, 320})
_V2_KEY_FIELDS = ("producerGroup", "topic", "queueId", *KEY_FIELDS)  # a V2 send's summary, as before


@attrs.define(slots=True)
class FrameView:
    """One frame as ``capture show`` prints it."""

    ts_ns: int
    conn: int
    src: str
    dst: str
    kind: str  # "request", "oneway", "response", "undecodable" or "raw" (not a frame)
    code: int | None
    code_name: str
    opaque: int | None
    serialize: str | None
    remark: str | None
    ext: dict[str, str]
    body_len: int
    frame_len: int
    request_code: int | None = None  # for a response: the code of the request it answers
    latency_ns: int | None = None  # for a response: its time minus its request's
    language: str | None = None
    version: int | None = None
    error: str | None = None

    def named_ext(self) -> dict[str, str]:
        """The ext fields by their field names: a SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE
        request's one-letter keys as V1's names (``b`` -> ``topic``)."""
        if self.kind in ("request", "oneway") and self.code in _V2_CODES:
            return {V2_FIELD_NAMES.get(k, k): v for k, v in self.ext.items()}
        return self.ext

    def key_fields(self) -> dict[str, str]:
        ext = self.named_ext()
        order = _V2_KEY_FIELDS if ext is not self.ext else KEY_FIELDS
        return {name: ext[name] for name in order if name in ext}

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ts": round(self.ts_ns / 1e9, 6),
            "ts_ns": self.ts_ns,
            "conn": self.conn,
            "src": self.src,
            "dst": self.dst,
            "kind": self.kind,
            "code": self.code,
            "code_name": self.code_name,
            "opaque": self.opaque,
            "serialize": self.serialize,
            "remark": self.remark,
            "ext": self.named_ext(),
            "body_len": self.body_len,
            "frame_len": self.frame_len,
        }
        if self.kind == "response":
            doc["request_code"] = self.request_code
            doc["latency_ms"] = None if self.latency_ns is None else round(self.latency_ns / 1e6, 3)
        if self.language is not None:
            doc["language"] = self.language
            doc["version"] = self.version
        if self.error is not None:
            doc["error"] = self.error
        return doc


class RequestTracker:
    """Requests waiting for their response, by (connection, opaque) and direction.

    A response answers the request that went the other way on its connection with its
    opaque. At most ``limit`` requests wait (the oldest are forgotten past it, counted in
    :attr:`forgotten`), so a capture full of unanswered requests stays bounded.
    """

    __slots__ = ("_pending", "limit", "forgotten")

    def __init__(self, limit: int = 1_000_000) -> None:
        self._pending: dict[tuple[Any, int, int], tuple[int, int]] = {}
        self.limit = limit
        self.forgotten = 0

    def request(self, conn: Any, sender: int, opaque: int, code: int, ts_ns: int) -> None:
        pending = self._pending
        if len(pending) >= self.limit:
            del pending[next(iter(pending))]
            self.forgotten += 1
        pending[(conn, sender, opaque)] = (code, ts_ns)

    def response(self, conn: Any, sender: int, opaque: int) -> tuple[int, int] | None:
        """The (code, ts) of the request answered, or None (an orphan response)."""
        return self._pending.pop((conn, 1 - sender, opaque), None)

    def unanswered(self) -> list[tuple[Any, int, int, int, int]]:
        return [(conn, sender, opaque, code, ts) for (conn, sender, opaque), (code, ts) in self._pending.items()]


def view_record(record: CaptureRecord, tracker: RequestTracker | None = None, conn: Any = None) -> FrameView:
    """Decode a record's frame into a :class:`FrameView` (an undecodable frame too);
    ``tracker`` pairs responses with their requests (``conn`` keys them, default the
    record's connection id)."""
    if record.direction == Direction.RECEIVED:
        src, dst = record.remote_address, record.local_address
    else:
        src, dst = record.local_address, record.remote_address
    frame = record.frame
    if record.raw:  # bytes, not a frame: nothing to decode, no request to pair
        return FrameView(record.timestamp_ns, record.connection_id, src, dst, "raw", None, "raw", None, None, None, {}, 0, len(frame))
    key = record.connection_id if conn is None else conn
    try:
        cmd = decode_command(frame[4:])
    except CodecError as exc:
        return FrameView(record.timestamp_ns, record.connection_id, src, dst, "undecodable", None, "?", None, None, None, {}, 0, len(frame), error=str(exc))
    sender = int(record.direction)
    request_code = latency = None
    if cmd.is_response:
        kind = "response"
        name = response_code_name(cmd.code)
        if tracker is not None:
            found = tracker.response(key, sender, cmd.opaque)
            if found is not None:
                request_code = found[0]
                latency = record.timestamp_ns - found[1]
    else:
        kind = "oneway" if cmd.is_oneway else "request"
        name = request_code_name(cmd.code)
        if tracker is not None and not cmd.is_oneway:
            tracker.request(key, sender, cmd.opaque, cmd.code, record.timestamp_ns)
    return FrameView(
        record.timestamp_ns, record.connection_id, src, dst, kind, cmd.code, name, cmd.opaque,
        cmd.serialize_type.name, cmd.remark, cmd.ext_fields or {}, len(cmd.body), len(frame),
        request_code, latency, cmd.language.name, cmd.version,
    )


def _percentiles(values: array) -> dict[str, float]:
    """p50/p95/p99/max in milliseconds (nearest rank)."""
    ordered = sorted(values)
    n = len(ordered)

    def rank(p: float) -> float:  # the ceil(p * n)-th smallest
        return round(ordered[min(n - 1, max(0, math.ceil(p * n - 1e-9) - 1))] / 1e6, 3)

    return {"p50": rank(0.50), "p95": rank(0.95), "p99": rank(0.99), "max": round(ordered[-1] / 1e6, 3)}


@attrs.define(slots=True)
class _Conn:
    src: str = ""
    dst: str = ""
    frames: int = 0
    requests: int = 0
    responses: int = 0
    bytes: int = 0
    raw_bytes: int = 0
    first_ns: int = 0
    last_ns: int = 0


class CaptureStats:
    """Counts over the frames of one or more captures; raw records (RAW flag) are
    counted apart (:attr:`raw_records`, :attr:`raw_bytes`), not as frames."""

    def __init__(self) -> None:
        self.frames = 0
        self.bytes = 0
        self.raw_records = 0
        self.raw_bytes = 0
        self.requests: Counter[int] = Counter()
        self.oneway: Counter[int] = Counter()
        self.responses: Counter[int] = Counter()
        self.pairs: Counter[tuple[int, int]] = Counter()
        self.orphan_responses = 0
        self.undecodable = 0
        self.by_serialize: Counter[str] = Counter()
        self.conns: dict[Any, _Conn] = {}
        self.problems: Counter[str] = Counter()
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.tracker = RequestTracker()
        self.latencies: dict[int, array] = {}  # request code -> response latencies (ns)

    def add(self, record: CaptureRecord, conn: Any = None) -> FrameView:
        key = record.connection_id if conn is None else conn
        view = view_record(record, self.tracker, key)
        raw = view.kind == "raw"
        if raw:
            self.raw_records += 1
            self.raw_bytes += view.frame_len
        else:
            self.frames += 1
            self.bytes += view.frame_len
        ts = view.ts_ns
        if self.first_ns is None or ts < self.first_ns:
            self.first_ns = ts
        if self.last_ns is None or ts > self.last_ns:
            self.last_ns = ts
        c = self.conns.get(key)
        if c is None:
            if record.role == Role.CLIENT:
                c = self.conns[key] = _Conn(record.local_address, record.remote_address, first_ns=ts)
            else:  # the recorder is the server (pcaps: always)
                c = self.conns[key] = _Conn(record.remote_address, record.local_address, first_ns=ts)
        c.last_ns = ts
        if raw:
            c.raw_bytes += view.frame_len
            return view
        c.frames += 1
        c.bytes += view.frame_len
        kind = view.kind
        if kind == "undecodable":
            self.undecodable += 1
            return view
        self.by_serialize[view.serialize or "?"] += 1
        if kind == "response":
            c.responses += 1
            self.responses[view.code] += 1
            if view.request_code is None:
                self.orphan_responses += 1
            else:
                self.pairs[(view.request_code, view.code)] += 1
                lat = self.latencies.get(view.request_code)
                if lat is None:
                    lat = self.latencies[view.request_code] = array("q")
                lat.append(view.latency_ns)
        else:
            c.requests += 1
            (self.oneway if kind == "oneway" else self.requests)[view.code] += 1
        return view

    def add_problem(self, problem: CaptureProblem) -> None:
        self.problems[problem.kind] += 1

    def unanswered_by_code(self) -> Counter[int]:
        return Counter(code for _, _, _, code, _ in self.tracker.unanswered())

    def to_json(self) -> dict[str, Any]:
        unanswered = self.unanswered_by_code()
        return {
            "frames": self.frames,
            "bytes": self.bytes,
            "requests": sum(self.requests.values()),
            "oneway_requests": sum(self.oneway.values()),
            "responses": sum(self.responses.values()),
            "undecodable": self.undecodable,
            "raw_records": self.raw_records,
            "raw_bytes": self.raw_bytes,
            "connections": len(self.conns),
            "first_ts": None if self.first_ns is None else round(self.first_ns / 1e9, 6),
            "last_ts": None if self.last_ns is None else round(self.last_ns / 1e9, 6),
            "frames_by_serialize": dict(self.by_serialize),
            "requests_by_code": {str(k): v for k, v in sorted(self.requests.items())},
            "oneway_requests_by_code": {str(k): v for k, v in sorted(self.oneway.items())},
            "responses_by_code": {str(k): v for k, v in sorted(self.responses.items())},
            "pairs": [{"request_code": r, "response_code": s, "count": n} for (r, s), n in sorted(self.pairs.items())],
            "unanswered_by_code": {str(k): v for k, v in sorted(unanswered.items())},
            "orphan_responses": self.orphan_responses,
            "latency_ms_by_code": {str(code): _percentiles(lat) for code, lat in sorted(self.latencies.items())},
            "problems_by_kind": dict(self.problems),
            "per_connection": [
                {"conn": k if isinstance(k, (int, str)) else str(k), "client": c.src, "server": c.dst, "frames": c.frames,
                 "requests": c.requests, "responses": c.responses, "bytes": c.bytes, "raw_bytes": c.raw_bytes,
                 "first_ts": round(c.first_ns / 1e9, 6), "last_ts": round(c.last_ns / 1e9, 6)}
                for k, c in self.conns.items()
            ],
        }
