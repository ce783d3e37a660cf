"""MappedFile: one fixed-size segment file, memory-mapped (RocketMQ's ``MappedFile``).

A segment is named by the store offset of its first byte, zero-padded to 20 digits
(``00000000001073741824``). Writes go through the map; ``wrote_position`` is how much of
it holds data, ``flushed_position`` how much is known durable.

Flushing uses ``os.fdatasync`` on the file, not ``mmap.flush``: CPython's
``mmap.flush`` keeps the GIL during ``msync`` (measured: a 256 MiB flush froze the
other threads for its whole 80 ms), while ``fdatasync`` releases it, and on Linux a
shared mapping's dirty pages are the file's page cache, so both make the same bytes
durable. The file size never changes after creation, hence ``fdatasync``.

Reads hand out memoryviews into the map (no copy). A map with live views cannot be
closed (``BufferError``); :meth:`close` then just drops it and the pages are unmapped
when the last view goes, which is RocketMQ's ``hold``/``release`` reference count done by
Python's.

Recovery zeroes a segment's tail past the recovered end (:meth:`MappedFile.zero_from`)
so no stale record is found there again. Only the ranges the file system reports as
data (``SEEK_DATA``/``SEEK_HOLE``) can hold anything but zeros: holes and the
unwritten extents of a ``posix_fallocate``-d file read as zeros, so they are skipped
rather than read through the map (reading the empty rest of a 1 GiB segment page by
page took 3.6 s). A file system without the two whences reports the whole file as data
and every byte is checked.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
from collections.abc import Callable, Iterator

import attrs

__all__ = ["MappedFile", "create_segment_file", "data_ranges", "segment_name"]

_PAGE = mmap.PAGESIZE
_FSYNC = os.fdatasync if sys.platform.startswith("linux") else os.fsync
_ZERO_CHUNK = bytes(1 << 16)
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", None)
_MADV_NORMAL = getattr(mmap, "MADV_NORMAL", None)
#: Linux 5.14's ``MADV_POPULATE_WRITE`` (Python 3.11's mmap module does not name it)
_MADV_POPULATE_WRITE = 23
_madvise: Callable[[int, int, int], int] | None = None


def _libc_madvise() -> Callable[[int, int, int], int]:
    """libc's ``madvise`` (ctypes releases the GIL around the call; ``mmap.madvise``
    keeps it)."""
    global _madvise
    if _madvise is None:
        fn = ctypes.CDLL(None, use_errno=True).madvise
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        fn.restype = ctypes.c_int
        _madvise = fn
    return _madvise


def segment_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: the offset zero-padded to 20 digits."""
    return f"{offset:020d}"


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def create_segment_file(path: str, file_size: int, *, preallocate: bool) -> None:
    """Create ``path`` (it must not exist) at ``file_size`` bytes: extended with
    ``ftruncate`` (sparse, reads as zeros) and, with ``preallocate``, its blocks reserved
    with ``posix_fallocate`` so a full disk fails here rather than as a SIGBUS on a later
    write to the map. The file is removed again if any step fails."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.ftruncate(fd, file_size)
        if preallocate and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, file_size)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate here
                    raise
    except BaseException:
        os.close(fd)
        _unlink_quietly(path)
        raise
    os.close(fd)


def data_ranges(fd: int, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The ranges of ``[start, end)`` of file ``fd`` that may hold non-zero bytes: the
    file system's data extents (``SEEK_DATA``/``SEEK_HOLE``), or the whole range where
    the whences are not supported."""
    seek_data = getattr(os, "SEEK_DATA", None)
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        if start < end:
            yield start, end
        return
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, seek_data)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data at or after pos
                return
            yield pos, end  # not supported: check everything
            return
        if data >= end:
            return
        hole = os.lseek(fd, data, seek_hole)
        yield data, min(hole, end)
        pos = hole


@attrs.define(slots=True, eq=False)
class MappedFile:
    """A segment: ``file_size`` bytes of ``path`` mapped read-write."""

    path: str
    file_from_offset: int
    file_size: int
    _fd: int = attrs.field(repr=False)
    _mm: mmap.mmap | None = attrs.field(repr=False)
    _view: memoryview | None = attrs.field(repr=False)
    wrote_position: int = 0
    flushed_position: int = 0
    #: Store timestamp of the last record written (commit log only; for the checkpoint).
    last_store_timestamp: int = 0

    @classmethod
    def open(
        cls,
        path: str,
        file_size: int,
        *,
        create: bool = False,
        preallocate: bool = False,
        file_from_offset: int | None = None,
    ) -> MappedFile:
        """Map ``path`` (creating it first with ``create``: see :func:`create_segment_file`).

        The segment's offset is its file name unless given (a segment built under a
        temporary name, renamed later).
        """
        if file_from_offset is None:
            name = os.path.basename(path)
            if not (len(name) == 20 and name.isdigit()):
                raise ValueError(f"segment file name must be 20 digits: {name!r}")
            file_from_offset = int(name)
        if create:
            create_segment_file(path, file_size, preallocate=preallocate)
        fd = os.open(path, os.O_RDWR, 0o644)
        try:
            actual = os.fstat(fd).st_size
            if actual != file_size:
                raise ValueError(f"{path} is {actual} bytes, the configured size is {file_size}")
            mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            if create:
                _unlink_quietly(path)
            raise
        return cls(path, file_from_offset, file_size, fd, mm, memoryview(mm))

    # -- state ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._view is None

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def view(self) -> memoryview:
        """The whole map as a memoryview (writers patch and copy through it)."""
        view = self._view
        if view is None:
            raise ValueError(f"{self.path} is closed")
        return view

    # -- I/O ------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the write position; returns the position it was written at."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            raise ValueError(f"{len(data)} bytes do not fit {self.path} at {pos}")
        self.view[pos:end] = data
        self.wrote_position = end
        return pos

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` at ``pos`` without moving the write position."""
        self.view[pos : pos + len(data)] = data

    def select(self, pos: int, size: int | None = None) -> memoryview:
        """A view of ``size`` bytes at ``pos`` (to the write position if ``size`` is None)."""
        limit = self.wrote_position
        if size is None:
            size = limit - pos
        if pos < 0 or size < 0 or pos + size > limit:
            raise IndexError(f"{self.path}: [{pos}, {pos + size}) outside [0, {limit})")
        return self.view[pos : pos + size]

    def read_raw(self, pos: int, size: int) -> memoryview:
        """A view regardless of the write position (recovery scans the whole file)."""
        return self.view[pos : pos + size]

    def is_dirty(self, least_pages: int = 0) -> bool:
        """Whether unflushed data spans at least ``least_pages`` pages (any, with 0)."""
        dirty = self.wrote_position - self.flushed_position
        if dirty <= 0:
            return False
        if least_pages <= 0:
            return True
        return (self.wrote_position // _PAGE - self.flushed_position // _PAGE) >= least_pages

    def flush(self) -> int:
        """Make everything written so far durable; returns the new flushed position.

        Safe to call from a worker thread while another thread appends: only what was
        written when the call started is promised.
        """
        target = self.wrote_position
        fd = self._fd
        if target > self.flushed_position and self._view is not None and fd >= 0:
            try:
                _FSYNC(fd)
            except OSError:
                if self._fd >= 0:
                    raise
                return self.flushed_position  # closed meanwhile (a deleted queue)
            if target > self.flushed_position:
                self.flushed_position = target
        return self.flushed_position

    def zero_from(self, pos: int) -> int:
        """Zero ``[pos, file end)``: only the file's data ranges (:func:`data_ranges`) are
        read, and in them only 64 KiB chunks holding something else than zeros are
        written (sparse pages stay sparse).

        Returns how many bytes were rewritten (chunk granular).
        """
        view = self.view
        chunk = len(_ZERO_CHUNK)
        rewritten = 0
        # The ranges first, and no read-ahead while checking them: pages read ahead into
        # a hole would be data for the next SEEK_DATA, and the scan would creep on.
        ranges = list(data_ranges(self._fd, pos, self.file_size))
        self._advise(_MADV_RANDOM)
        try:
            for start, end in ranges:
                while start < end:
                    stop = min(end, (start // chunk + 1) * chunk)
                    zeros = memoryview(_ZERO_CHUNK)[: stop - start]
                    if view[start:stop] != zeros:
                        view[start:stop] = zeros
                        rewritten += stop - start
                    start = stop
        finally:
            self._advise(_MADV_NORMAL)
        return rewritten

    def _advise(self, advice: int | None) -> None:
        if advice is not None and self._mm is not None:
            self._mm.madvise(advice)

    def touch_first_page(self) -> None:
        """Take the first write fault of a fresh file's map (on ext4 ~2-3 ms for a 1 GiB
        ``posix_fallocate``-d file) before a put needs the page: writes a zero at byte 0,
        so call it only on a new, all-zero file, which still reads as empty to recovery.
        The write goes through ``ctypes.memset``, which releases the GIL: a fault that
        waits for the file system's journal must not stall the event loop's thread."""
        mm = self._mm
        if mm is None:
            raise ValueError(f"{self.path} is closed")
        anchor = ctypes.c_char.from_buffer(mm)
        try:
            ctypes.memset(ctypes.addressof(anchor), 0, 1)
        finally:
            del anchor

    def populate(self, start: int, end: int) -> bool:
        """Take the write faults of the pages of ``[start, end)`` now, without changing a
        byte (``madvise(MADV_POPULATE_WRITE)``: each page read in or made, made writable
        and dirty, as a first write would): a later write to them takes no fault. Meant
        for a worker thread: the call releases the GIL and holds the map (a
        :meth:`close` meanwhile leaves the unmapping to its end). False where the kernel
        (before Linux 5.14) or the platform cannot, or the file system refuses (a full
        disk)."""
        mm = self._mm
        if mm is None or not sys.platform.startswith("linux"):
            return False
        start = max(0, start - start % _PAGE)
        end = min(end, self.file_size)
        if start >= end:
            return True
        try:
            anchor = ctypes.c_char.from_buffer(mm)
        except (ValueError, TypeError):  # closed meanwhile
            return False
        try:
            return _libc_madvise()(ctypes.addressof(anchor) + start, end - start, _MADV_POPULATE_WRITE) == 0
        finally:
            del anchor

    def close(self) -> None:
        """Unmap and close. Views still held by readers keep the pages mapped until freed."""
        view, mm = self._view, self._mm
        self._view = None
        self._mm = None
        if view is not None:
            try:
                view.release()
            except BufferError:
                pass
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # readers hold slices; the map goes with the last of them
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        """Close and remove the file (``destroy``)."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def mtime(self) -> float:
        """Last modification time of the file (what retention compares to its deadline)."""
        return os.stat(self.path).st_mtime
