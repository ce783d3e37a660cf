"""Replication with every broker its own process on loopback: a SYNC_MASTER under
several senders, kill -9 of the master then the real C++ client consuming from the
slave, an HA connection cut mid-stream, a slave killed and restarted, a slave ahead of
its master."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import trio

from trocket.codecs.codes import ResponseCode

from ...waiting import wait_until
from .procs import (
    DroppingProxy,
    broker,
    compare_stores,
    free_port,
    runtime_info,
    send_many,
    topic_synced,
)


@pytest.fixture(scope="module")
def cpp_client():
    """Skip, saying why, only where the C++ client (PyPI ``rocketmq``) cannot load, as
    tests/acceptance does."""
    r = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"the rocketmq wheel cannot load under {sys.executable}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")


def _caught_up(master, slave):
    async def check():
        m = await runtime_info(master.addr)
        s = await runtime_info(slave.addr)
        return m["commitLogMaxOffset"] == s["commitLogMaxOffset"] and int(m["commitLogMaxOffset"]) > 0
    return check


async def test_sync_master_5000_then_master_killed_cpp_consumes_from_slave(tmp_path, namesrv, procs, cpp_client):
    from acc_tools import client_log_tail, finish_client_script, start_client_script

    ha_port = free_port()
    master = broker(tmp_path, "master", namesrv, "--role", "SYNC_MASTER", "--ha-listen", f"127.0.0.1:{ha_port}")
    procs.append(master)
    slave = broker(tmp_path, "slave", namesrv, "--role", "SLAVE")  # the master's HA address from the name server
    procs.append(slave)
    await wait_until(lambda: runtime_info(master.addr), 10, interval=0.05)
    await wait_until(lambda: _ha_connected(master), 15, interval=0.05)

    t0 = time.monotonic()
    acked = await send_many(master.addr, "HaSync", 5000, senders=8)
    took = time.monotonic() - t0
    assert len(acked) == 5000 and all(a[0] == ResponseCode.SUCCESS for a in acked.values())
    print(f"5000 SYNC_MASTER sends from 8 senders: {took:.2f} s")

    # the slave serves the topic once SlaveSynchronize copied its config (Java's too)
    await wait_until(lambda: trio.to_thread.run_sync(topic_synced, slave, "HaSync"), 10, interval=0.05)
    master.kill()  # kill -9
    # the real C++ client, from the route (the slave only, once the name server dropped the master)
    home = tmp_path / "cpp"
    proc = start_client_script("consume.py", [
        "--namesrv", namesrv.addr, "--kind", "push", "--group", "HaGroup", "--topics", "HaSync",
        "--expect", "5000", "--timeout", "60", "--idle", "0.5", "--quiet", "15",
    ], home)
    result = await trio.to_thread.run_sync(lambda: finish_client_script(proc, "consume.py", home, 90))
    uids = {m["uid"] for m in result["messages"]}
    missing = {f"ha-{i:05d}" for i in acked} - uids
    assert not missing, (
        f"{len(missing)} acknowledged messages not consumed from the slave, e.g. {sorted(missing)[:5]}; "
        f"received {len(result['messages'])}, errors {result['errors'][:5]}\n{client_log_tail(home)}"
        f"\nslave:\n{slave.log_tail(30)}"
    )

    assert slave.stop() == 130
    report = compare_stores(master.store, slave.store, acked, "HaSync")
    assert report["messages"] == 5000


async def _ha_connected(master) -> bool:
    return (await runtime_info(master.addr)).get("haConnections") == "1"


async def test_ha_connection_cut_mid_stream_catches_up_exactly(tmp_path, namesrv, procs):
    ha_port = free_port()
    master = broker(tmp_path, "master", namesrv, "--ha-listen", f"127.0.0.1:{ha_port}")
    procs.append(master)
    proxy = DroppingProxy(("127.0.0.1", ha_port))
    try:
        slave = broker(tmp_path, "slave", namesrv, "--role", "SLAVE", "--master-ha", f"127.0.0.1:{proxy.port}")
        procs.append(slave)
        await wait_until(lambda: _ha_connected(master), 15, interval=0.05)

        async def cutter():
            # cut while bytes flow, twice; the second time keep it down for a while
            await wait_until(lambda: proxy.down_bytes > 200_000, 30, interval=0.001)
            proxy.drop()
            await wait_until(lambda: proxy.down_bytes > 600_000, 30, interval=0.001)
            proxy.refusing = True
            proxy.drop()

        async with trio.open_nursery() as n:
            n.start_soon(cutter)
            await send_many(master.addr, "HaCut", 3000, senders=8, prefix="cut")
        # Still down: more messages, which only a new connection can bring (what the
        # second cut left in the slave's socket may already hold everything sent before)
        await send_many(master.addr, "HaCut", 500, senders=8, prefix="cut", start=3000)
        # the slave reconnects, and is refused, twice (it retries every second)
        await wait_until(lambda: proxy.refused >= 2, 30, interval=0.05)
        proxy.refusing = False
        await wait_until(_caught_up(master, slave), 30, interval=0.05)
        assert proxy.connections >= 3
        assert master.stop() == 130 and slave.stop() == 130
        report = compare_stores(master.store, slave.store)
        assert report["entries"] == 3500
    finally:
        proxy.close()


async def _pair(tmp_path, namesrv, procs):
    """An ASYNC_MASTER with an HA port and a slave following it there, connected."""
    ha_port = free_port()
    master = broker(tmp_path, "master", namesrv, "--ha-listen", f"127.0.0.1:{ha_port}")
    procs.append(master)
    slave = broker(tmp_path, "slave", namesrv, "--role", "SLAVE", "--master-ha", f"127.0.0.1:{ha_port}")
    procs.append(slave)
    await wait_until(lambda: _ha_connected(master), 15, interval=0.05)
    return master, slave


async def test_slave_kill_9_resumes(tmp_path, namesrv, procs):
    master, slave = await _pair(tmp_path, namesrv, procs)
    sent = trio.Event()

    async def log_end(b) -> int:
        return int((await runtime_info(b.addr))["commitLogMaxOffset"])

    async def killer():
        async def slave_has_some() -> bool:
            return await log_end(slave) > 0

        await wait_until(slave_has_some, 30, interval=0.01)  # killed mid-stream
        slave.kill()
        at_kill = await log_end(master)

        async def master_moved_on() -> bool:  # down while the master takes more
            return sent.is_set() or await log_end(master) > at_kill

        await wait_until(master_moved_on, 30, interval=0.01)
        await trio.to_thread.run_sync(slave.start)

    async with trio.open_nursery() as n:
        n.start_soon(killer)
        await send_many(master.addr, "HaKill", 3000, senders=8, prefix="kill")
        sent.set()
    await wait_until(_caught_up(master, slave), 30, interval=0.05)
    assert slave.starts == 2
    assert master.stop() == 130 and slave.stop() == 130
    report = compare_stores(master.store, slave.store)
    assert report["entries"] == 3000


async def test_slave_ahead_of_master_stops_naming_both_offsets(tmp_path, namesrv, procs):
    master, slave = await _pair(tmp_path, namesrv, procs)
    await send_many(master.addr, "HaAhead", 200, senders=4)
    await wait_until(_caught_up(master, slave), 20, interval=0.05)
    slave_end = int((await runtime_info(slave.addr))["commitLogMaxOffset"])
    assert master.stop() == 130 and slave.stop() == 130
    # a new, shorter master log at the same address
    import shutil

    shutil.rmtree(master.store)
    await trio.to_thread.run_sync(master.start)
    await send_many(master.addr, "HaAhead", 10, senders=1)
    master_end = int((await runtime_info(master.addr))["commitLogMaxOffset"])
    assert master_end < slave_end
    slave.proc = None
    await trio.to_thread.run_sync(slave.start)
    rc = await trio.to_thread.run_sync(lambda: slave.proc.wait(20))
    assert rc == 1
    text = slave.log_text()
    assert f"slave commit log ends at {slave_end}" in text and f"end {master_end}" in text, slave.log_tail()
    assert "boot success" in text
