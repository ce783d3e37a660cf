"""The index service (Java's IndexFile/IndexService layout): keys and unique keys found by
topic and time, hash chains, full files followed by new ones, building off the commit
log, resuming after a restart and after a crash, retention."""

from __future__ import annotations

import os
import struct
import time

import trio
import trio.testing

from trocket.broker.store import MessageStore
from trocket.broker.store.index import HEADER_SIZE, IndexFile, IndexService, index_key_hash
from trocket.codecs.java_hashmap import java_string_hash

from ...waiting import wait_until
from .conftest import msg, small_config


def test_key_hash_is_javas_non_negative_hashcode():
    assert index_key_hash("T#k1") == java_string_hash("T#k1")  # positive already
    assert java_string_hash("polygenelubricants") == 0x80000000  # Integer.MIN_VALUE: abs stays negative
    assert index_key_hash("polygenelubricants") == 0
    neg = next(s for s in (f"{i}#Topic-key" for i in range(1000)) if java_string_hash(s) & 0x80000000)
    assert index_key_hash(neg) == (1 << 32) - java_string_hash(neg)


def test_index_file_layout_chains_and_time(tmp_path):
    f = IndexFile.create(str(tmp_path / "20260101000000000"), slot_num=4, index_num=8)
    assert os.path.getsize(f.path) == HEADER_SIZE + 4 * 4 + 8 * 20
    base = 1_700_000_000_000
    # hashes 1 and 5 share slot 1 (5 % 4): one chain, newest first
    assert f.put(1, 100, base) and f.put(5, 200, base + 2000) and f.put(1, 300, base + 4000)
    out: list[int] = []
    f.select(out, 1, 10, base, base + 10_000)
    assert out == [300, 100]
    out = []
    f.select(out, 1, 10, base + 3000, base + 10_000)  # the older entry is outside the time range
    assert out == [300]
    # Java's header, byte for byte: begin/end times and offsets, chains started (Java's
    # hashSlotCount: a put to an empty slot), entries (+1: entry 0 is never used)
    assert struct.unpack_from(">qqqqii", f.mf.view, 0) == (base, base + 4000, 100, 300, 1, 4)
    for i in range(4):
        assert f.put(7, 400 + i, base + 5000)
    assert f.full and not f.put(7, 500, base + 6000)  # entry 0 never used: 7 of 8 slots' entries
    f.close()
    g = IndexFile.load(f.path, 4, 8)
    assert (g.index_count, g.end_phy_offset, g.hash_slot_count) == (8, 403, 2)
    g.close()


def _keyed(i: int, topic: str = "IT"):
    return msg(topic, f"body {i}".encode(), properties={"KEYS": f"order-{i} shared", "UNIQ_KEY": f"U{i:030d}"})


def _open(path, **kw) -> MessageStore:
    return MessageStore.open(small_config(path, max_hash_slot_num=64, max_index_num=40, **kw))


def test_build_query_new_files_restart_and_retention(tmp_path):
    store = _open(tmp_path / "s")
    index = store.index
    assert index is not None
    phys = [store.put_message(_keyed(i)).physical_offset for i in range(30)]
    store.put_message(msg("Other", b"x", properties={"KEYS": "order-1"}))
    assert index.build(store.commit_log, store.dispatcher.dispatched_offset) == 31
    # 30 messages x 3 keys + 1: 91 keys in files of 39 entries each
    assert index.keys_indexed == 91 and len(index.files) == 3
    now = int(time.time() * 1000)
    records, last_ts, last_phy = store.query_message("IT", "order-7", 10, 0, now + 1000)
    assert len(records) == 1 and bytes(records[0]).find(b"body 7") > 0
    records[0].release()
    offsets, _, _ = index.query("IT", "order-7", 10, 0, now + 1000)
    assert offsets == [phys[7]]
    assert sorted(index.query("IT", "shared", 64, 0, now + 1000)[0]) == phys  # one key, every message
    assert index.query("IT", "shared", 5, 0, now + 1000)[0] == phys[-5:][::-1]  # the newest first, max 5
    assert index.query("IT", f"U{3:030d}", 1, 0, now + 1000)[0] == [phys[3]]
    assert index.query("Other", "order-1", 10, 0, now + 1000)[0] != index.query("IT", "order-1", 10, 0, now + 1000)[0]
    assert index.query("IT", "order-7", 10, now + 5000, now + 9000)[0] == []  # outside the time range
    assert index.query("IT", "nope", 10, 0, now + 1000)[0] == []
    assert last_phy == index.files[-1].end_phy_offset and last_ts > 0
    other = index.query("Other", "order-1", 10, 0, now + 1000)[0]
    store.shutdown()

    # a restart goes on at the last record indexed (again: a kill may have cut its keys
    # short); a query names it once
    store = _open(tmp_path / "s")
    assert store.index.next_offset == other[0] == store.index.files[-1].end_phy_offset
    store.put_message(_keyed(99))
    assert store.index.build(store.commit_log, store.dispatcher.dispatched_offset) == 2
    later = int(time.time() * 1000) + 1000
    assert store.index.query("IT", "order-99", 10, 0, later)[0] != []
    assert store.index.query("Other", "order-1", 10, 0, later)[0] == other
    # retention: files whose messages are all gone go (never the last)
    files = list(store.index.files)
    assert store.index.delete_expired(files[1].end_phy_offset + 1) == 2
    assert store.index.files == files[2:] and not os.path.exists(files[0].path)
    store.shutdown()


def test_every_acknowledged_key_is_indexed_after_a_crash(tmp_path):
    async def main() -> None:
        store = _open(tmp_path / "c")
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            phys = [store.put_message(_keyed(i)).physical_offset for i in range(20)]
            # the crash comes once the index task indexed some (or all) of them
            await wait_until(lambda: store.index.next_offset > phys[0], 5, interval=0.001, what="a key indexed")
            nursery.cancel_scope.cancel()
        store.abandon()  # a crash: nothing flushed, the abort file stays
        store = _open(tmp_path / "c")
        assert store.recovery.abnormal
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            with trio.fail_after(5):
                while store.index.next_offset < store.commit_log.max_offset:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        now = int(time.time() * 1000) + 1000
        for i, phy in enumerate(phys):
            assert store.index.query("IT", f"order-{i}", 10, 0, now)[0] == [phy], i
        store.shutdown()

    trio.run(main)


def test_the_index_task_waits_for_the_next_record_once_caught_up(tmp_path):
    """Caught up, the index task waits for the next dispatch (a one-shot wake-up
    registered for the wait only, no 10 ms timer: an idle broker, and a test's MockClock,
    are not held back); the record that wakes it is indexed TICK_SECONDS later and drops
    the wake-up; while records come it registers nothing, and no listener ever."""
    from trocket.broker.store import index as index_module

    async def main() -> None:
        store = _open(tmp_path / "i")
        listening = lambda: len(store.dispatcher._wakeups)  # noqa: E731
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            await trio.testing.wait_all_tasks_blocked()
            assert listening() == 1  # nothing to index: it waits on the dispatcher
            await trio.sleep(5.5)
            await trio.testing.wait_all_tasks_blocked()
            assert listening() == 1  # still waiting (it looks once a second, for a record nobody announced)
            assert store.dispatcher._listeners == ()
            store.put_message(_keyed(0))
            assert listening() == 0  # the put that woke it dropped the wake-up
            start = trio.current_time()
            while store.index.next_offset < store.commit_log.max_offset:
                await trio.sleep(0.001)
            assert trio.current_time() - start <= index_module.TICK_SECONDS + 0.002
            # records coming faster than the tick: indexed in passes, no listener meanwhile
            seen = []
            for i in range(1, 40):
                store.put_message(_keyed(i))
                seen.append(listening())
                await trio.sleep(0.002)
            assert seen.count(0) >= 30, seen
            while store.index.next_offset < store.commit_log.max_offset:
                await trio.sleep(0.001)
            nursery.cancel_scope.cancel()
        now = int(time.time() * 1000) + 1000
        assert all(store.index.query("IT", f"order-{i}", 10, 0, now)[0] for i in range(40))
        store.shutdown()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_populate_takes_a_files_write_faults_without_changing_a_byte(tmp_path):
    """MappedFile.populate (madvise MADV_POPULATE_WRITE): the pages of the range get
    their blocks (the sparse file grows on disk) and their bytes stay as they were."""
    f = IndexFile.create(str(tmp_path / "20260101000000000"), slot_num=4096, index_num=2048)
    base = 1_700_000_000_000
    for i in range(50):
        assert f.put(index_key_hash(f"T#k{i}"), 1000 + i, base + i)
    before = bytes(f.mf.view)
    blocks = os.stat(f.path).st_blocks
    assert f.mf.populate(HEADER_SIZE + 1, f.mf.file_size)  # from the start of its page
    assert bytes(f.mf.view) == before
    assert os.stat(f.path).st_blocks * 512 >= f.mf.file_size - 4096 > blocks * 512
    f.close()
    assert not f.mf.populate(0, 4096)  # closed: nothing to populate


def test_the_index_task_flushes_full_files_in_a_thread_and_populates_ahead(tmp_path, monkeypatch):
    """A full file's fdatasync runs in a worker thread, not on the event loop's; once the
    last file holds PREFAULT_AFTER_ENTRIES, its slot table (in chunks) and the entries
    ahead of the next are populated, so the puts find their pages made; every key is
    found as before."""
    import threading

    from trocket.broker.store import index as index_module

    monkeypatch.setattr(index_module, "PREFAULT_AFTER_ENTRIES", 16)
    monkeypatch.setattr(index_module, "PREFAULT_CHUNK", 4096)
    monkeypatch.setattr(index_module, "PREFAULT_AHEAD", 8192)
    flushed: list[tuple[str, bool]] = []
    flush = IndexFile.flush

    def recording_flush(self: IndexFile) -> None:
        flushed.append((os.path.basename(self.path), threading.current_thread() is threading.main_thread()))
        flush(self)

    monkeypatch.setattr(IndexFile, "flush", recording_flush)

    async def main() -> None:
        store = MessageStore.open(small_config(tmp_path / "p", max_hash_slot_num=3000, max_index_num=900))
        index = store.index
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            for i in range(400):  # 3 keys each: 1,200 entries, two files
                store.put_message(_keyed(i))
                if i % 50 == 49:  # the index task's passes come between the batches
                    await wait_until(lambda: index.next_offset == store.commit_log.max_offset, 5, interval=0.001,
                                     what="a batch indexed")
            with trio.fail_after(5):
                while index.next_offset < store.commit_log.max_offset:
                    await trio.sleep(0.01)
            assert len(index.files) == 2 and flushed == [(os.path.basename(index.files[0].path), False)]
            last = index.files[-1]
            entries_at = HEADER_SIZE + 3000 * 4
            # a pass after the last tops the pages ahead up
            await wait_until(lambda: last.populated >= entries_at + last.index_count * 20 + 4096, 5,
                             what=lambda: f"pages populated ahead: {last.populated}")
            assert os.stat(last.path).st_blocks * 512 >= last.populated - 4096
            nursery.cancel_scope.cancel()
        now = int(time.time() * 1000) + 1000
        assert all(index.query("IT", f"order-{i}", 10, 0, now)[0] for i in range(400))
        store.shutdown()

    trio.run(main)
