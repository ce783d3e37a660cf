from __future__ import annotations

import os

from trocket.broker.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue

from .conftest import msg


def test_entries_positions_and_files(store, config):
    results = [store.put_message(msg(queue_id=1, tags="X")) for _ in range(120)]
    cq = store.queues.find("T", 1)
    assert (cq.min_offset, cq.max_offset) == (0, 120)
    for i in (0, 49, 50, 119):
        phys, size, tag = cq.get(i)
        assert (phys, size) == (results[i].physical_offset, results[i].wrote_bytes)
        assert tag == 88  # "X".hashCode()
    names = sorted(os.listdir(os.path.join(config.consume_queue_dir, "T", "1")))
    step = config.consume_queue_entries_per_file * CQ_STORE_UNIT_SIZE
    assert names == [f"{i * step:020d}" for i in range(3)]
    assert cq.get(120) is None and cq.get(-1) is None
    assert cq.max_physic_offset == results[-1].end_offset


def test_rebuild_skips_existing_and_fills_pre_blank(tmp_path):
    cq = ConsumeQueue.open(str(tmp_path), "T", 0, 10)
    assert cq.put(100, 50, 0, 0) and cq.put(150, 50, 0, 1)
    assert cq.put(100, 50, 0, 0) and cq.max_offset == 2  # already built: skipped
    cq.close()
    # a queue whose files were lost, rebuilt from queue offset 13
    cq2 = ConsumeQueue.open(str(tmp_path), "U", 0, 10)
    cq2.put(5000, 60, 7, 13)
    assert (cq2.min_offset, cq2.max_offset) == (13, 14)
    assert cq2.get(13) == (5000, 60, 7) and cq2.get(12) is None
    cq2.close()


def test_recover_finds_end_and_truncates(tmp_path):
    cq = ConsumeQueue.open(str(tmp_path), "T", 0, 10)
    for i in range(15):
        cq.put(i * 100, 100, 0, i)
    cq.close()
    cq = ConsumeQueue.open(str(tmp_path), "T", 0, 10)
    cq.recover()
    assert cq.max_offset == 15 and cq.max_physic_offset == 1500
    cq.truncate_dirty(1050)  # entries whose record ends past 1050 go
    assert cq.max_offset == 10 and cq.max_physic_offset == 1000
    cq.close()


def test_sizes_between_sums_sizes_across_files_and_skips_blanks(tmp_path):
    cq = ConsumeQueue.open(str(tmp_path), "T", 0, 4)  # 4 entries a file
    # queue offsets 0, 1, then 4..10: 2 and 3 are filled with blank entries
    offsets = [0, 1] + list(range(4, 11))
    sizes = [100 + i for i in range(8)] + [(1 << 24) - 1]
    phys = 0
    for offset, size in zip(offsets, sizes):
        cq.put(phys, size, 0, offset)
        phys += size
    assert cq.max_offset == 11 and cq.get(2)[1] == 0x7FFFFFFF
    assert cq.sizes_between(0, 11) == (9, sum(sizes))
    assert cq.sizes_between(1, 6) == (3, sizes[1] + sizes[2] + sizes[3])  # 1, 4, 5 (2, 3 blank)
    assert cq.sizes_between(10, 11) == (1, (1 << 24) - 1)
    assert cq.sizes_between(11, 11) == (0, 0)
