"""Retention: ``CleanCommitLogService`` and ``CleanConsumeQueueService``.

Commit-log segments (never the one being written) are deleted oldest first, at most
``delete_file_batch_max`` per call, when older than ``file_reserved_time_hours`` (by
file modification time) and one of: a manual/forced call, the hour of day is in
``delete_when``, or the disk is fuller than ``disk_max_used_space_ratio``. Above
``disk_space_clean_forcibly_ratio`` segments go even before they expire. Deletion stops
at the first segment that may not go (no holes). Then consume-queue files whose entries
all point below the new commit-log minimum are deleted and each queue's minimum offset
corrected.
"""

from __future__ import annotations

import shutil
import time

import attrs

from .commit_log import CommitLog
from .config import StoreConfig
from .queue_table import ConsumeQueueTable

__all__ = ["RetentionResult", "delete_expired", "disk_used_ratio"]


@attrs.define(slots=True)
class RetentionResult:
    commit_log_segments: int = 0
    consume_queue_files: int = 0
    reason: str = ""
    #: index files removed with the messages they point at (MessageStore.delete_expired)
    index_files: int = 0


def disk_used_ratio(path: str) -> float:
    """Percent of the partition holding ``path`` in use (``getDiskPartitionSpaceUsedPercent``)."""
    usage = shutil.disk_usage(path)
    return 100.0 * (usage.total - usage.free) / usage.total if usage.total else 0.0


def _delete_hours(spec: str) -> set[int]:
    return {int(h) for h in spec.replace(",", ";").split(";") if h.strip().isdigit()}


def delete_expired(
    config: StoreConfig,
    commit_log: CommitLog,
    queues: ConsumeQueueTable,
    now: float | None = None,
    *,
    force: bool = False,
    used_ratio: float | None = None,
) -> RetentionResult:
    """One cleaning pass; ``now`` in epoch seconds (default: the clock)."""
    if now is None:
        now = time.time()
    if used_ratio is None:
        used_ratio = disk_used_ratio(config.store_dir)
    result = RetentionResult()
    in_window = time.localtime(now).tm_hour in _delete_hours(config.delete_when)
    space_full = used_ratio > config.disk_max_used_space_ratio
    clean_now = used_ratio > config.disk_space_clean_forcibly_ratio
    if force:
        result.reason = "manual"
    elif space_full:
        result.reason = "disk"
    elif in_window:
        result.reason = "time"
    else:
        return result
    reserved = config.file_reserved_time_hours * 3600
    count = 0
    for mf in commit_log.files.files[:-1]:
        if count >= config.delete_file_batch_max:
            break
        if clean_now or now >= mf.mtime() + reserved:
            count += 1
        else:
            break
    if count:
        commit_log.files.delete_first(count)
    result.commit_log_segments = count
    min_phy = commit_log.min_offset
    for cq in queues:
        try:
            result.consume_queue_files += cq.delete_expired(min_phy)
        except ValueError:  # "... is closed": its topic was deleted meanwhile
            if not cq.closed:
                raise
    return result
