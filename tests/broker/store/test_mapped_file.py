from __future__ import annotations

import os

import pytest

from trocket.broker.store.mapped_file import MappedFile, data_ranges, segment_name
from trocket.broker.store.mapped_file_queue import MappedFileQueue


def test_segment_name_is_20_digits():
    assert segment_name(0) == "00000000000000000000"
    assert segment_name(1 << 30) == "00000000001073741824"


def test_create_append_select_flush(tmp_path):
    path = tmp_path / segment_name(4096)
    mf = MappedFile.open(str(path), 4096, create=True, preallocate=True)
    assert mf.file_from_offset == 4096 and os.path.getsize(path) == 4096
    assert mf.append(b"abc") == 0 and mf.append(b"defg") == 3
    assert bytes(mf.select(1, 4)) == b"bcde"
    assert bytes(mf.select(0)) == b"abcdefg"
    with pytest.raises(IndexError):
        mf.select(5, 10)  # past the write position
    assert mf.is_dirty() and mf.flush() == 7 and not mf.is_dirty()
    with pytest.raises(ValueError):
        mf.append(b"x" * 5000)
    mf.close()
    with open(path, "rb") as f:
        assert f.read(7) == b"abcdefg"


def test_close_with_live_views_and_delete(tmp_path):
    mf = MappedFile.open(str(tmp_path / segment_name(0)), 4096, create=True)
    mf.append(b"keep me")
    view = mf.select(0, 7)
    mf.delete()  # readers' views keep the pages mapped
    assert bytes(view) == b"keep me"
    assert not os.path.exists(mf.path)


def test_zero_from_only_rewrites_dirty_chunks(tmp_path):
    mf = MappedFile.open(str(tmp_path / segment_name(0)), 256 * 1024, create=True)
    mf.write_at(1000, b"\xff" * 10)
    mf.write_at(200_000, b"\xee" * 10)
    rewritten = mf.zero_from(500)
    # chunk granular within the data the file system reports (a page on ext4/xfs/tmpfs)
    assert 20 <= rewritten <= 2 * 65536
    assert bytes(mf.read_raw(0, 256 * 1024)) == bytes(500) + bytes(256 * 1024 - 500)
    assert mf.zero_from(500) == 0
    mf.close()


@pytest.mark.parametrize("preallocate", [True, False])
def test_zero_from_touches_only_the_stale_range(tmp_path, preallocate):
    """A 256 MiB segment with a written head and garbage at two places past the end:
    the garbage is zeroed, the head kept, and the empty rest of the file is not read
    (no page of it becomes data: the old full scan faulted in every page)."""
    size = 256 << 20
    mf = MappedFile.open(str(tmp_path / segment_name(0)), size, create=True, preallocate=preallocate)
    mf.append(b"\x11" * 10_000)
    mf.write_at(10_000, b"\x22" * 300)  # a torn record just past the end
    mf.write_at(5 << 20, b"\x33" * 5000)  # a stale page further on
    mf.flush()
    before = list(data_ranges(mf._fd, 0, size))
    rewritten = mf.zero_from(10_000)
    assert rewritten > 0
    assert bytes(mf.read_raw(0, 10_000)) == b"\x11" * 10_000
    assert bytes(mf.read_raw(10_000, 300)) == bytes(300)
    assert bytes(mf.read_raw(5 << 20, 5000)) == bytes(5000)
    assert list(data_ranges(mf._fd, 0, size)) == before
    if len(before) > 1 or before[0] != (0, size):  # the file system reports holes
        assert sum(end - start for start, end in before) <= size // 16  # ext4: 8 MiB
    mf.close()


def test_zero_from_without_seek_data_checks_every_byte(tmp_path, monkeypatch):
    mf = MappedFile.open(str(tmp_path / segment_name(0)), 256 * 1024, create=True)
    mf.write_at(100_000, b"\x44" * 10)
    monkeypatch.delattr(os, "SEEK_DATA")
    assert list(data_ranges(mf._fd, 10, 1000)) == [(10, 1000)]
    assert mf.zero_from(10) == 65536  # the one 64 KiB chunk holding the bytes
    assert bytes(mf.read_raw(0, 256 * 1024)) == bytes(256 * 1024)
    mf.close()


def test_queue_find_create_truncate(tmp_path):
    q = MappedFileQueue(str(tmp_path / "q"), 1024)
    q.load()
    assert q.max_offset == 0 and q.find(0) is None
    a = q.last_for_write()
    a.append(b"x" * 1024)
    b = q.last_for_write()
    assert b is not a and b.file_from_offset == 1024
    b.append(b"y" * 100)
    assert q.max_offset == 1124 and q.find(1050) is b and q.find(5000) is None
    assert q.flush() == 1124
    q.truncate_dirty(1000)
    assert len(q) == 1 and q.max_offset == 1000 and not os.path.exists(b.path)
    q.close()
    q2 = MappedFileQueue(str(tmp_path / "q"), 1024)
    q2.load()
    assert [m.file_from_offset for m in q2] == [0]
    q2.close()
    with open(tmp_path / "q" / segment_name(0), "r+b") as f:
        f.truncate(999)
    with pytest.raises(Exception, match="configured segment size"):
        MappedFileQueue(str(tmp_path / "q"), 1024).load()
