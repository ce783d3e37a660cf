"""AllocateService: the next commit-log segment, made before a put needs it
(RocketMQ's ``AllocateMappedFileService``).

A put runs on the sending connection's reader task (for arrival order) and rolls the
commit log over when a record does not fit. Creating the next segment there -- open,
``ftruncate``, ``posix_fallocate`` of 1 GiB, ``mmap`` and the first write fault of the
new map -- stalls every send on the connection. This service keeps one *spare* segment
ready instead: whenever the log gains a segment it builds the one after it in a worker
thread (:meth:`MappedFileQueue.offer_spare` has the details and the on-disk rules), and
the rollover just takes it.

Never a reason for a put to fail: when the spare is not ready (the service is not
running, is still building, or the build failed) the put creates the segment itself, as
before. A failed build is logged once per run of failures and retried every
``retry_interval`` seconds.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from .mapped_file import MappedFile, create_segment_file
from .mapped_file_queue import MappedFileQueue

__all__ = ["AllocateService"]

log = logging.getLogger(__name__)


@attrs.define(slots=True, eq=False)
class AllocateService:
    files: MappedFileQueue
    preallocate: bool
    #: Seconds between checks when not woken (also the retry period after a failure).
    retry_interval: float = 1.0
    #: Spares built and adopted; builds that failed.
    built: int = 0
    failures: int = 0
    #: Runs the build off the event loop (tests run it inline to wait deterministically).
    to_thread: Callable[..., Awaitable[Any]] = attrs.field(default=trio.to_thread.run_sync, repr=False)
    _wanted: trio.Event = attrs.field(factory=trio.Event, repr=False)
    _token: trio.lowlevel.TrioToken | None = attrs.field(default=None, repr=False)
    _failing: bool = False

    def wake(self) -> None:
        """Ask for a spare after the last segment; callable from any thread."""
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._set_wanted)
            except trio.RunFinishedError:
                pass

    def _set_wanted(self) -> None:
        self._wanted.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Build spares until cancelled; start it in the store's nursery."""
        self._token = trio.lowlevel.current_trio_token()
        self.files.on_new_segment = self.wake
        try:
            task_status.started()
            while True:
                await self.allocate_once()
                with trio.move_on_after(self.retry_interval):
                    await self._wanted.wait()
                self._wanted = trio.Event()
        finally:
            self.files.on_new_segment = None
            self._token = None

    async def allocate_once(self) -> bool:
        """Build the spare if one is wanted; True when a spare was adopted."""
        offset = self.files.spare_wanted()
        if offset is None:
            return False
        try:
            adopted = await self.to_thread(self._build, offset)
        except OSError as exc:
            self.failures += 1
            if not self._failing:
                log.warning(
                    "cannot make the next segment %s ahead (%s); puts create it themselves",
                    self.files.alloc_path(offset), exc,
                )
            self._failing = True
            return False
        self._failing = False
        if adopted:
            self.built += 1
        return adopted

    def _build(self, offset: int) -> bool:  # worker thread
        path = self.files.alloc_path(offset)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a leftover of a build cut short
        size = self.files.file_size
        create_segment_file(path, size, preallocate=self.preallocate)
        adopted = False
        mf = None
        try:
            mf = MappedFile.open(path, size, file_from_offset=offset)
            mf.touch_first_page()
            adopted = self.files.offer_spare(mf)
        finally:
            if not adopted:
                if mf is not None:
                    mf.delete()
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
        # Outside the queue's lock, so a rollover never waits for it. A put that writes
        # into the spare before this is done is still safe: its fdatasync commits the
        # file system's journal, which holds the rename.
        self.files.sync_directory()
        return adopted
