from __future__ import annotations

import ctypes
import mmap
import os
import shutil

import pytest

from trocket.broker.store import GetStatus, MessageStore, StoreLoadError
from trocket.broker.store.mapped_file import data_ranges
from trocket.codecs.message.record import iter_records

from .conftest import msg, small_config

QUEUES = 3


def fill(store, n, body_size=300):
    return [store.put_message(msg(body=bytes([i % 251]) * body_size, queue_id=i % QUEUES, tags=f"t{i}")) for i in range(n)]


def served(store):
    """Every record served through the consume queues, checked against the commit log."""
    out = []
    for qid in range(QUEUES):
        cq = store.queues.find("T", qid)
        offset = 0
        while True:
            got = store.get_message("G", "T", qid, offset, 32)
            if got.status is not GetStatus.FOUND:
                assert got.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE)
                break
            for m, qo in zip(iter_records(got.joined(), check_crc=True), got.queue_offsets):
                assert m.queue_id == qid and m.queue_offset == qo
                out.append(m)
            offset = got.next_begin_offset
        if cq is not None:
            assert cq.max_physic_offset <= store.max_phy_offset
    return sorted(out, key=lambda m: m.commit_log_offset)


def commit_log_file(config, offset):
    seg = config.commit_log_segment_size
    return os.path.join(config.commit_log_dir, f"{offset - offset % seg:020d}"), offset % seg


def patch_file(config, offset, data):
    path, pos = commit_log_file(config, offset)
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def reopen_after_crash(config, store):
    store.abandon()
    assert os.path.exists(config.abort_path)
    return MessageStore.open(config)


def test_clean_shutdown_fast_path(config):
    store = MessageStore.open(config)
    results = fill(store, 300)
    store.shutdown()
    assert not os.path.exists(config.abort_path)
    store = MessageStore.open(config)
    assert store.recovery.method == "checkpoint" and not store.recovery.abnormal
    assert [m.commit_log_offset for m in served(store)] == [r.physical_offset for r in results]
    r = store.put_message(msg(queue_id=0))
    assert r.queue_offset == 100 and r.physical_offset == results[-1].end_offset
    store.shutdown()


def test_crash_without_damage_keeps_everything(config):
    store = MessageStore.open(config)
    results = fill(store, 300)
    store = reopen_after_crash(config, store)
    assert store.recovery.method == "scan-abnormal" and store.recovery.truncated_bytes == 0
    assert len(served(store)) == 300
    assert store.max_phy_offset == results[-1].end_offset
    store.shutdown()


@pytest.mark.parametrize("damage", ["torn", "garbage", "bad_crc"])
def test_crash_with_damaged_tail(config, damage):
    store = MessageStore.open(config)
    results = fill(store, 300)
    good = 300
    if damage == "torn":
        # the last record only half written
        last = results[-1]
        patch_file(config, last.physical_offset + last.wrote_bytes // 2, bytes(last.wrote_bytes // 2))
        good = 299
    elif damage == "garbage":
        patch_file(config, results[-1].end_offset, os.urandom(700))
    else:
        # a record in the middle whose body no longer matches its CRC
        bad = results[250]
        patch_file(config, bad.physical_offset + 100, b"\xff\xfe")
        good = 250
    store = reopen_after_crash(config, store)
    got = served(store)
    assert [m.commit_log_offset for m in got] == [r.physical_offset for r in results[:good]]
    assert store.max_phy_offset == results[good - 1].end_offset
    assert store.recovery.truncated_bytes > 0
    for qid in range(QUEUES):
        assert store.get_max_offset("T", qid) == len([r for r in results[:good] if r.queue_id == qid])
    # the tail was zeroed: a new record goes right after the last good one
    r = store.put_message(msg(queue_id=good % QUEUES, body=b"after"))
    assert r.physical_offset == results[good - 1].end_offset
    assert r.queue_offset == len([x for x in results[:good] if x.queue_id == good % QUEUES])
    # and survives a second crash, with nothing of the damage resurrected
    store = reopen_after_crash(config, store)
    got = served(store)
    assert len(got) == good + 1 and got[-1].body == b"after"
    store.shutdown()


def test_crash_rebuilds_lost_consume_queue_entries(config):
    store = MessageStore.open(config)
    results = fill(store, 300)
    store.abandon()
    # consume queues lost entirely (not flushed): rebuilt from the commit log
    shutil.rmtree(config.consume_queue_dir)
    store = MessageStore.open(config)
    assert store.recovery.redispatched == 300
    assert [m.commit_log_offset for m in served(store)] == [r.physical_offset for r in results]
    store.shutdown()


def test_consume_queue_pointing_past_end_is_truncated(config):
    store = MessageStore.open(config)
    results = fill(store, 60)
    store.abandon()
    # the commit log lost its last 10 records (never reached the disk) but the
    # consume queues kept their entries
    cut = results[50].physical_offset
    path, pos = commit_log_file(config, cut)
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(bytes(os.path.getsize(path) - pos))
    store = MessageStore.open(config)
    assert len(served(store)) == 50 and store.recovery.dropped_entries == 10
    for qid in range(QUEUES):
        assert store.get_max_offset("T", qid) == len([r for r in results[:50] if r.queue_id == qid])
    store.shutdown()


def test_crash_across_segments(tmp_path, monkeypatch):
    import trocket.broker.store.commit_log as cl

    clock = iter(range(10**6, 10**9, 10_000))  # one record every 10 s
    monkeypatch.setattr(cl.time, "time_ns", lambda: next(clock) * 1_000_000)
    config = small_config(tmp_path)
    store = MessageStore.open(config)
    results = fill(store, 600, body_size=900)  # ~10 segments
    assert len(store.commit_log.files) > 5
    # the checkpoint says everything up to record 450 was durable: scanning starts at
    # the last segment whose first record is older than that (minus Java's 3 s)
    store.checkpoint.physic_msg_timestamp = results[450].store_timestamp + 3000
    store.checkpoint.logics_msg_timestamp = results[450].store_timestamp + 3000
    store.checkpoint.flush()
    store = reopen_after_crash(config, store)
    seg = config.commit_log_segment_size
    assert store.recovery.scan_start == results[450].physical_offset - results[450].physical_offset % seg
    assert store.recovery.scan_start > 0
    assert len(served(store)) == 600
    assert store.max_phy_offset == results[-1].end_offset
    store.shutdown()


def test_store_dir_is_locked(config):
    store = MessageStore.open(config)
    with pytest.raises(StoreLoadError):
        MessageStore.open(config)
    store.shutdown()


def _data_ranges_of(path, size):
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(data_ranges(fd, 0, size))
    finally:
        os.close(fd)


def _resident_pages(path, size):
    """How many of the file's pages are in the page cache (``mincore``); None where
    that cannot be asked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            vec = (ctypes.c_ubyte * ((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE))()
            if libc.mincore(addr, size, vec) != 0:
                return None
            return sum(b & 1 for b in vec)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


@pytest.mark.parametrize("crash", [True, False])
def test_garbage_past_the_end_is_zeroed_and_nothing_beyond_touched(tmp_path, crash):
    """A 256 MiB segment holding a few KB, with garbage just past the end (a torn
    record) and a stale page further on: recovery zeroes both, and no page of the
    empty rest is read (it stays a hole / unwritten: the data ranges are unchanged)."""
    size = 256 << 20
    config = small_config(tmp_path / "store", commit_log_segment_size=size)
    store = MessageStore.open(config)
    results = fill(store, 30)
    end = results[-1].end_offset
    if crash:
        store.abandon()
    else:
        store.shutdown()
    patch_file(config, end, b"\xab" * 200)
    patch_file(config, end + (3 << 20), b"\xcd" * 4096)
    path, _ = commit_log_file(config, 0)
    before = _data_ranges_of(path, size)
    store = MessageStore.open(config)
    report = store.recovery
    assert report.commit_log_end == end and report.truncated_bytes > 0
    # after a clean shutdown the checkpoint's end is not trusted: bytes follow it
    assert report.method == ("scan-abnormal" if crash else "scan-normal")
    mf = store.commit_log.files.last
    assert bytes(mf.read_raw(end, 200)) == bytes(200)
    assert bytes(mf.read_raw(end + (3 << 20), 4096)) == bytes(4096)
    assert [m.commit_log_offset for m in served(store)] == [r.physical_offset for r in results]
    assert _data_ranges_of(path, size) == before
    resident = _resident_pages(path, size)
    assert resident is None or resident * mmap.PAGESIZE <= 16 << 20  # not 256 MiB read in
    r = store.put_message(msg(queue_id=0))  # the zeroed range is written over safely
    assert r.physical_offset == end
    store.shutdown()
    store = MessageStore.open(config)
    assert len(served(store)) == 31
    store.shutdown()
