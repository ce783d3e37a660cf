"""BrokerConfig: the broker's knobs, RocketMQ 4.9's defaults, and a ``broker.conf`` loader.

Every field documents its default and, where one exists, the RocketMQ key it answers
to in a ``broker.conf`` file (java ``.properties`` syntax, ``key=value``)::

    brokerClusterName = DefaultCluster
    brokerName = broker-a
    brokerId = 0
    deleteWhen = 04
    fileReservedTime = 48
    brokerRole = ASYNC_MASTER
    flushDiskType = ASYNC_FLUSH

:func:`load_properties_file` reads such a file into a :class:`BrokerConfig`; unknown
keys and bad values raise :class:`BrokerConfigError` naming the file, line and key.
A few Java keys that make no sense here (path overrides
equal to the defaults...) are accepted and logged.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import attrs

from trocket.broker.store import FlushMode, StoreConfig
from trocket.codecs.java_properties import parse_properties
from trocket.codecs.message.hosts import HostAddress
from trocket.remoting.tls import TlsSettings

if TYPE_CHECKING:
    from trocket.remoting import RemotingServer

__all__ = [
    "BrokerConfig",
    "BrokerConfigError",
    "DEFAULT_MESSAGE_DELAY_LEVEL",
    "DelayLevelError",
    "INEFFECTIVE_SETTINGS",
    "load_properties_file",
    "parse_properties",
    "parse_hostport",
    "PROPERTY_KEYS",
    "parse_delay_levels",
]

log = logging.getLogger(__name__)

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

class BrokerConfigError(ValueError):
    """A bad configuration value or file (unknown key, bad value, bad syntax)."""


# -- messageDelayLevel (the schedule service's table, see broker/schedule.py) -------------

#: ``MessageStoreConfig.messageDelayLevel``'s default.
DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

_UNITS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_ENTRY_RE = re.compile(r"(\d+)(ms|s|m|h|d)")


class DelayLevelError(ValueError):
    """A ``messageDelayLevel`` table that does not parse."""


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``parseDelayLevel``: ``"1s 5s 10s"`` -> ``(1000, 5000, 10000)`` (ms, level 1 first).

    Entries are separated by blanks; each is a non-negative whole number and a unit:
    ``s``, ``m``, ``h``, ``d`` (Java's) or ``ms`` (trocket's). Anything else, or no
    entry at all, raises :class:`DelayLevelError`.
    """
    entries = str(text).split()
    if not entries:
        raise DelayLevelError("messageDelayLevel is empty: give at least one level, e.g. '1s 5s 10s'")
    out = []
    for i, entry in enumerate(entries, 1):
        m = _ENTRY_RE.fullmatch(entry)
        if m is None:
            raise DelayLevelError(
                f"messageDelayLevel level {i} {entry!r}: expected a whole number and a unit "
                "(s, m, h, d; or ms), e.g. '5s'"
            )
        out.append(int(m.group(1)) * _UNITS[m.group(2)])
    return tuple(out)


def parse_hostport(text: str, *, default_host: str = "127.0.0.1", what: str = "address") -> tuple[str, int]:
    """``"host:port"``, ``":port"``, ``"port"`` or ``"[v6]:port"`` -> ``(host, port)``."""
    text = str(text).strip()
    if not text:
        raise BrokerConfigError(f"empty {what}")
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
        if not sep:
            raise BrokerConfigError(f"bad {what} {text!r}: expected [host]:port")
    elif ":" in text:
        host, _, port = text.rpartition(":")
    else:
        host, port = "", text
    host = host or default_host
    try:
        port_num = int(port)
    except ValueError:
        raise BrokerConfigError(f"bad {what} {text!r}: port {port!r} is not a number") from None
    if not 0 <= port_num <= 65535:
        raise BrokerConfigError(f"bad {what} {text!r}: port out of range 0..65535")
    return host, port_num


def _split_hosts(value: Any) -> tuple[str, ...]:
    """``haAllowedSlaves``: hosts separated by ``,``, ``;`` or spaces (empty: any)."""
    if value is None:
        return ()
    parts = re.split(r"[;,\s]+", value) if isinstance(value, str) else list(value)
    return tuple(str(p).strip().strip("[]") for p in parts if str(p).strip())


def _split_addrs(value: Any) -> list[str]:
    """``namesrvAddr`` is ``"a:9876;b:9876"`` (RocketMQ separates with ``;``)."""
    if value is None:
        return []
    if isinstance(value, str):
        parts = re.split(r"[;,\s]+", value)
    else:
        parts = list(value)
    out = []
    for part in parts:
        part = str(part).strip()
        if part:
            host, port = parse_hostport(part, what="name server address")
            out.append(f"{host}:{port}")
    return out


def _hostport_converter(value: Any) -> tuple[str, int]:
    if isinstance(value, tuple):
        return str(value[0]), int(value[1])
    return parse_hostport(value)


def _opt_hostport(value: Any) -> tuple[str, int] | None:
    if value is None or value == "":
        return None
    return _hostport_converter(value)


def _flush(value: Any) -> FlushMode:
    if isinstance(value, FlushMode):
        return value
    text = str(value).strip().upper()
    if text in ("ASYNC", "ASYNC_FLUSH", "TIMED"):
        return FlushMode.ASYNC
    if text in ("SYNC", "SYNC_FLUSH"):
        return FlushMode.SYNC
    raise BrokerConfigError(f"bad flush mode {value!r}: ASYNC_FLUSH (async) or SYNC_FLUSH (sync)")


#: ``BrokerRole`` values (``brokerRole`` in broker.conf).
BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")


def _role(value: Any) -> str:
    text = str(value).strip().upper()
    if text not in BROKER_ROLES:
        raise BrokerConfigError(f"bad broker role {value!r}: ASYNC_MASTER, SYNC_MASTER or SLAVE")
    return text


def _pos(_inst, attr, value) -> None:
    if value <= 0:
        raise BrokerConfigError(f"{attr.name} must be positive, got {value!r}")


def _nonneg(_inst, attr, value) -> None:
    if value < 0:
        raise BrokerConfigError(f"{attr.name} must not be negative, got {value!r}")


def _delay_table(_inst, attr, value) -> None:
    try:
        parse_delay_levels(value)
    except DelayLevelError as exc:
        raise BrokerConfigError(str(exc)) from None


@attrs.define(slots=True, kw_only=True)
class BrokerConfig:
    """The broker's configuration (RocketMQ ``BrokerConfig`` + ``MessageStoreConfig`` +
    ``NettyServerConfig`` parts that apply here). All fields have defaults: a bare
    ``BrokerConfig()`` is ``trocket broker`` with no arguments."""

    # -- identity ------------------------------------------------------------------------
    #: ``brokerName``: "broker-a".
    broker_name: str = "broker-a"
    #: ``brokerClusterName``: "DefaultCluster".
    cluster: str = "DefaultCluster"
    #: ``brokerId``: 0 = master (routes give it out under key "0").
    broker_id: int = attrs.field(default=0, validator=_nonneg)
    #: ``brokerPermission``: 6 = read + write (PermName.PERM_READ|PERM_WRITE).
    broker_permission: int = 6

    #: The file this configuration was read from (``-c``; Java's ``brokerConfigPath``):
    #: UPDATE_BROKER_CONFIG writes its changes there (None: ``<store>/config/broker.properties``).
    config_path: str | None = None

    # -- network -------------------------------------------------------------------------
    #: listen address, 127.0.0.1:10911 (``listenPort``; trocket's ``listenHost``).
    listen: tuple[str, int] = attrs.field(default=("127.0.0.1", 10911), converter=_hostport_converter)
    #: ``brokerIP1`` + port: the host:port routes give out and records carry as STOREHOST.
    #: None = the listen address (with the real port when listening on port 0, and
    #: 127.0.0.1 for a wildcard host).
    advertise: tuple[str, int] | None = attrs.field(default=None, converter=_opt_hostport)
    #: ``namesrvAddr`` (";"-separated in broker.conf): external name servers. Empty = run
    #: an embedded name server on :attr:`namesrv_listen`.
    namesrv_addrs: list[str] = attrs.field(factory=list, converter=_split_addrs)
    #: where the embedded name server listens: 127.0.0.1:9876.
    namesrv_listen: tuple[str, int] = attrs.field(default=("127.0.0.1", 9876), converter=_hostport_converter)
    #: trocket's ``metricsListen``: serve Prometheus ``/metrics`` there (``--metrics``;
    #: broker/metrics.py, the ``trocket[metrics]`` extra). None (the default): no endpoint.
    metrics_listen: tuple[str, int] | None = attrs.field(default=None, converter=_opt_hostport)

    # -- store ---------------------------------------------------------------------------
    #: ``storePathRootDir``: ./trocket-store.
    store_dir: str = attrs.field(default="./trocket-store", converter=os.fspath)
    #: ``mappedFileSizeCommitLog``: 1 GiB per commit-log segment.
    commit_log_segment_size: int = attrs.field(default=1 * GiB, validator=_pos)
    #: ``mappedFileSizeConsumeQueue`` / 20: 300,000 entries per consume-queue file.
    consume_queue_entries_per_file: int = attrs.field(default=300_000, validator=_pos)
    #: ``flushDiskType``: ASYNC_FLUSH (timed, the default) or SYNC_FLUSH (group commit).
    flush: FlushMode = attrs.field(default=FlushMode.ASYNC, converter=_flush)
    #: ``flushIntervalCommitLog`` (ms): timed flush period, 500.
    flush_interval_ms: int = attrs.field(default=500, validator=_pos)
    #: ``syncFlushTimeout`` (ms): a SYNC send waits this long for its fsync, 5000.
    sync_flush_timeout_ms: int = attrs.field(default=5000, validator=_pos)
    #: make the next commit-log segment ahead of need, in the background (on;
    #: trocket's ``allocateMappedFileAhead``, as Java's AllocateMappedFileService).
    allocate_ahead: bool = True
    #: ``maxMessageSize``: largest message (body + properties; a whole batch) 4 MiB.
    max_message_size: int = attrs.field(default=4 * MiB, validator=_pos)
    #: ``fileReservedTime`` (hours) before commit-log segments may be deleted, 72.
    file_reserved_time_hours: float = attrs.field(default=72, validator=_pos)
    #: ``deleteWhen``: hour(s) of the day when expired segments are deleted, "04".
    delete_when: str = "04"
    #: ``diskMaxUsedSpaceRatio`` (percent), 75.
    disk_max_used_space_ratio: int = attrs.field(default=75, validator=_pos)
    #: ``cleanResourceInterval`` (ms): how often retention is checked, 10000.
    clean_resource_interval_ms: int = attrs.field(default=10_000, validator=_pos)
    #: ``maxTransferCountOnMessageInMemory``: messages per pull at most, 32.
    max_transfer_count: int = attrs.field(default=32, validator=_pos)
    #: ``maxTransferBytesOnMessageInMemory``: bytes per pull at most, 256 KiB.
    max_transfer_bytes: int = attrs.field(default=256 * KiB, validator=_pos)
    #: ``messageIndexEnable``: index every message's keys and unique key, for queries by
    #: key (QUERY_MESSAGE; broker/store/index.py), on.
    message_index_enable: bool = True
    #: ``maxHashSlotNum`` / ``maxIndexNum``: an index file's slots and entries (5 and 20
    #: million: 420 MB, sparse). Changing them makes existing index files unreadable.
    max_hash_slot_num: int = attrs.field(default=5_000_000, validator=_pos)
    max_index_num: int = attrs.field(default=20_000_000, validator=_pos)
    #: ``maxMsgsNumBatch``: messages one query by key returns at most, 64;
    #: ``defaultQueryMaxNum``: a query by unique key's, 32.
    max_msgs_num_batch: int = attrs.field(default=64, validator=_pos)
    default_query_max_num: int = attrs.field(default=32, validator=_pos)

    # -- replication (broker/ha) ---------------------------------------------------------
    #: ``brokerRole``: ASYNC_MASTER (default), SYNC_MASTER (a send is answered once a
    #: slave has it) or SLAVE (follows ``ha_master_address``, refuses sends).
    broker_role: str = attrs.field(default="ASYNC_MASTER", converter=_role)
    #: where a master's HA server listens (``haListenPort``, on the listen host). None:
    #: None: listen port + 1 (Java's default 10912) for either master role, as Java's
    #: master always listens (an ASYNC_MASTER that cannot bind that implicit port logs it
    #: and runs without replication, see :mod:`trocket.broker.ha`).
    ha_listen: tuple[str, int] | None = attrs.field(default=None, converter=_opt_hostport)
    #: ``haMasterAddress``: the master's HA address a slave follows. None: the one the
    #: name server gives at registration (the master's ``haServerAddr``), as Java's.
    ha_master_address: tuple[str, int] | None = attrs.field(default=None, converter=_opt_hostport)
    #: ``haSendHeartbeatInterval`` (ms): slave offset report / master heartbeat when idle, 5000.
    ha_send_heartbeat_interval_ms: int = attrs.field(default=5000, validator=_pos)
    #: ``haHousekeepingInterval`` (ms): an HA connection silent this long is closed, 20000.
    ha_housekeeping_interval_ms: int = attrs.field(default=20_000, validator=_pos)
    #: ``haTransferBatchSize``: commit-log bytes per HA frame at most, 32 KiB.
    ha_transfer_batch_size: int = attrs.field(default=32 * KiB, validator=_pos)
    #: ``haSlaveFallbehindMax``: a SYNC send gets SLAVE_NOT_AVAILABLE at once when the
    #: slave lags more than this many bytes, 256 MiB.
    ha_slave_fallbehind_max: int = attrs.field(default=256 * MiB, validator=_pos)
    #: trocket's ``haAllowedSlaves``: the hosts (IP addresses) a master's HA port serves;
    #: empty (the default), any host. A connection from elsewhere is closed at once.
    ha_allowed_slaves: tuple[str, ...] = attrs.field(default=(), converter=_split_hosts)
    #: how often a slave pulls topics, consumer offsets, delay offsets and subscription
    #: groups from its master (``SlaveSynchronize``; Java: 10 s), ms.
    slave_sync_interval_ms: int = attrs.field(default=10_000, validator=_pos)
    #: ``slaveReadEnable``: consumers may be sent to the slave (off). On: a master tells
    #: a consumer reading further back than ``accessMessageInMemoryMaxRatio`` of the RAM
    #: to pull from broker id 1 (``suggestWhichBrokerId``), a slave asks for nothing
    #: else. Off: every pull answer suggests the master (id 0); a slave still serves the
    #: pull -- where Java's answers PULL_RETRY_IMMEDIATELY, a slave whose master is gone
    #: would serve nothing.
    slave_read_enable: bool = False
    #: ``accessMessageInMemoryMaxRatio`` (percent of the RAM), 40.
    access_message_in_memory_max_ratio: int = attrs.field(default=40, validator=_nonneg)

    # -- SQL92 filters (broker/consumer_filter.py) -------------------------------------------
    #: ``enablePropertyFilter``: consumers may subscribe with SQL92 expressions (off, as
    #: Java). Off: CHECK_CLIENT_CONFIG and pulls refuse them with SYSTEM_ERROR ``The
    #: broker does not support consumer to filter message by SQL92``.
    enable_property_filter: bool = False
    #: ``filterSupportRetry``: a group's retry topic is filtered with the expression of
    #: the topic each message first came from (off, as Java: retried messages are
    #: delivered unfiltered, they matched once already).
    filter_support_retry: bool = False

    # -- message trace ---------------------------------------------------------------------
    #: ``traceTopicEnable``: the broker creates the trace topic at start (1 queue, perm 6,
    #: as Java's TopicConfigManager), where clients with message trace on write their
    #: Pub/SubBefore/SubAfter records (off, as Java).
    trace_topic_enable: bool = False
    #: ``msgTraceTopicName``: that topic, ``RMQ_SYS_TRACE_TOPIC``.
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"

    # -- delayed messages (broker/schedule.py) --------------------------------------------
    #: ``messageDelayLevel``: the delay of each level, level 1 first, units s/m/h/d (and
    #: trocket's ms): "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h".
    message_delay_level: str = attrs.field(default=DEFAULT_MESSAGE_DELAY_LEVEL, validator=_delay_table)
    #: ``flushDelayOffsetInterval`` (ms): delayOffset.json is written this often, 10000.
    flush_delay_offset_interval_ms: int = attrs.field(default=10_000, validator=_pos)

    # -- transactions and request-reply (broker/transaction, processors/reply.py) ---------
    #: ``transactionTimeOut`` (ms): a half message younger than this is not checked yet, 6000.
    transaction_timeout_ms: int = attrs.field(default=6_000, validator=_nonneg)
    #: ``transactionCheckMax``: checks of one half message before it is discarded to
    #: ``TRANS_CHECK_MAX_TIME_TOPIC``, 15.
    transaction_check_max: int = attrs.field(default=15, validator=_pos)
    #: ``transactionCheckInterval`` (ms): how often the check service looks, 60000.
    transaction_check_interval_ms: int = attrs.field(default=60_000, validator=_pos)
    #: ``rejectTransactionMessage``: refuse prepared sends (NO_PERMISSION) (off).
    reject_transaction_message: bool = False
    #: ``storeReplyMessageEnable``: a reply is stored on its reply topic as well as
    #: pushed to the requester (on).
    store_reply_message: bool = True

    # -- topics ----------------------------------------------------------------------------
    #: ``autoCreateTopicEnable``: a send to an unknown topic creates it from TBW102 (on).
    auto_create_topic: bool = True
    #: ``defaultTopicQueueNums``: queues of TBW102 and of auto-created topics, 4.
    default_topic_queue_nums: int = attrs.field(default=4, validator=_pos)
    #: ``autoCreateSubscriptionGroup``: a group a pull, heartbeat or send-back names is
    #: created with the defaults; off, only groups made with UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    #: (and ``CID_RMQ_SYS_`` ones) may consume (SUBSCRIPTION_GROUP_NOT_EXIST).
    auto_create_subscription_group: bool = True

    # -- pull / long polling -------------------------------------------------------------
    #: ``longPollingEnable``: hold pulls that find nothing (on).
    long_polling: bool = True
    #: ``shortPollingTimeMills``: with long polling off, a suspend pull waits this long, 1000.
    short_polling_time_ms: int = attrs.field(default=1000, validator=_pos)
    #: PullRequestHoldService's periodic check (ms): 5000 with long polling (Java's 5 s),
    #: ``shortPollingTimeMills`` without.
    hold_check_interval_ms: int = attrs.field(default=5000, validator=_pos)
    #: most pulls held at once; past it a pull that would be held gets SYSTEM_BUSY.
    max_held_pulls: int = attrs.field(default=100_000, validator=_pos)
    #: accepted for compatibility, no effect (a warning at start when set): arrival
    #: wake-ups are already coalesced without a window -- every queue made dirty since
    #: the long-polling task last ran is woken in one pass (broker/long_polling.py).
    notify_batch_ms: float = attrs.field(default=1.0, validator=_nonneg)

    # -- clients / rebalance -------------------------------------------------------------
    #: ``notifyConsumerIdsChangedEnable``: tell consumers when their group changes (on).
    notify_consumer_ids_changed: bool = True
    #: ``rocketmq.broker.rebalance.lockMaxLiveTime`` (ms): a queue lock expires after 60 s.
    rebalance_lock_max_live_ms: int = attrs.field(default=60_000, validator=_pos)
    #: ``channelExpiredTimeout`` (ms): clients silent this long are dropped, 120000.
    channel_expired_timeout_ms: int = attrs.field(default=120_000, validator=_pos)
    #: trocket's ``maxConnectionsPerHost``: connections served at once from one host, on
    #: the client port and the VIP channel each (1000); past it a new one is closed at
    #: once, logged once a minute per host (remoting's ``max_connections_per_host``).
    max_connections_per_host: int = attrs.field(default=1000, validator=_pos)

    # -- periodic tasks ------------------------------------------------------------------
    #: ``registerNameServerPeriod`` (ms): re-registration with the name servers, 30000.
    register_interval_ms: int = attrs.field(default=30_000, validator=_pos)
    #: ``registerBrokerTimeoutMills`` (ms): one registration call's timeout, 6000.
    register_timeout_ms: int = attrs.field(default=6_000, validator=_pos)
    #: ``flushConsumerOffsetInterval`` (ms): consumer offsets persisted this often, 5000.
    flush_consumer_offset_interval_ms: int = attrs.field(default=5_000, validator=_pos)

    # -- processor pools (Java thread pools -> concurrency limits + bounded queues) -------
    #: ``sendMessageThreadPoolNums``-like: sends processed at once, 64 (with sync flush
    #: the concurrent sends share one group commit).
    send_concurrency: int = attrs.field(default=64, validator=_pos)
    #: ``sendThreadPoolQueueCapacity``: sends admitted to wait, 10000; past it SYSTEM_BUSY.
    send_queue_capacity: int = attrs.field(default=10_000, validator=_nonneg)
    #: ``pullMessageThreadPoolNums``: accepted for compatibility, no effect (a warning
    #: at start when set): pulls run inline on the connection's reader (they never
    #: block), so there is no pool to size.
    pull_concurrency: int = attrs.field(default=64, validator=_pos)
    #: ``pullThreadPoolQueueCapacity``: accepted for compatibility, no effect (a warning
    #: at start when set): no pull waits in a queue; held pulls are bounded by
    #: ``max_held_pulls`` (``maxHeldPulls``).
    pull_queue_capacity: int = attrs.field(default=100_000, validator=_nonneg)
    #: ``adminBrokerThreadPoolNums``: admin requests at once, 16.
    admin_concurrency: int = attrs.field(default=16, validator=_pos)

    # -- security (docs/security.md) -----------------------------------------------------
    #: ``aclEnable``: check every request against ``plain_acl.yml`` (off), see broker/acl.
    acl_enable: bool = False
    #: trocket's ``aclFile`` (``--acl FILE``): the ACL file. "" = Java's place,
    #: ``$ROCKETMQ_HOME/conf/plain_acl.yml`` (``conf/plain_acl.yml`` under the current
    #: directory without ROCKETMQ_HOME). Reloaded when it changes.
    acl_file: str = attrs.field(default="", converter=os.fspath)
    #: trocket's ``aclReloadInterval`` (ms): how often the ACL file is checked for changes.
    acl_reload_interval_ms: int = attrs.field(default=1000, validator=_pos)
    #: Java's ``tls.*`` settings (``tls.server.mode``, ``tls.server.certPath``, ...,
    #: ``tls.enable`` for the broker's own connections to the name servers), see
    #: :class:`~trocket.remoting.tls.TlsSettings`; ``tls.config.file`` is read too.
    tls: TlsSettings = attrs.field(factory=TlsSettings)
    #: trocket's ``haTlsEnable`` (off; Java's HA link has no TLS): a master's HA port
    #: speaks TLS only (its ``tls.server.*`` certificate), a slave connects with TLS (its
    #: ``tls.client.*`` settings).
    ha_tls: bool = False
    #: trocket's ``accessKey`` / ``secretKey``: the account the broker signs its own
    #: requests with (registrations with a ``trocket namesrv --acl``, a slave's sync with
    #: its master). Unset with ACL on and an embedded name server: an in-process account.
    access_key: str | None = None
    secret_key: str | None = attrs.field(default=None, repr=False)
    #: trocket's ``maxQueueNumsPerTopic``: UPDATE_AND_CREATE_TOPIC refuses more read or
    #: write queues than this, 1024 (Java 4.9.8 has no bound: 2^31-1 queues make a route
    #: no client can build)
    max_queue_nums_per_topic: int = attrs.field(default=1024, validator=_pos)

    def __attrs_post_init__(self) -> None:
        if not self.broker_name or not re.fullmatch(r"[A-Za-z0-9_\-.%|]+", self.broker_name):
            raise BrokerConfigError(f"bad broker name {self.broker_name!r}")
        if not self.cluster:
            raise BrokerConfigError("empty cluster name")
        if self.max_message_size > 64 * MiB:
            raise BrokerConfigError("max_message_size above 64 MiB is not supported")
        if self.broker_role == "SLAVE" and self.broker_id == 0:
            self.broker_id = 1  # a slave is never id 0 (Java refuses; the usual slave id is 1)

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    @property
    def is_sync_master(self) -> bool:
        return self.broker_role == "SYNC_MASTER"

    def acl_path(self) -> str:
        """The ACL file: ``acl_file``, else ``$ROCKETMQ_HOME/conf/plain_acl.yml``."""
        if self.acl_file:
            return self.acl_file
        return os.path.join(os.environ.get("ROCKETMQ_HOME", "."), "conf", "plain_acl.yml")

    def ha_listen_addr(self) -> tuple[str, int] | None:
        """Where a master's HA server listens: ``ha_listen``, else the listen host and
        port + 1 (port 0: any free port); None for a slave."""
        if self.is_slave:
            return None
        if self.ha_listen is not None:
            return self.ha_listen
        host, port = self.listen
        return host, (port + 1 if port else 0)

    # -- derived -------------------------------------------------------------------------

    @property
    def embedded_namesrv(self) -> bool:
        return not self.namesrv_addrs

    def namesrv_addr_list(self) -> list[str]:
        """The name servers the broker registers with (the embedded one when none given)."""
        if self.namesrv_addrs:
            return list(self.namesrv_addrs)
        host, port = self.namesrv_listen
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return [f"{host}:{port}"]

    def advertised_addr(self, server: RemotingServer | None = None) -> str:
        """``host:port`` the broker gives out. With no :attr:`advertise`: the listen host
        (127.0.0.1 for a wildcard) and the server's real port once it is listening."""
        if self.advertise is not None:
            host, port = self.advertise
            return f"{host}:{port}"
        host, port = self.listen
        if server is not None and server.port:
            port = server.port
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"{host}:{port}"

    def store_config(self, store_host: tuple[str, int] | None = None) -> StoreConfig:
        """The :class:`StoreConfig` for this broker (``store_host`` = the advertised
        address, the STOREHOST of every record)."""
        if store_host is None:
            host, _, port = self.advertised_addr().rpartition(":")
            store_host = (host, int(port))
        return StoreConfig(
            store_dir=self.store_dir,
            commit_log_segment_size=self.commit_log_segment_size,
            allocate_ahead=self.allocate_ahead,
            consume_queue_entries_per_file=self.consume_queue_entries_per_file,
            flush_mode=self.flush,
            flush_interval_ms=self.flush_interval_ms,
            sync_flush_timeout_ms=self.sync_flush_timeout_ms,
            max_message_size=self.max_message_size,
            file_reserved_time_hours=self.file_reserved_time_hours,
            delete_when=self.delete_when,
            disk_max_used_space_ratio=self.disk_max_used_space_ratio,
            max_transfer_bytes=self.max_transfer_bytes,
            max_transfer_count=self.max_transfer_count,
            store_host=HostAddress(store_host[0], int(store_host[1])),
            delay_levels_ms=parse_delay_levels(self.message_delay_level),
            access_message_in_memory_max_ratio=self.access_message_in_memory_max_ratio,
            message_index_enable=self.message_index_enable,
            max_hash_slot_num=self.max_hash_slot_num,
            max_index_num=self.max_index_num,
            max_msgs_num_batch=self.max_msgs_num_batch,
            default_query_max_num=self.default_query_max_num,
        )

    def ineffective_settings(self) -> list[str]:
        """The settings in :data:`INEFFECTIVE_SETTINGS` given a value other than their
        default (broker.conf key where there is one): what the broker warns about."""
        out = []
        for name, key in INEFFECTIVE_SETTINGS.items():
            field = getattr(attrs.fields(BrokerConfig), name)
            if getattr(self, name) != field.default:
                out.append(key)
        return out

    def evolve(self, **changes: Any) -> BrokerConfig:
        return attrs.evolve(self, **changes)


#: Settings accepted (Java broker.conf files carry them) that change nothing here:
#: field name -> the name a warning gives.
INEFFECTIVE_SETTINGS: dict[str, str] = {
    "pull_concurrency": "pullMessageThreadPoolNums",
    "pull_queue_capacity": "pullThreadPoolQueueCapacity",
    "notify_batch_ms": "notify_batch_ms",
}


# -- broker.conf --------------------------------------------------------------------------


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1", "yes", "on"):
        return True
    if t in ("false", "0", "no", "off"):
        return False
    raise BrokerConfigError(f"expected true or false, got {text!r}")


def _int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise BrokerConfigError(f"expected an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise BrokerConfigError(f"expected a number, got {text!r}") from None


def _str(text: str) -> str:
    return text.strip()


def _port(text: str) -> int:
    port = _int(text)
    if not 0 <= port <= 65535:
        raise BrokerConfigError(f"port {port} out of range 0..65535")
    return port


# key -> (field name or special, parser). Specials are handled in _apply.
PROPERTY_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "brokerName": ("broker_name", _str),
    "brokerClusterName": ("cluster", _str),
    "brokerId": ("broker_id", _int),
    "brokerPermission": ("broker_permission", _int),
    "listenPort": ("@listen_port", _port),
    "listenHost": ("@listen_host", _str),  # trocket's own (Java binds every interface)
    "brokerIP1": ("@advertise_host", _str),
    "advertiseAddr": ("advertise", _str),  # trocket's own: host:port
    "namesrvAddr": ("namesrv_addrs", _str),
    "namesrvListen": ("namesrv_listen", _str),  # trocket's own
    "metricsListen": ("metrics_listen", _str),  # trocket's own
    "storePathRootDir": ("store_dir", _str),
    "mappedFileSizeCommitLog": ("commit_log_segment_size", _int),
    "mappedFileSizeConsumeQueue": ("@cq_file_size", _int),
    "allocateMappedFileAhead": ("allocate_ahead", _bool),  # trocket's own
    "flushDiskType": ("flush", _flush),
    "flushIntervalCommitLog": ("flush_interval_ms", _int),
    "syncFlushTimeout": ("sync_flush_timeout_ms", _int),
    "maxMessageSize": ("max_message_size", _int),
    "fileReservedTime": ("file_reserved_time_hours", _float),
    "deleteWhen": ("delete_when", _str),
    "diskMaxUsedSpaceRatio": ("disk_max_used_space_ratio", _int),
    "cleanResourceInterval": ("clean_resource_interval_ms", _int),
    "maxTransferCountOnMessageInMemory": ("max_transfer_count", _int),
    "maxTransferBytesOnMessageInMemory": ("max_transfer_bytes", _int),
    "messageIndexEnable": ("message_index_enable", _bool),
    "maxHashSlotNum": ("max_hash_slot_num", _int),
    "maxIndexNum": ("max_index_num", _int),
    "maxMsgsNumBatch": ("max_msgs_num_batch", _int),
    "defaultQueryMaxNum": ("default_query_max_num", _int),
    "messageDelayLevel": ("message_delay_level", _str),
    "flushDelayOffsetInterval": ("flush_delay_offset_interval_ms", _int),
    "autoCreateTopicEnable": ("auto_create_topic", _bool),
    "defaultTopicQueueNums": ("default_topic_queue_nums", _int),
    "autoCreateSubscriptionGroup": ("auto_create_subscription_group", _bool),
    "longPollingEnable": ("long_polling", _bool),
    "shortPollingTimeMills": ("short_polling_time_ms", _int),
    "notifyConsumerIdsChangedEnable": ("notify_consumer_ids_changed", _bool),
    "channelExpiredTimeout": ("channel_expired_timeout_ms", _int),
    "maxConnectionsPerHost": ("max_connections_per_host", _int),  # trocket's own
    "registerNameServerPeriod": ("register_interval_ms", _int),
    "registerBrokerTimeoutMills": ("register_timeout_ms", _int),
    "flushConsumerOffsetInterval": ("flush_consumer_offset_interval_ms", _int),
    "sendMessageThreadPoolNums": ("send_concurrency", _int),
    "sendThreadPoolQueueCapacity": ("send_queue_capacity", _int),
    "pullMessageThreadPoolNums": ("pull_concurrency", _int),
    "pullThreadPoolQueueCapacity": ("pull_queue_capacity", _int),
    "adminBrokerThreadPoolNums": ("admin_concurrency", _int),
    "maxHeldPulls": ("max_held_pulls", _int),  # trocket's own
    "brokerRole": ("broker_role", _role),
    "haListenPort": ("@ha_listen_port", _port),
    "haMasterAddress": ("ha_master_address", _str),
    "haSendHeartbeatInterval": ("ha_send_heartbeat_interval_ms", _int),
    "haHousekeepingInterval": ("ha_housekeeping_interval_ms", _int),
    "haTransferBatchSize": ("ha_transfer_batch_size", _int),
    "haSlaveFallbehindMax": ("ha_slave_fallbehind_max", _int),
    "haAllowedSlaves": ("ha_allowed_slaves", _str),  # trocket's own
    "slaveSyncInterval": ("slave_sync_interval_ms", _int),  # trocket's own
    "slaveReadEnable": ("slave_read_enable", _bool),
    "transactionTimeOut": ("transaction_timeout_ms", _int),
    "transactionCheckMax": ("transaction_check_max", _int),
    "transactionCheckInterval": ("transaction_check_interval_ms", _int),
    "rejectTransactionMessage": ("reject_transaction_message", _bool),
    "storeReplyMessageEnable": ("store_reply_message", _bool),
    "accessMessageInMemoryMaxRatio": ("access_message_in_memory_max_ratio", _int),
    "aclEnable": ("acl_enable", _bool),
    "aclFile": ("acl_file", _str),  # trocket's own
    "aclReloadInterval": ("acl_reload_interval_ms", _int),  # trocket's own
    "haTlsEnable": ("ha_tls", _bool),  # trocket's own
    "maxQueueNumsPerTopic": ("max_queue_nums_per_topic", _int),  # trocket's own
    "accessKey": ("access_key", _str),  # trocket's own
    "secretKey": ("secret_key", _str),  # trocket's own
    "enablePropertyFilter": ("enable_property_filter", _bool),
    "filterSupportRetry": ("filter_support_retry", _bool),
    "traceTopicEnable": ("trace_topic_enable", _bool),
    "msgTraceTopicName": ("msg_trace_topic_name", _str),
}

#: Java keys accepted for compatibility with stock broker.conf files: value -> None
#: means any value is fine (logged and ignored), otherwise the allowed values.
_IGNORED_KEYS: dict[str, tuple[str, ...] | None] = {
    "storePathCommitLog": None,
    "storePathConsumeQueue": None,
    "storeCheckpoint": None,
    "abortFile": None,
    "brokerIP2": None,
    "rocketmqHome": None,
    "serverWorkerThreads": None,
    "serverSelectorThreads": None,
    "clientWorkerThreads": None,
    "useEpollNativeSelector": None,
    "transientStorePoolEnable": ("false",),
    "warmMapedFileEnable": None,
}


def update_properties_file(path: str | os.PathLike, changes: dict[str, str]) -> None:
    """Write ``changes`` into the ``.properties`` file at ``path``: each key's last line
    rewritten (a key not there appended), every other line (comments, other keys) kept;
    atomically. A file that does not exist is made."""
    from .store.atomic_file import write_atomic

    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    where: dict[str, int] = {}
    for index, line in enumerate(lines):
        parsed = parse_properties(line)
        if parsed:
            where[parsed[0][1]] = index
    for key, value in changes.items():
        text = f"{key}={value}"
        if key in where:
            lines[where[key]] = text
        else:
            lines.append(text)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomic(os.fspath(path), ("\n".join(lines) + "\n").encode("utf-8"))


def config_changes_from_properties(
    entries: list[tuple[int, str, str]], *, source: str = "<config>"
) -> dict[str, Any]:
    """Validate ``(line, key, value)`` entries into :class:`BrokerConfig` keyword changes."""
    changes: dict[str, Any] = {}
    listen_host: str | None = None
    listen_port: int | None = None
    adv_host: str | None = None
    ha_port: int | None = None
    tls: dict[str, str] = {}
    for lineno, key, value in entries:
        where = f"{source}:{lineno}: {key}"
        if key.startswith("tls."):  # Java's TlsSystemConfig keys (system properties there)
            tls[key] = value.strip()
            continue
        if key in _IGNORED_KEYS:
            allowed = _IGNORED_KEYS[key]
            if allowed is not None and value.strip().upper() not in (a.upper() for a in allowed):
                raise BrokerConfigError(f"{where}={value!r} is not supported (only {', '.join(allowed)})")
            log.info("%s: ignoring %s=%s (not used by trocket)", source, key, value)
            continue
        spec = PROPERTY_KEYS.get(key)
        if spec is None:
            known = [*PROPERTY_KEYS, *_IGNORED_KEYS]
            near = [k for k in known if k.lower() == key.lower()] or difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise BrokerConfigError(f"{where}: unknown key{hint}")
        name, parse = spec
        try:
            parsed = parse(value)
        except BrokerConfigError as exc:
            raise BrokerConfigError(f"{where}: {exc}") from None
        if name == "@listen_port":
            listen_port = parsed
        elif name == "@listen_host":
            listen_host = parsed
        elif name == "@advertise_host":
            adv_host = parsed
        elif name == "@ha_listen_port":
            ha_port = parsed
        elif name == "@cq_file_size":
            if parsed < 20 or parsed % 20:
                raise BrokerConfigError(f"{where}: must be a positive multiple of 20 bytes")
            changes["consume_queue_entries_per_file"] = parsed // 20
        else:
            changes[name] = parsed
    if listen_host is not None or listen_port is not None:
        changes["listen"] = (listen_host or "127.0.0.1", 10911 if listen_port is None else listen_port)
    if ha_port is not None:
        changes["ha_listen"] = (listen_host or "127.0.0.1", ha_port)
    if adv_host is not None and "advertise" not in changes:
        changes["@advertise_host"] = adv_host  # resolved against the final listen port
    if tls:
        try:
            changes["tls"] = TlsSettings.from_properties(tls)
        except (OSError, ValueError) as exc:
            raise BrokerConfigError(f"{source}: {exc}") from None
    return changes


def apply_changes(config: BrokerConfig, changes: dict[str, Any], *, source: str = "<config>") -> BrokerConfig:
    changes = dict(changes)
    adv_host = changes.pop("@advertise_host", None)
    try:
        config = attrs.evolve(config, **changes)
        if adv_host is not None:
            config = attrs.evolve(config, advertise=(adv_host, config.listen[1]))
    except BrokerConfigError as exc:
        raise BrokerConfigError(f"{source}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise BrokerConfigError(f"{source}: {exc}") from None
    return config


def load_properties_file(path: str | os.PathLike, base: BrokerConfig | None = None) -> BrokerConfig:
    """Read a RocketMQ-style ``broker.conf`` on top of ``base`` (defaults when None)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise BrokerConfigError(f"cannot read config file {str(p)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BrokerConfigError(f"config file {str(p)!r} is not UTF-8: {exc}") from None
    changes = config_changes_from_properties(parse_properties(text), source=str(p))
    return apply_changes(base or BrokerConfig(), changes, source=str(p))
