"""Instructions per message under valgrind's callgrind: a steady figure on a noisy machine.

    .venv/bin/python benchmarks/instructions.py --part broker --senders 16 --messages 3000
    .venv/bin/python benchmarks/instructions.py --part broker --serialize json --broker-pythonpath /tmp/base/pkg
    .venv/bin/python benchmarks/instructions.py --part broker --codecs both --serialize json
    .venv/bin/python benchmarks/instructions.py --part echo --callers 8
    .venv/bin/python benchmarks/instructions.py --part echo --callers 8 --typed

Wall-clock figures (TPS, CPU seconds per message) move by 30% or more from run to run
on a small shared machine; user-space instruction counts move by about 1%. They leave
out the kernel (syscalls), so count those with ``strace -c -f -p PID`` beside them.

``broker``: ``trocket broker`` (ASYNC_FLUSH, fresh temporary store) runs under callgrind
with instrumentation off; this process warms it up with 300 sends, turns instrumentation
on (``callgrind_control -i on``), sends ``--messages`` synchronous SEND_MESSAGE_V2 sends
of 128-byte bodies from ``--senders`` tasks on one connection, turns it off, stops the
broker and prints the broker's instructions per message. ``--broker-pythonpath`` runs
another tree's broker (a tree laid out as the ``trocket`` package) under the same load.

``--keys`` gives every message a unique key and a ``KEYS`` entry, as a real producer's
(what the index stores). ``--index both`` runs the broker with ``messageIndexEnable``
on and off (a broker.conf) and prints the index's share of the instructions:

    .venv/bin/python benchmarks/instructions.py --part broker --keys --index both

``--tap`` runs the broker with ``--tap FILE`` (the capture tap's cost: compare with a run
without it; the tap's writer thread counts too).

``--codecs both`` runs the broker twice, with pure-Python codecs (``TROCKET_PURE=1``)
and with the compiled accelerator (``codecs/_accel.pyx``), and prints the ratio.

``echo``: an echo server and client in ONE process under callgrind (inline processor,
ROCKETMQ headers, 128-byte bodies, ``--callers`` synchronous callers on one connection);
runs 500 and 500 + ``--messages`` requests and prints the difference per request (both
sides together, start-up cancelled out). Run it with ``PYTHONPATH=<tree>/pkg`` to measure
another tree. ``--inflight N`` makes the requests async calls from one task with N in flight (the
shape of remoting_echo.py's async figures) instead. ``--typed`` measures the same exchange through a typed service
(``remoting.Service`` handler, ``EchoHeader``, ``EchoStub``: ``remoting_echo.py``'s) and the
plain processor with the same bytes on the wire, and prints their ratio. trio runs each
batch of ready tasks in a random order (``trio._core._run._r``), and with several callers
that order puts a run on one of two levels (about 117k or 134k instructions per plain
request with 8 callers: how the callers' requests bunch into reads); ``--seed N``
(default 0) seeds it, the same for both paths, so a ratio compares like with like.
``--serialize json`` sends JSON headers instead; ``--oneway`` sends oneway requests from
``--callers`` tasks (then one sync request, so the server has read them all); ``--ext java``
gives each request the Java echo client's ext fields (``run-echo-client.sh``: topic,
queueId, tags, keys) instead of one; ``--keep DIR`` keeps the longer run's callgrind output
for ``callgrind_annotate --inclusive=yes``.

``answer``: the echo server's own work per request without I/O or scheduling, under
callgrind: a request frame as the Java echo client sends it (four ext fields, 128-byte
body; ``--serialize``, ``--oneway``) decoded, dispatched to the inline echo processor,
its answer finished, encoded and queued on a corked connection's outbox, ``--messages``
times (runs of 2000 and 2000 + ``--messages``, the difference). Steadier than ``echo``
(whose figure moves with how reads bunch and when the run's timers fire):

    .venv/bin/python benchmarks/instructions.py --part answer --serialize json
    PYTHONPATH=/tmp/base/pkg .venv/bin/python benchmarks/instructions.py --part answer --oneway

``producer``: the trocket ``Producer`` (``client/producer.py``) under callgrind, ``--senders``
tasks each awaiting ``send`` of a new 128-byte message (tags, as ``client_produce.py``'s),
against a ``trocket broker`` run outside callgrind (its embedded name server gives the
route); 500 and 500 + ``--messages`` sends, the difference per message: the client's own
cost, start-up and route lookup cancelled out. ``PYTHONPATH=<tree>`` measures another tree:

    .venv/bin/python benchmarks/instructions.py --part producer --senders 4

``--batch N`` sends ``send_batch`` calls of N messages instead (still per message).
``--trace both`` measures the Producer with message trace off and on (``trace=True``: the
Pub records, their batching and the trace messages sent by the background task, all in
this process) and prints the ratio (issue 25's goal: sends at most 10% slower);
``--trace on`` measures only the traced one:

    .venv/bin/python benchmarks/instructions.py --part producer --senders 4 --trace both
    .venv/bin/python benchmarks/instructions.py --part producer --senders 1 --batch 32 --trace both

Callgrind runs the producer ~50x slower than it runs natively, so its timers see ~50x
fewer messages: the trace's segments, sent 500 ms after their first record unless full
(~700 records) first, carry ~40 records instead of hundreds, and each trace message's
cost is shared by fewer sends. ``--clock-rate R`` runs the measured process's trio clock
at R times real time (``trio.testing.MockClock(rate=R)``): 0.01 makes its timers behave
as at native speed (the segments fill first), 1 (the default) is a machine 50x slower.

Needs ``valgrind`` (apt) and callgrind_control.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile

import trio

from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.remoting import ClientConfig, RemotingClient, RemotingServer, ServerConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_produce as bp  # noqa: E402
import remoting_echo as echo_bench  # noqa: E402


def callgrind_total(out: str) -> int:
    total = 0
    for path in glob.glob(out + "*"):
        with open(path) as f:
            for line in f:
                if line.startswith(("totals:", "summary:")):
                    total = max(total, int(line.split()[1]))
    return total


def broker_run(args: argparse.Namespace, pure: bool | None = None, index: bool | None = None) -> float:
    """One broker run; ``pure`` True/False sets ``TROCKET_PURE`` in the broker's environment
    (pure-Python codecs / the compiled accelerator), None leaves it as inherited;
    ``index`` True/False: ``messageIndexEnable`` in its broker.conf (None: the default)."""
    stype = SerializeType.ROCKETMQ if args.serialize == "rocketmq" else SerializeType.JSON
    with tempfile.TemporaryDirectory(prefix="trocket-instr-") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        log_path = os.path.join(tmp, "broker.log")
        conf: tuple[str, ...] = ()
        if index is not None:
            conf_path = os.path.join(tmp, "broker.conf")
            with open(conf_path, "w") as f:
                f.write(f"messageIndexEnable={'true' if index else 'false'}\n")
            conf = ("-c", conf_path)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("PYTHONPATH", None)
        if args.broker_pythonpath:
            env["PYTHONPATH"] = args.broker_pythonpath
        if pure is not None:
            env.pop("TROCKET_PURE", None)
            if pure:
                env["TROCKET_PURE"] = "1"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                 sys.executable, "-m", "trocket", "broker", *conf, "--store", os.path.join(tmp, "store"),
                 "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0", "--flush", "async",
                 "--log-level", "INFO", *(("--tap", os.path.join(tmp, "broker.trkcap")) if args.tap else ())],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tempfile.gettempdir(),
            )
        addr = bp.wait_for_boot(proc, log_path, 300)

        async def main() -> None:
            client = RemotingClient(ClientConfig(default_timeout=60))
            async with trio.open_nursery() as nursery:
                await nursery.start(client.run)

                def burst(count: int):
                    return bp.send_burst(client, addr, args.senders, count, stype)

                await burst(300)
                subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True)
                await burst(args.messages)
                if args.keys:
                    await trio.sleep(1)  # the index task's last pass (it gathers 5 ms), counted too
                subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, capture_output=True)
                await client.aclose()
                nursery.cancel_scope.cancel()

        try:
            trio.run(main)
        finally:
            bp.stop_broker(proc)
        total = callgrind_total(out)
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for path in glob.glob(out + "*"):
                os.replace(path, os.path.join(args.keep, os.path.basename(path)))
    codecs = "" if pure is None else ("codecs=pure  " if pure else "codecs=compiled  ")
    codecs += "" if index is None else ("index=on  " if index else "index=off  ")
    print(f"broker  {args.serialize:8s} senders={args.senders:3d}  {codecs}{'tap=on  ' if args.tap else ''}"
          f"{total / args.messages:10,.0f} instructions/msg "
          f"({args.messages} messages)", flush=True)
    return total / args.messages


def echo_processor(conn, req: RemotingCommand) -> RemotingCommand:
    return RemotingCommand.response(0, body=req.body, ext_fields=req.ext_fields)


#: What an echo workload sends: the plain request this figure has always used, the plain
#: request with the typed one's bytes, or the typed call (remoting_echo.py's EchoHeader,
#: Service handler and EchoStub).
PLAIN, PLAIN_AS_TYPED, TYPED = 0, 1, 2


def seed_scheduler(seed: int) -> None:
    """Seed trio's choice of the order a batch of ready tasks runs in (a private
    ``random.Random`` of trio's run loop): runs with the same seed schedule alike."""
    import trio._core._run as trio_run

    trio_run._r.seed(seed)


#: the Java echo client's ext fields (run-echo-client.sh's EchoClient.newRequest)
JAVA_EXT = {"topic": "TopicTest", "queueId": "1", "tags": "TagA", "keys": "k1"}


async def echo_workload(callers: int, n: int, mode: int = PLAIN, inflight: int = 0, json: int = 0,
                        oneway: int = 0, java_ext: int = 0) -> None:
    """``n`` echo requests: from ``callers`` sync callers, or (``inflight`` > 0) one task's
    async calls with that many in flight (remoting's async permits), whose callbacks
    check the plain answer's error (as remoting_echo.py's) or make the typed Reply, or
    (``oneway``) oneway requests from ``callers`` tasks and one sync request after them."""
    server = RemotingServer(ServerConfig(listen_host="127.0.0.1", listen_port=0))
    server.register_processor(100, echo_processor, inline=True)
    echo_bench.typed_service(True).register(server)
    stype = SerializeType.JSON if json else SerializeType.ROCKETMQ
    async with server, RemotingClient(ClientConfig(async_permits=inflight) if inflight else ClientConfig()) as client:
        addr = server.address
        left = [n]
        echo = echo_bench.EchoStub(client, addr, timeout=30, serialize_type=stype).echo
        ext = JAVA_EXT if java_ext else {"k": "v"} if mode == PLAIN else {"key": "benchmark", "n": "1"}

        async def caller() -> None:
            while left[0] > 0:
                left[0] -= 1
                if mode == TYPED:
                    await echo(echo_bench.ECHO_HEADER, b"b" * 128)
                    continue
                req = RemotingCommand.request(100, body=b"b" * 128, ext_fields=dict(ext), serialize_type=stype)
                if oneway:
                    await client.invoke_oneway(addr, req, 30)
                else:
                    await client.invoke_sync(addr, req, 30)

        if inflight:
            await echo(echo_bench.ECHO_HEADER, b"b" * 128)  # connected, outside the count's difference
            done = [0]

            def plain_done(fut) -> None:
                if fut.exception is None:
                    done[0] += 1

            def typed_done(fut) -> None:
                fut.result()
                done[0] += 1

            for _ in range(n):
                if mode == TYPED:
                    await echo.invoke_async(echo_bench.ECHO_HEADER, b"b" * 128, callback=typed_done)
                else:
                    req = RemotingCommand.request(100, body=b"b" * 128, ext_fields=dict(ext), serialize_type=stype)
                    await client.invoke_async(addr, req, 30, plain_done)
            while done[0] < n:
                await trio.sleep(0.001)
            return
        if oneway:  # connected, outside the count's difference
            await client.invoke_sync(addr, RemotingCommand.request(100, body=b"", serialize_type=stype), 30)
        async with trio.open_nursery() as nursery:
            for _ in range(callers):
                nursery.start_soon(caller)
        if oneway:  # the server has read every oneway request before it answers this
            await client.invoke_sync(addr, RemotingCommand.request(100, body=b"", serialize_type=stype), 30)


def echo_instructions(args: argparse.Namespace, mode: int) -> float:
    """Instructions per request of ``args.messages`` requests (two runs, the difference)."""
    totals = []
    with tempfile.TemporaryDirectory(prefix="trocket-instr-") as tmp:
        for n in (500, 500 + args.messages):
            out = os.path.join(tmp, f"echo-{n}.out")
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                 os.path.abspath(__file__), "--echo-workload", str(args.callers), str(n), str(mode), str(args.inflight),
                 str(int(args.serialize == "json")), str(int(args.oneway)), str(int(args.ext == "java")), str(args.seed)],
                check=True, capture_output=True, cwd=tempfile.gettempdir(),
            )
            totals.append(callgrind_total(out))
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for path in glob.glob(out + "*"):
                os.replace(path, os.path.join(args.keep, f"{'typed-' if mode == TYPED else ''}{os.path.basename(path)}"))
    return (totals[1] - totals[0]) / args.messages


async def answer_workload(n: int, json: int, oneway: int) -> None:
    """The server's work on ``n`` requests outside I/O (see ``--part answer``)."""
    import socket

    from trocket.codecs.serialize import decode_command, encode_command
    from trocket.remoting.connection import Connection

    server = RemotingServer(ServerConfig(listen_host="127.0.0.1", listen_port=0))
    server.register_processor(100, echo_processor, inline=True)
    near, far = socket.socketpair()
    conn = Connection(server, trio.SocketStream(trio.socket.from_stdlib_socket(near)), remote_address="peer")
    req = RemotingCommand.request(100, body=b"b" * 128, ext_fields=dict(JAVA_EXT), opaque=7, oneway=bool(oneway),
                                  serialize_type=SerializeType.JSON if json else SerializeType.ROCKETMQ)
    payload = encode_command(req)[4:]
    outbox = conn.outbox
    outbox.corked = True  # as while the reader handles a read: answers queue, nothing is written
    frames = outbox.frames
    dispatch = server.dispatch
    for _ in range(n):
        if dispatch(conn, decode_command(payload)) is not None:
            raise SystemExit("an answer had to wait")
        frames.clear()
        outbox.nbytes = 0
    far.close()


def answer_run(args: argparse.Namespace) -> None:
    totals = []
    with tempfile.TemporaryDirectory(prefix="trocket-instr-") as tmp:
        for n in (2000, 2000 + args.messages):
            out = os.path.join(tmp, f"answer-{n}.out")
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, os.path.abspath(__file__),
                 "--answer-workload", str(n), str(int(args.serialize == "json")), str(int(args.oneway))],
                check=True, capture_output=True, cwd=tempfile.gettempdir(),
            )
            totals.append(callgrind_total(out))
    print(f"answer  {args.serialize.upper():8s} {'oneway ' if args.oneway else ''}"
          f"{(totals[1] - totals[0]) / args.messages:10,.0f} instructions/request (the server's, without I/O)",
          flush=True)


async def producer_workload(namesrv: str, senders: int, n: int, trace: bool = False, batch: int = 0) -> None:
    """``n`` messages from ``senders`` tasks: one ``send`` each, or ``send_batch`` calls of
    ``batch`` messages (``n`` a multiple of it)."""
    from trocket.client import new_message
    from trocket.client.producer import Producer

    async with Producer("InstrProducer", namesrv, send_timeout=60, trace=trace) as producer:
        await producer.send(new_message(bp.TOPIC, b"b" * 128, tags="bench"))  # the route, not counted apart
        left = [n]

        async def sender() -> None:
            while left[0] > 0:
                if batch:
                    left[0] -= batch
                    await producer.send_batch([new_message(bp.TOPIC, b"b" * 128, tags="bench") for _ in range(batch)])
                else:
                    left[0] -= 1
                    await producer.send(new_message(bp.TOPIC, b"b" * 128, tags="bench"))

        async with trio.open_nursery() as nursery:
            for _ in range(senders):
                nursery.start_soon(sender)
    tracer = producer.tracer
    if trace and (tracer is None or tracer.dropped or tracer.failed or not tracer.sent):
        # a trace that failed or dropped records costs something else: not the figure wanted
        raise SystemExit(f"trace records not all sent: {tracer and (tracer.sent, tracer.dropped, tracer.failed)}")
    if trace:
        print(f"trace: {tracer.appended} records in {tracer.sent} messages", flush=True)


def producer_instructions(args: argparse.Namespace, namesrv: str, tmp: str, trace: bool) -> float:
    """The Producer's instructions per message: runs of 500 (with ``--batch``, the next
    multiple of the batch) and that + ``args.messages`` messages under callgrind, the
    difference."""
    totals = []
    base = -(-500 // args.batch) * args.batch if args.batch else 500
    for n in (base, base + args.messages):
        out = os.path.join(tmp, f"producer-{n}-{int(trace)}.out")
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             os.path.abspath(__file__), "--producer-workload", namesrv, str(args.senders), str(n),
             str(int(trace)), str(args.batch), str(args.clock_rate)],
            check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(),
        )
        totals.append(callgrind_total(out))
    if trace:  # how full the trace messages were (the longer run's)
        print(f"producer  {run.stdout.strip().splitlines()[-1]}", flush=True)
    return (totals[1] - totals[0]) / args.messages


def producer_run(args: argparse.Namespace) -> None:
    """The Producer's instructions per message, the broker outside callgrind; with
    ``--trace both`` untraced and traced, and their ratio."""
    if args.batch and args.messages % args.batch:
        raise SystemExit(f"--messages {args.messages} is no multiple of --batch {args.batch}")
    modes = {"off": (False,), "on": (True,), "both": (False, True)}[args.trace]
    shape = (f"senders={args.senders:3d}" + (f"  batch={args.batch}" if args.batch else "")
             + (f"  clock-rate={args.clock_rate:g}" if args.clock_rate != 1 else ""))
    figures = {}
    with tempfile.TemporaryDirectory(prefix="trocket-instr-") as tmp:
        namesrv = f"127.0.0.1:{bp.free_port()}"
        proc, addr = bp.start_broker(os.path.join(tmp, "store"), "async", os.path.join(tmp, "broker.log"),
                                     namesrv_listen=namesrv)
        try:
            for trace in modes:
                per = figures[trace] = producer_instructions(args, namesrv, tmp, trace)
                print(f"producer {shape}  trace={'on ' if trace else 'off'} {per:10,.0f} instructions/msg "
                      f"(the client; {args.messages} messages)", flush=True)
        finally:
            bp.stop_broker(proc)
    if len(figures) == 2:
        print(f"producer {shape}  traced/plain = {figures[True] / figures[False]:.3f}x "
              f"({figures[True] - figures[False]:,.0f} instructions/msg for the trace)", flush=True)


def echo_run(args: argparse.Namespace) -> None:
    if args.oneway and (args.inflight or args.typed):
        raise SystemExit("--oneway goes with neither --inflight nor --typed")
    shape = (f"async inflight={args.inflight}" if args.inflight
             else f"{'oneway ' if args.oneway else ''}callers={args.callers:3d}")
    head = (f"echo    {args.serialize.upper()} {shape}{' ext=java' if args.ext == 'java' else ''}"
            f" seed={args.seed}")
    if not args.typed:
        per = echo_instructions(args, PLAIN)
        print(f"{head}  {per:10,.0f} instructions/request (client and server)", flush=True)
        return
    plain = echo_instructions(args, PLAIN_AS_TYPED)
    typed = echo_instructions(args, TYPED)
    print(f"{head}  plain {plain:10,.0f}  typed {typed:10,.0f} instructions/request (client and server), "
          f"typed/plain = {typed / plain:.3f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("broker", "echo", "answer", "producer"), default="broker")
    parser.add_argument("--senders", type=int, default=16,
                        help="broker: senders on one connection; producer: sending tasks (default 16)")
    parser.add_argument("--callers", type=int, default=8, help="echo: sync callers on one connection (default 8)")
    parser.add_argument("--messages", type=int, default=3000, help="measured messages (default 3000)")
    parser.add_argument("--serialize", choices=("rocketmq", "json"), default="rocketmq",
                        help="broker, echo, answer: header serialization of the requests (default rocketmq)")
    parser.add_argument("--broker-pythonpath", default="", help="broker: the broker child's PYTHONPATH")
    parser.add_argument("--tap", action="store_true", help="broker: run it with --tap FILE (a capture in its temporary dir)")
    parser.add_argument("--codecs", choices=("inherit", "pure", "compiled", "both"), default="inherit",
                        help="broker: its codecs, pure Python (TROCKET_PURE=1) or the compiled accelerator; "
                             "both: one run each, then the ratio (default: as this environment has it)")
    parser.add_argument("--keep", metavar="DIR", default="",
                        help="broker, echo: keep the callgrind output in DIR (for callgrind_annotate)")
    parser.add_argument("--typed", action="store_true",
                        help="echo: the plain processor and a typed service and stub (remoting.Service / Stub), "
                             "the same bytes on the wire, and their ratio")
    parser.add_argument("--keys", action="store_true",
                        help="broker: each message with a unique key and a KEYS entry (what the index stores), "
                             "and a second after the sends counted too (the index's last pass)")
    parser.add_argument("--index", choices=("inherit", "on", "off", "both"), default="inherit",
                        help="broker: messageIndexEnable on or off; both: one run each, then the index's share "
                             "(use with --keys; default: the broker's default, on)")
    parser.add_argument("--batch", type=int, default=0, metavar="N",
                        help="producer: send_batch calls of N messages instead of single sends")
    parser.add_argument("--trace", choices=("off", "on", "both"), default="off",
                        help="producer: message trace off, on, or both and their ratio (default off)")
    parser.add_argument("--echo-workload", nargs=8, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--oneway", action="store_true",
                        help="echo: oneway requests from --callers tasks (then one sync request); answer: oneway requests")
    parser.add_argument("--ext", choices=("one", "java"), default="one",
                        help="echo: one ext field per plain request, or the Java echo client's four")
    parser.add_argument("--inflight", type=int, default=0, metavar="N",
                        help="echo: async calls from one task, N in flight, instead of --callers sync callers")
    parser.add_argument("--seed", type=int, default=0,
                        help="echo: seed of trio's scheduling order, the same for every run (default 0)")
    parser.add_argument("--clock-rate", type=float, default=1.0, metavar="R",
                        help="producer: the measured process's trio clock at R x real time (default 1)")
    parser.add_argument("--producer-workload", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--answer-workload", nargs=3, type=int, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    bp.KEYS = parsed.keys
    if parsed.echo_workload:
        *workload, seed = parsed.echo_workload
        seed_scheduler(seed)
        trio.run(echo_workload, *workload)
    elif parsed.answer_workload:
        trio.run(answer_workload, *parsed.answer_workload)
    elif parsed.producer_workload:
        ns, senders, n, traced, batch, rate = parsed.producer_workload
        from trio.testing import MockClock

        # the default clock at rate 1: the figures without the option stay comparable
        trio.run(producer_workload, ns, int(senders), int(n), traced == "1", int(batch),
                 clock=None if float(rate) == 1 else MockClock(rate=float(rate)))
    elif parsed.part == "producer":
        producer_run(parsed)
    elif parsed.part == "answer":
        answer_run(parsed)
    elif parsed.part == "broker" and parsed.codecs == "both":
        pure_ipm = broker_run(parsed, pure=True)
        fast_ipm = broker_run(parsed, pure=False)
        print(f"broker  {parsed.serialize:8s} pure/compiled = {pure_ipm / fast_ipm:.2f}x "
              f"({pure_ipm - fast_ipm:,.0f} instructions/msg saved)", flush=True)
    elif parsed.part == "broker" and parsed.index == "both":
        pure = None if parsed.codecs == "inherit" else parsed.codecs == "pure"
        on_ipm = broker_run(parsed, pure, index=True)
        off_ipm = broker_run(parsed, pure, index=False)
        print(f"broker  {parsed.serialize:8s} index on/off = {on_ipm / off_ipm:.3f}x "
              f"({on_ipm - off_ipm:,.0f} instructions/msg for the index)", flush=True)
    elif parsed.part == "broker":
        broker_run(parsed, None if parsed.codecs == "inherit" else parsed.codecs == "pure",
                   None if parsed.index == "inherit" else parsed.index == "on")
    else:
        echo_run(parsed)
