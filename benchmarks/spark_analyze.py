"""Benchmark of ``trocket analyze`` (issue 9): frames/s of the Spark job in local[1] and
local[2] against a single-process Python baseline over the same reader and codecs, and
the job's peak driver memory.

    .venv/bin/python benchmarks/spark_analyze.py                 # 2 million frames
    .venv/bin/python benchmarks/spark_analyze.py --frames 200000 --memory-sizes 50000,200000

The synthetic capture (``trocket capture synth``) is written once into --dir and reused.
The baseline reads the capture with the same range reader (``trocket.spark.native``),
decodes every frame with the same ``frame_row`` (``trocket.codecs``), and computes the
summary's counts, pairs and latency percentiles in plain Python dicts and lists. Each
Spark run is a fresh driver process (one SparkContext per process) running the whole job
(frames and calls Parquet, summary; no report); its peak driver memory is the driver
JVM's resident set (in local mode the executors live in it too, so their buffers count)
and the Python driver's, sampled every 0.2 s. "Flat in the capture's size": the same
figures for the smaller captures of --memory-sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))


def _capture(directory: str, frames: int) -> str:
    from trocket.spark import synth

    path = os.path.join(directory, f"synth-{frames}.cap")
    if not os.path.exists(path) or not os.path.exists(synth.truth_path(path)):
        t = time.monotonic()
        synth.write_native(path, frames)
        print(f"wrote {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.monotonic() - t:.0f} s", flush=True)
    return path


def baseline(path: str) -> tuple[float, int]:
    """Seconds and frames of the single-process analysis."""
    from trocket.spark.native import plan_native, read_native_range
    from trocket.spark.rows import FRAME_FIELDS, TO_SERVER

    col = {name: i for i, (name, _) in enumerate(FRAME_FIELDS)}
    i_kind, i_code, i_conn, i_dir, i_op, i_ts = (col[c] for c in ("kind", "code", "connection", "direction", "opaque", "ts_ns"))
    t = time.monotonic()
    problems: list[str] = []
    kinds: Counter = Counter()
    codes: Counter = Counter()
    pending: dict[tuple, list] = defaultdict(list)
    pairs: Counter = Counter()
    latencies: dict[int, list[float]] = defaultdict(list)
    orphans = 0
    n = 0
    for rng in plan_native(path, os.path.basename(path), 1 << 62, problems.append):
        for row in read_native_range(rng, problems.append):
            n += 1
            kind = row[i_kind]
            kinds[kind] += 1
            if kind == "request":
                codes[row[i_code]] += 1
                pending[(row[i_conn], row[i_dir], row[i_op])].append((row[i_ts], row[i_code]))
            elif kind == "oneway":
                codes[row[i_code]] += 1
            elif kind == "response":
                req_dir = "to_client" if row[i_dir] == TO_SERVER else TO_SERVER
                waiting = pending.get((row[i_conn], req_dir, row[i_op]))
                if waiting:
                    ts, code = waiting.pop(0)
                    pairs[(code, row[i_code])] += 1
                    latencies[code].append((row[i_ts] - ts) / 1e6)
                else:
                    orphans += 1
    for values in latencies.values():
        values.sort()
    return time.monotonic() - t, n


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
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def run_one(master: str, path: str, out: str) -> dict:
    """One Spark run in this process (called in a fresh process by main)."""
    from trocket.spark.job import analyze
    from trocket.spark.session import build_session

    t0 = time.monotonic()
    spark = build_session(master, driver_memory="1g", shuffle_partitions=4)
    jvm_pid = next((c for c in _children(os.getpid()) if "java" in open(f"/proc/{c}/cmdline", "rb").read().decode(errors="replace")), None)
    peak = {"jvm": 0, "python": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak["python"] = max(peak["python"], _rss_kb(os.getpid()))
            if jvm_pid:
                peak["jvm"] = max(peak["jvm"], _rss_kb(jvm_pid))

    threading.Thread(target=sample, daemon=True).start()
    startup = time.monotonic() - t0
    t = time.monotonic()
    result = analyze(spark, [path], out)
    elapsed = time.monotonic() - t
    stop.set()
    spark.stop()
    return {"seconds": elapsed, "startup": startup, "frames": result.summary["frames"],
            "jvm_rss_mb": peak["jvm"] / 1024, "python_rss_mb": peak["python"] / 1024, "phases": result.timings}  # fmt: skip


def _spark_run(master: str, path: str, directory: str) -> dict:
    out = os.path.join(directory, f"out-{master.replace('[', '').replace(']', '')}-{os.path.basename(path)}")
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--run-one", master, "--capture", path, "--out", out],
        capture_output=True, text=True, cwd=directory,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"spark run {master} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=2_000_000)
    p.add_argument("--memory-sizes", default="500000", help="smaller captures (comma-separated frame counts) for the memory check")
    p.add_argument("--dir", default="/tmp/trocket-spark-bench")
    p.add_argument("--run-one", metavar="MASTER", help=argparse.SUPPRESS)
    p.add_argument("--capture", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.run_one:
        print(json.dumps(run_one(args.run_one, args.capture, args.out)))
        return
    os.makedirs(args.dir, exist_ok=True)
    path = _capture(args.dir, args.frames)
    print(f"capture: {args.frames} frames, {os.path.getsize(path) / 1e6:.0f} MB; machine: {os.cpu_count()} cores", flush=True)
    secs, n = baseline(path)
    base_rate = n / secs
    print(f"single-process Python baseline: {n} frames in {secs:.1f} s = {base_rate:,.0f} frames/s", flush=True)
    rates = {}
    for master in ("local[1]", "local[2]"):
        r = _spark_run(master, path, args.dir)
        rates[master] = r["frames"] / r["seconds"]
        print(
            f"spark {master}: {r['frames']} frames in {r['seconds']:.1f} s (+{r['startup']:.1f} s session start) = "
            f"{rates[master]:,.0f} frames/s = {rates[master] / base_rate:.2f}x baseline; peak driver memory: "
            f"JVM {r['jvm_rss_mb']:.0f} MB RSS, Python {r['python_rss_mb']:.0f} MB RSS; phases: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in r["phases"].items()),
            flush=True,
        )
    print(f"local[2] / local[1] = {rates['local[2]'] / rates['local[1]']:.2f}x; local[2] / baseline = "
          f"{rates['local[2]'] / base_rate:.2f}x (goal 1.5x)")  # fmt: skip
    for size in [int(s) for s in args.memory_sizes.split(",") if s.strip()]:
        small = _capture(args.dir, size)
        r = _spark_run("local[2]", small, args.dir)
        print(f"memory check, {size} frames, local[2]: peak driver JVM {r['jvm_rss_mb']:.0f} MB RSS, Python {r['python_rss_mb']:.0f} MB RSS")


if __name__ == "__main__":
    main()
