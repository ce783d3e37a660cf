"""Capture reading speed (issue 8): frames/s read from a pcap (packet decoding, TCP
reassembly, frame splitting, then header decode) and from a native trocket capture.

    .venv/bin/python benchmarks/capture.py --part read             # 100 MB captures
    .venv/bin/python benchmarks/capture.py --part read --mb 20     # smaller
    .venv/bin/python benchmarks/capture.py --part read --keep DIR  # keep the generated files

The captures are generated first (not timed): a producer-like session on several
interleaved connections — SEND_MESSAGE_V2 requests (ROCKETMQ headers, 1 KiB bodies) and
their responses, PULL_MESSAGE (JSON) with 8 KiB answers — written as a pcap with
Ethernet-sized segments (MSS 1448, as on a real network: many packets), as a pcap with
loopback-sized segments (MSS 65483: what tcpdump -i lo sees), and as a native capture
holding the same frames. Each row: the best of ``--repeat`` runs.

Rows:
  read       records out of CaptureFile (reassembly + framing; no header decode)
  decode     the same plus decode_command on every frame (what show/stats/spark do)
  stats      `trocket capture stats` end to end (decode, pairing, counts), output discarded

The broker's produce TPS with ``--tap`` on vs off (the other half of issue 8's benchmark,
``--part tap``) belongs with the tap: it is a function in TAP_BENCHMARKS below.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from trocket.codecs.capture import FILE_HEADER, Direction, Role, encode_record_fields
from trocket.codecs.capture_files import CaptureFile
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.pcap_write import PcapWriter, TcpFlow
from trocket.codecs.serialize import decode_command, encode_command

#: (name, function(args) -> list of printed rows): the tap on/off benchmark goes here
TAP_BENCHMARKS: list[tuple[str, Callable[[argparse.Namespace], list[str]]]] = []

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture_tap  # noqa: E402  (benchmarks/capture_tap.py: the broker with --tap on vs off)



def _tap_on_off(args: argparse.Namespace) -> list[str]:
    # the runs take a while: their rows are printed as they come, none left to print after
    capture_tap.tap_rows(args.senders, args.warmup, args.seconds, args.rounds,
                         emit=lambda line: print(line, flush=True), compare=args.compare)
    return []


TAP_BENCHMARKS.append(("broker produce with --tap on vs off (benchmarks/capture_tap.py)", _tap_on_off))

SERVER = "192.168.7.2:10911"
T0 = 1_700_000_000_000_000_000


def session_frames(rng: random.Random, n_conn: int):
    """Endless (conn index, side, frame, ts) of a producer/consumer mix."""
    body = rng.randbytes(1024)
    pulled = rng.randbytes(8192)
    opaque = [0] * n_conn
    ts = T0
    while True:
        c = rng.randrange(n_conn)
        opaque[c] += 1
        o = opaque[c]
        ts += rng.randrange(20_000, 200_000)
        if rng.random() < 0.8:
            req = RemotingCommand.request(
                310, opaque=o, body=body, serialize_type=SerializeType.ROCKETMQ,
                ext_fields={"a": "PG", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": str(o % 4), "f": "0",
                            "g": str(ts // 1_000_000), "h": "0", "i": f"UNIQ_KEY\x01{o:032X}\x02WAIT\x01true", "j": "0", "k": "false", "m": "false"},
            )
            resp = RemotingCommand.response(
                0, opaque=o, serialize_type=SerializeType.ROCKETMQ,
                ext_fields={"msgId": f"C0A80702000029BF{o:016X}", "queueId": str(o % 4), "queueOffset": str(o)},
            )
        else:
            req = RemotingCommand.request(11, opaque=o, ext_fields={
                "consumerGroup": "CG", "topic": "BenchTopic", "queueId": str(o % 4), "queueOffset": str(o),
                "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "0"})
            resp = RemotingCommand.response(0, opaque=o, body=pulled, ext_fields={
                "suggestWhichBrokerId": "0", "nextBeginOffset": str(o + 32), "minOffset": "0", "maxOffset": str(o + 64)})
        yield c, "client", encode_command(req), ts
        yield c, "server", encode_command(resp), ts + rng.randrange(100_000, 2_000_000)


def generate(directory: Path, megabytes: int, n_conn: int = 8) -> dict[str, Path]:
    """Write the three captures of about ``megabytes`` MB each; returns their paths."""
    rng = random.Random(8)
    target = megabytes * 1_000_000
    paths = {"pcap-eth": directory / "bench-eth.pcap", "pcap-lo": directory / "bench-lo.pcap", "native": directory / "bench.trkcap"}
    w_eth, w_lo = PcapWriter(nanos=True), PcapWriter(nanos=True)
    clients = [f"192.168.7.{10 + i}:{40000 + i}" for i in range(n_conn)]
    eth = [TcpFlow(w_eth, c, SERVER, client_isn=rng.randrange(2**32), mss=1448) for c in clients]
    lo = [TcpFlow(w_lo, c, SERVER, client_isn=rng.randrange(2**32), mss=65483) for c in clients]
    with open(paths["pcap-eth"], "wb") as fe, open(paths["pcap-lo"], "wb") as fl, open(paths["native"], "wb") as fn:
        fe.write(w_eth.header())
        fl.write(w_lo.header())
        fn.write(FILE_HEADER)
        for i in range(n_conn):
            fe.write(b"".join(eth[i].handshake(T0)))
            fl.write(b"".join(lo[i].handshake(T0)))
        written = 0
        frames = 0
        for c, side, frame, ts in session_frames(rng, n_conn):
            fe.write(b"".join(eth[c].send(ts, side, frame)))
            fl.write(b"".join(lo[c].send(ts, side, frame)))
            d = Direction.RECEIVED if side == "client" else Direction.SENT
            fn.write(encode_record_fields(ts, c + 1, SERVER, clients[c], d, Role.SERVER, frame))
            written += len(frame)
            frames += 1
            if written >= target:
                break
    print(f"generated {frames} frames ({written / 1e6:.1f} MB of frames) on {n_conn} connections:")
    for name, p in paths.items():
        print(f"  {name:<9} {p.stat().st_size / 1e6:8.1f} MB  {p}")
    return paths


def read_records(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        capture = CaptureFile(f)
        n = sum(1 for _ in capture.records_only())
        assert capture.complete, capture.problems[:3]
    return n, path.stat().st_size


def read_and_decode(path: Path) -> tuple[int, int]:
    n = 0
    with open(path, "rb") as f:
        for record in CaptureFile(f).records_only():
            decode_command(record.frame[4:])
            n += 1
    return n, path.stat().st_size


def run_stats(path: Path) -> tuple[int, int]:
    from trocket.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["capture", "stats", str(path)])
    assert rc == 0, out.getvalue()[-500:]
    return int(out.getvalue().split()[1]), path.stat().st_size


def best_of(fn, path: Path, repeat: int) -> tuple[int, int, float]:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        n, size = fn(path)
        best = min(best, time.perf_counter() - t0)
    return n, size, best


def bench_read(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        paths = generate(directory, args.mb)
        print(f"\n{'capture':<10}{'row':<8}{'frames':>10}{'seconds':>10}{'frames/s':>12}{'MB/s':>9}")
        for name, path in paths.items():
            for row, fn in (("read", read_records), ("decode", read_and_decode), ("stats", run_stats)):
                n, size, secs = best_of(fn, path, args.repeat)
                print(f"{name:<10}{row:<8}{n:>10}{secs:>10.2f}{n / secs:>12.0f}{size / 1e6 / secs:>9.1f}")
                sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["read", "tap", "all"], default="all", help="the reader rows, the tap rows, or both (default)")
    parser.add_argument("--mb", type=int, default=100, help="frame megabytes per capture (default 100)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per row, the best is shown (default 2)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="write the captures here and keep them")
    capture_tap.add_tap_arguments(parser)
    args = parser.parse_args(argv)
    if args.part in ("read", "all"):
        bench_read(args)
    if args.part in ("tap", "all"):
        for title, bench in TAP_BENCHMARKS:
            print(f"\n{title}")
            for line in bench(args):
                print(line)
    print(f"\npython {sys.version.split()[0]}, {os.cpu_count()} cpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
