"""Requests paired with their responses: the ``calls`` table, built where the frames are.

The key of a call is (stream, requesting side, opaque): a response goes the other way.
A stream is one connection as captured: a (capture, connection id) piece, or several
pieces of one connection in consecutive captures stitched together (:mod:`.streams`). A response pairs with the oldest still-unanswered request of its key sent before
it (what a RocketMQ client's table of response futures does, in capture order); a
response with none is an orphan, a request never answered by the end of the capture is
unanswered (a oneway request is neither: it expects no answer).

Pairing runs in two steps, neither of them a join:

1. in each stretch of frames (a native range, or a partition of whole pcap
   connections) while the frames are decoded (:class:`Pairer`): most calls are
   answered within the stretch; what is left (requests still pending at its end,
   responses that found no request in it) are *leftovers*, a few per connection;
2. the leftovers of every stretch, grouped by address pair and sorted into capture
   order (ts, capture, connection id, seq), are paired the same way by stream
   (:func:`pair_leftovers`); what still has no partner is unanswered or an orphan.

In a stretch, a leftover response precedes every leftover request of its key (a
request pending when the response came would have been taken), so step 2 gives the
capture-wide pairing, except where two requests with one key are outstanding at once
across a stretch boundary (a client could not tell those answers apart either).

Rows are plain tuples in :data:`CALL_FIELDS` order, built from two ``frames`` rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .rows import TO_CLIENT, TO_SERVER, F

__all__ = ["CALL_FIELDS", "C", "ARRIVAL", "EXPIRED", "hold_outcome", "Pairer", "pair_leftovers", "leftover", "ANSWERED", "UNANSWERED", "ORPHAN"]

ANSWERED = "answered"
UNANSWERED = "unanswered"
ORPHAN = "orphan_response"

#: (name, Spark SQL type) of every column of ``calls``, in row order.
CALL_FIELDS: tuple[tuple[str, str], ...] = (
    ("connection", "string"),
    ("client", "string"),
    ("server", "string"),
    ("request_direction", "string"),
    ("opaque", "int"),
    ("status", "string"),  # answered / unanswered / orphan_response
    ("request_code", "int"),
    ("request_code_name", "string"),
    ("response_code", "int"),
    ("response_code_name", "string"),
    ("request_ts_ns", "long"),
    ("response_ts_ns", "long"),
    ("latency_ms", "double"),
    ("request_serialize", "string"),
    ("request_language", "string"),
    ("topic", "string"),
    ("group", "string"),
    ("queue_id", "int"),
    ("request_body_len", "int"),
    ("response_body_len", "int"),
    ("response_remark", "string"),
    # the two frames' keys in ``frames`` (capture, connection_id, seq): a join on them
    # finds exactly one frame each (a response may be in another capture than its
    # request when a connection is stitched across files)
    ("request_capture", "string"),
    ("request_connection_id", "long"),
    ("request_seq", "long"),
    ("response_capture", "string"),
    ("response_connection_id", "long"),
    ("response_seq", "long"),
    # long polling: a PULL_MESSAGE the broker may hold (its suspend flag) is a held poll:
    # its latency is the time held, kept out of the latency figures of the other calls;
    # answered by a message's arrival (FOUND) or expired (PULL_NOT_FOUND / RETRY)
    ("long_poll", "boolean"),
    ("suspend_ms", "long"),
    ("hold_outcome", "string"),  # arrival / expired / other; null when not a held poll or unanswered
    # the messages each frame carried (frames' ``messages`` / ``message_bytes``)
    ("request_messages", "int"),
    ("request_message_bytes", "long"),
    ("response_messages", "int"),
    ("response_message_bytes", "long"),
)


class C:
    """Indices of the ``calls`` row fields (:data:`CALL_FIELDS`)."""

    CONNECTION, CLIENT, SERVER, DIRECTION, OPAQUE, STATUS, REQ_CODE, REQ_NAME, RESP_CODE, RESP_NAME = range(10)
    REQ_TS, RESP_TS, LATENCY, SERIALIZE, LANGUAGE, TOPIC, GROUP, QUEUE_ID, REQ_BODY, RESP_BODY, REMARK = range(10, 21)
    REQ_CAPTURE, REQ_CONN_ID, REQ_SEQ, RESP_CAPTURE, RESP_CONN_ID, RESP_SEQ = range(21, 27)
    LONG_POLL, SUSPEND_MS, HOLD_OUTCOME, REQ_MESSAGES, REQ_MESSAGE_BYTES, RESP_MESSAGES, RESP_MESSAGE_BYTES = range(27, 34)


#: a held poll's outcome by its response code
ARRIVAL = "arrival"
EXPIRED = "expired"
_OUTCOMES = {0: ARRIVAL, 19: EXPIRED, 20: EXPIRED}  # SUCCESS (FOUND), PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY


def hold_outcome(response_code: int | None) -> str:
    return _OUTCOMES.get(response_code, "other")


def leftover(row: tuple) -> tuple:
    """A leftover is its ``frames`` row without the ext map (leftovers cross a shuffle,
    and the calls table needs no ext field)."""
    return (*row[: F.EXT], None, *row[F.EXT + 1 :])

_OTHER = {TO_SERVER: TO_CLIENT, TO_CLIENT: TO_SERVER}


def answered(q: tuple, s: tuple) -> tuple:
    """The calls row of request row ``q`` answered by response row ``s``."""
    return (
        q[4], q[5], q[6], q[7], q[12], ANSWERED, q[10], q[11], s[10], s[11], q[3], s[3], (s[3] - q[3]) / 1e6,
        q[9], q[14], q[20], q[21], q[22], q[18], s[18], s[19], q[0], q[1], q[2], s[0], s[1], s[2],
        q[23] is not None, q[23], None if q[23] is None else _OUTCOMES.get(s[10], "other"), q[32], q[33], s[32], s[33],
    )  # fmt: skip


def unanswered(q: tuple) -> tuple:
    return (
        q[4], q[5], q[6], q[7], q[12], UNANSWERED, q[10], q[11], None, None, q[3], None, None,
        q[9], q[14], q[20], q[21], q[22], q[18], None, None, q[0], q[1], q[2], None, None, None,
        q[23] is not None, q[23], None, q[32], q[33], None, None,
    )  # fmt: skip


def orphan(s: tuple) -> tuple:
    return (
        s[4], s[5], s[6], _OTHER[s[7]], s[12], ORPHAN, None, None, s[10], s[11], None, s[3], None,
        None, None, s[20], s[21], s[22], None, s[18], s[19], None, None, None, s[0], s[1], s[2],
        None, None, None, None, None, s[32], s[33],
    )  # fmt: skip


class Pairer:
    """FIFO pairing of the frames of one stretch, fed in capture order.

    ``calls`` collects the answered calls (the caller drains it); :meth:`leftovers`
    gives what is left at the end. Pending requests are held by key: a dict entry is
    the request row itself, or a list when one key has several outstanding.
    """

    __slots__ = ("pending", "early", "calls")

    def __init__(self) -> None:
        self.pending: dict[tuple, tuple | list] = {}
        self.early: list[tuple] = []  # responses with no request before them in the stretch
        self.calls: list[tuple] = []

    def request(self, row: tuple) -> None:
        key = (row[0], row[1], row[7], row[12])
        old = self.pending.get(key)
        if old is None:
            self.pending[key] = row
        elif type(old) is list:
            old.append(row)
        else:
            self.pending[key] = [old, row]

    def response(self, row: tuple) -> tuple | None:
        """Pair a response; returns its request row (None: no request for it yet)."""
        key = (row[0], row[1], _OTHER[row[7]], row[12])
        q = self.pending.pop(key, None)
        if q is None:
            self.early.append(row)
            return None
        if type(q) is list:
            first = q.pop(0)
            if q:
                self.pending[key] = q if len(q) > 1 else q[0]
            q = first
        self.calls.append(answered(q, row))
        return q

    def leftovers(self) -> list[tuple]:
        """Responses without a request, then the requests still pending (:func:`leftover`)."""
        out = [leftover(r) for r in self.early]
        for q in self.pending.values():
            if type(q) is list:
                out.extend(map(leftover, q))
            else:
                out.append(leftover(q))
        return out


class _StreamPairer(Pairer):
    """A :class:`Pairer` keyed by stream (pieces of a connection in several captures)
    instead of by (capture, connection id)."""

    __slots__ = ("stream_of",)

    def __init__(self, stream_of) -> None:
        super().__init__()
        self.stream_of = stream_of

    def request(self, row: tuple) -> None:
        key = (self.stream_of(row[0], row[1]), row[7], row[12])
        old = self.pending.get(key)
        if old is None:
            self.pending[key] = row
        elif type(old) is list:
            old.append(row)
        else:
            self.pending[key] = [old, row]

    def response(self, row: tuple) -> tuple | None:
        key = (self.stream_of(row[0], row[1]), _OTHER[row[7]], row[12])
        q = self.pending.pop(key, None)
        if q is None:
            self.early.append(row)
            return None
        if type(q) is list:
            first = q.pop(0)
            if q:
                self.pending[key] = q if len(q) > 1 else q[0]
            q = first
        self.calls.append(answered(q, row))
        return q


def leftover_order(row: tuple) -> tuple:
    """Where a leftover sits in the capture: (ts, capture, connection id, seq)."""
    return (row[F.TS], row[F.CAPTURE], row[F.CONN_ID], row[F.SEQ])


def pair_leftovers(rows: Iterable[tuple], stream_of=None) -> Iterator[tuple]:
    """Calls rows of one connection's leftovers, given in capture order: pairs first
    come as they are found, then the unanswered requests, then the orphans.
    ``stream_of(capture, connection_id)`` names the stream a piece of connection belongs
    to (pieces of one connection in several captures, stitched); by default each
    (capture, connection id) is its own."""
    pairer = Pairer() if stream_of is None else _StreamPairer(stream_of)
    for row in rows:
        if row[F.KIND] == "request":
            pairer.request(row)
        else:
            pairer.response(row)
        if pairer.calls:
            yield from pairer.calls
            pairer.calls.clear()
    for q in pairer.pending.values():
        if type(q) is list:
            yield from map(unanswered, q)
        else:
            yield unanswered(q)
    yield from map(orphan, pairer.early)
