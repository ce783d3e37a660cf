"""``trocket analyze`` and ``trocket capture synth`` (issue 9; the job is in ``trocket.spark``)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_analyze_command", "add_synth_command"]


def add_analyze_command(sub) -> None:
    from trocket.spark.main import add_arguments

    p = sub.add_parser(
        "analyze",
        help="analyze captures with Spark: Parquet tables, summary.json, report.html",
        description="Read native captures and pcap/pcapng files with Spark (local[*] by default, or "
        "--master spark://HOST:PORT), decode every frame, pair requests with responses, and write "
        "DIR/frames and DIR/calls (Parquet), DIR/summary.json and DIR/report.html. Needs the "
        "'spark' extra (pip install 'trocket[spark]').",
    )
    add_arguments(p)
    p.set_defaults(run=_run_analyze)


def _run_analyze(args: argparse.Namespace) -> int:
    import signal
    import time

    from trocket.spark.main import run
    from trocket.spark.session import Progress

    from trocket.interrupt import is_interrupt, received

    started = time.monotonic()
    progress = Progress(show=not args.quiet)
    try:
        return run(args, progress=progress)
    except BaseException as exc:
        # SIGINT, or SIGTERM (the Ctrl-C rule raises it for both), or what Py4J raised
        # while the interrupt unwound a call it cut short
        if not is_interrupt(exc):
            raise
        from trocket.spark.session import stop_quietly

        done = progress.so_far()  # before the context stops (the tasks' counts are read as they were)
        stop_quietly()
        why = signal.Signals(received() or signal.SIGINT).name
        print(f"analyze interrupted by {why} after {time.monotonic() - started:.1f} s {done}: {args.out} is incomplete "
              "(no _SUCCESS)", file=sys.stderr)
        raise


def add_synth_command(capture_subparsers) -> None:
    p = capture_subparsers.add_parser(
        "synth",
        help="write a synthetic capture and its ground truth (FILE.truth.json)",
        description="Generate a realistic synthetic capture (a name server, two brokers, producers "
        "and consumers; mixed codes, both serializations, errors, unanswered pulls, torn "
        "connections) and write the counts analyze must find beside it, in FILE.truth.json.",
    )
    p.add_argument("--frames", type=int, required=True, metavar="N", help="frames to generate")
    p.add_argument("--out", required=True, metavar="FILE", help="the capture to write")
    p.add_argument("--pcap", action="store_true", help="write a pcap (TCP segments) instead of a native capture")
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    p.set_defaults(run=_run_synth)


def _run_synth(args: argparse.Namespace) -> int:
    from trocket.spark import synth

    if args.frames < 1:
        print("trocket: error: --frames must be at least 1", file=sys.stderr)
        return 1
    try:
        if args.pcap:
            truth = synth.write_pcap(args.out, args.frames, seed=args.seed)
        else:
            truth = synth.write_native(args.out, args.frames, seed=args.seed)
    except OSError as exc:
        print(f"trocket: error: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(
        f"{args.out}: {truth['frames']} frames, {truth['requests']} requests, {truth['responses']} responses, "
        f"{truth['connections']} connections; ground truth in {synth.truth_path(args.out)}"
    )
    return 0
