"""The broker's pull path alone, in instructions per pull and per pulled message.

    .venv/bin/python benchmarks/pull_path.py                          # this tree
    .venv/bin/python benchmarks/pull_path.py --compare /tmp/base/pkg  # and another, side by side
    .venv/bin/python benchmarks/pull_path.py --post-subscription      # sysFlag 7, subscription "*" in each pull

What runs: a real broker (``BrokerController``, ASYNC_FLUSH, a fresh temporary store) in
this process, and a connection of its server over a socket pair whose reader does not
run (``send_path.py``'s ``endpoint``). The script fills one queue first (``--fill``
messages put into the store, 128-byte bodies with the Java producer's properties:
``TAGS``, ``UNIQ_KEY``, ``WAIT``), registers a push consumer's heartbeat (group
``PullPathCG``, subscription ``*``), then hands the endpoint's dispatch PULL_MESSAGE
requests as the Java push consumer frames them (JSON header; ``maxMsgNums`` 32;
``sysFlag`` 3, commit offset and suspend, the subscription the heartbeat registered,
what ``DefaultMQPushConsumer`` sends unless ``postSubscriptionWhenPull``; with
``--post-subscription`` 7 and ``subscription`` ``*``, as the golden frame), each pull
at the next offset (the queue read again from 0 when it is used up), each decoded
from its frame and dispatched synchronously as the connection's reader would, the
answers drained from the other end of the pair. So it counts a pull's whole path on
the reader -- frame decode, dispatch, the pull processor, the store's read, the
offset commit, the answer's encode and write -- and nothing that depends on timing.

Under valgrind's callgrind the script runs twice, with ``--warm`` and ``--warm +
--pulls`` pulls (the same fill in both); the difference of the two totals divided by
``--pulls`` is the instructions per pull, and divided by the messages a pull carries
(32) per pulled message. ``--compare DIR`` measures a second tree (a folder holding it
as the ``trocket`` package, put first on ``PYTHONPATH``) the same way and prints the
ratio. ``--keep DIR`` keeps the longer run's callgrind output (for
``callgrind_annotate``). Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import trio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instructions import callgrind_total  # noqa: E402
from send_path import endpoint  # noqa: E402

TOPIC, GROUP, CLIENT_ID = "PullPath", "PullPathCG", "127.0.0.1@pull-path"
BATCH = 32
SUB_VERSION = 1700000000000


def _pull_header(post_subscription: bool) -> bytes:
    """A PULL_MESSAGE's JSON header as the Java push consumer writes it (its ext fields
    in Java's HashMap order), with ``%d`` for the queue offset and the commit offset."""
    from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
    from trocket.codecs.java_hashmap import JavaHashMap
    from trocket.codecs.serialize import encode_command

    fields = [
        ("consumerGroup", GROUP), ("topic", TOPIC), ("queueId", "0"), ("queueOffset", "%d"),
        ("maxMsgNums", str(BATCH)), ("sysFlag", "7" if post_subscription else "3"), ("commitOffset", "%d"),
        ("suspendTimeoutMillis", "15000"), ("subVersion", str(SUB_VERSION)), ("expressionType", "TAG"),
        ("bname", "broker-a"),
    ]
    if post_subscription:
        fields.append(("subscription", "*"))
    cmd = RemotingCommand(
        code=11, language=LanguageCode.JAVA, version=395, opaque=0,
        ext_fields=dict(JavaHashMap(fields).items()), serialize_type=SerializeType.JSON,
    )
    return encode_command(cmd)[8:].replace(b"%", b"%%").replace(b"%%d", b"%d")


def _pull_payload(header: bytes, offset: int) -> bytes:
    """The frame payload (no length prefix) of a pull at ``offset``, committing it."""
    text = header % (offset, offset)
    return len(text).to_bytes(4, "big") + text


def _fill(store: object, n: int) -> None:
    from trocket.broker.store.messages import MessageInner
    from trocket.codecs.java_hashmap import JavaHashMap

    body = b"x" * 128
    for i in range(n):
        props = JavaHashMap((("TAGS", "TagA"), ("WAIT", "true"), ("UNIQ_KEY", "7F00000100002A9F%016X" % i)))
        store.put_message(MessageInner(  # type: ignore[attr-defined]
            topic=TOPIC, body=body, queue_id=0, properties_bytes=props.to_properties().encode(),
            born_timestamp=1700000000000, tags_code=None, properties={"TAGS": "TagA"},
        ))


def _heartbeat() -> bytes:
    from trocket.codecs.bodies.client import ConsumerData, HeartbeatData, SubscriptionData
    from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
    from trocket.codecs.serialize import encode_command

    data = HeartbeatData(CLIENT_ID, consumers=[ConsumerData(GROUP, subscriptions=[
        SubscriptionData(TOPIC, "*", sub_version=SUB_VERSION)])])
    cmd = RemotingCommand(code=34, language=LanguageCode.JAVA, version=395, opaque=0, body=data.encode(),
                          serialize_type=SerializeType.JSON)
    return encode_command(cmd)[4:]


async def _run(n: int, fill: int, post_subscription: bool) -> None:
    from trocket.codecs.serialize import decode_command

    async with endpoint() as (controller, dispatch, drain):
        controller.topics.create_in_send(TOPIC, "TBW102", 1, 0)
        # the group's retry topic made first: the heartbeat is then answered on the reader
        controller.topics.create_in_send_back(f"%RETRY%{GROUP}", 1, 6, 0)
        _fill(controller.store, fill)
        header = _pull_header(post_subscription)
        await dispatch(decode_command(_heartbeat()))  # (HEART_BEAT runs as a task)
        drain()
        offset = 0
        for i in range(n):
            if dispatch(decode_command(_pull_payload(header, offset))) is not None:
                raise RuntimeError("the pull did not complete on the reader")
            offset += BATCH
            if offset + BATCH > fill:
                offset = 0
            if i & 7 == 7:
                drain()
        drain()
        got = controller.offsets.query_offset(GROUP, TOPIC, 0)
        if n and got < 0:
            raise RuntimeError("no offset committed")
        if n and controller.pull_processor.found_messages != n * BATCH:
            raise RuntimeError(f"{controller.pull_processor.found_messages} of {n * BATCH} messages pulled")


def _env(pythonpath: str) -> dict[str, str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _child_args(n: int, args: argparse.Namespace) -> list[str]:
    return ["--child", str(n), "--fill", str(args.fill), *(["--post-subscription"] if args.post_subscription else [])]


def _callgrind(pythonpath: str, n: int, args: argparse.Namespace, keep: str = "") -> int:
    with tempfile.TemporaryDirectory(prefix="trocket-pull-path-cg-") as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
             *_child_args(n, args)],
            env=_env(pythonpath), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copy(out, os.path.join(keep, "callgrind.out"))
        return callgrind_total(out)


def per_pull(pythonpath: str, args: argparse.Namespace, keep: str = "") -> float:
    # one run first, outside valgrind: it compiles what changed since the last run, so
    # neither measured run pays for writing bytecode caches (that would not cancel out)
    subprocess.run([sys.executable, __file__, *_child_args(1, args)], env=_env(pythonpath), check=True,
                   stdout=subprocess.DEVNULL)
    long = _callgrind(pythonpath, args.warm + args.pulls, args, keep)
    return (long - _callgrind(pythonpath, args.warm, args)) / args.pulls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pulls", type=int, default=1000, help="measured pulls (default 1000)")
    parser.add_argument("--warm", type=int, default=100, help="pulls of the shorter run (default 100)")
    parser.add_argument("--fill", type=int, default=8192, help="messages stored first (default 8192)")
    parser.add_argument("--rounds", type=int, default=1, help="measurements of each tree (default 1)")
    parser.add_argument("--compare", metavar="DIR", default="", help="another tree, as a folder holding `trocket`")
    parser.add_argument("--post-subscription", action="store_true",
                        help="sysFlag 7 with subscription '*' in each pull (default: 3, the registered subscription)")
    parser.add_argument("--keep", metavar="DIR", default="", help="keep this tree's longer run's callgrind output")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        trio.run(_run, args.child, args.fill, args.post_subscription)
        return
    trees = [("this tree", "")] + ([(f"compared ({args.compare})", args.compare)] if args.compare else [])
    figures: dict[str, list[float]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, path in trees:
            figures[name].append(per_pull(path, args, args.keep if not path else ""))
            value = figures[name][-1]
            print(f"{name:40s} {value:10,.0f} instructions/pull {value / BATCH:8,.0f} /message", flush=True)
    if args.compare:
        low = {name: min(values) for name, values in figures.items()}
        print(f"this tree / compared = {low['this tree'] / low[trees[1][0]]:.3f} (lowest of {args.rounds} round(s) each)")


if __name__ == "__main__":
    main()
