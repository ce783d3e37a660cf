"""examples/kv_service.py: the typed key-value store, over real sockets, in both
serializations, in-process and as the command line it documents."""

from __future__ import annotations

import importlib.util
import pathlib
import signal
import subprocess
import sys

import pytest
import trio

from trocket.codecs.command import SerializeType
from trocket.remoting import ClientConfig, RemotingClient, ServerConfig

from .test_example import _read_line

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "kv_service.py"
_spec = importlib.util.spec_from_file_location("kv_service", EXAMPLE)
kv_service = importlib.util.module_from_spec(_spec)
sys.modules["kv_service"] = kv_service  # attrs and typing look classes up by module
_spec.loader.exec_module(kv_service)

STYPES = [SerializeType.JSON, SerializeType.ROCKETMQ]


class Noticed:
    """Collects a client's notices; wait() until one more came."""

    def __init__(self) -> None:
        self.notices: list = []
        self._event = trio.Event()

    def __call__(self, notice) -> None:
        self.notices.append(notice)
        self._event.set()
        self._event = trio.Event()

    async def wait(self, n: int) -> None:
        with trio.fail_after(10):
            while len(self.notices) < n:
                await self._event.wait()


@pytest.mark.parametrize("stype", STYPES, ids=lambda s: s.name)
async def test_get_put_delete_and_typed_errors(stype):
    async with trio.open_nursery() as nursery:
        kv = await nursery.start(kv_service.serve, "127.0.0.1:0")
        async with RemotingClient(ClientConfig()) as client:
            store = kv_service.KVClient(client, kv.server.address, serialize_type=stype)
            with pytest.raises(kv_service.NotFound, match="no key 'k'") as info:
                await store.get("k")
            assert info.value.code == 404
            assert await store.put("k", b"v1", expect=0) == 1  # compare-and-set: absent
            assert await store.put("k", b"v2") == 2
            with pytest.raises(kv_service.VersionConflict, match="'k' is at version 2, not 1"):
                await store.put("k", b"v3", expect=1)
            store.cache.clear()
            assert await store.get("k") == kv_service.Entry(2, b"v2")  # from the server
            assert await store.delete("k", expect=2) == 3
            with pytest.raises(kv_service.NotFound):
                await store.delete("k")
            assert kv.entries == {} and kv.last_version == 3
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("stype", STYPES, ids=lambda s: s.name)
async def test_changes_invalidate_the_other_clients_caches(stype):
    async with trio.open_nursery() as nursery:
        kv = await nursery.start(kv_service.serve, "127.0.0.1:0")
        addr = kv.server.address
        a_seen, b_seen = Noticed(), Noticed()
        async with RemotingClient(ClientConfig()) as ca, RemotingClient(ClientConfig()) as cb:
            a = kv_service.KVClient(ca, addr, serialize_type=stype, on_notice=a_seen)
            b = kv_service.KVClient(cb, addr, serialize_type=stype, on_notice=b_seen)
            await a.put("k", b"v1")
            assert await b.get("k") == kv_service.Entry(1, b"v1")  # b caches it
            assert "k" in b.cache
            await a.put("k", b"v2")
            await b_seen.wait(1)
            assert b_seen.notices == [kv_service.InvalidatedHeader(key="k", version=2)]
            assert "k" not in b.cache  # dropped: the next get asks the server
            assert await b.get("k") == kv_service.Entry(2, b"v2")
            await b.delete("k")
            await a_seen.wait(1)
            assert a_seen.notices == [kv_service.InvalidatedHeader(key="k", version=3, deleted=True)]
            assert b_seen.notices == [kv_service.InvalidatedHeader(key="k", version=2)]  # not its own change
            assert kv.dropped_notices == 0
        nursery.cancel_scope.cancel()


async def test_a_full_notice_queue_drops_and_counts():
    server = kv_service.RemotingServer(ServerConfig(listen_host="127.0.0.1", listen_port=0))
    kv = kv_service.KVServer(server, notice_queue=1)  # push_notices is not running: nothing drains it
    kv.put(kv_service.PutHeader(key="a"), b"1", None)
    kv.put(kv_service.PutHeader(key="b"), b"2", None)
    assert kv.dropped_notices == 1 and kv.last_version == 2


# -- the command line ------------------------------------------------------------------------


async def _cli(*args: str) -> subprocess.CompletedProcess:
    return await trio.run_process(
        [sys.executable, str(EXAMPLE), *args], capture_stdout=True, capture_stderr=True, check=False
    )


async def test_the_command_line():
    server = await trio.lowlevel.open_process(
        [sys.executable, str(EXAMPLE), "serve", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    watcher = None
    try:
        line = await _read_line(server.stdout)
        assert line.startswith("kv service listening on 127.0.0.1:"), line
        addr = line.rsplit(" ", 1)[-1].strip()
        watcher = await trio.lowlevel.open_process(
            [sys.executable, str(EXAMPLE), "watch", addr, "--serialize", "ROCKETMQ"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        assert await _read_line(watcher.stdout) == f"watching {addr}\n"
        done = await _cli("put", addr, "greeting", "hello", "--expect", "0")
        assert (done.returncode, done.stdout) == (0, b"greeting = 'hello' (version 1)\n")
        done = await _cli("get", addr, "greeting", "--serialize", "ROCKETMQ")
        assert (done.returncode, done.stdout) == (0, b"greeting = 'hello' (version 1)\n")
        done = await _cli("put", addr, "greeting", "bye", "--expect", "7")
        assert (done.returncode, done.stderr) == (
            1, b"error: VersionConflict: 'greeting' is at version 1, not 7\n"
        )
        done = await _cli("delete", addr, "greeting")
        assert (done.returncode, done.stdout) == (0, b"greeting deleted (version 2)\n")
        done = await _cli("get", addr, "greeting")
        assert (done.returncode, done.stderr) == (1, b"error: NotFound: no key 'greeting'\n")
        assert await _read_line(watcher.stdout) == "greeting changed (version 1)\n"
        assert await _read_line(watcher.stdout) == "greeting deleted (version 2)\n"
        watcher.send_signal(signal.SIGINT)
        with trio.fail_after(20):
            assert await watcher.wait() == 130
        server.send_signal(signal.SIGTERM)
        with trio.fail_after(20):
            assert await server.wait() == 143
        assert await _read_line(server.stdout) == "kv service stopped (SIGTERM)\n"
    finally:
        for proc in (server, watcher):
            if proc is not None and proc.returncode is None:
                proc.kill()
