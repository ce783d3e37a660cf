"""``report.html``: one self-contained page (matplotlib PNGs embedded as data URIs).

Every table and picture is a bounded aggregate computed in Spark (time buckets, top
tens, size buckets, the slowest twenty calls); the driver never sees the rows.
"""

from __future__ import annotations

import base64
import html
import io
import math

from trocket.codecs.codes import response_code_name, request_code_name

__all__ = ["build_report", "console_summary"]

_TOP = 10
_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
img{max-width:100%}.bad{color:#a00}
"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _table(headers: list[str], rows: list[list], left: int = 1) -> str:
    def cell(i: int, v, tag: str) -> str:
        cls = ' class="l"' if i < left else ""
        if isinstance(v, float):
            v = f"{v:.3f}"
        return f"<{tag}{cls}>{html.escape('' if v is None else str(v))}</{tag}>"

    head = "".join(cell(i, h, "th") for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell(i, v, "td") for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>" if rows else "<p>none</p>"


def _code_label(code: int | str, response: bool = False) -> str:
    code = int(code)
    return f"{code} {response_code_name(code) if response else request_code_name(code)}"


def _rate_picture(frames, summary: dict, plt) -> str:
    from pyspark.sql import functions as F

    req = frames.where(F.col("kind").isin("request", "oneway"))
    span = req.agg(F.min("ts_ns"), F.max("ts_ns")).first()
    if span[0] is None:
        return "<p>no requests</p>"
    width_s = max(1, math.ceil((span[1] - span[0]) / 1e9 / 300))
    top = [int(c) for c, _ in sorted(summary["requests_by_code"].items(), key=lambda kv: -kv[1])[:8]]
    series = (
        req.withColumn("bucket", F.floor((F.col("ts_ns") - F.lit(span[0])) / F.lit(width_s * 10**9)))
        .withColumn("c", F.when(F.col("code").isin(top), F.col("code")).otherwise(F.lit(-1)))
        .groupBy("bucket", "c")
        .count()
        .collect()
    )
    by_code: dict[int, dict[int, int]] = {}
    for r in series:
        by_code.setdefault(r["c"], {})[r["bucket"]] = r["count"]
    n_buckets = int((span[1] - span[0]) // (width_s * 10**9)) + 1
    fig, ax = plt.subplots(figsize=(10, 4))
    for code, points in sorted(by_code.items()):
        xs = list(range(n_buckets))
        ax.plot([x * width_s for x in xs], [points.get(x, 0) / width_s for x in xs],
                label="other" if code == -1 else _code_label(code))  # fmt: skip
    ax.set_xlabel("seconds since the first request")
    ax.set_ylabel("requests per second")
    ax.legend(fontsize=7, ncol=2)
    return _png(fig)


def _latency_picture(summary: dict, plt) -> str:
    lat = summary["latency_ms_by_code"]
    if not lat:
        return "<p>no answered calls</p>"
    codes = list(lat)
    fig, ax = plt.subplots(figsize=(10, 4))
    xs = range(len(codes))
    for i, p in enumerate(("p50", "p95", "p99")):
        ax.bar([x + (i - 1) * 0.27 for x in xs], [max(lat[c][p], 1e-3) for c in codes], width=0.27, label=p)
    ax.set_xticks(list(xs), [_code_label(c) for c in codes], rotation=30, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms, log scale)")
    ax.legend()
    return _png(fig)


def _responses_picture(summary: dict, plt) -> str:
    codes = summary["responses_by_code"]
    if not codes:
        return "<p>no responses</p>"
    fig, ax = plt.subplots(figsize=(8, 3.5))
    labels = [_code_label(c, response=True) for c in codes]
    ax.barh(labels, list(codes.values()), color="#4a7")
    ax.set_xscale("log")
    ax.set_xlabel("responses (log scale)")
    return _png(fig)


def _size_picture(frames, plt) -> str:
    from pyspark.sql import functions as F

    rows = (
        frames.where(F.col("kind").isNotNull())
        .withColumn("b", F.floor(F.log2(F.greatest(F.col("frame_len"), F.lit(1)))).cast("int"))
        .withColumn("k", F.when(F.col("kind") == "response", F.lit("responses")).otherwise(F.lit("requests")))
        .groupBy("k", "b")
        .count()
        .collect()
    )
    if not rows:
        return "<p>no frames</p>"
    lo = min(r["b"] for r in rows)
    hi = max(r["b"] for r in rows)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for i, k in enumerate(("requests", "responses")):
        counts = {r["b"]: r["count"] for r in rows if r["k"] == k}
        xs = list(range(lo, hi + 1))
        ax.bar([x + (i - 0.5) * 0.4 for x in xs], [counts.get(x, 0) for x in xs], width=0.4, label=k)
    ax.set_xticks(list(range(lo, hi + 1)), [f"{2**x}" for x in range(lo, hi + 1)], rotation=45, fontsize=7)
    ax.set_xlabel("frame size, bytes (power-of-two buckets, lower bound)")
    ax.set_yscale("log")
    ax.legend()
    return _png(fig)


def _tops(frames, calls) -> str:
    """Top ten topics, groups and clients by volume and by p95 latency: two jobs, each
    one group-by over (dimension, value) with a rank per dimension."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    dims = ("topic", "group", "client")

    def stacked(df, extra):
        return df.select(
            F.explode(F.array(*[F.struct(F.lit(d).alias("dim"), F.col(d).cast("string").alias("value")) for d in dims])).alias("s"),
            *extra,
        ).select("s.dim", "s.value", *extra).where(F.col("value").isNotNull())

    def top(df, order):
        w = Window.partitionBy("dim").orderBy(F.desc(order))
        return df.withColumn("rank", F.row_number().over(w)).where(F.col("rank") <= _TOP).orderBy("dim", "rank").collect()

    vol = top(
        stacked(frames, ["frame_len"]).groupBy("dim", "value").agg(
            F.count(F.lit(1)).alias("frames"), F.sum("frame_len").alias("bytes")
        ),
        "frames",
    )
    lat = top(
        stacked(calls.where((F.col("status") == "answered") & ~F.col("long_poll")), ["latency_ms"]).groupBy("dim", "value").agg(
            F.count(F.lit(1)).alias("calls"),
            F.avg("latency_ms").alias("mean"),
            F.percentile_approx("latency_ms", 0.95).alias("p95"),
            F.max("latency_ms").alias("max"),
        ),
        "p95",
    )
    out = []
    for d, title in zip(dims, ("topics", "groups", "clients")):
        out.append(f"<h3>Top {title} by volume</h3>")
        out.append(_table([d, "frames", "bytes"], [[r["value"], r["frames"], r["bytes"]] for r in vol if r["dim"] == d]))
        out.append(f"<h3>Top {title} by latency (p95)</h3>")
        out.append(
            _table(
                [d, "calls", "mean ms", "p95 ms", "max ms"],
                [[r["value"], r["calls"], r["mean"], r["p95"], r["max"]] for r in lat if r["dim"] == d],
            )
        )
    return "".join(out)


def _time(ts_ns: int | None) -> str:
    if ts_ns is None:
        return ""
    import datetime as dt

    return dt.datetime.fromtimestamp(ts_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


class _Empty:
    """Stands for a table when nothing was readable (no Spark session was started)."""


def build_report(frames, calls, summary: dict) -> str:
    """The whole HTML page."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pyspark.sql import functions as F

    s = summary
    if frames is None:  # nothing was readable: the summary alone
        frames = calls = _Empty()
    overview = _table(
        ["", "count"],
        [
            ["captures", ", ".join(s["captures"])],
            ["frames", s["frames"]],
            ["requests (oneway included)", s["requests"]],
            ["oneway requests", s["oneway_requests"]],
            ["responses", s["responses"]],
            ["connections", s["connections"]],
            ["header decode errors", s["header_decode_errors"]],
            ["JSON / ROCKETMQ frames", f"{s['frames_by_serialize'].get('JSON', 0)} / {s['frames_by_serialize'].get('ROCKETMQ', 0)}"],
            ["unanswered requests", sum(s["unanswered_by_code"].values())],
            ["orphan responses (no request seen)", s["unmatched_responses"]],
            ["stream problems", len(s["stream_problems"])],
        ],
    )
    codes = sorted(set(s["requests_by_code"]) | set(s["unanswered_by_code"]) | set(s["latency_ms_by_code"]), key=int)
    per_code = _table(
        ["request code", "requests", "unanswered", "p50 ms", "p95 ms", "p99 ms", "max ms"],
        [
            [_code_label(c), s["requests_by_code"].get(c, 0), s["unanswered_by_code"].get(c, 0)]
            + [s["latency_ms_by_code"].get(c, {}).get(p) for p in ("p50", "p95", "p99", "max")]
            for c in codes
        ],
    )
    pairs = _table(
        ["request", "response", "count"],
        [[_code_label(p["request_code"]), _code_label(p["response_code"], True), p["count"]] for p in s["pairs"]],
        left=2,
    )
    if isinstance(frames, _Empty):
        return _page([("Overview", overview), ("Stream problems", _problems(s))])
    slow = (
        calls.where((F.col("status") == "answered") & ~F.col("long_poll"))
        .orderBy(F.desc("latency_ms"))
        .limit(20)
        .select("request_ts_ns", "connection", "request_code_name", "opaque", "topic", "response_code_name", "latency_ms")
        .collect()
    )
    slow_t = _table(
        ["time (UTC)", "connection", "request", "opaque", "topic", "response", "latency ms"],
        [[_time(r[0]), *r[1:]] for r in slow],
        left=3,
    )
    unanswered = (
        calls.where(F.col("status") == "unanswered")
        .orderBy("request_ts_ns")
        .limit(50)
        .select("request_ts_ns", "connection", "request_code_name", "opaque", "topic", "group")
        .collect()
    )
    unanswered_t = _table(
        ["time (UTC)", "connection", "request", "opaque", "topic", "group"], [[_time(r[0]), *r[1:]] for r in unanswered], left=3
    )
    errors = (
        frames.where(F.col("kind").isNull())
        .orderBy("ts_ns")
        .limit(20)
        .select("ts_ns", "capture", "connection", "direction", "frame_len", "decode_error")
        .collect()
    )
    errors_t = _table(
        ["time (UTC)", "capture", "connection", "direction", "bytes", "error"], [[_time(r[0]), *r[1:]] for r in errors], left=4
    )
    problems = _problems(s)
    sections = [
        ("Overview", overview),
        ("Requests per second by code", _rate_picture(frames, s, plt)),
        ("Latency percentiles by request code", _latency_picture(s, plt) + per_code),
        ("Response codes", _responses_picture(s, plt) + pairs),
        ("Frame sizes", _size_picture(frames, plt)),
        ("Top topics, groups and clients", _tops(frames, calls)),
        ("Slowest calls (held polls apart)", slow_t),
        ("Held polls (long polling)", _held(s)),
        ("Unanswered requests (first 50)", unanswered_t),
        ("Stream problems", problems),
        ("Frames whose header did not decode (first 20)", errors_t),
    ]
    return _page(sections)


def _held(s: dict) -> str:
    rows = []
    for code, h in s["held_polls"].items():
        ms = h["held_ms"] or {}
        rows.append([_code_label(code), h["calls"], h["arrival"], h["expired"], h["other"], h["unanswered"],
                     ms.get("p50"), ms.get("p95"), ms.get("max")])  # fmt: skip
    return _table(["request code", "held polls", "answered by arrival", "expired", "other", "unanswered",
                   "held p50 ms", "held p95 ms", "held max ms"], rows)  # fmt: skip


def _problems(s: dict) -> str:
    return (
        "<ul>" + "".join(f'<li class="bad">{html.escape(p)}</li>' for p in s["stream_problems"]) + "</ul>"
        if s["stream_problems"]
        else "<p>none</p>"
    )


def _page(sections) -> str:
    body = "".join(f"<h2>{html.escape(t)}</h2>{c}" for t, c in sections)
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>trocket analysis</title>'
        f"<style>{_CSS}</style></head><body><h1>RocketMQ traffic analysis</h1>{body}</body></html>\n"
    )


def console_summary(summary: dict, out: str) -> str:
    """A few lines for the end of the run."""
    s = summary
    lines = [
        f"captures: {', '.join(s['captures']) or '(none)'}",
        f"frames {s['frames']}  requests {s['requests']} (oneway {s['oneway_requests']})  responses {s['responses']}"
        f"  connections {s['connections']}  header decode errors {s['header_decode_errors']}",
        f"unanswered {sum(s['unanswered_by_code'].values())}  orphan responses {s['unmatched_responses']}"
        f"  stream problems {len(s['stream_problems'])}",
    ]
    if not s["complete"]:
        lines.append("INCOMPLETE: the captures could not be read completely (see the problems)")
    top = sorted(s["requests_by_code"].items(), key=lambda kv: -kv[1])[:5]
    if top:
        parts = []
        for code, n in top:
            lat = s["latency_ms_by_code"].get(code)
            parts.append(f"{_code_label(code)} {n}" + (f" (p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms)" if lat else ""))
        lines.append("top requests: " + "; ".join(parts))
    for p in s["stream_problems"][:5]:
        lines.append(f"problem: {p}")
    if len(s["stream_problems"]) > 5:
        lines.append(f"... and {len(s['stream_problems']) - 5} more problems (see the report)")
    lines.append(f"tables and report in {out} (frames/, calls/, summary.json, report.html)")
    return "\n".join(lines)
