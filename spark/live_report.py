"""``report.html`` of ``trocket analyze --follow``: the per-minute tables drawn as one
self-contained page (plotly inlined, as :mod:`trocket.spark.report`) that reloads
itself, with the follower's status (batches, lag, files, problems).

Frames, calls and errors per minute, the latency percentiles of the busiest request
codes per minute (held polls apart), messages put and got per topic (a topic filter),
and the latest errors. The minute still open (calls may still land in it) is drawn
like the others and marked in the tables; axes are linear, times UTC.
"""

from __future__ import annotations

import datetime as dt
import html

from .report import _CSS, _code_label, _Figures, _filter_menu, _short, _table, _time

__all__ = ["build_live_report"]

_TOP_CODES = 6
_HALF = dt.timedelta(seconds=30)


def _rows(t) -> list[dict]:
    return t.to_pylist() if t is not None and t.num_rows else []


def _io(figs: _Figures, io) -> str:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = _rows(io)
    if not rows:
        return "<p>no frames yet</p>"
    by: dict = {}
    for r in rows:  # a minute closed twice (frames that came late) adds up
        v = by.setdefault(r["minute"], [0, 0, 0])
        v[0] += r["frames"]
        v[1] += r["bytes"]
        v[2] += r["errors"]
    x = sorted(by)
    # error answers on their own axis: a few errors among 40k frames would draw as a flat line at 0
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07, row_heights=[0.4, 0.2, 0.4],
                        subplot_titles=("frames per minute", "error answers per minute", "bytes per minute"))  # fmt: skip
    span = {"width": [60_000] * len(x), "offset": 0}  # each bar covers its minute (ms on a date axis)
    fig.add_trace(go.Bar(x=x, y=[by[m][0] for m in x], name="frames", **span), 1, 1)
    fig.add_trace(go.Scatter(x=[m + _HALF for m in x], y=[by[m][2] for m in x], name="error answers", mode="lines+markers"), 2, 1)
    fig.add_trace(go.Bar(x=x, y=[by[m][1] for m in x], name="bytes", **span), 3, 1)
    fig.update_yaxes(rangemode="tozero", row=2, col=1)
    fig.update_layout(height=620, hovermode="x")
    fig.update_xaxes(title_text="minute (UTC)", row=3, col=1)
    return figs.html(fig)


def _calls(figs: _Figures, calls) -> str:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = _rows(calls)
    if not rows:
        return "<p>no calls yet</p>"
    totals: dict = {}
    for r in rows:
        totals[r["request_code"]] = totals.get(r["request_code"], 0) + r["calls"] + r["unanswered"]
    top = sorted(totals, key=lambda c: -totals[c])[:_TOP_CODES]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("calls per minute (answered; dotted: unanswered)", "latency p50 / p99 (ms, linear; held polls apart)"))  # fmt: skip
    for code in top:
        mine = sorted((r for r in rows if r["request_code"] == code), key=lambda r: r["minute"])
        x = [r["minute"] for r in mine]
        label = _code_label(code)
        name = _short(label, 30)
        fig.add_trace(go.Scatter(x=x, y=[r["calls"] for r in mine], name=name, legendgroup=label, hovertext=label), 1, 1)
        if any(r["unanswered"] for r in mine):
            fig.add_trace(go.Scatter(x=x, y=[r["unanswered"] for r in mine], name=f"{name} unanswered", legendgroup=label,
                                     line={"dash": "dot"}, hovertext=label), 1, 1)  # fmt: skip
        if any(r["p50_ms"] is not None for r in mine):
            fig.add_trace(go.Scatter(x=x, y=[r["p50_ms"] for r in mine], name=f"{name} p50", legendgroup=label, hovertext=label), 2, 1)
            fig.add_trace(go.Scatter(x=x, y=[r["p99_ms"] for r in mine], name=f"{name} p99", legendgroup=label, line={"dash": "dash"},
                                     hovertext=label), 2, 1)  # fmt: skip
    fig.update_layout(height=640, hovermode="x")
    fig.update_xaxes(title_text="minute of the request (UTC)", row=2, col=1)
    latest = sorted(rows, key=lambda r: (r["minute"], -r["calls"]), reverse=True)[:40]
    table = _table(
        ["minute (UTC)", "request code", "open", "calls", "errors", "unanswered", "held polls", "p50 ms", "p95 ms", "p99 ms", "max ms"],
        [[r["minute"].strftime("%Y-%m-%d %H:%M"), _code_label(r["request_code"]), "" if r["final"] else "open", r["calls"], r["errors"],
          r["unanswered"], r["held_polls"], r["p50_ms"], r["p95_ms"], r["p99_ms"], r["max_ms"]] for r in latest],
        left=3,
    )  # fmt: skip
    return figs.html(fig) + table


def _messages(figs: _Figures, msgs) -> str:
    import plotly.graph_objects as go

    rows = [r for r in _rows(msgs) if r["topic"]]
    if not rows:
        return "<p>no messages put or got yet</p>"
    topics = sorted({r["topic"] for r in rows})
    fig = go.Figure()
    for topic in topics:
        by: dict = {}
        for r in rows:
            if r["topic"] == topic:
                v = by.setdefault(r["minute"], [0, 0])
                v[0] += r["put_messages"]
                v[1] += r["got_messages"]
        x = sorted(by)
        name = _short(topic, 30)
        fig.add_trace(go.Scatter(x=x, y=[by[m][0] for m in x], name=f"{name} put", legendgroup=topic, hovertext=topic))
        fig.add_trace(go.Scatter(x=x, y=[by[m][1] for m in x], name=f"{name} got", legendgroup=topic, line={"dash": "dash"}, hovertext=topic))
    fig.update_layout(height=420, title="messages per minute by topic (put: sends answered SUCCESS; got: pull answers FOUND)",
                      updatemenus=_filter_menu(topics, 2, "topic"), hovermode="x", xaxis_title="minute (UTC)")  # fmt: skip
    return figs.html(fig)


def _errors(errors) -> str:
    rows = sorted(_rows(errors), key=lambda r: (r["minute"], r["count"]), reverse=True)[:50]
    return _table(
        ["minute (UTC)", "request", "response", "remark", "count"],
        [[r["minute"].strftime("%Y-%m-%d %H:%M"), _code_label(r["request_code"]), _code_label(r["response_code"], True), r["remark"], r["count"]]
         for r in rows],
        left=4,
    )  # fmt: skip


def _status(status: dict) -> str:
    last = status.get("last_batch") or {}
    lag = last.get("lag_s")
    rows = [
        ["folder followed", status["directory"]],
        ["updated (UTC)", status["updated"]],
        ["batches merged", status["batch_id"] + 1],
        ["frames", status["frames"]],
        ["calls paired", status["calls"]],
        ["requests still open", status["open_requests"]],
        ["newest frame (UTC)", _time(status["newest_frame_ns"])],
        ["last batch", f"{last.get('frames', 0):,} frames in {last.get('seconds', 0):.1f} s" if last else ""],
        ["lag (age of the newest frame counted)", f"{lag:.1f} s" if lag is not None else ""],
        ["bytes written but not read yet", last.get("unread", "")],
    ]
    files = [[name, offset] for name, offset in status["files"].items()]
    problems = "".join(f'<li class="bad">{html.escape(p)}</li>' for p in status["problems"])
    more = f'<p class="note">The newest 20 of {len(files)} files; all in status.json.</p>' if len(files) > 20 else ""
    return (_table(["", ""], rows) + more + _table(["file", "read up to byte"], files[-20:])
            + (f"<ul>{problems}</ul>" if problems else ""))  # fmt: skip


def build_live_report(views: dict, status: dict, refresh_s: float = 10) -> str:
    """The page: the per-minute tables (``views``: name -> Arrow table) and the status."""
    figs = _Figures()
    sections = [
        ("Status", _status(status)),
        ("Frames per minute", _io(figs, views.get("io"))),
        ("Calls and latency per minute, busiest request codes", _calls(figs, views.get("calls"))),
        ("Messages per topic", _messages(figs, views.get("messages"))),
        ("Latest errors", _errors(views.get("errors"))),
    ]
    body = "".join(f"<section><h2>{html.escape(t)}</h2>{c}</section>" for t, c in sections)
    note = f'<p class="note">Reloads every {refresh_s:g} s. Calls count in the minute of their request; a minute stays open until no call can land in it.</p>'
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{refresh_s:g}">'
        f"<title>trocket follow</title><style>{_CSS}</style></head><body><h1>RocketMQ traffic, live</h1>{note}{body}</body></html>\n"
    )
