"""Recovery at open: find the commit log's true end and make the consume queues agree.

As ``DefaultMessageStore.recover``:

* Clean shutdown (no ``abort`` file): the checkpoint holds the commit log's end as of
  the shutdown; it is trusted after a cheap check (nothing written after it). Without
  it, the last three segments are scanned (``recoverNormally``).
* Crash (the ``abort`` file, created at start and removed at clean shutdown, is still
  there): scanning starts at the last segment whose first record is older than the
  checkpoint's minimum timestamp (``recoverAbnormally``), else at the first segment.

A scan validates each record (magic code, size, body CRC, decodability, and that its
PHYSICALOFFSET is where it sits) and stops at the first invalid one; everything from
there on is zeroed and later segments deleted. Zeroing reads only what the file system
reports as data past the end (:meth:`.MappedFile.zero_from`): a torn record and
anything written past it are cleared, the never-written rest of a 1 GiB segment is not
read, so opening a store costs what it holds, not its segment size. A segment made ahead
of need and left on disk (:mod:`.allocate`) holds no record: a scan reaching it (after a
segment's closing blank record) ends the log at its start and keeps it as the empty
last segment; when the end lies earlier, it is deleted with every later segment.
Consume-queue entries pointing past the end are dropped (after a crash, entries whose
record does not match are dropped too), then the records after the consume queues'
last good entries are dispatched again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs

from trocket.codecs.message.record import MESSAGE_MAGIC_CODE, peek_record

from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog, check_record
from .dispatcher import Dispatcher
from .queue_table import ConsumeQueueTable

__all__ = ["RecoveryReport", "recover"]

log = logging.getLogger(__name__)

_HEADER = 8


@attrs.define(slots=True)
class RecoveryReport:
    abnormal: bool
    #: How the commit log's end was found: "checkpoint", "scan-normal", "scan-abnormal".
    method: str
    scan_start: int
    commit_log_end: int
    #: Bytes zeroed or deleted past the end (64 KiB-chunk granular): garbage, torn or
    #: corrupt records.
    truncated_bytes: int
    #: Consume-queue entries dropped (pointing past the end or at the wrong record).
    dropped_entries: int
    redispatched: int


def _clean_end_valid(commit_log: CommitLog, end: int) -> bool:
    files = commit_log.files
    if not files.files:
        return end == 0
    if end < files.min_offset or end > files.last.file_end_offset:  # type: ignore[union-attr]
        return False
    mf = files.find(end)
    if mf is None:
        return end == files.last.file_end_offset  # type: ignore[union-attr]
    pos = end - mf.file_from_offset
    if mf.file_size - pos < _HEADER:
        return True
    return bytes(mf.read_raw(pos, _HEADER)) == bytes(_HEADER)


def _abnormal_start(commit_log: CommitLog, checkpoint: StoreCheckpoint) -> int:
    files = commit_log.files.files
    min_ts = checkpoint.min_timestamp
    for mf in reversed(files):
        size, req = check_record(mf, 0, check_crc=False)
        if size > 0 and req is not None and req.store_timestamp and req.store_timestamp <= min_ts:
            return mf.file_from_offset
    return files[0].file_from_offset if files else 0


def _record_matches(commit_log: CommitLog, queue_id: int) -> Callable[[int, int, int], bool]:
    def bad(offset: int, size: int, index: int) -> bool:
        view = commit_log.get_message(offset, size)
        if view is None or size < 91:
            return True
        total, magic = peek_record(view, 0)
        if magic != MESSAGE_MAGIC_CODE or total != size:
            return True
        qid = int.from_bytes(view[12:16], "big", signed=True)
        qoff = int.from_bytes(view[20:28], "big", signed=True)
        return qid != queue_id or qoff != index
    return bad


def recover(
    commit_log: CommitLog,
    queues: ConsumeQueueTable,
    dispatcher: Dispatcher,
    checkpoint: StoreCheckpoint,
    *,
    abnormal: bool,
    check_crc: bool,
) -> RecoveryReport:
    files = commit_log.files
    for cq in queues:
        cq.recover()

    method = "checkpoint"
    start = 0
    clean_end = checkpoint.clean_commit_log_end
    if not abnormal and clean_end >= 0 and _clean_end_valid(commit_log, clean_end):
        end = clean_end
        start = end
    else:
        if abnormal:
            method = "scan-abnormal"
            start = _abnormal_start(commit_log, checkpoint)
        else:
            method = "scan-normal"
            seg = files.files
            start = seg[max(0, len(seg) - 3)].file_from_offset if seg else 0
        for _ in commit_log.scan(start, check_crc=check_crc):
            pass
        end = commit_log.scan_end if files.files else 0
    truncated = commit_log.set_end(end)

    dropped = 0
    for cq in queues:
        dropped += cq.truncate_while(lambda offset, size, index: offset + size > end)
        if abnormal:
            dropped += cq.truncate_while(
                _record_matches(commit_log, cq.queue_id)
            )

    # Re-dispatch: from the scan start after a crash (the checkpoint says consume
    # queues are durable up to there), else from the furthest queue entry.
    if abnormal:
        reput_from = start
    else:
        reput_from = commit_log.min_offset
        for cq in queues:
            if cq.max_physic_offset > reput_from:
                reput_from = cq.max_physic_offset
    reput_from = max(reput_from, commit_log.min_offset)
    before = dispatcher.dispatched_count
    if reput_from < end:
        dispatcher.reput(reput_from, check_crc=False)
    dispatcher.dispatched_offset = end

    commit_log.queue_offsets.clear()
    min_phy = commit_log.min_offset
    for cq in queues:
        cq.correct_min_offset(min_phy)
        if cq.max_offset > 0:
            commit_log.set_queue_offset(cq.topic, cq.queue_id, cq.max_offset)
    commit_log.tail = (end, checkpoint.physic_msg_timestamp)
    report = RecoveryReport(
        abnormal, method, start, end, truncated, dropped, dispatcher.dispatched_count - before
    )
    if abnormal or truncated or dropped:
        log.warning("store recovery: %s", report)
    return report
