"""Push-consumer throughput: a one-message listener beside a batch listener (issue 25).

    .venv/bin/python benchmarks/client_consume.py                  # 40,000 messages, 3 rounds
    .venv/bin/python benchmarks/client_consume.py --messages 20000 --rounds 5
    .venv/bin/python benchmarks/client_consume.py --profile        # + Python calls per message

What runs: a real broker in this process (``BrokerController``, embedded name server,
fresh temporary store), one topic of 4 queues filled with ``--messages`` 100-byte
messages before any consumer starts; then, per round, each listener kind in turn drains
the whole topic from the first offset with a :class:`~trocket.client.PushConsumer` of a
new group (async callbacks that count and return): ``one`` is ``listener(msg)``,
``batch N`` is ``listener(msgs, context)`` with ``consume_batch_max_size=N``. The time is
from the consumer's start to the last message in a callback. Broker and consumer share
this process and its trio loop, so the figure is the client's and the broker's pull path
together; best of the rounds per kind. ``--profile`` runs one more drain per kind under
cProfile and prints the Python function calls per consumed message: a count that load
on a shared machine does not move, for before/after comparisons of the consume path:
run it with ``PYTHONPATH`` set to another tree laid out as the ``trocket`` package (and
``TROCKET_PURE=1`` on both sides when the trees' accelerators differ).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time

import trio

TOPIC = "BenchConsume"


async def _drain(ns: str, group: str, total: int, batch: int, profile: cProfile.Profile | None) -> float:
    from trocket.client import PushConsumer

    count = 0
    done = trio.Event()

    async def one(msg):
        nonlocal count
        count += 1
        if count == total:
            done.set()

    async def many(msgs, context):
        nonlocal count
        count += len(msgs)
        if count >= total:
            done.set()

    listener = one if batch == 1 else many
    # one message: no batch option, so a tree from before batches runs it too (before/after)
    extra = {} if batch == 1 else {"consume_batch_max_size": batch}
    t0 = time.perf_counter()
    async with PushConsumer(group, ns, {TOPIC: "*"}, listener, consume_from="first", **extra):
        if profile is not None:
            profile.enable()
        await done.wait()
        took = time.perf_counter() - t0
        if profile is not None:
            profile.disable()
    return took


async def main(args: argparse.Namespace) -> None:
    from trocket.broker.config import BrokerConfig
    from trocket.broker.controller import BrokerController
    from trocket.client import Producer, new_message

    kinds = [1] + [b for b in args.batch if b > 1]
    with tempfile.TemporaryDirectory(prefix="trocket-consume-") as tmp:
        cfg = BrokerConfig(listen=("127.0.0.1", 0), namesrv_listen=("127.0.0.1", 0),
                           store_dir=os.path.join(tmp, "store"), commit_log_segment_size=256 << 20)
        async with BrokerController(cfg) as broker:
            ns = ";".join(broker.namesrv_addrs)
            async with Producer("BenchConsumeP", ns) as producer:
                for _ in range(0, args.messages, 100):
                    await producer.send_batch([new_message(TOPIC, b"x" * 100) for _ in range(100)])
            best: dict[int, float] = {}
            serial = 0
            for r in range(args.rounds):
                for batch in kinds:
                    serial += 1
                    took = await _drain(ns, f"BenchConsumeG{serial}", args.messages, batch, None)
                    best[batch] = min(best.get(batch, took), took)
                    print(f"round {r + 1} {_name(batch):>9}: {args.messages} msgs in {took:.2f} s "
                          f"({args.messages / took:,.0f} msg/s)", flush=True)
            for batch in kinds:
                print(f"best {_name(batch):>9}: {args.messages / best[batch]:,.0f} msg/s")
            if args.profile:
                for batch in kinds:
                    serial += 1
                    prof = cProfile.Profile()
                    await _drain(ns, f"BenchConsumeG{serial}", args.messages, batch, prof)
                    calls = pstats.Stats(prof).total_calls / args.messages
                    print(f"profile {_name(batch):>9}: {calls:.1f} Python calls per consumed message "
                          "(consumer and broker)")


def _name(batch: int) -> str:
    return "one" if batch == 1 else f"batch {batch}"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=40_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, nargs="*", default=[32], help="batch sizes besides one message")
    p.add_argument("--profile", action="store_true")
    trio.run(main, p.parse_args())
