"""Requests paired with their responses: the ``calls`` table, built where the frames are.

The key of a call is (connection, requesting side, opaque): a response goes the other
way. A response pairs with the oldest still-unanswered request of its key sent before
it (what a RocketMQ client's table of response futures does, in capture order); a
response with none is an orphan, a request never answered by the end of the capture is
unanswered (a oneway request is neither: it expects no answer).

Pairing runs in two steps, neither of them a join:

1. in each stretch of frames (a native range, or a partition of whole pcap
   connections) while the frames are decoded (:class:`Pairer`): most calls are
   answered within the stretch; what is left (requests still pending at its end,
   responses that found no request in it) are *leftovers*, a few per connection;
2. the leftovers of every stretch, grouped by connection and sorted into capture
   order (ts, capture, seq), are paired the same way (:func:`pair_leftovers`); what
   still has no partner is unanswered or an orphan.

In a stretch, a leftover response precedes every leftover request of its key (a
request pending when the response came would have been taken), so step 2 gives the
capture-wide pairing, except where two requests with one key are outstanding at once
across a stretch boundary (a client could not tell those answers apart either).

Rows are plain tuples in :data:`CALL_FIELDS` order, built from two ``frames`` rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .rows import TO_CLIENT, TO_SERVER

__all__ = ["CALL_FIELDS", "Pairer", "pair_leftovers", "LEFTOVER_FIELDS", "ANSWERED", "UNANSWERED", "ORPHAN"]

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
    ("request_capture", "string"),
    ("request_seq", "long"),
    ("response_seq", "long"),
)

#: a leftover is its ``frames`` row cut to these leading fields (no ext map: leftovers
#: cross a shuffle, and the calls table needs none of what follows)
LEFTOVER_FIELDS = 22

_OTHER = {TO_SERVER: TO_CLIENT, TO_CLIENT: TO_SERVER}
# frames row indices (rows.FRAME_FIELDS)
_CAPTURE, _SEQ, _TS, _CONN, _CLIENT, _SERVER, _DIR, _KIND, _SER, _CODE, _NAME, _OPAQUE = range(12)
_LANG, _BODY, _REMARK, _TOPIC, _GROUP, _QUEUE = 13, 17, 18, 19, 20, 21


def answered(q: tuple, s: tuple) -> tuple:
    """The calls row of request row ``q`` answered by response row ``s``."""
    return (
        q[3], q[4], q[5], q[6], q[11], ANSWERED, q[9], q[10], s[9], s[10], q[2], s[2], (s[2] - q[2]) / 1e6,
        q[8], q[13], q[19], q[20], q[21], q[17], s[17], s[18], q[0], q[1], s[1],
    )  # fmt: skip


def unanswered(q: tuple) -> tuple:
    return (
        q[3], q[4], q[5], q[6], q[11], UNANSWERED, q[9], q[10], None, None, q[2], None, None,
        q[8], q[13], q[19], q[20], q[21], q[17], None, None, q[0], q[1], None,
    )  # fmt: skip


def orphan(s: tuple) -> tuple:
    return (
        s[3], s[4], s[5], _OTHER[s[6]], s[11], ORPHAN, None, None, s[9], s[10], None, s[2], None,
        None, None, None, None, None, None, s[17], s[18], None, None, s[1],
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
        key = (row[3], row[6], row[11])
        old = self.pending.get(key)
        if old is None:
            self.pending[key] = row
        elif type(old) is list:
            old.append(row)
        else:
            self.pending[key] = [old, row]

    def response(self, row: tuple) -> None:
        key = (row[3], _OTHER[row[6]], row[11])
        q = self.pending.pop(key, None)
        if q is None:
            self.early.append(row)
            return
        if type(q) is list:
            first = q.pop(0)
            if q:
                self.pending[key] = q if len(q) > 1 else q[0]
            q = first
        self.calls.append(answered(q, row))

    def leftovers(self) -> list[tuple]:
        """Responses without a request, then the requests still pending (rows cut to
        :data:`LEFTOVER_FIELDS`)."""
        out = [r[:LEFTOVER_FIELDS] for r in self.early]
        for q in self.pending.values():
            if type(q) is list:
                out.extend(r[:LEFTOVER_FIELDS] for r in q)
            else:
                out.append(q[:LEFTOVER_FIELDS])
        return out


def leftover_order(row: tuple) -> tuple:
    """Where a leftover sits in the capture: (ts, capture, seq)."""
    return (row[_TS], row[_CAPTURE], row[_SEQ])


def pair_leftovers(rows: Iterable[tuple]) -> Iterator[tuple]:
    """Calls rows of one connection's leftovers, given in capture order: pairs first
    come as they are found, then the unanswered requests, then the orphans."""
    pairer = Pairer()
    for row in rows:
        if row[_KIND] == "request":
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
