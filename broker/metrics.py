"""The Prometheus endpoint (``trocket broker --metrics HOST:PORT``): ``/metrics`` in the
Prometheus text format, served by the official ``prometheus_client`` package (the
``trocket[metrics]`` extra).

The figures are rocketmq-exporter's, under its metric names and labels, so its Grafana
dashboards work unchanged against a trocket broker scraped directly (no exporter in
between): ``rocketmq_broker_tps``/``qps`` {cluster, brokerIP, broker},
``rocketmq_producer_tps``/``message_size``/``offset``, ``rocketmq_topic_retry_offset``,
``rocketmq_topic_dlq_offset`` {cluster, broker, topic|group}, ``rocketmq_consumer_tps``/
``message_size``/``offset``, ``rocketmq_group_consume_tps``, ``rocketmq_send_back_nums``,
``rocketmq_group_get_latency_by_storetime`` {cluster, broker, topic, group},
``rocketmq_group_diff``/``retrydiff``/``dlqdiff`` {group, topic, countOfOnlineConsumers,
msgModel}, ``rocketmq_group_count``, and every ``rocketmq_brokeruntime_*`` {cluster,
brokerIP, brokerHost, des, boottime, broker_version} (the put-time distribution, the TPS
windows, the daily totals, offsets, disk, queues). The consumer clients' own figures
(``rocketmq_client_*``: the exporter asks each client) are not the broker's to give.
trocket adds its own under ``trocket_``: replication (slaves, the bytes a slave is
behind, a slave's link to its master), store disk use, remoting connections, SYSTEM_BUSY
refusals, put failures, held pulls, the index (files, keys, bytes not indexed yet).

Everything comes from one :class:`~.snapshot.BrokerSnapshot` (with its tables), the
one GET_BROKER_RUNTIME_INFO formats: the two can never disagree. A scrape runs in the
HTTP server's thread; it asks the broker's trio thread for the snapshot
(:func:`~.snapshot.take_snapshot_tables`: the counters read at once, the topic and
group rows a few at a time between other tasks' turns, never under a store lock;
reused for scrapes within :data:`SNAPSHOT_TTL` of each other) and builds the text in
its own thread, so neither a broker with many topics nor a slow or stuck scraper
holds up a send for long.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs
import trio

if TYPE_CHECKING:
    from .namesrv.server import NameServer
    from .snapshot import BrokerSnapshot

__all__ = [
    "MetricsEndpoint",
    "NamesrvFigures",
    "broker_families",
    "namesrv_endpoint",
    "namesrv_families",
    "require_prometheus_client",
    "take_namesrv_figures",
    "SNAPSHOT_TTL",
]

log = logging.getLogger(__name__)

#: scrapes this close together share one snapshot (seconds)
SNAPSHOT_TTL = 1.0

RUNTIME_LABELS = ["cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"]
BROKER_LABELS = ["cluster", "brokerIP", "broker"]
TOPIC_LABELS = ["cluster", "broker", "topic"]
GROUP_LABELS = ["cluster", "broker", "topic", "group"]
DIFF_LABELS = ["group", "topic", "countOfOnlineConsumers", "msgModel"]
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
#: ``MessageModel.ordinal()``, the exporter's msgModel label
_MODEL_ORDINAL = {"BROADCASTING": "0", "CLUSTERING": "1"}
#: the exporter's names of the put-time buckets, in DISTRIBUTE_NAMES' order
_PMDT = ["0ms", "0to10ms", "10to50ms", "50to100ms", "100to200ms", "200to500ms", "500to1s", "1to2s", "2to3s",
         "3to4s", "4to5s", "5to10s", "10stomore"]


def require_prometheus_client() -> None:
    """Raise a clear error when the optional package is missing."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise RuntimeError(
            "--metrics needs the prometheus_client package: pip install 'trocket[metrics]'"
        ) from None


def _tps(values: tuple[float | None, ...], i: int) -> float:
    return float(values[i] or 0.0) if i < len(values) else 0.0


def broker_families(s: BrokerSnapshot) -> list[Any]:
    """The metric families of one snapshot (``prometheus_client`` objects)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from .snapshot import BROKER_VERSION, NO_TRANSIENT_POOL, QUERY_QUEUE_CAPACITY

    out: list[Any] = []

    def gauge(name: str, doc: str, labels: list[str], samples: list[tuple[list[str], float]]) -> None:
        fam = GaugeMetricFamily(name, doc, labels=labels)
        for values, value in samples:
            fam.add_metric(values, float(value))
        out.append(fam)

    def counter(name: str, doc: str, labels: list[str], samples: list[tuple[list[str], float]]) -> None:
        fam = CounterMetricFamily(name, doc, labels=labels)
        for values, value in samples:
            fam.add_metric(values, float(value))
        out.append(fam)

    cluster, name, addr = s.cluster, s.broker_name, s.broker_addr

    # -- rocketmq-exporter: the broker -----------------------------------------------------
    who = [cluster, addr, name]
    gauge("rocketmq_broker_tps", "BrokerPutNums: messages put per second, last minute", BROKER_LABELS,
          [(who, s.broker_put_tps_minute)])
    gauge("rocketmq_broker_qps", "BrokerGetNums: messages got per second, last minute", BROKER_LABELS,
          [(who, s.broker_get_tps_minute)])

    # -- topics ----------------------------------------------------------------------------
    plain = [t for t in s.topics if not t.topic.startswith((RETRY_PREFIX, DLQ_PREFIX))]
    gauge("rocketmq_producer_tps", "TopicPutNums: messages put per second, last minute", TOPIC_LABELS,
          [([cluster, name, t.topic], t.put_tps) for t in plain])
    gauge("rocketmq_producer_message_size", "TopicPutMessageSize: bytes put per second, last minute", TOPIC_LABELS,
          [([cluster, name, t.topic], t.put_size_tps) for t in plain])
    gauge("rocketmq_producer_offset", "TopicOffset: the sum of the topic's queues' max offsets", TOPIC_LABELS,
          [([cluster, name, t.topic], t.max_offset) for t in plain])
    gauge("rocketmq_topic_retry_offset", "TopicRetryOffset: a retry topic's max offsets", TOPIC_LABELS,
          [([cluster, name, t.topic], t.max_offset) for t in s.topics if t.topic.startswith(RETRY_PREFIX)])
    gauge("rocketmq_topic_dlq_offset", "TopicDLQOffset: a dead-letter topic's max offsets", ["cluster", "broker", "group"],
          [([cluster, name, t.topic[len(DLQ_PREFIX):]], t.max_offset) for t in s.topics if t.topic.startswith(DLQ_PREFIX)])

    gauge("rocketmq_producer_count", "producer instance counter", ["cluster", "broker", "group"],
          [([cluster, name, group], n) for group, n in s.producer_groups])

    # -- consumer groups -------------------------------------------------------------------
    def per_group(attr: str) -> list[tuple[list[str], float]]:
        return [([cluster, name, g.topic, g.group], getattr(g, attr)) for g in s.groups]

    gauge("rocketmq_consumer_tps", "GroupGetNums: messages pulled per second, last minute", GROUP_LABELS,
          per_group("get_tps"))
    gauge("rocketmq_group_consume_tps", "GroupConsumeTPS: messages pulled per second, last minute", GROUP_LABELS,
          per_group("get_tps"))
    gauge("rocketmq_consumer_message_size", "GroupGetMessageSize: bytes pulled per second, last minute", GROUP_LABELS,
          per_group("get_size_tps"))
    gauge("rocketmq_consumer_offset", "GroupBrokerTotalOffset: the group's committed offsets, summed", GROUP_LABELS,
          per_group("consumer_offset"))
    gauge("rocketmq_send_back_nums", "SendBackNums: messages sent back per second, last minute", GROUP_LABELS,
          per_group("send_back_tps"))
    gauge("rocketmq_group_get_latency_by_storetime",
          "GroupGetLatencyByStoreTime: ms since the oldest message not consumed yet was stored", GROUP_LABELS,
          per_group("latency_ms"))
    diffs: dict[str, list[tuple[list[str], float]]] = {"": [], RETRY_PREFIX: [], DLQ_PREFIX: []}
    counts: dict[str, int] = {}
    for g in s.groups:
        model = _MODEL_ORDINAL.get(g.message_model, "1")
        prefix = RETRY_PREFIX if g.topic.startswith(RETRY_PREFIX) else DLQ_PREFIX if g.topic.startswith(DLQ_PREFIX) else ""
        if model == "1":  # the exporter reports clustering groups' diffs only
            diffs[prefix].append(([g.group, g.topic, str(g.online_consumers), model], g.diff))
        counts[g.group] = max(counts.get(g.group, 0), g.online_consumers)
    gauge("rocketmq_group_diff", "GroupDiff: messages not consumed yet", DIFF_LABELS, diffs[""])
    gauge("rocketmq_group_retrydiff", "GroupRetryDiff: retry messages not consumed yet", DIFF_LABELS, diffs[RETRY_PREFIX])
    gauge("rocketmq_group_dlqdiff", "GroupDLQDiff: dead letters not consumed", DIFF_LABELS, diffs[DLQ_PREFIX])
    gauge("rocketmq_group_count", "GroupCount: the group's online consumers", ["caddr", "localaddr", "group"],
          [(["", "", group], n) for group, n in sorted(counts.items())])

    # -- the broker's runtime info ---------------------------------------------------------
    rt = [cluster, addr, "", s.version_desc, str(s.boot_timestamp), str(BROKER_VERSION)]
    puts = max(1, s.put_total)  # as the runtime table: Java reports (and divides by) 1 for 0

    def runtime(metric: str, doc: str, value: float) -> None:
        gauge(f"rocketmq_brokeruntime_{metric}", doc, RUNTIME_LABELS, [(rt, value)])

    for bucket, count in zip(_PMDT, s.put_distribution):
        runtime(f"pmdt_{bucket}", f"PutMessageDistributeTime {bucket}: puts of the last minute", count)
    runtime("msg_put_total_today_now", "msgPutTotalTodayNow", s.put_total)
    runtime("msg_gettotal_today_now", "msgGetTotalTodayNow", s.get_transferred_total)
    runtime("msg_puttotal_todaymorning", "msgPutTotalTodayMorning", s.put_total_today_morning)
    runtime("msg_gettotal_todaymorning", "msgGetTotalTodayMorning", s.get_total_today_morning)
    runtime("msg_puttotal_yesterdaymorning", "msgPutTotalYesterdayMorning", s.put_total_yesterday_morning)
    runtime("msg_gettotal_yesterdaymorning", "msgGetTotalYesterdayMorning", s.get_total_yesterday_morning)
    runtime("dispatch_behind_bytes", "dispatchBehindBytes", s.dispatch_behind_bytes)
    runtime("put_message_size_total", "putMessageSizeTotal", s.put_size_total)
    runtime("put_message_average_size", "putMessageAverageSize", s.put_size_total / puts)
    runtime("putmessage_times_total", "putMessageTimesTotal", puts)
    runtime("putmessage_entire_time_max", "putMessageEntireTimeMax (ms)", s.put_time_max_ms)
    runtime("getmessage_entire_time_max", "getMessageEntireTimeMax (ms)", s.get_time_max_ms)
    runtime("earliest_message_timestamp", "earliestMessageTimeStamp (ms)", s.earliest_message_time)
    runtime("start_accept_sendrequest_time", "startAcceptSendRequestTimeStamp", 0)
    runtime("remain_transientstore_buffer_numbs", "remainTransientStoreBufferNumbs", NO_TRANSIENT_POOL)
    runtime("query_threadpool_queue_capacity", "queryThreadPoolQueueCapacity", QUERY_QUEUE_CAPACITY)
    runtime("send_threadpool_queue_size", "sendThreadPoolQueueSize", s.send_queue_size)
    runtime("send_threadpoolqueue_capacity", "sendThreadPoolQueueCapacity", s.send_queue_capacity)
    runtime("pull_threadpoolqueue_capacity", "pullThreadPoolQueueCapacity", s.pull_queue_capacity)
    runtime("pull_threadpoolqueue_size", "pullThreadPoolQueueSize", 0)
    runtime("query_threadpoolqueue_size", "queryThreadPoolQueueSize", 0)
    for pool in ("send", "pull", "query"):
        runtime(f"{pool}_threadpoolqueue_headwait_timemills", f"{pool}ThreadPoolQueueHeadWaitTimeMills", 0)
    runtime("pagecache_lock_time_mills", "pageCacheLockTimeMills", 0)
    runtime("dispatch_maxbuffer", "dispatchMaxBuffer", 0)
    runtime("commitlog_disk_ratio", "commitLogDiskRatio", max(0.0, s.commit_log_disk_ratio))
    runtime("consumequeue_disk_ratio", "consumeQueueDiskRatio", max(0.0, s.consume_queue_disk_ratio))
    runtime("commitlogdir_capacity_total", "commitLogDirCapacity Total (bytes)", s.disk_total)
    runtime("commitlogdir_capacity_free", "commitLogDirCapacity Free (bytes)", s.disk_free)
    runtime("commitlog_maxoffset", "commitLogMaxOffset", s.commit_log_max_offset)
    runtime("commitlog_minoffset", "commitLogMinOffset", s.commit_log_min_offset)
    runtime("remain_howmanydata_toflush", "remainHowManyDataToFlush (bytes)", s.remain_to_flush)
    runtime("put_latency_99", "putLatency99 (ms)", s.put_latency_99)
    runtime("put_latency_999", "putLatency999 (ms)", s.put_latency_999)
    total = s.get_total_tps
    for window, i in (("10", 0), ("60", 1), ("600", 2)):
        runtime(f"put_tps{window}", f"putTps over {window} s", _tps(s.put_tps, i))
        runtime(f"getfound_tps{window}", f"getFoundTps over {window} s", _tps(s.get_found_tps, i))
        runtime(f"getmiss_tps{window}", f"getMissTps over {window} s", _tps(s.get_miss_tps, i))
        runtime(f"gettransfered_tps{window}", f"getTransferedTps over {window} s", _tps(s.get_transferred_tps, i))
        runtime(f"gettotal_tps{window}", f"getTotalTps over {window} s", _tps(total, i))

    # -- trocket's own ---------------------------------------------------------------------
    mine = [cluster, name, addr]
    labels = ["cluster", "broker", "brokerIP"]
    used = s.disk_total - s.disk_free if s.disk_total else 0
    gauge("trocket_store_disk_used_bytes", "bytes used on the store's file system", labels, [(mine, used)])
    gauge("trocket_store_disk_total_bytes", "the store's file system's size", labels, [(mine, s.disk_total)])
    gauge("trocket_store_disk_used_ratio", "used share of the store's file system (0..1)", labels,
          [(mine, max(0.0, s.commit_log_disk_ratio))])
    gauge("trocket_store_commitlog_bytes", "bytes the commit log holds (max - min offset)", labels,
          [(mine, s.commit_log_max_offset - s.commit_log_min_offset)])
    gauge("trocket_remoting_connections", "client connections open now", labels, [(mine, s.connections)])
    counter("trocket_system_busy_replies", "requests refused with SYSTEM_BUSY (flow control)", labels,
            [(mine, s.busy_replies)])
    counter("trocket_put_failures", "sends the store refused", labels, [(mine, s.put_failures)])
    gauge("trocket_pulls_held", "pulls held by long polling now", labels, [(mine, s.pulls_held)])
    gauge("trocket_index_files", "index files", labels, [(mine, s.index_files)])
    counter("trocket_index_keys", "keys indexed since the broker started", labels, [(mine, s.index_keys)])
    gauge("trocket_index_behind_bytes", "commit-log bytes dispatched but not indexed yet", labels,
          [(mine, s.index_behind_bytes)])
    ha = s.ha
    if ha is not None:
        gauge("trocket_ha_slaves", "slaves replicating from this master", labels,
              [(mine, ha.connections or 0)] if ha.connections is not None else [])
        gauge("trocket_ha_slave_fall_behind_bytes", "commit-log bytes the slave has not acknowledged", labels,
              [(mine, ha.slave_fall_behind or 0)] if ha.slave_fall_behind is not None else [])
        gauge("trocket_ha_slave_ack_offset", "the commit-log offset the slave acknowledged", labels,
              [(mine, ha.push_to_slave_max_offset)] if ha.push_to_slave_max_offset is not None else [])
        counter("trocket_ha_sync_timeouts", "SYNC_MASTER sends whose slave did not acknowledge in time", labels,
                [(mine, ha.transfer_timed_out or 0)] if ha.transfer_timed_out is not None else [])
        gauge("trocket_ha_master_connected", "a slave's link to its master (1: connected)", labels,
              [(mine, 1.0 if ha.connected else 0.0)] if ha.connected is not None else [])
    return out


# -- the name server -----------------------------------------------------------------------


@attrs.define(slots=True, frozen=True, kw_only=True)
class NamesrvFigures:
    """A name server's figures at one moment: its address, the live brokers
    ``(cluster, broker name, id, address, seconds since it registered)``, topics, KV
    entries, connections and SYSTEM_BUSY refusals."""

    address: str
    brokers: tuple[tuple[str, str, int, str, float], ...]
    topics: int
    kv_entries: int
    connections: int
    busy_replies: int


def take_namesrv_figures(ns: NameServer) -> NamesrvFigures:
    """On the name server's trio thread."""
    routes = ns.route_info
    now = routes.clock()
    brokers = []
    for cluster, names in routes.cluster_addr_table.items():
        for name in names:
            bd = routes.broker_addr_table.get(name)
            if bd is None:
                continue
            for broker_id, addr in sorted(bd.broker_addrs.items()):
                live = routes.broker_live_table.get(addr)
                if live is not None:
                    brokers.append((cluster, name, broker_id, addr, max(0.0, now - live.last_update)))
    return NamesrvFigures(
        address=ns.address, brokers=tuple(sorted(brokers)), topics=len(routes.topic_queue_table),
        kv_entries=ns.kv.size, connections=len(ns.remoting.connections),
        busy_replies=ns.remoting.stats.busy_replies,
    )


def namesrv_families(f: NamesrvFigures) -> list[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    labels = ["namesrv"]
    who = [f.address]
    brokers = GaugeMetricFamily("trocket_namesrv_broker_last_update_age_seconds",
                                "seconds since the broker last registered", labels=["namesrv", "cluster", "broker",
                                                                                      "brokerId", "brokerIP"])
    for cluster, name, broker_id, addr, age in f.brokers:
        brokers.add_metric([f.address, cluster, name, str(broker_id), addr], age)
    out = [brokers]
    for name, doc, value in (
        ("trocket_namesrv_brokers", "live brokers registered", len(f.brokers)),
        ("trocket_namesrv_topics", "topics with a route", f.topics),
        ("trocket_namesrv_kv_entries", "KV configuration entries", f.kv_entries),
        ("trocket_namesrv_connections", "connections open now", f.connections),
    ):
        fam = GaugeMetricFamily(name, doc, labels=labels)
        fam.add_metric(who, value)
        out.append(fam)
    busy = CounterMetricFamily("trocket_namesrv_system_busy_replies", "requests refused with SYSTEM_BUSY", labels=labels)
    busy.add_metric(who, f.busy_replies)
    out.append(busy)
    return out


def namesrv_endpoint(ns: NameServer, host: str, port: int) -> MetricsEndpoint:
    """``trocket namesrv --metrics``: the name server's families."""

    async def take() -> NamesrvFigures:
        return take_namesrv_figures(ns)

    return MetricsEndpoint(host, port, take, namesrv_families)


class _Collector:
    """A ``prometheus_client`` collector over a snapshot function."""

    def __init__(self, families: Callable[[], list[Any]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Any]:
        yield from self._families()

    def describe(self) -> list[Any]:
        return []  # no describe-time work: register() must not take a snapshot


class MetricsEndpoint:
    """``/metrics`` on ``host:port`` (0: any free port, :attr:`port` after start) for the
    families ``families(snapshot)`` of the snapshots ``await take()`` makes in trio.
    :meth:`run` serves until cancelled (the HTTP server is ``prometheus_client``'s, in
    its own thread)."""

    def __init__(
        self, host: str, port: int, take: Callable[[], Awaitable[Any]], families: Callable[[Any], list[Any]],
    ) -> None:
        require_prometheus_client()
        self.host = host
        self.port = port
        self._take = take
        self._families = families
        self._token: trio.lowlevel.TrioToken | None = None
        self._lock = threading.Lock()
        self._cached: tuple[float, Any] | None = None
        #: scrapes served, and snapshots taken for them
        self.scrapes = 0
        self.snapshots = 0

    def _snapshot(self) -> Any:
        with self._lock:  # concurrent scrapes share one snapshot
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < SNAPSHOT_TTL:
                return self._cached[1]
            token = self._token
            if token is None:
                return None
            try:
                snap = trio.from_thread.run(self._take, trio_token=token)
            except (trio.RunFinishedError, trio.Cancelled):
                return None
            self.snapshots += 1
            self._cached = (time.monotonic(), snap)
            return snap

    def _collect(self) -> list[Any]:
        self.scrapes += 1
        snap = self._snapshot()
        return self._families(snap) if snap is not None else []

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self._collect))
        self._token = trio.lowlevel.current_trio_token()
        server, thread = start_http_server(self.port, addr=self.host, registry=registry)
        self.port = server.server_port
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)
        try:
            task_status.started()
            await trio.sleep_forever()
        finally:
            self._token = None
            # shutdown() waits for the serving loop to stop: off the trio thread
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(server.shutdown)
            server.server_close()
            thread.join(5)
