"""The broker's send path alone, in instructions per send: steady enough to see 1%.

    .venv/bin/python benchmarks/send_path.py                      # this tree
    .venv/bin/python benchmarks/send_path.py --compare /tmp/base/pkg   # and another, side by side
    .venv/bin/python benchmarks/send_path.py --serialize json          # JSON headers (the Java producer's)

What runs: a real broker (``BrokerController``, ASYNC_FLUSH, a fresh temporary store) in
this process, and a connection of its server over a socket pair whose reader does not
run; the script hands it SEND_MESSAGE_V2 requests (ROCKETMQ headers, or JSON ones with
``--serialize json``, what the Java producer sends; 128-byte bodies, one topic and
queue), each decoded from its frame and handed to the endpoint's dispatch,
synchronously, as the connection's reader would, and drains the answers from the other
end of the pair. So it
counts the whole send path of one request on the reader -- frame decode, dispatch, the
send processor, the store's put, the answer's encode and write -- and nothing that
depends on timing: no scheduling between sends, no batching that varies with load
(``instructions.py --part broker`` measures the broker under a real client instead,
where how many requests a read brings varies with the machine's load).

Under valgrind's callgrind the script runs twice, with ``--warm`` and ``--warm +
--sends`` sends; the difference of the two totals divided by ``--sends`` is the
instructions per send (start-up cancels out). ``--compare DIR`` measures a second tree
(a folder holding it as the ``trocket`` package, put first on ``PYTHONPATH``) the same
way, alternating, and prints the ratio. ``--acl`` (issue 24) measures this tree a second
time with ACL on (``aclEnable``, an account allowed to publish the topic) and the request
signed as Java's ``AclClientRPCHook`` signs it, and prints ACL's share. Needs valgrind.

    .venv/bin/python benchmarks/send_path.py --acl --compare /tmp/base/pkg
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from functools import partial

import trio


ACL_KEY, ACL_SECRET = "sendPathProducer", "send-path-secret"


def _request_payload(acl: bool = False, json: bool = False) -> bytes:
    from trocket.codecs.command import RemotingCommand, SerializeType
    from trocket.codecs.serialize import encode_command

    ext = {
        "a": "PG", "b": "SendPath", "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": "1700000000000", "h": "0", "i": "TAGS\x01t\x02WAIT\x01true\x02", "j": "0", "k": "false", "m": "false",
    }
    serialize_type = SerializeType.JSON if json else SerializeType.ROCKETMQ
    cmd = RemotingCommand(code=310, ext_fields=ext, body=b"x" * 128, serialize_type=serialize_type)
    if acl:
        from trocket.codecs.acl import sign_request

        sign_request(cmd, ACL_KEY, ACL_SECRET)
    return encode_command(cmd)[4:]


@contextlib.asynccontextmanager
async def endpoint(
    config: Callable[[str], dict[str, object]] | None = None,
) -> AsyncIterator[tuple[object, Callable[[object], object], Callable[[], None]]]:
    """A broker in this process (``BrokerController``, ASYNC_FLUSH, a fresh temporary
    store; ``config(tmp)``: extra ``BrokerConfig`` fields, given the temporary folder)
    and a connection of its server over a socket pair whose reader does not run: yields
    the controller, ``dispatch(request)`` (a decoded request handed to the endpoint as
    the connection's reader would) and ``drain()`` (reads the answers waiting at the
    other end of the pair). ``transactions.py --instructions`` uses it too."""
    from trocket.broker.config import BrokerConfig
    from trocket.broker.controller import BrokerController
    from trocket.remoting import Connection

    with tempfile.TemporaryDirectory(prefix="trocket-send-path-") as tmp:
        cfg = BrokerConfig(
            listen=("127.0.0.1", 0), namesrv_listen=("127.0.0.1", 0), store_dir=os.path.join(tmp, "store"),
            commit_log_segment_size=64 << 20, **(config(tmp) if config else {}),
        )
        controller = BrokerController(cfg)
        async with trio.open_nursery() as nursery:
            await nursery.start(controller.run)
            server = controller.server
            ours, peer = socket.socketpair()
            ours.setblocking(False)
            peer.setblocking(False)
            conn = Connection(server, trio.SocketStream(trio.socket.from_stdlib_socket(ours)), remote_address="127.0.0.1:50000")
            handle = getattr(server, "dispatch", None) or server._dispatch_soon  # (older trees)

            def drain() -> None:
                try:
                    while peer.recv(1 << 20):
                        pass
                except BlockingIOError:
                    pass

            yield controller, partial(handle, conn), drain
            nursery.cancel_scope.cancel()


def _acl_config(tmp: str) -> dict[str, object]:
    path = os.path.join(tmp, "plain_acl.yml")
    with open(path, "w") as f:
        f.write(f"accounts:\n  - accessKey: {ACL_KEY}\n    secretKey: {ACL_SECRET}\n"
                "    topicPerms: [SendPath=PUB]\n")
    return {"acl_enable": True, "acl_file": path}


async def _run(n: int, acl: bool = False, json: bool = False) -> None:
    from trocket.codecs.serialize import decode_command

    async with endpoint(_acl_config if acl else None) as (controller, dispatch, drain):
        controller.topics.create_in_send("SendPath", "TBW102", 4, 0)
        payload = _request_payload(acl, json)
        for i in range(n):
            if dispatch(decode_command(payload)) is not None:
                raise RuntimeError("the send did not complete on the reader")
            if i & 31 == 31:
                drain()
        stored = controller.store.get_max_offset("SendPath", 0)
        if stored != n:
            raise RuntimeError(f"{stored} of {n} sends stored")


def _callgrind_total(pythonpath: str, n: int, acl: bool = False, json: bool = False) -> int:
    with tempfile.TemporaryDirectory(prefix="trocket-send-path-cg-") as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__, "--child", str(n),
             *(["--child-acl"] if acl else []), *(["--serialize", "json"] if json else [])],
            env=_env(pythonpath), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        with open(out) as f:
            for line in f:
                if line.startswith(("totals:", "summary:")):
                    return int(line.split()[1])
    raise RuntimeError("callgrind wrote no total")


def _env(pythonpath: str) -> dict[str, str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    return env


def per_send(pythonpath: str, warm: int, sends: int, acl: bool = False, json: bool = False) -> float:
    # one run first, outside valgrind: it compiles what changed since the last run, so
    # neither measured run pays for writing bytecode caches (that would not cancel out)
    extra = [*(["--child-acl"] if acl else []), *(["--serialize", "json"] if json else [])]
    subprocess.run([sys.executable, __file__, "--child", "1", *extra], env=_env(pythonpath), check=True, stdout=subprocess.DEVNULL)
    return (_callgrind_total(pythonpath, warm + sends, acl, json) - _callgrind_total(pythonpath, warm, acl, json)) / sends


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=4000, help="measured sends (default 4000)")
    parser.add_argument("--warm", type=int, default=500, help="sends of the shorter run (default 500)")
    parser.add_argument("--rounds", type=int, default=1, help="measurements of each tree (default 1)")
    parser.add_argument("--compare", metavar="DIR", default="", help="another tree, as a folder holding `trocket`")
    parser.add_argument("--acl", action="store_true", help="also this tree with ACL on and signed sends")
    parser.add_argument("--serialize", choices=("rocketmq", "json"), default="rocketmq",
                        help="the requests' header serialization (json: what the Java producer sends; default rocketmq)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-acl", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        trio.run(_run, args.child, args.child_acl, args.serialize == "json")
        return
    trees = [("this tree", "", False)] + ([(f"compared ({args.compare})", args.compare, False)] if args.compare else [])
    if args.acl:
        trees.append(("this tree, ACL on", "", True))
    figures: dict[str, list[float]] = {name: [] for name, _, _ in trees}
    for _ in range(args.rounds):
        for name, path, acl in trees:
            figures[name].append(per_send(path, args.warm, args.sends, acl, args.serialize == "json"))
            print(f"{name:40s} {figures[name][-1]:10,.0f} instructions/send", flush=True)
    low = {name: min(values) for name, values in figures.items()}
    if args.compare:
        print(f"this tree / compared = {low['this tree'] / low[trees[1][0]]:.3f} (lowest of {args.rounds} round(s) each)")
    if args.acl:
        print(f"ACL on / off = {low['this tree, ACL on'] / low['this tree']:.3f} (lowest of {args.rounds} round(s) each)")


if __name__ == "__main__":
    main()
