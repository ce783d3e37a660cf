"""TopicConfigManager: topic configs, RocketMQ 4.9.8's default topics, auto-create.

Persisted as Java's ``topics.json`` (``TopicConfigSerializeWrapper``):
``{"dataVersion": {"counter", "timestamp"}, "topicConfigTable": {name: {"topicName",
"readQueueNums", "writeQueueNums", "perm", "topicFilterType", "topicSysFlag",
"order"}}}``, written atomically on every change, as Java persists on every change.
"""

from __future__ import annotations

import os
import threading
import time

import attrs

from trocket.codecs.names import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    REPLY_TOPIC_POSTFIX,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_TRACE_TOPIC,
    SYSTEM_TOPICS,
)

from .atomic_file import read_json, write_json_atomic
from .errors import ConfigLoadError

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "PERM_INHERIT",
    "PERM_READ",
    "PERM_WRITE",
    "TopicConfig",
    "TopicConfigManager",
]

#: ``PermName``.
PERM_PRIORITY = 0x1 << 3
PERM_READ = 0x1 << 2
PERM_WRITE = 0x1 << 1
PERM_INHERIT = 0x1 << 0

#: ``ScheduleMessageService``: one queue per delay level of the default table.
SCHEDULE_TOPIC_QUEUE_NUM = 18


@attrs.define(slots=True)
class TopicConfig:
    """``TopicConfig``; Java's constructor defaults are 16 read/write queues, perm 6."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> TopicConfig:
        return cls(
            str(data["topicName"]),
            int(data.get("readQueueNums", 16)),  # type: ignore[arg-type]
            int(data.get("writeQueueNums", 16)),  # type: ignore[arg-type]
            int(data.get("perm", 6)),  # type: ignore[arg-type]
            str(data.get("topicFilterType", "SINGLE_TAG")),
            int(data.get("topicSysFlag", 0)),  # type: ignore[arg-type]
            bool(data.get("order", False)),
        )


def default_topics(
    *,
    cluster_name: str = "DefaultCluster",
    broker_name: str = "broker-a",
    auto_create_topic_enable: bool = True,
    default_topic_queue_nums: int = 8,
    cluster_topic_enable: bool = True,
    broker_topic_enable: bool = True,
    trace_topic_enable: bool = False,
    trace_topic_name: str = RMQ_SYS_TRACE_TOPIC,
) -> list[TopicConfig]:
    """The topics a 4.9.8 ``TopicConfigManager`` creates in its constructor, in order
    (``BrokerConfig`` defaults: autoCreateTopicEnable, defaultTopicQueueNums 8,
    clusterTopicEnable, brokerTopicEnable, traceTopicEnable false)."""
    rw = PERM_READ | PERM_WRITE
    topics = [TopicConfig(RMQ_SYS_SELF_TEST_TOPIC, 1, 1)]
    if auto_create_topic_enable:
        topics.append(
            TopicConfig(
                AUTO_CREATE_TOPIC_KEY_TOPIC,
                default_topic_queue_nums,
                default_topic_queue_nums,
                PERM_INHERIT | rw,
            )
        )
    topics.append(TopicConfig(RMQ_SYS_BENCHMARK_TOPIC, 1024, 1024))
    topics.append(TopicConfig(cluster_name, perm=PERM_INHERIT | (rw if cluster_topic_enable else 0)))
    topics.append(
        TopicConfig(broker_name, 1, 1, PERM_INHERIT | (rw if broker_topic_enable else 0))
    )
    topics.append(TopicConfig(RMQ_SYS_OFFSET_MOVED_EVENT, 1, 1))
    topics.append(
        TopicConfig(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM, SCHEDULE_TOPIC_QUEUE_NUM)
    )
    if trace_topic_enable:
        topics.append(TopicConfig(trace_topic_name, 1, 1))
    topics.append(TopicConfig(f"{cluster_name}_{REPLY_TOPIC_POSTFIX}", 1, 1))
    return topics


@attrs.define(slots=True, eq=False)
class TopicConfigManager:
    path: str
    auto_create_topic_enable: bool = True
    _table: dict[str, TopicConfig] = attrs.field(factory=dict)
    data_version_counter: int = 0
    data_version_timestamp: int = attrs.field(factory=lambda: time.time_ns() // 1_000_000)
    _lock: threading.RLock = attrs.field(factory=threading.RLock, repr=False)
    #: ``TopicValidator.getSystemTopicSet()`` on this broker: the static set plus every
    #: default topic (Java's constructor calls ``addSystemTopic`` for each)
    system_topics: frozenset[str] = SYSTEM_TOPICS

    @classmethod
    def open(
        cls,
        config_dir: str,
        *,
        cluster_name: str = "DefaultCluster",
        broker_name: str = "broker-a",
        auto_create_topic_enable: bool = True,
        default_topic_queue_nums: int = 8,
        trace_topic_enable: bool = False,
        trace_topic_name: str = RMQ_SYS_TRACE_TOPIC,
    ) -> TopicConfigManager:
        """The defaults, then whatever ``topics.json`` holds on top (as Java's load)."""
        mgr = cls(os.path.join(config_dir, "topics.json"), auto_create_topic_enable)
        defaults = default_topics(
            cluster_name=cluster_name,
            broker_name=broker_name,
            auto_create_topic_enable=auto_create_topic_enable,
            default_topic_queue_nums=default_topic_queue_nums,
            trace_topic_enable=trace_topic_enable,
            trace_topic_name=trace_topic_name,
        )
        for tc in defaults:
            mgr._table[tc.topic_name] = tc
        mgr.system_topics = SYSTEM_TOPICS | {tc.topic_name for tc in defaults}
        mgr.load()
        return mgr

    def load(self) -> None:
        try:
            data = read_json(self.path)
        except ValueError as exc:
            raise ConfigLoadError(f"{self.path}: {exc}") from None
        if not data:
            return
        try:
            for name, raw in (data.get("topicConfigTable") or {}).items():
                self._table[name] = TopicConfig.from_json(raw)
            version = data.get("dataVersion") or {}
            self.data_version_counter = int(version.get("counter", 0))
            self.data_version_timestamp = int(version.get("timestamp", self.data_version_timestamp))
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise ConfigLoadError(f"{self.path}: {exc}") from None

    # -- access -------------------------------------------------------------------

    def select(self, topic: str) -> TopicConfig | None:
        """``selectTopicConfig``."""
        return self._table.get(topic)

    def __contains__(self, topic: str) -> bool:
        return topic in self._table

    def all(self) -> dict[str, TopicConfig]:
        return dict(self._table)

    def _next_version(self) -> None:
        self.data_version_counter += 1
        self.data_version_timestamp = time.time_ns() // 1_000_000

    def next_data_version(self) -> None:
        """A new data version without a change of the table (Java's
        ``getDataVersion().nextVersion()`` when the broker's permission changed: the name
        servers re-read the routes of a new version only)."""
        with self._lock:
            self._next_version()

    def update(self, config: TopicConfig) -> None:
        """``updateTopicConfig``: create or replace, then persist."""
        with self._lock:
            self._table[config.topic_name] = config
            self._next_version()
            self.persist()

    def replace_all(self, table: dict[str, TopicConfig], counter: int, timestamp: int) -> None:
        """Take a master's whole table and data version (a slave's sync), then persist."""
        with self._lock:
            self._table = dict(table)
            self.data_version_counter = counter
            self.data_version_timestamp = timestamp
            self.persist()

    def delete(self, topic: str) -> bool:
        with self._lock:
            if self._table.pop(topic, None) is None:
                return False
            self._next_version()
            self.persist()
            return True

    def create_in_send(
        self,
        topic: str,
        default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
        client_default_queue_nums: int = 4,
        topic_sys_flag: int = 0,
    ) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: a new topic from the default topic's config
        (queues = min(client's, default's write queues), perm without INHERIT).
        None if the default topic is missing or does not allow inheriting."""
        with self._lock:
            existing = self._table.get(topic)
            if existing is not None:
                return existing
            base = self._table.get(default_topic)
            if base is None:
                return None
            perm = base.perm
            if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.auto_create_topic_enable:
                perm = PERM_READ | PERM_WRITE
            if not perm & PERM_INHERIT:
                return None
            nums = max(0, min(client_default_queue_nums, base.write_queue_nums))
            tc = TopicConfig(
                topic, nums, nums, perm & ~PERM_INHERIT, base.topic_filter_type, topic_sys_flag
            )
            self._table[topic] = tc
            self._next_version()
            self.persist()
            return tc

    def create_in_send_back(
        self, topic: str, client_default_queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """``createTopicInSendMessageBackMethod`` (retry topics: ``%RETRY%<group>``)."""
        with self._lock:
            existing = self._table.get(topic)
            if existing is not None:
                return existing
            tc = TopicConfig(
                topic, client_default_queue_nums, client_default_queue_nums, perm,
                topic_sys_flag=topic_sys_flag,
            )
            self._table[topic] = tc
            self._next_version()
            self.persist()
            return tc

    # -- persistence --------------------------------------------------------------

    def to_json(self) -> dict[str, object]:
        return {
            "dataVersion": {
                "counter": self.data_version_counter,
                "timestamp": self.data_version_timestamp,
            },
            "topicConfigTable": {name: tc.to_json() for name, tc in self._table.items()},
        }

    def persist(self) -> None:
        with self._lock:
            data = self.to_json()
        write_json_atomic(self.path, data)
