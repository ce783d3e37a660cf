"""``trocket consume`` as a subprocess against an in-process broker: 2,000 messages sent,
then consumed with --count (text lines and --quiet), offsets committed (a second run
gets only what came after)."""

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
        await send(ns, "CliT", 2000)
        with trio.fail_after(60):
            done = await run_cli("consume", "--namesrv", ns, "--topic", "CliT", "--group", "CliG",
                                 "--count", "1500", "--from", "first", "--json")
        assert done.returncode == 0, done.stderr.decode()
        lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
        assert len(lines) == 1500
        assert {(d["tags"], d["keys"] == "k" + d["body"].split("-")[1]) for d in lines} == {("T", True)}
        with trio.fail_after(60):
            rest = await run_cli("consume", "--namesrv", ns, "--topic", "CliT", "--group", "CliG",
                                 "--count", "500", "--quiet")
        assert rest.returncode == 0, rest.stderr.decode()
        assert "consumed 500 messages" in rest.stdout.decode()
        # together: each of the 2,000 exactly once; the text form has the same fields
        first = {d["body"] for d in lines}
        assert len(first) == 1500
        await send(ns, "CliT", 3, start=2000)
        with trio.fail_after(60):
            text = await run_cli("consume", "--namesrv", ns, "--topic", "CliT", "--group", "CliG", "--count", "3")
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
            assert await proc.wait() == 0
        await send(ns, "SigT", 2, start=10)
        with trio.fail_after(60):
            more = await run_cli("consume", "--namesrv", ns, "--topic", "SigT", "--group", "SigG", "--count", "2")
        assert sorted(line.split("body=")[1] for line in more.stdout.decode().splitlines()) == ["'msg-10'", "'msg-11'"]
