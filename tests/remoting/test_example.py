"""examples/echo_service.py works as documented, in its own process."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys

import pytest
import trio

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "echo_service.py"


async def _read_line(stream: trio.abc.ReceiveStream) -> str:
    line = b""
    with trio.fail_after(20):
        while not line.endswith(b"\n"):
            chunk = await stream.receive_some(1)
            assert chunk, f"the example closed its output after {line!r}"
            line += chunk
    return line.decode()


async def _stop(proc: trio.Process, signum: int) -> tuple[int, bytes, bytes]:
    """Send ``signum``, wait (at most 20 s), return (exit code, rest of stdout, stderr)."""
    proc.send_signal(signum)
    out, err = bytearray(), bytearray()

    async def drain(stream, into):
        while chunk := await stream.receive_some():
            into += chunk

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, proc.stdout, out)
            nursery.start_soon(drain, proc.stderr, err)
        code = await proc.wait()
    return code, bytes(out), bytes(err)


async def _start_server() -> tuple[trio.Process, str]:
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(EXAMPLE), "serve", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    line = await _read_line(proc.stdout)
    assert line.startswith("echo service listening on 127.0.0.1:"), line
    return proc, line.rsplit(" ", 1)[-1].strip()


async def _call(addr: str, *args: str) -> str:
    result = await trio.run_process([sys.executable, str(EXAMPLE), "call", addr, *args], capture_stdout=True)
    return result.stdout.decode()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
async def test_echo_service_serve_call_and_stop_cleanly(signum):
    proc, addr = await _start_server()
    try:
        for stype in ("JSON", "ROCKETMQ"):
            out = await _call(addr, "--body", "hi", "--ext", "k=v", "--serialize", stype)
            assert "code=0" in out and "ext={'k': 'v'}" in out and "body=b'hi'" in out
        code, out, err = await _stop(proc, signum)
    finally:
        if proc.returncode is None:
            proc.kill()
    # Ctrl-C is a clean stop, as for `trocket broker`: one line, no traceback, 128 + the signal.
    assert (code, out, err) == (128 + signum, f"echo service stopped ({signal.Signals(signum).name})\n".encode(), b"")
    # ... and the port is free again at once: the listener was closed.
    with trio.fail_after(10):
        host, port = addr.rsplit(":", 1)
        with pytest.raises(OSError):
            await trio.open_tcp_stream(host, int(port))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
async def test_ctrl_c_during_a_call_is_the_summary_so_far_and_130(signum):
    # A peer that accepts and never answers: the call is waiting when SIGINT comes.
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    requested = trio.Event()

    async def hold(stream):
        if await stream.receive_some():  # the request's first bytes: the call now waits
            requested.set()
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, hold, listeners)
        proc = await trio.lowlevel.open_process(
            [sys.executable, str(EXAMPLE), "call", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            with trio.fail_after(20):
                await requested.wait()
            code, out, err = await _stop(proc, signum)
        finally:
            if proc.returncode is None:
                proc.kill()
        nursery.cancel_scope.cancel()
    name = signal.Signals(signum).name
    assert (code, out) == (128 + signum, b""), err
    assert err.startswith(b"0 of 1 calls, 0 failed in ") and err.endswith(f"; interrupted by {name}\n".encode()), err
    assert len(err.splitlines()) == 1, err


async def test_call_count_prints_a_line_per_call_and_a_summary():
    proc, addr = await _start_server()
    try:
        result = await trio.run_process([sys.executable, str(EXAMPLE), "call", addr, "--count", "5"],
                                        capture_stdout=True, capture_stderr=True)
    finally:
        await _stop(proc, signal.SIGTERM)
    assert result.returncode == 0
    assert len(result.stdout.decode().splitlines()) == 5
    summary = result.stderr.decode()
    assert summary.startswith("5 of 5 calls, 0 failed in ") and " p50 " in summary and " p99 " in summary, summary
