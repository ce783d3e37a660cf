"""StoreConfig: the knobs of the message store, with RocketMQ 4.9.8's defaults.

Names follow ``MessageStoreConfig`` (Java name in each comment) so they grep.
"""

from __future__ import annotations

import enum
import os

import attrs

from trocket.codecs.message.hosts import HostAddress

__all__ = ["DEFAULT_DELAY_LEVELS_MS", "FlushMode", "StoreConfig"]

GiB = 1 << 30
MiB = 1 << 20

#: ``messageDelayLevel`` "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h" in
#: milliseconds, level 1 first (the broker parses the text: :mod:`trocket.broker.schedule`).
DEFAULT_DELAY_LEVELS_MS: tuple[int, ...] = (
    1_000, 5_000, 10_000, 30_000,
    *(m * 60_000 for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30)),
    3_600_000, 7_200_000,
)


class FlushMode(enum.Enum):
    """``FlushDiskType``: ASYNC_FLUSH (timed) or SYNC_FLUSH (a send awaits its fsync)."""

    ASYNC = "ASYNC_FLUSH"
    SYNC = "SYNC_FLUSH"


def _flush_mode(value: FlushMode | str) -> FlushMode:
    if isinstance(value, FlushMode):
        return value
    text = str(value).upper()
    for mode in FlushMode:
        if text in (mode.value, mode.name):
            return mode
    raise ValueError(f"unknown flush mode {value!r}: ASYNC or SYNC")


@attrs.define(slots=True, kw_only=True)
class StoreConfig:
    """Where the store lives and how it writes. Every field has RocketMQ's default."""

    #: ``storePathRootDir``: holds ``commitlog/``, ``consumequeue/``, ``config/``,
    #: ``checkpoint`` and ``abort``.
    store_dir: str = attrs.field(converter=os.fspath)
    #: ``mappedFileSizeCommitLog``: bytes per commit-log segment (1 GiB).
    commit_log_segment_size: int = 1 * GiB
    #: ``mappedFileSizeConsumeQueue`` / 20: entries per consume-queue file (300,000).
    consume_queue_entries_per_file: int = 300_000
    #: ``flushDiskType``.
    flush_mode: FlushMode = attrs.field(default=FlushMode.ASYNC, converter=_flush_mode)
    #: ``flushIntervalCommitLog`` (ms): the timed flusher's period in ASYNC mode.
    flush_interval_ms: int = 500
    #: ``flushCommitLogLeastPages``: the timed flusher skips a flush with fewer dirty pages...
    flush_least_pages: int = 4
    #: ``flushCommitLogThoroughInterval`` (ms): ...unless this long has passed since the last.
    flush_thorough_interval_ms: int = 10_000
    #: ``syncFlushTimeout`` (ms): a SYNC send waits this long for its fsync, then
    #: answers FLUSH_DISK_TIMEOUT.
    sync_flush_timeout_ms: int = 5_000
    #: GroupCommitService's idle wake-up (ms): it also flushes unrequested writes this often.
    group_commit_interval_ms: int = 10
    #: ``flushIntervalConsumeQueue`` (ms): consume queues and the checkpoint are flushed
    #: this often.
    flush_consume_queue_interval_ms: int = 1_000
    #: ``maxMessageSize``: largest record (and batch) accepted (4 MiB).
    max_message_size: int = 4 * MiB
    #: ``fileReservedTime`` (hours): commit-log segments older than this may be deleted.
    file_reserved_time_hours: float = 72
    #: ``deleteWhen``: hours of the day (``"04"``, ``"04;05"``) when expired segments are
    #: deleted even with disk to spare.
    delete_when: str = "04"
    #: ``diskMaxUsedSpaceRatio`` (percent): above it, expired segments are deleted at once.
    disk_max_used_space_ratio: int = 75
    #: ``diskSpaceCleanForciblyRatio`` (percent): above it, segments are deleted even
    #: before they expire, oldest first.
    disk_space_clean_forcibly_ratio: int = 85
    #: ``deleteFileBatchMax``: segments deleted per call at most.
    delete_file_batch_max: int = 10
    #: ``maxTransferBytesOnMessageInMemory`` / ``maxTransferCountOnMessageInMemory``:
    #: one pull returns at most this many bytes / messages (the store serves everything
    #: from memory maps, so the in-memory limits apply).
    max_transfer_bytes: int = 256 * 1024
    max_transfer_count: int = 32
    #: ``maxFilterMessageCount`` (4.9.8: 16000 bytes of consume queue): how far one pull
    #: scans past non-matching tags before answering.
    max_filter_scan_bytes: int = 16_000
    #: ``accessMessageInMemoryMaxRatio`` (percent of the RAM): a pull reading further
    #: behind the log's end is told to go to a slave (``suggestPullingFromSlave``), 40.
    access_message_in_memory_max_ratio: int = 40
    #: ``checkCRCOnRecover``: recovery verifies each record's body CRC.
    check_crc_on_recover: bool = True
    #: Reserve segment disk space at creation (``posix_fallocate``) so a full disk fails
    #: the roll-over with an error instead of a SIGBUS on a later write to the map.
    preallocate: bool = True
    #: Make the next commit-log segment ahead of need, in the background
    #: (``AllocateMappedFileService``, :mod:`.allocate`), so a put that rolls the log
    #: over does not create and reserve a segment file inline. Off: the put does.
    allocate_ahead: bool = True
    #: The broker's address, written as STOREHOST of every record (and so part of every
    #: offset message id): ``brokerIP1`` and the listen port.
    store_host: HostAddress = attrs.field(
        default=HostAddress("127.0.0.1", 10911), converter=lambda h: HostAddress(h[0], int(h[1]))
    )
    #: ``messageDelayLevel``, parsed: the delay (ms) of each level, level 1 first. A record
    #: on ``SCHEDULE_TOPIC_XXXX`` with ``DELAY=<level>`` gets store time + its level's delay
    #: (the deliver time) as its consume-queue tags code, on put and on recovery alike
    #: (Java's ``checkMessageAndReturnSize``); levels above the last count as the last.
    delay_levels_ms: tuple[int, ...] = attrs.field(default=DEFAULT_DELAY_LEVELS_MS, converter=tuple)
    #: ``messageIndexEnable``: index every message's keys and unique key (:mod:`.index`).
    message_index_enable: bool = True
    #: ``maxHashSlotNum`` / ``maxIndexNum``: slots and entries of an index file (5 and 20
    #: million: 420 MB, created sparse).
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    #: ``maxMsgsNumBatch``: the most offsets one QUERY_MESSAGE looks up (64);
    #: ``defaultQueryMaxNum``: a query by unique key's (32).
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32

    def __attrs_post_init__(self) -> None:
        if self.commit_log_segment_size < 4096:
            raise ValueError("commit_log_segment_size must be at least 4096 bytes")
        if self.consume_queue_entries_per_file < 1:
            raise ValueError("consume_queue_entries_per_file must be positive")
        if self.max_message_size <= 0:
            raise ValueError("max_message_size must be positive")
        if self.max_hash_slot_num < 1 or self.max_index_num < 2:
            raise ValueError("an index file needs a slot and two entries at least")

    # -- paths (``StorePathConfigHelper``) ---------------------------------------------

    @property
    def commit_log_dir(self) -> str:
        return os.path.join(self.store_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_dir, "consumequeue")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_dir, "config")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_dir, "abort")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_dir, "index")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.store_dir, "lock")
