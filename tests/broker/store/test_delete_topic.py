"""Deleting a topic's consume queues (``cleanUnusedTopic``) while puts and reads go on."""

from __future__ import annotations

import os
import threading

import pytest

from trocket.broker.store import MessageStore
from trocket.broker.store.results import GetStatus

from ...waiting import wait_until_sync
from .conftest import msg


def _cq_dirs(config) -> set[str]:
    return set(os.listdir(config.consume_queue_dir))


def test_clean_unused_topics_removes_queues_files_and_offsets(store, config):
    for i in range(3):
        store.put_message(msg("Gone", b"g%d" % i, queue_id=i % 2))
    store.put_message(msg("Kept", b"k"))
    store.put_message(msg("SCHEDULE_TOPIC_XXXX", b"s", properties={"DELAY": "1", "REAL_TOPIC": "x", "REAL_QID": "0"}))
    held = store.get_message("G", "Gone", 0, 0).buffers  # a reader's views, held across the deletion
    assert {"Gone", "Kept", "SCHEDULE_TOPIC_XXXX"} <= _cq_dirs(config)

    detached = store.clean_unused_topics({"Kept"})
    assert [d.topic for d in detached] == ["Gone"]
    assert "Gone" not in store.topics() and store.get_max_offset("Gone", 0) == 0
    assert store.commit_log.next_queue_offset("Gone", 0) is None
    assert "Gone" not in store.commit_log.queue_offsets
    # the directory is moved aside at once: a queue made right now starts afresh
    assert "Gone" not in _cq_dirs(config)
    store.destroy_detached(detached)
    for d in detached:
        d.remove_files()
    assert _cq_dirs(config) == {"Kept", "SCHEDULE_TOPIC_XXXX"}  # schedule topic kept, as Java
    assert b"g0" in bytes(held[0])  # the held view still reads its record
    for v in held:
        v.release()

    assert store.get_message("G", "Gone", 0, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE
    result = store.put_message(msg("Gone", b"again"))
    assert result.queue_offset == 0
    got = store.get_message("G", "Gone", 0, 0)
    assert got.status is GetStatus.FOUND and b"again" in bytes(got.buffers[0])
    got.release()
    assert store.clean_unused_topics({"Kept", "Gone"}) == []


def test_deletion_while_threads_put_keeps_queues_consistent(store, config):
    """Puts to the topic from two threads while it is deleted three times: every queue
    left is dense from its first offset, and matches the commit log's next offsets."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def putter(qid: int) -> None:
        try:
            while not stop.is_set():
                store.put_message(msg("Busy", b"x" * 50, queue_id=qid))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=putter, args=(q,)) for q in (0, 1)]
    for t in threads:
        t.start()
    try:
        for _ in range(3):
            wait_until_sync(lambda: store.get_max_offset("Busy", 0) >= 20 or errors, 10, interval=0.001)
            assert not errors
            detached = store.clean_unused_topics(set())
            store.destroy_detached(detached)
            for d in detached:
                d.remove_files()
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors
    for qid in (0, 1):
        cq = store.queues.find("Busy", qid)
        if cq is None:
            continue
        assert cq.min_offset == 0
        assert store.commit_log.next_queue_offset("Busy", qid) == cq.max_offset
        for off in range(cq.max_offset):
            assert cq.get(off) is not None
    assert not [n for n in _cq_dirs(config) if n.startswith(".deleted.")]


def test_left_over_trash_is_removed_on_open(config):
    s = MessageStore.open(config)
    s.put_message(msg("T"))
    s.shutdown()
    trash = os.path.join(config.consume_queue_dir, ".deleted.T.1.1", "0")
    os.makedirs(trash)
    s = MessageStore.open(config)
    try:
        assert s.topics() == {"T"}
        assert not os.path.exists(os.path.dirname(trash))
    finally:
        s.shutdown()


def test_retention_and_flush_skip_a_queue_unmapped_under_them(store):
    """A retention pass or a flush (worker threads) that picked a queue and its files
    before the topic was deleted and reads them after the unmap does not fail."""
    from trocket.broker.store.retention import delete_expired

    for i in range(120):  # three 50-entry files
        store.put_message(msg("Gone", b"g%d" % i))
    cq = store.queues.find("Gone", 0)
    files = cq.files.files  # what a pass already looked at
    detached = store.clean_unused_topics(set())
    store.destroy_detached(detached)
    assert cq.closed and all(mf.closed for mf in files)
    for mf in files:
        mf.wrote_position += 20  # as if written before the unmap and not yet flushed
        assert mf.flush() == mf.flushed_position
    # the pass still sees the queue with its (now unmapped) files
    cq.files._files = files
    store.queues._queues[("Gone", 0)] = cq
    try:
        with pytest.raises(ValueError):
            cq.delete_expired(store.commit_log.min_offset)
        delete_expired(store.config, store.commit_log, store.queues, force=True)
    finally:
        del store.queues._queues[("Gone", 0)]
    for d in detached:
        d.remove_files()


def test_a_clean_restart_does_not_bring_a_deleted_topic_back(config):
    s = MessageStore.open(config)
    for _ in range(5):
        s.put_message(msg("Gone"))
    s.put_message(msg("Kept"))
    detached = s.clean_unused_topics({"Kept"})
    s.destroy_detached(detached)
    for d in detached:
        d.remove_files()
    s.shutdown()
    s = MessageStore.open(config)
    try:
        assert s.topics() == {"Kept"}
        assert s.put_message(msg("Gone")).queue_offset == 0
    finally:
        s.shutdown()
