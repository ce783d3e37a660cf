"""MappedFileQueue: the ordered segments of one log in one directory.

Segments are contiguous: segment *i* starts at ``first.file_from_offset + i * file_size``,
so finding the one holding an offset is arithmetic, as in Java's
``findMappedFileByOffset``. The list is replaced, never mutated, when segments come or go
(copy on write), so readers in other threads index a consistent snapshot without a lock.

The next segment can be made ahead of need (:mod:`.allocate`, Java's
``AllocateMappedFileService``): it is built under a temporary name
(``<20 digits>.alloc``), renamed to its real name and offered as the *spare*, which
:meth:`MappedFileQueue.create_next` takes instead of creating a file. The spare is not
in :attr:`MappedFileQueue.files` (so retention, flushing and reads never see it) until
it is taken. On disk it is an ordinary all-zero segment: if the process dies with one
there, :meth:`MappedFileQueue.load` maps it as the last segment and recovery finds no
record at its start (it ends the log there, or deletes it when the end lies in an
earlier segment); a clean shutdown deletes it (:meth:`MappedFileQueue.discard_spare`).
Leftover ``.alloc`` files of a build that was cut short are deleted at load.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import attrs

from .errors import StoreLoadError
from .mapped_file import MappedFile, segment_name

__all__ = ["ALLOC_SUFFIX", "MappedFileQueue"]

#: Suffix of a segment being built ahead of need, before its rename to the real name.
ALLOC_SUFFIX = ".alloc"


def _is_alloc_leftover(name: str) -> bool:
    return len(name) == 20 + len(ALLOC_SUFFIX) and name.endswith(ALLOC_SUFFIX) and name[:20].isdigit()


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@attrs.define(slots=True, eq=False)
class MappedFileQueue:
    """Segments of ``file_size`` bytes under ``directory``."""

    directory: str
    file_size: int
    preallocate: bool = False
    _files: tuple[MappedFile, ...] = ()
    #: Offset up to which everything is durable (``flushedWhere``).
    flushed_where: int = 0
    _struct_lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)
    #: The next segment, made ahead of need and not yet in :attr:`files`.
    _spare: MappedFile | None = attrs.field(default=None, repr=False)
    #: Called (from the creating thread, after the lock is released) whenever a segment
    #: was added by :meth:`create_next`: the allocator's wake-up.
    on_new_segment: Callable[[], None] | None = attrs.field(default=None, repr=False)
    #: Segments :meth:`create_next` took from the spare / had to create itself.
    spares_taken: int = 0
    created_inline: int = 0

    # -- loading -------------------------------------------------------------------

    def load(self) -> None:
        """Map every segment in the directory (``load``); positions are set by recovery.

        Every segment but the last is marked full; the last one empty until recovery
        finds its end.
        """
        if not os.path.isdir(self.directory):
            self._files = ()
            return
        listing = os.listdir(self.directory)
        for name in listing:
            if _is_alloc_leftover(name):  # a spare whose build was cut short
                os.unlink(os.path.join(self.directory, name))
        names = sorted(n for n in listing if len(n) == 20 and n.isdigit())
        files: list[MappedFile] = []
        try:
            for name in names:
                path = os.path.join(self.directory, name)
                size = os.path.getsize(path)
                if size != self.file_size:
                    raise StoreLoadError(
                        f"{path} is {size} bytes but the configured segment size is "
                        f"{self.file_size}; check it manually"
                    )
                mf = MappedFile.open(path, self.file_size)
                if files and mf.file_from_offset != files[-1].file_end_offset:
                    mf.close()
                    raise StoreLoadError(
                        f"{path} does not follow {files[-1].path}: segments must be contiguous"
                    )
                mf.wrote_position = mf.flushed_position = self.file_size
                files.append(mf)
        except BaseException:
            for mf in files:
                mf.close()
            raise
        self._files = tuple(files)
        if files:
            self.flushed_where = files[-1].file_end_offset

    # -- access --------------------------------------------------------------------

    @property
    def files(self) -> tuple[MappedFile, ...]:
        return self._files

    def __iter__(self) -> Iterator[MappedFile]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    @property
    def first(self) -> MappedFile | None:
        files = self._files
        return files[0] if files else None

    @property
    def last(self) -> MappedFile | None:
        files = self._files
        return files[-1] if files else None

    @property
    def min_offset(self) -> int:
        """Offset of the first byte still stored (``getMinOffset``); 0 when empty."""
        files = self._files
        return files[0].file_from_offset if files else 0

    @property
    def max_offset(self) -> int:
        """Offset just past the last byte written (``getMaxOffset``)."""
        files = self._files
        if not files:
            return 0
        last = files[-1]
        return last.file_from_offset + last.wrote_position

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding ``offset`` (``findMappedFileByOffset``), or None."""
        files = self._files
        if not files:
            return None
        index = (offset - files[0].file_from_offset) // self.file_size
        if 0 <= index < len(files):
            mf = files[index]
            if mf.file_from_offset <= offset < mf.file_end_offset:
                return mf
        return None

    # -- growth --------------------------------------------------------------------

    def create_next(self, start_offset: int | None = None) -> MappedFile:
        """Add the segment after the last one (or at ``start_offset`` when empty): the
        spare when it is ready for that offset, else a new file made here.

        ``start_offset`` is rounded down to a segment boundary, as Java's
        ``getLastMappedFile(startOffset)`` does for an empty queue.
        """
        with self._struct_lock:
            files = self._files
            if files:
                offset = files[-1].file_end_offset
            else:
                start = start_offset or 0
                offset = start - start % self.file_size
            spare = self._spare
            if spare is not None and spare.file_from_offset == offset:
                self._spare = None
                mf = spare
                self.spares_taken += 1
            else:
                os.makedirs(self.directory, exist_ok=True)
                path = os.path.join(self.directory, segment_name(offset))
                mf = MappedFile.open(path, self.file_size, create=True, preallocate=self.preallocate)
                self.created_inline += 1
            if not files:
                self.flushed_where = offset
            self._files = files + (mf,)
        listener = self.on_new_segment
        if listener is not None:
            listener()
        return mf

    def last_for_write(self, start_offset: int = 0) -> MappedFile:
        """The last segment if it has room, else a new one (``getLastMappedFile``)."""
        last = self.last
        if last is None or last.is_full:
            return self.create_next(start_offset)
        return last

    # -- the spare (built ahead by :class:`~.allocate.AllocateService`) --------------

    @property
    def spare(self) -> MappedFile | None:
        return self._spare

    def spare_wanted(self) -> int | None:
        """The offset of the segment after the last one when no spare is ready for it;
        None when there is nothing to build (a spare is ready, or no segment yet)."""
        with self._struct_lock:
            files = self._files
            if not files:
                return None
            offset = files[-1].file_end_offset
            spare = self._spare
            if spare is not None and spare.file_from_offset == offset:
                return None
            return offset

    def alloc_path(self, offset: int) -> str:
        """Where the spare for ``offset`` is built before it gets its real name."""
        return os.path.join(self.directory, segment_name(offset) + ALLOC_SUFFIX)

    def offer_spare(self, built: MappedFile) -> bool:
        """Adopt ``built`` -- mapped at :meth:`alloc_path`, its first page touched -- as
        the spare, renamed to its real name (the caller then makes the rename durable:
        :meth:`sync_directory`). False (the caller deletes ``built``) when the log moved
        on meanwhile (a put created that segment itself) or a spare is already there."""
        offset = built.file_from_offset
        with self._struct_lock:
            files = self._files
            if self._spare is not None or not files or files[-1].file_end_offset != offset:
                return False
            path = os.path.join(self.directory, segment_name(offset))
            if os.path.exists(path):
                return False
            os.rename(built.path, path)
            built.path = path
            self._spare = built
        return True

    def sync_directory(self) -> None:
        """fsync the directory: makes renames and new entries durable."""
        _fsync_dir(self.directory)

    def discard_spare(self) -> None:
        """Delete the unused spare (a clean shutdown leaves none behind, as Java's)."""
        with self._struct_lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.delete()

    # -- flush ---------------------------------------------------------------------

    def dirty(self, least_pages: int = 0) -> bool:
        files = self._files
        if not files:
            return False
        if self.flushed_where < files[-1].file_from_offset:
            return True  # a whole segment behind: always worth a flush
        return files[-1].is_dirty(least_pages)

    def flush(self) -> int:
        """Flush every segment with unflushed data; returns the new ``flushed_where``.

        Called from one flusher thread at a time. What was written before the call is
        durable when it returns.
        """
        files = self._files
        if not files:
            return self.flushed_where
        where = self.flushed_where
        for mf in files:
            if mf.file_end_offset <= where or mf.closed:
                continue
            mf.flush()
            reached = mf.file_from_offset + mf.flushed_position
            if reached > where:
                where = reached
        self.flushed_where = where
        return where

    # -- shrinking -----------------------------------------------------------------

    def truncate_dirty(self, offset: int) -> int:
        """Drop everything at and after ``offset`` (``truncateDirtyFiles``).

        The segment holding ``offset`` keeps its head, with its tail zeroed so no stale
        record can be found there again; later segments are deleted. Returns the bytes
        zeroed or deleted (an empty later segment, e.g. one made ahead, counts 0).
        """
        cut = 0
        with self._struct_lock:
            keep: list[MappedFile] = []
            for mf in self._files:
                if mf.file_end_offset <= offset:
                    keep.append(mf)
                elif mf.file_from_offset <= offset:
                    pos = offset - mf.file_from_offset
                    cut += mf.zero_from(pos)
                    mf.wrote_position = pos
                    mf.flushed_position = min(mf.flushed_position, pos)
                    keep.append(mf)
                else:
                    if any(mf.read_raw(0, 8)):  # not an empty segment (one made ahead)
                        cut += mf.file_size
                    mf.delete()
            self._files = tuple(keep)
            if self.flushed_where > offset:
                self.flushed_where = offset
            spare = self._spare
            if spare is not None and (not keep or spare.file_from_offset != keep[-1].file_end_offset):
                self._spare = None
                spare.delete()
        return cut

    def delete_first(self, count: int) -> list[MappedFile]:
        """Delete the ``count`` oldest segments (never the last); returns them."""
        with self._struct_lock:
            files = self._files
            count = max(0, min(count, len(files) - 1))
            gone = files[:count]
            self._files = files[count:]
        for mf in gone:
            mf.delete()
        return list(gone)

    def delete_all(self) -> None:
        self.discard_spare()
        with self._struct_lock:
            gone, self._files = self._files, ()
            self.flushed_where = 0
        for mf in gone:
            mf.delete()

    def close(self) -> None:
        """Unmap every segment. A spare is unmapped but stays on disk (as after a
        crash); call :meth:`discard_spare` first to delete it."""
        with self._struct_lock:
            files, self._files = self._files, ()
            spare, self._spare = self._spare, None
        if spare is not None:
            files += (spare,)
        for mf in files:
            mf.close()
