from __future__ import annotations

import threading

import trio
import trio.testing

from trocket.broker.store import MessageStore, PutStatus

from ...waiting import wait_until
from .conftest import msg, small_config


async def test_sync_put_returns_after_flush(tmp_path):
    store = MessageStore.open(small_config(tmp_path, flush_mode="SYNC"))
    gate = threading.Event()
    fsyncing = threading.Event()

    def held_fsync():
        fsyncing.set()
        gate.wait(5)

    store.flush_service.flush_hook = held_fsync
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        done = []
        sent = trio.Event()

        async def send():
            done.append(await store.async_put_message(msg(body=b"d" * 100)))
            sent.set()

        nursery.start_soon(send)
        await wait_until(fsyncing.is_set, 5)  # the message is written, its fsync under way
        await trio.testing.wait_all_tasks_blocked()
        assert not done  # the fsync is held back: the send must still be waiting
        assert store.flushed_offset == 0 and store.max_phy_offset > 0
        gate.set()
        with trio.fail_after(5):
            await sent.wait()
        result = done[0]
        assert result.status is PutStatus.PUT_OK
        assert store.flushed_offset >= result.end_offset
        nursery.cancel_scope.cancel()
    store.shutdown()


async def test_group_commit_shares_fsyncs(tmp_path):
    store = MessageStore.open(small_config(tmp_path, flush_mode="SYNC", commit_log_segment_size=1 << 20))
    disk = threading.Event()
    # a slow disk: it answers once every sender waits on it
    store.flush_service.flush_hook = lambda: disk.wait(10)
    results = []
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        before = store.flush_service.flush_count

        async def send(i):
            results.append(await store.async_put_message(msg(body=b"%d" % i, queue_id=i % 4)))

        async with trio.open_nursery() as senders:
            for i in range(200):
                senders.start_soon(send, i)
            await trio.testing.wait_all_tasks_blocked()
            disk.set()
        fsyncs = store.flush_service.flush_count - before
        nursery.cancel_scope.cancel()
    assert len(results) == 200 and all(r.status is PutStatus.PUT_OK for r in results)
    assert all(store.flushed_offset >= r.end_offset for r in results)
    assert 1 <= fsyncs <= 10, fsyncs  # 200 sends, a handful of fsyncs
    store.shutdown()


async def test_sync_flush_timeout(tmp_path):
    store = MessageStore.open(small_config(tmp_path, flush_mode="SYNC", sync_flush_timeout_ms=50))
    gate = threading.Event()
    store.flush_service.flush_hook = lambda: gate.wait(5)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        r = await store.async_put_message(msg())
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
        # WAIT=false does not wait at all
        r2 = await store.async_put_message(msg(properties={"WAIT": "false"}))
        assert r2.status is PutStatus.PUT_OK
        gate.set()
        nursery.cancel_scope.cancel()
    store.shutdown()


async def test_async_flush_is_timed_and_writes_checkpoint(tmp_path):
    config = small_config(tmp_path, flush_interval_ms=20, flush_least_pages=0, flush_consume_queue_interval_ms=20)
    store = MessageStore.open(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        r = await store.async_put_message(msg())  # ASYNC: does not wait
        assert r.status is PutStatus.PUT_OK
        with trio.fail_after(2):
            assert await store.flush_service.wait_flushed(r.end_offset, timeout=2)
        await wait_until(lambda: store.checkpoint.logics_msg_timestamp, 2)
        assert store.checkpoint.physic_msg_timestamp == r.store_timestamp
        assert store.checkpoint.logics_msg_timestamp == r.store_timestamp
        nursery.cancel_scope.cancel()
    store.shutdown()


async def test_puts_from_worker_threads(tmp_path):
    store = MessageStore.open(small_config(tmp_path, commit_log_segment_size=1 << 20))

    def worker(q):
        return [store.put_message(msg(queue_id=q, body=b"w")).queue_offset for _ in range(300)]

    async with trio.open_nursery() as nursery:
        out = {}

        async def run(q):
            out[q] = await trio.to_thread.run_sync(worker, q % 2)

        for q in range(4):
            nursery.start_soon(run, q)
    for qid in (0, 1):
        offsets = sorted(out[qid] + out[qid + 2])
        assert offsets == list(range(600))
        got = store.get_message("G", "T", qid, 0, 32)
        assert got.queue_offsets == list(range(32))
    ns, count = store.lock_stats()
    assert count == 1200 and ns > 0
    store.shutdown()
