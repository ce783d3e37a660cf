"""examples/echo_service.py works as documented, in its own process."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import trio

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "echo_service.py"


async def test_echo_service_serve_and_call():
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(EXAMPLE), "serve", "127.0.0.1:0"], stdout=subprocess.PIPE
    )
    try:
        with trio.fail_after(20):
            line = b""
            while not line.endswith(b"\n"):
                line += await proc.stdout.receive_some(1)
        addr = line.decode().rsplit(" ", 1)[-1].strip()
        for stype in ("JSON", "ROCKETMQ"):
            result = await trio.run_process(
                [sys.executable, str(EXAMPLE), "call", addr, "--body", "hi", "--ext", "k=v", "--serialize", stype],
                capture_stdout=True,
            )
            out = result.stdout.decode()
            assert "code=0" in out and "ext={'k': 'v'}" in out and "body=b'hi'" in out
    finally:
        proc.terminate()
        await proc.wait()
