"""The next commit-log segment made ahead of need (AllocateService), with real files.

The service's loop runs its builds inline here (``to_thread``), so
``wait_all_tasks_blocked`` means "the build is done"; ``allocate_once`` is also tested
with the real worker thread.
"""

from __future__ import annotations

import errno
import logging
import os

import trio
import trio.testing

from trocket.broker.store import MessageStore
from trocket.broker.store import allocate as allocate_mod
from trocket.broker.store.mapped_file import MappedFile, data_ranges, segment_name

from .conftest import msg, small_config
from .test_recovery import served

SEG = 64 * 1024


async def inline(fn, *args):
    return fn(*args)


def seg_path(config, offset: int) -> str:
    return os.path.join(config.commit_log_dir, segment_name(offset))


def put_until(store, offset: int) -> list:
    """Put 300-byte messages until the commit log passes ``offset``."""
    results = []
    while store.max_phy_offset <= offset:
        results.append(store.put_message(msg(body=b"x" * 300, queue_id=len(results) % 3)))
    return results


async def test_spare_is_made_in_a_thread_and_taken_at_rollover(tmp_path):
    config = small_config(tmp_path / "store")
    store = MessageStore.open(config)
    files = store.commit_log.files
    svc = store.allocate_service
    assert svc is not None
    assert not await svc.allocate_once()  # no segment yet: nothing to make ahead
    first = store.put_message(msg())
    assert files.created_inline == 1
    assert await svc.allocate_once()  # real worker thread
    spare = files.spare
    assert spare is not None and spare.file_from_offset == SEG
    assert os.path.getsize(seg_path(config, SEG)) == SEG
    assert bytes(spare.read_raw(0, SEG)) == bytes(SEG)  # reads as an empty segment...
    assert list(data_ranges(spare._fd, 0, SEG))  # ...with its first write fault taken
    assert [mf.file_from_offset for mf in files] == [0]  # not part of the log yet
    assert files.spare_wanted() is None and not await svc.allocate_once()

    results = [first, *put_until(store, SEG)]
    assert files.files[-1] is spare and files.spare is None
    assert (files.spares_taken, files.created_inline) == (1, 1)
    assert results[-1].physical_offset == SEG
    assert [m.commit_log_offset for m in served(store)] == [r.physical_offset for r in results]
    store.shutdown()


async def test_loop_makes_a_spare_after_every_new_segment(tmp_path, autojump_clock):
    config = small_config(tmp_path / "store")
    store = MessageStore.open(config)
    files = store.commit_log.files
    svc = store.allocate_service
    svc.to_thread = inline
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        store.put_message(msg())  # creates segment 0 inline, wakes the service
        await trio.testing.wait_all_tasks_blocked()
        assert files.spare is not None and files.spare.file_from_offset == SEG
        for n in (1, 2, 3):
            put_until(store, n * SEG)
            await trio.testing.wait_all_tasks_blocked()
            assert files.spare is not None and files.spare.file_from_offset == (n + 1) * SEG
        assert (files.spares_taken, files.created_inline, svc.built) == (3, 1, 4)
        nursery.cancel_scope.cancel()
    assert files.on_new_segment is None
    store.shutdown()
    assert not os.path.exists(seg_path(config, 4 * SEG))  # the unused spare is gone
    assert sorted(os.listdir(config.commit_log_dir)) == [segment_name(i * SEG) for i in range(4)]


async def test_failed_build_falls_back_to_inline_and_is_retried(tmp_path, autojump_clock, monkeypatch, caplog):
    config = small_config(tmp_path / "store")
    store = MessageStore.open(config)
    files = store.commit_log.files
    svc = store.allocate_service
    svc.to_thread = inline
    calls = []

    def disk_full(path, size, *, preallocate):
        calls.append(path)
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(allocate_mod, "create_segment_file", disk_full)
    caplog.set_level(logging.WARNING, logger=allocate_mod.__name__)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        store.put_message(msg())
        await trio.testing.wait_all_tasks_blocked()
        assert files.spare is None and svc.failures == 1
        results = put_until(store, SEG)  # the rollover creates the segment itself
        assert results[-1].physical_offset == SEG and files.created_inline == 2
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(svc.retry_interval * 2.5)  # retried on its period
        assert svc.failures >= 3
        assert len([r for r in caplog.records if "ahead" in r.getMessage()]) == 1  # logged once
        assert not any(n.endswith(".alloc") for n in os.listdir(config.commit_log_dir))
        monkeypatch.undo()
        await trio.sleep(svc.retry_interval)
        assert files.spare is not None and files.spare.file_from_offset == 2 * SEG
        nursery.cancel_scope.cancel()
    store.shutdown()


async def test_allocate_ahead_off(tmp_path):
    config = small_config(tmp_path / "store", allocate_ahead=False)
    store = MessageStore.open(config)
    assert store.allocate_service is None
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        results = put_until(store, 2 * SEG)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    files = store.commit_log.files
    assert files.spare is None and (files.spares_taken, files.created_inline) == (0, 3)
    assert len(served(store)) == len(results)
    store.shutdown()


def test_log_moved_on_while_building_drops_the_built_file(tmp_path):
    config = small_config(tmp_path / "store")
    store = MessageStore.open(config)
    files = store.commit_log.files
    store.put_message(msg())
    built = MappedFile.open(files.alloc_path(SEG), SEG, create=True, file_from_offset=SEG)
    put_until(store, SEG)  # the put made segment SEG itself meanwhile
    assert not files.offer_spare(built)
    assert files.spare is None and built.path == files.alloc_path(SEG)
    built.delete()
    store.shutdown()


# -- recovery with a segment made ahead left on disk (kill -9 states, built directly) --


def test_crash_with_an_unused_spare_recovers(tmp_path):
    config = small_config(tmp_path / "store")
    store = MessageStore.open(config)
    results = put_until(store, SEG // 2)
    trio.run(store.allocate_service.allocate_once)
    assert os.path.exists(seg_path(config, SEG))
    store.abandon()  # as kill -9: abort file and spare stay
    store = MessageStore.open(config)
    assert store.recovery.abnormal and store.recovery.commit_log_end == results[-1].end_offset
    assert not os.path.exists(seg_path(config, SEG))  # past the end: deleted
    assert store.recovery.truncated_bytes == 0  # nothing was lost with it
    assert len(served(store)) == len(results)
    r = store.put_message(msg())
    assert r.physical_offset == results[-1].end_offset
    store.shutdown()


def test_clean_end_with_a_spare_left_on_disk(tmp_path):
    """Killed after the clean-shutdown checkpoint but before the spare was deleted."""
    config = small_config(tmp_path / "store")
    store = MessageStore.open(config)
    results = put_until(store, SEG // 2)
    store.shutdown()
    with open(seg_path(config, SEG), "wb") as f:
        f.truncate(SEG)
        f.seek(0)
        f.write(b"\0")  # the touched first page
    store = MessageStore.open(config)
    assert store.recovery.method == "checkpoint"
    assert store.max_phy_offset == results[-1].end_offset
    assert not os.path.exists(seg_path(config, SEG))
    assert len(served(store)) == len(results)
    store.shutdown()


def test_crash_right_after_rolling_onto_the_spare(tmp_path):
    """The last full segment ends with its blank record and the next one (the spare
    just taken) holds nothing: the log ends at the boundary and the empty segment is
    kept and written next."""
    config = small_config(tmp_path / "store")
    store = MessageStore.open(config)
    results = put_until(store, SEG)
    store.abandon()
    with open(seg_path(config, SEG), "r+b") as f:  # the record in it never got there
        f.write(bytes(SEG))
    store = MessageStore.open(config)
    assert store.recovery.commit_log_end == SEG
    assert [mf.file_from_offset for mf in store.commit_log.files] == [0, SEG]
    assert len(served(store)) == len(results) - 1
    r = store.put_message(msg())
    assert r.physical_offset == SEG
    store.shutdown()
    store = MessageStore.open(config)
    assert len(served(store)) == len(results)
    store.shutdown()


def test_leftover_of_a_cut_short_build_is_deleted_at_open(tmp_path):
    config = small_config(tmp_path / "store")
    store = MessageStore.open(config)
    results = put_until(store, 1000)
    store.abandon()
    leftover = os.path.join(config.commit_log_dir, segment_name(SEG) + ".alloc")
    with open(leftover, "wb") as f:
        f.write(b"\0" * 100)  # killed between create and ftruncate
    store = MessageStore.open(config)
    assert not os.path.exists(leftover)
    assert len(served(store)) == len(results)
    store.shutdown()


def test_retention_never_deletes_the_spare(tmp_path):
    config = small_config(tmp_path / "store", file_reserved_time_hours=1)
    store = MessageStore.open(config)
    put_until(store, SEG + 100)
    trio.run(store.allocate_service.allocate_once)
    spare = store.commit_log.files.spare
    assert spare is not None
    old = 1_000_000_000
    for name in os.listdir(config.commit_log_dir):
        os.utime(os.path.join(config.commit_log_dir, name), (old, old))
    result = store.delete_expired(force=True)
    assert result.commit_log_segments == 1  # the full first one; never the last, never the spare
    assert [mf.file_from_offset for mf in store.commit_log.files] == [SEG]
    assert store.commit_log.files.spare is spare and os.path.exists(spare.path)
    store.shutdown()
