"""``trocket analyze`` and the ``spark-submit`` entry point share this driver.

    trocket analyze CAPTURE... --out DIR [--master URL] [--since T --until T]
    spark-submit "$(python -c 'import trocket.spark.submit as m; print(m.__file__)')" CAPTURE... --out DIR

Writes DIR/frames and DIR/calls (Parquet), DIR/views/ (the report's views, Parquet),
DIR/summary.json, DIR/report.html and DIR/_SUCCESS, and prints a short summary. CAPTURE
and DIR are local paths or URIs (:mod:`trocket.spark.storage`: file://, s3://, s3a://,
hdfs://). Exit status 0, or 1 when any capture could not
be read completely (missing, not a capture, cut off, garbled, a stream with lost bytes:
the rule of ``trocket capture show`` and ``stats``); every problem is listed in the
summary, and everything readable is analyzed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time

from .storage import LOCAL, Storage, StorageError, error_reason, join, local_path, stat, store_root, write_bytes

__all__ = ["add_arguments", "run", "run_follow", "parse_time", "main_args", "main", "write_report"]


def parse_time(text: str) -> int:
    """Unix time in nanoseconds from Unix seconds or ISO 8601 (UTC unless an offset is given)."""
    try:
        return int(float(text) * 1e9)
    except ValueError:
        pass
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither Unix seconds nor an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp()) * 10**9 + t.microsecond * 1000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("captures", nargs="*", metavar="CAPTURE", help="native captures, pcap or pcapng files, or folders of them")
    p.add_argument("--s3-endpoint", metavar="URL", help="the S3-compatible store s3:// and s3a:// inputs are read from (MinIO, Ceph, ...; "
                   "default: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS itself)")  # fmt: skip
    p.add_argument("--out", required=True, metavar="DIR", help="where frames/, calls/, summary.json and report.html go "
                   "(a path, or a file://, s3://, s3a:// or hdfs:// URI)")  # fmt: skip
    p.add_argument("--master", metavar="URL", help="Spark master (default: local[*]; spark://HOST:PORT for a standalone cluster)")
    p.add_argument("--since", type=parse_time, metavar="T", help="only frames at or after T (Unix seconds or ISO 8601)")
    p.add_argument("--until", type=parse_time, metavar="T", help="only frames before T")
    p.add_argument("--split-mb", type=float, metavar="N", help="read large files in ranges of about N MiB (default 64; 4 with --follow)")
    p.add_argument("--driver-memory", default="1g", metavar="SIZE", help="Spark driver memory (default 1g)")
    p.add_argument("--no-report", action="store_true", help="skip report.html")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    f = p.add_argument_group("live mode")
    f.add_argument("--follow", metavar="DIR", help="follow the native captures a tap rotates into DIR (trocket broker --tap DIR/FILE "
                   "--tap-rotate-mb N) and keep per-minute tables and a report in --out up to date, until interrupted")  # fmt: skip
    f.add_argument("--checkpoint", metavar="DIR", help="with --follow: where Spark and the follower keep their progress (default OUT/_checkpoint)")
    f.add_argument("--once", action="store_true", help="with --follow: read what is there now, then stop")
    f.add_argument("--trigger-s", type=float, default=2.0, metavar="S", help="with --follow: start a batch every S seconds (default 2)")
    f.add_argument("--expire-s", type=float, default=120.0, metavar="S",
                   help="with --follow: a request not answered S seconds of capture later is unanswered (default 120)")  # fmt: skip
    f.add_argument("--report-every-s", type=float, default=10.0, metavar="S", help="with --follow: rewrite report.html at most every S seconds (default 10)")
    f.add_argument("--max-batch-mb", type=float, default=256, metavar="N", help="with --follow: read at most N MiB in one batch (default 256)")


def run(args: argparse.Namespace, spark=None, progress=None) -> int:
    """Run the job with the parsed arguments (``spark``: an existing session to use;
    ``progress``: a :class:`~trocket.spark.session.Progress` the caller keeps, to say what
    was done when the run is interrupted)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("trocket: error: analyze needs PySpark: pip install 'trocket[spark]'", file=sys.stderr)
        return 1
    from .inputs import resolve_inputs
    from .job import DEFAULT_SPLIT_BYTES, analyze
    from .report import console_summary
    from .session import Progress, build_session
    from .summary import write_summary

    if args.follow is not None:
        return run_follow(args, spark)
    if not args.captures:
        print("trocket: error: name at least one CAPTURE (or --follow DIR)", file=sys.stderr)
        return 1
    if args.since is not None and args.until is not None and args.until <= args.since:
        print("trocket: error: --until must be after --since", file=sys.stderr)
        return 1
    started = time.monotonic()
    storage = Storage.from_environment(args.s3_endpoint)
    # absolute before anything runs: executors resolve a relative path in their own
    # working directory (a standalone worker's is not the driver's)
    out = _out_dir(args.out, storage)
    if out is None:
        return 1
    if progress is None:
        progress = Progress(show=not args.quiet)
    progress.phase = "naming the inputs"
    inputs = resolve_inputs(args.captures, storage)
    for warning in inputs.skipped:
        print(f"trocket: warning: {warning}", file=sys.stderr)
    for name, files in inputs.rotated.items():
        print(f"trocket: {name}: {len(files)} files of one rotated tap ({files[0]} ... {files[-1]}) read as one capture", file=sys.stderr)
    if inputs.captures and spark is None:
        # under spark-submit (a gateway already given) its --master stands; else local[*]
        progress.phase = "starting Spark"
        submitted = "PYSPARK_GATEWAY_PORT" in os.environ
        spark = build_session(args.master or (None if submitted else "local[*]"), driver_memory=args.driver_memory)
    if inputs.captures:
        progress.start(spark.sparkContext)
    try:
        result = analyze(
            spark, inputs, out, since_ns=args.since, until_ns=args.until,
            split_bytes=max(4096, int(args.split_mb * 1024 * 1024)) if args.split_mb else DEFAULT_SPLIT_BYTES, progress=progress,
        )  # fmt: skip
        write_summary(result.summary, join(out, "summary.json"), storage)
        if not args.no_report:
            progress.phase = "writing the views and the report"
            write_report(out, result.summary, bool(inputs.captures), spark, storage)
        write_bytes(join(out, "_SUCCESS"), b"", storage)
    finally:
        progress.stop()
    print(console_summary(result.summary, out))
    print(f"done in {time.monotonic() - started:.1f} s")
    return 0 if result.summary["complete"] else 1


def run_follow(args: argparse.Namespace, spark=None) -> int:
    """``--follow DIR``: the live mode (:mod:`trocket.spark.follow`), until interrupted."""
    from .follow import follow
    from .session import build_session

    if args.captures:
        print("trocket: error: --follow DIR takes no CAPTURE", file=sys.stderr)
        return 1
    directory = local_path(args.follow)
    if directory is None:
        print(f"trocket: error: --follow {args.follow}: only a local folder is followed (where the tap writes)", file=sys.stderr)
        return 1
    if not os.path.isdir(directory):
        print(f"trocket: error: --follow {args.follow}: no such folder", file=sys.stderr)
        return 1
    if local_path(args.out) is None:
        print(f"trocket: error: --out {args.out}: --follow writes a local folder (its tables are rewritten every batch)", file=sys.stderr)
        return 1
    out = _out_dir(args.out)
    if out is None:
        return 1
    if spark is None:
        submitted = "PYSPARK_GATEWAY_PORT" in os.environ
        spark = build_session(args.master or (None if submitted else "local[*]"), driver_memory=args.driver_memory)
    try:
        f = follow(
            spark, directory, out, checkpoint=args.checkpoint and os.path.abspath(args.checkpoint), once=args.once,
            trigger_s=args.trigger_s, expire_s=args.expire_s, report_every_s=args.report_every_s,
            split_bytes=max(4096, int((args.split_mb or 4) * 1024 * 1024)), max_batch_bytes=max(1 << 20, int(args.max_batch_mb * (1 << 20))),
            quiet=args.quiet,
        )  # fmt: skip
    except KeyboardInterrupt:  # a second Ctrl-C, while the query was being stopped
        print("stopped", file=sys.stderr)
        return 0
    s = f.state
    print(f"{'stopped; ' if f.interrupted else ''}followed {args.follow}: {s.frames:,} frames, {s.calls:,} calls, {len(s.pending):,} requests still open; "
          f"tables and report in {out} (minutes/, report.html, status.json)")  # fmt: skip
    return 0


def _out_dir(given: str, storage: Storage = LOCAL) -> str | None:
    """``--out`` as an absolute local path (a ``file:`` URI's path) or a store's URI (its
    store checked now, before any JVM), or None and an error."""
    path = local_path(given)
    if path is not None:
        return os.path.abspath(os.path.expanduser(path))
    root = store_root(given)
    try:
        if stat(root, storage).kind == "missing" and root != given:  # the store answers (an endpoint, keys that work)
            print(f"trocket: error: --out {given}: no such bucket ({root})", file=sys.stderr)
            return None
    except StorageError as exc:
        print(f"trocket: error: --out {given}: {exc}", file=sys.stderr)
        return None
    except OSError as exc:
        print(f"trocket: error: --out {given}: cannot reach it ({error_reason(exc)})", file=sys.stderr)
        return None
    return given.rstrip("/")


def write_report(out: str, summary: dict, tables: bool = True, spark=None, storage: Storage = LOCAL) -> None:
    """``out/views/`` (when there are tables) and ``out/report.html``; with ``spark``, the
    views' passes over the tables run in its executors. ``out``: a local path or a URI,
    reached through ``storage`` (:mod:`trocket.spark.storage`)."""
    from .report import build_report
    from .views import build_views

    map_parts = None
    if spark is not None:
        from .job import map_files

        def map_parts(fn, files):
            spark.sparkContext.setJobDescription("views")
            return map_files(spark, fn, files)

    views = build_views(out, summary, map_parts, storage) if tables else None
    page = build_report(views, summary)
    write_bytes(join(out, "report.html"), page.encode("utf-8"), storage)


def main_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments of ``trocket analyze`` (or the ``spark-submit`` entry point) parsed."""
    parser = argparse.ArgumentParser(prog="trocket-analyze", description="Analyze captured RocketMQ traffic with Spark.")
    add_arguments(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return run(main_args(argv))
