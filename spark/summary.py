"""``summary.json`` from partial tallies merged in the driver.

Every stretch of frames (:mod:`trocket.spark.stretch`) counts what it decoded and paired
into a :class:`Tally`: frames by (kind, code, serialization), calls by (status, request
code, response code), connections, and per request code a histogram of the latencies
(nanoseconds, :func:`buckets`: exact below 2 µs, 1/1024 relative width above). The
tallies are merged in the executors, the driver gets one per task of the last stage:
its memory does not grow with the capture.

Latency percentiles are exact (linear interpolation between the two nearest ranks, as
Spark's ``percentile`` and numpy's default), so a summary can be checked against a
synthetic capture's ground truth: the merged histograms name the bucket and the rank
within it of every value a percentile needs, and one more pass over the ``calls``
Parquet (:func:`select_latencies`, three columns read) brings back the values of those
few buckets only.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence

import attrs

from .storage import LOCAL, Storage, filesystem, write_bytes

__all__ = [
    "build_summary",
    "write_summary",
    "SUMMARY_KEYS",
    "Tally",
    "buckets",
    "select_latencies",
    "PERCENTILES",
]

SUMMARY_KEYS = (
    "captures",
    "complete",
    "incomplete_captures",
    "frames",
    "requests",
    "oneway_requests",
    "responses",
    "connections",
    "header_decode_errors",
    "frames_by_serialize",
    "requests_by_code",
    "responses_by_code",
    "pairs",
    "unanswered_by_code",
    "unmatched_responses",
    "stream_problems",
    "latency_ms_by_code",
    "held_polls",
    "bytes_by_capture",
)
#: held polls' latencies are tallied under their code plus this (kept apart from the
#: latency of every other call)
HELD = 1 << 20
#: a capture's bytes in ``bytes_by_capture``: ``stream`` (a native capture's record
#: bytes, a pcap's TCP payload) = ``frame`` (in frames) + ``duplicate`` (retransmitted
#: or overlapping copies) + ``problem`` (lost with a reported problem) + ``filtered``
#: (outside --since/--until) + ``carried`` (of a frame completed in the next file of a
#: stitched connection, less what this file completed of the previous one's) +
#: ``unaccounted`` (0 unless something was dropped silently: reported as a problem)
BYTE_KINDS = ("stream", "frame", "duplicate", "problem", "filtered", "carried")
PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
SUB_BITS = 10  # 2**SUB_BITS buckets per power of two


def buckets(values):
    """The histogram bucket of each latency (``numpy`` int64 nanoseconds), monotonic in
    the value: values below ``2**(SUB_BITS+1)`` are their own bucket, above that a bucket
    spans 1/``2**SUB_BITS`` of its power of two."""
    import numpy as np

    a = np.abs(values)
    e = np.zeros_like(a)
    big = a >= (1 << (SUB_BITS + 1))
    if big.any():
        e[big] = np.frexp(a[big].astype(np.float64))[1] - 1 - SUB_BITS
    b = (e << (SUB_BITS + 1)) + (a >> e)
    return np.where(values < 0, -b - 1, b)


def _merge_hist(parts: list):
    import numpy as np

    if len(parts) == 1:
        return parts[0]
    keys = np.concatenate([k for k, _ in parts])
    counts = np.concatenate([c for _, c in parts])
    uniq, inverse = np.unique(keys, return_inverse=True)
    return uniq, np.bincount(inverse, weights=counts, minlength=len(uniq)).astype(np.int64)


@attrs.define(slots=True)
class Tally:
    """What a stretch (or a merge of stretches) counted."""

    frames: Counter = attrs.Factory(Counter)  # (kind, code, serialize) -> n
    calls: Counter = attrs.Factory(Counter)  # (status, request code, response code) -> n
    connections: int = 0
    #: request code -> [(bucket keys, counts)] (numpy int64, keys sorted), merged lazily
    latency: dict = attrs.Factory(dict)
    latency_max: dict = attrs.Factory(dict)  # request code -> max latency (ns)
    bytes: Counter = attrs.Factory(Counter)  # (capture, BYTE_KINDS or "frames") -> n
    held: Counter = attrs.Factory(Counter)  # (request code, hold outcome or "unanswered") -> held polls

    def count_frames(self, kinds, codes, serializes) -> None:
        self.frames.update(zip(kinds, codes, serializes))

    def count_calls(self, statuses, req_codes, resp_codes, req_ts, resp_ts, long_polls=None, outcomes=None) -> None:
        """A batch of calls rows, by column; latencies of the answered ones (a held
        poll's under its code + :data:`HELD`)."""
        import numpy as np

        self.calls.update(zip(statuses, req_codes, resp_codes))
        if long_polls is not None and any(long_polls):
            for status, code, held, outcome in zip(statuses, req_codes, long_polls, outcomes):
                if held:
                    self.held[(code, outcome if status == "answered" else "unanswered")] += 1
        answered = [i for i, s in enumerate(statuses) if s == "answered"]
        if not answered:
            return
        keys = req_codes if long_polls is None else [c + HELD if h else c for c, h in zip(req_codes, long_polls)]
        if len(answered) == len(statuses):
            codes = np.asarray(keys, dtype=np.int64)
            lat = np.asarray(resp_ts, dtype=np.int64) - np.asarray(req_ts, dtype=np.int64)
        else:
            codes = np.asarray([keys[i] for i in answered], dtype=np.int64)
            lat = np.asarray([resp_ts[i] for i in answered], dtype=np.int64) - np.asarray([req_ts[i] for i in answered], dtype=np.int64)
        for code in np.unique(codes).tolist():
            values = lat[codes == code]
            keys_, counts = np.unique(buckets(values), return_counts=True)
            self.latency.setdefault(code, []).append((keys_, counts.astype(np.int64)))
            top = int(values.max())
            self.latency_max[code] = max(top, self.latency_max.get(code, top))

    def compact(self) -> Tally:
        """Merge each code's histograms into one (before a tally is shipped)."""
        for code, parts in self.latency.items():
            self.latency[code] = [_merge_hist(parts)]
        return self

    def merge(self, other: Tally) -> Tally:
        self.frames.update(other.frames)
        self.calls.update(other.calls)
        self.connections += other.connections
        self.bytes.update(other.bytes)
        self.held.update(other.held)
        for code, parts in other.latency.items():
            self.latency.setdefault(code, []).extend(parts)
        for code, top in other.latency_max.items():
            self.latency_max[code] = max(top, self.latency_max.get(code, top))
        return self.compact()

    def latency_targets(self) -> dict[int, list[tuple[int, int, int]]]:
        """Per request code, for every rank a percentile needs: (rank, bucket, rank
        within the bucket)."""
        import numpy as np

        out: dict[int, list[tuple[int, int, int]]] = {}
        for code, ((keys, counts),) in self.compact().latency.items():
            cum = np.cumsum(counts)
            n = int(cum[-1])
            ranks = set()
            for _, q in PERCENTILES:
                lo = int(q * (n - 1))
                ranks.update((lo, min(lo + 1, n - 1)))
            found = []
            for r in sorted(ranks):
                i = int(np.searchsorted(cum, r, side="right"))
                found.append((r, int(keys[i]), r - (int(cum[i - 1]) if i else 0)))
            out[code] = found
        return out

    def latency_count(self, code: int) -> int:
        ((_, counts),) = self.compact().latency[code]
        return int(counts.sum())


def select_latencies(calls_files: Iterable[str], wanted: dict[int, set[int]], storage: Storage = LOCAL) -> dict[tuple[int, int], list[int]]:
    """The answered calls' latencies (ns) that fall in the wanted buckets of each code,
    read from ``calls`` Parquet part files (paths or URIs, reached through ``storage``)."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out: dict[tuple[int, int], list[int]] = {}
    for uri in calls_files:
        fs, path = filesystem(uri, storage)
        t = pq.read_table(path, columns=["status", "request_code", "request_ts_ns", "response_ts_ns", "long_poll"], filesystem=fs)
        t = t.filter(pc.equal(t["status"], "answered"))
        if not t.num_rows:
            continue
        codes = t["request_code"].to_numpy() + HELD * t["long_poll"].fill_null(False).to_numpy(zero_copy_only=False).astype("int64")
        lat = t["response_ts_ns"].to_numpy() - t["request_ts_ns"].to_numpy()
        for code, bucket_set in wanted.items():
            values = lat[codes == code]
            if not len(values):
                continue
            b = buckets(values)
            for bucket in bucket_set:
                hit = values[b == bucket]
                if len(hit):
                    out.setdefault((code, bucket), []).extend(hit.tolist())
    return out


def _percentiles(tally: Tally, selected: dict[tuple[int, int], list[int]]) -> dict[str, dict[str, float]]:
    targets = tally.latency_targets()
    out: dict[str, dict[str, float]] = {}
    for code in sorted(targets):
        n = tally.latency_count(code)
        value = {}
        for rank, bucket, within in targets[code]:
            value[rank] = sorted(selected[(code, bucket)])[within] / 1e6
        fig = {}
        for name, q in PERCENTILES:
            pos = q * (n - 1)
            lo = int(pos)
            hi = min(lo + 1, n - 1)
            fig[name] = round(value[lo] + (value[hi] - value[lo]) * (pos - lo), 6)
        fig["max"] = round(tally.latency_max[code] / 1e6, 6)
        out[code] = fig
    return out


def _held_polls(tally: Tally, latency: dict) -> dict[str, dict]:
    """Per request code, the held polls: how many, how they ended, the time held."""
    out: dict[str, dict] = {}
    for code in sorted({c for c, _ in tally.held}):
        counts = {o: int(tally.held[(code, o)]) for o in ("arrival", "expired", "other", "unanswered")}
        out[str(code)] = {"calls": sum(counts.values()), **counts, "held_ms": latency.get(code + HELD)}
    return out


def _by_code(counter: Counter) -> dict[str, int]:
    return {str(code): int(counter[code]) for code in sorted(counter) if counter[code]}


def bytes_by_capture(tally: Tally, captures: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per capture read: frames, and where its bytes went (:data:`BYTE_KINDS`)."""
    out: dict[str, dict[str, int]] = {}
    seen = {c for c, _ in tally.bytes}
    for name in [c for c in captures if c in seen] + sorted(seen - set(captures)):
        b = {"frames": int(tally.bytes[(name, "frames")])}
        b.update({k: int(tally.bytes[(name, k)]) for k in BYTE_KINDS})
        b["unaccounted"] = b["stream"] - sum(b[k] for k in BYTE_KINDS[1:])
        out[name] = b
    return out


def build_summary(tally: Tally, selected: dict, captures: Sequence[str], problems: Sequence, incomplete: Sequence[str] = ()) -> dict:
    """The summary dict (:data:`SUMMARY_KEYS`) of a merged tally; ``selected``: the
    latencies :func:`select_latencies` found for ``tally.latency_targets()``;
    ``problems``: their texts; ``incomplete``: the captures not read completely."""
    kinds: Counter = Counter()
    serialize = {"JSON": 0, "ROCKETMQ": 0}
    requests: Counter = Counter()
    responses: Counter = Counter()
    for (kind, code, ser), n in tally.frames.items():
        kinds[kind] += n
        if ser is not None:
            serialize[ser] = serialize.get(ser, 0) + n
        if kind in ("request", "oneway"):
            requests[code] += n
        elif kind == "response":
            responses[code] += n
    latency = _percentiles(tally, selected)
    pairs: Counter = Counter()
    unanswered: Counter = Counter()
    orphans = 0
    for (status, req_code, resp_code), n in tally.calls.items():
        if status == "answered":
            pairs[(req_code, resp_code)] += n
        elif status == "unanswered":
            unanswered[req_code] += n
        else:
            orphans += n
    return {
        "captures": list(captures),
        "complete": not incomplete,
        "incomplete_captures": sorted(incomplete),
        "frames": int(sum(kinds.values())),
        "requests": int(kinds["request"] + kinds["oneway"]),
        "oneway_requests": int(kinds["oneway"]),
        "responses": int(kinds["response"]),
        "connections": int(tally.connections),
        "header_decode_errors": int(kinds[None]),
        "frames_by_serialize": serialize,
        "requests_by_code": _by_code(requests),
        "responses_by_code": _by_code(responses),
        "pairs": [{"request_code": int(a), "response_code": int(b), "count": int(n)} for (a, b), n in sorted(pairs.items())],
        "unanswered_by_code": _by_code(unanswered),
        "unmatched_responses": int(orphans),
        "stream_problems": list(problems),
        "latency_ms_by_code": {str(c): v for c, v in latency.items() if c < HELD},
        "held_polls": _held_polls(tally, latency),
        "bytes_by_capture": bytes_by_capture(tally, captures),
    }


def write_summary(summary: dict, path: str, storage: Storage = LOCAL) -> None:
    write_bytes(path, (json.dumps(summary, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), storage)
