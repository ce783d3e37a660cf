"""Trio task steps and wake-ups per produced message in ``trocket broker``.

    .venv/bin/python benchmarks/task_steps.py --generator cpp --senders 4 --seconds 3
    .venv/bin/python benchmarks/task_steps.py --generator python --senders 4 --messages 3000
    .venv/bin/python benchmarks/task_steps.py --broker-pythonpath /tmp/base/pkg   # another tree

Runs the broker (ASYNC_FLUSH, a fresh temporary store, 32 MiB segments) in a child
process under a trio ``Instrument`` that counts task steps per task name and the run
loop's I/O waits (wake-ups), between two SIGUSR1 the parent sends around the timed
window; the load is synchronous SEND_MESSAGE(_V2) sends of 128-byte bodies from
``--senders`` senders on one connection: trio tasks of this process (``python``,
JSON headers) or one real C++ producer's threads (``cpp``; ``--cpp-driver`` as in
``broker_produce.py``: native threads by default).
Prints the steps and waits per message, the broker's CPU per message in the window and
the tasks that ran, most steps first. The ideal is one step (the connection's reader)
per read: every other task woken per read or per message costs a scheduling round.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import trio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class StepCounter(trio.abc.Instrument):
    """Task steps per task name and I/O waits, counted while ``active``."""

    def __init__(self) -> None:
        self.steps: collections.Counter[str] = collections.Counter()
        self.waits = 0
        self.active = False

    def before_task_step(self, task) -> None:
        if self.active:
            self.steps[task.name] += 1

    def after_io_wait(self, timeout: float) -> None:
        if self.active:
            self.waits += 1


def broker_child(argv: list[str]) -> None:
    """The broker with the counter; SIGUSR1 starts the window, the next one prints it."""
    try:
        from trocket.cli_broker import _setup_logging, add_broker_arguments, config_from_args, run_broker
    except ImportError:  # a --broker-pythonpath tree from before the broker's CLI left broker/main.py
        from trocket.broker.main import _setup_logging, add_broker_arguments, config_from_args, run_broker  # type: ignore[no-redef]

    parser = argparse.ArgumentParser()
    add_broker_arguments(parser)
    args = parser.parse_args(argv)
    _setup_logging("INFO")
    counter = StepCounter()
    controller: list = [None]
    start = {"messages": 0, "cpu": 0.0}

    def on_usr1(signum, frame) -> None:
        messages = controller[0].send_processor.put_messages
        if not counter.active:
            counter.steps.clear()
            counter.waits = 0
            counter.active = True
            start.update(messages=messages, cpu=time.process_time())
            return
        counter.active = False
        n = max(1, messages - start["messages"])
        cpu = time.process_time() - start["cpu"]
        total = sum(counter.steps.values())
        print(f"STEPS messages={messages - start['messages']} steps/msg={total / n:.3f} "
              f"waits/msg={counter.waits / n:.3f} cpu={1e6 * cpu / n:.1f} us/msg", flush=True)
        for name, k in counter.steps.most_common(12):
            print(f"STEPS   {k / n:8.3f}  {name}", flush=True)

    async def main() -> None:
        signal.signal(signal.SIGUSR1, on_usr1)
        async with trio.open_nursery() as nursery:
            controller[0] = await nursery.start(functools.partial(run_broker, config_from_args(args)))

    trio.run(main, instruments=[counter])


def run(args: argparse.Namespace) -> None:
    import broker_produce as bp
    from trocket.remoting import ClientConfig, RemotingClient

    bp.CPP_DRIVER = args.cpp_driver

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)
    if args.broker_pythonpath:
        env["PYTHONPATH"] = args.broker_pythonpath
    namesrv = f"127.0.0.1:{bp.free_port()}"
    with tempfile.TemporaryDirectory(prefix="trocket-steps-") as tmp:
        log_path = os.path.join(tmp, "broker.log")
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--broker-child", "--store", os.path.join(tmp, "store"),
                 "--listen", "127.0.0.1:0", "--namesrv-listen", namesrv, "--flush", "async", "--segment-size", "32m"],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tempfile.gettempdir(),
            )
        try:
            addr = bp.wait_for_boot(proc, log_path)

            async def python_load() -> None:
                client = RemotingClient(ClientConfig(default_timeout=60))
                async with trio.open_nursery() as nursery:
                    await nursery.start(client.run)

                    def burst(count: int):
                        return bp.send_burst(client, addr, args.senders, count)

                    await burst(300)  # creates the topic; warms up
                    if args.generator == "python":
                        proc.send_signal(signal.SIGUSR1)
                        await burst(args.messages)
                        proc.send_signal(signal.SIGUSR1)
                    await client.aclose()
                    nursery.cancel_scope.cancel()

            trio.run(python_load)
            if args.generator == "cpp":
                child = subprocess.Popen(
                    bp.cpp_argv(namesrv, args.senders, 1, args.seconds),
                    stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir(),
                )
                assert child.stdout is not None
                for line in child.stdout:
                    if line.startswith(("start", "end")):
                        proc.send_signal(signal.SIGUSR1)
                    elif line.startswith("{"):
                        res = json.loads(line)
                        print(f"cpp senders={args.senders}  TPS={res['count'] / res['seconds']:.0f}", flush=True)
                child.wait(30)
            time.sleep(0.3)  # the broker prints the window
        finally:
            bp.stop_broker(proc)
        with open(log_path) as f:
            for line in f:
                if line.startswith("STEPS"):
                    print(line[6:], end="")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--broker-child":
        broker_child(sys.argv[2:])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generator", choices=("python", "cpp"), default="cpp")
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--messages", type=int, default=3000, help="python: sends in the window")
    parser.add_argument("--seconds", type=float, default=3.0, help="cpp: the timed window")
    parser.add_argument("--broker-pythonpath", default="", help="the broker child's PYTHONPATH (another tree)")
    import broker_produce

    broker_produce.add_cpp_driver_option(parser)
    run(parser.parse_args())
