"""One typed snapshot of a running broker's figures, and the two ways it is published:
GET_BROKER_RUNTIME_INFO's table (:func:`runtime_table`, Java's key names and value
formats, which mqadmin ``brokerStatus``/``clusterList`` and rocketmq-exporter parse) and
the Prometheus endpoint (:mod:`.metrics`). Both are built from the same
:class:`BrokerSnapshot`, so they can never disagree.

:func:`take_snapshot` reads the counters where they live (the store, the processors,
long polling, replication, the remoting server) and the statistics service
(:mod:`.stats`: TPS windows, daily totals, put times), on the broker's trio thread.
``tables=True`` adds the per-topic and per-group figures the metrics endpoint
publishes (their cost grows with the topics and queues; runtime info never asks);
:func:`take_snapshot_tables` gathers those rows a few at a time, letting the broker's
other tasks run between (a scrape of a broker with many topics and groups holds up no
send for longer than :data:`ROWS_PER_TURN` rows take).
"""

from __future__ import annotations

import math
import shutil
import time
from typing import TYPE_CHECKING

from collections.abc import Iterable, Iterator

import attrs
import trio

from trocket._version import version

from .consume_stats import consumed_topics, queue_offsets, topic_matters, total_diff
from .stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    java_double,
)
from .store.put_times import DISTRIBUTE_NAMES

if TYPE_CHECKING:
    from trocket.remoting import RemotingServer

    from .context import BrokerContext
    from .stats import BrokerStatsService

__all__ = [
    "BrokerSnapshot",
    "GroupFigures",
    "TopicFigures",
    "take_snapshot",
    "take_snapshot_tables",
    "runtime_table",
    "human_bytes",
    "BROKER_VERSION",
    "BROKER_VERSION_DESC",
]

#: ``MQVersion.CURRENT_VERSION`` of 4.9.8 (``Version.V4_9_8.ordinal()``) and its name
BROKER_VERSION = 409
BROKER_VERSION_DESC = "V4_9_8"
#: ``TransientStorePool.availableBufferNums`` without a transient store pool
NO_TRANSIENT_POOL = 2**31 - 1
#: Java's ``endTransactionPoolQueueCapacity`` default; trocket has no such pool (none queued)
END_TRANSACTION_QUEUE_CAPACITY = 100_000
#: the admin processor's bounded queue (queries: QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, ...)
QUERY_QUEUE_CAPACITY = 1024
#: :func:`take_snapshot_tables`: topic/group rows per turn of the trio loop (measured:
#: 20-30 us a row on the test machine under load, so about a millisecond a turn)
ROWS_PER_TURN = 32


@attrs.define(slots=True, frozen=True, kw_only=True)
class TopicFigures:
    """One topic: puts in the last minute (messages and bytes per second, Java's
    TOPIC_PUT_NUMS / TOPIC_PUT_SIZE minute TPS) and the sum of its queues' max offsets."""

    topic: str
    put_tps: float
    put_size_tps: float
    max_offset: int


@attrs.define(slots=True, frozen=True, kw_only=True)
class GroupFigures:
    """One consumer group on one topic (rocketmq-exporter's per-group series)."""

    group: str
    topic: str
    get_tps: float
    get_size_tps: float
    send_back_tps: float
    broker_offset: int
    consumer_offset: int
    diff: int
    #: ms between now and the store time of the oldest message not consumed yet (0: none)
    latency_ms: int
    online_consumers: int
    message_model: str


@attrs.define(slots=True, frozen=True, kw_only=True)
class HAFigures:
    role: str
    #: a master's: slaves connected, the offset they acknowledged, how far they lag
    connections: int | None = None
    push_to_slave_max_offset: int | None = None
    slave_fall_behind: int | None = None
    transfer_waiting: int | None = None
    transfer_completed: int | None = None
    transfer_acks_used: int | None = None
    transfer_timed_out: int | None = None
    #: a slave's: its master's HA address and whether it is connected
    master_address: str | None = None
    connected: bool | None = None


@attrs.define(slots=True, frozen=True, kw_only=True)
class BrokerSnapshot:
    """Every figure of a broker at one moment (see the module docstring)."""

    # who
    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    version_desc: str
    boot_timestamp: int
    now_ms: int
    # the store
    commit_log_min_offset: int = 0
    commit_log_max_offset: int = 0
    remain_to_flush: int = 0
    dispatch_behind_bytes: int = 0
    earliest_message_time: int = -1
    flush_disk_type: str = ""
    store_dir: str = ""
    commit_log_dir: str = ""
    disk_total: int = 0
    disk_free: int = 0
    commit_log_disk_ratio: float = -1.0
    consume_queue_disk_ratio: float = -1.0
    lock_ns_total: int = 0
    lock_count_total: int = 0
    schedule_offsets: tuple[tuple[int, int, int], ...] = ()
    #: the transaction service's runtime entries (trocket's own keys: half messages
    #: pending, the oldest one's age, commits, rollbacks, checks)
    transaction_stats: tuple[tuple[str, str], ...] = ()
    #: the index (store/index.py): files, keys indexed since start, bytes not indexed yet
    index_files: int = 0
    index_keys: int = 0
    index_behind_bytes: int = 0
    # puts and gets (StoreStatsService)
    put_total: int = 0
    put_size_total: int = 0
    put_failures: int = 0
    put_time_max_ms: int = 0
    put_distribution: tuple[int, ...] = ()
    put_latency_99: float = 0.0
    put_latency_999: float = 0.0
    get_time_max_ms: int = 0
    put_tps: tuple[float | None, ...] = ()
    get_found_tps: tuple[float | None, ...] = ()
    get_miss_tps: tuple[float | None, ...] = ()
    get_transferred_tps: tuple[float | None, ...] = ()
    get_found_total: int = 0
    get_miss_total: int = 0
    get_transferred_total: int = 0
    #: BROKER_PUT_NUMS / BROKER_GET_NUMS over the last minute (rocketmq-exporter's
    #: ``rocketmq_broker_tps`` / ``rocketmq_broker_qps``)
    broker_put_tps_minute: float = 0.0
    broker_get_tps_minute: float = 0.0
    # BrokerStats
    put_total_yesterday_morning: int = 0
    put_total_today_morning: int = 0
    get_total_yesterday_morning: int = 0
    get_total_today_morning: int = 0
    # processors and queues
    send_queue_size: int = 0
    send_queue_capacity: int = 0
    pull_queue_capacity: int = 0
    pulls_held: int = 0
    pulls_woken_by_arrival: int = 0
    pulls_woken_by_timeout: int = 0
    # remoting
    connections: int = 0
    busy_replies: int = 0
    # replication
    ha: HAFigures | None = None
    # per topic / group (tables=True)
    topics: tuple[TopicFigures, ...] = ()
    groups: tuple[GroupFigures, ...] = ()
    #: ``(producer group, producers connected)`` (rocketmq-exporter's ``rocketmq_producer_count``)
    producer_groups: tuple[tuple[str, int], ...] = ()

    @property
    def get_total_tps(self) -> tuple[float, ...]:
        """``getTotalTps``: found + missed (0 for a window not yet filled, as Java)."""
        return tuple((f or 0.0) + (m or 0.0) for f, m in zip(self.get_found_tps, self.get_miss_tps))


def _disk(path: str) -> tuple[int, int, float]:
    """(total, usable, used ratio) of the partition holding ``path`` (Java's
    ``getDiskPartitionSpaceUsedPercent``: -1 when it cannot tell)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return 0, 0, -1.0
    if not usage.total:
        return 0, 0, -1.0
    return usage.total, usage.free, (usage.total - usage.free) / usage.total


def take_snapshot(
    ctx: BrokerContext, stats: BrokerStatsService, *, boot_timestamp: int, tables: bool = False,
) -> BrokerSnapshot:
    """The broker's figures now (on the broker's trio thread)."""
    cfg = ctx.config
    store = ctx.store
    stats.refresh()
    send = stats.send
    pull = stats.pull
    fig: dict[str, object] = {}
    if not store.closed:
        lock_ns, lock_count = store.lock_stats()
        total, free, ratio = _disk(store.config.store_dir)
        _, _, cq_ratio = _disk(store.config.consume_queue_dir)
        schedule = ctx.schedule
        fig.update(
            commit_log_min_offset=store.min_phy_offset,
            commit_log_max_offset=store.max_phy_offset,
            remain_to_flush=max(0, store.max_phy_offset - store.flushed_offset),
            dispatch_behind_bytes=store.dispatch_behind_bytes,
            earliest_message_time=store.earliest_message_time(),
            flush_disk_type=store.config.flush_mode.value,
            store_dir=store.config.store_dir,
            commit_log_dir=store.config.commit_log_dir,
            disk_total=total,
            disk_free=free,
            commit_log_disk_ratio=ratio,
            consume_queue_disk_ratio=cq_ratio,
            lock_ns_total=lock_ns,
            lock_count_total=lock_count,
            put_time_max_ms=store.commit_log.put_times.max_ms,
            schedule_offsets=tuple(schedule.offsets_and_max()) if schedule is not None else (),
            transaction_stats=tuple(ctx.transactions.running_stats().items()) if ctx.transactions is not None else (),
        )
        if store.index is not None:
            fig.update(index_files=len(store.index.files), index_keys=store.index.keys_indexed,
                       index_behind_bytes=max(0, store.dispatcher.dispatched_offset - store.index.next_offset))
    fig.update(
        put_total=stats.put_total,
        put_size_total=stats.put_size_total,
        put_distribution=tuple(stats.put_distribution()),
        put_latency_99=stats.put_latency(0.99),
        put_latency_999=stats.put_latency(0.999),
        put_tps=tuple(stats.put_tps.tps(s) for s in (10, 60, 600)),
        get_found_tps=tuple(stats.get_found_tps.tps(s) for s in (10, 60, 600)),
        get_miss_tps=tuple(stats.get_miss_tps.tps(s) for s in (10, 60, 600)),
        get_transferred_tps=tuple(stats.get_transferred_tps.tps(s) for s in (10, 60, 600)),
        put_total_yesterday_morning=stats.put_total_yesterday_morning,
        put_total_today_morning=stats.put_total_today_morning,
        get_total_yesterday_morning=stats.get_total_yesterday_morning,
        get_total_today_morning=stats.get_total_today_morning,
        send_queue_capacity=cfg.send_queue_capacity,
        pull_queue_capacity=cfg.pull_queue_capacity,
    )
    for name, field in ((BROKER_PUT_NUMS, "broker_put_tps_minute"), (BROKER_GET_NUMS, "broker_get_tps_minute")):
        item = stats.item(name, cfg.cluster)
        if item is not None:
            fig[field] = item.in_minute().tps
    if send is not None:
        fig.update(put_failures=send.put_failures, send_queue_size=max(0, send.pending - cfg.send_concurrency))
    if pull is not None:
        fig.update(
            get_time_max_ms=pull.get_time_max_ns // 1_000_000,
            get_found_total=pull.found,
            get_miss_total=pull.missed,
            get_transferred_total=pull.found_messages,
        )
    hold = ctx.pull_hold
    if hold is not None:
        fig.update(
            pulls_held=hold.held_count,
            pulls_woken_by_arrival=hold.woken_by_arrival,
            pulls_woken_by_timeout=hold.woken_by_timeout,
        )
    server: RemotingServer = ctx.server
    fig.update(connections=len(server.connections), busy_replies=server.stats.busy_replies)
    if ctx.ha is not None:
        fig["ha"] = _ha_figures(ctx)
    if tables and not store.closed:
        fig["topics"] = tuple(_topic_figures(ctx, stats))
        fig["groups"] = tuple(_group_figures(ctx, stats))
        fig["producer_groups"] = _producer_groups(ctx)
    return BrokerSnapshot(
        cluster=cfg.cluster,
        broker_name=cfg.broker_name,
        broker_id=cfg.broker_id,
        broker_addr=ctx.broker_addr(),
        version_desc=f"trocket {version()} ({BROKER_VERSION_DESC} protocol)",
        boot_timestamp=boot_timestamp,
        now_ms=int(time.time() * 1000),
        **fig,  # type: ignore[arg-type]
    )


def _ha_figures(ctx: BrokerContext) -> HAFigures:
    ha = ctx.ha
    assert ha is not None
    fig: dict[str, object] = {"role": ctx.config.broker_role}
    store = ctx.store
    if ha.server is not None and not store.closed:
        transfer = ha.transfer
        fig.update(
            connections=transfer.connections,
            push_to_slave_max_offset=transfer.acked,
            slave_fall_behind=max(0, store.max_phy_offset - transfer.acked) if ha.server.slaves else 0,
            transfer_waiting=transfer.waiting,
            transfer_completed=transfer.completed,
            transfer_acks_used=transfer.acks_used,
            transfer_timed_out=transfer.timed_out,
        )
    if ha.client is not None:
        master = ha.client.master
        fig.update(master_address="" if master is None else "%s:%d" % master, connected=ha.client.connected)
    return HAFigures(**fig)  # type: ignore[arg-type]


async def take_snapshot_tables(
    ctx: BrokerContext, stats: BrokerStatsService, *, boot_timestamp: int, rows_per_turn: int = ROWS_PER_TURN,
) -> BrokerSnapshot:
    """:func:`take_snapshot` with ``tables=True``, the counters read at once and the
    topic and group rows ``rows_per_turn`` at a time, the other tasks running between
    (a topic or group gone meanwhile is left out)."""
    snap = take_snapshot(ctx, stats, boot_timestamp=boot_timestamp)
    if ctx.store.closed:
        return snap
    topics = await _in_turns(_topic_figures(ctx, stats), rows_per_turn)
    groups = await _in_turns(_group_figures(ctx, stats), rows_per_turn)
    return attrs.evolve(snap, topics=topics, groups=groups, producer_groups=_producer_groups(ctx))


async def _in_turns(rows: Iterable[object], per_turn: int) -> tuple:
    out = []
    for row in rows:
        out.append(row)
        if len(out) % per_turn == 0:
            await trio.lowlevel.checkpoint()
    return tuple(out)


def _producer_groups(ctx: BrokerContext) -> tuple[tuple[str, int], ...]:
    producers = ctx.producers
    return tuple(sorted((g, len(producers.channels(g))) for g in producers.groups()))


def _topic_figures(ctx: BrokerContext, stats: BrokerStatsService) -> Iterator[TopicFigures]:
    """One row a topic (a generator: rows may be gathered over several turns)."""
    store = ctx.store
    for topic, tc in sorted(ctx.topics.all().items()):
        if store.closed:
            return
        nums = stats.item(TOPIC_PUT_NUMS, topic)
        size = stats.item(TOPIC_PUT_SIZE, topic)
        max_offset = sum(store.get_max_offset(topic, q) for q in range(tc.write_queue_nums))
        yield TopicFigures(
            topic=topic,
            put_tps=nums.in_minute().tps if nums is not None else 0.0,
            put_size_tps=size.in_minute().tps if size is not None else 0.0,
            max_offset=max_offset,
        )


def _group_figures(ctx: BrokerContext, stats: BrokerStatsService) -> Iterator[GroupFigures]:
    """One row a (group, topic) consumed (a generator, as :func:`_topic_figures`)."""
    store, offsets, topics, consumers = ctx.store, ctx.offsets, ctx.topics, ctx.consumers
    pairs: set[tuple[str, str]] = set()
    for key in offsets.snapshot():
        topic, _, group = key.partition("@")
        pairs.add((group, topic))
    for group in consumers.groups():
        info = consumers.group_info(group)
        if info is not None:
            pairs.update((group, topic) for topic in info.subscriptions)
    now_ms = int(time.time() * 1000)
    for group, topic in sorted(pairs):
        if store.closed:
            return
        if not consumed_topics(offsets, topics, group, topic) or not topic_matters(consumers, group, topic):
            continue
        tc = topics.select(topic)
        if tc is None:  # deleted since the pairs were listed
            continue
        queues = queue_offsets(store, offsets, group, topic, tc.read_queue_nums)
        latency = 0
        for q in queues:
            if q.diff > 0:
                ts = store.get_message_store_timestamp(topic, q.queue_id, q.consumer_offset)
                if ts > 0:
                    latency = max(latency, now_ms - ts)
        info = consumers.group_info(group)
        key = f"{topic}@{group}"
        gets, size, back = (stats.item(name, key) for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS))
        yield GroupFigures(
            group=group,
            topic=topic,
            get_tps=gets.in_minute().tps if gets is not None else 0.0,
            get_size_tps=size.in_minute().tps if size is not None else 0.0,
            send_back_tps=back.in_minute().tps if back is not None else 0.0,
            broker_offset=sum(q.broker_offset for q in queues),
            consumer_offset=sum(q.consumer_offset for q in queues),
            diff=total_diff(queues),
            latency_ms=latency,
            online_consumers=len(info.channels) if info is not None else 0,
            message_model=info.message_model.name if info is not None else "",
        )


# -- GET_BROKER_RUNTIME_INFO ----------------------------------------------------------


def human_bytes(n: float) -> str:
    """``MixAll.humanReadableByteCount(n, false)``: ``512 B``, ``1.5 KiB``."""
    if n < 1024:
        return f"{int(n)} B"
    exp = min(int(math.log(n, 1024)), 6)
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def _tps_text(values: tuple[float | None, ...]) -> str:
    return " ".join("" if v is None else java_double(v) for v in values)


def _runtime(boot_timestamp: int, now_ms: int) -> str:
    """``getFormatRuntime``: ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``."""
    up = max(0, now_ms - boot_timestamp) // 1000 if boot_timestamp else 0
    d, rem = divmod(up, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return f"[ {d} days, {h} hours, {m} minutes, {s} seconds ]"


def runtime_table(s: BrokerSnapshot) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's ``KVTable`` (``prepareRuntimeInfo`` with the store's
    ``getRuntimeInfo``): Java's keys and formats, then trocket's own figures."""
    puts = max(1, s.put_total)  # Java: a total of 0 is reported (and divided) as 1
    t: dict[str, str] = {
        "brokerVersionDesc": s.version_desc,
        "brokerVersion": str(BROKER_VERSION),
        "bootTimestamp": str(s.boot_timestamp),
        "runtime": _runtime(s.boot_timestamp, s.now_ms),
        # StoreStatsService
        "putMessageEntireTimeMax": str(s.put_time_max_ms),
        "putMessageTimesTotal": str(puts),
        "putMessageFailedTimes": str(s.put_failures),
        "putMessageSizeTotal": str(s.put_size_total),
        "putMessageDistributeTime": "".join(f"{name}:{n} " for name, n in zip(DISTRIBUTE_NAMES, s.put_distribution)),
        "putMessageAverageSize": java_double(s.put_size_total / puts),
        "dispatchMaxBuffer": "0",
        "getMessageEntireTimeMax": str(s.get_time_max_ms),
        "putTps": _tps_text(s.put_tps),
        "getFoundTps": _tps_text(s.get_found_tps),
        "getMissTps": _tps_text(s.get_miss_tps),
        "getTotalTps": " ".join(java_double(v) for v in s.get_total_tps),
        "getTransferedTps": _tps_text(s.get_transferred_tps),
        "putLatency99": f"{s.put_latency_99:.2f}",
        "putLatency999": f"{s.put_latency_999:.2f}",
        # DefaultMessageStore
        "commitLogMinOffset": str(s.commit_log_min_offset),
        "commitLogMaxOffset": str(s.commit_log_max_offset),
        "commitLogDiskRatio": java_double(s.commit_log_disk_ratio),
        f"commitLogDiskRatio_{s.commit_log_dir}": java_double(s.commit_log_disk_ratio),
        "consumeQueueDiskRatio": java_double(s.consume_queue_disk_ratio),
        # BrokerStats and the broker's pools
        "msgPutTotalYesterdayMorning": str(s.put_total_yesterday_morning),
        "msgPutTotalTodayMorning": str(s.put_total_today_morning),
        "msgPutTotalTodayNow": str(s.put_total),
        "msgGetTotalYesterdayMorning": str(s.get_total_yesterday_morning),
        "msgGetTotalTodayMorning": str(s.get_total_today_morning),
        "msgGetTotalTodayNow": str(s.get_transferred_total),
        # sends run on the connection's reader: the "queue" is the sends waiting for
        # their answer past the concurrency; nothing waits to start, so no head waits
        "sendThreadPoolQueueSize": str(s.send_queue_size),
        "sendThreadPoolQueueCapacity": str(s.send_queue_capacity),
        "pullThreadPoolQueueSize": "0",
        "pullThreadPoolQueueCapacity": str(s.pull_queue_capacity),
        "queryThreadPoolQueueSize": "0",
        "queryThreadPoolQueueCapacity": str(QUERY_QUEUE_CAPACITY),
        "EndTransactionQueueSize": "0",
        "EndTransactionThreadPoolQueueCapacity": str(END_TRANSACTION_QUEUE_CAPACITY),
        "dispatchBehindBytes": str(s.dispatch_behind_bytes),
        "pageCacheLockTimeMills": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "queryThreadPoolQueueHeadWaitTimeMills": "0",
        "earliestMessageTimeStamp": str(s.earliest_message_time),
        "startAcceptSendRequestTimeStamp": "0",
        "remainTransientStoreBufferNumbs": str(NO_TRANSIENT_POOL),
        "remainHowManyDataToFlush": human_bytes(s.remain_to_flush),
        "commitLogDirCapacity": f"Total : {human_bytes(s.disk_total)}, Free : {human_bytes(s.disk_free)}.",
        # trocket's own
        "flushDiskType": s.flush_disk_type,
        "putMessageLockTimeNanosTotal": str(s.lock_ns_total),
        "putMessageLockTimesTotal": str(s.lock_count_total),
        "getFoundTimesTotal": str(s.get_found_total),
        "getMissTimesTotal": str(s.get_miss_total),
        "getMessageTransferedMsgCount": str(s.get_transferred_total),
        "pullRequestHeldNow": str(s.pulls_held),
        "pullRequestWokenByArrival": str(s.pulls_woken_by_arrival),
        "pullRequestWokenByTimeout": str(s.pulls_woken_by_timeout),
        "connections": str(s.connections),
        "systemBusyReplies": str(s.busy_replies),
    }
    for level, offset, max_offset in s.schedule_offsets:
        t[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
    t.update(s.transaction_stats)
    ha = s.ha
    if ha is not None:
        t["brokerRole"] = ha.role
        if ha.connections is not None:
            t.update({
                "haConnections": str(ha.connections),
                "haPush2SlaveMaxOffset": str(ha.push_to_slave_max_offset),
                "haSlaveFallBehind": str(ha.slave_fall_behind),
                "haTransferWaiting": str(ha.transfer_waiting),
                # sends completed / acknowledgements that completed some: the batching
                "haTransferCompleted": str(ha.transfer_completed),
                "haTransferAcksUsed": str(ha.transfer_acks_used),
                "haTransferTimedOut": str(ha.transfer_timed_out),
            })
        if ha.connected is not None:
            t["haMasterAddress"] = ha.master_address or ""
            t["haConnected"] = str(ha.connected).lower()
    return t
