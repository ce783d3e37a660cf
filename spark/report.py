"""``report.html``: one self-contained interactive page (plotly, its JavaScript inlined
once: it works offline), drawn from the views (:mod:`trocket.spark.views`) and the
summary: no Spark job, no pass over the tables.

Charts zoom and pan, say their values on hover, and the IO graph and the message
charts have a capture / topic filter (plotly's own dropdowns: no code of ours runs in
the page). Axes are linear and in clock time (UTC); long names are cut in tables, the
whole name on hover.
"""

from __future__ import annotations

import datetime as dt
import html

from trocket.codecs.codes import request_code_name, response_code_name

__all__ = ["build_report", "console_summary"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
section{max-width:1300px}
table{border-collapse:collapse;margin:.5em 0 1.2em;font-size:13px}td,th{border:1px solid #ccc;padding:2px 7px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}h2{margin-top:1.4em;border-bottom:1px solid #ddd}
td.l span{display:inline-block;max-width:26em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom}
.bad{color:#a00}.note{color:#555;font-size:13px}
"""
_MAX_ROWS = 200
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def _code_label(code: int | str, response: bool = False) -> str:
    code = int(code)
    return f"{code} {response_code_name(code) if response else request_code_name(code)}"


def _time(ts_ns: int | None) -> str:
    if ts_ns is None:
        return ""
    return dt.datetime.fromtimestamp(ts_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _dt(ts_ns: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts_ns / 1e9, dt.timezone.utc)


def _short(text: str, n: int = 28) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _table(headers: list[str], rows: list[list], left: int = 1) -> str:
    """A table; the first ``left`` columns are text, cut with the whole text on hover."""

    def cell(i: int, v, tag: str) -> str:
        if isinstance(v, float):
            v = f"{v:,.3f}"
        elif isinstance(v, int) and not isinstance(v, bool):
            v = f"{v:,}"
        text = html.escape("" if v is None else str(v))
        if i < left:
            return f'<{tag} class="l"><span title="{text}">{text}</span></{tag}>'
        return f"<{tag}>{text}</{tag}>"

    head = "".join(cell(i, h, "th") for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell(i, v, "td") for i, v in enumerate(r)) + "</tr>" for r in rows[:_MAX_ROWS])
    more = f'<p class="note">{len(rows) - _MAX_ROWS:,} more rows in the Parquet view</p>' if len(rows) > _MAX_ROWS else ""
    return (f"<table><tr>{head}</tr>{body}</table>" + more) if rows else "<p>none</p>"


class _Figures:
    """plotly figures as HTML fragments; the first one carries plotly.js inline."""

    def __init__(self) -> None:
        self._first = True

    def html(self, fig) -> str:
        import plotly.io as pio

        fig.update_layout(margin={"l": 60, "r": 20, "t": 40, "b": 50}, template="plotly_white", hovermode="x unified")
        out = pio.to_html(fig, full_html=False, include_plotlyjs=self._first, config=_PLOT_CONFIG)
        self._first = False
        return out


def _filter_menu(names: list[str], traces_per_name: int, label: str) -> list[dict]:
    """A dropdown showing every trace, or one name's traces (the same number each)."""
    n = len(names) * traces_per_name
    buttons = [{"label": f"all {label}s", "method": "restyle", "args": [{"visible": [True] * n}]}]
    for i, name in enumerate(names):
        vis = [j // traces_per_name == i for j in range(n)]
        buttons.append({"label": _short(name, 40), "method": "restyle", "args": [{"visible": vis}]})
    return [{"buttons": buttons, "direction": "down", "x": 1.0, "xanchor": "right", "y": 1.15, "yanchor": "top"}]


def _io_graph(figs: _Figures, io) -> str:
    """Frames/s, bytes/s, errors/s and the calls' p50/p99 over clock time, per capture."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if io is None or not io.num_rows:
        return "<p>no frames</p>"
    rows = io.to_pylist()
    width = rows[0]["width_s"]
    captures = sorted({r["capture"] for r in rows})
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("frames/s and errors/s", "bytes/s", "latency of the calls made (ms; held polls apart)"))  # fmt: skip
    for cap in captures:
        mine = [r for r in rows if r["capture"] == cap]
        x = [r["ts"] for r in mine]
        name = _short(cap, 30)
        fig.add_trace(go.Scatter(x=x, y=[r["frames"] / width for r in mine], name=f"{name} frames/s", legendgroup=cap, hovertext=cap), 1, 1)
        fig.add_trace(go.Scatter(x=x, y=[r["errors"] / width for r in mine], name=f"{name} errors/s", legendgroup=cap,
                                 line={"dash": "dot"}, hovertext=cap), 1, 1)  # fmt: skip
        fig.add_trace(go.Scatter(x=x, y=[r["bytes"] / width for r in mine], name=f"{name} bytes/s", legendgroup=cap, hovertext=cap), 2, 1)
        fig.add_trace(go.Scatter(x=x, y=[r["p50_ms"] for r in mine], name=f"{name} p50", legendgroup=cap, hovertext=cap), 3, 1)
        fig.add_trace(go.Scatter(x=x, y=[r["p99_ms"] for r in mine], name=f"{name} p99", legendgroup=cap, line={"dash": "dash"},
                                 hovertext=cap), 3, 1)  # fmt: skip
    fig.update_layout(height=720, updatemenus=_filter_menu(captures, 5, "capture"), hovermode="x")
    fig.update_xaxes(title_text="time (UTC)", row=3, col=1)
    note = f'<p class="note">Buckets of {width:g} s; percentiles from 1/8-power-of-two bins (within 5 %).</p>'
    return figs.html(fig) + note


def _latency(figs: _Figures, s: dict) -> str:
    import plotly.graph_objects as go

    lat = s["latency_ms_by_code"]
    rows = []
    codes = sorted(set(s["requests_by_code"]) | set(s["unanswered_by_code"]) | set(lat), key=int)
    for c in codes:
        f = lat.get(c, {})
        rows.append([_code_label(c), s["requests_by_code"].get(c, 0), s["unanswered_by_code"].get(c, 0),
                     f.get("p50"), f.get("p95"), f.get("p99"), f.get("max")])  # fmt: skip
    table = _table(["request code", "requests", "unanswered", "p50 ms", "p95 ms", "p99 ms", "max ms"], rows)
    if not lat:
        return table
    labels = [_code_label(c) for c in lat]
    fig = go.Figure()
    for p in ("p50", "p95", "p99"):
        fig.add_trace(go.Bar(y=[_short(x) for x in labels], x=[lat[c][p] for c in lat], name=p, orientation="h", hovertext=labels))
    fig.update_layout(barmode="group", height=120 + 60 * len(labels), xaxis_title="latency (ms, linear)", hovermode="closest")
    return figs.html(fig) + table


def _held(s: dict) -> str:
    rows = []
    for code, h in s["held_polls"].items():
        ms = h["held_ms"] or {}
        rows.append([_code_label(code), h["calls"], h["arrival"], h["expired"], h["other"], h["unanswered"],
                     ms.get("p50"), ms.get("p95"), ms.get("max")])  # fmt: skip
    return '<p class="note">Pulls the broker may hold (suspend flag): their latency is the time held.</p>' + _table(
        ["request code", "held polls", "answered by arrival", "expired", "other", "still held at the end", "held p50 ms",
         "held p95 ms", "held max ms"], rows)  # fmt: skip


def _responses(s: dict) -> str:
    return _table(
        ["request", "response", "count"],
        [[_code_label(p["request_code"]), _code_label(p["response_code"], True), p["count"]] for p in s["pairs"]],
        left=2,
    )


def _conversations(conv) -> str:
    if conv is None:
        return "<p>none</p>"
    rows = [[r["connection"], r["role"], r["client_id"], r["language"], r["version"], r["capture"], _time(r["first_ns"]),
             _time(r["last_ns"]), r["frames_to_server"], r["bytes_to_server"], r["errors_to_server"], r["frames_to_client"],
             r["bytes_to_client"], r["errors_to_client"], r["unanswered"]] for r in conv.to_pylist()]  # fmt: skip
    return _table(["connection", "role", "client id", "language", "version", "capture", "first (UTC)", "last (UTC)", "frames →",
                   "bytes →", "errors →", "frames ←", "bytes ←", "errors ←", "unanswered"], rows, left=8)  # fmt: skip


def _endpoints(ep) -> str:
    if ep is None:
        return "<p>none</p>"
    rows = [[r["kind"], r["endpoint"], r["detail"], r["connections"], r["frames"], r["bytes"], r["errors"], r["unanswered"],
             _time(r["first_ns"]), _time(r["last_ns"])] for r in ep.to_pylist()]  # fmt: skip
    return _table(["kind", "client instance / server", "language / role", "connections", "frames", "bytes", "errors", "unanswered",
                   "first (UTC)", "last (UTC)"], rows, left=3)  # fmt: skip


def _errors(figs: _Figures, err) -> str:
    import plotly.graph_objects as go

    if err is None or not err.num_rows:
        return "<p>no error answers</p>"
    rows = err.to_pylist()
    by: dict = {}
    for r in rows:
        key = f"{r['response_code']} {r['response_code_name']}"
        by.setdefault(key, {}).setdefault(r["minute"], 0)
        by[key][r["minute"]] += r["count"]
    fig = go.Figure()
    for key, points in sorted(by.items()):
        xs = sorted(points)
        fig.add_trace(go.Bar(x=[_dt(x) for x in xs], y=[points[x] for x in xs], name=_short(key, 30), hovertext=key))
    fig.update_layout(barmode="stack", height=320, yaxis_title="error answers per minute", xaxis_title="time (UTC)")
    table_rows = [[_time(r["minute"])[:16], r["capture"], r["request_code_name"], f"{r['response_code']} {r['response_code_name']}",
                   r["response_remark"], r["topic"], r["group"], r["client"], r["server"], r["count"]] for r in rows]  # fmt: skip
    table_rows.sort(key=lambda r: -r[-1])
    table_rows = table_rows[:50]
    return figs.html(fig) + '<p class="note">The 50 most frequent; all in views/errors.</p>' + _table(["minute", "capture", "request", "answer", "remark", "topic", "group", "client", "server", "count"],
                                   table_rows, left=9)  # fmt: skip


def _messages(figs: _Figures, msgs, lag) -> str:
    import plotly.graph_objects as go

    if msgs is None or not msgs.num_rows:
        return "<p>no messages</p>"
    rows = msgs.to_pylist()
    topics = sorted({r["topic"] or "(none)" for r in rows})
    fig = go.Figure()
    for topic in topics:
        per: dict = {}
        for r in rows:
            if (r["topic"] or "(none)") == topic:
                p = per.setdefault(r["minute"], [0, 0])
                p[0] += r["put_messages"]
                p[1] += r["got_messages"]
        xs = sorted(per)
        fig.add_trace(go.Bar(x=[_dt(x) for x in xs], y=[per[x][0] for x in xs], name=f"{_short(topic)} put", hovertext=topic))
        fig.add_trace(go.Bar(x=[_dt(x) for x in xs], y=[per[x][1] for x in xs], name=f"{_short(topic)} got", hovertext=topic))
    fig.update_layout(barmode="group", height=340, yaxis_title="messages per minute", xaxis_title="time (UTC)",
                      updatemenus=_filter_menu(topics, 2, "topic"))  # fmt: skip
    totals: dict = {}
    for r in rows:
        t = totals.setdefault((r["topic"], r["group"]), [0, 0, 0, 0, 0])
        for i, k in enumerate(("put_messages", "put_bytes", "got_messages", "got_bytes", "send_backs")):
            t[i] += r[k]
    table = _table(["topic", "group", "put", "put bytes (bodies)", "got", "got bytes (stored)", "send-backs"],
                   [[t, g, *v] for (t, g), v in sorted(totals.items(), key=lambda kv: -kv[1][0] - kv[1][2])], left=2)  # fmt: skip
    out = figs.html(fig) + table
    if lag is not None and lag.num_rows:
        lrows = lag.to_pylist()
        per_group: dict = {}
        for r in lrows:
            per_group.setdefault((r["group"], r["topic"]), {}).setdefault(r["minute"], 0)
            per_group[(r["group"], r["topic"])][r["minute"]] += r["lag"] or 0
        lf = go.Figure()
        for (g, t), points in sorted(per_group.items()):
            xs = sorted(points)
            label = f"{g} / {t}"
            lf.add_trace(go.Scatter(x=[_dt(x) for x in xs], y=[points[x] for x in xs], name=_short(label, 36), hovertext=label, mode="lines+markers"))
        lf.update_layout(height=300, yaxis_title="consumer lag (messages, linear)", xaxis_title="time (UTC)")
        out += "<h3>Consumer lag (max offset seen in pull answers less the committed offset)</h3>" + figs.html(lf)
    return out


def _slowest(figs: _Figures, slow, ladder) -> str:
    import plotly.graph_objects as go

    if slow is None or not slow.num_rows:
        return "<p>no answered calls</p>"
    rows = slow.to_pylist()
    table = _table(["time (UTC)", "connection", "request", "answer", "topic", "opaque", "latency ms"],
                   [[_time(r["request_ts_ns"]), r["connection"], r["request_code_name"], r["response_code_name"], r["topic"],
                     r["opaque"], r["latency_ms"]] for r in rows], left=5)  # fmt: skip
    if ladder is None or not ladder.num_rows:
        return table
    steps = ladder.to_pylist()
    out = [table]
    for call in rows[:3]:
        mine = [f for f in steps if f["call"] == call["call"]]
        if not mine:
            continue
        t0 = mine[0]["ts_ns"]
        fig = go.Figure()
        for x in (0, 1):
            fig.add_trace(go.Scatter(x=[x, x], y=[0, (mine[-1]["ts_ns"] - t0) / 1e6], mode="lines", line={"color": "#999"}, showlegend=False,
                                     hoverinfo="skip"))  # fmt: skip
        for f in mine:
            y = (f["ts_ns"] - t0) / 1e6
            a, b = (0, 1) if f["direction"] == "to_server" else (1, 0)
            hit = f["opaque"] == call["opaque"] and f["code_name"] in (call["request_code_name"], call["response_code_name"])
            text = f"{f['kind'] or '?'} {f['code_name'] or ''} #{f['opaque']} ({f['frame_len']} B)"
            fig.add_annotation(x=b, y=y, ax=a, ay=y, xref="x", yref="y", axref="x", ayref="y", showarrow=True, arrowhead=2,
                               arrowcolor="#c00" if hit else "#357")  # fmt: skip
            fig.add_trace(go.Scatter(x=[0.5], y=[y], mode="text", text=[text], textposition="top center", showlegend=False,
                                     hovertext=f"{_time(f['ts_ns'])} {text}", hoverinfo="text"))  # fmt: skip
        fig.update_layout(height=min(700, 160 + 26 * len(mine)), hovermode="closest",
                          title=f"{call['connection']}: {call['request_code_name']} #{call['opaque']}, {call['latency_ms']:.1f} ms",
                          xaxis={"tickvals": [0, 1], "ticktext": [_short(call["client"], 24), _short(call["server"], 24)], "range": [-0.2, 1.2]},
                          yaxis={"autorange": "reversed", "title": "ms after the first frame shown"})  # fmt: skip
        out.append(figs.html(fig))
    return "".join(out)


def _captures(cap) -> str:
    if cap is None:
        return "<p>none</p>"
    rows = [[r["capture"], "yes" if r["complete"] else "NO", r["connections"], r.get("frames"), _time(r["first_ns"]), _time(r["last_ns"]),
             r.get("stream_bytes"), r.get("frame_bytes"), r.get("duplicate_bytes"), r.get("problem_bytes"), r.get("filtered_bytes"),
             r.get("carried_bytes"), r.get("unaccounted_bytes")] for r in cap.to_pylist()]  # fmt: skip
    return _table(["capture", "complete", "connections", "frames", "first (UTC)", "last (UTC)", "stream bytes", "in frames",
                   "retransmitted", "in problems", "filtered", "carried on", "unaccounted"], rows)  # fmt: skip


def _problems(s: dict) -> str:
    if not s["stream_problems"]:
        return "<p>none</p>"
    return "<ul>" + "".join(f'<li class="bad">{html.escape(p)}</li>' for p in s["stream_problems"]) + "</ul>"


def build_report(views: dict | None, summary: dict) -> str:
    """The whole HTML page from the views and the summary."""
    s = summary
    views = views or {}
    figs = _Figures()
    span = views.get("span")
    overview = _table(
        ["", "count"],
        [
            ["captures", ", ".join(s["captures"])],
            ["read completely", "yes" if s["complete"] else "NO: " + ", ".join(s["incomplete_captures"])],
            ["time (UTC)", f"{_time(span[0])} to {_time(span[1])}" if span else ""],
            ["frames", s["frames"]],
            ["requests (oneway included)", s["requests"]],
            ["responses", s["responses"]],
            ["connections", s["connections"]],
            ["header decode errors", s["header_decode_errors"]],
            ["unanswered requests", sum(s["unanswered_by_code"].values())],
            ["orphan responses (no request seen)", s["unmatched_responses"]],
            ["held polls", sum(h["calls"] for h in s["held_polls"].values())],
            ["stream problems", len(s["stream_problems"])],
        ],
    )
    sections = [
        ("Overview", overview),
        ("IO graph", _io_graph(figs, views.get("io"))),
        ("Latency by request code (held polls apart)", _latency(figs, s)),
        ("Held polls (long polling)", _held(s)),
        ("Slowest calls, and the flow of the slowest three", _slowest(figs, views.get("slowest"), views.get("ladder"))),
        ("Errors", _errors(figs, views.get("errors"))),
        ("Messages by topic and group", _messages(figs, views.get("messages"), views.get("lag"))),
        ("Conversations", _conversations(views.get("conversations"))),
        ("Client instances and servers", _endpoints(views.get("endpoints"))),
        ("Request and response codes", _responses(s)),
        ("Captures", _captures(views.get("captures"))),
        ("Stream problems", _problems(s)),
    ]
    body = "".join(f"<section><h2>{html.escape(t)}</h2>{c}</section>" for t, c in sections)
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
        f"  held polls {sum(h['calls'] for h in s['held_polls'].values())}  stream problems {len(s['stream_problems'])}",
    ]
    if not s["complete"]:
        lines.append("INCOMPLETE: the captures could not be read completely (see the problems): " + ", ".join(s["incomplete_captures"]))
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
    lines.append(f"tables and report in {out} (frames/, calls/, views/, summary.json, report.html)")
    return "\n".join(lines)
