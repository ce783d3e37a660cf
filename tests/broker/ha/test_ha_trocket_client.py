"""The trocket client across a master's death: the Producer sends to a SYNC_MASTER (its
slave confirming each message), the master is killed with SIGKILL, and a fresh
PushConsumer group, then a PullConsumer group, consuming from first receive every
acknowledged message from the slave, bodies intact; and a PushConsumer live on the master
when it dies moves to the slave for the rest (name server, master and slave are processes
on loopback, as test_ha_processes.py)."""

from __future__ import annotations

import time

import trio

from trocket.client import PullConsumer, PushConsumer
from trocket.client.message import new_message
from trocket.client.producer import Producer

from ...waiting import wait_until
from .procs import broker, free_port, runtime_info, topic_synced

TOPIC = "HaClient"
COUNT = 2000


def body_of(i: int) -> bytes:
    return b"client-%05d-" % i + bytes(range(256))[: i % 200]


async def _produce(ns: str) -> dict[str, bytes]:
    """COUNT messages from 8 concurrent senders; msg id -> body of each acknowledged one."""
    acked: dict[str, bytes] = {}
    async with Producer("HaClientPG", ns) as producer:
        async def sender(k: int) -> None:
            for i in range(k, COUNT, 8):
                body = body_of(i)
                r = await producer.send(new_message(TOPIC, body, tags="T", keys=f"k{i}"))
                if r.ok:
                    acked[r.msg_id] = body

        async with trio.open_nursery() as n:
            for k in range(8):
                n.start_soon(sender, k)
    return acked


async def _pair(tmp_path, namesrv, procs):
    """A SYNC_MASTER and its SLAVE (the master's HA address from the name server), connected."""
    ha_port = free_port()
    master = broker(tmp_path, "master", namesrv, "--role", "SYNC_MASTER", "--ha-listen", f"127.0.0.1:{ha_port}")
    procs.append(master)
    slave = broker(tmp_path, "slave", namesrv, "--role", "SLAVE")
    procs.append(slave)
    await wait_until(lambda: _ha_connected(master), 15, interval=0.05)
    return master, slave


async def _master_killed_after(tmp_path, namesrv, procs) -> tuple[dict[str, bytes], object]:
    master, slave = await _pair(tmp_path, namesrv, procs)
    t0 = time.monotonic()
    acked = await _produce(namesrv.addr)
    print(f"{COUNT} trocket Producer sends to a SYNC_MASTER: {len(acked)} acknowledged in {time.monotonic() - t0:.2f} s")
    assert len(acked) == COUNT  # a SYNC_MASTER with its slave connected acknowledges every one
    await wait_until(lambda: trio.to_thread.run_sync(topic_synced, slave, TOPIC), 10, interval=0.05)
    master.kill()  # kill -9
    return acked, slave


async def _ha_connected(master) -> bool:
    return (await runtime_info(master.addr)).get("haConnections") == "1"


def _check(acked: dict[str, bytes], got: dict[str, bytes]) -> None:
    missing = acked.keys() - got.keys()
    assert not missing, f"{len(missing)} acknowledged messages not consumed, e.g. {sorted(missing)[:3]}"
    bad = [k for k in acked if got[k] != acked[k]]
    assert not bad, f"{len(bad)} bodies differ, e.g. {bad[:3]}"


async def test_master_killed_push_consumer_reads_every_acked_message_from_slave(tmp_path, namesrv, procs):
    acked, slave = await _master_killed_after(tmp_path, namesrv, procs)
    got: dict[str, bytes] = {}
    done = trio.Event()

    async def listener(msg):
        got[msg.client_msg_id] = msg.body
        if len(acked.keys() - got.keys()) == 0:
            done.set()

    t0 = time.monotonic()
    async with PushConsumer("HaClientCG", namesrv.addr, {TOPIC: "*"}, listener, consume_from="first"):
        with trio.fail_after(15):
            await done.wait()
    print(f"push consumer: {len(got)} messages from the slave in {time.monotonic() - t0:.2f} s")
    _check(acked, got)


async def test_master_killed_pull_consumer_reads_every_acked_message_from_slave(tmp_path, namesrv, procs):
    acked, slave = await _master_killed_after(tmp_path, namesrv, procs)
    got: dict[str, bytes] = {}
    t0 = time.monotonic()
    async with PullConsumer("HaClientLCG", namesrv.addr, consume_from="first") as c:
        c.subscribe(TOPIC, "*")
        with trio.fail_after(15):
            while acked.keys() - got.keys():
                for msg in await c.poll(timeout=1):
                    got[msg.client_msg_id] = msg.body
    print(f"pull consumer: {len(got)} messages from the slave in {time.monotonic() - t0:.2f} s")
    _check(acked, got)


async def test_push_consumer_running_across_the_kill_moves_to_the_slave(tmp_path, namesrv, procs):
    """The consumer is live on the master when it dies, with acknowledged messages it has
    not pulled yet (its callback held, its queues flow-controlled at 20 cached
    messages): it pulls the rest from the slave, without waiting for a route poll."""
    master, slave = await _pair(tmp_path, namesrv, procs)
    got: dict[str, bytes] = {}
    killed = trio.Event()
    done = trio.Event()
    acked: dict[str, bytes] = {}

    async def listener(msg):
        if len(got) >= 300:
            await killed.wait()
        got[msg.client_msg_id] = msg.body
        if len(got) >= COUNT and acked and not acked.keys() - got.keys():
            done.set()

    async with PushConsumer("HaClientRunCG", namesrv.addr, {TOPIC: "*"}, listener, consume_from="first",
                            pull_threshold_for_queue=20, pull_batch_size=8) as consumer:
        acked.update(await _produce(namesrv.addr))
        assert len(acked) == COUNT
        await wait_until(lambda: len(got) >= 300, 10)
        await wait_until(lambda: trio.to_thread.run_sync(topic_synced, slave, TOPIC), 10, interval=0.05)
        assert len(got) < COUNT // 2  # most are still on the broker
        master.kill()  # kill -9
        pulled_at_kill = consumer.stats.pulled
        t0 = time.monotonic()
        killed.set()
        with trio.fail_after(15):
            await done.wait()
        print(f"running push consumer: the last {len(got) - 300} messages from the slave in "
              f"{time.monotonic() - t0:.2f} s ({consumer.stats.pull_errors} failed pulls)")
        assert consumer.stats.pulled > pulled_at_kill + COUNT // 2  # pulled from the slave
    _check(acked, got)
