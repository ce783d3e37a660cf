"""``trocket capture proxy``: transparent (not a byte changed), many connections at
once, non-frame bytes forwarded and recorded RAW, flushed every second and on
SIGTERM; between the real C++ client and a trocket broker advertising the proxy."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trocket.codecs.capture import Direction, Role
from trocket.codecs.command import RemotingCommand
from trocket.codecs.serialize import decode_command, encode_command
from trocket.conformance.proxy import CaptureProxy, FrameRecorder
from trocket.conformance.sources import read_frames
from trocket.remoting import MemoryTap

from ..waiting import listening, wait_until, wait_until_sync
from .conftest import REPO, running_broker, free_port

ACC = REPO / "tests" / "acceptance"


async def _echo_raw(stream: trio.SocketStream) -> None:
    """An upstream that echoes every byte back, frame or not."""
    try:
        while data := await stream.receive_some(65536):
            await stream.send_all(data)
    except trio.BrokenResourceError:
        pass


async def test_many_connections_at_once_pass_unchanged_and_are_recorded_frame_by_frame():
    tap = MemoryTap()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(lambda task_status: trio.serve_tcp(_echo_raw, 0, host="127.0.0.1",
                                                                          task_status=task_status))
        up = listeners[0].socket.getsockname()[1]
        proxy = CaptureProxy(("127.0.0.1", 0), ("127.0.0.1", up), tap)
        await nursery.start(proxy.serve)

        async def client(i: int) -> None:
            frames = [encode_command(RemotingCommand.request(10, opaque=n, body=b"%d-%d" % (i, n) * 300))
                      for n in range(20)]
            blob = b"".join(frames)
            stream = await trio.open_tcp_stream("127.0.0.1", proxy.port)
            async with stream:
                # odd-sized writes: frames cut anywhere must still be recorded whole
                for k in range(0, len(blob), 777):
                    await stream.send_all(blob[k : k + 777])
                got = b""
                while len(got) < len(blob):
                    got += await stream.receive_some(65536)
                assert got == blob  # not one byte changed

        with trio.fail_after(20):
            async with trio.open_nursery() as clients:
                for i in range(10):
                    clients.start_soon(client, i)
            await wait_until(lambda: not proxy.active, 20)
        nursery.cancel_scope.cancel()
    assert proxy.connections == 10 and proxy.raw_records == 0
    assert len(tap.records) == 10 * 40
    by_conn: dict[int, list] = {}
    for r in tap.records:
        assert r.role is Role.SERVER and not r.raw
        by_conn.setdefault(r.connection_id, []).append(r)
    assert len(by_conn) == 10
    for recs in by_conn.values():
        received = [decode_command(r.payload) for r in recs if r.direction is Direction.RECEIVED]
        assert [c.opaque for c in received] == list(range(20))


def test_bytes_that_are_no_frames_are_recorded_raw_and_the_stream_stays_raw():
    tap = MemoryTap()
    rec = FrameRecorder(tap, 1, "p:1", "c:2", Direction.RECEIVED)
    good = encode_command(RemotingCommand.request(10, opaque=1))
    rec.feed(good[:3])
    rec.feed(good[3:] + b"GET / HTTP/1.1\r\n")
    rec.feed(good)  # after garbage the boundaries are lost: raw from here on
    rec.feed(b"\x00\x00\x00\x05\x00\x00\x00\x00")  # a length prefix cut short at the end
    rec.close()
    kinds = [(r.raw, r.frame) for r in tap.records]
    assert kinds[0] == (False, good)
    assert all(raw for raw, _ in kinds[1:])
    assert b"".join(f for _, f in kinds[1:]) == b"GET / HTTP/1.1\r\n" + good + b"\x00\x00\x00\x05\x00\x00\x00\x00"
    # a whole frame whose header does not decode is kept whole, flagged raw, and framing goes on
    tap2 = MemoryTap()
    rec2 = FrameRecorder(tap2, 1, "p:1", "c:2", Direction.RECEIVED)
    bad = b"\x00\x00\x00\x08\x00\x00\x00\x04{{{{"
    rec2.feed(bad + good)
    assert [(r.raw, r.frame) for r in tap2.records] == [(True, bad), (False, good)]


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float = 20) -> None:
    def started() -> bool:
        assert proc.poll() is None, proc.stderr.read()
        return listening(port)

    wait_until_sync(started, timeout, interval=0.05, what="the proxy listens")


def _proxy_cmd(listen: int, upstream: int, out: Path) -> list[str]:
    return [sys.executable, "-m", "trocket", "capture", "proxy", "--listen", f"127.0.0.1:{listen}",
            "--upstream", f"127.0.0.1:{upstream}", "--out", str(out)]


async def test_cli_proxy_flushes_within_a_second_and_exits_cleanly_on_sigterm(tmp_path):
    out = tmp_path / "proxy.trkcap"
    async with running_broker(tmp_path) as controller:
        port = free_port()
        proc = subprocess.Popen(_proxy_cmd(port, controller.server.port, out), stderr=subprocess.PIPE, text=True)
        try:
            await trio.to_thread.run_sync(_wait_listening, port, proc)
            sock = await trio.open_tcp_stream("127.0.0.1", port)
            await sock.send_all(encode_command(RemotingCommand.request(28, opaque=77)))  # GET_BROKER_RUNTIME_INFO
            with trio.fail_after(5):
                assert await sock.receive_some(4)
            # the connection stays open: the records must reach the file within ~1 s anyway
            await wait_until(lambda: out.exists() and len(read_frames(str(out)).frames) >= 2, 5, interval=0.1)
            proc.send_signal(signal.SIGTERM)
            _, err = await trio.to_thread.run_sync(lambda: proc.communicate(timeout=20))
            await sock.aclose()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 143, err  # SIGTERM, after the flush and the report (the Ctrl-C rule)
    assert "Traceback" not in err and "2 connections, 2 frames" in err  # the readiness probe is one
    frames = read_frames(str(out)).frames
    assert [decode_command(f.frame[4:]).opaque for f in frames] == [77, 77]
    assert [f.from_client for f in frames] == [True, False]


def test_cli_proxy_with_a_bad_listen_address_fails_clearly(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run(_proxy_cmd(port, 1, tmp_path / "x.trkcap"), capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "error" in r.stderr


def _cpp_client_works() -> bool:
    r = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, timeout=60)
    return r.returncode == 0


@pytest.mark.skipif(not _cpp_client_works(), reason="the C++ client (PyPI rocketmq) does not load here")
def test_the_cpp_client_through_the_proxy_does_not_notice(tmp_path):
    """The broker advertises the proxy, so the C++ producer's sends and its consumer's
    pulls all pass through it; both succeed, the capture holds every exchange, and its
    frames are exactly those the broker's own tap saw on the proxied connections."""
    sys.path[:0] = [str(ACC), str(ACC / "scripts")]
    try:
        from acc_tools import BrokerProcess, finish_client_script, start_client_script
    finally:
        del sys.path[:2]
    proxy_port = free_port()
    tapped = tmp_path / "broker.trkcap"
    broker = BrokerProcess(tmp_path / "store", tmp_path / "broker.log", advertise_port=proxy_port,
                           extra=["--tap", str(tapped)])
    out = tmp_path / "through-proxy.trkcap"
    broker.start()
    proc = subprocess.Popen(_proxy_cmd(proxy_port, broker.port, out), stderr=subprocess.PIPE, text=True)
    try:
        _wait_listening(proxy_port, proc)
        home = tmp_path / "home"
        p = start_client_script("produce.py", ["--namesrv", broker.namesrv, "--mode", "sync", "--count", "5",
                                               "--topic", "ViaProxy", "--group", "PG_proxy"], home)
        r = finish_client_script(p, "produce.py", home, 60, broker)
        assert len(r["acked"]) == 5 and not r["errors"], r
        p = start_client_script("consume.py", ["--namesrv", broker.namesrv, "--kind", "pull", "--group",
                                               "CG_proxy", "--topics", "ViaProxy", "--expect", "5", "--timeout",
                                               "30", "--idle", "0"], home)
        r = finish_client_script(p, "consume.py", home, 60, broker)
        assert len({m["uid"] for m in r["messages"]}) == 5, r
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        broker.stop()
    assert proc.returncode == 130 and "Traceback" not in err, err
    frames = read_frames(str(out)).frames
    codes = [decode_command(f.frame[4:]).code for f in frames if f.from_client]
    assert codes.count(10) == 5 and 11 in codes and 34 in codes
    assert not any(f.raw for f in frames)
    assert all(f.server == f"127.0.0.1:{proxy_port}" for f in frames)
    at_broker = [f for f in read_frames(str(tapped)).frames if f.server == f"127.0.0.1:{broker.port}"]
    for side in (True, False):
        assert sorted(f.frame for f in frames if f.from_client is side) == sorted(
            f.frame for f in at_broker if f.from_client is side)



async def test_an_unreachable_upstream_closes_the_client_connection_and_is_counted(capsys):
    tap = MemoryTap()
    async with trio.open_nursery() as nursery:
        proxy = CaptureProxy(("127.0.0.1", 0), ("127.0.0.1", 1), tap)
        await nursery.start(proxy.serve)
        stream = await trio.open_tcp_stream("127.0.0.1", proxy.port)
        with trio.fail_after(10):
            assert await stream.receive_some(10) == b""  # closed at once
        await stream.aclose()
        nursery.cancel_scope.cancel()
    assert proxy.upstream_failures == 1 and not tap.records
    assert "upstream 127.0.0.1:1 unreachable" in capsys.readouterr().err
