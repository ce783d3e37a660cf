"""SubscriptionGroupManager: the consumer groups' configs (RocketMQ 4.9.8's
``SubscriptionGroupManager``), persisted as ``<store>/config/subscriptionGroup.json``
(Java's shape: ``{"dataVersion": ..., "subscriptionGroupTable": {...}}``).

Java's built-in groups are there from the start (``TOOLS_CONSUMER``, ...); a group met by
a pull, a heartbeat or a send-back is created on the spot with the defaults when
``autoCreateSubscriptionGroup`` is on (or for a ``CID_RMQ_SYS_`` group), as Java's
``findSubscriptionGroupConfig``. That lookup runs inline on a connection's reader (the
pull path), so an auto-created group only marks the table dirty: the broker persists it
with the consumer offsets (every 5 s) and at shutdown. Changes by an operator (200, 207)
and a slave's copy of its master's table persist at once (from a worker thread).
"""

from __future__ import annotations

import logging
import os
import threading
import time

import attrs

from trocket.codecs.bodies.fastjson import BodyDecodeError
from trocket.codecs.bodies.groups import SubscriptionGroupConfig, SubscriptionGroupWrapper

from .atomic_file import write_atomic
from .errors import ConfigLoadError

__all__ = ["SubscriptionGroupManager", "BUILT_IN_GROUPS", "SYS_GROUP_PREFIX", "is_sys_consumer_group"]

log = logging.getLogger(__name__)

#: ``MixAll.CID_RMQ_SYS_PREFIX``: such groups are always created on demand
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"
#: ``SubscriptionGroupManager.init()``'s groups (every one with the defaults)
BUILT_IN_GROUPS = (
    "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER",
)


def is_sys_consumer_group(group: str) -> bool:
    """``MixAll.isSysConsumerGroup``."""
    return group.startswith(SYS_GROUP_PREFIX)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@attrs.define(slots=True, eq=False)
class SubscriptionGroupManager:
    path: str
    auto_create: bool = True
    _table: dict[str, SubscriptionGroupConfig] = attrs.field(factory=dict)
    data_version_counter: int = 0
    data_version_timestamp: int = attrs.field(factory=_now_ms)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)
    _version: int = 0
    _persisted_version: int = 0

    @classmethod
    def open(cls, config_dir: str, *, auto_create: bool = True) -> SubscriptionGroupManager:
        """The built-in groups, then what ``subscriptionGroup.json`` holds (Java's load)."""
        mgr = cls(os.path.join(config_dir, "subscriptionGroup.json"), auto_create)
        for name in BUILT_IN_GROUPS:
            mgr._table[name] = SubscriptionGroupConfig(name)
        mgr.load()
        return mgr

    def load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        if not data.strip():
            return
        try:
            wrapper = SubscriptionGroupWrapper.from_body(data)
        except BodyDecodeError as exc:
            raise ConfigLoadError(f"{self.path}: {exc}") from None
        self._table.update(wrapper.table)
        self.data_version_counter = wrapper.counter
        self.data_version_timestamp = wrapper.timestamp or self.data_version_timestamp

    # -- access -------------------------------------------------------------------

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, without creating it."""
        return self._table.get(group)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """``findSubscriptionGroupConfig``: the config, created with the defaults when
        auto-creation is on (or for a system group); None otherwise. Never touches the
        disk (the table is persisted later, see the module docstring)."""
        config = self._table.get(group)
        if config is None and (self.auto_create or is_sys_consumer_group(group)):
            with self._lock:
                config = self._table.get(group)
                if config is None:
                    config = SubscriptionGroupConfig(group)
                    self._table = {**self._table, group: config}
                    self._next_version()
            log.info("auto create a subscription group, %s", config.java_string())
        return config

    def __contains__(self, group: str) -> bool:
        return group in self._table

    def all(self) -> dict[str, SubscriptionGroupConfig]:
        return dict(self._table)

    # -- changes ------------------------------------------------------------------

    def _next_version(self) -> None:
        self.data_version_counter += 1
        self.data_version_timestamp = _now_ms()
        self._version += 1

    def update(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig | None:
        """``updateSubscriptionGroupConfig``: create or replace, then persist; the old one."""
        with self._lock:
            old = self._table.get(config.group_name)
            self._table = {**self._table, config.group_name: config}
            self._next_version()
        self.persist()
        if old is None:
            log.info("create new subscription group, %s", config.java_string())
        else:
            log.info("update subscription group config, old: %s new: %s", old.java_string(), config.java_string())
        return old

    def delete(self, group: str) -> bool:
        """``deleteSubscriptionGroupConfig``: True if it existed (then persisted)."""
        with self._lock:
            old = self._table.get(group)
            if old is None:
                return False
            self._table = {k: v for k, v in self._table.items() if k != group}
            self._next_version()
        self.persist()
        log.info("delete subscription group OK, subscription group:%s", old.java_string())
        return True

    def replace_all(self, table: dict[str, SubscriptionGroupConfig], counter: int, timestamp: int) -> None:
        """Take a master's whole table and data version (a slave's sync), then persist."""
        with self._lock:
            self._table = dict(table)
            self.data_version_counter = counter
            self.data_version_timestamp = timestamp
            self._version += 1
        self.persist()

    # -- persistence --------------------------------------------------------------

    def wrapper(self) -> SubscriptionGroupWrapper:
        return SubscriptionGroupWrapper(dict(self._table), self.data_version_counter, self.data_version_timestamp)

    @property
    def dirty(self) -> bool:
        return self._version != self._persisted_version

    def persist(self) -> None:
        """Write the table atomically (a worker thread's job: it fsyncs)."""
        with self._lock:
            version = self._version
            body = self.wrapper().to_body()
        write_atomic(self.path, body)
        self._persisted_version = version
