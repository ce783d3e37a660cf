"""A pull's scan of consume-queue entries (codecs/queue_scan.py) and its compiled twin."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trocket.codecs import accel
from trocket.codecs.queue_scan import (
    BLANK_ENTRY_SIZE,
    NO_NEXT_FILE,
    SCAN_ELSEWHERE,
    SCAN_END,
    SCAN_FULL,
    SERVED,
    scan_entries,
)

_ENTRY = struct.Struct(">qiq")


def entries(*items: tuple[int, int, int]) -> bytes:
    return b"".join(_ENTRY.pack(*item) for item in items)


def scan(data, pos=0, limit=None, *, first=100, seg=(1000, 2000), codes=None, max_count=32, max_bytes=1 << 20,
         count=0, total=0, nfs=NO_NEXT_FILE, fn=scan_entries):
    """The scan's result, its spans, and the sizes and queue offsets it noted."""
    spans: list[int] = []
    served = bytearray()
    got = fn(data, pos, len(data) if limit is None else limit, first, seg[0], seg[1], codes, max_count, max_bytes,
             count, total, nfs, spans, served)
    notes = list(SERVED.iter_unpack(served))
    return got, spans, [size for _q, size in notes], [q for q, _size in notes]


def test_back_to_back_records_are_one_span():
    data = entries((1000, 10, 0), (1010, 20, 0), (1030, 5, 0))
    assert scan(data) == ((60, 3, 35, NO_NEXT_FILE, SCAN_END), [1000, 1035], [10, 20, 5], [100, 101, 102])


def test_a_gap_starts_a_new_span_and_blanks_are_skipped():
    data = entries((1000, 10, 0), (0, BLANK_ENTRY_SIZE, 0), (1020, 10, 0))
    assert scan(data) == ((60, 2, 20, NO_NEXT_FILE, SCAN_END), [1000, 1010, 1020, 1030], [10, 10], [100, 102])


def test_a_full_batch_stops_before_the_entry_it_cannot_take():
    data = entries((1000, 10, 0), (1010, 10, 0), (1020, 10, 0))
    assert scan(data, max_count=2)[0] == (40, 2, 20, NO_NEXT_FILE, SCAN_FULL)
    assert scan(data, max_bytes=25)[0] == (40, 2, 20, NO_NEXT_FILE, SCAN_FULL)
    # the first record is taken whatever its size
    assert scan(data, max_bytes=5)[0] == (20, 1, 10, NO_NEXT_FILE, SCAN_FULL)


def test_a_record_outside_the_segment_stops_the_scan_at_its_entry():
    data = entries((1990, 10, 0), (2000, 10, 0))
    assert scan(data) == ((20, 1, 10, NO_NEXT_FILE, SCAN_ELSEWHERE), [1990, 2000], [10], [100])
    assert scan(entries((1995, 10, 0)))[0][-1] == SCAN_ELSEWHERE  # not whole inside
    assert scan(entries((1000, 0, 0)))[0][-1] == SCAN_ELSEWHERE  # no size: the caller reads it
    assert scan(entries((1000, 10, 0)), seg=(0, 0))[0] == (0, 0, 0, NO_NEXT_FILE, SCAN_ELSEWHERE)


def test_tags_codes_filter_as_java_ints_and_next_file_start_skips():
    data = entries((1000, 10, 7), (1010, 10, (1 << 32) - 1), (1020, 10, 8))
    assert scan(data, codes={7, -1})[2:] == ([10, 10], [100, 101])
    # below the next segment's start: skipped, until a record is served
    assert scan(data, nfs=1010)[0] == (60, 2, 20, NO_NEXT_FILE, SCAN_END)
    assert scan(data, nfs=5000)[0] == (60, 0, 0, 5000, SCAN_END)


def test_spans_join_only_what_this_call_appended():
    spans = [900, 1000]
    served = bytearray(SERVED.pack(7, 100))
    scan_entries(entries((1000, 10, 0)), 0, 20, 0, 1000, 2000, None, 32, 1 << 20, 0, 0, NO_NEXT_FILE, spans, served)
    assert spans == [900, 1000, 1000, 1010] and list(SERVED.iter_unpack(served)) == [(7, 100), (0, 10)]


_phys = st.sampled_from([0, 990, 1000, 1010, 1020, 1500, 1990, 2000, 2500, -5, (1 << 63) - 1, -(1 << 63)])
_sizes = st.sampled_from([0, -1, 5, 10, 20, 30, BLANK_ENTRY_SIZE, -(1 << 31)])
_tags = st.sampled_from([0, 7, -7, (1 << 32) + 7, (1 << 63) - 1, -(1 << 63), 0xFFFFFFFF])
_codes = st.none() | st.sets(st.sampled_from([0, 7, -7, -1, 1 << 40]), max_size=3) | st.frozensets(
    st.integers(-50, 50), min_size=17, max_size=20)
_ints = st.sampled_from([0, 1, 3, 20, 32, 100, 1 << 62, (1 << 62) + 1, -1])


@pytest.mark.skipif(not accel.ACTIVE, reason=f"accelerator off: {accel.REASON}")
@given(st.lists(st.tuples(_phys, _sizes, _tags), max_size=12), st.sampled_from([0, 1, 20, 40, -20]),
       st.integers(-5, 300), _ints, _codes, _ints, st.sampled_from([0, 25, 1 << 20, 1 << 63]),
       st.sampled_from([0, 10, -3]), st.sampled_from([NO_NEXT_FILE, 0, 1010, 1 << 63]),
       st.sampled_from([(1000, 2000), (0, 0), (1000, 1000), (-(1 << 62), 1 << 62)]), st.booleans())
def test_scan_entries_differential(items, pos, limit, first, codes, max_count, max_bytes, total, nfs, seg, view):
    """The same stop, counters and lists on both paths (or the same error) for entries of
    every kind: blanks, records in and out of the segment, odd sizes, tags codes past
    32 bits, a limit past the buffer, arguments out of the compiled path's range."""
    from trocket.codecs import _accel

    data = entries(*items)
    buf = memoryview(data) if view else data
    results = []
    for fn in (accel.pure("scan_entries"), _accel.scan_entries):
        try:
            got = scan(buf, pos, limit, first=first, seg=seg, codes=codes, max_count=max_count,
                       max_bytes=max_bytes, count=0 if not total else 1, total=total, nfs=nfs, fn=fn)
        except Exception as exc:
            got = ("error", type(exc), str(exc))
        results.append(got)
    assert results[0] == results[1]


@pytest.mark.skipif(not accel.ACTIVE, reason=f"accelerator off: {accel.REASON}")
def test_the_compiled_scan_takes_a_pulls_input_itself():
    """A pull's entries, a memoryview of them, a subscription's codes: no hand-over."""
    from trocket.codecs import _accel

    def refuse(*args):
        raise AssertionError("handed to the pure scan")

    data = entries(*((1000 + 10 * i, 10, 7) for i in range(140)))
    _accel.set_pure("scan_entries", refuse)
    try:
        for codes in (None, {7}, frozenset({7, 8})):
            got = scan(memoryview(data), codes=codes, max_count=32, fn=_accel.scan_entries)
            assert got[0] == (640, 32, 320, NO_NEXT_FILE, SCAN_FULL) and got[1] == [1000, 1320]
        # more records than the compiled scan gathers before it writes them down (64)
        got = scan(data, max_count=130, seg=(1000, 10_000), fn=_accel.scan_entries)
        assert got[0] == (2600, 130, 1300, NO_NEXT_FILE, SCAN_FULL) and got[3] == list(range(100, 230))
    finally:
        _accel.set_pure("scan_entries", accel.pure("scan_entries"))


@pytest.mark.skipif(not accel.ACTIVE, reason=f"accelerator off: {accel.REASON}")
@given(st.lists(st.sampled_from(["next", "gap", "blank", "other-tag"]), min_size=60, max_size=200),
       st.sampled_from([None, {7}]), st.integers(1, 250))
def test_scan_entries_differential_long_runs(kinds, codes, max_count):
    """Runs longer than what the compiled scan gathers before writing it down (64
    records): the same on both paths."""
    from trocket.codecs import _accel

    items, phys = [], 1000
    for kind in kinds:
        if kind == "blank":
            items.append((0, BLANK_ENTRY_SIZE, 0))
            continue
        phys += 5 if kind == "gap" else 0
        items.append((phys, 10, 8 if kind == "other-tag" else 7))
        phys += 10
    data = entries(*items)
    assert scan(data, codes=codes, max_count=max_count, seg=(1000, 10_000), fn=accel.pure("scan_entries")) == scan(
        data, codes=codes, max_count=max_count, seg=(1000, 10_000), fn=_accel.scan_entries)
