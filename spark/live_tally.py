"""Per-minute aggregates of a followed tap (``trocket analyze --follow``): what the
executors count in each micro-batch and the driver merges.

A :class:`LiveTally` holds, per minute (of the request's time, as the batch views;
of the frame's for frame counts):

- ``io``: frames, bytes, requests, responses, error answers, orphan responses, frames
  whose header did not decode;
- ``calls`` per request code: answered calls, error answers, unanswered (expired)
  requests, held polls and how they ended, and latency histograms (plain calls and
  held polls apart) from which the percentiles are read: buckets of 1/1024 of a power
  of two (:func:`trocket.spark.summary.buckets`, exact below 2 µs), the midpoint of a
  bucket within 0.05 % of every value in it;
- ``errors``: error answers by request code, response code and remark;
- ``messages`` per topic and group: messages and bytes put (sends answered SUCCESS),
  got (pull answers FOUND), send-backs (the rules of :mod:`trocket.spark.views`).

Tallies merge by addition (:meth:`LiveTally.merge`), the minutes before a point are
split off once no call can still land in them (:meth:`LiveTally.split_before`) and
turned into Arrow tables (:func:`tables`); a tally round-trips through JSON
(:meth:`LiveTally.to_json`), the follower's checkpointed state.
"""

from __future__ import annotations

from collections import Counter

import attrs

from .calls import C, Pairer
from .rows import F
from .summary import SUB_BITS
from .views import OK_CODES, PULL_CODES, SEND_BACK, SEND_CODES

__all__ = ["MINUTE_NS", "LiveTally", "tally_range", "tables", "bucket", "bucket_value", "TABLES"]

MINUTE_NS = 60 * 10**9
#: the per-minute tables, in the order the report shows them
TABLES = ("io", "calls", "errors", "messages")
_IO = ("frames", "bytes", "requests", "responses", "errors", "orphan_responses", "decode_errors")
_CALLS = ("calls", "errors", "unanswered", "held_polls", "held_arrival", "held_expired")
_MESSAGES = ("put_messages", "put_bytes", "got_messages", "got_bytes", "send_backs")
_OK = frozenset(OK_CODES)
_SEND = frozenset(SEND_CODES)
_PULL = frozenset(PULL_CODES)
_SHIFT = SUB_BITS + 1
_BIG = 1 << _SHIFT


def bucket(ns: int) -> int:
    """:func:`trocket.spark.summary.buckets` of one value, in plain Python."""
    a = -ns if ns < 0 else ns
    if a >= _BIG:
        e = a.bit_length() - 1 - SUB_BITS
        b = (e << _SHIFT) + (a >> e)
    else:
        b = a
    return -b - 1 if ns < 0 else b


def bucket_value(b: int) -> float:
    """The midpoint of bucket ``b`` (ns)."""
    if b < 0:
        return -bucket_value(-b - 1)
    e = b >> _SHIFT
    if e == 0:
        return float(b)
    m = b - (e << _SHIFT)
    return (m << e) + ((1 << e) - 1) / 2


def _percentile(hist: dict[int, int], q: float) -> float:
    """The q-quantile (linear between the two nearest ranks) of a histogram, in ms."""
    n = sum(hist.values())
    pos = q * (n - 1)
    lo, hi = int(pos), min(int(pos) + 1, n - 1)
    seen, vlo, vhi = 0, None, None
    for b in sorted(hist):
        seen += hist[b]
        if vlo is None and seen > lo:
            vlo = bucket_value(b)
        if seen > hi:
            vhi = bucket_value(b)
            break
    return (vlo + (vhi - vlo) * (pos - lo)) / 1e6


@attrs.define(slots=True)
class LiveTally:
    io: dict = attrs.Factory(dict)  # minute -> [_IO]
    calls: dict = attrs.Factory(dict)  # (minute, request code) -> [_CALLS]
    hist: dict = attrs.Factory(dict)  # (minute, request code, held) -> Counter(bucket -> n)
    max_ns: dict = attrs.Factory(dict)  # (minute, request code, held) -> the largest latency
    errors: Counter = attrs.Factory(Counter)  # (minute, request code, response code, remark) -> n
    messages: dict = attrs.Factory(dict)  # (minute, topic, group) -> [_MESSAGES]
    last_ts: int = 0  # the latest frame counted

    # -- counting (executors) --------------------------------------------------------

    def count_frame(self, row: tuple) -> None:
        """One ``frames`` row (:data:`trocket.spark.rows.FRAME_FIELDS`)."""
        ts = row[F.TS]
        m = ts - ts % MINUTE_NS
        v = self.io.get(m)
        if v is None:
            v = self.io[m] = [0] * len(_IO)
        v[0] += 1
        v[1] += row[F.FRAME_LEN]
        kind = row[F.KIND]
        if kind == "response":
            v[3] += 1
            if row[F.CODE] not in _OK:
                v[4] += 1
        elif kind is None:
            v[6] += 1
        else:
            v[2] += 1
        if ts > self.last_ts:
            self.last_ts = ts

    def count_call(self, c: tuple) -> None:
        """One ``calls`` row (:data:`trocket.spark.calls.CALL_FIELDS`)."""
        status = c[C.STATUS]
        if status == "orphan_response":
            m = c[C.RESP_TS] - c[C.RESP_TS] % MINUTE_NS
            v = self.io.get(m)
            if v is None:
                v = self.io[m] = [0] * len(_IO)
            v[5] += 1
            return
        code = c[C.REQ_CODE]
        m = c[C.REQ_TS] - c[C.REQ_TS] % MINUTE_NS
        key = (m, code)
        v = self.calls.get(key)
        if v is None:
            v = self.calls[key] = [0] * len(_CALLS)
        held = bool(c[C.LONG_POLL])
        if status != "answered":
            v[2] += 1
            return
        v[0] += 1
        resp = c[C.RESP_CODE]
        if held:
            v[3] += 1
            outcome = c[C.HOLD_OUTCOME]
            if outcome == "arrival":
                v[4] += 1
            elif outcome == "expired":
                v[5] += 1
        if resp not in _OK:
            v[1] += 1
            remark = c[C.REMARK]
            self.errors[(m, code, resp, remark[:200] if remark else "")] += 1
        ns = c[C.RESP_TS] - c[C.REQ_TS]
        hkey = (m, code, held)
        h = self.hist.get(hkey)
        if h is None:
            h = self.hist[hkey] = Counter()
            self.max_ns[hkey] = ns
        elif ns > self.max_ns[hkey]:
            self.max_ns[hkey] = ns
        h[bucket(ns)] += 1
        if resp == 0 and (code in _SEND or code in _PULL or code == SEND_BACK):
            mkey = (m, c[C.TOPIC], c[C.GROUP])
            mv = self.messages.get(mkey)
            if mv is None:
                mv = self.messages[mkey] = [0] * len(_MESSAGES)
            if code in _SEND:
                mv[0] += c[C.REQ_MESSAGES] or 0
                mv[1] += c[C.REQ_MESSAGE_BYTES] or 0
            elif code in _PULL:
                mv[2] += c[C.RESP_MESSAGES] or 0
                mv[3] += c[C.RESP_MESSAGE_BYTES] or 0
            else:
                mv[4] += 1

    # -- merging and splitting (driver) ------------------------------------------------

    def merge(self, other: LiveTally) -> LiveTally:
        for mine, theirs in ((self.io, other.io), (self.calls, other.calls), (self.messages, other.messages)):
            for k, vals in theirs.items():
                v = mine.get(k)
                if v is None:
                    mine[k] = list(vals)
                else:
                    for i, x in enumerate(vals):
                        v[i] += x
        for k, h in other.hist.items():
            mine = self.hist.get(k)
            if mine is None:
                self.hist[k] = Counter(h)
                self.max_ns[k] = other.max_ns[k]
            else:
                mine.update(h)
                self.max_ns[k] = max(self.max_ns[k], other.max_ns[k])
        self.errors.update(other.errors)
        self.last_ts = max(self.last_ts, other.last_ts)
        return self

    def split_before(self, minute: int) -> LiveTally:
        """Take the minutes before ``minute`` out of this tally, into the one returned."""
        out = LiveTally(last_ts=self.last_ts)
        for name in ("io", "calls", "hist", "max_ns", "messages"):
            mine, theirs = getattr(self, name), getattr(out, name)
            for k in [k for k in mine if (k if name == "io" else k[0]) < minute]:
                theirs[k] = mine.pop(k)
        for k in [k for k in self.errors if k[0] < minute]:
            out.errors[k] = self.errors.pop(k)
        return out

    def empty(self) -> bool:
        return not (self.io or self.calls or self.messages or self.errors)

    # -- the checkpointed state ----------------------------------------------------------

    def to_json(self) -> dict:
        return {
            "io": [[m, *v] for m, v in self.io.items()],
            "calls": [[*k, *v] for k, v in self.calls.items()],
            "hist": [[*k, self.max_ns[k], [[b, n] for b, n in h.items()]] for k, h in self.hist.items()],
            "errors": [[*k, n] for k, n in self.errors.items()],
            "messages": [[*k, *v] for k, v in self.messages.items()],
            "last_ts": self.last_ts,
        }

    @classmethod
    def from_json(cls, d: dict) -> LiveTally:
        t = cls(last_ts=d["last_ts"])
        t.io = {r[0]: r[1:] for r in d["io"]}
        t.calls = {(r[0], r[1]): r[2:] for r in d["calls"]}
        for m, code, held, top, h in d["hist"]:
            t.hist[(m, code, held)] = Counter({b: n for b, n in h})
            t.max_ns[(m, code, held)] = top
        t.errors = Counter({(r[0], r[1], r[2], r[3]): r[4] for r in d["errors"]})
        t.messages = {(r[0], r[1], r[2]): r[3:] for r in d["messages"]}
        return t


def tally_range(rows) -> tuple[LiveTally, list[tuple]]:
    """What an executor makes of a range of frames (rows in capture order): the range's
    tally (frames, and the calls it pairs) and its leftovers (the batch job's
    :class:`~trocket.spark.calls.Pairer`: responses with no request before them in the
    range, then the requests it leaves open)."""
    tally = LiveTally()
    pairer = Pairer()
    count = tally.count_frame
    for row in rows:
        count(row)
        kind = row[F.KIND]
        if kind == "request":
            pairer.request(row)
        elif kind == "response":
            pairer.response(row)
        if len(pairer.calls) >= 4096:
            for c in pairer.calls:
                tally.count_call(c)
            pairer.calls = []
    for c in pairer.calls:
        tally.count_call(c)
    pairer.calls = []
    return tally, pairer.leftovers()


def _ts(minutes):
    import pyarrow as pa

    return pa.array([m // 1000 for m in minutes], pa.timestamp("us", tz="UTC"))


def tables(t: LiveTally, final: bool) -> dict:
    """The tally as the per-minute Arrow tables (:data:`TABLES`); ``final``: the minutes
    are closed (no call can land in them any more)."""
    import pyarrow as pa

    from trocket.codecs.codes import request_code_name, response_code_name

    out = {}
    io = sorted(t.io.items())
    out["io"] = pa.table({"minute": _ts([m for m, _ in io]), **{n: pa.array([v[i] for _, v in io], pa.int64()) for i, n in enumerate(_IO)},
                          "final": pa.array([final] * len(io), pa.bool_())})  # fmt: skip
    calls = sorted(t.calls.items())
    pct: dict[str, list] = {n: [] for n in ("p50_ms", "p95_ms", "p99_ms", "max_ms", "held_p50_ms", "held_max_ms")}
    for (m, code), _ in calls:
        h = t.hist.get((m, code, False))
        for n, q in (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99)):
            pct[n].append(_percentile(h, q) if h else None)
        pct["max_ms"].append(t.max_ns[(m, code, False)] / 1e6 if h else None)
        held = t.hist.get((m, code, True))
        pct["held_p50_ms"].append(_percentile(held, 0.5) if held else None)
        pct["held_max_ms"].append(t.max_ns[(m, code, True)] / 1e6 if held else None)
    out["calls"] = pa.table({
        "minute": _ts([k[0] for k, _ in calls]), "request_code": pa.array([k[1] for k, _ in calls], pa.int32()),
        "request_code_name": pa.array([request_code_name(k[1]) for k, _ in calls], pa.string()),
        **{n: pa.array([v[i] for _, v in calls], pa.int64()) for i, n in enumerate(_CALLS)},
        **{n: pa.array(vals, pa.float64()) for n, vals in pct.items()},
        "final": pa.array([final] * len(calls), pa.bool_()),
    })  # fmt: skip
    errors = sorted(t.errors.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1:]))
    out["errors"] = pa.table({
        "minute": _ts([k[0] for k, _ in errors]), "request_code": pa.array([k[1] for k, _ in errors], pa.int32()),
        "request_code_name": pa.array([request_code_name(k[1]) for k, _ in errors], pa.string()),
        "response_code": pa.array([k[2] for k, _ in errors], pa.int32()),
        "response_code_name": pa.array([response_code_name(k[2]) for k, _ in errors], pa.string()),
        "remark": pa.array([k[3] for k, _ in errors], pa.string()), "count": pa.array([n for _, n in errors], pa.int64()),
        "final": pa.array([final] * len(errors), pa.bool_()),
    })  # fmt: skip
    msgs = sorted(t.messages.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2] or ""))
    out["messages"] = pa.table({
        "minute": _ts([k[0] for k, _ in msgs]), "topic": pa.array([k[1] for k, _ in msgs], pa.string()),
        "group": pa.array([k[2] for k, _ in msgs], pa.string()),
        **{n: pa.array([v[i] for _, v in msgs], pa.int64()) for i, n in enumerate(_MESSAGES)},
        "final": pa.array([final] * len(msgs), pa.bool_()),
    })  # fmt: skip
    return out
