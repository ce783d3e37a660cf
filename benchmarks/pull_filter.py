"""A pull of 32 messages, unfiltered and with a SQL92 filter, side by side (issue 25:
filtering must not make it cost more than 2x).

    .venv/bin/python benchmarks/pull_filter.py                  # wall clock, interleaved rounds
    .venv/bin/python benchmarks/pull_filter.py --instructions   # instructions per pull (valgrind)
    .venv/bin/python benchmarks/pull_filter.py --instructions --compare /tmp/base/pkg
                                        # and the unfiltered pull of another tree beside them

What runs: a real broker (``BrokerController`` with ``enablePropertyFilter``, a fresh
temporary store) in this process, 64 stored messages of one queue, each with the
properties a Java producer writes (``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``WAIT``) and two
user ones (``a`` = its index, ``b`` = ``x`` or ``y`` alternately), 128-byte bodies. A
connection of its server over a socket pair whose reader does not run is handed decoded
PULL_MESSAGE requests through the endpoint's dispatch, as the connection's reader would
(frame decode, the pull processor, the store's read, the answer's encode and write),
and the answers are drained from the other end. Every pull asks for 32 messages from
offset 0 with the subscription in it:

* ``unfiltered``: ``*`` (TAG), 32 messages back;
* ``sql, 32 of 32``: ``a >= 0`` -- every record evaluated, all 32 delivered;
* ``sql, 32 of 64``: ``b = 'x'`` -- 64 records evaluated to deliver 32;
* ``sql, 4 terms``: ``a BETWEEN 0 AND 1000 AND TAGS IN ('t') AND b IS NOT NULL AND KEYS <> 'z'``.

Wall clock (default): the variants in turn, ``--pulls`` pulls each per round, ``--rounds``
rounds; the figure is each variant's best round (the machine's other load only ever
adds). ``--instructions``: under callgrind, a run of ``--warm`` pulls and one of
``--warm + --pulls`` pulls per variant, the difference divided by ``--pulls``.
``--compare DIR`` adds the unfiltered pull of another tree (a folder holding it as the
``trocket`` package, put first on ``PYTHONPATH``): what this tree's filter support costs
a pull that does not filter.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import trio

TOPIC = "PullFilter"
VARIANTS: dict[str, tuple[str, str]] = {
    "unfiltered": ("*", "TAG"),
    "sql, 32 of 32": ("a >= 0", "SQL92"),
    "sql, 32 of 64": ("b = 'x'", "SQL92"),
    "sql, 4 terms": ("a BETWEEN 0 AND 1000 AND TAGS IN ('t') AND b IS NOT NULL AND KEYS <> 'z'", "SQL92"),
}


def _send_payload(i: int) -> bytes:
    from trocket.codecs.command import RemotingCommand, SerializeType
    from trocket.codecs.serialize import encode_command

    props = (f"TAGS\x01t\x02KEYS\x01k{i}\x02UNIQ_KEY\x017F000001000018B4AAC2{i:012X}\x02WAIT\x01true\x02"
             f"a\x01{i}\x02b\x01{'xy'[i % 2]}\x02")
    ext = {"a": "PG", "b": TOPIC, "c": "TBW102", "d": "1", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
           "i": props, "j": "0", "k": "false", "m": "false"}
    cmd = RemotingCommand(code=310, ext_fields=ext, body=b"x" * 128, serialize_type=SerializeType.ROCKETMQ)
    return encode_command(cmd)[4:]


def _pull_payload(expression: str, expression_type: str) -> bytes:
    from trocket.codecs.command import RemotingCommand, SerializeType
    from trocket.codecs.serialize import encode_command

    ext = {"consumerGroup": "PullFilterG", "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
           "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": expression,
           "subVersion": "0", "expressionType": expression_type}
    return encode_command(RemotingCommand(code=11, ext_fields=ext, serialize_type=SerializeType.ROCKETMQ))[4:]


def _drain(peer: socket.socket) -> int:
    got = 0
    try:
        while True:
            data = peer.recv(1 << 20)
            if not data:
                return got
            got += len(data)
    except BlockingIOError:
        return got


async def _with_broker(work) -> None:
    from trocket.broker.config import BrokerConfig
    from trocket.broker.controller import BrokerController
    from trocket.codecs.serialize import decode_command
    from trocket.remoting import Connection

    with tempfile.TemporaryDirectory(prefix="trocket-pull-filter-") as tmp:
        opts = dict(listen=("127.0.0.1", 0), namesrv_listen=("127.0.0.1", 0), store_dir=os.path.join(tmp, "store"),
                    commit_log_segment_size=64 << 20)
        try:
            cfg = BrokerConfig(**opts, enable_property_filter=True)
        except TypeError:  # a tree from before SQL92 filters (--compare): unfiltered pulls only
            cfg = BrokerConfig(**opts)
        controller = BrokerController(cfg)
        async with trio.open_nursery() as nursery:
            await nursery.start(controller.run)
            controller.topics.create_in_send(TOPIC, "TBW102", 1, 0)
            server = controller.server
            ours, peer = socket.socketpair()
            ours.setblocking(False)
            peer.setblocking(False)
            conn = Connection(server, trio.SocketStream(trio.socket.from_stdlib_socket(ours)),
                              remote_address="127.0.0.1:50000")
            dispatch = server.dispatch
            for i in range(64):
                if dispatch(conn, decode_command(_send_payload(i))) is not None:
                    raise RuntimeError("the send did not complete on the reader")
                _drain(peer)
            await trio.sleep(0.2)  # the dispatcher builds the consume queue
            if controller.store.get_max_offset(TOPIC, 0) != 64:
                raise RuntimeError("the 64 messages are not all in the consume queue")

            def pull(payload: bytes) -> None:
                if dispatch(conn, decode_command(payload)) is not None:
                    raise RuntimeError("the pull did not complete on the reader")
                _drain(peer)

            variants = VARIANTS if hasattr(cfg, "enable_property_filter") else {"unfiltered": VARIANTS["unfiltered"]}
            for name, (expression, etype) in variants.items():  # each answers 32 messages
                resp = controller.pull_processor.pull(  # type: ignore[union-attr]
                    conn, None, _decode_pull_header(_pull_payload(expression, etype)), False)
                from trocket.codecs.message.record import decode_records

                if resp.code != 0 or len(decode_records(resp.body)) != 32:
                    raise RuntimeError(f"{name}: the pull did not answer 32 messages ({resp.code} {resp.remark})")
            work(pull)
            nursery.cancel_scope.cancel()


def _decode_pull_header(payload: bytes):
    from trocket.codecs.custom_header import decode_header
    from trocket.codecs.headers import PullMessageRequestHeader
    from trocket.codecs.serialize import decode_command

    return decode_header(PullMessageRequestHeader, decode_command(payload).ext_fields)


def wall_clock(pulls: int, rounds: int) -> dict[str, float]:
    """Best round's seconds per pull, per variant."""
    best: dict[str, float] = {name: float("inf") for name in VARIANTS}
    payloads = {name: _pull_payload(*v) for name, v in VARIANTS.items()}

    def work(pull) -> None:
        for _ in range(pulls // 4):  # warm-up: the filter compiled, the caches filled
            for p in payloads.values():
                pull(p)
        for _ in range(rounds):
            for name, payload in payloads.items():
                t0 = time.perf_counter()
                for _ in range(pulls):
                    pull(payload)
                best[name] = min(best[name], (time.perf_counter() - t0) / pulls)

    trio.run(_with_broker, work)
    return best


def _child(variant: str, n: int) -> None:
    payload = _pull_payload(*VARIANTS[variant])

    def work(pull) -> None:
        for _ in range(n):
            pull(payload)

    trio.run(_with_broker, work)


def _env(pythonpath: str) -> dict[str, str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _callgrind_total(variant: str, n: int, pythonpath: str = "") -> int:
    with tempfile.TemporaryDirectory(prefix="trocket-pull-filter-cg-") as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
             "--child", variant, str(n)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(pythonpath),
        )
        with open(out) as f:
            for line in f:
                if line.startswith(("totals:", "summary:")):
                    return int(line.split()[1])
    raise RuntimeError("callgrind wrote no total")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pulls", type=int, default=2000, help="pulls per variant and round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="wall-clock rounds (default 5)")
    parser.add_argument("--instructions", action="store_true", help="instructions per pull under callgrind")
    parser.add_argument("--warm", type=int, default=200, help="pulls of the shorter callgrind run (default 200)")
    parser.add_argument("--compare", metavar="DIR", default="",
                        help="with --instructions: another tree's unfiltered pull, as a folder holding `trocket`")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child[0], int(args.child[1]))
        return
    if args.instructions:
        trees = {"": list(VARIANTS)} | ({args.compare: ["unfiltered"]} if args.compare else {})
        figures = {}
        for path, names in trees.items():
            subprocess.run([sys.executable, __file__, "--child", "unfiltered", "1"], check=True,
                           env=_env(path))  # bytecode caches written outside the measured runs
            for name in names:
                label = name if not path else f"unfiltered ({os.path.basename(path.rstrip('/')) or path})"
                figures[label] = (_callgrind_total(name, args.warm + args.pulls, path)
                                  - _callgrind_total(name, args.warm, path)) / args.pulls
        unit, fmt = "instructions/pull", "{:12,.0f}"
    else:
        figures = {name: s * 1e6 for name, s in wall_clock(args.pulls, args.rounds).items()}
        unit, fmt = "us/pull (best round)", "{:12,.1f}"
    base = figures["unfiltered"]
    for name, value in figures.items():
        print(f"{name:22s} {fmt.format(value)} {unit}   x{value / base:.2f}")


if __name__ == "__main__":
    main()
