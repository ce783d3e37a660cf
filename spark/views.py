"""The report's views, each a small Parquet table in ``DIR/views/``: aggregates of the
``frames`` and ``calls`` tables made by one streaming pass over each (pyarrow, batch by
batch, only the columns a view needs; memory grows with the views, not the tables).

- ``io``: per time bucket (the width chosen from the span: about 300 buckets) and
  capture: frames, bytes, errors; p50 and p99 latency of the calls made in it (held
  polls apart; from a histogram of 1/8-power-of-two bins: within 5 %);
- ``conversations``: per connection piece (capture, connection_id): client, server, the
  server's role (name server, broker, from the request codes it answers), the client's
  id, language and version, first and last time, frames, bytes and errors per direction,
  unanswered requests;
- ``endpoints``: per client instance (its id, or its host) and per server;
- ``errors``: answers with a non-zero code (but a pull's NOT_FOUND / RETRY /
  OFFSET_MOVED) by minute, capture, request, code, remark, topic, group, client, server;
- ``messages``: per minute, topic and group, messages and bytes put (SEND_MESSAGE,
  _V2, batches answered SUCCESS) and got (pull answers FOUND: the stored records, as
  BrokerStatsManager counts them), send-backs; ``lag``: per minute, group, topic and
  queue, the committed offset, the queue's max offset seen in pull answers, and the lag;
- ``captures``: per capture, frames, first and last time, and its bytes (summary);
- ``slowest``: the slowest calls (held polls apart) and, for each, its connection's
  frames around it (``ladder``): the report's flow graphs.
"""

from __future__ import annotations

import math
import posixpath

from .storage import LOCAL, Storage, filesystem, join, make_dirs

__all__ = ["build_views", "NAMESRV_CODES", "OK_CODES"]

#: answers that are no error: SUCCESS, and a pull's PULL_NOT_FOUND, RETRY_IMMEDIATELY, OFFSET_MOVED
OK_CODES = (0, 19, 20, 21)
#: request codes only a name server answers
NAMESRV_CODES = (100, 101, 102, 103, 104, 105, 106, 205, 206, 207, 208, 217, 218, 219, 220, 221, 222, 223, 224, 225, 300, 301, 322)
SEND_CODES = (10, 310, 320)
PULL_CODES = (11, 361)
SEND_BACK = 36
_LAT_BINS = 8  # bins per power of two
_SLOWEST = 10


def _width_ns(span_ns: int) -> int:
    """A round bucket width giving about 300 buckets over ``span_ns``."""
    target = max(1, span_ns) / 300
    for w in (10**6, 10**7, 10**8, 10**9, 2 * 10**9, 5 * 10**9, 10**10, 3 * 10**10, 6 * 10**10, 3 * 10**11, 6 * 10**11,
              18 * 10**11, 36 * 10**11, 6 * 36 * 10**11, 24 * 36 * 10**11):  # fmt: skip
        if w >= target:
            return w
    return 24 * 36 * 10**11 * math.ceil(target / (24 * 36 * 10**11))


def _dataset(files: list[str], base: str, storage: Storage = LOCAL):
    """The Parquet parts ``files`` of the table in ``base`` (its ``capture=NAME`` folders
    read as a column; paths or URIs, reached through ``storage``)."""
    import pyarrow.dataset as ds

    fs, base_path = filesystem(base, storage)
    paths = [filesystem(f, storage)[1] for f in files]
    return ds.dataset(paths, format="parquet", partitioning="hive", partition_base_dir=base_path, filesystem=fs)


def _span(files: list[str], storage: Storage = LOCAL) -> tuple[int, int] | None:
    """The first and last ``ts_ns`` of the frames parts, from their row groups'
    statistics (a scan of the column where a row group has none)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    lo = hi = None
    for uri in files:
        fs, path = filesystem(uri, storage)
        pf = pq.ParquetFile(path, filesystem=fs)
        md = pf.metadata
        col = md.schema.names.index("ts_ns")
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            if not rg.num_rows:
                continue
            st = rg.column(col).statistics
            if st is not None and st.has_min_max and not st.null_count:
                a, b = st.min, st.max
            else:
                mm = pc.min_max(pf.read_row_group(g, columns=["ts_ns"]).column(0))
                a, b = mm["min"].as_py(), mm["max"].as_py()
                if a is None:
                    continue
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
    return None if lo is None else (lo, hi)


class _Agg:
    """A group-by built batch by batch: partial results concatenated, re-aggregated
    when they pile up and at the end (sums of sums, mins of mins, ...)."""

    def __init__(self, keys: list[str], aggs: list[tuple[str, str]]) -> None:
        self.keys = keys
        self.aggs = aggs
        self.parts: list = []
        self.rows = 0

    def add(self, table) -> None:
        if not table.num_rows:
            return
        part = table.group_by(self.keys, use_threads=False).aggregate(self.aggs)
        self.parts.append(part)
        self.rows += part.num_rows
        if len(self.parts) > 16:
            self.parts = [self._merge()]

    def _merge(self):
        import pyarrow as pa

        t = pa.concat_tables(self.parts)
        again = {"sum": "sum", "count": "sum", "min": "min", "max": "max"}
        merged = t.group_by(self.keys, use_threads=False).aggregate([(f"{c}_{f}", again[f]) for c, f in self.aggs])
        return _renamed(merged, self.aggs)

    def absorb(self, partial) -> None:
        """Take in another pass's :meth:`result` (None: it saw nothing)."""
        if partial is not None and partial.num_rows:
            self.parts.append(partial)
            if len(self.parts) > 16:
                self.parts = [self._merge()]

    def result(self):
        if not self.parts:
            return None
        return self._merge() if len(self.parts) > 1 else self.parts[0]


def _renamed(merged, aggs):
    """A re-aggregated table with its columns named as the first aggregation's."""
    names = []
    for name in merged.column_names:
        for c, f in aggs:
            for g in ("sum", "min", "max"):
                if name == f"{c}_{f}_{g}":
                    name = f"{c}_{f}"
        names.append(name)
    return merged.rename_columns(names)


def _frames_aggs() -> dict:
    return {
        "io": _Agg(["bucket", "capture"], [("frame_len", "count"), ("frame_len", "sum"), ("err", "sum")]),
        "conv": _Agg(["capture", "connection_id", "connection", "client", "server", "direction"],
                     [("frame_len", "count"), ("frame_len", "sum"), ("err", "sum"), ("ts_ns", "min"), ("ts_ns", "max")]),
        "who": _Agg(["capture", "connection_id"], [("is_ns", "max"), ("is_broker", "max"), ("language", "max"), ("version", "max"),
                                                   ("client_id", "max")]),
        "lag": _Agg(["minute", "group", "topic", "queue_id"], [("commit_offset", "max"), ("max_offset", "max")]),
    }  # fmt: skip


def _calls_aggs() -> dict:
    return {
        "lat": _Agg(["bucket", "capture", "bin"], [("latency_ms", "count")]),
        "errors": _Agg(["minute", "capture", "request_code_name", "response_code", "response_code_name", "response_remark", "topic",
                        "group", "client", "server"], [("status", "count"), ("ts_ns", "min"), ("ts_ns", "max")]),
        "msgs": _Agg(["minute", "topic", "group"], [("put_messages", "sum"), ("put_bytes", "sum"), ("got_messages", "sum"),
                                                     ("got_bytes", "sum"), ("send_backs", "sum")]),
        "unanswered": _Agg(["request_capture", "request_connection_id"], [("status", "count")]),
    }  # fmt: skip


def frames_pass(files: list[str], base: str, t0: int, width: int, storage: Storage = LOCAL) -> dict:
    """The frames views' partial aggregates over the parts ``files`` of the table in
    ``base`` (one :meth:`_Agg.result` per view): a task's share of the pass."""
    import pyarrow as pa
    import pyarrow.compute as pc

    aggs = _frames_aggs()
    io, conv, who, lag = aggs["io"], aggs["conv"], aggs["who"], aggs["lag"]
    minute = 60 * 10**9
    cols = ["capture", "connection_id", "connection", "client", "server", "direction", "kind", "code", "frame_len", "ts_ns",
            "language", "version", "client_id", "topic", "group", "queue_id", "commit_offset", "max_offset"]  # fmt: skip
    for b in _dataset(files, base, storage).to_batches(columns=cols, batch_size=1 << 16, batch_readahead=1, fragment_readahead=1):
        if not b.num_rows:
            continue
        t = pa.Table.from_batches([b])
        resp = pc.equal(t["kind"], "response")
        err = pc.and_(resp, pc.invert(pc.is_in(t["code"], pa.array(OK_CODES, pa.int32())))).cast(pa.int64())
        t = t.append_column("err", pc.fill_null(err, 0))
        t = t.append_column("bucket", pc.divide(pc.subtract(t["ts_ns"], t0), width))
        t = t.append_column("minute", pc.multiply(pc.divide(t["ts_ns"], minute), minute))
        io.add(t.select(["bucket", "capture", "frame_len", "err"]))
        conv.add(t.select(["capture", "connection_id", "connection", "client", "server", "direction", "frame_len", "err", "ts_ns"]))
        req = t.filter(pc.and_(pc.equal(t["direction"], "to_server"), pc.is_in(t["kind"], pa.array(["request", "oneway"]))))
        if req.num_rows:
            req = req.append_column("is_ns", pc.is_in(req["code"], pa.array(NAMESRV_CODES, pa.int32())).cast(pa.int8()))
            req = req.append_column("is_broker", pc.invert(pc.is_in(req["code"], pa.array(NAMESRV_CODES, pa.int32()))).cast(pa.int8()))
            who.add(req.select(["capture", "connection_id", "is_ns", "is_broker", "language", "version", "client_id"]))
        off = t.filter(pc.or_(pc.is_valid(t["commit_offset"]), pc.is_valid(t["max_offset"])))
        off = off.filter(pc.is_valid(off["group"]))
        if off.num_rows:
            lag.add(off.select(["minute", "group", "topic", "queue_id", "commit_offset", "max_offset"]))
    return {name: a.result() for name, a in aggs.items()}


def calls_pass(files: list[str], base: str, t0: int, width: int, storage: Storage = LOCAL) -> dict:
    """The calls views' partial aggregates over the parts ``files`` of the table in
    ``base``, and its slowest calls (held polls apart)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    aggs = _calls_aggs()
    lat, errors, msgs, unanswered = aggs["lat"], aggs["errors"], aggs["msgs"], aggs["unanswered"]
    minute = 60 * 10**9
    slowest: list = []
    ccols = ["status", "request_code", "request_code_name", "response_code", "response_code_name", "response_remark", "topic",
             "group", "client", "server", "connection", "request_ts_ns", "response_ts_ns", "latency_ms", "long_poll",
             "request_capture", "request_connection_id", "response_capture", "request_messages", "request_message_bytes",
             "response_messages", "response_message_bytes", "opaque"]  # fmt: skip
    for b in _dataset(files, base, storage).to_batches(columns=ccols, batch_size=1 << 16, batch_readahead=1, fragment_readahead=1):
        if not b.num_rows:
            continue
        t = pa.Table.from_batches([b])
        ts = pc.coalesce(t["request_ts_ns"], t["response_ts_ns"])
        t = t.append_column("ts_ns", ts)
        t = t.append_column("minute", pc.multiply(pc.divide(ts, minute), minute))
        t = t.append_column("capture", pc.coalesce(t["request_capture"], t["response_capture"]))
        answered = t.filter(pc.equal(t["status"], "answered"))
        plain = answered.filter(pc.invert(pc.fill_null(answered["long_poll"], False)))
        if plain.num_rows:
            ns = pc.max_element_wise(pc.subtract(plain["response_ts_ns"], plain["request_ts_ns"]), 1)
            bins = pc.cast(pc.floor(pc.multiply(pc.log2(ns), float(_LAT_BINS))), pa.int64())
            lt = plain.select(["capture", "latency_ms"]).append_column("bin", bins)
            lt = lt.append_column("bucket", pc.divide(pc.subtract(plain["request_ts_ns"], t0), width))
            lat.add(lt)
            # the batch's slowest: sorted by the one column, then only those rows taken
            top = pc.array_sort_indices(plain["latency_ms"], order="descending")[:_SLOWEST]
            slowest = _slowest(slowest, plain.take(top).to_pylist())
        bad = t.filter(pc.and_(pc.is_valid(t["response_code"]), pc.invert(pc.is_in(t["response_code"], pa.array(OK_CODES, pa.int32())))))
        if bad.num_rows:
            bad = bad.set_column(bad.column_names.index("response_remark"), "response_remark",
                                 pc.utf8_slice_codeunits(pc.fill_null(bad["response_remark"], ""), 0, 200))  # fmt: skip
            errors.add(bad.select(["minute", "capture", "request_code_name", "response_code", "response_code_name", "response_remark",
                                   "topic", "group", "client", "server", "status", "ts_ns"]))  # fmt: skip
        ok = answered.filter(pc.equal(answered["response_code"], 0))
        if ok.num_rows:
            code = ok["request_code"]
            zero = pa.scalar(0, pa.int64())
            is_send = pc.is_in(code, pa.array(SEND_CODES, pa.int32()))
            is_pull = pc.is_in(code, pa.array(PULL_CODES, pa.int32()))
            m = ok.select(["minute", "topic", "group"])
            m = m.append_column("put_messages", pc.if_else(is_send, pc.fill_null(ok["request_messages"].cast(pa.int64()), 0), zero))
            m = m.append_column("put_bytes", pc.if_else(is_send, pc.fill_null(ok["request_message_bytes"], 0), zero))
            m = m.append_column("got_messages", pc.if_else(is_pull, pc.fill_null(ok["response_messages"].cast(pa.int64()), 0), zero))
            m = m.append_column("got_bytes", pc.if_else(is_pull, pc.fill_null(ok["response_message_bytes"], 0), zero))
            m = m.append_column("send_backs", pc.equal(code, SEND_BACK).cast(pa.int64()))
            msgs.add(m)
        un = t.filter(pc.equal(t["status"], "unanswered"))
        if un.num_rows:
            unanswered.add(un.select(["request_capture", "request_connection_id", "status"]))
    return {**{name: a.result() for name, a in aggs.items()}, "slowest": slowest}


def _slowest(kept: list[dict], more: list[dict]) -> list[dict]:
    """The :data:`_SLOWEST` slowest of two lists of calls (ties: the earlier request first)."""
    return sorted(kept + more, key=lambda r: (-r["latency_ms"], r["request_ts_ns"], r["opaque"]))[:_SLOWEST]


def tables_pass(share: list[tuple[str, str]], frames_base: str, calls_base: str, t0: int, width: int,
                storage: Storage = LOCAL) -> tuple[dict | None, dict | None]:
    """A task's share of both passes: ``share`` holds ``("frames", part)`` and ``("calls",
    part)`` items; the :func:`frames_pass` and :func:`calls_pass` results over its parts of
    each table (None for a table it has none of). One job for both tables keeps every
    core busy to the end (two jobs would each wait for their slowest task)."""
    frames = [f for kind, f in share if kind == "frames"]
    calls = [f for kind, f in share if kind == "calls"]
    return (frames_pass(frames, frames_base, t0, width, storage) if frames else None,
            calls_pass(calls, calls_base, t0, width, storage) if calls else None)


def _serial(fn, files: list[str]) -> list:
    return [fn(files)] if files else []


def build_views(out: str, summary: dict, map_parts=None, storage: Storage = LOCAL) -> dict:
    """Write ``out/views/*.parquet``; returns the views as pyarrow tables (for the report).
    ``map_parts(fn, items)``: runs ``fn`` over shares of ``items`` (both tables' parts:
    :func:`tables_pass`) and returns its results (the job spreads the passes over the
    executors); by default one pass here.
    ``out``: a local path or a URI, reached through ``storage``."""
    import functools

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .job import part_files

    map_parts = map_parts or _serial
    frames_dir, calls_dir = join(out, "frames"), join(out, "calls")
    frame_files = part_files(frames_dir, storage)
    span = _span(frame_files, storage)
    views: dict = {"span": span}
    vdir = join(out, "views")
    make_dirs(vdir, storage)
    vfs, vpath = filesystem(vdir, storage)
    t0 = span[0] if span else 0
    width = _width_ns(span[1] - span[0]) if span else 10**9
    views["width_ns"] = width

    aggs = {**_frames_aggs(), **_calls_aggs()}
    slowest: list = []
    items = [("frames", f) for f in frame_files] + [("calls", f) for f in part_files(calls_dir, storage)]
    both = functools.partial(tables_pass, frames_base=frames_dir, calls_base=calls_dir, t0=t0, width=width, storage=storage)
    for frames_part, calls_part in map_parts(both, items):
        for part in (frames_part, calls_part):
            if part is None:
                continue
            if "slowest" in part:
                slowest = _slowest(slowest, part.pop("slowest"))
            for name, t in part.items():
                aggs[name].absorb(t)
    io, conv, who, lag = aggs["io"], aggs["conv"], aggs["who"], aggs["lag"]
    lat, errors, msgs, unanswered = aggs["lat"], aggs["errors"], aggs["msgs"], aggs["unanswered"]

    def write(name: str, table) -> None:
        if table is not None:
            pq.write_table(table, posixpath.join(vpath, f"{name}.parquet"), filesystem=vfs)
        views[name] = table

    # io: frames, bytes, errors and the latency percentiles per bucket and capture
    io_t, lat_t = io.result(), lat.result()
    if io_t is not None:
        pct: dict = {}
        if lat_t is not None:
            groups: dict = {}
            for bucket, capture, b, n in zip(*(lat_t[c].to_pylist() for c in ("bucket", "capture", "bin", "latency_ms_count"))):
                groups.setdefault((bucket, capture), []).append((b, n))
            for key, hist in groups.items():
                hist.sort()
                total = sum(n for _, n in hist)
                got = {}
                for q in (0.5, 0.99):
                    rank, acc = q * (total - 1), 0
                    for b, n in hist:
                        acc += n
                        if acc > rank:
                            got[q] = 2 ** ((b + 0.5) / _LAT_BINS) / 1e6
                            break
                pct[key] = (got.get(0.5), got.get(0.99), total)
        keys = list(zip(io_t["bucket"].to_pylist(), io_t["capture"].to_pylist()))
        io_t = pa.table({
            "ts": pa.array([(t0 + b * width) // 1000 for b, _ in keys], pa.timestamp("us", tz="UTC")),
            "capture": io_t["capture"], "width_s": pa.array([width / 1e9] * len(keys)),
            "frames": io_t["frame_len_count"], "bytes": io_t["frame_len_sum"], "errors": io_t["err_sum"],
            "calls": pa.array([pct.get(k, (None, None, 0))[2] for k in keys], pa.int64()),
            "p50_ms": pa.array([pct.get(k, (None,))[0] for k in keys], pa.float64()),
            "p99_ms": pa.array([pct.get(k, (None, None))[1] for k in keys], pa.float64()),
        }).sort_by([("ts", "ascending"), ("capture", "ascending")])  # fmt: skip
    write("io", io_t)

    # conversations: a row per connection piece, both directions side by side
    conv_t = conv.result()
    if conv_t is not None:
        un_map = {}
        un_t = unanswered.result()
        if un_t is not None:
            un_map = {(c, i): n for c, i, n in zip(*(un_t[k].to_pylist() for k in ("request_capture", "request_connection_id", "status_count")))}
        who_map = {}
        who_t = who.result()
        if who_t is not None:
            for r in who_t.to_pylist():
                who_map[(r["capture"], r["connection_id"])] = r
        rows: dict = {}
        for r in conv_t.to_pylist():
            key = (r["capture"], r["connection_id"])
            row = rows.setdefault(key, {"capture": r["capture"], "connection_id": r["connection_id"], "connection": r["connection"],
                                        "client": r["client"], "server": r["server"], "first_ns": r["ts_ns_min"], "last_ns": r["ts_ns_max"]})  # fmt: skip
            row["first_ns"] = min(row["first_ns"], r["ts_ns_min"])
            row["last_ns"] = max(row["last_ns"], r["ts_ns_max"])
            d = "to_server" if r["direction"] == "to_server" else "to_client"
            row[f"frames_{d}"] = row.get(f"frames_{d}", 0) + r["frame_len_count"]
            row[f"bytes_{d}"] = row.get(f"bytes_{d}", 0) + r["frame_len_sum"]
            row[f"errors_{d}"] = row.get(f"errors_{d}", 0) + r["err_sum"]
        out_rows = []
        for key, row in rows.items():
            w = who_map.get(key, {})
            role = "name server" if w.get("is_ns_max") else ("broker" if w.get("is_broker_max") else None)
            if role is None:
                port = row["server"].rpartition(":")[2]
                role = {"9876": "name server", "10911": "broker", "10909": "broker", "10912": "HA"}.get(port)
            out_rows.append({**row, "role": role, "client_id": w.get("client_id_max"), "language": w.get("language_max"),
                             "version": w.get("version_max"), "unanswered": un_map.get(key, 0)})  # fmt: skip
        fields = ["capture", "connection_id", "connection", "client", "server", "role", "client_id", "language", "version",
                  "first_ns", "last_ns", "frames_to_server", "bytes_to_server", "errors_to_server", "frames_to_client",
                  "bytes_to_client", "errors_to_client", "unanswered"]  # fmt: skip
        conv_t = pa.table({f: [r.get(f, 0 if f.startswith(("frames", "bytes", "errors")) else None) for r in out_rows] for f in fields})
        conv_t = conv_t.sort_by([("first_ns", "ascending")])
    write("conversations", conv_t)

    # endpoints: client instances and servers, from the conversations
    ep_t = None
    if conv_t is not None:
        eps: dict = {}
        for r in conv_t.to_pylist():
            frames_ = r["frames_to_server"] + r["frames_to_client"]
            bytes_ = r["bytes_to_server"] + r["bytes_to_client"]
            errs = r["errors_to_server"] + r["errors_to_client"]
            client_key = r["client_id"] or r["client"].rpartition(":")[0].strip("[]")
            for kind, name, role in (("client", client_key, r["language"]), ("server", r["server"], r["role"])):
                e = eps.setdefault((kind, name), {"kind": kind, "endpoint": name, "detail": role, "connections": 0, "frames": 0, "bytes": 0,
                                                   "errors": 0, "unanswered": 0, "first_ns": r["first_ns"], "last_ns": r["last_ns"]})  # fmt: skip
                e["connections"] += 1
                e["frames"] += frames_
                e["bytes"] += bytes_
                e["errors"] += errs
                e["unanswered"] += r["unanswered"]
                e["first_ns"] = min(e["first_ns"], r["first_ns"])
                e["last_ns"] = max(e["last_ns"], r["last_ns"])
                e["detail"] = e["detail"] or role
        ep_t = pa.Table.from_pylist(sorted(eps.values(), key=lambda e: (e["kind"], -e["frames"])))
    write("endpoints", ep_t)

    err_t = errors.result()
    if err_t is not None:
        err_t = err_t.rename_columns([{"status_count": "count", "ts_ns_min": "first_ns", "ts_ns_max": "last_ns"}.get(n, n) for n in err_t.column_names])
        err_t = err_t.sort_by([("minute", "ascending"), ("count", "descending")])
    write("errors", err_t)
    msg_t = msgs.result()
    if msg_t is not None:
        msg_t = msg_t.rename_columns([n.rsplit("_sum", 1)[0] if n.endswith("_sum") else n for n in msg_t.column_names])
        msg_t = msg_t.sort_by([("minute", "ascending"), ("topic", "ascending")])
    write("messages", msg_t)
    lag_t = lag.result()
    if lag_t is not None:
        lag_t = lag_t.rename_columns([{"commit_offset_max": "commit_offset", "max_offset_max": "max_offset"}.get(n, n) for n in lag_t.column_names])
        lag_t = lag_t.append_column("lag", pc.max_element_wise(pc.subtract(lag_t["max_offset"], lag_t["commit_offset"]), 0))
        lag_t = lag_t.sort_by([("minute", "ascending")])
    write("lag", lag_t)

    # captures: frames and span per capture, with the bytes the summary counted
    cap_rows = []
    conv_rows = conv_t.to_pylist() if conv_t is not None else []
    for name in summary["captures"]:
        b = summary["bytes_by_capture"].get(name, {})
        mine = [r for r in conv_rows if r["capture"] == name]
        cap_rows.append({"capture": name, "complete": name not in summary["incomplete_captures"],
                         "connections": len(mine), "first_ns": min((r["first_ns"] for r in mine), default=None),
                         "last_ns": max((r["last_ns"] for r in mine), default=None), **{f"{k}_bytes" if k != "frames" else k: v for k, v in b.items()}})  # fmt: skip
    write("captures", pa.Table.from_pylist(cap_rows) if cap_rows else None)

    # the slowest calls, and the frames of their connection around each (the ladder)
    slow = slowest
    frames = _dataset(frame_files, frames_dir, storage)
    ladders = []
    for i, r in enumerate(slow):
        import pyarrow.dataset as ds

        lo, hi = r["request_ts_ns"], r["response_ts_ns"]
        pad = max((hi - lo) // 4, 10**6)
        flt = (ds.field("capture") == r["request_capture"]) & (ds.field("connection_id") == r["request_connection_id"]) & (
            ds.field("ts_ns") >= lo - pad) & (ds.field("ts_ns") <= hi + pad)  # fmt: skip
        got = frames.to_table(columns=["ts_ns", "direction", "kind", "code_name", "opaque", "frame_len", "topic"], filter=flt)
        got = got.sort_by([("ts_ns", "ascending")]).slice(0, 40)
        for f in got.to_pylist():
            ladders.append({"call": i, **f})
    write("slowest", pa.Table.from_pylist([{"call": i, **{k: r[k] for k in ("request_ts_ns", "response_ts_ns", "latency_ms", "connection",
                      "client", "server", "request_code_name", "response_code_name", "opaque", "topic", "group", "request_capture",
                      "request_connection_id")}} for i, r in enumerate(slow)]) if slow else None)  # fmt: skip
    write("ladder", pa.Table.from_pylist(ladders) if ladders else None)
    return views
