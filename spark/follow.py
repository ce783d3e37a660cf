"""``trocket analyze --follow DIR``: per-minute aggregates of a live broker's tap, kept
up to date with Spark Structured Streaming.

    trocket broker --tap /var/tap/broker.cap --tap-rotate-mb 64 ...
    trocket analyze --follow /var/tap --out /var/tap-live

The stream is the ``trocket-tap`` source (:mod:`trocket.spark.tap_source`): each
micro-batch is the bytes the tap appended since the last one, decoded in the
executors. Each batch, in ``foreachBatch``:

1. the source's tasks have read, decoded, paired and counted each range of new bytes
   (:func:`trocket.spark.live_tally.tally_range`): the driver receives one tally and
   the range's leftovers (calls still open at its edges) per range, never frame rows;
2. the driver pairs the leftovers, in capture order, with the requests still open from
   earlier batches (a held poll answered a minute later is one call), counts a request
   unanswered once the tap has gone ``expire`` past it, and closes the minutes no call
   can land in any more (``expire`` and a margin behind the newest frame);
3. it writes ``OUT/minutes/{io,calls,errors,messages}.parquet`` (closed minutes and the
   open ones, ``final`` says which; each file replaced whole) and saves its state (the
   open minutes, the open requests, the batch id) in the checkpoint directory.

Exactly once: Spark's checkpoint (``OUT/_checkpoint`` unless ``--checkpoint``) holds
each batch's offsets, and the state file names the last batch merged. A restarted
follower reads on from the last committed batch; a batch Spark replays because it
stopped after the state was saved but before its commit is recognised by its id and
not merged again. ``OUT`` and the checkpoint go together: the closed minutes live in
``OUT/minutes``.

``OUT/status.json`` and ``OUT/report.html`` (:mod:`trocket.spark.live_report`, a page
that reloads itself) are rewritten by the driver's main thread every
``report_every_s``; each batch prints one line with its lag: how old the newest frame
it counted was when it was done, and how many whole bytes the tap had written that no
batch had read yet.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import threading
import time

import attrs

from .calls import _StreamPairer, orphan, unanswered
from .live_tally import MINUTE_NS, TABLES, LiveTally, tables
from .rows import F

__all__ = ["follow", "Follower", "FollowState", "merge_batch", "unread_bytes", "STATE_FILE"]

STATE_FILE = "trocket-follow-state.json"
#: minutes stay open this much longer than ``expire``: files read slightly out of order
MARGIN_NS = 10 * 10**9
#: starts of the query when its Python source process is too slow to connect back
START_TRIES = 3
_SLOW_START = "Python worker failed to connect back"


def _stream_of(capture: str, cid: int) -> tuple:
    """A connection of a tap is its connection id in the tap's files (``FILE``, ``FILE.1``, ...)."""
    from .inputs import rotation_key

    return rotation_key(capture)[0], cid


def _order(row: tuple) -> tuple:
    from .inputs import rotation_key

    return row[F.TS], rotation_key(row[F.CAPTURE]), row[F.SEQ]


@attrs.define(slots=True)
class FollowState:
    """What the follower carries from batch to batch (saved in the checkpoint)."""

    batch_id: int = -1  # the last batch merged
    tally: LiveTally = attrs.Factory(LiveTally)  # the open minutes
    pending: list = attrs.Factory(list)  # requests not answered yet (leftover rows), in capture order
    final_before: int = 0  # minutes before this one are closed (in the Parquet tables)
    frames: int = 0
    calls: int = 0

    def to_json(self) -> dict:
        return {"version": 1, "batch_id": self.batch_id, "tally": self.tally.to_json(), "pending": [list(r) for r in self.pending],
                "final_before": self.final_before, "frames": self.frames, "calls": self.calls}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict) -> FollowState:
        return cls(d["batch_id"], LiveTally.from_json(d["tally"]), [tuple(r) for r in d["pending"]], d["final_before"], d["frames"], d["calls"])

    def save(self, path: str) -> None:
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str) -> FollowState:
        try:
            with open(path, encoding="utf-8") as f:
                return cls.from_json(json.load(f))
        except FileNotFoundError:
            return cls()


def merge_batch(state: FollowState, partials: list[tuple], batch_id: int, expire_ns: int) -> LiveTally:
    """Merge one batch's (tally, leftovers) into ``state``: leftovers paired with the open
    requests, old requests expired, closed minutes split off and returned."""
    batch = LiveTally()
    leftovers: list[tuple] = []
    for t, left in partials:
        batch.merge(t)
        leftovers.extend(left)
    pairer = _StreamPairer(_stream_of)
    for q in state.pending:
        pairer.request(q)
    for row in sorted(leftovers, key=_order):
        if row[F.KIND] == "request":
            pairer.request(row)
        else:
            pairer.response(row)
    for c in pairer.calls:
        batch.count_call(c)
    for s in pairer.early:
        batch.count_call(orphan(s))
    state.tally.merge(batch)
    state.frames += sum(v[0] for v in batch.io.values())
    state.calls += sum(v[0] for v in batch.calls.values())
    horizon = state.tally.last_ts - expire_ns
    pending = []
    for q in pairer.pending.values():
        for r in q if type(q) is list else (q,):
            if r[F.TS] < horizon:
                state.tally.count_call(unanswered(r))
            else:
                pending.append(r)
    state.pending = sorted(pending, key=_order)
    state.batch_id = batch_id
    if state.tally.last_ts:
        state.final_before = max(state.final_before, (state.tally.last_ts - expire_ns - MARGIN_NS) // MINUTE_NS * MINUTE_NS)
    return state.tally.split_before(state.final_before)


def unread_bytes(directory: str, end_offset: dict | None) -> int:
    """Whole bytes of the tap's files beyond ``end_offset`` (what no batch has read yet;
    a file not in the offset counts from its header)."""
    from .inputs import NATIVE_MAGIC  # noqa: F401
    from .tap_source import list_captures

    files = (end_offset or {}).get("files", {})
    return sum(max(0, size - files.get(name, 16)) for name, size in list_captures(directory))


class _Tables:
    """The per-minute Parquet tables: closed minutes kept in memory (loaded at a restart),
    each file rewritten whole with the open minutes after every batch."""

    def __init__(self, out: str) -> None:
        self.dir = os.path.join(out, "minutes")
        os.makedirs(self.dir, exist_ok=True)
        self.closed: dict = {}

    def load(self, state: FollowState) -> None:
        """The closed minutes already written, as far as ``state`` knows them (a batch
        written but not saved in the state is replayed: its rows are left out)."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        for name in TABLES:
            path = os.path.join(self.dir, f"{name}.parquet")
            if not os.path.exists(path):
                continue
            t = pq.read_table(path)
            keep = pc.and_(pc.equal(t["final"], True), pc.less_equal(t["closed_batch"], state.batch_id))
            self.closed[name] = t.filter(keep)

    def write(self, closed: LiveTally, open_: LiveTally, batch_id: int) -> dict:
        import pyarrow as pa
        import pyarrow.parquet as pq

        new = tables(closed, True) if not closed.empty() else {}
        now = tables(open_, False)
        out = {}
        for name in TABLES:
            parts = []
            if name in self.closed:
                parts.append(self.closed[name])
            if name in new and new[name].num_rows:
                t = new[name].append_column("closed_batch", pa.array([batch_id] * new[name].num_rows, pa.int64()))
                parts.append(t)
                self.closed[name] = pa.concat_tables(parts)
            parts.append(now[name].append_column("closed_batch", pa.nulls(now[name].num_rows, pa.int64())))
            table = pa.concat_tables(parts)
            path = os.path.join(self.dir, f"{name}.parquet")
            pq.write_table(table, path + ".tmp")
            os.replace(path + ".tmp", path)
            out[name] = table
        return out


@attrs.define(slots=True)
class BatchInfo:
    batch_id: int
    frames: int
    seconds: float  # the handler's: read_s + merge_s + write_s and the unread count
    lag_s: float | None  # done time minus the newest frame's time
    unread: int  # bytes the tap had written that no batch had read, when it was done
    read_s: float = 0.0  # the source's tasks (read, decode, pair, count) and their partials to the driver
    merge_s: float = 0.0  # the driver's merge (:func:`merge_batch`)
    write_s: float = 0.0  # the minutes' tables and the state written


class Follower:
    """The follower's driver: the query, the ``foreachBatch`` handler, the state."""

    def __init__(self, spark, directory: str, out: str, checkpoint: str, *, expire_s: float, split_bytes: int,
                 max_batch_bytes: int, quiet: bool = False) -> None:  # fmt: skip
        self.spark = spark
        self.directory = os.path.abspath(directory)
        self.out = os.path.abspath(out)
        self.checkpoint = os.path.abspath(checkpoint)
        os.makedirs(self.checkpoint, exist_ok=True)
        self.expire_ns = int(expire_s * 1e9)
        self.split_bytes = split_bytes
        self.max_batch_bytes = max_batch_bytes
        self.quiet = quiet
        self.state_path = os.path.join(self.checkpoint, STATE_FILE)
        self.state = FollowState.load(self.state_path)
        self.tables = _Tables(self.out)
        self.tables.load(self.state)
        self.views: dict = {}
        self.batches: list[BatchInfo] = []
        self.lock = threading.Lock()
        self.changed = threading.Event()
        self.query = None
        self.offset: dict = {}
        self.refresh_s = 10.0
        self.interrupted = False  # stopped by Ctrl-C

    def on_batch(self, df, batch_id: int) -> None:
        if batch_id <= self.state.batch_id:
            return  # replayed after a restart: merged and written already
        t0 = time.monotonic()
        self.spark.sparkContext.setJobDescription(f"follow: batch {batch_id}")
        got = df.select("partial").toArrow()
        partials = [pickle.loads(b) for b in got.column(0).to_pylist()]
        t1 = time.monotonic()
        with self.lock:
            before = self.state.frames
            closed = merge_batch(self.state, partials, batch_id, self.expire_ns)
            t2 = time.monotonic()
            self.views = self.tables.write(closed, self.state.tally, batch_id)
            self.state.save(self.state_path)
            frames = self.state.frames - before
            last = self.state.tally.last_ts
        t3 = time.monotonic()
        done = time.time()
        offset = self._batch_offset(batch_id)
        if offset is not None:
            self.offset = offset
        info = BatchInfo(batch_id, frames, time.monotonic() - t0, (done - last / 1e9) if frames and last else None,
                         unread_bytes(self.directory, offset), t1 - t0, t2 - t1, t3 - t2)  # fmt: skip
        self.batches.append(info)
        self.changed.set()
        if not self.quiet:
            lag = f"{info.lag_s:.1f} s behind the tap" if info.lag_s is not None else "no frames"
            print(f"batch {batch_id}: {frames:,} frames in {info.seconds:.1f} s, {lag}, {info.unread / 1e6:.1f} MB unread", flush=True)

    def _batch_offset(self, batch_id: int) -> dict | None:
        """The source's end offset of batch ``batch_id``, from the checkpoint (Spark writes
        ``offsets/N`` before it runs batch N: a version line, the batch's metadata, then
        one line per source)."""
        try:
            with open(os.path.join(self.checkpoint, "offsets", str(batch_id)), encoding="utf-8") as f:
                lines = f.read().splitlines()
            return json.loads(lines[2])
        except (OSError, IndexError, ValueError):
            return None

    def start(self, *, once: bool, trigger_s: float):
        from .tap_source import SOURCE_NAME, TapSource

        self.spark.dataSource.register(TapSource)
        df = (self.spark.readStream.format(SOURCE_NAME).option("path", self.directory)
              .option("splitBytes", str(self.split_bytes)).option("maxBytesPerBatch", str(self.max_batch_bytes))
              .option("slots", str(_slots(self.spark.sparkContext))).load())  # fmt: skip
        w = df.writeStream.foreachBatch(self.on_batch).option("checkpointLocation", self.checkpoint).queryName("trocket-follow")
        w = w.trigger(availableNow=True) if once else w.trigger(processingTime=f"{trigger_s} seconds")
        self.query = w.start()
        return self.query

    def write_pages(self) -> None:
        """``OUT/status.json`` and ``OUT/report.html`` from the latest state."""
        from .live_report import build_live_report

        with self.lock:
            views = dict(self.views)
            status = self.status()
        _atomic_write(os.path.join(self.out, "status.json"), json.dumps(status, indent=2) + "\n")
        _atomic_write(os.path.join(self.out, "report.html"), build_live_report(views, status, self.refresh_s))

    def status(self) -> dict:
        last = self.batches[-1] if self.batches else None
        offset = self.offset
        return {
            "directory": self.directory,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "batch_id": self.state.batch_id,
            "frames": self.state.frames,
            "calls": self.state.calls,
            "open_requests": len(self.state.pending),
            "newest_frame_ns": self.state.tally.last_ts or None,
            "closed_before_ns": self.state.final_before or None,
            "last_batch": attrs.asdict(last) if last else None,
            "files": offset.get("files", {}),
            "problems": [f"{name}: {why}" for name, why in sorted(offset.get("bad", {}).items())],
        }


def _slots(sc) -> int:
    """The tasks Spark runs at once: ``local[N]``'s N (``*``: the cores), else the
    default parallelism (a cluster's executor cores, unless set)."""
    import re

    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", sc.master or "")
    if m is None:
        return max(1, sc.defaultParallelism)
    n = m.group(1)
    return 1 if n is None else os.cpu_count() or 1 if n == "*" else max(1, int(n))


def _atomic_write(path: str, text: str) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def follow(spark, directory: str, out: str, *, checkpoint: str | None = None, once: bool = False, trigger_s: float = 2.0,
           expire_s: float = 120.0, report_every_s: float = 10.0, split_bytes: int = 8 << 20, max_batch_bytes: int = 256 << 20,
           stop: threading.Event | None = None, quiet: bool = False, started=None) -> Follower:  # fmt: skip
    """Follow ``directory`` until ``stop`` is set or Ctrl-C (or, ``once``, until what is
    there now is read); returns the follower (its state, batches and views). ``started``: called
    with the :class:`Follower` once its query runs (a benchmark samples it)."""
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    f = Follower(spark, directory, out, checkpoint or os.path.join(out, "_checkpoint"), expire_s=expire_s,
                 split_bytes=split_bytes, max_batch_bytes=max_batch_bytes, quiet=quiet)  # fmt: skip
    f.refresh_s = report_every_s
    from .session import interrupts

    stop = stop or threading.Event()
    written = 0.0
    q = None
    seen = interrupts()
    try:
        for attempt in range(1, START_TRIES + 1):
            q = f.start(once=once, trigger_s=trigger_s)
            if attempt == 1 and started is not None:
                started(f)
            try:
                while q.isActive and not stop.is_set() and interrupts() == seen:
                    if f.changed.wait(0.5) and time.monotonic() - written >= report_every_s:
                        f.changed.clear()
                        f.write_pages()
                        written = time.monotonic()
            except KeyboardInterrupt:  # Ctrl-C: how a follower is meant to stop
                f.interrupted = True
            if interrupts() != seen:  # a Ctrl-C whose KeyboardInterrupt was lost (session.interrupts)
                f.interrupted = True
            failed = None if f.interrupted else q.exception()
            if failed is None:
                break
            if _SLOW_START in str(failed) and attempt < START_TRIES:
                # the JVM gives the source's Python process a fixed 10 s to connect back;
                # on a machine busy enough it takes longer: the query never started, try again
                print(f"trocket: warning: the follow query did not start ({_SLOW_START}); starting it again", file=sys.stderr)
                continue
            raise RuntimeError(f"the follow query failed: {failed}")
    finally:
        if q is not None and q.isActive:
            q.stop()
        try:
            f.write_pages()
        except Exception as exc:  # noqa: BLE001 - the tables are written; say why the page is not
            print(f"trocket: warning: report not written: {exc}", file=sys.stderr)
    return f
