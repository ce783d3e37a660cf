"""``trocket consume`` as a subprocess against an in-process broker: 2,000 messages sent
with ``trocket send``, then consumed with --count (JSON lines, then --quiet), offsets
committed (a later run gets only what came after); Ctrl-C stops it, offsets committed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import trio

from trocket.client.message import new_message
from trocket.client.producer import Producer

from .conftest import running_broker

TROCKET = [str(Path(sys.executable).with_name("trocket"))]


async def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return await trio.run_process(
        [*TROCKET, *args], capture_stdout=True, capture_stderr=True, check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def send(ns: str, topic: str, n: int, start: int = 0) -> None:
    async with Producer("CLIPG", ns) as producer:
        for i in range(start, start + n):
            await producer.send_async(new_message(topic, f"msg-{i}".encode(), tags="T", keys=f"k{i}"))


async def test_cli_consume_counts_prints_and_commits(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        with trio.fail_after(60):
            sent = await run_cli("send", "--namesrv", ns, "--topic", "CliT", "--count", "2000", "--tag", "T",
                                 "--keys", "K", "--body", "msg-x", "--mode", "async")
        assert sent.returncode == 0, sent.stderr.decode()
        with trio.fail_after(60):
            done = await run_cli("consume", "--namesrv", ns, "--topic", "CliT", "--group", "CliG",
                                 "--count", "1500", "--from", "first", "--json")
        assert done.returncode == 0, done.stderr.decode()
        lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
        assert len(lines) == 1500
        assert {(d["tags"], d["keys"], d["body"]) for d in lines} == {("T", "K", "msg-x")}
        assert len({d["msgId"] for d in lines}) == len({(d["queue"], d["offset"]) for d in lines}) == 1500
        with trio.fail_after(60):
            rest = await run_cli("consume", "--namesrv", ns, "--topic", "CliT", "--group", "CliG",
                                 "--count", "500", "--quiet")
        assert rest.returncode == 0, rest.stderr.decode()
        assert "consumed 500 messages" in rest.stdout.decode()
        # 1,500 + 500: all 2,000 consumed and committed: the next run sees only new messages
        await send(ns, "CliT", 3, start=2000)
        with trio.fail_after(60):
            # the short options send and admin take too; callbacks past --count are cancelled quietly
            text = await run_cli("consume", "-n", ns, "-t", "CliT", "-g", "CliG", "--count", "3")
        assert "callbacks still running" not in text.stderr.decode()
        out = text.stdout.decode().splitlines()
        assert sorted(line.split("body=")[1] for line in out) == ["'msg-2000'", "'msg-2001'", "'msg-2002'"]
        assert all(" tags=T keys=k200" in line for line in out)


async def test_cli_consume_stops_on_sigint_with_offsets_committed(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await send(ns, "SigT", 10)
        proc = await trio.lowlevel.open_process(
            [*TROCKET, "consume", "--namesrv", ns, "--topic", "SigT", "--group", "SigG", "--from", "first"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        got = b""
        with trio.fail_after(30):
            while got.count(b"\n") < 10:
                got += await proc.stdout.receive_some()
            proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 130  # the one Ctrl-C rule, after the offsets are committed
        await send(ns, "SigT", 2, start=10)
        with trio.fail_after(60):
            more = await run_cli("consume", "--namesrv", ns, "--topic", "SigT", "--group", "SigG", "--count", "2")
        assert sorted(line.split("body=")[1] for line in more.stdout.decode().splitlines()) == ["'msg-10'", "'msg-11'"]


async def test_cli_consume_bad_input_is_one_error_line(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        with trio.fail_after(30):
            unknown = await run_cli("consume", "--namesrv", ns, "--topic", "NoSuchTopic", "--group", "G", "--count", "1")
            dead = await run_cli("consume", "--namesrv", "127.0.0.1:1", "--topic", "T", "--group", "G")
            bad_group = await run_cli("consume", "--namesrv", ns, "--topic", "T", "--group", "bad group!")
            bad_count = await run_cli("consume", "--namesrv", ns, "--topic", "T", "--group", "G", "--count", "0")
    for r, words in ((unknown, "topic NoSuchTopic does not exist"), (dead, "127.0.0.1:1"), (bad_group, "bad group!")):
        err = r.stderr.decode()
        assert r.returncode == 1 and err.startswith("trocket: error:") and words in err, err
        assert len(err.strip().splitlines()) == 1, err
    # a bad option value is a usage error: the subcommand's usage, the option by its name, exit 2
    err = bad_count.stderr.decode()
    assert bad_count.returncode == 2 and err.startswith("usage: trocket consume "), err
    assert err.strip().endswith("trocket consume: error: argument --count: 0 is not a positive integer (1 or more)")
