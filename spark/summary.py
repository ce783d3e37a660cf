"""``summary.json`` from the ``frames`` and ``calls`` DataFrames.

Every figure is a group-by in Spark; only the grouped counts (one row per code, per
pair, per serialization) reach the driver. Latency percentiles are exact (Spark's
``percentile``, linear interpolation between the two nearest ranks, as numpy's
default), so a summary can be checked against a synthetic capture's ground truth.
"""

from __future__ import annotations

import json
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


def _by_code(rows) -> dict[str, int]:
    return {str(r[0]): int(r[1]) for r in sorted(rows, key=lambda r: r[0])}


def build_summary(frames, calls, captures: Sequence[str], problems: Sequence[str]) -> dict:
    from pyspark.sql import functions as F

    totals = frames.agg(
        F.count(F.lit(1)).alias("frames"),
        F.sum(F.when(F.col("kind").isin("request", "oneway"), 1).otherwise(0)).alias("requests"),
        F.sum(F.when(F.col("kind") == "oneway", 1).otherwise(0)).alias("oneway"),
        F.sum(F.when(F.col("kind") == "response", 1).otherwise(0)).alias("responses"),
        F.sum(F.when(F.col("kind").isNull(), 1).otherwise(0)).alias("errors"),
        F.countDistinct("connection").alias("connections"),
    ).first()
    serialize = {"JSON": 0, "ROCKETMQ": 0}
    for r in frames.where(F.col("serialize").isNotNull()).groupBy("serialize").count().collect():
        serialize[r[0]] = int(r[1])
    requests = frames.where(F.col("kind").isin("request", "oneway")).groupBy("code").count().collect()
    responses = frames.where(F.col("kind") == "response").groupBy("code").count().collect()
    pairs = (
        calls.where(F.col("status") == "answered")
        .groupBy("request_code", "response_code")
        .count()
        .orderBy("request_code", "response_code")
        .collect()
    )
    unanswered = calls.where(F.col("status") == "unanswered").groupBy("request_code").count().collect()
    orphans = calls.where(F.col("status") == "orphan_response").count()
    latency = (
        calls.where(F.col("status") == "answered")
        .groupBy("request_code")
        .agg(
            F.percentile(F.col("latency_ms"), F.array(F.lit(0.5), F.lit(0.95), F.lit(0.99))).alias("p"),
            F.max("latency_ms").alias("max"),
        )
        .orderBy("request_code")
        .collect()
    )
    return {
        "captures": list(captures),
        "frames": int(totals["frames"] or 0),
        "requests": int(totals["requests"] or 0),
        "oneway_requests": int(totals["oneway"] or 0),
        "responses": int(totals["responses"] or 0),
        "connections": int(totals["connections"] or 0),
        "header_decode_errors": int(totals["errors"] or 0),
        "frames_by_serialize": serialize,
        "requests_by_code": _by_code(requests),
        "responses_by_code": _by_code(responses),
        "pairs": [{"request_code": int(r[0]), "response_code": int(r[1]), "count": int(r[2])} for r in pairs],
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
            for r in latency
        },
    }


def write_summary(summary: dict, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
        f.write("\n")
