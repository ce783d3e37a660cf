"""Processes on loopback for the replication tests: a name server, masters and slaves
(``trocket`` subprocesses, the acceptance tests' :class:`BrokerProcess`), a dropping TCP
proxy, a concurrent sender, and store comparison (stores opened from this process once
their broker is gone)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import trio

from trocket.broker.store import MessageStore, StoreConfig
from trocket.codecs.codes import ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import decode_header
from trocket.codecs.headers import SendMessageRequestHeaderV2, SendMessageResponseHeader
from trocket.codecs.message.properties import encode_properties
from trocket.remoting import ClientConfig, RemotingClient

from ...waiting import listening, wait_until_sync

ACC = Path(__file__).resolve().parents[2] / "acceptance"
if str(ACC) not in sys.path:
    sys.path.insert(0, str(ACC))

from acc_tools import BrokerProcess, free_port, trocket_command  # noqa: E402

SEGMENT = 64 << 20
__all__ = [
    "ACC", "BrokerProcess", "DroppingProxy", "Namesrv", "SEGMENT", "compare_stores", "free_port",
    "open_store", "runtime_info", "send_many",
]


class Namesrv:
    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [*trocket_command(), "namesrv", "--listen", self.addr], stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        wait_until_sync(lambda: listening(self.port), 20, interval=0.05, what="the name server listens")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def broker(tmp: Path, name: str, namesrv: Namesrv, *flags: str) -> BrokerProcess:
    conf = tmp / f"{name}.conf"
    conf.write_text("slaveSyncInterval=300\n")  # Java's 10 s is long for a test
    b = BrokerProcess(tmp / f"{name}-store", tmp / f"{name}.log",
                      extra=["-c", str(conf), "-n", namesrv.addr, "--segment-size", str(SEGMENT), *flags])
    b.start()
    return b


def runtime_info_sync(addr: tuple[str, int]) -> dict[str, str]:
    from acc_tools import RawClient

    with RawClient(addr) as c:
        return c.runtime_info()


async def runtime_info(addr: tuple[str, int]) -> dict[str, str]:
    return await trio.to_thread.run_sync(runtime_info_sync, addr)


def topic_synced(slave: BrokerProcess, topic: str) -> bool:
    """The slave knows ``topic`` (its config copied from the master): its own
    GET_ALL_TOPIC_CONFIG (21) lists it."""
    from acc_tools import RawClient

    with RawClient(slave.addr) as c:
        _ext, body = c.call(21, {})
    return topic in json.loads(body).get("topicConfigTable", {})


async def send_many(addr: tuple[str, int], topic: str, count: int, senders: int, *, prefix: str = "ha",
                    start: int = 0, allow: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> dict[int, tuple]:
    """``count`` messages from ``senders`` concurrent tasks over two connections each
    waiting for its answer; returns index -> (code, msgId, queueId, queueOffset).
    An answer whose code is not in ``allow`` fails."""
    target = f"{addr[0]}:{addr[1]}"
    out: dict[int, tuple] = {}
    clients = [RemotingClient(ClientConfig(default_timeout=15)) for _ in range(2)]
    async with clients[0], clients[1]:
        async def sender(k: int) -> None:
            c = clients[k % 2]
            for i in range(start + k, start + count, senders):
                props = encode_properties({"uid": f"{prefix}-{i:05d}", "TAGS": "T", "WAIT": "true"})
                h = SendMessageRequestHeaderV2(a="PG", b=topic, c="TBW102", d=4, e=i % 4, f=0,
                                               g=int(time.time() * 1000), h=0, i=props, j=0, k=False)
                r = await c.invoke_sync(target, RemotingCommand.request(310, h, body=b"body-%05d-" % i + b"x" * (i % 300)))
                assert r.code in allow, (i, r.code, r.remark)
                rh = decode_header(SendMessageResponseHeader, r.ext_fields)
                out[i] = (r.code, rh.msgId, rh.queueId, rh.queueOffset)

        async with trio.open_nursery() as n:
            for k in range(senders):
                n.start_soon(sender, k)
    return out


def open_store(path: Path) -> MessageStore:
    return MessageStore.open(StoreConfig(store_dir=str(path), commit_log_segment_size=SEGMENT))


def compare_stores(master_dir: Path, slave_dir: Path, acked: dict[int, tuple] | None = None,
                   topic: str | None = None) -> dict:
    """Open both stores (their brokers gone). Every acknowledged message (or, with no
    ``acked``, every byte of the master's log) must be in the slave byte for byte, with
    the same consume-queue entry."""
    m = open_store(master_dir)
    s = open_store(slave_dir)
    try:
        checked = 0
        if acked is None:
            end = m.max_phy_offset
            assert s.max_phy_offset == end, (s.max_phy_offset, end)
            assert bytes(m.commit_log.get_message(0, end)) == bytes(s.commit_log.get_message(0, end))
            for cq in m.queues:
                n = cq.max_offset
                assert s.get_max_offset(cq.topic, cq.queue_id) == n
                for i in range(cq.min_offset, n):
                    assert m.get_queue_entry(cq.topic, cq.queue_id, i) == s.get_queue_entry(cq.topic, cq.queue_id, i)
                    checked += 1
            return {"bytes": end, "entries": checked}
        for i, (_code, msg_id, qid, qoff) in sorted(acked.items()):
            phys = int(msg_id[-16:], 16)
            me = m.get_queue_entry(topic, qid, qoff)
            se = s.get_queue_entry(topic, qid, qoff)
            assert me is not None and me == se, (i, me, se)
            assert me[0] == phys
            mr = m.select_one_message_by_offset(phys)
            sr = s.select_one_message_by_offset(phys)
            assert sr is not None, (i, phys)
            assert bytes(mr) == bytes(sr), i
            checked += 1
        return {"messages": checked}
    finally:
        m.shutdown()
        s.shutdown()


class DroppingProxy:
    """Relays 127.0.0.1:<port> to ``target``; :meth:`drop` cuts every relayed
    connection at once (both ways, mid-frame), and while ``refusing`` new ones are
    accepted and closed at once (counted in ``refused``)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.refusing = False
        self.refused = 0
        self.down_bytes = 0  # master -> slave
        self.connections = 0
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if self.refusing:
                c.close()
                self.refused += 1
                continue
            try:
                u = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            self.connections += 1
            with self._lock:
                self._pairs.append((c, u))
            threading.Thread(target=self._pump, args=(c, u, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, down: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if down:
                    self.down_bytes += len(data)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def drop(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._closed = True
        self.drop()
        self.sock.close()


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())
