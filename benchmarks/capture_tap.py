"""The tap half of issue 8's capture benchmark (``benchmarks/capture.py --part tap``
runs it through ``TAP_BENCHMARKS``; this file also runs alone).

    .venv/bin/python benchmarks/capture_tap.py                       # tap on vs off, ~1 min
    .venv/bin/python benchmarks/capture_tap.py --seconds 2 --rounds 2
    .venv/bin/python benchmarks/capture.py --part tap                # the same, default settings

:func:`bench_tap`: the broker's produce TPS with ``--tap FILE`` on
vs off. One ``ASYNC_FLUSH`` broker per run (fresh store), ``--senders`` synchronous
SEND_MESSAGE_V2 senders of 128-byte bodies on one connection (the load of
``benchmarks/broker_produce.py --part senders``, its :func:`produce_window`), ``--warmup``
seconds untimed then ``--seconds`` timed; first the tap's own cost per frame
(:func:`tap_record_cost`, in-process, immune to the machine's load: ``record`` per frame and
``record_batch`` as a reader calls it), then the runs alternate off, on, off, on ...
(``--rounds`` pairs) so that a busy machine's drift hits both alike; ``--compare DIR`` adds
to each round a tapped run of the broker from another tree (e.g. main's, laid out as the
``trocket`` package like ``broker_produce.py --broker-pythonpath`` takes): a before/after
under the same load. Prints each run's
TPS and broker CPU per message (user+sys from /proc over the timed window), then the
medians and the tap's cost: 1 - TPS(on)/TPS(off) and the extra CPU per message. The
goal: under 10%. Each tapped run also says how many frames the tap wrote and dropped
(its exit summary).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import trio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import broker_produce  # noqa: E402
from broker_produce import QUEUES, produce_window, send_request, start_broker, stop_broker  # noqa: E402

from trocket.codecs.command import SerializeType  # noqa: E402
from trocket.remoting import ClientConfig, RemotingClient  # noqa: E402


async def tap_run(tap: bool, senders: int, warmup: float, seconds: float, pythonpath: str | None = None) -> dict:
    """One broker, tapped or not (from the tree at ``pythonpath`` if given): the timed
    window's figures (see produce_window)."""
    broker_produce.BROKER_PYTHONPATH = pythonpath
    with tempfile.TemporaryDirectory(prefix="trocket-bench-tap-") as tmp:
        cap = os.path.join(tmp, "broker.trkcap")
        log_path = os.path.join(tmp, "broker.log")
        proc, addr = start_broker(os.path.join(tmp, "store"), "async", log_path,
                                  extra_args=("--tap", cap) if tap else ())
        try:
            client = RemotingClient(ClientConfig(default_timeout=10))
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)
                for q in range(QUEUES):
                    await client.invoke_sync(addr, send_request(q, serialize_type=SerializeType.ROCKETMQ), 10)
                res = await produce_window(client, addr, proc.pid, senders, warmup, seconds, SerializeType.ROCKETMQ)
                await client.aclose()
                nursery.cancel_scope.cancel()
        finally:
            stop_broker(proc)
        if tap:
            with open(log_path) as f:
                summary = [line.strip() for line in f if "tap " in line and "frames written" in line]
            res["tap_summary"] = summary[-1] if summary else "(no tap summary in the broker log)"
            res["tap_bytes"] = os.path.getsize(cap) if os.path.exists(cap) else 0
    return res


async def bench_tap(
    senders: int = 16, warmup: float = 1.0, seconds: float = 4.0, rounds: int = 3, emit=print,
    compare: str | None = None,
) -> dict:
    """Alternate untapped and tapped runs (and, with ``compare``, a tapped run of the broker
    from that tree: a before/after under the same load); ``emit`` each row and the medians.
    Returns the medians."""
    variants: list[tuple[str, bool, str | None]] = [("off", False, None), ("on", True, None)]
    if compare:
        variants.append(("on, compared tree", True, compare))
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
    for i in range(rounds):
        for name, tap, pythonpath in variants:
            res = await tap_run(tap, senders, warmup, seconds, pythonpath)
            runs[name].append(res)
            extra = f"  {res['tap_summary']} ({res['tap_bytes'] / 1e6:.1f} MB)" if tap else ""
            emit(f"tap={name:3s} round={i + 1} senders={senders}  TPS={res['tps']:8.0f}  "
                 f"p99={res['p99_ms']:6.3f} ms  broker CPU={res['cpu_us']:6.1f} us/msg{extra}")
    tps = {name: statistics.median(r["tps"] for r in runs[name]) for name in runs}
    cpu = {name: statistics.median(r["cpu_us"] for r in runs[name]) for name in runs}
    result = {"tps_off": tps["off"], "cpu_off": cpu["off"]}
    for name, tap, _ in variants:
        if not tap:
            continue
        cost = 1 - tps[name] / tps["off"] if tps["off"] else float("nan")
        cpu_cost = cpu[name] / cpu["off"] - 1 if cpu["off"] else float("nan")
        emit(f"tap median ({name}): TPS off={tps['off']:.0f} on={tps[name]:.0f}  cost={100 * cost:.1f}% of TPS  "
             f"(goal < 10%)  broker CPU off={cpu['off']:.1f} on={cpu[name]:.1f} us/msg ({100 * cpu_cost:+.1f}%)")
        key = "" if name == "on" else "_compare"
        result.update({f"tps_on{key}": tps[name], f"cost{key}": cost, f"cpu_on{key}": cpu[name]})
    return result


def tap_record_cost(frames: int = 200_000, frame_size: int = 250, batch: int = 0) -> float:
    """CPU microseconds per frame of FileTap called from a trio loop as an endpoint calls
    it (append to the loop's buffer, hand-overs), plus the writer thread's share (the
    process's CPU time over recording and closing, so the machine's load does not count).
    ``batch`` 0: one ``record`` per frame (sends outside a reader's stretch); N: one
    ``record_batch`` per N request/answer pairs (a reader's stretch: received payloads,
    sent frames)."""
    import time

    from trocket.remoting.tap import PAYLOAD, FileTap

    frame = (frame_size - 4).to_bytes(4, "big") + b"\x01" * (frame_size - 4)
    items = [0 | PAYLOAD, frame[4:], 1, frame] * batch

    async def record_all(tap: FileTap) -> None:
        record, record_batch, now = tap.record, tap.record_batch, time.time_ns
        if batch:
            for i in range(frames // (2 * batch)):
                t = now()
                record_batch(t, t, 7, "127.0.0.1:10911", "127.0.0.1:54321", 1, items)
                if i % 50 == 49:
                    await trio.lowlevel.checkpoint()  # let the loop run the writer's requests
            return
        for i in range(frames):
            record(now(), 7, "127.0.0.1:10911", "127.0.0.1:54321", i & 1, 1, frame)
            if i % 1000 == 999:
                await trio.lowlevel.checkpoint()

    with tempfile.TemporaryDirectory(prefix="trocket-bench-tap-") as tmp:
        tap = FileTap(os.path.join(tmp, "t.trkcap"))
        t0 = time.process_time()
        trio.run(record_all, tap)
        tap.close()
        elapsed = time.process_time() - t0
        if tap.written != frames:
            raise RuntimeError(f"the tap wrote {tap.written} of {frames} frames: {tap.summary()}")
    return 1e6 * elapsed / frames


def tap_rows(
    senders: int = 16, warmup: float = 1.0, seconds: float = 4.0, rounds: int = 3, emit=print,
    compare: str | None = None,
) -> list[str]:
    """Everything above, as printed rows (also passed to ``emit`` as they come)."""
    rows: list[str] = []

    def out(line: str) -> None:
        rows.append(line)
        emit(line)

    per_frame = tap_record_cost()
    out(f"tap record: {per_frame:.2f} CPU us per 250-byte frame, written; a send is 2 frames "
        f"(request and answer): {2 * per_frame:.2f} us per message")
    per_frame = tap_record_cost(batch=16)
    out(f"tap record_batch (16 request/answer pairs a call, as a reader records them): {per_frame:.2f} CPU us "
        f"per 250-byte frame, written: {2 * per_frame:.2f} us per message")
    trio.run(bench_tap, senders, warmup, seconds, rounds, out, compare)
    return rows


def add_tap_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("tap on/off")
    g.add_argument("--senders", type=int, default=16, help="synchronous senders on one connection (16)")
    g.add_argument("--warmup", type=float, default=1.0, help="untimed seconds per run (1)")
    g.add_argument("--seconds", type=float, default=4.0, help="timed seconds per run (4)")
    g.add_argument("--rounds", type=int, default=3, help="off/on pairs (3)")
    g.add_argument("--compare", metavar="DIR", default=None,
                   help="also run, each round, a tapped broker from the tree in DIR (laid out as the trocket "
                        "package, as broker_produce.py --broker-pythonpath takes): before/after under one load")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_tap_arguments(parser)
    args = parser.parse_args()
    tap_rows(args.senders, args.warmup, args.seconds, args.rounds, emit=lambda line: print(line, flush=True),
             compare=args.compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
