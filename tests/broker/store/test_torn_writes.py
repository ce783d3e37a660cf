"""A process killed in the middle of an append must never leave a record that
recovery accepts while its tail is missing.

Found by the real-client acceptance test (tests/acceptance/test_crash.py): with the
record copied to the map front to back, a kill after the body but inside the
properties left a record whose sizes agree and whose body CRC matches, so recovery
dispatched it and pulls served it with zeroed properties. The commit log now writes a
record's TOTALSIZE last. Here every kill point of one append is replayed on a copy of
the store and recovered.
"""

from __future__ import annotations

import shutil

from trocket.broker.store import MessageStore
from trocket.codecs.message.record import decode_record

from .conftest import msg, small_config


class RecordingView:
    """Stands in for a segment's memoryview: records each slice assignment."""

    def __init__(self, view: memoryview) -> None:
        self.view = view
        self.writes: list[tuple[int, bytes]] = []

    def __setitem__(self, key, value) -> None:
        self.writes.append((key.start, bytes(value)))
        self.view[key] = value

    def __getitem__(self, key):
        return self.view[key]

    def __len__(self) -> int:
        return len(self.view)

    def __getattr__(self, name):
        return getattr(self.view, name)


def _state_after(before: bytes, writes: list[tuple[int, bytes]], copied: int) -> bytearray:
    """The segment's bytes if the process died after ``copied`` bytes of the writes
    (each copied front to back, in order)."""
    data = bytearray(before)
    for start, chunk in writes:
        n = min(len(chunk), copied)
        data[start : start + n] = chunk[:n]
        copied -= n
        if copied <= 0:
            break
    return data


def _props(i: int) -> dict[str, str]:
    return {"TAGS": "t", "KEYS": f"k{i}", "UNIQ_KEY": f"{i:032X}", "WAIT": "true", "uid": f"u{i}" * 8}


def test_every_kill_point_of_an_append_recovers_whole_or_not_at_all(tmp_path):
    src = tmp_path / "src"
    config = small_config(src)
    store = MessageStore.open(config)
    for i in range(5):
        store.put_message(msg(body=b"b%d" % i * 20, properties=_props(i)))
    mf = store.commit_log.files.last
    seg = mf.path
    before = bytes(mf.view[: mf.file_size])
    pos = mf.wrote_position
    real = mf._view
    rec = mf._view = RecordingView(real)
    try:
        result = store.put_message(msg(body=b"the torn one " * 5, properties=_props(5)))
    finally:
        mf._view = real
    full = bytes(real[pos : pos + result.wrote_bytes])
    writes = rec.writes
    total = sum(len(c) for _, c in writes)
    assert total == len(full)
    # the abort file is there: every copy recovers as after a crash
    shutil.copytree(src, tmp_path / "template", ignore=shutil.ignore_patterns("lock"))
    store.shutdown()

    size = len(full)
    points = sorted(set(range(0, total + 1, 3)) | {total - 4, total - 3, total - 2, total - 1, total})
    for copied in points:
        state = _state_after(before, writes, copied)
        d = tmp_path / f"k{copied}"
        shutil.copytree(tmp_path / "template", d)
        (d / "commitlog" / seg.rsplit("/", 1)[-1]).write_bytes(bytes(state))
        s = MessageStore.open(small_config(d))
        try:
            end = s.max_phy_offset
            r = s.get_message("G", "T", 0, 5, 32, None)
            served = [bytes(b) for b in r.buffers]
            r.release()
        finally:
            s.shutdown()
        if end == result.physical_offset + size:
            assert served == [full], f"kill after {copied}/{total} bytes: a different record was served"
        else:
            assert end == result.physical_offset, f"kill after {copied}/{total} bytes: log end {end}"
            assert served == [], (
                f"kill after {copied}/{total} bytes: a torn record was served: {decode_record(served[0])}")
    # the whole record only once every byte is there
    assert copied == total
