"""trocket against the real Apache RocketMQ 4.9.8, side by side, with the same Java programs.

    .venv/bin/python benchmarks/vs_java.py                      # everything, 2 rounds (~12 min)
    .venv/bin/python benchmarks/vs_java.py --part produce --seconds 5 --rounds 1
    .venv/bin/python benchmarks/vs_java.py --part echo --part client
    .venv/bin/python benchmarks/vs_java.py --part echo --compare /tmp/base/inst   # and another tree's echo

The Java side is the bundle in ``shared/rocketmq-4.9.8`` (found as the Java acceptance
suite finds it: ``$TROCKET_ROCKETMQ_JAVA`` or ``shared/`` beside the checkout); its
scripts are the load generators on BOTH sides, so each figure compares the two servers
under one client:

* ``produce``: ``run-producer.sh`` (DefaultMQProducer, sync sends, 128-byte bodies) at 1, 4
  and 16 threads against Java's broker (``run-broker.sh``: its own name server, ASYNC_FLUSH,
  ASYNC_MASTER, 1 GiB heap) and against ``trocket broker`` (its embedded name server,
  defaults). TPS is the producer's ``msgs_per_s``; the broker's CPU per message is user+sys
  of the broker process (``/proc``) over the producer's whole run divided by the messages
  the broker stored in it (the topic's queue offsets, read after), warm-up included on both
  sides alike. The same producer also runs against the floor (``floor_responder.py
  --mode trio-fd``: trio and the framework's own fd I/O answering every send with the
  bytes of trocket's answer, no store, no checks, no header decode; it finds it through
  a ``trocket broker`` whose name server advertises the floor's port): ``ceiling`` is
  floor / Java, what a Python broker of this shape could reach here if its send path
  cost nothing, and ``trocket/floor`` how close trocket comes to it; the floor's CPU per
  message is over the messages the producer sent.
* ``consume``: each broker is first filled with ``--consume-count`` messages (200k), then
  ``run-consumer.sh`` (DefaultMQPushConsumer from the first offset, a fresh group per round)
  drains them; its ``msgs_per_s``.
* ``echo``: ``run-echo-client.sh`` (NettyRemotingClient: sync, 8 sync threads, 256 async in
  flight, oneway; 128-byte bodies) against Java's ``NettyRemotingServer`` echo
  (``run-echo-server.sh``) and against trocket's remoting echo (``benchmarks/remoting_echo.py
  --serve``: an inline processor answering code 100 with the body and ext fields), in JSON
  and ROCKETMQ serialization; and against the floor (``remoting_echo.py --floor-serve``:
  trio, each frame of a read made its answer by patching code and flag, no codec, no
  dispatch, the answers of a read in one send). ``ceiling`` is floor / Java: the client
  runs on the same two cores, so no server of this shape can pass that ratio here
  (``trocket/floor``: how close trocket comes).
  ``--compare DIR`` adds another tree's echo server (``DIR`` holds it as the ``trocket``
  package and goes first on its ``PYTHONPATH``, as ``send_path.py --compare``), in the same
  alternating rounds: the column ``base`` and the ratio trocket / base.
* ``client``: the trocket Producer (``benchmarks/client_produce.py``'s sync senders, trio
  tasks of this process) against the Java Producer (``run-producer.sh``), both sending to
  the Java broker, at 4 and 16 senders.

Before any timed run each broker takes ``--warmup`` seconds of untimed sends (the JIT,
the page cache, the first segments), and each echo server a quarter of that.

Rounds alternate which side runs first; each line prints the median over rounds of
each side and the ratio trocket / Java (for CPU per message, lower is better: the
ratio is trocket's CPU over Java's). The two cores are shared by brokers and clients,
and by whatever else the machine runs: measure on a quiet machine.

For produce and consume the load generator's own CPU per message is printed too
(``gen cpu µs``, Java side / trocket side: the script's JVM, the marginal cost over a
short run of the same program, so its start is left out), and
the ``cpu ceiling``: the TPS ratio trocket could reach if its broker cost nothing while the
generator and the broker share the machine's cores, (Java's generator + Java's broker) /
trocket's generator, per message. When the figures are CPU-bound, a goal above the
ceiling cannot be met on this machine by the broker alone.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for path in (HERE, REPO / "tests" / "acceptance", REPO / "tests" / "acceptance" / "java"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from broker_produce import cpu_per_message, cpu_seconds  # noqa: E402
from java_tools import find_bundle, free_port, free_port_block  # noqa: E402

BODY_SIZE = 128
PARTS = ("produce", "consume", "echo", "client")
ECHO_MODES = ("sync", "sync8", "async", "oneway")
SERIALIZATIONS = ("JSON", "ROCKETMQ")
RESULT = re.compile(r"^RESULT (.*)$", re.M)


def result_fields(output: str, what: str) -> dict[str, str]:
    """The ``RESULT k=v ...`` line of a bundle program's output, as a dict."""
    found = RESULT.findall(output)
    if not found:
        raise RuntimeError(f"{what} printed no RESULT line:\n{output[-2000:]}")
    return dict(item.split("=", 1) for item in found[-1].split())


def wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout} s")


class Side:
    """One broker with its own name server, in child processes."""

    name = ""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: list[subprocess.Popen] = []
        self.logs: list = []
        self.namesrv = ""
        self.pid = 0

    def spawn(self, argv: list[str], log: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        out = open(self.work / log, "wb")
        self.logs.append(out)
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=None if env is None else {**os.environ, **env})
        self.procs.append(proc)
        return proc

    def wait_registered(self, timeout: float = 60.0) -> None:
        """Until the name server lists the broker (routes for new topics need it)."""
        import trio

        async def registered() -> bool:
            async with client_instance(self.namesrv) as inst:
                info = await inst.api.get_cluster_info(timeout=3)
                return bool(info.broker_addr_table)

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if trio.run(registered):
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the {self.name} broker did not register with {self.namesrv}")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for out in self.logs:
            out.close()


class JavaSide(Side):
    name = "java"

    def __init__(self, work: Path, bundle) -> None:
        super().__init__(work)
        self.bundle = bundle

    def start(self) -> None:
        home = self.bundle.home
        env = {"RMQJ_RUN_DIR": str(self.work / "run")}
        ns_port = free_port()
        self.namesrv = f"127.0.0.1:{ns_port}"
        ns = self.spawn([str(home / "run-namesrv.sh"), str(ns_port)], "java-namesrv.log", env)
        wait_port(ns_port, ns, "the Java name server")
        port = free_port_block()
        broker = self.spawn([str(home / "run-broker.sh"), self.namesrv, str(port), str(self.work / "java-store"),
                             "ASYNC_FLUSH", "ASYNC_MASTER"], "java-broker.log", env)
        wait_port(port, broker, "the Java broker")
        self.pid = broker.pid  # run-broker.sh execs the JVM
        self.wait_registered()


class TrocketSide(Side):
    name = "trocket"

    def start(self) -> None:
        ns_port = free_port()
        port = free_port_block()
        self.namesrv = f"127.0.0.1:{ns_port}"
        broker = self.spawn([sys.executable, "-m", "trocket", "broker", "--listen", f"127.0.0.1:{port}",
                             "--namesrv-listen", self.namesrv, "--store", str(self.work / "trocket-store")],
                            "trocket-broker.log")
        wait_port(port, broker, "trocket broker")
        self.pid = broker.pid
        self.wait_registered()


class FloorSide(Side):
    """``floor_responder.py --mode trio-fd`` behind a ``trocket broker`` (the router) whose
    embedded name server hands out the floor's port: a producer looks its topic up there
    (the default topic's route) and sends to the floor. ``pid`` is the floor's."""

    name = "floor"

    def start(self) -> None:
        floor_port = free_port()
        proc = self.spawn([sys.executable, str(HERE / "floor_responder.py"), "--port", str(floor_port),
                           "--mode", "trio-fd"], "floor.log")
        wait_port(floor_port, proc, "the floor responder")
        self.pid = proc.pid
        ns_port = free_port()
        self.namesrv = f"127.0.0.1:{ns_port}"
        router = self.spawn([sys.executable, "-m", "trocket", "broker", "--listen", f"127.0.0.1:{free_port()}",
                             "--namesrv-listen", self.namesrv, "--advertise", f"127.0.0.1:{floor_port}",
                             "--store", str(self.work / "floor-router-store")], "floor-router.log")
        wait_port(ns_port, router, "the floor's router")
        self.wait_registered()


def client_instance(namesrv: str):
    from trocket.client.config import ClientConfig
    from trocket.client.instance import ClientInstance

    return ClientInstance(ClientConfig(namesrv=namesrv, call_timeout=5))


def stored_messages(namesrv: str, topic: str) -> int:
    """The messages the topic's queues hold (their max offsets summed), over its route."""
    import trio

    from trocket.client.message import MessageQueue

    async def count() -> int:
        async with client_instance(namesrv) as inst:
            api = inst.api
            route = await api.get_route(topic, timeout=5)
            if route is None:
                return 0
            total = 0
            for qd in route.queue_datas:
                addr = next(bd.master_addr for bd in route.broker_datas if bd.broker_name == qd.broker_name)
                for q in range(qd.write_queue_nums):
                    total += await api.get_max_offset(addr, MessageQueue(topic, qd.broker_name, q), timeout=5)
            return total

    return trio.run(count)


def run_bundle(bundle, script: str, args: list[str], timeout: float, work: Path) -> tuple[str, float]:
    """Run one of the bundle's scripts; its output and the CPU seconds (user + sys) its
    process tree used, the JVM's start included (``RUSAGE_CHILDREN``: the script waits
    for its JVM, so the JVM's time is counted when the script is reaped)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([str(bundle.home / script), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "RMQJ_RUN_DIR": str(work / "run")})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.stdout + done.stderr, cpu


def produce_once(bundle, side: Side, topic: str, threads: int, seconds: float, work: Path) -> dict[str, float]:
    cpu0 = cpu_seconds(side.pid)
    out, gen_cpu = run_bundle(bundle, "run-producer.sh", [side.namesrv, topic, threads, int(seconds), BODY_SIZE],
                              seconds + 120, work)
    cpu1 = cpu_seconds(side.pid)
    fields = result_fields(out, f"run-producer.sh against {side.name}")
    # (the floor stores nothing: its CPU is per message sent)
    stored = int(fields["sent"]) if isinstance(side, FloorSide) else stored_messages(side.namesrv, topic)
    return {"tps": float(fields["msgs_per_s"]), "errors": float(fields["errors"]),
            "cpu_us": cpu_per_message(cpu0, cpu1, stored)["cpu_us"] if stored else float("nan"),
            "gen_cpu": gen_cpu, "count": stored}


def fill(bundle, side: Side, topic: str, count: int, work: Path) -> None:
    """Produce to ``topic`` (16 threads, 10 s at a time) until it holds ``count`` messages."""
    while stored_messages(side.namesrv, topic) < count:
        produce_once(bundle, side, topic, 16, 10, work)


def consume_once(bundle, side: Side, topic: str, group: str, count: int, work: Path) -> dict[str, float]:
    cpu0 = cpu_seconds(side.pid)
    out, gen_cpu = run_bundle(bundle, "run-consumer.sh", [side.namesrv, topic, group, count, 300], 420, work)
    cpu1 = cpu_seconds(side.pid)
    fields = result_fields(out, f"run-consumer.sh against {side.name}")
    consumed = int(fields["consumed"])
    return {"tps": float(fields["msgs_per_s"]), "consumed": consumed,
            "cpu_us": cpu_per_message(cpu0, cpu1, consumed)["cpu_us"] if consumed else float("nan"),
            "gen_cpu": gen_cpu, "count": consumed}


def with_generator_cost(fig: dict[str, float], short: dict[str, float]) -> dict[str, float]:
    """``fig`` with the generator's CPU per message (``gen_cpu_us``): the marginal cost
    between a short run of the same program (``short``: the JVM's start, a few messages)
    and this one, so the JVM's start and JIT are not counted per message."""
    extra = fig["count"] - short["count"]
    fig["gen_cpu_us"] = (fig["gen_cpu"] - short["gen_cpu"]) * 1e6 / extra if extra > 0 else float("nan")
    return fig


def echo_servers(bundle, work: Path, compare: str | None = None) -> tuple[Side, dict[str, str]]:
    """Java's echo server per serialization, trocket's, the floor and, with ``compare``,
    another tree's trocket (each of these serves both): addresses."""
    side = Side(work)
    addrs = {}
    for ser in SERIALIZATIONS:
        port = free_port()
        proc = side.spawn([str(bundle.home / "run-echo-server.sh"), str(port), ser], f"java-echo-{ser}.log",
                          {"RMQJ_RUN_DIR": str(work / "run")})
        wait_port(port, proc, f"the Java echo server ({ser})")
        addrs[f"java {ser}"] = f"127.0.0.1:{port}"
    port = free_port()
    proc = side.spawn([sys.executable, str(HERE / "remoting_echo.py"), "--serve", f"127.0.0.1:{port}"],
                      "trocket-echo.log")
    wait_port(port, proc, "trocket's echo server")
    addrs["trocket"] = f"127.0.0.1:{port}"
    port = free_port()
    proc = side.spawn([sys.executable, str(HERE / "remoting_echo.py"), "--floor-serve", f"127.0.0.1:{port}"],
                      "floor-echo.log")
    wait_port(port, proc, "the floor echo server")
    addrs["floor"] = f"127.0.0.1:{port}"
    if compare is not None:
        port = free_port()
        proc = side.spawn([sys.executable, str(HERE / "remoting_echo.py"), "--serve", f"127.0.0.1:{port}"],
                          "base-echo.log", {"PYTHONPATH": compare})
        wait_port(port, proc, f"the echo server of {compare}")
        addrs["base"] = f"127.0.0.1:{port}"
    return side, addrs


def echo_once(bundle, addr: str, mode: str, ser: str, seconds: float, work: Path) -> dict[str, float]:
    out, _ = run_bundle(bundle, "run-echo-client.sh", [addr, mode, int(seconds), ser], seconds + 90, work)
    fields = result_fields(out, f"run-echo-client.sh {mode} {ser} against {addr}")
    if int(fields.get("errors", "0")):
        raise RuntimeError(f"echo {mode} {ser} against {addr}: {fields['errors']} errors")
    return {"tps": float(fields["req_per_s"])}


def trocket_producer_once(namesrv: str, pid: int, senders: int, seconds: float) -> dict[str, float]:
    import trio

    from client_produce import run_trocket

    r = trio.run(run_trocket, namesrv, pid, f"sync x{senders}", 1.0, seconds)
    return {"tps": r["tps"], "cpu_us": r["cpu_us"], "errors": r["errors"]}


# -- the table --------------------------------------------------------------------------------


class Table:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, list[dict[str, float]]]] = {}

    def add(self, row: str, side: str, figures: dict[str, float]) -> None:
        self.rows.setdefault(row, {}).setdefault(side, []).append(figures)

    @staticmethod
    def median(runs: list[dict[str, float]], key: str) -> float:
        values = [r[key] for r in runs if key in r and r[key] == r[key]]
        return statistics.median(values) if values else float("nan")

    def print(self, title: str, base: str, new: str, cpu: bool, floor: str | None = None,
              compare: str | None = None) -> list[tuple[str, float, float | None]]:
        print(f"\n{title}")
        head = f"{'':28} {base + ' /s':>12} {new + ' /s':>12} {'ratio':>7}"
        if floor is not None:
            head += f" {floor + ' /s':>12} {'ceiling':>8} {new + '/' + floor:>14}"
        if compare is not None:
            head += f" {compare + ' /s':>12} {new + '/' + compare:>13}"
        if cpu:
            head += (f" {base + ' cpu µs':>13} {new + ' cpu µs':>16} {'cpu ratio':>9}"
                     f" {'gen cpu µs j/t':>15} {'cpu ceiling':>11}")
            if floor is not None:
                head += f" {floor + ' cpu µs':>14}"
        print(head)
        ratios = []
        for row, sides in self.rows.items():
            if base not in sides or new not in sides:
                continue
            b, n = self.median(sides[base], "tps"), self.median(sides[new], "tps")
            line = f"{row:28} {b:12,.0f} {n:12,.0f} {n / b if b else float('nan'):7.2f}"
            if floor is not None:
                # the fastest server of the same shape against the same client: the
                # ratio no server could pass with this client on this machine
                f = self.median(sides.get(floor, []), "tps")
                line += f" {f:12,.0f} {f / b if b else float('nan'):8.2f} {n / f if f else float('nan'):14.2f}"
                if f < n:  # then it is no floor of this shape: the framework does better
                    line += " (not a floor here: below trocket)"
            if compare is not None:
                c = self.median(sides.get(compare, []), "tps")
                line += f" {c:12,.0f} {n / c if c else float('nan'):13.3f}"
            cpu_ratio = None
            if cpu:
                bc, nc = self.median(sides[base], "cpu_us"), self.median(sides[new], "cpu_us")
                cpu_ratio = nc / bc if bc else float("nan")
                bg, ng = self.median(sides[base], "gen_cpu_us"), self.median(sides[new], "gen_cpu_us")
                # CPU-bound (the generator and the broker share the cores), the TPS ratio
                # could be at most (gen + broker on the base side) / (gen on the new side):
                # the new broker costing nothing
                line += f" {bc:13.1f} {nc:16.1f} {cpu_ratio:9.2f} {bg:7.1f}/{ng:<7.1f} {(bg + bc) / ng:11.2f}"
                if floor is not None:
                    line += f" {self.median(sides.get(floor, []), 'cpu_us'):14.1f}"
            print(line, flush=True)
            ratios.append((row, n / b if b else float("nan"), cpu_ratio))
        return ratios


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", action="append", choices=PARTS, help="what to measure (repeatable; default all)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10.0, help="timed seconds of each produce/echo window")
    ap.add_argument("--threads", default="1,4,16", help="producer threads (produce part)")
    ap.add_argument("--senders", default="4,16", help="senders of the client part")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds of untimed produce to each broker first")
    ap.add_argument("--consume-count", type=int, default=200_000)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, stores)")
    ap.add_argument("--compare", metavar="DIR",
                    help="echo: also another tree's echo server (DIR holds it as the trocket package)")
    args = ap.parse_args(argv)
    parts = args.part or list(PARTS)
    bundle, why = find_bundle()
    if bundle is None:
        print(f"vs_java: {why}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="trocket-vs-java-"))
    print(f"trocket vs Apache RocketMQ {bundle.version} ({bundle.home}); {args.rounds} round(s), "
          f"{args.seconds:g} s windows, {BODY_SIZE}-byte bodies; work dir {work}", flush=True)
    threads = [int(t) for t in args.threads.split(",")]
    senders = [int(s) for s in args.senders.split(",")]
    summary: list[str] = []
    sides: list[Side] = []
    try:
        if {"produce", "consume", "client"} & set(parts):
            java = JavaSide(work, bundle)
            troc = TrocketSide(work)
            sides += [java, troc]
            java.start()
            troc.start()
            brokers = [java, troc]
            for side in brokers:  # JIT, page cache, first segments: not in any timed window
                produce_once(bundle, side, "VsJava_warmup", 4, args.warmup, work)
        if "produce" in parts:
            table = Table()
            floor = FloorSide(work)
            sides.append(floor)
            floor.start()
            produce_once(bundle, floor, "VsJava_warmup", 4, max(1.0, args.warmup / 4), work)
            shorts = {(side.name, t): produce_once(bundle, side, f"VsJava_p{t}_short", t, 0, work)
                      for side in brokers for t in threads}  # the 1 s warm-up only: the generator's start
            for r in range(args.rounds):
                for t in threads:
                    order = brokers + [floor]
                    for side in order if r % 2 == 0 else order[::-1]:
                        fig = produce_once(bundle, side, f"VsJava_p{t}_r{r}", t, args.seconds, work)
                        if side is not floor:
                            fig = with_generator_cost(fig, shorts[side.name, t])
                        table.add(f"produce {t:2d} threads", side.name, fig)
            for row, ratio, cpu in table.print("produce (run-producer.sh; broker CPU per stored message)",
                                               "java", "trocket", cpu=True, floor="floor"):
                summary.append(f"{row}: {ratio:.2f}x TPS, {cpu:.2f}x CPU/msg")
        if "consume" in parts:
            table = Table()
            topic = "VsJava_consume"
            shorts = {}
            for side in brokers:
                fill(bundle, side, topic, args.consume_count, work)
                shorts[side.name] = consume_once(bundle, side, topic, f"VsJavaCG_{side.name}_short", 1, work)
            for r in range(args.rounds):
                for side in brokers if r % 2 == 0 else brokers[::-1]:
                    fig = consume_once(bundle, side, topic, f"VsJavaCG_{side.name}_{r}", args.consume_count, work)
                    table.add(f"consume {args.consume_count:,}", side.name, with_generator_cost(fig, shorts[side.name]))
            for row, ratio, cpu in table.print("consume (run-consumer.sh, push consumer from offset 0)",
                                               "java", "trocket", cpu=True):
                summary.append(f"{row}: {ratio:.2f}x TPS, {cpu:.2f}x CPU/msg")
        if "client" in parts:
            table = Table()
            java = brokers[0]
            for r in range(args.rounds):
                for n in senders:
                    order = ("java", "trocket") if r % 2 == 0 else ("trocket", "java")
                    for who in order:
                        topic = f"VsJava_c{n}_{who}_r{r}"
                        if who == "java":
                            fig = produce_once(bundle, java, topic, n, args.seconds, work)
                        else:
                            produce_once(bundle, java, topic, 1, 1, work)  # the topic exists before the window
                            fig = trocket_producer_once(java.namesrv, java.pid, n, args.seconds)
                        table.add(f"producer x{n} -> Java broker", who, fig)
            for row, ratio, _ in table.print("client: trocket Producer vs Java Producer, both to the Java broker",
                                             "java", "trocket", cpu=False):
                summary.append(f"{row}: {ratio:.2f}x TPS")
        if "echo" in parts:
            table = Table()
            echo, addrs = echo_servers(bundle, work, args.compare)
            sides.append(echo)
            for who, addr in addrs.items():  # untimed: the servers' JIT
                for ser in SERIALIZATIONS if not who.startswith("java") else [who.split()[1]]:
                    echo_once(bundle, addr, "async", ser, max(1.0, args.warmup / 4), work)
            for r in range(args.rounds):
                for ser in SERIALIZATIONS:
                    for mode in ECHO_MODES:
                        order = [f"java {ser}", "trocket", "floor"] + (["base"] if args.compare else [])
                        for who in order if r % 2 == 0 else order[::-1]:
                            fig = echo_once(bundle, addrs[who], mode, ser, args.seconds, work)
                            table.add(f"echo {mode:6} {ser}", who.split()[0], fig)
            for row, ratio, _ in table.print("echo (run-echo-client.sh: NettyRemotingClient)", "java", "trocket",
                                             cpu=False, floor="floor", compare="base" if args.compare else None):
                summary.append(f"{row}: {ratio:.2f}x")
    finally:
        for side in sides:
            side.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\ntrocket / Java (medians over rounds):")
    for line in summary:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
