"""Flushing: timed (``FlushRealTimeService``) or synchronous with group commit
(``GroupCommitService``), plus the consume-queue flush and checkpoint
(``FlushConsumeQueueService``).

Every fsync runs in a worker thread (``trio.to_thread.run_sync``), so the event loop
never waits on the disk, and only one runs at a time per log.

Group commit: a SYNC send awaits :meth:`FlushService.wait_flushed` with the offset just
past its record. Waiters append to a write list and wake the flusher; the flusher swaps
the write list with its read list (4.9.1's ``GroupCommitService`` double buffer: the
send path appends to one while the flusher drains the other; no lock, nothing held
across an await), runs one fsync covering everything written so far, then wakes, in
one pass, every waiter whose offset it passed (the others wait for the next pass).
Waiters that arrive during an fsync are served together by the next one, so under load
many sends share each fsync.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs
import trio

from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .config import FlushMode, StoreConfig
from .dispatcher import Dispatcher
from .queue_table import ConsumeQueueTable

__all__ = ["FlushService"]


@attrs.define(slots=True, eq=False)
class FlushService:
    config: StoreConfig
    commit_log: CommitLog
    queues: ConsumeQueueTable
    dispatcher: Dispatcher
    checkpoint: StoreCheckpoint
    #: fsync passes over the commit log (each covers every write made before it began).
    flush_count: int = 0
    cq_flush_count: int = 0
    #: the double buffer: the send path appends (offset, event) to ``_write``; the
    #: flusher swaps it with ``_read`` and keeps what its fsync did not cover
    _write: list[tuple[int, trio.Event]] = attrs.field(factory=list)
    _read: list[tuple[int, trio.Event]] = attrs.field(factory=list)
    #: swapped in, not covered by an fsync yet
    _waiting: list[tuple[int, trio.Event]] = attrs.field(factory=list)
    _wakeup: trio.Event = attrs.field(factory=trio.Event)
    _running: bool = False
    _last_thorough: float = 0.0
    #: Called in the worker thread instead of the real flush (tests count or slow it).
    flush_hook: Callable[[], None] | None = None

    @property
    def flushed_offset(self) -> int:
        return self.commit_log.flushed_offset

    # -- waiting ---------------------------------------------------------------------

    async def wait_flushed(self, offset: int, timeout: float | None = None) -> bool:
        """Return True once the commit log is durable up to ``offset``; False after
        ``timeout`` seconds (default ``sync_flush_timeout_ms``). In ASYNC mode this
        waits for the timed flusher."""
        if self.commit_log.flushed_offset >= offset:
            return True
        if timeout is None:
            timeout = self.config.sync_flush_timeout_ms / 1000
        event = trio.Event()
        self._write.append((offset, event))
        self._wakeup.set()
        with trio.move_on_after(timeout):
            await event.wait()
        return self.commit_log.flushed_offset >= offset

    def _wake_waiters(self) -> None:
        flushed = self.commit_log.flushed_offset
        self._write, self._read = self._read, self._write
        waiting = self._waiting
        waiting.extend(self._read)
        self._read.clear()
        if not waiting:
            return
        still = []
        for item in waiting:
            if item[0] <= flushed:
                item[1].set()
            else:
                still.append(item)
        self._waiting = still

    # -- flushing --------------------------------------------------------------------

    def _flush_commit_log(self) -> None:  # worker thread
        if self.flush_hook is not None:
            self.flush_hook()
        end, store_ts = self.commit_log.tail
        self.commit_log.flush()
        if store_ts and self.commit_log.flushed_offset >= end:
            self.checkpoint.physic_msg_timestamp = store_ts

    async def flush_commit_log(self) -> None:
        await trio.to_thread.run_sync(self._flush_commit_log)
        self.flush_count += 1
        self._wake_waiters()

    def _flush_consume_queues(self) -> bool:  # worker thread
        logics_ts = self.dispatcher.last_store_timestamp
        flushed = False
        for cq in self.queues:
            if cq.dirty():
                cq.flush()
                flushed = True
        if logics_ts and logics_ts != self.checkpoint.logics_msg_timestamp:
            self.checkpoint.logics_msg_timestamp = logics_ts
            flushed = True
        if flushed:
            self.checkpoint.flush()
        return flushed

    async def flush_consume_queues(self) -> None:
        if await trio.to_thread.run_sync(self._flush_consume_queues):
            self.cq_flush_count += 1

    # -- services --------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the flushers until cancelled (start it in the broker's nursery)."""
        async with trio.open_nursery() as nursery:
            if self.config.flush_mode is FlushMode.SYNC:
                nursery.start_soon(self._group_commit_loop)
            else:
                nursery.start_soon(self._timed_loop)
            nursery.start_soon(self._consume_queue_loop)
            self._running = True
            task_status.started()

    async def _group_commit_loop(self) -> None:
        idle = self.config.group_commit_interval_ms / 1000
        while True:
            with trio.move_on_after(idle):
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            if self.commit_log.files.dirty():
                await self.flush_commit_log()
            else:
                self._wake_waiters()

    async def _timed_loop(self) -> None:
        interval = self.config.flush_interval_ms / 1000
        thorough = self.config.flush_thorough_interval_ms / 1000
        least = self.config.flush_least_pages
        while True:
            await trio.sleep(interval)
            now = time.monotonic()
            pages = least
            if now - self._last_thorough >= thorough:
                pages = 0
                self._last_thorough = now
            if self.commit_log.files.dirty(pages):
                await self.flush_commit_log()
            else:
                self._wake_waiters()

    async def _consume_queue_loop(self) -> None:
        interval = self.config.flush_consume_queue_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            await self.flush_consume_queues()

    def flush_all_sync(self) -> None:
        """Flush the commit log, the consume queues and the checkpoint, in this thread
        (shutdown)."""
        self._flush_commit_log()
        self.flush_count += 1
        self._flush_consume_queues()
        self.checkpoint.flush()


