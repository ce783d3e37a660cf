"""``trocket cluster up`` / ``status`` as a user runs them: two name servers and two broker
groups of a master and a slave, each a process; a producer spreads over both groups, a
consumer group reads everything, one master killed (-9) and its slave serves the reads;
Ctrl-C stops every process cleanly and exits 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

TROCKET = str(Path(sys.executable).with_name("trocket"))


async def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    with trio.fail_after(120):
        return await trio.run_process([TROCKET, *args], capture_stdout=True, capture_stderr=True, check=False,
                                      env=env)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
async def test_cluster_up_spread_read_failover_and_stop(tmp_path):
    store = tmp_path / "cluster"
    up = await trio.lowlevel.open_process(
        [TROCKET, "cluster", "up", "--namesrvs", "2", "--brokers", "2", "--slaves", "1", "--store", str(store),
         "--segment-size", "4m"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = b""
    pids: dict[str, int] = {}
    try:
        with trio.fail_after(180):
            while b"\nexport NAMESRV_ADDR=" not in out:
                chunk = await up.stdout.receive_some()
                assert chunk, out.decode()
                out += chunk
        lines = out.decode().splitlines()
        for line in lines[2:]:
            if not line.strip():
                break
            name, role, addr, pid, log = line.split()
            pids[name] = int(pid)
            assert Path(log).parent == store / "logs"
        assert sorted(pids) == ["broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1", "namesrv-1", "namesrv-2"]
        namesrv = next(line for line in lines if line.startswith("NAMESRV_ADDR=")).partition("=")[2]
        assert len(namesrv.split(";")) == 2
        env = {**os.environ, "NAMESRV_ADDR": namesrv}

        bodies = tmp_path / "bodies.txt"
        bodies.write_text("".join(f"m{i}\n" for i in range(200)))
        sent = await cli(env, "send", "-t", "CT", "--file", str(bodies), "--json")
        assert sent.returncode == 0 and json.loads(sent.stdout)["sent"] == 200, sent.stderr.decode()
        status = await cli(env, "cluster", "status", "--json")
        assert status.returncode == 0, status.stderr.decode()
        rows = {(r["broker"], r["id"]): r for r in json.loads(status.stdout)}
        assert sorted(rows) == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
        assert rows["broker-a", 0]["role"] == "ASYNC_MASTER" and rows["broker-a", 1]["role"] == "SLAVE"
        assert rows["broker-a", 0]["maxOffset"] > 0 and rows["broker-b", 0]["maxOffset"] > 0  # both groups got some
        text = await cli(env, "cluster", "status")
        assert "broker-a  1" in text.stdout.decode() and "connected, behind by" in text.stdout.decode()

        got = await cli(env, "consume", "-t", "CT", "-g", "CG", "--count", "200", "--from", "first", "--json")
        assert got.returncode == 0, got.stderr.decode()
        assert sorted(json.loads(line)["body"] for line in got.stdout.decode().splitlines()) == sorted(
            f"m{i}" for i in range(200))

        # the slaves have everything, then broker-a's master dies: its slave serves the reads
        async def caught_up() -> bool:
            rows = json.loads((await cli(env, "cluster", "status", "--json")).stdout)
            return all(r["behindMaster"] == 0 for r in rows if r["id"] != 0)

        with trio.fail_after(60):
            while not await caught_up():
                await trio.sleep(0.5)
        os.kill(pids["broker-a-0"], signal.SIGKILL)
        got = await cli(env, "consume", "-t", "CT", "-g", "CG2", "--count", "200", "--from", "first", "--json")
        assert got.returncode == 0, got.stderr.decode()
        assert sorted(json.loads(line)["body"] for line in got.stdout.decode().splitlines()) == sorted(
            f"m{i}" for i in range(200))

        err = b""
        with trio.fail_after(10):  # the supervisor looks at its members twice a second
            while b"exited with -9" not in err:
                err += await up.stderr.receive_some()
        up.send_signal(signal.SIGINT)
        with trio.fail_after(90):
            while chunk := await up.stderr.receive_some():
                err += chunk
            code = await up.wait()
    finally:
        if up.returncode is None:
            up.kill()
        for pid in pids.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    text = err.decode()
    assert code == 130, text
    assert "broker-a-0" in text and "exited with -9" in text, text
    assert "trocket cluster: stopped (" in text and "Traceback" not in text, text
    for name in ("namesrv-1", "namesrv-2", "broker-a-1", "broker-b-0", "broker-b-1"):
        assert f"{name} 130" in text, text  # each stopped cleanly by SIGINT
    assert not any(alive(pid) for pid in pids.values())
