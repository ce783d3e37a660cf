"""Benchmark of ``trocket analyze`` (issue 9): frames/s of the Spark job in local[1] and
local[2] against a single-process Python baseline over the same reader and codecs, and
the job's peak driver memory.

    .venv/bin/python benchmarks/spark_analyze.py                 # 2 million frames
    .venv/bin/python benchmarks/spark_analyze.py --frames 200000 --memory-sizes 50000,200000

The synthetic capture (``trocket capture synth``) is written once into --dir and reused.
The baseline is the job's own work in one Python process, with the same outputs: the
same range reader (``trocket.spark.native``) over the whole file as one range, every
frame decoded with the same ``frame_row`` (``trocket.codecs``), the same one pass
(``trocket.spark.stretch``) writing the ``frames`` and ``calls`` Parquet and pairing
and tallying, the leftovers paired, the exact percentiles; the benchmark checks that
its summary equals every Spark run's. The baseline and local[2] run --repeat times
each, alternating, and each one's best run counts (on a shared machine, load that
comes and goes then hits both alike). A "decoding alone" figure (rows built and
dropped, what an earlier baseline measured) is printed for reference. Each Spark run
is a fresh driver process (one SparkContext per process) running the whole job
(frames and calls Parquet, summary, the views and report.html); its peak driver memory is the driver
JVM's resident set (in local mode the executors' JVM side lives in it too; the Python
workers are separate processes, not counted) and the Python driver's, sampled every
0.2 s. "Flat in the capture's size": the same figures for the smaller captures of
--memory-sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _capture(directory: str, frames: int) -> str:
    from trocket.spark import synth

    path = os.path.join(directory, f"synth-{frames}.cap")
    if not os.path.exists(path) or not os.path.exists(synth.truth_path(path)):
        t = time.monotonic()
        synth.write_native(path, frames)
        print(f"wrote {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.monotonic() - t:.0f} s", flush=True)
    return path


def baseline(path: str, out: str) -> tuple[float, dict, dict]:
    """Seconds, summary and (CPU seconds, report seconds) of the single-process analysis:
    the job's own work, same outputs, without Spark (one process, the whole file one stretch)."""
    import shutil
    from collections import Counter

    from trocket.spark.inputs import resolve_inputs
    from trocket.spark.job import finish_tables, summarize
    from trocket.spark.main import write_report
    from trocket.spark.native import plan_native, read_native_range
    from trocket.spark.stretch import decode_stretch, resolve_records, sorted_records
    from trocket.spark.summary import select_latencies

    frames_dir, calls_dir = os.path.join(out, "frames"), os.path.join(out, "calls")
    for d in (frames_dir, calls_dir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    t, cpu = time.monotonic(), time.process_time()
    inputs = resolve_inputs([path])
    problems: list = list(inputs.problems)
    (capture,) = inputs.captures
    # one range: the whole file (no planning hop over the record lengths: the range
    # reader checks each record itself); the span from its first and last records
    plan = plan_native(capture.path, capture.name, 1 << 62, problems.append)
    account: Counter = Counter()
    rows = read_native_range(plan.ranges[0], problems.append, account=account)
    records = decode_stretch(rows, frames_dir, calls_dir, "part-0", account=account)
    tally = resolve_records(sorted_records(records), calls_dir, "part-r", {capture.name: (plan.first_ts, plan.last_ts)})
    finish_tables(frames_dir, calls_dir)
    targets = tally.latency_targets()
    files = sorted(os.path.join(calls_dir, f) for f in os.listdir(calls_dir) if f.endswith(".parquet"))
    selected = select_latencies(files, {code: {b for _, b, _ in found} for code, found in targets.items()})
    summary = summarize(tally, selected, inputs, problems)
    t_report = time.monotonic()
    write_report(out, summary)  # the views and report.html, as the job writes them
    end = time.monotonic()
    return end - t, summary, {"cpu_s": time.process_time() - cpu, "report_s": end - t_report}


def decode_only(path: str) -> float:
    """Seconds to read and decode every frame into its row, and nothing else (no table,
    no pairing, no summary): what the previous baseline measured, for reference."""
    import gc
    import struct

    from trocket.spark.native import read_native_range

    with open(path, "rb") as f:
        (header_len,) = struct.unpack_from(">H", f.read(12), 10)
    t = time.monotonic()
    gc.disable()
    try:
        for _ in read_native_range((path, os.path.basename(path), header_len, os.path.getsize(path), 0), print):
            pass
    finally:
        gc.enable()
    return time.monotonic() - t


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    """The child processes of ``pid``, whichever of its threads started them (a JVM starts
    the Python workers' daemon from an executor thread: its main thread has no child)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


def _cpu_s(pid: int, children: bool = True) -> float:
    """CPU seconds (user + system) of ``pid``, with its children it has waited for."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    ticks = sum(int(x) for x in fields[11:15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid``'s live descendants (each with the children it reaped)."""
    total, todo = 0.0, _children(pid)
    while todo:
        c = todo.pop()
        total += _cpu_s(c)
        todo.extend(_children(c))
    return total


def run_one(master: str, path: str, out: str, split_mb: float | None = None) -> dict:
    """One Spark run in this process (called in a fresh process by main)."""
    from trocket.spark.job import analyze
    from trocket.spark.session import build_session

    t0 = time.monotonic()
    spark = build_session(master, driver_memory="1g", shuffle_partitions=4)
    jvm_pid = next((c for c in _children(os.getpid()) if "java" in open(f"/proc/{c}/cmdline", "rb").read().decode(errors="replace")), None)
    peak = {"jvm": 0, "python": 0, "worker": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak["python"] = max(peak["python"], _rss_kb(os.getpid()))
            if jvm_pid:
                peak["jvm"] = max(peak["jvm"], _rss_kb(jvm_pid))
                todo = _children(jvm_pid)  # the Python workers (and their daemon): the largest one
                while todo:
                    c = todo.pop()
                    peak["worker"] = max(peak["worker"], _rss_kb(c))
                    todo.extend(_children(c))

    threading.Thread(target=sample, daemon=True).start()
    startup = time.monotonic() - t0
    from trocket.spark.main import write_report

    # CPU seconds during the job: this driver, the JVM, the Python workers (the JVM's descendants)
    cpu0 = {"driver": _cpu_s(os.getpid(), False), "jvm": _cpu_s(jvm_pid, False) if jvm_pid else 0.0,
            "workers": _tree_cpu_s(jvm_pid) if jvm_pid else 0.0}  # fmt: skip
    t = time.monotonic()
    kw = {} if split_mb is None else {"split_bytes": int(split_mb * (1 << 20))}
    result = analyze(spark, [path], out, **kw)
    t_report = time.monotonic()
    write_report(out, result.summary, spark=spark)
    result.timings["report"] = time.monotonic() - t_report
    elapsed = time.monotonic() - t
    cpu1 = {"driver": _cpu_s(os.getpid(), False), "jvm": _cpu_s(jvm_pid, False) if jvm_pid else 0.0,
            "workers": _tree_cpu_s(jvm_pid) if jvm_pid else 0.0}  # fmt: skip
    stop.set()
    spark.stop()
    return {"seconds": elapsed, "startup": startup, "frames": result.summary["frames"], "summary": result.summary,
            "jvm_rss_mb": peak["jvm"] / 1024, "python_rss_mb": peak["python"] / 1024, "worker_rss_mb": peak["worker"] / 1024, "phases": result.timings,
            "cpu_s": {k: cpu1[k] - cpu0[k] for k in cpu0}}  # fmt: skip


def _spark_run(master: str, path: str, directory: str, split_mb: float | None = None) -> dict:
    out = os.path.join(directory, f"out-{master.replace('[', '').replace(']', '')}-{os.path.basename(path)}")
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--run-one", master, "--capture", path, "--out", out,
         *(["--split-mb", str(split_mb)] if split_mb is not None else [])],
        capture_output=True, text=True, cwd=directory,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"spark run {master} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _tap_records(directory: str) -> int:
    """Records in the tap's files (each a frame)."""
    import struct

    n = 0
    for name in os.listdir(directory):
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        pos = struct.unpack_from(">H", data, 10)[0]
        while pos + 4 <= len(data):
            pos += 4 + struct.unpack_from(">I", data, pos)[0]
            n += 1
    return n


def write_tap(directory: str, capture: str, rate: float, seconds: float, rotate_mb: float) -> None:
    """``--write-tap`` (a child of ``--part follow --source replay``): the records of
    ``capture`` written through a real :class:`~trocket.remoting.tap.FileTap` rotating
    every ``rotate_mb`` MiB into ``directory``, ``rate`` frames a second for ``seconds``,
    stamped with the time they are written (each pass over the capture with new
    connection ids). Prints ``start``, ``end`` and a JSON line."""
    from trocket.codecs.capture import read_records
    from trocket.remoting.tap import FileTap

    with open(capture, "rb") as f:
        records = read_records(f.read())
    tap = FileTap(os.path.join(directory, "broker.cap"), rotate_bytes=int(rotate_mb * (1 << 20)))
    step = 0.01
    per_step = rate * step
    print("start", flush=True)
    t0 = time.monotonic()
    n = 0
    due = 0.0
    while True:
        elapsed = time.monotonic() - t0
        if elapsed >= seconds:
            break
        due = min(rate * seconds, (int(elapsed / step) + 1) * per_step)
        now = time.time_ns()
        while n < due:
            r = records[n % len(records)]
            tap.record(now, r.connection_id + (n // len(records)) * 1_000_000, r.local_address, r.remote_address, r.direction, r.role, r.frame)
            n += 1
        time.sleep(max(0.0, t0 + (int(elapsed / step) + 1) * step - time.monotonic()))
    took = time.monotonic() - t0
    tap.close()
    print("end", flush=True)
    print(json.dumps({"count": n, "seconds": took, "dropped": tap.dropped}), flush=True)


def big_capture(directory: str, gb: float) -> str:
    """A native capture of about ``gb`` GB: the 2M-frame synthetic capture's records
    repeated (for memory, not for counts: its connections repeat)."""
    import shutil
    import struct

    src = _capture(directory, 2_000_000)
    path = os.path.join(directory, f"big-{gb:g}g.cap")
    if os.path.exists(path) and os.path.getsize(path) >= gb * 1e9:
        return path
    with open(src, "rb") as f:
        (header_len,) = struct.unpack_from(">H", f.read(12), 10)
        f.seek(0)
        header = f.read(header_len)
    body = os.path.getsize(src) - header_len
    with open(path, "wb") as out:
        out.write(header)
        while out.tell() < gb * 1e9:
            with open(src, "rb") as f:
                f.seek(header_len)
                shutil.copyfileobj(f, out, 16 << 20)
    print(f"wrote {path} ({os.path.getsize(path) / 1e9:.1f} GB, {body / 1e9:.1f} GB of records a copy)", flush=True)
    return path


def worker_memory(path: str, split_mb: float = 64) -> dict:
    """A Python worker's tasks on ``path`` in this one process, as a reused worker runs
    them: the plan (a hop over every record length of the file) and the decoding of
    three of its ranges (first, middle, last: read, decoded, written as Parquet, paired);
    the process's peak RSS after each."""
    import resource
    import tempfile
    from collections import Counter

    from trocket.spark.native import plan_native, read_native_range
    from trocket.spark.stretch import decode_stretch

    def peak_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    import pyarrow.parquet  # noqa: F401 - what a warm worker has imported

    got = {"imports": peak_mb()}
    t = time.monotonic()
    plan = plan_native(path, os.path.basename(path), int(split_mb * (1 << 20)), print)
    got["plan"] = peak_mb()
    got["plan_s"] = time.monotonic() - t
    with tempfile.TemporaryDirectory() as d:
        for sub in ("frames", "calls"):
            os.makedirs(os.path.join(d, sub))
        for i in (0, len(plan.ranges) // 2, len(plan.ranges) - 1):
            account: Counter = Counter()
            rows = read_native_range(plan.ranges[i], print, account=account)
            decode_stretch(rows, os.path.join(d, "frames"), os.path.join(d, "calls"), f"part-{i}", account=account)
        got["ranges"] = peak_mb()
    got["size_gb"] = os.path.getsize(path) / 1e9
    got["range_count"] = len(plan.ranges)
    return got


def _progress_ms(query, batch_ids: set[int]) -> dict[str, float]:
    """The median of each of Spark's per-trigger durations (``durationMs``: latestOffset,
    queryPlanning, addBatch (our handler), walCommit, commitOffsets, triggerExecution)
    over the query's recent progress reports of ``batch_ids``."""
    import statistics

    got: dict[str, list[float]] = {}
    for p in query.recentProgress or []:
        if p.batchId in batch_ids:
            for k, v in (p.durationMs or {}).items():
                got.setdefault(k, []).append(v)
    return {k: statistics.median(v) for k, v in sorted(got.items())}


def bench_follow(seconds: float, threads: int, rotate_mb: float, source: str = "broker", rate: float = 20000,
                 directory: str = "/tmp/trocket-spark-bench", trigger_s: float = 1.0, follower_on: bool = True) -> None:  # fmt: skip
    """``--part follow``: ``trocket analyze --follow`` (local[2], a batch every ``trigger_s``)
    beside a broker tapping into rotated files under synchronous sends of the C++ client
    (``benchmarks/cpp_producer.c``: ``threads`` native threads, 128-byte bodies) for
    ``seconds``, all on this machine; or (``source="replay"``) beside a tap written at
    exactly ``rate`` frames a second (:func:`write_tap`, a synthetic capture's records
    through the broker's own FileTap: the follower's load without the broker's). The follower prints each batch's lag (how old the
    newest frame it counted was when the batch was done, and the bytes the tap had
    written that no batch had read); then how long it took to catch up once the load
    stopped, and whether it counted every frame the tap wrote. ``follower_on`` false: the
    same load and tap without the follower (what the follower costs the broker on a
    shared machine)."""
    import statistics
    import tempfile
    import trio

    sys.path.insert(0, HERE)
    import broker_produce as bp

    from trocket.remoting import ClientConfig, RemotingClient
    from trocket.spark.follow import follow
    from trocket.spark.session import build_session

    with tempfile.TemporaryDirectory(prefix="trocket-bench-follow-") as tmp:
        tap = os.path.join(tmp, "tap")
        os.makedirs(tap)
        ns = f"127.0.0.1:{bp.free_port()}"
        proc = None
        if source == "broker":
            proc, addr = bp.start_broker(os.path.join(tmp, "store"), "async", os.path.join(tmp, "broker.log"), namesrv_listen=ns,
                                         extra_args=("--tap", os.path.join(tap, "broker.cap"), "--tap-rotate-mb", str(rotate_mb)))  # fmt: skip
        else:
            os.makedirs(directory, exist_ok=True)
            replayed = _capture(directory, 200_000)

        async def create_topic() -> None:
            client = RemotingClient(ClientConfig(default_timeout=10))
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)
                for q in range(bp.QUEUES):  # the topic, before the C++ client asks its route
                    await client.invoke_sync(addr, bp.send_request(q), 10)
                await client.aclose()
                nursery.cancel_scope.cancel()

        spark = None
        stop = threading.Event()
        box: dict = {}
        follower = None
        try:
            if proc is not None:
                trio.run(create_topic)
            else:  # one frame, so that the first batch has something to read
                subprocess.run([sys.executable, os.path.abspath(__file__), "--write-tap", tap, "--capture", replayed, "--rate", "100",
                                "--seconds", "0.01", "--rotate-mb", str(rotate_mb)], check=True, capture_output=True)  # fmt: skip
            if follower_on:
                spark = build_session("local[2]", shuffle_partitions=2)
                follower = threading.Thread(target=lambda: box.update(done=follow(
                    spark, tap, os.path.join(tmp, "out"), trigger_s=trigger_s, stop=stop, started=lambda f: box.update(live=f))))  # fmt: skip
                follower.start()
                while "live" not in box:
                    time.sleep(0.1)
                live = box["live"]
                while not live.batches:  # the first batch (the topic's creation) is done: the query runs
                    time.sleep(0.1)
            if proc is not None:
                what = f"the C++ client, {threads} threads of synchronous sends to a tapping broker"
                argv = bp.cpp_argv(ns, threads, 0, seconds)
            else:
                what = f"a FileTap written {rate:,.0f} frames/s (a synthetic capture's records)"
                argv = [sys.executable, os.path.abspath(__file__), "--write-tap", tap, "--capture", replayed, "--rate", str(rate),
                        "--seconds", str(seconds), "--rotate-mb", str(rotate_mb)]  # fmt: skip
            print(f"load: {what} for {seconds:g} s{'' if follower_on else ', NO follower'}; load average {os.getloadavg()[0]:.2f}", flush=True)
            if not follower_on:
                gen = subprocess.run(argv, capture_output=True, text=True, cwd=tmp)
                sent = json.loads([ln for ln in gen.stdout.splitlines() if ln.startswith("{")][-1])
                print(f"{'sends' if proc is not None else 'frames written'}: {sent['count']:,} in {sent['seconds']:.1f} s = "
                      f"{sent['count'] / sent['seconds']:,.0f}/s (no follower)", flush=True)  # fmt: skip
                return
            frames0, batches0 = live.state.frames, len(live.batches)
            t0 = time.monotonic()
            gen = subprocess.run(argv, capture_output=True, text=True, cwd=tmp)
            t_load = time.monotonic() - t0
            sent = json.loads([ln for ln in gen.stdout.splitlines() if ln.startswith("{")][-1])
            during = live.batches[batches0:]
            time.sleep(1.5)  # the tap hands its records to the disk within a second
            caught = time.monotonic()
            deadline = caught + 120
            while time.monotonic() < deadline:
                last = live.batches[-1] if live.batches else None
                if last is not None and last.unread == 0 and time.monotonic() - caught > 2:
                    break
                time.sleep(0.2)
            catch_up = time.monotonic() - caught
            tapped = _tap_records(tap)
            counted = (live.state.frames - frames0) / t_load
            lags = [b.lag_s for b in during if b.lag_s is not None]
            print(f"{'sends' if proc is not None else 'frames written'}: {sent['count']:,} in {sent['seconds']:.1f} s = "
                  f"{sent['count'] / sent['seconds']:,.0f}/s; the follower counted {counted:,.0f} frames/s of the load", flush=True)  # fmt: skip
            if lags:
                print(f"follower during the load: {len(during)} batches, lag median {statistics.median(lags):.1f} s, max {max(lags):.1f} s; "
                      f"unread at a batch's end: median {statistics.median(b.unread for b in during) / 1e6:.1f} MB, max "
                      f"{max(b.unread for b in during) / 1e6:.1f} MB; frames per batch median {statistics.median(b.frames for b in during):,.0f}, "
                      f"batch time median {statistics.median(b.seconds for b in during):.2f} s", flush=True)  # fmt: skip
                med = {k: statistics.median(getattr(b, k) for b in during) for k in ("read_s", "merge_s", "write_s")}
                print(f"where a batch's time goes (medians): the source's tasks (read, decode, pair, count; partials to the driver) "
                      f"{med['read_s']:.2f} s, the driver's merge {med['merge_s']:.3f} s, the minutes' tables and state "
                      f"{med['write_s']:.3f} s", flush=True)  # fmt: skip
                spark_ms = _progress_ms(live.query, {b.batch_id for b in during})
                if spark_ms:
                    print("Spark per trigger (medians, ms): " + ", ".join(f"{k} {v:.0f}" for k, v in spark_ms.items()), flush=True)
            print(f"after the load: caught up {catch_up:.1f} s after the tap's last write (1.5 s after the load ended); "
                  f"frames followed {live.state.frames:,}, records in the tap's files {tapped:,}"
                  f"{'' if live.state.frames == tapped else ' (MISMATCH)'}; load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        finally:
            stop.set()
            if follower is not None:
                follower.join(60)
            if spark is not None:
                spark.stop()
            if proc is not None:
                bp.stop_broker(proc)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=("batch", "follow", "worker-memory"), default="batch",
                   help="batch: the job against the baseline (default); follow: the live mode beside a tapping broker; "
                        "worker-memory: a Python worker's peak RSS on a capture of --gb GB")  # fmt: skip
    p.add_argument("--gb", type=float, default=4, help="--part worker-memory: the capture's size")
    p.add_argument("--seconds", type=float, default=60, help="--part follow: seconds of load")
    p.add_argument("--threads", type=int, default=8, help="--part follow: the C++ client's sending threads")
    p.add_argument("--rotate-mb", type=float, default=64, help="--part follow: the tap's --tap-rotate-mb")
    p.add_argument("--source", choices=("broker", "replay"), default="broker",
                   help="--part follow: a broker under the C++ client (default), or a FileTap written at --rate frames/s")
    p.add_argument("--rate", type=float, default=20000, help="--part follow --source replay: frames a second")
    p.add_argument("--trigger-s", type=float, default=1.0, help="--part follow: the follower's --trigger-s (default 1)")
    p.add_argument("--no-follower", action="store_true", help="--part follow: the same load without the follower")
    p.add_argument("--write-tap", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument("--frames", type=int, default=2_000_000)
    p.add_argument("--memory-sizes", default="500000", help="smaller captures (comma-separated frame counts) for the memory check")
    p.add_argument("--dir", default="/tmp/trocket-spark-bench")
    p.add_argument("--repeat", type=int, default=2, help="runs of the baseline and of local[2], alternating (best counts)")
    p.add_argument("--run-one", metavar="MASTER", help=argparse.SUPPRESS)
    p.add_argument("--capture", help=argparse.SUPPRESS)
    p.add_argument("--split-mb", type=float, help="the Spark runs' range size (trocket analyze --split-mb; default its own)")
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.run_one:
        print(json.dumps(run_one(args.run_one, args.capture, args.out, args.split_mb)))
        return
    if args.write_tap:
        write_tap(args.write_tap, args.capture, args.rate, args.seconds, args.rotate_mb)
        return
    if args.part == "worker-memory":
        big = big_capture(args.dir, args.gb)
        proc = subprocess.run([sys.executable, "-c", f"import json, sys; sys.path.insert(0, {HERE!r}); import spark_analyze as b; "
                               f"print(json.dumps(b.worker_memory({big!r})))"], capture_output=True, text=True)  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-4000:])
        m = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"a worker's tasks on {m['size_gb']:.1f} GB ({m['range_count']} ranges of 32 MiB), peak RSS: {m['imports']:.0f} MB after the "
              f"imports, {m['plan']:.0f} MB after the plan (a hop over the whole file, {m['plan_s']:.1f} s), {m['ranges']:.0f} MB after "
              f"decoding three ranges (first, middle, last); goal 512 MB")  # fmt: skip
        return
    if args.part == "follow":
        bench_follow(args.seconds, args.threads, args.rotate_mb, args.source, args.rate, args.dir, args.trigger_s, not args.no_follower)
        return
    os.makedirs(args.dir, exist_ok=True)
    path = _capture(args.dir, args.frames)
    print(f"capture: {args.frames} frames, {os.path.getsize(path) / 1e6:.0f} MB; machine: {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip

    def run_baseline() -> float:
        secs, summary, extra = baseline(path, os.path.join(args.dir, "out-baseline"))
        rate = summary["frames"] / secs
        print(f"single-process Python baseline (same outputs: frames and calls Parquet, summary, views, report): {summary['frames']} "
              f"frames in {secs:.1f} s = {rate:,.0f} frames/s (CPU {extra['cpu_s']:.1f} s, report {extra['report_s']:.1f} s); "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        base_summaries.append(summary)
        return rate

    base_summaries: list[dict] = []
    base_rates = [run_baseline()]
    n = base_summaries[0]["frames"]
    secs = decode_only(path)
    print(f"for reference, decoding alone (rows built and dropped, no outputs): {n / secs:,.0f} frames/s", flush=True)
    rates: dict[str, list[float]] = {"local[2]": [], "local[1]": []}
    # the machine may be shared: baseline and local[2] alternate, --repeat times each,
    # and each one's best run counts (load that comes and goes hits both alike)
    order = ["local[2]", "local[1]"] + ["baseline", "local[2]"] * (args.repeat - 1)
    for master in order:
        if master == "baseline":
            base_rates.append(run_baseline())
            continue
        r = _spark_run(master, path, args.dir, args.split_mb)
        rates[master].append(r["frames"] / r["seconds"])
        if r["summary"] != base_summaries[0]:
            raise SystemExit(f"spark {master} and the baseline disagree:\n{r['summary']}\n{base_summaries[0]}")
        print(
            f"spark {master}: {r['frames']} frames in {r['seconds']:.1f} s (+{r['startup']:.1f} s session start) = "
            f"{rates[master][-1]:,.0f} frames/s; load average {os.getloadavg()[0]:.2f}; peak driver memory: "
            f"JVM {r['jvm_rss_mb']:.0f} MB RSS, Python {r['python_rss_mb']:.0f} MB RSS; largest Python worker {r['worker_rss_mb']:.0f} MB RSS; phases: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in r["phases"].items())
            + f" (report {100 * r['phases']['report'] / r['seconds']:.0f}% of the run); CPU during the job: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in r["cpu_s"].items()),
            flush=True,
        )
    base_rate = max(base_rates)
    best = {m: max(v) for m, v in rates.items()}
    print(f"best runs: baseline {base_rate:,.0f} frames/s (of {len(base_rates)}), local[2] {best['local[2]']:,.0f} "
          f"(of {len(rates['local[2]'])}), local[1] {best['local[1]']:,.0f}; local[1] = {best['local[1]'] / base_rate:.2f}x, "
          f"local[2] = {best['local[2]'] / base_rate:.2f}x baseline (goal 1.5x); local[2] / local[1] = "
          f"{best['local[2]'] / best['local[1]']:.2f}x; load average now {os.getloadavg()[0]:.2f}")  # fmt: skip
    for size in [int(s) for s in args.memory_sizes.split(",") if s.strip()]:
        small = _capture(args.dir, size)
        r = _spark_run("local[2]", small, args.dir, args.split_mb)
        print(f"memory check, {size} frames ({os.path.getsize(small) / 1e9:.2f} GB), local[2]: peak driver JVM {r['jvm_rss_mb']:.0f} MB RSS, "
              f"Python {r['python_rss_mb']:.0f} MB RSS; largest Python worker {r['worker_rss_mb']:.0f} MB RSS")  # fmt: skip


if __name__ == "__main__":
    main()
