from __future__ import annotations

import os
import time

from trocket.broker.store import GetStatus, MessageStore

from .conftest import msg, small_config

HOUR = 3600


def test_delete_expired_segments_and_queues(tmp_path):
    config = small_config(tmp_path, consume_queue_entries_per_file=20, delete_when="99")
    store = MessageStore.open(config)
    for i in range(400):
        store.put_message(msg(body=b"r" * 900, queue_id=i % 2))
    files = store.commit_log.files.files
    assert len(files) >= 6
    now = time.time()
    old = now - 100 * HOUR
    for mf in files[:3]:
        os.utime(mf.path, (old, old))
    # not the delete hour, disk not full, not forced: nothing happens
    r = store.delete_expired(now, used_ratio=10)
    assert r.commit_log_segments == 0 and r.reason == ""
    # forced (manual): only the expired, oldest-first segments go
    r = store.delete_expired(now, force=True, used_ratio=10)
    assert r.commit_log_segments == 3 and r.reason == "manual"
    assert store.min_phy_offset == files[3].file_from_offset
    assert r.consume_queue_files > 0
    for qid in (0, 1):
        cq = store.queues.find("T", qid)
        phys, _, _ = cq.get(cq.min_offset)
        assert phys >= store.min_phy_offset
        prev = cq.get(cq.min_offset - 1)
        assert prev is None or prev[0] < store.min_phy_offset
        got = store.get_message("G", "T", qid, 0)
        assert got.status is GetStatus.OFFSET_TOO_SMALL and got.next_begin_offset == cq.min_offset
        assert store.get_message("G", "T", qid, cq.min_offset).status is GetStatus.FOUND
    # disk over the forcible ratio: unexpired segments go too, but never the last one
    r = store.delete_expired(now, used_ratio=90)
    assert r.reason == "disk" and len(store.commit_log.files) == max(1, len(files) - 3 - config.delete_file_batch_max)
    store.put_message(msg())
    store.shutdown()
    # the retention state survives a restart
    store = MessageStore.open(config)
    assert store.min_phy_offset == store.commit_log.files.files[0].file_from_offset
    assert store.get_min_offset("T", 0) > 0
    store.shutdown()
