"""The one Ctrl-C rule (trocket/interrupt.py), command by command, each a real
subprocess stopped by a real signal: at once, the summary so far, the progress line
ended, no traceback, exit status 130 for SIGINT and 143 for SIGTERM, nothing written
after the exit (stdout and stderr reach their end as the process ends). The servers'
and the examples' own tests check the same for them (tests/test_cli.py,
tests/remoting/test_example*.py, tests/conformance/test_proxy.py)."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trocket.client.message import new_message
from trocket.client.producer import Producer

from .broker.conftest import running_broker

TROCKET = str(Path(sys.executable).with_name("trocket"))
CAPTURES = Path(__file__).resolve().parents[1] / "conformance" / "captures"
SIGNALS = pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)


async def interrupted(argv: list[str], signum: int, *, when: bytes | None, delay: float = 0.0,
                      timeout: float = 60) -> tuple[int, str, str]:
    """Start ``trocket argv``; once ``when`` is in its stdout or stderr (None: at once),
    and ``delay`` seconds more, send ``signum``; return (exit status, stdout, stderr),
    read to their end, which must come within 5 s of the exit."""
    proc = await trio.lowlevel.open_process([TROCKET, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out, err = bytearray(), bytearray()
    seen = trio.Event()
    if when is None:
        seen.set()
    ended = [trio.Event(), trio.Event()]

    async def drain(stream, into: bytearray, end: trio.Event) -> None:
        while chunk := await stream.receive_some():
            into += chunk
            if when is not None and (when in out or when in err):
                seen.set()
        end.set()

    try:
        with trio.fail_after(timeout):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain, proc.stdout, out, ended[0])
                nursery.start_soon(drain, proc.stderr, err, ended[1])
                await seen.wait()
                await trio.sleep(delay)
                proc.send_signal(signum)
                code = await proc.wait()
                with trio.fail_after(5):  # nothing holds the pipes open after the exit (a JVM would)
                    for end in ended:
                        await end.wait()
        return code, out.decode(errors="replace"), err.decode(errors="replace")
    finally:
        if proc.returncode is None:
            proc.kill()


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "KeyboardInterrupt" not in text and "Exception" not in text, text


@SIGNALS
async def test_send_prints_its_summary_so_far(tmp_path, signum):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        code, out, err = await interrupted(
            ["send", "-n", ns, "-t", "IntT", "--body", "x", "--count", "10000000", "--json"], signum,
            when=None, delay=4)
    name = signal.Signals(signum).name
    assert code == 128 + signum, (out, err)
    no_traceback(err)
    summary = json.loads(out)
    assert summary["interrupted"] == name and summary["sent"] > 0 and summary["failed"] == 0, summary


async def test_send_in_transactions_prints_its_summary_so_far(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        code, out, err = await interrupted(
            ["send", "-n", ns, "-t", "IntTx", "--body", "x", "--count", "1000000", "--transaction", "commit", "--json"],
            signal.SIGINT, when=b'"COMMIT_MESSAGE"')
    assert code == 130, (out, err)
    no_traceback(err)
    lines = [json.loads(line) for line in out.splitlines()]
    summary = lines[-1]
    assert summary["interrupted"] == "SIGINT" and summary["transactions"] == len(lines) - 1 > 0, summary


async def test_send_interrupted_on_a_terminal_ends_its_progress_line(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        master, slave = pty.openpty()
        proc = await trio.lowlevel.open_process(
            [TROCKET, "send", "-n", ns, "-t", "IntT", "--size", "10", "--count", "10000000"],
            stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        seen = bytearray()

        def read_terminal() -> None:
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the last writer closed the terminal
                    return
                if not chunk:
                    return
                seen.extend(chunk)

        try:
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trio.to_thread.run_sync, read_terminal)
                    while b"msg/s" not in seen:
                        await trio.sleep(0.05)
                    proc.send_signal(signal.SIGINT)
                    out = await proc.stdout.receive_some()
                    code = await proc.wait()
        finally:
            os.close(master)
            if proc.returncode is None:
                proc.kill()
    text = seen.decode(errors="replace")
    assert code == 130, text
    assert "\r[" in text and text.endswith("\n"), repr(text[-200:])  # the bar, then its line ended
    no_traceback(text)
    assert out.startswith(b"sent ") and b"interrupted by SIGINT" in out, out


@SIGNALS
async def test_consume_prints_its_summary_and_commits(tmp_path, signum):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        async with Producer("IntPG", ns) as producer:
            for i in range(3):
                await producer.send(new_message("IntC", f"m{i}".encode()))
        code, out, err = await interrupted(
            ["consume", "-n", ns, "-t", "IntC", "-g", "IntG", "--from", "first"], signum, when=b"'m2'")
    assert code == 128 + signum, (out, err)
    no_traceback(err)
    assert len(out.splitlines()) == 3
    assert err.startswith("consumed 3 messages from IntC as IntG in ")
    assert err.rstrip().endswith(f"offsets committed; interrupted by {signal.Signals(signum).name}"), err


async def test_replay_prints_the_table_so_far(tmp_path):
    from trocket.conformance.replay import load_session
    from trocket.conformance.sources import read_frames

    capture = CAPTURES / "cpp-produce-pull.trkcap"
    session = load_session(read_frames(str(capture)).frames)
    async with running_broker(tmp_path) as broker:
        ns = broker.namesrv_addrs[0]
        targets = []
        for conn, exchanges in session.connections.items():
            to_ns = any(e.request.code in (105, 106, 206) for e in exchanges)
            targets += ["--target", f"{session.servers[conn]}={ns if to_ns else broker.broker_addr}"]
        # 1.2 s of capture at a twentieth of its pace: still replaying when interrupted
        code, out, err = await interrupted(["replay", str(capture), *targets, "--speed", "0.05"], signal.SIGINT,
                                           when=b"replaying ", delay=3)
    assert code == 130, (out, err)
    no_traceback(err)
    assert "total" in out and "INTERRUPTED by SIGINT:" in out, out


async def test_capture_show_stops_at_once(tmp_path):
    cap = tmp_path / "big.trkcap"
    subprocess.run([TROCKET, "capture", "synth", "--frames", "40000", "--out", str(cap)], check=True,
                   capture_output=True)
    code, out, err = await interrupted(["capture", "show", str(cap)], signal.SIGINT, when=b"\n")
    assert code == 130, err
    no_traceback(err)
    assert 0 < len(out.splitlines()) < 40000


@pytest.mark.slow
async def test_analyze_stops_spark_quietly(tmp_path):
    pytest.importorskip("pyspark")
    cap = tmp_path / "big.trkcap"
    subprocess.run([TROCKET, "capture", "synth", "--frames", "200000", "--out", str(cap)], check=True,
                   capture_output=True)
    code, out, err = await interrupted(["analyze", str(cap), "--out", str(tmp_path / "out"), "--quiet"],
                                       signal.SIGINT, when=b"NativeCodeLoader", delay=4, timeout=180)
    assert code == 130, err
    no_traceback(err)
    assert "Py4J" not in err and "ERROR" not in err, err
    # what was done so far: the phase it was in (and the tasks' progress when a stage ran)
    assert re.fullmatch(r"analyze interrupted by SIGINT after [\d.]+ s while (starting Spark|reading, decoding and pairing|latency percentiles"
                        r"|writing the views and the report)( \(.+\))?: .+ is incomplete \(no _SUCCESS\)",
                        err.rstrip().splitlines()[-1]), err  # fmt: skip
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_an_error_raised_while_an_interrupt_unwinds_is_the_interrupt():
    """Py4J's cleanup failing on the connection the interrupt cut (analyze stopped
    mid-call) is part of the interrupt: exit 130, no traceback."""
    from trocket.interrupt import is_interrupt

    def cut_short() -> None:
        try:
            raise KeyboardInterrupt
        finally:
            raise ConnectionError("Answer from Java side is empty")

    with pytest.raises(ConnectionError) as info:
        cut_short()
    assert is_interrupt(info.value)
    assert not is_interrupt(ConnectionError("a failure of its own"))
