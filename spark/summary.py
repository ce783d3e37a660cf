"""``summary.json`` from the ``frames`` and ``calls`` DataFrames.

Every figure is a group-by in Spark; only the grouped counts (one row per code, per
pair, per serialization) reach the driver. Latency percentiles are exact (Spark's
``percentile``, linear interpolation between the two nearest ranks, as numpy's
default), so a summary can be checked against a synthetic capture's ground truth.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

__all__ = ["build_summary", "write_summary", "SUMMARY_KEYS"]

SUMMARY_KEYS = (
    "captures",
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
)


def _by_code(counter: Counter) -> dict[str, int]:
    return {str(code): int(counter[code]) for code in sorted(counter)}


def build_summary(frames, calls, captures: Sequence[str], problems: Sequence[str]) -> dict:
    """Three Spark jobs: frames by (kind, code, serialize), distinct connections, and
    calls by (status, request code, response code) with the latency figures."""
    from pyspark.sql import functions as F

    groups = frames.groupBy("kind", "code", "serialize").count().collect()
    connections = frames.select("connection").distinct().count()
    answered = F.when(F.col("status") == "answered", F.col("latency_ms"))
    call_groups = (
        calls.groupBy("status", "request_code", "response_code")
        .agg(F.count(F.lit(1)).alias("n"))
        .collect()
    )
    latency = (
        calls.where(F.col("status") == "answered")
        .groupBy("request_code")
        .agg(
            F.percentile(answered, F.array(F.lit(0.5), F.lit(0.95), F.lit(0.99))).alias("p"),
            F.max(answered).alias("max"),
        )
        .collect()
    )
    kinds: Counter = Counter()
    serialize = {"JSON": 0, "ROCKETMQ": 0}
    requests: Counter = Counter()
    responses: Counter = Counter()
    for kind, code, ser, n in groups:
        kinds[kind] += n
        if ser is not None:
            serialize[ser] = serialize.get(ser, 0) + n
        if kind in ("request", "oneway"):
            requests[code] += n
        elif kind == "response":
            responses[code] += n
    pairs: Counter = Counter()
    unanswered: Counter = Counter()
    orphans = 0
    for status, req_code, resp_code, n in call_groups:
        if status == "answered":
            pairs[(req_code, resp_code)] += n
        elif status == "unanswered":
            unanswered[req_code] += n
        else:
            orphans += n
    return {
        "captures": list(captures),
        "frames": int(sum(kinds.values())),
        "requests": int(kinds["request"] + kinds["oneway"]),
        "oneway_requests": int(kinds["oneway"]),
        "responses": int(kinds["response"]),
        "connections": int(connections),
        "header_decode_errors": int(kinds[None]),
        "frames_by_serialize": serialize,
        "requests_by_code": _by_code(requests),
        "responses_by_code": _by_code(responses),
        "pairs": [{"request_code": int(a), "response_code": int(b), "count": int(n)} for (a, b), n in sorted(pairs.items())],
        "unanswered_by_code": _by_code(unanswered),
        "unmatched_responses": int(orphans),
        "stream_problems": list(problems),
        "latency_ms_by_code": {
            str(r[0]): {
                "p50": round(float(r["p"][0]), 6),
                "p95": round(float(r["p"][1]), 6),
                "p99": round(float(r["p"][2]), 6),
                "max": round(float(r["max"]), 6),
            }
            for r in sorted(latency, key=lambda r: r[0])
        },
    }


def write_summary(summary: dict, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
        f.write("\n")
