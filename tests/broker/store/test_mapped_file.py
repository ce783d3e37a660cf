from __future__ import annotations

import os

import pytest

from trocket.broker.store.mapped_file import MappedFile, segment_name
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
    assert mf.zero_from(500) == 65536 - 500
    assert bytes(mf.read_raw(0, 2000)) == bytes(2000)
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
